"""Tests for the GBNF frontend (logitgate.frontends.gbnf): corpus coverage, exact IR for small
grammars, one test per error family (code + line/column), print/parse round trips, and a short
property fuzz that only typed errors escape.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logitgate.errors import GrammarError, LimitExceeded
from logitgate.frontends.gbnf import parse_gbnf
from logitgate.grammar.ir import Alt, CharClass, Grammar, Literal, Node, Ref, Repeat, Seq, references
from logitgate.limits import Limits

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
GBNF_FILES = sorted((CORPUS / "gbnf").rglob("*.gbnf"))

DIGIT = CharClass(((48, 57),))


def lit(s: str) -> Literal:
    return Literal(s.encode("utf-8"))


def body(text: str) -> Node:
    """The root rule's body of a one-rule grammar."""
    return parse_gbnf(text).rules["root"]


# -- corpus -------------------------------------------------------------------------------------


def test_corpus_present() -> None:
    assert CORPUS.is_dir(), f"corpus missing at {CORPUS}"
    assert len(GBNF_FILES) >= 9


@pytest.mark.parametrize("path", GBNF_FILES, ids=lambda p: p.name)
def test_corpus_parses_and_round_trips(path: Path) -> None:
    g = parse_gbnf(path.read_text(encoding="utf-8"))
    assert "root" in g.rules and g.root == "root"
    again = parse_gbnf(g.to_ebnf())
    assert dict(again.rules) == dict(g.rules)
    assert again == Grammar({n: g.rules[n] for n in again.rules})


def test_corpus_json_shape() -> None:
    g = parse_gbnf((CORPUS / "gbnf" / "json.gbnf").read_text(encoding="utf-8"))
    assert list(g.rules) == ["root", "value", "object", "array", "string", "number", "ws"]
    assert g.rules["ws"] == Alt((Seq(()), lit(" "), Seq((lit("\n"), Repeat(CharClass(((9, 9), (32, 32))), 0, 20)))))
    assert g.rules["root"] == Ref("object")


def test_corpus_english_punctuation_class() -> None:
    g = parse_gbnf((CORPUS / "gbnf" / "english.gbnf").read_text(encoding="utf-8"))
    # [!"#$%&'()*+,-./:;<=>?@[\\\]^_`{|}~]: all ASCII punctuation, merged into four ranges
    assert g.rules["punctuation"] == CharClass(((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)))


# -- exact IR -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('root ::= "a" [0-9]{1,3}', Seq((lit("a"), Repeat(DIGIT, 1, 3)))),
        ('root ::= | " "', Alt((Seq(()), lit(" ")))),
        ('root ::= ""', Seq(())),
        ("root ::=", Seq(())),
        ('root ::= "ab" "c"', Seq((lit("ab"), lit("c")))),
        ('root ::= "a" ("b" "c") | ("d" | "e")', Alt((Seq((lit("a"), lit("b"), lit("c"))), lit("d"), lit("e")))),
        ('root ::= ((("x")))', lit("x")),
        ('root ::= "a" "" "b"', Seq((lit("a"), lit("b")))),
        ('root ::= ("a" "b")*', Repeat(Seq((lit("a"), lit("b"))), 0, None)),
        (
            'root ::= "a"+ "b"? "c"*',
            Seq((Repeat(lit("a"), 1, None), Repeat(lit("b"), 0, 1), Repeat(lit("c"), 0, None))),
        ),
        ('root ::= "a"{2}', Repeat(lit("a"), 2, 2)),
        ('root ::= "a"{2,}', Repeat(lit("a"), 2, None)),
        ('root ::= "a"{,3}', Repeat(lit("a"), 0, 3)),
        ('root ::= "a"{ 2 , 5 }', Repeat(lit("a"), 2, 5)),
        ('root ::= "a"{0,0}', Repeat(lit("a"), 0, 0)),
        ('root ::= "a" *', Repeat(lit("a"), 0, None)),
        ('root ::= "a"*?', Repeat(Repeat(lit("a"), 0, None), 0, 1)),
        ("root ::= .", CharClass(((0, 0x10FFFF),))),
        ("root ::= [^a-cb-dx]", CharClass(((97, 100), (120, 120)), negated=True)),
        ("root ::= [-+]", CharClass(((43, 43), (45, 45)))),
        ("root ::= [a-]", CharClass(((45, 45), (97, 97)))),
        ("root ::= [a-bc-d]", CharClass(((97, 100),))),
        ("root ::= [[\\]]", CharClass(((91, 91), (93, 93)))),
        ("root ::= []", CharClass(())),
        ("root ::= [^]", CharClass((), negated=True)),
        ("root ::= [\\x00-\\x1F\\u00e9\\U0001F600]", CharClass(((0, 31), (0xE9, 0xE9), (0x1F600, 0x1F600)))),
        ("root ::= [ぁ-ゟ]", CharClass(((0x3041, 0x309F),))),
        ('root ::= "\\x41\\u00e9\\U0001F600\\n\\r\\t\\\\\\"\\[\\]"', lit('A\u00e9\U0001f600\n\r\t\\"[]')),
        ('root ::= "\\xFF"', Literal(b"\xc3\xbf")),  # \xHH is a code point, not a byte
        ('root ::= "日本"', Literal("日本".encode())),
        ('root ::= "a\\x00b"', Literal(b"a\x00b")),
        ('root ::= "[#]"', lit("[#]")),  # '#' inside a literal is not a comment
        ('root ::= "a" # comment | "b"', lit("a")),
    ],
)
def test_small_grammars(text: str, expected: Node) -> None:
    assert body(text) == expected


