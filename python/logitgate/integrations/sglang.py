"""SGLang integration: a grammar backend that serves SGLang's structured outputs with logitgate.

SGLang picks its grammar backend by name (``--grammar-backend``). Installing logitgate registers
:func:`register` under SGLang's general-plugin entry point group (``sglang.srt.plugins``); SGLang
runs it early in each of its processes, and it adds the name ``logitgate`` to SGLang's backend
registry and to the choices of ``--grammar-backend``. A server started with
``--grammar-backend logitgate`` (or ``Engine(grammar_backend="logitgate")``) then compiles every
request's ``json_schema``, ``regex``, ``ebnf`` and ``structural_tag`` with logitgate; requests
keep SGLang's own parameters. docs/sglang.md is the user's page.

The contract, read from SGLang's ``sglang/srt/constrained/base_grammar_backend.py`` (0.5.23):

- The backend's ``dispatch_*`` methods run on SGLang's compile thread pool and return a grammar
  object, or an ``InvalidGrammarObject`` carrying the error message: SGLang then aborts that
  request with the message (HTTP 400 through its server), and caches the failure by key.
- SGLang caches one grammar object per key and hands each request ``copy()`` of it, so
  ``copy()`` is a fresh matcher at the grammar's start (the compiled grammar is shared).
- Each step SGLang allocates a mask with the first grammar's ``allocate_vocab_mask`` (int32
  ``[batch, ceil(vocab_size / 32)]``, every bit set: rows it does not fill stay unconstrained),
  fills the rows of the open grammars with ``fill_vocab_mask_batched``, moves it to the logits'
  device with ``move_vocab_mask`` and applies it with ``apply_vocab_mask``. The bit layout is
  logitgate's own (token ``i`` is bit ``i % 32`` of word ``i // 32``), so the core writes rows in
  place.
- ``accept_token`` follows each sampled token; a token the grammar rejects raises ``ValueError``
  (SGLang aborts that request). ``is_terminated()`` is true once an end token (the vocabulary's
  EOS or one of the model's EOS ids) has been accepted where the grammar may end; SGLang then
  finishes the request. ``rollback(k)`` undoes the last ``k`` accepted tokens, that end token
  included (speculative decoding).
- The jump-forward hooks return the text the grammar forces (``Matcher.forced_bytes``, cut to
  whole UTF-8 characters); ``jump_and_retokenize`` rolls back to the common prefix of the old
  and new tokens and accepts the rest.

SGLang wraps its built-in backends in its reasoning wrapper (``ReasonerGrammarBackend``: no
constraint until the end of the model's thinking) but returns a registered backend as it is;
:func:`create_backend` applies the same wrapper itself when the server runs a reasoning parser.

This module imports torch and sglang; ``import logitgate`` does not import it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

import numpy as np
import torch
from sglang.srt.constrained.base_grammar_backend import (
    BaseGrammarBackend,
    BaseGrammarObject,
    GrammarStats,
    InvalidGrammarObject,
)

from ..compiler import CompiledGrammar, Compiler
from ..errors import LogitgateError
from ..masks import apply_mask, fill_masks
from ..vocabulary import Vocabulary

__all__ = ["BACKEND_NAME", "LogitgateGrammar", "LogitgateGrammarBackend", "create_backend", "register"]

BACKEND_NAME = "logitgate"

# SGLang's key for "any JSON document" (``response_format={"type": "json_object"}``).
_ANY_JSON = "$$ANY$$"

_logger = logging.getLogger(__name__)


def _threads() -> int | None:
    env = os.environ.get("LOGITGATE_THREADS")
    return int(env) if env else None


def _whole_utf8(data: bytes) -> str:
    """The longest prefix of ``data`` that decodes as UTF-8 (a forced run may end inside a
    character); invalid bytes inside it end the prefix too."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        return data[: e.start].decode("utf-8")


