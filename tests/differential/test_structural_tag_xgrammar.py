"""Structural-tag masks against XGrammar 0.2.9 along random walks, on the Qwen3 and Llama 3
tokenizers: every example of XGrammar's structural-tag docs and the tool-call structures of
three families (tool_call_structure), special tokens included.

Per step and token id (docs/structural_tags.md, "Known differences"):

- text ids (not special in our vocabulary): our bit equals XGrammar's;
- except where XGrammar allows a text token whose bytes would make the output invalid UTF-8
  (a lone continuation byte in ``any_text``): XGrammar's free text is bytes, ours is text;
- except where we allow a fraction or exponent after an integer's digits (``3.0`` and ``3e0``
  are integers in JSON Schema; XGrammar's integers are digits only);
- special ids and EOS ids: ours implies XGrammar's. XGrammar reads special tokens as their
  text (``<|im_start|>`` inside free text or a JSON string), logitgate never does, and XGrammar's
  token sets hold the stop tokens, logitgate's never (EOS ends the output).

A walk follows a valid example output token by token and, from a random step on, random tokens
our mask allows; each token is accepted by both engines.
"""

from __future__ import annotations

import codecs
import random
from typing import Any

import numpy as np
import pytest
from tests.conftest import TOKENIZERS_DIR

import logitgate as lg

xgr = pytest.importorskip("xgrammar")
tokenizers = pytest.importorskip("tokenizers")

WIDTHS = {"qwen3": 151936, "llama3": 128256}

OBJ: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}
TIME: dict[str, Any] = {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}
FUNCS = [
    {
        "type": "tag",
        "begin": "<function=func1>",
        "content": {"type": "json_schema", "json_schema": OBJ},
        "end": "</function>",
    },
    {
        "type": "tag",
        "begin": "<function=func2>",
        "content": {"type": "json_schema", "json_schema": TIME},
        "end": "</function>",
    },
]
CALL = '<function=func1>{"city": "Paris", "days": 3}</function>'

