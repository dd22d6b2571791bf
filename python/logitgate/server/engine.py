"""The decoding engine: continuous batching of constrained generations.

One thread runs the model. Each step it admits the requests that arrived (up to
``max_batch`` rows; each prompt is prefilled in a pass of its own and its cache rows stacked
under the batch's, see :mod:`.kv`), then decodes every active row in ONE forward
pass, fills the grammar masks of all constrained rows with :func:`~logitgate.fill_masks` (the
core's thread pool, GIL released) and samples each row. Rows that finish, fail or are cancelled
leave between steps. The asyncio side never waits on the model: requests come in through a
thread-safe queue, and each request's events go back to its event loop with
``call_soon_threadsafe``.

Per row the step is :func:`logitgate.generate`'s: repetition penalties before the mask,
budget-aware decoding (:class:`~logitgate.budget.BudgetGuard`: with ``max_tokens`` at least the
grammar's minimum the output is a complete document) and jump-forward (the grammar's forced
bytes are fed with the sampled token in the next pass; rows with several tokens to feed are
left-padded within the step).

A request made with ``trace=True`` also records its steps as :func:`logitgate.generate` does
with ``trace=True`` (a :class:`~logitgate.trace.TraceRecorder` per row, fed the row's logits
before and after its mask); rows without it record nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from ..budget import ACCEPTED as BUDGET_ACCEPTED
from ..budget import REJECTED as BUDGET_REJECTED
from ..budget import BudgetGuard
from ..compiler import CompiledGrammar
from ..errors import LogitgateError, TokenRejected
from ..generation import _cache_keyword, _eos_ids, _sample, _TextStream, _tok_text, forced_tokens
from ..masks import allocate_mask, apply_mask_counted, fill_masks
from ..repetition import RepetitionControl
from ..trace.record import Trace, TraceRecorder, TraceStep
from ..vocabulary import Vocabulary
from .kv import BatchCache

__all__ = ["Completion", "Engine", "Request", "SamplingParams"]


@dataclass(frozen=True)
class SamplingParams:
    """How one sequence is sampled (OpenAI's parameters; ``temperature`` 0 is greedy)."""

    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0


@dataclass
class Completion:
    """A finished sequence. ``complete``: the text is a full sentence of the grammar (always
    true without one)."""

    text: str
    finish_reason: Literal["stop", "length"]
    complete: bool
    prompt_tokens: int
    completion_tokens: int
    trace: Trace | None = None


class Request:
    """One sequence for the engine. Its events arrive on :attr:`events` as ``(index, kind,
    payload)``, in order: ``("text", piece)`` while it decodes (only when ``stream``), then
    ``("done", Completion)`` or ``("error", LogitgateError)``; several sequences may share one
    queue (``index`` tells them apart). :meth:`cancel` makes the engine drop it at the next step.
    ``trace``: the completion carries the sequence's :class:`~logitgate.trace.Trace`. Made on
    the event loop that reads the events."""

    def __init__(
        self,
        prompt_ids: list[int],
        grammar: CompiledGrammar | None,
        params: SamplingParams,
        *,
        stream: bool = False,
        index: int = 0,
        events: asyncio.Queue[tuple[int, str, Any]] | None = None,
        trace: bool = False,
    ) -> None:
        self.prompt_ids = prompt_ids
        self.trace = trace
        self.grammar = grammar
        self.params = params
        self.stream = stream
        self.index = index
        self.events: asyncio.Queue[tuple[int, str, Any]] = events if events is not None else asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def emit(self, kind: str, payload: Any) -> None:
        """Thread-safe: queues an event for the request's event loop (dropped once it closed)."""
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self.events.put_nowait, (self.index, kind, payload))


