"""Masks agree with llguidance's (1.9.1) on Lark grammars, token by token along random walks.

The default run walks a few grammars on SmolLM2's vocabulary; the slow suite walks the corpus and
the construct grammars on SmolLM2 and Llama 3 for longer. Grammars refused with
``lark-greedy-lexing`` are checked to differ from llguidance for real.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from tests.differential.lark_llguidance import llguidance_matcher, llguidance_tokenizer, walk

import logitgate as lg
from logitgate.frontends.lark import parse_lark

pytest.importorskip("llguidance")

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "lark"
LLAMA3 = Path(__file__).resolve().parents[3] / "shared" / "tokenizers" / "llama3" / "tokenizer.json"

CONSTRUCTS = {
    "ignore": '%ignore /[ \\t]+/\nstart: "(" item ("," item)* ")"\nitem: NAME | INT\n'
    "NAME: /[a-z]+/\n%import common.INT",
    "trailing-ignore": '%ignore " "\nstart: sum\nsum: sum "+" INT | INT\n%import common.INT',
    "bounded": '%ignore " "\nstart: "x"{1,3} "y"?',
    "strings": 'start: "Yes"i | "no" /[!.]{0,2}/ | ("a".."f")+',
    "regex": r"start: /\d{1,3}(\.\d+)?/ | /[\w]+/ | /\s*end/",
    "json": 'start: "call " fn | TEXT\nTEXT: /[^c].*/\nfn: %json {"type": "object", "properties": '
    '{"n": {"type": "integer"}, "s": {"type": "string"}}, "required": ["n"]}',
}
DEFAULT = ["outlines/json.lark", "outlines/arithmetic.lark", "ignore", "trailing-ignore", "bounded", "strings"]
# Refused with a typed error (tests/unit/test_lark.py lists them): nothing to walk.
REFUSED = {"llguidance/lark.lark", "outlines/common.lark"}


def _source(name: str) -> str:
    return CONSTRUCTS.get(name) or (CORPUS / name).read_text(encoding="utf-8")


def _check(vocab: lg.Vocabulary, tokenizer: Any, name: str, walks: int, max_tokens: int) -> None:
    text = _source(name)
    compiled = lg.Compiler(vocab).compile_lark(text)
    theirs = llguidance_matcher(tokenizer, text)
    rng = random.Random(name)
    for _ in range(walks):
        result = walk(compiled, theirs.deep_copy(), rng, max_tokens)
        assert not result.disagreements, f"[{name}] {result.disagreements[0]}"


# Grammars refused with lark-greedy-lexing, and a text the character-level reading accepts but
# llguidance's greedy lexer does not: the error marks a real difference.
GREEDY = [
    ("start: A B\nA: /a+/\nB: /a/", "aa"),
    ('start: NAME " "? NAME\nNAME: /[a-z]+/', "ab"),
    ('%ignore /[ ]+/\nstart: "a" / b/', "a  b"),
]


@pytest.mark.parametrize(("grammar", "text"), GREEDY)
def test_greedy_lexing_errors_mark_real_differences(grammar: str, text: str) -> None:
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [None], eos_ids=[256])
    with pytest.raises(lg.GrammarError) as info:
        lg.Compiler(vocab).compile_lark(grammar)
    assert info.value.code == "lark-greedy-lexing"
    ours = lg.Compiler(vocab).compile_grammar(parse_lark(grammar, check_lexing=False)).matcher()
    assert all(ours.accept(b) for b in text.encode()) and ours.is_complete()
    theirs = llguidance_matcher(llguidance_tokenizer(vocab), grammar)
    assert not (all(theirs.consume_token(b) for b in text.encode()) and theirs.is_accepting())


# docs/lark.md, "Departures from llguidance": (grammar, text, accepted by us, accepted by llguidance).
DEPARTURES = [
    ('%ignore " "\nstart: a | a "z"\na: "x"', "x ", False, True),  # trailing ignore another parse continues
    ('start: X Y | Z\nX: "a"\nY: "b"\nZ: "abc"', "ab", True, False),  # a lexeme shadowed by another
    ("start: TEXT TEXT\nTEXT: /[a-z]*/", "ab", None, True),  # refused (conservative check)
]


@pytest.mark.parametrize(("grammar", "text", "ours", "llguidance"), DEPARTURES)
def test_documented_departures(grammar: str, text: str, ours: bool | None, llguidance: bool) -> None:
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [None], eos_ids=[256])
    if ours is None:
        with pytest.raises(lg.GrammarError) as info:
            lg.Compiler(vocab).compile_lark(grammar)
        assert info.value.code == "lark-greedy-lexing"
    else:
        m = lg.Compiler(vocab).compile_lark(grammar).matcher()
        assert (all(m.accept(b) for b in text.encode()) and m.is_complete()) == ours
    theirs = llguidance_matcher(llguidance_tokenizer(vocab), grammar)
    assert (all(theirs.consume_token(b) for b in text.encode()) and theirs.is_accepting()) == llguidance


@pytest.fixture(scope="module")
def smollm2(smollm2_vocab: lg.Vocabulary) -> tuple[lg.Vocabulary, Any]:
    return smollm2_vocab, llguidance_tokenizer(smollm2_vocab)


@pytest.fixture(scope="module")
def llama3() -> tuple[lg.Vocabulary, Any]:
    tokenizers = pytest.importorskip("tokenizers")
    if not LLAMA3.is_file():
        pytest.skip(f"Llama 3 tokenizer not found at {LLAMA3}")
    vocab = lg.Vocabulary.from_huggingface(tokenizers.Tokenizer.from_file(str(LLAMA3)))
    return vocab, llguidance_tokenizer(vocab)


@pytest.mark.parametrize("name", DEFAULT)
def test_masks_agree_smollm2(smollm2: tuple[lg.Vocabulary, Any], name: str) -> None:
    _check(*smollm2, name, walks=3, max_tokens=25)


ALL = [f"{p.parent.name}/{p.name}" for p in sorted(CORPUS.glob("*/*.lark"))]
ALL = [n for n in ALL if n not in REFUSED] + sorted(CONSTRUCTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama3"])
def test_masks_agree_long(request: pytest.FixtureRequest, tokenizer: str, name: str) -> None:
    _check(*request.getfixturevalue(tokenizer), name, walks=12, max_tokens=80)