def test_rules_in_definition_order_with_forward_refs() -> None:
    g = parse_gbnf('b-2 ::= a_1\nroot ::= b-2 a_1\na_1 ::= "x"\n')
    assert list(g.rules) == ["b-2", "root", "a_1"]
    assert g.rules["root"] == Seq((Ref("b-2"), Ref("a_1")))
    assert g.rules["b-2"] == Ref("a_1")


def test_custom_root() -> None:
    g = parse_gbnf('start ::= "s"', root="start")
    assert g.root == "start" and g.rules == {"start": lit("s")}


def test_no_space_needed_between_items() -> None:
    assert parse_gbnf('root::=x("a")"b"\nx::="c"').rules["root"] == Seq((Ref("x"), lit("a"), lit("b")))


def test_newlines_continue_after_define_bar_and_inside_parens() -> None:
    text = 'root ::=\n\n  "a" |\n  # comment line\n  "b" (\n "c"\n |\n "d"\n )\nnext ::= "n"\n'
    g = parse_gbnf(text)
    assert g.rules["root"] == Alt((lit("a"), Seq((lit("b"), Alt((lit("c"), lit("d")))))))
    assert g.rules["next"] == lit("n")


def test_crlf_and_bom() -> None:
    g = parse_gbnf('\ufeffroot ::= "a" |\r\n  "b"\r\nx ::= "c"\r\n')
    assert g.rules == {"root": Alt((lit("a"), lit("b"))), "x": lit("c")}


def test_empty_body_then_newline_continues_the_rule() -> None:
    # llama.cpp: a newline right after '::=' is whitespace, so the next line is read as this rule's body.
    with pytest.raises(GrammarError, match="own line") as info:
        parse_gbnf('root ::=\nx ::= "a"\n')
    assert (info.value.code, info.value.line, info.value.column) == ("gbnf-syntax", 2, 3)
    assert parse_gbnf('root ::= ""\nx ::= "a"\n').rules == {"root": Seq(()), "x": lit("a")}


def test_raw_newline_inside_literal_is_kept() -> None:
    assert body('root ::= "a\nb"') == lit("a\nb")


