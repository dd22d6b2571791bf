"""Cold JSON Schema compiles, logitgate against llguidance, alternating case by case in one process.

The harness runs each engine in its own worker, minutes apart, on a VM whose speed moves by
±30% between minutes; its compile ratio moves with it. This script compiles every schema of a
harness run's cases with both engines back to back, each compile after a 64 MiB sweep of the
caches (as the harness worker sweeps them before each compile), so that a
compile-time change can be compared by the per-case ratio, which drifts much less:

    python bench/compile_cold.py bench/results/<run>/cases.json [--tokenizer smollm2] [--limit N]

Prints p50/p90/p99 per engine over the schemas both compile, and the median and geometric
mean of the per-case ratio logitgate / llguidance. Single-threaded; llguidance must be
installed (bench/requirements.txt).

``--cpu`` times each compile by the process's CPU time instead of the wall clock: on a machine
shared with other work, wall time also counts the moments another process holds the core (both
engines compile on this one thread, so CPU time is what each compile costs).

``--ms-over T`` also lists the schemas whose logitgate compile took over T ms, with both times;
``--json OUT`` writes every schema's pair of times (ms, by case id) for a closer look at a band.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", type=Path, help="cases.json written by bench/run.py (MaskBench suite)")
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--limit", type=int, help="only the first N schemas")
    ap.add_argument("--cpu", action="store_true", help="process CPU time instead of wall time")
    ap.add_argument("--ms-over", type=float, metavar="T", help="list the schemas logitgate compiled in over T ms")
    ap.add_argument("--json", type=Path, metavar="OUT", help="write {case id: [logitgate ms, llguidance ms]}")
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from common import load_tokenizer, percentile, pin_threads
    from engines import ENGINES, CompileError, Unsupported

    pin_threads()
    cases = [c for c in json.loads(args.cases.read_text())["cases"] if c.get("kind") == "json_schema"]
    cases = cases[: args.limit] if args.limit else cases
    tok = load_tokenizer(args.tokenizer)
    engines = {name: ENGINES[name]() for name in ("logitgate", "llguidance")}
    for engine in engines.values():
        engine.setup(tok)
        # What a process pays once (lazy imports, first-use tables) is no schema's: one untimed
        # compile each before the timed ones.
        if cases:
            try:
                engine.compile("json_schema", cases[0]["source"])
            except (Unsupported, CompileError):
                pass
    clock = time.process_time_ns if args.cpu else time.perf_counter_ns
    sweep = bytearray(64 << 20)
    times: dict[str, dict[int, float]] = {name: {} for name in engines}
    for i, case in enumerate(cases):
        for name, engine in engines.items():
            for k in range(0, len(sweep), 64):  # evict the caches, as the harness's heap walk does
                sweep[k] = 1
            gc.disable()
            try:
                t0 = clock()
                engine.compile("json_schema", case["source"])
                times[name][i] = (clock() - t0) / 1e6
            except (Unsupported, CompileError):
                pass
            finally:
                gc.enable()
        if (i + 1) % 100 == 0:
            print(f"  {i + 1}/{len(cases)}", file=sys.stderr)
    both = [i for i in times["logitgate"] if i in times["llguidance"]]
    if not both:
        print("no schema compiled by both engines")
        return 1
    for name in engines:
        xs = sorted(times[name][i] for i in both)
        p50, p90, p99 = (percentile(xs, q) for q in (50, 90, 99))  # nearest rank, as the harness
        print(f"{name:10s} {len(xs)} schemas  p50 {p50:.2f} ms  p90 {p90:.2f}  p99 {p99:.2f}")
    if args.ms_over is not None:
        for i in sorted(both, key=lambda i: -times["logitgate"][i]):
            if times["logitgate"][i] > args.ms_over:
                lg_ms, llg_ms = times["logitgate"][i], times["llguidance"][i]
                print(f"  over {args.ms_over:g} ms: {cases[i]['id']:50s} logitgate {lg_ms:7.1f}  llg {llg_ms:7.1f}")
    if args.json is not None:
        pairs = {cases[i]["id"]: [times["logitgate"][i], times["llguidance"][i]] for i in both}
        args.json.write_text(json.dumps(pairs, indent=1) + "\n")
    ratios = sorted(times["logitgate"][i] / times["llguidance"][i] for i in both)
    print(
        f"per-case ratio logitgate / llguidance: median {percentile(ratios, 50):.3f}, "
        f"geometric mean {statistics.geometric_mean(ratios):.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
