"""The server through the real ``openai`` SDK: structured outputs, strict tools, streams, errors."""

from __future__ import annotations

import json
import re

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

from .conftest import MODEL

USER = [{"role": "user", "content": "Alice is 31 years old and lives in Paris. Extract the person."}]

PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "maximum": 150}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


class Person(BaseModel):
    name: str = Field(max_length=12)
    age: int


class GetWeather(BaseModel):
    """Current weather in a city."""

    city: str = Field(max_length=16)


class GetTime(BaseModel):
    """Local time in a city."""

    city: str = Field(max_length=16)
    hour24: bool


WEATHER = [{"role": "user", "content": "What is the weather in Paris and what time is it in Tokyo?"}]


def test_json_schema_strict_create(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=USER,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True},
        },
        max_tokens=32,
        temperature=0,
    )
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    jsonschema.validate(json.loads(choice.message.content or ""), PERSON_SCHEMA)
    assert r.usage is not None and r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0


def test_output_keeps_the_schemas_property_order(client: openai.OpenAI) -> None:
    reversed_schema = {**PERSON_SCHEMA, "properties": dict(reversed(PERSON_SCHEMA["properties"].items()))}
    for schema in (PERSON_SCHEMA, reversed_schema):
        rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}
        r = client.chat.completions.create(model=MODEL, messages=USER, response_format=rf, max_tokens=32, temperature=0)
        assert list(json.loads(r.choices[0].message.content or "")) == list(schema["properties"])


def test_parse_pydantic(client: openai.OpenAI) -> None:
    r = client.chat.completions.parse(model=MODEL, messages=USER, response_format=Person, max_tokens=32, temperature=0)
    assert isinstance(r.choices[0].message.parsed, Person)


def test_parse_length_raises(client: openai.OpenAI) -> None:
    with pytest.raises(openai.LengthFinishReasonError):
        client.chat.completions.parse(model=MODEL, messages=USER, response_format=Person, max_tokens=3, temperature=0)


@pytest.mark.parametrize("parallel", [False, True])
def test_tools_required(client: openai.OpenAI, parallel: bool) -> None:
    tools = [openai.pydantic_function_tool(GetWeather), openai.pydantic_function_tool(GetTime)]
    r = client.chat.completions.parse(
        model=MODEL,
        messages=WEATHER,
        tools=tools,
        tool_choice="required",
        parallel_tool_calls=parallel,
        max_tokens=64,
        temperature=0,
    )
    choice = r.choices[0]
    calls = choice.message.tool_calls or []
    assert choice.finish_reason == "tool_calls" and calls
    if not parallel:
        assert len(calls) == 1
    for call in calls:
        assert call.id.startswith("call_") and call.function.name in ("GetWeather", "GetTime")
        assert isinstance(call.function.parsed_arguments, (GetWeather, GetTime))
        json.loads(call.function.arguments)
    assert len({c.id for c in calls}) == len(calls)


def test_tools_named(client: openai.OpenAI) -> None:
    tools = [openai.pydantic_function_tool(GetWeather), openai.pydantic_function_tool(GetTime)]
    r = client.chat.completions.parse(
        model=MODEL,
        messages=WEATHER,
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "GetTime"}},
        max_tokens=64,
        temperature=0,
    )
    calls = r.choices[0].message.tool_calls or []
    assert calls and all(isinstance(c.function.parsed_arguments, GetTime) for c in calls)


def test_stream_text_with_usage(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=USER,
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text and finish in ("stop", "length")
    assert usage is not None and 0 < usage.completion_tokens <= 12


def test_stream_parse_structured(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model=MODEL, messages=USER, response_format=Person, max_tokens=32, temperature=0
    ) as stream:
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, Person)


def test_stream_tool_calls(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model=MODEL,
        messages=WEATHER,
        tools=[openai.pydantic_function_tool(GetWeather)],
        tool_choice="required",
        parallel_tool_calls=False,
        max_tokens=48,
        temperature=0,
    ) as stream:
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls or []
    assert final.choices[0].finish_reason == "tool_calls"
    assert isinstance(call.function.parsed_arguments, GetWeather)


def test_bad_schema_is_400_with_pointer(client: openai.OpenAI) -> None:
    bad = {"type": "object", "properties": {"when": {"type": "string", "pattern": "(?<=a)b"}}}
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=USER,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": bad, "strict": True}},
            max_tokens=8,
        )
    assert "/properties/when/pattern" in str(info.value) and "'pattern'" in str(info.value)
    assert info.value.body["param"] == "response_format.json_schema.schema"  # type: ignore[index]


def test_vllm_structured_outputs_regex(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Give me a phone number."}],
        max_tokens=16,
        temperature=0.7,
        seed=1,
        extra_body={"structured_outputs": {"regex": r"[0-9]{3}-[0-9]{4}"}},
    )
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", r.choices[0].message.content or "")


