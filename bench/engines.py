"""Engine adapters: one small class per engine behind the same five operations.

Each adapter is imported only inside that engine's worker process, so a missing or crashing engine cannot
affect the others. Operations (timed by the worker, not here):

- `setup(tok)`: the once-per-tokenizer build step (tokenizer info / vocabulary index); timed separately.
- `compile(kind, source)`: a cold compile; must not reuse a cache across calls. Raises `Unsupported` when the
  engine cannot take this kind of grammar at all and `CompileError` when it rejects this particular one.
- `matcher(compiled)`, `fill(m)` (write the next-token mask into `self.mask`), `allowed(tid)`, `accept(m, tid)`.

`kind` is "gbnf", "regex" or "json_schema"; `source` is text (the schema as a JSON string).
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import numpy as np


class Unsupported(Exception):
    """The engine has no way to express this kind of grammar (recorded as "unsupported")."""


class CompileError(Exception):
    """The engine rejected this grammar (recorded as "compile_error")."""


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


class Engine:
    """Base adapter; `mask` is an int32 [1, words] array (or tensor) that `fill` writes."""

    name = "base"
    mask: Any
    eos_ids: list[int]

    def version(self) -> str:
        raise NotImplementedError

    def setup(self, tok: Any) -> None:
        raise NotImplementedError

    def compile(self, kind: str, source: str) -> Any:
        raise NotImplementedError

    def matcher(self, compiled: Any) -> Any:
        raise NotImplementedError

    def fill(self, m: Any) -> None:
        raise NotImplementedError

    def allowed(self, tid: int) -> bool:
        word = int(self._words[tid >> 5])
        return bool((word >> (tid & 31)) & 1)

    def accept(self, m: Any, tid: int) -> bool:
        raise NotImplementedError

    _words: Any


class LogitgateEngine(Engine):
    name = "logitgate"

    def version(self) -> str:
        import logitgate

        return str(getattr(logitgate, "__version__", _version("logitgate")))

    def setup(self, tok: Any) -> None:
        import logitgate as lg

        # The frontends load on a process's first compile of their kind: a one-time cost, like
        # the peers' imports above, so not a case's (the first case paid 15-30 ms of it).
        import logitgate.frontends.gbnf
        import logitgate.frontends.json_schema
        import logitgate.frontends.regex

        self.lg = lg
        self.vocab = lg.Vocabulary.from_huggingface(tok)
        self.mask = lg.allocate_mask(self.vocab, batch=1)
        self._words = self.mask[0]
        eos = tok.eos_token_id
        self.eos_ids = [eos] if eos is not None else []

    def compile(self, kind: str, source: str) -> Any:
        compiler = self.lg.Compiler(self.vocab)  # fresh compiler per case: its content-hash cache starts empty
        if kind == "json_schema":
            fn = getattr(compiler, "compile_json_schema", None)
            if fn is None:
                raise Unsupported("logitgate has no compile_json_schema yet")
        elif kind == "gbnf":
            fn = compiler.compile_ebnf
        elif kind == "regex":
            fn = compiler.compile_regex
        else:
            raise Unsupported(kind)
        try:
            return fn(source)
        except Exception as exc:  # typed logitgate errors and NotImplementedError alike
            if isinstance(exc, NotImplementedError):
                raise Unsupported(str(exc)) from exc
            raise CompileError(f"{type(exc).__name__}: {exc}") from exc

    def matcher(self, compiled: Any) -> Any:
        return compiled.matcher()

    def fill(self, m: Any) -> None:
        m.fill_mask(self.mask, row=0)

    def accept(self, m: Any, tid: int) -> bool:
        return bool(m.accept(tid))


class XGrammarEngine(Engine):
    name = "xgrammar"

    def version(self) -> str:
        return _version("xgrammar")

    def setup(self, tok: Any) -> None:
        import xgrammar as xgr

        self.xgr = xgr
        self.info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
        self.mask = xgr.allocate_token_bitmask(1, self.info.vocab_size)
        self._words = self.mask[0].numpy() if hasattr(self.mask, "numpy") else self.mask[0]
        self.eos_ids = list(self.info.stop_token_ids)

    def compile(self, kind: str, source: str) -> Any:
        # A new compiler with its cache off: every compile is cold.
        compiler = self.xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        try:
            if kind == "gbnf":
                return compiler.compile_grammar(source, root_rule_name="root")
            if kind == "regex":
                return compiler.compile_regex(source)
            if kind == "json_schema":
                # xgrammar's defaults (any_whitespace=True, strict_mode=True: no undeclared properties), as its
                # users run it; strict_mode=False is ~10-100x slower to compile on some schemas.
                return compiler.compile_json_schema(source)
        except Exception as exc:
            raise CompileError(f"{type(exc).__name__}: {exc}") from exc
        raise Unsupported(kind)

    def matcher(self, compiled: Any) -> Any:
        return self.xgr.GrammarMatcher(compiled)

    def fill(self, m: Any) -> None:
        m.fill_next_token_bitmask(self.mask, 0)

    def accept(self, m: Any, tid: int) -> bool:
        return bool(m.accept_token(tid))


class LLGuidanceEngine(Engine):
    """llguidance is lazy: most grammar work happens in the first masks, so compare first-mask times too."""

    name = "llguidance"

    def version(self) -> str:
        return _version("llguidance")

    def setup(self, tok: Any) -> None:
        import llguidance
        import llguidance.hf
        import llguidance.numpy as lnp

        self.llg = llguidance
        self.lnp = lnp
        self.tokenizer = llguidance.hf.from_tokenizer(tok, n_vocab=len(tok))
        self.mask = lnp.allocate_token_bitmask(1, self.tokenizer.vocab_size)
        self._words = self.mask[0]
        self.eos_ids = [self.tokenizer.eos_token]

    def compile(self, kind: str, source: str) -> Any:
        fmt = {"gbnf": "gbnf", "regex": "regex", "json_schema": "json_schema"}.get(kind)
        if fmt is None:
            raise Unsupported(kind)
        try:
            grammar = self.llg.grammar_from(fmt, source)  # type: ignore[arg-type]
        except Exception as exc:
            raise CompileError(f"{type(exc).__name__}: {exc}") from exc
        m = self.llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise CompileError(m.get_error())
        return m

    def matcher(self, compiled: Any) -> Any:
        return compiled.deep_copy()  # a pristine copy per instance; shares the lazily built automata

    def fill(self, m: Any) -> None:
        self.lnp.fill_next_token_bitmask(m, self.mask, 0)

    def accept(self, m: Any, tid: int) -> bool:
        return bool(m.consume_token(tid))


class OutlinesEngine(Engine):
    """outlines-core: regex -> DFA -> full token index; CFGs are out of its reach (recorded unsupported)."""

    name = "outlines"

    def version(self) -> str:
        return _version("outlines-core")

    def setup(self, tok: Any) -> None:
        import outlines_core as oc

        from common import token_bytes

        self.oc = oc
        table, _special = token_bytes(tok)
        eos = tok.eos_token_id
        by_bytes: dict[bytes, list[int]] = {}
        for tid, data in table.items():
            if tid != eos and data:
                by_bytes.setdefault(data, []).append(tid)
        self.vocab = oc.Vocabulary(eos, by_bytes)
        self.mask = np.zeros((1, (len(tok) + 31) // 32), dtype=np.int32)
        self._words = self.mask[0]
        self.eos_ids = [eos]

    def compile(self, kind: str, source: str) -> Any:
        if kind == "gbnf":
            raise Unsupported("outlines-core has no CFG support")
        try:
            if kind == "json_schema":
                regex = self.oc.json_schema.build_regex_from_schema(source)
            elif kind == "regex":
                regex = source
            else:
                raise Unsupported(kind)
            return self.oc.Index(regex, self.vocab)
        except Unsupported:
            raise
        except Exception as exc:
            raise CompileError(f"{type(exc).__name__}: {exc}") from exc

    def matcher(self, compiled: Any) -> Any:
        return self.oc.Guide(compiled)

    def fill(self, m: Any) -> None:
        m.write_mask_into(self.mask.ctypes.data, self.mask.size, 4)

    def accept(self, m: Any, tid: int) -> bool:
        try:
            m.advance(tid, return_tokens=False)
        except Exception:
            return False
        return True


class FaultEngine(Engine):
    """Test double for the harness itself: hangs, crashes or fails on request (case source "hang"/"crash"/"bad")."""

    name = "_fault"

    def version(self) -> str:
        return "0"

    def setup(self, tok: Any) -> None:
        self.mask = np.full((1, (len(tok) + 31) // 32), -1, dtype=np.int32)
        self._words = self.mask[0]
        self.eos_ids = [0]

    def compile(self, kind: str, source: str) -> Any:
        import os
        import time

        if source == "hang":
            time.sleep(3600)
        if source == "crash":
            os._exit(3)
        if source == "bad":
            raise CompileError("bad grammar")
        return source

    def matcher(self, compiled: Any) -> Any:
        return compiled

    def fill(self, m: Any) -> None:
        pass

    def accept(self, m: Any, tid: int) -> bool:
        return True


ENGINES: dict[str, type[Engine]] = {
    "_fault": FaultEngine,
    "logitgate": LogitgateEngine,
    "xgrammar": XGrammarEngine,
    "llguidance": LLGuidanceEngine,
    "outlines": OutlinesEngine,
}
