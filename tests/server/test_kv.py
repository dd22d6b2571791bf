"""The batch's KV cache: rows that join, feed several tokens, and leave get the logits each row
would get alone (a tiny random Llama, float32)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from logitgate.generation import _cache_keyword  # noqa: E402
from logitgate.server.kv import BatchCache  # noqa: E402


def _alone(model: object, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()  # type: ignore[operator]


def test_rows_join_feed_and_leave(model: object) -> None:
    kw = _cache_keyword(model)
    kv = BatchCache()
    seqs: list[list[int]] = []

    def join(prompt: list[int]) -> torch.Tensor:
        new = BatchCache()
        logits = new.forward(model, [prompt], pad_id=0, cache_keyword=kw)
        kv.extend(new.cache, new.attention)
        seqs.append(list(prompt))
        return logits[0]

    def step(chunks: list[list[int]]) -> torch.Tensor:
        for s, c in zip(seqs, chunks, strict=True):
            s += c
        return kv.forward(model, chunks, pad_id=0, cache_keyword=kw)

    def check(logits: torch.Tensor) -> None:
        for row, s in enumerate(seqs):
            assert torch.allclose(logits[row], _alone(model, s), atol=1e-4), (row, s)

    assert torch.allclose(join([1, 2, 3, 4, 5]), _alone(model, [1, 2, 3, 4, 5]), atol=1e-4)
    check(step([[6]]))
    assert torch.allclose(join([7, 8, 9, 10, 11, 12, 13, 14, 15]), _alone(model, seqs[1]), atol=1e-4)
    check(step([[16, 17, 18], [19]]))  # a jump-forward row feeds three tokens
    join([20, 21])
    check(step([[22], [23, 24], [25]]))
    kv.keep([1, 2])  # the first row leaves
    del seqs[0]
    check(step([[26], [27]]))
    kv.keep([1])
    del seqs[0]
    assert kv.attention.shape[1] == kv.cache.layers[0].keys.shape[2] == len(seqs[0])  # unused slots dropped
    check(step([[28, 29]]))
