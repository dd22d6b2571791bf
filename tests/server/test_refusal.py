"""A refusal path (``lg.with_refusal``) over the server: a refusal is ``message.refusal``.

The refusal is forced deterministically with a schema whose object branch is ``false``: only
``{"refusal": "..."}`` is allowed, so the mapping is checked whatever the model prefers."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

import logitgate as lg

from .conftest import MODEL
from .test_openai_sdk import USER, Person

REFUSE = {"logitgate": {"refusal": True}}
ONLY_REFUSAL = {"type": "json_schema", "json_schema": {"name": "nothing", "schema": False}}
ONLY_OWN_REFUSAL_KEY = {
    "type": "object",
    "properties": {"refusal": {"type": "string", "maxLength": 8}},
    "required": ["refusal"],
    "additionalProperties": False,
}


def _stream(server: str, **body: Any) -> list[dict[str, Any]]:
    """The stream's choice deltas."""
    body = {"model": MODEL, "messages": USER, "stream": True, "temperature": 0, "max_tokens": 40, **body}
    with httpx.stream("POST", f"{server}/v1/chat/completions", json=body, timeout=120) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    return [c["choices"][0] for c in chunks if c.get("choices")]


def test_refusal_is_message_refusal(client: openai.OpenAI) -> None:
    r = client.chat.completions.parse(
        model=MODEL, messages=USER, response_format=ONLY_REFUSAL, extra_body=REFUSE, max_tokens=40, temperature=0
    )
    m = r.choices[0].message
    assert r.choices[0].finish_reason == "stop"
    assert m.content is None and m.parsed is None
    assert isinstance(m.refusal, str) and m.refusal


def test_schema_made_with_with_refusal_offers_it(client: openai.OpenAI) -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "nothing", "schema": lg.with_refusal(False)}}
    r = client.chat.completions.create(model=MODEL, messages=USER, response_format=rf, max_tokens=40, temperature=0)
    m = r.choices[0].message
    assert m.content is None and isinstance(m.refusal, str) and m.refusal


def test_answer_with_refusal_offered_parses(client: openai.OpenAI) -> None:
    r = client.chat.completions.parse(
        model=MODEL, messages=USER, response_format=Person, extra_body=REFUSE, max_tokens=40, temperature=0
    )
    m = r.choices[0].message
    assert m.refusal is None and isinstance(m.parsed, Person)


def test_no_refusal_unless_offered(client: openai.OpenAI) -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "own", "schema": ONLY_OWN_REFUSAL_KEY}}
    r = client.chat.completions.create(model=MODEL, messages=USER, response_format=rf, max_tokens=20, temperature=0)
    m = r.choices[0].message
    assert m.refusal is None and list(json.loads(m.content or "")) == ["refusal"]


def test_streamed_refusal(server: str) -> None:
    choices = _stream(server, response_format=ONLY_REFUSAL, **REFUSE)
    refusals = [c["delta"]["refusal"] for c in choices if c["delta"].get("refusal")]
    assert len(refusals) == 1 and refusals[0]
    assert "".join(c["delta"].get("content") or "" for c in choices) == ""
    assert choices[-1]["finish_reason"] == "stop"


def test_streamed_answer_with_refusal_offered(server: str, client: openai.OpenAI) -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": Person.model_json_schema()}}
    choices = _stream(server, response_format=rf, **REFUSE)
    streamed = "".join(c["delta"].get("content") or "" for c in choices)
    assert not any(c["delta"].get("refusal") for c in choices)
    whole = client.chat.completions.create(
        model=MODEL,
        messages=USER,
        response_format=rf,
        extra_body=REFUSE,
        max_tokens=40,
        temperature=0,  # type: ignore[arg-type]
    )
    assert streamed == whole.choices[0].message.content and Person.model_validate_json(streamed)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (REFUSE, "logitgate.refusal"),  # no schema to offer it with
        ({"logitgate": {"refusal": True, "typo": 1}, "response_format": ONLY_REFUSAL}, "logitgate.typo"),
        ({**REFUSE, "structured_outputs": {"regex": "a+"}}, "logitgate.refusal"),
    ],
)
def test_refusal_option_errors(server: str, body: dict[str, Any], param: str) -> None:
    r = httpx.post(
        f"{server}/v1/chat/completions", json={"model": MODEL, "messages": USER, "max_tokens": 4, **body}, timeout=60
    )
    assert r.status_code == 400
    assert r.json()["error"]["param"] == param
