"""The decoding engine: continuous batching of constrained generations.

One thread runs the model. Each step it admits the requests that arrived (up to ``max_batch``
rows), each prompt from the longest prompt prefix stored in the
:class:`~.prefix_cache.PrefixCache`, and runs ONE forward pass that feeds every row its new
tokens: the joining rows their prompts, the decoding rows their sampled (and jump-forward)
tokens, packed side by side on one axis with no padding (:mod:`.packed`). Then it fills the
grammar masks of all constrained rows with :func:`~logitgate.fill_masks` (the core's thread
pool, GIL released) and samples each row. Rows that finish, fail or are cancelled leave between
steps.

A model that cannot be packed (a sliding window, an attention other than a Llama-like ``sdpa``
or ``eager``; :func:`~.packed.packing_supported`) is batched padded (:mod:`.kv`): the joining prompts
are prefilled left-padded in passes of similar lengths (:func:`prefill_groups`), their cache
rows stacked under the batch's, then every active row decodes in one pass. The asyncio side never waits on
the model: requests come in through a thread-safe queue, and each request's events go back to
its event loop with ``call_soon_threadsafe``. :attr:`Engine.profile` accumulates where the
thread's time goes (:mod:`.profile`).

Per row the step is :func:`logitgate.generate`'s (the same ``generation._Step``): repetition
penalties before the mask, budget-aware decoding (:class:`~logitgate.budget.BudgetGuard`: with
``max_tokens`` at least the grammar's minimum the output is a complete document) and
jump-forward (the grammar's forced bytes are fed with the sampled token; batched padded, a
row's forced run may be fed over several passes, see :func:`feed_width`, rather than padding
every row to it).

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

from ..compiler import CompiledGrammar
from ..errors import LogitgateError
from ..generation import _cache_keyword, _eos_ids, _Step, _TextStream, _tok_text
from ..masks import allocate_mask, apply_mask_counted, fill_masks
from ..repetition import RepetitionControl
from ..trace.record import Trace, TraceRecorder, TraceStep
from ..vocabulary import Vocabulary
from .kv import BatchCache
from .packed import PackedCache, packing_supported
from .prefix_cache import PrefixCache
from .profile import EngineProfile

__all__ = ["Completion", "Engine", "Request", "SamplingParams", "feed_width", "prefill_groups"]


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
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, added to its logit before the mask)


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
    """A request being decoded: its step (matcher, budget guard, sampler), output and next
    tokens to feed; when traced, its recorder and the steps so far (one per token of ``out``,
    merged ones too)."""

    req: Request
    step: _Step
    repetition: RepetitionControl
    stream: _TextStream | None
    pending: list[int]
    out: list[int] = field(default_factory=list)
    seq: int = -1  # its sequence in the packed cache
    bias: tuple[torch.Tensor, torch.Tensor] | None = None  # logit_bias as (ids, values), made once
    stop_cut: int | None = None
    finish: Literal["stop", "length"] | None = None
    tracer: TraceRecorder | None = None
    steps: list[TraceStep] = field(default_factory=list)

    @property
    def matcher(self) -> Any:
        return self.step.matcher

    def record(self, tok: int, allowed: int, forced: bool, table: Any) -> None:
        """Appends a traced row's step for ``tok`` (no-op untraced)."""
        if self.tracer is None:
            return
        st = TraceStep(len(self.steps), tok, _tok_text(table, tok), allowed, forced)
        if not forced:
            self.tracer.annotate(st)
        self.steps.append(st)


