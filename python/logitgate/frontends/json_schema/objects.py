"""Emission of objects: listed, pattern and additional members, ``propertyNames``."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from logitgate.errors import GrammarError, LimitExceeded, _int_text
from logitgate.frontends.regex import ANY_STRING as _ANY_STRING
from logitgate.grammar.ir import (
    Literal,
    Node,
    Ref,
    Repeat,
    Seq,
    StringExcept,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.grammar.json_text import seq as _seq
from logitgate.limits import Limits

from .caps import _COUNT_STATES, _EXCEPT_WORD_MAX, _MAX_ORDER_ANY
from .decide import Decider
from .diagnostics import Diagnostics
from .expand import Expander
from .facts import _Facts
from .literals import LiteralEmitter
from .members import MemberPositions
from .patterns import _finite_strings, _overlapping_atoms, _strings_except
from .resolve import _FALSE
from .rules import _COLON, RuleTable
from .strings import StringEmitter


class ObjectEmitter:
    """Object rules from facts; sub-schemas through ``ref``."""

    def __init__(
        self,
        table: RuleTable,
        diag: Diagnostics,
        dec: Decider,
        exp: Expander,
        strs: StringEmitter,
        lits: LiteralEmitter,
        members: MemberPositions,
        ref: Callable[[Iterable[int]], Node],
        limits: Limits,
        strict: bool,
        order_any: bool,
    ) -> None:
        self.table = table
        self.diag = diag
        self.dec = dec
        self.exp = exp
        self.strs = strs
        self.lits = lits
        self.members = members
        self.ref = ref
        self.limits = limits
        self.strict = strict
        self.order_any = order_any
        self.other_rules: dict[tuple[Node, ...], str] = {}  # "other" member languages -> their rule
        self.key_complements: dict[tuple[str, ...], str] = {}  # listed keys -> complement rule

    def emit_object(self, f: _Facts) -> Node:
        ws = self.table.ws()
        # Known names in schema order, then required-only names. When one "properties" object
        # lists every known name (a branch adding to its parent's, say), its order is the
        # schema order, whichever part the merge met first.
        parts = f.objs
        # (Dicts as ordered sets: objects of thousands of properties are linear to lower.)
        order: dict[str, None]
        if len(parts) == 1:  # most objects: one "properties" object, its order is the schema order
            order = dict.fromkeys(parts[0].order)
        else:
            names: set[str] = {k for part in parts for k in part.order}
            parts = sorted(parts, key=lambda p: not names <= set(p.props))
            order = {}
            for part in parts:
                order.update(dict.fromkeys(part.order))
        order.update(dict.fromkeys(f.required))
        has_addl = any(p.additional is not None for p in f.objs)
        has_pats = any(p.patterns for p in f.objs)
        allow_other = not (self.strict and not has_addl and not has_pats)
        # Keys beyond the listed ones that form a finite set (a propertyNames enum, a pattern with
        # a finite language) are members as well: each at most once, so never a duplicate key.
        enumerated: frozenset[str] | None = frozenset()
        if allow_other:
            finite_names, enumerated = self._finite_other_names(f, order)
            order.update(dict.fromkeys(finite_names))
        required_names = set(f.required)
        names_atoms = frozenset(f.names)
        members: list[tuple[str, Node, bool]] = []  # name, member node, required
        idents: list[tuple[str, Node]] = []  # name, value: what makes the member node
        for k in order:
            atoms = self.dec.key_atoms(f, k)
            if atoms is not None and names_atoms and not self.dec.check_atoms(k, names_atoms, 0):
                atoms = None
            if atoms is None:
                if k in required_names:
                    self.diag.contradiction(f, "", f"required property {k!r} is forbidden")
                    return _EMPTY_LANG
                continue
            value = self.ref(atoms)
            if _is_empty(value):
                if k in required_names:
                    return _EMPTY_LANG
                continue
            key = self.lits.string_literal(k)
            member: Node
            if type(key) is Literal and type(ws) is Ref and type(value) is Ref:
                member = Seq((key, ws, _COLON, ws, value))  # what seq() makes of it, directly
            else:
                member = _seq([key, ws, _COLON, ws, value])
            members.append((k, member, k in required_names))
            idents.append((k, value))
        known = list(order)
        # "Other" members: keys outside the known names (none when they were all enumerated).
        others: list[Node] = []
        if allow_other and enumerated is not None:
            for branch_key, branch_val in self._other_branches(f, known, enumerated):
                if _is_empty(branch_key) or _is_empty(branch_val):
                    continue
                others.append(_seq([Literal(b'"'), branch_key, Literal(b'"'), ws, Literal(b":"), ws, branch_val]))
        other: Node | None = None
        if others:
            # One rule per distinct "other" language: objects that agree on it share it, and
            # with it their position rules (below).
            other_key = tuple(others)
            oname = self.other_rules.get(other_key)
            if oname is None:
                oname = self.other_rules[other_key] = f"other{len(self.table.rules)}"
                self.table.rules[oname] = _alt(others)
            other = Ref(oname)
        lo, hi = f.min_props, f.max_props
        if hi is not None and lo > hi:
            self.diag.contradiction(f, f.min_props_ptr, "minProperties > maxProperties")
            return _EMPTY_LANG
        n_req = sum(1 for _, _, r in members if r)
        if hi is not None and n_req > hi:
            self.diag.contradiction(f, f.max_props_ptr, "more required properties than maxProperties")
            return _EMPTY_LANG
        if other is None and lo > len(members):
            n_allowed = f"{len(members)} propert{'y' if len(members) == 1 else 'ies'}"
            why = f"minProperties {_int_text(lo)}, but the object allows only {n_allowed}"
            self.diag.contradiction(f, f.min_props_ptr, why)
            return _EMPTY_LANG
        # Other keys may repeat a name, and the grammar counts occurrences: an upper bound on
        # distinct keys, so maxProperties stays exact. minProperties is exact while it asks for
        # at most one key beyond the required members (one occurrence is one distinct key).
        if other is not None and lo > n_req + 1:
            self.diag.unsupported(
                "minProperties",
                "counts distinct keys, and the names of additional properties may repeat",
                f.min_props_ptr,
            )
            lo = n_req + 1
        counting = lo > 0 or hi is not None
        cap = (hi + 1) if hi is not None else lo
        # Schema order is defined only when every member comes from one "properties" object;
        # members merged from several (allOf, dependentRequired, required-only names) go in any order.
        if len(parts) == 1:
            props = parts[0].props
            mixed = any(k not in props for k, _, _ in members)
        else:
            first_part: dict[str, int] = {}
            for i, part in enumerate(parts):
                for k in part.props:
                    first_part.setdefault(k, i)
            sources = {first_part.get(k, -1) for k, _, _ in members}
            mixed = len(sources) > 1 or -1 in sources
        n = len(members)
        # The keyword the count serves, for a refusal: maxProperties when there is one.
        count_kw, count_at = "maxProperties", f.max_props_ptr
        if hi is None:
            count_kw, count_at = "minProperties", f.min_props_ptr
        if other is None:
            cap = min(cap, n + 1)  # a closed object holds at most n keys: counts past n + 1 are never reached
        if (self.order_any or mixed) and 1 < n <= _MAX_ORDER_ANY:
            if counting and (1 << n) * (cap + 1) > _COUNT_STATES:
                self.diag.unsupported(count_kw, "property counting state space too large", count_at)
                counting = False
            return self.members.object_any_order(members, other, lo, hi, cap if counting else 0)
        if counting and (n + 1) * (cap + 1) > _COUNT_STATES:
            self.diag.unsupported(count_kw, "property counting state space too large", count_at)
            counting = False
        return self.members.object_in_order(members, idents, other, lo, hi, cap, counting)

    def _finite_other_names(self, f: _Facts, known: dict[str, None]) -> tuple[list[str], frozenset[str] | None]:
        """Names outside ``known`` that the keys beyond the listed ones are drawn from when that set
        is finite: every name of a propertyNames enum (then no other key remains: None), or the
        strings of patterns with a finite language (at most 64 ASCII names, matching no other
        pattern; those patterns are returned, for _other_branches to skip)."""
        if f.names:
            nf = self.dec.approx_facts(frozenset(f.names))
            if nf is not None and nf.enum is not None:
                return [v for v in nf.enum if isinstance(v, str) and v not in known], None
            return [], frozenset()
        pats = [(p, pptr) for part in f.objs for p, _, pptr in part.patterns]
        names: list[str] = []
        enumerated: set[str] = set()
        for p, _ in pats:
            strings = self._pattern_strings(p)
            if strings is None or not all(x.isascii() and "\n" not in x and "\r" not in x for x in strings):
                continue
            if any(self.dec.py_search(q, x, qptr) for q, qptr in pats if q != p for x in strings):
                continue
            names.extend(x for x in strings if x not in known)
            enumerated.add(p)
        return names, frozenset(enumerated)

    def _pattern_strings(self, pattern: str) -> list[str] | None:
        """The strings a (search-semantics) pattern matches when they are at most 64, else None."""
        try:
            node = self.strs.pattern_node(pattern)
        except (GrammarError, LimitExceeded):
            return None
        strings = _finite_strings(node, 64)
        return None if strings is None else list(dict.fromkeys(strings))

    def _other_branches(self, f: _Facts, known: list[str], enumerated: frozenset[str]) -> list[tuple[Node, Node]]:
        """(key content, value) pairs for keys outside ``known`` (patterns in ``enumerated`` left out:
        their names are known)."""
        names_atoms = frozenset(f.names)
        parts_with_pats = [p for p in f.objs if p.patterns]
        out: list[tuple[Node, Node]] = []
        if not parts_with_pats:
            value_atoms = {p.additional for p in f.objs if p.additional is not None}
            if _FALSE in value_atoms:
                return []
            key = self._key_language(names_atoms, known, None)
            return [(key, self.ref(value_atoms))]
        all_pats = [(p, pat) for p in f.objs for pat in p.patterns if pat[0] not in enumerated]
        overlapping = _overlapping_atoms([(pattern, atom) for _, (pattern, atom, _) in all_pats])
        for part, (pattern, atom, pptr) in all_pats:
            vals = {atom} | overlapping(pattern)
            for q in f.objs:
                if q is not part and q.additional is not None:
                    vals.add(q.additional)
            if _FALSE in vals:
                continue
            key = self._key_language(names_atoms, known, (pattern, pptr))
            out.append((key, self.ref(vals)))
        # Keys matching no pattern are not generated (that needs a regex complement): sound, incomplete.
        return out

    def _key_language(self, names_atoms: frozenset[int], known: list[str], pattern: tuple[str, str] | None) -> Node:
        """Encoded key content: strings not in ``known``, matching ``pattern`` and propertyNames."""
        cp_node: Node | None = None
        constrained = False
        matched: list[str] = []
        if pattern is not None:
            try:
                cp_node = self.strs.pattern_node(pattern[0])
            except GrammarError as e:
                self.diag.pattern_not_lowered("patternProperties", e, pattern[1])
                return _EMPTY_LANG
            constrained = True
            # Listed names the pattern also matches are members (their values satisfy both):
            # the other keys are the pattern's strings but those.
            matched = [k for k in known if self.dec.py_search(pattern[0], k, pattern[1])]
        if names_atoms:
            nf = self.dec.approx_facts(names_atoms)
            exp = self.exp.expand(names_atoms)
            if nf is None or "string" not in nf.types:
                return _EMPTY_LANG
            if exp is not None and exp[1]:
                self.diag.unsupported("propertyNames", "composite propertyNames schemas are not lowered", "")
            if nf.enum is not None:
                vals = [v for v in nf.enum if isinstance(v, str) and v not in known and self.dec.check(v, nf, 0)]
                if pattern is not None:
                    vals = [v for v in vals if self.dec.py_search(pattern[0], v, pattern[1])]
                return _alt(self.lits.string_content_literal(v) for v in vals) if vals else _EMPTY_LANG
            if nf.patterns or nf.formats or nf.min_len or nf.max_len is not None or nf.not_enum:
                if constrained:
                    self.diag.unsupported("propertyNames", "propertyNames with patternProperties", "")
                    return _EMPTY_LANG
                sf = _Facts(
                    types={"string"},
                    min_len=nf.min_len,
                    min_len_ptr=nf.min_len_ptr,
                    max_len=nf.max_len,
                    max_len_ptr=nf.max_len_ptr,
                    patterns=nf.patterns,
                    formats=nf.formats,
                    not_enum=[*nf.not_enum, *known] if not (nf.patterns or nf.formats) else nf.not_enum,
                )
                if (nf.patterns or nf.formats) and any(self.dec.check(k, nf, 0) for k in known):
                    self.diag.unsupported("propertyNames", "a listed property matches propertyNames' pattern", "")
                    return _EMPTY_LANG
                if not (nf.patterns or nf.formats) and known and (nf.min_len or nf.max_len is not None):
                    if any(self.dec.check(k, nf, 0) for k in known):
                        self.diag.unsupported("propertyNames", "length-bounded names besides listed properties", "")
                        return _EMPTY_LANG
                    sf.not_enum = list(nf.not_enum)
                return self.strs.string_contents(sf)
        if cp_node is not None and pattern is not None:
            if matched:
                return self._pattern_except(cp_node, matched, pattern[1])
            return self.strs.encoded_pattern(pattern[0])
        if not known:
            return Repeat(self.table.char_rule(), 0, None)
        return self._keys_except(known)

    def _pattern_except(self, cp_node: Node, matched: list[str], ptr: str) -> Node:
        """Encoded key content: the strings of ``cp_node`` (a pattern's) but the listed names
        ``matched`` (which it matches). Exact, or refused when the intersection is too large."""
        if cp_node == _ANY_STRING:
            return self._keys_except(matched)
        encoded: Node | None = None
        if max(map(len, matched)) <= _EXCEPT_WORD_MAX:
            exclusion = _strings_except(matched)
            encoded = self.strs.intersect_by_derivatives([cp_node, exclusion])
            if encoded is None:
                encoded = self.strs.with_length([cp_node, exclusion], 0, None)
        if encoded is None:
            self.diag.unsupported(
                "patternProperties",
                "a listed property also matches this pattern, and the pattern's other names are too large to lower",
                ptr,
            )
            return _EMPTY_LANG
        return encoded

    def _keys_except(self, known: Iterable[str]) -> Node:
        """Encoded key content: every string but ``known``. One rule per distinct set of listed
        keys: objects of one schema often repeat a set, and building the encoded complement is
        the costly part of lowering an object."""
        names = tuple(sorted(set(known)))
        name = self.key_complements.get(names)
        if name is None:
            name = self.key_complements[names] = f"keyc{len(self.key_complements)}"
            self.table.rules[name] = StringExcept(names, self.table.string_tail())
        return Ref(name)