# XGrammar's structural-tag doc examples (docs/structural_tag/structural_tag.md; the `...`
# schemas filled in), each with a valid output.
DOC_EXAMPLES: list[tuple[str, dict[str, Any], str]] = [
    (
        "tag_think",
        {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
        "<think>Let me see: 2 < 3.</think>",
    ),
    (
        "triggered_weather",
        {"type": "triggered_tags", "triggers": ["<function="], "tags": FUNCS[:1]},
        "I will call a tool now. " + CALL,
    ),
    ("const_string", {"type": "const_string", "value": "Let's think step by step."}, "Let's think step by step."),
    (
        "json_schema",
        {
            "type": "json_schema",
            "json_schema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
            },
        },
        '{"name": "Ann", "age": 7}',
    ),
    ("grammar", {"type": "grammar", "grammar": 'root ::= ("yes" | "no")'}, "yes"),
    ("regex", {"type": "regex", "pattern": "[A-Z]{3}-[0-9]{4}"}, "ABC-1234"),
    ("any_text_excludes", {"type": "any_text", "excludes": ["<function="]}, "free <function text"),
    (
        "sequence",
        {
            "type": "sequence",
            "elements": [
                {"type": "const_string", "value": "Answer: "},
                {"type": "json_schema", "json_schema": {"type": "object"}},
            ],
        },
        'Answer: {"a": [1, 2]}',
    ),
    (
        "or",
        {"type": "or", "elements": [{"type": "const_string", "value": "yes"}, {"type": "const_string", "value": "no"}]},
        "no",
    ),
    (
        "optional",
        {"type": "optional", "content": {"type": "const_string", "value": "Optional prefix: "}},
        "Optional prefix: ",
    ),
    ("plus", {"type": "plus", "content": {"type": "const_string", "value": "item"}}, "itemitem"),
    ("star", {"type": "star", "content": {"type": "const_string", "value": "x"}}, "xxx"),
    (
        "repeat",
        {"type": "repeat", "min": 1, "max": 3, "content": {"type": "const_string", "value": "item"}},
        "itemitem",
    ),
    (
        "tag_end_list",
        {
            "type": "tag",
            "begin": "<response>",
            "content": {"type": "json_schema", "json_schema": {"type": "object"}},
            "end": ["</response>", "</answer>"],
        },
        '<response>{"k": true}</answer>',
    ),
    (
        "triggered_two",
        {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": FUNCS,
            "at_least_one": False,
            "stop_after_first": False,
        },
        "a " + CALL + " b",
    ),
    (
        "tags_with_separator",
        {
            "type": "tags_with_separator",
            "tags": [
                {
                    "type": "tag",
                    "begin": "<item>",
                    "content": {"type": "json_schema", "json_schema": {"type": "object"}},
                    "end": "</item>",
                }
            ],
            "separator": ",",
            "at_least_one": False,
            "stop_after_first": False,
        },
        "<item>{}</item>,<item>{}</item>",
    ),
    (
        "dispatch",
        {
            "type": "dispatch",
            "rules": [
                ["<function=func1>", {"type": "json_schema", "json_schema": OBJ}],
                ["<function=func2>", {"type": "json_schema", "json_schema": TIME}],
            ],
            "loop": True,
            "excludes": ["</end>"],
        },
        'see <function=func2>{"timezone": "UTC"} done',
    ),
    (
        "exactly_one_call",
        {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": FUNCS,
            "at_least_one": True,
            "stop_after_first": True,
        },
        CALL,
    ),
    (
        "reasoning_then_calls",
        {
            "type": "sequence",
            "elements": [
                {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
                {"type": "triggered_tags", "triggers": ["<function="], "tags": FUNCS},
            ],
        },
        "<think>hmm</think>ok " + CALL,
    ),
]

# json_schema's qwen_xml style (Qwen3-Coder's arguments): a string property raw, others JSON.
XML_OBJ: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "a city"},
        "days": {"type": "integer", "minimum": 1},
        "units": {"type": "array", "items": {"type": "string"}},
        "note": {"type": "string"},
    },
    "required": ["city", "note"],
}
DOC_EXAMPLES += [
    (
        "qwen_xml",
        {"type": "json_schema", "json_schema": XML_OBJ, "style": "qwen_xml"},
        "<parameter=city>Oslo <b>north</b></parameter>\n<parameter=days> 3 </parameter><parameter=note>a</parameter>",
    ),
    (
        "qwen_xml_function",
        {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": [
                {
                    "type": "tag",
                    "begin": "<function=get_weather>\n",
                    "content": {"type": "json_schema", "json_schema": XML_OBJ, "style": "qwen_xml"},
                    "end": "</function>",
                }
            ],
        },
        'Sure.<function=get_weather>\n<parameter=city>Rome</parameter>\n<parameter=units>["C"]</parameter>\n'
        "<parameter=note></parameter>\n</function>",
    ),
    (
        "minimax_xml",
        {"type": "json_schema", "json_schema": XML_OBJ, "style": "minimax_xml"},
        '<parameter name="city">a</parameter><parameter name="note">b</parameter>',
    ),
    (
        "glm_xml",
        {"type": "json_schema", "json_schema": XML_OBJ, "style": "glm_xml"},
        "<arg_key>city</arg_key>\n<arg_value>a</arg_value><arg_key>days</arg_key><arg_value>2</arg_value>"
        "<arg_key>note</arg_key><arg_value>b</arg_value>",
    ),
    (
        "deepseek_xml",
        {"type": "json_schema", "json_schema": XML_OBJ, "style": "deepseek_xml"},
        '<\uff5cDSML\uff5cparameter name="city" string="true">a</\uff5cDSML\uff5cparameter>'
        '<\uff5cDSML\uff5cparameter name="days" string="false">2</\uff5cDSML\uff5cparameter>'
        '<\uff5cDSML\uff5cparameter name="note" string="true">b</\uff5cDSML\uff5cparameter>',
    ),
    ("any_text_max_chars", {"type": "any_text", "max_chars": 8}, "ab déf"),
    (
        "tag_max_chars",
        {
            "type": "tag",
            "begin": "<a>",
            "content": {"type": "any_text", "max_chars": 6, "excludes": ["xy"]},
            "end": "</a>",
        },
        "<a>x </ é</a>",
    ),
    (
        "qwen_xml_parameter",
        {"type": "qwen_xml_parameter", "json_schema": XML_OBJ},
        "<parameter=city>x</parameter><parameter=note>y</parameter>",
    ),
]
# any_order: entries in any order, repeats allowed, their count bounded by the required ones,
# minProperties and maxProperties; without object keywords it changes nothing.
ANY_ORDER_OBJ: dict[str, Any] = {
    "type": "object",
    "properties": {
        "on": {"type": "boolean"},
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["on"],
}
DOC_EXAMPLES += [
    (
        "any_order",
        {"type": "json_schema", "json_schema": ANY_ORDER_OBJ, "any_order": True},
        '{"name": "x", "on": true, "on": false}',
    ),
    (
        "any_order_max_properties",
        {
            "type": "json_schema",
            "json_schema": {**ANY_ORDER_OBJ, "required": [], "maxProperties": 2},
            "any_order": True,
        },
        '{"tags": ["a"], "name": "y"}',
    ),
    (
        "any_order_min_properties",
        {"type": "json_schema", "json_schema": {**ANY_ORDER_OBJ, "minProperties": 3}, "any_order": True},
        '{"tags": [], "tags": ["b"], "on": true}',
    ),
    (
        "any_order_no_object",
        {"type": "json_schema", "json_schema": {"type": "array", "items": {"type": "string"}}, "any_order": True},
        '["a", "b"]',
    ),
    (
        "any_order_in_triggered_tags",
        {
            "type": "triggered_tags",
            "triggers": ["<f="],
            "tags": [
                {
                    "type": "tag",
                    "begin": "<f=x>",
                    "content": {"type": "json_schema", "json_schema": ANY_ORDER_OBJ, "any_order": True},
                    "end": "</f>",
                }
            ],
        },
        'hi <f=x>{"name": "q", "on": true}</f>',
    ),
]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": OBJ}},
    {"type": "function", "function": {"name": "get_time", "parameters": TIME}},
]
TOOL_CASES: list[tuple[str, str, dict[str, Any], str]] = [
    (
        "qwen3_auto",
        "qwen3",
        {},
        'Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    ),
    (
        "qwen3_required_reasoning",
        "qwen3",
        {"tool_choice": "required", "reasoning": True},
        "<think>need weather</think>\n\n"
        '<tool_call>\n{"name": "get_time", "arguments": {"timezone": "CET"}}\n</tool_call>',
    ),
    ("llama3_auto", "llama3", {}, '{"name": "get_weather", "parameters": {"city": "Rome", "days": 2}}'),
    (
        "llama3_named",
        "llama3",
        {"tool_choice": {"type": "function", "function": {"name": "get_time"}}},
        '{"name": "get_time", "parameters": {"timezone": "PST"}}',
    ),
    (
        "harmony_auto",
        "harmony",
        {"parallel_tool_calls": False},
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Lima"}<|call|>',
    ),
]


def _xgr_info(tok: Any, width: int, eos: tuple[int, ...]) -> Any:
    strings = [""] * width
    for s, i in tok.get_vocab(with_added_tokens=True).items():
        if i < width:
            strings[i] = s
    return xgr.TokenizerInfo(strings, vocab_type=xgr.VocabType.BYTE_LEVEL, vocab_size=width, stop_token_ids=list(eos))


_ENGINES: dict[str, Any] = {}


def engines(name: str) -> Any:
    if name not in _ENGINES:
        path = TOKENIZERS_DIR / name / "tokenizer.json"
        if not path.is_file():
            pytest.skip(f"tokenizer not found at {path}")
        tok = tokenizers.Tokenizer.from_file(str(path))
        vocab = lg.Vocabulary.from_huggingface(tok, logits_width=WIDTHS[name])
        info = _xgr_info(tok, WIDTHS[name], vocab.eos_ids)
        _ENGINES[name] = (tok, vocab, lg.Compiler(vocab), xgr.GrammarCompiler(info), info)
    return _ENGINES[name]


def _bits(words: np.ndarray, width: int) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(words).view(np.uint8), bitorder="little")[:width].astype(bool)