@dataclass
class _Row:
    """A request being decoded: its matcher, budget guard, output and next tokens to feed;
    when traced, its recorder and the steps so far (one per token of ``out``, merged ones too)."""

    req: Request
    matcher: Any
    guard: BudgetGuard | None
    repetition: RepetitionControl
    generator: torch.Generator | None
    stream: _TextStream | None
    pending: list[int]
    out: list[int] = field(default_factory=list)
    stop_cut: int | None = None
    finish: Literal["stop", "length"] | None = None
    tracer: TraceRecorder | None = None
    steps: list[TraceStep] = field(default_factory=list)

    def record(self, tok: int, allowed: int, forced: bool, table: Any) -> None:
        """Appends a traced row's step for ``tok`` (no-op untraced)."""
        if self.tracer is None:
            return
        st = TraceStep(len(self.steps), tok, _tok_text(table, tok), allowed, forced)
        if not forced:
            self.tracer.annotate(st)
        self.steps.append(st)


class Engine:
    """Decodes every submitted :class:`Request` with ``model``, batched. :meth:`start` runs the
    decode thread; :meth:`submit` is called from the event loop."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        vocab: Vocabulary,
        *,
        max_batch: int = 16,
        mask_threads: int | None = None,
        on_step: Callable[[int, float, float], None] | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.max_batch = max_batch
        self._mask_threads = mask_threads
        self._on_step = on_step
        self._eos = _eos_ids(model, tokenizer, vocab)
        self._cache_kw = _cache_keyword(model)
        pad = getattr(tokenizer, "pad_token_id", None)
        self._pad = int(pad) if isinstance(pad, int) else min(self._eos, default=0)
        self._incoming: queue.Queue[Request | None] = queue.Queue()
        self._rows: list[_Row] = []
        self._kv = BatchCache()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._forward_s = self._mask_s = 0.0

    # -- the event loop's side ------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="logitgate-engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._incoming.put(None)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def submit(self, req: Request) -> None:
        self._incoming.put(req)

    @property
    def queue_depth(self) -> int:
        return self._incoming.qsize()

    @property
    def active(self) -> int:
        return len(self._rows)

    # -- the decode thread ----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping:
            joining = self._admit()
            if self._stopping:
                break
            try:
                if joining:
                    self._prefill(joining)
                if self._rows:
                    self._decode()
            except Exception as e:  # a failed forward pass fails the rows it held, not the server
                err = e if isinstance(e, LogitgateError) else LogitgateError(f"decoding failed: {e}", code="internal")
                for row in self._rows:
                    row.req.emit("error", err)
                self._rows = []
                self._kv = BatchCache()
        for row in self._rows:
            row.req.emit("error", LogitgateError("the server is shutting down", code="shutdown"))

    def _admit(self) -> list[Request]:
        """Requests to add this step (waits for one when nothing is active)."""
        out: list[Request] = []
        block = not self._rows
        while len(self._rows) + len(out) < self.max_batch:
            try:
                req = self._incoming.get(block=block, timeout=None)
            except queue.Empty:
                break
            block = False
            if req is None:
                self._stopping = True
                break
            if not req.cancelled:
                out.append(req)
        return out

    def _new_row(self, req: Request) -> _Row:
        p = req.params
        m = req.grammar.matcher() if req.grammar is not None else None
        guard = None
        if req.grammar is not None and m is not None:
            guard = BudgetGuard(req.grammar, p.max_tokens)
            if not guard.fits(m, p.max_tokens):
                guard = None  # below the grammar's minimum: truncation, as without a budget
        gen = None
        if p.temperature > 0:
            gen = torch.Generator(device="cpu")
            gen.manual_seed(p.seed if p.seed is not None else int(torch.seed() % (1 << 63)))
        stream = _TextStream(functools.partial(req.emit, "text"), p.stop) if req.stream else None
        rep = RepetitionControl(p.repetition_penalty, p.frequency_penalty, p.presence_penalty)
        row = _Row(req, m, guard, rep, gen, stream, pending=[])
        if req.trace:
            row.tracer = TraceRecorder(self.vocab.table, p.temperature, frozenset(self._eos))
        if m is not None:  # forced bytes at the start (an object's "{" and first key)
            first, _ = forced_tokens(m, self.vocab, self.tokenizer, p.max_tokens)
            if guard is not None and first and not guard.fits(m, p.max_tokens - len(first)):
                m.rollback(len(first))
                first = []
            row.out += first
            for tok in first:
                row.record(tok, -1, True, self.vocab.table)
            if guard is not None:
                guard.accepted(first)
        return row

    def _forward(self, chunks: list[list[int]], kv: BatchCache) -> torch.Tensor:
        t0 = time.perf_counter()
        logits = kv.forward(self.model, chunks, pad_id=self._pad, cache_keyword=self._cache_kw)
        self._forward_s = time.perf_counter() - t0
        return logits

    def _prefill(self, joining: list[Request]) -> None:
        """Each joining prompt in a forward pass of its own, its cache rows then stacked under the
        batch's: prompts differ in length, and padding them to the longest would multiply the
        prefill's work."""
        for req in joining:
            try:
                row = self._new_row(req)
            except LogitgateError as e:
                req.emit("error", e)
                continue
            kv = BatchCache()
            logits = self._forward([req.prompt_ids + row.out], kv)
            self._kv.extend(kv.cache, kv.attention)
            self._rows.append(row)
            self._advance([row], logits)
            self._report(0)

    def _decode(self) -> None:
        """One pass for every row, each feeding its pending tokens (the sampled one and any
        jump-forward tokens), left-padded to the longest: a pass costs mostly its fixed part and
        each row's logits, so padding a few positions is cheaper than a pass per forced token."""
        logits = self._forward([r.pending for r in self._rows], self._kv)
        self._advance(self._rows, logits)
        self._report(len(self._rows))

    def _report(self, rows: int) -> None:
        if self._on_step is not None:
            self._on_step(rows, self._forward_s, self._mask_s)

    def _advance(self, rows: list[_Row], logits: torch.Tensor) -> None:
        """Samples one token for each of ``rows`` (row i of ``logits``), then drops the rows of
        the batch that finished."""
        t0 = time.perf_counter()
        for i, row in enumerate(rows):
            if row.repetition.active:
                row.repetition.apply(logits[i], row.out)
            if row.tracer is not None:
                row.tracer.before_mask(logits[i])
        constrained = [i for i, r in enumerate(rows) if r.matcher is not None]
        bits = allocate_mask(self.vocab, batch=max(1, len(rows)))
        if constrained:
            fill_masks([rows[i].matcher for i in constrained], bits[: len(constrained)], self._mask_threads)
            if constrained != list(range(len(constrained))):
                bits[constrained] = bits[: len(constrained)].copy()
            apply_mask_counted(logits, bits, constrained)
        self._mask_s = time.perf_counter() - t0
        for i, row in enumerate(rows):
            try:
                self._step_row(row, logits[i], bits[i])
            except LogitgateError as e:
                row.req.emit("error", e)
                row.req.cancel()
        self._drop_finished()

    def _step_row(self, row: _Row, logits: torch.Tensor, bits: np.ndarray) -> None:
        p, m, guard = row.req.params, row.matcher, row.guard
        remaining = p.max_tokens - len(row.out)
        budget_cut = 0
        if m is not None:
            if guard is not None and p.top_p < 1.0:
                # Top-p reshapes the distribution after the cut: cut first.
                budget_cut = guard.restrict(m, bits, remaining, top=functools.partial(_argmax, logits))
                if budget_cut:
                    apply_mask_counted(logits, bits[None, :])
            if not bool(torch.isfinite(logits).any()):
                raise LogitgateError(
                    "no token is allowed here: the vocabulary cannot spell any continuation of the grammar",
                    code="dead-end",
                )
        tok = _sample(logits, p.temperature, p.top_p, row.generator)
        fitted = False  # accepted by the guard
        if guard is not None and m is not None and p.top_p >= 1.0:
            # As in lg.generate: the drawn token's check is its accept; the cut only when it does not fit.
            fit = guard.accept(m, tok, remaining)
            if fit == BUDGET_REJECTED:
                raise TokenRejected(f"sampled token {tok} was rejected after masking", code="internal")
            fitted = fit == BUDGET_ACCEPTED
            if not fitted:
                budget_cut = guard.restrict(m, bits, remaining)
                guard.closed = True
                apply_mask_counted(logits, bits[None, :])
                tok = _sample(logits, p.temperature, p.top_p, row.generator)
        if m is not None and not fitted:
            if not m.accept(tok):
                raise TokenRejected(f"sampled token {tok} was rejected after masking", code="internal")
            if guard is not None:
                guard.accepted([tok])
        row.out.append(tok)
        row.pending = [tok]
        table = self.vocab.table
        if row.tracer is not None:
            row.tracer.after_mask(logits, tok, budget_cut)
            allowed = int(torch.isfinite(logits).sum()) if m is not None else -1
            row.record(tok, allowed, False, table)
        if tok in self._eos and (m is None or m.is_terminated()):
            row.finish = "stop"
        elif p.stop:
            text = table.decode(row.out).decode("utf-8", errors="replace")
            hits = [text.find(s) for s in p.stop if s and s in text]
            if hits:
                row.stop_cut, row.finish = min(hits), "stop"
        if row.finish is None and m is not None:
            self._jump_forward(row, tok)
        if row.finish is None:
            if m is not None and m.is_terminated():
                row.finish = "stop"  # nothing may follow: no need to ask the model for EOS
            elif len(row.out) >= p.max_tokens:
                row.finish = "length"
        if row.stream is not None:
            row.stream.update(table.decode(row.out))

    def _jump_forward(self, row: _Row, tok: int) -> None:
        m, guard = row.matcher, row.guard
        left = row.req.params.max_tokens - len(row.out)
        new, replaced = forced_tokens(m, self.vocab, self.tokenizer, left, last=tok)
        if guard is not None:
            if new and not guard.fits(m, left + replaced - len(new)):
                m.rollback(len(new))  # the forced tokens would not leave room: sample instead
                if replaced and not m.accept(tok):
                    raise TokenRejected(f"token {tok} no longer accepted after rollback", code="internal")
                new, replaced = [], False
            if new or replaced:
                guard.accepted(new, replaced=replaced)
        if replaced:
            row.out.pop()
            row.pending = []
            if row.steps:
                row.steps[-1].merged = True
        row.out += new
        row.pending += new
        for t in new:
            row.record(t, -1, True, self.vocab.table)

    def _drop_finished(self) -> None:
        keep: list[int] = []
        for i, row in enumerate(self._rows):
            if row.finish is not None:
                self._finish(row)
            elif not row.req.cancelled:
                keep.append(i)
        if len(keep) != len(self._rows):
            self._kv.keep(keep)
            self._rows = [self._rows[i] for i in keep]

    def _finish(self, row: _Row) -> None:
        text = self.vocab.table.decode(row.out).decode("utf-8", errors="replace")
        if row.stop_cut is not None:
            text = text[: row.stop_cut]
            complete = row.matcher is None
        else:
            complete = row.matcher.is_complete() if row.matcher is not None else row.finish == "stop"
        if row.stream is not None:
            row.stream.finish(text)
        assert row.finish is not None
        trace = None
        if row.tracer is not None:
            trace = row.tracer.finish(
                row.steps,
                row.req.grammar,
                "text" if row.matcher is not None else "none",
                finish_reason=row.finish,
                complete=complete,
                vocab_size=self.vocab.size,
                temperature=row.req.params.temperature,
            )
        done = Completion(text, row.finish, complete, len(row.req.prompt_ids), len(row.out), trace)
        row.req.emit("done", done)


def _argmax(logits: torch.Tensor) -> int:
    return int(torch.argmax(logits))
