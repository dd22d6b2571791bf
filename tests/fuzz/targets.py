"""The atheris fuzz targets: what one input does to logitgate, and which outcomes are acceptable.

Each target takes the raw bytes libFuzzer hands it. The only acceptable failure is a typed
logitgate error (:class:`logitgate.LogitgateError` and its subclasses); any other exception, a
crash or abort of the process, a run past the per-input time limit, or (``masks``) a mask bit
that disagrees with the reference recognizer is a finding. tests/fuzz/run.py drives a target
under atheris; tests/fuzz/test_fuzz.py replays the seeds, a few hundred mutations and every
regression file through the same functions.

Compiles pass ``timeout=COMPILE_TIMEOUT``, as a server would: a compile that honours it raises
the typed ``CompileTimeout``; one that overruns it far enough reaches libFuzzer's ``-timeout``.

Targets:

- ``json_schema``: the first byte picks the form. Even: the rest is JSON Schema text (the
  seeds: JSON-Schema-Test-Suite and JSONSchemaBench schemas). Odd: the rest drives a
  :class:`atheris.FuzzedDataProvider` that builds a schema dict from a keyword grammar and
  picks compile options.
- ``regex``, ``gbnf``, ``lark``, ``structural_tag``: the bytes, decoded as UTF-8 with
  replacement, are the source text; a surrogate's UTF-8-style bytes (``ED A0 80``) decode to that
  lone surrogate, which a str may hold (JSON's ``"\\ud800"`` gives one) and no UTF-8 text does.

A typed error's message must be printable (encodable as UTF-8) too.
- ``masks``: the bytes build a small regex or GBNF grammar over a tiny alphabet, then drive
  accept / rejected accept / rollback / fork / EOS through a matcher over a 24-token vocabulary;
  at every step each token's mask bit is compared with :mod:`tests.reference.recognizer`.

Every compiled grammar (all targets) is then walked a few tokens, picked by the input's bytes,
so the core's matcher runs on whatever compiled.
"""

from __future__ import annotations

import codecs
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import atheris
import numpy as np

import logitgate as lg
from logitgate.errors import LogitgateError

__all__ = ["COMPILE_TIMEOUT", "TARGETS", "FuzzContext", "MaskDisagreement", "Target"]

COMPILE_TIMEOUT = 2.0  # seconds; run.py's per-input limit (-timeout) is larger
WALK_STEPS = 6
# The reference recognizer gives up on a state of more parser configurations (an ambiguous grammar
# whose states grow with every byte): that input is counted as reference-skip, not judged.
REFERENCE_MAX_CONFIGS = 2_000

# A small vocabulary (fast masks) with what exercises the core: every single byte a test grammar
# uses, multi-byte tokens across boundaries, UTF-8 split over tokens, a lone continuation byte,
# NUL, 0xFF, and EOS. Same shape for every target.
MASK_TOKENS: list[bytes] = [
    b"a", b"b", b"c", b"0", b"1", b"9", b"-", b" ", b"z",
    b"\xc3", b"\xa9", b"\xc3\xa9", b"\xe2\x82\xac", b"\x00", b"\xff",
    b"ab", b"ba", b"aa", b"abc", b"00", b"a1", b"b-", b"c\xc3",
]  # fmt: skip
EOS_TEXT = b"<eos>"


class MaskDisagreement(AssertionError):
    """The core's mask, or accept's verdict, differs from the reference recognizer's."""


@dataclass
class FuzzContext:
    """Per-process state shared by all inputs: vocabularies, compilers, outcome counts."""

    vocab: Any  # 256 single bytes, a few multi-byte tokens, specials, EOS
    compiler: Any
    mask_vocab: Any  # MASK_TOKENS + EOS
    mask_compiler: Any
    outcomes: Counter[str] = field(default_factory=Counter)

    @classmethod
    def create(cls) -> FuzzContext:
        tokens = [bytes([i]) for i in range(256)]
        tokens += [b'{"', b'":', b'",', b"  ", b"\xc3\xa9", b"12", b"true", b"null", b"<call>", b"<think>", EOS_TEXT]
        vocab = lg.Vocabulary.from_tokens(
            tokens, eos_ids=[len(tokens) - 1], special_ids=[len(tokens) - 3, len(tokens) - 2]
        )
        mask_vocab = lg.Vocabulary.from_tokens([*MASK_TOKENS, EOS_TEXT], eos_ids=[len(MASK_TOKENS)])
        ctx = cls(vocab, lg.Compiler(vocab, cache_size=64), mask_vocab, lg.Compiler(mask_vocab, cache_size=64))
        ctx._warm_up()
        return ctx

    def _warm_up(self) -> None:
        """Builds the Unicode tables and caches each process builds once (seconds under
        instrumentation), so that the first input that needs them is not reported as a hang."""
        c = self.compiler
        c.compile_regex(r"[\p{L}\p{N}]\w\s.\d")
        c.compile_lark('start: "ok"i /a.c/s "-" /\\w/ "-" /\\d/ /\\s/ /(?i)x/')
        c.compile_json_schema({"type": "string", "pattern": "^\\p{Letter}+$"})
        for fmt in _FORMATS[:-1]:
            c.compile_json_schema({"type": "string", "format": fmt})


@dataclass(frozen=True)
class Target:
    name: str
    run: Callable[[FuzzContext, bytes], None]
    seeds: Callable[[], list[bytes]]  # defined in tests/fuzz/seeds.py


def _typed(ctx: FuzzContext, fn: Callable[[], Any]) -> Any:
    """``fn()``, or None after a typed logitgate error (counted by class and code)."""
    try:
        return fn()
    except LogitgateError as e:
        str(e).encode("utf-8")  # (a message quoting a lone surrogate raw cannot be printed: a finding)
        ctx.outcomes[f"{type(e).__name__}:{getattr(e, 'code', '')}"] += 1
        return None


def _walk(ctx: FuzzContext, compiled: Any, data: bytes) -> None:
    """A few steps through the compiled grammar, tokens picked by ``data``; the mask must admit
    what accept accepts."""
    vocab = compiled.vocab
    m = compiled.matcher()
    bits = lg.allocate_mask(vocab)
    pick = zlib.crc32(data)
    for step in range(WALK_STEPS):
        m.fill_mask(bits, row=0)
        allowed = np.flatnonzero(lg.masks.mask_to_bool(bits[0], vocab.size))
        if len(allowed) == 0:
            if not m.is_terminated():
                raise AssertionError("no token allowed but the matcher is not terminated")
            return
        tok = int(allowed[(pick >> step) % len(allowed)])
        if not m.accept(tok):
            raise AssertionError(f"mask allowed token {tok} but accept rejected it")
        if step == 2:
            m.forced_bytes()
        if step == 3 and m.num_accepted:
            m.rollback(1)
        if step == 4:
            m = m.fork()
    ctx.outcomes["walked"] += 1


def _compile_and_walk(ctx: FuzzContext, data: bytes, compile_fn: Callable[[], Any]) -> None:
    compiled = _typed(ctx, compile_fn)
    if compiled is None:
        return
    ctx.outcomes["compiled"] += 1
    _typed(ctx, lambda: _walk(ctx, compiled, data))


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="logitgate-fuzz-text")


def _surrogate_or_replace(e: UnicodeError) -> tuple[str, int]:
    """A decoding error: a surrogate's UTF-8-style bytes (``ED A0..BF 80..BF``) become that lone
    surrogate; any other bad byte U+FFFD, as ``errors="replace"`` does."""
    assert isinstance(e, UnicodeDecodeError)
    b = e.object[e.start : e.start + 3]
    if len(b) == 3 and b[0] == 0xED and 0xA0 <= b[1] <= 0xBF and 0x80 <= b[2] <= 0xBF:
        return bytes(b).decode("utf-8", "surrogatepass"), e.start + 3
    return "\ufffd", e.end


codecs.register_error("logitgate-fuzz-text", _surrogate_or_replace)


# -- json_schema --------------------------------------------------------------------------------------

_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
_FORMATS = ["date", "date-time", "time", "email", "uri", "uuid", "ipv4", "ipv6", "hostname", "duration", "bogus"]
_PATTERNS = ["^a+$", "[0-9]{2,4}", "^(ab|c)*$", "x", "^$", "\\d+", "[", "^\\p{L}$", ".*"]
_NAMES = ["a", "b", "c", "id", "", "é", "a b", '"', "\\"]
_KEYWORDS = [
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "if", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "properties", "required", "additionalProperties", "patternProperties", "propertyNames",
    "minProperties", "maxProperties", "items", "prefixItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "dependentRequired", "unevaluatedProperties", "default",
]  # fmt: skip


