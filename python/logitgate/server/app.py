"""The HTTP application: OpenAI's routes on FastAPI, server-sent events for streams, errors in
OpenAI's shape.

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``GET /v1/models``,
``GET /health``, ``GET /metrics``, and with tracing on ``GET /trace/{request_id}``
(:mod:`.traces`). A request is parsed from its raw body (bounded in size),
its structure compiled off the event loop (:class:`.structures.GrammarCache`), its ``n``
sequences handed to the :class:`.engine.Engine`, and their events turned into a response or
a stream. A client that disconnects cancels its sequences: the engine drops them at the next
step, freeing their batch rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..cancel import CancelToken
from ..compiler import CompiledGrammar, Compiler
from ..disk_cache import DEFAULT_DISK_CACHE_BYTES
from ..generation import compiler_for, prompt_ids
from ..integrations.transformers import vocabulary_for
from ..toolkit.refusal import refusal_of
from . import protocol as p
from .engine import Completion, Engine, SamplingParams
from .engine import Request as Sequence
from .metrics import Metrics
from .structures import GrammarCache, StructureSpec, offer_refusal, requested_structure, tools_structure
from .tools import TRIGGER, ToolPlan, chat_prompt_ids, plan_tools, split_tool_calls, template_renders_tools
from .traces import TraceStore, tracing_off

__all__ = ["ServerSettings", "create_app"]

log = logging.getLogger("logitgate.server")


@dataclass(frozen=True)
class ServerSettings:
    """Limits and sizes of a server (``logitgate serve`` flags)."""

    model_name: str = "smollm2-135m-instruct"
    max_body_bytes: int = 4 * 1024 * 1024
    max_schema_bytes: int = 256 * 1024
    cache_bytes: int = 256 * 1024 * 1024
    max_batch: int = 16
    packing: bool = True  # packed forward passes where the model allows (False: padded)
    default_max_tokens: int = 256
    disconnect_poll_s: float = 0.25
    compile_timeout_s: float = 30.0  # a structure's compile stops past this (a 400)
    trace_requests: int = 0  # keep the traces of this many recent requests (0: tracing off)
    cache_dir: str | None = None  # compiled grammars kept on disk across restarts (None: not kept)
    cache_dir_bytes: int = DEFAULT_DISK_CACHE_BYTES


class _State:
    """What the routes share: the engine, the compile cache, the metrics."""

    def __init__(self, model: Any, tokenizer: Any, settings: ServerSettings) -> None:
        self.model, self.tokenizer, self.settings = model, tokenizer, settings
        self.vocab = vocabulary_for(model, tokenizer)
        if settings.cache_dir is not None:
            compiler = Compiler(self.vocab, cache_dir=settings.cache_dir, cache_dir_bytes=settings.cache_dir_bytes)
        else:
            compiler = compiler_for(self.vocab)
        # The common formats' vocabulary-level work, before the first request rather than in it.
        compiler.warm_up()
        self.metrics = Metrics(
            lambda: self.engine.queue_depth, lambda: self.engine.active, lambda: self.engine.profile, compiler
        )
        self.engine = Engine(
            model,
            tokenizer,
            self.vocab,
            max_batch=settings.max_batch,
            on_step=self.metrics.step,
            packing=settings.packing,
        )
        self.cache = GrammarCache(
            compiler,
            max_bytes=settings.cache_bytes,
            max_source_bytes=settings.max_schema_bytes,
            compile_timeout=settings.compile_timeout_s,
            on_lookup=self.metrics.cache_lookup,
            on_size=self.metrics.cache_bytes.set,
        )
        self.traces = TraceStore(settings.trace_requests) if settings.trace_requests > 0 else None
        self.template_tools = template_renders_tools(tokenizer)
        config = getattr(model, "config", None)
        self.context = int(getattr(config, "max_position_embeddings", 0) or 0) or None


def create_app(model: Any, tokenizer: Any, settings: ServerSettings | None = None) -> FastAPI:
    """The FastAPI application serving ``model`` (a ``transformers`` causal LM) as
    ``settings.model_name``."""
    settings = settings or ServerSettings()
    state = _State(model, tokenizer, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.engine.start()
        try:
            yield
        finally:
            state.engine.stop()
            state.cache.close()

    app = FastAPI(title="logitgate", lifespan=lifespan)
    app.state.logitgate = state

    @app.exception_handler(p.ApiError)
    async def api_error(request: Request, e: p.ApiError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, e: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if e.status_code == 404 else "http_error"
        return JSONResponse(p.ApiError(e.status_code, str(e.detail), code=code).body(), status_code=e.status_code)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception) -> JSONResponse:
        log.exception("internal error")
        err = p.ApiError(500, f"internal error: {type(e).__name__}", code="internal_error", type="server_error")
        return JSONResponse(err.body(), status_code=500)

    app.add_middleware(_CountRequests, metrics=state.metrics)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": settings.model_name, "object": "model", "created": 0, "owned_by": "logitgate"}
        return {"object": "list", "data": [card]}

    @app.get("/trace/{request_id}")
    async def trace_page(request_id: str, choice: int = 0) -> HTMLResponse:
        if state.traces is None:
            raise tracing_off()
        return HTMLResponse(state.traces.page(request_id, choice))

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req: p.ChatCompletionRequest = p.parse_body(await _body(request, settings), p.ChatCompletionRequest)
        _check_common(req, settings)
        plan = plan_tools(req.tools, req.tool_choice, req.parallel_tool_calls)
        spec = requested_structure(req.response_format, req.structured_outputs)
        if req.offers_refusal and plan is None:
            spec = offer_refusal(spec)
        if plan is not None and spec is not None:
            raise p.ApiError(
                400,
                "response_format with callable tools is not supported: use tool_choice 'none'",
                code="unsupported_combination",
                param="response_format",
            )
        if plan is not None and req.offers_refusal:
            raise p.ApiError(
                400,
                "logitgate.refusal with callable tools is not supported: use tool_choice 'none'",
                code="unsupported_combination",
                param="logitgate.refusal",
            )
        refusal = spec is not None and spec.refusal
        grammar = await _compile(state, tools_structure(plan) if plan is not None else spec, request)
        ids = chat_prompt_ids(tokenizer, req.messages, plan, state.template_tools)
        max_tokens = req.max_completion_tokens or req.max_tokens or settings.default_max_tokens
        params = _params(req, max_tokens, state, len(ids))
        tracing = state.traces is not None
        seqs = [
            Sequence(ids, grammar, params, stream=req.stream, index=i, events=asyncio.Queue(), trace=tracing)
            for i in range(req.n)
        ]
        _share_events(seqs)
        for s in seqs:
            state.engine.submit(s)
        rid = p.new_id("chatcmpl")
        if req.stream:
            chat = _ChatChunks(rid, state.settings.model_name, req.include_usage, plan, refusal)
            return _sse(_stream(chat, len(ids), req.include_usage, seqs, state))
        done = await _wait(request, seqs, settings)
        _keep_traces(state, rid, done)
        choices = [_chat_choice(i, c, plan, refusal) for i, c in enumerate(done)]
        use = _usage(len(ids), done, state)
        return JSONResponse(p.response("chat.completion", rid, settings.model_name, int(time.time()), choices, use))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req: p.CompletionRequest = p.parse_body(await _body(request, settings), p.CompletionRequest)
        _check_common(req, settings)
        grammar = await _compile(state, requested_structure(None, req.structured_outputs), request)
        prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        if not prompts:
            raise p.ApiError(400, "prompt is empty", code="invalid_value", param="prompt")
        seqs: list[Sequence] = []
        prompt_tokens = 0
        for prompt in prompts:
            ids = prompt_ids(tokenizer, prompt, raw=True)
            prompt_tokens += len(ids)
            params = _params(req, req.max_tokens or 16, state, len(ids))
            for _ in range(req.n):
                seqs.append(
                    Sequence(
                        ids,
                        grammar,
                        params,
                        stream=req.stream,
                        index=len(seqs),
                        events=asyncio.Queue(),
                        trace=state.traces is not None,
                    )
                )
        _share_events(seqs)
        for s in seqs:
            state.engine.submit(s)
        rid, created = p.new_id("cmpl"), int(time.time())
        if req.stream:
            chunks = _TextChunks(rid, settings.model_name, created)
            return _sse(_stream(chunks, prompt_tokens, req.include_usage, seqs, state))
        done = await _wait(request, seqs, settings)
        _keep_traces(state, rid, done)
        choices = [
            {"index": i, "text": c.text, "logprobs": None, "finish_reason": c.finish_reason} for i, c in enumerate(done)
        ]
        return JSONResponse(
            p.response(
                "text_completion", rid, settings.model_name, created, choices, _usage(prompt_tokens, done, state)
            )
        )

    return app


class _CountRequests:
    """Counts answered requests by path and status. Plain ASGI: a ``BaseHTTPMiddleware`` would
    hide the client's disconnect from ``request.is_disconnected()``, which cancels a gone
    client's compile and sequences."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # unless a response starts

        async def counted(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, counted)
        finally:
            self.metrics.requests.labels(scope["path"], str(status)).inc()


