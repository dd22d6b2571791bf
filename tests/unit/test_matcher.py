"""Matcher semantics on small hand-made vocabularies: masks, EOS, specials, rollback, fork,
forced bytes, batch fills, and the logits width."""

from __future__ import annotations

import codecs
import itertools
import random

import numpy as np
import pytest

import logitgate as lg
from logitgate.grammar.ir import Alt, CharClass, Grammar, Literal, Ref, Repeat, Seq
from logitgate.masks import mask_to_bool

TOKENS = [b"a", b"b", b"ab", b"ba", b"aaa", b"<s>", b"\xc3", b"\xa9", b"\xc3\xa9", b"", None]
EOS, SPECIAL, C3, A9, E_ACUTE, EMPTY, NONE = 5, 5, 6, 7, 8, 9, 10


def allowed(m: lg.Matcher, vocab: lg.Vocabulary) -> set[int]:
    bits = lg.allocate_mask(vocab)
    m.fill_mask(bits, row=0)
    return {int(i) for i in np.flatnonzero(mask_to_bool(bits[0], vocab.size))}


@pytest.fixture
def vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens(TOKENS, eos_ids=[EOS], logits_width=16)


def test_whole_token_must_fit(vocab: lg.Vocabulary) -> None:
    m = lg.Compiler(vocab).compile_regex("ab?").matcher()
    assert allowed(m, vocab) == {0, 2}  # "a", "ab"; not "aaa" (only its first byte fits)
    assert m.accept(0)
    assert allowed(m, vocab) == {1, EOS}


def test_eos_only_when_complete_and_specials_never(vocab: lg.Vocabulary) -> None:
    m = lg.Compiler(vocab).compile_regex("a*").matcher()
    assert allowed(m, vocab) == {0, 4, EOS}
    assert not m.accept(SPECIAL + 100)  # beyond the width
    assert not m.accept(EMPTY) and not m.accept(NONE)
    assert m.accept(EOS) and m.is_terminated()
    assert allowed(m, vocab) == {EOS}
    assert not m.accept(0)
    assert m.accept(EOS) and m.is_terminated()  # finished rows keep sampling EOS


def test_padding_ids_beyond_vocab_are_masked(vocab: lg.Vocabulary) -> None:
    assert vocab.size == 16
    m = lg.Compiler(vocab).compile_regex("[ab]*").matcher()
    assert max(allowed(m, vocab)) < len(TOKENS)


def test_partial_utf8_tokens(vocab: lg.Vocabulary) -> None:
    m = lg.Compiler(vocab).compile_regex("é+").matcher()
    assert allowed(m, vocab) == {C3, E_ACUTE}
    assert m.accept(C3)
    assert allowed(m, vocab) == {A9}  # only the continuation byte
    assert m.accept(A9) and m.is_complete()


def test_negated_class_never_yields_invalid_utf8(vocab: lg.Vocabulary) -> None:
    m = lg.Compiler(vocab).compile_regex("[^b]").matcher()
    assert allowed(m, vocab) == {0, C3, E_ACUTE}
    assert not m.accept(A9)  # a stray continuation byte is not a character


def test_ids_sharing_bytes_are_allowed_together() -> None:
    # Several ids with the same bytes share one trie node; the walk sets the first from the
    # node's record and the others from the node's token range. A node with 8 or more
    # children ("ab" + letters) is walked sparsely, through its child table. The "x" tokens
    # and the wide logits row keep the walk in its setting mode (it clears from a full mask
    # where most of the vocabulary, or of a first byte's tokens, may be allowed).
    letters = [b"ab" + bytes([c]) for c in b"cdefghijk"]
    tokens = [b"ab", b"a", b"ab", *letters, b"abc", b"b", b"ab", b"abz", *[b"x" * n for n in range(1, 30)]]
    vocab = lg.Vocabulary.from_tokens(tokens, logits_width=4096)
    compiler = lg.Compiler(vocab)
    for pattern, prefix in [("ab[c-e]?", b""), ("[a-z]*", b""), ("abc|abd", b""), ("abcx?", b"ab")]:
        m = compiler.compile_regex(pattern).matcher()
        assert m.accept_bytes(prefix)
        expected = {i for i, t in enumerate(tokens) if m.fork().accept(i)}
        assert allowed(m, vocab) == expected, pattern
    m = compiler.compile_regex("ab[c-e]?").matcher()
    assert allowed(m, vocab) == {0, 1, 2, 3, 4, 5, 12, 14}  # "a", every "ab", "abc" twice, "abd", "abe"


