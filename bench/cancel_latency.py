"""How promptly an interrupted compile returns, and what memory it leaves (docs/limits.md,
"Compile time").

    python bench/cancel_latency.py [--trials 20] [--seed 0]

Three measurements, on two pathological compiles from tests/unit/test_cancel.py: a JSON
Schema whose lowering meets 30,030 schema sets (the time goes to the Python frontend) and a
regex of two million automaton states (the time goes to the C++ core, GIL released):

- cancel latency: a thread cancels a CancelToken after a random delay; the time from the
  cancel to the compile's return (p50, p90, max), in wall-clock time and in the compiling
  thread's CPU time;
- timeout accuracy: compiles with timeouts of 0.25 to 4 s; how far past its timeout each
  returned, absolute and as a fraction of the timeout;
- memory, per compile: resident memory (after the interrupted compiles' memory is freed, a
  collection and malloc_trim) before its trials, after each of them, and at the end, with
  the peak meanwhile (VmHWM, reset before each compile's trials).

Wall-clock numbers: on a loaded machine they measure the scheduler as much as the checks.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import random
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))

from test_cancel import BIG_REGEX, PATHOLOGICAL

sys.path.insert(0, str(Path(__file__).resolve().parent))
import logitgate as lg
from common import rss_peak, rss_reset_peak
from logitgate.cancel import wait_discarded

_libc = ctypes.CDLL("libc.so.6")


def rss_bytes() -> int:
    wait_discarded()
    gc.collect()
    _libc.malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "p50": round(xs[len(xs) // 2], 2),
        "p90": round(xs[min(len(xs) - 1, int(len(xs) * 0.9))], 2),
        "max": round(xs[-1], 2),
        "n": len(xs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)])
    compiler = lg.Compiler(vocab, cache_size=0)
    cases = {
        "json_schema_product": lambda **kw: compiler.compile_json_schema(PATHOLOGICAL, **kw),
        "regex_2M_states": lambda **kw: compiler.compile_regex(BIG_REGEX, **kw),
    }
    for compile_fn in cases.values():  # warm: imports, allocator
        try:
            compile_fn(timeout=0.3)
        except lg.CompileTimeout:
            pass
    base = rss_bytes()
    report: dict[str, object] = {}
    for name, compile_fn in cases.items():
        before = rss_bytes()
        rss_reset_peak()
        after_each: list[float] = []  # MiB after every interrupted compile
        latencies_ms: list[float] = []
        cpu_ms: list[float] = []
        for _ in range(args.trials):
            token = lg.CancelToken()
            done: dict[str, float] = {}

            def work(token: lg.CancelToken = token, done: dict[str, float] = done, fn: Any = compile_fn) -> None:
                try:
                    fn(cancel=token)
                except lg.CompileCancelled:
                    done["t"] = time.perf_counter()
                    done["cpu"] = time.thread_time()

            thread = threading.Thread(target=work)
            thread.start()
            time.sleep(rng.uniform(0.05, 3.0))
            assert thread.ident is not None
            clock = time.pthread_getcpuclockid(thread.ident)
            cpu_start = time.clock_gettime(clock)
            start = time.perf_counter()
            token.cancel()
            thread.join()
            if "t" in done:
                latencies_ms.append((done["t"] - start) * 1000)
                cpu_ms.append((done["cpu"] - cpu_start) * 1000)
            after_each.append(round(rss_bytes() / 2**20, 1))
        overshoot_ms: list[float] = []
        overshoot_frac: list[float] = []
        for timeout in (0.25, 0.5, 1.0, 2.0, 4.0):
            start = time.perf_counter()
            try:
                compile_fn(timeout=timeout)
            except lg.CompileTimeout:
                late = time.perf_counter() - start - timeout
                overshoot_ms.append(late * 1000)
                overshoot_frac.append(late / timeout)
            after_each.append(round(rss_bytes() / 2**20, 1))
        report[name] = {
            "cancel_latency_ms": percentiles(latencies_ms),
            # CPU time the compiling thread spent from the cancel to its return: the latency
            # without the waits a loaded machine adds.
            "cancel_latency_cpu_ms": percentiles(cpu_ms),
            "timeout_overshoot_ms": [round(x, 1) for x in overshoot_ms],
            "timeout_overshoot_fraction_max": round(max(overshoot_frac), 4),
            "rss_mib": {
                "before": round(before / 2**20, 1),
                "peak": round(rss_peak() / 2**20, 1),
                "after": round(rss_bytes() / 2**20, 1),
                "after_each": after_each,
            },
        }
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    report["rss_mib"] = {  # the whole run
        "before": round(base / 2**20, 1),
        "after": round(rss_bytes() / 2**20, 1),
        "peak": round(peak / 2**20, 1),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
