"""Emission of arrays: prefix items, items, ``contains``, ``uniqueItems``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from logitgate.errors import LimitExceeded, _int_text
from logitgate.grammar.ir import (
    EMPTY,
    Literal,
    Node,
    Ref,
    Repeat,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.grammar.json_text import opt as _opt
from logitgate.grammar.json_text import seq as _seq
from logitgate.limits import Limits

from .caps import _COUNT_STATES
from .decide import Decider
from .diagnostics import Diagnostics
from .facts import _Facts
from .literals import LiteralEmitter
from .resolve import _Index
from .rules import RuleTable


class ArrayEmitter:
    """Array rules from facts; sub-schemas through ``ref``."""

    def __init__(
        self,
        table: RuleTable,
        diag: Diagnostics,
        dec: Decider,
        index: _Index,
        lits: LiteralEmitter,
        ref: Callable[[Iterable[int]], Node],
        limits: Limits,
    ) -> None:
        self.table = table
        self.diag = diag
        self.dec = dec
        self.index = index
        self.lits = lits
        self.ref = ref
        self.limits = limits

    def emit_array(self, f: _Facts) -> Node:
        lo, hi = f.min_items, f.max_items
        prefix_len = max((len(p.prefix) for p in f.arrs), default=0)
        positions: list[frozenset[int] | None] = [self.dec.position_atoms(f, i) for i in range(prefix_len)]
        rest = self.dec.position_atoms(f, prefix_len)
        for i, atoms in enumerate(positions):
            if atoms is None:
                hi = i if hi is None else min(hi, i)
                positions = positions[:i]
                break
        if rest is None:
            hi = len(positions) if hi is None else min(hi, len(positions))
        if hi is not None and lo > hi:
            self.diag.contradiction(f, "", "minItems > maxItems")
            return _EMPTY_LANG
        if f.unique is not None and (hi is None or hi > 1):
            domain = self.dec.finite_domain(rest) if rest is not None and not positions and not f.contains else None
            if domain is not None:
                return self._unique_array(domain, lo, hi)
            self.diag.unsupported("uniqueItems", "uniqueItems over arrays that may hold several items", f.unique)
        ws = self.table.ws()
        sep = self.table.comma()
        if f.contains:
            return self.emit_contains(f, positions, rest, lo, hi)
        # element nodes
        elems = [self.ref(a) for a in positions if a is not None]
        rest_node = self.ref(rest) if rest is not None else _EMPTY_LANG
        n_pre = len(elems)
        # tail after position n_pre (all rest items)
        if hi is not None and hi <= n_pre:
            tail: Node = EMPTY
        else:
            # The items past the prefix (past the first, without one) are one repetition:
            # counts past max_repeat are refused here, naming the keyword (the core would name
            # only the rule).
            fixed = max(n_pre, 1)
            if hi is not None and hi - fixed > self.limits.max_repeat:
                raise LimitExceeded(
                    "max_repeat", self.limits.max_repeat, f"maxItems {_int_text(hi)}", pointer=f.max_items_ptr
                )
            if lo - fixed > self.limits.max_repeat and not _is_empty(rest_node):
                raise LimitExceeded(
                    "max_repeat", self.limits.max_repeat, f"minItems {_int_text(lo)}", pointer=f.min_items_ptr
                )
            rmin = max(0, lo - n_pre)
            tail = (
                Repeat(_seq([sep, rest_node]), rmin, None if hi is None else hi - n_pre)
                if not _is_empty(rest_node)
                else (EMPTY if rmin == 0 else _EMPTY_LANG)
            )
        # build the element chain right to left: chain_i = sep? elem_i chain_{i+1}
        n_chain = n_pre if hi is None else min(n_pre, hi)
        chain = tail
        for i in range(n_chain - 1, 0, -1):
            step = _seq([sep, elems[i], chain])
            chain = step if i < lo else _opt(step)
            if i % 8 == 0 and i > 1:
                name = f"arr{len(self.table.rules)}"
                self.table.rules[name] = chain
                chain = Ref(name)
        if n_chain > 0:
            first = _seq([ws, elems[0], chain])
        else:
            # no prefix: first rest item then more
            if _is_empty(rest_node) or hi == 0:
                first = _EMPTY_LANG
            else:
                rmin = max(0, lo - 1)
                more = Repeat(_seq([sep, rest_node]), rmin, None if hi is None else hi - 1)
                first = _seq([ws, rest_node, more])
        body = [
            Literal(b"["),
            _seq([first, ws, Literal(b"]")])
            if lo > 0
            else _alt([_seq([first, ws, Literal(b"]")]), _seq([ws, Literal(b"]")])]),
        ]
        return _seq(body)

    def _unique_array(self, domain: list[Any], lo: int, hi: int | None) -> Node:
        """Arrays of distinct values from a finite domain: one rule per subset of used values (the
        subset's size is the item count)."""
        ws = self.table.ws()
        sep_ws = self.table.comma()
        lits = [self.lits.value_literal(v, 0) for v in domain]
        base = f"uq{len(self.table.rules)}_"
        n = len(domain)
        for mask in range((1 << n) - 1, -1, -1):
            count = bin(mask).count("1")
            started = mask != 0  # mask 0 is the start only; every other one follows an item
            lead = sep_ws if started else ws
            alts: list[Node] = []
            if count >= lo:
                alts.append(EMPTY)
            if hi is None or count < hi:
                for i in range(n):
                    if not mask >> i & 1:
                        alts.append(_seq([lead, lits[i], Ref(f"{base}{mask | 1 << i}_1")]))
            self.table.rules[f"{base}{mask}_{int(started)}"] = _alt(alts) if alts else _EMPTY_LANG
        return _seq([Literal(b"["), Ref(f"{base}0_0"), ws, Literal(b"]")])

    def emit_contains(
        self, f: _Facts, positions: list[frozenset[int] | None], rest: frozenset[int] | None, lo: int, hi: int | None
    ) -> Node:
        """Arrays that count, per ``contains`` schema, the items matching it. A state is (counts,
        n, started): each count capped one past its maxContains (at its minContains without one),
        n exact while the item bounds or the prefix positions need it. An item takes a set S of
        the contains schemas: it satisfies those and, for each other one with a maximum, its
        complement, so those counts are exact; a contains without a maximum is not complemented
        (an item counted as unmatched may match: its count falls short, never passes wrongly)."""
        conts = f.contains
        if not positions and rest is None:
            return (
                _EMPTY_LANG if any(c.min > 0 for c in conts) else _seq([Literal(b"["), self.table.ws(), Literal(b"]")])
            )
        if any(c.max is not None and c.max < c.min for c in conts):
            return _EMPTY_LANG
        for c in conts:
            # An array holds at least minContains items: past maxItems that is empty, past
            # max_repeat a count the grammar cannot hold (as minItems would be).
            if hi is not None and c.min > hi:
                self.diag.contradiction(f, c.min_ptr, "minContains > maxItems")
                return _EMPTY_LANG
            if c.min - 1 > self.limits.max_repeat:
                what = f"minContains {_int_text(c.min)}"
                raise LimitExceeded("max_repeat", self.limits.max_repeat, what, pointer=c.min_ptr)
        caps = [c.min if c.max is None else c.max + 1 for c in conts]
        need_n = hi if hi is not None else max(lo, len(positions))
        choices = 1 << len(conts)
        if math.prod(c + 1 for c in caps) * (need_n + 1) * choices > _COUNT_STATES * 2:
            # Named by the largest count, when a count of its own sets it (maxContains, minContains).
            big = conts[max(range(len(conts)), key=lambda i: caps[i])]
            kw, at = "contains", big.ptr
            if big.max is not None:
                kw, at = "maxContains", big.max_ptr
            elif big.min > 1:
                kw, at = "minContains", big.min_ptr
            self.diag.unsupported(kw, "counting state space too large (the whole contains is refused)", at)
            return self.emit_array(replace(f, contains=[]))
        ws = self.table.ws()
        sep = self.table.comma()
        base = f"ct{len(self.table.rules)}_"
        negated = [self.index.not_atom(c.atom, c.ptr, "") if c.max is not None else 0 for c in conts]
        items: dict[tuple[int, int], Node] = {}

        def item(n: int, chosen: int) -> Node | None:
            """The item at position n matching exactly the contains in bit set ``chosen``."""
            at = positions[n] if n < len(positions) else rest
            if at is None:
                return None
            key = (min(n, len(positions)), chosen)
            if key not in items:
                picked = {conts[j].atom if chosen >> j & 1 else negated[j] for j in range(len(conts))}
                items[key] = self.ref(at | picked)
            return items[key]

        def name(cs: tuple[int, ...], n: int, started: bool) -> str:
            return f"{base}{'_'.join(map(str, cs))}_{n}_{int(started)}"

        for cs in itertools.product(*(range(c + 1) for c in caps)):
            for n in range(need_n + 1):
                for s in (False, True):
                    alts: list[Node] = []
                    if n >= lo and all(
                        k >= c.min and (c.max is None or k <= c.max) for k, c in zip(cs, conts, strict=True)
                    ):
                        alts.append(_seq([ws, Literal(b"]")]))
                    if hi is None or n < hi:
                        lead = sep if s else ws
                        for chosen in range(choices - 1, -1, -1):
                            bumped = [c + (chosen >> j & 1) for j, c in enumerate(cs)]
                            if any(b > c.max for b, c in zip(bumped, conts, strict=True) if c.max is not None):
                                continue
                            node = item(n, chosen)
                            if node is None:
                                break
                            nxt = tuple(min(b, cap) for b, cap in zip(bumped, caps, strict=True))
                            alts.append(_seq([lead, node, Ref(name(nxt, min(n + 1, need_n), True))]))
                    self.table.rules[name(cs, n, s)] = _alt(alts) if alts else _EMPTY_LANG
        return _seq([Literal(b"["), Ref(name((0,) * len(conts), 0, False))])
