"""Distribution: a set's disjunctions multiplied out into branch sets, which the driver lowers one
rule each; and, for a set of strings only, its disjunctions gathered as they nest (a tree of
intersections and unions, not multiplied out), from which the string emitter builds one
automaton."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from logitgate.cancel import checkpoint
from logitgate.errors import CompileCancelled, CompileTimeout, LogitgateError

from .caps import _MAX_BRANCHES, _STRING_TREE_DEPTH
from .diagnostics import Diagnostics
from .expand import Expander
from .facts import StringSet, _Facts
from .keywords import _ALL_TYPES, _narrow_types
from .merge import Merger
from .resolve import _FALSE, _Index

__all__ = ["Distributor"]


class Distributor:
    """Branch sets of an expanded set, with the types each branch's own keywords allow."""

    def __init__(self, index: _Index, exp: Expander, merger: Merger, diag: Diagnostics) -> None:
        self.index = index
        self.exp = exp
        self.merger = merger
        self.diag = diag
        self.branch_types_memo: dict[frozenset[int], frozenset[str]] = {}

    def branches(
        self, pure: list[int], disj: list[list[frozenset[int]]], report: bool = True
    ) -> list[frozenset[int]] | None:
        """The branch sets of ``pure ∧ (each disjunction)``: one per choice of an alternative in
        every disjunction, the pure atoms re-expanded in each without their disjunctions. None
        when no choice is left (the language is empty); [] past ``_MAX_BRANCHES`` choices,
        reported as unsupported (the caller lowers the pure atoms alone) unless ``report`` is
        off.

        Alternatives whose own type keywords exclude the context's types die (negations make
        many: "not minimum" is a number below it, useless under type: string): dropped before
        distribution, and so are choices whose alternatives' types are disjoint, not lowered to
        empty sets one by one."""
        types = self.declared_types(pure)
        typed = [[(alt, types & self.branch_types(alt)) for alt in alts] for alts in disj]
        typed = [[(alt, ts) for alt, ts in alts if ts] for alts in typed]
        if not all(typed):
            return None
        total = 1
        for alts in typed:
            total *= len(alts)
        if total > _MAX_BRANCHES:
            if report:
                ptr = self.index.schema_of(pure[0])[1] if pure else ""
                self.diag.unsupported("anyOf", f"{total} combined branches exceed {_MAX_BRANCHES}", ptr)
            return []
        # The pure atoms are wrapped as "pure-only" synthetic conjuncts.
        pure_atoms = [self.exp.pure_only(a) for a in pure]
        choices: list[tuple[frozenset[int], set[str]]] = [(frozenset(pure_atoms), types)]
        for alts_types in typed:
            choices = [(c | alt, ts & ats) for c, ts in choices for alt, ats in alts_types if ts & ats]
        combos = [c for c, _ in choices]
        if report and types <= {"object"}:
            # Objects only: a choice that requires a key another forbids is empty
            # (dependencies and their negations make many; each cost a lowering).
            # (Last choice first: its reason is the one an empty schema reports, as when
            # the work stack lowered it first.)
            combos = [c for c in reversed(combos) if not self.requires_forbidden(c)][::-1]
        return combos or None

    def string_tree(
        self, atoms: frozenset[int], expanded: tuple[list[int], list[list[frozenset[int]]]]
    ) -> StringSet | None:
        """The language of ``atoms`` (``expanded``: its expansion, as the driver already has it;
        its own keywords allow strings only) as a tree of intersections and unions of string
        facts, when every set in it is described by patterns, formats and length bounds the
        root's imply; else None. Alternatives that hold no string are left out; so is nothing
        else. Nothing is reported: a None sends the set down the usual path, which reports
        (what this walk recorded is taken back first, so that it reports in its own order)."""
        dropped, empty = len(self.diag.dropped), len(self.diag.empty_reasons)
        try:
            found = self._string_tree(atoms, expanded)
        except (CompileTimeout, CompileCancelled):
            raise
        except LogitgateError:
            found = None
        if found is None or len(self.diag.dropped) != dropped:
            del self.diag.dropped[dropped:]
            del self.diag.empty_reasons[empty:]
            return None
        return found

    def _string_tree(
        self, atoms: frozenset[int], expanded: tuple[list[int], list[list[frozenset[int]]]]
    ) -> StringSet | None:
        root = self.merger.merge(expanded[0])
        if root.types != {"string"} or not _only_patterns(root):
            return None
        lo, hi = root.min_len, root.max_len
        # Per atom set: its tree, False when it holds no string, None when it is refused. A
        # tree is a DAG: a set shared by several alternatives is one node, built once.
        memo: dict[frozenset[int], _Tree] = {}

        def tree(f: _Facts, disj: list[list[frozenset[int]]], depth: int) -> _Tree:
            choices = []
            for alts in disj:
                live = []
                for alt in alts:
                    if alt in memo:
                        sub = memo[alt]
                    else:
                        if len(memo) >= _MAX_BRANCHES or depth >= _STRING_TREE_DEPTH:
                            return None
                        checkpoint()
                        memo[alt] = None  # (a set inside itself: refused)
                        sub = memo[alt] = branch(alt, depth + 1)
                    if sub is None:
                        return None
                    if sub is not False:
                        live.append(sub)
                if not live:
                    return False
                choices.append(tuple(live))
            return StringSet(f, tuple(choices))

        def branch(alt: frozenset[int], depth: int) -> _Tree:
            exp = self.exp.expand(alt)
            if exp is None:
                return False
            f = self.merger.merge(exp[0])
            if "string" not in f.types:
                return False
            if not _only_patterns(f):
                return None
            # Bounds the root's imply add nothing: the root intersects every branch with them.
            if f.min_len > lo or (f.max_len is not None and (hi is None or f.max_len < hi)):
                return None
            return tree(f, exp[1], depth)

        out = tree(root, expanded[1], 0)
        if not isinstance(out, StringSet) or not _any_pattern(out):
            return None
        return out

    def branch_types(self, alt: frozenset[int]) -> set[str]:
        """The types a branch's conjuncts (its negations expanded, so "not minimum" is a number)
        allow; their own disjunctions are not looked into. Memoized: a branch recurs in every
        set that distributes it."""
        hit = self.branch_types_memo.get(alt)
        if hit is None:
            exp = self.exp.expand(alt)
            hit = self.branch_types_memo[alt] = frozenset(self.declared_types(exp[0]) if exp is not None else ())
        return set(hit)

    def declared_types(self, atoms: Iterable[int]) -> set[str]:
        """The types the "type" keywords (and synthetic type sets) of ``atoms`` themselves allow
        (empty with false among them)."""
        types = set(_ALL_TYPES)
        for a in atoms:
            if a == _FALSE:
                return set()
            if a > 0:
                d, ptr, _ = self.index.schema_of(a)
                _narrow_types(types, d, ptr, self.index.synthetic.get(a))
        return types

    def requires_forbidden(self, combo: frozenset[int]) -> bool:
        """Whether a conjunct of ``combo`` requires a key that another forbids ("properties":
        {key: false}); recorded, where it is forbidden, as the reason the set is empty."""
        required: set[str] = set()
        forbidden: dict[str, str] = {}  # key -> pointer of a conjunct forbidding it
        for a in combo:
            if a <= 0:
                continue
            d, ptr, _ = self.index.info[a]
            req = d.get("required")
            if isinstance(req, list):
                required.update(x for x in req if isinstance(x, str))
            props = d.get("properties")
            if isinstance(props, dict) and False in props.values():
                for k, v in props.items():
                    if v is False:
                        forbidden.setdefault(k, ptr)
        both = required.intersection(forbidden)
        if both:
            key = min(both)
            self.diag.empty(forbidden[key], f"required property {key!r} is forbidden")
        return bool(both)


# A set's string tree; False: the set holds no string (left out of its union); None: refused.
_Tree = StringSet | Literal[False] | None


def _only_patterns(f: _Facts) -> bool:
    """Whether ``f``'s strings are described by patterns, formats and length bounds alone."""
    return f.enum is None and f.empty_reason is None and not any(isinstance(v, str) for v in f.not_enum)


def _any_pattern(tree: StringSet) -> bool:
    """Whether a pattern or a format is anywhere in ``tree`` (else its language is length bounds
    alone, which the usual path lowers without an automaton)."""
    seen: set[int] = set()
    stack = [tree]
    while stack:
        t = stack.pop()
        if t.facts.patterns or t.facts.formats:
            return True
        for alts in t.disjunctions:
            for a in alts:
                if id(a) not in seen:
                    seen.add(id(a))
                    stack.append(a)
    return False
