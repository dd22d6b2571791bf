"""Token bitmasks: allocation, batch filling, and applying a mask to logits.

Layout (shared by every call): int32 array ``[batch, ceil(width / 32)]``; token ``i`` is bit
``i % 32`` of word ``i // 32`` (little-endian bit order within the word).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

__all__ = ["allocate_mask", "apply_mask", "fill_masks", "mask_to_bool"]


def allocate_mask(vocab: Vocabulary, batch: int = 1) -> np.ndarray:
    """A zeroed int32 mask buffer ``[batch, ceil(vocab.size / 32)]``."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    return np.zeros((batch, (vocab.size + 31) // 32), dtype=np.int32)


def mask_to_bool(bits: np.ndarray, width: int) -> np.ndarray:
    """Unpacks ``bits`` ([batch, words] or [words]) into a bool array [..., width]."""
    as_bytes = np.ascontiguousarray(bits, dtype=np.int32).view(np.uint8)
    flat = np.unpackbits(as_bytes, axis=-1, bitorder="little")
    return flat[..., :width].astype(bool)


def apply_mask(logits: Any, bits: np.ndarray) -> Any:
    """Sets ``logits`` to -inf in place wherever the mask bit is 0; returns ``logits``.

    ``logits`` is a numpy array or a torch tensor, shape [width] or [batch, width] matching
    ``bits`` rows. Columns beyond the mask's width (a wider logits row) are masked off too.
    torch is imported only when a tensor is passed.
    """
    width = logits.shape[-1]
    allowed = mask_to_bool(bits, min(width, bits.shape[-1] * 32))
    if logits.ndim == 1 and allowed.ndim == 2:
        allowed = allowed[0]
    if allowed.shape[-1] < width:
        pad = [(0, 0)] * (allowed.ndim - 1) + [(0, width - allowed.shape[-1])]
        allowed = np.pad(allowed, pad, constant_values=False)
    if isinstance(logits, np.ndarray):
        logits[~allowed] = -np.inf
        return logits
    if type(logits).__module__.startswith("torch"):
        import torch

        keep = torch.from_numpy(allowed).to(device=logits.device)
        logits.masked_fill_(~keep, float("-inf"))
        return logits
    raise TypeError(f"apply_mask takes a numpy array or a torch tensor, not {type(logits).__name__}")


def fill_masks(matchers: Sequence[Any], bits: np.ndarray, threads: int | None = None) -> None:
    """Fills row ``i`` of ``bits`` for ``matchers[i]`` on a thread pool, GIL released.

    ``threads`` defaults to the number of CPUs. Each matcher may appear once.
    """
    from . import _core

    n = threads if threads is not None else (os.cpu_count() or 1)
    _core.fill_masks(list(matchers), bits, n)
