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


def test_rows_prefilled_together_from_their_own_prefixes(model: object) -> None:
    """Joiners fed in one pass, each from a stored prefix of its own length (or none), left-padded:
    each row's logits are those of its prompt alone, its stored slots are its own, and the rows
    then decode with the batch they join."""
    kw = _cache_keyword(model)
    prompts = [[1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15, 16, 17, 18, 19, 20]]
    stored = [3, None, 6]  # row 0 from a 3-token prefix, row 1 from nothing, row 2 from 6 tokens
    prefixes = []
    for ids, n in zip(prompts, stored, strict=True):
        if n is None:
            prefixes.append(None)
            continue
        own = BatchCache()
        own.forward(model, [ids[:n]], pad_id=0, cache_keyword=kw)
        prefixes.append([(la.keys.clone(), la.values.clone()) for la in own.cache.layers])
    joining = BatchCache.from_prefixes(prefixes)
    assert joining.attention.tolist() == [[0, 0, 0, 1, 1, 1], [0] * 6, [1] * 6]
    chunks = [ids[n or 0 :] for ids, n in zip(prompts, stored, strict=True)]
    logits = joining.forward(model, chunks, pad_id=0, cache_keyword=kw)
    for row, ids in enumerate(prompts):
        assert torch.allclose(logits[row], _alone(model, ids), atol=1e-4), row
    # a row's stored prefix is its own slots, padding skipped: it serves that prompt alone
    again = BatchCache.from_layers(joining.row_prefix(0, 5) or [])
    assert torch.allclose(again.forward(model, [[6, 7]], pad_id=0, cache_keyword=kw)[0], logits[0], atol=1e-4)
    assert joining.row_prefix(1, len(prompts[1]) + 1) is None  # more slots than the row holds
    # stacked under a batch already decoding, every row decodes as it would alone
    kv = BatchCache()
    kv.forward(model, [[21, 22]], pad_id=0, cache_keyword=kw)
    kv.extend(joining.cache, joining.attention)
    seqs = [[21, 22], *prompts]
    logits = kv.forward(model, [[23], [24], [25, 26], [27]], pad_id=0, cache_keyword=kw)
    for row, (s, fed) in enumerate(zip(seqs, [[23], [24], [25, 26], [27]], strict=True)):
        assert torch.allclose(logits[row], _alone(model, s + fed), atol=1e-4), row
    assert BatchCache.from_prefixes([None, None]).cache is None
