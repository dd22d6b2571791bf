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
from logitgate.grammar.ir import Alt, ByteClass, CharClass, Grammar, Literal, Ref, Repeat, Seq, StringExcept, TokenSet
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


def _repeat(min: object, max: object) -> Repeat:
    """A Repeat whose fields were set past its constructor (as a pickle or a subclass can)."""
    node = Repeat(Literal(b"a"))
    object.__setattr__(node, "min", min)
    object.__setattr__(node, "max", max)
    return node


@pytest.mark.parametrize(
    ("node", "shown"),
    [
        # Python ints past int64 were an OverflowError from the serializer.
        (Repeat(Literal(b"a"), 2**63), "{2^63 or more,}"),
        (Repeat(Literal(b"a"), 0, 2**64), "{0,2^63 or more}"),
        (Repeat(Literal(b"a"), 10**30, 10**31), "{2^63 or more,2^63 or more}"),
        (Repeat(Literal(b"a"), 2**63 - 1), "{9223372036854775807,}"),
        (Repeat(Literal(b"a"), 100_001, None), "{100001,}"),
    ],
)
def test_repeat_counts_past_max_repeat_are_limits(node: Repeat, shown: str) -> None:
    compiler = lg.Compiler(lg.Vocabulary.from_tokens([b"a"]))
    for run in (lambda: serialize(Grammar({"r": node}, root="r"), DEFAULT_LIMITS),
                lambda: compiler.compile_grammar(Grammar({"r": node}, root="r"))):  # fmt: skip
        with pytest.raises(lg.LimitExceeded) as e:
            run()
        assert type(e.value) is lg.LimitExceeded
        assert (e.value.code, e.value.limit, e.value.value) == ("limit", "max_repeat", 100_000)
        assert str(e.value) == f"limit max_repeat=100000 exceeded: repetition {shown} in rule 'r'"


def test_repeat_counts_past_int32_under_a_larger_max_repeat() -> None:
    """A max_repeat set past int32 does not let a count wrap in the int32 program."""
    with pytest.raises(lg.LimitExceeded) as e:
        serialize(Grammar({"r": Repeat(Literal(b"a"), 2**32)}, root="r"), Limits(max_repeat=2**40))
    assert (e.value.limit, e.value.value) == ("max_repeat", 2**40)
    assert str(e.value).endswith("repetition {4294967296,} in rule 'r': past int32, the program's counts")


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (_repeat(-(2**64), None), "bad repetition bounds {-2^63 or less,}"),
        (_repeat(-(2**63), None), "bad repetition bounds {-9223372036854775808,}"),
        (_repeat(0, -(2**70)), "bad repetition bounds {0,-2^63 or less}"),
        (_repeat(0, -1), "bad repetition bounds {0,-1}"),  # (-1 is the program's "no maximum")
        (_repeat(5, 3), "bad repetition bounds {5,3}"),
        (_repeat(1.5, None), "repetition bounds must be ints"),
        (_repeat(0, "3"), "repetition bounds must be ints"),
    ],
)
def test_bad_repeat_fields_are_grammar_errors(node: Repeat, message: str) -> None:
    with pytest.raises(lg.GrammarError) as e:
        serialize(Grammar({"r": node}, root="r"), DEFAULT_LIMITS)
    assert (e.value.code, e.value.rule) == ("bad-repeat", "r")
    assert str(e.value) == f"{message} (rule 'r')"


def test_ir_constructors_raise_typed_errors() -> None:
    for lo, hi in ((-1, None), (-(2**64), None), (5, 3), (0, -(2**63))):
        with pytest.raises(lg.GrammarError) as e:
            Repeat(Literal(b"a"), lo, hi)
        assert e.value.code == "bad-repeat" and isinstance(e.value, ValueError)
    with pytest.raises(lg.GrammarError, match="an integer of about 6020 digits") as e:
        Repeat(Literal(b"a"), -(2**20000))  # (Python prints no int of more than 4,300 digits)
    for make in (lambda: CharClass(((0, 2**64),)), lambda: ByteClass(((0, 256),))):
        with pytest.raises(lg.GrammarError) as e:
            make()
        assert e.value.code == "bad-class"
    for ids in ([-1], []):
        with pytest.raises(lg.GrammarError) as e:
            TokenSet(ids)
        assert e.value.code == "bad-token-set"


def test_ir_nodes_are_frozen_values_without_instance_dicts() -> None:
    import dataclasses
    import pickle

    nodes = [
        Literal(b"ab"),
        CharClass(((48, 57),), negated=True),
        ByteClass(((0, 127),)),
        Seq((Literal(b"a"), Ref("x"))),
        Alt((Literal(b"a"), Literal(b"b"))),
        Repeat(Ref("x"), 1, None),
        Ref("x"),
        StringExcept(("a", "bc"), Ref("tail")),
        TokenSet((3, 1)),
    ]
    for node in nodes:
        assert not hasattr(node, "__dict__"), type(node)  # slots: one small object per node
        field = dataclasses.fields(node)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(node, field, getattr(node, field))
        twin = dataclasses.replace(node)
        assert twin == node and hash(twin) == hash(node) and twin is not node
        assert pickle.loads(pickle.dumps(node)) == node
    assert TokenSet((3, 1)).ids == (1, 3) and Repeat(Ref("x"), 1, None).max is None
    assert len({Seq((Literal(b"a"),)), Seq((Literal(b"a"),)), Seq((Literal(b"b"),))}) == 2


@pytest.mark.parametrize("token", [2**31, 2**63, 2**64])
def test_token_ids_past_int32_are_unknown_tokens(token: int) -> None:
    compiler = lg.Compiler(lg.Vocabulary.from_tokens([b"a"]))
    with pytest.raises(lg.GrammarError) as e:
        compiler.compile_grammar(Grammar({"root": TokenSet([token])}))
    assert (e.value.code, e.value.rule) == ("unknown-token", "root")
    assert "is not in the vocabulary" in str(e.value)