class LogitgateGrammar(BaseGrammarObject):
    """One request's grammar state: a logitgate :class:`~logitgate.Matcher` of a compiled
    grammar, plus whether an end token has been accepted (see the module docstring)."""

    def __init__(self, compiled: CompiledGrammar, key: tuple[str, str], stats: Any = None) -> None:
        super().__init__()
        self.compiled = compiled
        self.key = key
        self.matcher = compiled.matcher()
        self.grammar_stats = stats
        self._end_ids = frozenset(compiled.vocab.eos_ids)
        self._ended = False  # an end token was accepted: the request is over

    # -- tokens -------------------------------------------------------------------------------

    def accept_token(self, token: int) -> None:
        if self._ended:
            return
        self.current_token = token
        if not self.matcher.accept(int(token)):
            raise ValueError(
                f"logitgate: token {token} is not allowed by the {self.key[0]} grammar "
                f"after {self.matcher.num_accepted} tokens"
            )
        if int(token) in self._end_ids:
            self._ended = True

    def rollback(self, k: int) -> None:
        if k <= 0:
            return
        self.matcher.rollback(k)  # the end token is one of the matcher's accepted tokens
        self._ended = False

    def is_terminated(self) -> bool:
        return self._ended

    def copy(self) -> LogitgateGrammar:
        stats = self.grammar_stats
        if stats is not None:
            stats = dataclasses.replace(stats, is_cache_hit=True, tree_traversal_time=[])
        return LogitgateGrammar(self.compiled, self.key, stats)

    # -- masks --------------------------------------------------------------------------------

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return allocate_vocab_mask(vocab_size, batch_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.matcher.fill_mask(_host_view(vocab_mask), idx)

    @staticmethod
    def fill_vocab_mask_batched(entries: list[Any], vocab_mask: torch.Tensor) -> None:
        """Fills the listed rows (SGLang's ``GrammarRow(row, grammar)``) on the core's thread
        pool, GIL released; other rows are left as they are. Entries of another backend's
        grammar (none in practice: one backend serves the engine) are filled one by one."""
        ours = [e for e in entries if isinstance(e.grammar, LogitgateGrammar)]
        for e in entries:
            if not isinstance(e.grammar, LogitgateGrammar):
                e.grammar.fill_vocab_mask(vocab_mask, e.row)
        if not ours:
            return
        host = _host_view(vocab_mask)
        compact = np.empty((len(ours), host.shape[1]), dtype=np.int32)
        fill_masks([e.grammar.matcher for e in ours], compact, _threads())
        host[[e.row for e in ours]] = compact

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        # CPU logits: the core, in place; other devices: torch operations on that device.
        apply_mask(logits, vocab_mask if logits.device.type != "cpu" else _host_view(vocab_mask))

    # -- jump-forward -------------------------------------------------------------------------

    def try_jump_forward(self, tokenizer: Any) -> tuple[list[int], str] | None:
        if self._ended or self.matcher.is_terminated():
            return None
        text = _whole_utf8(self.matcher.forced_bytes())
        return ([], text) if text else None

    def jump_forward_str_state(self, helper: tuple[list[int], str]) -> tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: list[int], new_output_ids: list[int], next_state: int) -> None:
        common = 0
        for old, new in zip(old_output_ids, new_output_ids, strict=False):
            if old != new:
                break
            common += 1
        self.rollback(len(old_output_ids) - common)
        for i in range(common, len(new_output_ids)):
            tok = new_output_ids[i]
            if not self.matcher.accept(int(tok)):
                raise ValueError(f"logitgate: retokenized token {tok} at position {i} is not allowed by the grammar")
            if int(tok) in self._end_ids:
                self._ended = True

    def __repr__(self) -> str:
        return f"LogitgateGrammar({self.key[0]}, accepted={self.matcher.num_accepted}, ended={self._ended})"


