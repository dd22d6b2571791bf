"""Token budgets (CompiledGrammar.token_budget) and budget-aware masks (logitgate.budget).

The oracles: a breadth-first search over short byte strings for the shortest document; the
matcher itself for the cost after each token (fork, accept, cost); random walks through the
budget-cut masks, which must always end in a complete document within max_tokens.
"""

from __future__ import annotations

import itertools
import random
from typing import Any

import numpy as np
import pytest
from tests.e2e.tasks import TASKS
from tests.unit.test_matcher import NESTED_AMBIGUOUS
from tests.unit.trees import tree_document, tree_schema

import logitgate as lg
from logitgate import _core
from logitgate.budget import ACCEPTED, NO_ROOM, REJECTED, BudgetGuard, budget_core
from logitgate.masks import mask_to_bool

BYTES_VOCAB = [bytes([b]) for b in range(256)] + [b"yes", b"no", b"ab", b"abc", b'{"', b'":', b"<eos>"]
EOS = len(BYTES_VOCAB) - 1

INVOICE = {
    "type": "object",
    "properties": {
        "number": {"type": "string", "pattern": "^INV-[0-9]{3}$"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "maxLength": 6},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                },
                "required": ["sku", "qty"],
                "additionalProperties": False,
            },
            "minItems": 1,
            "maxItems": 3,
        },
        "paid": {"type": "boolean"},
    },
    "required": ["number", "lines", "paid"],
    "additionalProperties": False,
}
UNBOUNDED = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}}},
    "required": ["name", "tags"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def bytes_compiler() -> lg.Compiler:
    return lg.Compiler(lg.Vocabulary.from_tokens(BYTES_VOCAB, eos_ids=[EOS]))


def _shortest_by_search(g: lg.CompiledGrammar, alphabet: bytes, max_len: int) -> int | None:
    """Length of the shortest complete document over ``alphabet``, by breadth-first search."""
    for n in range(max_len + 1):
        for s in itertools.product(alphabet, repeat=n):
            m = g.matcher()
            if m.accept_bytes(bytes(s)) and m.is_complete():
                return n
    return None


@pytest.mark.parametrize(
    ("source", "alphabet", "shortest"),
    [
        (("regex", r"[a-c]{3,5}"), b"abc", 3),
        (("regex", r"(ab|c)+d?"), b"abcd", 1),
        (("choice", ["yes", "no", "maybe"]), b"yesnomab", 2),
        (("ebnf", 'root ::= "(" root ")" | inner\ninner ::= "x" "y"? | "zz"\n'), b"()xyz", 1),
        (("ebnf", 'root ::= a b a\na ::= "q"{2} | b\nb ::= "r" | "" \n'), b"qr", 0),
        (("ebnf", 'root ::= item ("," item)*\nitem ::= "[" root "]" | "n"\n'), b"[],n", 1),
    ],
)
def test_min_bytes_is_the_shortest_document(
    bytes_compiler: lg.Compiler, source: Any, alphabet: bytes, shortest: int
) -> None:
    kind, arg = source
    g = getattr(bytes_compiler, f"compile_{kind}")(arg)
    tb = g.token_budget()
    assert tb.min_bytes == shortest == _shortest_by_search(g, alphabet, shortest)
    assert len(tb.shortest) == tb.min_bytes
    m = g.matcher()
    assert m.accept_bytes(tb.shortest) and m.is_complete()


def test_min_tokens_reached_by_forcing_the_shortest_document(smollm2_vocab: Any) -> None:
    g = lg.Compiler(smollm2_vocab).compile_json_schema(INVOICE, whitespace="compact")
    tb = g.token_budget()
    m = g.matcher()
    for tok in tb.shortest_ids:
        assert m.accept(tok)
    steps = len(tb.shortest_ids)
    if not m.is_terminated():
        assert m.accept(smollm2_vocab.eos_ids[0])
        steps += 1
    assert m.is_terminated() and steps == tb.min_tokens
    assert b"".join(smollm2_vocab.token_bytes(t) for t in tb.shortest_ids) == tb.shortest
    # No token sequence of fewer tokens spells a document: each token is at most one trie step
    # from the configuration, so a shorter walk would need a shorter document or longer tokens.
    assert tb.min_bytes == len(tb.shortest) and tb.shortest.startswith(b'{"number":"INV-')


def test_max_bytes_exact_on_small_grammars(bytes_compiler: lg.Compiler) -> None:
    tb = bytes_compiler.compile_regex(r"[a-c]{3,5}").token_budget()
    assert (tb.max_bytes, tb.max_tokens, tb.unbounded_by) == (5, 6, ())
    tb = bytes_compiler.compile_choice(["yes", "no", "maybe"]).token_budget()
    assert (tb.min_tokens, tb.max_bytes) == (1, 5)  # "no" is one token and nothing may follow: no EOS
    tb = bytes_compiler.compile_regex(r"é{2}").token_budget()
    assert (tb.min_bytes, tb.max_bytes) == (4, 4)


def test_unbounded_names_rules_and_pointers(bytes_compiler: lg.Compiler) -> None:
    tb = bytes_compiler.compile_ebnf('root ::= "(" root ")" | "x"\n').token_budget()
    assert tb.max_bytes is None and tb.max_tokens is None and tb.unbounded_by == ("root",)
    tb = bytes_compiler.compile_json_schema(UNBOUNDED, whitespace="compact").token_budget()
    assert tb.max_bytes is None
    assert any(u.startswith("#/properties/name ") for u in tb.unbounded_by), tb.unbounded_by
    assert any(u.startswith("#/properties/tags ") for u in tb.unbounded_by), tb.unbounded_by
    tb = bytes_compiler.compile_json_schema(INVOICE).token_budget()  # flexible whitespace
    assert tb.max_bytes is None and any("whitespace" in u for u in tb.unbounded_by)
    tb = bytes_compiler.compile_json_schema(INVOICE, whitespace="compact").token_budget()
    assert tb.max_bytes is not None and tb.unbounded_by == ()


def _allowed(m: Any, vocab: Any) -> np.ndarray:
    bits = lg.allocate_mask(vocab)
    m.fill_mask(bits, 0)
    return bits


def _ids(bits: np.ndarray, vocab: Any) -> list[int]:
    """The ids set in row 0 of ``bits``."""
    return [int(t) for t in np.flatnonzero(mask_to_bool(bits[0], vocab.size))]


def _walk(g: lg.CompiledGrammar, rng: random.Random, steps: int) -> Any:
    """A matcher after a random walk of up to ``steps`` tokens (stops before completing)."""
    m = g.matcher()
    vocab = g.vocab
    for _ in range(steps):
        ids = _ids(_allowed(m, vocab), vocab)
        text = [t for t in ids if t not in vocab.eos_ids]
        if not text:
            break
        assert m.accept(rng.choice(text))
    return m


def test_budget_mask_equals_plain_mask_unless_tight(smollm2_vocab: Any) -> None:
    """The differential test: the cut mask is the plain mask whenever every allowed token leaves
    room, and otherwise keeps exactly the tokens whose cost after them fits (checked per token
    through a fork of the matcher)."""
    rng = random.Random(7)
    for schema in (INVOICE, UNBOUNDED):
        g = lg.Compiler(smollm2_vocab).compile_json_schema(schema, whitespace="compact")
        core = budget_core(g)
        for _ in range(6):
            m = _walk(g, rng, rng.randrange(0, 25))
            plain = _allowed(m, smollm2_vocab)
            ids = _ids(plain, smollm2_vocab)
            after: dict[int, int] = {}
            for t in ids:
                f = m.fork()
                assert f.accept(t)
                after[t] = int(core.cost(f)[1])
            needed = 1 + max(after.values())
            longest = max(len(smollm2_vocab.token_bytes(t) or b"") for t in ids)
            exact_from = int(core.exact_from(m, longest))
            assert exact_from >= needed or exact_from == _core.Budget.UNREACHABLE
            for remaining in {needed, needed + 3, min(exact_from, 10**6), 10**6}:
                cut = plain.copy()
                assert core.restrict_mask(m, cut[0], remaining) == 0
                assert np.array_equal(cut, plain)
            for remaining in {needed - 1, max(1, needed - 4), 1 + min(after.values())}:
                cut = plain.copy()
                n_cut = core.restrict_mask(m, cut[0], remaining)
                kept = set(_ids(cut, smollm2_vocab))
                assert kept == {t for t in ids if 1 + after[t] <= remaining}
                assert n_cut == len(ids) - len(kept)


@pytest.mark.parametrize("schema", [INVOICE, UNBOUNDED], ids=["bounded", "unbounded"])
def test_guarded_walks_finish_within_max_tokens(smollm2_vocab: Any, schema: dict[str, Any]) -> None:
    """Random walks through budget-cut masks (choosing long tokens and avoiding EOS, as a model
    that rambles would) always end in a complete document within max_tokens, for every
    max_tokens from the grammar's minimum up."""
    g = lg.Compiler(smollm2_vocab).compile_json_schema(schema, whitespace="compact")
    tb = g.token_budget()
    rng = random.Random(11)
    eos = set(smollm2_vocab.eos_ids)
    for max_tokens in (tb.min_tokens, tb.min_tokens + 1, tb.min_tokens + 4, 2 * tb.min_tokens):
        for _ in range(4):
            guard = BudgetGuard(g, max_tokens)
            m = g.matcher()
            assert guard.fits(m, max_tokens)
            n = 0
            while not m.is_terminated():
                assert n < max_tokens, f"no room left after {n} tokens"
                bits = _allowed(m, smollm2_vocab)
                guard.restrict(m, bits[0], max_tokens - n)
                ids = _ids(bits, smollm2_vocab)
                assert ids, "the cut mask is empty"
                text = [t for t in ids if t not in eos]
                pool = sorted(text, key=lambda t: -len(smollm2_vocab.token_bytes(t) or b""))[:20]
                tok = rng.choice(pool) if pool and rng.random() < 0.9 else rng.choice(ids)
                assert m.accept(tok)
                guard.accepted([tok])
                n += 1
            assert m.is_complete() and n <= max_tokens


def test_token_budget_below_max_tokens_for_cost(bytes_compiler: lg.Compiler) -> None:
    g = bytes_compiler.compile_regex(r"[a-c]{3,5}")
    core = budget_core(g)
    m = g.matcher()
    assert tuple(core.cost(m)) == (3, 4)  # "aaa" then EOS
    assert m.accept_bytes(b"abc")
    assert tuple(core.cost(m)) == (0, 1)
    assert m.accept(EOS)
    assert tuple(core.cost(m)) == (0, 0)
    assert core.bytes_are_tokens
    with pytest.raises(ValueError, match="remaining"):
        core.restrict_mask(g.matcher(), lg.allocate_mask(g.vocab)[0], 0)
    with pytest.raises(ValueError, match="words"):
        core.restrict_mask(g.matcher(), np.zeros(1, dtype=np.int32), 5)
    assert _core.Budget.UNREACHABLE > 10**15


def _random_grammar(rng: random.Random) -> str:
    def lit() -> str:
        return '"' + "".join(rng.choice("abcxy") for _ in range(rng.randint(1, 3))) + '"'

    def seq() -> str:
        items = []
        for _ in range(rng.randint(1, 3)):
            x = rng.choice([lit(), lit(), "r1", "r2", f"({lit()} | {lit()})"])
            items.append(x + rng.choice(["", "", "?", "{0,2}", "*"]))
        return " ".join(items)

    return f'root ::= {seq()} | {seq()}\nr1 ::= {lit()} | {lit()} {lit()}\nr2 ::= "(" r2 ")" | {lit()} | r1 "-" r1\n'


def test_guarded_walks_on_random_grammars_and_vocabularies() -> None:
    """The guarantee on grammars and vocabularies built at random (ties between completions of
    one length but different token counts, multi-byte tokens across rule boundaries): every
    walk through the cut masks ends complete within max_tokens, from the minimum up."""
    rng = random.Random(2024)
    for _ in range(60):
        extra = {"".join(rng.choice("abcxy()-") for _ in range(rng.randint(2, 4))).encode() for _ in range(12)}
        tokens = [bytes([b]) for b in range(256)] + sorted(extra) + [b"<eos>"]
        vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[len(tokens) - 1])
        g = lg.Compiler(vocab).compile_ebnf(_random_grammar(rng))
        tb = g.token_budget()
        for max_tokens in (tb.min_tokens, tb.min_tokens + 2):
            guard = BudgetGuard(g, max_tokens)
            m = g.matcher()
            n = 0
            while not m.is_terminated():
                assert n < max_tokens
                bits = _allowed(m, vocab)
                guard.restrict(m, bits[0], max_tokens - n)
                ids = _ids(bits, vocab)
                text = [t for t in ids if t != len(tokens) - 1]
                tok = rng.choice(text) if text and rng.random() < 0.85 else rng.choice(ids)
                assert m.accept(tok)
                guard.accepted([tok])
                n += 1


