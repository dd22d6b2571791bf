"""The python example of docs/sglang.md runs and prints what its comments say."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.sglang

DOC = Path(__file__).resolve().parents[2] / "docs" / "sglang.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
PRINTS = re.compile(r"^\s*print\(.*#\s*-> (.*)$", re.M)


def test_docs_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = [b for b in BLOCK.findall(DOC.read_text(encoding="utf-8")) if b.startswith("# needs: sglang")]
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/sglang.md", "exec"), {"__name__": "__doc_example__"})
    printed = capsys.readouterr().out.splitlines()
    expected = PRINTS.findall(blocks[0])
    assert expected and printed == expected, printed
