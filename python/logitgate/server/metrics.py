"""Prometheus metrics of the server (``GET /metrics``), in a registry of the app's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..compiler import Compiler
from .profile import EngineProfile

__all__ = ["Metrics"]


class Metrics:
    """Requests, tokens, the compile cache (the server's, and the compiler's below it: its
    compiles and its on-disk cache), mask and model time, queue depth and batch size."""

    def __init__(
        self,
        queue_depth: Callable[[], int],
        active: Callable[[], int],
        profile: Callable[[], EngineProfile] | None = None,
        compiler: Compiler | None = None,
    ) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter("logitgate_requests", "HTTP requests answered", ["endpoint", "status"], registry=r)
        self.prompt_tokens = Counter("logitgate_prompt_tokens", "Prompt tokens prefilled", registry=r)
        self.completion_tokens = Counter("logitgate_completion_tokens", "Output tokens generated", registry=r)
        self.cache_hits = Counter("logitgate_compile_cache_hits", "Compile cache hits", registry=r)
        self.cache_misses = Counter("logitgate_compile_cache_misses", "Compile cache misses (compiles)", registry=r)
        self.cache_bytes = Gauge("logitgate_compile_cache_bytes", "Bytes the compile cache holds", registry=r)
        self.mask_seconds = Counter("logitgate_mask_seconds", "Time filling and applying masks", registry=r)
        self.forward_seconds = Counter("logitgate_forward_seconds", "Time in model forward passes", registry=r)
        self.queue_depth = Gauge("logitgate_queue_depth", "Requests waiting to join the batch", registry=r)
        self.queue_depth.set_function(queue_depth)
        self.active = Gauge("logitgate_active_sequences", "Sequences being decoded", registry=r)
        self.active.set_function(active)
        self.batch_size = Histogram(
            "logitgate_batch_size", "Rows per decode step", buckets=(1, 2, 4, 8, 16, 32, 64), registry=r
        )
        if profile is not None:
            r.register(_ProfileCollector(profile))
        if compiler is not None:
            r.register(_CompilerCollector(compiler))

    def cache_lookup(self, hit: bool) -> None:
        (self.cache_hits if hit else self.cache_misses).inc()

    def step(self, rows: int, forward_s: float, mask_s: float) -> None:
        """A forward pass and its masks; ``rows`` is the decode batch (0 for a prefill)."""
        if rows:
            self.batch_size.observe(rows)
        self.forward_seconds.inc(forward_s)
        self.mask_seconds.inc(mask_s)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ProfileCollector(Collector):
    """The engine's :class:`~.profile.EngineProfile`, read when scraped."""

    def __init__(self, profile: Callable[[], EngineProfile]) -> None:
        self._profile = profile

    def collect(self) -> Iterator[CounterMetricFamily]:
        prof = self._profile()
        seconds = CounterMetricFamily(
            "logitgate_engine_seconds", "Decode thread time per phase of the engine loop", labels=["phase"]
        )
        for phase, s in prof.seconds.items():
            seconds.add_metric([phase], s)
        yield seconds
        cpu = CounterMetricFamily(
            "logitgate_engine_cpu_seconds", "Decode thread CPU time per phase of the engine loop", labels=["phase"]
        )
        for phase, s in prof.cpu_seconds.items():
            cpu.add_metric([phase], s)
        yield cpu
        for name, values, doc in (
            ("passes", prof.passes, "Forward passes"),
            ("rows", prof.rows, "Rows fed by forward passes"),
            ("positions", prof.positions, "Positions fed by forward passes (padding included)"),
        ):
            family = CounterMetricFamily(f"logitgate_engine_{name}", doc, labels=["kind"])
            for kind, n in values.items():
                family.add_metric([kind], n)
            yield family


class _CompilerCollector(Collector):
    """The compiler's :meth:`~logitgate.Compiler.cache_info`, read when scraped: the automata
    it built and its on-disk cache (``serve --cache-dir``; zeros without one)."""

    def __init__(self, compiler: Compiler) -> None:
        self._compiler = compiler

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        info = self._compiler.cache_info()
        for name, value, doc in (
            ("compiles", info.compiles, "Automata the compiler built (misses the disk cache did not answer)"),
            ("disk_hits", info.disk_hits, "Compiles answered from the on-disk cache without compiling"),
            ("disk_misses", info.disk_misses, "Compiles the on-disk cache had no file for"),
            ("disk_errors", info.disk_errors, "Cache files found unusable (removed, compiled again) or not written"),
        ):
            yield CounterMetricFamily(f"logitgate_compile_cache_{name}", doc, value=value)
        yield GaugeMetricFamily(
            "logitgate_compile_cache_disk_bytes", "Bytes in the cache directory", value=info.disk_bytes
        )
