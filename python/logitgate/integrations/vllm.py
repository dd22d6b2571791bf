"""vLLM integration: a logits processor that constrains each request that asks for it.

vLLM loads :class:`LogitgateLogitsProcessor` through the ``vllm.logits_processors`` entry point
that ``pip install logitgate[vllm]`` registers (or ``LLM(logits_processors=[...])`` /
``--logits-processors logitgate.integrations.vllm:LogitgateLogitsProcessor``). A request opts in
with one key of ``SamplingParams.extra_args``; over HTTP, ``vllm_xargs`` carries it as JSON text
(vLLM's ``vllm_xargs`` holds only flat strings and numbers)::

    SamplingParams(extra_args={"logitgate": {"json_schema": {...}, "strict": True}})
    {"vllm_xargs": {"logitgate": "{\\"regex\\": \\"\\\\\\\\d+\\"}"}}       # HTTP body

The structure is one of ``json_schema``, ``regex``, ``choice``, ``grammar`` (GBNF; option
``root``), ``lark`` or ``structural_tag``; a JSON Schema takes the options of
:meth:`~logitgate.Compiler.compile_json_schema` (``strict``, ``whitespace``, ``max_whitespace``,
``property_order``, ``lenient``, ``oneof``). docs/vllm.md is the user's page.

Invariants:

- ``validate_params`` (run by vLLM at admission, in the frontend process) parses the request's
  structure and lowers it through the frontend, so a malformed option or an invalid schema is a
  ``ValueError`` there (HTTP 400), before the request reaches the engine.
- Engine side, under vLLM's V1 model runner, rows are keyed by their persistent-batch index;
  ``update_state`` applies vLLM's removed, added and moved lists in that order. A row keeps a
  reference to the request's output-token list (vLLM appends to it) and the count it has
  accepted; ``apply`` accepts the tokens sampled since, up to the first ``-1`` (async
  scheduling fills placeholders before sampling). Under Model Runner V2, rows are keyed by
  request slot (``add_request``) and ``apply`` reads the tokens from the step's context (the
  token fed at each row's position) and the runner's token history. Then the masks of the open
  rows are filled on the core's thread pool and the logits of all constrained rows masked in
  one call.
- EOS and the request's stop tokens are allowed only where the grammar may end: the core sets
  the vocabulary's EOS ids itself; the request's other stop ids are set or cleared here by
  ``is_complete()``. A row whose matcher is terminated gets only its end ids.
- Nothing here raises into the engine once a request is admitted: a compile that fails in the
  engine (a limit, an unknown special token) or a token the matcher rejects logs an error and
  leaves the row only its end ids, so that request stops at once and the batch goes on.

This module imports torch and vllm; ``import logitgate`` does not import it.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from vllm.sampling_params import SamplingParams
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from .._json_reader import JsonTextError, read_json
from ..compiler import CompiledGrammar, Compiler
from ..errors import LogitgateError
from ..limits import DEFAULT_LIMITS
from ..masks import apply_mask_counted, fill_masks
from ..vocabulary import Vocabulary

if TYPE_CHECKING:
    from vllm.config import VllmConfig

__all__ = ["EXTRA_ARGS_KEY", "LogitgateLogitsProcessor", "RequestStructure", "request_structure"]

EXTRA_ARGS_KEY = "logitgate"

_logger = logging.getLogger(__name__)

try:  # Model Runner V2's interface (vLLM >= 0.18); the class implements both where both exist
    from vllm.v1.worker.gpu.sample.logits_processor.interface import LogitsProcessor as _V2LogitsProcessor

    _BASES: tuple[type, ...] = (LogitsProcessor, _V2LogitsProcessor)
except ImportError:
    _BASES = (LogitsProcessor,)

# Each structure kind and the options it takes besides its own key.
_KIND_OPTIONS: dict[str, frozenset[str]] = {
    "json_schema": frozenset({"strict", "whitespace", "max_whitespace", "property_order", "lenient", "oneof"}),
    "regex": frozenset(),
    "choice": frozenset(),
    "grammar": frozenset({"root"}),
    "lark": frozenset(),
    "structural_tag": frozenset(),
}


@dataclass(frozen=True)
class RequestStructure:
    """What one request constrains its output to: ``kind`` (a key of the request's
    ``logitgate`` object), its ``value`` and ``options``; ``key`` is the canonical JSON text
    of all three (the engine's compile cache key)."""

    kind: str
    value: Any
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return json.dumps([self.kind, self.value, self.options], separators=(",", ":"), sort_keys=False)


def request_structure(params: SamplingParams) -> RequestStructure | None:
    """The structure ``params.extra_args["logitgate"]`` asks for, ``None`` when it asks for none.

    The value is an object or its JSON text (what ``vllm_xargs`` can carry). Raises
    ``ValueError`` naming what is wrong: not an object, no structure or two, an unknown option,
    a value of the wrong type."""
    extra = params.extra_args
    if not extra or EXTRA_ARGS_KEY not in extra:
        return None
    spec = extra[EXTRA_ARGS_KEY]
    if isinstance(spec, str):
        try:
            spec = read_json(spec)
        except JsonTextError as e:
            raise ValueError(f"extra_args.logitgate {e.reason}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"extra_args.logitgate must be an object (or its JSON text), got {type(spec).__name__}")
    kinds = [k for k in spec if k in _KIND_OPTIONS]
    if len(kinds) != 1:
        named = f"got {', '.join(kinds)}" if kinds else "got none"
        raise ValueError(f"extra_args.logitgate needs exactly one of {', '.join(_KIND_OPTIONS)}; {named}")
    kind = kinds[0]
    options = {k: v for k, v in spec.items() if k != kind}
    unknown = sorted(set(options) - _KIND_OPTIONS[kind])
    if unknown:
        allowed = ", ".join(sorted(_KIND_OPTIONS[kind])) or "none"
        raise ValueError(f"extra_args.logitgate: unknown option {', '.join(unknown)} for {kind} (allowed: {allowed})")
    value = spec[kind]
    if kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
            raise ValueError("extra_args.logitgate.choice must be a non-empty list of strings")
    elif kind in ("regex", "grammar", "lark"):
        if not isinstance(value, str):
            raise ValueError(f"extra_args.logitgate.{kind} must be a string, got {type(value).__name__}")
    elif kind == "json_schema" and isinstance(value, str):
        try:
            value = read_json(value)
        except JsonTextError as e:
            raise ValueError(f"extra_args.logitgate.json_schema {e.reason}") from None
    if "root" in options and not isinstance(options["root"], str):
        raise ValueError("extra_args.logitgate.root must be a string")
    return RequestStructure(kind, value, options)


def _check_lowers(structure: RequestStructure) -> None:
    """Runs ``structure`` through its frontend without a vocabulary (special-token names all
    resolve, to be checked by the engine's compile): a malformed grammar or an invalid or
    unsupported schema raises here."""
    from ..frontends.gbnf import parse_gbnf
    from ..frontends.json_schema import schema_to_grammar
    from ..frontends.lark import parse_lark
    from ..frontends.regex import parse_regex
    from ..frontends.structural_tag import lower_structural_tag

    kind, value, options = structure.kind, structure.value, structure.options
    any_token = lambda name: 0  # noqa: E731  # the vocabulary is the engine's to check
    if kind == "json_schema":
        schema_to_grammar(value, limits=DEFAULT_LIMITS, **options)
    elif kind == "regex":
        parse_regex(value, limits=DEFAULT_LIMITS)
    elif kind == "grammar":
        parse_gbnf(value, root=options.get("root", "root"), limits=DEFAULT_LIMITS, token_id=any_token)
    elif kind == "lark":
        parse_lark(value, limits=DEFAULT_LIMITS, token_id=any_token)
    elif kind == "structural_tag":
        lower_structural_tag(
            value,
            limits=DEFAULT_LIMITS,
            token_id=any_token,
            json_schema=lambda s, path, opts: schema_to_grammar(s, limits=DEFAULT_LIMITS, **opts)[0],
        )


def _compile(compiler: Compiler, structure: RequestStructure) -> CompiledGrammar:
    kind, value, options = structure.kind, structure.value, structure.options
    if kind == "json_schema":
        return compiler.compile_json_schema(value, **options)
    if kind == "regex":
        return compiler.compile_regex(value)
    if kind == "choice":
        return compiler.compile_choice(value)
    if kind == "grammar":
        return compiler.compile_ebnf(value, root=options.get("root", "root"))
    if kind == "lark":
        return compiler.compile_lark(value)
    return compiler.compile_structural_tag(value)


@dataclass
class _Row:
    """One constrained request: a persistent-batch index (V1 runner) or a request slot (V2)."""

    matcher: Any  # None: the row failed (compile or a rejected token) and may only end
    output_ids: list[int] | None  # V1: vLLM's own list for the request, appended to as it samples
    end_ids: tuple[int, ...]  # EOS and the request's stop tokens
    accepted: int = 0  # how many output tokens the matcher has taken

    def accept(self, tokens: Any, where: str) -> None:
        for tok in tokens:
            tok = int(tok)
            if self.matcher is None or tok < 0:  # -1: async scheduling's placeholder, filled in later
                return
            if not self.matcher.is_terminated() and not self.matcher.accept(tok):
                _logger.error("logitgate: %s sampled token %d its grammar rejects; ending it", where, tok)
                self.matcher = None
                return
            self.accepted += 1


class LogitgateLogitsProcessor(*_BASES):  # type: ignore[misc]
    """vLLM logits processor that masks each row whose request carries
    ``extra_args["logitgate"]`` to the tokens its structure allows (see the module docstring).

    It implements both of vLLM's interfaces: the V1 model runner's
    (``vllm.v1.sample.logits_processor.LogitsProcessor``: ``update_state`` + ``apply(logits)``)
    and, where the installed vLLM has it, Model Runner V2's
    (``vllm.v1.worker.gpu.sample.logits_processor.LogitsProcessor``: ``add_request`` +
    ``apply(logits, ctx)``), since both load the one entry-point group; the constructor's
    arguments tell which runner built it.

    One per engine (worker): the vocabulary is built from the engine's tokenizer on the first
    constrained request, and compiled grammars are kept in a bounded LRU keyed by the
    request's canonical structure (the :class:`~logitgate.Compiler` below it caches by
    content too). ``LOGITGATE_THREADS`` sets the mask-filling threads (default: one per CPU).
    """

    # Compiled structures kept per engine; the Compiler's own cache bounds the memory.
    CACHE_SIZE = 256

    def __init__(self, vllm_config: VllmConfig, *runner_args: Any) -> None:
        # V1: (vllm_config, device, is_pin_memory); V2: (vllm_config, req_states)
        self._model_config = vllm_config.model_config
        self._req_states = runner_args[0] if len(runner_args) == 1 else None
        self._compiler: Compiler | None = None
        self._compiled: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._rows: dict[int, _Row] = {}
        self._bits: np.ndarray | None = None
        self._warned_spec = False
        env = os.environ.get("LOGITGATE_THREADS")
        self._threads = int(env) if env else None

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        """Rejects a request whose ``logitgate`` structure cannot compile (``ValueError``,
        which vLLM's server returns as HTTP 400)."""
        structure = request_structure(sampling_params)
        if structure is None:
            return
        try:
            _check_lowers(structure)
        except LogitgateError as e:
            raise ValueError(f"extra_args.logitgate.{structure.kind}: {e} [{e.code}]") from None
        except TypeError as e:  # an option of the wrong type reaches the frontend's signature
            raise ValueError(f"extra_args.logitgate: {e}") from None

    def is_argmax_invariant(self) -> bool:
        return False  # masking changes which token is the most likely

    # -- compiling ----------------------------------------------------------------------------

    def _compiler_for_engine(self) -> Compiler:
        if self._compiler is None:
            from vllm.tokenizers import cached_tokenizer_from_config

            tokenizer = cached_tokenizer_from_config(self._model_config)
            if tokenizer is None:
                raise LogitgateError("the engine runs without a tokenizer (skip_tokenizer_init)", code="vllm-tokenizer")
            vocab = Vocabulary.from_huggingface(tokenizer, logits_width=self._model_config.get_vocab_size())
            self._compiler = Compiler(vocab)
        return self._compiler

    def _grammar(self, structure: RequestStructure) -> CompiledGrammar:
        key = structure.key
        hit = self._compiled.get(key)
        if hit is not None:
            self._compiled.move_to_end(key)
            return hit
        compiled = _compile(self._compiler_for_engine(), structure)
        self._compiled[key] = compiled
        while len(self._compiled) > self.CACHE_SIZE:
            self._compiled.popitem(last=False)
        return compiled

    def _new_row(self, params: SamplingParams, output_ids: list[int] | None) -> _Row | None:
        try:
            structure = request_structure(params)
        except ValueError as e:  # validate_params let it through (a direct engine call): end it
            _logger.error("logitgate: request rejected in the engine: %s", e)
            return _Row(None, output_ids, tuple(params.all_stop_token_ids or ()))
        if structure is None:
            return None
        end_ids: set[int] = set(params.all_stop_token_ids or ())
        try:
            grammar = self._grammar(structure)
            end_ids.update(grammar.vocab.eos_ids)
            matcher = grammar.matcher()
        except Exception as e:  # never into the engine: the row may only end
            _logger.error("logitgate: %s structure failed to compile in the engine: %s", structure.kind, e)
            if self._compiler is not None:
                end_ids.update(self._compiler.vocab.eos_ids)
            return _Row(None, output_ids, tuple(sorted(end_ids)))
        return _Row(matcher, output_ids, tuple(sorted(end_ids)))

    # -- V1 model runner ----------------------------------------------------------------------

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        rows = self._rows
        for index in batch_update.removed:
            rows.pop(index, None)
        for index, params, _prompt_ids, output_ids in batch_update.added:
            row = self._new_row(params, output_ids) if params is not None else None
            if row is None:
                rows.pop(index, None)  # an added request may take the index of one that left
            else:
                rows[index] = row
        for a, b, direction in batch_update.moved:
            row_a, row_b = rows.pop(a, None), rows.pop(b, None)
            if row_a is not None:
                rows[b] = row_a
            if row_b is not None and direction == MoveDirectionality.SWAP:
                rows[a] = row_b

    # -- Model Runner V2 ----------------------------------------------------------------------

    def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
        row = self._new_row(sampling_params, None)
        if row is None:
            self._rows.pop(req_idx, None)  # slots are recycled: forget the previous occupant
            return False
        self._rows[req_idx] = row
        return True

    def apply_staged_writes(self) -> None:
        pass  # nothing is staged: the masks are written in apply()

    def _v2_rows(self, logits: torch.Tensor, ctx: Any) -> list[tuple[int, _Row]]:
        """This step's (logits row, row) pairs, each row caught up on its committed tokens.

        A decode row's input is the token sampled last step, at position ``pos``; the request
        has then ``pos + 1 - prompt_len`` output tokens, and any before the one fed (a request
        resumed after preemption) are read from the runner's token history."""
        rs = self._req_states
        assert rs is not None, "apply(logits, ctx) is Model Runner V2's call"
        slots = ctx.idx_mapping_np
        if int(logits.shape[0]) != len(slots):  # draft rows: speculative decoding
            if not self._warned_spec:
                _logger.error("logitgate: speculative decoding is not supported; constrained requests are ended")
                self._warned_spec = True
            pairs = []
            expanded = ctx.expanded_idx_mapping.cpu().numpy()
            for r, slot in enumerate(expanded.tolist()):
                row = self._rows.get(slot)
                if row is not None:
                    row.matcher = None
                    pairs.append((r, row))
            return pairs
        mine = [(r, self._rows[s]) for r, s in enumerate(slots.tolist()) if s in self._rows]
        if not mine:
            return []
        pos = ctx.pos.cpu().numpy()
        fed = ctx.input_ids.cpu().numpy()
        for r, row in mine:
            slot = int(slots[r])
            prompt_len = int(rs.prompt_len.np[slot])
            n_out = int(pos[r]) + 1 - prompt_len
            missing = n_out - row.accepted
            if missing > 1:
                start = prompt_len + row.accepted
                row.accept(rs.all_token_ids.gpu[slot, start : start + missing - 1].cpu().tolist(), f"slot {slot}")
            if missing >= 1 and row.accepted == n_out - 1:
                row.accept([int(fed[r])], f"slot {slot}")
        return mine

    # -- masking (both runners) ---------------------------------------------------------------

    def apply(self, logits: torch.Tensor, ctx: Any = None) -> torch.Tensor:
        if not self._rows:
            return logits
        if ctx is None:  # V1: rows are persistent-batch indices; catch up from vLLM's lists
            pairs = []
            for index, row in self._rows.items():
                if index < logits.shape[0] and row.output_ids is not None:
                    row.accept(row.output_ids[row.accepted :], f"batch row {index}")
                    pairs.append((index, row))
        else:
            pairs = self._v2_rows(logits, ctx)
        if pairs:
            self._mask(logits, pairs)
        return logits

    def _mask(self, logits: torch.Tensor, pairs: list[tuple[int, _Row]]) -> None:
        """Masks each pair's logits row to its grammar's tokens (only its end ids once the
        grammar is terminated or the row failed), in one call for all of them."""
        batch, width = int(logits.shape[0]), int(logits.shape[-1])
        words = (width + 31) // 32
        if self._bits is None or self._bits.shape[0] < batch or self._bits.shape[1] != words:
            self._bits = np.zeros((max(batch, 8), words), dtype=np.int32)
        bits = self._bits
        open_pairs = [(i, row) for i, row in pairs if row.matcher is not None and not row.matcher.is_terminated()]
        if open_pairs:
            compact = np.zeros((len(open_pairs), words), dtype=np.int32)
            fill_masks([row.matcher for _, row in open_pairs], compact, self._threads)
            bits[[i for i, _ in open_pairs]] = compact
        as_words = bits.view(np.uint32)
        still_open = {i for i, _ in open_pairs}
        for index, row in pairs:
            if index in still_open:
                complete = row.matcher.is_complete()
            else:  # a terminated or failed row may only end
                as_words[index] = 0
                complete = True
            for tok in row.end_ids:
                if tok >= width:
                    continue
                bit = np.uint32(1 << (tok % 32))
                if complete:
                    as_words[index, tok // 32] |= bit
                else:
                    as_words[index, tok // 32] &= ~bit
        apply_mask_counted(logits, bits[:batch], [i for i, _ in pairs])
