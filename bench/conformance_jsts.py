#!/usr/bin/env python
"""JSON-Schema-Test-Suite draft 2020-12 conformance of logitgate's JSON Schema frontend (issue 3, "Must show" 1, 4).

    python bench/conformance_jsts.py                                  # byte-level vocabulary, all sections
    python bench/conformance_jsts.py --tokenizer smollm2,llama3,gemma3  # the same run per real tokenizer
    python bench/conformance_jsts.py --sections core --files allOf,ref --show under,over

Prints a per-file table and per-section totals next to llguidance's published results (in tests and in
cases), plus every under-constrained test. With several tokenizers, also the tests whose verdict differs
from the first tokenizer's. Results (JSON) go to --out. Exit status 1 if any test is under-constrained.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conformance import jsts
from tests.conformance.common import TOKENIZER_NAMES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default="bytes", help=f"comma list of {','.join(TOKENIZER_NAMES)} (default bytes)")
    ap.add_argument("--sections", default="core,optional,format", help="comma list of core, optional, format")
    ap.add_argument("--files", default="", help="only these files (stems or keys like optional/format/date)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (0 = inline, no timeouts)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case (compile + all its tests)")
    ap.add_argument(
        "--mask-every",
        type=int,
        default=1,
        help="check the mask bit against accept every k-th token (0 = never; EOS always by mask)",
    )
    ap.add_argument("--show", default="under", help="list tests with these results (under, over, compile_error...)")
    ap.add_argument("--no-per-file", action="store_true", help="print only the section totals")
    ap.add_argument("--out", default="bench/results/conformance", help="folder for jsts-<tokenizer>.json")
    args = ap.parse_args(argv)
    sections = tuple(s for s in args.sections.split(",") if s)
    only = {f for f in args.files.split(",") if f} or None
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    first: dict | None = None
    any_under = False
    for name in [t for t in args.tokenizer.split(",") if t]:
        t0 = time.monotonic()
        results = jsts.run_jsts(
            sections,
            tokenizer=name,
            jobs=args.jobs,
            timeout=args.timeout,
            mask_every=args.mask_every,
            only=only,
            progress=True,
        )
        summary = jsts.summarize(results)
        comparison = jsts.llguidance_comparison(results)
        print(f"\n## JSON-Schema-Test-Suite draft2020-12, tokenizer {name} ({time.monotonic() - t0:.1f}s)\n")
        print(jsts.render_markdown(summary, comparison, per_file=not args.no_per_file))
        for kind in [k for k in args.show.split(",") if k]:
            lines = jsts.failures(results, kind)
            print(f"\n{kind}: {len(lines)} tests")
            for line in lines:
                print("  " + line)
        mism = [f"{k[1]}[{k[2]}]: {r['mask_mismatch']}" for k, r in sorted(results.items()) if r.get("mask_mismatch")]
        if mism:
            print(f"\nmask/accept disagreements: {len(mism)} cases")
            for line in mism[:20]:
                print("  " + line)
        any_under |= any(t["result"] == "under" for r in results.values() for t in r.get("tests", []))
        verdicts = {(k, i): t["result"] for k, r in results.items() for i, t in enumerate(r.get("tests", []))}
        if first is None:
            first = {"name": name, "verdicts": verdicts}
        else:
            diff = [(k, first["verdicts"].get(k), v) for k, v in verdicts.items() if first["verdicts"].get(k) != v]
            print(f"\nverdicts differing from tokenizer {first['name']}: {len(diff)}")
            for (k, i), a, b in sorted(diff)[:30]:
                print(f"  {k[1]}[{k[2]}] test {i}: {first['name']}={a} {name}={b}")
        path = out_dir / f"jsts-{name}.json"
        path.write_text(
            json.dumps(
                {
                    "tokenizer": name,
                    "sections": sections,
                    "summary": summary,
                    "llguidance": comparison,
                    "cases": [{"section": k[0], "file": k[1], "index": k[2], **r} for k, r in sorted(results.items())],
                },
                indent=1,
            )
        )
        print(f"\nresults: {path}", file=sys.stderr)
    return 1 if any_under else 0


if __name__ == "__main__":
    sys.exit(main())
