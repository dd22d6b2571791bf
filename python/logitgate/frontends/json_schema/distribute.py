"""Distribution: a set's disjunctions multiplied out into branch sets, which the driver lowers one
rule each; and, for a set of strings only, the whole tree of its branches gathered into one list
of conjunctions, whose union the string emitter builds as one automaton."""

from __future__ import annotations

from collections.abc import Iterable

from logitgate.cancel import checkpoint
from logitgate.errors import CompileCancelled, CompileTimeout, LogitgateError

from .caps import _MAX_BRANCHES
from .diagnostics import Diagnostics
from .expand import Expander
from .facts import _Facts
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

    def string_conjunctions(
        self, atoms: frozenset[int], expanded: tuple[list[int], list[list[frozenset[int]]]]
    ) -> list[_Facts] | None:
        """The facts of every leaf branch of ``atoms`` (``expanded``: its expansion, as the
        driver already has it) when all of them are strings described by patterns, formats and
        one pair of length bounds alone (their union is the set's language), else None.
        Branches that cannot hold a value are left out; so is nothing else. Nothing is
        reported: a None sends the set down the usual path, which reports (what this walk
        recorded is taken back first, so that it reports in its own order)."""
        dropped, empty = len(self.diag.dropped), len(self.diag.empty_reasons)
        try:
            found = self._string_conjunctions(atoms, expanded)
        except (CompileTimeout, CompileCancelled):
            raise
        except LogitgateError:
            found = None
        if found is None or len(self.diag.dropped) != dropped:
            del self.diag.dropped[dropped:]
            del self.diag.empty_reasons[empty:]
            return None
        return found

    def _string_conjunctions(
        self, atoms: frozenset[int], expanded: tuple[list[int], list[list[frozenset[int]]]]
    ) -> list[_Facts] | None:
        out: list[_Facts] = []
        work = [expanded]
        seen = {atoms}
        while work:
            checkpoint()
            pure, disj = work.pop()
            if disj:
                if not self.declared_types(pure) <= {"string"}:
                    return None
                combos = self.branches(pure, disj, report=False)
                if not combos:  # (None: an empty choice; []: too many)
                    if combos is None:
                        continue
                    return None
                fresh = [c for c in combos if c not in seen]
                if len(seen) + len(fresh) > _MAX_BRANCHES:
                    return None
                seen.update(fresh)
                work.extend(e for e in map(self.exp.expand, fresh) if e is not None)
                continue
            f = self.merger.merge(pure)
            if not f.types:
                continue
            if f.types != {"string"} or f.enum is not None or f.empty_reason is not None:
                return None
            if any(isinstance(v, str) for v in f.not_enum) or not (f.patterns or f.formats):
                return None
            if out and (f.min_len, f.max_len) != (out[0].min_len, out[0].max_len):
                return None
            out.append(f)
        return out if len(out) > 1 else None

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
