"""JSON value semantics: types, equality, hash keys, numbers of keywords, JSON pointers."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any, TypeVar

from logitgate.errors import SchemaError

from .caps import _KEY_DEPTH


def _ptr_join(pointer: str, *tokens: str | int) -> str:
    for t in tokens:
        t = str(t)
        if "~" in t or "/" in t:
            t = t.replace("~", "~0").replace("/", "~1")
        pointer += "/" + t
    return pointer


def _plain_json_text(s: str) -> bool:
    """True when ``s`` is its own JSON string content in every serialization (printable ASCII
    without quote or backslash): the common key, for which json.dumps is not needed."""
    return s.isascii() and s.isprintable() and '"' not in s and "\\" not in s


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "fraction"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise TypeError(type(v).__name__)


def _json_eq(a: Any, b: Any) -> bool:
    """JSON Schema equality: 1 == 1.0, true != 1, deep for arrays/objects (iterative)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, bool) or isinstance(y, bool):
            if not (isinstance(x, bool) and isinstance(y, bool) and x == y):
                return False
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if x != y:
                return False
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, dict) and isinstance(y, dict):
            if x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _json_key(v: Any, depth: int = 0) -> Hashable | None:
    """A hashable form of JSON value ``v`` under _json_eq's equality (1 and 1.0 are one key,
    true and 1 are not, object keys in any order); None for NaN (equal to nothing) and for
    values nested more than _KEY_DEPTH levels (the recursion stays that shallow)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return None if v != v else ("n", v)  # an int and an equal float hash alike
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z",)
    if depth >= _KEY_DEPTH:
        return None
    if isinstance(v, list):
        items = []
        for x in v:
            k = _json_key(x, depth + 1)
            if k is None:
                return None
            items.append(k)
        return ("a", tuple(items))
    if isinstance(v, dict):
        members = []
        for name, x in v.items():
            k = _json_key(x, depth + 1)
            if k is None:
                return None
            members.append((name, k))
        return ("o", frozenset(members))
    return None


_T = TypeVar("_T")
_D = TypeVar("_D")


def _derived(cache: dict[int, tuple[list[_T], int, _D]], items: list[_T], build: Callable[[list[_T]], _D]) -> _D:
    """``build(items)``, kept in ``cache`` while ``items`` is the same list of the same length
    (a facts list grows only by appending; the entry holds the list, so its id stays its own)."""
    hit = cache.get(id(items))
    if hit is None or hit[0] is not items or hit[1] != len(items):
        hit = cache[id(items)] = (items, len(items), build(items))
    return hit[2]


class _ValueSet:
    """Membership in a list of JSON values under _json_eq, by hash: an enum of a few thousand
    values is checked against itself and against other enums, which one by one is quadratic."""

    __slots__ = ("_keys", "_values")

    def __init__(self, values: list[Any]) -> None:
        self._values = values
        keys = (_json_key(v) for v in values)
        # (An unkeyed value equals no keyed one: NaN equals nothing, and equal values nest alike.)
        self._keys = {k for k in keys if k is not None}

    def __contains__(self, value: Any) -> bool:
        k = _json_key(value)
        if k is None:
            return any(_json_eq(value, v) for v in self._values)
        return k in self._keys


def _fraction(v: Any) -> Fraction:
    return Fraction(v)


def _number_keyword(d: dict[str, Any], kw: str, ptr: str) -> Fraction | None:
    """The value of number keyword ``kw`` of schema object ``d`` (None when absent)."""
    if kw not in d:
        return None
    v = d[kw]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        raise SchemaError(f"{kw} must be a number", pointer=_ptr_join(ptr, kw))
    return _fraction(v)


def _count_keyword(d: dict[str, Any], kw: str, ptr: str) -> int | None:
    """The value of count keyword ``kw`` (minLength, maxItems...) of ``d`` (None when absent)."""
    if kw not in d:
        return None
    v = d[kw]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (isinstance(v, float) and not v.is_integer()):
        raise SchemaError(f"{kw} must be a non-negative integer", pointer=_ptr_join(ptr, kw))
    return int(v)


def _dig(value: Any, path: tuple[str | int, ...]) -> Any:
    for p in path:
        value = value[p]
    return value
