"""Mask agreement with llguidance on Lark grammars: the helpers the tests share.

Both engines get the same token bytes (llguidance's tokenizer is built from our
:class:`~logitgate.Vocabulary`), so a difference in a mask is a difference in grammar semantics,
never in tokenization. A walk samples a token both engines allow, until EOS or a length cap, and
records every step where the allowed sets differ.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import logitgate as lg


class _Wrapper:
    """llguidance's tokenizer interface over a logitgate vocabulary (greedy longest-match
    tokenization: llguidance uses it only for forced text, never for masks)."""

    def __init__(self, vocab: lg.Vocabulary) -> None:
        self.eos_token_id = vocab.eos_ids[0]
        self.bos_token_id = None
        self.tokens = [vocab.token_bytes(i) or b"" for i in range(vocab.size)]
        self.special_token_ids = sorted(vocab.special_ids)
        self._ids = {t: i for i, t in enumerate(self.tokens) if t and i not in vocab.special_ids}
        self._longest = max(len(t) for t in self._ids)

    def __call__(self, data: bytes | str) -> list[int]:
        if isinstance(data, str):
            data = data.encode("utf-8")
        out, i = [], 0
        while i < len(data):
            for n in range(min(self._longest, len(data) - i), 0, -1):
                tid = self._ids.get(data[i : i + n])
                if tid is not None:
                    out.append(tid)
                    i += n
                    break
            else:
                raise ValueError(f"no token for byte {data[i]:#x}")
        return out


def llguidance_tokenizer(vocab: lg.Vocabulary) -> Any:
    import llguidance

    return llguidance.LLTokenizer(
        llguidance.TokenizerWrapper(_Wrapper(vocab)), n_vocab=vocab.size, eos_token=list(vocab.eos_ids)
    )


def llguidance_matcher(tokenizer: Any, lark: str) -> Any:
    import llguidance

    m = llguidance.LLMatcher(tokenizer, llguidance.LLMatcher.grammar_from_lark(lark), log_level=0)
    if m.is_error():
        raise ValueError(m.get_error())
    return m


@dataclass
class Walk:
    text: bytes = b""
    steps: int = 0
    ended: bool = False
    disagreements: list[str] = field(default_factory=list)


def _allowed_ours(m: Any, bits: np.ndarray, size: int) -> set[int]:
    m.fill_mask(bits, row=0)
    flat = np.unpackbits(bits[0].view(np.uint8), bitorder="little")[:size]
    return set(np.flatnonzero(flat).tolist())


def _allowed_llg(m: Any, size: int) -> set[int]:
    raw = np.frombuffer(m.compute_bitmask(), dtype=np.uint8)
    flat = np.unpackbits(raw, bitorder="little")[:size]
    return set(np.flatnonzero(flat).tolist())


def _forced_text_policy(ours: set[int], theirs: set[int], m: Any, vocab: lg.Vocabulary) -> bool:
    """Where the grammar forces bytes, llguidance masks the tokens that spell a proper prefix of
    them (the text is forced as canonical tokens instead, docs/fast_forward.md in llguidance):
    a tokenization policy, not a difference in the language."""
    forced = m.compute_ff_bytes()
    if not forced or not theirs <= ours:
        return False
    return all(
        (vocab.token_bytes(t) or b"\xff") != forced and forced.startswith(vocab.token_bytes(t) or b"\xff")
        for t in ours - theirs
    )


def walk(
    compiled: lg.CompiledGrammar, llg_matcher: Any, rng: random.Random, max_tokens: int, eos_prob: float = 0.1
) -> Walk:
    """One random walk through both engines' masks; stops at the first disagreement."""
    vocab = compiled.vocab
    ours = compiled.matcher()
    bits = lg.allocate_mask(vocab)
    eos = set(vocab.eos_ids)
    out = Walk()
    for _ in range(max_tokens):
        a = _allowed_ours(ours, bits, vocab.size)
        b = _allowed_llg(llg_matcher, vocab.size)
        if a != b and not _forced_text_policy(a, b, llg_matcher, vocab):
            only_ours = sorted(a - b)[:6]
            only_llg = sorted(b - a)[:6]
            out.disagreements.append(
                f"after {out.text!r}: only ours {[vocab.token_bytes(t) for t in only_ours]} ({len(a - b)}), "
                f"only llguidance {[vocab.token_bytes(t) for t in only_llg]} ({len(b - a)})"
            )
            return out
        if not a:
            return out
        a &= b
        choices = sorted(a - eos)
        if a & eos and (not choices or rng.random() < eos_prob):
            out.ended = True
            return out
        tid = rng.choice(choices)
        assert ours.accept(tid) and llg_matcher.consume_token(tid)
        out.text += vocab.token_bytes(tid) or b""
        out.steps += 1
    return out