def test_rejected_token_leaves_state_unchanged(vocab: lg.Vocabulary) -> None:
    m = lg.Compiler(vocab).compile_choice(["ab", "ba"]).matcher()
    assert m.accept(0)
    before = allowed(m, vocab)
    assert not m.accept(0)
    assert allowed(m, vocab) == before and m.num_accepted == 1


def test_rollback_fork_reset(vocab: lg.Vocabulary) -> None:
    m = lg.Compiler(vocab).compile_regex("(ab)+").matcher()
    start = allowed(m, vocab)
    assert m.accept(0) and m.accept(1) and m.accept(0)
    f = m.fork()
    m.rollback(1)
    assert m.is_complete() and not f.is_complete()
    assert f.accept(1) and f.is_complete()
    with pytest.raises(lg.UsageError, match="roll back") as e:
        m.rollback(5)
    assert e.value.code == "rollback"
    m.reset()
    assert allowed(m, vocab) == start and m.num_accepted == 0


def test_forced_bytes(vocab: lg.Vocabulary) -> None:
    m = (
        lg.Compiler(vocab)
        .compile_grammar(Grammar({"root": Seq((Literal(b"abba"), Repeat(Literal(b"a"), 0, None)))}))
        .matcher()
    )
    assert m.forced_bytes() == b"abba"
    assert m.accept_bytes(b"ab") and m.forced_bytes() == b"ba"
    assert m.accept_bytes(b"ba") and m.forced_bytes() == b""  # complete: EOS or more "a"


def test_recursion_and_stack(vocab: lg.Vocabulary) -> None:
    g = Grammar({"root": Alt((Literal(b"b"), Seq((Literal(b"a"), Ref("root"), Literal(b"b")))))})
    m = lg.Compiler(vocab).compile_grammar(g).matcher()
    assert m.accept_bytes(b"aaa")
    assert not m.is_complete()
    assert m.accept_bytes(b"bbb") and not m.is_complete()
    assert m.accept_bytes(b"b") and m.is_complete() and m.is_terminated()


def test_stack_depth_limit_is_in_the_mask(vocab: lg.Vocabulary) -> None:
    # `root ::= "b" | "a" root "c"`: every "a" pushes a frame. At the limit the mask leaves out
    # what would nest deeper, and accepting it is refused like any other disallowed input
    # (no exception); what stays allowed can always be completed.
    g = Grammar({"root": Alt((Literal(b"b"), Seq((Literal(b"a"), Ref("root"), Literal(b"c")))))})
    compiler = lg.Compiler(vocab, limits=lg.Limits(max_stack_depth=50))
    m = compiler.compile_grammar(g).matcher()
    assert m.accept_bytes(b"a" * 47)
    assert allowed(m, vocab) == {0, 1, 2, 4}  # a, b, ab, aaa (to depth 50)
    assert m.accept_bytes(b"a")
    assert allowed(m, vocab) == {0, 1, 2}  # "aaa" would reach depth 51
    assert not m.accept(4) and m.accept_bytes(b"aa")
    assert allowed(m, vocab) == {1}  # only "b"
    assert not m.accept(0) and not m.accept_bytes(b"a") and m.num_accepted == 3
    assert m.accept_bytes(b"b" + b"c" * 50) and m.is_complete()


def test_stack_depth_limit_keeps_every_allowed_prefix_completable() -> None:
    # `root ::= "(" "a" root ")" | "x"`: after "(" only "a" then a deeper root may follow, so at
    # the limit "(" itself must be left out (not only the step that pushes the frame).
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(128)] + [b"(a", b"</s>"], eos_ids=[129])
    for depth in (1, 5, 30):
        compiler = lg.Compiler(vocab, limits=lg.Limits(max_stack_depth=depth))
        m = compiler.compile_ebnf('root ::= "(" "a" root ")" | "x"\n').matcher()
        bits = lg.allocate_mask(vocab)
        for _ in range(depth):
            m.fill_mask(bits)
            assert mask_to_bool(bits[0], vocab.size)[[ord("("), 128]].all()
            assert m.accept(128)
        m.fill_mask(bits)
        assert np.flatnonzero(mask_to_bool(bits[0], vocab.size)).tolist() == [ord("x")]
        assert not m.accept(ord("(")) and not m.accept(128) and not m.accept_bytes(b"(")
        assert m.accept_bytes(b"x" + b")" * depth) and m.is_complete()


