"""``logitgate lint`` and ``logitgate inspect``: output formats and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logitgate.cli.main import main

CLEAN = {
    "type": "object",
    "properties": {"name": {"type": ["string", "null"], "pattern": "^[A-Za-z ]{1,40}$"}},
    "required": ["name"],
    "additionalProperties": False,
}


def _write(tmp_path: Path, schema: object) -> str:
    p = tmp_path / "schema.json"
    p.write_text(json.dumps(schema), encoding="utf-8")
    return str(p)


def test_lint_clean_schema_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", _write(tmp_path, CLEAN)]) == 0
    assert capsys.readouterr().out.strip() == "0 errors, 0 warnings, 0 infos"


def test_lint_errors_exit_one_and_json_lists_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = {**CLEAN, "additionalProperties": True}
    assert main(["lint", _write(tmp_path, schema), "--format", "json"]) == 1
    (f,) = json.loads(capsys.readouterr().out)
    assert (f["code"], f["pointer"], f["severity"]) == ("openai-additional-properties", "#", "error")


def test_lint_target_logitgate_and_a_tool_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", _write(tmp_path, CLEAN), "--target", "logitgate"]) == 0
    assert main(["lint", _write(tmp_path, [CLEAN] * 21), "--target", "anthropic", "--format", "json"]) == 1
    out = capsys.readouterr().out
    assert "anthropic-too-many-tools" in out and "#/20/properties" not in out


def test_lint_missing_file_is_a_typed_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(tmp_path / "nope.json")]) == 2
    assert "[file-not-found]" in capsys.readouterr().err
