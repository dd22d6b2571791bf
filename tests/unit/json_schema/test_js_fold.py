"""Constant schemas (json_schema/fold.py): combinators over booleans fold to ``true`` or ``false``
exactly as a validator evaluates them, anything else is left to the lowering, and nesting that
expansion would distribute exponentially compiles at once."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest
from tests.unit.json_schema.acceptance import accepts

import logitgate as lg
from logitgate.frontends.json_schema.fold import constant_value

VALUES: list[Any] = [None, True, 0, 1, 2.5, "", "a", [], [1], {}, {"a": 1}]


def random_constant(rng: random.Random, depth: int) -> Any:
    """A schema of combinators over booleans and annotation-only objects."""
    if depth == 0 or rng.random() < 0.25:
        return rng.choice([True, False, {}, {"title": "t"}, {"description": "d", "default": 1}])
    node: dict[str, Any] = {}
    for key in rng.sample(["allOf", "anyOf", "oneOf", "not"], rng.randint(1, 2)):
        if key == "not":
            node[key] = random_constant(rng, depth - 1)
        else:
            node[key] = [random_constant(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.2:
        node["$comment"] = "annotation"
    return node


@pytest.mark.parametrize("seed", range(8))
def test_folding_agrees_with_a_validator(compiler: lg.Compiler, seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(40):
        schema = random_constant(rng, 4)
        if not isinstance(schema, dict) or not schema.keys() & {"allOf", "anyOf", "oneOf", "not"}:
            continue
        value = constant_value(schema, {}, oneof_as_anyof=False)
        assert value is not None, schema
        validator = jsonschema.Draft202012Validator(schema)
        assert all(validator.is_valid(v) == value for v in VALUES), schema
        # The compiled grammar agrees too: a property of that schema is allowed or is not.
        g = compiler.compile_json_schema({"type": "object", "properties": {"p": schema}})
        assert accepts(g, {})
        assert all(accepts(g, {"p": v}) == value for v in VALUES), schema


@pytest.mark.parametrize(
    "schema",
    [
        {"oneOf": [True, {"type": "string"}]},  # a constraining keyword
        {"anyOf": [False, {"$ref": "#/$defs/x"}], "$defs": {"x": True}},  # a reference
        {"allOf": []},  # malformed: left for the lowering to report
        {"not": 3},
        {"oneOf": [True, True], "minLength": 2},  # a sibling keyword
    ],
    ids=json.dumps,
)
def test_what_does_not_fold(schema: dict[str, Any]) -> None:
    assert constant_value(schema, {}, oneof_as_anyof=False) is None


def test_a_dict_that_contains_itself_does_not_fold() -> None:
    cyclic: dict[str, Any] = {"anyOf": [False]}
    cyclic["anyOf"].append({"not": cyclic})
    assert constant_value(cyclic, {}, oneof_as_anyof=False) is None


def test_oneof_as_anyof_folds_as_anyof(compiler: lg.Compiler) -> None:
    two_true = {"oneOf": [True, {}]}
    assert constant_value(two_true, {}, oneof_as_anyof=False) is False
    assert constant_value(two_true, {}, oneof_as_anyof=True) is True
    schema = {"type": "object", "properties": {"p": two_true}}
    assert not accepts(compiler.compile_json_schema(schema), {"p": 1})
    assert accepts(compiler.compile_json_schema(schema, oneof="anyof"), {"p": 1})


def test_errors_inside_a_folded_schema_still_name_the_keyword(compiler: lg.Compiler) -> None:
    # Only a whole constant folds: a malformed list beside constants is still the schema's error.
    with pytest.raises(lg.SchemaError) as e:
        compiler.compile_json_schema({"properties": {"p": {"oneOf": [False, {"allOf": {}}]}}})
    assert "allOf" in str(e.value)


def balanced_oneof(depth: int, rng: random.Random) -> Any:
    if depth == 0:
        return {"oneOf": [rng.random() < 0.5, rng.random() < 0.5]}
    return {"oneOf": [balanced_oneof(depth - 1, rng), balanced_oneof(depth - 1, rng)]}


@pytest.mark.parametrize("depth", [4, 5, 8])
def test_deep_constant_combinators_compile_at_once(compiler: lg.Compiler, depth: int) -> None:
    # Expanded level by level (each oneOf branch beside its siblings' complements), these took
    # time exponential in the depth: at depth 4, past the timeout; deeper, past the branch cap.
    schema = {"type": "object", "properties": {"p": balanced_oneof(depth, random.Random(depth))}}
    g = compiler.compile_json_schema(schema, timeout=10.0)
    validator = jsonschema.Draft202012Validator(schema)
    for value in ({}, {"p": 1}, {"p": "a"}):
        assert accepts(g, value) == validator.is_valid(value)
