#!/usr/bin/env python
"""What budget-aware masking costs along MaskBench walks (issue 24, "Must show" 4).

    python bench/budget_overhead.py                 # 100 MaskBench schemas, SmolLM2 vocabulary
    python bench/budget_overhead.py -n 300 --slack 1

Per schema: compile it, tokenize its first valid instance with SmolLM2's tokenizer, and walk
those tokens as ``lg.generate`` does with ``max_tokens = slack x walk length + 8``: at each
step time the plain mask (``fill_mask``) and the budget's work (``BudgetGuard.token_fits`` on
the walked token, and the full cut ``restrict`` where it does not fit). Prints the two totals,
their ratio, and the time of the full cut on every step for comparison (what cutting every
mask would cost). One process, one thread.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from tests.conformance import maskbench
from tests.conformance.common import smollm2_tokenizer_dir

import logitgate as lg
from logitgate.budget import BudgetGuard, budget_core


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--schemas", type=int, default=100, help="MaskBench schemas to draw (100)")
    ap.add_argument("--slack", type=float, default=2.0, help="max_tokens = slack x walk length + 8 (2.0)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(smollm2_tokenizer_dir() / "tokenizer.json"))
    vocab = lg.Vocabulary.from_huggingface(tok)
    compiler = lg.Compiler(vocab)
    bits = lg.allocate_mask(vocab)
    fill_s = check_s = full_s = accept_s = 0.0
    steps = changed = walks = 0
    for _, case in maskbench.iter_schemas(maskbench.stratified_sample(args.schemas, args.seed)):
        text = next(t for valid, t in case["tests"] if valid)
        try:
            g = compiler.compile_json_schema(case["schema"])
            core = budget_core(g)
        except lg.LogitgateError:
            continue
        ids = tok.encode(text, add_special_tokens=False).ids
        max_tokens = int(args.slack * len(ids)) + 8
        m = g.matcher()
        if int(core.cost(m)[1]) > max_tokens:
            continue
        walks += 1
        guard = BudgetGuard(g, max_tokens)
        for n, t in enumerate(ids):
            t0 = time.perf_counter()
            m.fill_mask(bits, 0)
            t1 = time.perf_counter()
            if not guard.token_fits(m, t, max_tokens - n):
                guard.restrict(m, bits[0], max_tokens - n)
            t2 = time.perf_counter()
            before = bits[0].copy()
            t3 = time.perf_counter()
            core.restrict_mask(m, bits[0], max_tokens - n)
            t4 = time.perf_counter()
            fill_s += t1 - t0
            check_s += t2 - t1
            full_s += t4 - t3
            steps += 1
            changed += not np.array_equal(before, bits[0])
            t5 = time.perf_counter()
            ok = m.accept(t)
            accept_s += time.perf_counter() - t5
            if not ok:
                break
            guard.accepted([t])
    print(f"walks {walks}, steps {steps}, slack {args.slack}")
    print(f"plain masks {fill_s * 1e3:.1f} ms, budget checks {check_s * 1e3:.1f} ms: {100 * check_s / fill_s:.1f}%")
    print(f"(accepting the tokens: {accept_s * 1e3:.1f} ms; the check computes their transitions first)")
    print(f"cutting every mask instead: {full_s * 1e3:.1f} ms ({100 * full_s / fill_s:.0f}%), {changed} steps changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