# -- errors: (code, line, column) ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code", "line", "column"),
    [
        ('root ::= "abc', "gbnf-syntax", 1, 10),
        ("root ::= [abc", "gbnf-syntax", 1, 10),
        ('root ::= "ab\\', "gbnf-syntax", 1, 10),
        ("root ::= [a-", "gbnf-syntax", 1, 10),
        ('root ::= "a"\n  "b"', "gbnf-syntax", 2, 3),  # newline at level 0 ends the rule
        ('root ::= "a"\n| "b"', "gbnf-syntax", 2, 1),
        ('root ::= "a" b ::= "c"\nb ::= "x"', "gbnf-syntax", 1, 16),
        ('root = "a"', "gbnf-syntax", 1, 6),
        ('root\n::= "a"', "gbnf-syntax", 1, 5),
        ('::= "a"', "gbnf-syntax", 1, 1),
        ('root ::= * "a"', "gbnf-syntax", 1, 10),
        ('root ::= "a" | +', "gbnf-syntax", 1, 16),
        ("root ::= ( {2} )", "gbnf-syntax", 1, 12),
        ('root ::= "a" )', "gbnf-syntax", 1, 14),
        ('root ::= ( "a"\n\n', "gbnf-syntax", 1, 10),
        ('root ::= "a" @', "gbnf-syntax", 1, 14),
        ('root ::= "a" é', "gbnf-syntax", 1, 14),
        ('root ::= "\\q"', "gbnf-bad-escape", 1, 11),
        ("root ::= [\\d]", "gbnf-bad-escape", 1, 11),
        ('root ::= "\\x4"', "gbnf-bad-escape", 1, 11),
        ('root ::= "\\u12G4"', "gbnf-bad-escape", 1, 11),
        ('root ::= "\\uD800"', "gbnf-bad-codepoint", 1, 11),
        ("root ::= [\\uDFFF]", "gbnf-bad-codepoint", 1, 11),
        ('root ::= "\\U00110000"', "gbnf-bad-codepoint", 1, 11),
        ('root ::= "ab\ud800"', "gbnf-bad-codepoint", 1, 13),
        ("root ::= [\udc80]", "gbnf-bad-codepoint", 1, 11),
        ("root ::= [a-cz-a]", "gbnf-bad-range", 1, 14),
        ('root ::= "a"{3,2}', "gbnf-bad-repeat", 1, 13),
        ('root ::= "a"{}', "gbnf-bad-repeat", 1, 13),
        ('root ::= "a"{,}', "gbnf-bad-repeat", 1, 13),
        ('root ::= "a"{1', "gbnf-bad-repeat", 1, 15),
        ('root ::= "a"{x}', "gbnf-bad-repeat", 1, 14),
        ('root ::= "a"\nitem ::= "b" other\n', "gbnf-undefined-rule", 2, 14),
        ('root ::= "a"\n\nroot ::= "b"\n', "gbnf-duplicate-rule", 3, 1),
        ('item ::= "a"\n', "gbnf-missing-root", 1, 1),
        ("", "gbnf-missing-root", 1, 1),
        ("# only a comment\n", "gbnf-missing-root", 1, 1),
        ("root ::= <[12", "gbnf-syntax", 1, 10),
        ('root ::= "a" <think>', "gbnf-unknown-token", 1, 14),  # a name needs a vocabulary
        ("root ::= !<[1-x]>", "gbnf-bad-token-set", 1, 10),
    ],
)
def test_error_families(text: str, code: str, line: int, column: int) -> None:
    with pytest.raises(GrammarError) as info:
        parse_gbnf(text)
    err = info.value
    assert (err.code, err.line, err.column) == (code, line, column), str(err)
    assert "^" in str(err)  # caret line


def test_undefined_rule_names_the_referrer() -> None:
    with pytest.raises(GrammarError) as info:
        parse_gbnf('root ::= item\nitem ::= "a" missing')
    assert info.value.rule == "item" and "missing" in str(info.value)


def test_duplicate_rule_mentions_first_definition() -> None:
    with pytest.raises(GrammarError, match="line 1"):
        parse_gbnf('root ::= "a"\nroot ::= "b"')


@pytest.mark.parametrize(
    ("text", "limits", "limit"),
    [
        ('root ::= "a"{100001}', Limits(), "max_repeat"),
        ('root ::= "a"{0,100001}', Limits(), "max_repeat"),
        ('root ::= "a"{6}', Limits(max_repeat=5), "max_repeat"),
        ('root ::= "a"{' + "9" * 5000 + "}", Limits(), "max_repeat"),
        ('root ::= (((("a"))))', Limits(max_nesting=3), "max_nesting"),
        ('root ::= "a"****', Limits(max_nesting=3), "max_nesting"),
        ('root ::= ("a" ("b" ("c" "d")*)*)*', Limits(max_nesting=5), "max_nesting"),
        ("root ::= " + "(" * 100_000, Limits(), "max_nesting"),
        ('root ::= "aaaaaaa"', Limits(max_source_bytes=10), "max_source_bytes"),
        ('root ::= "ééé"', Limits(max_source_bytes=15), "max_source_bytes"),
    ],
)
def test_limits(text: str, limits: Limits, limit: str) -> None:
    with pytest.raises(LimitExceeded) as info:
        parse_gbnf(text, limits=limits)
    assert info.value.limit == limit


def test_limits_are_inclusive() -> None:
    assert body('root ::= "a"{10000}') == Repeat(lit("a"), 10000, 10000)
    assert parse_gbnf('root ::= "a"***', limits=Limits(max_nesting=3)).rules["root"] == Repeat(Repeat(Repeat(lit("a"))))
    assert parse_gbnf('root ::= ((("a")))', limits=Limits(max_nesting=3)).rules["root"] == lit("a")