def allocate_vocab_mask(vocab_size: int, batch_size: int) -> torch.Tensor:
    """SGLang's mask of ``batch_size`` rows for ``vocab_size`` logits: int32
    ``[batch, ceil(vocab_size / 32)]`` on the CPU (pinned where a GPU is present, so the move
    to it can be asynchronous), every bit set."""
    pin = torch.cuda.is_available()
    return torch.full((batch_size, (vocab_size + 31) // 32), -1, dtype=torch.int32, pin_memory=pin)


def _host_view(vocab_mask: torch.Tensor) -> np.ndarray:
    """The numpy view of a CPU mask (no copy): the core fills rows in place."""
    if vocab_mask.device.type != "cpu" or vocab_mask.dtype != torch.int32 or not vocab_mask.is_contiguous():
        raise ValueError(
            f"logitgate fills contiguous int32 CPU masks, got {vocab_mask.dtype} on {vocab_mask.device}"
            " (allocate it with allocate_vocab_mask)"
        )
    return vocab_mask.numpy()


class LogitgateGrammarBackend(BaseGrammarBackend):
    """SGLang grammar backend on a logitgate :class:`~logitgate.Compiler` (one per engine).

    ``tokenizer`` is the engine's (a transformers tokenizer); ``vocab_size`` the model's logits
    width; ``eos_token_ids`` the model's EOS ids (its config's), allowed like the tokenizer's
    own wherever the grammar may end. ``whitespace`` and ``max_whitespace`` are the JSON Schema
    options of every ``json_schema`` request (docs/json_schema.md).
    """

    def __init__(
        self,
        tokenizer: Any,
        vocab_size: int,
        eos_token_ids: Any = None,
        *,
        whitespace: str = "flexible",
        max_whitespace: int | None = None,
    ) -> None:
        super().__init__()
        vocab = Vocabulary.from_huggingface(tokenizer, logits_width=vocab_size)
        self.compiler = Compiler(_with_end_ids(vocab, eos_token_ids))
        self.compiler.warm_up()  # built with the scheduler: the formats' vocabulary work before requests
        self.vocab_size = vocab_size
        self.json_options: dict[str, Any] = {"whitespace": whitespace}
        if max_whitespace is not None:
            self.json_options["max_whitespace"] = max_whitespace

    @property
    def vocab(self) -> Vocabulary:
        return self.compiler.vocab

    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return allocate_vocab_mask(vocab_size, batch_size)

    move_vocab_mask = staticmethod(LogitgateGrammar.move_vocab_mask)
    apply_vocab_mask = staticmethod(LogitgateGrammar.apply_vocab_mask)

    def _compile(self, key_type: str, key_string: str, build: Any) -> BaseGrammarObject:
        try:
            compiled = build()
        except LogitgateError as e:
            _logger.error("logitgate: invalid %s grammar: %s [%s]", key_type, e, e.code)
            return InvalidGrammarObject(f"{e} [{e.code}]")
        except (ValueError, TypeError) as e:  # JSON text that does not parse, a value of the wrong type
            _logger.error("logitgate: invalid %s grammar: %s", key_type, e)
            return InvalidGrammarObject(f"{e}")
        return LogitgateGrammar(compiled, (key_type, key_string), GrammarStats(dispatch_type=key_type))

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        if key_string == _ANY_JSON:
            return self._compile("json", key_string, lambda: self.compiler.compile_json_schema({}, **self.json_options))
        return self._compile(
            "json", key_string, lambda: self.compiler.compile_json_schema(json.loads(key_string), **self.json_options)
        )

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string, lambda: self.compiler.compile_regex(key_string))

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        # SGLang's EBNF is XGrammar's GBNF dialect, rooted at ``root``: logitgate's GBNF frontend.
        return self._compile("ebnf", key_string, lambda: self.compiler.compile_ebnf(key_string))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        def build() -> CompiledGrammar:
            spec = json.loads(key_string)
            # SGLang's legacy envelope may carry a null schema for a tool without parameters.
            if isinstance(spec, dict) and isinstance(spec.get("structures"), list):
                for s in spec["structures"]:
                    if isinstance(s, dict) and s.get("schema") is None:
                        s["schema"] = {}
            return self.compiler.compile_structural_tag(spec)

        return self._compile("structural_tag", key_string, build)


def _with_end_ids(vocab: Vocabulary, eos_token_ids: Any) -> Vocabulary:
    """``vocab`` with the model's EOS ids among its end ids (the tokenizer's own EOS may differ
    from the model's generation config). Ids the tokenizer does not mark special would be text
    too; they are left out, with a warning."""
    if eos_token_ids is None:
        return vocab
    ids = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids)
    table = vocab.table
    extra = [i for i in ids if i not in table.eos_ids and i in table.special_ids]
    skipped = [i for i in ids if i not in table.eos_ids and i not in table.special_ids]
    if skipped:
        _logger.warning(
            "logitgate: model EOS ids %s are not special tokens of the tokenizer; not used as end ids", skipped
        )
    if not extra:
        return vocab
    return Vocabulary(dataclasses.replace(table, eos_ids=(*table.eos_ids, *extra)))


def create_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None) -> BaseGrammarBackend:
    """SGLang's backend factory for ``--grammar-backend logitgate`` (the signature of
    ``register_grammar_backend``'s init function). Reads the server's JSON whitespace options;
    with ``--reasoning-parser`` set, wraps the backend in SGLang's reasoning wrapper, as SGLang
    does for its own backends."""
    serving = _serving(server_args)
    if getattr(serving, "constrained_json_whitespace_pattern", None):
        _logger.warning("logitgate: --constrained-json-whitespace-pattern is not supported; using JSON's whitespace")
    backend: BaseGrammarBackend = LogitgateGrammarBackend(
        tokenizer,
        vocab_size,
        eos_token_ids,
        whitespace="compact" if getattr(serving, "constrained_json_disable_any_whitespace", False) else "flexible",
        max_whitespace=getattr(serving, "constrained_json_max_whitespace_cnt", None),
    )
    parser = getattr(serving, "reasoning_parser", None)
    if parser:
        from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
        from sglang.srt.parser.reasoning_parser import ReasoningParser

        reasoning = ReasoningParser(model_type=parser, stream_reasoning=False, tokenizer=tokenizer)
        backend = ReasonerGrammarBackend(
            backend,
            reasoning,
            tokenizer,
            enable_strict_thinking=bool(getattr(serving, "enable_strict_thinking", False)),
        )
    return backend


def _serving(server_args: Any) -> Any:
    """The serving options: SGLang's runtime context where it is set up (the scheduler), else
    the server arguments themselves."""
    try:
        from sglang.srt.runtime_context import get_serving

        return get_serving()
    except (ImportError, ValueError):  # ValueError: the namespace is not published in this process
        return server_args


def register() -> None:
    """SGLang general plugin (entry point ``sglang.srt.plugins``): makes ``logitgate`` a
    grammar backend name. Idempotent."""
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    from sglang.srt.constrained.base_grammar_backend import register_grammar_backend

    register_grammar_backend(BACKEND_NAME, create_backend)
    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
