"""The batch's KV cache packed into one sequence: every active sequence's slots side by side on
one time axis, a forward pass feeding every sequence's new tokens as one row, no padding.

Each slot records the sequence that owns it (``owner``) and its position in that sequence;
a sequence's slots lie in position order along the axis (they are appended in order, and
compaction keeps the order). A pass concatenates the tokens each sequence feeds (a decoding
sequence its sampled and jump-forward tokens, a joining one its whole prompt), and attention
is computed per sequence (:func:`_packed_attention`, registered with ``transformers`` and
switched on for the pass): each sequence's queries against its own slots only, gathered from
the axis, causal within what it feeds. So a prompt being prefilled, a jump-forward run and
single decode tokens share one pass, each costing its own tokens in the weights' products and
its own slots in attention, where a padded batch costs every row the widest row's tokens and
prefills in passes of their own. A sequence that leaves only releases its slots (owner -1,
never attended); the cache is compacted once most of its slots are released.

This needs a model whose attention layers call ``transformers``' attention interface with the
forward pass's keyword arguments (Llama-like models with ``sdpa`` or ``eager`` attention)
over plain growing cache layers (no sliding window): :func:`packing_supported` tells; other
models are batched padded (:mod:`.kv`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .kv import _layers

__all__ = ["PackedCache", "packing_supported"]

#: Released slots are cut away once they are at least this share of the cache.
_COMPACT_SHARE = 0.5
#: The attention implementation name a packed pass switches its model to.
_ATTENTION = "logitgate_packed"
#: Attention arguments the per-sequence attention does not implement: a model passing one is
#: refused, not computed wrongly.
_UNSUPPORTED_ARGUMENTS = ("softcap", "s_aux", "sinks", "sliding_window", "position_bias")


@dataclass(frozen=True)
class _Segment:
    """One sequence in a packed pass: its queries ``[start, stop)`` on the pass's axis, its key
    slots (a contiguous ``range`` or an index tensor, in position order, the fed ones last) and
    the mask of what each query sees (``None``: everything, one query)."""

    start: int
    stop: int
    keys: range | torch.Tensor
    mask: torch.Tensor | None


@dataclass(frozen=True)
class _Singles:
    """The sequences of a packed pass that feed one token each, attended in one batch: their
    queries on the pass's axis (``[r]``), their key slots left-aligned and padded to the
    longest (``[r, longest]``, padding pointing at any slot) and which of those are theirs
    (``[r, 1, 1, longest]``)."""

    queries: torch.Tensor
    keys: torch.Tensor
    mask: torch.Tensor


@dataclass(frozen=True)
class _Plan:
    """Who attends to what in a packed pass: the sequences feeding one token, batched, and the
    others one by one."""

    singles: _Singles | None
    segments: list[_Segment]


def _packed_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention of a packed pass (``query`` ``[1, heads, fed, dim]``, ``key``/``value`` the
    whole cache axis): each segment of ``kwargs["logitgate_segments"]`` attends to its own key
    slots only. Returns ``[1, fed, heads, dim]``, as ``transformers``' attention functions do."""
    plan: _Plan | None = kwargs.get("logitgate_plan")
    if plan is None:
        raise RuntimeError("packed attention ran without its plan: the model does not pass it through")
    unsupported = [k for k in _UNSUPPORTED_ARGUMENTS if kwargs.get(k) is not None]
    if unsupported:
        raise RuntimeError(f"packed attention does not implement {', '.join(unsupported)}")
    gqa = query.shape[1] != key.shape[1]
    out = torch.empty_like(query)
    if plan.singles is not None:
        one = plan.singles
        rows, longest = one.keys.shape
        kv_heads, dim = key.shape[1], key.shape[3]
        flat = one.keys.reshape(-1)
        k = key[0].index_select(1, flat).view(kv_heads, rows, longest, dim).transpose(0, 1)
        v = value[0].index_select(1, flat).view(kv_heads, rows, longest, dim).transpose(0, 1)
        q = query[0].index_select(1, one.queries).transpose(0, 1).unsqueeze(2)  # [rows, heads, 1, dim]
        attended = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=one.mask, scale=scaling, enable_gqa=gqa
        )
        out[0].index_copy_(1, one.queries, attended.squeeze(2).transpose(0, 1))
    for seg in plan.segments:
        if isinstance(seg.keys, range):
            k = key.narrow(2, seg.keys.start, len(seg.keys))
            v = value.narrow(2, seg.keys.start, len(seg.keys))
        else:
            k, v = key.index_select(2, seg.keys), value.index_select(2, seg.keys)
        out[:, :, seg.start : seg.stop] = torch.nn.functional.scaled_dot_product_attention(
            query[:, :, seg.start : seg.stop], k, v, attn_mask=seg.mask, scale=scaling, enable_gqa=gqa
        )
    return out.transpose(1, 2).contiguous(), None


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(_ATTENTION, _packed_attention)


