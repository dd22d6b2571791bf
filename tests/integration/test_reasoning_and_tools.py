"""Reasoning and tool calls with the embedded SmolLM2-135M-Instruct model (CPU, greedy): a
reasoning-then-JSON generation and a tool call from a prose prompt, both valid (the model:
the session fixture in conftest.py)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

import logitgate as lg
from logitgate.reasoning import Reasoning

pytest.importorskip("torch")
pytest.importorskip("transformers")

ANSWER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}
WEATHER_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 20}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
]


def test_reasoning_then_json(smol: tuple[Any, Any]) -> None:
    model, tokenizer = smol
    res = lg.generate(
        model,
        tokenizer,
        "What is the largest city in France and its population? Think first, then answer in JSON.",
        json_schema=ANSWER,
        reasoning=Reasoning(budget=24),
        max_tokens=90,
    )
    assert res.reasoning is not None  # the span closed (within its budget)
    assert "</think>" not in res.reasoning
    value = json.loads(res.text)
    jsonschema.validate(value, ANSWER)  # (8.0 is an integer in JSON Schema: the lowering allows it)
    assert res.complete


def test_tool_call_from_prose(smol: tuple[Any, Any]) -> None:
    model, tokenizer = smol
    from logitgate.integrations.transformers import vocabulary_for

    structure = lg.tool_call_structure("qwen3", WEATHER_TOOLS, tool_choice="required", parallel_tool_calls=False)
    from logitgate.generation import compiler_for

    grammar = compiler_for(vocabulary_for(model, tokenizer)).compile_structural_tag(structure)
    res = lg.generate(
        model, tokenizer, "I am in Paris today. Should I take an umbrella?", grammar=grammar, max_tokens=60
    )
    assert res.complete
    text = res.text
    assert text.startswith("<tool_call>\n") and text.endswith("\n</tool_call>")
    call = json.loads(text[len("<tool_call>\n") : -len("\n</tool_call>")])
    assert call["name"] == "get_weather" and isinstance(call["arguments"]["city"], str)
