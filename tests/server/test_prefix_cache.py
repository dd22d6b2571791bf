"""The prefix cache: a prompt sharing its start with earlier, different prompts is prefilled from
the stored prefix and gets the logits it would get alone (a tiny random Llama, float32)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from logitgate.generation import _cache_keyword  # noqa: E402
from logitgate.server.engine import feed_width, prefill_groups  # noqa: E402
from logitgate.server.kv import BatchCache  # noqa: E402
from logitgate.server.prefix_cache import PrefixCache  # noqa: E402

HEADER = list(range(1, 21))  # 20 tokens every prompt starts with


def _alone(model: object, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()  # type: ignore[operator]


def _prefill(model: object, cache: PrefixCache, ids: list[int]) -> tuple[int, torch.Tensor]:
    """As the engine does: from the longest stored prefix, then noted."""
    reused, layers = cache.lookup(ids)
    kv = BatchCache.from_layers(layers) if layers is not None else BatchCache()
    logits = kv.forward(model, [ids[reused:]], pad_id=0, cache_keyword=_cache_keyword(model))
    cache.remember(ids, kv)
    assert kv.attention.shape[1] == len(ids)
    return reused, logits[0]


def test_shared_start_is_reused_with_the_same_logits(model: object) -> None:
    cache = PrefixCache(min_tokens=16)
    a, b, c = [*HEADER, 30, 31, 32], [*HEADER, 33, 34], [*HEADER, 30, 31, 40, 41]
    assert _prefill(model, cache, a)[0] == 0  # nothing stored yet
    assert _prefill(model, cache, a)[0] == 0  # a repeated prompt shares nothing with a *different* one
    assert len(cache) == 0
    reused, logits = _prefill(model, cache, b)  # b shares the header with a: stored now
    assert reused == 0 and len(cache) == 1
    assert torch.allclose(logits, _alone(model, b), atol=1e-4)
    reused, logits = _prefill(model, cache, c)
    assert reused == len(HEADER)
    assert torch.allclose(logits, _alone(model, c), atol=1e-4)
    # c shares 22 tokens with a: that longer prefix is stored and serves a's next repeat
    reused, logits = _prefill(model, cache, a)
    assert reused == len(HEADER) + 2
    assert torch.allclose(logits, _alone(model, a), atol=1e-4)
    assert cache.hits == 2 and cache.reused_tokens == 2 * len(HEADER) + 2


def test_short_shared_starts_and_the_byte_bound(model: object) -> None:
    cache = PrefixCache(min_tokens=16)
    _prefill(model, cache, [1, 2, 3, 4])
    _prefill(model, cache, [1, 2, 3, 5])
    assert len(cache) == 0  # 3 shared tokens: below min_tokens
    small = PrefixCache(min_tokens=4, max_bytes=1)
    _prefill(model, small, [*HEADER, 30])
    _prefill(model, small, [*HEADER, 31])
    assert len(small) == 0 and small.bytes == 0  # an entry larger than the bound is not kept
    bounded = PrefixCache(min_tokens=4)
    _prefill(model, bounded, [*HEADER, 30])
    _prefill(model, bounded, [*HEADER, 31])
    one = bounded.bytes
    bounded.max_bytes = one + one // 2  # room for one entry: the least recently used goes
    other = [9] * len(HEADER)  # another start of the same length: an entry of the same size
    _prefill(model, bounded, [*other, 30])
    _prefill(model, bounded, [*other, 31])
    assert len(bounded) == 1 and bounded.bytes == one
    assert bounded.lookup([*HEADER, 32])[0] == 0 and bounded.lookup([*other, 32])[0] == len(other)


def test_feed_width() -> None:
    assert feed_width([5]) == 5  # alone: the whole forced run in one pass
    assert feed_width([5, 1]) == 5
    assert feed_width([1] * 7 + [5]) == 1  # in a batch: not every row padded to one row's run
    assert feed_width([3, 3, 3, 1]) == 3
    assert feed_width([2] * 8) == 2


def test_prefill_groups() -> None:
    assert prefill_groups([]) == []
    assert prefill_groups([30]) == [[0]]
    assert prefill_groups([24, 25, 22, 26]) == [[2, 0, 1, 3]]  # similar lengths: one pass
    # a long prompt gets a pass of its own rather than padding the short ones to it
    assert prefill_groups([20, 150, 21, 22]) == [[0, 2, 3], [1]]
    assert sorted(i for g in prefill_groups([5, 80, 9, 200, 7, 81]) for i in g) == list(range(6))
    assert prefill_groups([10, 30], pass_cost=0) == [[0], [1]]  # free passes: never pad
