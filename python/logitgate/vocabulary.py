"""Vocabulary: the exact bytes of every token id, compiled once per tokenizer into the core's
token trie. Build it with one of the ``from_*`` constructors; share it between compilers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import _core
from .tokenizers import (
    TokenTable,
    table_from_gguf,
    table_from_huggingface,
    table_from_tiktoken,
    table_from_tokens,
)

__all__ = ["Vocabulary"]


class Vocabulary:
    """Token id -> bytes, special ids, EOS ids and the logits width masks are sized by.

    >>> import logitgate as lg
    >>> v = lg.Vocabulary.from_tokens([b"a", b"b", b"ab", None], eos_ids=[3])
    >>> v.size, v.token_bytes(2), v.eos_ids
    (4, b'ab', (3,))
    """

    def __init__(self, table: TokenTable) -> None:
        self._table = table
        self._names: dict[bytes, int] | None = None  # token_id's index, built on first use
        self._fingerprint: bytes | None = None
        self._core = _core.make_vocabulary(
            list(table.tokens), sorted(table.special_ids), list(table.eos_ids), table.logits_width
        )

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def from_huggingface(cls, tokenizer: Any, logits_width: int | None = None) -> Vocabulary:
        """From a ``transformers`` tokenizer or a ``tokenizers.Tokenizer``; ``logits_width``
        is the model's output width when it differs from the tokenizer's size."""
        return cls(table_from_huggingface(tokenizer, logits_width=logits_width))

    @classmethod
    def from_tiktoken(
        cls,
        path_or_ranks: str | os.PathLike[str] | Mapping[bytes, int],
        special_tokens: Mapping[str, int] | None = None,
        logits_width: int | None = None,
    ) -> Vocabulary:
        """From a ``.tiktoken`` rank file (or a ``{bytes: rank}`` dict) and its special tokens."""
        return cls(table_from_tiktoken(path_or_ranks, special_tokens=special_tokens, logits_width=logits_width))

    @classmethod
    def from_gguf(cls, path: str | os.PathLike[str]) -> Vocabulary:
        """From the vocabulary embedded in a GGUF model file (no model weights are read)."""
        return cls(table_from_gguf(path))

    @classmethod
    def from_tokens(
        cls,
        tokens: Sequence[bytes | None],
        eos_ids: Iterable[int] = (),
        special_ids: Iterable[int] = (),
        logits_width: int | None = None,
    ) -> Vocabulary:
        """From explicit token bytes (``None`` for ids without bytes)."""
        return cls(table_from_tokens(list(tokens), eos_ids=eos_ids, special_ids=special_ids, logits_width=logits_width))

    def with_special_ids(self, ids: Iterable[int]) -> Vocabulary:
        """This vocabulary with ``ids`` declared special as well: for tokenizers that do not
        mark some control tokens (a chat template's ``<tool_call>`` kept as a plain added
        token, say). Special ids are never produced by grammar text; a grammar reads them only
        as token terminals (``<|name|>``, ``<[id]>``). Returns a new vocabulary (compile
        against it); ids outside the table raise :class:`~logitgate.VocabularyError`.

        >>> import logitgate as lg
        >>> v = lg.Vocabulary.from_tokens([b"a", b"<call>", None], eos_ids=[2])
        >>> sorted(v.with_special_ids([1]).special_ids)
        [1, 2]
        """
        table = dataclasses.replace(self._table, special_ids=self._table.special_ids | frozenset(ids))
        return Vocabulary(table)

    def token_id(self, name: str) -> int | None:
        """The id of the token spelled exactly ``name`` (``"<|im_end|>"``): a special token
        of that text first, else a text token of exactly those bytes; None when there is none.
        This is how grammars resolve token terminals by name."""
        if self._names is None:
            names: dict[bytes, int] = {}
            for i, b in enumerate(self._table.tokens):
                if b is not None and i not in self._table.special_ids:
                    names.setdefault(b, i)
            for i in sorted(self._table.special_ids):  # special tokens win over text of the same bytes
                b = self._table.tokens[i]
                if b is not None:
                    names[b] = i
            self._names = names
        try:
            return self._names.get(name.encode("utf-8"))
        except UnicodeEncodeError:  # a lone surrogate: no token is spelled so
            return None

    def special_texts(self) -> dict[str, int]:
        """The text of each special token with bytes (valid UTF-8), but the EOS ids: text ->
        id (the lowest id where several share a text)."""
        out: dict[str, int] = {}
        eos = set(self.eos_ids)
        for i in sorted(self._table.special_ids - eos, reverse=True):
            b = self._table.tokens[i]
            if b:
                try:
                    out[b.decode("utf-8")] = i
                except UnicodeDecodeError:
                    continue
        return out

    # -- queries ------------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """The logits width: masks have one bit per id below it."""
        return int(self._table.logits_width)

    @property
    def eos_ids(self) -> tuple[int, ...]:
        return tuple(self._core.eos_ids)

    @property
    def special_ids(self) -> frozenset[int]:
        return self._table.special_ids

    def token_bytes(self, token_id: int) -> bytes | None:
        """The exact bytes of ``token_id`` (``None`` when it has none)."""
        if 0 <= token_id < len(self._table.tokens):
            return self._table.tokens[token_id]
        return None

    @property
    def table(self) -> TokenTable:
        return self._table

    def fingerprint(self) -> bytes:
        """A 32-byte digest of everything masks depend on: each id's bytes (or their absence),
        the special and EOS ids, the logits width. Equal vocabularies have equal fingerprints;
        the on-disk grammar cache keys its files by it. Computed once."""
        if self._fingerprint is None:
            parts = [b"logitgate vocabulary 1", self.size.to_bytes(8, "little")]
            for t in self._table.tokens:
                parts.append(b"\xff\xff\xff\xff" if t is None else len(t).to_bytes(4, "little") + t)
            for ids in (sorted(self._table.special_ids), sorted(self._table.eos_ids)):
                parts.append(len(ids).to_bytes(8, "little") + b"".join(i.to_bytes(8, "little") for i in ids))
            self._fingerprint = hashlib.blake2b(b"".join(parts), digest_size=32).digest()
        return self._fingerprint

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Vocabulary(size={self.size}, eos_ids={list(self.eos_ids)}, special={len(self.special_ids)})"
