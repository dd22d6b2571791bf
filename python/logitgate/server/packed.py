"""The batch's KV cache packed into one sequence: every active sequence's slots side by side on
one time axis, a forward pass feeding every sequence's new tokens as one row, no padding.

Each slot records the sequence that owns it (``owner``) and its position in that sequence.
A pass concatenates the tokens each sequence feeds (a decoding sequence its sampled and
jump-forward tokens, a joining one its whole prompt) and attends through a custom 4D mask: a
token sees the slots of its own sequence at earlier or equal positions, nothing else. So a
prompt being prefilled, a jump-forward run and single decode tokens share one pass, each
costing its own tokens only, where a padded batch costs every row the widest row's tokens and
prefills in passes of their own. A sequence that leaves only releases its slots (owner -1,
never attended); the cache is compacted once most of its slots are released.

This needs an attention that honours a custom 4D mask (``transformers``' ``sdpa`` and
``eager``) over plain growing cache layers (no sliding window): :func:`packing_supported`
tells; other models are batched padded (:mod:`.kv`).
"""

from __future__ import annotations

from typing import Any

import torch

from .kv import _layers

__all__ = ["PackedCache", "packing_supported"]

#: Released slots are cut away once they are at least this share of the cache.
_COMPACT_SHARE = 0.5


def packing_supported(model: Any) -> bool:
    """Whether ``model`` can decode packed: an ``sdpa`` or ``eager`` attention (they take a
    custom 4D mask as it is) and no sliding-window or chunked layer (a window over the packed
    axis would cut other sequences' slots, not this one's)."""
    config = getattr(model, "config", None)
    if config is None:
        return False
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if getattr(config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return False
    if getattr(text, "sliding_window", None) or getattr(text, "attention_chunk_size", None):
        return False
    kinds = getattr(text, "layer_types", None) or ()
    return all(k == "full_attention" for k in kinds)


class PackedCache:
    """The KV cache of the sequences decoded together, packed on one axis (see the module).
    Sequences are named by the ids :meth:`add` returns, stable while they live."""

    def __init__(self, model: Any, *, cache_keyword: str) -> None:
        self._model = model
        self._cache_keyword = cache_keyword
        self._eager = getattr(model.config, "_attn_implementation", None) == "eager"
        self._dtype = getattr(model, "dtype", torch.float32)
        self._device = getattr(model, "device", torch.device("cpu"))
        self.cache: Any = None
        self.owner = torch.zeros(0, dtype=torch.long)  # per slot: its sequence, -1 once released
        self.position = torch.zeros(0, dtype=torch.long)  # per slot: its position in that sequence
        self._length: dict[int, int] = {}  # per live sequence: how many slots it holds
        self._next_id = 0

    @property
    def slots(self) -> int:
        return int(self.owner.shape[0])

    def add(self, prefix: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> int:
        """A new sequence, starting from ``prefix`` (a stored prompt prefix: per layer keys and
        values ``[1, heads, n, dim]``, appended as its first ``n`` slots) or empty; its id."""
        seq = self._next_id
        self._next_id += 1
        n = 0 if prefix is None else int(prefix[0][0].shape[2])
        if n:
            assert prefix is not None
            if self.cache is None:
                from transformers import DynamicCache

                self.cache = DynamicCache(ddp_cache_data=[(k.clone(), v.clone()) for k, v in prefix])
            else:
                for layer, (k, v) in zip(_layers(self.cache), prefix, strict=True):
                    layer.keys = torch.cat([layer.keys, k.to(layer.keys.dtype)], dim=2)
                    layer.values = torch.cat([layer.values, v.to(layer.values.dtype)], dim=2)
            self.owner = torch.cat([self.owner, torch.full((n,), seq, dtype=torch.long)])
            self.position = torch.cat([self.position, torch.arange(n, dtype=torch.long)])
        self._length[seq] = n
        return seq

    def length(self, seq: int) -> int:
        """How many tokens sequence ``seq`` holds."""
        return self._length[seq]

    def forward(self, feeds: list[tuple[int, list[int]]]) -> torch.Tensor:
        """One forward pass feeding each ``(sequence, tokens)`` of ``feeds`` (at least one token
        each, each sequence at most once); appends them to the cache and returns each feed's
        last logits, float32 ``[len(feeds), vocab]`` on the CPU."""
        ids: list[int] = []
        owners: list[int] = []
        positions: list[int] = []
        last: list[int] = []
        for seq, tokens in feeds:
            if not tokens:
                raise ValueError(f"sequence {seq} feeds no token")
            start = self._length[seq]
            ids += tokens
            owners += [seq] * len(tokens)
            positions += range(start, start + len(tokens))
            last.append(len(ids) - 1)
            self._length[seq] = start + len(tokens)
        new_owner = torch.tensor(owners, dtype=torch.long)
        new_position = torch.tensor(positions, dtype=torch.long)
        owner = torch.cat([self.owner, new_owner])
        position = torch.cat([self.position, new_position])
        # token q sees slot s iff s is its own sequence's at a position up to q's
        allowed = (new_owner[:, None] == owner[None, :]) & (position[None, :] <= new_position[:, None])
        if self._eager:
            mask = torch.zeros(allowed.shape, dtype=self._dtype)
            mask.masked_fill_(~allowed, torch.finfo(self._dtype).min)
        else:
            mask = allowed
        with torch.inference_mode():
            res = self._model(
                input_ids=torch.tensor([ids], dtype=torch.long, device=self._device),
                attention_mask=mask[None, None].to(self._device),
                position_ids=new_position[None].to(self._device),
                use_cache=True,
                logits_to_keep=torch.tensor(last, dtype=torch.long, device=self._device),
                **{self._cache_keyword: self.cache},
            )
        self.cache = res.get("cache") if "cache" in res else res.get("past_key_values")
        self.owner, self.position = owner, position
        return res.logits[0].to(torch.float32, copy=True).cpu()

    def release(self, seqs: list[int]) -> None:
        """Forgets sequences ``seqs``: their slots are never attended again, and cut away once
        released slots are most of the cache."""
        if not seqs:
            return
        for seq in seqs:
            del self._length[seq]
        self.owner = torch.where(torch.isin(self.owner, torch.tensor(seqs, dtype=torch.long)), -1, self.owner)
        if not self._length:
            self.cache = None
            self.owner = self.owner[:0]
            self.position = self.position[:0]
            return
        released = int((self.owner < 0).sum())
        if released >= _COMPACT_SHARE * self.slots:
            keep = (self.owner >= 0).nonzero().squeeze(1)
            for layer in _layers(self.cache):
                layer.keys = layer.keys.index_select(2, keep)
                layer.values = layer.values.index_select(2, keep)
            self.owner = self.owner.index_select(0, keep)
            self.position = self.position.index_select(0, keep)

    def row_prefix(self, seq: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]] | None:
        """The keys and values of sequence ``seq``'s first ``length`` tokens, per layer
        (``[1, heads, length, dim]``, copies), or ``None`` when it holds fewer."""
        mine = (self.owner == seq).nonzero().squeeze(1)
        if int(mine.shape[0]) < length or self.cache is None:
            return None
        order = self.position.index_select(0, mine).argsort()
        slots = mine.index_select(0, order[:length])
        return [(la.keys.index_select(2, slots), la.values.index_select(2, slots)) for la in _layers(self.cache)]
