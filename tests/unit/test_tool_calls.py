"""tool_call_structure: each family's structure compiles, accepts its own call format and the
tool_choice / parallel_tool_calls mapping, and bad input is a typed error."""

from __future__ import annotations

from typing import Any

import pytest

import logitgate as lg
from logitgate.tool_calls import FAMILIES

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
]
# Byte tokens only, plus EOS: every output is spelled byte by byte.
VOCAB = lg.Vocabulary.from_tokens([bytes([b]) for b in range(256)] + [b"<eos>"], eos_ids=[256])


def accepts(structure: dict[str, Any], text: str) -> bool:
    m = lg.Compiler(VOCAB).compile_structural_tag(structure).matcher()
    return all(m.accept(b) for b in text.encode()) and bool(m.is_complete())


CALLS = {
    "llama3": '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
    "qwen3": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    "mistral": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
    "deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather"
    '\n```json\n{"city": "Oslo"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    "harmony": '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>',
}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_accepts_its_call(family: str) -> None:
    assert accepts(lg.tool_call_structure(family, TOOLS), CALLS[family])
    assert accepts(lg.tool_call_structure(family, TOOLS, tool_choice="required"), CALLS[family])
    assert accepts(lg.tool_call_structure(family, TOOLS, tool_choice="required", calls_only=True), CALLS[family])
    bad = CALLS[family].replace('"Oslo"', "7")
    assert not accepts(lg.tool_call_structure(family, TOOLS), bad)


def test_tool_choice_mapping() -> None:
    auto = lg.tool_call_structure("qwen3", TOOLS)
    assert accepts(auto, "Just text.")
    assert accepts(auto, "Text, then " + CALLS["qwen3"] + CALLS["qwen3"])
    assert not accepts(lg.tool_call_structure("qwen3", TOOLS, tool_choice="required"), "Just text.")
    assert not accepts(lg.tool_call_structure("qwen3", TOOLS, parallel_tool_calls=False), CALLS["qwen3"] * 2)
    named = lg.tool_call_structure("qwen3", TOOLS, tool_choice={"type": "function", "function": {"name": "noop"}})
    assert not accepts(named, CALLS["qwen3"])
    assert accepts(named, '<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>')
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "noop"}}]},
    }
    assert not accepts(lg.tool_call_structure("qwen3", TOOLS, tool_choice=allowed), CALLS["qwen3"])
    # The Responses API's shape of a listed tool ({"type": "function", "name": ...}) too.
    responses_shape = {"type": "allowed_tools", "allowed_tools": {"tools": [{"type": "function", "name": "noop"}]}}
    only_noop = lg.tool_call_structure("qwen3", TOOLS, tool_choice=responses_shape)
    assert accepts(only_noop, '<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>')
    assert not accepts(only_noop, CALLS["qwen3"]) and accepts(only_noop, "Just text.")
    none = lg.tool_call_structure("qwen3", TOOLS, tool_choice="none")
    # calls_only: required without free text around the calls (newline-separated).
    noop = '<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>'
    required = lg.tool_call_structure("qwen3", TOOLS, tool_choice="required")
    assert accepts(required, CALLS["qwen3"] + " and some text")
    only = lg.tool_call_structure("qwen3", TOOLS, tool_choice="required", calls_only=True)
    assert accepts(only, CALLS["qwen3"]) and accepts(only, CALLS["qwen3"] + "\n" + noop)
    assert not accepts(only, CALLS["qwen3"] + " and some text") and not accepts(only, "Text " + CALLS["qwen3"])
    one = lg.tool_call_structure("qwen3", TOOLS, tool_choice="required", parallel_tool_calls=False, calls_only=True)
    assert accepts(one, CALLS["qwen3"]) and not accepts(one, CALLS["qwen3"] + "\n" + noop)
    assert accepts(lg.tool_call_structure("llama3", TOOLS, "required", calls_only=True), CALLS["llama3"])
    assert lg.tool_call_structure("qwen3", TOOLS, calls_only=True) == auto  # auto: unchanged
    assert accepts(none, "text") and none["format"]["type"] == "any_text"  # text only
    thinking = lg.tool_call_structure("qwen3", TOOLS, reasoning=True)
    assert accepts(thinking, "<think>hm</think>\n\n" + CALLS["qwen3"])
    assert not accepts(thinking, CALLS["qwen3"])


@pytest.mark.parametrize(
    ("family", "tools", "choice"),
    [
        ("gpt2", TOOLS, "auto"),
        ("qwen3", [{"type": "function", "function": {}}], "auto"),
        ("qwen3", TOOLS, {"type": "function", "function": {"name": "missing"}}),
        ("qwen3", [], "required"),
        ("qwen3", TOOLS, "sometimes"),
        ("qwen3", TOOLS, {"type": "allowed_tools", "allowed_tools": {"tools": [{"type": "function", "name": "nope"}]}}),
        ("qwen3", TOOLS, {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}}),
        ("qwen3", TOOLS, {"type": "allowed_tools", "allowed_tools": {"mode": "often", "tools": []}}),
        ("qwen3", TOOLS, {"type": "allowed_tools", "allowed_tools": {"tools": "noop"}}),
    ],
)
def test_bad_input_is_a_typed_error(family: str, tools: list[dict[str, Any]], choice: Any) -> None:
    with pytest.raises(lg.UsageError) as e:
        lg.tool_call_structure(family, tools, tool_choice=choice)
    assert e.value.code == "tool-call"
