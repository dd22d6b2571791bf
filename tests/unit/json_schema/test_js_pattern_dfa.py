"""Minimal DFAs of patterns and their length products (json_schema/pattern_dfa.py): the language
is exactly the pattern's strings of [lo, hi] code points (Python's ``re`` as the reference, on
random strings, strings sampled from the automaton and mutations of them), the automaton is
deterministic and minimal, and the JSON Schema frontend uses it for a pattern under length bounds
(falling back to the NFA product past its caps)."""

from __future__ import annotations

import itertools
import json
import random
import re
from collections.abc import Callable

import pytest

import logitgate as lg
from logitgate.frontends.json_schema import driver, pattern_dfa, schema_to_grammar
from logitgate.frontends.json_schema.patterns import _length_product_size, _Nfa
from logitgate.frontends.regex import regex_to_node
from logitgate.grammar.ir import Node
from logitgate.limits import DEFAULT_LIMITS

O21456_FROM = r"^[^@^\s]+@[^@^\.^\s]+(\.[^@^\.^\s]*)*.gov.uk"  # unanchored end: search semantics
O21456_TO = r"^[a-zA-Z0-9_.+-]+@[a-zA-Z0-9-]+\.[a-zA-Z0-9-.]+$"
HOSTNAME = r"^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,6}$"

# (pattern, lo, hi, search): search patterns have JSON Schema semantics (re.search), the others
# are matched in full. Characters where ECMAScript and Python classes differ (\r, non-ASCII
# letters under \w, U+2028 under .) stay out of the test alphabet.
CASES = [
    (O21456_FROM, 5, 40, True),
    (O21456_TO, 5, 30, True),
    (HOSTNAME, 4, 30, True),
    (r"[A-Za-z0-9-_.:]{1,255}", 2, 12, True),
    (r"[A-Za-z0-9-_.:]{1,255}", 1, 9, False),
    (r"(foo|ba[rz]|qu+x)(-(foo|bar))*", 3, 20, False),
    (r"((ab|c){1,3}-){2,4}", 8, 20, False),
    (r"(ab|a)*b", 2, 9, True),
    (r"[a-z]+(\.[a-z]+)*", 0, None, False),
    (r"(\S+\s+){0,3}\S+", 4, 14, False),
]
ALPHABET = "abcfgkoqrsuvxz.@-_:9AZ^ \té€"
# Characters the two regex dialects class differently: Python's \s holds \x1c-\x1f and U+0085
# but not U+FEFF, its . holds \r, U+2028 and U+2029. Sampled strings avoid them.
CONTESTED = {*range(0x1C, 0x20), 0x85, 0xFEFF, 0x0D, 0x2028, 0x2029, *range(0xD800, 0xE000)}


def _node(pattern: str, search: bool) -> Node:
    node, _ = regex_to_node(pattern, DEFAULT_LIMITS, anchored_search=search)
    return node


def _reference(pattern: str, lo: int, hi: int | None, search: bool, text: str) -> bool:
    fits = lo <= len(text) and (hi is None or len(text) <= hi)
    found = re.search(pattern, text) if search else re.fullmatch(pattern, text)
    return fits and found is not None


def _product_accepts(product: pattern_dfa.LengthProduct, text: str) -> bool:
    pair = (0, 0)
    if pair not in product.pairs:
        return False
    for ch in text:
        _, moves = product.pairs[pair]
        nxt = [t for ranges, t in moves if any(a <= ord(ch) <= b for a, b in ranges)]
        if not nxt:
            return False
        pair = nxt[0]
    return product.pairs[pair][0]


def _samples(product: pattern_dfa.LengthProduct, rng: random.Random, n: int) -> list[str]:
    """Random accepted strings: walks of the product, each character drawn from a move's ranges."""
    out = []
    for _ in range(n):
        pair, chars = (0, 0), []
        while pair in product.pairs:
            accepts, moves = product.pairs[pair]
            if not moves or (accepts and rng.random() < 0.15):
                break
            ranges, pair = rng.choice(moves)
            a, b = rng.choice(ranges)
            picks = [c for c in (a, b, rng.randint(a, min(b, a + 200)), rng.randint(a, b)) if c not in CONTESTED]
            if not picks:
                break
            chars.append(chr(rng.choice(picks)))
        out.append("".join(chars))
    return out


def _mutations(text: str, rng: random.Random) -> list[str]:
    out = []
    for _ in range(6):
        i = rng.randint(0, len(text))
        c = rng.choice(ALPHABET)
        out += [text[:i] + c + text[i:], text[:i] + text[i + 1 :], text[:i] + c + text[i + 1 :]]
    return out


