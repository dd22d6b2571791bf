"""Brzozowski derivatives of code-point-level IR nodes (Literal, CharClass, Seq, Alt, Repeat).

The derivative of a language L by a code point c is {w : cw in L}. Intersecting patterns by
derivatives steps through both languages at once and stops as soon as one side accepts
anything (``.*``): ``^https?://`` ∩ uri becomes ``http`` ``s``? ``://`` followed by the rest of
uri as a node, where a product of their automata enumerates every state of uri's.

A :class:`Derivatives` walk hash-conses the nodes it builds: a node made twice from the same
parts is the same object, so nodes compare and hash by identity (hashing IR trees by value
walks the whole tree, every time). Nodes are built in a canonical form (sequences flat and free
of the empty string, alternatives flat, deduplicated, in first-seen order) so that derivatives
that denote the same expression mostly are the same node; the walk's caller bounds how many
it visits. Recursion follows node depth (the regex frontend bounds it by
``Limits.max_nesting``) and stops with LimitExceeded past ``MAX_DEPTH``.

>>> from logitgate.frontends.regex import regex_to_node
>>> node, _ = regex_to_node("^ab|ac$")
>>> walk = Derivatives()
>>> node = walk.intern(node)  # equal subtrees made one object
>>> d = walk.derivative(node, ord("a"))
>>> d
Alt(items=(Literal(value=b'b'), Literal(value=b'c')))
>>> walk.nullable(walk.derivative(d, ord("c"))), walk.nullable(d), walk.derivative(d, ord("a"))
(True, False, Alt(items=()))
>>> walk.derivative(node, ord("a")) is d
True
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import LimitExceeded
from .ir import EMPTY, Alt, CharClass, Literal, Node, Repeat, Seq, complement_ranges, merge_ranges

__all__ = ["MAX_DEPTH", "NOTHING", "Derivatives"]

NOTHING = Alt(())  # the empty language

MAX_DEPTH = 400  # node nesting the walk recurses through
_SURROGATES = (0xD800, 0xDFFF)  # never matched: classes exclude them, literals are valid UTF-8


def _first_code_point(value: bytes) -> tuple[int, int]:
    """(code point, its UTF-8 length) at the start of non-empty UTF-8 ``value``."""
    b = value[0]
    n = 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    return ord(value[:n].decode("utf-8")), n


class Derivatives:
    """Derivatives, nullability and first-character boundaries of nodes, memoized per node
    object for the life of the walk (which keeps every node it met alive, so ids stay valid)."""

    def __init__(self) -> None:
        self._made: dict[tuple[object, ...], Node] = {}  # hash-consing: parts -> the node
        self._nullable: dict[int, bool] = {}
        self._derivative: dict[tuple[int, int], Node] = {}
        self._ranges: dict[int, tuple[tuple[int, int], ...]] = {}
        self._keep: list[Node] = []  # nodes whose ids key the memos

    def _node(self, key: tuple[object, ...], make: Callable[[], Node]) -> Node:
        """The node made from these parts, made by ``make`` the first time."""
        node = self._made.get(key)
        if node is None:
            node = self._made[key] = make()
        return node

    def intern(self, node: Node, depth: int = 0) -> Node:
        """``node`` rebuilt from interned parts: equal subtrees (a regex repeats a group's copy
        per use) become one object, so their derivatives are found equal."""
        if depth > MAX_DEPTH:
            raise _too_deep()
        t = type(node)
        if t is Literal:
            return self._literal(node.value)  # type: ignore[union-attr]
        if t is CharClass:
            return self._node(("c", node.ranges, node.negated), lambda: node)  # type: ignore[union-attr]
        if t is Seq:
            return self.seq([self.intern(x, depth + 1) for x in node.items])  # type: ignore[union-attr]
        if t is Alt:
            return self.alt([self.intern(x, depth + 1) for x in node.items])  # type: ignore[union-attr]
        if t is Repeat:
            return self._repeat(self.intern(node.item, depth + 1), node.min, node.max)  # type: ignore[union-attr]
        raise TypeError(f"derivatives are defined on code-point-level nodes, not {t.__name__}")

    def seq(self, items: list[Node]) -> Node:
        """Concatenation in canonical form: nested sequences spliced, empty strings dropped,
        NOTHING if any item is NOTHING."""
        out: list[Node] = []
        for it in items:
            t = type(it)
            if t is Seq:
                out.extend(it.items)  # type: ignore[union-attr]
            elif t is Alt and not it.items:  # type: ignore[union-attr]
                return NOTHING
            elif t is Literal and not it.value:  # type: ignore[union-attr]
                continue
            else:
                out.append(it)
        if not out:
            return EMPTY
        if len(out) == 1:
            return out[0]
        return self._node(("s", *map(id, out)), lambda: Seq(tuple(out)))

    def alt(self, items: list[Node]) -> Node:
        """Alternation in canonical form: nested alternatives spliced, NOTHING dropped,
        duplicates removed, first-seen order kept (derivatives of one node meet its
        alternatives in the node's order)."""
        seen: dict[int, Node] = {}
        for it in items:
            for p in it.items if type(it) is Alt else (it,):  # type: ignore[union-attr]
                seen.setdefault(id(p), p)
        if not seen:
            return NOTHING
        if len(seen) == 1:
            return next(iter(seen.values()))
        return self._node(("a", *seen), lambda: Alt(tuple(seen.values())))

    def nullable(self, node: Node, depth: int = 0) -> bool:
        """Whether ``node`` matches the empty string."""
        hit = self._nullable.get(id(node))
        if hit is not None:
            return hit
        if depth > MAX_DEPTH:
            raise _too_deep()
        t = type(node)
        if t is Literal:
            out = not node.value  # type: ignore[union-attr]
        elif t is CharClass:
            out = False
        elif t is Seq:
            out = all(self.nullable(x, depth + 1) for x in node.items)  # type: ignore[union-attr]
        elif t is Alt:
            out = any(self.nullable(x, depth + 1) for x in node.items)  # type: ignore[union-attr]
        elif t is Repeat:
            out = node.min == 0 or self.nullable(node.item, depth + 1)  # type: ignore[union-attr]
        else:
            raise TypeError(f"derivatives are defined on code-point-level nodes, not {t.__name__}")
        self._keep.append(node)
        self._nullable[id(node)] = out
        return out

    def _class_ranges(self, node: CharClass) -> tuple[tuple[int, int], ...]:
        hit = self._ranges.get(id(node))
        if hit is None:
            hit = complement_ranges(node.ranges) if node.negated else merge_ranges(node.ranges)
            self._keep.append(node)
            self._ranges[id(node)] = hit
        return hit

    def first_boundaries(self, node: Node, out: set[int], depth: int = 0) -> None:
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
            for lo, hi in self._class_ranges(node):  # type: ignore[arg-type]
                out.update((lo, hi + 1))
        elif t is Seq:
            for x in node.items:  # type: ignore[union-attr]
                self.first_boundaries(x, out, depth + 1)
                if not self.nullable(x, depth + 1):
                    break
        elif t is Alt:
            for x in node.items:  # type: ignore[union-attr]
                self.first_boundaries(x, out, depth + 1)
        elif t is Repeat:
            if node.max != 0:  # type: ignore[union-attr]
                self.first_boundaries(node.item, out, depth + 1)  # type: ignore[union-attr]
        else:
            raise TypeError(f"derivatives are defined on code-point-level nodes, not {t.__name__}")

    def derivative(self, node: Node, c: int, depth: int = 0) -> Node:
        """The derivative of ``node`` by code point ``c`` (NOTHING when no string of ``node``
        starts with ``c``)."""
        key = (id(node), c)
        hit = self._derivative.get(key)
        if hit is not None:
            return hit
        if depth > MAX_DEPTH:
            raise _too_deep()
        out = self._derive(node, c, depth)
        self._keep.append(node)
        self._derivative[key] = out
        return out

    def _derive(self, node: Node, c: int, depth: int) -> Node:
        if _SURROGATES[0] <= c <= _SURROGATES[1]:
            return NOTHING
        t = type(node)
        if t is Literal:
            value = node.value  # type: ignore[union-attr]
            if not value:
                return NOTHING
            first, n = _first_code_point(value)
            if first != c:
                return NOTHING
            return self._literal(value[n:]) if n < len(value) else EMPTY
        if t is CharClass:
            return EMPTY if any(lo <= c <= hi for lo, hi in self._class_ranges(node)) else NOTHING  # type: ignore[arg-type]
        if t is Seq:
            items = node.items  # type: ignore[union-attr]
            alts: list[Node] = []
            for i, x in enumerate(items):
                alts.append(self.seq([self.derivative(x, c, depth + 1), *items[i + 1 :]]))
                if not self.nullable(x, depth + 1):
                    break
            return self.alt(alts)
        if t is Alt:
            return self.alt([self.derivative(x, c, depth + 1) for x in node.items])  # type: ignore[union-attr]
        if t is Repeat:
            lo, hi, item = node.min, node.max, node.item  # type: ignore[union-attr]
            if hi == 0:
                return NOTHING
            lo, hi = max(lo - 1, 0), None if hi is None else hi - 1
            rest = EMPTY if hi == 0 else item if lo == hi == 1 else self._repeat(item, lo, hi)
            return self.seq([self.derivative(item, c, depth + 1), rest])
        raise TypeError(f"derivatives are defined on code-point-level nodes, not {t.__name__}")

    def _repeat(self, item: Node, lo: int, hi: int | None) -> Node:
        return self._node(("r", id(item), lo, hi), lambda: Repeat(item, lo, hi))

    def _literal(self, value: bytes) -> Node:
        return self._node(("l", value), lambda: Literal(value))


def _too_deep() -> LimitExceeded:
    return LimitExceeded("max_nesting", MAX_DEPTH, "node nesting while taking derivatives")
