"""Token terminals (ir.TokenSet): special tokens in grammars, exact masks, rollback and fork,
GBNF syntax, vocabulary resolution, and the invariant that text and special tokens never mix."""

from __future__ import annotations

import pytest

import logitgate as lg
from logitgate.frontends.gbnf import parse_gbnf
from logitgate.grammar.ir import Grammar, Literal, Seq, TokenSet

# 0 a, 1 b, 2 ab, 3 <|end|> (special), 4 <|call|> (special), 5 no bytes, 6 <eos> (EOS),
# 7-9 the characters of "<|end|>" as text.
TOKENS = [b"a", b"b", b"ab", b"<|end|>", b"<|call|>", None, b"<eos>", b"<", b"|", b"end|>"]


@pytest.fixture(scope="module")
def vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens(TOKENS, eos_ids=[6], special_ids=[3, 4])


@pytest.fixture(scope="module")
def compiler(vocab: lg.Vocabulary) -> lg.Compiler:
    return lg.Compiler(vocab)


def allowed(vocab: lg.Vocabulary, m: lg.Matcher) -> list[int]:
    bits = lg.allocate_mask(vocab)
    m.fill_mask(bits, row=0)
    return [i for i in range(vocab.size) if bits[0, i // 32] >> (i % 32) & 1]


def test_named_special_token_is_one_whole_token(vocab: lg.Vocabulary, compiler: lg.Compiler) -> None:
    m = compiler.compile_ebnf('root ::= "a"+ <|call|> "b" <[3]>').matcher()
    assert allowed(vocab, m) == [0]
    assert m.accept(0)
    assert allowed(vocab, m) == [0, 4]  # more "a", or the special token; never its text
    assert not m.accept(3)
    assert m.accept(4)
    assert allowed(vocab, m) == [1]
    assert m.accept(1)
    assert allowed(vocab, m) == [3]
    assert m.forced_bytes() == b""  # a token terminal is no byte
    assert m.accept(3) and m.is_complete()
    assert allowed(vocab, m) == [6]
    m.rollback(2)
    assert allowed(vocab, m) == [1]
    f = m.fork()
    assert f.accept(1) and f.accept(3) and f.is_complete()
    assert allowed(vocab, m) == [1]  # the fork moved, not m


def test_text_never_produces_a_special_token(vocab: lg.Vocabulary, compiler: lg.Compiler) -> None:
    m = compiler.compile_ebnf('root ::= "<|end|>"').matcher()
    assert allowed(vocab, m) == [7]  # "<" as text, not the special token of the same bytes
    m = compiler.compile_ebnf("root ::= <|end|>").matcher()
    assert allowed(vocab, m) == [3]  # and the terminal never matches its text
    assert not m.accept(7)


def test_negated_set_reads_any_whole_token_but_eos(vocab: lg.Vocabulary, compiler: lg.Compiler) -> None:
    g = compiler.compile_ebnf('root ::= "a" <[^3]>* <[3]>')
    m = g.matcher()
    assert m.accept(0)
    assert allowed(vocab, m) == [0, 1, 2, 3, 4, 7, 8, 9]  # no id without bytes, no EOS
    for t in (2, 4, 9):
        assert m.accept(t)
    assert m.accept(3) and m.is_complete()
    assert allowed(vocab, m) == [6]
    m = compiler.compile_ebnf("root ::= <[*]>").matcher()
    assert 6 not in allowed(vocab, m) and 5 not in allowed(vocab, m)


def test_a_text_token_goes_both_ways(vocab: lg.Vocabulary, compiler: lg.Compiler) -> None:
    # "ab" as the bytes of the first branch and as the whole token of the second.
    m = compiler.compile_ebnf('root ::= "ab" "a" | <[2]> "b"').matcher()
    assert allowed(vocab, m) == [0, 2]
    assert m.accept(2)
    assert allowed(vocab, m) == [0, 1]
    assert m.accept(1) and m.is_complete()


def test_gbnf_token_syntax_round_trips(vocab: lg.Vocabulary) -> None:
    g = parse_gbnf("root ::= <[1,3-5]> !<[2]> <[^7]> <[*]> <|end|>", token_id=vocab.token_id)
    assert g.rules["root"] == Seq(
        (TokenSet((1, 3, 4, 5)), TokenSet((2,), True), TokenSet((7,), True), TokenSet((), True), TokenSet((3,)))
    )
    assert parse_gbnf(g.to_ebnf()) == g


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("root ::= <|nope|>", "gbnf-unknown-token"),
        ("root ::= <[5-2]>", "gbnf-bad-token-set"),
        ("root ::= <[x]>", "gbnf-bad-token-set"),
        ("root ::= <[^*]>", "gbnf-bad-token-set"),
        ("root ::= <|end", "gbnf-syntax"),
        ("root ::= <[99]>", "unknown-token"),  # outside the vocabulary
        ("root ::= <[5]>", "unknown-token"),  # an id without bytes
        ("root ::= <[6]>", "eos-token"),  # EOS ends the grammar; no terminal reads it
    ],
)
def test_bad_token_references_are_typed_errors(compiler: lg.Compiler, text: str, code: str) -> None:
    with pytest.raises(lg.GrammarError) as e:
        compiler.compile_ebnf(text)
    assert e.value.code == code


def test_token_name_needs_a_vocabulary() -> None:
    with pytest.raises(lg.GrammarError) as e:
        parse_gbnf("root ::= <|end|>")
    assert e.value.code == "gbnf-unknown-token"


def test_vocabulary_token_id_and_extra_special_ids(vocab: lg.Vocabulary) -> None:
    assert vocab.token_id("<|end|>") == 3
    assert vocab.token_id("ab") == 2
    assert vocab.token_id("zz") is None
    extra = vocab.with_special_ids([7])
    assert 7 in extra.special_ids and 7 not in vocab.special_ids
    m = lg.Compiler(extra).compile_ebnf('root ::= "<" | <[7]>').matcher()
    assert allowed(extra, m) == [7]  # only as the terminal: "<" as text has no token now
    assert m.accept(7) and m.is_complete()


def test_ir_token_set_compiles_and_prints(vocab: lg.Vocabulary, compiler: lg.Compiler) -> None:
    g = Grammar({"root": Seq((Literal(b"a"), TokenSet((4,))))})
    assert g.to_ebnf() == 'root ::= "a" <[4]>\n'
    m = compiler.compile_grammar(g).matcher()
    assert m.accept(0) and m.accept(4) and m.is_complete()
    with pytest.raises(ValueError):
        TokenSet(())


def test_budget_says_it_does_not_measure_token_terminals(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.UsageError) as e:
        compiler.compile_ebnf("root ::= <|end|>").token_budget()
    assert e.value.code == "budget-token-terminals"
