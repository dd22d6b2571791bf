"""One ``logitgate serve`` process (the embedded SmolLM2) on 127.0.0.1 and a free port, shared
by the server tests; clients are the real ``openai`` SDK and ``httpx``."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")
httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")

MODEL = "smollm2-135m-instruct"
START_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(*flags: str) -> Iterator[str]:
    """A ``logitgate serve`` process with ``flags``; yields its base URL (``http://127.0.0.1:PORT``)."""
    port = _free_port()
    cli = Path(sys.executable).with_name("logitgate")
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"logitgate-serve-{port}.log"
    # One torch thread: on a loaded machine more threads spin against each other (several times slower).
    env = {**os.environ, "LOGITGATE_THREADS": os.environ.get("LOGITGATE_THREADS", "1")}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(cli), "serve", "--host", "127.0.0.1", "--port", str(port), *flags],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"logitgate serve exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"logitgate serve did not start in {START_TIMEOUT_S} s:\n{log.read_text()}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    """The shared server's base URL; the process ends with the session."""
    with serve() as url:
        yield url


@pytest.fixture(scope="session")
def client(server: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server}/v1", api_key="unused", timeout=120, max_retries=0)


@pytest.fixture(scope="session")
def model() -> object:
    """A tiny random Llama (2 layers, vocabulary 50) for the KV-cache tests: real transformers
    forward passes and caches, in milliseconds."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=50,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()
