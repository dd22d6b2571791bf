"""Where llguidance's greedy lexer gives a Lark grammar a smaller language than its
character-level reading: found statically, refused with a typed error.

llguidance ends a lexeme only when the next byte cannot extend it (maximal munch). The
character-level grammar :mod:`logitgate.frontends.lark` builds may end a lexeme ``T`` anywhere
``T`` matches and start the next one, ``U``, right away. The two agree unless some complete
match ``w`` of ``T`` can be followed (in the grammar) by a first character ``c`` of ``U``
while ``w·c`` is still a prefix of ``T``: there llguidance keeps reading ``T``. This module
finds such pairs and raises ``lark-greedy-lexing`` naming ``T``, ``w`` and ``c``.

What it checks: pairs of lexemes that can be adjacent (through rules, repetitions, optional
parts; ``%ignore`` text counts as a lexeme that may sit between any two), each lexeme against
its own continuation. Two approximations, both documented in docs/lark.md: a lexeme followed by
itself is accepted when its language is closed under concatenation (``TEXT: X*``: one long
match is what a repetition of them reads too), and only ``T``'s own continuations are looked
at, not those of other lexemes that may start where ``T`` does. ``%json`` bodies are not
lexemes here (they bring their own lexer). The automaton walk of each lexeme is bounded by
:data:`MAX_STATES`; past it the pair is taken to agree.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from logitgate.errors import GrammarError, LimitExceeded
from logitgate.frontends.lark_syntax import (
    Alternatives,
    Definition,
    Expr,
    JsonSchema,
    Name,
    Quantified,
    RegexLit,
    Sequence,
    StringLit,
    StringRange,
)
from logitgate.grammar.derivatives import NOTHING, Derivatives
from logitgate.grammar.ir import CharClass, Literal, Node, Seq

__all__ = ["CODE_GREEDY", "MAX_STATES", "check_greedy_lexing"]

CODE_GREEDY = "lark-greedy-lexing"
MAX_STATES = 400
"""Derivative states explored per lexeme; bounds the check's time on large terminals."""

SKIP = "%ignore"


@dataclass(frozen=True)
class _Summary:
    nullable: bool
    first: frozenset[str]
    last: frozenset[str]


_EMPTY = _Summary(True, frozenset(), frozenset())


class _Adjacency:
    """Which lexemes can follow which, from the rules' bodies (a fixed point over rules)."""

    def __init__(self, defs: dict[str, Definition], key: Callable[[Expr], str | None]) -> None:
        self.defs = defs
        self.key = key
        self.rules: dict[str, _Summary] = {n: _Summary(False, frozenset(), frozenset()) for n in defs}
        # (lexeme, next lexeme) -> (offset of the next one, adjacent only across repetitions)
        self.pairs: dict[tuple[str, str], tuple[int, bool]] = {}

    def summary(self, e: Expr, record: bool) -> _Summary:
        if isinstance(e, Name) and not self.defs[e.name].terminal:
            return self.rules[e.name]
        k = self.key(e)
        if k is not None:
            return _Summary(False, frozenset((k,)), frozenset((k,)))
        if isinstance(e, Sequence):
            out = _EMPTY
            for item in e.items:
                s = self.summary(item, record)
                if record:
                    self.link(out.last, s.first, item, repeat=False)
                out = _Summary(
                    out.nullable and s.nullable,
                    out.first | s.first if out.nullable else out.first,
                    s.last | out.last if s.nullable else s.last,
                )
            return out
        if isinstance(e, Alternatives):
            parts = [self.summary(i, record) for i in e.items]
            return _Summary(
                any(p.nullable for p in parts),
                frozenset().union(*(p.first for p in parts)),
                frozenset().union(*(p.last for p in parts)),
            )
        if isinstance(e, Quantified):
            s = self.summary(e.item, record)
            if record and (e.hi is None or e.hi > 1):
                self.link(s.last, s.first, e.item, repeat=True)
            return _Summary(s.nullable or e.lo == 0, s.first, s.last) if e.hi != 0 else _EMPTY
        return _EMPTY  # special tokens and refused constructs: errors elsewhere

    def link(self, before: frozenset[str], after: frozenset[str], at: Expr, repeat: bool) -> None:
        offset = getattr(at, "offset", 0)
        for a in before:
            for b in after:
                old = self.pairs.get((a, b))
                self.pairs[(a, b)] = (old[0], old[1] and repeat) if old else (offset, repeat)

    def solve(self, reachable: list[str]) -> None:
        changed = True
        while changed:
            changed = False
            for name in reachable:
                s = self.summary(self.defs[name].body, record=False)
                if s != self.rules[name]:
                    self.rules[name] = s
                    changed = True
        for name in reachable:
            self.summary(self.defs[name].body, record=True)


Ranges = list[tuple[int, int, str]]  # inclusive code point ranges, each with a witness text


def _regions(walk: Derivatives, state: Node) -> list[tuple[int, int, Node]]:
    """The code point ranges on which ``state`` has a live derivative, and that derivative."""
    bounds: set[int] = {0}
    walk.first_boundaries(state, bounds)
    cuts = sorted(b for b in bounds if b <= 0x10FFFF)
    out = []
    for k, lo in enumerate(cuts):
        hi = cuts[k + 1] - 1 if k + 1 < len(cuts) else 0x10FFFF
        d = walk.derivative(state, lo)
        if d is not NOTHING:
            out.append((lo, hi, d))
    return out


