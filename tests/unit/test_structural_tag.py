"""Structural tags (frontends/structural_tag.py): XGrammar's format lowered to IR, checked on
a small byte vocabulary with two special tokens, and typed errors naming the path."""

from __future__ import annotations

import json

import pytest

import logitgate as lg

# Every byte as a text token (ids 0-255), then <think> 256, </think> 257, <call> 258 (special)
# and EOS 259.
TOKENS: list[bytes | None] = [bytes([b]) for b in range(256)] + [b"<think>", b"</think>", b"<call>", b"<eos>"]
THINK, END_THINK, CALL, EOS = 256, 257, 258, 259


@pytest.fixture(scope="module")
def compiler() -> lg.Compiler:
    vocab = lg.Vocabulary.from_tokens(TOKENS, eos_ids=[EOS], special_ids=[THINK, END_THINK, CALL])
    return lg.Compiler(vocab)


def accepts(compiler: lg.Compiler, spec: object, pieces: list[str | int]) -> bool:
    """True when the output ``pieces`` (text, or a token id) is a complete sentence."""
    m = compiler.compile_structural_tag(spec).matcher()  # type: ignore[arg-type]
    for p in pieces:
        ids = [p] if isinstance(p, int) else list(p.encode())
        if not all(m.accept(t) for t in ids):
            return False
    return bool(m.is_complete())


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TRIGGERED = {
    "type": "triggered_tags",
    "triggers": ["<function="],
    "tags": [
        {
            "type": "tag",
            "begin": "<function=get_weather>",
            "content": {"type": "json_schema", "json_schema": WEATHER},
            "end": "</function>",
        }
    ],
}


