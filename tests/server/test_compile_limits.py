"""A structure's compile under the server: stopped past the compile timeout (a 400 naming the
parameter), cancelled when its client goes away (the compile thread is freed for the next)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from tests.pathological import PATHOLOGICAL

import logitgate as lg
from logitgate.server.protocol import ApiError
from logitgate.server.structures import GrammarCache, StructureSpec

PARAM = "response_format.json_schema.schema"
SLACK_S = 10.0  # far above an interrupt's latency, far below the pathological compile


def _spec(schema: Any) -> StructureSpec:
    return StructureSpec("json_schema", json.dumps(schema), strict=False, param=PARAM)


def _cache(timeout: float | None) -> GrammarCache:
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)])
    return GrammarCache(lg.Compiler(vocab), max_bytes=1 << 24, max_source_bytes=1 << 20, compile_timeout=timeout)


def test_compile_timeout_is_a_400_naming_the_parameter() -> None:
    cache = _cache(0.5)
    start = time.perf_counter()
    with pytest.raises(ApiError) as e:
        asyncio.run(cache.compile(_spec(PATHOLOGICAL)))
    assert time.perf_counter() - start < 0.5 + SLACK_S
    body = e.value.body()["error"]
    assert (e.value.status, body["code"], body["param"]) == (400, "compile-timeout", PARAM)
    assert "0.5 seconds" in body["message"]
    # the cache goes on compiling
    ok = asyncio.run(cache.compile(_spec({"type": "integer"})))
    assert ok.memory_bytes > 0
    cache.close()


def test_cancelled_compile_is_a_499() -> None:
    cache = _cache(None)
    token = lg.CancelToken()
    threading.Timer(0.3, token.cancel).start()
    start = time.perf_counter()
    with pytest.raises(ApiError) as e:
        asyncio.run(cache.compile(_spec(PATHOLOGICAL), token))
    assert time.perf_counter() - start < 0.3 + SLACK_S
    assert (e.value.status, e.value.body()["error"]["code"]) == (499, "client_closed")
    cache.close()


def test_client_gone_cancels_its_compile(server: str) -> None:
    """Two clients give up on pathological schemas (both compile threads busy for the compile
    timeout if their compiles ran on); a new schema is then compiled and answered at once."""
    import httpx

    from .conftest import MODEL

    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PATHOLOGICAL}},
    }

    def give_up() -> None:
        with pytest.raises(httpx.TimeoutException):
            httpx.post(f"{server}/v1/chat/completions", json=body, timeout=1.5)

    quitters = [threading.Thread(target=give_up) for _ in range(2)]
    for t in quitters:
        t.start()
    for t in quitters:
        t.join()
    time.sleep(1.0)  # the server notices the disconnects (it polls every 0.25 s)
    fresh = {"type": "object", "properties": {f"k{time.time_ns()}": {"type": "integer"}}}  # not cached
    start = time.perf_counter()
    r = httpx.post(
        f"{server}/v1/chat/completions",
        json={**body, "response_format": {"type": "json_schema", "json_schema": {"name": "f", "schema": fresh}}},
        timeout=120,
    )
    assert r.status_code == 200
    assert time.perf_counter() - start < 20.0  # not behind the abandoned compiles (30 s timeout)
