"""lg.with_refusal: the output is the object or {"refusal": "..."}; GenerationResult.refusal
reads the second."""

from __future__ import annotations

import json
from typing import Any

import pytest

import logitgate as lg
from logitgate.toolkit.refusal import is_refusal_schema, refusal_of

ORDER = {
    "type": "object",
    "$defs": {"Id": {"type": "integer", "minimum": 1, "maximum": 9999}},
    "properties": {"order_id": {"$ref": "#/$defs/Id"}, "status": {"enum": ["open", "closed", "unknown"]}},
    "required": ["order_id", "status"],
    "additionalProperties": False,
}
BYTES = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])


def _accepts(g: lg.CompiledGrammar, text: str) -> bool:
    m = g.matcher()
    return all(m.accept(b) for b in text.encode()) and m.is_complete()


def test_both_the_object_and_a_refusal_are_accepted_nothing_else() -> None:
    g = lg.Compiler(BYTES).compile_json_schema(lg.with_refusal(ORDER), whitespace="compact")
    assert _accepts(g, '{"order_id":12,"status":"open"}')
    assert _accepts(g, '{"refusal":"The text names no order."}')
    assert not _accepts(g, '{"refusal":""}')  # an empty refusal says nothing
    assert not _accepts(g, '{"refusal":"x","order_id":1}')
    assert not _accepts(g, '{"order_id":0,"status":"open"}')


def test_refusal_length_is_bounded() -> None:
    g = lg.Compiler(BYTES).compile_json_schema(lg.with_refusal(ORDER, max_length=5), whitespace="compact")
    assert _accepts(g, '{"refusal":"12345"}') and not _accepts(g, '{"refusal":"123456"}')


def test_schema_is_marked_and_input_untouched() -> None:
    before = json.dumps(ORDER)
    s = lg.with_refusal(ORDER)
    assert is_refusal_schema(s) and not is_refusal_schema(ORDER)
    assert json.dumps(ORDER) == before


@pytest.mark.parametrize(
    ("text", "expected"),
    [('{"refusal":"no"}', "no"), ('{"order_id":1,"status":"open"}', None), ('{"refusal":"no"', None)],
)
def test_refusal_of(text: str, expected: str | None) -> None:
    assert refusal_of(text) == expected


def _result(text: str, allowed: bool, complete: bool = True) -> Any:
    pytest.importorskip("torch")
    from logitgate.generation import GenerationResult, Timings

    return GenerationResult(
        text=text,
        finish_reason="stop" if complete else "length",
        complete=complete,
        prompt_tokens=1,
        completion_tokens=1,
        forced_tokens=0,
        forward_passes=1,
        timings=Timings(),
        kind="json",
        _refusal_allowed=allowed,
    )


def test_generation_result_refusal() -> None:
    assert _result('{"refusal":"cannot tell"}', allowed=True).refusal == "cannot tell"
    assert _result('{"refusal":"cannot tell"}', allowed=False).refusal is None  # the schema's own property
    assert _result('{"order_id":1,"status":"open"}', allowed=True).refusal is None
    assert _result('{"refusal":"cann', allowed=True, complete=False).refusal is None


def test_lint_of_a_refusal_schema_runs() -> None:
    codes = {f.code for f in lg.lint(lg.with_refusal(ORDER), target="openai")}
    assert "openai-root-anyof" in codes  # OpenAI has message.refusal for this: use it there
