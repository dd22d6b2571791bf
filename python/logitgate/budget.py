"""Token budgets: how long an output of a compiled grammar can be, and decoding that finishes.

:meth:`CompiledGrammar.token_budget() <logitgate.CompiledGrammar.token_budget>` returns a
:class:`TokenBudget`: the shortest and longest output in bytes and in output tokens of the
vocabulary, counted as :func:`logitgate.generate` counts ``completion_tokens`` (an EOS included
where the grammar needs one to end). Where the longest is unbounded it names the rules that
make it so (a JSON Schema's rules are named after JSON pointers).

:class:`BudgetGuard` is budget-aware decoding: with ``max_tokens`` N it cuts each step's mask to
the tokens after which the output can still finish within the tokens left, so that whenever N
is at least ``min_tokens`` the output is a complete document. The core
(cpp/core/budget.h) measures completions: the shortest completion's bytes from a parser
configuration (a shortest path over the automaton, memoized per state), its fewest tokens of
the vocabulary (a real token sequence the matcher accepts), and a cheap bound under which the
mask is left exactly as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _core
from .errors import UsageError
from .grammar.ir import (
    Alt,
    ByteClass,
    CharClass,
    Grammar,
    Literal,
    Node,
    Ref,
    Repeat,
    Seq,
    StringExcept,
    distinct_nodes,
)
from .grammar.ir import children as _children
from .grammar.ir import complement_ranges as _complement

if TYPE_CHECKING:
    from .compiler import CompiledGrammar

__all__ = ["ACCEPTED", "NO_ROOM", "REJECTED", "BudgetGuard", "TokenBudget", "token_budget"]


@dataclass(frozen=True)
class TokenBudget:
    """Output lengths of a compiled grammar (see :meth:`CompiledGrammar.token_budget`).

    ``min_bytes``: the shortest document's length (``shortest``). ``min_tokens``: output tokens
    to produce it: the fewest tokens of the vocabulary that spell ``shortest`` (``shortest_ids``,
    a sequence the matcher accepts), plus one EOS unless the grammar ends by itself after it.
    The fewest tokens of any document are at most ``min_tokens``; a tokenizer's canonical
    tokenization of ``shortest`` may take more.

    ``max_bytes``: the longest document's length, ``None`` when unbounded; then
    ``unbounded_by`` names the rules (for a JSON Schema: JSON pointers) whose own body repeats
    without bound or that recurse. ``max_tokens``: ``max_bytes + 1`` (every token holds at least
    one byte, plus an EOS), ``None`` when unbounded. Whitespace the grammar allows counts:
    ``lg.generate`` compiles JSON Schemas compact.
    """

    min_bytes: int
    min_tokens: int
    max_bytes: int | None
    max_tokens: int | None
    unbounded_by: tuple[str, ...]
    shortest: bytes
    shortest_ids: tuple[int, ...]

    def summary(self) -> str:
        """Two lines for people: the minimum, and the maximum or what makes it unbounded."""
        lines = [f"min: {self.min_tokens} tokens ({self.min_bytes} bytes): {self.shortest.decode(errors='replace')}"]
        if self.max_bytes is None:
            lines.append("max: unbounded, by " + ", ".join(self.unbounded_by))
        else:
            lines.append(f"max: {self.max_tokens} tokens ({self.max_bytes} bytes)")
        return "\n".join(lines)


def _check_measurable(g: CompiledGrammar) -> None:
    """Completions are measured as bytes spelled by text tokens: a grammar that reads whole
    tokens (special-token terminals) has completions no byte string spells."""
    if g.has_token_terminals:
        raise UsageError(
            "the token budget does not measure grammars with token terminals (special tokens)",
            code="budget-token-terminals",
        )


def budget_core(g: CompiledGrammar) -> _core.Budget:
    """The grammar's core :class:`_core.Budget` (built on first use: a shortest-path pass over
    the automaton), cached on the compiled grammar."""
    b: _core.Budget | None = getattr(g, "_budget", None)
    if b is None:
        b = _core.Budget(g._core)
        g._budget = b
    return b


def token_budget(g: CompiledGrammar) -> TokenBudget:
    """See :meth:`CompiledGrammar.token_budget`."""
    _check_measurable(g)
    core = budget_core(g)
    m = g.matcher()
    min_bytes, min_tokens = core.cost(m)
    shortest = core.shortest_completion(m)
    ids = tuple(core.completion_tokens(m))
    max_bytes, culprits = longest_output(g.grammar)
    if g.rule_pointers:
        culprits = _owners(g.grammar, culprits, g.rule_pointers)
    return TokenBudget(
        min_bytes=min_bytes,
        min_tokens=min_tokens,
        max_bytes=None if math.isinf(max_bytes) else int(max_bytes),
        max_tokens=None if math.isinf(max_bytes) else int(max_bytes) + 1,
        unbounded_by=culprits,
        shortest=shortest,
        shortest_ids=ids,
    )


def _owners(grammar: Grammar, culprits: tuple[str, ...], pointers: dict[str, str]) -> tuple[str, ...]:
    """Culprit rules named for people: a rule that lowers a subschema as its JSON pointer with
    the rule's name; a helper rule (a string's characters, an array's items) through the
    subschema rules that use it directly, and flexible whitespace as such."""
    users: dict[str, set[str]] = {}
    for name in _reachable(grammar):
        for ref in _refs(grammar.rules[name]):
            users.setdefault(ref, set()).add(name)
    out: dict[str, None] = {}
    for c in culprits:
        if c == "ws":
            out["whitespace between JSON tokens (ws): compile with whitespace='compact' to bound it"] = None
            continue
        # The nearest subschema rules above c (c itself when it is one).
        seen, stack, found = {c}, [c], []
        while stack:
            n = stack.pop()
            if n in pointers or n == grammar.root:
                found.append(n)
                continue
            for u in users.get(n, ()):
                if u not in seen:
                    seen.add(u)
                    stack.append(u)
        for n in sorted(found):
            out[f"{pointers.get(n, '#')} ({n})"] = None
    return tuple(out)


def _utf8_len(cp: int) -> int:
    return 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4


def _node_max(node: Node, rule_max: dict[str, float]) -> float:
    """Longest byte string of ``node`` given the rules' (iterative over the node tree)."""
    # Post-order over the node tree with an explicit stack: IR depth is user-driven. Nodes are
    # shared (the tree is a DAG), so each is computed once: without that the walk is
    # exponential in the depth of the sharing.
    out: dict[int, float] = {}
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        if not done:
            if id(n) not in out:
                stack.append((n, True))
                stack.extend((c, False) for c in _children(n) if id(c) not in out)
            continue
        kids = [out[id(c)] for c in _children(n)]
        v: float
        if isinstance(n, Literal):
            v = len(n.value)
        elif isinstance(n, CharClass):
            ranges = _complement(n.ranges) if n.negated else n.ranges
            v = max((_utf8_len(hi) for _, hi in ranges), default=0)
        elif isinstance(n, ByteClass):
            v = 1
        elif isinstance(n, Seq):
            v = sum(kids)
        elif isinstance(n, Alt):
            v = max(kids, default=0)
        elif isinstance(n, Repeat):
            # max=0 repeats nothing, even an unbounded item (0 * inf would be NaN)
            v = 0 if kids[0] == 0 or n.max == 0 else math.inf if n.max is None else n.max * kids[0]
        elif isinstance(n, Ref):
            v = rule_max.get(n.name, math.inf)
        else:  # StringExcept: any string content
            v = math.inf
        out[id(n)] = v
    return out[id(node)]