@pytest.mark.parametrize(
    ("spec", "pieces", "ok"),
    [
        ({"type": "const_string", "value": "hi"}, ["hi"], True),
        (
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
            ["<think>a<b</think>"],
            True,
        ),
        # The special token of a delimiter's text is accepted there too.
        (
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
            [THINK, "x", END_THINK],
            True,
        ),
        # The first end ends the content.
        (
            {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
            ["<think>a</think>b</think>"],
            False,
        ),
        (TRIGGERED, ['I will call. <function=get_weather>{"city": "Paris"}</function> done'], True),
        (TRIGGERED, ["<function=get_time>{}</function>"], False),
        (
            {**TRIGGERED, "at_least_one": True, "stop_after_first": True},
            ['<function=get_weather>{"city":"P"}</function>'],
            True,
        ),
        (
            {**TRIGGERED, "at_least_one": True, "stop_after_first": True},
            ['<function=get_weather>{"city":"P"}</function>x'],
            False,
        ),
        ({"type": "any_text", "excludes": ["bad"]}, ["so ba d"], True),
        ({"type": "any_text", "excludes": ["bad"]}, ["so bad"], False),
        (
            {
                "type": "sequence",
                "elements": [{"type": "const_string", "value": "A: "}, {"type": "regex", "pattern": "[0-9]+"}],
            },
            ["A: 42"],
            True,
        ),
        (
            {
                "type": "or",
                "elements": [{"type": "const_string", "value": "yes"}, {"type": "grammar", "grammar": 'root ::= "no"'}],
            },
            ["no"],
            True,
        ),
        ({"type": "repeat", "min": 1, "max": 2, "content": {"type": "const_string", "value": "ab"}}, ["ababab"], False),
        ({"type": "star", "content": {"type": "const_string", "value": "x"}}, [""], True),
        (
            {
                "type": "tags_with_separator",
                "separator": ",",
                "tags": [{"begin": "<i>", "content": {"type": "const_string", "value": "1"}, "end": "</i>"}],
            },
            ["<i>1</i>,<i>1</i>"],
            True,
        ),
        ({"type": "dispatch", "rules": [["#", {"type": "regex", "pattern": "[0-9]"}]], "loop": True}, ["a#1b#2"], True),
        ({"type": "dispatch", "rules": [["#", {"type": "regex", "pattern": "[0-9]"}]], "loop": True}, ["a#b"], False),
        # Lark grammars (docs/lark.md) embed like GBNF ones.
        ({"type": "grammar", "syntax": "lark", "grammar": 'start: "n=" NUM\nNUM: /[0-9]+/'}, ["n=42"], True),
        ({"type": "grammar", "syntax": "lark", "grammar": 'start: "n=" NUM\nNUM: /[0-9]+/'}, ["n=x"], False),
        ({"type": "grammar", "syntax": "lark", "grammar": 'start: "go" <[258]>'}, ["go", CALL], True),
        # Token level.
        ({"type": "token", "token": "<call>"}, [CALL], True),
        ({"type": "token", "token": "<call>"}, ["<call>"], False),  # never its text
        (
            {
                "type": "tag",
                "begin": {"type": "token", "token": THINK},
                "content": {"type": "any_tokens"},
                "end": {"type": "token", "token": END_THINK},
            },
            [THINK, "a", CALL, END_THINK],
            True,
        ),
        (
            {
                "type": "token_triggered_tags",
                "trigger_tokens": [CALL],
                "tags": [
                    {
                        "begin": {"token": CALL},
                        "content": {"type": "const_string", "value": "f()"},
                        "end": {"token": END_THINK},
                    }
                ],
            },
            ["ab", CALL, "f()", END_THINK, "c"],
            True,
        ),
        (
            {"type": "token_dispatch", "rules": [[CALL, {"type": "const_string", "value": "!"}]], "loop": True},
            ["a", CALL, "!"],
            True,
        ),
        (
            {"type": "token_dispatch", "rules": [[CALL, {"type": "const_string", "value": "!"}]], "loop": True},
            ["a", CALL, "?"],
            False,
        ),
        # Envelopes and inference.
        ({"type": "structural_tag", "format": {"value": "x"}}, ["x"], True),
        (
            {
                "type": "structural_tag",
                "structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}],
                "triggers": ["<f"],
            },
            ["t <f>12</f>"],
            True,
        ),
    ],
)
def test_structural_tag_languages(compiler: lg.Compiler, spec: object, pieces: list[str | int], ok: bool) -> None:
    assert accepts(compiler, spec, pieces) is ok
    assert accepts(compiler, json.dumps(spec), pieces) is ok  # JSON text too


@pytest.mark.parametrize(
    ("spec", "path", "code"),
    [
        ({"type": "nope"}, "$.type", "structural-tag"),
        ({"type": "sequence", "elements": [{"type": "const_string"}]}, "$.elements[0]", "structural-tag"),
        ({"type": "json_schema", "json_schema": {}, "style": "gemma"}, "$.style", "structural-tag-unsupported"),
        (
            {"type": "json_schema", "json_schema": {}, "style": "qwen_xml"},
            "$.json_schema",
            "structural-tag-unsupported",
        ),
        (
            {"type": "qwen_xml_parameter", "json_schema": {"type": "object", "properties": {"a": {"enum": ["x"]}}}},
            "$.json_schema.properties.a",
            "structural-tag-unsupported",
        ),
        (
            {
                "type": "json_schema",
                "json_schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                "style": "qwen_xml",
                "max_whitespace_cnt": 2,
            },
            "$.max_whitespace_cnt",
            "structural-tag-unsupported",
        ),
        ({"type": "any_text", "max_tokens": 5}, "$.max_tokens", "structural-tag-unsupported"),
        ({"type": "json_schema", "json_schema": {}, "excludes": ["x"]}, "$.excludes", "structural-tag-unsupported"),
        (
            {
                "type": "json_schema",
                "json_schema": {"type": "object", "properties": {"o": {"type": "object", "properties": {}}}},
                "any_order": True,
            },
            "$.json_schema.properties.o",
            "structural-tag-unsupported",
        ),
        (
            {"type": "json_schema", "json_schema": WEATHER, "style": "qwen_xml", "any_order": True},
            "$.any_order",
            "structural-tag-unsupported",
        ),
        ({"type": "any_text", "max_chars": 1 << 20}, "$.max_chars", "structural-tag-limit"),
        ({"type": "token", "token": "<nope>"}, "$.token", "structural-tag-token"),
        ({"type": "grammar", "grammar": "root ::= x", "syntax": "peg"}, "$.syntax", "structural-tag-unsupported"),
        ({"type": "json_schema", "json_schema": {"type": "bogus"}}, "$.json_schema", "structural-tag-schema"),
        ({**TRIGGERED, "triggers": ["<x"]}, "$.tags[0].begin", "structural-tag"),
        ({"type": "structural_tag", "format": {"type": "tag", "begin": "a", "end": "b"}}, "$.format", "structural-tag"),
    ],
)
def test_errors_name_the_path(compiler: lg.Compiler, spec: dict[str, object], path: str, code: str) -> None:
    with pytest.raises(lg.StructuralTagError) as e:
        compiler.compile_structural_tag(spec)
    assert (e.value.path, e.value.code) == (path, code)


@pytest.mark.parametrize(
    ("fmt", "path", "says"),
    [
        # Counts past int64 inside a tag were an OverflowError from the serializer.
        (
            {"type": "json_schema", "json_schema": {"type": "array", "minItems": 2**64}},
            "$.json_schema",
            "minItems 18446744073709551616 at /minItems",
        ),
        (
            {"type": "json_schema", "json_schema": {"type": "object"}, "max_whitespace_cnt": 2**64},
            "$.max_whitespace_cnt",
            "max_whitespace_cnt over max_repeat=100000",
        ),
        (
            {"type": "json_schema", "json_schema": {**WEATHER, "maxProperties": 2**64}, "any_order": True},
            "$.json_schema.maxProperties",
            "maxProperties over max_repeat=100000",
        ),
        (
            {"type": "json_schema", "json_schema": {**WEATHER, "minProperties": 2**64}, "any_order": True},
            "$.json_schema.minProperties",
            "minProperties over max_repeat=100000",
        ),
        (
            {"type": "repeat", "min": 2**64, "max": -1, "content": {"type": "const_string", "value": "a"}},
            "$",
            "repeat bound over max_repeat=100000",
        ),
    ],
)
def test_counts_past_max_repeat_name_the_path(
    compiler: lg.Compiler, fmt: dict[str, object], path: str, says: str
) -> None:
    for spec in (fmt, json.dumps(fmt)):
        with pytest.raises(lg.StructuralTagError) as e:
            compiler.compile_structural_tag(spec)
        assert (e.value.path, e.value.code) == (path, "structural-tag-limit")
        assert says in str(e.value)


def test_tool_parameters_past_max_repeat_name_the_tag(compiler: lg.Compiler) -> None:
    params = {"type": "object", "properties": {"xs": {"type": "array", "minItems": 2**64}}}
    tools = [{"type": "function", "function": {"name": "f", "parameters": params}}]
    with pytest.raises(lg.StructuralTagError) as e:
        compiler.compile_structural_tag(lg.tool_call_structure("qwen3", tools))
    assert (e.value.path, e.value.code) == ("$.format.tags[0].content.json_schema", "structural-tag-limit")
    assert "minItems 18446744073709551616 at /properties/xs/minItems" in str(e.value)


@pytest.mark.parametrize("token", [len(TOKENS), 2**31, 2**64])
def test_token_ids_past_the_vocabulary_are_named_at_their_path(compiler: lg.Compiler, token: int) -> None:
    """Past the vocabulary (past int32 included) as a token name is: a StructuralTagError at the
    id's path (was the core's GrammarError 'unknown-token', with no path)."""
    for fmt, path in (
        ({"type": "token", "token": token}, "$.token"),
        ({"type": "exclude_token", "exclude_tokens": [3, token]}, "$.exclude_tokens[1]"),
    ):
        with pytest.raises(lg.StructuralTagError) as e:
            compiler.compile_structural_tag(fmt)
        assert (e.value.code, e.value.path) == ("structural-tag-token", path)
        assert "not in the vocabulary" in str(e.value)


def test_integer_past_python_digits(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.StructuralTagError) as e:  # json.loads refuses it with a plain ValueError
        compiler.compile_structural_tag('{"type": "token", "token": 1' + "0" * 5000 + "}")
    assert (e.value.path, e.value.code) == ("$", "structural-tag-limit")


def test_not_json(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.StructuralTagError) as e:
        compiler.compile_structural_tag("{")
    assert e.value.path == "$"


def test_structural_tag_nesting_is_malformed_not_a_limit(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.StructuralTagError) as e:
        compiler.compile_structural_tag("[" * 100_000 + "]" * 100_000)
    assert (e.value.path, e.value.code) == ("$", "structural-tag")
    assert "nested deeper than" in str(e.value)


def test_qwen_xml_arguments(compiler: lg.Compiler) -> None:
    """qwen_xml: properties in order as <parameter=NAME>VALUE</parameter>; a string raw up to
    the first </parameter>, other values JSON; required ones present, no others."""
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    }
    spec = {"type": "json_schema", "json_schema": schema, "style": "qwen_xml"}
    ok = [
        "<parameter=city>Oslo {x} <b></parameter>",
        "\n<parameter=city></parameter>\n<parameter=days> 3\n</parameter>\n",
    ]
    bad = [
        "",
        "<parameter=days>3</parameter>",
        "<parameter=days>3</parameter><parameter=city>a</parameter>",
        "<parameter=city>a</parameter><parameter=days>x</parameter>",
        "<parameter=city>a</parameter>b</parameter>",
        "<parameter=city>a</parameter><parameter=other>1</parameter>",
    ]
    for text in ok:
        assert accepts(compiler, spec, [text]), text
    for text in bad:
        assert not accepts(compiler, spec, [text]), text


