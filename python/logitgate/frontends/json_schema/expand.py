"""Expansion: an atom set to its pure conjuncts and its disjunctions (``$ref``, ``allOf``,
``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``, ``dependent*``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from logitgate.errors import SchemaError, UnsupportedSchemaError

from .diagnostics import Diagnostics
from .keywords import _schema_list
from .negation import Negator
from .resolve import _FALSE, _Index
from .values import _ptr_join


class Expander:
    """Atom sets -> pure conjuncts and disjunctions. ``disjoint`` decides whether ``oneOf``
    branches are provably pairwise disjoint, ``overlapping_types`` on which types they may not be
    and which they allow (the decider, which expands in turn)."""

    def __init__(
        self,
        index: _Index,
        diag: Diagnostics,
        neg: Negator,
        disjoint: Callable[[list[frozenset[int]]], bool],
        overlapping_types: Callable[[list[frozenset[int]]], tuple[frozenset[str], frozenset[str]]],
        oneof_anyof: bool,
    ) -> None:
        self.index = index
        self.diag = diag
        self.neg = neg
        self.disjoint = disjoint
        self.overlapping_types = overlapping_types
        self.oneof_anyof = oneof_anyof

    # -- expansion: atoms -> pure conjuncts + disjunctions ------------------------------------

    def expand(self, atoms: frozenset[int]) -> tuple[list[int], list[list[frozenset[int]]]] | None:
        """Flattens $ref/allOf; returns the pure conjunct atoms and the disjunctions (each a list
        of alternative atom sets), or None when the set contains false."""
        pure: list[int] = []
        disj: list[list[frozenset[int]]] = []
        seen: set[int] = set()
        # oneOfs whose branches are not disjoint in their own context: (index in disj, branches,
        # pointer, base).
        undecided: list[tuple[int, list[int], str, str]] = []
        stack = sorted(atoms, reverse=True)
        while stack:
            a = stack.pop()
            if a == 0 or a in seen:
                continue
            if a == _FALSE:
                return None
            seen.add(a)
            d, ptr, base = self.index.schema_of(a)
            syn = self.index.synthetic.get(a)
            if syn is not None and syn.negates is not None:  # synthetic complement
                self.expand_not(syn.negates, ptr, base, stack, pure, disj)
                continue
            pure.append(a)
            if "$ref" in d:
                ref = d["$ref"]
                if not isinstance(ref, str):
                    raise SchemaError("$ref must be a string", pointer=_ptr_join(ptr, "$ref"))
                self._follow(ref, "$ref", ptr, base, stack)
            for kw in ("$dynamicRef", "$recursiveRef"):
                if kw in d:
                    ref = d[kw]
                    if kw == "$dynamicRef" and isinstance(ref, str) and self.index.static_dynamic_ok(ref, base):
                        self._follow(ref, kw, ptr, base, stack)
                    else:
                        self.diag.unsupported(kw, "dynamic references are not lowered", _ptr_join(ptr, kw))
            if "allOf" in d:
                for i, s in enumerate(_schema_list(d, "allOf", ptr)):
                    stack.append(self.index.sub(s, _ptr_join(ptr, "allOf", i), base))
            if "anyOf" in d:
                lst = _schema_list(d, "anyOf", ptr)
                disj.append(
                    [frozenset({self.index.sub(s, _ptr_join(ptr, "anyOf", i), base)}) for i, s in enumerate(lst)]
                )
            if "oneOf" in d:
                lst = _schema_list(d, "oneOf", ptr)
                one = [self.index.sub(x, _ptr_join(ptr, "oneOf", i), base) for i, x in enumerate(lst)]
                ctx = self.pure_only(a)
                if len(one) > 1 and not self.oneof_anyof and not self.disjoint([frozenset({x, ctx}) for x in one]):
                    undecided.append((len(disj), one, _ptr_join(ptr, "oneOf"), base))
                disj.append([frozenset({x}) for x in one])
            if "not" in d:
                n = self.index.sub(d["not"], _ptr_join(ptr, "not"), base)
                stack.append(self.index.not_atom(n, _ptr_join(ptr, "not"), base))
            if "if" in d and ("then" in d or "else" in d):
                c = self.index.sub(d["if"], _ptr_join(ptr, "if"), base)
                nc = self.index.not_atom(c, _ptr_join(ptr, "if"), base)
                t = self.index.sub(d.get("then", True), _ptr_join(ptr, "then"), base)
                e = self.index.sub(d.get("else", True), _ptr_join(ptr, "else"), base)
                disj.append([frozenset({c, t}), frozenset({nc, e})])
            self._dependencies(d, ptr, base, disj)
        if undecided:
            # The whole conjunction's pure keywords hold beside each branch (a discriminator
            # that a sibling of the allOf holding the oneOf requires, say): branches disjoint
            # under them are exactly-one as they stand. Otherwise exactly one holds through
            # complements, S_i ∧ ¬S_j for every j != i, where every branch has one; only on the
            # types the branches overlap on, when they are disjoint on others (a discriminator
            # "required" says nothing of numbers, which every branch without "type" accepts).
            context = frozenset(self.pure_only(p) for p in pure)
            for at, one, optr, obase in undecided:
                branches = [context | {b} for b in one]
                if self.disjoint(branches):
                    continue
                if not all(self.neg.negatable(b) for b in one):
                    self.diag.unsupported(
                        "oneOf",
                        "branches are neither provably disjoint nor complementable (option oneof='anyof' relaxes)",
                        optr,
                    )
                    continue
                overlap, allowed = self.overlapping_types(branches)
                exactly_one = [
                    frozenset({b, *(self.index.not_atom(c, optr, obase) for j, c in enumerate(one) if j != i)})
                    for i, b in enumerate(one)
                ]
                if overlap >= allowed:
                    disj[at] = exactly_one
                    continue
                apart = self.index.types_atom(allowed - overlap, optr, obase)
                within = self.index.types_atom(overlap, optr, obase)
                disj[at] = [frozenset({b, apart}) for b in one] + [alt | {within} for alt in exactly_one]
        return pure, disj

    def _dependencies(self, d: dict[str, Any], ptr: str, base: str, disj: list[list[frozenset[int]]]) -> None:
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            spec = d.get(kw)
            if spec is None:
                continue
            kptr = _ptr_join(ptr, kw)
            if not isinstance(spec, dict):
                raise SchemaError(f"{kw} must be an object", pointer=kptr)
            for name, dep in spec.items():
                dptr = _ptr_join(kptr, name)
                absent = self.index.synth(("absent", name), {"properties": {name: False}}, dptr, base)
                if isinstance(dep, list) and kw != "dependentSchemas":
                    if not all(isinstance(x, str) for x in dep):
                        raise SchemaError(f"{kw} values must be arrays of strings", pointer=dptr)
                    req = self.index.synth(("req", name, *dep), {"required": [name, *dep]}, dptr, base)
                    disj.append([frozenset({absent}), frozenset({req})])
                elif kw != "dependentRequired" and isinstance(dep, (dict, bool)):
                    req = self.index.synth(("req", name), {"required": [name]}, dptr, base)
                    disj.append([frozenset({absent}), frozenset({req, self.index.sub(dep, dptr, base)})])
                else:
                    raise SchemaError(f"bad {kw} entry", pointer=dptr)

    def _follow(self, ref: str, kw: str, ptr: str, base: str, stack: list[int]) -> None:
        """Pushes the atom ``ref`` names; a remote reference is unsupported (dropped when lenient:
        the reference then constrains nothing)."""
        try:
            t, tptr, tbase = self.index.resolve(ref, base, _ptr_join(ptr, kw))
        except UnsupportedSchemaError:
            if not self.diag.lenient:
                raise
            self.diag.unsupported(kw, f"remote or unknown reference {ref!r}", _ptr_join(ptr, kw))
            return
        stack.append(self.index.sub(t, tptr, tbase))

    def expand_not(
        self,
        inner: int,
        ptr: str,
        base: str,
        stack: list[int],
        pure: list[int],
        disj: list[list[frozenset[int]]],
    ) -> None:
        """¬inner as a disjunction: ¬(G1 ∧ G2 ∧ ...) = ¬G1 ∨ ¬G2 ∨ ... over independent keyword groups."""
        alts = self.neg.negation(inner, ptr, base)
        if alts is None:
            return  # lenient: the negation was dropped (recorded)
        if not alts:
            stack.append(_FALSE)
        elif len(alts) == 1:
            stack.extend(alts[0])
        else:
            disj.append([frozenset(a) for a in alts])

    def pure_only(self, atom: int) -> int:
        d, ptr, base = self.index.schema_of(atom)
        drop = {
            "$ref",
            "$dynamicRef",
            "$recursiveRef",
            "allOf",
            "anyOf",
            "oneOf",
            "not",
            "if",
            "then",
            "else",
            "dependentRequired",
            "dependentSchemas",
            "dependencies",
        }
        if not any(k in d for k in drop):
            return atom
        pure = {k: v for k, v in d.items() if k not in drop}
        return self.index.synth(("pure", atom), pure, ptr, base, self.index.synthetic.get(atom))
