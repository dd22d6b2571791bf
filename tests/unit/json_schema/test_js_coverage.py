"""Constructs lowered since issue 29's coverage step, each checked through masks (every token's
mask bit against ``accept``, EOS at the end) on instances ``jsonschema`` labels, and by random
walks whose outputs must validate:

- ``oneOf`` whose branches are disjoint only under the keywords beside them (a discriminator a
  sibling of the ``allOf`` requires), and still refused when they are not;
- ``patternProperties`` whose pattern matches a listed property (the member satisfies both, and
  no other key spells that name);
- ``format`` with ``maxLength`` too large to intersect exactly (the format fitted to the length).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest
from tests.soundness import oracle
from tests.unit.token_level import TokenLevel, byte_vocabulary

import logitgate as lg
from logitgate.frontends.json_schema.formats import _FORMATS


@pytest.fixture(scope="module")
def tl() -> TokenLevel:
    return TokenLevel(byte_vocabulary())


def check(tl: TokenLevel, schema: Any, valid: list[Any], invalid: list[Any], texts: tuple[str, ...] = ()) -> None:
    """Labels from jsonschema (so a wrong label fails here), then each instance through masks."""
    v = oracle.validator(schema)
    g = tl.compiler.compile_json_schema(schema)
    for x in valid:
        assert v.is_valid(x), x
        assert tl.accepts(g, json.dumps(x)), f"valid rejected: {x!r}"
        assert tl.accepts(g, json.dumps(x, indent=2)), f"valid rejected: {x!r}"
    for x in invalid:
        assert not v.is_valid(x), x
        assert not tl.accepts(g, json.dumps(x)), f"invalid accepted: {x!r}"
    for text in texts:  # invalid texts a spelling matters for
        assert not v.is_valid(json.loads(text)), text
        assert not tl.accepts(g, text), f"invalid accepted: {text!r}"


def walk_outputs(g: lg.CompiledGrammar, n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    bits = lg.allocate_mask(oracle.compiler().vocab)
    out = []
    for _ in range(n):
        text, outcome = oracle.walk(g, rng, bits, max_steps=400, soft=60)
        assert outcome in ("done", "truncated"), (outcome, text)
        if outcome == "done":
            out.append(text)
    assert out
    return out


def assert_walks_valid(schema: Any, n: int = 40) -> list[Any]:
    # strict: no keys beyond the listed ones where the schema is silent, so walks reach the
    # listed members (it narrows what is emitted, never the schema's own semantics).
    g = oracle.compiler().compile_json_schema(schema, strict=True, whitespace="compact")
    values = []
    for text in walk_outputs(g, n):
        why = oracle.judge_output(schema, text)
        assert why is None, (text, why)
        values.append(json.loads(text))
    return values


# -- oneOf: disjoint under the whole conjunction -------------------------------------------------

# Branch "b" holds a pattern, which has no exact complement: exactly-one needs disjointness,
# which only the sibling "required" gives (either branch alone accepts an object without kind).
BRANCHES = [
    {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}},
    {"properties": {"kind": {"const": "b"}, "x": {"type": "string", "pattern": "^[a-z]+$"}}},
]
VALID = [{"kind": "a", "x": 1}, {"kind": "b", "x": "abc"}, {"kind": "a"}, {"kind": "b", "y": []}]
INVALID = [{"kind": "b", "x": 1}, {"kind": "a", "x": "abc"}, {"x": 1}, {}, {"kind": "c"}, {"kind": "b", "x": "AB"}]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "required": ["kind"], "allOf": [{"oneOf": BRANCHES}]},
        {"type": "object", "required": ["kind"], "$ref": "#/$defs/t", "$defs": {"t": {"oneOf": BRANCHES}}},
        {"allOf": [{"oneOf": BRANCHES}, {"type": "object", "required": ["kind"]}]},
    ],
    ids=["sibling", "through-ref", "other-allof-part"],
)
def test_oneof_disjoint_under_sibling_keywords(tl: TokenLevel, schema: dict[str, Any]) -> None:
    check(tl, schema, VALID, INVALID)
    for value in assert_walks_valid(schema):
        assert value["kind"] in ("a", "b")


# Both branches have exact complements: exactly-one could be lowered through them, but branches
# disjoint under the sibling "required" need none (a complement of each other branch per branch
# multiplies the object positions: Github_ultra/o360's storage formats).
COMPLEMENTABLE = [
    {"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}, "y": {"type": "boolean"}}},
    {"properties": {"kind": {"const": "b"}, "x": {"type": "string"}, "z": {"type": "null"}}},
]


def test_oneof_disjoint_under_siblings_lowers_without_complements(tl: TokenLevel) -> None:
    from logitgate.frontends.json_schema import schema_to_grammar
    from logitgate.limits import Limits

    schema = {
        "type": "object",
        "required": ["kind"],
        "allOf": [{"$ref": "#/$defs/t"}],
        "$defs": {"t": {"oneOf": COMPLEMENTABLE}},
    }
    exact, _ = schema_to_grammar(schema, limits=Limits())
    anyof, _ = schema_to_grammar(schema, limits=Limits(), oneof="anyof")
    assert exact.to_ebnf() == anyof.to_ebnf()
    valid = [{"kind": "a", "x": 1, "y": True}, {"kind": "b", "x": "s", "z": None}, {"kind": "b", "extra": 1}]
    invalid = [{"kind": "a", "x": "s"}, {"kind": "b", "z": 0}, {"x": 1}, {"kind": "c"}]
    check(tl, schema, valid, invalid)
    # Without the discriminator the complements stay (and keep exactly-one).
    loose = {"type": "object", "allOf": [{"oneOf": COMPLEMENTABLE}]}
    assert (
        schema_to_grammar(loose, limits=Limits())[0].to_ebnf()
        != schema_to_grammar(loose, limits=Limits(), oneof="anyof")[0].to_ebnf()
    )
    check(tl, loose, [{"x": 1, "y": True}, {"kind": "a", "z": None, "x": 2}], [{"y": True, "z": None}, {}, {"x": None}])


def test_oneof_disjoint_on_objects_only_keeps_complements_to_other_types(tl: TokenLevel) -> None:
    from logitgate.frontends.json_schema import schema_to_grammar
    from logitgate.limits import Limits

    # Branches without "type": every one accepts every non-object, so exactly-one rejects those;
    # objects hold one discriminator, so there the branches are alternatives as they stand
    # (JsonSchemaStore/testenvironments' config).
    branches = [
        {"properties": {"kind": {"const": k}, f"x{i}": {"type": "integer"}, "y": {"type": "string"}}}
        for i, k in enumerate("abcd")
    ]
    schema = {"required": ["kind"], "oneOf": branches}
    exact, _ = schema_to_grammar(schema, limits=Limits())
    anyof, _ = schema_to_grammar(schema, limits=Limits(), oneof="anyof")
    assert len(exact.rules) < 2 * len(anyof.rules), (len(exact.rules), len(anyof.rules))
    valid = [{"kind": "a", "x0": 1}, {"kind": "b", "x0": "s", "x1": 2}, {"kind": "d", "y": ""}]
    invalid = [5, "s", None, [], {"kind": "a", "x0": "s"}, {"kind": "e"}, {}, {"kind": "c", "y": 1}]
    check(tl, schema, valid, invalid)


def test_oneof_not_disjoint_anywhere_stays_refused(tl: TokenLevel) -> None:
    # Without the required discriminator both branches accept {"x": ...}-less objects.
    schema = {"type": "object", "allOf": [{"oneOf": BRANCHES}]}
    with pytest.raises(lg.UnsupportedSchemaError) as e:
        tl.compiler.compile_json_schema(schema)
    assert (e.value.keyword, e.value.pointer) == ("oneOf", "/allOf/0/oneOf")
    g = tl.compiler.compile_json_schema(schema, lenient=True)
    assert g.dropped and g.dropped[0].startswith("/allOf/0/oneOf: oneOf:")


# -- patternProperties matching listed properties -----------------------------------------------


def test_pattern_matching_every_name_besides_a_listed_one(tl: TokenLevel) -> None:
    # WashingtonPost wp_55/wp_108: ".*" also matches the listed "basic".
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema",
        "properties": {"basic": {"type": "string"}},
        "patternProperties": {".*": {"type": "string"}},
        "required": ["basic"],
    }
    check(
        tl,
        schema,
        [{"basic": "x"}, {"basic": "x", "extra": "y", "basics": ""}, {"extra": "y", "basic": "x"}],
        [{"basic": None}, {"basic": "x", "extra": 1}, {"extra": "y"}, {}],
    )
    assert_walks_valid(schema)


PREFIXED = {
    "type": "object",
    "properties": {"a1": {"type": "integer"}, "b": {"type": "boolean"}},
    "patternProperties": {"^a[0-9]+$": {"minimum": 5}},
}


def test_listed_member_satisfies_its_pattern_too(tl: TokenLevel) -> None:
    check(
        tl,
        PREFIXED,
        [{"a1": 7}, {"a1": 5, "a22": 9.5}, {"a2": "s", "b": True}],
        [{"a1": 3}, {"a1": "s"}, {"a1": 7.5}, {"a2": 3}, {"b": 1}],
        # The listed name in another spelling is still that name, never an "other" key.
        texts=('{"\\u0061\\u0031": 3}', '{"a\\u0031": "s"}'),
    )
    for value in assert_walks_valid(PREFIXED):
        for k, v in value.items():
            assert not re.fullmatch(r"a[0-9]+", k) or type(v) not in (int, float) or v >= 5, value


def test_listed_member_its_pattern_forbids(tl: TokenLevel) -> None:
    schema = {
        "type": "object",
        "properties": {"x-a": {"type": "string"}, "y": {}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
    }
    check(tl, schema, [{"x-b": 1}, {"y": "s", "x-": 2}, {}], [{"x-a": "s"}, {"x-a": 1}, {"z": 1}, {"x-b": "s"}])


def test_pattern_with_overlap_and_property_names(tl: TokenLevel) -> None:
    # propertyNames enums take the pattern's names they list, the listed member once.
    schema = {
        "type": "object",
        "properties": {"ab": {"type": "integer"}},
        "patternProperties": {"^a": {"maximum": 3}},
        "propertyNames": {"enum": ["ab", "ac", "b"]},
    }
    check(tl, schema, [{"ab": 2, "ac": 3, "b": "s"}, {}], [{"ab": 4}, {"ac": 4}, {"ad": 1}, {"ab": "s"}])


# -- format with maxLength -----------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "n"), [("email", 30), ("email", 100), ("uri", 40), ("uri", 2000), ("hostname", 20)])
def test_format_fitted_to_max_length_is_sound(fmt: str, n: int) -> None:
    schema = {"type": "string", "format": fmt, "maxLength": n}
    for value in assert_walks_valid(schema, n=30):
        assert len(value) <= n and re.fullmatch(_FORMATS[fmt], value), value


def test_format_with_max_length_instances(tl: TokenLevel) -> None:
    # JsonSchemaStore band-manifest's contactEmail, Github_hard o34872's mbox and webLink.
    check(
        tl,
        {"type": "string", "format": "email", "maxLength": 100},
        ["john.doe@example.com", "a@b.co", "x" * 30 + "@" + "h" * 15 + ".org"],
        ["x" * 60 + "@" + "h" * 40 + ".org", "invalid_email"],
    )
    # The departure: a local part and a host of at most 33 characters each (the 97 characters
    # the shortest email leaves, shared by its three growing parts), the host's first label 17.
    g = tl.compiler.compile_json_schema({"type": "string", "format": "email", "maxLength": 100})
    assert not tl.accepts(g, json.dumps("x" * 40 + "@example.org"))
    check(
        tl,
        {"type": "string", "format": "uri", "maxLength": 2000},
        ["https://www.example.com/data/dictionary.html?lang=en#top", "urn:isbn:0451450523"],
        ["https://" + "a" * 2000],
    )
    g = tl.compiler.compile_json_schema({"type": "string", "format": "uri", "maxLength": 2000})
    assert not tl.accepts(g, json.dumps("not a uri"))  # (jsonschema checks uri only with rfc3987)
    # A minLength the format's shortest text does not meet besides: exact where the format's
    # minimal DFA times the length fits (pattern_dfa.py), else still refused, typed.
    check(
        tl,
        {"type": "string", "format": "email", "minLength": 8, "maxLength": 30},
        ["abc@d.ef", "x" * 20 + "@" + "h" * 5 + ".org"],
        ["a@b.cd", "x" * 21 + "@" + "h" * 5 + ".org", "abcdefgh"],
    )
    with pytest.raises(lg.UnsupportedSchemaError) as e:
        tl.compiler.compile_json_schema({"type": "string", "format": "email", "minLength": 8, "maxLength": 60})
    assert (e.value.keyword, e.value.pointer) == ("maxLength", "/format")
    check(tl, {"type": "string", "format": "email", "minLength": 3, "maxLength": 30}, ["a@b"], ["a" * 30 + "@b.c"])


def test_format_fitted_to_a_large_max_length_is_fitted_to_2048(tl: TokenLevel) -> None:
    # JsonSchemaStore sourcery_yaml_schema: uri with maxLength 65536 (fitted repetitions unroll).
    large = tl.compiler.compile_json_schema({"type": "string", "format": "uri", "maxLength": 65536})
    capped = tl.compiler.compile_json_schema({"type": "string", "format": "uri", "maxLength": 2048})
    assert large.num_states == capped.num_states < 40_000
    long_host = "https://" + "a" * 250 + ".org/" + "b" * 250
    check(tl, {"type": "string", "format": "uri", "maxLength": 65536}, [long_host, "urn:x"], ["https://" + "a" * 70000])
    assert not tl.accepts(large, json.dumps("https://" + "a" * 2100 + ".org/"))  # the departure
    # A count past int64 fits as well (a date-time's fraction digits were a repetition of 2**64).
    huge = tl.compiler.compile_json_schema({"type": "string", "format": "date-time", "maxLength": 2**64})
    assert (
        huge.num_states
        == tl.compiler.compile_json_schema({"type": "string", "format": "date-time", "maxLength": 2048}).num_states
    )
    assert tl.accepts(huge, json.dumps("2024-01-02T03:04:05.123Z"))


@pytest.mark.parametrize("pattern", ["^x", "b$", "[0-9]", "^(ab|cd)+$", "^[a-z]{2,3}$", "x.*1"])
def test_pattern_keys_except_listed_names_agree_with_jsonschema(tl: TokenLevel, pattern: str) -> None:
    # Listed names the pattern matches must be integers and strings at once (never present);
    # every other name the pattern matches is a string; nothing else is allowed.
    listed = ["xb", "ab", "x1", "abcd", "b"]
    schema = {
        "type": "object",
        "properties": {k: {"type": "integer"} for k in listed},
        "patternProperties": {pattern: {"type": "string"}},
        "additionalProperties": False,
    }
    keys = [*listed, "", "x", "xbb", "a", "abc", "abcdab", "cd", "x11", "xb1", "q", "ab0", "bb", "xyz1", "é"]
    v = oracle.validator(schema)
    values: list[Any] = [{k: x} for k in keys for x in ("s", 1)]
    check(tl, schema, [x for x in values if v.is_valid(x)], [x for x in values if not v.is_valid(x)])
