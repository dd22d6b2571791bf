"""OpenAI's wire format: the request bodies the server accepts (as Pydantic models, parsed from
the raw body so every mistake becomes an OpenAI-shaped 400), the errors, and the response and
stream-chunk objects.

Fields follow the ``openai`` package's types (``ChatCompletion``, ``ChatCompletionChunk``,
``Completion``); ``structured_outputs`` and ``repetition_penalty`` are vLLM's extensions; ``logitgate``
(:class:`LogitgateOptions`) is this server's.
Unknown fields are ignored, as OpenAI-compatible servers do.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._json_reader import JsonTextError, read_json
from ..errors import LogitgateError, _surrogate_at
from ..generation import _SEED_MAX, _SEED_MIN

__all__ = [
    "ApiError",
    "ChatCompletionRequest",
    "ChatMessage",
    "CompletionRequest",
    "LogitgateOptions",
    "new_id",
    "parse_body",
    "response",
    "usage",
]


class ApiError(LogitgateError):
    """An error answered as OpenAI's ``{"error": {"message", "type", "param", "code"}}`` with
    HTTP ``status``."""

    code = "invalid_request"

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str,
        param: str | None = None,
        type: str = "invalid_request_error",
    ) -> None:
        super().__init__(message, code=code)
        self.status = status
        self.param = param
        self.type = type

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        """The content as text (text parts joined; other parts are refused)."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        parts = []
        for part in self.content:
            if part.get("type") not in ("text", "input_text") or not isinstance(part.get("text"), str):
                raise ApiError(
                    400,
                    f"unsupported content part type {part.get('type')!r}",
                    code="unsupported_content",
                    param="messages",
                )
            parts.append(part["text"])
        return "".join(parts)


class _Sampling(_Body):
    model: str
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    n: int = Field(default=1, ge=1, le=16)
    seed: int | None = Field(default=None, ge=_SEED_MIN, le=_SEED_MAX)  # what torch's generator takes
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    frequency_penalty: float = Field(default=0.0, ge=-2, le=2)
    presence_penalty: float = Field(default=0.0, ge=-2, le=2)
    repetition_penalty: float = Field(default=1.0, gt=0)
    structured_outputs: dict[str, Any] | None = None
    logprobs: bool | int | None = None
    logit_bias: dict[str, float] | None = None

    @field_validator("logit_bias")
    @classmethod
    def _biases(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for key, bias in (v or {}).items():
            if not key.isdigit():
                raise ValueError(f"keys are token ids, got {key!r}")
            if not -100 <= bias <= 100:
                raise ValueError(f"token {key}: a bias between -100 and 100, got {bias}")
        return v

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and len(v) > 4:
            raise ValueError("at most 4 stop sequences")
        return v

    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.get("include_usage"))


class LogitgateOptions(BaseModel):
    """The ``logitgate`` body field. ``refusal``: offer the model a refusal path, the JSON
    Schema becoming :func:`~logitgate.with_refusal`'s (``{"refusal": "..."}`` or the object),
    a refusal answered as ``message.refusal``. Unknown keys are refused (a typo must not pass
    silently)."""

    model_config = ConfigDict(extra="forbid")
    refusal: bool = False


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    logitgate: LogitgateOptions | None = None

    @property
    def offers_refusal(self) -> bool:
        return self.logitgate is not None and self.logitgate.refusal


class CompletionRequest(_Sampling):
    prompt: str | list[str]
    max_tokens: int | None = Field(default=16, ge=1)


#: Body fields that would change the output and that this server does not implement, with
#: their neutral values: present with another value, the request is refused (400
#: ``unsupported_parameter``) rather than answered as if they were absent.
UNSUPPORTED_PARAMETERS: dict[str, tuple[tuple[Any, ...], str]] = {
    "functions": ((None,), "use tools"),
    "function_call": ((None,), "use tool_choice"),
    "echo": ((None, False), "the prompt is not echoed"),
    "suffix": ((None, ""), "insertion is not supported"),
    "best_of": ((None, 1), "one sequence per choice"),
    "top_k": ((None, 0, -1), "only top_p"),
    "min_p": ((None, 0), "only top_p"),
    "min_tokens": ((None, 0), "budgets are max_tokens only"),
    "ignore_eos": ((None, False), "the model's end of sequence always ends a choice"),
}


def _refuse_unsupported(data: dict[str, Any]) -> None:
    for name, (neutral, why) in UNSUPPORTED_PARAMETERS.items():
        value = data.get(name)
        if not any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in neutral):
            raise ApiError(400, f"{name} is not supported ({why})", code="unsupported_parameter", param=name)


def parse_body(raw: bytes, model: type[_Body]) -> Any:
    """The request body as ``model``; malformed JSON or a field out of range is a 400 naming it."""
    try:
        data = read_json(raw)
    except JsonTextError as e:
        raise ApiError(400, f"the request body {e.reason}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    _check_text(data)
    _refuse_unsupported(data)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = _param_path(first["loc"])
        raise ApiError(400, f"{where}: {first['msg']}", code="invalid_value", param=where or None) from None


def _param_path(loc: tuple[int | str, ...]) -> str:
    """A validation error's location as the server names params everywhere:
    ``messages[0].content`` (pydantic's own is ``messages.0.content``)."""
    return "".join(f"[{x}]" if isinstance(x, int) else f".{x}" if i else str(x) for i, x in enumerate(loc))


def _check_text(data: dict[str, Any]) -> None:
    """Refuses a lone surrogate anywhere in the body, naming where (``messages[0].content``).
    JSON's ``"\\ud800"`` decodes to one, but no UTF-8 text holds it: tokenizers, compilers and
    logs downstream take text, so the body is checked once here rather than at each of them."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
        return  # (the common case, checked in C)
    except (UnicodeEncodeError, RecursionError):
        pass
    todo: list[tuple[Any, str]] = [(data, "")]
    while todo:
        value, path = todo.pop()
        if isinstance(value, str):
            if _surrogate_at(value) >= 0:
                raise ApiError(400, f"{path}: {_LONE_SURROGATE}", code="invalid_value", param=path)
        elif isinstance(value, dict):
            for key, sub in reversed(value.items()):
                where = f"{path}.{key}" if path else key
                if _surrogate_at(key) >= 0:  # (named by its object, the key itself being unprintable)
                    raise ApiError(
                        400, f"{path or 'the body'}: a key {_LONE_SURROGATE}", code="invalid_value", param=path or None
                    )
                todo.append((sub, where))
        elif isinstance(value, list):
            todo.extend((sub, f"{path}[{i}]") for i, sub in reversed(list(enumerate(value))))


_LONE_SURROGATE = "holds a lone surrogate (a \\uD800-\\uDFFF escape outside a pair), which is not valid Unicode text"


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def response(
    obj: str, rid: str, model: str, created: int, choices: list[dict[str, Any]], use: dict[str, int] | None = None
) -> dict[str, Any]:
    """A response or stream chunk: ``obj`` is ``chat.completion``, ``chat.completion.chunk`` or
    ``text_completion``; ``usage`` is included when given."""
    out: dict[str, Any] = {"id": rid, "object": obj, "created": created, "model": model, "choices": choices}
    if use is not None:
        out["usage"] = use
    return out
