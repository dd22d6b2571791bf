"""Negation: the complement of a schema as a disjunction over independent keyword groups."""

from __future__ import annotations

import math
from typing import Any

from logitgate.errors import SchemaError, UnsupportedSchemaError

from .caps import _MAX_BRANCHES, _NEGATABLE_DEPTH
from .diagnostics import Diagnostics
from .formats import _FORMATS, _UNSUPPORTED_FORMATS
from .keywords import _ALL_TYPES, _ANNOTATIONS, _GROUPS, _SYN_NOT_ENUM, _SYN_TYPES, _closure, _schema_list, _types_of
from .resolve import _FALSE, _Index
from .synthetic import Synthetic
from .values import _count_keyword, _dig, _json_key, _ptr_join


class Negator:
    """Complements of schemas, as alternatives of synthetic atoms."""

    def __init__(self, index: _Index, diag: Diagnostics) -> None:
        self.index = index
        self.diag = diag

    def _typed(
        self,
        key: tuple[Any, ...],
        types: list[str],
        schema: dict[str, Any],
        ptr: str,
        base: str,
        origin: dict[str, str] | None = None,
    ) -> int:
        """The synthetic atom of ``schema`` restricted to the internal type tokens ``types``;
        ``origin``: see :attr:`Synthetic.origin`."""
        return self.index.synth(key, schema, ptr, base, Synthetic(types=tuple(types), origin=origin))

    def negation(self, inner: int, ptr: str, base: str) -> list[list[int]] | None:
        """Alternatives (each a conjunction of atoms) whose union is ¬inner; None if dropped."""
        s, sptr, sbase = self.index.schema_of(inner)
        syn = self.index.synthetic.get(inner)
        if syn is not None and syn.negates is not None:
            return [[syn.negates]]
        out: list[list[int]] = []
        for group in _GROUPS:
            if group[0] in (_SYN_TYPES, _SYN_NOT_ENUM):  # the record's constraints, never keys of s
                if syn is None or (syn.types if group[0] == _SYN_TYPES else syn.not_enum) is None:
                    continue
                present = [group[0]]
            else:
                present = [k for k in group if k in s]
            if not present:
                continue
            kw = present[0]
            res = self._negate_group(s, sptr, sbase, syn, group, ptr, base)
            if res is None:
                self.diag.unsupported("not", f"cannot complement {kw!r} (at {_ptr_join(sptr, kw)})", ptr)
                return None
            out.extend(res)
        return out

    def _negate_group(
        self,
        s: dict[str, Any],
        sptr: str,
        sbase: str,
        syn: Synthetic | None,
        group: tuple[str, ...],
        ptr: str,
        base: str,
    ) -> list[list[int]] | None:
        """¬group as alternatives. A keyword that applies to one JSON type holds vacuously for
        the others, so its complement lies within its own type ("not required" is an object
        without the key; a string is never in it). Only "type", "const" and "enum" constrain
        every type, and only their complements reach into other types."""
        synth = self.index.synth
        key = id(s)
        kw = group[0]

        def sub(k: str, *more: str | int) -> int:
            return self.index.sub(s[k] if not more else _dig(s[k], more), _ptr_join(sptr, k, *more), sbase)

        if kw == "type":
            if "type" not in s:
                return []
            ts = _closure(_types_of(s, sptr))
            if s.get("nullable") is True:
                ts.add("null")
            return [[self.index.types_atom(_ALL_TYPES - ts, ptr, base)]] if _ALL_TYPES - ts else []
        if kw == _SYN_TYPES:
            assert syn is not None and syn.types is not None
            rest = _ALL_TYPES - set(syn.types)
            return [[self.index.types_atom(rest, ptr, base)]] if rest else []
        if kw in ("const", "enum"):
            vals = [s["const"]] if kw == "const" else s["enum"]
            if not isinstance(vals, list):
                raise SchemaError("enum must be an array", pointer=_ptr_join(sptr, "enum"))
            if not any(isinstance(v, (list, dict)) for v in vals):
                return [[synth(("ne", key, kw), {}, ptr, base, Synthetic(not_enum=vals))]]
            if kw == "const":
                return self._not_compound(vals[0], ptr, base)
            return self._not_enum_compound(vals, ptr, base)
        if kw == _SYN_NOT_ENUM:
            assert syn is not None and syn.not_enum is not None
            return [[synth(("e", key), {"enum": syn.not_enum}, ptr, base)]]
        if kw == "required":
            req = s["required"]
            if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
                raise SchemaError("required must be an array of strings", pointer=_ptr_join(sptr, "required"))
            if not req:
                return []
            return [[self._typed(("nreq", n), ["object"], {"properties": {n: False}}, ptr, base)] for n in req]
        flips = {
            "minimum": ("exclusiveMaximum", "num"),
            "maximum": ("exclusiveMinimum", "num"),
            "exclusiveMinimum": ("maximum", "num"),
            "exclusiveMaximum": ("minimum", "num"),
            "minLength": ("maxLength", "string"),
            "maxLength": ("minLength", "string"),
            "minItems": ("maxItems", "array"),
            "maxItems": ("minItems", "array"),
            "minProperties": ("maxProperties", "object"),
            "maxProperties": ("minProperties", "object"),
        }
        if kw in flips:
            v = s[kw]
            if isinstance(v, bool):
                if kw.startswith("exclusive"):
                    return []  # draft-04 flag: folded into minimum/maximum below
                return None
            if not isinstance(v, (int, float)):
                raise SchemaError(f"{kw} must be a number", pointer=_ptr_join(sptr, kw))
            other, ty = flips[kw]
            if ty == "num":
                flag = "exclusiveMinimum" if kw == "minimum" else "exclusiveMaximum"
                if kw in ("minimum", "maximum") and s.get(flag) is True:
                    other = "maximum" if kw == "minimum" else "minimum"  # draft-04: ¬(x > v) = x <= v
                inside = self._typed(("nb", key, kw), ["integer", "fraction"], {other: v}, ptr, base)
                return [[inside]]
            n = math.ceil(v) if kw.startswith("min") else math.floor(v)
            written = {other: _ptr_join(sptr, kw)}
            if kw.startswith("min"):
                if n <= 0:
                    return []
                inside = self._typed(("nb", key, kw), [ty], {other: n - 1}, ptr, base, written)
            else:
                inside = self._typed(("nb", key, kw), [ty], {other: n + 1}, ptr, base, written)
            return [[inside]]
        if kw == "properties":
            if "patternProperties" in s or s.get("additionalProperties", True) is not True:
                return None
            props = s.get("properties", {})
            if not isinstance(props, dict):
                raise SchemaError("properties must be an object", pointer=_ptr_join(sptr, "properties"))
            alts = []
            for k in props:
                a = self.index.sub(props[k], _ptr_join(sptr, "properties", k), sbase)
                if a == 0:
                    continue
                na = self.index.not_atom(a, ptr, base)
                alts.append(
                    [
                        self._typed(
                            ("nprop", key, k),
                            ["object"],
                            {"required": [k], "properties": {k: self.index.embed(na)}},
                            ptr,
                            base,
                        )
                    ]
                )
            return alts
        if kw == "prefixItems":
            pkw, rkw = ("items", "additionalItems") if isinstance(s.get("items"), list) else ("prefixItems", "items")
            a = sub(rkw) if rkw in s else 0
            if pkw in s:
                if a != 0 or not isinstance(s[pkw], list):
                    return None  # an item beyond the prefix failing its schema: no exact form
                alts = []
                for i in range(len(s[pkw])):
                    na = self.index.not_atom(sub(pkw, i), ptr, base)
                    if na != _FALSE:  # ¬true
                        shape = {"minItems": i + 1, "prefixItems": [True] * i + [self.index.embed(na)]}
                        alts.append([self._typed(("nprefix", key, i), ["array"], shape, ptr, base)])
                return alts
            if a == 0:
                return []
            na = self.index.not_atom(a, ptr, base)
            return [[self._typed(("nitems", key), ["array"], {"contains": self.index.embed(na)}, ptr, base)]]
        if kw == "contains":
            if "contains" not in s:
                return []
            cmin = _count_keyword(s, "minContains", sptr)
            cmax = _count_keyword(s, "maxContains", sptr)
            cmin = 1 if cmin is None else cmin
            contains = self.index.embed(sub("contains"))
            alts = []
            if cmin == 1:  # no item matches
                na = self.index.not_atom(sub("contains"), ptr, base)
                alts.append([self._typed(("ncont", key), ["array"], {"items": self.index.embed(na)}, ptr, base)])
            elif cmin > 1:
                fewer = {"contains": contains, "minContains": 0, "maxContains": cmin - 1}
                written = {"maxContains": _ptr_join(sptr, "minContains")}
                alts.append([self._typed(("ncont<", key), ["array"], fewer, ptr, base, written)])
            if cmax is not None:
                more = {"contains": contains, "minContains": cmax + 1}
                written = {"minContains": _ptr_join(sptr, "maxContains")}
                alts.append([self._typed(("ncont>", key), ["array"], more, ptr, base, written)])
            return alts
        if kw == "if":
            if "if" not in s or ("then" not in s and "else" not in s):
                return []
            c = sub("if")
            alts = []
            if "then" in s and sub("then") != 0:
                alts.append([c, self.index.not_atom(sub("then"), ptr, base)])
            if "else" in s and sub("else") != 0:
                alts.append([self.index.not_atom(c, ptr, base), self.index.not_atom(sub("else"), ptr, base)])
            return alts
        if kw == "uniqueItems":
            return [] if s["uniqueItems"] is not True else None
        if kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            # An object holding the name and missing a required one, or failing the schema.
            spec = s[kw]
            if not isinstance(spec, dict):
                raise SchemaError(f"{kw} must be an object", pointer=_ptr_join(sptr, kw))
            alts = []
            for name, dep in spec.items():
                if isinstance(dep, list) and kw != "dependentSchemas":
                    if not all(isinstance(x, str) for x in dep):
                        raise SchemaError(f"{kw} values must be arrays of strings", pointer=_ptr_join(sptr, kw, name))
                    for d in dep:
                        shape = {"required": [name], "properties": {d: False}}
                        alts.append([self._typed(("ndep", name, d), ["object"], shape, ptr, base)])
                elif kw != "dependentRequired" and isinstance(dep, (dict, bool)):
                    na = self.index.not_atom(sub(kw, name), ptr, base)
                    if na != _FALSE:
                        has = self._typed(("has", name), ["object"], {"required": [name]}, ptr, base)
                        alts.append([has, na])
                else:
                    raise SchemaError(f"bad {kw} entry", pointer=_ptr_join(sptr, kw, name))
            return alts
        if kw == "$ref":
            try:
                t, tptr, tbase = self.index.resolve(s["$ref"], sbase, _ptr_join(sptr, "$ref"))
            except UnsupportedSchemaError:  # remote: no complement of what is not known
                if not self.diag.lenient:
                    raise
                return None
            return [[self.index.not_atom(self.index.sub(t, tptr, tbase), ptr, base)]]
        if kw == "allOf":
            lst = _schema_list(s, "allOf", sptr)
            return [
                [self.index.not_atom(self.index.sub(x, _ptr_join(sptr, "allOf", i), sbase), ptr, base)]
                for i, x in enumerate(lst)
            ]
        if kw == "anyOf":
            lst = _schema_list(s, "anyOf", sptr)
            return [
                [
                    self.index.not_atom(self.index.sub(x, _ptr_join(sptr, "anyOf", i), sbase), ptr, base)
                    for i, x in enumerate(lst)
                ]
            ]
        if kw == "oneOf":
            lst = [
                self.index.sub(x, _ptr_join(sptr, "oneOf", i), sbase)
                for i, x in enumerate(_schema_list(s, "oneOf", sptr))
            ]
            alts = [[self.index.not_atom(a, ptr, base) for a in lst]]  # none holds
            alts += [[lst[i], lst[j]] for i in range(len(lst)) for j in range(i + 1, len(lst))]  # two hold
            return alts
        if kw == "not":
            return [[sub("not")]]
        return None

    def _not_compound(self, v: Any, ptr: str, base: str) -> list[list[int]] | None:
        """¬const v for an array or object ``v``: another type, or the same type differing in
        size, in a missing key, or in one member (each member's own ¬const is a sub-schema, so
        nesting is lowered set by set). None (refused) when ``v`` has no hash key or too many
        alternatives."""
        vk = _json_key(v)
        if vk is None:
            return None
        if isinstance(v, list):
            ty, n = "array", len(v)
            alts = [] if n == 0 else [[self._typed(("ne<", ty, n), [ty], {"maxItems": n - 1}, ptr, base)]]
            alts.append([self._typed(("ne>", ty, n), [ty], {"minItems": n + 1}, ptr, base)])
            for i, x in enumerate(v):
                item = {"not": {"const": x}}
                shape = {"minItems": i + 1, "prefixItems": [True] * i + [item]}
                alts.append([self._typed(("ne@", vk, i), [ty], shape, ptr, base)])
        else:
            ty, n = "object", len(v)
            alts = [[self._typed(("nreq", k), [ty], {"properties": {k: False}}, ptr, base)] for k in v]
            # All of the keys and one more (with them required, minProperties counts exactly).
            extra = {"required": list(v), "minProperties": n + 1}
            alts.append([self._typed(("ne>", ty, *sorted(v)), [ty], extra, ptr, base)])
            for k, x in v.items():
                shape = {"required": [k], "properties": {k: {"not": {"const": x}}}}
                alts.append([self._typed(("ne@", vk, k), [ty], shape, ptr, base)])
        if len(alts) >= _MAX_BRANCHES:
            return None
        return [[self.index.types_atom(_ALL_TYPES - {ty}, ptr, base)], *alts]

    def _not_enum_compound(self, vals: list[Any], ptr: str, base: str) -> list[list[int]] | None:
        """¬enum with array or object values, split by type: scalars outside the scalar values,
        arrays unequal to every listed array (a conjunction of their ¬const), objects alike."""
        scalars = [v for v in vals if not isinstance(v, (list, dict))]
        kinds = {"array": list, "object": dict}
        scalar_types = sorted(_ALL_TYPES - set(kinds))
        skey = _json_key(scalars)
        if skey is None:
            return None
        outside = Synthetic(types=tuple(scalar_types), not_enum=scalars)
        out = [[self.index.synth(("ne", skey), {}, ptr, base, outside)]]
        for ty, cls in kinds.items():
            conj = [self.index.types_atom([ty], ptr, base)]
            branches = 1
            for v in vals:
                if isinstance(v, cls):
                    alts = self._not_compound(v, ptr, base)
                    if alts is None:
                        return None
                    branches *= len(alts) - 1  # the other-type alternative dies under `ty`
                    const = self.index.synth(("const", _json_key(v)), {"const": v}, ptr, base)
                    conj.append(self.index.not_atom(const, ptr, base))
            if branches > _MAX_BRANCHES:
                return None
            out.append(conj)
        return out

    def negatable(self, atom: int, depth: int = 0) -> bool:
        """Static check that _negation(atom) will not need an unsupported complement."""
        if atom in (0, _FALSE):
            return True
        if depth > _NEGATABLE_DEPTH:
            return False
        s, sptr, sbase = self.index.schema_of(atom)
        if atom in self.index.synthetic:  # types and excluded values complement; a complement is its atom
            syn = self.index.synthetic[atom]
            if syn.negates is not None:
                return True
        for k in s:
            if k in _ANNOTATIONS or k in (
                "type",
                "nullable",
                "const",
                "enum",
                "required",
                "not",
                "minimum",
                "maximum",
                "exclusiveMinimum",
                "exclusiveMaximum",
                "minLength",
                "maxLength",
                "minItems",
                "maxItems",
                "minProperties",
                "maxProperties",
                "then",
                "else",
            ):
                continue
            try:
                if k == "properties":
                    if "patternProperties" in s or s.get("additionalProperties", True) is not True:
                        return False
                    if not isinstance(s[k], dict) or not all(
                        self.negatable(self.index.sub(v, _ptr_join(sptr, k, n), sbase), depth + 1)
                        for n, v in s[k].items()
                    ):
                        return False
                elif k in ("items", "prefixItems", "additionalItems"):
                    # As _negate_group: a prefix is complementable when nothing follows it.
                    pkw, rkw = (
                        ("items", "additionalItems") if isinstance(s.get("items"), list) else ("prefixItems", "items")
                    )
                    if k == pkw:
                        if s.get(rkw, True) is not True or not all(
                            self.negatable(self.index.sub(x, _ptr_join(sptr, k, i), sbase), depth + 1)
                            for i, x in enumerate(s[k])
                        ):
                            return False
                    elif k == rkw and pkw not in s:
                        if not self.negatable(self.index.sub(s[k], _ptr_join(sptr, k), sbase), depth + 1):
                            return False
                elif k == "contains":
                    if not self.negatable(self.index.sub(s[k], _ptr_join(sptr, k), sbase), depth + 1):
                        return False
                elif k == "if":
                    for part in ("if", "then", "else"):
                        if part in s and not self.negatable(
                            self.index.sub(s[part], _ptr_join(sptr, part), sbase), depth + 1
                        ):
                            return False
                elif k in ("allOf", "anyOf", "oneOf"):
                    if not isinstance(s[k], list) or not all(
                        self.negatable(self.index.sub(x, _ptr_join(sptr, k, i), sbase), depth + 1)
                        for i, x in enumerate(s[k])
                    ):
                        return False
                elif k == "$ref":
                    t, tptr, tbase = self.index.resolve(s["$ref"], sbase, _ptr_join(sptr, "$ref"))
                    if not self.negatable(self.index.sub(t, tptr, tbase), depth + 1):
                        return False
                elif k == "uniqueItems":
                    if s[k] is True:
                        return False
                elif k in ("dependentSchemas", "dependencies"):
                    if not isinstance(s[k], dict) or not all(
                        self.negatable(self.index.sub(v, _ptr_join(sptr, k, n), sbase), depth + 1)
                        for n, v in s[k].items()
                        if not isinstance(v, list)
                    ):
                        return False
                elif k in (
                    "multipleOf",
                    "pattern",
                    "format",
                    "patternProperties",
                    "additionalProperties",
                    "propertyNames",
                    "unevaluatedProperties",
                    "unevaluatedItems",
                    "$dynamicRef",
                    "$recursiveRef",
                ):
                    if k == "format" and s[k] not in _FORMATS and s[k] not in _UNSUPPORTED_FORMATS:
                        continue
                    if k == "additionalProperties" and s[k] is True:
                        continue
                    return False
            except SchemaError:
                return False
        return True
