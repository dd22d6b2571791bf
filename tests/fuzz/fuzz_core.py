"""Fuzz the whole pipeline: random and mutated GBNF grammars and regexes go through the
frontend, the C++ core compile, and a short random walk (fill_mask, accept, rollback, fork,
forced_bytes). Only typed logitgate errors may escape; a crash or a hang is a finding.

The loop runs in a child process; the parent watches a heartbeat and records the input that
was running when the child died or stalled (tests/fuzz/regressions/core-<hash>.txt).

    python tests/fuzz/fuzz_core.py --minutes 10 [--seed 1]

Run it against the sanitizer build too (`make sanitize` builds it into build/asan/pkg) to catch
memory errors early. Python must run without `site` there (-S, the venv's packages on
PYTHONPATH after the sanitized package): the editable install's import hook would otherwise load
the regular core whatever PYTHONPATH says.

    ASAN_OPTIONS=detect_leaks=0 \
    LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
    PYTHONPATH=build/asan/pkg:$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
    .venv/bin/python -S tests/fuzz/fuzz_core.py --minutes 10
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CORPORA = HERE.parents[2] / "shared" / "corpora"
STALL_SECONDS = 20.0


def _inputs(rng: random.Random) -> tuple[str, str]:
    """One (kind, text) input: a GBNF grammar or a regex, random or mutated from the corpus."""
    import fuzz_gbnf
    import fuzz_regex

    if rng.random() < 0.5:
        seeds = [p.read_text(encoding="utf-8") for p in sorted((CORPORA / "gbnf").glob("*.gbnf"))]
        if rng.random() < 0.8:
            return "gbnf", fuzz_gbnf._mutate(rng, rng.choice(seeds), seeds)
        return "gbnf", fuzz_gbnf._soup(rng)
    roll = rng.random()
    if roll < 0.5:
        return "regex", fuzz_regex.gen_common(rng)
    if roll < 0.8:
        return "regex", fuzz_regex.mutate(rng, _regex_corpus())
    return "regex", fuzz_regex.soup(rng)


_CORPUS: list[str] = []


def _regex_corpus() -> list[str]:
    if not _CORPUS:
        import json

        with (CORPORA / "regex" / "jsonschemabench_patterns.jsonl").open(encoding="utf-8") as f:
            _CORPUS.extend(json.loads(line)["regex"] for line in f if line.strip())
    return _CORPUS


def _exercise(kind: str, text: str, compiler, vocab, rng: random.Random) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    import logitgate as lg
    from logitgate.masks import mask_to_bool

    try:
        g = compiler.compile_ebnf(text) if kind == "gbnf" else compiler.compile_regex(text)
    except (lg.GrammarError, lg.LimitExceeded):
        return
    m = g.matcher()
    bits = lg.allocate_mask(vocab)
    try:
        for _ in range(rng.randint(1, 24)):
            m.fill_mask(bits, row=0)
            allowed = np.flatnonzero(mask_to_bool(bits[0], vocab.size))
            if len(allowed) == 0:
                assert m.is_terminated(), "no token allowed but the matcher is not terminated"
                break
            tok = int(rng.choice(allowed))
            assert m.accept(tok), f"mask allowed token {tok} but accept rejected it"
            if rng.random() < 0.1:
                m.forced_bytes()
            if rng.random() < 0.1 and m.num_accepted:
                m.rollback(rng.randint(1, m.num_accepted))
            if rng.random() < 0.05:
                m = m.fork()
    except lg.LimitExceeded:
        return


def _child(seed: int, deadline: float, heartbeat, current_path: str) -> None:  # type: ignore[no-untyped-def]
    import logitgate as lg

    tokens = [bytes([i]) for i in range(256)] + [b"ab", b'{"', b'":', b"  ", b"\xc3\xa9", b"12", b"</s>"]
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[len(tokens) - 1])
    rng = random.Random(seed)
    n = 0
    while time.time() < deadline:
        compiler = lg.Compiler(vocab, cache_size=8)
        kind, text = _inputs(rng)
        with open(current_path, "w", encoding="utf-8") as f:  # read by the parent if we die
            f.write(repr((kind, text)))
        _exercise(kind, text, compiler, vocab, rng)
        n += 1
        heartbeat.value = n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    deadline = time.time() + args.minutes * 60
    seed, total, findings = args.seed, 0, 0
    while time.time() < deadline:
        heartbeat = ctx.Value("q", 0)
        current_path = str(HERE / "regressions" / f".current-{os.getpid()}")
        proc = ctx.Process(target=_child, args=(seed, deadline, heartbeat, current_path), daemon=True)
        proc.start()
        last, last_change = 0, time.time()
        while proc.is_alive():
            time.sleep(0.2)
            if heartbeat.value != last:
                last, last_change = heartbeat.value, time.time()
            elif time.time() - last_change > STALL_SECONDS:
                proc.kill()
                print(f"HANG after {STALL_SECONDS}s", file=sys.stderr)
                break
        proc.join()
        latest = Path(current_path).read_text(encoding="utf-8") if Path(current_path).exists() else ""
        Path(current_path).unlink(missing_ok=True)
        total += heartbeat.value
        if proc.exitcode != 0 or time.time() - last_change > STALL_SECONDS:
            findings += 1
            out = HERE / "regressions" / f"core-{hashlib.sha1(latest.encode()).hexdigest()[:12]}.txt"
            out.write_text(latest + "\n", encoding="utf-8")
            print(f"FINDING (exit {proc.exitcode}) saved to {out}", file=sys.stderr)
        seed += 1
    print(f"{total} inputs, {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