class Engine:
    """Decodes every submitted :class:`Request` with ``model``, batched: packed where the model
    allows it and ``packing`` is true, else padded (see the module). :meth:`start` runs the
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
        packing: bool = True,
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
        self.packed = packing and packing_supported(model)
        self._packed = self._new_packed()
        self.prefixes = PrefixCache()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._forward_s = self._mask_s = 0.0
        self.profile = EngineProfile()

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
                if self.packed:
                    self._step_packed(joining)
                else:
                    if joining:
                        self._prefill(joining)
                    if self._rows:
                        self._decode()
            except Exception as e:  # a failed step fails the rows it held and those joining, not the server
                err = e if isinstance(e, LogitgateError) else LogitgateError(f"decoding failed: {e}", code="internal")
                held = {id(row.req) for row in self._rows}
                for req in [row.req for row in self._rows] + [r for r in joining if id(r) not in held]:
                    if not req.cancelled:
                        req.emit("error", err)
                self._rows = []
                self._kv = BatchCache()
                self._packed = self._new_packed()
        for row in self._rows:
            row.req.emit("error", LogitgateError("the server is shutting down", code="shutdown"))

    def _admit(self) -> list[Request]:
        """Requests to add this step: all that arrived, up to ``max_batch`` rows (waits for one
        when nothing is active). They are prefilled together (see :meth:`_prefill`)."""
        out: list[Request] = []
        block = not self._rows
        while len(self._rows) + len(out) < self.max_batch:
            try:
                with self.profile.timed("idle"):
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
        step = _Step(req.grammar, self.vocab, self.tokenizer, p.max_tokens, p.temperature, p.top_p, p.seed)
        stream = _TextStream(functools.partial(req.emit, "text"), p.stop) if req.stream else None
        rep = RepetitionControl(p.repetition_penalty, p.frequency_penalty, p.presence_penalty)
        row = _Row(req, step, rep, stream, pending=[])
        if p.logit_bias:
            ids, values = zip(*p.logit_bias, strict=True)
            row.bias = torch.tensor(ids, dtype=torch.long), torch.tensor(values, dtype=torch.float32)
        if req.trace:
            row.tracer = TraceRecorder(self.vocab.table, p.temperature, frozenset(self._eos))
        row.out += step.start()  # forced bytes at the start (an object's "{" and first key)
        for tok in row.out:
            row.record(tok, -1, True, self.vocab.table)
        return row

    def _new_packed(self) -> PackedCache | None:
        return PackedCache(self.model, cache_keyword=self._cache_kw) if self.packed else None

    def _new_rows(self, joining: list[Request]) -> list[_Row]:
        rows: list[_Row] = []
        for req in joining:
            try:
                rows.append(self._new_row(req))
            except LogitgateError as e:
                req.emit("error", e)
                req.cancel()  # answered: nothing more is sent to it
        return rows

    def _step_packed(self, joining: list[Request]) -> None:
        """One packed pass (:mod:`.packed`): every decoding row feeds its pending tokens, every
        joining row its prompt from its longest stored prefix; then each row is sampled."""
        packed = self._packed
        assert packed is not None
        feeds = [(r.seq, r.pending) for r in self._rows]
        rows = self._new_rows(joining)
        with self.profile.timed("prefix"):
            for r in rows:
                reused, prefix = self.prefixes.lookup(r.req.prompt_ids)
                r.seq = packed.add(prefix)
                feeds.append((r.seq, r.req.prompt_ids[reused:] + r.out))
        self._rows += rows
        if not feeds:
            return
        kind = "prefill" if rows else "decode"
        t0 = time.perf_counter()
        with self.profile.timed(kind):
            logits = packed.forward(feeds)
        self._forward_s = time.perf_counter() - t0
        self.profile.count_pass(kind, len(feeds), sum(len(tokens) for _, tokens in feeds))
        with self.profile.timed("prefix"):
            for r in rows:
                self.prefixes.remember(r.req.prompt_ids, packed, r.seq)
        self._advance(list(self._rows), logits)
        self._report(len(self._rows))

    def _forward(self, kind: str, chunks: list[list[int]], kv: BatchCache) -> torch.Tensor:
        t0 = time.perf_counter()
        with self.profile.timed(kind):
            logits = kv.forward(self.model, chunks, pad_id=self._pad, cache_keyword=self._cache_kw)
        self._forward_s = time.perf_counter() - t0
        width = max(len(c) for c in chunks)
        self.profile.count_pass(kind, len(chunks), len(chunks) * width)
        return logits

    def _prefill(self, joining: list[Request]) -> None:
        """The joining prompts, each from its longest stored prefix (:mod:`.prefix_cache`), fed
        together: one pass for prompts of similar length, left-padded to the longest (see
        :func:`prefill_groups`); their cache rows are then stacked under the batch's."""
        rows = self._new_rows(joining)
        if not rows:
            return
        with self.profile.timed("prefix"):
            found = [self.prefixes.lookup(r.req.prompt_ids) for r in rows]
        chunks = [r.req.prompt_ids[reused:] + r.out for r, (reused, _) in zip(rows, found, strict=True)]
        for group in prefill_groups([len(c) for c in chunks]):
            with self.profile.timed("prefix"):
                kv = BatchCache.from_prefixes([found[i][1] for i in group])
            logits = self._forward("prefill", [chunks[i] for i in group], kv)
            with self.profile.timed("prefix"):
                for j, i in enumerate(group):
                    self.prefixes.remember(rows[i].req.prompt_ids, kv, j)
            with self.profile.timed("cache"):
                self._kv.extend(kv.cache, kv.attention)
            self._rows += [rows[i] for i in group]
            self._advance([rows[i] for i in group], logits)
            self._report(0)

    def _decode(self) -> None:
        """One pass for every row, each feeding up to :func:`feed_width` of its pending tokens
        (the sampled one and any jump-forward tokens), left-padded to that width. A row that
        still has tokens to feed after the pass is not sampled this step."""
        rows = self._rows
        width = feed_width([len(r.pending) for r in rows])
        logits = self._forward("decode", [r.pending[:width] for r in rows], self._kv)
        ready = []
        for i, r in enumerate(rows):
            r.pending = r.pending[width:]
            if not r.pending:
                ready.append(i)
        if len(ready) < len(rows):
            logits = logits[ready]
        self._advance([rows[i] for i in ready], logits)
        self._report(len(rows))

    def _report(self, rows: int) -> None:
        if self._on_step is not None:
            self._on_step(rows, self._forward_s, self._mask_s)

    def _advance(self, rows: list[_Row], logits: torch.Tensor) -> None:
        """Samples one token for each of ``rows`` (row i of ``logits``), then drops the rows of
        the batch that finished."""
        t0 = time.perf_counter()
        with self.profile.timed("masks"):
            bits = self._masked(rows, logits)
        self._mask_s = time.perf_counter() - t0
        with self.profile.timed("sample"):
            for i, row in enumerate(rows):
                try:
                    self._step_row(row, logits[i], bits[i])
                except LogitgateError as e:
                    row.req.emit("error", e)
                    row.req.cancel()
        self._drop_finished()

    def _masked(self, rows: list[_Row], logits: torch.Tensor) -> np.ndarray:
        """Applies each row's logit bias, penalties and grammar mask to its logits (in place);
        the masks."""
        for i, row in enumerate(rows):
            if row.bias is not None:
                logits[i].index_add_(0, row.bias[0], row.bias[1].to(logits.dtype))
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
        return bits

    def _step_row(self, row: _Row, logits: torch.Tensor, bits: np.ndarray) -> None:
        p, m = row.req.params, row.matcher
        tok, allowed, budget_cut = row.step.choose(logits, bits, p.max_tokens - len(row.out))
        row.out.append(tok)
        row.pending = [tok]
        table = self.vocab.table
        if row.tracer is not None:
            row.tracer.after_mask(logits, tok, budget_cut)
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
        new, replaced = row.step.jump_forward(tok, row.req.params.max_tokens - len(row.out))
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
            with self.profile.timed("cache"):
                if self._packed is not None:
                    kept = set(keep)
                    self._packed.release([r.seq for i, r in enumerate(self._rows) if i not in kept])
                else:
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


