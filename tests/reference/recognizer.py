"""A slow, obviously-correct recognizer over bytes for a Grammar IR (the differential-test oracle).

It shares no code with the core or the frontends: it reads only the IR dataclasses. The grammar is
flattened once into plain productions (Repeat desugared into fresh rules, Literal into one terminal
per byte) and run as a nondeterministic pushdown recognizer: a state is the *set* of all parser
stacks that fit the bytes seen so far. That is the textbook definition of a leftmost derivation, so
ambiguity and nullable rules need no special care.

Invariants that make it cheap enough to use on whole vocabularies:

- Stacks are hash-consed (one object per (production, dot, parent)) and a call in tail position
  reuses the caller's continuation, so repetition does not grow the stack. Inside a JSON string the
  state after ``"ab`` is the *same object* as after ``"a``.
- States are interned by value and immutable; each keeps a per-byte transition cache, so advancing
  one state by many token byte strings shares all common work (walk a byte trie of the vocabulary).
- Every production whose symbols cannot all derive some string is dropped up front, so every stack
  that survives a byte can still reach a sentence: a non-empty state is exactly a viable prefix.

CharClass is matched by decoding UTF-8 here, byte by byte: a partial sequence is kept only while some
completion is a valid scalar value (no overlong forms, no surrogates, at most U+10FFFF) inside the class.

Left recursion (which the core rejects) is detected when it would grow a stack without consuming input
and raises :class:`LeftRecursionError`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from logitgate.grammar.ir import Alt, ByteClass, CharClass, Grammar, Literal, Node, Ref, Repeat, Seq, StringExcept

__all__ = ["LeftRecursionError", "Reference", "State", "TokenTrie", "utf8_prefix_status"]

MAX_SCALAR = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


class LeftRecursionError(ValueError):
    """The grammar is left-recursive; this recognizer (like the core) does not handle it."""


# ---------------------------------------------------------------------------------------------
# Code point sets and the UTF-8 prefix decoder
# ---------------------------------------------------------------------------------------------


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _complement(ranges: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    nxt = lo
    for a, b in ranges:
        if a > nxt:
            out.append((nxt, a - 1))
        nxt = max(nxt, b + 1)
    if nxt <= hi:
        out.append((nxt, hi))
    return out


def _minus(ranges: list[tuple[int, int]], cut: tuple[int, int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in ranges:
        if b < cut[0] or a > cut[1]:
            out.append((a, b))
            continue
        if a < cut[0]:
            out.append((a, cut[0] - 1))
        if b > cut[1]:
            out.append((cut[1] + 1, b))
    return out


def _scalar_set(cc: CharClass) -> tuple[tuple[int, int], ...]:
    """The scalar values a CharClass accepts, merged and sorted, surrogates removed."""
    merged = _merge(cc.ranges)
    if cc.negated:
        merged = _complement(merged, 0, MAX_SCALAR)
    return tuple(_minus(merged, SURROGATES))


def _intersects(ranges: Sequence[tuple[int, int]], lo: int, hi: int) -> bool:
    """Whether sorted disjoint ``ranges`` meet the interval [lo, hi]."""
    i = bisect_right(ranges, (hi, MAX_SCALAR + 1)) - 1  # last range starting at or before hi
    return i >= 0 and ranges[i][1] >= lo


# JSON's short escapes: code point -> the byte after the backslash.
_SHORT_ESCAPES = {0x22: b'"', 0x5C: b"\\", 0x2F: b"/", 0x08: b"b", 0x0C: b"f", 0x0A: b"n", 0x0D: b"r", 0x09: b"t"}

DEAD, PARTIAL, DONE = 0, 1, 2

# Code point interval each encoded length may represent (shorter values would be overlong).
_LEN_BOUNDS = {1: (0x0, 0x7F), 2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, MAX_SCALAR)}


def utf8_prefix_status(data: bytes, allowed: Sequence[tuple[int, int]]) -> int:
    """DONE if ``data`` is one UTF-8 scalar in ``allowed``; PARTIAL if some completion is; else DEAD.

    The completions of a valid lead-byte prefix are exactly one contiguous code point interval (the
    missing payload bits range over all values), clipped to the non-overlong range of its length;
    ``allowed`` already excludes surrogates, so intersecting the two decides viability exactly.
    """
    b0 = data[0]
    if b0 < 0x80:
        length, value = 1, b0
    elif 0xC0 <= b0 < 0xE0:
        length, value = 2, b0 & 0x1F
    elif 0xE0 <= b0 < 0xF0:
        length, value = 3, b0 & 0x0F
    elif 0xF0 <= b0 < 0xF8:
        length, value = 4, b0 & 0x07
    else:
        return DEAD
    if len(data) > length:
        return DEAD
    for b in data[1:]:
        if not 0x80 <= b <= 0xBF:
            return DEAD
        value = (value << 6) | (b & 0x3F)
    missing = 6 * (length - len(data))
    lo = value << missing
    hi = lo | ((1 << missing) - 1)
    min_cp, max_cp = _LEN_BOUNDS[length]
    lo, hi = max(lo, min_cp), min(hi, max_cp)
    if lo > hi or not _intersects(allowed, lo, hi):
        return DEAD
    return DONE if missing == 0 else PARTIAL


# ---------------------------------------------------------------------------------------------
# Flattened grammar
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ByteTerm:
    allowed: frozenset[int]


@dataclass(frozen=True)
class _CharTerm:
    allowed: tuple[tuple[int, int], ...]


_Term = _ByteTerm | _CharTerm


class _Flat:
    """Productions over symbols: a nonterminal is an int >= 0, terminal ``t`` is ``-1 - t``."""

    def __init__(self, grammar: Grammar) -> None:
        self.terms: list[_Term] = []
        self._term_index: dict[_Term, int] = {}
        self.prods: list[tuple[int, ...]] = []
        self.lhs: list[int] = []
        self.n_nonterminals = 0
        self._memo: dict[int, int] = {}  # id(node) -> symbol; the grammar keeps the nodes alive
        self._spellings: dict[tuple[tuple[int, int], ...], int] = {}  # code point set -> its spellings
        self._work: list[tuple[Node, int]] = []
        rule_nt = {name: self._new_nt() for name in grammar.rules}
        self._rule_nt = rule_nt
        if grammar.root not in rule_nt:
            raise ValueError(f"root rule {grammar.root!r} is not defined")
        for name, body in grammar.rules.items():
            self._add(rule_nt[name], (self._sym(body),))
        while self._work:
            node, nt = self._work.pop()
            self._expand(node, nt)
        self.start = self._new_nt()
        self.start_prod = self._add(self.start, (rule_nt[grammar.root],))
        self._prune_unproductive()
        self._compute_min_lengths()

    def _new_nt(self) -> int:
        self.n_nonterminals += 1
        return self.n_nonterminals - 1

    def _add(self, nt: int, syms: tuple[int, ...]) -> int:
        self.prods.append(syms)
        self.lhs.append(nt)
        return len(self.prods) - 1

    def _term(self, t: _Term) -> int:
        if t not in self._term_index:
            self._term_index[t] = len(self.terms)
            self.terms.append(t)
        return -1 - self._term_index[t]

    def _sym(self, node: Node) -> int:
        """Symbol for ``node``; composite nodes get a fresh nonterminal expanded later (no recursion)."""
        if isinstance(node, Ref):
            if node.name not in self._rule_nt:
                raise ValueError(f"undefined rule {node.name!r}")
            return self._rule_nt[node.name]
        if isinstance(node, ByteClass):
            allowed = {b for lo, hi in node.ranges for b in range(lo, hi + 1)}
            if node.negated:
                allowed = set(range(256)) - allowed
            return self._term(_ByteTerm(frozenset(allowed)))
        if isinstance(node, CharClass):
            return self._term(_CharTerm(_scalar_set(node)))
        if id(node) not in self._memo:
            nt = self._new_nt()
            self._memo[id(node)] = nt
            self._work.append((node, nt))
        return self._memo[id(node)]

    def _expand(self, node: Node, nt: int) -> None:
        if isinstance(node, Literal):
            self._add(nt, tuple(self._term(_ByteTerm(frozenset((b,)))) for b in node.value))
        elif isinstance(node, Seq):
            self._add(nt, tuple(self._sym(i) for i in node.items))
        elif isinstance(node, Alt):
            for item in node.items:
                self._add(nt, (self._sym(item),))
        elif isinstance(node, Repeat):
            x = self._sym(node.item)
            head = (x,) * node.min
            if node.max is None:  # T ::= "" | x T
                tail = self._new_nt()
                self._add(tail, ())
                self._add(tail, (x, tail))
                self._add(nt, (*head, tail))
            else:  # O_0 ::= "" ; O_k ::= "" | x O_{k-1}
                opt = self._new_nt()
                self._add(opt, ())
                for _ in range(node.max - node.min):
                    nxt = self._new_nt()
                    self._add(nxt, ())
                    self._add(nxt, (x, opt))
                    opt = nxt
                self._add(nt, (*head, opt))
        elif isinstance(node, StringExcept):
            self._expand_string_except(node, nt)
        else:  # pragma: no cover - guarded by the IR's Node union
            raise TypeError(f"not an IR node: {node!r}")

    # -- StringExcept: JSON spellings, written out here (independently of the frontend) --------

    def _expand_string_except(self, node: StringExcept, nt: int) -> None:
        """A trie over the words' code points; at each trie position the contents may end (if
        that prefix is no word), a child's character in any spelling continues in the child,
        and any other character in any spelling continues with the tail."""
        trie: dict[str, dict] = {}
        for w in node.words:
            t = trie
            for ch in w:
                t = t.setdefault(ch, {})
            t[""] = {}
        tail = self._sym(node.tail)
        work: list[tuple[dict[str, dict], int]] = [(trie, nt)]
        while work:
            t, x = work.pop()
            kids = sorted(ord(k) for k in t if k)
            if "" not in t:
                self._add(x, ())
            others = _complement(_merge((c, c) for c in kids), 0, MAX_SCALAR)
            self._add(x, (self._spelling(others), tail))
            for c in kids:
                child = self._new_nt()
                self._add(x, (self._spelling([(c, c)]), child))
                work.append((t[chr(c)], child))

    def _spelling(self, ranges: list[tuple[int, int]]) -> int:
        """A nonterminal for one character of ``ranges`` in any JSON spelling (one per set)."""
        scalars = _minus(_merge(ranges), SURROGATES)
        key = tuple(scalars)
        if key in self._spellings:
            return self._spellings[key]
        x = self._spellings[key] = self._new_nt()
        raw = _minus(_minus(_minus(scalars, (0, 0x1F)), (0x22, 0x22)), (0x5C, 0x5C))
        if raw:
            self._add(x, (self._term(_CharTerm(tuple(raw))),))
        backslash = self._term(_ByteTerm(frozenset(b"\\")))
        for cp, esc in _SHORT_ESCAPES.items():
            if _intersects(scalars, cp, cp):
                self._add(x, (backslash, self._term(_ByteTerm(frozenset(esc)))))
        u = self._term(_ByteTerm(frozenset(b"u")))
        for lo, hi in scalars:
            if lo <= 0xFFFF:  # \uXXXX (surrogates are already out)
                for digits in self._hex_sequences(lo, min(hi, 0xFFFF)):
                    self._add(x, (backslash, u, *digits))
            if hi >= 0x10000:  # surrogate pairs: a partial first and last high half, full ones between
                a, b = max(lo, 0x10000), hi
                high_a, high_b = 0xD800 + ((a - 0x10000) >> 10), 0xD800 + ((b - 0x10000) >> 10)
                low_a, low_b = 0xDC00 + ((a - 0x10000) & 0x3FF), 0xDC00 + ((b - 0x10000) & 0x3FF)
                if high_a == high_b:
                    pieces = [(high_a, high_a, low_a, low_b)]
                else:
                    pieces = [(high_a, high_a, low_a, 0xDFFF), (high_b, high_b, 0xDC00, low_b)]
                    if high_a + 1 <= high_b - 1:
                        pieces.append((high_a + 1, high_b - 1, 0xDC00, 0xDFFF))
                for h_lo, h_hi, l_lo, l_hi in pieces:
                    for hd in self._hex_sequences(h_lo, h_hi):
                        for ld in self._hex_sequences(l_lo, l_hi):
                            self._add(x, (backslash, u, *hd, backslash, u, *ld))
        return x

    def _hex_sequences(self, lo: int, hi: int) -> list[tuple[int, ...]]:
        """Four hex digit terminals per way of spelling the values [lo, hi] (either case)."""
        out: list[tuple[int, ...]] = []
        stack: list[tuple[int, int, int, tuple[int, ...]]] = [(lo, hi, 4, ())]
        while stack:
            a, b, width, prefix = stack.pop()
            if width == 0:
                out.append(prefix)
                continue
            size = 16 ** (width - 1)
            for d in range(a // size, b // size + 1):
                sub_lo, sub_hi = max(a, d * size), min(b, d * size + size - 1)
                if sub_lo == d * size and sub_hi == d * size + size - 1:
                    rest = (self._hex_digit(0, 15),) * (width - 1)
                    out.append((*prefix, self._hex_digit(d, d), *rest))
                else:
                    stack.append((sub_lo - d * size, sub_hi - d * size, width - 1, (*prefix, self._hex_digit(d, d))))
        return out

    def _hex_digit(self, a: int, b: int) -> int:
        spelled = {ord(c) for v in range(a, b + 1) for c in f"{v:x}{v:X}"}
        return self._term(_ByteTerm(frozenset(spelled)))

    def _prune_unproductive(self) -> None:
        """Keep only productions all of whose symbols derive some byte string."""
        term_ok = [bool(t.allowed) for t in self.terms]
        productive = [False] * self.n_nonterminals
        changed = True
        while changed:
            changed = False
            for p, syms in enumerate(self.prods):
                if productive[self.lhs[p]]:
                    continue
                if all(term_ok[-1 - s] if s < 0 else productive[s] for s in syms):
                    productive[self.lhs[p]] = True
                    changed = True
        self.prods_of: list[list[int]] = [[] for _ in range(self.n_nonterminals)]
        for p, syms in enumerate(self.prods):
            if all(term_ok[-1 - s] if s < 0 else productive[s] for s in syms):
                self.prods_of[self.lhs[p]].append(p)

    def _compute_min_lengths(self) -> None:
        """``min_len[sym]``: bytes in a shortest string ``sym`` derives (terminals indexed negatively)."""
        inf = 1 << 60
        self.min_len: dict[int, int] = {}
        for t, term in enumerate(self.terms):
            if isinstance(term, _ByteTerm):
                self.min_len[-1 - t] = 1 if term.allowed else inf
            else:
                self.min_len[-1 - t] = min((_utf8_length_of_cp(lo) for lo, _ in term.allowed), default=inf)
        for nt in range(self.n_nonterminals):
            self.min_len[nt] = inf
        changed = True
        while changed:
            changed = False
            for nt in range(self.n_nonterminals):
                for p in self.prods_of[nt]:
                    cost = sum(self.min_len[s] for s in self.prods[p])
                    if cost < self.min_len[nt]:
                        self.min_len[nt] = cost
                        changed = True


def _utf8_length_of_cp(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def _utf8_length(lead: int) -> int:
    return 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


# ---------------------------------------------------------------------------------------------
# Stacks and states
# ---------------------------------------------------------------------------------------------


class _Stack:
    """One parser stack: ``prod`` resumed at ``dot`` on top, then ``parent`` (None = accept)."""

    __slots__ = ("depth", "dot", "parent", "prod")

    def __init__(self, prod: int, dot: int, parent: _Stack | None) -> None:
        self.depth: int = 1 + (parent.depth if parent is not None else 0)
        self.prod = prod
        self.dot = dot
        self.parent = parent


# A configuration: a stack whose top symbol is a terminal, plus the bytes of a partly read UTF-8
# character for a CharClass terminal (b"" otherwise). ``_ACCEPT`` marks "a sentence ends here".
_Config = tuple[_Stack | None, bytes]
_ACCEPT: _Config = (None, b"")


class State:
    """An immutable, interned set of configurations; compare with ``is``."""

    __slots__ = ("_allowed", "_next", "complete", "configs", "index")

    def __init__(self, configs: frozenset[_Config], index: int) -> None:
        self.configs = configs
        self.complete = _ACCEPT in configs
        self.index = index
        self._next: dict[int, State | None] = {}
        self._allowed: dict[int, frozenset[int]] = {}

    def __repr__(self) -> str:
        return f"<State #{self.index}: {len(self.configs)} configs{' complete' if self.complete else ''}>"


class TokenTrie:
    """A byte trie of a token list: node ``n`` has children ``kids[n]`` and ends ``ends[n]``."""

    def __init__(self, tokens: Iterable[tuple[int, bytes]]) -> None:
        self.kids: list[dict[int, int]] = [{}]
        self.ends: list[list[int]] = [[]]
        self.empty_tokens: list[int] = []
        for tid, data in tokens:
            if not data:
                self.empty_tokens.append(tid)
                continue
            node = 0
            for b in data:
                nxt = self.kids[node].get(b)
                if nxt is None:
                    nxt = len(self.kids)
                    self.kids[node][b] = nxt
                    self.kids.append({})
                    self.ends.append([])
                node = nxt
            self.ends[node].append(tid)


class Reference:
    """Recognizer for ``grammar`` over bytes. ``advance`` returns None once no sentence can follow."""

    def __init__(self, grammar: Grammar, max_configs: int = 200_000) -> None:
        self.grammar = grammar
        self._flat = _Flat(grammar)
        self._max_configs = max_configs
        self._stacks: dict[tuple[int, int, int], _Stack] = {}
        self._states: dict[frozenset[_Config], State] = {}
        self._cost: dict[_Stack, int] = {}
        bottom = self._stack(self._flat.start_prod, 0, None)
        self._start = self._intern(self._closure([bottom], set()))

    # -- public API -------------------------------------------------------------------------

    def start(self) -> State:
        """The state before any byte (empty if the language is empty)."""
        return self._start

    def advance(self, state: State | None, data: bytes) -> State | None:
        """The state after ``data``, or None if ``data`` leaves no viable prefix."""
        for b in data:
            if state is None:
                return None
            state = self._advance_byte(state, b)
        return state if state is not None and state.configs else None

    def is_complete(self, state: State | None) -> bool:
        """Whether the bytes that led to ``state`` form a sentence."""
        return state is not None and state.complete

    def is_viable(self, state: State | None) -> bool:
        return state is not None and bool(state.configs)

    def accepts(self, data: bytes) -> bool:
        """Whether ``data`` is a sentence of the language."""
        return self.is_complete(self.advance(self._start, data))

    def allowed_tokens(self, state: State, trie: TokenTrie) -> frozenset[int]:
        """Ids in ``trie`` whose bytes keep ``state`` viable (empty tokens excluded); cached per state."""
        cached = state._allowed.get(id(trie))
        if cached is not None:
            return cached
        allowed: list[int] = []
        kids, ends = trie.kids, trie.ends
        work: list[tuple[int, State]] = [(0, state)]
        while work:
            node, st = work.pop()
            for b, child in kids[node].items():
                nxt = self._advance_byte(st, b)
                if nxt is None:
                    continue
                allowed.extend(ends[child])
                if kids[child]:
                    work.append((child, nxt))
        result = frozenset(allowed)
        state._allowed[id(trie)] = result
        return result

    def min_completion_length(self, state: State) -> int | None:
        """Length of a shortest byte string that completes ``state`` (None: the state is not viable)."""
        best: int | None = None
        for cfg in state.configs:
            st, partial = cfg
            if st is None:
                return 0
            cost = self._stack_cost(st)
            if partial:  # finish the started character instead of a whole new one
                cost += _utf8_length(partial[0]) - len(partial) - self._flat.min_len[self._flat.prods[st.prod][st.dot]]
            best = cost if best is None else min(best, cost)
        return best

    def _stack_cost(self, st: _Stack) -> int:
        """Sum of the minimal lengths of every symbol still to match on the stack (memoized)."""
        chain: list[_Stack] = []
        node: _Stack | None = st
        while node is not None and node not in self._cost:
            chain.append(node)
            node = node.parent
        total = self._cost[node] if node is not None else 0
        min_len, prods = self._flat.min_len, self._flat.prods
        for frame in reversed(chain):
            total += sum(min_len[sym] for sym in prods[frame.prod][frame.dot :])
            self._cost[frame] = total
        return self._cost[st]

    def next_bytes(self, state: State) -> list[int]:
        """Bytes that keep ``state`` viable."""
        return [b for b in range(256) if self._advance_byte(state, b) is not None]

    # -- machinery --------------------------------------------------------------------------

    def _stack(self, prod: int, dot: int, parent: _Stack | None) -> _Stack:
        key = (prod, dot, id(parent) if parent is not None else -1)
        st = self._stacks.get(key)
        if st is None:
            st = _Stack(prod, dot, parent)
            self._stacks[key] = st
        return st

    def _intern(self, configs: set[_Config]) -> State:
        frozen = frozenset(configs)
        st = self._states.get(frozen)
        if st is None:
            st = State(frozen, len(self._states))
            self._states[frozen] = st
        return st

    def _closure(self, seeds: list[_Stack], out: set[_Config]) -> set[_Config]:
        """Expand ``seeds`` until every stack has a terminal on top (or the sentence may end).

        Without consuming input a stack can only grow through a chain of distinct nonterminals, so
        growing by more than the number of nonterminals means left recursion.
        """
        flat = self._flat
        prods, prods_of = flat.prods, flat.prods_of
        limit = max((s.depth for s in seeds), default=0) + flat.n_nonterminals + 2
        seen: set[_Stack] = set()
        work = list(seeds)
        while work:
            st = work.pop()
            if st in seen:
                continue
            seen.add(st)
            syms = prods[st.prod]
            if st.dot == len(syms):
                if st.parent is None:
                    out.add(_ACCEPT)
                else:
                    work.append(st.parent)
                continue
            sym = syms[st.dot]
            if sym < 0:
                out.add((st, b""))
                if len(out) > self._max_configs:
                    raise RuntimeError("reference state too large (grammar too ambiguous for the oracle)")
                continue
            # Tail call: the callee returns straight to our caller, so the stack does not grow.
            cont = st.parent if st.dot + 1 == len(syms) else self._stack(st.prod, st.dot + 1, st.parent)
            for q in prods_of[sym]:
                child = self._stack(q, 0, cont)
                if child.depth > limit:
                    raise LeftRecursionError("left-recursive grammar")
                work.append(child)
        return out

    def _advance_byte(self, state: State, b: int) -> State | None:
        cache = state._next
        if b in cache:
            return cache[b]
        flat = self._flat
        prods, terms = flat.prods, flat.terms
        seeds: list[_Stack] = []
        out: set[_Config] = set()
        for cfg in state.configs:
            st, partial = cfg
            if st is None:
                continue
            term = terms[-1 - prods[st.prod][st.dot]]
            if isinstance(term, _ByteTerm):
                if b in term.allowed:
                    seeds.append(self._stack(st.prod, st.dot + 1, st.parent))
                continue
            data = partial + bytes((b,))
            status = utf8_prefix_status(data, term.allowed)
            if status == DONE:
                seeds.append(self._stack(st.prod, st.dot + 1, st.parent))
            elif status == PARTIAL:
                out.add((st, data))
        self._closure(seeds, out)
        result = self._intern(out) if out else None
        cache[b] = result
        return result
