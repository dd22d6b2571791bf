"""Prompt prefixes that distinct prompts share, with their KV cache: a prompt that starts with
one is prefilled from where the prefix ends.

Chat requests to one server repeat their start: the chat template's header and system prompt,
the tool definitions, a few-shot preamble, the earlier turns of a conversation. Prefill costs
in proportion to the tokens fed and cannot be batched away (it is compute-bound already), so
the shared part is computed once and its keys and values reused.

What is stored is the longest prefix a prompt shares with a recent *different* prompt (at
least ``min_tokens``), cut from the prompt's own prefill: a common start, not a whole prompt,
so a client that repeats a request gets the same reuse as one that varies it. Lookup takes the
longest start of a prompt that a stored prefix begins with (a prefix's keys and values at a
position depend only on the tokens up to it), always leaving at least one token to feed (its logits are
needed). Entries are evicted least recently used first, bounded in bytes. Only caches whose
layers all hold plain ``keys`` / ``values`` tensors (``transformers``' ``DynamicCache``
without sliding windows) are stored.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Protocol

import torch

__all__ = ["PrefixCache"]

_Layers = list[tuple[torch.Tensor, torch.Tensor]]


class RowPrefixes(Protocol):
    """A batch's cache that can copy out one row's first slots (:class:`~.kv.BatchCache`,
    :class:`~.packed.PackedCache`)."""

    def row_prefix(self, row: int, length: int) -> _Layers | None: ...


def _common_length(a: tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixCache:
    """Stored prefixes (token ids -> per-layer keys and values of one row, ``[1, heads, len,
    dim]``), least recently used first."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024, min_tokens: int = 16, recent: int = 64) -> None:
        self.max_bytes = max_bytes
        self.min_tokens = min_tokens
        self._entries: OrderedDict[tuple[int, ...], tuple[_Layers, int]] = OrderedDict()
        self._recent: deque[tuple[int, ...]] = deque(maxlen=recent)
        self.bytes = 0
        self.hits = 0
        self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, ids: list[int]) -> tuple[int, _Layers | None]:
        """The longest start of ``ids`` that a stored prefix begins with, shorter than ``ids``:
        its length and layers, cut to it (``0, None`` when shorter than ``min_tokens``)."""
        best, reused = None, 0
        for key in self._entries:
            n = min(_common_length(key, ids), len(ids) - 1)
            if n > reused:
                best, reused = key, n
        if best is None or reused < self.min_tokens:
            return 0, None
        self._entries.move_to_end(best)
        self.hits += 1
        self.reused_tokens += reused
        layers = self._entries[best][0]
        return reused, [(k[:, :, :reused], v[:, :, :reused]) for k, v in layers]

    def remember(self, ids: list[int], kv: RowPrefixes, row: int = 0) -> None:
        """Notes the prompt ``ids`` whose prefill is row ``row`` of ``kv`` (its first
        ``len(ids)`` attended slots the prompt's) and stores the longest prefix it shares with a
        recent different prompt, when long enough and not stored yet."""
        key = tuple(ids)
        shared = max((_common_length(k, ids) for k in self._recent if k != key), default=0)
        if key not in self._recent:
            self._recent.append(key)
        shared = min(shared, len(ids) - 1)
        prefix = key[:shared]
        if shared < self.min_tokens or prefix in self._entries:
            return
        kept = kv.row_prefix(row, shared)
        if kept is None:
            return
        size = sum(k.nbytes + v.nbytes for k, v in kept)
        if size > self.max_bytes:
            return
        self._entries[prefix] = (kept, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped
