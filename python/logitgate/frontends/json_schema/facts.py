"""Facts: the pure keywords of an atom set merged per JSON type (types intersected, bounds
tightened, enums intersected, object/array sub-schemas kept as atoms): the typed record between
the schema algebra and emission."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .keywords import _ALL_TYPES


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


@dataclass(frozen=True)
class _Contains:
    """One ``contains`` and its counts, with where each was written (for errors: a count a
    complement made points at the keyword it complements)."""

    atom: int
    min: int
    max: int | None
    ptr: str  # the contains keyword's pointer
    min_ptr: str
    max_ptr: str


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
    min_len_ptr: str = ""  # pointer of the minLength that set min_len (for errors)
    max_len: int | None = None
    max_len_ptr: str = ""
    patterns: list[tuple[str, str]] = field(default_factory=list)  # (pattern, pointer)
    formats: list[tuple[str, str]] = field(default_factory=list)
    objs: list[_ObjPart] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    names: list[int] = field(default_factory=list)  # propertyNames atoms
    min_props: int = 0
    min_props_ptr: str = ""  # pointer of the minProperties that set min_props
    max_props: int | None = None
    max_props_ptr: str = ""  # pointer of the maxProperties that set max_props
    arrs: list[_ArrPart] = field(default_factory=list)
    min_items: int = 0
    min_items_ptr: str = ""  # pointer of the minItems that set min_items (for errors)
    max_items: int | None = None
    max_items_ptr: str = ""
    contains: list[_Contains] = field(default_factory=list)
    unique: str | None = None  # pointer of uniqueItems: true
    empty_reason: tuple[str, str] | None = None  # (pointer, message) when a contradiction was seen


@dataclass(frozen=True, eq=False)
class StringSet:
    """A string-only set's language as the string emitter builds it into one automaton: the
    strings ``facts`` allow (its patterns and formats; its length bounds are the root's, or
    implied by them), intersected with, per disjunction, the union of its alternatives'
    languages. An alternative that holds no string is not in its disjunction; a set that
    several alternatives share is one node."""

    facts: _Facts
    disjunctions: tuple[tuple[StringSet, ...], ...]
