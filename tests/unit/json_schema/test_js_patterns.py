"""Pattern utilities of the JSON Schema frontend (json_schema/patterns.py): literal-prefix
disjointness and the NFA length product's pre-count."""

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
