"""Engine-agnostic benchmark: logitgate vs xgrammar, llguidance and outlines-core on identical token sequences.

Usage (see bench/README.md):
  python bench/run.py [--engines logitgate,xgrammar,llguidance,outlines] [--suite gbnf,regex,maskbench]
                      [--tokenizer smollm2|llama3|gemma3] [--sample N | --all] [--out bench/results/<name>]
                      [--timeout S] [--cases-only]

How it works: this process builds the cases once (grammar text + token ids of valid instances, tokenized here
so every engine sees the same ids) and writes them to <out>/cases.json. Each engine then runs in its own
worker process (bench/worker.py). A case that runs past --timeout, or kills its worker, is recorded as
"timeout"/"crash" and a fresh worker resumes at the next case. Everything runs single-threaded
(common.THREAD_ENV) and engines run one after another, never concurrently.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the repo root: tests.conformance

from common import (
    BENCH_DIR,
    DATA_DIR,
    SHARED,
    THREAD_ENV,
    load_tokenizer,
    machine_info,
    pin_threads,
    summarize,
)

pin_threads()

ALL_ENGINES = ("logitgate", "xgrammar", "llguidance", "outlines")
ALL_SUITES = ("gbnf", "regex", "maskbench")
MASKBENCH = SHARED / "corpora/jsonschemabench"


# ----------------------------------------------------------------------------------------------- cases


def _encode(tok: Any, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False))


def gbnf_cases(tok: Any) -> list[dict[str, Any]]:
    samples = json.loads((DATA_DIR / "gbnf_samples.json").read_text())["samples"]
    root = SHARED / "corpora/gbnf"
    files = sorted(root.glob("*.gbnf")) + sorted((root / "from-llguidance").glob("*.gbnf"))
    cases = []
    for path in files:
        rel = str(path.relative_to(root))
        texts = samples.get(rel, [])
        cases.append(
            {
                "suite": "gbnf",
                "id": rel,
                "kind": "gbnf",
                "source": path.read_text(),
                "instances": [_encode(tok, t) for t in texts],
            }
        )
    return cases


def regex_cases(tok: Any) -> list[dict[str, Any]]:
    rows = json.loads((DATA_DIR / "regex_cases.json").read_text())["cases"]
    return [
        {
            "suite": "regex",
            "id": r["id"],
            "kind": "regex",
            "source": r["pattern"],
            "instances": [_encode(tok, r["sample"])],
        }
        for r in rows
    ]


def maskbench_cases(tok: Any, sample: int | None, seed: int = 0, per_split: int | None = None) -> list[dict[str, Any]]:
    """Stratified sample: per split, proportional to its schemas with ≥1 valid instance (≥1 each), seeded.

    The draw is the conformance runner's (tests/conformance/maskbench.py), so both measure the same schemas.
    ``per_split`` N draws N schemas from every split instead (all of a smaller split), seeded: small splits
    (Handwritten, Github_ultra, Kubernetes) then weigh as much as large ones.
    """
    import random

    from tests.conformance.maskbench import eligible_ids, stratified_sample

    if per_split is None:
        chosen = stratified_sample(sample, seed)
    else:
        rng = random.Random(seed)
        chosen = {k: set(rng.sample(v, min(per_split, len(v)))) for k, v in eligible_ids().items()}
    cases = []
    for split, picked in sorted(chosen.items()):
        split_dir = MASKBENCH / split
        with (split_dir / "schemas.jsonl").open() as fs, (split_dir / "tests.jsonl").open() as ft:
            for ls, lt in zip(fs, ft, strict=True):
                srow = json.loads(ls)
                if srow["id"] not in picked:
                    continue
                trow = json.loads(lt)
                insts = [_encode(tok, json.dumps(t["data"])) for t in trow["tests"] if t.get("valid")]
                cases.append(
                    {
                        "suite": "maskbench",
                        "id": f"{split}/{srow['id']}",
                        "kind": "json_schema",
                        "source": json.dumps(srow["schema"]),
                        "instances": insts,
                    }
                )
    return cases


# ------------------------------------------------------------------------------------------- workers


class _Lines:
    """Line reader over a pipe with a deadline (selectors; no threads)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.fd, selectors.EVENT_READ)
        self.buf = b""

    def next(self, deadline: float) -> dict[str, Any] | str:
        """The next JSON message, "eof" when the worker exited, or "timeout"."""
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not self.sel.select(left):
                return "timeout"
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return "eof"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)  # type: ignore[no-any-return]


