"""What the on-disk cache of compiled grammars saves a restarted process (docs/limits.md, "The
on-disk cache").

    python bench/disk_cache.py [--tokenizer llama3] [--split Github_medium] [--limit 200]

Compiles the schemas of one jsonschemabench split (those that compile), each in a fresh
process: once without a cache directory, once into an empty one (compile and write), once
more from the filled one (a restart: nothing is compiled). Reports the time per compile (p50,
mean, p90, max), the native compiles each run did, and the files' sizes. One thread; on a
loaded machine the ratios mean more than the times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import SHARED, machine_info, pin_threads, summarize

pin_threads()

CORPUS = SHARED / "corpora/jsonschemabench"


def schemas(split: str, limit: int) -> list[object]:
    out = []
    with (CORPUS / split / "schemas.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line)["schema"])
            if len(out) >= limit:
                break
    return out


def one_run(args: argparse.Namespace, cache_dir: str | None) -> dict[str, object]:
    """In this process: compile every schema once; times of those that compile."""
    import logitgate as lg
    from common import load_tokenizer

    vocab = lg.Vocabulary.from_huggingface(load_tokenizer(args.tokenizer))
    compiler = lg.Compiler(vocab, cache_size=0, cache_dir=cache_dir)
    compiler.compile_json_schema({"type": "integer"})  # imports, first-use tables
    before = compiler.cache_info()
    times_ms = []
    failed = 0
    for schema in schemas(args.split, args.limit):
        start = time.perf_counter()
        try:
            compiler.compile_json_schema(schema, timeout=30.0)
        except lg.LogitgateError:
            failed += 1
            continue
        times_ms.append((time.perf_counter() - start) * 1000)
    info = compiler.cache_info()
    return {
        "compile_ms": {k: round(v, 3) for k, v in summarize(times_ms).items()},
        "failed": failed,
        "compiles": info.compiles - before.compiles,
        "disk_hits": info.disk_hits - before.disk_hits,
        "disk_errors": info.disk_errors - before.disk_errors,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--split", default="Github_medium")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--run-one", default=None, help=argparse.SUPPRESS)  # a child: "none" or a directory
    args = ap.parse_args()
    if args.run_one is not None:
        print(json.dumps(one_run(args, None if args.run_one == "none" else args.run_one)))
        return
    report: dict[str, object] = {
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "machine": machine_info(),
        "tokenizer": args.tokenizer,
        "split": args.split,
    }
    with tempfile.TemporaryDirectory() as directory:
        for name, target in (("no_cache", "none"), ("cold", directory), ("warm", directory)):
            child = [sys.executable, __file__, "--tokenizer", args.tokenizer, "--split", args.split]
            out = subprocess.run(
                [*child, "--limit", str(args.limit), "--run-one", target], capture_output=True, text=True, check=True
            )
            report[name] = json.loads(out.stdout.strip().splitlines()[-1])
        sizes = sorted(p.stat().st_size for p in Path(directory).glob("*.lgc"))
        report["files"] = {
            "count": len(sizes),
            "p50_kb": round(sizes[len(sizes) // 2] / 1024, 1),
            "max_kb": round(sizes[-1] / 1024, 1),
            "total_mb": round(sum(sizes) / 2**20, 2),
        }
    cold, warm, none = (report[k]["compile_ms"] for k in ("cold", "warm", "no_cache"))  # type: ignore[index]
    for name, run in (("cold", cold), ("warm", warm)):
        report[f"{name}_over_no_cache"] = {
            "p50": round(run["p50"] / none["p50"], 3),
            "mean": round(run["mean"] / none["mean"], 3),
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
