"""Repetition control (logitgate.repetition): the penalties' arithmetic against their
definitions, and the DRY repeat lengths against a brute-force search."""

from __future__ import annotations

import random

import numpy as np
import pytest

from logitgate.repetition import RepetitionControl, repeat_lengths


def _brute_repeat_lengths(history: list[int]) -> dict[int, int]:
    n = len(history)
    out: dict[int, int] = {}
    for i in range(1, n):
        k = 0
        while k < i and history[i - 1 - k] == history[n - 1 - k]:
            k += 1
        if k:
            out[history[i]] = max(out.get(history[i], 0), k)
    return out


def test_repeat_lengths_match_brute_force() -> None:
    rng = random.Random(3)
    assert repeat_lengths([1, 2, 3, 9, 1, 2, 3]) == {9: 3}
    for _ in range(300):
        h = [rng.randrange(4) for _ in range(rng.randrange(0, 40))]
        assert repeat_lengths(h) == _brute_repeat_lengths(h)


def test_openai_frequency_and_presence() -> None:
    logits = np.zeros(6, dtype=np.float32)
    RepetitionControl(frequency_penalty=0.5, presence_penalty=0.25).apply(logits, [1, 1, 1, 4])
    assert logits.tolist() == [0.0, -1.75, 0.0, 0.0, -0.75, 0.0]


def test_repetition_penalty_divides_positive_multiplies_negative() -> None:
    logits = np.array([2.0, -2.0, 2.0, -2.0], dtype=np.float32)
    RepetitionControl(repetition_penalty=2.0).apply(logits, [0, 1, 1])
    assert logits.tolist() == [1.0, -4.0, 2.0, -2.0]


def test_dry_penalty_grows_with_the_repeat() -> None:
    ctl = RepetitionControl(dry_multiplier=1.0, dry_base=2.0, dry_allowed_length=2)
    logits = np.zeros(10, dtype=np.float32)
    ctl.apply(logits, [1, 2, 3, 9, 1, 2, 3])  # 9 would repeat "1 2 3 9": L = 3
    assert logits[9] == pytest.approx(-2.0) and np.count_nonzero(logits) == 1
    logits = np.zeros(10, dtype=np.float32)
    ctl.apply(logits, [1, 2, 9, 4, 2])  # L = 1 < allowed length: no penalty
    assert not logits.any()


def test_logits_processor_counts_only_the_output() -> None:
    torch = pytest.importorskip("torch")
    ctl = RepetitionControl(presence_penalty=1.0, prompt_length=2)
    scores = torch.zeros(2, 5)
    ids = torch.tensor([[3, 3, 1], [4, 4, 2]])
    ctl(ids, scores)
    assert scores.tolist() == [[0, -1, 0, 0, 0], [0, 0, -1, 0, 0]]


def test_bad_settings_raise() -> None:
    with pytest.raises(ValueError, match="repetition_penalty"):
        RepetitionControl(repetition_penalty=0)
    with pytest.raises(ValueError, match="dry"):
        RepetitionControl(dry_multiplier=-1)