def test_stack_depth_limit_on_nested_json() -> None:
    # Nested JSON arrays under a small limit: the deepest document allowed is accepted whole,
    # and at its depth "[" is out of the mask and refused, with no exception on the way.
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(128)] + [b"[[", b"</s>"], eos_ids=[129])
    deepest = {}
    for limit in (12, 24):
        compiler = lg.Compiler(vocab, limits=lg.Limits(max_stack_depth=limit))
        m = compiler.compile_json_schema({}, whitespace="compact").matcher()
        bits = lg.allocate_mask(vocab)
        depth = 0
        while True:
            m.fill_mask(bits)
            allowed_now = mask_to_bool(bits[0], vocab.size)
            assert allowed_now[128] == (allowed_now[ord("[")] and m.fork().accept_bytes(b"[["))
            if not allowed_now[ord("[")]:
                break
            assert m.accept(ord("["))
            depth += 1
        assert not m.accept(ord("[")) and not m.accept(128) and not m.accept_bytes(b"[")
        assert allowed_now[ord("]")]
        assert m.accept_bytes(b"]" * depth) and m.is_complete()
        fresh = compiler.compile_json_schema({}, whitespace="compact").matcher()
        assert fresh.accept_bytes(b"[" * depth + b"]" * depth) and fresh.is_complete()
        assert not fresh.fork().accept_bytes(b"[" * (depth + 1))
        deepest[limit] = depth
    assert 0 < deepest[12] < deepest[24]


def test_grammar_deeper_than_the_limit_fails_to_compile() -> None:
    # Every output nests two rules deep (root calls r1, r1 calls r2): nothing fits depth 1.
    vocab = lg.Vocabulary.from_tokens([b"a", b"b"])
    grammar = 'root ::= "a" r1 "a"\nr1 ::= "b" r1 "b" | "c" r2 "c"\nr2 ::= "d" r2 "d" | "e"\n'
    with pytest.raises(lg.LimitExceeded, match="2 deep") as e:
        lg.Compiler(vocab, limits=lg.Limits(max_stack_depth=1)).compile_ebnf(grammar)
    assert e.value.limit == "max_stack_depth" and e.value.value == 1
    m = lg.Compiler(vocab, limits=lg.Limits(max_stack_depth=2)).compile_ebnf(grammar).matcher()
    assert not m.fork().accept_bytes(b"acd") and m.accept_bytes(b"aceca") and m.is_complete()


def test_tail_calls_do_not_deepen_the_stack(vocab: lg.Vocabulary) -> None:
    # `root ::= "b" | "a" root`: the call is the rule's last step, so no frame is pushed and
    # the depth limit never applies, however long the output.
    g = Grammar({"root": Alt((Literal(b"b"), Seq((Literal(b"a"), Ref("root")))))})
    compiler = lg.Compiler(vocab, limits=lg.Limits(max_stack_depth=50))
    m = compiler.compile_grammar(g).matcher()
    assert m.accept_bytes(b"a" * 1000) and not m.is_complete()
    assert m.accept_bytes(b"b") and m.is_terminated()


def test_fill_masks_matches_single_fills(vocab: lg.Vocabulary) -> None:
    compiler = lg.Compiler(vocab)
    grammars = [compiler.compile_regex(p) for p in ("a*", "(ab)+", "b[ab]{2}", "é|a")]
    matchers = [g.matcher() for g in grammars for _ in range(4)]
    for i, m in enumerate(matchers):
        m.accept_bytes(b"a" if i % 2 else b"")
    bits = lg.allocate_mask(vocab, batch=len(matchers))
    lg.fill_masks(matchers, bits, threads=2)
    for i, m in enumerate(matchers):
        one = lg.allocate_mask(vocab)
        m.fill_mask(one, row=0)
        assert np.array_equal(one[0], bits[i])
    with pytest.raises(lg.UsageError, match="same matcher") as e:
        lg.fill_masks([matchers[0], matchers[0]], bits)
    assert e.value.code == "duplicate-matcher"


