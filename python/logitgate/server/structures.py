"""What a request constrains its output to, and the compile cache.

A request's ``response_format`` (OpenAI: ``text``, ``json_object``, ``json_schema``) or
``structured_outputs`` (vLLM: ``json``, ``regex``, ``choice``, ``grammar``, ``json_object``), or
its tools (:mod:`.tools`), become a :class:`StructureSpec`: canonical source text and options.
:class:`GrammarCache` compiles specs on a thread pool (never on the event loop, so one slow
compile stalls no other request) and keeps the compiled grammars in an LRU bounded in bytes
(:attr:`~logitgate.CompiledGrammar.memory_bytes`), keyed by the spec's hash and the tokenizer's.
An invalid or unsupported structure is a 400 naming the keyword and its JSON pointer; there is
no fallback to unconstrained output.

A JSON Schema may offer a refusal path (:func:`~logitgate.with_refusal`'s, given as such or asked
for with the ``logitgate.refusal`` body field, :func:`offer_refusal`): :attr:`StructureSpec.refusal`
then tells the app to read a ``{"refusal": "..."}`` output as ``message.refusal``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .._json_reader import JsonTextError, read_json
from ..cancel import CancelToken, interrupt_scope
from ..compiler import CompiledGrammar, Compiler
from ..errors import CompileCancelled, CompileTimeout, LogitgateError
from ..toolkit.refusal import is_refusal_schema, with_refusal
from .protocol import ApiError
from .tools import ToolPlan, tool_call_grammar

__all__ = ["GrammarCache", "StructureSpec", "offer_refusal", "requested_structure", "tools_structure"]


@dataclass(frozen=True)
class StructureSpec:
    """A structure to compile: ``kind`` ("json_schema", "regex", "choice", "grammar", "tools"),
    its canonical ``source`` text, ``strict`` (JSON Schema), and ``param``, where in the request
    it came from (for errors); ``refusal``: the schema is :func:`~logitgate.with_refusal`'s."""

    kind: str
    source: str
    strict: bool
    param: str
    plan: ToolPlan | None = None
    refusal: bool = False

    def key(self, tokenizer_key: str) -> str:
        text = json.dumps([self.kind, self.source, self.strict, tokenizer_key])
        return hashlib.blake2b(text.encode()).hexdigest()