# -- request handling ---------------------------------------------------------------------------


async def _body(request: Request, settings: ServerSettings) -> bytes:
    """The raw body, refused with 413 beyond ``max_body_bytes`` (read no further)."""
    limit = settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise p.ApiError(
            413, f"request body of {declared} bytes exceeds the limit of {limit} bytes", code="request_too_large"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise p.ApiError(413, f"request body exceeds the limit of {limit} bytes", code="request_too_large")
        chunks.append(chunk)
    return b"".join(chunks)


def _check_common(req: Any, settings: ServerSettings) -> None:
    if req.model != settings.model_name:
        raise p.ApiError(
            404,
            f"the model {req.model!r} does not exist; this server serves {settings.model_name!r}",
            code="model_not_found",
            param="model",
        )
    if req.logprobs:
        raise p.ApiError(400, "logprobs are not supported", code="unsupported_parameter", param="logprobs")


async def _compile(state: _State, spec: StructureSpec | None, request: Request) -> CompiledGrammar | None:
    """The compiled ``spec``; a client that goes away meanwhile cancels the compile (499)."""
    if spec is None:
        return None
    token = CancelToken()
    task = asyncio.ensure_future(state.cache.compile(spec, token))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=state.settings.disconnect_poll_s)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise p.ApiError(499, "client closed the request", code="client_closed")
    finally:
        if not task.done():
            token.cancel()
            task.add_done_callback(_retrieved)


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Marks the outcome of a compile nobody waits for as seen (its error is the cancel's)."""
    if not task.cancelled():
        task.exception()


def _params(req: Any, max_tokens: int, state: _State, prompt_len: int) -> SamplingParams:
    if state.context is not None and prompt_len + max_tokens > state.context:
        raise p.ApiError(
            400,
            f"the prompt ({prompt_len} tokens) plus max_tokens ({max_tokens}) exceeds the model's "
            f"context of {state.context} tokens",
            code="context_length_exceeded",
            param="max_tokens",
        )
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p,
        seed=req.seed,
        stop=req.stops(),
        frequency_penalty=req.frequency_penalty,
        presence_penalty=req.presence_penalty,
        repetition_penalty=req.repetition_penalty,
        logit_bias=_logit_bias(req, state),
    )


