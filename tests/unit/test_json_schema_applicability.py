"""Keywords that apply to some JSON types only, under negation, ``oneOf`` and ``contains``.

A type-specific keyword (``required``, ``minimum``, ``maxLength``, ``items``, ``contains``,
``minProperties``...) holds vacuously for values of the other types. So ``not`` of it rejects
those values, ``oneOf`` of two such branches rejects them (they match both), and ``contains``
counts them as matches. ``not`` of an array or object ``const``/``enum`` excludes exactly
those values. Every case is checked at token level on the byte vocabulary and on SmolLM2, and
every expectation against ``jsonschema`` itself.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from tests.unit.token_level import TokenLevel, byte_vocabulary

import logitgate as lg

CASES: list[tuple[str, Any, list[Any], list[Any]]] = [
    # not of an object/array const or enum: exactly those values are excluded
    ("not-const-empty-object", {"not": {"const": {}}}, [{"a": 1}, [], 0, "s", None], [{}]),
    (
        "not-enum-objects",
        {"type": "object", "not": {"enum": [{}, {"a": 1}]}},
        [{"a": 2}, {"b": 1}, {"a": 1, "b": 2}, {"a": [1]}],
        [{}, {"a": 1}, {"a": 1.0}],
    ),
    (
        "not-const-array-property",
        {"properties": {"x": {"not": {"const": [1, 2]}}}},
        [{"x": [2, 1]}, {"x": [1]}, {"x": [1, 2, 3]}, {"x": "s"}, {}],
        [{"x": [1, 2]}, {"x": [1.0, 2]}],
    ),
    (
        "not-const-nested",
        {"not": {"const": {"a": [1, {"b": None}]}}},
        [{"a": [1, {"b": 0}]}, {"a": [1, {}]}, {"a": [1, {"b": None, "c": 1}]}, {"a": [1]}, {"a": [2, {"b": None}]}],
        [{"a": [1, {"b": None}]}],
    ),
    (
        "not-enum-mixed",
        {"not": {"enum": [[], {"a": [1]}, 3, "s", [[1]]]}},
        [[0], [[2]], {"a": []}, 4, "t", None, {}],
        [[], {"a": [1]}, 3, 3.0, "s", [[1]]],
    ),
    # not of a type-specific keyword rejects the values of other types
    ("not-required", {"not": {"required": ["a"]}}, [{}, {"b": 1}], [5, "s", None, [], {"a": 1}]),
    ("not-minimum", {"not": {"minimum": 5}}, [4, 4.5, -1], ["s", None, 5, 6, [], {}]),
    ("items-not-minimum", {"type": "array", "items": {"not": {"minimum": 3}}}, [[], [2, 1.5]], [["x"], [3], [None]]),
    (
        "not-if-then",
        {"not": {"if": {"type": "string"}, "then": {"maxLength": 1}}},
        ["ab", "abc"],
        [5, None, "a", "", [], {}],
    ),
    ("not-maxLength", {"not": {"maxLength": 2}}, ["abc"], [1, "ab", None, []]),
    ("not-minItems", {"not": {"minItems": 1}}, [[]], ["s", [1], {}]),
    ("not-minProperties", {"not": {"minProperties": 1}}, [{}], [1, {"a": 1}, []]),
    (
        "not-properties",
        {"not": {"properties": {"a": {"type": "string"}}}},
        [{"a": 1}, {"a": None, "b": "x"}],
        [1, {}, {"a": "x"}, ["a"]],
    ),
    ("not-items", {"not": {"items": {"type": "string"}}}, [[1], ["a", 1]], [1, [], ["a"], {}]),
    ("not-contains", {"not": {"contains": {"type": "string"}}}, [[], [1]], [1, ["a"], "a"]),
    ("not-exclusiveMaximum", {"not": {"exclusiveMaximum": 0}}, [0, 1, 0.5], ["s", -1, True]),
    (
        "not-dependentRequired",
        {"not": {"dependentRequired": {"a": ["b", "c"]}}},
        [{"a": 1}, {"a": 1, "b": 2}],
        [1, {}, {"b": 1}, {"a": 1, "b": 1, "c": 1}],
    ),
    (
        "not-dependentSchemas",
        {"not": {"dependentSchemas": {"a": {"properties": {"b": {"type": "integer"}}}}}},
        [{"a": 1, "b": "x"}],
        [{"a": 1}, {"a": 1, "b": 2}, {"b": "x"}, "s"],
    ),
    # oneOf counts vacuous matches
    (
        "oneOf-dependentRequired",
        {"oneOf": [{"dependentRequired": {"a": ["b"]}}, {"required": ["c"]}]},
        [{}, {"a": 1, "b": 1}, {"a": 1, "c": 1}],
        [{"c": 1}, 5, {"a": 1}],
    ),
    (
        "oneOf-required",
        {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        [{"a": 1}, {"b": 1}],
        [5, "s", None, [], {"a": 1, "b": 2}, {}],
    ),
    ("oneOf-bounds", {"oneOf": [{"minimum": 3}, {"maxLength": 2}]}, [1, 2.5, "abc"], [4, "ab", None, [], {}]),
    # contains counts vacuous matches
    (
        "maxContains-vacuous",
        {"type": "array", "contains": {"minimum": 3}, "maxContains": 1},
        [[4], [1, 4], ["x"], [None, 2]],
        [["x", 4], [None, "y"], [1], [], [3, 4]],
    ),
    (
        "minContains-vacuous",
        {"type": "array", "contains": {"minimum": 3}, "minContains": 2},
        [["x", None], ["x", 5], [3, 4, 1]],
        [["x", 1], [5], []],
    ),
    ("contains-vacuous", {"type": "array", "contains": {"required": ["a"]}}, [[1], [{"a": 1}]], [[], [{}], [{"b": 2}]]),
    # several contains, and contains with a prefix, each count exact
    (
        "contains-twice",
        {"type": "array", "allOf": [{"contains": {"type": "string"}, "maxContains": 1}, {"contains": {"minimum": 3}}]},
        [["x"], [1, "a"], ["a", 5]],
        [[3], ["a", "b"], [], [1, 2]],
    ),
    (
        "contains-after-prefix",
        {"type": "array", "prefixItems": [{"type": "integer"}], "contains": {"type": "string"}, "maxContains": 1},
        [[1, "a"], [1, "a", 2]],
        [["a"], [1], [1, "a", "b"], ["a", "b"]],
    ),
    # complements of counted contains, of a prefix, and a oneOf of those
    (
        "not-contains-counts",
        {"not": {"contains": {"type": "string"}, "minContains": 2, "maxContains": 3}},
        [[], ["a"], ["a", "b", "c", "d"], [1, "a"]],
        [1, "s", ["a", "b"], ["a", 1, "b", "c"]],
    ),
    (
        "not-prefixItems",
        {"not": {"prefixItems": [{"type": "integer"}, {"type": "string"}]}},
        [["a"], [1, 2], ["a", "b"]],
        [[], [1], [1, "a"], [1, "a", None], 5],
    ),
    (
        "oneOf-contains-counts",
        {"oneOf": [{"contains": {"const": 1}, "maxContains": 1}, {"minItems": 2}]},
        [[1], [2, 3], [1, 1, 2], [1, 1]],
        [[1, 2], 5, [], [2]],
    ),
    (
        "maxContains-zero",
        {"type": "array", "contains": {"required": ["a"]}, "minContains": 0, "maxContains": 0},
        [[], [{}], [{"b": 1}, {}]],
        [[1], [{"a": 1}], [{}, "s"]],
    ),
]


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), CASES, ids=[c[0] for c in CASES])
def test_expectations_are_jsonschemas(name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    assert [v for v in valid if not validator.is_valid(v)] == []
    assert [v for v in invalid if validator.is_valid(v)] == []


@pytest.mark.parametrize(("name", "schema", "valid", "invalid"), CASES, ids=[c[0] for c in CASES])
def test_vacuous_truths(token_level: TokenLevel, name: str, schema: Any, valid: list[Any], invalid: list[Any]) -> None:
    g = token_level.compiler.compile_json_schema(schema, property_order="any")
    for v in valid:
        for text in (json.dumps(v), json.dumps(v, separators=(",", ":"))):
            assert token_level.accepts(g, text), f"valid {text} rejected"
    for v in invalid:
        text = json.dumps(v)
        assert not token_level.accepts(g, text), f"invalid {text} accepted"


def test_explicit_types_agree_with_vacuous_ones() -> None:
    # The same negation with and without the keyword's type spelled out inside: without it,
    # values of other types hold the keyword vacuously, so "not" takes them out again.
    tokens = TokenLevel(byte_vocabulary())
    pool = [None, True, 0, 4, 7.5, "", "abcdef", [], [1, 2], {}, {"a": 1}]
    for inner, ty in [
        ({"minimum": 5}, "number"),
        ({"maxLength": 3}, "string"),
        ({"required": ["a"]}, "object"),
        ({"maxItems": 1}, "array"),
    ]:
        bare = tokens.compiler.compile_json_schema({"not": inner})
        typed = tokens.compiler.compile_json_schema({"not": {"type": ty, **inner}})
        for v in pool:
            text = json.dumps(v)
            holds = jsonschema.Draft202012Validator(inner).is_valid(v)
            assert tokens.accepts(bare, text) == (not holds), (inner, v)
            is_ty = jsonschema.Draft202012Validator({"type": ty}).is_valid(v)
            assert tokens.accepts(typed, text) == (not (holds and is_ty)), (inner, ty, v)


@pytest.mark.parametrize(
    ("schema", "pointer"),
    [
        ({"not": {"const": list(range(300))}}, "/not"),
        ({"properties": {"p": {"not": {"enum": [{"a": i, "b": i, "c": i} for i in range(4)]}}}}, "/properties/p/not"),
    ],
)
def test_compound_exclusions_too_large_are_refused(schema: Any, pointer: str) -> None:
    # Excluding an array or object splits into one choice per member: past the branch bound the
    # schema is refused (never approximated), naming the negation.
    compiler = lg.Compiler(byte_vocabulary())
    with pytest.raises(lg.UnsupportedSchemaError) as e:
        compiler.compile_json_schema(schema)
    assert (e.value.keyword, e.value.pointer) == ("not", pointer)
