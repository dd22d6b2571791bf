"""Brzozowski derivatives of code-point-level IR nodes (Literal, CharClass, Seq, Alt, Repeat).

The derivative of a language L by a code point c is {w : cw in L}. Intersecting patterns by
derivatives steps through both languages at once and stops as soon as one side accepts
anything (``.*``): ``^https?://`` ∩ uri becomes ``http`` ``s``? ``://`` followed by the rest of
uri as a node, where a product of their automata enumerates every state of uri's.

Nodes are kept in a canonical form (sequences flat and free of the empty string, alternatives
flat and deduplicated) so that derivatives that denote the same expression compare equal and a
walk over them meets few distinct ones; its callers bound the walk. Recursion follows node depth (the
regex frontend bounds it by ``Limits.max_nesting``) and stops with LimitExceeded past
``MAX_DEPTH``.

>>> from logitgate.frontends.regex import regex_to_node
>>> node, _ = regex_to_node("^ab|ac$")
>>> d = derivative(node, ord("a"))
>>> d
Alt(items=(Literal(value=b'b'), Literal(value=b'c')))
>>> nullable(derivative(d, ord("c"))), nullable(d), derivative(d, ord("a"))
(True, False, Alt(items=()))
"""

from __future__ import annotations

from ..errors import LimitExceeded
from .ir import EMPTY, Alt, CharClass, Literal, Node, Repeat, Seq, complement_ranges, merge_ranges

__all__ = ["MAX_DEPTH", "NOTHING", "derivative", "first_boundaries", "make_alt", "make_seq", "nullable"]

NOTHING = Alt(())  # the empty language

MAX_DEPTH = 400  # node nesting the functions below recurse through
_SURROGATES = (0xD800, 0xDFFF)  # never matched: classes exclude them, literals are valid UTF-8


def make_seq(items: list[Node]) -> Node:
    """Concatenation in canonical form: nested sequences spliced, empty strings dropped,
    NOTHING if any item is NOTHING."""
    out: list[Node] = []
    for it in items:
        if type(it) is Seq:
            out.extend(it.items)
        elif type(it) is Alt and not it.items:
            return NOTHING
        elif type(it) is Literal and not it.value:
            continue
        else:
            out.append(it)
    if not out:
        return EMPTY
    return out[0] if len(out) == 1 else Seq(tuple(out))


def make_alt(items: list[Node]) -> Node:
    """Alternation in canonical form: nested alternatives spliced, NOTHING dropped, duplicates
    removed, first-seen order kept. (Not sorted: a sort by hash made grammars differ between
    processes. Derivatives of one node meet its alternatives in the node's order, so equal sets
    come out equal in practice; where they do not, a walk meets a few more derivatives.)"""
    seen: dict[Node, None] = {}
    for it in items:
        if type(it) is Alt:
            seen.update(dict.fromkeys(it.items))  # (canonical: no nested alternative inside)
        else:
            seen[it] = None
    if not seen:
        return NOTHING
    if len(seen) == 1:
        return next(iter(seen))
    return Alt(tuple(seen))


def _too_deep() -> LimitExceeded:
    return LimitExceeded("max_nesting", MAX_DEPTH, "node nesting while taking derivatives")


def nullable(node: Node, depth: int = 0) -> bool:
    """Whether ``node`` matches the empty string."""
    if depth > MAX_DEPTH:
        raise _too_deep()
    t = type(node)
    if t is Literal:
        return not node.value  # type: ignore[union-attr]
    if t is CharClass:
        return False
    if t is Seq:
        return all(nullable(x, depth + 1) for x in node.items)  # type: ignore[union-attr]
    if t is Alt:
        return any(nullable(x, depth + 1) for x in node.items)  # type: ignore[union-attr]
    if t is Repeat:
        return node.min == 0 or nullable(node.item, depth + 1)  # type: ignore[union-attr]
    raise TypeError(f"derivatives are defined on code-point-level nodes, not {t.__name__}")


def _class_ranges(node: CharClass) -> tuple[tuple[int, int], ...]:
    return complement_ranges(node.ranges) if node.negated else merge_ranges(node.ranges)


def _first_code_point(value: bytes) -> tuple[int, int]:
    """(code point, its UTF-8 length) at the start of non-empty UTF-8 ``value``."""
    b = value[0]
    n = 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    return ord(value[:n].decode("utf-8")), n


def first_boundaries(node: Node, out: set[int], depth: int = 0) -> None:
    """Adds to ``out`` every code point where the set of first characters of ``node`` may
    change (range starts and ends + 1): between two consecutive boundaries every code point
    has the same derivative."""
    if depth > MAX_DEPTH:
        raise _too_deep()
    t = type(node)
    if t is Literal:
        if node.value:  # type: ignore[union-attr]
            c, _ = _first_code_point(node.value)  # type: ignore[union-attr]
            out.update((c, c + 1))
    elif t is CharClass:
        for lo, hi in _class_ranges(node):  # type: ignore[arg-type]
            out.update((lo, hi + 1))
    elif t is Seq:
        for x in node.items:  # type: ignore[union-attr]
            first_boundaries(x, out, depth + 1)
            if not nullable(x, depth + 1):
                break
    elif t is Alt:
        for x in node.items:  # type: ignore[union-attr]
            first_boundaries(x, out, depth + 1)
    elif t is Repeat:
        if node.max != 0:  # type: ignore[union-attr]
            first_boundaries(node.item, out, depth + 1)  # type: ignore[union-attr]
    else:
        raise TypeError(f"derivatives are defined on code-point-level nodes, not {t.__name__}")


def derivative(node: Node, c: int, depth: int = 0) -> Node:
    """The derivative of ``node`` by code point ``c`` (canonical form; NOTHING when no string
    of ``node`` starts with ``c``)."""
    if depth > MAX_DEPTH:
        raise _too_deep()
    if _SURROGATES[0] <= c <= _SURROGATES[1]:
        return NOTHING
    t = type(node)
    if t is Literal:
        value = node.value  # type: ignore[union-attr]
        if not value:
            return NOTHING
        first, n = _first_code_point(value)
        return (Literal(value[n:]) if n < len(value) else EMPTY) if first == c else NOTHING
    if t is CharClass:
        return EMPTY if any(lo <= c <= hi for lo, hi in _class_ranges(node)) else NOTHING  # type: ignore[arg-type]
    if t is Seq:
        items = node.items  # type: ignore[union-attr]
        alts: list[Node] = []
        for i, x in enumerate(items):
            alts.append(make_seq([derivative(x, c, depth + 1), *items[i + 1 :]]))
            if not nullable(x, depth + 1):
                break
        return make_alt(alts)
    if t is Alt:
        return make_alt([derivative(x, c, depth + 1) for x in node.items])  # type: ignore[union-attr]
    if t is Repeat:
        lo, hi, item = node.min, node.max, node.item  # type: ignore[union-attr]
        if hi == 0:
            return NOTHING
        lo, hi = max(lo - 1, 0), None if hi is None else hi - 1
        rest = EMPTY if hi == 0 else item if lo == hi == 1 else Repeat(item, lo, hi)
        return make_seq([derivative(item, c, depth + 1), rest])
    raise TypeError(f"derivatives are defined on code-point-level nodes, not {t.__name__}")
