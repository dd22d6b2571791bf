"""The public Vocabulary constructors on real tokenizers: sizes, EOS, specials never produced by
grammar text, padding ids masked."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import logitgate as lg
from logitgate.masks import mask_to_bool

SHARED = Path(__file__).resolve().parents[3] / "shared" / "tokenizers"


def _allowed(vocab: lg.Vocabulary, pattern: str, prefix: bytes = b"") -> set[int]:
    m = lg.Compiler(vocab).compile_regex(pattern).matcher()
    assert m.accept_bytes(prefix)
    bits = lg.allocate_mask(vocab)
    m.fill_mask(bits, row=0)
    return {int(i) for i in np.flatnonzero(mask_to_bool(bits[0], vocab.size))}


def test_tiktoken_rank_file() -> None:
    path = SHARED / "tiktoken" / "cl100k_base.tiktoken"
    vocab = lg.Vocabulary.from_tiktoken(path)
    assert vocab.size == 100_277
    assert 100_257 in vocab.eos_ids  # <|endoftext|>
    allowed = _allowed(vocab, "(.|\n)*")
    assert 100_257 in allowed and 100_276 not in allowed  # EOS yes (complete), <|endofprompt|> never
    assert not any(vocab.token_bytes(i) is None for i in allowed)  # unused ids stay masked


def test_huggingface_width_and_specials() -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(SHARED / "gemma3" / "tokenizer.json"))
    vocab = lg.Vocabulary.from_huggingface(tok, logits_width=262_144)
    assert vocab.size == 262_144  # <image_soft_token> (id 262144) lies beyond the logits
    start_of_turn = tok.token_to_id("<start_of_turn>")
    allowed = _allowed(vocab, '[^"]*', b"x")
    assert start_of_turn not in allowed
    assert all(i not in allowed for i in vocab.special_ids if i not in vocab.eos_ids)
    assert set(vocab.eos_ids) <= allowed  # "x" is complete: EOS allowed
    # A wider logits row than the vocabulary: the extra ids are masked.
    wide = lg.Vocabulary.from_huggingface(tok, logits_width=262_400)
    assert max(_allowed(wide, "[a-z]+")) < 262_144


def test_gguf_vocabulary(smollm2_path: Path) -> None:
    vocab = lg.Vocabulary.from_gguf(smollm2_path)
    assert vocab.size == 49_152 and 2 in vocab.eos_ids  # <|im_end|>
    allowed = _allowed(vocab, "[0-9]{2}")
    assert allowed and all((vocab.token_bytes(i) or b"").isdigit() for i in allowed)
