"""Code-point-level IR utilities for patterns: finite languages, a Thompson NFA, length
ranges and restriction, literal prefixes (provable disjointness of anchored patterns).

Recursion is bounded: nodes come from our own construction or the regex frontend, whose depth
is bounded by ``Limits.max_nesting``."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable

from logitgate.errors import LimitExceeded
from logitgate.frontends.regex import ANY_STRING
from logitgate.grammar.ir import (
    EMPTY,
    Alt,
    CharClass,
    Literal,
    Node,
    Repeat,
    Seq,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.grammar.json_text import positive_ranges as _positive_ranges
from logitgate.grammar.json_text import seq as _seq
from logitgate.limits import Limits

from .caps import _FIT_COPIES, _NFA_PRODUCT_RULES, _NFA_STATES, _RELAXED_SPAN, PATTERN_DEPTH

_ANY_CHAR = CharClass(((0, 0x10FFFF),))

# whose depth is bounded by Limits.max_nesting).


def _finite_strings(node: Node, limit: int) -> list[str] | None:
    """The strings of a code-point-level node's language when it is finite and has at most
    ``limit`` of them (repetition counted), else None."""
    if type(node) is Literal:
        try:
            return [node.value.decode("utf-8")]
        except UnicodeDecodeError:
            return None
    if type(node) is CharClass:
        if node.negated or sum(b - a + 1 for a, b in node.ranges) > limit:
            return None
        return [chr(c) for a, b in node.ranges for c in range(a, b + 1)]
    if type(node) is Alt:
        out: list[str] = []
        for item in node.items:
            sub = _finite_strings(item, limit - len(out))
            if sub is None:
                return None
            out.extend(sub)
        return out if len(out) <= limit else None
    if type(node) is Seq:
        acc = [""]
        for item in node.items:
            sub = _finite_strings(item, limit)
            if sub is None or len(acc) * len(sub) > limit:
                return None
            acc = [x + y for x in acc for y in sub]
        return acc
    if type(node) is Repeat and node.max is not None:
        sub = _finite_strings(node.item, limit)
        if sub is None:
            return None
        out, level = [], [""]
        for n in range(node.max + 1):
            if n >= node.min:
                out.extend(level)
            if len(out) > limit:
                return None
            if n < node.max:
                if len(level) * len(sub) > limit:
                    return None
                level = [x + y for x in level for y in sub]
        return out
    return None


class _Nfa:
    """Thompson NFA over code points of a code-point-level IR node (no byte classes)."""

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.moves: list[list[tuple[tuple[tuple[int, int], ...], int]]] = []
        self.start = 0
        self.accept = 0
        self._closures: dict[int, frozenset[int]] = {}
        self._successors: list[frozenset[int]] | None = None

    def state(self) -> int:
        self.eps.append([])
        self.moves.append([])
        if len(self.eps) > _NFA_STATES:
            raise _NfaTooLarge
        return len(self.eps) - 1

    def closure(self, q: int) -> frozenset[int]:
        """States reachable from q by epsilon moves (memoized)."""
        hit = self._closures.get(q)
        if hit is None:
            seen = {q}
            stack = [q]
            while stack:
                x = stack.pop()
                for t in self.eps[x]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            hit = self._closures[q] = frozenset(seen)
        return hit

    def successors(self) -> list[frozenset[int]]:
        """Per state q: the states one code point moves to from q's closure (memoized)."""
        if self._successors is None:
            self._successors = [
                frozenset(t for x in self.closure(q) for _, t in self.moves[x]) for q in range(len(self.moves))
            ]
        return self._successors

    @classmethod
    def build(cls, node: Node, limits: Limits) -> _Nfa | None:
        nfa = cls()
        try:
            nfa.start = nfa.state()
            nfa.accept = nfa.state()
            nfa._add(node, nfa.start, nfa.accept, limits, 0)
        except _NfaTooLarge:
            return None
        return nfa

    def _add(self, node: Node, a: int, b: int, limits: Limits, depth: int) -> None:
        """Wire ``node`` from state a to state b (recursion bounded like the other node walks)."""
        _depth_guard(depth, limits)
        if isinstance(node, Literal):
            chars = node.value.decode("utf-8")
            cur = a
            for i, ch in enumerate(chars):
                nxt = b if i == len(chars) - 1 else self.state()
                self.moves[cur].append((((ord(ch), ord(ch)),), nxt))
                cur = nxt
            if not chars:
                self.eps[a].append(b)
        elif isinstance(node, CharClass):
            ranges = tuple(_positive_ranges(node))
            if ranges:
                self.moves[a].append((ranges, b))
        elif isinstance(node, Seq):
            cur = a
            for i, item in enumerate(node.items):
                nxt = b if i == len(node.items) - 1 else self.state()
                self._add(item, cur, nxt, limits, depth + 1)
                cur = nxt
            if not node.items:
                self.eps[a].append(b)
        elif isinstance(node, Alt):
            for item in node.items:
                s, t = self.state(), self.state()
                self.eps[a].append(s)
                self.eps[t].append(b)
                self._add(item, s, t, limits, depth + 1)
        elif isinstance(node, Repeat):
            cur = a
            for _ in range(node.min):
                nxt = self.state()
                self._add(node.item, cur, nxt, limits, depth + 1)
                cur = nxt
            if node.max is None:
                s, t = self.state(), self.state()
                self.eps[cur].append(s)
                self.eps[s].append(t)
                self._add(node.item, s, t, limits, depth + 1)
                self.eps[t].append(s)
                self.eps[t].append(b)
                self.eps[cur].append(b)
            else:
                for _ in range(node.max - node.min):
                    nxt = self.state()
                    self.eps[cur].append(b)
                    self._add(node.item, cur, nxt, limits, depth + 1)
                    cur = nxt
                self.eps[cur].append(b)
        else:
            raise _NfaTooLarge