@pytest.mark.parametrize(("pattern", "lo", "hi", "search"), CASES)
def test_length_product_is_the_pattern_within_the_bounds(pattern: str, lo: int, hi: int | None, search: bool) -> None:
    nfa = _Nfa.build(_node(pattern, search), DEFAULT_LIMITS)
    assert nfa is not None
    dfa = pattern_dfa.minimal_dfa([nfa])
    assert dfa is not None
    product = pattern_dfa.with_length(dfa, lo, hi)
    assert product is not None and product.pairs
    rng = random.Random(pattern)
    texts = ["", "a@b.gov.uk", "x@y.z", "ab.cd", "foo-bar", "ab-c-", "aab", "a b c d"]
    texts += ["".join(rng.choices(ALPHABET, k=rng.randint(0, (hi or 16) + 2))) for _ in range(400)]
    sampled = _samples(product, rng, 150)
    texts += sampled + [m for s in sampled[:60] for m in _mutations(s, rng)]
    for text in texts:
        ref = _reference(pattern, lo, hi, search, text)
        assert _product_accepts(product, text) == ref, (text, ref)
        found = re.search(pattern, text) if search else re.fullmatch(pattern, text)
        assert dfa.accepts(text) == (found is not None), text
    assert sum(_reference(pattern, lo, hi, search, t) for t in texts) >= 150  # the samples did match


@pytest.mark.parametrize(("pattern", "lo", "hi", "search"), CASES)
def test_automaton_is_deterministic_and_trimmed(pattern: str, lo: int, hi: int | None, search: bool) -> None:
    nfa = _Nfa.build(_node(pattern, search), DEFAULT_LIMITS)
    assert nfa is not None
    dfa = pattern_dfa.minimal_dfa([nfa])
    assert dfa is not None
    for edges in dfa.edges:
        ranges = sorted(r for rs, _ in edges for r in rs)
        assert all(b1 < a2 for (_, b1), (a2, _) in itertools.pairwise(ranges))  # one target per code point
    product = pattern_dfa.with_length(dfa, lo, hi)
    assert product is not None
    # Every kept pair accepts or moves on to a kept pair: the grammar has no dead-end rule.
    for accepts, moves in product.pairs.values():
        assert accepts or moves
        assert all(t in product.pairs for _, t in moves)


def test_minimal_and_canonical() -> None:
    def dfa(pattern: str) -> pattern_dfa.Dfa:
        nfa = _Nfa.build(_node(pattern, False), DEFAULT_LIMITS)
        assert nfa is not None
        d = pattern_dfa.minimal_dfa([nfa])
        assert d is not None
        return d

    assert len(dfa(r"(a|b)*abb").edges) == 4  # the textbook example: 4 states, no dead state
    assert dfa(r"(a|b)*") == dfa(r"(a*b*)*")  # one language, one automaton
    assert dfa(r"[a-c]x|[b-d]x") == dfa(r"[a-d]x")
    assert dfa(r"a{2,4}") != dfa(r"a{2,5}")


def test_empty_language_has_no_pair() -> None:
    nfa = _Nfa.build(_node(r"abc", False), DEFAULT_LIMITS)
    assert nfa is not None
    dfa = pattern_dfa.minimal_dfa([nfa])
    assert dfa is not None
    assert pattern_dfa.with_length(dfa, 4, 9) == pattern_dfa.LengthProduct({})
    assert pattern_dfa.with_length(dfa, 0, 2) == pattern_dfa.LengthProduct({})
    assert pattern_dfa.with_length(dfa, 3, 3) is not None


def test_intersection_of_patterns() -> None:
    a = _Nfa.build(_node(r"[a-z]+@[a-z]+", False), DEFAULT_LIMITS)
    b = _Nfa.build(_node(r".*@(gov|org)", False), DEFAULT_LIMITS)
    assert a is not None and b is not None
    dfa = pattern_dfa.minimal_dfa([a, b])
    assert dfa is not None
    for text in ["x@gov", "x@org", "x@com", "@gov", "xy@orgg", "x@g@gov", "ab@gov"]:
        both = re.fullmatch(r"[a-z]+@[a-z]+", text) is not None and re.fullmatch(r".*@(gov|org)", text) is not None
        assert dfa.accepts(text) == both, text


def test_caps_refuse_or_leave_unminimized() -> None:
    nfa = _Nfa.build(_node(O21456_FROM, True), DEFAULT_LIMITS)
    assert nfa is not None
    assert pattern_dfa.determinize(nfa, max_states=10) is None
    full = pattern_dfa.determinize(nfa)
    assert full is not None
    minimal, partial = pattern_dfa.minimize(full), pattern_dfa.minimize(full, max_work=5)
    assert len(minimal.edges) < len(partial.edges)  # stopped early: states stay apart, language kept
    rng = random.Random(3)
    for text in ["a@b.gov.uk", "a@b.c.gov.ukx", "a@b", *("".join(rng.choices(ALPHABET, k=12)) for _ in range(200))]:
        assert minimal.accepts(text) == partial.accepts(text) == full.accepts(text)
    assert pattern_dfa.with_length(minimal, 5, 254, max_pairs=100) is None