def walk_and_compare(name: str, spec: dict[str, Any], output: str, seed: int, steps: int) -> int:
    """Walks ``output`` then random tokens; returns the steps compared."""
    tok, vocab, ours_c, xgr_c, _ = engines(name)
    width = vocab.size
    special = np.zeros(width, dtype=bool)
    special[list(vocab.special_ids | set(vocab.eos_ids))] = True
    ours = ours_c.compile_structural_tag(spec).matcher()
    theirs = xgr.GrammarMatcher(xgr_c.compile_structural_tag(json_dumps({"type": "structural_tag", "format": spec})))
    guide = tok.encode(output, add_special_tokens=False).ids
    rng = random.Random(seed)
    leave_at = rng.randrange(len(guide) + 1)
    ours_bits = lg.allocate_mask(vocab)
    out = b""  # the output's text (special tokens are no text)
    theirs_bits = xgr.allocate_token_bitmask(1, width)
    for step in range(steps):
        ours.fill_mask(ours_bits, row=0)
        theirs.fill_next_token_bitmask(theirs_bits)
        a = _bits(ours_bits[0], width)
        b = _bits(theirs_bits[0].numpy(), width)
        text_diff = [int(i) for i in np.flatnonzero((a != b) & ~special)]
        text_diff = [i for i in text_diff if a[i] or _valid_utf8_prefix(out + (vocab.token_bytes(i) or b""))]
        text_diff = [i for i in text_diff if not (a[i] and _integer_fraction(out, vocab.token_bytes(i) or b""))]
        assert not text_diff, (name, spec, step, out, [(i, tok.id_to_token(i), bool(a[i])) for i in text_diff[:8]])
        extra = np.flatnonzero(a & ~b & special)
        assert extra.size == 0, (name, step, [tok.id_to_token(int(i)) for i in extra[:8]])
        if step < min(leave_at, len(guide)):
            token = guide[step]
            assert a[token], (name, "the valid output's token is rejected", step, tok.id_to_token(token))
        else:
            allowed = np.flatnonzero(a & b)
            if allowed.size == 0:
                break
            token = int(rng.choice(list(allowed)))
        assert ours.accept(token)
        assert theirs.accept_token(token), (name, step, tok.id_to_token(token))
        if ours.is_terminated():
            break
        if token not in vocab.special_ids:
            out += vocab.token_bytes(token) or b""
    return step


