"""``logitgate serve --trace``: the traces of recent requests at ``/trace/{request_id}``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from .conftest import MODEL, serve

CAPACITY = 3
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "maximum": 150}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
USER = [{"role": "user", "content": "Alice is 31 years old. Extract the person."}]


@pytest.fixture(scope="module")
def traced() -> Iterator[str]:
    with serve("--trace", str(CAPACITY)) as url:
        yield url


def _chat(url: str, **body: Any) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": MODEL, "messages": USER, **body}, timeout=120)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _page_data(page: str) -> dict[str, Any]:
    m = re.search(r'<script id="trace-data" type="application/json">(.*?)</script>', page, re.S)
    assert m is not None
    return dict(json.loads(m.group(1)))


def test_trace_page_of_a_request(traced: str) -> None:
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": SCHEMA}}
    reply = _chat(traced, response_format=rf, max_tokens=32, temperature=0)
    content = reply["choices"][0]["message"]["content"]
    r = httpx.get(f"{traced}/trace/{reply['id']}", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    data = _page_data(r.text)
    assert data["title"] == reply["id"] and data["kind"] == "json" and data["complete"]
    assert data["text"] == content
    steps = data["steps"]
    merged = sum(1 for s in steps if s[3] & 2)
    assert len(steps) - merged == reply["usage"]["completion_tokens"]
    assert "".join(s[1] for s in steps if not s[3] & 2) == content
    forced = [s for s in steps if s[3] & 1]
    sampled = [s for s in steps if not s[3] & 1]
    assert forced and all(s[2] == -1 for s in forced)  # '{"name":"' is forced
    assert sampled and all(s[2] >= 1 and s[10] and s[11] and s[8] is not None for s in sampled)
    assert {s[6] for s in sampled} >= {"/name", "/age"}
    assert httpx.get(f"{traced}/trace/{reply['id']}", params={"choice": 1}, timeout=30).status_code == 404


def test_trace_of_each_choice_and_of_streams(traced: str) -> None:
    reply = _chat(traced, n=2, max_tokens=6, temperature=1, seed=7)
    for i, choice in enumerate(reply["choices"]):
        data = _page_data(httpx.get(f"{traced}/trace/{reply['id']}", params={"choice": i}, timeout=30).text)
        assert data["kind"] == "none" and data["text"] == choice["message"]["content"]
        assert all(s[2] == -1 for s in data["steps"])  # unconstrained: no mask
    body = {"model": MODEL, "prompt": "Colors: red,", "max_tokens": 5, "temperature": 0, "stream": True}
    body["structured_outputs"] = {"regex": "[a-z ,]{1,20}"}
    with httpx.stream("POST", f"{traced}/v1/completions", json=body, timeout=120) as r:
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
    data = _page_data(httpx.get(f"{traced}/trace/{chunks[0]['id']}", timeout=30).text)
    assert data["kind"] == "text" and data["text"] == text and len(data["steps"]) == 5


def test_keeps_the_last_requests(traced: str) -> None:
    ids = [_chat(traced, max_tokens=2, temperature=0)["id"] for _ in range(CAPACITY + 1)]
    assert httpx.get(f"{traced}/trace/{ids[-1]}", timeout=30).status_code == 200
    r = httpx.get(f"{traced}/trace/{ids[0]}", timeout=30)
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "trace_not_found" and f"last {CAPACITY} requests" in err["message"]


def test_unknown_request_id(traced: str) -> None:
    r = httpx.get(f"{traced}/trace/chatcmpl-nope", timeout=30)
    assert r.status_code == 404 and r.json()["error"]["code"] == "trace_not_found"


def test_tracing_off_says_how_to_turn_it_on(server: str) -> None:
    reply = _chat(server, max_tokens=2, temperature=0)
    r = httpx.get(f"{server}/trace/{reply['id']}", timeout=30)
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["code"] == "tracing_disabled" and "--trace" in err["message"]


def test_engine_records_what_generate_records(traced: str) -> None:
    """The server's trace of a greedy request is lg.generate's trace of the same request."""
    import torch

    import logitgate as lg
    from logitgate.models import load_model
    from logitgate.trace import Trace

    rf = {"type": "json_schema", "json_schema": {"name": "p", "schema": SCHEMA}}
    reply = _chat(traced, response_format=rf, max_tokens=256, temperature=0)
    served = Trace.from_dict(_page_data(httpx.get(f"{traced}/trace/{reply['id']}", timeout=30).text))
    model, tokenizer = load_model(None, dtype=torch.float32)
    local = lg.generate(model, tokenizer, USER, json_schema=SCHEMA, max_tokens=256, temperature=0, trace=True).trace
    assert served.text == local.text and len(served) == len(local)
    for a, b in zip(served, local, strict=True):
        assert (a.token_id, a.allowed, a.forced, a.merged, a.position) == (
            b.token_id,
            b.allowed,
            b.forced,
            b.merged,
            b.position,
        )
        assert [t.token_id for t in a.top_after] == [t.token_id for t in b.top_after]
        if b.prob_after is not None:
            assert a.prob_after == pytest.approx(b.prob_after, abs=2e-3)
