"""Reading JSON text from users: one reader whose failures say which kind they are.

Python's parser stops short of JSON's grammar in two places: an integer of more than 4,300
digits (``int`` refuses to convert it) and nesting deeper than its recursion goes. Both are
valid JSON, and both surface as exceptions that are easy to mistake for a crash
(``ValueError``, ``RecursionError``). :func:`read_json` turns all three failures, syntax
included, into :class:`JsonTextError`; each caller maps it to its own typed error (a
``SchemaError``, a 400, a ``ValueError`` naming the field) with the ``reason`` as the
predicate of its message: ``f"{subject} {e.reason}"``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

__all__ = ["JsonTextError", "read_json", "text_nesting"]

JsonTextProblem = Literal["syntax", "digits", "nesting"]


class JsonTextError(ValueError):
    """JSON text that could not be read: ``problem`` is ``syntax`` (not JSON, or bytes not
    UTF-8), ``digits`` (an integer of more than 4,300 digits) or ``nesting`` (deeper than
    Python's parser recurses); ``reason`` completes a sentence whose subject is the text."""

    def __init__(self, problem: JsonTextProblem, reason: str) -> None:
        super().__init__(reason)
        self.problem: JsonTextProblem = problem
        self.reason = reason


def read_json(text: str | bytes) -> Any:
    """``json.loads(text)``, every failure a :class:`JsonTextError`."""
    try:
        return json.loads(text)
    except UnicodeDecodeError as e:
        raise JsonTextError("syntax", f"is not UTF-8: {e}") from None
    except json.JSONDecodeError as e:
        raise JsonTextError("syntax", f"is not valid JSON: {e}") from None
    except ValueError:  # (after its subclasses above) valid JSON, an integer int() refuses
        raise JsonTextError("digits", "holds an integer of more than 4,300 digits") from None
    except RecursionError:
        raise JsonTextError("nesting", "is nested deeper than Python's JSON parser goes") from None


def text_nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (brackets inside strings do
    not count); iterative, for text too deep to parse."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