def test_deepest_allowed_nesting_prints_and_round_trips() -> None:
    # 100 levels of (a | b ...) give IR depth 199 <= max_nesting=200: the IR helpers must cope.
    text = "root ::= " + '("a" | "b" ' * 100 + ")" * 100
    g = parse_gbnf(text)
    assert parse_gbnf(g.to_ebnf()) == g
    with pytest.raises(LimitExceeded):
        parse_gbnf("root ::= " + '("a" | "b" ' * 101 + ")" * 101)


# -- round trips of generated grammars -------------------------------------------------------------

_NAMES = ["root", "a", "b-c", "d_1"]


@st.composite
def _gbnf_text(draw: st.DrawFn) -> str:
    """Random well-formed GBNF using every construct (rules 'root', 'a', 'b-c', 'd_1')."""
    chars = st.characters(codec="utf-8")  # every scalar value, no surrogates

    def esc(c: str) -> str:
        return {'"': '\\"', "\\": "\\\\", "[": "\\[", "]": "\\]", "-": "\\-", "^": "\\^", "\n": "\\n"}.get(c, c)

    atom = st.one_of(
        st.text(chars, max_size=4).map(lambda s: '"' + "".join(esc(c) for c in s) + '"'),
        st.lists(st.tuples(chars, chars), max_size=3).map(
            lambda rs: "[" + "".join(f"{esc(min(a, b))}-{esc(max(a, b))}" for a, b in rs) + "]"
        ),
        st.sampled_from([*_NAMES, "."]),
    )
    postfix = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,}", "{,3}", "{0,2}"])

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        seq = st.lists(inner, max_size=3).map(" ".join)
        return st.lists(seq, min_size=1, max_size=3).map(lambda alts: "(" + " | ".join(alts) + ")")

    item = st.tuples(st.recursive(atom, extend, max_leaves=6), postfix).map("".join)
    # Every branch is non-empty: after '|' or '::=' a newline does not end the rule (llama.cpp rule).
    rule_body = st.lists(st.lists(item, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=2).map(
        " |\n  ".join
    )
    return "".join(f"{name} ::= {draw(rule_body)}\n" for name in _NAMES)


@settings(max_examples=60, deadline=None)  # drawing is costly; the fuzz script covers volume
@given(_gbnf_text())
def test_generated_grammars_round_trip(text: str) -> None:
    g = parse_gbnf(text)
    assert list(g.rules) == _NAMES
    again = parse_gbnf(g.to_ebnf())
    assert again == g
    assert parse_gbnf(again.to_ebnf()) == again


# -- fuzz: only typed errors escape ------------------------------------------------------------------

_ALPHABET = [*'rot ::=|()[]^-*+?{},."\\#\n\r\tabxuU0123456789<>!é\ud800', "::=", "\\x", "\\u00", "root ::= "]
_SEEDS = [p.read_text(encoding="utf-8") for p in GBNF_FILES]


def _check_no_crash(text: str) -> None:
    limits = Limits(max_repeat=50, max_nesting=30)
    try:
        g = parse_gbnf(text, limits=limits)
    except (GrammarError, LimitExceeded):
        return
    again = parse_gbnf(g.to_ebnf(), limits=Limits(max_repeat=50, max_nesting=30))
    assert dict(again.rules) == dict(g.rules)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET), max_size=60).map("".join))
def test_fuzz_random_text(text: str) -> None:
    _check_no_crash(text)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(_SEEDS) - 1), st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_fuzz_mutated_corpus(seed_index: int, rng_seed: int, n_mutations: int) -> None:
    rng = random.Random(rng_seed)
    text = _SEEDS[seed_index]
    for _ in range(n_mutations):
        i = rng.randrange(len(text) + 1)
        op = rng.randrange(3)
        piece = rng.choice(_ALPHABET)
        if op == 0:
            text = text[:i] + piece + text[i:]
        elif op == 1:
            text = text[:i] + text[i + rng.randrange(1, 4) :]
        else:
            text = text[:i] + piece + text[i + 1 :]
    _check_no_crash(text)


def test_references_in_reading_order() -> None:
    g = parse_gbnf('root ::= a (b | a)* c\na ::= "x"\nb ::= "y"\nc ::= "z"\n')
    assert references(g.rules["root"]) == ("a", "b", "c")
    assert references(g.rules["a"]) == ()
