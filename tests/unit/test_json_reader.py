"""The one reader of users' JSON text (logitgate._json_reader): each failure names its kind."""

from __future__ import annotations

import pytest

import logitgate as lg
from logitgate._json_reader import JsonTextError, read_json, text_nesting


@pytest.mark.parametrize(
    ("text", "problem", "says"),
    [
        ("{", "syntax", "is not valid JSON"),
        (b"\xff{}", "syntax", "is not UTF-8"),
        ("[" + "9" * 5000 + "]", "digits", "holds an integer of more than 4,300 digits"),
        ("[" * 100_000 + "]" * 100_000, "nesting", "is nested deeper than"),
    ],
    ids=["syntax", "not-utf8", "digits", "nesting"],
)
def test_each_failure_has_its_kind(text: str | bytes, problem: str, says: str) -> None:
    with pytest.raises(JsonTextError) as e:
        read_json(text)
    assert e.value.problem == problem and e.value.reason.startswith(says)


def test_reads_json() -> None:
    assert read_json(b'{"a": [1, 2.5, "\\u00e9"]}') == {"a": [1, 2.5, "é"]}


def test_text_nesting_skips_strings() -> None:
    assert text_nesting('{"a": "[[[{", "b": [[1], {"c": []}]}') == 4
    assert text_nesting("[" * 100_000) == 100_000  # iterative


def test_lint_reports_a_huge_integer_as_a_schema_error() -> None:
    """Before the shared reader, lint let json's plain ValueError through."""
    with pytest.raises(lg.SchemaError) as e:
        lg.lint('{"maxLength": ' + "9" * 5000 + "}", target="openai")
    assert e.value.code == "schema-json" and "4,300 digits" in str(e.value)
