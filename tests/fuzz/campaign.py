"""`make fuzz`: every fuzz target for a number of inputs, then a summary of counts and findings.

    .venv/bin/python -m tests.fuzz.campaign --runs 1000000 --timeout 10 [--jobs 2] [--targets regex,gbnf]

Each target runs as its own process (tests/fuzz/run.py) under ``nice``; ``--jobs`` of them at a
time. libFuzzer stops a target at its first finding; the summary (build/fuzz/summary.json, each
target's latest run; and a table on stdout) gives per target the inputs executed, the seconds taken, the findings
(crash-*, timeout-*, oom-* files in build/fuzz/artifacts/TARGET/) and the outcome counts. The
exit status is 1 if any target had a finding or did not finish its inputs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "fuzz"
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-")  # not slow-unit-: those finished
TARGET_NAMES = ["json_schema", "regex", "gbnf", "lark", "structural_tag", "masks"]


def _run_one(name: str, runs: int, timeout: int, max_seconds: int | None) -> dict[str, object]:
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / f"log-{name}.txt"
    flags = [f"-runs={runs}", f"-timeout={timeout}"]
    if max_seconds:
        flags.append(f"-max_total_time={max_seconds}")
    before = set((OUT / "artifacts" / name).glob("*")) if (OUT / "artifacts" / name).exists() else set()
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as f:
        rc = subprocess.call(
            ["nice", sys.executable, "-m", "tests.fuzz.run", name, *flags], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT
        )
    seconds = time.monotonic() - start
    text = log.read_text(encoding="utf-8", errors="replace")
    executed = re.findall(r"stat::number_of_executed_units:\s*(\d+)", text)
    new = set((OUT / "artifacts" / name).glob("*")) - before
    findings = sorted(str(p.relative_to(ROOT)) for p in new if p.name.startswith(FINDING_PREFIXES))
    outcomes_path = OUT / f"outcomes-{name}.json"
    outcomes = json.loads(outcomes_path.read_text(encoding="utf-8"))["outcomes"] if outcomes_path.exists() else {}
    return {
        "target": name,
        "inputs": int(executed[-1]) if executed else 0,
        "seconds": round(seconds, 1),
        "exit": rc,
        "findings": findings,
        "outcomes": outcomes,
        "log": str(log.relative_to(ROOT)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1_000_000, help="inputs per target")
    ap.add_argument("--timeout", type=int, default=10, help="per-input limit, seconds (libFuzzer -timeout)")
    ap.add_argument("--max-seconds", type=int, default=None, help="stop each target after this long")
    ap.add_argument("--jobs", type=int, default=1, help="targets at a time")
    ap.add_argument("--targets", default=",".join(TARGET_NAMES))
    args = ap.parse_args()
    names = [n for n in args.targets.split(",") if n]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda n: _run_one(n, args.runs, args.timeout, args.max_seconds), names))
    # The summary keeps each target's latest run: campaigns over some targets update it.
    path = OUT / "summary.json"
    latest = {r["target"]: r for r in json.loads(path.read_text(encoding="utf-8"))} if path.exists() else {}
    for r in results:
        latest[r["target"]] = {**r, "runs_asked": args.runs, "per_input_timeout_s": args.timeout}
    path.write_text(json.dumps(list(latest.values()), indent=1) + "\n", encoding="utf-8")
    print(f"{'target':<16}{'inputs':>10}{'seconds':>10}  findings")
    bad = False
    for r in results:
        findings = r["findings"]
        print(f"{r['target']:<16}{r['inputs']:>10}{r['seconds']:>10}  {len(findings)} {' '.join(findings)}")  # type: ignore[arg-type]
        bad |= bool(findings) or r["exit"] != 0 or r["inputs"] < args.runs  # type: ignore[operator]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
