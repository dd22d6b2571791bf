"""Faults: each gets its answer, and the server serves the next request."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import openai
import pytest

from .conftest import MODEL


def _serves(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Say yes or no."}],
        max_tokens=4,
        temperature=0,
        extra_body={"structured_outputs": {"choice": ["yes", "no"]}},
    )
    assert r.choices[0].message.content in ("yes", "no")


def _active(server: str) -> float:
    m = re.search(r"^logitgate_active_sequences (\S+)$", httpx.get(f"{server}/metrics").text, re.M)
    assert m is not None
    return float(m.group(1))


def test_disconnect_mid_stream_frees_the_slot(client: openai.OpenAI, server: str) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Tell a long story."}],
        "max_tokens": 400,
        "temperature": 1.0,
        "stream": True,
    }
    with httpx.stream("POST", f"{server}/v1/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))
    deadline = time.monotonic() + 30
    while _active(server) > 0:
        assert time.monotonic() < deadline, "the disconnected stream still holds its row"
        time.sleep(0.2)
    _serves(client)


def test_disconnect_while_waiting_frees_the_slot(client: openai.OpenAI, server: str) -> None:
    """A client that gives up on a (non-streamed) answer: its sequence leaves the batch."""
    # The special tokens (ids 0-16, the end of sequence among them) are banned, so the answer
    # cannot end before max_tokens, well past the client's timeout.
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Tell a long story."}],
        "max_tokens": 2000,
        "temperature": 1.0,
        "logit_bias": {str(i): -100 for i in range(17)},
    }
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{server}/v1/chat/completions", json=body, timeout=3.0)
    deadline = time.monotonic() + 30
    while _active(server) > 0:
        assert time.monotonic() < deadline, "the gone client's sequence still holds its row"
        time.sleep(0.2)
    _serves(client)


def test_schema_that_fails_to_compile(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=4,
            extra_body={"structured_outputs": {"json": {"type": "object", "properties": {"a": {"type": "nope"}}}}},
        )
    assert "/properties/a/type" in str(info.value)
    _serves(client)


def test_huge_schema_refused(client: openai.OpenAI) -> None:
    props = {f"field_{i:06d}": {"type": "string", "description": "x" * 40} for i in range(6000)}
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=4,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "big", "schema": {"type": "object", "properties": props}},
            },
        )
    assert info.value.status_code == 413 and "limit" in str(info.value)
    _serves(client)


def test_oversized_body_refused(client: openai.OpenAI, server: str) -> None:
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x" * (5 * 1024 * 1024)}]})
    r = httpx.post(f"{server}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    _serves(client)


def test_malformed_json(client: openai.OpenAI, server: str) -> None:
    r = httpx.post(f"{server}/v1/chat/completions", content=b'{"model": ', headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_json" and err["type"] == "invalid_request_error" and "message" in err
    _serves(client)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"model": "m", "messages": [], "max_tokens": ' + b"9" * 5000 + b"}", "4,300 digits"),
        (b"[" * 100_000 + b"]" * 100_000, "nested deeper than"),
    ],
    ids=["huge-integer", "deep-nesting"],
)
def test_json_that_python_cannot_read(client: openai.OpenAI, server: str, body: bytes, says: str) -> None:
    """Valid JSON past what Python's parser takes is a 400, not a 500."""
    r = httpx.post(f"{server}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_json" and says in err["message"]
    _serves(client)


_HI = '"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4'


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (
            "chat/completions",
            '"messages": [{"role": "user", "content": "a\\ud800b"}], "max_tokens": 4',
            "messages[0].content",
        ),
        (
            "chat/completions",
            '"messages": [{"role": "user", "content": [{"type": "text", "text": "\\udfff"}]}], "max_tokens": 4',
            "messages[0].content[0].text",
        ),
        ("chat/completions", _HI + ', "stop": ["x", "\\udc00"]', "stop[1]"),
        ("chat/completions", _HI + ', "structured_outputs": {"regex": "\\ud800+"}', "structured_outputs.regex"),
        (
            "chat/completions",
            _HI + ', "structured_outputs": {"choice": ["\\ud800", "b"]}',
            "structured_outputs.choice[0]",
        ),
        (
            "chat/completions",
            _HI + ', "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": '
            '{"type": "object", "properties": {"\\ud800": {"type": "string"}}}}}',
            "response_format.json_schema.schema.properties",
        ),
        ("completions", '"prompt": "\\ud800", "max_tokens": 4', "prompt"),
    ],
    ids=["content", "content-part", "stop", "regex", "choice", "schema-key", "prompt"],
)
def test_lone_surrogate(client: openai.OpenAI, server: str, path: str, body: str, param: str) -> None:
    """A JSON escape of a lone surrogate (valid JSON, not text) is a 400 naming where it is,
    not a 500 from the tokenizer or a compiler; the message stays printable."""
    raw = f'{{"model": "{MODEL}", {body}}}'.encode()
    r = httpx.post(f"{server}/v1/{path}", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_value" and err["param"] == param and "lone surrogate" in err["message"]
    _serves(client)


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1, 2**70])
def test_seed_out_of_range(client: openai.OpenAI, seed: int) -> None:
    """torch's generator takes seeds in [-2**63, 2**64 - 1]; past them used to fail the decode (500)."""
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=1.0, seed=seed
        )
    assert info.value.body["code"] == "invalid_value" and info.value.body["param"] == "seed"  # type: ignore[index]
    _serves(client)