class _NfaTooLarge(Exception):
    pass


def _length_product_size(nfa: _Nfa, hi: int | None, cap: int, budget: int = _NFA_PRODUCT_RULES) -> int:
    """How many (state, length) pairs ``nfa_with_length`` would reach for one NFA (lengths past
    ``cap`` count as ``cap`` when ``hi`` is None), or some number past ``budget`` once the count
    passes it: a product that cannot fit fails in a few ms instead of after building thousands
    of rules."""
    succ = nfa.successors()
    total, layer = _layers_up_to(succ, nfa.start, cap if hi is None else hi, budget)
    if hi is not None:
        return total
    at_cap = set(layer)
    while layer and total <= budget:
        layer = _next_layer(succ, layer) - at_cap
        at_cap |= layer
        total += len(layer)
    return total


def _next_layer(succ: list[frozenset[int]], layer: frozenset[int]) -> frozenset[int]:
    """The states one more code point reaches from ``layer``."""
    return frozenset().union(*(succ[q] for q in layer))


def _layers_up_to(succ: list[frozenset[int]], start: int, last: int, budget: int) -> tuple[int, frozenset[int]]:
    """The layers L_0 = {start}, L_k+1 = succ(L_k) (the states strings of length k reach): the
    sum of their sizes up to L_last (or a number past ``budget``), and L_last. Once a layer
    repeats an earlier one the layers repeat with that period: the rest is counted by periods."""
    layer = frozenset((start,))
    layers = [layer]
    index = {layer: 0}
    total = len(layer)
    k = 0
    while layer and k < last and total <= budget:
        layer = _next_layer(succ, layer)
        k += 1
        k0 = index.get(layer)
        if k0 is not None:
            # L_k = L_k0: the layers L_k0 .. L_k-1 repeat until L_last.
            period = layers[k0:]
            whole, part = divmod(last - k + 1, len(period))
            total += whole * sum(map(len, period)) + sum(map(len, period[:part]))
            return total, period[(last - k0) % len(period)]
        index[layer] = k
        layers.append(layer)
        total += len(layer)
    return total, layer


def _depth_guard(depth: int, limits: Limits) -> None:
    if depth > 4 * limits.max_nesting:
        raise LimitExceeded("max_nesting", limits.max_nesting, "string pattern nesting")
    if depth > PATTERN_DEPTH.value:
        raise PATTERN_DEPTH.exceeded("string pattern nesting")


