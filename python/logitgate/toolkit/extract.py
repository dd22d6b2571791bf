"""``lg.extract``: constrained generation of a Pydantic model, then the model's own validation
(field and model validators, which no grammar can express); on a validation failure the
model's output and the errors go back to it as the next turn, up to ``retries`` times.

Truncation is not retried: a complete output is what the grammar guarantees only with enough
``max_tokens``, so :class:`~logitgate.TruncatedOutput` is raised as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import OutputValidationError, UsageError

if TYPE_CHECKING:
    from ..generation import GenerationResult

__all__ = ["ExtractionError", "ExtractionResult", "extract", "feedback_message"]


@dataclass
class ExtractionResult:
    """What :func:`extract` returns: the validated ``value``; ``attempts`` made (1 when the
    first output validated); ``errors`` holds each failed attempt's Pydantic error list, in
    order; ``outputs`` every attempt's text; token counts are summed over the attempts."""

    value: Any
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    errors: list[list[dict[str, Any]]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


class ExtractionError(OutputValidationError):
    """Every attempt of :func:`extract` failed validation. ``text`` is the last output,
    ``errors`` its errors; ``attempts``, ``all_errors``, ``outputs`` and the token counts cover
    every attempt."""

    code = "extract-failed"

    def __init__(self, result: ExtractionResult) -> None:
        self.attempts = result.attempts
        self.all_errors = result.errors
        self.outputs = result.outputs
        self.prompt_tokens = result.prompt_tokens
        self.completion_tokens = result.completion_tokens
        last = result.errors[-1] if result.errors else []
        super().__init__(
            result.outputs[-1] if result.outputs else "",
            f"no output passed validation in {result.attempts} attempt(s); last: {_summary(last)}",
            last,
        )


def feedback_message(text: str, errors: list[dict[str, Any]]) -> str:
    """The user turn that reports a failed validation back to the model."""
    lines = [f"- {_where(e)}: {e.get('msg', 'invalid')}" for e in errors]
    return (
        "Your answer was:\n"
        + text
        + "\n\nIt failed validation:\n"
        + "\n".join(lines)
        + "\n\nAnswer again with corrected JSON."
    )


def extract(
    model: Any,
    tokenizer: Any,
    prompt: str | Sequence[dict[str, str]],
    pydantic_model: Any,
    *,
    retries: int = 2,
    **generate_options: Any,
) -> ExtractionResult:
    """Generates an instance of ``pydantic_model`` for ``prompt`` (a string or a message list)
    and validates it; a failed validation is fed back (the output as the assistant's turn, the
    errors as the next user turn) and generation runs again, at most ``retries`` more times.
    ``generate_options`` go to :func:`~logitgate.generate` (``max_tokens``, ``temperature``...).
    Raises :class:`ExtractionError` when no attempt validates, and
    :class:`~logitgate.TruncatedOutput` when an output is cut by ``max_tokens``."""
    if not isinstance(retries, int) or retries < 0:
        raise UsageError(f"retries must be an integer >= 0, got {retries!r}")
    for forbidden in ("json_schema", "pydantic", "regex", "ebnf", "choice", "grammar", "parse"):
        if forbidden in generate_options:
            raise UsageError(f"extract sets {forbidden!r} itself")
    from .. import generation

    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    result = ExtractionResult(value=None, attempts=0, prompt_tokens=0, completion_tokens=0)
    for _ in range(retries + 1):
        res: GenerationResult = generation.generate(
            model, tokenizer, messages, pydantic=pydantic_model, **generate_options
        )
        result.attempts += 1
        result.prompt_tokens += res.prompt_tokens
        result.completion_tokens += res.completion_tokens
        result.outputs.append(res.text)
        try:
            result.value = res.value  # TruncatedOutput propagates: truncation is not a validation failure
            return result
        except OutputValidationError as e:
            result.errors.append(_plain_errors(e.errors))
        messages += [
            {"role": "assistant", "content": res.text},
            {"role": "user", "content": feedback_message(res.text, result.errors[-1])},
        ]
    raise ExtractionError(result)


def _plain_errors(errors: list[Any]) -> list[dict[str, Any]]:
    """Pydantic's error dicts without their ``ctx``/``url`` objects (which may hold exceptions)."""
    return [
        {"type": e.get("type"), "loc": list(e.get("loc", ())), "msg": e.get("msg")}
        for e in errors
        if isinstance(e, dict)
    ]


def _where(e: dict[str, Any]) -> str:
    return ".".join(str(x) for x in e.get("loc") or ()) or "value"


def _summary(errors: list[dict[str, Any]]) -> str:
    return "; ".join(f"{_where(e)}: {e.get('msg')}" for e in errors) or "no errors recorded"