def test_any_text_max_chars(compiler: lg.Compiler) -> None:
    """max_chars counts the text's characters (not bytes), the enclosing end not included."""
    top = {"type": "any_text", "max_chars": 3}
    assert accepts(compiler, top, ["aé€"]) and accepts(compiler, top, [""])
    assert not accepts(compiler, top, ["abcd"])
    tag = {"type": "tag", "begin": "<a>", "content": {**top, "excludes": ["b"]}, "end": "</a>"}
    assert accepts(compiler, tag, ["<a>x<y</a>"]) and accepts(compiler, tag, ["<a></a>"])
    assert not accepts(compiler, tag, ["<a>wxyz</a>"]) and not accepts(compiler, tag, ["<a>b</a>"])


def _tool_tags(schemas: list[object]) -> dict[str, object]:
    return {
        "type": "triggered_tags",
        "triggers": ["<function="],
        "tags": [
            {
                "type": "tag",
                "begin": f"<function=f{i}>",
                "content": {"type": "json_schema", "json_schema": s},
                "end": "</function>",
            }
            for i, s in enumerate(schemas)
        ],
    }


def _one_by_one(compiler: lg.Compiler, spec: dict[str, object]) -> lg.CompiledGrammar:
    """``spec`` compiled with every json_schema span lowered alone (no ``json_schemas``)."""
    from logitgate.frontends.json_schema import schema_to_grammar
    from logitgate.frontends.structural_tag import lower_structural_tag

    grammar = lower_structural_tag(
        spec,
        limits=compiler.limits,
        token_id=compiler.vocab.token_id,
        json_schema=lambda s, path, options: schema_to_grammar(s, limits=compiler.limits, **options)[0],
        special_texts=compiler.vocab.special_texts(),
    )
    return compiler.compile_grammar(grammar)


