"""String-only sets with disjunctions (json_schema/distribute.py, StringEmitter.emit_union): under
length bounds, the set's intersections and unions of patterns, as they nest, become one minimal
DFA × the length, one live rule per position where the branches multiplied out would be one
each; the language is exactly the set's (Python's ``re`` and jsonschema as references), and the
usual per-branch lowering stays where the tree does not apply."""

from __future__ import annotations

import random
import re
from typing import Any

import jsonschema
import pytest
from tests.unit.json_schema.acceptance import accepts

import logitgate as lg
from logitgate.frontends.json_schema import pattern_dfa, schema_to_grammar
from logitgate.frontends.json_schema.patterns import _Nfa
from logitgate.frontends.regex import regex_to_node
from logitgate.limits import DEFAULT_LIMITS

ALPHABET = "ab12xyzAZ.-"
PATTERNS = [r"^a+b", r"12", r"^[xyz]{2,4}$", r"[A-Z]\.", r"b$", r"^(ab|ba)*$", r"-\d"]


def _dfa(pattern: str) -> pattern_dfa.Dfa:
    node, _ = regex_to_node(pattern, DEFAULT_LIMITS, anchored_search=True)
    nfa = _Nfa.build(node, DEFAULT_LIMITS)
    assert nfa is not None
    dfa = pattern_dfa.minimal_dfa([nfa])
    assert dfa is not None
    return dfa


@pytest.mark.parametrize("seed", range(6))
def test_union_is_the_union_of_the_languages(seed: int) -> None:
    rng = random.Random(seed)
    picked = rng.sample(PATTERNS, rng.randint(2, 4))
    whole = pattern_dfa.minimal_union([_dfa(p) for p in picked])
    assert whole is not None
    for _ in range(400):
        text = "".join(rng.choices(ALPHABET, k=rng.randint(0, 8)))
        assert whole.accepts(text) == any(re.search(p, text) for p in picked), (picked, text)


def test_union_of_nothing_but_empty_languages_is_empty() -> None:
    never = pattern_dfa.Dfa(((),), (False,))
    whole = pattern_dfa.minimal_union([never, never])
    assert whole is not None and not any(whole.accepting)


def _any_of(patterns: list[str], **bounds: int) -> dict[str, Any]:
    return {"type": "string", "anyOf": [{"pattern": p} for p in patterns], **bounds}


def _length_products(rules: dict[str, Any]) -> set[str]:
    """The distinct length products a grammar holds (their rules are named dl<base>_<q>_<k>)."""
    return {name.split("_")[0] for name in rules if name.startswith("dl")}


def test_bounded_branches_become_one_product() -> None:
    rules = schema_to_grammar(_any_of(PATTERNS[:4], minLength=2, maxLength=9), limits=DEFAULT_LIMITS)[0].rules
    assert len(_length_products(rules)) == 1
    # Unbounded, each branch stays its own compact pattern: no product at all.
    rules = schema_to_grammar(_any_of(PATTERNS[:4]), limits=DEFAULT_LIMITS)[0].rules
    assert _length_products(rules) == set()


def test_nested_not_and_any_of_gather_to_one_union() -> None:
    # not (not A and not B) is A or B: every leaf branch is a pattern under the root's bounds.
    schema = {
        "type": "string",
        "maxLength": 12,
        "anyOf": [
            {"not": {"allOf": [{"not": {"pattern": "a+b"}}, {"not": {"pattern": "12"}}]}},
            {"anyOf": [{"pattern": "^[xyz]{2,4}$"}, {"pattern": "-\\d"}]},
        ],
    }
    rules = schema_to_grammar(schema, limits=DEFAULT_LIMITS)[0].rules
    assert len(_length_products(rules)) == 1


def _nested(depth: int, width: int, patterns: list[str]) -> dict[str, Any]:
    """not (allOf of not (anyOf ...)) nested ``depth`` levels, ``width`` wide: an anyOf of
    anyOfs whose leaves are ``patterns`` in turn (width ** depth leaves multiplied out)."""
    leaves = iter(patterns * (width**depth))

    def level(d: int) -> dict[str, Any]:
        if d == 0:
            return {"pattern": next(leaves)}
        return {"not": {"allOf": [{"not": level(d - 1)} for _ in range(width)]}}

    return level(depth)


def test_nesting_past_the_branch_cap_is_one_product(compiler: lg.Compiler) -> None:
    # 3 conjuncts, each an anyOf of 9 patterns: 729 branches multiplied out (past the 256 that
    # distribution takes), three unions intersected as they nest.
    conjuncts = [_nested(2, 3, PATTERNS[i : i + 4]) for i in range(3)]
    schema = {"type": "string", "minLength": 2, "maxLength": 9, "allOf": conjuncts}
    rules = schema_to_grammar(schema, limits=DEFAULT_LIMITS)[0].rules
    assert len(_length_products(rules)) == 1
    g = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random("nested")
    hits = 0
    for _ in range(600):
        text = "".join(rng.choices(ALPHABET, k=rng.randint(0, 11)))
        valid = validator.is_valid(text)
        hits += valid
        assert accepts(g, text) == valid, text
    assert 20 <= hits <= 580  # (both languages sampled)