class _CutEverything:
    """A budget core whose cut leaves no token: the guard must fall back on its plan."""

    def __init__(self, plan: list[int]) -> None:
        self.plan = plan
        self.plans_made = 0

    def restrict_mask(self, m: Any, row: np.ndarray, remaining: int) -> int:
        n = int(sum(bin(int(w) & 0xFFFFFFFF).count("1") for w in row))
        row[:] = 0
        return n

    def completion_tokens(self, m: Any) -> list[int]:
        self.plans_made += 1
        return list(self.plan)


def test_guard_follows_its_plan_when_no_token_passes(bytes_compiler: lg.Compiler) -> None:
    g = bytes_compiler.compile_regex(r"[a-c]{3,5}")
    guard = BudgetGuard(g, 4)
    fake = _CutEverything([ord("a"), ord("b"), 63])  # 63: bit 31 of word 1 (sign bit of an int32)
    guard._core = fake  # type: ignore[assignment]
    m = g.matcher()
    for want in (ord("a"), ord("b"), 63):
        bits = _allowed(m, g.vocab)
        assert guard.restrict(m, bits[0], 4, top=lambda want=want: want) > 0  # type: ignore[misc]
        assert _ids(bits, g.vocab) == [want]
        assert not guard.closed  # the model's first choice was the plan's token
        guard.accepted([want])
    assert fake.plans_made == 1  # one plan, followed token by token
    guard.accepted([ord("c")])  # a token off the plan: the next empty cut makes a new plan
    guard.restrict(m, _allowed(m, g.vocab)[0], 4, top=lambda: 0)
    assert fake.plans_made == 2 and guard.closed


