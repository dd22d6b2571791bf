"""Where the harness's mask mean goes: fills that copy a memoized mask against fills that walk.

Runs logitgate over a harness run's cases (``bench/run.py ... --cases-only`` writes them) with
``bench/worker.py``'s own loop (a fresh compiler per case after a 64 MiB sweep, every instance's
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

from common import load_tokenizer, percentile
from engines import ENGINES
from worker import run_case


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
    times: list[float] = []
    walked: list[bool] = []  # per timed fill, in order: whether it walked
    for case in cases:
        times += run_case(eng, case, observe=lambda m: walked.append(m.last_walk_nodes > 0))["mask_us"]
    copies: list[float] = []
    walks: list[float] = []
    for dt, was_walk in zip(times, walked, strict=True):
        (walks if was_walk else copies).append(dt)
    total = len(copies) + len(walks)
    if total == 0:
        raise SystemExit("no fills: no case compiled")
    print(f"{len(cases)} cases, {total} fills, mask mean {(sum(copies) + sum(walks)) / total:.2f} µs")
    print(_line("copies", copies, total))
    print(_line("walks", walks, total))


if __name__ == "__main__":
    main()
