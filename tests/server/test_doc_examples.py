"""The README's server examples (the curl command and the ``openai`` SDK block, and any
``# needs: logitgate serve`` block of docs/server.md) run against the test server."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", REPO / "docs" / "server.md"]
DOC_URL = "http://127.0.0.1:8000"


def _blocks(lang: str) -> list[str]:
    out = []
    for path in DOCS:
        out += re.findall(rf"```{lang}\n(.*?)```", path.read_text(encoding="utf-8"), re.S)
    return out


CURL = [b for b in _blocks("bash") if b.startswith("curl ") and DOC_URL in b]
SDK = [b for b in _blocks("python") if b.startswith("# needs: logitgate serve")]


def test_examples_are_found() -> None:
    assert CURL and SDK


@pytest.mark.parametrize("command", CURL)
def test_curl_example(server: str, command: str) -> None:
    out = subprocess.run(
        ["bash", "-c", command.replace(DOC_URL, server)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    reply = json.loads(out)
    assert reply["object"] in ("chat.completion", "text_completion")
    message = reply["choices"][0].get("message")
    if message is not None and "response_format" in command:
        assert isinstance(json.loads(message["content"]), dict)


@pytest.mark.parametrize("code", SDK)
def test_sdk_example(server: str, code: str) -> None:
    scope: dict[str, object] = {"__name__": "__doc_example__"}
    exec(compile(code.replace(DOC_URL, server), "docs example", "exec"), scope)
    if "person" in scope:
        assert type(scope["person"]).__name__ == "Person"
