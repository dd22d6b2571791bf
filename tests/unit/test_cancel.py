"""Compile timeouts and cancellation (python/logitgate/cancel.py, cpp/core/interrupt.h): the
typed errors, the checks in the frontends and in the core, nothing kept after an interrupt.
How fast an interrupt lands is measured by bench/cancel_latency.py, not asserted here beyond
a bound no working check can miss."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.pathological import PATHOLOGICAL, product_schema

import logitgate as lg
from logitgate.cancel import wait_discarded

REPO = Path(__file__).resolve().parents[2]
# Far above any latency a polled loop has (bench/cancel_latency.py: milliseconds), far below a
# compile that never looked at its interrupt.
SLACK_S = 3.0


# Parsed at once, then millions of automaton states for the core: a compile spent in C++.
BIG_REGEX = "(.{0,50000}x){0,3}"


@pytest.fixture(scope="module")
def compiler() -> lg.Compiler:
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)])
    compiler = lg.Compiler(vocab)
    compiler.compile_json_schema(product_schema([2, 3]))  # frontends imported
    return compiler


def cancel_after(delay: float, compile_fn: Callable[[lg.CancelToken], object]) -> tuple[BaseException | None, float]:
    """Runs compile_fn(token) on a thread, cancels the token after `delay`; returns what the
    compile raised and the seconds from the cancel to the compile's return."""
    token = lg.CancelToken()
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            compile_fn(token)
        except BaseException as e:
            outcome["error"] = e
        outcome["returned"] = time.perf_counter()

    thread = threading.Thread(target=work)
    thread.start()
    time.sleep(delay)
    start = time.perf_counter()
    token.cancel()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the compile did not stop"
    return outcome.get("error"), outcome["returned"] - start


def test_timeout_is_a_typed_limit_error(compiler: lg.Compiler) -> None:
    start = time.perf_counter()
    with pytest.raises(lg.CompileTimeout) as e:
        compiler.compile_json_schema(PATHOLOGICAL, timeout=0.5)
    elapsed = time.perf_counter() - start
    assert isinstance(e.value, lg.LimitExceeded)
    assert (e.value.code, e.value.limit, e.value.value) == ("compile-timeout", "compile_timeout", 0.5)
    assert 0.5 <= elapsed < 0.5 + SLACK_S


@pytest.mark.parametrize("delay", [0.05, 0.4])
def test_cancel_from_another_thread_stops_the_lowering(compiler: lg.Compiler, delay: float) -> None:
    error, latency = cancel_after(delay, lambda token: compiler.compile_json_schema(PATHOLOGICAL, cancel=token))
    assert isinstance(error, lg.CompileCancelled) and error.code == "compile-cancelled"
    assert latency < SLACK_S


def test_cancel_stops_the_core_compile(compiler: lg.Compiler) -> None:
    # The core runs with the GIL released: the cancelling thread runs, and the core's loops see
    # the flag.
    error, latency = cancel_after(0.3, lambda token: compiler.compile_regex(BIG_REGEX, cancel=token))
    assert isinstance(error, lg.CompileCancelled)
    assert latency < SLACK_S


def test_core_compile_times_out(compiler: lg.Compiler) -> None:
    start = time.perf_counter()
    with pytest.raises(lg.CompileTimeout):
        compiler.compile_regex(BIG_REGEX, timeout=0.3)
    assert time.perf_counter() - start < 0.3 + SLACK_S


def test_one_token_cancels_compiles_on_several_threads(compiler: lg.Compiler) -> None:
    token = lg.CancelToken()
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            compiler.compile_json_schema(product_schema([2, 3, 5, 7, 11, 13 + 4 * i]), cancel=token)
        except lg.LogitgateError as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    token.cancel()
    for t in threads:
        t.join(timeout=60)
    assert [type(e) for e in errors] == [lg.CompileCancelled] * 3
    assert token.cancelled


def test_cancelled_token_stops_every_later_compile_even_cached(compiler: lg.Compiler) -> None:
    compiler.compile_regex("[ab]+")  # cached
    token = lg.CancelToken()
    token.cancel()
    for compile_fn in (
        lambda: compiler.compile_regex("[ab]+", cancel=token),
        lambda: compiler.compile_choice(["a", "b"], cancel=token),
        lambda: compiler.compile_ebnf('root ::= "a"', cancel=token),
        lambda: compiler.compile_json_schema({"type": "integer"}, cancel=token),
    ):
        with pytest.raises(lg.CompileCancelled):
            compile_fn()


def test_an_interrupted_compile_keeps_nothing(compiler: lg.Compiler) -> None:
    schema = product_schema([2, 3, 5, 7, 11, 13, 17])
    before = compiler.cache_info().entries
    with pytest.raises(lg.CompileTimeout):
        compiler.compile_json_schema(schema, timeout=0.2)
    wait_discarded()
    assert gc.isenabled()
    after = compiler.cache_info().entries
    assert after == before
    # The same compiler compiles on, with and without limits.
    g = compiler.compile_json_schema({"type": "integer"}, timeout=30.0, cancel=lg.CancelToken())
    m = g.matcher()
    assert m.accept_bytes(b"42") and m.is_complete()


def test_a_fast_compile_within_its_timeout_is_unaffected(compiler: lg.Compiler) -> None:
    a = compiler.compile_regex("x[0-9]{3}", timeout=30.0)
    assert compiler.compile_regex("x[0-9]{3}") is a


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), "1", True])
def test_bad_timeout_is_a_usage_error(compiler: lg.Compiler, timeout: Any) -> None:
    with pytest.raises(lg.UsageError) as e:
        compiler.compile_regex("a", timeout=timeout)
    assert e.value.code == "compile-timeout-arg"


def test_cancel_must_be_a_token(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.UsageError) as e:
        compiler.compile_regex("a", cancel=threading.Event())  # type: ignore[arg-type]
    assert e.value.code == "cancel-arg"


def test_memory_returns_to_its_baseline_after_interrupts() -> None:
    # In a fresh process: resident memory after a warm-up interrupt, then after six more
    # (lowering interrupted, the core interrupted; each built tens of MiB first).
    script = textwrap.dedent(
        f"""
        import ctypes, gc, json, resource, sys, threading, time
        sys.path.insert(0, {str(REPO / "tests" / "unit")!r})
        import logitgate as lg
        from logitgate.cancel import wait_discarded
        from test_cancel import BIG_REGEX, PATHOLOGICAL

        libc = ctypes.CDLL("libc.so.6")

        def rss():
            wait_discarded()
            gc.collect()
            libc.malloc_trim(0)  # what the allocator holds free is not the compile's
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * resource.getpagesize()

        vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)])
        compiler = lg.Compiler(vocab)

        def interrupt(i):
            try:
                if i % 2:
                    compiler.compile_regex(BIG_REGEX, timeout=0.5)
                else:
                    compiler.compile_json_schema(PATHOLOGICAL, timeout=1.0)
            except lg.CompileTimeout:
                pass

        interrupt(0)
        interrupt(1)
        base = rss()
        for i in range(6):
            interrupt(i)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(json.dumps({{"base": base, "after": rss(), "peak": peak}}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=_env(), check=True
    ).stdout
    r = json.loads(out.strip().splitlines()[-1])
    mib = 1024 * 1024
    assert r["peak"] - r["base"] > 20 * mib, r  # the interrupted compiles did build something
    assert r["after"] - r["base"] < 8 * mib, r


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.setdefault("LOGITGATE_THREADS", "1")
    return env
