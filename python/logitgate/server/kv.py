"""The batch's KV cache: one ``transformers`` cache object for every active sequence, rows
joining and leaving between decode steps.

Rows of different lengths share the cache's time axis; ``attention`` (``[rows, slots]``, 1 for a
real token, 0 for padding) says which slots each row attends to, and positions are counted
from it, so a padding slot is never seen. Rows that join are prefilled together in a cache of
their own (each from its stored prompt prefix, if any, see :meth:`BatchCache.from_prefixes`),
left-padded to the batch's length (or the batch to theirs) and stacked under the others; a row
that leaves is dropped, and slots no remaining row uses are cut away. Only the cache's layer
tensors (``layers[i].keys`` / ``.values``, ``[rows, heads, slots, dim]``) are touched.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["BatchCache"]


def _layers(cache: Any) -> list[Any]:
    layers = getattr(cache, "layers", None)
    if layers is None or any(not hasattr(la, "keys") or not hasattr(la, "values") for la in layers):
        raise TypeError(f"unsupported KV cache type {type(cache).__name__}: the server needs a DynamicCache")
    return list(layers)


def _left_pad(t: torch.Tensor, slots: int, dim: int) -> torch.Tensor:
    missing = slots - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


class BatchCache:
    """The KV cache of the rows decoded together, and which of its slots each row attends to."""

    def __init__(self) -> None:
        self.cache: Any = None
        self.attention = torch.zeros((0, 0), dtype=torch.long)

    @classmethod
    def from_layers(cls, layers: list[tuple[torch.Tensor, torch.Tensor]]) -> BatchCache:
        """One row whose cache holds ``layers`` (per layer keys and values, ``[1, heads, slots,
        dim]``, copied), every slot attended: a stored prompt prefix to prefill from."""
        from transformers import DynamicCache

        kv = cls()
        kv.cache = DynamicCache(ddp_cache_data=list(layers))
        kv.attention = torch.ones((1, int(layers[0][0].shape[2])), dtype=torch.long)
        return kv

    @classmethod
    def from_prefixes(cls, prefixes: list[list[tuple[torch.Tensor, torch.Tensor]] | None]) -> BatchCache:
        """One row per entry of ``prefixes``: a stored prompt prefix's layers (as in
        :meth:`from_layers`) or ``None`` (an empty row), left-padded to the longest; an empty
        cache when none has a prefix."""
        known = [p for p in prefixes if p is not None]
        if not known:
            return cls()
        if len(prefixes) == 1:
            return cls.from_layers(known[0])
        from transformers import DynamicCache

        lengths = [0 if p is None else int(p[0][0].shape[2]) for p in prefixes]
        slots = max(lengths)
        layers = []
        for i, (k0, v0) in enumerate(known[0]):
            keys = [_left_pad(k0[:, :, :0] if p is None else p[i][0], slots, 2) for p in prefixes]
            values = [_left_pad(v0[:, :, :0] if p is None else p[i][1], slots, 2) for p in prefixes]
            layers.append((torch.cat(keys, dim=0), torch.cat(values, dim=0)))
        kv = cls()
        kv.cache = DynamicCache(ddp_cache_data=layers)
        kv.attention = torch.tensor([[0] * (slots - n) + [1] * n for n in lengths], dtype=torch.long)
        return kv

    def row_prefix(self, row: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """The keys and values of ``row``'s first ``length`` attended slots, per layer
        (``[1, heads, length, dim]``, copies), or ``None`` unless every layer is a plain growing
        one (no sliding window) holding that many."""
        slots = self.attention[row].nonzero().squeeze(1)[:length]
        if int(slots.shape[0]) < length:
            return None
        out = []
        for layer in _layers(self.cache):
            keys, values = layer.keys, layer.values
            if getattr(layer, "is_sliding", False) or not isinstance(keys, torch.Tensor) or keys.dim() != 4:
                return None
            assert isinstance(values, torch.Tensor)
            out.append((keys[row : row + 1].index_select(2, slots), values[row : row + 1].index_select(2, slots)))
        return out

    @property
    def rows(self) -> int:
        return int(self.attention.shape[0])

    def extend(self, cache: Any, attention: torch.Tensor) -> None:
        """Stacks the rows of ``cache`` (a prefill's, with its ``attention``) under the batch."""
        if self.cache is None or self.rows == 0:
            self.cache, self.attention = cache, attention
            return
        slots = max(self.attention.shape[1], attention.shape[1])
        for mine, theirs in zip(_layers(self.cache), _layers(cache), strict=True):
            mine.keys = torch.cat([_left_pad(mine.keys, slots, 2), _left_pad(theirs.keys, slots, 2)], dim=0)
            mine.values = torch.cat([_left_pad(mine.values, slots, 2), _left_pad(theirs.values, slots, 2)], dim=0)
        self.attention = torch.cat([_left_pad(self.attention, slots, 1), _left_pad(attention, slots, 1)], dim=0)

    def forward(self, model: Any, chunks: list[list[int]], *, pad_id: int, cache_keyword: str) -> torch.Tensor:
        """One forward pass of ``model`` feeding ``chunks[i]`` (at least one token each) to row i,
        left-padded to the longest; appends them to the cache and returns each row's last
        logits, float32 ``[rows, width]`` on the CPU."""
        width = max(len(c) for c in chunks)
        ids = torch.full((len(chunks), width), pad_id, dtype=torch.long)
        fed = torch.zeros((len(chunks), width), dtype=torch.long)
        for i, c in enumerate(chunks):
            ids[i, width - len(c) :] = torch.tensor(c, dtype=torch.long)
            fed[i, width - len(c) :] = 1
        attention = torch.cat([self.attention, fed], dim=1) if self.rows else fed
        positions = (attention.cumsum(dim=1) - 1).clamp(min=0)[:, -width:]
        device = getattr(model, "device", torch.device("cpu"))
        with torch.inference_mode():
            res = model(
                input_ids=ids.to(device),
                attention_mask=attention.to(device),
                position_ids=positions.to(device),
                use_cache=True,
                logits_to_keep=1,
                **{cache_keyword: self.cache},
            )
        self.cache = res.get("cache") if "cache" in res else res.get("past_key_values")
        self.attention = attention
        return res.logits[:, -1].to(torch.float32, copy=True).cpu()

    def keep(self, rows: list[int]) -> None:
        """Keeps only ``rows`` (in that order), then drops the slots none of them attends to."""
        if not rows:
            self.cache = None
            self.attention = torch.zeros((0, 0), dtype=torch.long)
            return
        index = torch.tensor(rows, dtype=torch.long)
        attention = self.attention.index_select(0, index)
        used = attention.any(dim=0)
        slots = None if bool(used.all()) else used.nonzero().squeeze(1)
        for layer in _layers(self.cache):
            keys, values = layer.keys.index_select(0, index), layer.values.index_select(0, index)
            if slots is not None:
                keys, values = keys.index_select(2, slots), values.index_select(2, slots)
            layer.keys, layer.values = keys, values
        self.attention = attention if slots is None else attention.index_select(1, slots)
