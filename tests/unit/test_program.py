"""The core's IR serializer (cpp/bindings/ir_program.cc) against the Python reference of the
program format (program_reference.py), on whole corpora; and its errors."""

from __future__ import annotations

import json
from array import array
from pathlib import Path

import pytest
from tests.unit.program_reference import serialize_reference

import logitgate as lg
from logitgate.frontends.gbnf import parse_gbnf
from logitgate.frontends.json_schema import schema_to_grammar
from logitgate.frontends.regex import parse_regex
from logitgate.grammar.ir import Grammar, Literal, Ref, Repeat, Seq, StringExcept
from logitgate.grammar.program import serialize
from logitgate.limits import DEFAULT_LIMITS, Limits

CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"


def _same(grammar: Grammar) -> None:
    program, names = serialize(grammar, DEFAULT_LIMITS)
    expected, expected_names = serialize_reference(grammar, DEFAULT_LIMITS)
    assert names == expected_names
    assert array("i", program).tolist() == expected.tolist()


@pytest.mark.parametrize("path", sorted((CORPORA / "gbnf").rglob("*.gbnf")), ids=lambda p: p.name)
def test_gbnf_corpus(path: Path) -> None:
    _same(parse_gbnf(path.read_text(encoding="utf-8")))


def test_regexes_and_schemas() -> None:
    lines = (CORPORA / "regex" / "jsonschemabench_patterns.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()][::40]
    for row in rows:
        try:
            _same(parse_regex(row["regex"]))
        except lg.GrammarError:
            continue
    schemas = [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": -3}, "é😀": {"enum": ["x", 1]}}},
        {"type": "string", "not": {"enum": ["a/b", "é", ""]}},
        {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,4}$"}, "maxItems": 3},
        {"anyOf": [{"type": "number", "multipleOf": 3}, {"type": "boolean"}, {"const": {"k": [1, None]}}]},
    ]
    for schema in schemas:
        _same(schema_to_grammar(schema, limits=DEFAULT_LIMITS)[0])


def test_string_except_words_as_code_points() -> None:
    g = Grammar({"root": StringExcept(("ab", "é😀", ""), Ref("t")), "t": Repeat(Literal(b"x"))})
    program, _ = serialize(g, DEFAULT_LIMITS)
    assert array("i", program).tolist()[:14] == [2, 0, 8, 3, 2, 97, 98, 2, 0xE9, 0x1F600, 0, 7, 1, 6]


def test_errors() -> None:
    with pytest.raises(lg.GrammarError) as e:
        serialize(Grammar({"root": Seq((Literal(b"a"), Ref("nope")))}), DEFAULT_LIMITS)
    assert e.value.code == "undefined-rule" and e.value.rule == "root" and "nope" in str(e.value)
    deep: object = Literal(b"a")
    for _ in range(30):
        deep = Seq((deep,))  # type: ignore[arg-type]
    with pytest.raises(lg.LimitExceeded) as limit:
        serialize(Grammar({"root": deep}), Limits(max_nesting=10))  # type: ignore[dict-item]
    assert limit.value.limit == "max_nesting"
    with pytest.raises(lg.LimitExceeded) as limit:
        serialize(Grammar({"root": Repeat(Literal(b"a"), 0, 500)}), Limits(max_repeat=100))
    assert limit.value.limit == "max_repeat"
    with pytest.raises(TypeError, match="not an IR node"):
        serialize(Grammar({"root": Seq(("a",))}), DEFAULT_LIMITS)  # type: ignore[arg-type]
    with pytest.raises(lg.GrammarError) as e:
        serialize(Grammar({"a": Literal(b"a")}), DEFAULT_LIMITS)
    assert e.value.code == "missing-root"
