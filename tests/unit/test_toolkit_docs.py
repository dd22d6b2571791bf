"""docs/toolkit.md's ```console examples: each ``$ logitgate ...`` line runs and prints the
lines under it (its ```python blocks run in tests/unit/test_docs.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from logitgate.cli.main import main

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "toolkit.md"
CONSOLE = re.compile(r"```console\n(.*?)```", re.S)


def console_examples() -> list[tuple[str, str]]:
    out = []
    for block in CONSOLE.findall(DOC.read_text(encoding="utf-8")):
        command, printed = None, []
        for line in block.splitlines():
            if line.startswith("$ "):
                if command:
                    out.append((command, "\n".join(printed)))
                command, printed = line[2:], []
            else:
                printed.append(line)
        if command:
            out.append((command, "\n".join(printed)))
    return out


def test_console_examples_are_found() -> None:
    assert len(console_examples()) >= 2


@pytest.mark.parametrize(("command", "printed"), console_examples(), ids=lambda v: str(v)[:40])
def test_console_example_prints_its_output(
    command: str, printed: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    argv = shlex.split(command)
    assert argv[0] == "logitgate"
    main(argv[1:])
    assert capsys.readouterr().out.rstrip("\n") == printed
