"""lg.extract's retry loop with a scripted generate (no model): the feedback turn carries the
output and the errors; attempts, tokens and every error are reported."""

from __future__ import annotations

from typing import Any

import pytest

import logitgate as lg

pydantic = pytest.importorskip("pydantic")
pytest.importorskip("torch")

from logitgate import generation  # noqa: E402
from logitgate.toolkit.extract import feedback_message  # noqa: E402


class Span(pydantic.BaseModel):
    start: int
    end: int

    @pydantic.model_validator(mode="after")
    def ordered(self) -> Span:
        if self.end <= self.start:
            raise ValueError("end must be after start")
        return self


def _scripted(monkeypatch: pytest.MonkeyPatch, outputs: list[str], complete: bool = True) -> list[list[dict[str, str]]]:
    seen: list[list[dict[str, str]]] = []

    def fake_generate(model: Any, tokenizer: Any, prompt: Any, **kw: Any) -> generation.GenerationResult:
        seen.append([dict(m) for m in prompt])
        text = outputs[len(seen) - 1]
        return generation.GenerationResult(
            text=text,
            finish_reason="stop" if complete else "length",
            complete=complete,
            prompt_tokens=10,
            completion_tokens=len(text),
            forced_tokens=0,
            forward_passes=1,
            timings=generation.Timings(),
            kind="pydantic",
            _pydantic_model=kw["pydantic"],
        )

    monkeypatch.setattr(generation, "generate", fake_generate)
    return seen


def test_retry_fixes_and_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scripted(monkeypatch, ['{"start":5,"end":3}', '{"start":3,"end":5}'])
    r = lg.extract(None, None, "span?", Span, retries=2)
    assert (r.value.start, r.value.end, r.attempts) == (3, 5, 2)
    assert r.completion_tokens == 38 and r.prompt_tokens == 20
    assert [e["msg"] for e in r.errors[0]] == ["Value error, end must be after start"]
    assert seen[1][1] == {"role": "assistant", "content": '{"start":5,"end":3}'}
    assert seen[1][2]["role"] == "user" and "end must be after start" in seen[1][2]["content"]


def test_limit_raises_with_every_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    _scripted(monkeypatch, ['{"start":5,"end":3}'] * 3)
    with pytest.raises(lg.ExtractionError) as e:
        lg.extract(None, None, [{"role": "user", "content": "span?"}], Span, retries=2)
    assert e.value.attempts == 3 and len(e.value.all_errors) == 3 and len(e.value.outputs) == 3
    assert isinstance(e.value, lg.OutputValidationError) and e.value.text == '{"start":5,"end":3}'


def test_truncation_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _scripted(monkeypatch, ['{"start":5', "never"], complete=False)
    with pytest.raises(lg.TruncatedOutput):
        lg.extract(None, None, "span?", Span)
    assert len(seen) == 1


@pytest.mark.parametrize("kw", [{"retries": -1}, {"retries": 1.5}, {"json_schema": {}}, {"parse": True}])
def test_bad_arguments(kw: dict[str, Any]) -> None:
    with pytest.raises(lg.UsageError):
        lg.extract(None, None, "x", Span, **kw)


def test_feedback_message_lists_errors() -> None:
    msg = feedback_message('{"a":1}', [{"loc": ["a"], "msg": "too small"}, {"loc": [], "msg": "bad"}])
    assert '{"a":1}' in msg and "- a: too small" in msg and "- value: bad" in msg
