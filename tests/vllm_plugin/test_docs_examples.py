"""The offline example of docs/vllm.md runs as a script (vLLM spawns its engine core, so the
example carries the ``__main__`` guard a user's script needs) and prints what it says."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from vllm_support import REPO_ROOT, run_script

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # vLLM starts in minutes here

BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def doc_block(marker: str) -> str:
    """The python block of docs/vllm.md whose first line contains ``marker``."""
    text = (REPO_ROOT / "docs" / "vllm.md").read_text(encoding="utf-8")
    found = [b for b in BLOCK.findall(text) if marker in b.splitlines()[0]]
    assert len(found) == 1, f"{len(found)} blocks marked {marker!r}"
    return found[0]


def test_offline_example(tmp_path: Path) -> None:
    script = tmp_path / "offline_example.py"
    script.write_text(doc_block("test_docs_examples.py"))
    proc = run_script(str(script), timeout=900)
    printed = [ast.literal_eval(line) for line in proc.stdout.splitlines() if line.startswith(("'", '"'))]
    assert len(printed) == 3, proc.stdout
    person = json.loads(printed[0])
    assert set(person) == {"name"} and isinstance(person["name"], str) and len(person["name"]) <= 12
    assert re.fullmatch(r"\d{3}-\d{4}", printed[1]), printed[1]