#: What a forward pass costs beyond the positions it feeds, counted in positions: reading every
#: weight once, whatever the batch.
PASS_COST_POSITIONS = 8


def feed_width(pending: list[int], pass_cost: int = PASS_COST_POSITIONS) -> int:
    """How many tokens each row feeds in the next pass, given each row's count of tokens to feed
    (at least 1): the width with the least cost per token fed, a pass costing ``pass_cost`` plus
    one per position, padding included. Alone, a row feeds all its tokens (jump-forward's point);
    in a batch, one row's forced run is fed over several passes rather than padding every row to
    it."""
    best, best_cost = 1, float("inf")
    for w in sorted(set(pending)):
        fed = sum(min(n, w) for n in pending)
        cost = (pass_cost + len(pending) * w) / fed
        if cost < best_cost:
            best, best_cost = w, cost
    return best


#: What a prefill pass costs beyond the positions it feeds, counted in positions.
PREFILL_PASS_COST_POSITIONS = 24


def prefill_groups(lengths: list[int], pass_cost: int = PREFILL_PASS_COST_POSITIONS) -> list[list[int]]:
    """The joining prompts (the count of tokens each feeds) split into the prefill passes of
    least cost, a pass costing ``pass_cost`` plus its rows times its longest length (padding
    costs as much as a token): indices into ``lengths``, the passes of shorter prompts first.
    Prompts of similar length share a pass; a much longer one gets a pass of its own rather
    than padding the others to it."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    # best[k]: the least cost of the k shortest prompts; cut[k]: where the last pass starts
    best, cut = [0.0] + [float("inf")] * len(order), [0] * (len(order) + 1)
    for k in range(1, len(order) + 1):
        longest = lengths[order[k - 1]]
        for start in range(k):
            cost = best[start] + pass_cost + (k - start) * longest
            if cost < best[k]:
                best[k], cut[k] = cost, start
    groups: list[list[int]] = []
    k = len(order)
    while k:
        groups.append(order[cut[k] : k])
        k = cut[k]
    return groups[::-1]
