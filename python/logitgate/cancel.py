"""Stopping a compile: a :class:`CancelToken` any thread may cancel, and a wall-clock timeout.

Every ``Compiler.compile_*`` method takes ``timeout=`` (seconds) and ``cancel=`` (a token).
While a compile runs, the frontends call :func:`checkpoint` in their long loops and the C++
core polls the same interrupt in its own (with the GIL released, so the cancelling thread
runs); either raises :class:`~logitgate.CompileCancelled` or :class:`~logitgate.CompileTimeout`,
and nothing of the compile is kept.

The interrupt is per thread: a compile's frontends and core run on the thread that called
``compile_*``, which holds it in a thread-local for the compile's duration.
"""

from __future__ import annotations

import contextlib
import gc
import math
import queue
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .errors import UsageError

if TYPE_CHECKING:
    from . import _core

# The core is imported where a token or an interrupt is made, not here: the frontends call
# checkpoint(), and they import without the extension (LOGITGATE_NO_CORE).

__all__ = ["CancelToken"]


class CancelToken:
    """Cancels the compiles it is passed to (``compile_*(..., cancel=token)``), from any thread.

    Cancelling is final: a cancelled token stops every compile that holds it, including ones
    started later. Thread-safe.

    >>> import threading, logitgate as lg
    >>> token = lg.CancelToken()
    >>> threading.Thread(target=token.cancel).start()
    """

    __slots__ = ("_flag",)

    def __init__(self) -> None:
        from . import _core

        self._flag = _core.CancelFlag()

    def cancel(self) -> None:
        """Stops the compiles holding this token at their next check (within milliseconds)."""
        self._flag.cancel()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._flag.cancelled

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self.cancelled})"


class _Current(threading.local):
    interrupt: _core.Interrupt | None = None


_current = _Current()


def checkpoint() -> None:
    """Raises :class:`~logitgate.CompileCancelled` or :class:`~logitgate.CompileTimeout` when the
    calling thread's compile was cancelled or ran out of time; nothing outside a compile with a
    timeout or token. Costs a thread-local read, plus a clock read inside one: call it once per
    unit of work that may be large (a rule, a branch, a subschema), not per byte."""
    interrupt = _current.interrupt
    if interrupt is not None:
        interrupt.check()


def current_interrupt() -> _core.Interrupt | None:
    """The calling thread's compile interrupt (None outside a stoppable compile)."""
    return _current.interrupt


@contextlib.contextmanager
def interrupt_scope(timeout: float | None, cancel: CancelToken | None) -> Iterator[None]:
    """Makes a compile with this ``timeout`` and ``cancel`` token the calling thread's current
    one. With neither, an enclosing compile's interrupt stays in force (``compile_json_schema``
    calls ``compile_grammar`` inside its own)."""
    if timeout is None and cancel is None:
        yield
        return
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise UsageError(f"timeout must be a positive number of seconds, got {timeout!r}", code="compile-timeout-arg")
    if cancel is not None and not isinstance(cancel, CancelToken):
        raise UsageError(f"cancel must be a logitgate.CancelToken, got {type(cancel).__name__}", code="cancel-arg")
    from . import _core

    interrupt = _core.Interrupt(cancel._flag if cancel is not None else None, float(timeout or 0.0))
    previous = _current.interrupt
    _current.interrupt = interrupt
    try:
        interrupt.check()
        yield
    finally:
        _current.interrupt = previous


_discarded: queue.SimpleQueue[object] = queue.SimpleQueue()
_reaper_lock = threading.Lock()
_reaper: threading.Thread | None = None


class _EnableGc:
    """Queued after discarded work: the collector comes back on once that work is freed."""


def _reap() -> None:
    while True:
        item = _discarded.get()
        if isinstance(item, _EnableGc):
            gc.enable()
        del item  # the last reference: freed here, not in the thread that was interrupted


def _start_reaper() -> None:
    global _reaper
    with _reaper_lock:
        if _reaper is None:
            _reaper = threading.Thread(target=_reap, name="logitgate-discard", daemon=True)
            _reaper.start()


def discard_later(obj: object) -> None:
    """Frees ``obj`` (the caller's last reference to it) on a background thread: an
    interrupted compile's work can be millions of objects, and freeing them is not the
    interrupted caller's wait. One daemon thread, started on first use."""
    _start_reaper()
    _discarded.put(obj)


def enable_gc_later() -> None:
    """Turns the cyclic collector on once what was discarded so far is freed. The objects a
    paused compile allocated are all in the collector's youngest generation: enabled while
    they live, its next collection would walk every one of them."""
    _start_reaper()
    _discarded.put(_EnableGc())


def wait_discarded() -> None:
    """Returns once what was handed to :func:`discard_later` so far is freed, and what the
    core freed of interrupted compiles on its own threads (for tests)."""
    from . import _core

    done = threading.Event()
    _discarded.put(_Signal(done))
    if _reaper is not None:
        done.wait()
    while _core.pending_discards() > 0:
        time.sleep(0.001)


class _Signal:
    """Sets its event when freed: queued behind the discarded work, it marks the work freed."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __del__(self) -> None:
        self.event.set()
