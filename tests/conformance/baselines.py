"""Ratchet baselines for the conformance tests: counts that may only improve.

``baseline_jsts.json``: per test-suite file (byte-level vocabulary), cases ``passed`` and ``under``.
``baseline_maskbench.json``: per split, schemas ``passed`` and ``under`` for logitgate, for the fast subset
(``fast``: 50-schema sample) and the full sample (``full``: 998 schemas), tokenizer SmolLM2.

Regenerate after an improvement (the tests print when one is due)::

    python tests/conformance/baselines.py            # fast subsets only (a minute)
    python tests/conformance/baselines.py --full     # also every JSTS section and the 998-schema sample
    python tests/conformance/baselines.py --from bench/results/conformance   # full counts from CLI results
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
JSTS_BASELINE = HERE / "baseline_jsts.json"
MASKBENCH_BASELINE = HERE / "baseline_maskbench.json"
FAST_MASKBENCH_SAMPLE = 50
FULL_MASKBENCH_SAMPLE = 998


def jsts_counts(results: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, dict[str, int]]:
    per: dict[str, Counter[str]] = {}
    for (_s, fk, _i), r in results.items():
        per.setdefault(fk, Counter())[r["status"]] += 1
    return {fk: {"passed": c["passed"], "under": c["under"], "cases": sum(c.values())} for fk, c in sorted(per.items())}


def maskbench_counts(results: dict[tuple[str, str], dict[str, Any]]) -> dict[str, dict[str, int]]:
    per: dict[str, Counter[str]] = {}
    for (split, _sid), r in results.items():
        per.setdefault(split, Counter())[r["status"]] += 1
    return {s: {"passed": c["passed"], "under": c["under"], "schemas": sum(c.values())} for s, c in sorted(per.items())}


def ratchet(current: dict[str, dict[str, int]], baseline: dict[str, dict[str, int]]) -> tuple[list[str], list[str]]:
    """(regressions, improvements) of ``current`` against ``baseline``, keyed alike (file or split)."""
    worse, better = [], []
    for key, base in sorted(baseline.items()):
        cur = current.get(key)
        if cur is None:
            continue
        if cur["passed"] < base["passed"]:
            worse.append(f"{key}: passed {base['passed']} -> {cur['passed']}")
        elif cur["passed"] > base["passed"]:
            better.append(f"{key}: passed {base['passed']} -> {cur['passed']}")
        if cur["under"] > base["under"]:
            worse.append(f"{key}: under-constrained {base['under']} -> {cur['under']}")
        elif cur["under"] < base["under"]:
            better.append(f"{key}: under-constrained {base['under']} -> {cur['under']}")
    return worse, better


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(HERE.parents[1]))
    from tests.conformance import jsts, maskbench

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--from",
        dest="from_dir",
        default="",
        help="take the full counts from a folder of CLI results (jsts-bytes.json, maskbench-smollm2.json: the "
        "998 sample, seed 0) instead of running them again; implies --full",
    )
    args = ap.parse_args(argv)
    full_mb: dict[str, dict[str, int]] | None = None
    if args.from_dir:
        args.full = True
        src = Path(args.from_dir)
        jd = json.loads((src / "jsts-bytes.json").read_text(encoding="utf-8"))
        res = {(c["section"], c["file"], c["index"]): c for c in jd["cases"]}
        md = json.loads((src / "maskbench-smollm2.json").read_text(encoding="utf-8"))
        if md.get("sample") != FULL_MASKBENCH_SAMPLE or md.get("seed") != 0:
            raise SystemExit(
                f"{src / 'maskbench-smollm2.json'} is not the {FULL_MASKBENCH_SAMPLE}-schema seed-0 sample"
            )
        full_mb = maskbench_counts({(r["split"], r["id"]): r for r in md["results"]["logitgate"]})
    else:
        sections = jsts.SECTIONS if args.full else ("core",)
        res = jsts.run_jsts(sections, tokenizer="bytes", jobs=args.jobs, timeout=60, progress=True)
    data = load(JSTS_BASELINE)
    data.update({"tokenizer": "bytes", "files": {**data.get("files", {}), **jsts_counts(res)}})
    JSTS_BASELINE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    mb = load(MASKBENCH_BASELINE)
    mb["tokenizer"] = "smollm2"
    for name, n in (("fast", FAST_MASKBENCH_SAMPLE), ("full", FULL_MASKBENCH_SAMPLE)):
        if name == "full" and not args.full:
            continue
        if name == "full" and full_mb is not None:
            mb[name] = {"sample": n, "seed": 0, "splits": full_mb}
            continue
        chosen = maskbench.stratified_sample(n, 0)
        r = maskbench.run_maskbench(
            chosen, engines=("logitgate",), tokenizer="smollm2", jobs=args.jobs, timeout=30, progress=True
        )["logitgate"]
        mb[name] = {"sample": n, "seed": 0, "splits": maskbench_counts(r)}
    MASKBENCH_BASELINE.write_text(json.dumps(mb, indent=1, sort_keys=True) + "\n")
    print(f"wrote {JSTS_BASELINE} and {MASKBENCH_BASELINE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
