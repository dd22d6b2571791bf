#!/usr/bin/env python
"""What budget-aware masking costs along MaskBench walks (issue 24, "Must show" 4).

    python bench/budget_overhead.py                 # 100 MaskBench schemas, SmolLM2 vocabulary
    python bench/budget_overhead.py -n 300 --slack 1 --repeat 7
    python bench/budget_overhead.py --full-cut      # also time cutting every mask

Per schema: compile it, tokenize its first valid instance with SmolLM2's tokenizer, and walk
those tokens as ``lg.generate`` does with ``max_tokens = slack x walk length + 8``, in two
passes: plain (``fill_mask``, then ``accept``) and budget-aware (``fill_mask``, then
``BudgetGuard.accept``, which accepts the drawn token when it leaves room, and the cut
``restrict`` where it does not). The budget's cost is the second pass's steps less
the first pass's steps (both compute the token's transitions once; the second pass's
parser stores also record each new configuration's shortest completion), against the plain
masks' time. One process, one thread.

Each pass runs ``--repeat`` times, each time on freshly compiled grammars (so every repeat
does the same work: first fills, first transitions, first costs), and each step counts with
its fastest repeat: on a shared machine a preempted step would otherwise add milliseconds to
whichever side it hit.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from tests.conformance import maskbench
from tests.conformance.common import smollm2_tokenizer_dir

import logitgate as lg
from logitgate.budget import ACCEPTED, NO_ROOM, BudgetGuard, budget_core


def walk_all(
    vocab: lg.Vocabulary, walks: list[tuple[dict[str, Any], list[int]]], slack: float, budget: bool, full_cut: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    """One pass over every walk on freshly compiled grammars: per-step times (seconds) of the
    fill, the accept (with ``budget``: the guard's accept and any cut) and the full cut, how
    many steps the full cut changed, and the seconds spent building the grammars' budgets."""
    compiler = lg.Compiler(vocab)
    bits = lg.allocate_mask(vocab)
    fill: list[float] = []
    accept: list[float] = []
    cut: list[float] = []
    changed = 0
    setup = 0.0
    for schema, ids in walks:
        g = compiler.compile_json_schema(schema)
        t0 = time.perf_counter()
        core = budget_core(g)  # once per compiled grammar: shortest paths over its automaton
        setup += time.perf_counter() - t0
        max_tokens = int(slack * len(ids)) + 8
        m = g.matcher()
        guard = BudgetGuard(g, max_tokens)
        for n, t in enumerate(ids):
            t0 = time.perf_counter()
            m.fill_mask(bits, 0)
            t1 = time.perf_counter()
            if full_cut:
                before = bits[0].copy()
                t2 = time.perf_counter()
                core.restrict_mask(m, bits[0], max_tokens - n)
                cut.append(time.perf_counter() - t2)
                changed += not np.array_equal(before, bits[0])
                t1 = time.perf_counter()
            if not budget:
                ok = m.accept(t)
            else:
                fit = guard.accept(m, t, max_tokens - n)
                ok = fit == ACCEPTED
                if fit == NO_ROOM:
                    # The walked token leaves no room: cut, then take the walk's token if it is
                    # still allowed (lg.generate would draw again from the cut mask).
                    guard.restrict(m, bits[0], max_tokens - n)
                    ok = m.accept(t)
                    guard.accepted([t])
            t2 = time.perf_counter()
            fill.append(t1 - t0)
            accept.append(t2 - t1)
            if not ok:
                break
    return np.array(fill), np.array(accept), np.array(cut), changed, setup


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--schemas", type=int, default=100, help="MaskBench schemas to draw (default 100)")
    ap.add_argument("--slack", type=float, default=2.0, help="max_tokens = slack x walk length + 8 (default 2.0)")
    ap.add_argument("--repeat", type=int, default=5, help="passes; each step counts its fastest (default 5)")
    ap.add_argument("--full-cut", action="store_true", help="also time cutting every mask (slow)")
    ap.add_argument("--seed", type=int, default=0, help="MaskBench sample seed (default 0)")
    args = ap.parse_args(argv)
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(smollm2_tokenizer_dir() / "tokenizer.json"))
    vocab = lg.Vocabulary.from_huggingface(tok)
    compiler = lg.Compiler(vocab)
    walks: list[tuple[dict[str, Any], list[int]]] = []
    for _, case in maskbench.iter_schemas(maskbench.stratified_sample(args.schemas, args.seed)):
        text = next(t for valid, t in case["tests"] if valid)
        try:
            g = compiler.compile_json_schema(case["schema"])
            min_tokens = int(budget_core(g).cost(g.matcher())[1])
        except lg.LogitgateError:
            continue
        ids = tok.encode(text, add_special_tokens=False).ids
        if min_tokens <= int(args.slack * len(ids)) + 8:
            walks.append((case["schema"], ids))
    del compiler
    # Plain and budget-aware passes alternate, so both see the machine's load alike.
    plain, budget = [], []
    for _ in range(args.repeat):
        plain.append(walk_all(vocab, walks, args.slack, False, args.full_cut))
        budget.append(walk_all(vocab, walks, args.slack, True, False))

    def fastest(runs: list[Any], i: int) -> Any:
        return np.min([r[i] for r in runs], axis=0)

    fill, plain_accept, budget_accept = fastest(plain, 0).sum(), fastest(plain, 1).sum(), fastest(budget, 1).sum()
    budget_fill = fastest(budget, 0).sum()  # its first fills also record shortest completions
    extra = budget_fill + budget_accept - fill - plain_accept
    print(f"walks {len(walks)}, steps {len(plain[0][0])}, slack {args.slack}, fastest of {args.repeat} per step")
    print(
        f"plain masks {fill * 1e3:.1f} ms ({budget_fill * 1e3:.1f} ms in the budget-aware pass); "
        f"accepts {plain_accept * 1e3:.1f} ms plain, {budget_accept * 1e3:.1f} ms budget-aware"
    )
    print(f"budget-aware masking costs {extra * 1e3:.1f} ms: {100 * extra / fill:.1f}% of the plain masks' time")
    setup = min(r[4] for r in budget)
    print(f"building the {len(walks)} grammars' budgets (once per compiled grammar): {setup * 1e3:.1f} ms")
    if args.full_cut:
        cut = fastest(plain, 2).sum()
        print(f"cutting every mask instead: {cut * 1e3:.1f} ms ({100 * cut / fill:.0f}%), {plain[0][3]} steps changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
