"""The traces of recent requests (``logitgate serve --trace``) and the page that shows one.

With tracing on, the engine records every sequence's steps (:mod:`logitgate.trace`); the app
stores each finished request's traces here under the response id (``chatcmpl-…``, ``cmpl-…``)
and ``GET /trace/{request_id}`` answers :func:`~logitgate.trace.render_trace_html` of one.

Memory is bounded: the store keeps the last ``capacity`` requests (least recently stored or
read dropped first), each choice's trace as compact JSON text of
:meth:`~logitgate.trace.Trace.to_dict` (a few hundred bytes a step, where Python objects would
take several times that), bounded by the request's ``n`` × ``max_tokens`` steps.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ..trace import Trace, render_trace_html
from .protocol import ApiError

__all__ = ["DEFAULT_TRACE_CAPACITY", "TraceStore", "tracing_off"]

DEFAULT_TRACE_CAPACITY = 64


class TraceStore:
    """Traces by request id: one per choice, the last ``capacity`` requests kept."""

    def __init__(self, capacity: int = DEFAULT_TRACE_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[str, list[str]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def put(self, request_id: str, traces: Sequence[Trace]) -> None:
        data = [json.dumps(t.to_dict(), ensure_ascii=False, separators=(",", ":")) for t in traces]
        with self._lock:
            self._entries[request_id] = data
            self._entries.move_to_end(request_id)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)

    def get(self, request_id: str, choice: int = 0) -> dict[str, Any]:
        """Choice ``choice``'s trace data; a 404 :class:`ApiError` when the request is not kept
        or has no such choice."""
        with self._lock:
            traces = self._entries.get(request_id)
            if traces is not None:
                self._entries.move_to_end(request_id)
        if traces is None:
            raise ApiError(
                404,
                f"no trace of request {request_id!r}: the server keeps the last {self.capacity} requests",
                code="trace_not_found",
            )
        if not 0 <= choice < len(traces):
            raise ApiError(
                404,
                f"request {request_id!r} has {len(traces)} choice(s); no choice {choice}",
                code="trace_not_found",
                param="choice",
            )
        return dict(json.loads(traces[choice]))

    def page(self, request_id: str, choice: int = 0) -> str:
        title = request_id if choice == 0 else f"{request_id} (choice {choice})"
        return render_trace_html(self.get(request_id, choice), title=title)


def tracing_off() -> ApiError:
    """The answer to ``/trace/…`` on a server started without ``--trace``."""
    return ApiError(
        404,
        "tracing is off: start the server with `logitgate serve --trace` to keep the traces of recent requests",
        code="tracing_disabled",
    )