def _number(fdp: atheris.FuzzedDataProvider) -> Any:
    kind = fdp.ConsumeIntInRange(0, 5)
    if kind <= 2:
        return fdp.ConsumeIntInRange(-3, 12)
    if kind == 3:
        return fdp.ConsumeIntInRange(-3, 40) / 4
    if kind == 4:
        return fdp.ConsumeInt(8)
    return fdp.ConsumeRegularFloat()


def _value(fdp: atheris.FuzzedDataProvider, depth: int) -> Any:
    kind = fdp.ConsumeIntInRange(0, 7)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind in (2, 3):
        return _number(fdp)
    if kind in (4, 5) or depth > 2:
        return fdp.PickValueInList(_NAMES) if fdp.ConsumeBool() else fdp.ConsumeUnicodeNoSurrogates(4)
    if kind == 6:
        return [_value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    return {fdp.PickValueInList(_NAMES): _value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 2))}


def _schema(fdp: atheris.FuzzedDataProvider, depth: int) -> Any:
    if fdp.remaining_bytes() == 0:
        return {}
    if depth > 4 or fdp.ConsumeIntInRange(0, 15) == 0:
        return fdp.ConsumeBool()
    out: dict[str, Any] = {}
    for _ in range(fdp.ConsumeIntInRange(1, 4)):
        key = fdp.PickValueInList(_KEYWORDS)
        sub = lambda: _schema(fdp, depth + 1)  # noqa: E731
        small = lambda: fdp.ConsumeIntInRange(0, 4) if fdp.ConsumeIntInRange(0, 7) else _number(fdp)  # noqa: E731
        if key == "type":
            n = fdp.ConsumeIntInRange(0, 2)
            out[key] = fdp.PickValueInList(_TYPES) if n == 0 else [fdp.PickValueInList(_TYPES) for _ in range(n)]
        elif key in ("enum",):
            out[key] = [_value(fdp, 1) for _ in range(fdp.ConsumeIntInRange(0, 4))]
        elif key in ("const", "default"):
            out[key] = _value(fdp, 0)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            out[key] = [sub() for _ in range(fdp.ConsumeIntInRange(0 if fdp.ConsumeIntInRange(0, 9) == 0 else 1, 3))]
        elif key in ("not", "items", "contains", "propertyNames", "unevaluatedProperties"):
            out[key] = sub()
        elif key == "additionalProperties":
            out[key] = fdp.ConsumeBool() if fdp.ConsumeBool() else sub()
        elif key == "if":
            out["if"] = sub()
            for branch in ("then", "else"):
                if fdp.ConsumeBool():
                    out[branch] = sub()
        elif key == "$ref":
            defs = out.setdefault("$defs", {})
            name = fdp.PickValueInList(["x", "y"])
            if fdp.ConsumeBool():
                defs[name] = sub()
            out[key] = fdp.PickValueInList([f"#/$defs/{name}", "#", "#/properties/a", "#/$defs/zz", "other.json#"])
        elif key == "pattern":
            out[key] = fdp.PickValueInList(_PATTERNS) if fdp.ConsumeBool() else fdp.ConsumeUnicodeNoSurrogates(6)
        elif key == "format":
            out[key] = fdp.PickValueInList(_FORMATS)
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"):
            out[key] = _number(fdp)
        elif key in ("properties", "patternProperties"):
            names = _PATTERNS if key == "patternProperties" else _NAMES
            out[key] = {fdp.PickValueInList(names): sub() for _ in range(fdp.ConsumeIntInRange(0, 3))}
        elif key == "required":
            out[key] = [fdp.PickValueInList(_NAMES) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        elif key == "dependentRequired":
            out[key] = {fdp.PickValueInList(_NAMES): [fdp.PickValueInList(_NAMES)]}
        elif key == "uniqueItems":
            out[key] = fdp.ConsumeBool()
        else:  # counts: minLength, maxItems, ...
            out[key] = small()
    return out


_OPTIONS: list[dict[str, Any]] = [
    {},
    {"whitespace": "compact"},
    {"strict": True},
    {"property_order": "any"},
    {"lenient": True},
    {"max_whitespace": 2},
    {"oneof": "anyof"},
]


def _json_schema(ctx: FuzzContext, data: bytes) -> None:
    if not data:
        return
    c = ctx.compiler
    if data[0] % 2 == 0:
        text = _text(data[1:])
        _compile_and_walk(ctx, data, lambda: c.compile_json_schema(text, timeout=COMPILE_TIMEOUT))
        return
    fdp = atheris.FuzzedDataProvider(data[1:])
    options = fdp.PickValueInList(_OPTIONS)
    schema = _schema(fdp, 0)
    _compile_and_walk(ctx, data, lambda: c.compile_json_schema(schema, timeout=COMPILE_TIMEOUT, **options))


# -- text frontends -----------------------------------------------------------------------------------


def _regex(ctx: FuzzContext, data: bytes) -> None:
    text = _text(data)
    _compile_and_walk(ctx, data, lambda: ctx.compiler.compile_regex(text, timeout=COMPILE_TIMEOUT))


def _gbnf(ctx: FuzzContext, data: bytes) -> None:
    text = _text(data)
    _compile_and_walk(ctx, data, lambda: ctx.compiler.compile_ebnf(text, timeout=COMPILE_TIMEOUT))


def _lark(ctx: FuzzContext, data: bytes) -> None:
    text = _text(data)
    _compile_and_walk(ctx, data, lambda: ctx.compiler.compile_lark(text, timeout=COMPILE_TIMEOUT))


def _structural_tag(ctx: FuzzContext, data: bytes) -> None:
    text = _text(data)
    _compile_and_walk(ctx, data, lambda: ctx.compiler.compile_structural_tag(text, timeout=COMPILE_TIMEOUT))


# -- masks: the core against the reference recognizer --------------------------------------------------

_ATOMS = ["a", "b", "c", "0", "1", "-", " ", "é", "€", "z", "ab"]
_REGEX_ATOMS = [*_ATOMS, "[ab]", "[^a]", "[0-9]", "[a-c]", ".", "\\d", "\\w", "[é-€]", "[^\\x00-\\x7f]", "\\x00"]
_GBNF_ATOMS = ['"a"', '"b"', '"ab"', '"0"', '"é"', '"€"', '"\\x00"', "[ab]", "[^a]", "[0-9]", "[a-c]", "."]
_QUANTS = ["*", "+", "?", "{2}", "{0,2}", "{1,}", "{1,3}", "{0}"]


def _gen_regex(fdp: atheris.FuzzedDataProvider, depth: int) -> str:
    branches = []
    for _ in range(fdp.ConsumeIntInRange(1, 3) if fdp.ConsumeIntInRange(0, 3) == 0 else 1):
        seq = []
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            if depth < 3 and fdp.ConsumeIntInRange(0, 4) == 0:
                atom = "(" + _gen_regex(fdp, depth + 1) + ")"
            else:
                atom = fdp.PickValueInList(_REGEX_ATOMS)
            if fdp.ConsumeIntInRange(0, 2) == 0:
                atom += fdp.PickValueInList(_QUANTS)
            seq.append(atom)
        branches.append("".join(seq))
    return "|".join(branches)


def _gen_gbnf_alt(fdp: atheris.FuzzedDataProvider, n_rules: int, depth: int) -> str:
    branches = []
    for _ in range(fdp.ConsumeIntInRange(1, 3)):
        seq = []
        for _ in range(fdp.ConsumeIntInRange(0, 4)):
            roll = fdp.ConsumeIntInRange(0, 5)
            if roll == 0 and depth < 3:
                atom = "(" + _gen_gbnf_alt(fdp, n_rules, depth + 1) + ")"
            elif roll == 1:
                atom = f"r{fdp.ConsumeIntInRange(0, n_rules - 1)}"
            else:
                atom = fdp.PickValueInList(_GBNF_ATOMS)
            if fdp.ConsumeIntInRange(0, 3) == 0:
                atom += fdp.PickValueInList(_QUANTS)
            seq.append(atom)
        branches.append(" ".join(seq) if seq else '""')
    return " | ".join(branches)


def _gen_gbnf(fdp: atheris.FuzzedDataProvider) -> str:
    n_rules = fdp.ConsumeIntInRange(1, 3)
    lines = [f"r{i} ::= {_gen_gbnf_alt(fdp, n_rules, 0)}" for i in range(n_rules)]
    return "\n".join(lines) + "\nroot ::= r0\n"


def _masks(ctx: FuzzContext, data: bytes) -> None:
    from tests.reference.recognizer import LeftRecursionError, Reference

    fdp = atheris.FuzzedDataProvider(data)
    use_gbnf = fdp.ConsumeBool()
    source = _gen_gbnf(fdp) if use_gbnf else _gen_regex(fdp, 0)
    c = ctx.mask_compiler
    compiled = _typed(
        ctx,
        lambda: (
            c.compile_ebnf(source, timeout=COMPILE_TIMEOUT)
            if use_gbnf
            else c.compile_regex(source, timeout=COMPILE_TIMEOUT)
        ),
    )
    if compiled is None:
        return
    try:
        ref = Reference(compiled.grammar, max_configs=REFERENCE_MAX_CONFIGS)
    except (LeftRecursionError, RuntimeError) as e:  # outside what the oracle can judge
        ctx.outcomes[f"reference-skip:{type(e).__name__}"] += 1
        return
    try:
        _mask_walk(ctx, compiled, ref, fdp, source)
    except RuntimeError as e:
        if "reference state too large" not in str(e):
            raise
        ctx.outcomes["reference-skip:large"] += 1
    except lg.LimitExceeded as e:
        # A runtime limit reached by the matcher (`max_parse_heads` where the grammar is this
        # ambiguous, docs/limits.md): its typed error, counted as the other targets' walks count it.
        str(e).encode("utf-8")
        ctx.outcomes[f"LimitExceeded:{e.limit}"] += 1


def _mask_walk(ctx: FuzzContext, compiled: Any, ref: Any, fdp: atheris.FuzzedDataProvider, source: str) -> None:
    vocab = ctx.mask_vocab
    n = vocab.size
    eos = len(MASK_TOKENS)
    bits = lg.allocate_mask(vocab)
    m = compiled.matcher()
    # The reference's state after each accepted token (index 0: the start), for rollback.
    states = [ref.start()]
    text = b""
    texts = [text]
    ctx.outcomes["mask-grammars"] += 1
    for _ in range(fdp.ConsumeIntInRange(1, 16)):
        state = states[-1]
        m.fill_mask(bits, row=0)
        core = lg.masks.mask_to_bool(bits[0], n)
        want = np.zeros(n, dtype=bool)
        for tid, tb in enumerate(MASK_TOKENS):
            want[tid] = ref.advance(state, tb) is not None
        want[eos] = ref.is_complete(state)
        if not np.array_equal(core, want):
            bad = [[*MASK_TOKENS, EOS_TEXT][i] for i in np.flatnonzero(core != want)]
            raise MaskDisagreement(
                f"{source!r} after {text!r}: core {core.astype(int)} reference {want.astype(int)}: {bad}"
            )
        ctx.outcomes["mask-checks"] += 1
        op = fdp.ConsumeIntInRange(0, 9)
        if op <= 5:  # accept an allowed token (EOS ends the walk)
            allowed = np.flatnonzero(core)
            if len(allowed) == 0:
                return
            tid = int(allowed[fdp.ConsumeIntInRange(0, len(allowed) - 1)])
            if not m.accept(tid):
                raise MaskDisagreement(f"{source!r} after {text!r}: mask allows {tid} but accept rejects it")
            if tid == eos:
                if not m.is_terminated():
                    raise MaskDisagreement(f"{source!r} after {text!r}: EOS accepted but not terminated")
                return
            text += MASK_TOKENS[tid]
            states.append(ref.advance(state, MASK_TOKENS[tid]))
            texts.append(text)
        elif op == 6:  # a denied token must be rejected and change nothing
            denied = np.flatnonzero(~core)
            if len(denied):
                tid = int(denied[fdp.ConsumeIntInRange(0, len(denied) - 1)])
                if m.accept(tid):
                    raise MaskDisagreement(f"{source!r} after {text!r}: mask denies {tid} but accept takes it")
        elif op == 7 and m.num_accepted:
            k = fdp.ConsumeIntInRange(1, m.num_accepted)
            m.rollback(k)
            del states[-k:]
            del texts[-k:]
            text = texts[-1]
        elif op == 8:
            m = m.fork()
        else:
            forced = m.forced_bytes()
            if forced and ref.advance(state, forced) is None:
                raise MaskDisagreement(f"{source!r} after {text!r}: forced bytes {forced!r} leave the language")


TARGETS: dict[str, Target] = {}


def _register(name: str, run: Callable[[FuzzContext, bytes], None]) -> None:
    from tests.fuzz import seeds

    TARGETS[name] = Target(name, run, getattr(seeds, name))


for _name, _fn in [
    ("json_schema", _json_schema),
    ("regex", _regex),
    ("gbnf", _gbnf),
    ("lark", _lark),
    ("structural_tag", _structural_tag),
    ("masks", _masks),
]:
    _register(_name, _fn)
