"""Stand-ins (Grammar.stand_ins, cpp/core/stand_ins.cc): claims that one rule reads what another
reads, checked by the core, whose masks are taken from the stand-in only as far as it holds."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

import logitgate as lg
from logitgate import _core
from logitgate.frontends.json_schema import schema_to_grammar
from logitgate.grammar.ir import EMPTY, Alt, Grammar, Literal, Ref, Repeat, Seq
from logitgate.grammar.program import deserialize, serialize

BOUND = 30  # the counted chain's length
LONGEST = 12  # the test vocabulary's longest token, in bytes


@contextmanager
def stand_ins(enabled: bool) -> Iterator[None]:
    previous = _core._set_stand_ins(enabled)
    try:
        yield
    finally:
        _core._set_stand_ins(previous)


def _vocab() -> lg.Vocabulary:
    # "a" runs of 1..12 bytes, the shorter ones also followed by the closing quote; "b", "(a)";
    # EOS.
    runs = [b"a" * n for n in range(1, LONGEST + 1)]
    tokens = [b'"', b"b", b"(a)", *runs, *(r + b'"' for r in runs[:-1]), None]
    return lg.Vocabulary.from_tokens(tokens, eos_ids=[len(tokens) - 1])


def _counted(claim: str | None = "loop") -> Grammar:
    """A quoted run of at most BOUND characters (an ``a``, or a nest ``(...)`` around one),
    then any b's. Each position is a rule (``c{k}``) that reads its ``a`` itself and calls the
    recursive ``ch`` for a nest (so no position is inlined into another), with the claims that
    ``claim`` stands for each (``loop``: the same without a bound; ``As``: A's instead)."""
    rules: dict[str, object] = {
        "root": Seq((Literal(b'"'), Ref("c0"), Literal(b'"'))),
        "ch": Alt((Literal(b"a"), Seq((Literal(b"("), Ref("ch"), Literal(b")"))))),
        "bs": Alt((EMPTY, Seq((Literal(b"b"), Ref("bs"))))),
    }

    def position(then: str, letter: bytes = b"a") -> Alt:
        nest = Seq((Literal(b"("), Ref("ch"), Literal(b")"), Ref(then)))
        return Alt((EMPTY, Seq((Literal(letter), Ref(then))), nest, Seq((Literal(b"b"), Ref("bs")))))

    for k in range(BOUND):
        rules[f"c{k}"] = position(f"c{k + 1}")
    rules[f"c{BOUND}"] = Alt((EMPTY, Seq((Literal(b"b"), Ref("bs")))))
    rules["loop"] = position("loop")
    rules["As"] = position("As", b"A")  # the loop's shape, reading A's instead of a's
    claims = () if claim is None else tuple((f"c{k}", claim) for k in range(BOUND + 1))
    return Grammar(rules, stand_ins=claims)  # type: ignore[arg-type]


def _masks(vocab: lg.Vocabulary, grammar: Grammar, text: bytes) -> tuple[list[np.ndarray], int]:
    """The mask after each byte of ``text`` (fresh compile), and the configurations interned."""
    compiled = lg.Compiler(vocab, cache_size=0).compile_grammar(grammar)
    matcher = compiled.matcher()
    bits = lg.allocate_mask(vocab)
    masks = []
    for i in range(len(text) + 1):
        matcher.fill_mask(bits, row=0)
        masks.append(bits[0].copy())
        if i < len(text):
            assert matcher.accept_bytes(text[i : i + 1]), text[: i + 1]
    return masks, compiled._core.num_configurations


def test_a_claim_is_used_only_as_far_as_it_holds() -> None:
    # The loop agrees with position k for BOUND - k bytes: a run of 12 a's from position 19 would
    # pass the bound, which the loop allows. Every mask must be the counted grammar's own.
    vocab = _vocab()
    text = b'"' + b"a" * BOUND
    plain, plain_configs = _masks(vocab, _counted(None), text)
    claimed, claimed_configs = _masks(vocab, _counted(), text)
    for i, (want, got) in enumerate(zip(plain, claimed, strict=True)):
        assert (want == got).all(), f"mask after {i} bytes"
    # The loop stood in: its walks meet its few configurations again where the counted walks
    # interned one per position each token reaches.
    assert claimed_configs < plain_configs
    with stand_ins(False):
        assert _masks(vocab, _counted(), text)[1] == plain_configs


def test_a_false_claim_changes_no_mask() -> None:
    vocab = _vocab()
    text = b'"' + b"a" * BOUND
    plain, plain_configs = _masks(vocab, _counted(None), text)
    false, false_configs = _masks(vocab, _counted("As"), text)
    for i, (want, got) in enumerate(zip(plain, false, strict=True)):
        assert (want == got).all(), f"mask after {i} bytes"
    assert false_configs == plain_configs


@pytest.mark.parametrize(("low", "high"), [(0, 60), (45, 60), (50, 50)])
def test_an_unrolled_repetition_stands_in_for_its_own_positions(low: int, high: int) -> None:
    # No claims: the core pairs each position of the repetition of a called rule with the next,
    # and a position far from both bounds (where the bound is more than a token away) is served
    # by the farthest position that agrees with it for the longest token.
    nest = Alt((Literal(b"a"), Seq((Literal(b"("), Ref("ch"), Literal(b")")))))  # recursive: called
    grammar = Grammar({"root": Seq((Literal(b'"'), Repeat(Ref("ch"), low, high), Literal(b'"'))), "ch": nest})
    vocab = _vocab()
    text = b'"' + b"a" * high
    with stand_ins(False):
        walked, walked_configs = _masks(vocab, grammar, text)
    served, served_configs = _masks(vocab, grammar, text)
    for i, (want, got) in enumerate(zip(walked, served, strict=True)):
        assert (want == got).all(), f"mask after {i} bytes"
    assert served_configs < walked_configs


def test_stand_ins_survive_the_program() -> None:
    grammar = _counted()
    program, names = serialize(grammar, lg.Limits())
    assert deserialize(program, names) == grammar
    assert serialize(Grammar(grammar.rules), lg.Limits())[0] != program


def test_a_claim_of_an_undefined_rule_is_a_grammar_error() -> None:
    grammar = Grammar({"root": Literal(b"x")}, stand_ins=(("root", "nowhere"),))
    with pytest.raises(lg.GrammarError) as e:
        serialize(grammar, lg.Limits())
    assert e.value.code == "undefined-rule"
    assert "nowhere" in str(e.value)


def test_malformed_claims_in_a_program_are_refused() -> None:
    program, names = serialize(_counted(), lg.Limits())
    for broken in (program[:-4], program + b"\x00\x00\x00\x00"):
        with pytest.raises(lg.GrammarError) as e:
            deserialize(broken, names)
        assert e.value.code == "bad-program"


def test_the_json_schema_frontend_claims_counted_positions() -> None:
    schema = {"type": "string", "pattern": "^[a-z]+@[a-z]+$", "minLength": 3, "maxLength": 100}
    grammar, _ = schema_to_grammar(schema, limits=lg.Limits())
    assert grammar.stand_ins
    loops = {b for _, b in grammar.stand_ins}
    assert all(b in grammar.rules for b in loops)
    # Positions short of minLength, and those within the window of the bound, have none.
    counts = sorted(int(a.rsplit("_", 1)[1]) for a, _ in grammar.stand_ins)
    assert counts[0] >= 3 and counts[-1] <= 100 - 16
    # Without an upper bound the product loops by itself from minLength on.
    open_ended = {"type": "string", "pattern": "^[a-z]+@[a-z]+$", "minLength": 3}
    assert schema_to_grammar(open_ended, limits=lg.Limits())[0].stand_ins == ()


def test_a_wide_repetition_becomes_a_chain_with_its_loop_standing_in() -> None:
    schema = {"type": "string", "pattern": r"^(?:\S+\s+){0,99}\S+$"}
    grammar, _ = schema_to_grammar(schema, limits=lg.Limits())
    chain = [name for name in grammar.rules if name.startswith("rc") and name.rsplit("_", 1)[1].isdigit()]
    assert len(chain) == 100
    # Every count that leaves the window to its bound: 0..83.
    assert len(grammar.stand_ins) == 84
    assert {b for _, b in grammar.stand_ins} == {chain[0].rsplit("_", 1)[0] + "_loop"}
    # One character repeated (the core's capacities serve it), few counts, or a part that may be
    # empty (its loop would call itself before reading a byte): no chain.
    vocab = lg.Vocabulary.from_tokens([bytes([b]) for b in range(32, 127)] + [None], eos_ids=[95])
    for pattern in (r"^[a-z]{0,99}$", r"^(?:ab){0,5}$", r"^(a*b*){0,50}$", r"^(ab|){0,40}c$"):
        assert schema_to_grammar({"type": "string", "pattern": pattern}, limits=lg.Limits())[0].stand_ins == ()
        lg.Compiler(vocab).compile_json_schema({"type": "string", "pattern": pattern})


def test_a_wide_repetition_under_length_bounds_is_claimed_by_its_relaxed_loop() -> None:
    schema = {"type": "string", "pattern": r"^(?:[a-z]+ ){0,20}[a-z]+$", "minLength": 2, "maxLength": 120}
    grammar, _ = schema_to_grammar(schema, limits=lg.Limits())
    assert grammar.stand_ins
    # The loop is the pattern's DFA with the count unbounded: two states, not forty.
    assert len({b for _, b in grammar.stand_ins}) == 2


def test_stand_ins_follow_a_schema_into_a_structural_tag() -> None:
    vocab = lg.Vocabulary.from_tokens([bytes([b]) for b in range(32, 127)] + [None], eos_ids=[95])
    words = {"type": "string", "pattern": r"^(?:\S+\s+){0,99}\S+$"}
    tag = {
        "type": "triggered_tags",
        "triggers": ["<note>"],
        "tags": [
            {
                "type": "tag",
                "begin": "<note>",
                "content": {"type": "json_schema", "json_schema": words},
                "end": "</note>",
            }
        ],
    }
    grammar = lg.Compiler(vocab).compile_structural_tag(tag).grammar
    assert len(grammar.stand_ins) == 84
    assert all(a in grammar.rules and b in grammar.rules for a, b in grammar.stand_ins)


@pytest.mark.parametrize("trailer", [[0], [1, 0], [1, 0, 9999], [2, 0, 1], [-1, 0, 1]])
def test_the_core_refuses_malformed_claims(trailer: list[int]) -> None:
    vocab = _vocab()
    compiler = lg.Compiler(vocab)
    program, names = serialize(_counted(None), lg.Limits())
    bad = program + np.array(trailer, dtype=np.int32).tobytes()
    with pytest.raises(lg.GrammarError) as e:
        _core.compile(vocab._core, bad, names, compiler._core_limits, None)
    assert e.value.code == "bad-program"


def test_random_claims_change_no_mask() -> None:
    # Claims between random positions of a length product, half of them of one pattern state at
    # two counts (alike but where a bound bites: one may end or go on where the other may not):
    # the core uses those that hold as far as the vocabulary's tokens reach (three bytes here),
    # and no mask changes.
    import itertools
    import random

    schema = {"type": "string", "pattern": "^[a-c]+x[a-c]*$", "minLength": 4, "maxLength": 24}
    base, _ = schema_to_grammar(schema, limits=lg.Limits())
    positions = sorted(n for n in base.rules if n.startswith("dl") and n.count("_") == 2)
    by_state: dict[str, list[str]] = {}  # a pattern state's positions: alike but for the counts
    for name in positions:
        by_state.setdefault(name.rsplit("_", 1)[0], []).append(name)
    alphabet = [b"a", b"b", b"c", b"x", b'"']
    tokens = [b"".join(t) for n in (1, 2, 3) for t in itertools.product(alphabet, repeat=n)]
    vocab = lg.Vocabulary.from_tokens([*tokens, None], eos_ids=[len(tokens)])
    bits = lg.allocate_mask(vocab)
    used = 0
    for seed in range(8):
        rng = random.Random(seed)
        firsts = [rng.choice(positions) for _ in range(60)]
        claims = tuple(
            (a, rng.choice(by_state[a.rsplit("_", 1)[0]] if rng.random() < 0.5 else positions)) for a in firsts
        )
        plain = lg.Compiler(vocab, cache_size=0).compile_grammar(Grammar(base.rules))
        claimed = lg.Compiler(vocab, cache_size=0).compile_grammar(Grammar(base.rules, stand_ins=claims))
        for _ in range(6):
            a, b = plain.matcher(), claimed.matcher()
            for _ in range(30):
                a.fill_mask(bits, row=0)
                want = bits[0].copy()
                b.fill_mask(bits, row=0)
                assert (bits[0] == want).all(), (seed, claims)
                allowed = [t for t in range(len(tokens)) if want[t >> 5] >> (t & 31) & 1]
                if not allowed:
                    break
                t = rng.choice(allowed)
                assert a.accept(t) and b.accept(t)
        used += claimed._core.num_configurations != plain._core.num_configurations
    assert used > 0  # some claims held far enough to be used