def _integer_fraction(out: bytes, token: bytes) -> bool:
    return out[-1:].isdigit() and token[:1] in (b".", b"e", b"E")


def _valid_utf8_prefix(data: bytes) -> bool:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return True


def json_dumps(obj: Any) -> str:
    import json

    return json.dumps(obj)


QUICK = {"tag_think", "triggered_weather", "qwen3_auto", "qwen_xml_function"}


def test_quick_sample_agrees_with_xgrammar() -> None:
    """The default run's share: a few cases on Qwen3 (the rest is in the slow suite)."""
    for case, spec, output in DOC_EXAMPLES:
        if case in QUICK:
            walk_and_compare("qwen3", spec, output, 0, steps=30)
    for case, family, options, output in TOOL_CASES:
        if case in QUICK:
            walk_and_compare("qwen3", lg.tool_call_structure(family, TOOLS, **options)["format"], output, 0, steps=30)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["qwen3", "llama3"])
@pytest.mark.parametrize(("case", "spec", "output"), DOC_EXAMPLES, ids=[c[0] for c in DOC_EXAMPLES])
def test_doc_examples_agree_with_xgrammar(name: str, case: str, spec: dict[str, Any], output: str) -> None:
    for seed in range(2):
        walk_and_compare(name, spec, output, seed, steps=40)


@pytest.mark.slow
@pytest.mark.parametrize(("case", "family", "options", "output"), TOOL_CASES, ids=[c[0] for c in TOOL_CASES])
def test_tool_call_structures_agree_with_xgrammar(case: str, family: str, options: dict[str, Any], output: str) -> None:
    structure = lg.tool_call_structure(family, TOOLS, **options)
    for name in ("qwen3", "llama3"):
        for seed in range(2):
            walk_and_compare(name, structure["format"], output, seed, steps=60)


@pytest.mark.slow
def test_token_formats_agree_with_xgrammar() -> None:
    """Token-level formats on Qwen3's special tokens (<tool_call> 151657, </tool_call> 151658)."""
    spec = {
        "type": "sequence",
        "elements": [
            {
                "type": "token_triggered_tags",
                "trigger_tokens": [151657],
                "tags": [
                    {
                        "type": "tag",
                        "begin": {"type": "token", "token": 151657},
                        "content": {"type": "json_schema", "json_schema": OBJ},
                        "end": {"type": "token", "token": 151658},
                    }
                ],
                "exclude_tokens": [151644],
                "at_least_one": True,
                "stop_after_first": True,
            },
        ],
    }
    walk_and_compare("qwen3", spec, '<tool_call>{"city": "Oslo"}</tool_call>', 0, steps=40)