def _logit_bias(req: Any, state: _State) -> tuple[tuple[int, float], ...]:
    """``logit_bias`` as (token id, bias) pairs; an id past the model's logits is a 400."""
    width = state.vocab.size
    pairs = tuple(sorted((int(k), float(v)) for k, v in (req.logit_bias or {}).items()))
    for tok, _ in pairs:
        if tok >= width:
            raise p.ApiError(
                400,
                f"logit_bias: token id {tok} is not in the vocabulary ({width} ids)",
                code="invalid_value",
                param="logit_bias",
            )
    return pairs


def _share_events(seqs: list[Sequence]) -> None:
    """One event queue for all ``n`` sequences of a request (events carry their index)."""
    for s in seqs[1:]:
        s.events = seqs[0].events


def _cancel(seqs: list[Sequence]) -> None:
    for s in seqs:
        s.cancel()


def _checked(event: tuple[int, str, Any]) -> tuple[int, str, Any]:
    """An engine event; an engine error becomes a 500 ApiError."""
    _, kind, payload = event
    if kind == "error":
        raise p.ApiError(
            500, f"generation failed: {payload}", code=getattr(payload, "code", "internal"), type="server_error"
        )
    return event


async def _events(seqs: list[Sequence]) -> AsyncIterator[tuple[int, str, Any]]:
    """The sequences' events until each is done."""
    left = len(seqs)
    while left:
        index, kind, payload = _checked(await seqs[0].events.get())
        left -= kind == "done"
        yield index, kind, payload


