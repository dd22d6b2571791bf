"""The cost of one ``Matcher.fill_mask`` call whose mask is memoized: the binding and a copy.

Compiles a small schema, fills its first mask twice (the second is a copy), then times a loop of
``fill_mask`` on that configuration, best of five rounds, beside calls that do next to nothing
(``is_complete()``, a property, an empty lambda) for the interpreter's share. Wall-clock: run it
on an otherwise idle machine, and alternate two builds to compare them.

    python bench/fill_call.py --tokenizer smollm2
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # (the tokenizer's import starts BLAS threads otherwise)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
from collections.abc import Callable

import logitgate as lg
from common import load_tokenizer

SCHEMA = '{"type": "object", "properties": {"a": {"type": "string"}}}'


def best_ns(call: Callable[[], object], n: int, rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            call()
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="smollm2")
    ap.add_argument("--calls", type=int, default=200_000, help="calls per round")
    args = ap.parse_args()
    vocab = lg.Vocabulary.from_huggingface(load_tokenizer(args.tokenizer))
    mask = lg.allocate_mask(vocab)
    matcher = lg.Compiler(vocab).compile_json_schema(SCHEMA).matcher()
    matcher.fill_mask(mask)
    matcher.fill_mask(mask)
    assert matcher.last_walk_nodes == 0, "the second fill should be a copy"
    print(f"{args.tokenizer}: {mask.shape[1] * 4} bytes per mask")
    for label, call in (
        ("fill_mask(mask, row=0)", lambda: matcher.fill_mask(mask, row=0)),
        ("fill_mask(mask)", lambda: matcher.fill_mask(mask)),
        ("is_complete()", matcher.is_complete),
        ("num_accepted", lambda: matcher.num_accepted),
        ("lambda: None", lambda: None),
    ):
        print(f"  {label:24s} {best_ns(call, args.calls):7.1f} ns")


if __name__ == "__main__":
    main()
