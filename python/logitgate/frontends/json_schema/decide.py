"""Decisions on facts: whether a JSON value satisfies them, and whether two atom sets are
provably disjoint (``oneOf`` branches)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from logitgate.cancel import checkpoint
from logitgate.errors import CompileTimeout, LimitExceeded, UnsupportedSchemaError
from logitgate.limits import Limits

from .caps import _DISJOINT_CALLS, _DISJOINT_DEPTH, _DISJOINT_KEY_QUESTIONS, _FEW_PARTS, _SHORT_ENUM
from .diagnostics import Diagnostics
from .expand import Expander
from .facts import _Facts, _ObjPart
from .formats import _FORMATS
from .keywords import _ALL_TYPES
from .merge import Merger
from .patterns import _prefix_disjoint
from .resolve import _FALSE
from .values import _derived, _fraction, _json_eq, _json_type, _ValueSet

_T = TypeVar("_T")


class Decider:
    """Value checks and provable disjointness, on facts (memoized per atom set)."""

    def __init__(self, exp: Expander, merger: Merger, diag: Diagnostics, limits: Limits) -> None:
        self.exp = exp
        self.merger = merger
        self.diag = diag
        self.limits = limits
        self._disjoint_depth = 0  # pairwise_disjoint re-entered through expand (nested oneOf)
        # Calls so far: a oneOf whose branches refer back to it ("$ref": "#") asks again for every
        # branch, at every depth, so the depth bound alone leaves exponentially many questions.
        self._disjoint_calls = 0
        # The pairs of facts being decided (ids; the facts are alive while open): a required key's
        # subschema that refers back ("$ref": "#") asks a pair again inside its own question.
        self._disjoint_open: set[tuple[int, int]] = set()
        self._key_questions = 0
        self.approx_memo: dict[frozenset[int], _Facts | None] = {}
        # _derived: long enums hashed (_in_enum), merged objects' keys indexed (_key_index).
        self._enum_sets: dict[int, tuple[list[Any], int, _ValueSet]] = {}
        self._key_indexes: dict[int, tuple[list[_ObjPart], int, tuple[dict[str, list[int]], list[_ObjPart]]]] = {}

    def pairwise_disjoint(self, alts: list[frozenset[int]]) -> bool:
        return self._bounded(self._pairwise_disjoint_inner, alts, False)

    def overlapping_types(self, alts: list[frozenset[int]]) -> tuple[frozenset[str], frozenset[str]]:
        """The types some two of ``alts`` are not provably disjoint on (every type past the
        caps), and the types any of them allows."""
        return self._bounded(self._overlapping_types_inner, alts, (_ALL_TYPES, _ALL_TYPES))

    def _bounded(self, decide: Callable[[list[frozenset[int]]], _T], alts: list[frozenset[int]], past_caps: _T) -> _T:
        # Nested oneOf inside a branch re-enters here through expand(): bound the depth, and
        # the questions one compile may ask; past either, ``past_caps`` (nothing proven).
        checkpoint()
        self._disjoint_depth += 1
        self._disjoint_calls += 1
        try:
            if self._disjoint_depth > _DISJOINT_DEPTH or self._disjoint_calls > _DISJOINT_CALLS:
                return past_caps
            return decide(alts)
        finally:
            self._disjoint_depth -= 1

    def _pairwise_disjoint_inner(self, alts: list[frozenset[int]]) -> bool:
        facts = [self.approx_facts(a) for a in alts]
        for i in range(len(facts)):
            for j in range(i + 1, len(facts)):
                if not self._disjoint(facts[i], facts[j]):
                    return False
        return True

    def _overlapping_types_inner(self, alts: list[frozenset[int]]) -> tuple[frozenset[str], frozenset[str]]:
        facts = [f for f in (self.approx_facts(a) for a in alts) if f is not None]
        allowed = frozenset().union(*(f.types for f in facts))
        overlap: set[str] = set()
        for i in range(len(facts)):
            for j in range(i + 1, len(facts)):
                for t in (facts[i].types & facts[j].types) - overlap:
                    if not self._disjoint_on(facts[i], facts[j], t):
                        overlap.add(t)
        return frozenset(overlap), allowed

    def approx_facts(self, atoms: frozenset[int]) -> _Facts | None:
        """Facts of the pure part only: an over-approximation of the language (None: empty).
        Memoized (a oneOf's disjointness asks again for every pair and every required key);
        callers only read the facts."""
        if atoms in self.approx_memo:
            return self.approx_memo[atoms]
        exp = self.exp.expand(atoms)
        facts = None if exp is None else self.merger.merge(exp[0])
        self.approx_memo[atoms] = facts
        return facts

    def _disjoint(self, a: _Facts | None, b: _Facts | None) -> bool:
        """Provably no common instance (facts over-approximate, so True is always sound). A pair
        asked again inside its own question (a cycle through required keys) is not proven there,
        nor one past the caps: False is always sound too, and ends the recursion."""
        if a is None or b is None:
            return True
        pair = (id(a), id(b))
        if self._disjoint_open:
            self._key_questions += 1
            if (
                pair in self._disjoint_open
                or len(self._disjoint_open) >= _DISJOINT_DEPTH
                or self._key_questions > _DISJOINT_KEY_QUESTIONS
            ):
                return False
        self._disjoint_open.add(pair)
        try:
            return all(self._disjoint_on(a, b, t) for t in a.types & b.types)
        finally:
            self._disjoint_open.discard(pair)

    def _disjoint_on(self, a: _Facts, b: _Facts, t: str) -> bool:
        for f, g in ((a, b), (b, a)):
            if f.enum is not None:
                vals = [v for v in f.enum if _json_type(v) == t]
                try:
                    if not any(self.check(v, g, 0) for v in vals):
                        return True
                except CompileTimeout:
                    raise  # the compile's own deadline, not this check's
                except (UnsupportedSchemaError, LimitExceeded):
                    pass
        if t in ("integer", "fraction"):
            for f, g in ((a, b), (b, a)):
                if (
                    f.hi is not None
                    and g.lo is not None
                    and (f.hi < g.lo or (f.hi == g.lo and (f.hi_excl or g.lo_excl)))
                ):
                    return True
        if t == "string":
            for f, g in ((a, b), (b, a)):
                if f.max_len is not None and g.min_len > f.max_len:
                    return True
            if a.patterns and b.patterns and any(_prefix_disjoint(p, q) for p, _ in a.patterns for q, _ in b.patterns):
                return True
        if t == "object":
            for f, g in ((a, b), (b, a)):
                for key in f.required:
                    kg = self.key_atoms(g, key)
                    if kg is None:
                        return True
                    if key in g.required:
                        kf = self.key_atoms(f, key)
                        if kf is None:
                            return True
                        fa, fb = self.approx_facts(kf), self.approx_facts(kg)
                        if self._disjoint(fa, fb):
                            return True
        return False

    def key_atoms(self, f: _Facts, key: str) -> frozenset[int] | None:
        """Atoms a property ``key`` (listed or not) must satisfy; None when it is forbidden."""
        parts: list[_ObjPart] = f.objs
        out: set[int] = set()
        if len(parts) > _FEW_PARTS:
            listed, parts = self._key_index(f)  # the open parts are still searched
            out.update(listed.get(key, ()))
        for part in parts:
            if key in part.props:
                out.add(part.props[key])
                matched = True
            else:
                matched = False
            for p, atom, pptr in part.patterns:
                if self.py_search(p, key, pptr):
                    out.add(atom)
                    matched = True
            if not matched:
                if part.additional is not None:
                    out.add(part.additional)
        out.discard(0)
        if _FALSE in out:
            return None
        return frozenset(out)

    def _key_index(self, f: _Facts) -> tuple[dict[str, list[int]], list[_ObjPart]]:
        """``f.objs`` for key_atoms: per key, the atoms of the closed parts (no patterns, no
        additionalProperties) that list it, and the open parts, searched key by key. Built once
        per list (emit_object asks for every key, and an allOf of a thousand parts would make
        that quadratic)."""

        def build(objs: list[_ObjPart]) -> tuple[dict[str, list[int]], list[_ObjPart]]:
            listed: dict[str, list[int]] = {}
            open_parts: list[_ObjPart] = []
            for part in objs:
                if part.patterns or part.additional is not None:
                    open_parts.append(part)
                    continue
                for k, atom in part.props.items():
                    listed.setdefault(k, []).append(atom)
            return listed, open_parts

        return _derived(self._key_indexes, f.objs, build)

    def py_search(self, pattern: str, s: str, ptr: str) -> bool:
        """Decides a pattern on a known string with Python ``re`` -- only where ECMA and Python
        agree: an ASCII subject without line breaks (``$``/``.`` differ around newlines), ASCII
        classes, no Python-only syntax (``{,n}``, ``\\A``, ``\\Z``)."""
        if not s.isascii() or "\n" in s or "\r" in s or re.search(r"\{,|\\[AZ]", pattern):
            self.diag.unsupported("pattern", f"cannot decide pattern {pattern!r} on the name {s!r}", ptr)
            return True
        try:
            return re.search(pattern, s, re.ASCII) is not None
        except (re.error, RecursionError):
            self.diag.unsupported("pattern", f"pattern {pattern!r} cannot be evaluated on {s!r}", ptr)
            return True

    # The schema's own semantics, never `strict`: checks also decide negated and exactly-one
    # positions, where narrowing a schema would widen the whole. Strict narrows emission only.

    def check_atoms(self, value: Any, atoms: frozenset[int], depth: int) -> bool:
        if depth > self.limits.max_nesting:
            raise LimitExceeded("max_nesting", self.limits.max_nesting, "enum value nesting")
        exp = self.exp.expand(atoms)
        if exp is None:
            return False
        pure, disj = exp
        if not self.check(value, self.merger.merge(pure), depth):
            return False
        return all(any(self.check_atoms(value, alt, depth + 1) for alt in alts) for alts in disj)

    def _in_enum(self, value: Any, f: _Facts) -> bool:
        """``value`` is in ``f.enum`` (which must be set). A long enum is hashed once per list
        (_derived): emit_enum checks each of its values against the facts it came from."""
        assert f.enum is not None
        if len(f.enum) <= _SHORT_ENUM:
            return any(_json_eq(value, e) for e in f.enum)
        return value in _derived(self._enum_sets, f.enum, _ValueSet)

    def check(self, value: Any, f: _Facts, depth: int) -> bool:
        """Does ``value`` satisfy the merged pure facts? (Nested schemas via check_atoms.)"""
        t = _json_type(value)
        if t not in f.types:
            return False
        if f.enum is not None and not self._in_enum(value, f):
            return False
        if any(_json_eq(value, e) for e in f.not_enum):
            return False
        if t in ("integer", "fraction"):
            x = _fraction(value)
            if f.lo is not None and (x < f.lo or (f.lo_excl and x == f.lo)):
                return False
            if f.hi is not None and (x > f.hi or (f.hi_excl and x == f.hi)):
                return False
            for m, _ in f.multiple:
                if (x / m).denominator != 1:
                    return False
        elif t == "string":
            n = len(value)
            if n < f.min_len or (f.max_len is not None and n > f.max_len):
                return False
            for p, pptr in f.patterns:
                if not self.py_search(p, value, pptr):
                    return False
            for fmt, _ in f.formats:
                if re.fullmatch(_FORMATS[fmt], value) is None:
                    return False
        elif t == "array":
            n = len(value)
            if n < f.min_items or (f.max_items is not None and n > f.max_items):
                return False
            for i, item in enumerate(value):
                atoms = self.position_atoms(f, i)
                if atoms is None or not self.check_atoms(item, atoms, depth + 1):
                    return False
            for c in f.contains:
                found = sum(1 for item in value if self.check_atoms(item, frozenset({c.atom}), depth + 1))
                if found < c.min or (c.max is not None and found > c.max):
                    return False
            if f.unique is not None:
                for i in range(n):
                    for j in range(i + 1, n):
                        if _json_eq(value[i], value[j]):
                            return False
        elif t == "object":
            n = len(value)
            if n < f.min_props or (f.max_props is not None and n > f.max_props):
                return False
            if any(r not in value for r in f.required):
                return False
            for k, item in value.items():
                atoms = self.key_atoms(f, k)
                if atoms is None:
                    return False
                if not self.check_atoms(item, atoms, depth + 1):
                    return False
                for na in f.names:
                    if not self.check_atoms(k, frozenset({na}), depth + 1):
                        return False
        return True

    def position_atoms(self, f: _Facts, i: int) -> frozenset[int] | None:
        out: set[int] = set()
        for part in f.arrs:
            if i < len(part.prefix):
                out.add(part.prefix[i])
            elif part.items is not None:
                out.add(part.items)
        out.discard(0)
        if _FALSE in out:
            return None
        return frozenset(out)

    def finite_domain(self, atoms: frozenset[int]) -> list[Any] | None:
        """The item values when the item schema allows at most 10 distinct values, else None."""
        exp = self.exp.expand(atoms)
        if exp is None:
            return []
        pure, disj = exp
        if disj:
            return None
        f = self.merger.merge(pure)
        if f.enum is not None:
            cands = f.enum
        elif f.types <= {"boolean", "null"}:
            cands = [v for v, t in ((True, "boolean"), (False, "boolean"), (None, "null")) if t in f.types]
        else:
            return None
        out: list[Any] = []
        for v in cands:
            if self.check(v, f, 0) and not any(_json_eq(v, w) for w in out):
                out.append(v)
        return out if len(out) <= 10 else None