async def _wait(request: Request, seqs: list[Sequence], settings: ServerSettings) -> list[Completion]:
    """The sequences' completions; cancels them when the client goes away."""
    done: dict[int, Completion] = {}
    try:
        while len(done) < len(seqs):
            try:
                event = await asyncio.wait_for(seqs[0].events.get(), settings.disconnect_poll_s)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    raise p.ApiError(499, "client closed the request", code="client_closed") from None
                continue
            index, kind, payload = _checked(event)
            if kind == "done":
                done[index] = payload
    finally:
        if len(done) < len(seqs):
            _cancel(seqs)
    return [done[i] for i in range(len(seqs))]


def _keep_traces(state: _State, rid: str, done: list[Completion] | dict[int, Completion]) -> None:
    """Stores a finished request's traces (by choice index) under its response id (tracing on)."""
    if state.traces is not None:
        in_order = done if isinstance(done, list) else [done[i] for i in sorted(done)]
        state.traces.put(rid, [c.trace for c in in_order if c.trace is not None])


def _usage(prompt: int, done: list[Completion], state: _State) -> dict[str, int]:
    """OpenAI's usage: ``prompt`` counts each distinct prompt once (not once per ``n``), the
    completion tokens are summed over every sequence."""
    completion = sum(c.completion_tokens for c in done)
    state.metrics.prompt_tokens.inc(prompt)
    state.metrics.completion_tokens.inc(completion)
    return p.usage(prompt, completion)


def _refusal(c: Completion, offered: bool) -> str | None:
    """The model's refusal message: a complete ``{"refusal": "..."}`` when the request offered it."""
    return refusal_of(c.text) if offered and c.complete else None


def _chat_choice(index: int, c: Completion, plan: ToolPlan | None, refusal_offered: bool) -> dict[str, Any]:
    content: str | None = c.text
    calls: list[dict[str, Any]] = []
    if plan is not None and c.complete:  # (an answer cut by max_tokens is text)
        content, calls = split_tool_calls(c.text)
    refusal = _refusal(c, refusal_offered)
    if refusal is not None:
        content = None
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else c.finish_reason
    return {"index": index, "message": message, "logprobs": None, "finish_reason": finish}


# -- streams ------------------------------------------------------------------------------------


_REFUSAL_START = '{"refusal":'


def _trigger_start(text: str) -> int:
    """Where in ``text`` a tool call starts or may start: its trigger, or a tail of the text
    that the next piece may complete into the trigger (``len(text)`` when neither)."""
    at = text.find(TRIGGER)
    if at >= 0:
        return at
    for k in range(min(len(TRIGGER) - 1, len(text)), 0, -1):
        if text.endswith(TRIGGER[:k]):
            return len(text) - k
    return len(text)


def _may_refuse(held: str, index: int, sent: set[int]) -> bool:
    """Whether a choice's text so far may be a refusal (nothing sent yet, and the text a prefix
    of ``{"refusal":`` or starting with it): such text is held back."""
    return index not in sent and (_REFUSAL_START.startswith(held) or held.startswith(_REFUSAL_START))


def _sse(events: AsyncIterator[dict[str, Any]]) -> StreamingResponse:
    async def lines() -> AsyncIterator[str]:
        async for obj in events:
            yield f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(lines(), media_type="text/event-stream")