def packing_supported(model: Any) -> bool:
    """Whether ``model`` can decode packed: a Llama-like ``sdpa`` or ``eager`` attention (its
    layers call the attention interface with the pass's arguments) and no sliding-window or
    chunked layer (a window over the packed axis would count other sequences' slots)."""
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
        _register_attention()
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
        last logits, float32 ``[len(feeds), vocab]`` on the CPU. The model runs the packed
        attention for the pass (its config is switched, then restored): no other thread may
        use it meanwhile."""
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
        owner = torch.cat([self.owner, torch.tensor(owners, dtype=torch.long)])
        position = torch.cat([self.position, torch.tensor(positions, dtype=torch.long)])
        plan = self._plan(feeds, owner)
        config = self._model.config
        implementation = config._attn_implementation
        config._attn_implementation = _ATTENTION
        try:
            with torch.inference_mode():
                res = self._model(
                    input_ids=torch.tensor([ids], dtype=torch.long, device=self._device),
                    position_ids=torch.tensor([positions], dtype=torch.long, device=self._device),
                    use_cache=True,
                    logits_to_keep=torch.tensor(last, device=self._device),
                    logitgate_plan=plan,
                    **{self._cache_keyword: self.cache},
                )
        finally:
            config._attn_implementation = implementation
        self.cache = res.get("cache") if "cache" in res else res.get("past_key_values")
        self.owner, self.position = owner, position
        for seq, tokens in feeds:
            self._length[seq] += len(tokens)
        return res.logits[0].to(torch.float32, copy=True).cpu()

    def _plan(self, feeds: list[tuple[int, list[int]]], owner: torch.Tensor) -> _Plan:
        """Each feed's queries, key slots on the axis ``owner`` describes (the cache's and the
        fed ones) and causal mask."""
        segments = []
        single_queries: list[int] = []
        single_slots: list[torch.Tensor] = []
        start = 0
        for seq, tokens in feeds:
            slots = (owner == seq).nonzero().squeeze(1)
            n, fed = int(slots.shape[0]), len(tokens)
            if fed == 1:
                single_queries.append(start)
                single_slots.append(slots)
            else:  # query i (at position n - fed + i) sees keys 0 .. n - fed + i
                first = int(slots[0])
                keys = range(first, first + n) if int(slots[-1]) - first + 1 == n else slots.to(self._device)
                mask = torch.arange(n)[None, :] <= torch.arange(n - fed, n)[:, None]
                segments.append(_Segment(start, start + fed, keys, mask.to(self._device)))
            start += fed
        singles = None
        if single_slots:
            longest = max(int(t.shape[0]) for t in single_slots)
            keys = torch.zeros((len(single_slots), longest), dtype=torch.long)
            mask = torch.zeros((len(single_slots), 1, 1, longest), dtype=torch.bool)
            for i, t in enumerate(single_slots):
                keys[i, : t.shape[0]] = t
                mask[i, 0, 0, : t.shape[0]] = True
            queries = torch.tensor(single_queries, dtype=torch.long)
            singles = _Singles(queries.to(self._device), keys.to(self._device), mask.to(self._device))
        return _Plan(singles, segments)

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
