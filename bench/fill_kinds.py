"""Where the harness's mask mean goes: fills that copy a memoized mask against fills that walk.

Runs logitgate over a harness run's cases (``bench/run.py ... --cases-only`` writes them) the
way ``bench/worker.py`` does (a fresh compiler per case after a 64 MiB sweep, every instance's
tokens filled and accepted, each fill timed around the adapter's call, the first fill of a case
left out) and splits the fills by ``Matcher.last_walk_nodes``: 0 for a copy (the configuration's
mask, or its stand-in's, was memoized), more for a walk. Wall-clock, single-threaded: run it on
an otherwise idle machine.

    python bench/fill_kinds.py bench/results/<run>/cases.json --tokenizer smollm2 [--cases 300]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # (the tokenizer's import starts BLAS threads otherwise)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import gc
import json
import time

from common import load_tokenizer, percentile
from engines import ENGINES, CompileError, Unsupported
from worker import _evict_caches


def _line(name: str, values: list[float], total: int) -> str:
    if not values:
        return f"{name:6s} none"
    values.sort()
    return (
        f"{name:6s} {len(values):7d} fills ({len(values) / total:4.0%}), p50 {percentile(values, 50):6.2f} µs, "
        f"mean {sum(values) / len(values):6.2f} µs, share of the mean {sum(values) / total:5.2f} µs"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", help="a harness run's cases.json")
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--cases", dest="limit", type=int, default=0, help="the first N cases only (0: all)")
    args = ap.parse_args()
    cases = json.load(open(args.cases))["cases"]
    if args.limit:
        cases = cases[: args.limit]
    eng = ENGINES["logitgate"]()
    eng.setup(load_tokenizer(args.tokenizer))
    gc.collect()
    gc.freeze()
    copies: list[float] = []
    walks: list[float] = []
    for case in cases:
        _evict_caches()
        try:
            compiled = eng.compile(case["kind"], case["source"])
        except (CompileError, Unsupported):
            continue
        first = True
        for tokens in case["instances"]:
            m = eng.matcher(compiled)
            for pos in range(len(tokens) + 1):
                t0 = time.perf_counter_ns()
                eng.fill(m)
                dt = (time.perf_counter_ns() - t0) / 1e3
                if not first:
                    (copies if m.last_walk_nodes == 0 else walks).append(dt)
                first = False
                if pos == len(tokens) or not eng.allowed(tokens[pos]) or not eng.accept(m, tokens[pos]):
                    break
    total = len(copies) + len(walks)
    if total == 0:
        raise SystemExit("no fills: no case compiled")
    print(f"{len(cases)} cases, {total} fills, mask mean {(sum(copies) + sum(walks)) / total:.2f} µs")
    print(_line("copies", copies, total))
    print(_line("walks", walks, total))


if __name__ == "__main__":
    main()