def test_seed_at_the_ends_of_its_range(client: openai.OpenAI) -> None:
    for seed in (2**64 - 1, -(2**63)):
        r = client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2, temperature=1.0, seed=seed
        )
        assert r.choices[0].finish_reason == "length"


@pytest.mark.parametrize("text", ['{"const": ' + "9" * 5000 + "}", "[" * 100_000 + "]" * 100_000])
def test_schema_text_that_python_cannot_read(client: openai.OpenAI, text: str) -> None:
    """A schema given as JSON text (vLLM's ``structured_outputs.json`` may be one) that Python's
    parser cannot read is a 400 naming the field."""
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=4,
            extra_body={"structured_outputs": {"json": text}},
        )
    assert info.value.body["code"] == "invalid_schema"  # type: ignore[index]
    assert "structured_outputs" in info.value.body["param"]  # type: ignore[index]
    _serves(client)


def test_invalid_field(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], temperature=5)
    assert info.value.body["param"] == "temperature"  # type: ignore[index]
    _serves(client)


def test_invalid_field_in_a_list_is_named_with_its_index(client: openai.OpenAI) -> None:
    """Validation errors name list items as every other error does: ``messages[1].role``."""
    messages: Any = [{"role": "user", "content": "hi"}, {"role": "wizard", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4)
    assert info.value.body["param"] == "messages[1].role"  # type: ignore[index]
    _serves(client)


def test_unknown_model(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    assert info.value.body["code"] == "model_not_found"  # type: ignore[index]
    _serves(client)


def test_logit_bias_moves_the_sampled_token(client: openai.OpenAI, smollm2_vocab: Any) -> None:
    """A +100 bias makes a token the greedy choice; a token past the vocabulary, a key that is
    not a token id or a bias past ±100 is a 400 on ``logit_bias``."""
    word = next(i for i in range(smollm2_vocab.size) if smollm2_vocab.token_bytes(i) == b" banana")
    messages = [{"role": "user", "content": "Say hello."}]
    reply = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=1, temperature=0, logit_bias={str(word): 100}
    )
    assert reply.choices[0].message.content == " banana"
    for bias, says in [({"99999999": 1}, "not in the vocabulary"), ({"x": 1}, "token ids"), ({"5": 101}, "-100")]:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1, logit_bias=bias)
        assert info.value.body["param"] == "logit_bias" and says in info.value.body["message"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("field", "value"),
    [("functions", [{"name": "f", "parameters": {}}]), ("echo", True), ("best_of", 2), ("top_k", 5), ("min_tokens", 3)],
)
def test_parameters_that_would_change_the_output_are_refused(server: str, field: str, value: Any) -> None:
    """A parameter the server does not implement is a 400 naming it, not silently ignored."""
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2, field: value}
    r = httpx.post(f"{server}/v1/completions", json=body, timeout=60)
    assert r.status_code == 400
    err = r.json()["error"]
    assert (err["code"], err["param"]) == ("unsupported_parameter", field)


def test_parameters_at_their_neutral_value_are_accepted(server: str) -> None:
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2, "echo": False, "best_of": 1, "top_k": -1, "min_p": 0.0}
    assert httpx.post(f"{server}/v1/completions", json=body, timeout=60).status_code == 200
