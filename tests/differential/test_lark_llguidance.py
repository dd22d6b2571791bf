"""Masks agree with llguidance's (1.9.1) on Lark grammars, token by token along random walks.

The default run walks a few grammars on SmolLM2's vocabulary; the slow suite walks the corpus and
the construct grammars on SmolLM2 and Llama 3 for longer. Known departures (docs/lark.md,
"Departures") are not walked: the lexer-level ones need llguidance's greedy lexing.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from tests.differential.lark_llguidance import llguidance_matcher, llguidance_tokenizer, walk

import logitgate as lg

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
# Walked in the slow suite only: grammars whose masks we have not found to agree (docs/lark.md).
DEPARTURES = {"llguidance/lark.lark": "greedy lexing: `%ignore COMMENT` starts with /\\s*/ and shadows WS_INLINE"}


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


ALL = [f"{p.parent.name}/{p.name}" for p in sorted(CORPUS.glob("*/*.lark")) if p.name != "common.lark"]
ALL = [n for n in ALL if n not in DEPARTURES] + sorted(CONSTRUCTS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("tokenizer", ["smollm2", "llama3"])
def test_masks_agree_long(request: pytest.FixtureRequest, tokenizer: str, name: str) -> None:
    _check(*request.getfixturevalue(tokenizer), name, walks=12, max_tokens=80)
