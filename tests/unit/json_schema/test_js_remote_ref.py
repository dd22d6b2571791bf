"""A ``$ref`` to another document (json_schema/expand.py, resolve.py): UnsupportedSchemaError, or
with ``lenient=True`` dropped and listed, as docs/json_schema.md says; the rest still holds."""

from __future__ import annotations

import pytest
from tests.unit.json_schema.acceptance import accepts

import logitgate as lg

REMOTE = "https://example.com/schemas/item.json"


SCHEMAS = {
    "property": {"type": "object", "properties": {"a": {"$ref": REMOTE}, "b": {"type": "integer"}}},
    "alias chain": {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/x"}, "b": {"type": "integer"}},
        "$defs": {"x": {"$ref": "#/$defs/y"}, "y": {"$ref": REMOTE}},
    },
    "under allOf": {
        "type": "object",
        "properties": {"a": {"allOf": [{"$ref": REMOTE}]}, "b": {"type": "integer"}},
    },
}


@pytest.mark.parametrize("name", SCHEMAS)
def test_remote_ref_raises(compiler: lg.Compiler, name: str) -> None:
    with pytest.raises(lg.UnsupportedSchemaError) as info:
        compiler.compile_json_schema(SCHEMAS[name])
    assert info.value.code == "schema-unsupported"
    assert REMOTE in str(info.value)


@pytest.mark.parametrize("name", SCHEMAS)
def test_remote_ref_dropped_when_lenient(compiler: lg.Compiler, name: str) -> None:
    g = compiler.compile_json_schema(SCHEMAS[name], lenient=True)
    assert len(g.dropped) == 1 and "$ref" in g.dropped[0] and REMOTE in g.dropped[0], g.dropped
    for a in [1, "x", None, {"k": [1]}]:  # the reference constrains nothing
        assert accepts(g, {"a": a, "b": 2}), a
    assert not accepts(g, {"a": 1, "b": "two"})  # the rest still holds
    assert not accepts(g, [])


def test_remote_ref_under_not_drops_the_not(compiler: lg.Compiler) -> None:
    schema = {"type": "object", "properties": {"a": {"not": {"$ref": REMOTE}}, "b": {"type": "integer"}}}
    with pytest.raises(lg.UnsupportedSchemaError):
        compiler.compile_json_schema(schema)
    g = compiler.compile_json_schema(schema, lenient=True)
    assert len(g.dropped) == 1 and "not" in g.dropped[0], g.dropped
    assert accepts(g, {"a": 1, "b": 2})
    assert not accepts(g, {"b": "two"})