def test_token_fits_agrees_with_the_cut(smollm2_vocab: Any) -> None:
    """The lazy check of one drawn token says what the cut says, and so does lg.generate's
    fused check (accept_within), which advances the matcher exactly when the token fits."""
    rng = random.Random(5)
    g = lg.Compiler(smollm2_vocab).compile_json_schema(INVOICE, whitespace="compact")
    core = budget_core(g)
    for _ in range(5):
        m = _walk(g, rng, rng.randrange(0, 30))
        plain = _allowed(m, smollm2_vocab)
        ids = _ids(plain, smollm2_vocab)
        for remaining in (1, 3, 8, 20, 60):
            cut = plain.copy()
            core.restrict_mask(m, cut[0], remaining)
            kept = mask_to_bool(cut[0], smollm2_vocab.size)
            for t in rng.sample(ids, min(40, len(ids))):
                assert core.token_fits(m, t, remaining) == bool(kept[t]), (t, remaining)
                f = m.fork()
                r = core.accept_within(f, t, remaining)
                assert r == (ACCEPTED if kept[t] else NO_ROOM), (t, remaining)
                assert f.num_accepted == m.num_accepted + (r == ACCEPTED)
            refused = next(t for t in range(smollm2_vocab.size) if not plain[0, t // 32] >> (t % 32) & 1)
            f = m.fork()
            assert core.accept_within(f, refused, 10**6) == REJECTED and f.num_accepted == m.num_accepted


_BOUNDED_SUITE = [t for t in TASKS if t.name in ("triage_reasoning_first", "sentiment_reasoning_first")]


@pytest.mark.parametrize(
    "schema", [INVOICE, *(t.schema for t in _BOUNDED_SUITE)], ids=["invoice", *(t.name for t in _BOUNDED_SUITE)]
)
def test_max_is_above_every_walk_on_a_bounded_schema(smollm2_vocab: Any, schema: dict[str, Any]) -> None:
    """Walks that ramble (long tokens, no EOS while anything else is allowed) never pass
    max_bytes or max_tokens on a bounded schema (this file's invoice and the end-to-end suite's
    bounded ones, whose model outputs tests/e2e checks too), and some come close."""
    g = lg.Compiler(smollm2_vocab).compile_json_schema(schema, whitespace="compact")
    tb = g.token_budget()
    assert tb.max_bytes is not None and tb.max_tokens == tb.max_bytes + 1
    rng = random.Random(9)
    eos = set(smollm2_vocab.eos_ids)
    longest = 0
    for _ in range(12 if schema is INVOICE else 4):
        m = g.matcher()
        text, n = b"", 0
        while not m.is_terminated():
            ids = _ids(_allowed(m, smollm2_vocab), smollm2_vocab)
            text_ids = [t for t in ids if t not in eos]
            tok = rng.choice(text_ids) if text_ids else ids[0]
            assert m.accept(tok)
            text += smollm2_vocab.token_bytes(tok) or b""
            n += 1
        assert len(text) <= tb.max_bytes and n <= tb.max_tokens
        longest = max(longest, len(text))
    assert longest > tb.min_bytes


_TREE = tree_schema(40)


def _nested(depth: int, label: str) -> bytes:
    doc = '{"label":"' + label + '","children":['
    for i in range(depth):
        doc += '{"label":"' + f"{label}{i}" + '","children":['
    return doc.encode()


def test_costs_follow_a_matcher_onto_a_fresh_configuration_store() -> None:
    # Configuration ids belong to one parser store; when other requests fill the grammar's
    # store, a matcher moves to a fresh one with new ids. The budget's memo must describe the
    # matcher's store, not the grammar's first: every cost equals a fresh grammar's.
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[256])
    shared = lg.Compiler(vocab, limits=lg.Limits(max_configurations=1_500)).compile_json_schema(_TREE)
    core = budget_core(shared)
    m = shared.matcher()
    assert m.accept_bytes(_nested(2, "a"))
    before = tuple(core.cost(m))
    fresh = lg.Compiler(vocab).compile_json_schema(_TREE)
    rng = random.Random(0)
    sizes = []
    for k in range(60):  # other requests fill the store; full stores are replaced
        prefix = tree_document(k % 20, rng)[:-3]
        other, reference = shared.matcher(), fresh.matcher()
        assert other.accept_bytes(prefix) and reference.accept_bytes(prefix)
        assert tuple(core.cost(other)) == tuple(budget_core(fresh).cost(reference)), k
        # The fused check reads the store's shortest completions (fresh stores track them too).
        tok = core.shortest_completion(other)[0]
        need = int(core.cost(other)[1])
        for remaining in range(max(1, need - 2), need + 3):
            got = core.accept_within(other.fork(), tok, remaining)
            assert got == budget_core(fresh).accept_within(reference.fork(), tok, remaining), (k, remaining)
            assert got == (ACCEPTED if remaining >= need else NO_ROOM), (k, remaining)
        sizes.append(shared._core.num_configurations)
    assert any(b < a for a, b in itertools.pairwise(sizes))  # (a store was replaced)
    assert m.accept_bytes(b'{"label":"b","children":[')  # may move m to another store
    m2 = fresh.matcher()
    assert m2.accept_bytes(_nested(2, "a") + b'{"label":"b","children":[')
    assert tuple(core.cost(m)) == tuple(budget_core(fresh).cost(m2))
    assert tuple(core.shortest_completion(m)) == tuple(budget_core(fresh).shortest_completion(m2))
    assert before[0] < core.cost(m)[0]


def test_completions_through_frame_sets(bytes_compiler: lg.Compiler) -> None:
    # Below a state of `r` the stacks differ (which rule read each parenthesis): one frame set.
    g = bytes_compiler.compile_ebnf(NESTED_AMBIGUOUS)
    core = budget_core(g)
    m = g.matcher()
    assert m.accept_bytes(b"(" * 6 + b"z")
    # The shortest way out returns through `a` at every level; the longest of the shortest
    # completions through a head, through `b` (two bytes a level): exact_from's bound counts it.
    assert core.shortest_completion(m) == b")" * 6
    assert tuple(core.cost(m)) == (6, 7)
    assert core.exact_from(m, 1) >= 12
    assert m.accept_bytes(b")!") and core.shortest_completion(m) == b")" * 5


def test_zero_repetition_of_an_unbounded_item_is_empty_not_nan() -> None:
    """An array with ``maxItems: 0`` of unbounded items: ``{0,0}`` of an infinite item is zero
    bytes (it was 0 * inf = NaN, and token_budget raised ValueError)."""
    from logitgate.budget import longest_output
    from logitgate.grammar.ir import Grammar, Literal, Repeat, Seq

    g = Grammar({"root": Seq((Literal(b"a"), Repeat(Repeat(Literal(b"b"), 0, None), 0, 0)))})
    assert longest_output(g) == (1, ())
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])
    schema = {"type": "array", "maxItems": 0, "items": {"type": "string"}}
    assert lg.Compiler(vocab).compile_json_schema(schema, whitespace="compact").token_budget().max_bytes == 2


