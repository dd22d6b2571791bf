"""The Lark frontend (llguidance's dialect): each construct's language, each typed error, the corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

import logitgate as lg
from logitgate.frontends.lark import COMMON_TERMINALS, parse_lark

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "lark"
VOCAB = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [None], eos_ids=[256])
COMPILER = lg.Compiler(VOCAB)


def accepts(grammar: str, text: str) -> bool:
    m = COMPILER.compile_lark(grammar).matcher()
    return all(m.accept(b) for b in text.encode("utf-8")) and m.is_complete()


def language(grammar: str, yes: list[str], no: list[str]) -> None:
    assert [t for t in yes if not accepts(grammar, t)] == []
    assert [t for t in no if accepts(grammar, t)] == []


def test_rules_terminals_and_alternation() -> None:
    g = 'start: greet NAME\ngreet: "hi " | "hello "\nNAME: /[a-z]+/'
    language(g, ["hi bob", "hello x"], ["hi", "hey bob", "hi Bob"])


def test_continuation_lines_comments_and_groups_across_lines() -> None:
    g = 'start: "a"  // first\n  # a comment line\n  | "b"\n  | ("c"\n     "d")\nunused: "x"'
    language(g, ["a", "b", "cd"], ["c"])


def test_string_escapes_and_case_insensitive_strings() -> None:
    language('start: "a\\n\\"\\x41\\u00e9"', ['a\n"Aé'], ["a\n"])
    # Unicode simple case folding, as Rust's (?i): the Kelvin sign folds to k.
    language('start: "ok"i', ["ok", "OK", "oK", "o\u212a"], ["o"])


def test_regex_semantics_follow_rust() -> None:
    language("start: /a.c/", ["abc", "a\rc", "a\u2028c"], ["a\nc"])  # '.' excludes only \n
    language("start: /a.c/s", ["a\nc"], [])
    language(r"start: /\d+/", ["12", "\u0663"], ["a"])  # Unicode digits
    language(r"start: /[\w]+/", ["a_é\u24b6"], ["-"])
    language(r"start: /\s/", ["\u0085", " "], ["x"])


def test_ranges_quantifiers_and_groups() -> None:
    g = 'start: D{2,3} ("x" | "y")+ "z"? [ "w" ] "q"~2\nD: "0".."9"'
    language(g, ["12xqq", "123xyzwqq"], ["1xqq", "1234xqq", "12qq", "12xq"])
    language('start: "a"{2}', ["aa"], ["a", "aaa"])
    language('start: "a"{,2}', ["", "a", "aa"], ["aaa"])


def test_terminals_use_terminals_and_prefixed_rules_are_rules() -> None:
    g = '?start: pair\n!pair: INT "=" INT\nINT: DIGIT+\nDIGIT: /[0-9]/'
    language(g, ["1=23"], ["1=", "="])


def test_ignore_between_lexemes_never_inside_or_before() -> None:
    g = '%ignore " "\nstart: "ab" NUM\nNUM: /[0-9]+/'
    language(g, ["ab12", "ab  12"], [" ab12", "a b12", "ab1 2", "ab12 "])


def test_trailing_ignore_only_where_the_output_can_continue() -> None:
    language('%ignore " "\nstart: "x" "y"?', ["x ", "x y"], [])
    language('%ignore " "\nstart: "x"', [], ["x "])
    # A complete sum can always take another term (left recursion), so a space may trail it.
    language('%ignore " "\nstart: sum\nsum: sum "+" INT | INT\n%import common.INT', ["1 ", "1 + 2 "], ["1 +"])
    language('%ignore " "\nstart: "x"{1,2}', ["x ", "x x"], ["x x "])


def test_llguidance_options() -> None:
    language('%llguidance {"allow_initial_skip": true}\n%ignore " "\nstart: "x"', [" x", "x"], [])
    language('%llguidance {"ignore_once": true}\n%ignore " "\nstart: "x" "y"', ["x y"], ["x  y"])


def test_import_common() -> None:
    g = '%import common.SIGNED_NUMBER -> NUM\n%import common (WS, CNAME)\n%ignore WS\nstart: CNAME "=" NUM'
    language(g, ["abc=-1.5e3", "x_1 =\n2"], ["1x=2", "x=1 "])
    assert len(COMMON_TERMINALS) == 25


def test_json_embedding() -> None:
    g = 'start: "call " fn\nfn: %json {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    language(g, ['call {"n": 1}', 'call {"n":2}'], ['call {"n": "x"}', "call {}"])


def test_left_recursion_is_rewritten() -> None:
    g = 'start: expr\nexpr: expr "+" term | expr "-" term | term\nterm: /[0-9]/'
    language(g, ["1", "1+2-3"], ["+1", "1+"])


# Each typed error: (grammar, code, line, column).
ERRORS = [
    ('start: "a" missing', "lark-undefined", 1, 12),
    ('start: "a"\nstart: "b"', "lark-duplicate", 2, 1),
    ('rule: "a"', "lark-missing-start", 1, 10),
    ('start: A\nA: "a" A', "lark-recursive-terminal", 2, 8),
    ('start: A\nA: "a" r\nr: "b"', "lark-rule-in-terminal", 2, 8),
    ('start: "a" <|im_end|>', "lark-unknown-token", 1, 12),  # not a token of the byte vocabulary
    ('start: "a" <[7-MAX]>', "special-token-unsupported", 1, 12),  # open to the vocabulary's end
    ('start: A\nA: "x" <|im_end|>', "lark-unsupported", 2, 8),
    ('%llguidance {"no_forcing": true}\nstart: "a"', "lark-option-unsupported", 1, 1),
    ('start: "a"\n%import other.X', "lark-import", 2, 1),
    ("start: X\n%import common.NOPE -> X", "lark-import", 2, 1),
    ("start: x\nx[lazy]: /a+/", "lark-unsupported", 2, 3),
    ('start: X\nX.2: "a"', "lark-unsupported", 2, 2),
    ('start: "a" @sub', "lark-unsupported", 1, 12),
    ("start: A\nA: /a/ & /b/", "lark-unsupported", 2, 8),
    ('start: x{"a"}\nx{p}: p', "lark-syntax", 1, 9),
    ("start: /a/i", "lark-regex", 1, 8),
    ("start: /(?=a)a/", "lark-regex", 1, 8),
    (r"start: /[\W]/", "lark-regex", 1, 10),
    ('start: %json {"type": "string", "minLength": -1}', "lark-json", 1, 8),
    ('start: "a" | (', "lark-syntax", 1, 14),
    ('start: "\\q"', "lark-syntax", 1, 9),
    ("start: <[5-1]>", "lark-syntax", 1, 8),
    ('start: "a"\n%declare X', "lark-unsupported", 2, 1),
    ("start: A B\nA: /a+/\nB: /a/", "lark-greedy-lexing", 1, 10),
    ('start: NAME " "? NAME\nNAME: /[a-z]+/', "lark-greedy-lexing", 1, 18),
    ('%ignore /[ ]+/\nstart: "a" / b/', "lark-greedy-lexing", 2, 12),
]


def test_greedy_lexing_allows_repetitions_of_closed_lexemes() -> None:
    """``NAME+`` reads ``ab`` as one NAME, as llguidance does; the language is the same."""
    language('%ignore " "\nstart: NAME+\nNAME: /[a-z]+/', ["ab", "a b", "ab c", "ab "], [" ab"])


@pytest.mark.parametrize(
    ("grammar", "code", "line", "column"), ERRORS, ids=[e[1] + str(i) for i, e in enumerate(ERRORS)]
)
def test_typed_errors_with_line_and_column(grammar: str, code: str, line: int, column: int) -> None:
    with pytest.raises(lg.GrammarError) as info:
        COMPILER.compile_lark(grammar)
    assert (info.value.code, info.value.line, info.value.column) == (code, line, column), str(info.value)


def test_limits_bound_nesting_and_source() -> None:
    with pytest.raises(lg.LimitExceeded):
        parse_lark("start: " + "(" * 300 + '"a"' + ")" * 300, lg.Limits(max_nesting=200))
    with pytest.raises(lg.LimitExceeded):
        parse_lark('start: "a"' + "?" * 300, lg.Limits(max_nesting=200))
    with pytest.raises(lg.LimitExceeded):
        parse_lark('start: "a"{100001}')


@pytest.mark.parametrize(
    "grammar",
    ['start: "a"~99999999999999999999', 'start: "a"~0..18446744073709551616', "start: /a{99999999999999999999}/"],
)
def test_counts_past_int64_are_limits(grammar: str) -> None:
    with pytest.raises(lg.LimitExceeded) as info:
        COMPILER.compile_lark(grammar)
    assert (info.value.limit, info.value.value) == ("max_repeat", 100_000)


def test_compile_lark_takes_text() -> None:
    with pytest.raises(lg.GrammarError) as info:
        COMPILER.compile_lark(b'start: "a"')  # type: ignore[arg-type]
    assert info.value.code == "source-type"


# The corpus: every grammar compiles, except the listed ones, each with its typed error.
CORPUS_ERRORS = {
    "outlines/common.lark": "lark-missing-start",  # a library of terminals, no start rule
    "llguidance/lark.lark": "lark-greedy-lexing",  # _NL ends in /\s*/, which swallows %ignore WS_INLINE
}


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*/*.lark")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_grammars_compile(path: Path) -> None:
    key = f"{path.parent.name}/{path.name}"
    text = path.read_text(encoding="utf-8")
    if key in CORPUS_ERRORS:
        with pytest.raises(lg.GrammarError) as info:
            COMPILER.compile_lark(text)
        assert info.value.code == CORPUS_ERRORS[key]
    else:
        assert COMPILER.compile_lark(text).num_states > 0


def test_outlines_samples_are_sentences() -> None:
    """The sample documents outlines ships with its grammars parse under them."""
    for name, grammar in (("json", "json.lark"), ("arithmetic", "arithmetic.lark")):
        text = (CORPUS / "outlines" / grammar).read_text(encoding="utf-8")
        for sample in sorted((CORPUS / "outlines" / "cfg_samples" / name).glob("*.test")):
            assert accepts(text, sample.read_text(encoding="utf-8").rstrip("\n")), sample.name


def test_special_tokens_lower_to_token_terminals() -> None:
    """``<|name|>`` resolves through the vocabulary to one whole token, never its text; id lists,
    ranges and negations read whole tokens too (test_token_terminals.py checks the core)."""
    tokens = [b"a", b"b", b"<|end|>", b"<|call|>", b"<eos>", b"<", b"|"]
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[4], special_ids=[2, 3])
    compiler = lg.Compiler(vocab)

    def allowed(m: lg.Matcher) -> list[int]:
        bits = lg.allocate_mask(vocab)
        m.fill_mask(bits, row=0)
        return [i for i in range(vocab.size) if bits[0, i // 32] >> (i % 32) & 1]

    m = compiler.compile_lark('start: "a" <|call|> "b" <[2]>').matcher()
    assert allowed(m) == [0] and m.accept(0)
    assert allowed(m) == [3]  # the special token, never the text tokens "<", "|"
    assert m.accept(3) and m.accept(1) and allowed(m) == [2]
    assert m.accept(2) and m.is_complete()
    m = compiler.compile_lark('start: "a" <[^0-1]>').matcher()  # any whole token but a, b (and never EOS)
    assert m.accept(0) and allowed(m) == [2, 3, 5, 6]
    with pytest.raises(lg.GrammarError) as info:
        compiler.compile_lark('start: "a"\n  | <|nope|>')
    assert (info.value.code, info.value.line, info.value.column) == ("lark-unknown-token", 2, 5)