def test_fill_masks_many_batches_of_every_size(vocab: lg.Vocabulary) -> None:
    # Back-to-back batches (the pool's worker still spinning, or not yet awake: the caller may
    # finish a batch without it), of sizes 1-9, some separated by a pause long enough for the
    # worker to go to sleep.
    import time

    compiler = lg.Compiler(vocab)
    grammars = [compiler.compile_regex(p) for p in ("a*", "(ab)+", "b[ab]{2}", "é|a", "[a-c]{0,3}x")]
    matchers = [g.matcher() for g in grammars for _ in range(2)]
    expected = []
    for m in matchers:
        one = lg.allocate_mask(vocab)
        m.fill_mask(one, row=0)
        expected.append(one[0].copy())
    bits = lg.allocate_mask(vocab, batch=len(matchers))
    for k in range(300):
        n = 1 + k % 9
        start = k % (len(matchers) - n + 1)
        bits[:] = 0
        lg.fill_masks(matchers[start : start + n], bits[:n], threads=2)
        for i in range(n):
            assert np.array_equal(bits[i], expected[start + i]), (k, i)
        if k % 50 == 49:
            time.sleep(0.002)


_MANY_THREADS_SCRIPT = """
import sys
import itertools
import random

import numpy as np
import logitgate as lg

vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[256])
grammar = lg.Compiler(vocab).compile_regex("[a-z]+")
matchers = [grammar.matcher() for _ in range(64)]
for i, m in enumerate(matchers):
    assert m.accept_bytes(b"abc"[: i % 3])
expected = lg.allocate_mask(vocab, batch=len(matchers))
lg.fill_masks(matchers, expected, threads=1)
bits = lg.allocate_mask(vocab, batch=len(matchers))
for threads in (3, 4, 8, 64):
    for k in range(int(sys.argv[1])):
        n = 1 + k % len(matchers)
        bits[:] = 0
        lg.fill_masks(matchers[:n], bits[:n], threads=threads)
        assert np.array_equal(bits[:n], expected[:n]), (threads, k)
print("ok")
"""


