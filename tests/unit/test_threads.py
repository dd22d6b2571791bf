"""Concurrency (docs/design.md "Threads"): one compiled grammar under 64 matchers on 64
threads, compiles from 8 threads into one compiler, and fill_masks over matchers in every
state, each checked against the same work done on one thread. `make tsan` runs this file
against the core built with ThreadSanitizer."""

from __future__ import annotations

import hashlib
import json
import random
import threading
from typing import Any

import numpy as np
import pytest

import logitgate as lg

# Bytes, plus multi-byte tokens that span JSON syntax and text, so that masks depend on more
# than the next byte.
_EXTRA = [
    b'{"',
    b'":',
    b'",',
    b'"}',
    b"true",
    b"false",
    b"null",
    b"na",
    b"me",
    b"id",
    b"12",
    b"3.",
    b"],",
    b'["',
    b"\\u",
    b"  ",
]
TOKENS = [bytes([i]) for i in range(256)] + _EXTRA + [b"</s>"]
EOS = len(TOKENS) - 1

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "id": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "na"]}, "maxItems": 4},
        "ok": {"type": "boolean"},
        "nested": {"$ref": "#"},
    },
    "required": ["name", "id"],
    "additionalProperties": False,
}


def vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens(TOKENS, eos_ids=[EOS])