def test_o21456_rule_counts() -> None:
    # One rule per (minimal DFA state, length) kept, against one per (Thompson NFA state,
    # length) before: not fewer rules (the subsets of `.gov.uk`'s lookahead are states of their
    # own), but each position of the string has one live rule, not one per active NFA state.
    counts = {}
    for pattern in (O21456_FROM, O21456_TO):
        nfa = _Nfa.build(_node(pattern, True), DEFAULT_LIMITS)
        assert nfa is not None
        dfa = pattern_dfa.minimal_dfa([nfa])
        assert dfa is not None
        product = pattern_dfa.with_length(dfa, 5, 254)
        assert product is not None
        counts[pattern] = (_length_product_size(nfa, 254, 254), len(dfa.edges), len(product.pairs))
    assert counts[O21456_FROM] == (3492, 19, 4411)
    assert counts[O21456_TO] == (1761, 6, 1251)


def test_frontend_uses_the_dfa_and_falls_back(
    monkeypatch: pytest.MonkeyPatch, new_lowering: Callable[..., driver.Lowering]
) -> None:
    from logitgate.frontends.json_schema import strings

    schema = {"type": "string", "pattern": O21456_TO, "minLength": 5, "maxLength": 40}
    rules = schema_to_grammar(schema, limits=DEFAULT_LIMITS)[0].rules
    assert any(n.startswith("dl") for n in rules) and not any(n.startswith("nl") for n in rules)
    monkeypatch.setattr(strings, "dfa_with_length", lambda *a, **k: None)
    rules = schema_to_grammar(schema, limits=DEFAULT_LIMITS)[0].rules
    assert any(n.startswith("nl") for n in rules) and not any(n.startswith("dl") for n in rules)
    node = _node(O21456_TO, True)
    assert new_lowering().strs.with_length([node], 5, 40) is not None


@pytest.mark.parametrize(("pattern", "lo", "hi", "search"), [c for c in CASES if c[3]])
def test_compiled_schema_accepts_exactly(
    compiler: lg.Compiler, pattern: str, lo: int, hi: int | None, search: bool
) -> None:
    # End to end: the schema's grammar, JSON-encoded strings (escapes included), byte by byte.
    schema = {"type": "string", "pattern": pattern, "minLength": lo, **({"maxLength": hi} if hi is not None else {})}
    g = compiler.compile_json_schema(schema)
    rng = random.Random(pattern + "e2e")
    texts = ["".join(rng.choices(ALPHABET + '"\\\n', k=rng.randint(0, (hi or 16) + 2))) for _ in range(150)]
    nfa = _Nfa.build(_node(pattern, True), DEFAULT_LIMITS)
    assert nfa is not None
    dfa = pattern_dfa.minimal_dfa([nfa])
    assert dfa is not None
    product = pattern_dfa.with_length(dfa, lo, hi)
    assert product is not None
    texts += _samples(product, rng, 60)
    for text in texts:
        for encoded in {json.dumps(text), json.dumps(text, ensure_ascii=False)}:
            m = g.matcher()
            ok = bool(m.accept_bytes(encoded.encode("utf-8"))) and bool(m.is_complete())
            assert ok == _reference(pattern, lo, hi, search, text), (text, encoded)


def test_products_stop_at_the_schema_total(monkeypatch: pytest.MonkeyPatch) -> None:
    # One schema's length products (DFA or NFA) share one budget: either string alone fits, the
    # two together would pass it and the second is refused (typed).
    from logitgate.frontends.json_schema import strings

    nfa = _Nfa.build(_node(O21456_TO, True), DEFAULT_LIMITS)
    assert nfa is not None
    dfa = pattern_dfa.minimal_dfa([nfa])
    assert dfa is not None
    # The smallest budget b's product fits in (the walk counts reachable pairs, keeps live ones).
    need = next(m for m in range(1, 1000) if pattern_dfa.with_length(dfa, 5, 13, max_pairs=m) is not None)
    monkeypatch.setattr(strings, "_LENGTH_PRODUCT_RULES_TOTAL", need)
    a = {"type": "string", "pattern": O21456_TO, "minLength": 5, "maxLength": 12}
    b = {**a, "maxLength": 13}
    for one in (a, b):
        assert schema_to_grammar(one, limits=DEFAULT_LIMITS)[0].rules
    with pytest.raises(lg.UnsupportedSchemaError):
        schema_to_grammar({"type": "object", "properties": {"a": a, "b": b}}, limits=DEFAULT_LIMITS)
