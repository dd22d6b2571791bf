"""lg.enforcement_report: per pointer, enforced / departure / dropped / not-enforced, and the
token budget; `logitgate inspect` prints it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import logitgate as lg
from logitgate.cli.main import main

SCHEMA = {
    "title": "Ticket",
    "type": "object",
    "properties": {
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "uniqueItems": True, "maxItems": 3},
        "priority": {"type": "integer", "minimum": 1, "maximum": 5},
        "link": {"type": "string", "format": "iri"},
        "when": {"type": "string", "format": "x-custom", "x-owner": "ops"},
    },
    "required": ["tags", "priority"],
    "additionalProperties": False,
    "x-vendor": True,
}


def _by(report: lg.EnforcementReport) -> dict[tuple[str, str], str]:
    return {(e.pointer, e.keyword): e.status for e in report.entries}


def test_every_keyword_is_classified() -> None:
    r = lg.enforcement_report(SCHEMA)
    got = _by(r)
    assert got[("#/properties/tags", "uniqueItems")] == "dropped"
    assert got[("#/properties/link", "format")] == "dropped"
    assert got[("#/properties/when", "format")] == "not-enforced"
    assert got[("#/properties/priority", "minimum")] == "departure"
    assert got[("#/properties/tags", "maxItems")] == "enforced"
    assert got[("#/properties/tags/items", "maxLength")] == "enforced"
    assert got[("#", "title")] == "not-enforced"
    assert got[("#", "x-vendor")] == got[("#/properties/when", "x-owner")] == "not-enforced"
    assert got[("#", "additionalProperties")] == "enforced"
    assert r.error is None and r.budget is not None and r.budget.max_bytes is None  # the link is unbounded
    assert "#/properties/link" in r.budget.unbounded_by[0]


def test_report_of_a_refused_schema_names_the_error() -> None:
    r = lg.enforcement_report({"type": "object", "properties": {"a": {"$ref": "#/$defs/none"}}})
    assert r.budget is None and r.error is not None and r.error.startswith("#/properties/a/$ref")


def test_pydantic_validators_are_listed_as_not_enforced() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Span(pydantic.BaseModel):
        start: int
        end: int

        @pydantic.model_validator(mode="after")
        def ordered(self) -> Span:
            return self

    (entry,) = [e for e in lg.enforcement_report(Span).entries if e.keyword == "validators"]
    assert entry.status == "not-enforced" and "ordered" in entry.note


def test_text_and_dict_forms() -> None:
    r = lg.enforcement_report(SCHEMA)
    text = r.to_text()
    assert "  dropped       uniqueItems: " in text and text.splitlines()[-1].startswith("max: unbounded")
    d = r.to_dict()
    assert d["budget"]["max_tokens"] is None and len(d["entries"]) == len(r.entries)


def test_inspect_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(SCHEMA), encoding="utf-8")
    from logitgate.models import default_gguf_path

    try:
        gguf = str(default_gguf_path())
    except FileNotFoundError:
        pytest.skip("embedded model not installed")
    assert main(["inspect", "--schema", str(p), "--vocab", gguf, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"pointer": "#/properties/tags", "keyword": "uniqueItems", "status": "dropped"}.items() <= next(
        e for e in out["entries"] if e["keyword"] == "uniqueItems"
    ).items()
    bad = tmp_path / "bad.json"
    bad.write_text('{"$ref": "#/nowhere"}', encoding="utf-8")
    assert main(["inspect", "--schema", str(bad), "--vocab", gguf]) == 1
    assert capsys.readouterr().out.startswith("not compiled: #/$ref")
