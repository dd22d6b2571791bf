"""Must-show 1, served: vLLM's OpenAI server with the logitgate processor (loaded through its
entry point); requests constrained through ``vllm_xargs``, a bad option answered with 400, and
the server still serving afterwards."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vllm_cases import LIST_GBNF, PERSON_SCHEMA, PHONE_REGEX, SENTIMENTS, check_output
from vllm_support import vllm_env

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # vLLM starts in minutes here

STARTUP_S = 600  # the server is ready in about two minutes on two loaded cores


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import httpx

    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--max-model-len", "1024", "--max-num-seqs", "8"]
    cmd += ["--served-model-name", "smollm2", "--enforce-eager"]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=vllm_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"vLLM server exited {proc.returncode}:\n{log.read_text()[-6000:]}")
            try:
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"vLLM server not ready in {STARTUP_S} s:\n{log.read_text()[-6000:]}")
            time.sleep(2)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _chat(base: str, content: str, xargs: dict[str, Any] | None, **body: Any) -> Any:
    import httpx

    payload = {"model": "smollm2", "messages": [{"role": "user", "content": content}], "max_tokens": 96}
    payload.update(body)
    if xargs is not None:
        payload["vllm_xargs"] = xargs
    return httpx.post(f"{base}/v1/chat/completions", json=payload, timeout=300)


def test_vllm_xargs_constrain_chat_requests(server: str) -> None:
    cases = [
        ("Invent a person as JSON.", {"json_schema": PERSON_SCHEMA, "whitespace": "compact"}),
        ("Give a US phone number.", {"regex": PHONE_REGEX}),
        ("Is 'great film' positive, negative or neutral?", {"choice": SENTIMENTS}),
        ("List a few small numbers.", {"grammar": LIST_GBNF}),
    ]
    for content, spec in cases:
        r = _chat(server, content, {"logitgate": json.dumps(spec)}, temperature=0.7, seed=7)
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        assert choice["finish_reason"] == "stop", choice
        check_output(spec, choice["message"]["content"])


def test_completions_endpoint_too(server: str) -> None:
    import httpx

    body = {
        "model": "smollm2",
        "prompt": "The answer is",
        "max_tokens": 16,
        "vllm_xargs": {"logitgate": json.dumps({"choice": ["yes", "no"]})},
    }
    r = httpx.post(f"{server}/v1/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] in ("yes", "no")


@pytest.mark.parametrize(
    ("xargs", "message"),
    [
        ({"logitgate": json.dumps({"regex": "a(", "strict": True})}, "unknown option strict"),
        ({"logitgate": json.dumps({"regex": "a("})}, "regex"),
        ({"logitgate": "{not json"}, "not valid JSON"),
        ({"logitgate": json.dumps({"json_schema": {"type": "nonsense"}})}, "json_schema"),
    ],
)
def test_bad_option_is_400_and_server_keeps_serving(server: str, xargs: dict[str, Any], message: str) -> None:
    r = _chat(server, "Hello", xargs)
    assert r.status_code == 400, r.text
    assert message in r.text
    ok = _chat(server, "Say yes or no.", {"logitgate": json.dumps({"choice": ["yes", "no"]})})
    assert ok.status_code == 200, ok.text
    assert ok.json()["choices"][0]["message"]["content"] in ("yes", "no")


def test_doc_http_example(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    from test_docs_examples import doc_block

    code = doc_block("test_server.py").replace("http://127.0.0.1:8000", server)
    exec(compile(code, "docs/vllm.md[http]", "exec"), {"__name__": "__doc_example__"})
    assert capsys.readouterr().out.strip() in ("positive", "negative")
