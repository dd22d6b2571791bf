"""Hugging Face ``transformers`` integration: a ``LogitsProcessor`` for ``model.generate()``.

Usage::

    from logitgate.integrations.transformers import GrammarLogitsProcessor, vocabulary_for
    vocab = vocabulary_for(model, tokenizer)          # sized by the model's logits width
    compiler = lg.Compiler(vocab)
    proc = GrammarLogitsProcessor([compiler.compile_regex(r"\\d+"), compiler.compile_choice(["a", "b"])])
    out = model.generate(**batch, logits_processor=LogitsProcessorList([proc]), max_new_tokens=32)

Invariants:

- One matcher per batch row. On each call the processor first accepts the tokens each row
  gained since the previous call (``input_ids[row, prompt_len + seen:]``), then fills the masks.
  The prompt length is the width of ``input_ids`` on the first call: with left padding (the
  only padding that works for decoder-only generation) every row's prompt ends there, so pad
  tokens of the prompt are never fed to a matcher.
- A row whose matcher accepted EOS (or can take nothing more) is finished: it gets only the EOS
  and pad ids, which is what ``generate()`` appends to finished rows anyway.
- Rows with grammar ``None`` are left unconstrained.
- Beam search reorders rows between steps; this processor does not follow that (use sampling
  or greedy search).

This module imports torch and transformers; ``import logitgate`` does not import it.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor

from ..compiler import CompiledGrammar
from ..errors import TokenRejected
from ..masks import allocate_mask, apply_mask_counted, fill_masks, mask_to_bool
from ..vocabulary import Vocabulary

__all__ = ["GrammarLogitsProcessor", "logits_width", "vocabulary_for", "vocabulary_for_width"]

_VOCABS: weakref.WeakKeyDictionary[Any, dict[int | None, Vocabulary]] = weakref.WeakKeyDictionary()


def logits_width(model: Any) -> int:
    """The width of the model's logits: the output embedding's rows when the model has one,
    else ``config.vocab_size`` (of the text config for multimodal models)."""
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    weight = getattr(out, "weight", None)
    if weight is not None and weight.ndim == 2:
        return int(weight.shape[0])
    config = model.config
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    return int(config.vocab_size)


def vocabulary_for(model: Any, tokenizer: Any) -> Vocabulary:
    """A :class:`~logitgate.Vocabulary` for ``tokenizer`` sized to ``model``'s logits width.

    Cached per tokenizer object and width (building one takes ~0.5 s on a 50k vocabulary)."""
    return vocabulary_for_width(tokenizer, logits_width(model))


def vocabulary_for_width(tokenizer: Any, width: int | None) -> Vocabulary:
    """:func:`vocabulary_for` before the model is loaded, given its logits width (the same
    cache: the vocabulary built here is the one ``vocabulary_for`` returns later)."""
    try:
        per_tok = _VOCABS.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: no cache
        return Vocabulary.from_huggingface(tokenizer, logits_width=width)
    vocab = per_tok.get(width)
    if vocab is None:
        vocab = per_tok[width] = Vocabulary.from_huggingface(tokenizer, logits_width=width)
    return vocab


class GrammarLogitsProcessor(LogitsProcessor):  # type: ignore[misc]
    """Masks each batch row's logits to the tokens its grammar allows, in place (the core's
    kernel; ``generate()`` hands each step a fresh copy of the logits).

    Args:
        grammars: one compiled grammar for every row, or one per row (``None`` = unconstrained).
            When ``generate()`` expands the batch (``num_return_sequences=k``), a list of ``n``
            grammars for a batch of ``n * k`` rows is repeated row-wise the same way.
        pad_token_id: allowed (with EOS) in finished rows; defaults to none.
        threads: threads for filling the masks (default: one per CPU).

    Attributes after generation: ``matchers`` (per row), ``finished`` (per row, EOS accepted or
    nothing may follow), ``trace`` (per call: allowed-token count per row, when ``trace=True``).
    """

    def __init__(
        self,
        grammars: CompiledGrammar | Sequence[CompiledGrammar | None],
        *,
        pad_token_id: int | None = None,
        threads: int | None = None,
        trace: bool = False,
    ) -> None:
        self._grammars: list[CompiledGrammar | None] | CompiledGrammar = (
            grammars if isinstance(grammars, CompiledGrammar) else list(grammars)
        )
        vocabs = [g.vocab for g in ([grammars] if isinstance(grammars, CompiledGrammar) else grammars) if g]
        if not vocabs:
            raise ValueError("GrammarLogitsProcessor needs at least one grammar")
        if any(v is not vocabs[0] for v in vocabs):
            raise ValueError("all grammars must be compiled for the same Vocabulary")
        self.vocab: Vocabulary = vocabs[0]
        self.pad_token_id = pad_token_id
        self.threads = threads
        self.trace_enabled = trace
        self.trace: list[list[int]] = []
        self.matchers: list[Any] = []
        self.finished: list[bool] = []
        self._prompt_len = -1
        self._seen: list[int] = []
        self._bits: np.ndarray | None = None
        self._end_ids = sorted(set(self.vocab.eos_ids) | ({pad_token_id} if pad_token_id is not None else set()))

    def reset(self) -> None:
        """Forget the batch so the processor can serve another ``generate()`` call."""
        self.matchers, self.finished, self._seen, self.trace = [], [], [], []
        self._prompt_len = -1

    def _start(self, input_ids: torch.Tensor) -> None:
        batch = int(input_ids.shape[0])
        g = self._grammars
        if isinstance(g, CompiledGrammar):
            rows: list[CompiledGrammar | None] = [g] * batch
        elif len(g) == batch:
            rows = list(g)
        elif len(g) and batch % len(g) == 0:
            k = batch // len(g)
            rows = [x for x in g for _ in range(k)]
        else:
            raise ValueError(f"{len(g)} grammars for a batch of {batch} rows")
        self.matchers = [x.matcher() if x is not None else None for x in rows]
        self.finished = [False] * batch
        self._seen = [0] * batch
        self._prompt_len = int(input_ids.shape[1])
        self._bits = allocate_mask(self.vocab, batch)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._prompt_len < 0 or input_ids.shape[0] != len(self.matchers) or input_ids.shape[1] < self._prompt_len:
            self._start(input_ids)
        generated = int(input_ids.shape[1]) - self._prompt_len
        ids = input_ids[:, self._prompt_len :].tolist() if generated else [[] for _ in self.matchers]
        active: list[int] = []
        for row, m in enumerate(self.matchers):
            new = ids[row][self._seen[row] :]
            self._seen[row] = generated
            if m is None:
                continue
            for tok in new:
                if self.finished[row]:
                    break  # generate() pads finished rows; those tokens are not output
                if not m.accept(int(tok)):
                    raise TokenRejected(
                        f"row {row}: token {int(tok)} is not allowed by its grammar", code="token-rejected"
                    )
                if m.is_terminated():  # EOS accepted, or nothing may follow: only EOS/pad from now on
                    self.finished[row] = True
            if not self.finished[row]:
                active.append(row)
        assert self._bits is not None
        bits = self._bits
        if active:
            compact = bits[: len(active)]
            fill_masks([self.matchers[r] for r in active], compact, self.threads)
            if active != list(range(len(active))):  # move compact rows to their places (last first)
                for i in range(len(active) - 1, -1, -1):
                    bits[active[i]] = compact[i]
        words = bits.view(np.uint32)
        for row in range(len(self.matchers)):
            if self.finished[row]:  # only the end ids
                words[row] = 0
                for i in self._end_ids:
                    if i < words.shape[1] * 32:
                        words[row, i // 32] |= np.uint32(1 << (i % 32))
        constrained = [row for row, m in enumerate(self.matchers) if m is not None]  # the others stay as they are
        if self.trace_enabled:
            width = scores.shape[-1]
            counts = mask_to_bool(bits, min(width, bits.shape[-1] * 32)).sum(axis=1).tolist()
            self.trace.append([int(counts[row]) if m is not None else width for row, m in enumerate(self.matchers)])
        if constrained:
            apply_mask_counted(scores, bits, constrained)
        return scores
