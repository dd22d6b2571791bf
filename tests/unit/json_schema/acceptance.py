"""A helper the JSON Schema frontend's tests share (byte-level acceptance of a JSON value)."""

from __future__ import annotations

import json
from typing import Any

import logitgate as lg


def accepts(grammar: lg.CompiledGrammar, value: Any) -> bool:
    """Whether ``grammar`` accepts ``json.dumps(value)`` whole, fed as bytes."""
    m = grammar.matcher()
    return bool(m.accept_bytes(json.dumps(value).encode())) and bool(m.is_complete())