def _continuations(walk: Derivatives, lexeme: Node) -> Ranges:
    """The characters that extend some complete match of ``lexeme`` (with that match as the
    witness), from a breadth-first walk of its derivatives (at most MAX_STATES)."""
    if isinstance(lexeme, (Literal, CharClass)):
        return []  # one fixed length: no complete match is a prefix of a longer one
    start = walk.intern(lexeme)
    seen = {id(start): ""}
    work = [start]
    out: Ranges = []
    for state in work:
        if len(seen) > MAX_STATES:
            break
        w = seen[id(state)]
        regions = _regions(walk, state)
        if walk.nullable(state):
            out.extend((lo, hi, w) for lo, hi, _ in regions)
        for lo, _, nxt in regions:
            if id(nxt) not in seen:
                seen[id(nxt)] = w + chr(lo)
                work.append(nxt)
    return out


def _first_overlap(extends: Ranges, first: list[tuple[int, int, Node]]) -> tuple[str, str] | None:
    for lo, hi, w in extends:
        for flo, fhi, _ in first:
            if lo <= fhi and flo <= hi:
                return w, chr(max(lo, flo))
    return None


def _closed_under_concatenation(walk: Derivatives, node: Node) -> bool:
    """Whether every two matches of ``node`` in a row are one match (``L·L ⊆ L``), by a walk
    of the product of both automata (False past MAX_STATES: not shown)."""
    small = walk.intern(Seq((node, node)))
    big = walk.intern(node)
    seen = {(id(small), id(big))}
    work = [(small, big)]
    while work:
        if len(seen) > MAX_STATES:
            return False
        s, b = work.pop()
        if walk.nullable(s) and not walk.nullable(b):
            return False
        bounds: set[int] = {0}
        walk.first_boundaries(s, bounds)
        walk.first_boundaries(b, bounds)
        for c in bounds:
            if c > 0x10FFFF:
                continue
            ds = walk.derivative(s, c)
            if ds is NOTHING:
                continue
            db = walk.derivative(b, c)
            if db is NOTHING:
                return False
            if (id(ds), id(db)) not in seen:
                seen.add((id(ds), id(db)))
                work.append((ds, db))
    return True


def check_greedy_lexing(
    defs: dict[str, Definition],
    reachable: list[str],
    lexeme_node: Callable[[Expr], Node | None],
    skip: Node | None,
    source: str,
) -> None:
    """Raises GrammarError ``lark-greedy-lexing`` where llguidance's greedy lexer would read a
    shorter language than the grammar's characters say (module docstring)."""
    nodes: dict[str, Node] = {}
    offsets: dict[str, int] = {}

    keys: dict[int, str | None] = {}  # by expression identity: the tree outlives the check

    def key(e: Expr) -> str | None:
        if id(e) not in keys:
            keys[id(e)] = lexeme_key(e)
        return keys[id(e)]

    def lexeme_key(e: Expr) -> str | None:
        if isinstance(e, Name) and defs[e.name].terminal:
            k = e.name
        elif isinstance(e, StringLit):  # the same text is the same lexeme wherever it occurs
            k = json.dumps(e.value) + ("i" if e.icase else "")
        elif isinstance(e, RegexLit):
            k = f"/{e.pattern}/{e.flags}"
        elif isinstance(e, StringRange):
            k = f"{json.dumps(e.lo)}..{json.dumps(e.hi)}"
        elif isinstance(e, JsonSchema):
            return f"%json@{e.offset}"  # no node: not checked
        else:
            return None
        if k not in nodes:
            node = lexeme_node(e)
            if node is not None:
                nodes[k] = node
                offsets[k] = e.offset
        return k

    adjacency = _Adjacency(defs, key)
    adjacency.solve(reachable)
    pairs = dict(adjacency.pairs)
    if skip is not None:
        nodes[SKIP] = skip
        for a, b in list(pairs):
            pairs.setdefault((a, SKIP), (pairs[(a, b)][0], False))
            pairs.setdefault((SKIP, b), (pairs[(a, b)][0], False))
    walk = Derivatives()
    continuations: dict[str, Ranges] = {}
    firsts: dict[str, list[tuple[int, int, Node]]] = {}
    for (a, b), (offset, across_repetition) in sorted(pairs.items(), key=lambda p: p[1][0]):
        if a not in nodes or b not in nodes or (a == b == SKIP):
            continue
        try:
            if a == b and across_repetition and _closed_under_concatenation(walk, nodes[a]):
                continue  # one long match is what the repetition reads as well
        except LimitExceeded:
            pass
        try:
            if a not in continuations:
                continuations[a] = _continuations(walk, nodes[a])
            if not continuations[a]:
                continue
            if b not in firsts:
                firsts[b] = _regions(walk, walk.intern(nodes[b]))
            found = _first_overlap(continuations[a], firsts[b])
        except LimitExceeded:
            continue  # too deep to decide here; the walk's bound, not the grammar's
        if found is not None:
            w, c = found
            name = "%ignore text" if a == SKIP else a
            follower = "%ignore text" if b == SKIP else b
            raise GrammarError(
                f"greedy lexing: after {name} matches {w!r}, llguidance reads {c!r} as more of it, "
                f"where this grammar also lets {follower} start; the character-level grammar would "
                "accept more than llguidance (docs/lark.md, 'Greedy lexing')",
                code=CODE_GREEDY,
                source=source,
                offset=offset,
            )
