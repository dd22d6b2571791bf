"""Our masks against SGLang's own XGrammar backend (XGrammarGrammarBackend, on the CPU) on the
embedded SmolLM2 vocabulary: both backends get the same spec through SGLang's dispatch, then
the same seeded walk; at every step the two masks SGLang would apply are equal bit for bit
and both backends agree on when the request ends.

The specs avoid where the engines differ by design, which is not a contract question: free JSON
strings (XGrammar lets special tokens' text and raw control bytes into them, logitgate produces
neither), unbounded integers (logitgate also accepts ``2.0`` and ``-0``, docs/json_schema.md)."""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.sglang

WIDTH = 49152  # SmolLM2's logits
STEPS = 64

SPECS: list[tuple[str, str]] = [
    ("regex", r"\(\d{3}\) \d{3}-\d{4}"),
    ("regex", r"(yes|no|maybe)( please)?"),
    ("regex", r"[A-Z][a-z]{0,6}( [A-Z][a-z]{0,6}){0,2}"),
    ("ebnf", 'root ::= "[" num ("," num)* "]"\nnum ::= [1-9] [0-9]*'),
    ("ebnf", 'root ::= "{\\"answer\\": " ("true" | "false") "}"'),
    (
        "json",
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "status": {"enum": ["pending", "shipped", "on hold"]},
                    "ok": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2},
                    "n": {"type": "number"},
                },
                "required": ["status", "ok", "tags", "n"],
                "additionalProperties": False,
            }
        ),
    ),
    (
        "json",
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 1, "maximum": 500},
                    "point": {
                        "type": "object",
                        "properties": {
                            "x": {"type": "integer", "minimum": 1, "maximum": 99},
                            "y": {"type": "integer", "minimum": 1},
                        },
                        "required": ["x", "y"],
                        "additionalProperties": False,
                    },
                },
                "required": ["id", "point"],
                "additionalProperties": False,
            }
        ),
    ),
]


@pytest.fixture(scope="module")
def backends(tokenizer: Any) -> tuple[Any, Any]:
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    from logitgate.integrations.sglang import LogitgateGrammarBackend

    ours = LogitgateGrammarBackend(tokenizer, WIDTH, [tokenizer.eos_token_id], whitespace="flexible")
    # The same end tokens for both: logitgate's vocabulary lists the tokenizer's EOS ids.
    theirs = XGrammarGrammarBackend(
        tokenizer, vocab_size=WIDTH, model_eos_token_ids=list(ours.vocab.eos_ids), any_whitespace=True
    )
    return ours, theirs


def _allowed(mask: torch.Tensor) -> np.ndarray:
    return np.nonzero(np.unpackbits(mask[0].numpy().view(np.uint8), bitorder="little")[:WIDTH])[0]


@pytest.mark.parametrize(("kind", "spec"), SPECS, ids=[f"{k}{i}" for i, (k, _) in enumerate(SPECS)])
def test_masks_agree_with_sglang_xgrammar(backends: tuple[Any, Any], tokenizer: Any, kind: str, spec: str) -> None:
    from logitgate.integrations.sglang import LogitgateGrammar

    ours, theirs = backends
    ended = 0
    for seed in range(4):
        rng = random.Random(seed)
        a = ours._init_value_dispatch((kind, spec), require_reasoning=False)
        b = theirs._init_value_dispatch((kind, spec), require_reasoning=False)
        assert isinstance(a, LogitgateGrammar), a
        mask_a = a.allocate_vocab_mask(WIDTH, 1, "cpu")
        mask_b = b.allocate_vocab_mask(WIDTH, 1, "cpu")
        walked: list[int] = []
        for _ in range(STEPS):
            LogitgateGrammar.fill_vocab_mask_batched([_Row(0, a)], mask_a)
            b.fill_vocab_mask(mask_b, 0)
            assert torch.equal(mask_a, mask_b), f"{kind} masks differ after {tokenizer.decode(walked)!r}"
            allowed = _allowed(mask_a)
            assert len(allowed) > 0
            # Mostly tokens with visible text, so that walks get through whitespace runs.
            visible = [int(t) for t in allowed if tokenizer.decode([int(t)]).strip()]
            tok = rng.choice(visible if visible and rng.random() < 0.9 else [int(t) for t in allowed])
            a.accept_token(tok)
            b.accept_token(tok)
            walked.append(tok)
            assert a.is_terminated() == b.is_terminated(), tokenizer.decode(walked)
            if a.is_terminated():
                ended += 1
                break
        # Applying either mask to the same logits gives the same result.
        logits_a, logits_b = torch.randn(1, WIDTH), None
        logits_b = logits_a.clone()
        a.apply_vocab_mask(logits_a, mask_a)
        b.apply_vocab_mask(logits_b, mask_b)
        assert torch.equal(logits_a, logits_b)
    assert ended >= 1, "no walk reached the end of the grammar"


class _Row:
    """SGLang's GrammarRow shape (row, grammar), without importing the scheduler module."""

    def __init__(self, row: int, grammar: Any) -> None:
        self.row, self.grammar = row, grammar