def _own_unbounded(node: Node) -> bool:
    """True when ``node`` repeats without bound by itself (not through a reference)."""
    return any(
        isinstance(n, StringExcept) or (isinstance(n, Repeat) and n.max is None) for n in distinct_nodes((node,))
    )


def _reachable(grammar: Grammar) -> Iterator[str]:
    seen = {grammar.root}
    stack = [grammar.root]
    while stack:
        name = stack.pop()
        yield name
        for ref in _refs(grammar.rules[name]):
            if ref not in seen and ref in grammar.rules:
                seen.add(ref)
                stack.append(ref)


def _refs(node: Node) -> tuple[str, ...]:
    from .grammar.ir import references

    return references(node)


def longest_output(grammar: Grammar) -> tuple[float, tuple[str, ...]]:
    """The longest document of ``grammar`` in bytes (``math.inf`` when unbounded) and, when
    unbounded, the rules that make it so: those that repeat without bound in their own body,
    and those on a reference cycle (recursion)."""
    names = list(_reachable(grammar))
    # Rules on a reference cycle: Tarjan's strongly connected components, iteratively.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    scc_stack: list[str] = []
    cyclic: set[str] = set()
    counter = 0
    for start in names:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(_refs(grammar.rules[start])))]
        index[start] = low[start] = counter
        counter += 1
        scc_stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next((r for r in it if r in grammar.rules), None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    scc_stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(_refs(grammar.rules[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                    if w == v:
                        cyclic.add(v)
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = scc_stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    cyclic.update(comp)
    culprits = tuple(n for n in names if n in cyclic or _own_unbounded(grammar.rules[n]))
    # Longest per rule, callees first (a post-order over the acyclic part; cyclic rules are inf).
    rule_max: dict[str, float] = {n: math.inf for n in cyclic}
    pending = [n for n in names if n not in cyclic]
    order: list[str] = []
    state: dict[str, int] = {}
    for start in pending:
        if start in state:
            continue
        stack = [(start, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            if n in state:
                continue
            state[n] = 1
            stack.append((n, True))
            stack.extend((r, False) for r in _refs(grammar.rules[n]) if r in grammar.rules and r not in cyclic)
    for n in order:
        rule_max[n] = _node_max(grammar.rules[n], rule_max)
    longest = rule_max[grammar.root]
    if math.isinf(longest):
        # Only what the root's length depends on: culprits reachable through unbounded rules.
        return longest, tuple(n for n in culprits if math.isinf(rule_max.get(n, math.inf)))
    return longest, ()


ACCEPTED: int = _core.Budget.ACCEPTED
""":meth:`BudgetGuard.accept`: the token was accepted and leaves room to finish."""
NO_ROOM: int = _core.Budget.NO_ROOM
""":meth:`BudgetGuard.accept`: the token leaves no room to finish; the matcher is unchanged."""
REJECTED: int = _core.Budget.REJECTED
""":meth:`BudgetGuard.accept`: the grammar refuses the token; the matcher is unchanged."""


class BudgetGuard:
    """Budget-aware decoding for one generation of ``max_tokens`` output tokens.

    Per step, :attr:`accept` accepts the token drawn from the plain mask when it leaves room;
    where it does not, :meth:`restrict` cuts the matcher's mask to the tokens after which the
    shortest completion still fits in the tokens left (its fewest tokens of the vocabulary,
    plus EOS where needed), and the token is drawn again. While the budget is not tight the
    cut leaves the mask exactly as it is. Where no token passes (a completion's fewest tokens
    are not monotone along it), the next token of a completion that fits is allowed: the
    *plan*, the fewest tokens spelling the shortest completion from the last state that fit.
    So the output always keeps a way to finish.

    ``closed`` turns true when the cut removed the token the plain mask's logits ranked first:
    the budget shaped the output.
    """

    def __init__(self, compiled: CompiledGrammar, max_tokens: int) -> None:
        self._core = budget_core(compiled)
        self.max_tokens = max_tokens
        self.closed = False
        self._plan: list[int] | None = None
        self._accept_within = self._core.accept_within
        self.accept: Callable[[_core.Matcher, int, int], int] = self._accept_within
        """``accept(m, tok, remaining)``: accepts ``tok`` (drawn from ``m``'s plain mask) when
        it leaves room to finish within ``remaining`` tokens, itself included, and returns
        :data:`ACCEPTED`; else :data:`NO_ROOM` or :data:`REJECTED`, ``m`` unchanged. The check
        costs little beyond the accept: the token's transitions are computed once, and while no
        plan is pending this is the core's method itself (no Python frame on the per-step
        path); a plan's next token is accepted as it is."""

    def _set_plan(self, plan: list[int] | None) -> None:
        self._plan = plan or None
        self.accept = self._accept_within if self._plan is None else self._accept_planned

    def _accept_planned(self, m: _core.Matcher, tok: int, remaining: int) -> int:
        plan = self._plan
        if plan and plan[0] == tok:
            if not m.accept(tok):
                return REJECTED
            self._set_plan(plan[1:])
            return ACCEPTED
        r = int(self._accept_within(m, tok, remaining))
        if r == ACCEPTED:
            self._set_plan(None)
        return r

    def fits(self, m: _core.Matcher, remaining: int) -> bool:
        """True when the output from ``m``'s state can finish within ``remaining`` tokens."""
        return bool(self._core.cost(m)[1] <= remaining)

    def restrict(self, m: _core.Matcher, row: Any, remaining: int, top: Callable[[], int] | None = None) -> int:
        """Cuts ``row`` (``m``'s mask, int32 words) to the tokens that leave room. ``top`` gives
        the token the plain mask's logits rank first (asked only when something was cut, to tell
        when the budget shaped the output). Returns how many tokens were removed."""
        cleared = int(self._core.restrict_mask(m, row, remaining))
        if not cleared:
            return 0
        if not row.any():
            if self._plan is None:
                self._set_plan(list(self._core.completion_tokens(m)))
            if self._plan:
                tok = self._plan[0]
                row.view(np.uint32)[tok >> 5] |= np.uint32(1 << (tok & 31))
        if top is not None:
            first = top()
            if not (int(row[first >> 5]) >> (first & 31)) & 1:
                self.closed = True
        return cleared

    def accepted(self, ids: list[int], replaced: bool = False) -> None:
        """Tells the guard which tokens were accepted other than by :attr:`accept`;
        ``replaced``: the last token accepted was rolled back first (``ids`` spell it again)."""
        plan = None if replaced else self._plan
        for tok in ids:
            plan = plan[1:] if plan and plan[0] == tok else None
        self._set_plan(plan)
