#!/usr/bin/env python
"""MaskBench conformance of logitgate next to xgrammar and llguidance, in one run (issue 3, "Must show" 2).

    python bench/conformance_maskbench.py                         # 998-schema stratified sample, seed 0, smollm2
    python bench/conformance_maskbench.py --sample 200 --engines logitgate
    python bench/conformance_maskbench.py --all --jobs 8 --timeout 60

Per split and engine: passed / over / under / unsupported / compile_error / timeout / crash, plus how many of
the same schemas llguidance's published expected_maskbench.json marks as passing. The sample is drawn as in
tests/conformance/maskbench.py (same draw as bench/run.py --sample N --seed S). Progress goes to stderr.
Exit status 1 if logitgate has an under-constrained schema.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conformance import maskbench


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--sample", type=int, default=maskbench.DEFAULT_SAMPLE, help="stratified sample size (998)")
    g.add_argument("--all", action="store_true", help="every schema with at least one valid instance")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--splits", default="", help="only these splits (comma list)")
    ap.add_argument("--engines", default=",".join(maskbench.ENGINE_NAMES))
    ap.add_argument("--tokenizer", default="smollm2", choices=["smollm2", "llama3", "gemma3"])
    ap.add_argument("--jobs", type=int, default=2, help="worker processes per engine (0 = inline, no timeouts)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per schema (compile + all instances)")
    ap.add_argument("--mask-every", type=int, default=1, help="check the mask bit against accept every k-th token")
    ap.add_argument("--show", type=int, default=20, help="list up to N non-passing logitgate schemas per outcome")
    ap.add_argument("--out", default="bench/results/conformance", help="folder for maskbench-<tokenizer>.json")
    args = ap.parse_args(argv)
    chosen = maskbench.stratified_sample(None if args.all else args.sample, args.seed)
    if args.splits:
        keep = set(args.splits.split(","))
        chosen = {k: v for k, v in chosen.items() if k in keep}
    engines = tuple(e for e in args.engines.split(",") if e)
    t0 = time.monotonic()
    results = maskbench.run_maskbench(
        chosen,
        engines=engines,
        tokenizer=args.tokenizer,
        jobs=args.jobs,
        timeout=args.timeout,
        mask_every=args.mask_every,
        progress=True,
    )
    table = maskbench.summarize(results)
    n = sum(len(v) for v in chosen.values())
    print(
        f"\n## MaskBench, {n} schemas ({'all' if args.all else f'sample {args.sample}, seed {args.seed}'}), "
        f"tokenizer {args.tokenizer} ({time.monotonic() - t0:.0f}s)\n"
    )
    print(maskbench.render_markdown(table))
    print("\ntotals:")
    for e, c in maskbench.totals(table).items():
        print(f"  {e}: {json.dumps(c, sort_keys=True)}")
    lg_res = results.get("logitgate", {})
    for outcome in ("under", "over", "compile_error", "runtime_error", "crash", "timeout"):
        rows = [(k, r) for k, r in sorted(lg_res.items()) if r["status"] == outcome]
        if rows:
            print(f"\nlogitgate {outcome}: {len(rows)}")
            for (split, sid), r in rows[: args.show]:
                print(f"  {split}/{sid}: {r.get('detail') or r.get('examples') or r.get('tests')}")
    internal = [(k, r) for k, r in sorted(lg_res.items()) if r.get("internal")]
    if internal:
        print(f"\nlogitgate internal errors (not a LogitgateError): {len(internal)}")
        for (split, sid), r in internal[: args.show]:
            print(f"  {split}/{sid}: {r['detail']}")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"maskbench-{args.tokenizer}.json"
    path.write_text(
        json.dumps(
            {
                "tokenizer": args.tokenizer,
                "sample": None if args.all else args.sample,
                "seed": args.seed,
                "table": table,
                "results": {
                    e: [{"split": s, "id": i, **r} for (s, i), r in sorted(res.items())] for e, res in results.items()
                },
            },
            indent=1,
        )
    )
    print(f"\nresults: {path}", file=sys.stderr)
    return 1 if any(r["status"] == "under" for r in lg_res.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
