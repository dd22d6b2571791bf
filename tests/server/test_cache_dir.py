"""``logitgate serve --cache-dir``: a restarted server answers a structure it compiled before
from the directory (``/metrics`` shows no compile and a disk hit); a directory it cannot use
is a usage error at startup."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import MODEL, serve

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 16}, "year": {"type": "integer"}},
    "required": ["city", "year"],
    "additionalProperties": False,
}
BODY: dict[str, Any] = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Paris hosted the Olympics in 1924. Extract the city and year."}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "event", "schema": SCHEMA, "strict": True}},
    "max_tokens": 24,
    "temperature": 0,
}
CLI = str(Path(sys.executable).with_name("logitgate"))


def _metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {m[1]: float(m[2]) for m in re.finditer(r"^(logitgate_compile_cache_\w+) (\S+)$", text, re.M)}


def _answer(url: str) -> str:
    r = httpx.post(f"{url}/v1/chat/completions", json=BODY, timeout=120)
    assert r.status_code == 200, r.text
    return str(r.json()["choices"][0]["message"]["content"])


def test_restarted_server_answers_from_the_cache_dir(tmp_path: Path) -> None:
    cache = tmp_path / "grammars"
    with serve("--cache-dir", str(cache), "--cache-dir-bytes", str(64 << 20)) as url:
        before = _metrics(url)
        first = _answer(url)
        after = _metrics(url)
    assert after["logitgate_compile_cache_compiles_total"] == before["logitgate_compile_cache_compiles_total"] + 1
    assert after["logitgate_compile_cache_disk_misses_total"] >= 1
    assert after["logitgate_compile_cache_disk_hits_total"] == 0
    assert after["logitgate_compile_cache_disk_bytes"] > 0
    assert list(cache.glob("*.lgc"))

    with serve("--cache-dir", str(cache)) as url:
        again = _answer(url)
        m = _metrics(url)
    assert m["logitgate_compile_cache_compiles_total"] == 0  # nothing compiled
    assert m["logitgate_compile_cache_disk_hits_total"] >= 1
    assert m["logitgate_compile_cache_disk_errors_total"] == 0
    assert m["logitgate_compile_cache_misses_total"] == 1  # (the server's cache in memory was empty)
    assert again == first  # the same automaton, greedy: the same answer


def test_without_cache_dir_the_disk_metrics_are_zero(server: str) -> None:
    m = _metrics(server)
    assert m["logitgate_compile_cache_disk_hits_total"] == 0 and m["logitgate_compile_cache_disk_bytes"] == 0


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--cache-dir", "{file}"], "cannot be used as a directory"),
        (["--cache-dir", "{file}/below"], "cannot be used as a directory"),
        (["--cache-dir", "{dir}", "--cache-dir-bytes", "0"], "--cache-dir-bytes N: N must be >= 1"),
        (["--cache-dir-bytes", "1000"], "--cache-dir-bytes needs --cache-dir"),
    ],
)
def test_unusable_cache_dir_is_a_usage_error(tmp_path: Path, flags: list[str], says: str) -> None:
    file = tmp_path / "a-file"
    file.write_text("not a directory")
    args = [f.format(file=file, dir=tmp_path / "d") for f in flags]
    r = subprocess.run([CLI, "serve", "--port", "1", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert "logitgate: error [usage]: " in r.stderr and says in r.stderr
    assert "serving" not in r.stderr  # refused before the model loads
