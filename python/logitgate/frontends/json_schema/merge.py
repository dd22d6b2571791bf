"""Merging: the pure conjuncts of an atom set into one :class:`~.facts._Facts` record, keyword
values checked on the way."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from logitgate.errors import SchemaError

from .diagnostics import Diagnostics
from .facts import _ArrPart, _Contains, _Facts, _ObjPart
from .formats import _FORMATS, _UNSUPPORTED_FORMATS
from .keywords import _ARRAY_KEYWORDS, _NUMBER_KEYWORDS, _OBJECT_KEYWORDS, _STRING_KEYWORDS, _narrow_types
from .resolve import _Index
from .synthetic import Synthetic
from .values import _count_keyword, _json_eq, _number_keyword, _ptr_join, _ValueSet


class Merger:
    """Merges the pure conjuncts of an atom set into facts."""

    def __init__(self, index: _Index, diag: Diagnostics) -> None:
        self.index = index
        self.diag = diag
        self._obj_parts: dict[tuple[int, str, str], tuple[dict[str, Any], _ObjPart]] = {}  # (id(d), ptr, base)

    def merge(self, pure: list[int]) -> _Facts:
        f = _Facts()
        for a in pure:
            d, ptr, base = self.index.schema_of(a)
            self._merge_one(f, d, ptr, base, self.index.synthetic.get(a))
        return f

    def _merge_one(self, f: _Facts, d: dict[str, Any], ptr: str, base: str, syn: Synthetic | None) -> None:
        _narrow_types(f.types, d, ptr, syn)
        if "const" in d or "enum" in d:
            vals = [d["const"]] if "const" in d else d["enum"]
            if not isinstance(vals, list):
                raise SchemaError("enum must be an array", pointer=_ptr_join(ptr, "enum"))
            if "const" in d and "enum" in d:
                vals = [v for v in vals if any(_json_eq(v, w) for w in d["enum"] if isinstance(d["enum"], list))]
            if d.get("nullable") is True and "type" in d:
                vals = [*vals, None]
            if f.enum is None:
                f.enum = list(vals)
            else:
                allowed = _ValueSet(vals)
                f.enum = [v for v in f.enum if v in allowed]
            if not f.enum:
                self.diag.contradiction(f, ptr, "no enum value is left")
        if syn is not None and syn.not_enum is not None:
            f.not_enum.extend(syn.not_enum)
        # Most schema objects hold a few keywords: skip the groups they have none of.
        keys = d.keys()
        if not keys.isdisjoint(_NUMBER_KEYWORDS):
            self._merge_numbers(f, d, ptr)
        origin = syn.origin if syn is not None and syn.origin else {}

        def at(kw: str) -> str:  # where keyword kw of d was written
            return origin.get(kw) or _ptr_join(ptr, kw)

        if not keys.isdisjoint(_STRING_KEYWORDS):
            self._merge_strings(f, d, ptr, at)
        if not keys.isdisjoint(_OBJECT_KEYWORDS):
            self._merge_objects(f, d, ptr, base, at)
        if not keys.isdisjoint(_ARRAY_KEYWORDS):
            self._merge_arrays(f, d, ptr, base, at)

    def _merge_numbers(self, f: _Facts, d: dict[str, Any], ptr: str) -> None:
        lo, hi = _number_keyword(d, "minimum", ptr), _number_keyword(d, "maximum", ptr)
        emin, emax = d.get("exclusiveMinimum"), d.get("exclusiveMaximum")
        if isinstance(emin, bool):  # draft-04
            if emin and lo is not None:
                self._tighten_lo(f, lo, True)
                lo = None
        elif emin is not None:
            v = _number_keyword(d, "exclusiveMinimum", ptr)
            assert v is not None
            self._tighten_lo(f, v, True)
        if isinstance(emax, bool):
            if emax and hi is not None:
                self._tighten_hi(f, hi, True)
                hi = None
        elif emax is not None:
            v = _number_keyword(d, "exclusiveMaximum", ptr)
            assert v is not None
            self._tighten_hi(f, v, True)
        if lo is not None:
            self._tighten_lo(f, lo, False)
        if hi is not None:
            self._tighten_hi(f, hi, False)
        m = _number_keyword(d, "multipleOf", ptr)
        if m is not None:
            if m <= 0:
                raise SchemaError("multipleOf must be > 0", pointer=_ptr_join(ptr, "multipleOf"))
            f.multiple.append((m, _ptr_join(ptr, "multipleOf")))

    def _merge_strings(self, f: _Facts, d: dict[str, Any], ptr: str, at: Callable[[str], str]) -> None:
        cv = _count_keyword(d, "minLength", ptr)
        if cv is not None and cv > f.min_len:
            f.min_len, f.min_len_ptr = cv, at("minLength")
        cv = _count_keyword(d, "maxLength", ptr)
        if cv is not None and (f.max_len is None or cv < f.max_len):
            f.max_len, f.max_len_ptr = cv, at("maxLength")
        if "pattern" in d:
            if not isinstance(d["pattern"], str):
                raise SchemaError("pattern must be a string", pointer=_ptr_join(ptr, "pattern"))
            if (d["pattern"], "") not in [(p, "") for p, _ in f.patterns]:
                f.patterns.append((d["pattern"], _ptr_join(ptr, "pattern")))
        if "format" in d:
            fmt = d["format"]
            if not isinstance(fmt, str):
                raise SchemaError("format must be a string", pointer=_ptr_join(ptr, "format"))
            if fmt in _FORMATS:
                if fmt not in [x for x, _ in f.formats]:
                    f.formats.append((fmt, _ptr_join(ptr, "format")))
            elif fmt in _UNSUPPORTED_FORMATS:
                self.diag.unsupported("format", f"format {fmt!r} is not lowered", _ptr_join(ptr, "format"))

    def _merge_objects(self, f: _Facts, d: dict[str, Any], ptr: str, base: str, at: Callable[[str], str]) -> None:
        props = d.get("properties", {})
        if not isinstance(props, dict):
            raise SchemaError("properties must be an object", pointer=_ptr_join(ptr, "properties"))
        pats = d.get("patternProperties", {})
        if not isinstance(pats, dict):
            raise SchemaError("patternProperties must be an object", pointer=_ptr_join(ptr, "patternProperties"))
        addl = d.get("additionalProperties")
        if props or pats or addl is not None:
            # A schema object's part is the same wherever it is merged (large schemas merge
            # one many times): its members' atoms are registered once. Each merge gets its own
            # _ObjPart (parts are told apart by identity), sharing the contents, which no one
            # mutates. The entry keeps `d` alive, so its id is not reused.
            key = (id(d), ptr, base)
            known = self._obj_parts.get(key)
            if known is None:
                part = _ObjPart(
                    props={k: self.index.sub(s, _ptr_join(ptr, "properties", k), base) for k, s in props.items()},
                    patterns=[
                        (
                            p,
                            self.index.sub(s, _ptr_join(ptr, "patternProperties", p), base),
                            _ptr_join(ptr, "patternProperties", p),
                        )
                        for p, s in pats.items()
                    ],
                    additional=None
                    if addl is None
                    else self.index.sub(addl, _ptr_join(ptr, "additionalProperties"), base),
                    order=list(props),
                )
                self._obj_parts[key] = (d, part)
            else:
                part = known[1]
            f.objs.append(_ObjPart(part.props, part.patterns, part.additional, part.order))
        if "required" in d:
            req = d["required"]
            if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
                raise SchemaError("required must be an array of strings", pointer=_ptr_join(ptr, "required"))
            seen = set(f.required)
            for r in req:
                if r not in seen:
                    seen.add(r)
                    f.required.append(r)
        if "propertyNames" in d:
            f.names.append(self.index.sub(d["propertyNames"], _ptr_join(ptr, "propertyNames"), base))
        cv = _count_keyword(d, "minProperties", ptr)
        if cv is not None and cv > f.min_props:
            f.min_props, f.min_props_ptr = cv, at("minProperties")
        cv = _count_keyword(d, "maxProperties", ptr)
        if cv is not None and (f.max_props is None or cv < f.max_props):
            f.max_props, f.max_props_ptr = cv, at("maxProperties")
        for kw in ("unevaluatedProperties", "unevaluatedItems"):
            if kw in d and d[kw] is not True:
                self.diag.unsupported(kw, "unevaluated* keywords are not lowered", _ptr_join(ptr, kw))

    def _merge_arrays(self, f: _Facts, d: dict[str, Any], ptr: str, base: str, at: Callable[[str], str]) -> None:
        items = d.get("items")
        prefix = d.get("prefixItems")
        if isinstance(items, list):  # draft-04..2019: items as array = prefixItems
            prefix, items = items, d.get("additionalItems")
            ikw = "additionalItems"
        else:
            ikw = "items"
        if prefix is not None and not isinstance(prefix, list):
            raise SchemaError("prefixItems must be an array", pointer=_ptr_join(ptr, "prefixItems"))
        if prefix is not None or items is not None:
            pkw = "prefixItems" if "prefixItems" in d else "items"
            f.arrs.append(
                _ArrPart(
                    prefix=[self.index.sub(s, _ptr_join(ptr, pkw, i), base) for i, s in enumerate(prefix or [])],
                    items=None if items is None else self.index.sub(items, _ptr_join(ptr, ikw), base),
                )
            )
        cv = _count_keyword(d, "minItems", ptr)
        if cv is not None and cv > f.min_items:
            f.min_items, f.min_items_ptr = cv, at("minItems")
        cv = _count_keyword(d, "maxItems", ptr)
        if cv is not None and (f.max_items is None or cv < f.max_items):
            f.max_items, f.max_items_ptr = cv, at("maxItems")
        if "contains" in d:
            cmin = _count_keyword(d, "minContains", ptr)
            cmax = _count_keyword(d, "maxContains", ptr)
            f.contains.append(
                _Contains(
                    self.index.sub(d["contains"], _ptr_join(ptr, "contains"), base),
                    1 if cmin is None else cmin,
                    cmax,
                    _ptr_join(ptr, "contains"),
                    at("minContains"),
                    at("maxContains"),
                )
            )
        if d.get("uniqueItems") is True:
            f.unique = _ptr_join(ptr, "uniqueItems")

    def _tighten_lo(self, f: _Facts, v: Fraction, excl: bool) -> None:
        if f.lo is None or v > f.lo or (v == f.lo and excl):
            f.lo, f.lo_excl = v, excl

    def _tighten_hi(self, f: _Facts, v: Fraction, excl: bool) -> None:
        if f.hi is None or v < f.hi or (v == f.hi and excl):
            f.hi, f.hi_excl = v, excl
