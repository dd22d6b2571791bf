"""Lone surrogates: a Python str may hold one (JSON's ``"\\ud800"`` decodes to one), no UTF-8
text does. Every entry that turns text into grammar bytes refuses one with its typed error,
naming where; the JSON Schema frontend, whose values are JSON, spells one as its escape. Error
messages quoting such input stay printable (the surrogate written as its escape)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import logitgate as lg
from logitgate.errors import GrammarError, _printable
from logitgate.reasoning import Reasoning

S = "\ud800"
VOCAB = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])
COMPILER = lg.Compiler(VOCAB)


def _tag(fmt: dict[str, Any]) -> Callable[[], Any]:
    return lambda: COMPILER.compile_structural_tag({"type": "structural_tag", "format": fmt})


def _tools(name: str, params: dict[str, Any]) -> Callable[[], Any]:
    tools = [{"type": "function", "function": {"name": name, "parameters": params}}]
    return lambda: COMPILER.compile_structural_tag(lg.tool_call_structure("qwen3", tools))


# (call, error class, code, where: (line, column) for text, the path for a structural tag)
CASES: dict[str, tuple[Callable[[], Any], type[lg.LogitgateError], str, Any]] = {
    "choice": (lambda: COMPILER.compile_choice(["b", "a" + S]), GrammarError, "choice-surrogate", None),
    "choice, a pair as two code points": (
        lambda: COMPILER.compile_choice(["\ud83d\ude00"]),
        GrammarError,
        "choice-surrogate",
        None,
    ),
    "regex": (lambda: COMPILER.compile_regex("a" + S + "+"), GrammarError, "regex-unsupported", (1, 2)),
    "regex escape": (lambda: COMPILER.compile_regex(r"a\ud800"), GrammarError, "regex-unsupported", (1, 2)),
    "gbnf literal": (lambda: COMPILER.compile_ebnf(f'root ::= "{S}"'), GrammarError, "gbnf-bad-codepoint", (1, 11)),
    "gbnf token": (lambda: COMPILER.compile_ebnf(f"root ::= <{S}>"), GrammarError, "gbnf-bad-codepoint", (1, 11)),
    "gbnf rule name": (
        lambda: COMPILER.compile_ebnf(f'root ::= "a"\nx{S} ::= "b"'),
        GrammarError,
        "gbnf-bad-codepoint",
        (2, 2),
    ),
    "gbnf escape": (lambda: COMPILER.compile_ebnf(r'root ::= "\ud800"'), GrammarError, "gbnf-bad-codepoint", (1, 11)),
    "lark string": (lambda: COMPILER.compile_lark(f'start: "{S}"'), GrammarError, "lark-syntax", (1, 9)),
    "lark token": (lambda: COMPILER.compile_lark(f"start: <{S}>"), GrammarError, "lark-syntax", (1, 9)),
    "lark regex": (lambda: COMPILER.compile_lark(f"start: /{S}/"), GrammarError, "lark-syntax", (1, 9)),
    "lark string escape": (lambda: COMPILER.compile_lark(r'start: "\ud800"'), GrammarError, "lark-syntax", (1, 15)),
    "structural tag const_string": (
        _tag({"type": "const_string", "value": S}),
        lg.StructuralTagError,
        "structural-tag",
        "$.format.value",
    ),
    "structural tag as JSON text": (
        lambda: COMPILER.compile_structural_tag('{"format": {"type": "const_string", "value": "\\ud800"}}'),
        lg.StructuralTagError,
        "structural-tag",
        "$.format.value",
    ),
    "structural tag end": (
        _tag({"type": "tag", "begin": "<a>", "content": {"type": "any_text"}, "end": ["</a>", S]}),
        lg.StructuralTagError,
        "structural-tag",
        "$.format.end[1]",
    ),
    "structural tag token": (
        _tag({"type": "token", "token": S}),
        lg.StructuralTagError,
        "structural-tag",
        "$.format.token",
    ),
    "structural tag schema key": (
        _tag({"type": "json_schema", "json_schema": {"properties": {S: {}}}, "style": "qwen_xml"}),
        lg.StructuralTagError,
        "structural-tag",
        f"$.format.json_schema.properties.{S}",
    ),
    "tool name": (_tools("f" + S, {"type": "object"}), lg.UsageError, "tool-call", None),
    "tool parameter name": (
        _tools("f", {"type": "object", "properties": {S: {"type": "string"}}}),
        lg.StructuralTagError,
        "structural-tag",
        f"$.format.tags[0].content.json_schema.properties.{S}",
    ),
    "reasoning end": (lambda: Reasoning(end="</think" + S), lg.UsageError, "reasoning", None),
    "json schema pattern": (
        lambda: COMPILER.compile_json_schema({"type": "string", "pattern": S}),
        lg.UnsupportedSchemaError,
        "schema-unsupported",
        None,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lone_surrogate_is_a_typed_error_with_a_printable_message(name: str) -> None:
    call, cls, code, where = CASES[name]
    with pytest.raises(cls) as e:
        call()
    err = e.value
    assert err.code == code
    for text in (str(err), err.message):
        text.encode("utf-8")  # printable, loggable, sendable
        json.dumps(text, ensure_ascii=False).encode("utf-8")
    if isinstance(where, tuple):
        assert (err.line, err.column) == where  # type: ignore[attr-defined]
    elif isinstance(where, str):
        assert err.path == where  # type: ignore[attr-defined]
        assert _printable(where) in str(err)


def test_excerpt_escapes_the_surrogate_and_keeps_the_caret_under_the_fault() -> None:
    err = GrammarError("bad", source=f"ab{S}cd", offset=3)
    assert (err.line, err.column) == (1, 4)
    excerpt, caret = str(err).splitlines()[1:]
    assert excerpt == "  ab\\ud800cd"
    assert caret.index("^") == excerpt.index("c")


def test_messages_without_surrogates_are_unchanged() -> None:
    assert _printable("é 😀 \\ud800") == "é 😀 \\ud800"
    assert str(lg.SchemaError("x é", pointer="/a")) == "x é at /a"


def _accepts(grammar: lg.CompiledGrammar, text: str) -> bool:
    m = grammar.matcher()
    return bool(m.accept_bytes(text.encode("utf-8"))) and bool(m.is_complete())


def test_json_schema_spells_a_lone_surrogate_as_its_escape() -> None:
    """A schema's string values are JSON's: ``"\\ud800"`` is the JSON text of the string
    holding U+D800, and the only one generated (lowercase, as json.dumps writes it)."""
    g = COMPILER.compile_json_schema({"const": "a\udc00"})
    assert _accepts(g, '"a\\udc00"') and json.loads('"a\\udc00"') == "a\udc00"
    assert not _accepts(g, '"a"')
    schema = {"type": "object", "properties": {S: {"type": "integer"}}, "required": [S], "additionalProperties": False}
    g = COMPILER.compile_json_schema(schema)
    assert _accepts(g, '{"\\ud800": 1}') and not _accepts(g, '{"a": 1}')
    g = COMPILER.compile_json_schema({"enum": [S + "é", 1]})
    assert _accepts(g, '"\\ud800\\u00e9"') and _accepts(g, "1")


def test_json_schema_string_of_a_split_pair_has_no_json_text() -> None:
    """Two code points U+D83D U+DE00 in a str: their escapes read back as the one character
    U+1F600, so no JSON text is that string (it used to be generated, unsoundly)."""
    pair = "\ud83d\ude00"
    assert json.loads(json.dumps(pair)) != pair
    with pytest.raises(lg.SchemaError) as e:
        COMPILER.compile_json_schema({"const": pair})
    assert e.value.code == "schema-empty"
    g = COMPILER.compile_json_schema({"enum": [pair, "b"]})
    assert not _accepts(g, json.dumps(pair)) and _accepts(g, '"b"')


def test_token_names_with_a_surrogate_name_no_token() -> None:
    assert VOCAB.token_id("<eos>" + S) is None
