"""The packed batch cache: sequences that join (from a stored prefix or none), feed several
tokens in one pass with others, and leave get the logits each would get alone, with ``sdpa``
and ``eager`` attention (a tiny random Llama, float32); the engine decodes the same tokens
packed as padded (the embedded SmolLM2)."""

from __future__ import annotations

import asyncio
import copy
import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from logitgate.generation import _cache_keyword, compiler_for, prompt_ids  # noqa: E402
from logitgate.server.engine import Completion, Engine, Request, SamplingParams  # noqa: E402
from logitgate.server.packed import PackedCache, packing_supported  # noqa: E402


def _alone(model: object, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()  # type: ignore[operator]


def _with_attention(model: object, impl: str) -> object:
    other = copy.deepcopy(model)
    other.config._attn_implementation = impl  # type: ignore[attr-defined]
    return other


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_sequences_join_feed_and_leave(model: object, impl: str) -> None:
    model = _with_attention(model, impl)
    assert packing_supported(model)
    kv = PackedCache(model, cache_keyword=_cache_keyword(model))
    seqs: dict[int, list[int]] = {}

    def step(feeds: dict[int, list[int]]) -> None:
        for s, fed in feeds.items():
            seqs[s] += fed
        logits = kv.forward(list(feeds.items()))
        assert logits.shape[0] == len(feeds)
        for row, s in enumerate(feeds):
            assert torch.allclose(logits[row], _alone(model, seqs[s]), atol=1e-4), (s, seqs[s])
            assert kv.length(s) == len(seqs[s])

    a = kv.add()
    seqs[a] = []
    step({a: [1, 2, 3, 4, 5]})  # a prompt alone
    b = kv.add()
    seqs[b] = []
    step({a: [6], b: [7, 8, 9, 10, 11, 12]})  # a decode token and a prompt in one pass
    c = kv.add()
    seqs[c] = []
    step({b: [13, 14, 15], a: [16], c: [17, 18]})  # a jump-forward run, any order
    kv.release([a])  # a leaves; its slots are never seen again
    step({b: [19], c: [20]})
    slots = kv.slots
    kv.release([b])  # now most slots are released: cut away
    assert kv.slots < slots
    assert kv.slots == kv.cache.layers[0].keys.shape[2] == len(seqs[c])
    step({c: [21, 22]})
    kv.release([c])
    assert kv.cache is None and kv.slots == 0
    d = kv.add()
    seqs[d] = []
    step({d: [23, 24]})  # a fresh start after everyone left
    with pytest.raises(ValueError, match="feeds no token"):
        kv.forward([(d, [])])


def test_stored_prefixes_are_a_sequences_own_slots(model: object) -> None:
    """A sequence started from a stored prefix decodes as its prompt alone; the prefix copied
    out of a packed cache is that sequence's slots only, in position order."""
    kw = _cache_keyword(model)
    kv = PackedCache(model, cache_keyword=kw)
    a, b = kv.add(), kv.add()
    kv.forward([(a, [1, 2, 3]), (b, [4, 5, 6, 7, 8, 9])])
    kv.forward([(b, [10]), (a, [11, 12])])
    prefix = kv.row_prefix(b, 6)
    assert prefix is not None and prefix[0][0].shape[2] == 6
    assert kv.row_prefix(a, 6) is None  # a holds five
    c = kv.add(prefix)  # [4..9] stored: only [20] to feed
    assert kv.length(c) == 6
    logits = kv.forward([(c, [20]), (a, [13])])
    assert torch.allclose(logits[0], _alone(model, [4, 5, 6, 7, 8, 9, 20]), atol=1e-4)
    assert torch.allclose(logits[1], _alone(model, [1, 2, 3, 11, 12, 13]), atol=1e-4)
    fresh = PackedCache(model, cache_keyword=kw)
    d = fresh.add(prefix)  # into an empty cache
    assert torch.allclose(fresh.forward([(d, [20])])[0], logits[0], atol=1e-4)


def test_models_that_cannot_be_packed(model: object) -> None:
    assert not packing_supported(_with_attention(model, "flex_attention"))
    windowed = copy.deepcopy(model)
    windowed.config.sliding_window = 16  # type: ignore[attr-defined]
    assert not packing_supported(windowed)
    assert not packing_supported(object())


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "maximum": 150}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def smollm2() -> tuple[object, object, object]:
    from logitgate.integrations.transformers import vocabulary_for
    from logitgate.models import load_model

    model, tokenizer = load_model(None, dtype=torch.float32)
    return model, tokenizer, vocabulary_for(model, tokenizer)