def _map_leaves(node: Node, fn: Callable[[Node], Node], limits: Limits, depth: int = 0) -> Node:
    _depth_guard(depth, limits)
    if isinstance(node, Seq):
        return _seq(_map_leaves(i, fn, limits, depth + 1) for i in node.items)
    if isinstance(node, Alt):
        return _alt(_map_leaves(i, fn, limits, depth + 1) for i in node.items) if node.items else node
    if isinstance(node, Repeat):
        inner = _map_leaves(node.item, fn, limits, depth + 1)
        return Repeat(inner, node.min, node.max)
    return fn(node)


def _relax_counts(node: Node, limits: Limits, depth: int = 0) -> Node:
    """``node`` with each repetition of at least _RELAXED_SPAN optional counts unbounded
    (``x{0,99}`` -> ``x*``): the language whose automaton loops where ``node``'s counts; the
    same object where there is none."""
    _depth_guard(depth, limits)
    if isinstance(node, (Seq, Alt)):
        items = tuple(_relax_counts(i, limits, depth + 1) for i in node.items)
        if all(a is b for a, b in zip(items, node.items, strict=True)):
            return node
        return Seq(items) if isinstance(node, Seq) else Alt(items)
    if isinstance(node, Repeat):
        inner = _relax_counts(node.item, limits, depth + 1)
        wide = node.max is not None and node.max - node.min >= _RELAXED_SPAN
        if inner is node.item and not wide:
            return node
        return Repeat(inner, node.min, None if wide else node.max)
    return node


