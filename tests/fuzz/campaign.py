"""`make fuzz`: every fuzz target for a number of inputs, then a summary of counts and findings.

    .venv/bin/python -m tests.fuzz.campaign --runs 1000000 --timeout 10 [--jobs 2] [--workers 2] [--targets regex,gbnf]

Each target runs as its own process (tests/fuzz/run.py) under ``nice``; ``--jobs`` targets at a
time. ``--workers`` N runs N processes of each target on one corpus directory, each for its share
of the inputs, as libFuzzer's ``-jobs`` does: each worker reloads the corpus, so the units one
finds guide the others, and the target's count is their sum. libFuzzer stops a worker at its
first finding; the summary (build/fuzz/summary.json, each target's latest run; and a table on
stdout) gives per target the inputs executed, the seconds taken, the findings (crash-*,
timeout-*, oom-* files in build/fuzz/artifacts/TARGET/) and the outcome counts. The exit status
is 1 if any target had a finding or did not finish its inputs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("FUZZ_OUT", ROOT / "build" / "fuzz"))  # as in run.py
FINDING_PREFIXES = ("crash-", "timeout-", "oom-", "leak-")  # not slow-unit-: those finished
TARGET_NAMES = ["json_schema", "regex", "gbnf", "lark", "structural_tag", "masks"]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _run_one(name: str, runs: int, timeout: int, max_seconds: int | None, workers: int = 1) -> dict[str, object]:
    OUT.mkdir(parents=True, exist_ok=True)
    share = -(-runs // workers)
    flags = [f"-runs={share}", f"-timeout={timeout}"]
    if max_seconds:
        flags.append(f"-max_total_time={max_seconds}")
    artifacts = OUT / "artifacts" / name
    before = set(artifacts.glob("*")) if artifacts.exists() else set()
    tags = [""] if workers == 1 else [f"-w{i}" for i in range(workers)]
    logs = [OUT / f"log-{name}{tag}.txt" for tag in tags]
    start = time.monotonic()
    procs = []
    for tag, log in zip(tags, logs, strict=True):
        env = {**os.environ, "FUZZ_WORKER": tag} if tag else None
        with log.open("w", encoding="utf-8") as f:
            cmd = ["nice", sys.executable, "-m", "tests.fuzz.run", name, *flags]
            procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env))
    rcs = [p.wait() for p in procs]
    seconds = time.monotonic() - start
    inputs = 0
    for log in logs:
        text = log.read_text(encoding="utf-8", errors="replace")
        executed = re.findall(r"stat::number_of_executed_units:\s*(\d+)", text)
        inputs += int(executed[-1]) if executed else 0
    new = set(artifacts.glob("*")) - before
    findings = sorted(_shown(p) for p in new if p.name.startswith(FINDING_PREFIXES))
    outcomes: Counter[str] = Counter()
    for tag in tags:
        path = OUT / f"outcomes-{name}{tag}.json"
        if path.exists():
            outcomes.update(json.loads(path.read_text(encoding="utf-8"))["outcomes"])
    return {
        "target": name,
        "inputs": inputs,
        "seconds": round(seconds, 1),
        "workers": workers,
        "exit": max(rcs, key=abs),
        "findings": findings,
        "outcomes": dict(outcomes.most_common()),
        "log": [_shown(log) for log in logs] if workers > 1 else _shown(logs[0]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1_000_000, help="inputs per target")
    ap.add_argument("--timeout", type=int, default=10, help="per-input limit, seconds (libFuzzer -timeout)")
    ap.add_argument("--max-seconds", type=int, default=None, help="stop each target after this long")
    ap.add_argument("--jobs", type=int, default=1, help="targets at a time")
    ap.add_argument("--workers", type=int, default=1, help="processes per target, on one corpus")
    ap.add_argument("--targets", default=",".join(TARGET_NAMES))
    args = ap.parse_args()
    names = [n for n in args.targets.split(",") if n]
    unknown = [n for n in names if n not in TARGET_NAMES]
    if unknown:
        ap.error(f"unknown targets {unknown} (known: {', '.join(TARGET_NAMES)})")
    if args.workers < 1 or args.jobs < 1:
        ap.error("--jobs and --workers are at least 1")
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda n: _run_one(n, args.runs, args.timeout, args.max_seconds, args.workers), names))
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