@pytest.mark.timeout(60)
def test_longest_output_visits_each_shared_node_once() -> None:
    """IR nodes are shared (a DAG): ``x = Seq((x, x))`` sixty times is 2**60 bytes and 61
    nodes; walking it as a tree never finishes (MaskBench Github_hard/o62057 took minutes)."""
    from logitgate.budget import longest_output
    from logitgate.grammar.ir import Grammar, Literal, Node, Seq

    n: Node = Literal(b"ab")
    for _ in range(60):
        n = Seq((n, n))
    assert longest_output(Grammar({"root": n})) == (2**61, ())


@pytest.mark.timeout(60)
def test_ir_walks_read_each_shared_node_once() -> None:
    """The IR's own walks (references, iter_nodes) on the same 2**60-leaf DAG: each node object
    once, so a compiled grammar's checks (token terminals, reachable rules) stay linear."""
    from logitgate.grammar.ir import Grammar, Literal, Node, Ref, Seq, references

    n: Node = Seq((Ref("a"), Literal(b"x")))
    for _ in range(60):
        n = Seq((n, n))
    g = Grammar({"root": Seq((n, Ref("b"))), "a": Literal(b"a"), "b": Literal(b"b")})
    assert references(g.rules["root"]) == ("a", "b")
    # 60 wrapping Seqs, the inner Seq with its Ref and Literal, root's Seq and Ref, rules a and b
    assert sum(1 for _ in g.iter_nodes()) == 60 + 3 + 2 + 2