# Tools sharing property schemas, one with its own $defs (lowered alone), one repeated.
TOOL_SCHEMAS: list[object] = [
    {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer", "minimum": 1}}},
    {"type": "object", "properties": {"q": {"type": "string"}, "mode": {"enum": ["a", "b"]}}, "required": ["mode"]},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}, "xs": {"type": "array"}}},
    {"$defs": {"p": {"type": "boolean"}}, "type": "object", "properties": {"on": {"$ref": "#/$defs/p"}}},
    {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer", "minimum": 1}}},
    {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": {"type": "number"}},
]


def test_tools_lowered_together_keep_their_languages(compiler: lg.Compiler) -> None:
    """The compiler lowers a tool list's schemas in one pass (schemas_to_grammar): the masks
    along each tool's calls with a set of arguments (valid for some tools only), and along
    random walks into each tool, are those of the same structure with each schema lowered
    alone."""
    import random

    import numpy as np

    from logitgate.masks import mask_to_bool

    spec = _tool_tags(TOOL_SCHEMAS)
    together = compiler.compile_structural_tag(spec).matcher()
    alone = _one_by_one(compiler, spec).matcher()
    bits_a, bits_b = lg.allocate_mask(compiler.vocab), lg.allocate_mask(compiler.vocab)

    def step(t: int) -> bool:
        together.fill_mask(bits_a)
        alone.fill_mask(bits_b)
        assert np.array_equal(bits_a, bits_b)
        ok = together.accept(t)
        assert alone.accept(t) is ok
        return ok

    arguments = ['{"q": "x"}', '{"q": "x", "n": 1}', '{"n": 0}', '{"mode": "a"}', '{"q": "y", "mode": "b"}']
    arguments += ['{"on": true}', '{"xs": [1]}', '{"n": 2, "xs": []}', '{"q": "z", "w": 1.5}', "{}"]
    accepted = set()
    for i in range(len(TOOL_SCHEMAS)):
        for args in arguments:
            together.reset()
            alone.reset()
            if all(step(t) for t in f"<function=f{i}>{args}</function>".encode()):
                assert together.is_complete() and alone.is_complete()
                accepted.add((i, args))
    assert len(accepted) == 18  # 3 + 2 + 3 + 2 + 3 + 5: each tool takes a few of them
    rng = random.Random(7)
    for walk in range(30):
        together.reset()
        alone.reset()
        assert all(step(t) for t in f"<function=f{walk % len(TOOL_SCHEMAS)}>{{".encode())
        for _ in range(30):
            together.fill_mask(bits_a)
            allowed = np.flatnonzero(mask_to_bool(bits_a, compiler.vocab.size)[0])
            # Mostly the JSON's structural bytes, so that the walk reaches the members.
            structural = [t for t in allowed if chr(t) in '"qnmodexswa:,{}[]0123456789tf']
            assert step(int(rng.choice(structural if structural and rng.random() < 0.9 else allowed)))


def test_tool_schema_errors_name_their_tag(compiler: lg.Compiler) -> None:
    """A bad schema among many tools is reported at its own path."""
    schemas = [*TOOL_SCHEMAS[:3], {"type": "object", "properties": {"x": {"type": "bogus"}}}, TOOL_SCHEMAS[0]]
    with pytest.raises(lg.StructuralTagError) as e:
        compiler.compile_structural_tag(_tool_tags(schemas))
    assert (e.value.path, e.value.code) == ("$.tags[3].content.json_schema", "structural-tag-schema")


def test_schemas_to_grammar_takes_self_contained_schemas() -> None:
    from logitgate.frontends.json_schema import schemas_to_grammar
    from logitgate.limits import DEFAULT_LIMITS

    outside = [{"$ref": "other.json"}, {"$id": "https://x.example/s", "type": "string"}, {"$schema": "x"}, True]
    grammar, names = schemas_to_grammar(
        [TOOL_SCHEMAS[0], TOOL_SCHEMAS[0], TOOL_SCHEMAS[3], *outside], limits=DEFAULT_LIMITS
    )
    assert None not in names[:3] and len(set(names[:3])) == 3
    assert names[3:] == [None] * len(outside)  # not self-contained: left to the caller
    assert all(name in grammar.rules for name in names[:3])


def test_json_schema_any_order(compiler: lg.Compiler) -> None:
    """any_order (XGrammar's language): entries in any order, repeats allowed, presence
    unchecked, their count in [max(minProperties, #required), maxProperties]."""
    schema = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "string"}}, "required": ["a"]}
    spec = {"type": "json_schema", "json_schema": schema, "any_order": True}
    for text in ['{"b": "x", "a": true}', '{"a": true, "a": false}', '{"b": "x"}', '{ "b" : "x" , "b":"y" }']:
        assert accepts(compiler, spec, [text]), text
    for text in ["{}", '{"c": 1}', '{"a": 1}', '{"a": true,}']:
        assert not accepts(compiler, spec, [text]), text
    bounded = {**spec, "json_schema": {**schema, "required": [], "minProperties": 1, "maxProperties": 2}}
    assert accepts(compiler, bounded, ['{"b": "x", "a": true}']) and accepts(compiler, bounded, ['{"a": true}'])
    assert not accepts(compiler, bounded, ["{}"]) and not accepts(
        compiler, bounded, ['{"a": true, "a": true, "b": ""}']
    )
    optional = {**spec, "json_schema": {**schema, "required": []}}
    assert accepts(compiler, optional, ["{ }"])
    # Without object keywords any_order changes nothing.
    assert accepts(compiler, {**spec, "json_schema": {"type": "integer"}}, ["7"])


