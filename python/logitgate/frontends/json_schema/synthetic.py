"""Synthetic atoms: the schemas the lowering makes itself (complements, dependency branches, type
splits) carry, besides ordinary keywords, constraints no JSON Schema keyword spells. Those travel
in a typed record next to the schema object, never as keys inside it, so a user schema that
spells a private-looking key (``$lg_types``, say) has an unknown keyword, which constrains
nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)
class Synthetic:
    """What a synthetic atom adds to its schema object (each field None: no such constraint)."""

    types: tuple[str, ...] | None = None  # the internal type tokens allowed (keywords._ALL_TYPES)
    not_enum: list[Any] | None = None  # values excluded (under JSON equality)
    negates: int | None = None  # the atom whose complement this atom is (its schema object is empty)
    # For a keyword of its schema object that complements one the user wrote (not maxItems 3 is
    # minItems 4), that keyword's pointer: errors about the count point at what was written.
    origin: dict[str, str] | None = None
