"""``lg.with_refusal``: a schema whose output is either the object or ``{"refusal": "..."}``.

A schema with no way out makes a model fabricate when it should decline; the refusal branch is
that way out, as OpenAI's ``message.refusal`` is. The branch is marked (``x-logitgate-refusal``,
an annotation the JSON Schema frontend ignores), so a generation result knows to read it:
:attr:`GenerationResult.refusal`.
"""

from __future__ import annotations

import json
from typing import Any

from .lint import schema_document

__all__ = ["REFUSAL_MARK", "is_refusal_schema", "refusal_of", "with_refusal"]

REFUSAL_MARK = "x-logitgate-refusal"


def with_refusal(schema: Any, *, max_length: int = 500) -> dict[str, Any]:
    """``schema`` (a dict, JSON text or a Pydantic model class), or a refusal object whose
    one property ``refusal`` is a string of at most ``max_length`` characters."""
    doc = schema_document(schema)
    refusal = {
        "type": "object",
        "properties": {"refusal": {"type": "string", "minLength": 1, "maxLength": max_length}},
        "required": ["refusal"],
        "additionalProperties": False,
        REFUSAL_MARK: True,
    }
    out: dict[str, Any] = {"anyOf": [doc, refusal]}
    if isinstance(doc, dict):
        for kw in ("$defs", "definitions"):  # keep "#/$defs/..." references resolving at the root
            if kw in doc:
                out[kw] = doc[kw]
    return out


def is_refusal_schema(schema: Any) -> bool:
    """Whether ``schema`` is :func:`with_refusal`'s output."""
    if not isinstance(schema, dict) or not isinstance(schema.get("anyOf"), list):
        return False
    return any(isinstance(b, dict) and b.get(REFUSAL_MARK) is True for b in schema["anyOf"])


def refusal_of(text: str) -> str | None:
    """The refusal message in a complete output of a :func:`with_refusal` schema, or None when
    the output is the object. (When the object itself has exactly one property ``refusal``, the
    two read the same: the refusal wins.)"""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and list(value) == ["refusal"] and isinstance(value["refusal"], str):
        return value["refusal"]
    return None
