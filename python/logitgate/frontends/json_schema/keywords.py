"""The keywords the frontend knows, by role, and the readers of the type keywords."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from logitgate.errors import SchemaError

from .synthetic import Synthetic
from .values import _ptr_join

# Internal type tokens: "number" is split into "integer" and "fraction" (non-integral numbers),
# so that type sets intersect and complement exactly.
_ALL_TYPES = frozenset({"null", "boolean", "object", "array", "string", "integer", "fraction"})
_PUBLIC_TYPES = frozenset({"null", "boolean", "object", "array", "string", "number", "integer"})
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "examples",
        "default",
        "$comment",
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "$defs",
        "definitions",
        "readOnly",
        "writeOnly",
        "deprecated",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
    }
)
# Where sub-schemas live (the index walks only these: an "$id" inside an unknown keyword or in
# data is not an identifier).
_SCHEMA_MAPS = frozenset(
    {"$defs", "definitions", "properties", "patternProperties", "dependentSchemas", "dependencies"}
)
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_VALUES = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "items",
        "additionalItems",
        "additionalProperties",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
# Keywords whose values hold subschemas (the index walk skips every other keyword at once).
_SCHEMA_CHILDREN = _SCHEMA_MAPS | _SCHEMA_LISTS | _SCHEMA_VALUES

# The keywords of leaf schemas (Lowering._leaf_key): the scalar constraints.
_LEAF_KEYWORDS = frozenset(
    {
        "type",
        "nullable",
        "const",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
    }
)
# The keywords Merger._merge_one reads per type (a group is skipped when none is present).
_NUMBER_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_STRING_KEYWORDS = frozenset({"minLength", "maxLength", "pattern", "format"})
_OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "required",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
_ARRAY_KEYWORDS = frozenset({"items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"})


def _types_of(d: dict[str, Any], ptr: str) -> list[str]:
    t = d["type"]
    ts = [t] if isinstance(t, str) else t
    if not isinstance(ts, list) or not all(isinstance(x, str) for x in ts):
        raise SchemaError("type must be a string or an array of strings", pointer=_ptr_join(ptr, "type"))
    for x in ts:
        if x not in _PUBLIC_TYPES:
            if x == "any":  # draft-03
                return sorted(_PUBLIC_TYPES)
            raise SchemaError(f"unknown type {x!r}", pointer=_ptr_join(ptr, "type"))
    return ts


def _narrow_types(types: set[str], d: dict[str, Any], ptr: str, syn: Synthetic | None) -> None:
    """Keeps in ``types`` what the "type" keyword of ``d`` (with "nullable") and, for a synthetic
    atom, its record's type set allow."""
    if "type" in d:
        allowed = _closure(_types_of(d, ptr))
        if d.get("nullable") is True:
            allowed.add("null")
        types.intersection_update(allowed)
    if syn is not None and syn.types is not None:
        types.intersection_update(syn.types)


def _ref_overrides_siblings(root: Any) -> bool:
    """Whether the document declares draft-03 to draft-07 (its root's "$schema"), where a
    schema holding "$ref" is that reference alone."""
    declared = root.get("$schema") if isinstance(root, dict) else None
    return isinstance(declared, str) and re.search(r"draft-0[3-7]", declared) is not None


def _legacy_draft(root: Any) -> bool:
    """Whether the document declares draft-03 or draft-04 (its root's "$schema")."""
    declared = root.get("$schema", "") if isinstance(root, dict) else ""
    return isinstance(declared, str) and re.search(r"draft-0[34]", declared) is not None


def _closure(types: Iterable[str]) -> set[str]:
    """Public type names -> internal tokens ("number" = integer + fraction)."""
    out = set(types)
    if "number" in out:
        out.discard("number")
        out |= {"integer", "fraction"}
    return out


def _schema_list(d: dict[str, Any], kw: str, ptr: str) -> list[Any]:
    v = d[kw]
    if not isinstance(v, list) or not v:
        raise SchemaError(f"{kw} must be a non-empty array of schemas", pointer=_ptr_join(ptr, kw))
    return v


# Labels of the negation groups of a synthetic record's constraints (synthetic.Synthetic): read
# from the record, never from a schema object (they are not keywords).
_SYN_TYPES = "(synthetic types)"
_SYN_NOT_ENUM = "(synthetic not-enum)"
_GROUPS: tuple[tuple[str, ...], ...] = (
    ("type", "nullable"),
    ("const",),
    ("enum",),
    ("required",),
    ("minimum",),
    ("maximum",),
    ("exclusiveMinimum",),
    ("exclusiveMaximum",),
    ("minLength",),
    ("maxLength",),
    ("minItems",),
    ("maxItems",),
    ("minProperties",),
    ("maxProperties",),
    ("multipleOf",),
    ("pattern",),
    ("format",),
    ("properties", "patternProperties", "additionalProperties"),
    ("prefixItems", "items", "additionalItems"),
    ("contains", "minContains", "maxContains"),
    ("if", "then", "else"),
    ("propertyNames",),
    ("uniqueItems",),
    ("dependentRequired",),
    ("dependentSchemas",),
    ("dependencies",),
    (_SYN_TYPES,),
    (_SYN_NOT_ENUM,),
    ("$ref",),
    ("allOf",),
    ("anyOf",),
    ("oneOf",),
    ("not",),
    ("unevaluatedProperties",),
    ("unevaluatedItems",),
    ("$dynamicRef",),
    ("$recursiveRef",),
)

# Keywords that make a schema more than a leaf (Lowering._leaf_key): every group above but the
# scalar ones and the synthetic labels, where subschemas live, and identifiers. (Synthetic atoms
# are never leaves: their records are not keywords.)
_NOT_LEAF = (
    frozenset().union(*_GROUPS, _SCHEMA_CHILDREN, ("$id", "id", "$anchor", "$dynamicAnchor"))
    - _LEAF_KEYWORDS
    - {_SYN_TYPES, _SYN_NOT_ENUM}
)

# Keywords that make a $ref schema more than an alias of its target (_Index.alias_target).
_NOT_ALIAS = (_NOT_LEAF - {"$ref"}) | _LEAF_KEYWORDS