class _ChatChunks:
    """Chat chunks. Text streams as it is decoded; under tools the text from a call's trigger
    on (``<tool_call>``, or a tail that may become it) is held, and the calls are sent as
    tool-call deltas once the answer is complete; with a refusal path an answer
    that starts as a refusal (``{"refusal":``) is held and sent as a ``refusal`` delta once
    complete."""

    object_type = "chat.completion.chunk"

    def __init__(self, rid: str, model: str, include_usage: bool, plan: ToolPlan | None, refusal: bool) -> None:
        self.rid, self.model, self.created = rid, model, int(time.time())
        self.plan, self.refusal_offered = plan, refusal
        self._usage_null = {"usage": None} if include_usage else {}
        self._held: dict[int, str] = {}  # text not sent yet (tools: until it is known not to be a call)
        self._calling: set[int] = set()
        self._sent: set[int] = set()  # choices whose content started streaming (not a refusal)

    def _chunk(self, index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**p.response(self.object_type, self.rid, self.model, self.created, [choice]), **self._usage_null}

    def start(self, index: int) -> list[dict[str, Any]]:
        return [self._chunk(index, {"role": "assistant", "content": ""})]

    def text(self, index: int, piece: str) -> list[dict[str, Any]]:
        held = self._held[index] = self._held.get(index, "") + piece
        if index in self._calling:
            return []
        if self.refusal_offered and _may_refuse(held, index, self._sent):
            return []
        send = held
        if self.plan is not None:
            cut = _trigger_start(held)
            if held.startswith(TRIGGER, cut):
                self._calling.add(index)
            send, self._held[index] = held[:cut], held[cut:]
        if not send:
            return []
        self._sent.add(index)
        if self.plan is None:
            self._held[index] = ""
        return [self._chunk(index, {"content": send})]

    def done(self, index: int, c: Completion) -> list[dict[str, Any]]:
        held: str | None = self._held.get(index, "")
        calls: list[dict[str, Any]] = []
        if self.plan is not None and c.complete and index in self._calling:
            held, calls = split_tool_calls(held or "")  # the text from the first call's trigger on
        refusal = None if index in self._sent else _refusal(c, self.refusal_offered)
        out = []
        if refusal is not None:
            out.append(self._chunk(index, {"refusal": refusal}))
        else:
            if held:
                out.append(self._chunk(index, {"content": held}))
            out += [self._chunk(index, {"tool_calls": [{"index": k, **call}]}) for k, call in enumerate(calls)]
        out.append(self._chunk(index, {}, "tool_calls" if calls else c.finish_reason))
        return out


class _TextChunks:
    """Completion chunks: text as it is decoded, then the choice's finish reason."""

    object_type = "text_completion"

    def __init__(self, rid: str, model: str, created: int) -> None:
        self.rid, self.model, self.created = rid, model, created

    def _chunk(self, index: int, text: str, finish: str | None = None) -> dict[str, Any]:
        choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
        return p.response(self.object_type, self.rid, self.model, self.created, [choice])

    def start(self, index: int) -> list[dict[str, Any]]:
        return []

    def text(self, index: int, piece: str) -> list[dict[str, Any]]:
        return [self._chunk(index, piece)]

    def done(self, index: int, c: Completion) -> list[dict[str, Any]]:
        return [self._chunk(index, "", c.finish_reason)]


async def _stream(
    chunks: _ChatChunks | _TextChunks, prompt_tokens: int, include_usage: bool, seqs: list[Sequence], state: _State
) -> AsyncIterator[dict[str, Any]]:
    """A streamed response: ``chunks`` shapes each sequence's events; then the usage chunk
    (with ``stream_options.include_usage``). An engine error ends the stream with an error
    object; the sequences are cancelled however the stream ends (a client gone included)."""
    done: dict[int, Completion] = {}
    try:
        for s in seqs:
            for obj in chunks.start(s.index):
                yield obj
        async for index, kind, payload in _events(seqs):
            if kind == "text":
                objs = chunks.text(index, payload)
            else:
                done[index] = payload
                objs = chunks.done(index, payload)
            for obj in objs:
                yield obj
        _keep_traces(state, chunks.rid, done)
        use = _usage(prompt_tokens, list(done.values()), state)
        if include_usage:
            yield p.response(chunks.object_type, chunks.rid, chunks.model, chunks.created, [], use)
    except p.ApiError as e:
        yield e.body()
    finally:
        _cancel(seqs)