@pytest.mark.parametrize(
    ("schema", "products"),
    [
        # An inner bound the root's imply adds nothing: still one product.
        ({"type": "string", "maxLength": 6, "anyOf": [{"pattern": "a", "maxLength": 8}, {"pattern": "12"}]}, 1),
        # A branch with no pattern holds every string (under the root's bounds).
        ({"type": "string", "maxLength": 6, "anyOf": [{"pattern": "a"}, {"maxLength": 7}, {"pattern": "12"}]}, 1),
        # A tighter inner bound is not the root's: the branches keep their own products.
        ({"type": "string", "maxLength": 6, "anyOf": [{"pattern": "a", "maxLength": 4}, {"pattern": "12"}]}, 2),
        # A branch that holds no string is left out of the union.
        ({"type": "string", "maxLength": 6, "anyOf": [{"pattern": "a"}, {"type": "integer"}, {"pattern": "b$"}]}, 1),
        # A nested anyOf whose every branch holds no string empties its set, not the union.
        (
            {
                "type": "string",
                "maxLength": 6,
                "anyOf": [{"pattern": "a"}, {"pattern": "12"}, {"anyOf": [{"type": "integer"}, {"type": "null"}]}],
            },
            1,
        ),
    ],
    ids=["implied-bound", "no-pattern", "own-bound", "no-string", "empty-nested"],
)
def test_branches_in_the_tree(compiler: lg.Compiler, schema: dict[str, Any], products: int) -> None:
    assert len(_length_products(schema_to_grammar(schema, limits=DEFAULT_LIMITS)[0].rules)) == products
    g = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(repr(schema))
    for _ in range(300):
        text = "".join(rng.choices(ALPHABET, k=rng.randint(0, 8)))
        assert accepts(g, text) == validator.is_valid(text), text


def test_a_node_two_branches_share_is_built_before_either(compiler: lg.Compiler) -> None:
    # The any-string node `true` is an alternative of the outer anyOf's branch and of the oneOf's
    # branch inside it; walked depth first, the branch that reaches it second was ordered before
    # it (the fuzzer's KeyError in emit_union, found 2026-12-07).
    schema = {
        "type": "string",
        "maxLength": 3,
        "anyOf": [{"anyOf": [{"anyOf": [True]}], "oneOf": [{"anyOf": [True], "pattern": "^a"}]}],
    }
    g = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in ["", "a", "ab", "abc", "abcd", "b", "ba", "1a"]:
        assert accepts(g, text) == validator.is_valid(text), text


def test_nesting_past_the_depth_cap_is_distributed(compiler: lg.Compiler) -> None:
    # 40 anyOfs each inside the last: past the tree's depth cap, the usual path lowers it.
    inner: dict[str, Any] = {"pattern": "ab"}
    for p in PATTERNS * 6:
        inner = {"anyOf": [{"pattern": p}, inner]}
    schema = {"type": "string", "maxLength": 5, **inner}
    g = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in ["ab", "12", "xyz", "b", "zzzzzz", "A.", "-1", "q"]:
        assert accepts(g, text) == validator.is_valid(text), text


@pytest.mark.parametrize("seed", range(6))
def test_compiled_union_accepts_exactly(compiler: lg.Compiler, seed: int) -> None:
    rng = random.Random(f"e2e{seed}")
    picked = rng.sample(PATTERNS, rng.randint(2, 4))
    lo, hi = rng.randint(0, 3), rng.randint(4, 10)
    schema = _any_of(picked, minLength=lo, maxLength=hi)
    if rng.random() < 0.5:
        schema["pattern"] = "[ab1]"  # a conjunct every branch carries
    g = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for _ in range(300):
        text = "".join(rng.choices(ALPHABET, k=rng.randint(0, hi + 2)))
        assert accepts(g, text) == validator.is_valid(text), (schema, text)


def test_branches_with_their_own_bounds_keep_their_own_products() -> None:
    schema = {"type": "string", "anyOf": [{"pattern": "a", "maxLength": 3}, {"pattern": "b", "maxLength": 5}]}
    assert len(_length_products(schema_to_grammar(schema, limits=DEFAULT_LIMITS)[0].rules)) == 2


@pytest.mark.parametrize(
    "schema",
    [
        # Branches with different length bounds; a branch that is not a string; an enum branch.
        {"type": "string", "anyOf": [{"pattern": "a", "maxLength": 3}, {"pattern": "b", "maxLength": 5}]},
        {"maxLength": 5, "anyOf": [{"type": "string", "pattern": "a"}, {"type": "integer"}]},
        {"type": "string", "maxLength": 5, "anyOf": [{"pattern": "a"}, {"enum": ["bb", "cc"]}]},
    ],
    ids=["lengths", "types", "enum"],
)
def test_other_branches_are_lowered_one_by_one(compiler: lg.Compiler, schema: dict[str, Any]) -> None:
    g = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for value in ["a", "aa", "bbbb", "bb", "cc", "abcdef", 7, "ba"]:
        assert accepts(g, value) == validator.is_valid(value), value


@pytest.mark.parametrize("error", [lg.CompileTimeout(1.0), lg.CompileCancelled()], ids=["timeout", "cancel"])
def test_a_stop_while_gathering_branches_is_not_swallowed(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    # The gathering turns the frontend's own refusals into "take the usual path"; a timeout or a
    # cancellation must still end the compile.
    from logitgate.frontends.json_schema import distribute

    def stop() -> None:
        raise error

    monkeypatch.setattr(distribute, "checkpoint", stop)
    with pytest.raises(type(error)):
        schema_to_grammar(_any_of(PATTERNS[:3], maxLength=9), limits=DEFAULT_LIMITS)
