"""Pattern utilities of the JSON Schema frontend (json_schema/patterns.py): literal-prefix
disjointness, the NFA length product's pre-count and the fitting of a format to a length."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

import logitgate as lg
from logitgate.frontends.json_schema import driver


def test_overlapping_patterns_by_prefix() -> None:
    # _overlapping_atoms finds by literal prefix what _prefix_disjoint decides pair by pair.
    from logitgate.frontends.json_schema.patterns import _overlapping_atoms, _prefix_disjoint

    rng = random.Random(7)
    pieces = ["a", "ab", "abc", "b", "x_", "x", ""]
    patterns = [
        ("^" if rng.random() < 0.8 else "") + "".join(rng.choices(pieces, k=2)) + rng.choice(["", ".*", "[0-9]"])
        for _ in range(60)
    ]
    pairs = [(p, i % 23) for i, p in enumerate(patterns)]
    overlapping = _overlapping_atoms(pairs)
    for p, atom in pairs:
        expected = {atom} | {a2 for p2, a2 in pairs if not _prefix_disjoint(p, p2)}
        assert {atom} | overlapping(p) == expected, p


@pytest.mark.parametrize(
    ("pattern", "lo", "hi"),
    [
        ("^[a-z]+(\\.[a-z]+)*$", 3, 5),
        ("^(ab|c)*d?$", 2, None),
        ("^(?:\\S+\\s+){0,3}\\S+$", 0, 12),
        # Long lengths: the layers repeat (periods 3 and 1), and are counted by periods.
        ("^(abc)*x?$", 0, 700),
        ("^(abc)*x?$", 1, 701),
        ("^[a-z]{2,9}(-[a-z]{2,9})*$", 0, 150),
        ("^(ab|c)*$", 40, None),
        ("^(abc)*x?$", 40, None),
        ("^(abc)*x?$", 41, None),
    ],
)
def test_length_product_count_is_the_rules_built(
    pattern: str, lo: int, hi: int | None, new_lowering: Callable[..., driver.Lowering]
) -> None:
    # The pre-count decides whether the product is built at all: it must count exactly the
    # (state, length) rules the product builds, or a fitting product would be refused.
    from logitgate.frontends.json_schema import patterns
    from logitgate.frontends.regex import regex_to_node

    limits = lg.Limits()
    node, _ = regex_to_node(pattern, limits, anchored_search=True)
    lowering = new_lowering(limits)
    nfa = patterns._Nfa.build(node, limits)
    assert nfa is not None
    assert lowering.strs.nfa_with_length([nfa], lo, hi) is not None
    built = [n for n in lowering.table.rules if n.startswith("nl")]  # its rules; encoded classes add others
    cap = hi if hi is not None else lo
    assert patterns._length_product_size(nfa, hi, cap) == len(built)


def test_fitting_an_optional_part_keeps_one_shape() -> None:
    # `(x[a-z]*)?` fitted to 40: one copy of the part fitted to 40 holds the copy fitted to a
    # quarter of it, which would only add a head to every configuration reaching it (a URI's
    # userinfo and port were each there twice).
    from logitgate.frontends.json_schema.patterns import _fit_length
    from logitgate.grammar.ir import Alt, CharClass, Literal, Repeat, Seq
    from logitgate.limits import Limits

    part = Seq((Literal(b"x"), Repeat(CharClass(((97, 122),)), 0, None)))
    fitted = _fit_length(Repeat(part, 0, 1), 40, Limits())
    assert isinstance(fitted, Repeat) and (fitted.min, fitted.max) == (0, 1), fitted
    # A part that may repeat keeps its shapes: one long copy, a few, many short ones.
    shapes = _fit_length(Repeat(part, 0, None), 40, Limits())
    assert isinstance(shapes, Alt) and len(shapes.items) == 3, shapes
