"""JSON Schema frontend: a schema (draft 2020-12, with draft-04/06/07 spellings) lowered to the
Grammar IR of the JSON texts valid against it.

Pipeline, and the invariants each step keeps:

1. **Index** (:class:`_Index`): one iterative walk over the document records every schema
   object's JSON pointer and base URI, every ``$id`` resource and ``$anchor``. ``$ref`` is then
   resolved against that index only: a reference outside the document is
   :class:`UnsupportedSchemaError` (remote), a dangling pointer/anchor is :class:`SchemaError`.
2. **Atom sets**: the unit of lowering is a *set of conjoined schemas* (``frozenset`` of atoms;
   an atom is a schema object's ``id``). ``allOf``/``$ref`` flatten into the set, ``anyOf``,
   accepted ``oneOf``, ``if``/``then``/``else``, ``dependent*`` and ``not`` over composite
   schemas become disjunctions, distributed into one branch set per choice. Each distinct set
   is one grammar rule (recursion and sharing come for free; a worklist, not Python recursion,
   walks the schema, so schema depth never becomes Python stack depth).
3. **Facts** (:class:`_Facts`): the pure keywords of a set merged per JSON type (types
   intersected, bounds tightened, enums intersected, object/array sub-schemas kept as atom sets).
4. **Emission**: facts -> IR, per type. String contents are built at *code point* level and
   then JSON-encoded (:meth:`_Lowering.encode`): every accepted text decodes to a string of the
   code point language, so escapes never weaken a constraint.

Soundness rule: every construct is either lowered exactly (possibly accepting fewer
serializations of a valid value, documented in docs/json_schema.md) or raises
:class:`UnsupportedSchemaError` naming the keyword and pointer; ``lenient=True`` turns that
into a recorded entry of the returned ``dropped`` list and lowers the rest.
"""

from __future__ import annotations

import bisect
import collections
import functools
import itertools
import json
import math
import re
import urllib.parse
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, TypeVar

