"""Repetition control: penalties on the logits of tokens the output already holds, applied
*before* the grammar's mask (a penalty only reorders what the model prefers; the mask still
decides what is allowed).

- ``repetition_penalty`` (CTRL, Keskar et al. 2019; transformers' name): every token that occurs
  in the output has its logit divided by the penalty when positive, multiplied when negative.
  1.0 is off.
- ``frequency_penalty`` and ``presence_penalty`` (OpenAI's names and semantics): the logit of
  token t goes down by ``frequency_penalty * count(t) + presence_penalty * (count(t) > 0)``,
  count over the output so far. 0.0 is off.
- ``dry_multiplier`` ("Don't Repeat Yourself", the n-gram penalty of text-generation-webui and
  llama.cpp): when the output's last tokens already occurred earlier followed by token t, t
  would extend a repeated sequence of length L; once L >= ``dry_allowed_length`` its logit goes
  down by ``dry_multiplier * dry_base ** (L - dry_allowed_length)``. 0.0 is off. Repeated
  sequences are found with the Z-function of the reversed output (linear per step).

Only output tokens count (the prompt is text the output may copy: names, numbers). Forced
tokens (jump-forward) count too: they are part of the output the model reads.

Use with ``lg.generate(..., repetition_penalty=..., frequency_penalty=..., presence_penalty=...,
dry_multiplier=...)``, or with ``model.generate()`` as a logits processor placed *before*
logitgate's :class:`~logitgate.integrations.transformers.LogitsProcessor`::

    from transformers import LogitsProcessorList
    rep = RepetitionControl(frequency_penalty=0.5, prompt_length=input_ids.shape[1])
    model.generate(input_ids, logits_processor=LogitsProcessorList([rep, lg_processor]))
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RepetitionControl", "repeat_lengths"]


def repeat_lengths(history: Sequence[int]) -> dict[int, int]:
    """For each token t that followed an earlier occurrence of the history's last tokens: the
    length of the longest such repeated suffix (token -> L). Z-function of the reversed history:
    z[k] is how many tokens before position n - k match the last tokens."""
    rev = list(reversed(history))
    n = len(rev)
    z = [0] * n
    left = right = 0
    for k in range(1, n):
        if k < right:
            z[k] = min(right - k, z[k - left])
        while k + z[k] < n and rev[z[k]] == rev[k + z[k]]:
            z[k] += 1
        if k + z[k] > right:
            left, right = k, k + z[k]
    out: dict[int, int] = {}
    for i in range(1, n):  # history[i] followed a copy of the z[n - i] tokens before the end
        length = z[n - i]
        if length:
            tok = history[i]
            if length > out.get(tok, 0):
                out[tok] = length
    return out


@dataclass
class RepetitionControl:
    """The penalties above, for one generation (see the module docs for each one's meaning).

    :meth:`apply` penalizes a logits row in place given the output so far; calling the object
    as ``(input_ids, scores)`` makes it a ``transformers`` logits processor (rows of
    ``input_ids`` past ``prompt_length`` are the output).
    """

    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    prompt_length: int = 0

    def __post_init__(self) -> None:
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")
        if self.dry_multiplier < 0 or self.dry_base < 1 or self.dry_allowed_length < 1:
            raise ValueError("dry_multiplier must be >= 0, dry_base >= 1 and dry_allowed_length >= 1")

    @property
    def active(self) -> bool:
        return bool(
            self.repetition_penalty != 1.0 or self.frequency_penalty or self.presence_penalty or self.dry_multiplier
        )

    def penalties(self, history: Sequence[int]) -> tuple[dict[int, float], list[int]]:
        """(token -> amount to subtract, tokens to scale by repetition_penalty)."""
        counts = Counter(history)
        sub: dict[int, float] = {}
        if self.frequency_penalty or self.presence_penalty:
            for tok, c in counts.items():
                sub[tok] = self.frequency_penalty * c + self.presence_penalty
        if self.dry_multiplier:
            for tok, length in repeat_lengths(history).items():
                if length >= self.dry_allowed_length:
                    extra = self.dry_multiplier * self.dry_base ** (length - self.dry_allowed_length)
                    sub[tok] = sub.get(tok, 0.0) + extra
        scaled = list(counts) if self.repetition_penalty != 1.0 else []
        return sub, scaled

    def apply(self, logits: Any, history: Sequence[int]) -> Any:
        """Penalizes ``logits`` (a 1-D torch tensor or numpy array over the vocabulary) in place
        for the output ``history``; returns it. Ids past the logits' width are ignored."""
        if not self.active or not history:
            return logits
        sub, scaled = self.penalties(history)
        width = logits.shape[-1]
        if scaled:
            idx = [t for t in scaled if 0 <= t < width]
            vals = logits[idx]
            pos = vals > 0
            vals[pos] = vals[pos] / self.repetition_penalty
            vals[~pos] = vals[~pos] * self.repetition_penalty
            logits[idx] = vals
        for tok, amount in sub.items():
            if 0 <= tok < width:
                logits[tok] -= amount
        return logits

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        for row in range(scores.shape[0]):
            history = [int(t) for t in input_ids[row, self.prompt_length :].tolist()]
            self.apply(scores[row], history)
        return scores