def run_engine(
    engine: str,
    tokname: str,
    cases: list[dict[str, Any]],
    cases_path: Path,
    out: Path,
    timeout: float,
    load_timeout: float,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """All cases on one engine; returns (worker info, one result per case)."""
    n = len(cases)
    results: list[dict[str, Any] | None] = [None] * n
    info: dict[str, Any] = {}
    start = 0
    t_begin = time.monotonic()
    log = (out / f"{engine}.log").open("ab")
    counts: dict[str, int] = {}

    def record(i: int, res: dict[str, Any]) -> None:
        results[i] = res
        counts[res["status"]] = counts.get(res["status"], 0) + 1
        done = sum(r is not None for r in results)
        summary = " ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        sys.stderr.write(f"\r[{engine}] {done}/{n} {summary} {time.monotonic() - t_begin:.0f}s   ")
        sys.stderr.flush()

    while start < n:
        env = dict(os.environ, **THREAD_ENV)
        proc = subprocess.Popen(
            [
                sys.executable,
                str(BENCH_DIR / "worker.py"),
                "--engine",
                engine,
                "--tokenizer",
                tokname,
                "--cases",
                str(cases_path),
                "--start",
                str(start),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
        )
        reader = _Lines(proc)
        current: int | None = None
        ready = False
        deadline = time.monotonic() + load_timeout
        failure = ""
        while True:
            msg = reader.next(deadline)
            if isinstance(msg, str):
                failure = msg
                break
            ev = msg.get("ev")
            if ev == "ready":
                ready = True
                info = info or {k: v for k, v in msg.items() if k != "ev"}
                deadline = time.monotonic() + timeout
            elif ev == "start":
                current = int(msg["i"])
                deadline = time.monotonic() + timeout
            elif ev == "result":
                record(int(msg["i"]), msg)
                current = None
                deadline = time.monotonic() + timeout
            elif ev == "done":
                break
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.sel.close()
        if proc.stdout is not None:
            proc.stdout.close()
        if not failure:
            break
        status = "timeout" if failure == "timeout" else "crash"
        if current is None:
            # Died or hung outside a case (import, tokenizer build): nothing later can run either.
            why = f"worker {status} before the first case (rc={proc.returncode}); see {engine}.log"
            for i in range(start, n):
                if results[i] is None:
                    record(i, {"status": "error" if not ready else status, "detail": why, "mask_us": []})
            info.setdefault("error", why)
            break
        record(current, {"status": status, "detail": f"rc={proc.returncode}", "mask_us": []})
        start = current + 1
    log.close()
    sys.stderr.write("\n")
    final = [r if r is not None else {"status": "error", "detail": "no result", "mask_us": []} for r in results]
    for case, res in zip(cases, final, strict=True):
        res["suite"], res["id"] = case["suite"], case["id"]
    return info, final


# ------------------------------------------------------------------------------------------- reports


METRICS = (
    "compile_p50",
    "compile_p90",
    "compile_p99",
    "compile_max",
    "first_mask_p50",
    "mask_mean",
    "mask_p50",
    "mask_p90",
    "mask_p99",
    "mask_max",
)


def aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    comp = [r["compile_us"] for r in results if r.get("compile_us") is not None]
    first = [r["first_mask_us"] for r in results if r.get("first_mask_us") is not None]
    masks = [x for r in results for x in r.get("mask_us", [])]
    rss = [r["rss_delta"] for r in results if r.get("rss_delta") is not None]
    status: dict[str, int] = {}
    for r in results:
        status[r["status"]] = status.get(r["status"], 0) + 1
    c, f, m = summarize(comp), summarize(first), summarize(masks)
    return {
        "cases": len(results),
        "pass": status.get("pass", 0),
        "status": status,
        "compile_us": c,
        "first_mask_us": f,
        "mask_us": m,
        "rss_delta_mb_max": (max(rss) / 2**20) if rss else math.nan,
        "rss_delta_mb_mean": (sum(rss) / len(rss) / 2**20) if rss else math.nan,
        "flat": {
            "compile_p50": c["p50"],
            "compile_p90": c["p90"],
            "compile_p99": c["p99"],
            "compile_max": c["max"],
            "first_mask_p50": f["p50"],
            "mask_mean": m["mean"],
            "mask_p50": m["p50"],
            "mask_p90": m["p90"],
            "mask_p99": m["p99"],
            "mask_max": m["max"],
        },
    }


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x >= 1e5:
        return f"{x / 1e3:.0f}ms"
    if x >= 1e4:
        return f"{x / 1e3:.1f}ms"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.1f}"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# logitgate bench — {report['date']}",
        "",
        f"`{report['command']}`",
        "",
        f"Machine: {report['machine']['cpu_model']}, nproc={report['machine']['nproc']}, "
        f"single thread ({', '.join(f'{k}=1' for k in ('OMP_NUM_THREADS', 'RAYON_NUM_THREADS'))}, ...). "
        f"Tokenizer: {report['tokenizer']}. Times in µs unless marked ms.",
        "",
        "Engines: "
        + ", ".join(
            f"{e} {i.get('version', '?')} (tokenizer build {i.get('setup_s', math.nan):.2f}s)"
            for e, i in report["engines"].items()
        ),
        "",
    ]
    head = (
        "| suite | engine | pass | compile p50 | compile p90 | compile p99 | compile max | first mask p50 | "
        "mask mean | mask p50 | mask p90 | mask p99 | mask max | masks | RSS Δ max MB (approx) | other statuses |"
    )
    lines += [head, "|" + "---|" * 16]
    for suite, per_engine in report["suites"].items():
        for eng, agg in per_engine.items():
            fl = agg["flat"]
            other = ", ".join(f"{k} {v}" for k, v in sorted(agg["status"].items()) if k != "pass") or ""
            rss = agg["rss_delta_mb_max"]
            lines.append(
                f"| {suite} | {eng} | {agg['pass']}/{agg['cases']} | {_fmt(fl['compile_p50'])} | "
                f"{_fmt(fl['compile_p90'])} | {_fmt(fl['compile_p99'])} | {_fmt(fl['compile_max'])} | "
                f"{_fmt(fl['first_mask_p50'])} | "
                f"{_fmt(fl['mask_mean'])} | {_fmt(fl['mask_p50'])} | {_fmt(fl['mask_p90'])} | "
                f"{_fmt(fl['mask_p99'])} | {_fmt(fl['mask_max'])} | {agg['mask_us']['n']} | "
                f"{'—' if math.isnan(rss) else f'{rss:.1f}'} | {other} |"
            )
    lines.append("")
    for suite, rat in report.get("ratios", {}).items():
        parts = [f"{k} {v['ratio']:.2f}× ({v['peer']}, {v['common']} cases)" for k, v in rat.items()]
        lines.append(f"Ratio logitgate / best peer, {suite}: " + (", ".join(parts) or "n/a"))
    if report.get("ratios"):
        lines.append("")
    if "gbnf_per_grammar" in report:
        engines = list(report["engines"])
        lines += [
            "## GBNF per grammar: mask mean / max (µs), compile (µs)",
            "",
            "| grammar | " + " | ".join(engines) + " |",
            "|---|" + "---|" * len(engines),
        ]
        for gid, per in report["gbnf_per_grammar"].items():
            cells = []
            for e in engines:
                r = per.get(e)
                if r is None or r["status"] not in ("pass", "reject", "not_final"):
                    cells.append(r["status"] if r else "—")
                else:
                    cells.append(
                        f"{_fmt(r['mask_mean'])} / {_fmt(r['mask_max'])}, c {_fmt(r['compile_us'])}"
                        + ("" if r["status"] == "pass" else f" ({r['status']})")
                    )
            lines.append(f"| {gid} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def ratios(suite: str, all_results: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """logitgate / best peer per metric, like for like.

    For each peer, both engines are aggregated over the cases that both of them pass; the ratio against that peer
    is ours / theirs on that common set. The "best peer" for a metric is the one giving the highest ratio (the
    hardest comparison for logitgate). Returns {metric: {"ratio", "peer", "common"}}.
    """
    if "logitgate" not in all_results:
        return {}
    ours_all = {r["id"]: r for r in all_results["logitgate"] if r["suite"] == suite}
    out: dict[str, Any] = {}
    for peer, rows in all_results.items():
        if peer == "logitgate":
            continue
        theirs = {r["id"]: r for r in rows if r["suite"] == suite and r["status"] == "pass"}
        common = [i for i, r in ours_all.items() if r["status"] == "pass" and i in theirs]
        if not common:
            continue
        ours_flat = aggregate([ours_all[i] for i in common])["flat"]
        theirs_flat = aggregate([theirs[i] for i in common])["flat"]
        for key in METRICS:
            o, t = ours_flat[key], theirs_flat[key]
            if math.isnan(o) or math.isnan(t) or t <= 0:
                continue
            r = o / t
            if key not in out or r > out[key]["ratio"]:
                out[key] = {"ratio": r, "peer": peer, "common": len(common)}
    return out


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default=",".join(ALL_ENGINES))
    ap.add_argument("--suite", default=",".join(ALL_SUITES))
    ap.add_argument("--tokenizer", default="smollm2", choices=("smollm2", "llama3", "gemma3"))
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--sample", type=int, default=100, help="MaskBench schemas (stratified; default 100)")
    g.add_argument("--all", action="store_true", help="every MaskBench schema with a valid instance")
    g.add_argument("--per-split", type=int, metavar="N", help="N MaskBench schemas from every split (seeded)")
    ap.add_argument("--out", default=None, help="result folder (default bench/results/<date>-<tokenizer>)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per case before the worker is killed")
    ap.add_argument("--load-timeout", type=float, default=600.0, help="seconds for tokenizer + engine setup")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--cases-only",
        action="store_true",
        help="write <out>/cases.json and stop (inputs for bench/native/export.py, no engine run)",
    )
    args = ap.parse_args(argv)

    engines = [e for e in args.engines.split(",") if e]
    suites = [s for s in args.suite.split(",") if s]
    for e in engines:
        if e not in ALL_ENGINES:
            ap.error(f"unknown engine {e}")
    for s in suites:
        if s not in ALL_SUITES:
            ap.error(f"unknown suite {s}")
    stamp = dt.datetime.now(dt.timezone.utc)
    out = Path(args.out or BENCH_DIR / "results" / f"{stamp:%Y%m%d-%H%M%S}-{args.tokenizer}")
    out.mkdir(parents=True, exist_ok=True)

    sys.stderr.write(f"building cases for {args.tokenizer} ...\n")
    tok = load_tokenizer(args.tokenizer)
    cases: list[dict[str, Any]] = []
    if "gbnf" in suites:
        cases += gbnf_cases(tok)
    if "regex" in suites:
        cases += regex_cases(tok)
    if "maskbench" in suites:
        cases += maskbench_cases(tok, None if args.all else args.sample, args.seed, args.per_split)
    cases_path = out / "cases.json"
    cases_path.write_text(json.dumps({"tokenizer": args.tokenizer, "cases": cases}))
    sys.stderr.write(f"{len(cases)} cases, {sum(len(t) for c in cases for t in c['instances'])} tokens\n")
    if args.cases_only:
        return 0

    report: dict[str, Any] = {
        "date": stamp.isoformat(timespec="seconds"),
        "command": " ".join(["python", "bench/run.py"] + (argv if argv is not None else sys.argv[1:])),
        "machine": machine_info(),
        "threads": THREAD_ENV,
        "tokenizer": args.tokenizer,
        "timeout_s": args.timeout,
        "engines": {},
        "suites": {},
    }
    all_results: dict[str, list[dict[str, Any]]] = {}
    for eng in engines:
        info, res = run_engine(eng, args.tokenizer, cases, cases_path, out, args.timeout, args.load_timeout)
        report["engines"][eng] = info
        all_results[eng] = res
        with (out / f"{eng}.jsonl").open("w") as fh:
            for r in res:
                fh.write(json.dumps(r) + "\n")
    for suite in suites:
        per = {}
        for eng in engines:
            rs = [r for r in all_results[eng] if r["suite"] == suite]
            if rs:
                per[eng] = aggregate(rs)
        report["suites"][suite] = per
    report["ratios"] = {s: ratios(s, all_results) for s in suites} if "logitgate" in engines else {}
    if "gbnf" in suites:
        table: dict[str, dict[str, Any]] = {}
        for eng in engines:
            for r in all_results[eng]:
                if r["suite"] != "gbnf":
                    continue
                m = summarize(r.get("mask_us", []))
                table.setdefault(r["id"], {})[eng] = {
                    "status": r["status"],
                    "mask_mean": m["mean"],
                    "mask_max": m["max"],
                    "compile_us": r.get("compile_us"),
                }
        report["gbnf_per_grammar"] = table
    (out / "summary.json").write_text(json.dumps(report, indent=1, default=str))
    md = markdown(report)
    (out / "summary.md").write_text(md + "\n")
    print(md)
    sys.stderr.write(f"results in {out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