def test_tools_with_references_lowered_together(compiler: lg.Compiler) -> None:
    """Schemas with "#..." references (recursive ones, the root's "#" included) are lowered
    together too, each its own resource: the masks along calls are those of each schema
    lowered alone."""
    import numpy as np

    tree = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "boolean"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            }
        },
        "$ref": "#/$defs/node",
    }
    chain = {"type": "object", "properties": {"n": {"type": "string"}, "next": {"$ref": "#"}}}
    spec = _tool_tags([tree, chain, TOOL_SCHEMAS[0]])
    together = compiler.compile_structural_tag(spec).matcher()
    alone = _one_by_one(compiler, spec).matcher()
    bits_a, bits_b = lg.allocate_mask(compiler.vocab), lg.allocate_mask(compiler.vocab)
    arguments = ['{"v": true, "kids": [{"kids": [{"v": false}]}]}', '{"n": "a", "next": {"next": {"n": "b"}}}']
    arguments += ['{"kids": [{"n": "x"}]}', '{"next": {"v": true}}', '{"q": "x"}']
    accepted = set()
    for i in range(3):
        for j, args in enumerate(arguments):
            together.reset()
            alone.reset()
            for t in f"<function=f{i}>{args}</function>".encode():
                together.fill_mask(bits_a)
                alone.fill_mask(bits_b)
                assert np.array_equal(bits_a, bits_b)
                ok = together.accept(t)
                assert alone.accept(t) is ok
                if not ok:
                    break
            else:
                accepted.add((i, j))
    assert accepted == {(0, 0), (1, 1), (2, 4)}
