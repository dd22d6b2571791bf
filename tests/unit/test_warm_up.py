"""Compiler.warm_up: the vocabulary-level work of the common string formats, done ahead."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import logitgate as lg
from logitgate.warm_up import WARM_UP_DOCUMENT, WARM_UP_SCHEMA


def _walk_chars(compiler: lg.Compiler, schema: dict[str, Any], document: object) -> None:
    """Fills the mask after every character of `document` (which must be valid)."""
    matcher = compiler.compile_json_schema(schema).matcher()
    bits = lg.allocate_mask(compiler.vocab)
    matcher.fill_mask(bits, row=0)
    for ch in json.dumps(document):
        assert matcher.accept_bytes(ch.encode()), ch
        matcher.fill_mask(bits, row=0)
    assert matcher.is_complete()


def test_the_document_walks_whole() -> None:
    vocab = lg.Vocabulary.from_tokens([bytes([b]) for b in range(32, 127)] + [None], eos_ids=[95])
    assert lg.Compiler(vocab).warm_up() == len(json.dumps(WARM_UP_DOCUMENT)) + 1
    assert set(WARM_UP_DOCUMENT) == set(WARM_UP_SCHEMA["properties"])  # type: ignore[arg-type]


def test_warm_up_covers_the_formats_first_masks(smollm2_vocab: Any) -> None:
    # A vocabulary of its own: the session's is shared with tests that fill its caches too.
    vocab = lg.Vocabulary(smollm2_vocab.table)
    compiler = lg.Compiler(vocab)
    before = vocab._core.shared_cache_bytes
    compiler.warm_up()
    warmed = vocab._core.shared_cache_bytes
    assert warmed > before
    # Other values of those formats, in another schema, need nothing more of the vocabulary.
    schema = {
        "type": "object",
        "properties": {
            "site": {"type": "string", "format": "uri"},
            "contact": {"type": "string", "format": "email"},
            "at": {"type": "string", "format": "date-time"},
        },
    }
    document = {
        "site": "http://docs.example.net/guide/intro?lang=en",
        "contact": "ops@example.org",
        "at": "1999-12-31T23:59:59Z",
    }
    _walk_chars(compiler, schema, document)
    assert vocab._core.shared_cache_bytes == warmed


def test_warm_up_leaves_the_compilers_cache(smollm2_vocab: Any) -> None:
    compiler = lg.Compiler(lg.Vocabulary(smollm2_vocab.table))
    compiler.compile_json_schema({"type": "integer"})
    info = compiler.cache_info()
    compiler.warm_up()
    after = compiler.cache_info()
    # Only the vocabulary's shared masks grew: no entry, hit, miss or compile was counted.
    assert after.vocabulary_bytes > info.vocabulary_bytes
    assert dataclasses.replace(after, vocabulary_bytes=info.vocabulary_bytes) == info


@pytest.mark.parametrize("second", [False, True])
def test_warm_up_is_repeatable(smollm2_vocab: Any, second: bool) -> None:
    compiler = lg.Compiler(smollm2_vocab)
    n = compiler.warm_up()
    assert (compiler.warm_up() if second else n) == len(json.dumps(WARM_UP_DOCUMENT)) + 1


def test_limits_too_tight_for_the_warm_up_do_nothing() -> None:
    vocab = lg.Vocabulary.from_tokens([bytes([b]) for b in range(32, 127)] + [None], eos_ids=[95])
    tight = lg.Compiler(vocab, limits=lg.Limits(max_automaton_states=50))
    with pytest.raises(lg.LimitExceeded):
        tight.compile_json_schema(WARM_UP_SCHEMA)
    assert tight.warm_up() == 0