def test_completions_choice_n(client: openai.OpenAI) -> None:
    r = client.completions.create(
        model=MODEL,
        prompt="Is the sky blue? Answer:",
        max_tokens=4,
        n=3,
        temperature=1.0,
        extra_body={"structured_outputs": {"choice": ["yes", "no"]}},
    )
    assert len(r.choices) == 3 and {c.text for c in r.choices} <= {"yes", "no"}
    assert all(c.finish_reason == "stop" for c in r.choices)
    # usage as OpenAI counts it: each prompt once, whatever n; completion tokens of every choice
    choice = {"structured_outputs": {"choice": ["yes", "no"]}}
    alone = [
        client.completions.create(model=MODEL, prompt=q, max_tokens=4, temperature=0, extra_body=choice).usage
        for q in ("Is the sky blue? Answer:", "Is grass red? Answer:")
    ]
    both = client.completions.create(
        model=MODEL,
        prompt=["Is the sky blue? Answer:", "Is grass red? Answer:"],
        max_tokens=4,
        n=2,
        temperature=0,
        extra_body=choice,
    )
    assert r.usage is not None and alone[0] is not None and alone[1] is not None and both.usage is not None
    assert r.usage.prompt_tokens == alone[0].prompt_tokens
    assert r.usage.completion_tokens >= len(r.choices)
    assert len(both.choices) == 4
    assert both.usage.prompt_tokens == alone[0].prompt_tokens + alone[1].prompt_tokens
    assert both.usage.completion_tokens == 2 * (alone[0].completion_tokens + alone[1].completion_tokens)  # greedy


def test_models_health_metrics(client: openai.OpenAI, server: str) -> None:
    import httpx

    assert [m.id for m in client.models.list()] == [MODEL]
    assert httpx.get(f"{server}/health").json() == {"status": "ok"}
    client.chat.completions.create(model=MODEL, messages=WEATHER, max_tokens=3, temperature=0)
    text = httpx.get(f"{server}/metrics").text
    for name in (
        "logitgate_requests_total",
        "logitgate_compile_cache_hits_total",
        "logitgate_batch_size_bucket",
        "logitgate_queue_depth",
        "logitgate_mask_seconds_total",
    ):
        assert name in text
    # the engine's profile: the request above ran a prefill pass and decode passes
    engine = {}
    for line in text.splitlines():
        if line.startswith("logitgate_engine_"):
            key, value = line.rsplit(" ", 1)
            engine[key] = float(value)
    for kind in ("prefill", "decode"):
        assert engine[f'logitgate_engine_passes_total{{kind="{kind}"}}'] >= 1
        assert (
            engine[f'logitgate_engine_positions_total{{kind="{kind}"}}']
            >= engine[f'logitgate_engine_rows_total{{kind="{kind}"}}']
        )
        assert engine[f'logitgate_engine_seconds_total{{phase="{kind}"}}'] > 0
    assert 'logitgate_engine_cpu_seconds_total{phase="sample"}' in engine


@pytest.mark.slow
def test_tool_choice_auto_and_allowed_tools(client: openai.OpenAI) -> None:
    tools = [openai.pydantic_function_tool(GetWeather), openai.pydantic_function_tool(GetTime)]
    r = client.chat.completions.create(
        model=MODEL, messages=WEATHER, tools=tools, tool_choice="auto", max_tokens=40, temperature=0
    )
    msg = r.choices[0].message
    if msg.tool_calls:  # calls (and maybe text around them), or text that holds no call
        assert r.choices[0].finish_reason == "tool_calls"
        assert all(c.function.name in ("GetWeather", "GetTime") for c in msg.tool_calls)
    assert "<tool_call>" not in (msg.content or "")
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "GetWeather"}}]},
    }
    r = client.chat.completions.create(
        model=MODEL,
        messages=WEATHER,
        tools=tools,
        tool_choice=allowed,
        max_tokens=40,
        temperature=0,  # type: ignore[arg-type]
    )
    calls = r.choices[0].message.tool_calls or []
    assert calls and all(c.function.name == "GetWeather" for c in calls)


def test_json_object_and_grammar(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL, messages=USER, response_format={"type": "json_object"}, max_tokens=24, temperature=0
    )
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(r.choices[0].message.content or ""), dict)
    else:
        assert (r.choices[0].message.content or "").startswith("{")
    grammar = 'root ::= "order " [0-9]{2,4} " is " ("shipped" | "pending")\n'
    r = client.chat.completions.create(
        model=MODEL,
        messages=USER,
        max_tokens=16,
        temperature=0,
        extra_body={"structured_outputs": {"grammar": grammar}},
    )
    assert re.fullmatch(r"order [0-9]{2,4} is (shipped|pending)", r.choices[0].message.content or "")
