"""The lowering's emptiness check: a depth-first search for a derivation of the root
(``shows_text``), with the exact fixpoint over every rule behind it (``_productive``)."""

from __future__ import annotations

import random

import pytest

from logitgate.frontends.json_schema.rules import _productive, shows_text
from logitgate.grammar.ir import EMPTY, Alt, CharClass, Literal, Node, Ref, Repeat, Seq


def exact(rules: dict[str, Node]) -> set[str]:
    productive: set[str] = set()
    while True:
        more = {n for n, body in rules.items() if n not in productive and _productive(body, productive)}
        if not more:
            return productive
        productive |= more


def test_a_cycle_with_an_exit_later_in_the_choice() -> None:
    # The first alternative of "a" leads back to "a" (on the search's path: no text there);
    # the second ends.
    rules: dict[str, Node] = {
        "root": Seq((Literal(b"["), Ref("a"), Literal(b"]"))),
        "a": Alt((Seq((Ref("b"), Ref("a"))), Literal(b"x"))),
        "b": Alt((Ref("a"), CharClass(((97, 98),)))),
    }
    assert shows_text(rules, "root", 1000)


def test_no_text_is_never_shown() -> None:
    rules: dict[str, Node] = {
        "root": Alt((Seq((Literal(b"a"), Ref("loop"))), Ref("missing"), CharClass(()))),
        "loop": Seq((Literal(b"b"), Ref("loop"))),
    }
    assert not shows_text(rules, "root", 1000)
    assert "root" not in exact(rules)


def test_past_its_budget_it_gives_up() -> None:
    chain: dict[str, Node] = {f"r{i}": Seq((Literal(b"x"), Ref(f"r{i + 1}"))) for i in range(100)}
    chain["r100"] = EMPTY
    chain["root"] = Ref("r0")
    assert shows_text(chain, "root", 1000)
    assert not shows_text(chain, "root", 50)


def random_grammar(rng: random.Random, n: int) -> dict[str, Node]:
    def node(depth: int) -> Node:
        k = rng.randrange(7 if depth < 3 else 3)
        if k == 0:
            return Literal(rng.choice([b"", b"a"]))
        if k == 1:
            return CharClass(rng.choice([(), ((97, 99),)]))
        if k == 2:
            return Ref(f"r{rng.randrange(n + 1)}")  # r{n} is undefined
        if k == 3:
            return Repeat(node(depth + 1), rng.choice([0, 1, 2]), rng.choice([None, 3]))
        items = tuple(node(depth + 1) for _ in range(rng.randrange(4)))
        return Seq(items) if k in (4, 5) else Alt(items)

    rules = {f"r{i}": node(0) for i in range(n)}
    rules["root"] = Ref("r0")
    return rules


@pytest.mark.parametrize("seed", range(20))
def test_what_it_shows_the_exact_fixpoint_agrees_with(seed: int) -> None:
    rng = random.Random(seed)
    shown = 0
    for _ in range(100):
        rules = random_grammar(rng, rng.randrange(1, 8))
        productive = exact(rules)
        if shows_text(rules, "root", 10_000):
            shown += 1
            assert "root" in productive, rules
    assert shown > 0
