"""The requests of the vLLM tests and bench, and the checks of their outputs (no vLLM import).

Each constrained case bounds its output (string lengths, item counts, whitespace) so that a
structure always completes within ``MAX_TOKENS``: a valid output is then the only acceptable one.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

MAX_TOKENS = 96

PERSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string", "maxLength": 16},
    },
    "required": ["name", "age", "city"],
    "additionalProperties": False,
}

ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 99999},
        "status": {"enum": ["pending", "shipped", "delivered"]},
        "items": {"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 1, "maxItems": 3},
    },
    "required": ["id", "status", "items"],
    "additionalProperties": False,
}

PHONE_REGEX = r"\(\d{3}\) \d{3}-\d{4}"
SENTIMENTS = ["positive", "negative", "neutral"]
# A list of one to four small numbers; the same language as LIST_REGEX.
LIST_GBNF = 'root ::= "[" num ("," num ("," num ("," num)?)?)? "]"\nnum ::= [1-9] [0-9]?\n'
LIST_REGEX = r"\[[1-9][0-9]?(,[1-9][0-9]?){0,3}\]"


def batch_cases() -> list[dict[str, Any]]:
    """Eight requests: five constrained (JSON Schema twice, regex, choice, GBNF) and three free.
    ``spec`` is the ``extra_args["logitgate"]`` value (None: unconstrained)."""
    return [
        {
            "prompt": "Invent a person. Reply in JSON with name, age and city.",
            "spec": {"json_schema": PERSON_SCHEMA, "whitespace": "compact"},
        },
        {"prompt": "Give a US phone number.", "spec": {"regex": PHONE_REGEX}},
        {"prompt": "Write one short sentence about the sea.", "spec": None},
        {"prompt": "Is 'I loved this film' positive, negative or neutral?", "spec": {"choice": SENTIMENTS}},
        {"prompt": "List a few small numbers.", "spec": {"grammar": LIST_GBNF}},
        {"prompt": "Name three colours.", "spec": None},
        {
            "prompt": "Describe an order as JSON with id, status and items.",
            "spec": {"json_schema": ORDER_SCHEMA, "max_whitespace": 2},
        },
        {"prompt": "What is the capital of France?", "spec": None},
    ]


def schema_cases() -> list[dict[str, Any]]:
    """Eight JSON Schema requests for the bench (the two schemas, alternating)."""
    subjects = ["a pilot", "a baker", "a painter", "a nurse", "a farmer", "a chemist", "a poet", "a sailor"]
    cases = []
    for i, who in enumerate(subjects):
        schema = PERSON_SCHEMA if i % 2 == 0 else ORDER_SCHEMA
        what = f"Describe {who} as JSON." if i % 2 == 0 else f"Describe an order placed by {who} as JSON."
        cases.append({"prompt": what, "schema": schema})
    return cases


def check_output(spec: dict[str, Any], text: str) -> None:
    """Raises AssertionError unless ``text`` is in the language of ``spec``."""
    if "json_schema" in spec:
        jsonschema.validate(json.loads(text), spec["json_schema"])
        if spec.get("whitespace") == "compact":
            assert text == json.dumps(json.loads(text), separators=(",", ":")), text
    elif "regex" in spec:
        assert re.fullmatch(spec["regex"], text), text
    elif "choice" in spec:
        assert text in spec["choice"], text
    elif "grammar" in spec:
        assert spec["grammar"] == LIST_GBNF
        assert re.fullmatch(LIST_REGEX, text), text
    else:
        raise AssertionError(f"no check for {spec}")
