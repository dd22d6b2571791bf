"""Constant schemas: an object whose only keywords are ``allOf``, ``anyOf``, ``oneOf`` and ``not``
(and annotations), over boolean schemas and objects of the same kind, accepts every value or
none. The atom registry folds such an object to the ``true`` or the ``false`` atom, so that
expansion never distributes over it: nested ``oneOf``s of constants otherwise expand into
exponentially many atom sets, each one of them empty or universal."""

from __future__ import annotations

from typing import Any

from .keywords import _ANNOTATIONS

__all__ = ["COMBINATORS", "constant_value"]

COMBINATORS = frozenset({"allOf", "anyOf", "oneOf", "not"})
_TRANSPARENT = _ANNOTATIONS | COMBINATORS


def constant_value(schema: dict[str, Any], memo: dict[int, bool | None], oneof_as_anyof: bool) -> bool | None:
    """True when ``schema`` accepts every JSON value, False when it accepts none, None when that
    does not follow from its combinators alone (any other keyword, a ``$ref``, a malformed
    combinator: those are lowered, or reported, as usual).

    ``memo`` maps ``id()`` of objects to their value across calls (the caller keeps the objects
    alive). The walk is iterative, depth-first: an object expanded but not finished is an ancestor
    of the current one, so meeting it again is a cycle (a dict that contains itself), which
    stays None."""
    stack: list[tuple[dict[str, Any], bool]] = [(schema, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            memo[id(node)] = _combine(node, memo, oneof_as_anyof)
            continue
        if id(node) in memo:
            continue
        memo[id(node)] = None  # until its children are done
        children = _children(node)
        if children is None:
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in children if isinstance(c, dict) and id(c) not in memo)
    return memo[id(schema)]


def _children(node: dict[str, Any]) -> list[Any] | None:
    """The combinators' sub-schemas, or None when ``node`` is not a constant's shape."""
    if not node.keys() <= _TRANSPARENT:
        return None
    children: list[Any] = []
    for key in ("allOf", "anyOf", "oneOf"):
        if key in node:
            value = node[key]
            if not isinstance(value, list) or not value:
                return None
            children.extend(value)
    if "not" in node:
        children.append(node["not"])
    if not all(isinstance(c, (bool, dict)) for c in children):
        return None
    return children


def _value(child: Any, memo: dict[int, bool | None]) -> bool | None:
    return child if isinstance(child, bool) else memo.get(id(child))


def _combine(node: dict[str, Any], memo: dict[int, bool | None], oneof_as_anyof: bool) -> bool | None:
    """The value of ``node`` from its children's (each known by now, or None)."""
    result = True
    for key in ("allOf", "anyOf", "oneOf", "not"):
        if key not in node:
            continue
        values = [_value(c, memo) for c in (node[key] if key != "not" else [node[key]])]
        if None in values:
            return None
        if key == "allOf":
            result &= all(values)
        elif key == "anyOf" or (key == "oneOf" and oneof_as_anyof):
            result &= any(values)
        elif key == "oneOf":
            result &= values.count(True) == 1
        else:
            result &= not values[0]
    return result