from logitgate.errors import GrammarError, LimitExceeded, SchemaError, UnsupportedSchemaError
from logitgate.frontends.regex import ANY_STRING as _ANY_STRING
from logitgate.frontends.regex import regex_to_node
from logitgate.grammar.derivatives import NOTHING as _NOTHING
from logitgate.grammar.derivatives import Derivatives as _Derivatives
from logitgate.grammar.ir import (
    EMPTY,
    MAX_CODE_POINT,
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
    references,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import any_value_rules as _any_value_rules
from logitgate.grammar.json_text import dec_class as _dec_class
from logitgate.grammar.json_text import digits_node as _digits_node
from logitgate.grammar.json_text import encoded_class as _encoded_class
from logitgate.grammar.json_text import encoded_class_ascii as _encoded_class_ascii
from logitgate.grammar.json_text import encoded_literal as _encoded_literal
from logitgate.grammar.json_text import intersect as _intersect
from logitgate.grammar.json_text import intersect_ranges as _intersect_ranges
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.grammar.json_text import non_ascii_escape_tail as _non_ascii_escape_tail
from logitgate.grammar.json_text import opt as _opt
from logitgate.grammar.json_text import positive_ranges as _positive_ranges
from logitgate.grammar.json_text import seq as _seq
from logitgate.grammar.json_text import split_fixed as _split_fixed
from logitgate.limits import Limits

__all__ = ["schema_to_grammar"]

_DEFAULT_BASE = "https://logitgate.invalid/schema.json"
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
# Shared references to the fixed-name rules (a Ref per call was most of the Refs built).
_WS_REF = Ref("ws")
_COLON = Literal(b":")
_VALUE_REFS = {name: Ref(name) for name in _any_value_rules(False)}
_MAX_BRANCHES = 256  # disjunction product bound per schema set
_MAX_RULES = 200_000
# Members per block of an ordered object's key alternatives (see emit_object).
_OBJECT_KEY_BLOCK = 8
# Bounded repetitions of string characters (Lowering.bounded): unrolled up to _UNROLLED_MAX,
# in blocks of _BLOCK up to _BLOCKS_MAX blocks, binary decomposition beyond.
_UNROLLED_MAX = 1024
_BLOCK = 256
_BLOCKS_MAX = 4096
_MAX_ORDER_ANY = 8  # property_order="any" tracks subsets of at most this many known properties


def _flat_items(node: Node) -> tuple[Node, ...]:
    """The items ``seq([node, x])`` puts before ``x`` (``x`` not a literal)."""
    if type(node) is Seq:
        return node.items
    if type(node) is Literal and not node.value:
        return ()
    return (node,)


def _alt_of_distinct(items: list[Node]) -> Node:
    """``alt(items)`` for distinct items none of which is an alternative (not checked here: it
    runs once per object position; test_object_position_rules_are_what_seq_and_alt_make is
    the check)."""
    return items[0] if len(items) == 1 else Alt(tuple(items))


# Atoms: a schema object's number (1, 2, ... in the order the index meets them: document
# order, then synthetic schemas as lowering makes them), or one of these markers. Numbers, not
# id()s: atom sets are iterated and sorted, and an order that follows memory addresses made
# the grammar (its size, even) differ from run to run for one schema.
_FALSE = -1

# The keywords of leaf schemas (_Lowering._leaf_key): the scalar constraints.
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
# The keywords _Lowering._merge_one reads per type (a group is skipped when none is present).
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


def _then(prefix: Node, last: Ref) -> Node:
    """``_seq([prefix, last])`` for a ``prefix`` that ``_seq`` built (its items need no merging)."""
    t = type(prefix)
    if t is Seq:
        return Seq((*prefix.items, last))  # type: ignore[union-attr]
    if t is Literal and not prefix.value:  # type: ignore[union-attr]
        return last
    if _is_empty(prefix):
        return _EMPTY_LANG
    return Seq((prefix, last))


def _ptr_join(pointer: str, *tokens: str | int) -> str:
    for t in tokens:
        t = str(t)
        if "~" in t or "/" in t:
            t = t.replace("~", "~0").replace("/", "~1")
        pointer += "/" + t
    return pointer


def _plain_json_text(s: str) -> bool:
    """True when ``s`` is its own JSON string content in every serialization (printable ASCII
    without quote or backslash): the common key, for which json.dumps is not needed."""
    return s.isascii() and s.isprintable() and '"' not in s and "\\" not in s


# ---------------------------------------------------------------------------------------------
# JSON value helpers.


def _json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "integer" if v.is_integer() else "fraction"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    raise TypeError(type(v).__name__)


def _json_eq(a: Any, b: Any) -> bool:
    """JSON Schema equality: 1 == 1.0, true != 1, deep for arrays/objects (iterative)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, bool) or isinstance(y, bool):
            if not (isinstance(x, bool) and isinstance(y, bool) and x == y):
                return False
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
            if x != y:
                return False
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, dict) and isinstance(y, dict):
            if x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif type(x) is not type(y) or x != y:
            return False
    return True


# Objects merged from up to this many parts are searched part by part for a key's atoms
# (key_atoms; indexing them costs more).
_FEW_PARTS = 4
# Enums up to this long are searched one value at a time (hashing them costs more).
_SHORT_ENUM = 8
# Values nested deeper than this have no hash key (_json_key): they are compared one by one.
_KEY_DEPTH = 32


def _json_key(v: Any, depth: int = 0) -> Hashable | None:
    """A hashable form of JSON value ``v`` under _json_eq's equality (1 and 1.0 are one key,
    true and 1 are not, object keys in any order); None for NaN (equal to nothing) and for
    values nested more than _KEY_DEPTH levels (the recursion stays that shallow)."""
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, (int, float)):
        return None if v != v else ("n", v)  # an int and an equal float hash alike
    if isinstance(v, str):
        return ("s", v)
    if v is None:
        return ("z",)
    if depth >= _KEY_DEPTH:
        return None
    if isinstance(v, list):
        items = []
        for x in v:
            k = _json_key(x, depth + 1)
            if k is None:
                return None
            items.append(k)
        return ("a", tuple(items))
    if isinstance(v, dict):
        members = []
        for name, x in v.items():
            k = _json_key(x, depth + 1)
            if k is None:
                return None
            members.append((name, k))
        return ("o", frozenset(members))
    return None


_T = TypeVar("_T")
_D = TypeVar("_D")


def _derived(cache: dict[int, tuple[list[_T], int, _D]], items: list[_T], build: Callable[[list[_T]], _D]) -> _D:
    """``build(items)``, kept in ``cache`` while ``items`` is the same list of the same length
    (a facts list grows only by appending; the entry holds the list, so its id stays its own)."""
    hit = cache.get(id(items))
    if hit is None or hit[0] is not items or hit[1] != len(items):
        hit = cache[id(items)] = (items, len(items), build(items))
    return hit[2]


class _ValueSet:
    """Membership in a list of JSON values under _json_eq, by hash: an enum of a few thousand
    values is checked against itself and against other enums, which one by one is quadratic."""

    __slots__ = ("_keys", "_values")

    def __init__(self, values: list[Any]) -> None:
        self._values = values
        keys = (_json_key(v) for v in values)
        # (An unkeyed value equals no keyed one: NaN equals nothing, and equal values nest alike.)
        self._keys = {k for k in keys if k is not None}

    def __contains__(self, value: Any) -> bool:
        k = _json_key(value)
        if k is None:
            return any(_json_eq(value, v) for v in self._values)
        return k in self._keys


def _fraction(v: Any) -> Fraction:
    return Fraction(v)


_BIG = Fraction(10**30)
_FRAC_DIGITS = 40


def _number_keyword(d: dict[str, Any], kw: str, ptr: str) -> Fraction | None:
    """The value of number keyword ``kw`` of schema object ``d`` (None when absent)."""
    if kw not in d:
        return None
    v = d[kw]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)):
        raise SchemaError(f"{kw} must be a number", pointer=_ptr_join(ptr, kw))
    return _fraction(v)


def _count_keyword(d: dict[str, Any], kw: str, ptr: str) -> int | None:
    """The value of count keyword ``kw`` (minLength, maxItems...) of ``d`` (None when absent)."""
    if kw not in d:
        return None
    v = d[kw]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (isinstance(v, float) and not v.is_integer()):
        raise SchemaError(f"{kw} must be a non-negative integer", pointer=_ptr_join(ptr, kw))
    return int(v)


def _short_bound(x: float, up: bool) -> Fraction:
    """A short decimal bound at least as tight as the double ``x`` (up: a lower bound, rounded
    up; else an upper bound, rounded down). Starts from repr(x) -- the shortest decimal that
    parses back to x, so comparing parsed doubles agrees -- then caps magnitude at 1e30 and the
    fraction at 40 digits, both in the tightening direction (sound; texts beyond are rare)."""
    r = Fraction(repr(x))
    if up:
        r = max(r, -_BIG)
        scaled = r * 10**_FRAC_DIGITS
        return Fraction(-((-scaled.numerator) // scaled.denominator), 10**_FRAC_DIGITS)
    r = min(r, _BIG)
    scaled = r * 10**_FRAC_DIGITS
    return Fraction(scaled.numerator // scaled.denominator, 10**_FRAC_DIGITS)


def _dec_parts(v: Fraction) -> tuple[int, str]:
    """Integer part and fraction digits of a non-negative finite decimal (binary fractions are)."""
    ip = v.numerator // v.denominator
    rem = v - ip
    out: list[str] = []
    while rem:
        rem *= 10
        d = rem.numerator // rem.denominator
        out.append(str(d))
        rem -= d
        if len(out) > 1200:
            raise LimitExceeded("max_repeat", 1200, "bound with too many decimal digits")
    return ip, "".join(out)


# ---------------------------------------------------------------------------------------------
# Index and $ref resolution.


class _Index:
    """Pointer, base URI, resources and anchors of one schema document (one iterative walk)."""

    def __init__(self, root: Any, limits: Limits) -> None:
        self.root = root
        # "id" names a resource only in drafts 03 and 04 (as "$id" from draft-06 on): elsewhere,
        # a nested draft-04 "id" is an unknown keyword, and the root's "$schema" decides.
        legacy_id = _legacy_draft(root)
        # Up to draft-07, "$ref" overrides its siblings: they are not part of the schema.
        self.ref_overrides = _ref_overrides_siblings(root)
        self.info: dict[int, tuple[Any, str, str]] = {}  # atom -> (schema, pointer, base uri)
        self.atoms: dict[int, int] = {}  # id(schema) -> atom
        self.resources: dict[str, tuple[Any, str]] = {}  # uri without fragment -> (schema, pointer)
        self.anchors: dict[str, tuple[Any, str]] = {}  # absolute uri#anchor -> (schema, pointer)
        self._keep: list[Any] = []  # synthetic schemas stay alive so their ids stay unique
        self._synth: dict[tuple[Any, ...], Any] = {}
        self.bool_atoms: dict[bool, int] = {}
        self._resolved: dict[tuple[str, str], tuple[Any, str, str]] = {}  # (ref, base) -> resolve()
        stack: list[tuple[Any, str, str, int]] = [(root, "", _DEFAULT_BASE, 0)]
        self.resources[_DEFAULT_BASE] = (root, "")
        while stack:
            node, ptr, base, depth = stack.pop()
            if depth > limits.max_nesting:
                raise LimitExceeded("max_nesting", limits.max_nesting, f"schema nesting at {ptr or '#'}")
            if isinstance(node, list):
                stack.extend((v, _ptr_join(ptr, i), base, depth + 1) for i, v in enumerate(node))
                continue
            if not isinstance(node, dict):
                continue
            # (Most schema objects have no id and no anchor: two lookups tell.)
            if "$id" in node or (legacy_id and "id" in node):
                sid = node.get("$id", node.get("id"))
                if isinstance(sid, str) and not (node.get("id") is sid and isinstance(node.get("type"), dict)):
                    url, frag = urllib.parse.urldefrag(urllib.parse.urljoin(base, sid))
                    if (url and url != base) or ptr == "":
                        base = url or base
                        self.resources.setdefault(base, (node, ptr))
                    if frag and not frag.startswith("/"):  # draft-04..07 "$id": "#name" is an anchor
                        self.anchors.setdefault(base + "#" + frag, (node, ptr))
            if "$anchor" in node or "$dynamicAnchor" in node:
                for key in ("$anchor", "$dynamicAnchor"):
                    anchor = node.get(key)
                    if isinstance(anchor, str):
                        self.anchors.setdefault(base + "#" + anchor, (node, ptr))
            self._register(node, ptr, base)
            for k, v in node.items():
                if k not in _SCHEMA_CHILDREN:
                    continue
                if k in _SCHEMA_MAPS and isinstance(v, dict):
                    for name, sub in v.items():
                        if isinstance(sub, dict):
                            stack.append((sub, _ptr_join(ptr, k, name), base, depth + 1))
                elif k in _SCHEMA_LISTS and isinstance(v, list):
                    for i, sub in enumerate(v):
                        if isinstance(sub, dict):
                            stack.append((sub, _ptr_join(ptr, k, i), base, depth + 1))
                elif k in _SCHEMA_VALUES and isinstance(v, dict):
                    stack.append((v, _ptr_join(ptr, k), base, depth + 1))

    def atom(self, schema: Any, pointer: str, base: str) -> int:
        """Atom of a schema value met at ``pointer`` (registers values found through $ref)."""
        if isinstance(schema, bool):
            if schema is False:
                return _FALSE
            return 0  # callers drop the True atom
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", pointer=pointer)
        return self._register(schema, pointer, base)

    def _register(self, schema: dict[str, Any], pointer: str, base: str) -> int:
        """The atom of ``schema``, numbered on first sight (the schema must stay alive: the
        document holds its own, ``_keep`` the synthetic ones)."""
        atom = self.atoms.get(id(schema))
        if atom is None:
            atom = self.atoms[id(schema)] = len(self.atoms) + 1
            if self.ref_overrides and "$ref" in schema and len(schema) > 1:
                schema = {"$ref": schema["$ref"]}
                self._keep.append(schema)
            self.info[atom] = (schema, pointer, base)
        return atom

    def base_of(self, schema: Any, default: str) -> str:
        """The base URI the index recorded for ``schema``, else ``default``."""
        atom = self.atoms.get(id(schema))
        return default if atom is None else self.info[atom][2]

    def synth(self, key: tuple[Any, ...], schema: dict[str, Any], pointer: str, base: str) -> int:
        """A synthetic schema (from dependentRequired, not, ...) memoized by ``key`` so that the
        same construct always yields the same atom (atom sets must compare equal)."""
        hit = self._synth.get(key)
        if hit is None:
            self._keep.append(schema)
            self._synth[key] = schema
            hit = schema
            return self._register(schema, pointer, base)
        return self.atoms[id(hit)]

    def resolve(self, ref: str, base: str, pointer: str) -> tuple[Any, str, str]:
        """The schema ``ref`` names from ``base``: (schema, its pointer, its base URI).
        Memoized (``pointer`` only names the $ref in errors): schemas refer to a few
        definitions from many places, and URI joins cost more than the rest of a resolution."""
        key = (ref, base)
        hit = self._resolved.get(key)
        if hit is None:
            hit = self._resolved[key] = self._resolve(ref, base, pointer)
        return hit

    def _resolve(self, ref: str, base: str, pointer: str) -> tuple[Any, str, str]:
        if ref.startswith("#") and "#" not in base:
            url, frag = base, ref[1:]  # what urljoin and urldefrag make of a fragment, directly
        else:
            url, frag = urllib.parse.urldefrag(urllib.parse.urljoin(base, ref))
        res = self.resources.get(url)
        if res is None:
            # A full-URI anchor may be registered under its resource even if url has no match.
            raise UnsupportedSchemaError("$ref", f"remote or unknown reference {ref!r}", pointer=pointer)
        doc, doc_ptr = res
        if not frag:
            return doc, doc_ptr, url
        if not frag.startswith("/"):
            hit = self.anchors.get(url + "#" + frag)
            if hit is None:
                raise SchemaError(f"$ref anchor {ref!r} not found", pointer=pointer, code="schema-ref")
            return hit[0], hit[1], self.base_of(hit[0], url)
        node: Any = doc
        node_ptr = doc_ptr
        node_base = url
        for raw in frag[1:].split("/"):
            tok = urllib.parse.unquote(raw) if "%" in raw else raw
            if "~" in tok:
                tok = tok.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and tok in node:
                node = node[tok]
            elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
                node = node[int(tok)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve", pointer=pointer, code="schema-ref")
            node_ptr = _ptr_join(node_ptr, tok)
            if isinstance(node, dict):
                node_base = self.base_of(node, node_base)
        return node, node_ptr, node_base


# ---------------------------------------------------------------------------------------------
# Facts: the pure keywords of an atom set, merged.


@dataclass
class _ObjPart:
    """Object keywords of one conjunct (additional=None: absent)."""

    props: dict[str, int]
    patterns: list[tuple[str, int, str]]  # (pattern, atom, pointer)
    additional: int | None
    order: list[str]


@dataclass
class _ArrPart:
    prefix: list[int]
    items: int | None  # applies at positions >= len(prefix); None: absent (any)


@dataclass
class _Facts:
    types: set[str] = field(default_factory=lambda: set(_ALL_TYPES))
    enum: list[Any] | None = None
    not_enum: list[Any] = field(default_factory=list)
    lo: Fraction | None = None
    lo_excl: bool = False
    hi: Fraction | None = None
    hi_excl: bool = False
    multiple: list[tuple[Fraction, str]] = field(default_factory=list)
    min_len: int = 0
    max_len: int | None = None
    patterns: list[tuple[str, str]] = field(default_factory=list)  # (pattern, pointer)
    formats: list[tuple[str, str]] = field(default_factory=list)
    objs: list[_ObjPart] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    names: list[int] = field(default_factory=list)  # propertyNames atoms
    min_props: int = 0
    min_props_ptr: str = ""  # pointer of the minProperties that set min_props
    max_props: int | None = None
    arrs: list[_ArrPart] = field(default_factory=list)
    min_items: int = 0
    max_items: int | None = None
    contains: list[tuple[int, int, int | None, str]] = field(default_factory=list)  # atom, min, max, ptr
    unique: str | None = None  # pointer of uniqueItems: true
    empty_reason: tuple[str, str] | None = None  # (pointer, message) when a contradiction was seen


def _nonneg_range(a: int, b: int | None) -> Node:
    """Decimal naturals in [a, b] (b=None: unbounded), no leading zeros."""
    alts: list[Node] = []
    width = 1
    while True:
        wlo = 0 if width == 1 else 10 ** (width - 1)
        whi = 10**width - 1
        if b is not None and wlo > b:
            break
        if b is None and wlo > a and width > 1:
            alts.append(_seq([CharClass(((0x31, 0x39),)), Repeat(CharClass(((0x30, 0x39),)), width - 1, None)]))
            break
        lo, hi = max(a, wlo), whi if b is None else min(b, whi)
        if lo <= hi:
            alts.append(_digits_node(_split_fixed(lo, hi, width, 10), 10, _dec_class))
        width += 1
    return _alt(alts)


def _int_range(lo: int | None, hi: int | None) -> Node:
    """JSON integers in [lo, hi] (None: open), canonical form (no "-0")."""
    alts: list[Node] = []
    if hi is None or hi >= 0:
        alts.append(_nonneg_range(max(lo, 0) if lo is not None else 0, hi))
    if lo is None or lo < 0:
        mag_lo = max(1, -hi) if hi is not None else 1
        mag_hi = -lo if lo is not None else None
        if mag_hi is None or mag_lo <= mag_hi:
            alts.append(_seq([Literal(b"-"), _nonneg_range(mag_lo, mag_hi)]))
    return _alt(alts) if alts else _EMPTY_LANG


# ---------------------------------------------------------------------------------------------
# Formats, as regexes in the common subset of ECMA and Python (Python re checks enum values).

_DATE_RE = (
    r"(?:[0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-"
    r"(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    r"|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29"
)
# A leap second only at 23:59:60 UTC (offset Z or +-00:00): stricter than RFC 3339 allows.
_TIME_RE = (
    r"(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
    r"|23:59:60(?:\.[0-9]+)?(?:[zZ]|[+-]00:00))"
)
_DEC_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])"
_IPV4_RE = rf"{_DEC_OCTET}(?:\.{_DEC_OCTET}){{3}}"
_H16 = r"[0-9a-fA-F]{1,4}"
_LS32 = rf"(?:{_H16}:{_H16}|{_IPV4_RE})"
_IPV6_RE = (
    rf"(?:(?:{_H16}:){{6}}{_LS32}|::(?:{_H16}:){{5}}{_LS32}|(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}|(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}"
    rf"|(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}|(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}"
    rf"|(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}|(?:(?:{_H16}:){{0,6}}{_H16})?::)"
)
# Labels never carry "--" at positions 3-4 (IDNA A-labels "xn--" are rejected, not checked).
_AN = "[A-Za-z0-9]"
_LDH = "[A-Za-z0-9-]"
_LABEL63 = rf"(?:{_AN}(?:{_LDH}?{_AN})?|{_AN}{_LDH}{{2}}{_AN}|{_AN}{_LDH}(?:{_AN}{_LDH}|-{_AN}){_LDH}{{0,58}}{_AN})"
_LABEL30 = rf"(?:{_AN}(?:{_LDH}?{_AN})?|{_AN}{_LDH}{{2}}{_AN}|{_AN}{_LDH}(?:{_AN}{_LDH}|-{_AN}){_LDH}{{0,25}}{_AN})"
# At most 253 characters: up to 3 labels of 63, or up to 8 labels of 30 (both bounded below 253).
_HOSTNAME_RE = rf"(?:{_LABEL63}(?:\.{_LABEL63}){{0,2}}|{_LABEL30}(?:\.{_LABEL30}){{0,7}})"
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUBDELIMS = r"!$&'()*+,;="
_PCT = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUBDELIMS}:@]|{_PCT})"
_SEGMENT = rf"{_PCHAR}*"
_AUTHORITY = (
    rf"(?:(?:[{_UNRESERVED}{_SUBDELIMS}:]|{_PCT})*@)?"
    rf"(?:\[{_IPV6_RE}\]|(?:[{_UNRESERVED}{_SUBDELIMS}]|{_PCT})*)(?::[0-9]*)?"
)
_QUERY = rf"(?:{_PCHAR}|[/?])*"
_HIER = rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*|/(?:{_PCHAR}+(?:/{_SEGMENT})*)?|{_PCHAR}+(?:/{_SEGMENT})*|)"
_URI_RE = rf"[A-Za-z][A-Za-z0-9+\-.]*:{_HIER}(?:\?{_QUERY})?(?:#{_QUERY})?"
_NOSCHEME = rf"(?:[{_UNRESERVED}{_SUBDELIMS}@]|{_PCT})"
_RELATIVE = (
    rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*|/(?:{_PCHAR}+(?:/{_SEGMENT})*)?|{_NOSCHEME}+(?:/{_SEGMENT})*|)"
    rf"(?:\?{_QUERY})?(?:#{_QUERY})?"
)
_JSON_POINTER_RE = r"(?:/(?:[^~/]|~[01])*)*"
_FORMATS: dict[str, str] = {
    "date": _DATE_RE,
    "time": _TIME_RE,
    "date-time": rf"(?:{_DATE_RE})[tT]{_TIME_RE}",
    "duration": (
        r"P(?:(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
        r"(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?"
        r"|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)"
    ),
    "email": rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+)*@{_HOSTNAME_RE}",
    "idn-email": rf"[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{{|}}~-]+)*@{_HOSTNAME_RE}",
    "hostname": _HOSTNAME_RE,
    "ipv4": _IPV4_RE,
    "ipv6": _IPV6_RE,
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "uri": _URI_RE,
    "uri-reference": rf"(?:{_URI_RE}|{_RELATIVE})",
    "json-pointer": _JSON_POINTER_RE,
    "relative-json-pointer": rf"(?:0|[1-9][0-9]*)(?:#|{_JSON_POINTER_RE})",
}
# Formats jsonschema's FormatChecker knows but we do not lower: rejected (never silently ignored).
_UNSUPPORTED_FORMATS = frozenset({"idn-hostname", "iri", "iri-reference", "uri-template", "regex"})


# ---------------------------------------------------------------------------------------------
# The lowering.


class _Lowering:
    def __init__(
        self,
        root: Any,
        *,
        limits: Limits,
        whitespace: str,
        max_whitespace: int | None,
        property_order: str,
        strict: bool,
        lenient: bool,
        oneof: str,
    ) -> None:
        if whitespace not in ("flexible", "compact"):
            raise ValueError(f"whitespace must be 'flexible' or 'compact', got {whitespace!r}")
        if property_order not in ("schema", "any"):
            raise ValueError(f"property_order must be 'schema' or 'any', got {property_order!r}")
        if oneof not in ("exact", "anyof"):
            raise ValueError(f"oneof must be 'exact' or 'anyof', got {oneof!r}")
        if max_whitespace is not None and (not isinstance(max_whitespace, int) or max_whitespace < 0):
            raise ValueError("max_whitespace must be None or a non-negative int")
        self.limits = limits
        self.index = _Index(root, limits)
        self.approx_memo: dict[frozenset[int], _Facts | None] = {}
        self.branch_types: dict[frozenset[int], frozenset[str]] = {}  # _branch_types
        self.compact = whitespace == "compact"
        self.max_ws = max_whitespace
        self.order_any = property_order == "any"
        self.strict = strict
        self.lenient = lenient
        self.oneof_anyof = oneof == "anyof"
        # Draft-04 (and 03) count only integer literals as "integer" (9.0 is a number there);
        # from draft-06 on, any number with a zero fraction is an integer.
        self.integer_fraction_ok = not _legacy_draft(root)
        self.dropped: list[str] = []
        self.rules: dict[str, Node] = {}
        self.names: dict[frozenset[int], str] = {}
        self.pointers: dict[str, str] = {}  # rule name -> JSON pointer(s) of the schema set it lowers
        self.work: list[tuple[frozenset[int], str]] = []
        self.facts_memo: dict[frozenset[int], tuple[_Facts | None, list[list[frozenset[int]]]]] = {}
        self.enc_memo: dict[Node, Node] = {}
        self.format_memo: dict[str, Node] = {}
        # _derived: long enums hashed (_in_enum), merged objects' keys indexed (_key_index).
        self._enum_sets: dict[int, tuple[list[Any], int, _ValueSet]] = {}
        self._key_indexes: dict[int, tuple[list[_ObjPart], int, tuple[dict[str, list[int]], list[_ObjPart]]]] = {}
        self._obj_parts: dict[tuple[int, str, str], tuple[dict[str, Any], _ObjPart]] = {}  # (id(d), ptr, base)
        self.key_complements: dict[tuple[str, ...], str] = {}  # listed keys -> complement rule
        self.empty_reasons: list[tuple[str, str]] = []
        # The pointer of the schema set being lowered: errors raised without a keyword's own
        # pointer (a combination of keywords, say) name it.
        self.where = ""
        self.shared_memo: dict[tuple[Any, ...], str] = {}
        # Ordered objects (_object_in_order): "other" languages -> their rule; an object's
        # suffixes (members from a position on) -> numbers; the numbers whose rules exist.
        self.other_rules: dict[tuple[Node, ...], str] = {}
        self.object_suffixes: dict[tuple[Any, ...], int] = {}
        self.object_built: set[int] = set()
        self.any_order_objects: dict[tuple[Any, ...], Node] = {}  # _object_any_order's inputs -> its object
        self.leaf_names: dict[tuple[Any, ...], str] = {}  # _leaf_key -> the rule of the first such leaf

    # -- errors and options --------------------------------------------------------------------

    def unsupported(self, keyword: str, message: str, pointer: str) -> None:
        """Raise, or (lenient) record the dropped constraint and return so the caller skips it."""
        pointer = pointer or self.where
        if not self.lenient:
            raise UnsupportedSchemaError(keyword, message, pointer=pointer)
        entry = f"{pointer or '#'}: {keyword}: {message}"
        if entry not in self.dropped:
            self.dropped.append(entry)

    def pattern_not_lowered(self, keyword: str, e: GrammarError, pointer: str) -> None:
        """A pattern the regex frontend refused: a syntax error makes the schema invalid (raised
        even when lenient: nothing valid is dropped); a construct it cannot lower is
        unsupported."""
        first = e.message.splitlines()[0]
        if e.code == "regex-syntax":
            raise SchemaError(f"invalid {keyword} regex: {first}", pointer=pointer, code="schema-invalid-pattern")
        self.unsupported(keyword, f"pattern not lowered: {first}", pointer)

    def ws(self) -> Node:
        if self.compact:
            return EMPTY
        if "ws" not in self.rules:
            if self.max_ws is None:  # JSON's own whitespace: one loop, so one parser state
                self.rules["ws"] = Repeat(CharClass(((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))), 0, None)
            else:
                blanks = Repeat(CharClass(((0x09, 0x09), (0x20, 0x20))), 0, self.max_ws) if self.max_ws else EMPTY
                self.rules["ws"] = _seq([_opt(_seq([_opt(Literal(b"\r")), Literal(b"\n")])), blanks])
        return _WS_REF

    def comma(self) -> Node:
        """The separator between members and items: ``ws "," ws`` (a bare comma when compact)."""
        ws = self.ws()
        return _seq([ws, Literal(b","), ws])

    def rule(self, name: str, build: Callable[[], Node]) -> Ref:
        if name not in self.rules:
            self.rules[name] = _EMPTY_LANG  # placeholder against re-entry
            self.rules[name] = build()
        return Ref(name)

    def value_rule(self, name: str) -> Ref:
        """One of the schema-independent rules of json_text.any_value_rules (``value``,
        ``string``, ``number``, ``char``...), with the rules it references."""
        if name not in self.rules:
            table = _any_value_rules(self.compact)
            stack = [name]
            while stack:  # iterative: the rules reference each other (value <-> any_object)
                n = stack.pop()
                if n == "ws":
                    self.ws()
                elif n not in self.rules:
                    body, uses = table[n]
                    self.rules[n] = body
                    stack.extend(uses)
        return _VALUE_REFS[name]

    # -- atoms -------------------------------------------------------------------------------

    def sub(self, value: Any, pointer: str, base: str) -> int:
        return self.index.atom(value, pointer, base)

    def atoms_ref(self, atoms: Iterable[int]) -> Node:
        key = frozenset(atoms)
        if 0 in key:
            key = key - {0}
        if _FALSE in key:
            return _EMPTY_LANG
        if not key:
            return self.any_value()
        name = self.names.get(key)
        if name is None:
            leaf = None
            if len(key) == 1:
                (atom,) = key
                target = self._alias_target(atom)
                if target is not None:
                    node = self.atoms_ref((target,))
                    if type(node) is Ref:
                        self.names[key] = node.name
                    return node
                leaf = self._leaf_key(atom)
            if leaf is not None:
                name = self.leaf_names.get(leaf)
                if name is not None:
                    self.names[key] = name
                    return Ref(name)
            if len(self.names) > _MAX_RULES:
                raise LimitExceeded("max_automaton_states", self.limits.max_automaton_states, "too many schema rules")
            name = f"s{len(self.names)}"
            self.names[key] = name
            self.pointers[name] = " & ".join(sorted({"#" + self.index.info[a][1] for a in key if a in self.index.info}))
            if leaf is not None:
                self.leaf_names[leaf] = name
            self.work.append((key, name))
        return Ref(name)

    def _alias_target(self, atom: int) -> int | None:
        """The atom that a schema of only a $ref (and annotations) stands for, through chains
        of such: its set is lowered as the target's rule. None when ``atom`` is no alias, and
        for a cycle of aliases (expand() lowers those)."""
        seen: set[int] = set()
        a = atom
        while a not in (0, _FALSE):
            d, ptr, base = self.index.info[a]
            ref = d.get("$ref")
            if not isinstance(ref, str) or not d.keys().isdisjoint(self._NOT_ALIAS):
                break
            if a in seen:
                return None
            seen.add(a)
            t, tptr, tbase = self.index.resolve(ref, base, _ptr_join(ptr, "$ref"))
            a = self.sub(t, tptr, tbase)
        return None if a == atom else a

    def _leaf_key(self, atom: int) -> tuple[Any, ...] | None:
        """The constraints of a schema that is a leaf (scalar keywords, annotations and unknown
        keywords only), as a hashable key: leaves with the same key lower to the same rule.
        Schemas repeat their leaves: Github_ultra/o15627's 285 leaf property schemas are 4
        distinct ones. None when not a leaf, and always when lenient (each occurrence of a
        dropped constraint is reported at its own pointer)."""
        if self.lenient:
            return None
        d = self.index.info[atom][0]
        if not d.keys().isdisjoint(self._NOT_LEAF):
            return None
        parts = []
        for k in sorted(d.keys() & _LEAF_KEYWORDS):
            v = d[k]
            # Values compare as written (1 and 1.0, true and 1 are different keys): an enum of
            # 1.0 is spelled otherwise than one of 1, and a missed share costs only time.
            if isinstance(v, (list, dict)):
                try:
                    v = json.dumps(v, sort_keys=True)
                except (RecursionError, ValueError, TypeError):  # too deep, or not JSON
                    return None
            parts.append((k, (type(v), v)))
        return tuple(parts)

    def schema_of(self, atom: int) -> tuple[dict[str, Any], str, str]:
        d, ptr, base = self.index.info[atom]
        return d, ptr, base

    # -- expansion: atoms -> pure conjuncts + disjunctions ------------------------------------

    def expand(self, atoms: frozenset[int]) -> tuple[list[int], list[list[frozenset[int]]]] | None:
        """Flattens $ref/allOf; returns the pure conjunct atoms and the disjunctions (each a list
        of alternative atom sets), or None when the set contains false."""
        pure: list[int] = []
        disj: list[list[frozenset[int]]] = []
        seen: set[int] = set()
        stack = sorted(atoms, reverse=True)
        while stack:
            a = stack.pop()
            if a == 0 or a in seen:
                continue
            if a == _FALSE:
                return None
            seen.add(a)
            d, ptr, base = self.schema_of(a)
            if d.get("$lg_not") is not None:  # synthetic negation wrapper
                self.expand_not(d, ptr, base, stack, pure, disj)
                continue
            pure.append(a)
            if "$ref" in d:
                ref = d["$ref"]
                if not isinstance(ref, str):
                    raise SchemaError("$ref must be a string", pointer=_ptr_join(ptr, "$ref"))
                t, tptr, tbase = self.index.resolve(ref, base, _ptr_join(ptr, "$ref"))
                stack.append(self.sub(t, tptr, tbase))
            for kw in ("$dynamicRef", "$recursiveRef"):
                if kw in d:
                    ref = d[kw]
                    if kw == "$dynamicRef" and isinstance(ref, str) and self._static_dynamic_ok(ref, base):
                        t, tptr, tbase = self.index.resolve(ref, base, _ptr_join(ptr, kw))
                        stack.append(self.sub(t, tptr, tbase))
                    else:
                        self.unsupported(kw, "dynamic references are not lowered", _ptr_join(ptr, kw))
            if "allOf" in d:
                for i, s in enumerate(self._schema_list(d, "allOf", ptr)):
                    stack.append(self.sub(s, _ptr_join(ptr, "allOf", i), base))
            if "anyOf" in d:
                lst = self._schema_list(d, "anyOf", ptr)
                disj.append([frozenset({self.sub(s, _ptr_join(ptr, "anyOf", i), base)}) for i, s in enumerate(lst)])
            if "oneOf" in d:
                lst = self._schema_list(d, "oneOf", ptr)
                one = [self.sub(x, _ptr_join(ptr, "oneOf", i), base) for i, x in enumerate(lst)]
                alts = [frozenset({a}) for a in one]
                ctx = self._pure_only(a)
                if len(alts) > 1 and not self.oneof_anyof and not self._pairwise_disjoint([x | {ctx} for x in alts]):
                    if all(self._negatable(a) for a in one):
                        # exactly one holds: S_i ∧ ¬S_j for every j != i
                        alts = [
                            frozenset(
                                {
                                    a,
                                    *(
                                        self._not_atom(b, _ptr_join(ptr, "oneOf"), base)
                                        for j, b in enumerate(one)
                                        if j != i
                                    ),
                                }
                            )
                            for i, a in enumerate(one)
                        ]
                    else:
                        self.unsupported(
                            "oneOf",
                            "branches are neither provably disjoint nor complementable (option oneof='anyof' relaxes)",
                            _ptr_join(ptr, "oneOf"),
                        )
                disj.append(alts)
            if "not" in d:
                n = self.sub(d["not"], _ptr_join(ptr, "not"), base)
                stack.append(self._not_atom(n, _ptr_join(ptr, "not"), base))
            if "if" in d and ("then" in d or "else" in d):
                c = self.sub(d["if"], _ptr_join(ptr, "if"), base)
                nc = self._not_atom(c, _ptr_join(ptr, "if"), base)
                t = self.sub(d.get("then", True), _ptr_join(ptr, "then"), base)
                e = self.sub(d.get("else", True), _ptr_join(ptr, "else"), base)
                disj.append([frozenset({c, t}), frozenset({nc, e})])
            self._dependencies(d, ptr, base, disj)
        return pure, disj

    def _static_dynamic_ok(self, ref: str, base: str) -> bool:
        """$dynamicRef is static when no $dynamicAnchor of that name exists anywhere but its
        static target (then dynamic scope cannot change the target)."""
        if not ref.startswith("#") or ref.startswith("#/"):
            return ref.startswith("#/")
        name = ref[1:]
        owners = [k for k in self.index.anchors if k.endswith("#" + name)]
        return len(owners) <= 1

    def _schema_list(self, d: dict[str, Any], kw: str, ptr: str) -> list[Any]:
        v = d[kw]
        if not isinstance(v, list) or not v:
            raise SchemaError(f"{kw} must be a non-empty array of schemas", pointer=_ptr_join(ptr, kw))
        return v

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
                    disj.append([frozenset({absent}), frozenset({req, self.sub(dep, dptr, base)})])
                else:
                    raise SchemaError(f"bad {kw} entry", pointer=dptr)

    def _not_atom(self, atom: int, ptr: str, base: str) -> int:
        if atom == 0:
            return _FALSE
        if atom == _FALSE:
            return 0
        return self.index.synth(("not", atom), {"$lg_not": atom}, ptr, base)

    def _embed(self, atom: int) -> Any:
        """The schema value of an atom, for use inside a synthetic schema."""
        if atom == 0:
            return True
        if atom == _FALSE:
            return False
        return self.index.info[atom][0]

    def _types_atom(self, types: Iterable[str], ptr: str, base: str) -> int:
        ts = sorted(set(types))
        return self.index.synth(("types", *ts), {"$lg_types": ts}, ptr, base)

    def expand_not(
        self,
        d: dict[str, Any],
        ptr: str,
        base: str,
        stack: list[int],
        pure: list[int],
        disj: list[list[frozenset[int]]],
    ) -> None:
        """¬S as a disjunction: ¬(G1 ∧ G2 ∧ ...) = ¬G1 ∨ ¬G2 ∨ ... over independent keyword groups."""
        inner = d["$lg_not"]
        alts = self._negation(inner, ptr, base)
        if alts is None:
            return  # lenient: the negation was dropped (recorded)
        if not alts:
            stack.append(_FALSE)
        elif len(alts) == 1:
            stack.extend(alts[0])
        else:
            disj.append([frozenset(a) for a in alts])

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
        ("$lg_types",),
        ("$lg_not_enum",),
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
    # Keywords that make a schema more than a leaf (_leaf_key): every group above but the
    # scalar ones, where subschemas live, the synthetic negation and identifiers.
    _NOT_LEAF = (
        frozenset().union(*_GROUPS, _SCHEMA_CHILDREN, ("$lg_not", "$id", "id", "$anchor", "$dynamicAnchor"))
        - _LEAF_KEYWORDS
    )
    # Keywords that make a $ref schema more than an alias of its target (_alias_target).
    _NOT_ALIAS = (_NOT_LEAF - {"$ref"}) | _LEAF_KEYWORDS

    def _negation(self, inner: int, ptr: str, base: str) -> list[list[int]] | None:
        """Alternatives (each a conjunction of atoms) whose union is ¬inner; None if dropped."""
        s, sptr, sbase = self.schema_of(inner)
        if "$lg_not" in s:
            return [[s["$lg_not"]]]
        out: list[list[int]] = []
        synth = self.index.synth
        nt = self._types_atom
        for group in self._GROUPS:
            present = [k for k in group if k in s]
            if not present:
                continue
            kw = present[0]
            res = self._negate_group(s, sptr, sbase, group, ptr, base)
            if res is None:
                self.unsupported("not", f"cannot complement {kw!r} (at {_ptr_join(sptr, kw)})", ptr)
                return None
            out.extend(res)
        del synth, nt
        return out

    def _negate_group(
        self, s: dict[str, Any], sptr: str, sbase: str, group: tuple[str, ...], ptr: str, base: str
    ) -> list[list[int]] | None:
        """¬group as alternatives. A keyword that applies to one JSON type holds vacuously for
        the others, so its complement lies within its own type ("not required" is an object
        without the key; a string is never in it). Only "type", "const" and "enum" constrain
        every type, and only their complements reach into other types."""
        synth = self.index.synth
        key = id(s)
        kw = group[0]

        def sub(k: str, *more: str | int) -> int:
            return self.sub(s[k] if not more else _dig(s[k], more), _ptr_join(sptr, k, *more), sbase)

        if kw == "type":
            if "type" not in s:
                return []
            ts = _closure(_types_of(s, sptr))
            if s.get("nullable") is True:
                ts.add("null")
            return [[self._types_atom(_ALL_TYPES - ts, ptr, base)]] if _ALL_TYPES - ts else []
        if kw == "$lg_types":
            rest = _ALL_TYPES - set(s["$lg_types"])
            return [[self._types_atom(rest, ptr, base)]] if rest else []
        if kw in ("const", "enum"):
            vals = [s["const"]] if kw == "const" else s["enum"]
            if not isinstance(vals, list):
                raise SchemaError("enum must be an array", pointer=_ptr_join(sptr, "enum"))
            if not any(isinstance(v, (list, dict)) for v in vals):
                return [[synth(("ne", key, kw), {"$lg_not_enum": vals}, ptr, base)]]
            if kw == "const":
                return self._not_compound(vals[0], ptr, base)
            return self._not_enum_compound(vals, ptr, base)
        if kw == "$lg_not_enum":
            return [[synth(("e", key), {"enum": s["$lg_not_enum"]}, ptr, base)]]
        if kw == "required":
            req = s["required"]
            if not isinstance(req, list) or not all(isinstance(x, str) for x in req):
                raise SchemaError("required must be an array of strings", pointer=_ptr_join(sptr, "required"))
            if not req:
                return []
            return [[synth(("nreq", n), {"$lg_types": ["object"], "properties": {n: False}}, ptr, base)] for n in req]
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
                inside = synth(("nb", key, kw), {"$lg_types": ["integer", "fraction"], other: v}, ptr, base)
                return [[inside]]
            n = math.ceil(v) if kw.startswith("min") else math.floor(v)
            if kw.startswith("min"):
                if n <= 0:
                    return []
                inside = synth(("nb", key, kw), {"$lg_types": [ty], other: n - 1}, ptr, base)
            else:
                inside = synth(("nb", key, kw), {"$lg_types": [ty], other: n + 1}, ptr, base)
            return [[inside]]
        if kw == "properties":
            if "patternProperties" in s or s.get("additionalProperties", True) is not True:
                return None
            props = s.get("properties", {})
            if not isinstance(props, dict):
                raise SchemaError("properties must be an object", pointer=_ptr_join(sptr, "properties"))
            alts = []
            for k in props:
                a = self.sub(props[k], _ptr_join(sptr, "properties", k), sbase)
                if a == 0:
                    continue
                na = self._not_atom(a, ptr, base)
                alts.append(
                    [
                        synth(
                            ("nprop", key, k),
                            {"$lg_types": ["object"], "required": [k], "properties": {k: self._embed(na)}},
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
                    na = self._not_atom(sub(pkw, i), ptr, base)
                    if na != _FALSE:  # ¬true
                        shape = {
                            "$lg_types": ["array"],
                            "minItems": i + 1,
                            "prefixItems": [True] * i + [self._embed(na)],
                        }
                        alts.append([synth(("nprefix", key, i), shape, ptr, base)])
                return alts
            if a == 0:
                return []
            na = self._not_atom(a, ptr, base)
            return [[synth(("nitems", key), {"$lg_types": ["array"], "contains": self._embed(na)}, ptr, base)]]
        if kw == "contains":
            if "contains" not in s:
                return []
            cmin = _count_keyword(s, "minContains", sptr)
            cmax = _count_keyword(s, "maxContains", sptr)
            cmin = 1 if cmin is None else cmin
            contains = self._embed(sub("contains"))
            alts = []
            if cmin == 1:  # no item matches
                na = self._not_atom(sub("contains"), ptr, base)
                alts.append([synth(("ncont", key), {"$lg_types": ["array"], "items": self._embed(na)}, ptr, base)])
            elif cmin > 1:
                fewer = {"$lg_types": ["array"], "contains": contains, "minContains": 0, "maxContains": cmin - 1}
                alts.append([synth(("ncont<", key), fewer, ptr, base)])
            if cmax is not None:
                more = {"$lg_types": ["array"], "contains": contains, "minContains": cmax + 1}
                alts.append([synth(("ncont>", key), more, ptr, base)])
            return alts
        if kw == "if":
            if "if" not in s or ("then" not in s and "else" not in s):
                return []
            c = sub("if")
            alts = []
            if "then" in s and sub("then") != 0:
                alts.append([c, self._not_atom(sub("then"), ptr, base)])
            if "else" in s and sub("else") != 0:
                alts.append([self._not_atom(c, ptr, base), self._not_atom(sub("else"), ptr, base)])
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
                        shape = {"$lg_types": ["object"], "required": [name], "properties": {d: False}}
                        alts.append([synth(("ndep", name, d), shape, ptr, base)])
                elif kw != "dependentRequired" and isinstance(dep, (dict, bool)):
                    na = self._not_atom(sub(kw, name), ptr, base)
                    if na != _FALSE:
                        has = synth(("has", name), {"$lg_types": ["object"], "required": [name]}, ptr, base)
                        alts.append([has, na])
                else:
                    raise SchemaError(f"bad {kw} entry", pointer=_ptr_join(sptr, kw, name))
            return alts
        if kw == "$ref":
            t, tptr, tbase = self.index.resolve(s["$ref"], sbase, _ptr_join(sptr, "$ref"))
            return [[self._not_atom(self.sub(t, tptr, tbase), ptr, base)]]
        if kw == "allOf":
            lst = self._schema_list(s, "allOf", sptr)
            return [
                [self._not_atom(self.sub(x, _ptr_join(sptr, "allOf", i), sbase), ptr, base)] for i, x in enumerate(lst)
            ]
        if kw == "anyOf":
            lst = self._schema_list(s, "anyOf", sptr)
            return [
                [self._not_atom(self.sub(x, _ptr_join(sptr, "anyOf", i), sbase), ptr, base) for i, x in enumerate(lst)]
            ]
        if kw == "oneOf":
            lst = [
                self.sub(x, _ptr_join(sptr, "oneOf", i), sbase)
                for i, x in enumerate(self._schema_list(s, "oneOf", sptr))
            ]
            alts = [[self._not_atom(a, ptr, base) for a in lst]]  # none holds
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
        synth = self.index.synth
        vk = _json_key(v)
        if vk is None:
            return None
        if isinstance(v, list):
            ty, n = "array", len(v)
            alts = [] if n == 0 else [[synth(("ne<", ty, n), {"$lg_types": [ty], "maxItems": n - 1}, ptr, base)]]
            alts.append([synth(("ne>", ty, n), {"$lg_types": [ty], "minItems": n + 1}, ptr, base)])
            for i, x in enumerate(v):
                item = {"not": {"const": x}}
                shape = {"$lg_types": [ty], "minItems": i + 1, "prefixItems": [True] * i + [item]}
                alts.append([synth(("ne@", vk, i), shape, ptr, base)])
        else:
            ty, n = "object", len(v)
            alts = [[synth(("nreq", k), {"$lg_types": [ty], "properties": {k: False}}, ptr, base)] for k in v]
            # All of the keys and one more (with them required, minProperties counts exactly).
            extra = {"$lg_types": [ty], "required": list(v), "minProperties": n + 1}
            alts.append([synth(("ne>", ty, *sorted(v)), extra, ptr, base)])
            for k, x in v.items():
                shape = {"$lg_types": [ty], "required": [k], "properties": {k: {"not": {"const": x}}}}
                alts.append([synth(("ne@", vk, k), shape, ptr, base)])
        if len(alts) >= _MAX_BRANCHES:
            return None
        return [[self._types_atom(_ALL_TYPES - {ty}, ptr, base)], *alts]

    def _not_enum_compound(self, vals: list[Any], ptr: str, base: str) -> list[list[int]] | None:
        """¬enum with array or object values, split by type: scalars outside the scalar values,
        arrays unequal to every listed array (a conjunction of their ¬const), objects alike."""
        scalars = [v for v in vals if not isinstance(v, (list, dict))]
        kinds = {"array": list, "object": dict}
        scalar_types = sorted(_ALL_TYPES - set(kinds))
        skey = _json_key(scalars)
        if skey is None:
            return None
        out = [[self.index.synth(("ne", skey), {"$lg_types": scalar_types, "$lg_not_enum": scalars}, ptr, base)]]
        for ty, cls in kinds.items():
            conj = [self._types_atom([ty], ptr, base)]
            branches = 1
            for v in vals:
                if isinstance(v, cls):
                    alts = self._not_compound(v, ptr, base)
                    if alts is None:
                        return None
                    branches *= len(alts) - 1  # the other-type alternative dies under `ty`
                    const = self.index.synth(("const", _json_key(v)), {"const": v}, ptr, base)
                    conj.append(self._not_atom(const, ptr, base))
            if branches > _MAX_BRANCHES:
                return None
            out.append(conj)
        return out

    def _negatable(self, atom: int, depth: int = 0) -> bool:
        """Static check that _negation(atom) will not need an unsupported complement."""
        if atom in (0, _FALSE):
            return True
        if depth > 16:
            return False
        s, sptr, sbase = self.schema_of(atom)
        if "$lg_not" in s:
            return True
        for k in s:
            if k in _ANNOTATIONS or k in (
                "type",
                "nullable",
                "const",
                "enum",
                "required",
                "$lg_types",
                "$lg_not_enum",
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
                        self._negatable(self.sub(v, _ptr_join(sptr, k, n), sbase), depth + 1) for n, v in s[k].items()
                    ):
                        return False
                elif k in ("items", "prefixItems", "additionalItems"):
                    # As _negate_group: a prefix is complementable when nothing follows it.
                    pkw, rkw = (
                        ("items", "additionalItems") if isinstance(s.get("items"), list) else ("prefixItems", "items")
                    )
                    if k == pkw:
                        if s.get(rkw, True) is not True or not all(
                            self._negatable(self.sub(x, _ptr_join(sptr, k, i), sbase), depth + 1)
                            for i, x in enumerate(s[k])
                        ):
                            return False
                    elif k == rkw and pkw not in s:
                        if not self._negatable(self.sub(s[k], _ptr_join(sptr, k), sbase), depth + 1):
                            return False
                elif k == "contains":
                    if not self._negatable(self.sub(s[k], _ptr_join(sptr, k), sbase), depth + 1):
                        return False
                elif k == "if":
                    for part in ("if", "then", "else"):
                        if part in s and not self._negatable(
                            self.sub(s[part], _ptr_join(sptr, part), sbase), depth + 1
                        ):
                            return False
                elif k in ("allOf", "anyOf", "oneOf"):
                    if not isinstance(s[k], list) or not all(
                        self._negatable(self.sub(x, _ptr_join(sptr, k, i), sbase), depth + 1)
                        for i, x in enumerate(s[k])
                    ):
                        return False
                elif k == "$ref":
                    t, tptr, tbase = self.index.resolve(s["$ref"], sbase, _ptr_join(sptr, "$ref"))
                    if not self._negatable(self.sub(t, tptr, tbase), depth + 1):
                        return False
                elif k == "uniqueItems":
                    if s[k] is True:
                        return False
                elif k in ("dependentSchemas", "dependencies"):
                    if not isinstance(s[k], dict) or not all(
                        self._negatable(self.sub(v, _ptr_join(sptr, k, n), sbase), depth + 1)
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

    # -- oneOf disjointness -------------------------------------------------------------------

    def _pairwise_disjoint(self, alts: list[frozenset[int]]) -> bool:
        # Nested oneOf inside a branch re-enters here through expand(): bound the depth.
        self._disjoint_depth = getattr(self, "_disjoint_depth", 0) + 1
        try:
            if self._disjoint_depth > 16:
                return False
            return self._pairwise_disjoint_inner(alts)
        finally:
            self._disjoint_depth -= 1

    def _pairwise_disjoint_inner(self, alts: list[frozenset[int]]) -> bool:
        facts = [self.approx_facts(a) for a in alts]
        for i in range(len(facts)):
            for j in range(i + 1, len(facts)):
                if not self._disjoint(facts[i], facts[j]):
                    return False
        return True

    def approx_facts(self, atoms: frozenset[int]) -> _Facts | None:
        """Facts of the pure part only: an over-approximation of the language (None: empty).
        Memoized (a oneOf's disjointness asks again for every pair and every required key);
        callers only read the facts."""
        if atoms in self.approx_memo:
            return self.approx_memo[atoms]
        exp = self.expand(atoms)
        facts = None if exp is None else self.merge(exp[0])
        self.approx_memo[atoms] = facts
        return facts

    def _disjoint(self, a: _Facts | None, b: _Facts | None) -> bool:
        """Provably no common instance (facts over-approximate, so True is always sound)."""
        if a is None or b is None:
            return True
        return all(self._disjoint_on(a, b, t) for t in a.types & b.types)

    def _disjoint_on(self, a: _Facts, b: _Facts, t: str) -> bool:
        for f, g in ((a, b), (b, a)):
            if f.enum is not None:
                vals = [v for v in f.enum if _json_type(v) == t]
                try:
                    if not any(self.check(v, g, 0) for v in vals):
                        return True
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

    # -- merge ---------------------------------------------------------------------------------

    def merge(self, pure: list[int]) -> _Facts:
        f = _Facts()
        for a in pure:
            d, ptr, base = self.schema_of(a)
            self._merge_one(f, d, ptr, base)
        return f

    def _contradiction(self, f: _Facts, ptr: str, msg: str) -> None:
        if f.empty_reason is None:
            f.empty_reason = (ptr or self.where, msg)

    def _merge_one(self, f: _Facts, d: dict[str, Any], ptr: str, base: str) -> None:
        _narrow_types(f.types, d, ptr)
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
                self._contradiction(f, ptr, "no enum value is left")
        if "$lg_not_enum" in d:
            f.not_enum.extend(d["$lg_not_enum"])
        # Most schema objects hold a few keywords: skip the groups they have none of.
        keys = d.keys()
        if not keys.isdisjoint(_NUMBER_KEYWORDS):
            self._merge_numbers(f, d, ptr)
        if not keys.isdisjoint(_STRING_KEYWORDS):
            self._merge_strings(f, d, ptr)
        if not keys.isdisjoint(_OBJECT_KEYWORDS):
            self._merge_objects(f, d, ptr, base)
        if not keys.isdisjoint(_ARRAY_KEYWORDS):
            self._merge_arrays(f, d, ptr, base)

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

    def _merge_strings(self, f: _Facts, d: dict[str, Any], ptr: str) -> None:
        cv = _count_keyword(d, "minLength", ptr)
        if cv is not None:
            f.min_len = max(f.min_len, cv)
        cv = _count_keyword(d, "maxLength", ptr)
        if cv is not None:
            f.max_len = cv if f.max_len is None else min(f.max_len, cv)
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
                self.unsupported("format", f"format {fmt!r} is not lowered", _ptr_join(ptr, "format"))

    def _merge_objects(self, f: _Facts, d: dict[str, Any], ptr: str, base: str) -> None:
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
                    props={k: self.sub(s, _ptr_join(ptr, "properties", k), base) for k, s in props.items()},
                    patterns=[
                        (
                            p,
                            self.sub(s, _ptr_join(ptr, "patternProperties", p), base),
                            _ptr_join(ptr, "patternProperties", p),
                        )
                        for p, s in pats.items()
                    ],
                    additional=None if addl is None else self.sub(addl, _ptr_join(ptr, "additionalProperties"), base),
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
            f.names.append(self.sub(d["propertyNames"], _ptr_join(ptr, "propertyNames"), base))
        cv = _count_keyword(d, "minProperties", ptr)
        if cv is not None and cv > f.min_props:
            f.min_props, f.min_props_ptr = cv, _ptr_join(ptr, "minProperties")
        cv = _count_keyword(d, "maxProperties", ptr)
        if cv is not None:
            f.max_props = cv if f.max_props is None else min(f.max_props, cv)
        for kw in ("unevaluatedProperties", "unevaluatedItems"):
            if kw in d and d[kw] is not True:
                self.unsupported(kw, "unevaluated* keywords are not lowered", _ptr_join(ptr, kw))

    def _merge_arrays(self, f: _Facts, d: dict[str, Any], ptr: str, base: str) -> None:
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
                    prefix=[self.sub(s, _ptr_join(ptr, pkw, i), base) for i, s in enumerate(prefix or [])],
                    items=None if items is None else self.sub(items, _ptr_join(ptr, ikw), base),
                )
            )
        cv = _count_keyword(d, "minItems", ptr)
        if cv is not None:
            f.min_items = max(f.min_items, cv)
        cv = _count_keyword(d, "maxItems", ptr)
        if cv is not None:
            f.max_items = cv if f.max_items is None else min(f.max_items, cv)
        if "contains" in d:
            cmin = _count_keyword(d, "minContains", ptr)
            cmax = _count_keyword(d, "maxContains", ptr)
            f.contains.append(
                (
                    self.sub(d["contains"], _ptr_join(ptr, "contains"), base),
                    1 if cmin is None else cmin,
                    cmax,
                    _ptr_join(ptr, "contains"),
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

    # -- object keys ---------------------------------------------------------------------------

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
                if self._py_search(p, key, pptr):
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

    def _py_search(self, pattern: str, s: str, ptr: str) -> bool:
        """Decides a pattern on a known string with Python ``re`` -- only where ECMA and Python
        agree: an ASCII subject without line breaks (``$``/``.`` differ around newlines), ASCII
        classes, no Python-only syntax (``{,n}``, ``\\A``, ``\\Z``)."""
        if not s.isascii() or "\n" in s or "\r" in s or re.search(r"\{,|\\[AZ]", pattern):
            self.unsupported("pattern", f"cannot decide pattern {pattern!r} on the name {s!r}", ptr)
            return True
        try:
            return re.search(pattern, s, re.ASCII) is not None
        except (re.error, RecursionError):
            self.unsupported("pattern", f"pattern {pattern!r} cannot be evaluated on {s!r}", ptr)
            return True

    # -- value check (enum filtering) -----------------------------------------------------------
    # The schema's own semantics, never `strict`: checks also decide negated and exactly-one
    # positions, where narrowing a schema would widen the whole. Strict narrows emission only.

    def check_atoms(self, value: Any, atoms: frozenset[int], depth: int) -> bool:
        if depth > self.limits.max_nesting:
            raise LimitExceeded("max_nesting", self.limits.max_nesting, "enum value nesting")
        exp = self.expand(atoms)
        if exp is None:
            return False
        pure, disj = exp
        if not self.check(value, self.merge(pure), depth):
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
                if not self._py_search(p, value, pptr):
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
            for atom, cmin, cmax, _ in f.contains:
                k = sum(1 for item in value if self.check_atoms(item, frozenset({atom}), depth + 1))
                if k < cmin or (cmax is not None and k > cmax):
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

    # -- driver ----------------------------------------------------------------------------------

    def run(self, check_empty: bool = True) -> Grammar:
        root_atom = self.index.atom(self.index.root, "", _DEFAULT_BASE)
        if root_atom == _FALSE:
            raise SchemaError("empty language: the schema is false", pointer="", code="schema-empty")
        self.rules["root"] = EMPTY
        body = self.atoms_ref([root_atom])
        while self.work:
            atoms, name = self.work.pop()
            self.rules[name] = self.lower_set(atoms)
        self.rules["root"] = body
        if check_empty:
            self._check_productive()
        return Grammar(dict(self.rules))

    def _check_productive(self) -> None:
        productive: set[str] = set()
        users: dict[str, list[str]] = {}
        for name, node in self.rules.items():
            for ref in references(node):
                users.setdefault(ref, []).append(name)
        queue = collections.deque(self.rules)
        while queue:  # re-evaluate a rule only when one of its references became productive
            name = queue.popleft()
            if name in productive or not _productive(self.rules[name], productive):
                continue
            productive.add(name)
            queue.extend(u for u in users.get(name, ()) if u not in productive)
        if "root" not in productive:
            ptr, msg = self.empty_reasons[0] if self.empty_reasons else ("", "no JSON value satisfies the schema")
            raise SchemaError(f"empty language: {msg}", pointer=ptr, code="schema-empty")

    def lower_set(self, atoms: frozenset[int]) -> Node:
        exp = self.expand(atoms)
        if exp is None:
            return _EMPTY_LANG
        pure, disj = exp
        if disj:
            # Alternatives whose own type keywords exclude the context's types die (negations
            # make many: "not minimum" is a number below it, useless under type: string):
            # dropped before distribution, and so are choices whose alternatives' types are
            # disjoint, not lowered to empty sets one by one.
            types = self._declared_types(pure)
            typed = [[(alt, types & self._branch_types(alt)) for alt in alts] for alts in disj]
            typed = [[(alt, ts) for alt, ts in alts if ts] for alts in typed]
            if not all(typed):
                return _EMPTY_LANG
            disj = [[alt for alt, _ in alts] for alts in typed]
            total = 1
            for alts in disj:
                total *= len(alts)
            if total > _MAX_BRANCHES:
                ptr = self.schema_of(pure[0])[1] if pure else ""
                self.unsupported("anyOf", f"{total} combined branches exceed {_MAX_BRANCHES}", ptr)
                disj = []
        if disj:
            # Distribute: one branch set per choice. The pure atoms are re-expanded in each branch
            # without their disjunctions: wrap them as "pure-only" synthetic conjuncts.
            pure_atoms = [self._pure_only(a) for a in pure]
            choices: list[tuple[frozenset[int], set[str]]] = [(frozenset(pure_atoms), types)]
            for alts_types in typed:
                choices = [(c | alt, ts & ats) for c, ts in choices for alt, ats in alts_types if ts & ats]
            combos = [c for c, _ in choices]
            if types <= {"object"}:
                # Objects only: a choice that requires a key another forbids is empty
                # (dependencies and their negations make many; each cost a lowering).
                # (Last choice first: its reason is the one an empty schema reports, as when
                # the work stack lowered it first.)
                combos = [c for c in reversed(combos) if not self._requires_forbidden(c)][::-1]
            return _alt(self.atoms_ref(c) for c in combos)
        self.where = self.schema_of(pure[0])[1] if pure else ""
        f = self.merge(pure)
        node = self.emit(f)
        if _is_empty(node) and f.empty_reason is not None:
            self.empty_reasons.append(f.empty_reason)
        return node

    def _branch_types(self, alt: frozenset[int]) -> set[str]:
        """The types a branch's conjuncts (its negations expanded, so "not minimum" is a number)
        allow; their own disjunctions are not looked into. Memoized: a branch recurs in every
        set that distributes it."""
        hit = self.branch_types.get(alt)
        if hit is None:
            exp = self.expand(alt)
            hit = self.branch_types[alt] = frozenset(self._declared_types(exp[0]) if exp is not None else ())
        return set(hit)

    def _declared_types(self, atoms: Iterable[int]) -> set[str]:
        """The types the "type" keywords (and synthetic type sets) of ``atoms`` themselves allow
        (empty with false among them)."""
        types = set(_ALL_TYPES)
        for a in atoms:
            if a == _FALSE:
                return set()
            if a > 0:
                d, ptr, _ = self.schema_of(a)
                _narrow_types(types, d, ptr)
        return types

    def _requires_forbidden(self, combo: frozenset[int]) -> bool:
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
            self.empty_reasons.append((forbidden[key], f"required property {key!r} is forbidden"))
        return bool(both)

    def _pure_only(self, atom: int) -> int:
        d, ptr, base = self.schema_of(atom)
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
        return self.index.synth(("pure", atom), {k: v for k, v in d.items() if k not in drop}, ptr, base)

    # -- emission ----------------------------------------------------------------------------------

    def emit(self, f: _Facts) -> Node:
        if f.enum is not None:
            return self.emit_enum(f)
        types = f.types
        alts: list[Node] = []
        excluded = f.not_enum
        if "null" in types and not any(v is None for v in excluded):
            alts.append(Literal(b"null"))
        if "boolean" in types:
            for lit, val in ((b"true", True), (b"false", False)):
                if not any(v is val for v in excluded):
                    alts.append(Literal(lit))
        if "fraction" in types or "integer" in types:
            alts.append(self.shared("num", f, self.emit_number))
        if "string" in types:
            alts.append(self.shared("str", f, self.emit_string))
        if "array" in types:
            alts.append(self.emit_array(f))
        if "object" in types:
            alts.append(self.emit_object(f))
        alts = [a for a in alts if not _is_empty(a)]
        return _alt(alts) if alts else _EMPTY_LANG

    def shared(self, kind: str, f: _Facts, build: Callable[[_Facts], Node]) -> Node:
        """One rule per distinct scalar constraint set: the same string/number constraints written
        in many places of a schema compile once."""
        try:
            excluded = json.dumps(f.not_enum, sort_keys=True) if f.not_enum else ""
        except (RecursionError, ValueError, TypeError):
            return build(f)
        if kind == "num":
            key: tuple[Any, ...] = (
                kind,
                "integer" in f.types,
                "fraction" in f.types,
                f.lo,
                f.lo_excl,
                f.hi,
                f.hi_excl,
                tuple(m for m, _ in f.multiple),
                excluded,
            )
        else:
            key = (
                kind,
                f.min_len,
                f.max_len,
                tuple(p for p, _ in f.patterns),
                tuple(x for x, _ in f.formats),
                excluded,
            )
        name = self.shared_memo.get(key)
        if name is None:
            node = build(f)
            if isinstance(node, Ref) or _is_empty(node):
                return node
            name = f"{kind}{len(self.shared_memo)}"
            self.shared_memo[key] = name
            self.rules[name] = node
        return Ref(name)

    def emit_enum(self, f: _Facts) -> Node:
        assert f.enum is not None
        alts: list[Node] = []
        for v in f.enum:
            if self.check(v, f, 0):
                alts.append(self.value_literal(v, 0))
        return _alt(alts) if alts else _EMPTY_LANG

    def value_literal(self, v: Any, depth: int) -> Node:
        """Exactly the JSON value ``v`` under the whitespace policy (keys in ``v``'s order)."""
        if depth > self.limits.max_nesting:
            raise LimitExceeded("max_nesting", self.limits.max_nesting, "enum/const value nesting")
        if isinstance(v, dict):
            if not v:
                return _seq([Literal(b"{"), self.ws(), Literal(b"}")])
            if 1 < len(v) <= 6:  # key order carries no meaning: accept any order
                members = [
                    (
                        k,
                        _seq(
                            [
                                self.string_literal(k),
                                self.ws(),
                                Literal(b":"),
                                self.ws(),
                                self.value_literal(x, depth + 1),
                            ]
                        ),
                        True,
                    )
                    for k, x in v.items()
                ]
                return self._object_any_order(members, None, 0, None, 0)
            parts: list[Node] = [Literal(b"{")]
            for i, (k, x) in enumerate(v.items()):
                if i:
                    parts += [self.ws(), Literal(b",")]
                parts += [
                    self.ws(),
                    self.string_literal(k),
                    self.ws(),
                    Literal(b":"),
                    self.ws(),
                    self.value_literal(x, depth + 1),
                ]
            return _seq([*parts, self.ws(), Literal(b"}")])
        if isinstance(v, list):
            if not v:
                return _seq([Literal(b"["), self.ws(), Literal(b"]")])
            parts = [Literal(b"[")]
            for i, x in enumerate(v):
                if i:
                    parts += [self.ws(), Literal(b",")]
                parts += [self.ws(), self.value_literal(x, depth + 1)]
            return _seq([*parts, self.ws(), Literal(b"]")])
        if isinstance(v, str):
            return self.string_literal(v)
        if isinstance(v, bool) or v is None:
            return Literal(json.dumps(v).encode())
        if isinstance(v, float) and not math.isfinite(v):
            return _EMPTY_LANG
        if (isinstance(v, float) and v.is_integer()) or isinstance(v, int):
            n = int(v)
            forms = {str(n)}
            if abs(n) <= 2**53 or float(n) == n:
                forms.add(json.dumps(float(n)))
            return _alt(Literal(s.encode()) for s in sorted(forms))
        return Literal(json.dumps(v).encode())

    def string_content_literal(self, s: str) -> Node:
        """The content (between the quotes) of the JSON string ``s``, both serializations."""
        if _plain_json_text(s):
            return Literal(s.encode())
        forms = {json.dumps(s)[1:-1]}
        try:
            forms.add(json.dumps(s, ensure_ascii=False)[1:-1].encode("utf-8").decode("utf-8"))
        except UnicodeEncodeError:
            pass
        return _alt(Literal(x.encode("utf-8")) for x in sorted(forms))

    def string_literal(self, s: str) -> Node:
        """The JSON string ``s``: its raw UTF-8 form and its ensure_ascii form."""
        if _plain_json_text(s):
            return Literal(b'"' + s.encode() + b'"')
        forms = {json.dumps(s)}
        try:
            forms.add(json.dumps(s, ensure_ascii=False).encode("utf-8").decode("utf-8"))
            raw_ok = True
        except UnicodeEncodeError:
            raw_ok = False
        out = []
        for form in sorted(forms):
            try:
                out.append(Literal(form.encode("utf-8")))
            except UnicodeEncodeError:
                continue
        del raw_ok
        return _alt(out)

    # numbers ------------------------------------------------------------------------------------

    def emit_number(self, f: _Facts) -> Node:
        integer_only = "fraction" not in f.types
        if "integer" not in f.types:
            return self.fraction_only(f)
        mult = [m for m, _ in f.multiple]
        if mult and not all(m.denominator == 1 for m in mult):
            nonint = [(m, p) for m, p in f.multiple if m.denominator != 1]
            if integer_only and all((1 / m).denominator == 1 for m, _ in nonint):
                mult = [m for m in mult if m.denominator == 1]  # 1/k integral: every integer is a multiple
            else:
                self.unsupported("multipleOf", "non-integral multipleOf (float semantics) is not lowered", nonint[0][1])
                mult = [m for m in mult if m.denominator == 1]
        if mult:
            integer_only = True
        modulus = 1
        for m in mult:
            modulus = modulus * int(m) // math.gcd(modulus, int(m))
        excluded = [_fraction(v) for v in f.not_enum if _json_type(v) in ("integer", "fraction")]
        if integer_only:
            lo = (
                None
                if f.lo is None
                else (math.floor(f.lo) + 1 if f.lo_excl and f.lo.denominator == 1 else math.ceil(f.lo))
            )
            hi = (
                None
                if f.hi is None
                else (math.ceil(f.hi) - 1 if f.hi_excl and f.hi.denominator == 1 else math.floor(f.hi))
            )
            if lo is not None and hi is not None and lo > hi:
                self._contradiction(f, "", "integer bounds leave no value")
                return _EMPTY_LANG
            # Beyond 1e30 the digit-range grammar would only grow; clamping tightens (sound).
            if hi is not None and hi > 10**30:
                hi = 10**30
            if lo is not None and lo < -(10**30):
                lo = -(10**30)
            return self.int_node(lo, hi, modulus, excluded, plain=f.lo is None and f.hi is None and not mult)
        return self.number_node(f, excluded)

    def fraction_only(self, f: _Facts) -> Node:
        """Non-integral numbers (``not: {type: integer}``): a non-zero fraction digit, no exponent, at
        most 15 significant digits (so the text cannot round to an integral double)."""
        if f.lo is not None or f.hi is not None or f.multiple or f.not_enum:
            self.unsupported("not", "non-integral numbers with bounds are not lowered", "")
            return _EMPTY_LANG

        def build() -> Node:
            digits = CharClass(((0x30, 0x39),))
            nz = CharClass(((0x31, 0x39),))
            alts: list[Node] = [_seq([Literal(b"0."), Repeat(digits, 0, 14), nz])]
            for k in range(1, 15):  # k integer digits, at most 15 - k fraction digits
                alts.append(_seq([nz, Repeat(digits, k - 1, k - 1), Literal(b"."), Repeat(digits, 0, 14 - k), nz]))
            return _seq([_opt(Literal(b"-")), _alt(alts)])

        return self.rule("fraction", build)

    def int_node(self, lo: int | None, hi: int | None, modulus: int, excluded: list[Fraction], plain: bool) -> Node:
        excl = sorted({int(x) for x in excluded if x.denominator == 1})
        if modulus == 1:

            def ranges() -> Node:
                pieces: list[Node] = []
                cur = lo
                for x in excl:
                    if (cur is None or x >= cur) and (hi is None or x <= hi):
                        if cur is None or cur <= x - 1:
                            pieces.append(_int_range(cur, x - 1))
                        cur = x + 1
                if cur is None or hi is None or cur <= hi:
                    pieces.append(_int_range(cur, hi))
                if (lo is None or lo <= 0) and (hi is None or hi >= 0) and 0 not in excl:
                    pieces.append(Literal(b"-0"))  # zero's other spelling (_int_range has one)
                return _alt(p for p in pieces if not _is_empty(p)) if pieces else _EMPTY_LANG

            if plain and not excl and self.integer_fraction_ok:
                # One rule, built on first use, for every plain integer of the schema.
                return self.rule(
                    "integer", lambda: _seq([ranges(), _opt(_seq([Literal(b"."), Repeat(Literal(b"0"), 1, None)]))])
                )
            return ranges()
        if lo is not None and hi is not None:
            first = -(-lo // modulus) * modulus
            count = max(0, (hi - first) // modulus + 1)  # not len(range): may exceed ssize_t
            if count > 4096:
                self.unsupported("multipleOf", f"{count} multiples in range (max 4096)", "")
                return _int_range(lo, hi)
            values = range(first, hi + 1, modulus)
            xs = {int(x) for x in excluded if x.denominator == 1}  # a fraction excludes no integer
            spelled = [str(v) for v in values if v not in xs] + (["-0"] if 0 in values and 0 not in xs else [])
            return _alt(Literal(s.encode()) for s in spelled) if spelled else _EMPTY_LANG
        if excl or modulus > 1000:
            self.unsupported("multipleOf", "open-ended multipleOf over 1000 or with exclusions", "")
            return _int_range(lo, hi)
        # Open range: finite part enumerated, the rest by a remainder automaton on the digits.
        return self.mod_int(lo, hi, modulus)

    def mod_int(self, lo: int | None, hi: int | None, k: int) -> Node:
        """Multiples of ``k`` in a one- or zero-sided range. Magnitudes with more digits than the
        finite bound are matched by a remainder automaton (rule per remainder), the rest listed."""
        name = f"mod{k}"
        if f"{name}_0" not in self.rules:
            digit = [Literal(str(i).encode()) for i in range(10)]
            for r in range(k):
                trans: list[Node] = [EMPTY] if r == 0 else []
                trans += [_seq([digit[d], Ref(f"{name}_{(r * 10 + d) % k}")]) for d in range(10)]
                self.rules[f"{name}_{r}"] = _alt(trans)

        def mags(a: int, b: int | None) -> Node:  # magnitudes in [a, b] that are multiples of k
            if b is not None:
                first = -(-a // k) * k
                if (b - first) // k + 1 > 4096:
                    self.unsupported("multipleOf", "too many multiples in range", "")
                    return _nonneg_range(a, b)
                vals = range(first, b + 1, k)
                return _alt(Literal(str(v).encode()) for v in vals) if vals else _EMPTY_LANG
            width = len(str(a))
            small = mags(a, 10**width - 1) if a < 10**width else _EMPTY_LANG
            big = (
                _alt(
                    _seq(
                        [
                            Literal(str(d).encode()),
                            Repeat(CharClass(((0x30, 0x39),)), width - 1, width - 1),
                        ]
                    )
                    for d in range(1, 2)
                )
                if False
                else None
            )
            del big
            # numbers with > width digits: first digit 1-9, then the automaton from its remainder
            firsts = _alt(_seq([Literal(str(d).encode()), self._mod_after(k, d, width)]) for d in range(1, 10))
            return _alt([small, firsts])

        alts: list[Node] = []
        if hi is None or hi >= 0:
            a = 0 if lo is None else max(lo, 0)
            alts.append(mags(a, hi))
        if lo is None or lo < 0:
            b = None if lo is None else -lo
            a = 1 if hi is None else max(1, -hi)
            if b is None or a <= b:
                alts.append(_seq([Literal(b"-"), mags(a, b)]))
        if (lo is None or lo <= 0) and (hi is None or hi >= 0):
            alts.append(Literal(b"-0"))
        return _alt([x for x in alts if not _is_empty(x)])

    def _mod_after(self, k: int, d: int, width: int) -> Node:
        """After a first digit ``d``: at least ``width`` more digits ending on remainder 0."""
        # Unroll `width` mandatory digits through remainder states, then the automaton rule.
        name = f"mod{k}_w{width}_r"

        def state(r: int, left: int) -> Node:
            rn = f"{name}{r}_{left}"
            if rn not in self.rules:
                self.rules[rn] = _EMPTY_LANG
                if left == 0:
                    self.rules[rn] = Ref(f"mod{k}_{r}")
                else:
                    self.rules[rn] = _alt(
                        _seq([Literal(str(x).encode()), state((r * 10 + x) % k, left - 1)]) for x in range(10)
                    )
            return Ref(rn)

        if width * k > 20000:
            raise LimitExceeded("max_automaton_states", self.limits.max_automaton_states, "multipleOf automaton")
        return state(d % k, width)

    def number_node(self, f: _Facts, excluded: list[Fraction] | None = None) -> Node:
        """Any JSON number; with bounds, exact decimal intervals (no exponent notation).

        Float semantics: validators compare the parsed double. Rounding is monotonic and every bound
        is a double, so ``decimal >= L`` implies ``double >= L``; an exclusive bound B becomes the
        inclusive bound nextafter(B), and an excluded value v splits the interval at
        nextafter(v, -inf) / nextafter(v, +inf)."""
        if f.lo is None and f.hi is None and not excluded:
            return self.value_rule("number")

        def as_double(v: Fraction, what: str) -> float | None:
            try:
                x = float(v)
            except OverflowError:
                x = math.inf
            if not math.isfinite(x) or Fraction(x) != v:
                self.unsupported(what, f"bound {v} is not a double; number comparison would round", "")
                return None
            return x

        lo: Fraction | None = None
        hi: Fraction | None = None
        if f.lo is not None:
            x = as_double(f.lo, "minimum")
            if x is None:
                return _EMPTY_LANG
            lo = _short_bound(math.nextafter(x, math.inf) if f.lo_excl else x, up=True)
        if f.hi is not None:
            x = as_double(f.hi, "maximum")
            if x is None:
                return _EMPTY_LANG
            hi = _short_bound(math.nextafter(x, -math.inf) if f.hi_excl else x, up=False)
        intervals: list[tuple[Fraction | None, Fraction | None]] = [(lo, hi)]
        for v in sorted(set(excluded or [])):
            x = as_double(v, "not")
            if x is None:
                return _EMPTY_LANG
            below = _short_bound(math.nextafter(x, -math.inf), up=False)
            above = _short_bound(math.nextafter(x, math.inf), up=True)
            nxt: list[tuple[Fraction | None, Fraction | None]] = []
            for a, b in intervals:
                if (a is not None and v < a) or (b is not None and v > b):
                    nxt.append((a, b))
                    continue
                nxt += [(a, below), (above, b)]
            intervals = nxt
        alts = []
        for a, b in intervals:
            if a is not None and b is not None and a > b:
                continue
            alts.append(self._decimal_interval(a, b))
        alts = [x for x in alts if not _is_empty(x)]
        if not alts:
            self._contradiction(f, "", "number bounds leave no value")
            return _EMPTY_LANG
        return _alt(alts)

    def _decimal_interval(self, lo: Fraction | None, hi: Fraction | None) -> Node:
        """Decimal texts (no exponent) whose exact value lies in [lo, hi] (None: open)."""
        alts: list[Node] = []
        if hi is None or hi >= 0:
            alts.append(self._magnitude(max(lo, Fraction(0)) if lo is not None else Fraction(0), hi))
        if lo is None or lo < 0:
            a = max(Fraction(0), -hi) if hi is not None else Fraction(0)
            b = -lo if lo is not None else None
            if b is None or a <= b:
                m = self._magnitude(a, b)
                if not _is_empty(m):
                    alts.append(_seq([Literal(b"-"), m]))
        alts = [x for x in alts if not _is_empty(x)]
        return _alt(alts) if alts else _EMPTY_LANG

    def _magnitude(self, a: Fraction, b: Fraction | None) -> Node:
        """Unsigned decimal texts ``I[.F]`` with exact value in [a, b]."""
        ai, af = _dec_parts(a)
        digits = CharClass(((0x30, 0x39),))
        frac_any = _opt(_seq([Literal(b"."), Repeat(digits, 1, None)]))

        def lit(n: int) -> Node:
            return Literal(str(n).encode())

        if b is None:
            return _alt([_seq([_nonneg_range(ai + 1, None), frac_any]), _seq([lit(ai), self._frac(af, None)])])
        bi, bf = _dec_parts(b)
        if ai == bi:
            return _seq([lit(ai), self._frac(af, bf)])
        alts = [_seq([lit(ai), self._frac(af, None)]), _seq([lit(bi), self._frac(None, bf)])]
        if ai + 1 <= bi - 1:
            alts.insert(0, _seq([_nonneg_range(ai + 1, bi - 1), frac_any]))
        return _alt(alts)

    def _frac(self, t_lo: str | None, t_hi: str | None) -> Node:
        """Optional ``.digits`` whose digit string s satisfies t_lo <= s <= t_hi, comparing as
        decimal fractions (right-padded with zeros). One rule per automaton state."""
        if len(t_lo or "") > 1200 or len(t_hi or "") > 1200:
            raise LimitExceeded("max_repeat", self.limits.max_repeat, "bound with too many decimal digits")
        digits = CharClass(((0x30, 0x39),))
        base = f"fr{len(self.rules)}_"
        lo_s, hi_s = t_lo or "", t_hi or ""

        def state(j: int, tl: bool, th: bool) -> Node:
            tl = tl and j < len(lo_s)
            if not tl and not th:
                return Repeat(digits, 0, None)
            if not tl and th and j >= len(hi_s):
                return Repeat(Literal(b"0"), 0, None)
            name = f"{base}{j}_{int(tl)}_{int(th)}"
            if name in self.rules:
                return Ref(name)
            self.rules[name] = _EMPTY_LANG
            self.rules[name] = _alt(state_alts(j, tl, th, with_empty=True)) or _EMPTY_LANG
            return Ref(name)

        def state_alts(j: int, tl: bool, th: bool, with_empty: bool) -> list[Node]:
            tl = tl and j < len(lo_s)
            out: list[Node] = []
            if with_empty and (not tl or not lo_s[j:].strip("0")):
                out.append(EMPTY)
            dlo = int(lo_s[j]) if tl else 0
            dhi = (int(hi_s[j]) if j < len(hi_s) else 0) if th else 9
            if dlo > dhi:
                return out
            groups: dict[tuple[bool, bool], list[int]] = {}
            for d in range(dlo, dhi + 1):
                key = (tl and d == dlo, th and d == dhi)
                groups.setdefault(key, []).append(d)
            for (tl2, th2), ds in groups.items():
                cls = CharClass(((0x30 + ds[0], 0x30 + ds[-1]),)) if len(ds) > 1 else Literal(str(ds[0]).encode())
                out.append(_seq([cls, state(j + 1, tl2, th2)]))
            return out

        tl0, th0 = t_lo is not None, t_hi is not None
        if not tl0 and not th0:
            return _opt(_seq([Literal(b"."), Repeat(digits, 1, None)]))
        tl_eff = tl0 and len(lo_s) > 0
        nonempty = (
            state_alts(0, tl_eff, th0, with_empty=False)
            if (tl_eff or th0)
            else [_seq([digits, Repeat(digits, 0, None)])]
        )
        empty_ok = not lo_s.strip("0")
        parts: list[Node] = [EMPTY] if empty_ok else []
        if nonempty:
            parts.append(_seq([Literal(b"."), _alt(nonempty)]))
        return _alt(parts) if parts else _EMPTY_LANG

    # strings --------------------------------------------------------------------------------

    def bounded(self, item: Ref, lo: int, hi: int | None) -> Node:
        """``item{lo,hi}``. Up to _UNROLLED_MAX, plain repetition: ``item`` is a rule, so each
        copy costs two automaton states, and the parser steps through one configuration per
        position (which the mask walk's chain shortcut handles well). Up to _BLOCKS_MAX blocks,
        a block decomposition: whole blocks of _BLOCK items (one shared rule), then a partial
        block, so the automaton holds O(n / _BLOCK + _BLOCK) states and a position has two or
        three parse heads (in a block, in the partial block). Larger bounds use a binary
        decomposition (rules item^(2^j)) so the automaton stays O(log n); it is unambiguous
        as a parse, but a prefix fits several decompositions, so masks there cost more."""
        small = min(_UNROLLED_MAX, self.limits.max_repeat)
        if lo <= small and (hi is None or hi <= small):
            return Repeat(item, lo, hi)
        most = max(lo, hi - lo if hi is not None else 0)
        if most // _BLOCK <= _BLOCKS_MAX and max(_BLOCK, most // _BLOCK) <= self.limits.max_repeat:
            block = self.rule(f"{item.name}_block", lambda: Repeat(item, _BLOCK, _BLOCK))

            def blocks_then(n: int, upto: bool) -> Node:
                """``item{n}`` (``item{0,n}`` when ``upto``) in blocks."""
                if n <= small:
                    return Repeat(item, 0 if upto else n, n)
                q, r = divmod(n, _BLOCK)
                if not upto:
                    return _seq([Repeat(block, q, q), Repeat(item, r, r)])
                # Fewer than q blocks then a partial block, or q blocks then at most r items:
                # one parse per length (a partial block is shorter than a block).
                return _alt(
                    [
                        _seq([Repeat(block, 0, q - 1), Repeat(item, 0, _BLOCK - 1)]),
                        _seq([Repeat(block, q, q), Repeat(item, 0, r)]),
                    ]
                )

            tail = Repeat(item, 0, None) if hi is None else blocks_then(hi - lo, True)
            return _seq([blocks_then(lo, False), tail])
        if lo > 1 << 31:
            raise LimitExceeded("max_repeat", self.limits.max_repeat, f"minimum length {lo}")
        if hi is not None and hi > 1 << 31:
            hi = 1 << 31  # tightening (sound): longer strings cannot be generated anyway

        def power(j: int) -> Node:
            if (1 << j) <= 64:
                return Repeat(item, 1 << j, 1 << j)
            name = f"{item.name}_x{1 << j}"
            if name not in self.rules:
                self.rules[name] = _seq([power(j - 1), power(j - 1)])
            return Ref(name)

        def exact(n: int) -> Node:
            return _seq(power(j) for j in range(n.bit_length() - 1, -1, -1) if n >> j & 1)

        def upto(m: int) -> Node:
            if m == 0:
                return EMPTY
            k = m.bit_length() - 1
            below = _seq(_opt(power(j)) for j in range(k - 1, -1, -1))
            return _alt([below, _seq([power(k), upto(m - (1 << k))])])

        head = exact(lo) if lo > 64 else Repeat(item, lo, lo)
        tail = Repeat(item, 0, None) if hi is None else upto(hi - lo)
        return _seq([head, tail])

    def char_rule(self) -> Ref:
        """One JSON string character unit: raw, short escape, \\uXXXX or a surrogate pair.
        The rule holds the alternatives itself: an alias rule in between would hide from the
        core that a call reads exactly one character (Automaton::plain_capacity)."""
        return self.value_rule("char")

    def string_tail(self) -> Ref:
        """Any JSON string content (a rule: referenced from many places, one loop)."""
        return self.value_rule("string_tail")

    def any_string(self) -> Ref:
        return self.value_rule("string")

    def encode_class(self, cc: CharClass) -> Node:
        hit = self.enc_memo.get(cc)
        if hit is not None:
            return hit
        ranges = _positive_ranges(cc)
        if ranges == [(0, 0x10FFFF)]:
            node: Node = self.char_rule()
        elif ranges and ranges[-1][0] <= 0x80 and ranges[-1][1] == 0x10FFFF:
            # Every non-ASCII character is in the class (a key-complement position excludes a
            # few ASCII characters): its \u escapes above 0x7F are one shared rule, not a copy
            # per class (they were most of a schema's grammar).
            node = _encoded_class_ascii(tuple(_intersect(ranges, 0, 0x7F)), self.non_ascii_escape())
        else:
            node = _encoded_class(cc)
        if isinstance(node, Alt):  # raw characters | escapes: a rule, not a copy per use
            name = f"cls{len(self.enc_memo)}"
            self.rules[name] = node
            node = Ref(name)
        self.enc_memo[cc] = node
        return node

    def non_ascii_escape(self) -> Ref:
        """What follows ``\\u`` in the escape of any character above 0x7F: four hex digits
        (0080-D7FF, E000-FFFF) or a surrogate pair."""
        return self.rule("u_non_ascii", _non_ascii_escape_tail)

    def encode_leaf(self, n: Node) -> Node:
        """One code-point-level leaf -> its JSON string spellings (other nodes unchanged)."""
        if isinstance(n, CharClass):
            return self.encode_class(n)
        if isinstance(n, Literal):
            return _encoded_literal(n.value)
        if isinstance(n, ByteClass):
            raise GrammarError("byte classes cannot appear in a string pattern", code="schema-internal")
        return n

    def encode(self, node: Node) -> Node:
        """Code-point-level node -> JSON string content bytes (every encoding decodes back)."""
        return _map_leaves(node, self.encode_leaf, self.limits)

    def format_node(self, fmt: str) -> Node:
        hit = self.format_memo.get(fmt)
        if hit is None:
            hit, _ = regex_to_node(_FORMATS[fmt], self.limits)
            self.format_memo[fmt] = hit
        return hit

    def emit_string(self, f: _Facts) -> Node:
        if not (f.patterns or f.formats or f.min_len or f.max_len is not None):
            if not any(isinstance(v, str) for v in f.not_enum):
                return self.any_string()
        body = self.string_contents(f)
        return _EMPTY_LANG if _is_empty(body) else _seq([Literal(b'"'), body, Literal(b'"')])

    def string_contents(self, f: _Facts) -> Node:
        """The encoded text between a string's quotes (a key's, too) under the string facts."""
        if f.max_len is not None and f.min_len > f.max_len:
            self._contradiction(f, "", "minLength > maxLength")
            return _EMPTY_LANG
        contents: list[tuple[Node, str, str]] = []
        for p, ptr in f.patterns:
            try:
                node, _ = regex_to_node(p, self.limits, anchored_search=True)
            except GrammarError as e:
                self.pattern_not_lowered("pattern", e, ptr)
                continue
            contents.append((node, "pattern", ptr))
        for fmt, ptr in f.formats:
            contents.append((self.format_node(fmt), "format", ptr))
        excluded = [v for v in f.not_enum if isinstance(v, str)]
        if not contents:
            if excluded:
                excluded = [v for v in excluded if f.min_len <= len(v) and (f.max_len is None or len(v) <= f.max_len)]
            if excluded:
                if f.min_len or f.max_len is not None:
                    self.unsupported("not", "excluding strings under length bounds is not lowered", "")
                return StringExcept(tuple(sorted(set(excluded))), self.string_tail())
            if f.min_len == 0 and f.max_len is None:
                return Repeat(self.char_rule(), 0, None)
            return self.bounded(self.char_rule(), f.min_len, f.max_len)
        node, kw, ptr = contents[0]
        encoded: Node | None = None
        if len(contents) > 1:
            nodes = [c[0] for c in contents]
            if f.min_len == 0 and f.max_len is None:
                encoded = self.intersect_by_derivatives(nodes)
            if encoded is None:
                encoded = self.nfa_with_length(nodes, f.min_len, f.max_len)
            if encoded is None:
                _, kw2, ptr2 = contents[1]
                self.unsupported(kw2, "several patterns/formats on one string: intersection too large", ptr2)
        if encoded is None and (f.min_len > 0 or f.max_len is not None):
            restricted = _restrict_length(node, f.min_len, f.max_len, self.limits)
            if restricted is None:
                encoded = self.nfa_with_length([node], f.min_len, f.max_len)
            if restricted is None and encoded is None:
                self.unsupported(
                    "maxLength" if f.max_len is not None else "minLength",
                    f"length bounds combined with this {kw} are not lowered",
                    ptr,
                )
            elif restricted is not None:
                node = restricted
        for v in excluded:
            # An excluded string the grammar cannot produce anyway needs no exclusion.
            matches = all(self._py_search(p, v, pp) for p, pp in f.patterns) and all(
                re.fullmatch(_FORMATS[x], v) is not None for x, _ in f.formats
            )
            if matches:
                self.unsupported("not", "excluding strings matched by a pattern/format is not lowered", ptr)
                break
        if _is_empty(node) or _is_empty(encoded):
            self._contradiction(f, ptr, f"{kw} and length bounds leave no string")
            return _EMPTY_LANG
        return self.encode(node) if encoded is None else encoded

    def intersect_by_derivatives(self, nodes: list[Node]) -> Node | None:
        """Encoded content of ``nodes[0] ∩ nodes[1] ∩ ...`` (grammar/derivatives.py): one rule per
        reachable tuple of derivatives, its moves one encoded class per distinct next tuple; a
        tuple where all sides but one accept anything is that side's derivative, encoded as it
        is. ``^https?://`` ∩ uri is eight rules and the rest of uri, where the automaton product
        builds a rule per state of uri's (740, a third of that schema's compile). None past
        ``_DERIVATIVE_TUPLES`` tuples: the caller falls back to the product."""
        base = f"nd{len(self.rules)}_"
        walk = _Derivatives()
        try:
            start = tuple(walk.intern(n) for n in nodes)
        except LimitExceeded:
            return None
        # Keyed by the ids of the derivatives: the walk hash-conses them, and keeps them alive.
        first = base + "0"
        names: dict[tuple[int, ...], str] = {tuple(map(id, start)): first}
        work = [start]
        rules: dict[str, Node] = {}
        try:
            while work:
                state = work.pop()
                here = names[tuple(map(id, state))]
                rest = [n for n in state if n != _ANY_STRING]
                if len(rest) <= 1:
                    rules[here] = self.encode(rest[0] if rest else _ANY_STRING)
                    continue
                alts: list[Node] = [EMPTY] if all(walk.nullable(n) for n in state) else []
                points = {0, 0xD800, 0xE000, MAX_CODE_POINT + 1}  # (surrogates: no derivative)
                for n in state:
                    walk.first_boundaries(n, points)
                cuts = sorted(points)
                moves: dict[tuple[int, ...], tuple[tuple[Node, ...], list[tuple[int, int]]]] = {}
                for lo, nxt in itertools.pairwise(cuts):
                    if lo == 0xD800:
                        continue
                    d = tuple(walk.derivative(n, lo) for n in state)
                    if _NOTHING in d:
                        continue
                    key = tuple(map(id, d))
                    if key in moves:
                        moves[key][1].append((lo, nxt - 1))
                    else:
                        moves[key] = (d, [(lo, nxt - 1)])
                for key, (d, ranges) in moves.items():
                    name = names.get(key)
                    if name is None:
                        if len(names) >= _DERIVATIVE_TUPLES:
                            return None
                        name = names[key] = f"{base}{len(names)}"
                        work.append(d)
                    alts.append(_seq([self.encode_class(CharClass(tuple(ranges))), Ref(name)]))
                rules[here] = _alt(alts) if alts else _EMPTY_LANG
        except LimitExceeded:
            return None  # nested too deep for derivatives: the product has its own bound
        self.rules.update(rules)
        return Ref(first)

    def nfa_with_length(self, nodes: list[Node], lo: int, hi: int | None) -> Node | None:
        """Encoded content of ``nodes[0] ∩ nodes[1] ∩ ...`` ∩ strings of [lo, hi] code points: the
        product of Thompson NFAs of the nodes with a length counter, one rule per reachable
        (states, length). None when the product would exceed a few thousand rules."""
        nfas = []
        for node in nodes:
            nfa = _Nfa.build(node, self.limits)
            if nfa is None:
                return None
            nfas.append(nfa)
        cap = hi if hi is not None else lo  # lengths above lo are equivalent when hi is open
        if len(nfas) == 1 and _length_product_size(nfas[0], hi, cap) > _NFA_PRODUCT_RULES:
            return None  # known too large before a rule is built (labels never meet empty here)
        base = f"nl{len(self.rules)}_"

        def name(qs: tuple[int, ...], k: int) -> str:
            return base + "_".join(map(str, qs)) + f"_{k}"

        start = tuple(n.start for n in nfas)
        made: set[tuple[tuple[int, ...], int]] = {(start, 0)}
        work = [(start, 0)]
        rules: dict[str, Node] = {}
        # Per state tuple: whether it accepts, and its moves (encoded class, target tuple). They do
        # not depend on the length, and one tuple recurs at up to hi + 1 lengths.
        moves_memo: dict[tuple[int, ...], tuple[bool, list[tuple[Node, tuple[int, ...]]]]] = {}

        def moves(qs: tuple[int, ...]) -> tuple[bool, list[tuple[Node, tuple[int, ...]]]] | None:
            """None when the product's moves from qs alone exceed the budget."""
            hit = moves_memo.get(qs)
            if hit is not None:
                return hit
            cls = [n.closure(q) for n, q in zip(nfas, qs, strict=True)]
            accepts = all(n.accept in c for n, c in zip(nfas, cls, strict=True))
            # moves of the product: a transition of every NFA, labels intersected
            combos: list[tuple[list[tuple[int, int]], tuple[int, ...]]] = [([(0, 0x10FFFF)], ())]
            for i, (n, c) in enumerate(zip(nfas, cls, strict=True)):
                nxt = []
                for ranges, targets in combos:
                    for x in sorted(c):
                        for lab, t in n.moves[x]:
                            inter = list(lab) if i == 0 else _intersect_ranges(ranges, list(lab))
                            if inter:
                                nxt.append((inter, (*targets, t)))
                combos = nxt
                if len(combos) > _NFA_PRODUCT_RULES:
                    return None
            out = moves_memo[qs] = (accepts, [(self.encode_class(CharClass(tuple(r))), t) for r, t in combos])
            return out

        while work:
            qs, k = work.pop()
            if len(made) > _NFA_PRODUCT_RULES:
                return None
            found = moves(qs)
            if found is None:
                return None
            accepts, edges = found
            alts: list[Node] = []
            if k >= lo and accepts:
                alts.append(EMPTY)
            if hi is None or k < hi:
                k2 = min(k + 1, cap) if hi is None else k + 1
                for label, targets in edges:
                    if (targets, k2) not in made:
                        made.add((targets, k2))
                        work.append((targets, k2))
                    alts.append(_seq([label, Ref(name(targets, k2))]))
            rules[name(qs, k)] = _alt(alts) if alts else _EMPTY_LANG
        self.rules.update(rules)
        return Ref(name(start, 0))

    # arrays ---------------------------------------------------------------------------------

    def emit_array(self, f: _Facts) -> Node:
        lo, hi = f.min_items, f.max_items
        prefix_len = max((len(p.prefix) for p in f.arrs), default=0)
        positions: list[frozenset[int] | None] = [self.position_atoms(f, i) for i in range(prefix_len)]
        rest = self.position_atoms(f, prefix_len)
        for i, atoms in enumerate(positions):
            if atoms is None:
                hi = i if hi is None else min(hi, i)
                positions = positions[:i]
                break
        if rest is None:
            hi = len(positions) if hi is None else min(hi, len(positions))
        if hi is not None and lo > hi:
            self._contradiction(f, "", "minItems > maxItems")
            return _EMPTY_LANG
        if f.unique is not None and (hi is None or hi > 1):
            domain = self._finite_domain(rest) if rest is not None and not positions and not f.contains else None
            if domain is not None:
                return self._unique_array(domain, lo, hi)
            self.unsupported("uniqueItems", "uniqueItems over arrays that may hold several items", f.unique)
        ws = self.ws()
        sep = self.comma()
        if f.contains:
            return self.emit_contains(f, positions, rest, lo, hi)
        # element nodes
        elems = [self.atoms_ref(a) for a in positions if a is not None]
        rest_node = self.atoms_ref(rest) if rest is not None else _EMPTY_LANG
        n_pre = len(elems)
        # tail after position n_pre (all rest items)
        if hi is not None and hi <= n_pre:
            tail: Node = EMPTY
        else:
            if hi is not None and hi - n_pre > self.limits.max_repeat:
                raise LimitExceeded("max_repeat", self.limits.max_repeat, f"maxItems {hi}")
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
                name = f"arr{len(self.rules)}"
                self.rules[name] = chain
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

    def _finite_domain(self, atoms: frozenset[int]) -> list[Any] | None:
        """The item values when the item schema allows at most 10 distinct values, else None."""
        exp = self.expand(atoms)
        if exp is None:
            return []
        pure, disj = exp
        if disj:
            return None
        f = self.merge(pure)
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

    def _unique_array(self, domain: list[Any], lo: int, hi: int | None) -> Node:
        """Arrays of distinct values from a finite domain: one rule per subset of used values (the
        subset's size is the item count)."""
        ws = self.ws()
        sep_ws = self.comma()
        lits = [self.value_literal(v, 0) for v in domain]
        base = f"uq{len(self.rules)}_"
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
            self.rules[f"{base}{mask}_{int(started)}"] = _alt(alts) if alts else _EMPTY_LANG
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
            return _EMPTY_LANG if any(c[1] > 0 for c in conts) else _seq([Literal(b"["), self.ws(), Literal(b"]")])
        if any(cmax is not None and cmax < cmin for _, cmin, cmax, _ in conts):
            return _EMPTY_LANG
        ptr = conts[0][3]
        caps = [cmin if cmax is None else cmax + 1 for _, cmin, cmax, _ in conts]
        need_n = hi if hi is not None else max(lo, len(positions))
        choices = 1 << len(conts)
        if math.prod(c + 1 for c in caps) * (need_n + 1) * choices > 20000 * 2:
            self.unsupported("contains", "counting state space too large", ptr)
            return self.emit_array(replace(f, contains=[]))
        ws = self.ws()
        sep = self.comma()
        base = f"ct{len(self.rules)}_"
        negated = [self._not_atom(atom, cptr, "") if cmax is not None else 0 for atom, _, cmax, cptr in conts]
        items: dict[tuple[int, int], Node] = {}

        def item(n: int, chosen: int) -> Node | None:
            """The item at position n matching exactly the contains in bit set ``chosen``."""
            at = positions[n] if n < len(positions) else rest
            if at is None:
                return None
            key = (min(n, len(positions)), chosen)
            if key not in items:
                picked = {conts[j][0] if chosen >> j & 1 else negated[j] for j in range(len(conts))}
                items[key] = self.atoms_ref(at | picked)
            return items[key]

        def name(cs: tuple[int, ...], n: int, started: bool) -> str:
            return f"{base}{'_'.join(map(str, cs))}_{n}_{int(started)}"

        for cs in itertools.product(*(range(c + 1) for c in caps)):
            for n in range(need_n + 1):
                for s in (False, True):
                    alts: list[Node] = []
                    if n >= lo and all(
                        c >= cmin and (cmax is None or c <= cmax)
                        for c, (_, cmin, cmax, _) in zip(cs, conts, strict=True)
                    ):
                        alts.append(_seq([ws, Literal(b"]")]))
                    if hi is None or n < hi:
                        lead = sep if s else ws
                        for chosen in range(choices - 1, -1, -1):
                            bumped = [c + (chosen >> j & 1) for j, c in enumerate(cs)]
                            if any(
                                b > cmax for b, (_, _, cmax, _) in zip(bumped, conts, strict=True) if cmax is not None
                            ):
                                continue
                            node = item(n, chosen)
                            if node is None:
                                break
                            nxt = tuple(min(b, cap) for b, cap in zip(bumped, caps, strict=True))
                            alts.append(_seq([lead, node, Ref(name(nxt, min(n + 1, need_n), True))]))
                    self.rules[name(cs, n, s)] = _alt(alts) if alts else _EMPTY_LANG
        return _seq([Literal(b"["), Ref(name((0,) * len(conts), 0, False))])

    # objects --------------------------------------------------------------------------------

    def emit_object(self, f: _Facts) -> Node:
        ws = self.ws()
        # Known names in schema order, then required-only names. When one "properties" object
        # lists every known name (a branch adding to its parent's, say), its order is the
        # schema order, whichever part the merge met first.
        names: set[str] = {k for part in f.objs for k in part.order}
        parts = sorted(f.objs, key=lambda p: not names <= set(p.props))
        # (Dicts as ordered sets: objects of thousands of properties are linear to lower.)
        order: dict[str, None] = {}
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
            atoms = self.key_atoms(f, k)
            if atoms is not None and names_atoms and not self.check_atoms(k, names_atoms, 0):
                atoms = None
            if atoms is None:
                if k in required_names:
                    self._contradiction(f, "", f"required property {k!r} is forbidden")
                    return _EMPTY_LANG
                continue
            value = self.atoms_ref(atoms)
            if _is_empty(value):
                if k in required_names:
                    return _EMPTY_LANG
                continue
            key = self.string_literal(k)
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
                oname = self.other_rules[other_key] = f"other{len(self.rules)}"
                self.rules[oname] = _alt(others)
            other = Ref(oname)
        lo, hi = f.min_props, f.max_props
        if hi is not None and lo > hi:
            self._contradiction(f, "", "minProperties > maxProperties")
            return _EMPTY_LANG
        n_req = sum(1 for _, _, r in members if r)
        if hi is not None and n_req > hi:
            self._contradiction(f, "", "more required properties than maxProperties")
            return _EMPTY_LANG
        # Other keys may repeat a name, and the grammar counts occurrences: an upper bound on
        # distinct keys, so maxProperties stays exact. minProperties is exact while it asks for
        # at most one key beyond the required members (one occurrence is one distinct key).
        if other is not None and lo > n_req + 1:
            self.unsupported(
                "minProperties",
                "counts distinct keys, and the names of additional properties may repeat",
                f.min_props_ptr,
            )
            lo = n_req + 1
        counting = lo > 0 or hi is not None
        cap = (hi + 1) if hi is not None else lo
        # Schema order is defined only when every member comes from one "properties" object;
        # members merged from several (allOf, dependentRequired, required-only names) go in any order.
        first_part: dict[str, int] = {}
        for i, part in enumerate(parts):
            for k in part.props:
                first_part.setdefault(k, i)
        sources = {first_part.get(k, -1) for k, _, _ in members}
        mixed = len(sources) > 1 or -1 in sources
        if (self.order_any or mixed) and 1 < len(members) <= _MAX_ORDER_ANY:
            return self._object_any_order(members, other, lo, hi, cap if counting else 0)
        n = len(members)
        if counting and (n + 1) * (cap + 1) > 20000:
            self.unsupported("maxProperties", "property counting state space too large", "")
            counting = False
        return self._object_in_order(members, idents, other, lo, hi, cap, counting)

    def _object_in_order(
        self,
        members: list[tuple[str, Node, bool]],
        idents: list[tuple[str, Node]],
        other: Node | None,
        lo: int,
        hi: int | None,
        cap: int,
        counting: bool,
    ) -> Node:
        # P(i) is the position after the members before i were emitted or skipped (optional
        # ones only), with additional keys allowed in between. Its alternatives put the keys of
        # every member that may come next into one rule, so that the compiled automaton reads a
        # key through one trie instead of one path per member: the members up to the end of i's
        # block are inlined, later blocks come through a chain of tail calls T. Blocks are
        # counted from the object's end, so what a position's rules hold depends only on the
        # members from it on (and the "other" keys and counting): its suffix. Each object text
        # has exactly one parse (listed keys fix the member, other keys stay at i). Size
        # O(n * block).
        #
        # Positions with the same suffix are the same rules in every object of the schema: they
        # are named by the suffix's number and built once. The variants that dependencies,
        # anyOf or if/then split an object into differ in a few members (one required, one
        # absent), and share every position after the last of them (Github_hard/o58639: nine
        # variants of a 45-member object).
        ws = self.ws()
        n = len(members)
        block = _OBJECT_KEY_BLOCK
        required = [r for _, _, r in members]
        # optional_until[i] = the first required member at or after i (n when none).
        optional_until = [n] * (n + 1)
        for i in range(n - 1, -1, -1):
            optional_until[i] = i if required[i] else optional_until[i + 1]
        suffixes = self.object_suffixes
        sid = [0] * (n + 1)
        key: tuple[Any, ...] = ("end", other, counting, lo, hi, cap)
        sid[n] = suffixes.setdefault(key, len(suffixes))
        for i in range(n - 1, -1, -1):
            key = (idents[i], required[i], sid[i + 1])
            sid[i] = suffixes.setdefault(key, len(suffixes))
        # Positions whose rules an earlier object built: a suffix of this one (built sets are
        # closed under "the position after").
        built = self.object_built
        todo = n + 1
        while todo > 0 and sid[todo - 1] in built:
            todo -= 1
        start_name = f"ob{sid[0]}_p0_0"
        top = _seq([Literal(b"{"), Ref(start_name), ws, Literal(b"}")])
        if todo == 0 and start_name in self.rules:
            return top
        names = [f"ob{s}_" for s in sid]
        # The positions' references per count (P(i, started, c) for started; the object's
        # start, the only position no member leads to, is named apart).
        p_refs: dict[int, list[Ref]] = {}

        def prefs(c: int) -> list[Ref]:
            refs = p_refs.get(c)
            if refs is None:
                tail = f"p1_{c}"
                refs = p_refs[c] = [Ref(name + tail) for name in names]
            return refs

        # Per (block end, count after the member): member j followed by the position after it
        # for every member j of the block; a position's choices are a slice of its block's.
        member_items = [m.items if type(m) is Seq else (m,) for _, m, _ in members]
        block_thens: dict[tuple[int, int], list[Node]] = {}

        def nexts(i: int, c: int, c2: int) -> list[Node]:
            """Members that may come next from position i within i's block, then the chain."""
            last = n - (n - 1 - i) // block * block  # the end of i's block
            first = max(0, last - block)
            thens = block_thens.get((last, c2))
            if thens is None:
                after = prefs(c2)
                thens = block_thens[(last, c2)] = [Seq((*member_items[j], after[j + 1])) for j in range(first, last)]
            out = thens[i - first : min(last, optional_until[i] + 1) - first]
            if optional_until[i] >= last and last < n:
                out.append(Ref(f"{names[last]}t{c}"))
            return out

        # The position rules are built with the node constructors directly, in the form
        # seq()/alt() would give (they were a quarter of a median lowering): members are
        # sequences ending in a reference, choices distinct sequences or references (no
        # nested alternative, nothing to dedupe), and a lead is flattened once.
        lead_items = {False: _flat_items(ws), True: _flat_items(self.comma())}
        rules = self.rules
        counts = range(cap + 1) if counting else range(1)
        for c in counts:
            room = not counting or hi is None or c < hi
            end_ok = not counting or c >= lo
            c2 = min(c + 1, cap) if counting else 0
            here = prefs(c)
            for e in range(n - block, 0, -block):  # block starts after the first, from the end
                if e < todo:
                    rules[f"{names[e]}t{c}"] = _alt_of_distinct(nexts(e, c, c2)) if room else _EMPTY_LANG
            for i in range(todo - 1 if todo else 0, -1, -1):
                # The choices after the lead, shared by both leads (a tail call from P).
                choices = nexts(i, c, c2) if room and i < n else []
                if room and other is not None:
                    choices.append(Seq((other, prefs(c2)[i])))
                q_ref = None
                if choices:
                    q_ref = Ref(f"{names[i]}q{c}")
                    if i < todo:
                        rules[q_ref.name] = _alt_of_distinct(choices)
                may_end = optional_until[i] == n and end_ok
                # Only the object's start is a position no member led to (nothing else calls
                # P(i, not started): building those rules was a sixth of a median grammar).
                for started in (False, True) if i == 0 and c == 0 else (True,):
                    if i >= todo and started:
                        continue
                    if q_ref is None:
                        body: Node = EMPTY if may_end else _EMPTY_LANG
                    else:
                        items = lead_items[started]
                        lead_q = Seq((*items, q_ref)) if items else q_ref
                        body = Alt((EMPTY, lead_q)) if may_end else lead_q
                    rules[here[i].name if started else start_name] = body
        built.update(sid[:todo])
        return top

    def _object_any_order(
        self, members: list[tuple[str, Node, bool]], other: Node | None, lo: int, hi: int | None, cap: int
    ) -> Node:
        # Objects of the same members, other keys and counting are one set of rules (a
        # definition reached through several schema paths is met once per path).
        memo_key = (tuple((member, r) for _, member, r in members), other, lo, hi, cap)
        top = self.any_order_objects.get(memo_key)
        if top is not None:
            return top
        ws = self.ws()
        n = len(members)
        base = f"oa{len(self.rules)}_"
        req_mask = sum(1 << i for i, (_, _, r) in enumerate(members) if r)
        counting = cap > 0 or hi is not None
        sep_ws = self.comma()

        def rname(mask: int, started: bool, c: int) -> str:
            return f"{base}{mask}_{int(started)}_{c}"

        counts = range(cap + 1) if counting else range(1)
        # 2^n positions of about n alternatives each: what repeats across them is built once.
        # Each member after either lead is a rule of its own, called from the 2^(n-1)
        # positions that offer it (inline, every position had its own copy of the member's key
        # and value call: Github_hard/o90832's automaton 2.5x larger, its core compile 11.8
        # against 4.7 ms; the masks are the same); each position is referenced once.
        leads = (ws, sep_ws)
        member_after = []
        for i, (_, member, _) in enumerate(members):
            after = []
            for started, lead in enumerate(leads):
                self.rules[f"{base}m{i}_{started}"] = _seq([lead, member])
                after.append(Ref(f"{base}m{i}_{started}"))
            member_after.append(after)
        other_after = [_seq([lead, other]) for lead in leads] if other is not None else None
        refs = [[Ref(rname(mask, True, c)) for c in counts] for mask in range(1 << n)]
        for mask in range(1 << n):
            for started in (False, True) if mask == 0 else (True,):  # only the start is not led to
                for c in counts if started else (0,):
                    alts: list[Node] = []
                    room = not counting or hi is None or c < hi
                    c2 = min(c + 1, cap) if counting else 0
                    if mask & req_mask == req_mask and (not counting or c >= lo):
                        alts.append(EMPTY)
                    if room:
                        for i in range(n):
                            if not mask & (1 << i):
                                alts.append(_then(member_after[i][started], refs[mask | (1 << i)][c2]))
                        if other_after is not None:
                            alts.append(_then(other_after[started], refs[mask][c2]))
                    self.rules[rname(mask, started, c)] = _alt(alts) if alts else _EMPTY_LANG
        top = self.any_order_objects[memo_key] = _seq([Literal(b"{"), Ref(rname(0, False, 0)), ws, Literal(b"}")])
        return top

    def _finite_other_names(self, f: _Facts, known: dict[str, None]) -> tuple[list[str], frozenset[str] | None]:
        """Names outside ``known`` that the keys beyond the listed ones are drawn from when that set
        is finite: every name of a propertyNames enum (then no other key remains: None), or the
        strings of patterns with a finite language (at most 64 ASCII names, matching no other
        pattern; those patterns are returned, for _other_branches to skip)."""
        if f.names:
            nf = self.approx_facts(frozenset(f.names))
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
            if any(self._py_search(q, x, qptr) for q, qptr in pats if q != p for x in strings):
                continue
            names.extend(x for x in strings if x not in known)
            enumerated.add(p)
        return names, frozenset(enumerated)

    def _pattern_strings(self, pattern: str) -> list[str] | None:
        """The strings a (search-semantics) pattern matches when they are at most 64, else None."""
        try:
            node, _ = regex_to_node(pattern, self.limits, anchored_search=True)
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
            return [(key, self.atoms_ref(value_atoms))]
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
            out.append((key, self.atoms_ref(vals)))
        # Keys matching no pattern are not generated (that needs a regex complement): sound, incomplete.
        return out

    def _key_language(self, names_atoms: frozenset[int], known: list[str], pattern: tuple[str, str] | None) -> Node:
        """Encoded key content: strings not in ``known``, matching ``pattern`` and propertyNames."""
        cp_node: Node | None = None
        constrained = False
        if pattern is not None:
            try:
                cp_node, _ = regex_to_node(pattern[0], self.limits, anchored_search=True)
            except GrammarError as e:
                self.pattern_not_lowered("patternProperties", e, pattern[1])
                return _EMPTY_LANG
            constrained = True
            if any(self._py_search(pattern[0], k, pattern[1]) for k in known):
                self.unsupported("patternProperties", "a listed property also matches this pattern", pattern[1])
                return _EMPTY_LANG
        if names_atoms:
            nf = self.approx_facts(names_atoms)
            exp = self.expand(names_atoms)
            if nf is None or "string" not in nf.types:
                return _EMPTY_LANG
            if exp is not None and exp[1]:
                self.unsupported("propertyNames", "composite propertyNames schemas are not lowered", "")
            if nf.enum is not None:
                vals = [v for v in nf.enum if isinstance(v, str) and v not in known and self.check(v, nf, 0)]
                if pattern is not None:
                    vals = [v for v in vals if self._py_search(pattern[0], v, pattern[1])]
                return _alt(self.string_content_literal(v) for v in vals) if vals else _EMPTY_LANG
            if nf.patterns or nf.formats or nf.min_len or nf.max_len is not None or nf.not_enum:
                if constrained:
                    self.unsupported("propertyNames", "propertyNames with patternProperties", "")
                    return _EMPTY_LANG
                sf = _Facts(
                    types={"string"},
                    min_len=nf.min_len,
                    max_len=nf.max_len,
                    patterns=nf.patterns,
                    formats=nf.formats,
                    not_enum=[*nf.not_enum, *known] if not (nf.patterns or nf.formats) else nf.not_enum,
                )
                if (nf.patterns or nf.formats) and any(self.check(k, nf, 0) for k in known):
                    self.unsupported("propertyNames", "a listed property matches propertyNames' pattern", "")
                    return _EMPTY_LANG
                if not (nf.patterns or nf.formats) and known and (nf.min_len or nf.max_len is not None):
                    if any(self.check(k, nf, 0) for k in known):
                        self.unsupported("propertyNames", "length-bounded names besides listed properties", "")
                        return _EMPTY_LANG
                    sf.not_enum = list(nf.not_enum)
                return self.string_contents(sf)
        if cp_node is not None:
            return self.encode(cp_node)
        if not known:
            return Repeat(self.char_rule(), 0, None)
        # One rule per distinct set of listed keys: objects of one schema often repeat a set,
        # and building the encoded complement is the costly part of lowering an object.
        names = tuple(sorted(set(known)))
        name = self.key_complements.get(names)
        if name is None:
            name = self.key_complements[names] = f"keyc{len(self.key_complements)}"
            self.rules[name] = StringExcept(names, self.string_tail())
        return Ref(name)

    def any_value(self) -> Ref:
        return self.value_rule("value")


# ---------------------------------------------------------------------------------------------
# Node utilities (recursion bounded: nodes come from our own construction or the regex frontend,
# whose depth is bounded by Limits.max_nesting).


def _finite_strings(node: Node, limit: int) -> list[str] | None:
    """The strings of a code-point-level node's language when it is finite and has at most
    ``limit`` of them (repetition counted), else None."""
    if type(node) is Literal:
        try:
            return [node.value.decode("utf-8")]
        except UnicodeDecodeError:
            return None
    if type(node) is CharClass:
        if node.negated or sum(b - a + 1 for a, b in node.ranges) > limit:
            return None
        return [chr(c) for a, b in node.ranges for c in range(a, b + 1)]
    if type(node) is Alt:
        out: list[str] = []
        for item in node.items:
            sub = _finite_strings(item, limit - len(out))
            if sub is None:
                return None
            out.extend(sub)
        return out if len(out) <= limit else None
    if type(node) is Seq:
        acc = [""]
        for item in node.items:
            sub = _finite_strings(item, limit)
            if sub is None or len(acc) * len(sub) > limit:
                return None
            acc = [x + y for x in acc for y in sub]
        return acc
    if type(node) is Repeat and node.max is not None:
        sub = _finite_strings(node.item, limit)
        if sub is None:
            return None
        out, level = [], [""]
        for n in range(node.max + 1):
            if n >= node.min:
                out.extend(level)
            if len(out) > limit:
                return None
            if n < node.max:
                if len(level) * len(sub) > limit:
                    return None
                level = [x + y for x in level for y in sub]
        return out
    return None


class _Nfa:
    """Thompson NFA over code points of a code-point-level IR node (no byte classes)."""

    def __init__(self) -> None:
        self.eps: list[list[int]] = []
        self.moves: list[list[tuple[tuple[tuple[int, int], ...], int]]] = []
        self.start = 0
        self.accept = 0
        self._closures: dict[int, frozenset[int]] = {}

    def state(self) -> int:
        self.eps.append([])
        self.moves.append([])
        if len(self.eps) > 3000:
            raise _NfaTooLarge
        return len(self.eps) - 1

    def closure(self, q: int) -> frozenset[int]:
        """States reachable from q by epsilon moves (memoized)."""
        hit = self._closures.get(q)
        if hit is None:
            seen = {q}
            stack = [q]
            while stack:
                x = stack.pop()
                for t in self.eps[x]:
                    if t not in seen:
                        seen.add(t)
                        stack.append(t)
            hit = self._closures[q] = frozenset(seen)
        return hit

    @classmethod
    def build(cls, node: Node, limits: Limits) -> _Nfa | None:
        nfa = cls()
        try:
            nfa.start = nfa.state()
            nfa.accept = nfa.state()
            nfa._add(node, nfa.start, nfa.accept, limits, 0)
        except _NfaTooLarge:
            return None
        return nfa

    def _add(self, node: Node, a: int, b: int, limits: Limits, depth: int) -> None:
        """Wire ``node`` from state a to state b (recursion bounded like the other node walks)."""
        _depth_guard(depth, limits)
        if isinstance(node, Literal):
            chars = node.value.decode("utf-8")
            cur = a
            for i, ch in enumerate(chars):
                nxt = b if i == len(chars) - 1 else self.state()
                self.moves[cur].append((((ord(ch), ord(ch)),), nxt))
                cur = nxt
            if not chars:
                self.eps[a].append(b)
        elif isinstance(node, CharClass):
            ranges = tuple(_positive_ranges(node))
            if ranges:
                self.moves[a].append((ranges, b))
        elif isinstance(node, Seq):
            cur = a
            for i, item in enumerate(node.items):
                nxt = b if i == len(node.items) - 1 else self.state()
                self._add(item, cur, nxt, limits, depth + 1)
                cur = nxt
            if not node.items:
                self.eps[a].append(b)
        elif isinstance(node, Alt):
            for item in node.items:
                s, t = self.state(), self.state()
                self.eps[a].append(s)
                self.eps[t].append(b)
                self._add(item, s, t, limits, depth + 1)
        elif isinstance(node, Repeat):
            cur = a
            for _ in range(node.min):
                nxt = self.state()
                self._add(node.item, cur, nxt, limits, depth + 1)
                cur = nxt
            if node.max is None:
                s, t = self.state(), self.state()
                self.eps[cur].append(s)
                self.eps[s].append(t)
                self._add(node.item, s, t, limits, depth + 1)
                self.eps[t].append(s)
                self.eps[t].append(b)
                self.eps[cur].append(b)
            else:
                for _ in range(node.max - node.min):
                    nxt = self.state()
                    self.eps[cur].append(b)
                    self._add(node.item, cur, nxt, limits, depth + 1)
                    cur = nxt
                self.eps[cur].append(b)
        else:
            raise _NfaTooLarge


class _NfaTooLarge(Exception):
    pass


_DERIVATIVE_TUPLES = 256  # most derivative tuples intersect_by_derivatives visits
_NFA_PRODUCT_RULES = 4000  # most (NFA states, length) rules one pattern-with-length product may build


def _length_product_size(nfa: _Nfa, hi: int | None, cap: int) -> int:
    """How many (state, length) pairs ``nfa_with_length`` would reach for one NFA, counted
    with plain sets and stopping once past the budget, so a product that cannot fit fails in
    a few ms instead of after building thousands of rules."""
    layer = {nfa.start}
    seen: set[tuple[int, int]] = {(nfa.start, 0)}
    k = 0
    while layer and (hi is None or k < hi) and len(seen) <= _NFA_PRODUCT_RULES:
        k2 = min(k + 1, cap) if hi is None else k + 1
        nxt = {t for q in layer for x in nfa.closure(q) for _, t in nfa.moves[x]}
        layer = {t for t in nxt if (t, k2) not in seen}
        seen.update((t, k2) for t in layer)
        k = k2
    return len(seen)


def _depth_guard(depth: int, limits: Limits) -> None:
    if depth > min(4 * limits.max_nesting, 800):
        raise LimitExceeded("max_nesting", limits.max_nesting, "string pattern nesting")


def _map_leaves(node: Node, fn: Callable[[Node], Node], limits: Limits, depth: int = 0) -> Node:
    _depth_guard(depth, limits)
    if isinstance(node, Seq):
        return _seq(_map_leaves(i, fn, limits, depth + 1) for i in node.items)
    if isinstance(node, Alt):
        return _alt(_map_leaves(i, fn, limits, depth + 1) for i in node.items) if node.items else node
    if isinstance(node, Repeat):
        inner = _map_leaves(node.item, fn, limits, depth + 1)
        return Repeat(inner, node.min, node.max)
    return fn(node)


def _length_range(node: Node, limits: Limits, depth: int = 0) -> tuple[int, int | None]:
    _depth_guard(depth, limits)
    if isinstance(node, Literal):
        return (len(node.value.decode("utf-8")),) * 2  # type: ignore[return-value]
    if isinstance(node, CharClass):
        return (1, 1)
    if isinstance(node, Seq):
        lo, hi = 0, 0
        hi_opt: int | None = 0
        for i in node.items:
            a, b = _length_range(i, limits, depth + 1)
            lo += a
            hi_opt = None if hi_opt is None or b is None else hi_opt + b
        del hi
        return lo, hi_opt
    if isinstance(node, Alt):
        if not node.items:
            return (0, 0)
        rs = [_length_range(i, limits, depth + 1) for i in node.items]
        his = [b for _, b in rs]
        return min(a for a, _ in rs), None if any(b is None for b in his) else max(b for b in his if b is not None)
    if isinstance(node, Repeat):
        a, b = _length_range(node.item, limits, depth + 1)
        return a * node.min, None if node.max is None or b is None else b * node.max
    raise TypeError(node)


def _restrict_length(node: Node, lo: int, hi: int | None, limits: Limits, depth: int = 0) -> Node | None:
    """``node`` ∩ strings of length [lo, hi], when expressible simply; None when not."""
    _depth_guard(depth, limits)
    a, b = _length_range(node, limits)
    if a >= lo and (hi is None or (b is not None and b <= hi)):
        return node
    if (hi is not None and a > hi) or (b is not None and b < lo):
        return _EMPTY_LANG
    if isinstance(node, Repeat):
        ia, ib = _length_range(node.item, limits)
        if ia == ib and ia > 0:
            w = ia
            nmin = max(node.min, -(-lo // w))
            nmax_parts = [x for x in (node.max, None if hi is None else hi // w) if x is not None]
            nmax = min(nmax_parts) if nmax_parts else None
            if nmax is not None and nmin > nmax:
                return _EMPTY_LANG
            if nmax is not None and nmax > limits.max_repeat:
                return None
            return Repeat(node.item, nmin, nmax)
        return None
    if isinstance(node, Seq):
        ranges = [_length_range(i, limits) for i in node.items]
        var = [i for i, (x, y) in enumerate(ranges) if x != y]
        if len(var) != 1:
            return None
        fixed = sum(x for i, (x, _) in enumerate(ranges) if i != var[0])
        sub = _restrict_length(
            node.items[var[0]], max(0, lo - fixed), None if hi is None else hi - fixed, limits, depth + 1
        )
        if sub is None:
            return None
        items = list(node.items)
        items[var[0]] = sub
        return _seq(items)
    if isinstance(node, Alt):
        out = []
        for i in node.items:
            r = _restrict_length(i, lo, hi, limits, depth + 1)
            if r is None:
                return None
            out.append(r)
        out = [x for x in out if not _is_empty(x)]
        return _alt(out) if out else _EMPTY_LANG
    return None


@functools.lru_cache(maxsize=4096)  # asked for every pair of a schema's patterns
def _literal_prefix(pattern: str) -> str | None:
    """The literal text every match of an anchored ``^...`` pattern starts with (None: unanchored)."""
    if not pattern.startswith("^"):
        return None
    out: list[str] = []
    i = 1
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            lit, step = pattern[i + 1], 2
        elif ch.isalnum() or ch in "_-:/@ =,;'\"!#%&~<>":
            lit, step = ch, 1
        else:
            break
        nxt = pattern[i + step] if i + step < len(pattern) else ""
        if nxt in ("?", "*", "{"):
            break
        out.append(lit)
        if nxt == "+":
            break
        i += step
    return "".join(out)


def _overlapping_atoms(patterns: list[tuple[str, int]]) -> Callable[[str], set[int]]:
    """For (pattern, atom) pairs: a function from one of the patterns to the atoms of those it is
    not _prefix_disjoint from (itself included). By literal prefix, not pair by pair: a key
    matching several patterns must satisfy each, and objects may list hundreds."""
    unprefixed: set[int] = set()
    by_prefix: dict[str, set[int]] = {}
    for pattern, atom in patterns:
        prefix = _literal_prefix(pattern)
        if prefix:
            by_prefix.setdefault(prefix, set()).add(atom)
        else:
            unprefixed.add(atom)
    every = {atom for _, atom in patterns}
    ordered = sorted(by_prefix)

    def overlapping(pattern: str) -> set[int]:
        prefix = _literal_prefix(pattern)
        if not prefix:
            return every
        out = set(unprefixed)
        for k in range(1, len(prefix) + 1):  # the prefixes this one extends, itself included
            out.update(by_prefix.get(prefix[:k], ()))
        i = bisect.bisect_right(ordered, prefix)  # then those that extend it: a sorted run
        while i < len(ordered) and ordered[i].startswith(prefix):
            out.update(by_prefix[ordered[i]])
            i += 1
        return out

    return overlapping


def _prefix_disjoint(p: str, q: str) -> bool:
    """Two patterns are provably disjoint when both are anchored with literal prefixes neither of
    which extends the other."""
    a, b = _literal_prefix(p), _literal_prefix(q)
    if not a or not b:
        return False
    return not (a.startswith(b) or b.startswith(a))


def _productive(node: Node, productive: set[str]) -> bool:
    stack: list[tuple[Node, bool]] = [(node, False)]
    results: dict[int, bool] = {}
    keep: list[Node] = []
    while stack:
        n, visited = stack.pop()
        if isinstance(n, (Seq, Alt)) and not visited:
            stack.append((n, True))
            keep.append(n)
            stack.extend((i, False) for i in n.items)
            continue
        if isinstance(n, (Repeat, StringExcept)) and not visited:
            stack.append((n, True))
            keep.append(n)
            stack.append((n.item if isinstance(n, Repeat) else n.tail, False))
            continue
        if isinstance(n, Literal):
            r = True
        elif isinstance(n, (CharClass, ByteClass)):
            r = bool(n.ranges) or n.negated
        elif isinstance(n, Ref):
            r = n.name in productive
        elif isinstance(n, Seq):
            r = all(results[id(i)] for i in n.items)
        elif isinstance(n, Alt):
            r = any(results[id(i)] for i in n.items)
        elif isinstance(n, Repeat):
            r = n.min == 0 or results[id(n.item)]
        elif isinstance(n, StringExcept):
            # Some trie prefix that is no word ends the contents, or the tail follows.
            words = set(n.words)
            r = results[id(n.tail)] or any(w[:k] not in words for w in n.words or ("",) for k in range(len(w) + 1))
        else:
            raise TypeError(n)
        results[id(n)] = r
        keep.append(n)
    return results[id(node)]


def _dig(value: Any, path: tuple[str | int, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


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


def _narrow_types(types: set[str], d: dict[str, Any], ptr: str) -> None:
    """Keeps in ``types`` what the "type" keyword of ``d`` (with "nullable") and its synthetic
    type set allow."""
    if "type" in d:
        allowed = _closure(_types_of(d, ptr))
        if d.get("nullable") is True:
            allowed.add("null")
        types.intersection_update(allowed)
    if "$lg_types" in d:
        types.intersection_update(d["$lg_types"])


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


def schema_to_grammar(
    schema: dict[str, Any] | bool | str,
    *,
    limits: Limits,
    whitespace: str = "flexible",
    max_whitespace: int | None = None,
    property_order: str = "schema",
    strict: bool = False,
    lenient: bool = False,
    oneof: str = "exact",
    check_empty: bool = True,
    pointers: dict[str, str] | None = None,
) -> tuple[Grammar, list[str]]:
    """The grammar of JSON texts valid against ``schema``, and the dropped constraints.

    ``check_empty=False`` skips the (costly) search for an empty language here: the compiler
    passes it because the core finds an empty root language anyway, and only then asks this
    function again for the error with its JSON pointer.

    ``pointers``, when given, receives the JSON pointer of each rule that lowers a schema (its
    name to the pointers of the subschemas it lowers, joined by " & ").

    Options (see docs/json_schema.md): ``whitespace`` "flexible" (any JSON whitespace between
    tokens; with ``max_whitespace`` N, at most one newline then at most N spaces/tabs per gap)
    or "compact" (none); ``property_order`` "schema" or "any" (objects of up to 8 listed properties);
    ``strict`` forbids properties not listed wherever ``additionalProperties`` is absent;
    ``lenient`` drops unsupported constraints and lists them instead of raising; ``oneof``
    "exact" (branches must be provably disjoint) or "anyof" (treat oneOf as anyOf).
    """
    if isinstance(schema, (bytes, str)):
        try:
            text = schema.decode("utf-8") if isinstance(schema, bytes) else schema
        except UnicodeDecodeError as e:
            raise SchemaError(f"schema text is not UTF-8: {e}", pointer="", code="schema-json") from None
        if len(text.encode("utf-8", "surrogatepass")) > limits.max_source_bytes:
            raise LimitExceeded("max_source_bytes", limits.max_source_bytes, "schema text")
        try:
            schema = json.loads(text)
        except json.JSONDecodeError as e:
            raise SchemaError(f"schema is not valid JSON: {e}", pointer="", code="schema-json") from None
        except RecursionError:
            # Valid JSON nested deeper than Python's parser recurses: a depth problem, not a syntax one.
            depth = _text_nesting(text)
            if depth > limits.max_nesting:
                why = f"schema text nested {depth} levels deep"
                raise LimitExceeded("max_nesting", limits.max_nesting, why) from None
            raise SchemaError(
                f"schema text nested {depth} levels deep: deeper than Python's JSON parser goes",
                pointer="",
                code="schema-too-deep",
            ) from None
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(
            f"a schema must be an object or a boolean (or JSON text), got {type(schema).__name__}",
            pointer="",
            code="schema-type",
        )
    try:
        low = _Lowering(
            schema,
            limits=limits,
            whitespace=whitespace,
            max_whitespace=max_whitespace,
            property_order=property_order,
            strict=strict,
            lenient=lenient,
            oneof=oneof,
        )
        if schema is True:
            return Grammar({"root": low.any_value(), **low.rules}), []
        grammar = low.run(check_empty)
        if pointers is not None:
            pointers.update(low.pointers)
    except (TypeError, AttributeError):
        # A schema passed as Python data may hold what JSON cannot (a set, an object, a
        # non-string key), which fails deep inside the lowering: looked for here, after the
        # fact, so that JSON schemas pay nothing; any other failure is raised as it is.
        found = _non_json_value(schema)
        if found is None:
            raise
        pointer, what = found
        raise SchemaError(f"the schema holds {what}, which is not JSON data", pointer=pointer) from None
    return grammar, list(low.dropped)


def _text_nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text`` (brackets inside strings do
    not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _non_json_value(schema: Any) -> tuple[str, str] | None:
    """The pointer and a description of the first value in ``schema`` that is not JSON data
    (iterative; containers met twice, as in a cyclic structure, are not walked again)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    seen: set[int] = set()
    while stack:
        v, ptr = stack.pop()
        if v is None or isinstance(v, (str, bool, int, float)):
            continue
        if isinstance(v, (dict, list)):
            if id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, list):
                stack.extend((x, _ptr_join(ptr, i)) for i, x in enumerate(v))
                continue
            for k, x in v.items():
                if not isinstance(k, str):
                    return ptr, f"a key of type {type(k).__name__} ({k!r})"
                stack.append((x, _ptr_join(ptr, k)))
            continue
        return ptr, f"a value of type {type(v).__name__}"
    return None
