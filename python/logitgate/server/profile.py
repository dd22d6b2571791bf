"""Where the decode thread's time goes: seconds per phase of the engine loop, and what its
forward passes fed. Served on ``GET /metrics`` (``logitgate_engine_seconds_total{phase}``,
``logitgate_engine_passes_total{kind}``, ``..._rows_total``, ``..._positions_total``);
``bench/serve_load.py`` prints the difference over each of its phases.

Written by the engine thread only; readers see plain numbers (a reading may be a step behind).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["PASS_KINDS", "PHASES", "EngineProfile"]

#: The engine loop's phases. ``idle``: waiting for a request with nothing to decode;
#: ``prefix``: prefix-cache lookups and stores; ``prefill`` / ``decode``: forward passes (a
#: packed pass that feeds a joining prompt counts as ``prefill``);
#: ``cache``: joining and dropping cache rows; ``masks``: filling and applying the grammar
#: masks; ``sample``: choosing each row's token (penalties, budget, jump-forward, stop
#: strings, stream text).
PHASES = ("idle", "prefix", "prefill", "decode", "cache", "masks", "sample")
#: Kinds of forward pass.
PASS_KINDS = ("prefill", "decode")


class EngineProfile:
    """Cumulative seconds per phase (:data:`PHASES`), wall-clock and the decode thread's CPU
    time (on a shared machine their difference is time the thread waited for a core); per kind
    of pass (:data:`PASS_KINDS`) the passes run, the rows they fed and the positions (padding
    included; a packed pass has none)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.cpu_seconds = dict.fromkeys(PHASES, 0.0)
        self.passes = dict.fromkeys(PASS_KINDS, 0)
        self.rows = dict.fromkeys(PASS_KINDS, 0)
        self.positions = dict.fromkeys(PASS_KINDS, 0)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - t0
            self.cpu_seconds[phase] += time.thread_time() - c0

    def count_pass(self, kind: str, rows: int, positions: int) -> None:
        self.passes[kind] += 1
        self.rows[kind] += rows
        self.positions[kind] += positions
