"""Minimal DFAs of code-point-level patterns, and their product with a length counter.

A pattern under ``minLength``/``maxLength`` was lowered as the product of its Thompson NFA with
a length counter: one rule per (NFA state, length), so a position of the string held one parse
head per active NFA state, each its own tail-calling rule, and the mask walk stepped a web of
them through the vocabulary trie (o21456's email body: 5,253 rules, 3-12 ms masks on Llama 3).
Here the pattern is determinized (subset construction over disjoint code point intervals),
intersected with the other patterns' DFAs, trimmed of states that cannot accept and minimized
(Hopcroft); the product with the counter keeps only (state, length) pairs that are reachable and
can still reach an accepting pair, so a position has exactly one live rule and no rule is a dead
end. Each step has a cap (caps.py); past one the caller falls back to the NFA product.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from .caps import _DFA_LENGTH_RULES, _DFA_STATES, _MINIMIZE_WORK
from .patterns import _Nfa

Ranges = tuple[tuple[int, int], ...]
# One DFA state's moves: disjoint code point ranges (sorted, coalesced) per target state.
Edges = tuple[tuple[Ranges, int], ...]


@dataclass(frozen=True)
class Dfa:
    """A deterministic automaton over code points: state 0 starts; ``edges[q]``'s ranges are
    pairwise disjoint (one target per code point); a code point with no range has no move."""

    edges: tuple[Edges, ...]
    accepting: tuple[bool, ...]

    def step(self, q: int, c: int) -> int | None:
        """The state ``q`` moves to on code point ``c`` (None: no move); a linear scan."""
        return next((t for ranges, t in self.edges[q] if any(a <= c <= b for a, b in ranges)), None)

    def accepts(self, text: str) -> bool:
        """Whether ``text`` is in the language (for tests)."""
        q = 0
        for ch in text:
            t = self.step(q, ord(ch))
            if t is None:
                return False
            q = t
        return self.accepting[q]


def _coalesce(ranges: list[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def _split(moves: list[tuple[Ranges, int]]) -> list[tuple[int, int, frozenset[int]]]:
    """Labelled moves -> the disjoint intervals their labels cut the code points into, each with
    the targets of the labels that cover it (intervals no label covers left out)."""
    points = sorted({p for ranges, _ in moves for a, b in ranges for p in (a, b + 1)})
    covers: list[set[int]] = [set() for _ in points]
    for ranges, t in moves:
        for a, b in ranges:
            for i in range(bisect.bisect_left(points, a), bisect.bisect_left(points, b + 1)):
                covers[i].add(t)
    return [(points[i], points[i + 1] - 1, frozenset(c)) for i, c in enumerate(covers) if c]


def _group(intervals: list[tuple[int, int, int]]) -> Edges:
    """(lo, hi, target) intervals -> ranges per target, targets in order of first code point."""
    by_target: dict[int, list[tuple[int, int]]] = {}
    for a, b, t in sorted(intervals):
        by_target.setdefault(t, []).append((a, b))
    return tuple((_coalesce(r), t) for t, r in by_target.items())


def determinize(nfa: _Nfa, max_states: int = _DFA_STATES) -> Dfa | None:
    """The subset construction of ``nfa``; None past ``max_states`` states."""

    def closed(states: frozenset[int] | set[int]) -> frozenset[int]:
        out: set[int] = set()
        for q in states:
            out |= nfa.closure(q)
        return frozenset(out)

    start = closed({nfa.start})
    index = {start: 0}
    subsets = [start]
    edges: list[Edges] = []
    for subset in subsets:  # grows while it is walked
        moves = [m for x in subset for m in nfa.moves[x]]
        intervals = []
        for a, b, targets in _split(moves):
            nxt = closed(targets)
            t = index.get(nxt)
            if t is None:
                if len(subsets) >= max_states:
                    return None
                t = index[nxt] = len(subsets)
                subsets.append(nxt)
            intervals.append((a, b, t))
        edges.append(_group(intervals))
    return Dfa(tuple(edges), tuple(nfa.accept in s for s in subsets))


def intersect(dfas: list[Dfa], max_states: int = _DFA_STATES) -> Dfa | None:
    """The product automaton of ``dfas`` (their languages' intersection); None past ``max_states``."""
    return _product(dfas, max_states, every=True)


def union(dfas: list[Dfa], max_states: int = _DFA_STATES) -> Dfa | None:
    """The product automaton of ``dfas`` for their languages' union (a side with no move left
    is out, -1, and the tuple goes on with the others); None past ``max_states``."""
    return _product(dfas, max_states, every=False)


def _product(dfas: list[Dfa], max_states: int, every: bool) -> Dfa | None:
    """The product of ``dfas`` over tuples of their states (-1: a side out): a code point moves
    where every side moves (``every``: the intersection) or where any does (the union, the others
    going out); a tuple accepts where every side, or any side, does."""
    start = (0,) * len(dfas)
    index = {start: 0}
    tuples = [start]
    edges: list[Edges] = []
    for qs in tuples:
        # Every live side's moves, numbered: a side's labels are disjoint, so an interval is
        # covered by at most one move of each side.
        flat = [(r, t, side) for side, (d, q) in enumerate(zip(dfas, qs, strict=True)) if q >= 0 for r, t in d.edges[q]]
        intervals = []
        for a, b, covering in _split([(r, i) for i, (r, _, _) in enumerate(flat)]):
            if every and len(covering) < len(dfas):
                continue
            key = [-1] * len(dfas)
            for i in covering:
                key[flat[i][2]] = flat[i][1]
            target = tuple(key)
            n = index.get(target)
            if n is None:
                if len(tuples) >= max_states:
                    return None
                n = index[target] = len(tuples)
                tuples.append(target)
            intervals.append((a, b, n))
        edges.append(_group(intervals))
    combine = all if every else any
    accepting = tuple(combine(q >= 0 and d.accepting[q] for d, q in zip(dfas, qs, strict=True)) for qs in tuples)
    return Dfa(tuple(edges), accepting)


def _equivalent(
    states: list[int], edges: dict[int, list[tuple[Ranges, int]]], accepting: tuple[bool, ...], max_work: int
) -> dict[int, int] | None:
    """Hopcroft's partition refinement of ``states`` (every one can accept; a missing move goes
    to a sink): a block per state, equal for states with equal languages. The alphabet is the
    classes of code points that the same labels cover (they move alike from every state). None
    once the predecessor lists walked pass ``max_work`` entries."""
    index = {q: i for i, q in enumerate(states)}
    sink = len(states)
    labels = list({r for q in states for r, _ in edges[q]})
    points = sorted({p for r in labels for a, b in r for p in (a, b + 1)})
    cover: list[list[int]] = [[] for _ in points]
    for li, r in enumerate(labels):
        for a, b in r:
            for i in range(bisect.bisect_left(points, a), bisect.bisect_left(points, b + 1)):
                cover[i].append(li)
    reps = list({tuple(c): points[i] for i, c in enumerate(cover) if c}.values())
    # inv[c][t]: the states whose move on class c goes to t (each state is in one list per class).
    inv: list[list[list[int]]] = [[[] for _ in range(sink + 1)] for _ in reps]
    for q in states:
        flat = sorted((a, b, index[t]) for r, t in edges[q] for a, b in r)
        starts = [a for a, _, _ in flat]
        for c, x in enumerate(reps):
            i = bisect.bisect_right(starts, x) - 1
            inv[c][flat[i][2] if i >= 0 and flat[i][1] >= x else sink].append(index[q])
    for c in range(len(reps)):
        inv[c][sink].append(sink)
    blocks = [{index[q] for q in states if accepting[q]}, {index[q] for q in states if not accepting[q]} | {sink}]
    block_of = [0] * (sink + 1)
    for q in blocks[1]:
        block_of[q] = 1
    work = {0 if len(blocks[0]) <= len(blocks[1]) else 1}
    walked = 0
    while work:
        splitter = list(blocks[work.pop()])
        for c in range(len(reps)):
            into: dict[int, list[int]] = {}  # block -> its states moving into the splitter on c
            for t in splitter:
                walked += len(inv[c][t])
                for p in inv[c][t]:
                    into.setdefault(block_of[p], []).append(p)
            if walked > max_work:
                return None
            for y, inside in into.items():
                if len(inside) == len(blocks[y]):
                    continue
                part = set(inside)
                blocks[y] -= part
                new = len(blocks)
                blocks.append(part)
                for p in part:
                    block_of[p] = new
                # Hopcroft: a block waiting stays so with both halves; else the smaller half waits.
                work.add(new if y in work or len(part) <= len(blocks[y]) else y)
    return {q: block_of[index[q]] for q in states}


def minimize(dfa: Dfa, max_work: int = _MINIMIZE_WORK) -> Dfa:
    """``dfa`` trimmed and minimized: states that cannot reach an accepting state are dropped
    (their moves with them), the rest merged by Hopcroft's partition refinement (none merged
    when that passes ``max_work``). Start stays state 0, the others are numbered in the order a
    walk from it meets them; a language with no string is one state with no move that rejects."""
    n = len(dfa.edges)
    back: list[list[int]] = [[] for _ in range(n)]
    for q, es in enumerate(dfa.edges):
        for _, t in es:
            back[t].append(q)
    live = {q for q in range(n) if dfa.accepting[q]}
    stack = list(live)
    while stack:
        for p in back[stack.pop()]:
            if p not in live:
                live.add(p)
                stack.append(p)
    if 0 not in live:
        return Dfa(((),), (False,))
    states = sorted(live)
    edges = {q: [(r, t) for r, t in dfa.edges[q] if t in live] for q in states}
    block = _equivalent(states, edges, dfa.accepting, max_work)
    if block is None:  # merge none: still deterministic, only larger
        block = {q: i for i, q in enumerate(states)}
    # Renumber blocks in visiting order from the start, so equal languages give equal automata.
    order = {block[0]: 0}
    rep = [0]
    for q in rep:
        for _, t in sorted(edges[q]):
            if block[t] not in order:
                order[block[t]] = len(rep)
                rep.append(t)
    out_edges = []
    for q in rep:
        merged: dict[int, list[tuple[int, int]]] = {}
        for ranges, t in edges[q]:
            merged.setdefault(order[block[t]], []).extend(ranges)
        out_edges.append(_group([(a, b, t) for t, rs in merged.items() for a, b in rs]))
    return Dfa(tuple(out_edges), tuple(dfa.accepting[q] for q in rep))


def minimal_union(dfas: list[Dfa], max_states: int = _DFA_STATES) -> Dfa | None:
    """The minimal DFA of the union of ``dfas``' languages; None past ``max_states`` states."""
    product = union(dfas, max_states)
    return None if product is None else minimize(product)


def minimal_intersection(dfas: list[Dfa], max_states: int = _DFA_STATES) -> Dfa | None:
    """The minimal DFA of the intersection of ``dfas``' languages; None past ``max_states``."""
    if len(dfas) == 1:
        return dfas[0]
    product = intersect(dfas, max_states)
    return None if product is None else minimize(product)


def minimal_dfa(nfas: list[_Nfa], max_states: int = _DFA_STATES) -> Dfa | None:
    """The minimal DFA of the intersection of ``nfas``' languages; None past ``max_states``
    states at any step."""
    dfas = []
    for nfa in nfas:
        d = determinize(nfa, max_states)
        if d is None:
            return None
        dfas.append(minimize(d))
    return minimal_intersection(dfas, max_states)


@dataclass(frozen=True)
class LengthProduct:
    """``dfa`` × a length counter for strings of [lo, hi] code points: per kept (state, count)
    pair, whether it accepts and its moves (ranges, target pair). Pairs are kept when reachable
    from (0, 0) and able to reach an accepting pair, in the order a backward search from the
    accepting pairs finds them; with ``hi`` open, counts stop at ``lo`` (longer prefixes are
    alike). ``pairs`` is empty when the language is."""

    pairs: dict[tuple[int, int], tuple[bool, tuple[tuple[Ranges, tuple[int, int]], ...]]]


def farthest_accept(dfa: Dfa) -> int:
    """The most code points any state of ``dfa`` (minimal: every state can accept) needs to reach
    an accepting state."""
    into: list[list[int]] = [[] for _ in dfa.edges]
    for q, edges in enumerate(dfa.edges):
        for _, t in edges:
            into[t].append(q)
    dist = [-1] * len(dfa.edges)
    order = [q for q, acc in enumerate(dfa.accepting) if acc]
    for q in order:
        dist[q] = 0
    for q in order:  # grows while it is walked: breadth first
        for p in into[q]:
            if dist[p] < 0:
                dist[p] = dist[q] + 1
                order.append(p)
    return max(dist)


def with_length(dfa: Dfa, lo: int, hi: int | None, max_pairs: int = _DFA_LENGTH_RULES) -> LengthProduct | None:
    """The product of ``dfa`` (minimal: every state can accept) with a length counter; None
    past ``max_pairs`` reachable pairs."""
    cap = hi if hi is not None else lo

    def step(k: int) -> int | None:
        if hi is not None:
            return k + 1 if k < hi else None
        return min(k + 1, cap)

    start = (0, 0)
    seen = {start}
    order = [start]
    for q, k in order:  # grows while it is walked
        k2 = step(k)
        if k2 is None:
            continue
        for _, t in dfa.edges[q]:
            if (t, k2) not in seen:
                if len(seen) >= max_pairs:
                    return None
                seen.add((t, k2))
                order.append((t, k2))
    # Backwards from the accepting pairs: a pair lives when an accepting pair is ahead of it.
    back: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for q, k in order:
        k2 = step(k)
        if k2 is not None:
            for _, t in dfa.edges[q]:
                back.setdefault((t, k2), []).append((q, k))
    found = [(q, k) for q, k in order if k >= lo and dfa.accepting[q]]
    live = set(found)
    for pair in found:  # grows while it is walked
        for p in back.get(pair, ()):
            if p not in live:
                live.add(p)
                found.append(p)
    pairs = {}
    if start in live:
        # In the order found: a pair comes after a successor that makes it productive, so the
        # lowering's productivity check (driver._check_productive) settles each rule at once.
        for q, k in found:
            k2 = step(k)
            moves = () if k2 is None else tuple((r, (t, k2)) for r, t in dfa.edges[q] if (t, k2) in live)
            pairs[(q, k)] = (k >= lo and dfa.accepting[q], moves)
    return LengthProduct(pairs)
