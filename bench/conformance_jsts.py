#!/usr/bin/env python
"""JSON-Schema-Test-Suite draft 2020-12 conformance of logitgate's JSON Schema frontend (issue 3, "Must show" 1, 4).

    python bench/conformance_jsts.py                                  # byte-level vocabulary, all sections
    python bench/conformance_jsts.py --tokenizer smollm2,llama3,gemma3  # the same run per real tokenizer
    python bench/conformance_jsts.py --sections core --files allOf,ref --show under,over
    python bench/conformance_jsts.py --tokenizer bytes --engines logitgate,llguidance,xgrammar   # peers live

Prints a per-file table and per-section totals next to llguidance's published results (in tests and in
cases), plus every under-constrained test. With several tokenizers, also the tests whose verdict differs
from the first tokenizer's. Results (JSON) go to --out. Exit status 1 if any test is under-constrained.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
    ap.add_argument(
        "--engines",
        default="logitgate",
        help="comma list of logitgate, xgrammar, llguidance; peers run once, with the first real tokenizer given "
        "(smollm2 if only bytes), through bench/engines.py",
    )
    ap.add_argument("--out", default="bench/results/conformance", help="folder for jsts-<tokenizer>.json")
    args = ap.parse_args(argv)
    sections = tuple(s for s in args.sections.split(",") if s)
    only = {f for f in args.files.split(",") if f} or None
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    first: dict | None = None
    any_under = False
    tokenizers = [t for t in args.tokenizer.split(",") if t]
    engines = [e for e in args.engines.split(",") if e]
    runs = [("logitgate", t) for t in tokenizers] if "logitgate" in engines else []
    peer_tok = next((t for t in tokenizers if t != "bytes"), "smollm2")
    runs += [(e, peer_tok) for e in engines if e != "logitgate"]
    side_by_side: dict[str, dict[str, Any]] = {}
    for engine, name in runs:
        t0 = time.monotonic()
        results = jsts.run_jsts(
            sections,
            tokenizer=name,
            jobs=args.jobs,
            timeout=args.timeout,
            mask_every=args.mask_every,
            only=only,
            progress=True,
            engine=engine,
        )
        summary = jsts.summarize(results)
        comparison = jsts.llguidance_comparison(results)
        side_by_side[f"{engine}/{name}"] = summary["sections"]
        print(f"\n## JSON-Schema-Test-Suite draft2020-12, {engine}, tokenizer {name} ({time.monotonic() - t0:.1f}s)\n")
        print(jsts.render_markdown(summary, comparison, per_file=not args.no_per_file))
        notes = {sec: b.get("compile_error_all_invalid", 0) for sec, b in summary["sections"].items()}
        internal = {sec: b.get("internal_errors", 0) for sec, b in summary["sections"].items()}
        print(
            f"\ncompile_error cases whose tests are all invalid (empty language; llguidance's "
            f"compile_error_all_invalid): {notes}"
        )
        print(f"internal errors (an exception that is not a LogitgateError): {internal}")
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
        if engine != "logitgate":
            path = out_dir / f"jsts-{engine}-{name}.json"
            path.write_text(json.dumps({"engine": engine, "tokenizer": name, "summary": summary}, indent=1))
            continue
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
    if len(side_by_side) > 1:
        print("\n## Side by side (cases passed/over/under/unsupported/error; tests passed)\n")
        print("| engine/tokenizer | " + " | ".join(sections) + " | total |")
        print("|---|" + "---|" * (len(sections) + 1))
        for key, secs in side_by_side.items():
            cells = []
            tot: Counter[str] = Counter()
            tot_t = 0
            for sec in sections:
                c = secs.get(sec, {}).get("cases", {})
                tp = secs.get(sec, {}).get("tests", {}).get("pass", 0)
                tot.update(c)
                tot_t += tp
                cells.append(_cell(c, tp))
            cells.append(_cell(tot, tot_t))
            print(f"| {key} | " + " | ".join(cells) + " |")
    return 1 if any_under else 0


def _cell(c: Mapping[str, int], tests_passed: int) -> str:
    err = sum(c.get(k, 0) for k in ("compile_error", "runtime_error", "timeout", "crash"))
    return (
        f"{c.get('passed', 0)}/{c.get('over', 0)}/{c.get('under', 0)}/{c.get('unsupported', 0)}/{err}; {tests_passed}"
    )


if __name__ == "__main__":
    sys.exit(main())