def _canonical(value: Any) -> str:
    """``value`` as compact JSON text, keys in their given order: a schema's ``properties`` order
    is the output's key order (reasoning before a conclusion), so sorting keys would change it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _schema_spec(schema: Any, strict: bool, param: str) -> StructureSpec:
    if not isinstance(schema, (dict, bool, str)):
        raise ApiError(400, f"{param} must be a JSON Schema object", code="invalid_schema", param=param)
    if isinstance(schema, str):
        try:
            schema = read_json(schema)
        except JsonTextError as e:
            raise ApiError(400, f"{param} {e.reason}", code="invalid_schema", param=param) from None
    return StructureSpec("json_schema", _canonical(schema), strict, param, refusal=is_refusal_schema(schema))


def offer_refusal(spec: StructureSpec | None) -> StructureSpec:
    """``spec``'s JSON Schema with a refusal path (:func:`~logitgate.with_refusal`); a 400 when
    the request has no JSON Schema to offer it with."""
    if spec is None or spec.kind != "json_schema":
        raise ApiError(
            400,
            "logitgate.refusal needs a JSON Schema: response_format json_schema or json_object, "
            "or structured_outputs json or json_object",
            code="invalid_value",
            param="logitgate.refusal",
        )
    if spec.refusal:
        return spec
    schema = with_refusal(json.loads(spec.source))
    return StructureSpec("json_schema", _canonical(schema), spec.strict, spec.param, refusal=True)


def _from_response_format(rf: dict[str, Any]) -> StructureSpec | None:
    kind = rf.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return StructureSpec("json_schema", _canonical({"type": "object"}), False, "response_format")
    if kind == "json_schema":
        js = rf.get("json_schema")
        if not isinstance(js, dict):
            raise ApiError(
                400,
                "response_format.json_schema is required",
                code="invalid_value",
                param="response_format.json_schema",
            )
        schema = js.get("schema", {})
        return _schema_spec(schema, bool(js.get("strict")), "response_format.json_schema.schema")
    raise ApiError(
        400, f"unsupported response_format.type {kind!r}", code="invalid_value", param="response_format.type"
    )


_VLLM_IGNORED = {"disable_fallback", "disable_any_whitespace", "disable_additional_properties", "whitespace_pattern"}


def _from_structured_outputs(so: dict[str, Any]) -> StructureSpec | None:
    given = {k: v for k, v in so.items() if v is not None and k not in _VLLM_IGNORED and v is not False}
    if len(given) > 1:
        raise ApiError(
            400,
            f"structured_outputs: give one of json, regex, choice, grammar, json_object; got {sorted(given)}",
            code="invalid_value",
            param="structured_outputs",
        )
    if not given:
        return None
    ((kind, value),) = given.items()
    param = f"structured_outputs.{kind}"
    if kind == "json":
        return _schema_spec(value, False, param)
    if kind == "json_object":
        return StructureSpec("json_schema", _canonical({"type": "object"}), False, param)
    if kind in ("regex", "grammar"):
        if not isinstance(value, str):
            raise ApiError(400, f"{param} must be a string", code="invalid_value", param=param)
        return StructureSpec(kind, value, False, param)
    if kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
            raise ApiError(400, f"{param} must be a non-empty list of strings", code="invalid_value", param=param)
        return StructureSpec("choice", _canonical(value), False, param)
    raise ApiError(400, f"unsupported structured_outputs.{kind}", code="unsupported_structure", param=param)


def requested_structure(
    response_format: dict[str, Any] | None, structured_outputs: dict[str, Any] | None
) -> StructureSpec | None:
    """The structure a request asks for (None: unconstrained text)."""
    a = _from_response_format(response_format) if response_format else None
    b = _from_structured_outputs(structured_outputs) if structured_outputs else None
    if a is not None and b is not None:
        raise ApiError(
            400,
            "give response_format or structured_outputs, not both",
            code="invalid_value",
            param="structured_outputs",
        )
    return a or b


def tools_structure(plan: ToolPlan) -> StructureSpec:
    return StructureSpec("tools", plan.key(), False, "tools", plan)


def _tokenizer_key(compiler: Compiler) -> str:
    h = hashlib.blake2b(digest_size=16)
    for tok in compiler.vocab.table.tokens:
        h.update(len(tok or b"").to_bytes(4, "little"))
        h.update(tok or b"")
    return h.hexdigest()


class GrammarCache:
    """Compiled grammars by spec, least recently used dropped beyond ``max_bytes``;
    ``max_source_bytes`` bounds a structure's text (413 beyond it); a compile stops after
    ``compile_timeout`` seconds (a 400 with code ``compile-timeout``) or once the ``cancel``
    token given to :meth:`compile` is cancelled (a 499). ``on_lookup(hit)`` and
    ``on_size(bytes)`` feed the metrics."""

    def __init__(
        self,
        compiler: Compiler,
        *,
        max_bytes: int,
        max_source_bytes: int,
        threads: int = 2,
        compile_timeout: float | None = None,
        on_lookup: Callable[[bool], None] | None = None,
        on_size: Callable[[int], None] | None = None,
    ) -> None:
        self.compiler = compiler
        self.max_bytes = max_bytes
        self.max_source_bytes = max_source_bytes
        self.compile_timeout = compile_timeout
        self._tokenizer = _tokenizer_key(compiler)
        self._entries: OrderedDict[str, CompiledGrammar] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="logitgate-compile")
        self._on_lookup = on_lookup
        self._on_size = on_size

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def bytes(self) -> int:
        with self._lock:
            return sum(g.memory_bytes for g in self._entries.values())

    async def compile(self, spec: StructureSpec, cancel: CancelToken | None = None) -> CompiledGrammar:
        size = len(spec.source.encode())
        if size > self.max_source_bytes:
            raise ApiError(
                413,
                f"{spec.param}: {size} bytes, more than the server's limit of {self.max_source_bytes} bytes",
                code="structure_too_large",
                param=spec.param,
            )
        key = spec.key(self._tokenizer)
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
        if self._on_lookup is not None:
            self._on_lookup(hit is not None)
        if hit is not None:
            return hit
        compiled = await asyncio.get_running_loop().run_in_executor(self._pool, self._build, spec, cancel)
        with self._lock:
            self._entries[key] = compiled
            self._evict_locked()
        return compiled

    def _evict_locked(self) -> None:
        sizes = {k: g.memory_bytes for k, g in self._entries.items()}
        total = sum(sizes.values())
        for k in list(self._entries)[:-1]:  # the newest stays (it is about to be used)
            if total <= self.max_bytes:
                break
            total -= sizes[k]
            del self._entries[k]
        if self._on_size is not None:
            self._on_size(total)

    def _build(self, spec: StructureSpec, cancel: CancelToken | None = None) -> CompiledGrammar:
        try:
            with interrupt_scope(self.compile_timeout, cancel):  # the compiles below run under it
                return self._build_spec(spec)
        except CompileCancelled:
            raise ApiError(499, "client closed the request", code="client_closed") from None
        except CompileTimeout as e:
            raise ApiError(
                400,
                f"{spec.param}: the structure did not compile within the server's limit of {e.value} seconds",
                code=e.code,
                param=spec.param,
            ) from None

    def _build_spec(self, spec: StructureSpec) -> CompiledGrammar:
        c = self.compiler
        try:
            if spec.kind == "tools":
                assert spec.plan is not None
                return tool_call_grammar(c, spec.plan)
            if spec.kind == "json_schema":
                return c.compile_json_schema(json.loads(spec.source), whitespace="compact", strict=spec.strict)
            if spec.kind == "regex":
                return c.compile_regex(spec.source)
            if spec.kind == "grammar":
                return c.compile_ebnf(spec.source)
            return c.compile_choice(json.loads(spec.source))
        except (ApiError, CompileCancelled, CompileTimeout):
            raise
        except LogitgateError as e:  # SchemaError (keyword and pointer), GrammarError, LimitExceeded
            raise ApiError(400, f"{spec.param}: {e}", code=e.code, param=spec.param) from None