class _LengthRanges:
    """The least and most code points of a node's strings (most: None when unbounded),
    memoized by node identity for one walk (_restrict_length, _fit_length ask again of every
    part at every level). The memo holds each node it answers for, so no id is reused while
    it lives."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._memo: dict[int, tuple[Node, tuple[int, int | None]]] = {}

    def __call__(self, node: Node, depth: int = 0) -> tuple[int, int | None]:
        hit = self._memo.get(id(node))
        if hit is not None:
            return hit[1]
        _depth_guard(depth, self.limits)
        out: tuple[int, int | None]
        if isinstance(node, Literal):
            n = len(node.value.decode("utf-8"))
            out = (n, n)
        elif isinstance(node, CharClass):
            out = (1, 1)
        elif isinstance(node, Seq):
            lo = 0
            hi_opt: int | None = 0
            for i in node.items:
                a, b = self(i, depth + 1)
                lo += a
                hi_opt = None if hi_opt is None or b is None else hi_opt + b
            out = (lo, hi_opt)
        elif isinstance(node, Alt):
            if not node.items:
                out = (0, 0)
            else:
                rs = [self(i, depth + 1) for i in node.items]
                his = [b for _, b in rs]
                most = None if any(b is None for b in his) else max(b for b in his if b is not None)
                out = (min(a for a, _ in rs), most)
        elif isinstance(node, Repeat):
            a, b = self(node.item, depth + 1)
            out = (a * node.min, None if node.max is None or b is None else b * node.max)
        else:
            raise TypeError(node)
        self._memo[id(node)] = (node, out)
        return out


def _restrict_length(
    node: Node, lo: int, hi: int | None, limits: Limits, depth: int = 0, lengths: _LengthRanges | None = None
) -> Node | None:
    """``node`` ∩ strings of length [lo, hi], when expressible simply; None when not."""
    _depth_guard(depth, limits)
    if lengths is None:
        lengths = _LengthRanges(limits)
    a, b = lengths(node)
    if a >= lo and (hi is None or (b is not None and b <= hi)):
        return node
    if (hi is not None and a > hi) or (b is not None and b < lo):
        return _EMPTY_LANG
    if isinstance(node, Repeat):
        ia, ib = lengths(node.item)
        if ia == ib and ia > 0:
            w = ia
            nmin = max(node.min, -(-lo // w))
            nmax_parts = [x for x in (node.max, None if hi is None else hi // w) if x is not None]
            nmax = min(nmax_parts) if nmax_parts else None
            if nmax is not None and nmin > nmax:
                return _EMPTY_LANG
            if nmax is not None and nmax > limits.max_repeat:
                return None
            if nmin > limits.max_repeat:  # every string needs more copies than a repetition holds
                raise LimitExceeded("max_repeat", limits.max_repeat, "minimum length")
            return Repeat(node.item, nmin, nmax)
        return None
    if isinstance(node, Seq):
        ranges = [lengths(i) for i in node.items]
        var = [i for i, (x, y) in enumerate(ranges) if x != y]
        if len(var) != 1:
            return None
        fixed = sum(x for i, (x, _) in enumerate(ranges) if i != var[0])
        sub = _restrict_length(
            node.items[var[0]], max(0, lo - fixed), None if hi is None else hi - fixed, limits, depth + 1, lengths
        )
        if sub is None:
            return None
        items = list(node.items)
        items[var[0]] = sub
        return _seq(items)
    if isinstance(node, Alt):
        out = []
        for i in node.items:
            r = _restrict_length(i, lo, hi, limits, depth + 1, lengths)
            if r is None:
                return None
            out.append(r)
        out = [x for x in out if not _is_empty(x)]
        return _alt(out) if out else _EMPTY_LANG
    return None


def _optional(node: Node) -> bool:
    """``(...)?``"""
    return isinstance(node, Repeat) and node.min == 0 and node.max == 1


def _fit_length(node: Node, hi: int, limits: Limits, depth: int = 0, lengths: _LengthRanges | None = None) -> Node:
    """A sub-language of ``node`` whose strings have at most ``hi`` code points, when ``node``
    is too large for the exact intersection (a format's automaton times a length counter): a
    sequence shares the length its parts may add among those that may add it, an optional part
    a third as much as another (a part that needs less keeps its own bound); a repetition keeps
    as many copies as fit at the part's full width when that is at least _FIT_COPIES (or all of
    them), or as many of its narrowest alternatives, else one copy of the whole length,
    _FIT_COPIES copies of an equal share, or _FIT_COPIES times as many of a smaller one. Sound
    (a narrowing; a union of narrowings); a departure documented in docs/json_schema.md."""
    _depth_guard(depth, limits)
    if lengths is None:
        lengths = _LengthRanges(limits)
    a, b = lengths(node)
    if b is not None and b <= hi:
        return node
    if a > hi:
        return _EMPTY_LANG
    if isinstance(node, Alt):
        out = [x for x in (_fit_length(i, hi, limits, depth + 1, lengths) for i in node.items) if not _is_empty(x)]
        return _alt(out) if out else _EMPTY_LANG
    if isinstance(node, Seq):
        ranges = [lengths(i) for i in node.items]
        left = hi - sum(x for x, _ in ranges)
        growing = sorted(
            (i for i, (x, y) in enumerate(ranges) if y != x),
            key=lambda i: (ranges[i][1] is None, (ranges[i][1] or 0) - ranges[i][0]),
        )
        items = list(node.items)
        # An optional part ("(...)?": a URI's query, a port) weighs less than the others.
        weight = {i: 1 if _optional(items[i]) else 3 for i in growing}
        weights = sum(weight.values())
        for i in growing:
            x, y = ranges[i]
            give = left * weight[i] // weights
            if y is not None:
                give = min(give, y - x)
            left -= give
            weights -= weight[i]
            items[i] = _fit_length(items[i], x + give, limits, depth + 1, lengths)
        return _EMPTY_LANG if any(_is_empty(x) for x in items) else _seq(items)
    if isinstance(node, Repeat):

        def copies_of(n: int) -> int:
            """A fitted repetition's count: past max_repeat the core would refuse it."""
            if n > limits.max_repeat:
                raise LimitExceeded("max_repeat", limits.max_repeat, "maximum length")
            return n

        ia, ib = lengths(node.item)
        most = node.max
        count = max(node.min, min(_FIT_COPIES if most is None else most, _FIT_COPIES, hi // max(ia, 1)))
        if ib is not None and ib > 0 and hi // ib >= count:
            # As many copies as fit at full width, or (a union: both are sound) as many of the
            # part's narrowest alternatives as fit (a URI's characters without %XX escapes).
            wide: list[Node] = [
                Repeat(node.item, node.min, copies_of(hi // ib if most is None else min(most, hi // ib)))
            ]
            if 0 < ia < ib:
                narrow = _fit_length(node.item, ia, limits, depth + 1, lengths)
                if not _is_empty(narrow):
                    wide.append(Repeat(narrow, node.min, copies_of(hi // ia if most is None else min(most, hi // ia))))
            return _alt(wide)
        if count == 0:
            return EMPTY
        shapes: list[Node] = []
        # One long copy, a few shorter ones, or _FIT_COPIES times as many short ones (a union:
        # each is sound): a URI path of one long segment, a few, or many short ones.
        many = max(count, min(count * _FIT_COPIES, hi // max(ia, 1)))
        kept: set[int] = set()
        for copies in dict.fromkeys((max(node.min, 1), count, many)):
            item = _fit_length(node.item, hi // copies, limits, depth + 1, lengths)
            if _is_empty(item):
                continue
            width = lengths(item)[1]
            if width:  # the fitted part may be narrower than its share: as many as fit
                copies = max(copies, hi // width if most is None else min(most, hi // width))
            if most is not None:
                copies = min(copies, most)
            if copies in kept:
                # As many copies as a shape before, each fitted to less (`(...)?` cut to a
                # quarter): within that shape, and a head of its own in every configuration.
                continue
            kept.add(copies)
            shapes.append(Repeat(item, node.min, copies_of(copies)))
        return _alt(shapes) if shapes else _EMPTY_LANG
    return _EMPTY_LANG  # (fixed-length leaves are decided by their range above)


@functools.lru_cache(maxsize=4096)  # asked for every pair of a schema's patterns
def _literal_prefix(pattern: str) -> str | None:
    """The literal text every match of an anchored ``^...`` pattern starts with (None: unanchored)."""
    if not pattern.startswith("^"):
        return None
    out: list[str] = []
    i = 1
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            lit, step = pattern[i + 1], 2
        elif ch.isalnum() or ch in "_-:/@ =,;'\"!#%&~<>":
            lit, step = ch, 1
        else:
            break
        nxt = pattern[i + step] if i + step < len(pattern) else ""
        if nxt in ("?", "*", "{"):
            break
        out.append(lit)
        if nxt == "+":
            break
        i += step
    return "".join(out)


def _overlapping_atoms(patterns: list[tuple[str, int]]) -> Callable[[str], set[int]]:
    """For (pattern, atom) pairs: a function from one of the patterns to the atoms of those it is
    not _prefix_disjoint from (itself included). By literal prefix, not pair by pair: a key
    matching several patterns must satisfy each, and objects may list hundreds."""
    unprefixed: set[int] = set()
    by_prefix: dict[str, set[int]] = {}
    for pattern, atom in patterns:
        prefix = _literal_prefix(pattern)
        if prefix:
            by_prefix.setdefault(prefix, set()).add(atom)
        else:
            unprefixed.add(atom)
    every = {atom for _, atom in patterns}
    ordered = sorted(by_prefix)

    def overlapping(pattern: str) -> set[int]:
        prefix = _literal_prefix(pattern)
        if not prefix:
            return every
        out = set(unprefixed)
        for k in range(1, len(prefix) + 1):  # the prefixes this one extends, itself included
            out.update(by_prefix.get(prefix[:k], ()))
        i = bisect.bisect_right(ordered, prefix)  # then those that extend it: a sorted run
        while i < len(ordered) and ordered[i].startswith(prefix):
            out.update(by_prefix[ordered[i]])
            i += 1
        return out

    return overlapping


def _strings_except(words: list[str]) -> Node:
    """Code-point-level node of every string not among ``words``, read
    through the trie of ``words``: the string may end at a trie node that is not a word, and the
    first character that leaves the trie may be followed by anything. Nesting is twice the
    longest word (callers bound it)."""
    trie: dict[str, dict] = {}  # type: ignore[type-arg]
    ends = ""  # the key marking a word's end (no character is the empty string)
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[ends] = {}

    def build(node: dict) -> Node:  # type: ignore[type-arg]
        chars = sorted(ord(c) for c in node if c != ends)
        items: list[Node] = [] if ends in node else [EMPTY]
        items.extend(_seq([Literal(chr(c).encode()), build(node[chr(c)])]) for c in chars)
        ranges = tuple((c, c) for c in chars)
        items.append(_seq([CharClass(ranges, negated=True) if ranges else _ANY_CHAR, ANY_STRING]))
        return _alt(items)

    return build(trie)


def _prefix_disjoint(p: str, q: str) -> bool:
    """Two patterns are provably disjoint when both are anchored with literal prefixes neither of
    which extends the other."""
    a, b = _literal_prefix(p), _literal_prefix(q)
    if not a or not b:
        return False
    return not (a.startswith(b) or b.startswith(a))