async def _answer(req: Request) -> tuple[str, object]:
    """The request's last event: ``("done", Completion)`` or ``("error", error)``."""
    while (event := await asyncio.wait_for(req.events.get(), 120))[1] not in ("done", "error"):
        pass
    return event[1], event[2]


def test_packed_and_padded_engines_decode_the_same_tokens(smollm2: tuple[object, object, object]) -> None:
    """The embedded SmolLM2, greedy: requests with and without a grammar, two joining while two
    decode, give the same completions batched packed as batched padded."""
    model, tokenizer, vocab = smollm2
    person = compiler_for(vocab).compile_json_schema(PERSON)
    asks = [
        ("Describe a person as JSON.", person),
        ("Write one sentence about the sea.", None),
        ("Give me a JSON record of a fictional engineer named Ada, with her age.", person),
        ("Count from one to five.", None),
    ]

    async def run(packing: bool) -> list[tuple[str, str, int]]:
        engine = Engine(model, tokenizer, vocab, max_batch=4, packing=packing)
        assert engine.packed is packing
        engine.start()
        try:
            reqs = []
            for i, (text, grammar) in enumerate(asks):
                params = SamplingParams(max_tokens=24, temperature=0.0)
                reqs.append(Request(prompt_ids(tokenizer, text), grammar, params, stream=i == 0))
                engine.submit(reqs[-1])
                if i == 1:  # the first two decode before the others join
                    assert (await asyncio.wait_for(reqs[0].events.get(), 120))[1] == "text"
            out = []
            for r in reqs:
                kind, done = await _answer(r)
                assert kind == "done" and isinstance(done, Completion), done
                out.append((done.text, done.finish_reason, done.completion_tokens))
            return out
        finally:
            engine.stop()

    packed, padded = asyncio.run(run(True)), asyncio.run(run(False))
    assert packed == padded
    for (text, _, _), (_, grammar) in zip(packed, asks, strict=True):
        if grammar is not None:
            assert set(json.loads(text)) == {"name", "age"}


@pytest.mark.parametrize("packing", [True, False])
def test_a_joining_request_whose_pass_fails_is_answered(smollm2: tuple[object, object, object], packing: bool) -> None:
    """A prompt the model cannot take (a token id past its vocabulary) fails in the forward
    pass: its request gets an error event, not silence, and the next request is served."""
    model, tokenizer, vocab = smollm2

    async def run() -> None:
        engine = Engine(model, tokenizer, vocab, packing=packing)
        engine.start()
        try:
            bad = Request([1, 10**9], None, SamplingParams(max_tokens=4))
            engine.submit(bad)
            kind, err = await _answer(bad)
            assert kind == "error" and "decoding failed" in str(err), err
            good = Request(prompt_ids(tokenizer, "Say hi."), None, SamplingParams(max_tokens=4, temperature=0.0))
            engine.submit(good)
            kind, done = await _answer(good)
            assert kind == "done" and isinstance(done, Completion) and done.completion_tokens == 4
        finally:
            engine.stop()

    asyncio.run(run())


def test_the_server_packs_unless_told_not_to(smollm2: tuple[object, object, object]) -> None:
    from logitgate.cli.main import build_parser
    from logitgate.cli.serve import server_settings
    from logitgate.server import create_app

    model, tokenizer, _ = smollm2
    for flags, packed in [([], True), (["--batching", "packed"], True), (["--batching", "padded"], False)]:
        settings = server_settings(build_parser().parse_args(["serve", *flags]), "m")
        assert create_app(model, tokenizer, settings).state.logitgate.engine.packed is packed, flags