def test_fill_masks_on_many_threads_never_hangs() -> None:
    # Batches on 3 or more threads (the pool has several workers: some join a batch, some are
    # still waking up when the caller has taken every row). Each batch must finish with every
    # row filled as one thread fills it. In a subprocess, so that a hang fails the test.
    import subprocess
    import sys

    site = ["-S"] if sys.flags.no_site else []  # (make sanitize runs Python without site)
    run = subprocess.run(
        [sys.executable, *site, "-c", _MANY_THREADS_SCRIPT, "1000"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_unicode_class_lowering_matches_python(vocab: lg.Vocabulary) -> None:
    # Every code point of a few classes is accepted exactly when Python agrees.
    compiler = lg.Compiler(vocab)
    cases = [((0x41, 0x5A), (0x3B1, 0x3C9), (0x4E00, 0x4E0F), (0x1F600, 0x1F60F)), ((0x80, 0x10FFFF),)]
    for ranges in cases:
        for negated in (False, True):
            g = compiler.compile_grammar(Grammar({"root": CharClass(tuple(ranges), negated)}))
            for cp in [
                0,
                0x41,
                0x5B,
                0x7F,
                0x80,
                0x3B1,
                0x3CA,
                0x7FF,
                0x800,
                0x4E05,
                0xD7FF,
                0xE000,
                0xFFFF,
                0x10000,
                0x1F600,
                0x1F610,
                0x10FFFF,
            ]:
                inside = any(lo <= cp <= hi for lo, hi in ranges) != negated
                m = g.matcher()
                assert (m.accept_bytes(chr(cp).encode()) and m.is_complete()) == inside, (ranges, negated, hex(cp))
            surrogate = b"\xed\xa0\x80"  # U+D800 encoded: never valid UTF-8
            assert not g.matcher().accept_bytes(surrogate)


def test_lead_bytes_that_start_some_characters_of_a_class() -> None:
    # Lead 0xD0 starts а-я's first half (0xB0-0xBF after it) and characters outside (Ѐ-Я, 0x80-
    # 0xAF); 0xD1 the second half (0x80-0x8F) and ё and beyond: a position of the chain reads
    # only some of each lead's characters, so neither lead is a step of the chain (the core tells
    # that from the automaton's states alone). Masks along random walks agree with an oracle
    # over the decoded text.
    words = ["при", "вет", "мир", "дом", "ёлка", "Дом", "яя", "aб", "жz", "ѐ", "ё"]
    tokens = [bytes([b]) for b in range(0x61, 0x7B)] + [chr(c).encode() for c in range(0x430, 0x450)]
    tokens += [w.encode() for w in words] + [bytes([b]) for b in [0xD0, 0xD1, *range(0x80, 0xC0)]] + [b"\xd0\xb0\xd1"]
    eos = len(tokens)
    vocab = lg.Vocabulary.from_tokens([*tokens, b"</s>"], eos_ids=[eos])
    g = lg.Compiler(vocab).compile_regex("[a-zа-я]{1,12}")
    in_class = {chr(c) for c in [*range(0x61, 0x7B), *range(0x430, 0x450)]}

    def viable(data: bytes) -> bool:
        decoder = codecs.getincrementaldecoder("utf-8")()
        try:
            text = decoder.decode(data)
        except UnicodeDecodeError:
            return False
        tail = decoder.getstate()[0]
        if any(ch not in in_class for ch in text) or len(text) + (1 if tail else 0) > 12:
            return False
        return not tail or any(ch.encode().startswith(tail) for ch in in_class)

    rng = random.Random(0)
    for _ in range(30):
        m, text = g.matcher(), b""
        while True:
            got = allowed(m, vocab)
            want = {t for t, tok in enumerate(tokens) if viable(text + tok)}
            if text and viable(text) and decoded_complete(text):
                want.add(eos)
            assert got == want, text
            t = rng.choice(sorted(got))
            if t == eos:
                break
            assert m.accept(t)
            text += tokens[t]


def decoded_complete(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def test_nested_bounded_repetitions_stay_tractable() -> None:
    # Fuzz finding (tests/fuzz/regressions/core-c5e2b85f1f9c.txt): determinizing this rule
    # built sets of thousands of NFA states each and did not finish; the subset construction
    # is now bounded in total set size too, and the rule keeps its NFA.
    byte_vocab = lg.Vocabulary.from_tokens([bytes([b]) for b in range(256)])
    g = lg.Compiler(byte_vocab).compile_regex("^z9((.){10,610}){10,10}z9$")
    m = g.matcher()
    bits = lg.allocate_mask(byte_vocab)
    for b in b"z9" + b"a" * 99 + b"z9":
        m.fill_mask(bits, row=0)
        assert (bits[0, b >> 5] >> (b & 31)) & 1
        assert m.accept(b)
    assert not m.is_complete()  # 99 characters before the final "z9"; the repetition needs 100
    assert m.accept_bytes(b"z9") and m.is_complete()


# Each "(" is read by `a` or by `b`, rules of their own, each then calling `r` with a return of
# its own: n parentheses are 2^n stacks below one state of `r`.
NESTED_AMBIGUOUS = """
root ::= r
r ::= a | b | "z"
a ::= "(" r ")" | "a" a
b ::= "(" r ")!" | "b" b
"""


def test_heads_of_one_state_share_their_stacks(vocab: lg.Vocabulary) -> None:
    # Heads of one state keep one frame set instead of a head per stack, so the depth costs
    # heads linearly (the core before frame sets passed max_parse_heads, 20,000, at 14
    # parentheses).
    g = lg.Compiler(vocab).compile_ebnf(NESTED_AMBIGUOUS)
    m = g.matcher()
    assert m.accept_bytes(b"(" * 40 + b"z)")
    # Either rule may have read the innermost parenthesis: its end is ")" or ")!".
    fork = m.fork()
    assert fork.accept_bytes(b")" * 39) and fork.is_complete()
    assert m.accept_bytes(b"!" + b")!" * 39) and m.is_complete()
    assert not g.matcher().accept_bytes(b"(z)!!")


def test_frame_sets_follow_a_matcher_onto_a_fresh_configuration_store() -> None:
    # A store of few configurations fills while the matcher reads (other requests fill it): the
    # matcher moves to fresh stores, carrying its frame sets (Parser::Adopt), and goes on as on
    # a grammar with room, mask for mask.
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[256])
    small = lg.Compiler(vocab, limits=lg.Limits(max_configurations=200)).compile_ebnf(NESTED_AMBIGUOUS)
    roomy = lg.Compiler(vocab).compile_ebnf(NESTED_AMBIGUOUS)
    rng = random.Random(0)

    def document(depth: int) -> bytes:  # a random sentence of the grammar
        if depth == 0:
            return b"z"
        letter, close = rng.choice([(b"a", b")"), (b"b", b")!")])
        return letter * rng.randrange(3) + b"(" + document(depth - 1) + close

    text = b"(" * 40 + b"z" + b")!)" * 12 + b")!" * 16
    moved, reference = small.matcher(), roomy.matcher()
    sizes = []
    for i in range(len(text)):
        assert small.matcher().accept_bytes(document(rng.randrange(1, 12)))
        assert allowed(moved, vocab) == allowed(reference, vocab), i
        assert moved.accept_bytes(text[i : i + 1]) and reference.accept_bytes(text[i : i + 1]), i
        sizes.append(small._core.num_configurations)
    assert moved.is_complete() and reference.is_complete()
    assert any(b < a for a, b in itertools.pairwise(sizes))  # (a store was replaced)


def test_classes_leading_to_one_target_share_one_transition(vocab: lg.Vocabulary) -> None:
    # The loop state of `[0-9A-Za-z]+` reads its class as three edges to itself (the ranges are
    # not adjacent), and the other branch splits a-h into byte classes of their own: a dozen
    # live classes, grouped on the state's first transition by the targets they lead to. One
    # closure serves every letter and digit; "!" is a group of its own.
    g = lg.Compiler(vocab).compile_ebnf('root ::= [0-9A-Za-z]+ "!" | "abcdefgh"')
    m = g.matcher()
    assert m.accept_bytes(b"x")
    before = g._core.num_transitions
    for text in (b"y", b"Y", b"5", b"c", b"z"):
        assert m.accept_bytes(text)
    assert g._core.num_transitions - before == 1
    assert m.accept_bytes(b"!") and m.is_complete()
    assert g._core.num_transitions - before == 2


# Searched patterns combined under length bounds: the frontend lowers them to the product of one
# minimal DFA and the length, thousands of states whose bytes fall in two dozen coarse classes.
PATTERN_PRODUCT = (
    '{"type": "string", "allOf": [{"not": {"anyOf": [{"not": {"anyOf": [{"pattern": "ab1"}, {"pattern": "b12"}]}},'
    ' {"not": {"anyOf": [{"pattern": "c2"}, {"pattern": "^[\\\\w]*$"}]}}]}}, {"pattern": "[aA][12].*[zZ]"}],'
    ' "minLength": 5, "maxLength": 14}'
)


def test_class_trie_walks_give_the_token_trie_walks_masks(smollm2_vocab: lg.Vocabulary) -> None:
    # Compiled by default with a class trie (tokens by their string of coarse classes), the
    # product's masks along random walks (escapes and their uncovered heads included) are bit for
    # bit those of the same grammar compiled without one, whose walks read every token's bytes.
    from logitgate import _core

    with_trie = lg.Compiler(smollm2_vocab).compile_json_schema(PATTERN_PRODUCT)
    assert with_trie._core.num_states >= 4096
    assert 0 < with_trie._core.class_trie_nodes <= smollm2_vocab._core.trie_size // 4
    previous = _core._set_class_trie_min_states(1 << 30)
    try:
        without = lg.Compiler(smollm2_vocab).compile_json_schema(PATTERN_PRODUCT)
    finally:
        _core._set_class_trie_min_states(previous)
    assert without._core.class_trie_nodes == 0
    escapes = {i for i, t in enumerate(smollm2_vocab.table.tokens) if t is not None and b"\\" in t}
    rng = random.Random(7)
    a_bits, b_bits = lg.allocate_mask(smollm2_vocab), lg.allocate_mask(smollm2_vocab)
    for walk in range(12):
        a, b = with_trie.matcher(), without.matcher()
        for _ in range(16):
            a.fill_mask(a_bits, row=0)
            b.fill_mask(b_bits, row=0)
            assert np.array_equal(a_bits, b_bits), (walk, a.num_accepted)
            ids = np.flatnonzero(mask_to_bool(a_bits[0], smollm2_vocab.size))
            # Every other walk prefers a token with a backslash (an escape's heads are uncovered).
            pick = [i for i in ids if i in escapes] if walk % 2 else []
            token = int(rng.choice(pick or list(ids)))
            if token in smollm2_vocab.eos_ids:
                break
            assert a.accept(token) and b.accept(token)