def documents(n: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        doc: dict[str, Any] = {"name": "".join(rng.choice("name") for _ in range(rng.randint(0, 12))), "id": i}
        if rng.random() < 0.5:
            doc["tags"] = [rng.choice(["a", "b", "na"]) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.3:
            doc["nested"] = {"name": "x", "id": 3, "ok": rng.random() < 0.5}
        docs.append(json.dumps(doc, separators=(",", ":")).encode())
    return docs


def tokenize(text: bytes, rng: random.Random) -> list[int]:
    """A random segmentation of `text` into the vocabulary's tokens (bytes or longer ones)."""
    ids, i = [], 0
    while i < len(text):
        longer = [k for k, t in enumerate(_EXTRA, 256) if text.startswith(t, i)]
        if longer and rng.random() < 0.6:
            k = rng.choice(longer)
            ids.append(k)
            i += len(TOKENS[k])
        else:
            ids.append(text[i])
            i += 1
    return [*ids, EOS]


def mask_trace(grammar: lg.CompiledGrammar, ids: list[int], barrier: threading.Barrier | None = None) -> str:
    """A digest of every mask along `ids` (each token accepted after its mask)."""
    m = grammar.matcher()
    bits = lg.allocate_mask(grammar.vocab)
    h = hashlib.blake2b(digest_size=16)
    if barrier is not None:
        barrier.wait()
    for t in ids:
        m.fill_mask(bits, row=0)
        h.update(bits.tobytes())
        assert bits[0, t // 32] >> (t % 32) & 1, "a token of a valid document was masked off"
        assert m.accept(t)
    assert m.is_terminated()
    return h.hexdigest()


def run_threads(n: int, fn: Any) -> list[Any]:
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = fn(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads)
    return results


def test_one_grammar_64_matchers_on_64_threads() -> None:
    rng = random.Random(1)
    sequences = [tokenize(d, rng) for d in documents(64)]
    reference = [mask_trace(lg.Compiler(vocab()).compile_json_schema(SCHEMA), ids) for ids in sequences[:1]]
    # The reference run: one thread, its own grammar; the concurrent run: a fresh grammar (its
    # lazily built parser state is built by the 64 threads at once), started together.
    single = lg.Compiler(vocab(), cache_size=0).compile_json_schema(SCHEMA)
    expected = [mask_trace(single, ids) for ids in sequences]
    assert expected[0] == reference[0]
    shared = lg.Compiler(vocab(), cache_size=0).compile_json_schema(SCHEMA)
    barrier = threading.Barrier(64)
    got = run_threads(64, lambda i: mask_trace(shared, sequences[i], barrier))
    assert got == expected


SCHEMAS: list[Any] = [
    {"type": "integer", "minimum": 3, "maximum": 1000},
    {"type": "string", "pattern": "^[a-z]{2,5}$"},
    {"enum": ["red", "green", "blue", 7, None]},
    {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 3},
    SCHEMA,
    {"anyOf": [{"type": "string", "format": "date"}, {"type": "boolean"}]},
    {"type": "object", "properties": {"a": {"const": "x"}}, "required": ["a"]},
    {"not": {"type": "string"}},
]


def first_masks(grammar: lg.CompiledGrammar, prefix: bytes) -> bytes:
    m = grammar.matcher()
    bits = lg.allocate_mask(grammar.vocab)
    out = []
    m.fill_mask(bits, row=0)
    out.append(bits.tobytes())
    for b in prefix:
        if not m.accept(b):
            break
        m.fill_mask(bits, row=0)
        out.append(bits.tobytes())
    return b"".join(out)


def test_compiles_from_8_threads_into_one_compiler() -> None:
    prefix = b'{"name":"na","id":1'
    expected = [first_masks(lg.Compiler(vocab()).compile_json_schema(s), prefix) for s in SCHEMAS]
    compiler = lg.Compiler(vocab())
    barrier = threading.Barrier(8)

    def work(i: int) -> list[tuple[int, Any, bytes]]:
        barrier.wait()
        order = list(range(len(SCHEMAS)))
        random.Random(i).shuffle(order)
        out = []
        for k in order * 2:  # every schema twice per thread: misses racing, then hits
            g = compiler.compile_json_schema(SCHEMAS[k])
            out.append((k, g._core, first_masks(g, prefix)))
        return out

    results = [r for rs in run_threads(8, work) for r in rs]
    for k, _, masks in results:
        assert masks == expected[k], SCHEMAS[k]
    # One compiled core per schema: the cache kept one of the racing compiles.
    cores: dict[int, set[int]] = {}
    for k, core, _ in results:
        cores.setdefault(k, set()).add(id(core))
    assert all(len(ids) == 1 for ids in cores.values())
    info = compiler.cache_info()
    assert info.entries == len(SCHEMAS) and info.hits + info.misses == 8 * 2 * len(SCHEMAS)


def matchers_in_every_state(compiler: lg.Compiler) -> list[Any]:
    """Matchers of several grammars: fresh, mid-way, complete but open, complete and closed
    (EOS accepted), rejected-then-continued, forked, rolled back, reset."""
    json_g = compiler.compile_json_schema(SCHEMA)
    regex_g = compiler.compile_regex("[a-c]{2,6}")
    choice_g = compiler.compile_choice(["yes", "no", "maybe"])
    out = []
    out.append(json_g.matcher())
    m = json_g.matcher()
    assert m.accept_bytes(b'{"name":"ab')
    out.append(m)
    out.append(m.fork())
    m = json_g.matcher()
    assert m.accept_bytes(b'{"name":"ab","id":12')
    out.append(m)  # complete once "}" comes: mid-number
    m = regex_g.matcher()
    assert m.accept_bytes(b"abc")
    out.append(m)  # complete, may continue
    m = regex_g.matcher()
    assert m.accept_bytes(b"abcabc")
    out.append(m)  # complete, nothing may follow but EOS
    m = choice_g.matcher()
    assert m.accept_bytes(b"no") and m.accept(EOS) and m.is_terminated()
    out.append(m)  # terminated
    m = choice_g.matcher()
    assert not m.accept(ord("x"))
    assert m.accept(ord("m"))
    out.append(m)
    m = json_g.matcher()
    assert m.accept_bytes(b'{"name":"a","id":1,') and m.accept_bytes(b'"tags":["a","na"')
    m.rollback(1)
    out.append(m)
    m = regex_g.matcher()
    assert m.accept_bytes(b"ab")
    m.reset()
    out.append(m)
    return out


def test_fill_masks_with_matchers_in_every_state() -> None:
    compiler = lg.Compiler(vocab())
    for trial in range(5):
        matchers = matchers_in_every_state(compiler)
        random.Random(trial).shuffle(matchers)
        one_by_one = lg.allocate_mask(compiler.vocab, len(matchers))
        for i, m in enumerate(matchers):
            m.fill_mask(one_by_one, row=i)
        batched = lg.allocate_mask(compiler.vocab, len(matchers))
        lg.fill_masks(matchers, batched, threads=8)
        assert np.array_equal(batched, one_by_one)
        # From fresh grammars (lazy state built inside the batch, by the pool's threads).
        fresh = matchers_in_every_state(lg.Compiler(vocab(), cache_size=0))
        fresh_bits = lg.allocate_mask(compiler.vocab, len(fresh))
        lg.fill_masks(fresh, fresh_bits, threads=8)
        reference = matchers_in_every_state(lg.Compiler(vocab(), cache_size=0))
        ref_bits = lg.allocate_mask(compiler.vocab, len(reference))
        for i, m in enumerate(reference):
            m.fill_mask(ref_bits, row=i)
        assert np.array_equal(fresh_bits, ref_bits)


def test_the_same_matcher_twice_in_one_batch_is_a_usage_error() -> None:
    compiler = lg.Compiler(vocab())
    m = compiler.compile_regex("a+").matcher()
    with pytest.raises(lg.UsageError) as e:
        lg.fill_masks([m, m], lg.allocate_mask(compiler.vocab, 2))
    assert e.value.code == "duplicate-matcher"
