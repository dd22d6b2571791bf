"""Synthetic atoms (json_schema/synthetic.py): the constraints only the lowering makes travel in a
typed record, so keys of a user schema that look like them are unknown keywords, which constrain
nothing, and the complements the lowering builds with them stay exact."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from tests.unit.json_schema.acceptance import accepts

import logitgate as lg

# Spellings of the private keys the lowering once stored inside its synthetic schemas.
PRIVATE_LOOKING = [
    {"$lg_types": ["string"]},
    {"$lg_types": []},
    {"$lg_not": 1},
    {"$lg_not": 0},
    {"$lg_not_enum": [1, "a", None]},
    {"$lg_types": ["object"], "$lg_not_enum": [{}]},
]
VALUES: list[Any] = [None, True, 0, 1, 2.5, "", "a", [], [1], {}, {"a": 1}]


@pytest.mark.parametrize("schema", PRIVATE_LOOKING, ids=json.dumps)
def test_private_looking_keys_are_unknown_keywords(compiler: lg.Compiler, schema: dict[str, Any]) -> None:
    # Unknown keywords constrain nothing: every value, at the root and as a property.
    root = compiler.compile_json_schema(schema)
    nested = compiler.compile_json_schema({"type": "object", "properties": {"a": schema}, "required": ["a"]})
    for v in VALUES:
        assert accepts(root, v), v
        assert accepts(nested, {"a": v}), v


@pytest.mark.parametrize("schema", PRIVATE_LOOKING, ids=json.dumps)
def test_private_looking_keys_under_not_leave_nothing(compiler: lg.Compiler, schema: dict[str, Any]) -> None:
    # not {anything-goes} is false: as a property's schema, the property cannot be present.
    g = compiler.compile_json_schema({"type": "object", "properties": {"a": {"not": schema}}})
    assert accepts(g, {})
    assert accepts(g, {"b": 1})
    for v in VALUES:
        assert not accepts(g, {"a": v}), v


def test_complements_still_exact_next_to_private_looking_keys(compiler: lg.Compiler) -> None:
    # The lowering's own type splits and excluded values (not enum, not const, not type) work as
    # before, with a user key of the same spelling beside them ignored.
    schema = {
        "type": "object",
        "properties": {
            "e": {"not": {"enum": [1, "a", None]}, "$lg_not_enum": [2]},
            "c": {"not": {"const": [1, 2]}, "$lg_types": ["string"]},
            "t": {"not": {"type": ["string", "integer"]}, "$lg_types": ["string"]},
        },
    }
    g = compiler.compile_json_schema(schema)
    for prop in ("e", "c", "t"):
        for v in [*VALUES, 2, [1, 2], [2, 1]]:
            doc = {prop: v}
            expected = jsonschema.Draft202012Validator(schema).is_valid(doc)
            assert accepts(g, doc) == expected, doc
