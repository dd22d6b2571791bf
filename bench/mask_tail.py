#!/usr/bin/env python
"""The mask tail on the whole JSONSchemaBench corpus, logitgate only (issue 32).

    python bench/mask_tail.py --tokenizer llama3                       # every schema (~10 min of CPU)
    python bench/mask_tail.py --tokenizer smollm2 --before bench/results/<earlier run>   # before/after columns
    python bench/mask_tail.py --tokenizer llama3 --only Github_trivial/o78117 --verbose  # one schema, every mask

Every schema of `../shared/corpora/jsonschemabench` is compiled and its masks are filled along every valid
instance (`json.dumps(data)`, tokenized), one fresh matcher per instance, as bench/run.py does; a schema with
no valid instance gets `--walks` seeded random walks instead (uniform over the allowed ids, EOS included, at
most `--walk-tokens` tokens), replayed in the second pass. Two passes per schema:

- first: a fresh compile; its masks are the grammar's first visits (later instances reuse what earlier
  ones memoized). Vocabulary-level precomputation (loop splits, alphabet masks) is shared with the schemas
  before it, as in a server or the harness, and starts from `Compiler.warm_up()` as a server's does
  (`--cold`: without it).
- warm: a second fresh compile of the same schema, the same token sequences: the vocabulary's caches and
  the CPU caches are warm, the grammar's own store is not. What a repeated new request pays.

Per schema: the max of each pass and where it was (instance, position, the text before it, its JSON position
class: key start, string start, string body, other); over the corpus: mask count, mean, p99, p99.9 and max of
all masks of each pass. Writes `summary.md` (the worst 50 schemas by their max, with the position and a cause
class, and the `--before` run's numbers beside them) and `summary.json` (every schema's row) into `--out`.
A whole-corpus run is committed with `summary.json.gz` (`gzip -n`) instead, which `--before` reads too.

Each schema runs in a worker process with a per-schema timeout (a hang or crash costs one schema). Single
thread. The first mask of each grammar is included (unlike bench/run.py's mask statistics): this is the tail.
Masks are timed in the thread's CPU time (a loaded machine's preemption would otherwise land in the max); the
slowest wall time per schema is kept too (`wall_max`). Rows are written to `rows.jsonl` as they come, so a run
cut short can still be summarized (`--summarize`).

The schemas whose slowest mask took `--recheck-over` µs or more (1 ms by default) then run again, alone in a
fresh worker (`rows-recheck.jsonl`): this VM now and then charges a thread CPU time for a pause that is not its
work (bench/native/cpu_time_spikes.cc measures how often), and a mask it lands in is slow in one run only.
The summary gives each pass's corpus maximum as measured and with every rechecked schema's smaller maximum of
its two runs.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import gzip
import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import SHARED, THREAD_ENV, load_tokenizer, machine_info, pin_threads

pin_threads()

CORPUS = SHARED / "corpora/jsonschemabench"
WORST = 50
HIST_US = 100  # masks under this many µs are counted per µs, the others kept one by one


def _summary_path(folder: Path) -> Path | None:
    """A run's summary.json, or the summary.json.gz a whole-corpus run is committed as (None: neither)."""
    for name in ("summary.json", "summary.json.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _read_summary(path: Path) -> dict[str, Any]:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    return json.loads(path.read_text(encoding="utf-8"))


def _histogram(times: list[float]) -> list[int]:
    hist = [0] * HIST_US
    for t in times:
        if t < HIST_US:
            hist[int(t)] += 1
    return hist


@functools.cache
def corpus_keys() -> list[str]:
    """Every schema of the corpus as "split/id", splits in byte order, ids in file order."""
    keys = []
    for split_dir in sorted(p for p in CORPUS.iterdir() if p.is_dir()):
        with (split_dir / "schemas.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                keys.append(f"{split_dir.name}/{json.loads(line)['id']}")
    return keys


_SPLIT_CACHE: dict[str, dict[str, tuple[str, str]]] = {}


def load_schema(key: str) -> tuple[str, list[Any]]:
    """The schema's JSON text and its valid instances (one split's lines kept: keys come split by split)."""
    split, sid = key.split("/", 1)
    if split not in _SPLIT_CACHE:
        _SPLIT_CACHE.clear()
        lines: dict[str, tuple[str, str]] = {}
        with (
            (CORPUS / split / "schemas.jsonl").open(encoding="utf-8") as fs,
            (CORPUS / split / "tests.jsonl").open(encoding="utf-8") as ft,
        ):
            for ls, lt in zip(fs, ft, strict=True):
                lines[json.loads(ls)["id"]] = (ls, lt)
        _SPLIT_CACHE[split] = lines
    ls, lt = _SPLIT_CACHE[split][sid]
    source = json.dumps(json.loads(ls)["schema"])
    valid = [t["data"] for t in json.loads(lt)["tests"] if t.get("valid")]
    return source, valid


def position_class(prefix: str) -> str:
    """Where in a JSON document `prefix` ends: key start, key body, string start, string body, or value."""
    stack: list[str] = []
    in_string = False
    is_key = False
    escape = False
    string_len = 0
    expect_key = False
    for ch in prefix:
        if in_string:
            string_len += 1
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
                expect_key = False
            continue
        if ch == '"':
            in_string, string_len = True, 0
            is_key = bool(stack) and stack[-1] == "{" and expect_key
        elif ch in "{[":
            stack.append(ch)
            expect_key = ch == "{"
        elif ch in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif ch == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        elif ch == ":":
            expect_key = False
    if in_string:
        kind = "key" if is_key else "string"
        return f"{kind} {'start' if string_len == 0 else 'body'}"
    if stack and stack[-1] == "{" and expect_key:
        return "before key"
    return "value"


# ------------------------------------------------------------------------------------------- worker


def _emit(out: Any, obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()


class _Runner:
    def __init__(self, tokname: str, args: argparse.Namespace) -> None:
        import numpy as np

        import logitgate as lg

        self.lg, self.np, self.args = lg, np, args
        self.tok = load_tokenizer(tokname)
        self.vocab = lg.Vocabulary.from_huggingface(self.tok)
        self.bits = lg.allocate_mask(self.vocab, batch=1)
        if not args.cold:
            lg.Compiler(self.vocab).warm_up()  # as a server does at startup
        self.width = self.vocab.width if hasattr(self.vocab, "width") else len(self.tok)
        self.wall: list[float] = []
        self.walked = False
        eos = self.tok.eos_token_id
        self.eos = [eos] if eos is not None else []

    def allowed(self, tid: int) -> bool:
        return bool(int(self.bits[0, tid >> 5]) >> (tid & 31) & 1)

    def compile(self, source: str) -> Any:
        return self.lg.Compiler(self.vocab).compile_json_schema(source)

    def walk(
        self, compiled: Any, seq: list[int] | None, rng: random.Random | None
    ) -> tuple[list[float], list[int], str]:
        """Fills every mask along `seq` (or a random walk when `seq` is None): times (µs), tokens, status."""
        np = self.np
        m = compiled.matcher()
        times: list[float] = []
        wall = self.wall
        tokens: list[int] = [] if seq is None else seq
        pos = 0
        while True:
            w0, t0 = time.perf_counter_ns(), time.thread_time_ns()
            m.fill_mask(self.bits, row=0)
            t1, w1 = time.thread_time_ns(), time.perf_counter_ns()
            times.append((t1 - t0) / 1e3)
            wall.append((w1 - w0) / 1e3)
            if seq is not None:
                if pos == len(seq):
                    # (A replayed random walk may have stopped at its token cap, short of an end.)
                    final = self.walked or any(self.allowed(e) for e in self.eos)
                    return times, tokens, "pass" if final else "not_final"
                tid = seq[pos]
            else:
                assert rng is not None
                ids = np.flatnonzero(np.unpackbits(self.bits[0].view(np.uint8), bitorder="little"))
                if len(ids) == 0:
                    return times, tokens, "stuck"
                tid = int(ids[rng.randrange(len(ids))])
                if tid in self.eos or len(tokens) >= self.args.walk_tokens:
                    return times, tokens, "pass"
                tokens.append(tid)
            if not self.allowed(tid) or not m.accept(tid):
                return times, tokens, f"reject at {pos}"
            pos += 1

    def run(self, key: str) -> dict[str, Any]:
        source, valid = load_schema(key)
        res: dict[str, Any] = {"key": key, "status": "pass", "instances": len(valid), "walked": not valid}
        self.walked = not valid
        try:
            t0 = time.perf_counter_ns()
            compiled = self.compile(source)
            res["compile_us"] = (time.perf_counter_ns() - t0) / 1e3
        except Exception as exc:  # typed logitgate errors: a status, not a crash
            res.update(status="compile_error", detail=f"{type(exc).__name__}: {exc}"[:200])
            return res
        seqs: list[list[int] | None] = (
            [list(self.tok.encode(json.dumps(d), add_special_tokens=False)) for d in valid]
            if valid
            else [None] * self.args.walks
        )
        rng = random.Random(f"{self.args.seed}/{key}")
        for name in ("first", "warm"):
            if name == "warm":
                del compiled
                compiled = self.compile(source)
            all_times: list[float] = []
            self.wall = []
            worst = (-1.0, 0, 0)
            for k, seq in enumerate(seqs):
                times, tokens, status = self.walk(compiled, seq, rng)
                seqs[k] = tokens
                if status != "pass":
                    res["status"] = status.split()[0]
                    res["detail"] = f"instance {k}: {status}"
                for p, t in enumerate(times):
                    if t > worst[0]:
                        worst = (t, k, p)
                all_times.extend(times)
            t, k, p = worst
            prefix = self.tok.decode(seqs[k][:p]) if seqs[k] is not None else ""  # type: ignore[index]
            res[name] = {
                "n": len(all_times),
                "sum": sum(all_times),
                "max": t,
                "wall_max": max(self.wall, default=0.0),
                "at": [k, p],
                "class": position_class(prefix),
                "before": prefix[-48:],
                "hist": _histogram(all_times),
                "slow": sorted((round(x, 1) for x in all_times if x >= HIST_US), reverse=True)[:1000],
            }
            if self.args.verbose:
                res[name]["times"] = all_times
            if res["status"] != "pass":
                break
        return res


def worker_main(args: argparse.Namespace) -> int:
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    keys = _selected_keys(args)
    runner = _Runner(args.tokenizer, args)
    # The tokenizer's objects are most of the heap: out of the collector's sight, a collection
    # before each schema costs microseconds instead of a fifth of a second.
    gc.collect()
    gc.freeze()
    _emit(out, {"ev": "ready"})
    for i in range(args.start, len(keys)):
        _emit(out, {"ev": "start", "i": i})
        gc.collect()
        gc.disable()
        try:
            res = runner.run(keys[i])
        except Exception as exc:
            res = {"key": keys[i], "status": "error", "detail": f"{type(exc).__name__}: {exc}"[:200]}
        finally:
            gc.enable()
        res.update(ev="result", i=i)
        _emit(out, res)
    _emit(out, {"ev": "done"})
    return 0


# ------------------------------------------------------------------------------------------- parent


def _in_only(key: str, wanted: str) -> bool:
    """Whether `key` ("split/id") is the --only entry `wanted`: that key, or a key of that split."""
    return key == wanted or key.startswith(wanted.rstrip("/") + "/")


def _selected_keys(args: argparse.Namespace) -> list[str]:
    keys = corpus_keys()
    if args.only:
        wanted = [k for k in args.only.split(",") if k]
        keys = [k for k in keys if any(_in_only(k, w) for w in wanted)]
    if args.stride > 1:
        keys = keys[:: args.stride]
    return keys


def run_all(args: argparse.Namespace, rows_name: str = "rows.jsonl") -> list[dict[str, Any]]:
    from run import _Lines

    keys = _selected_keys(args)
    n = len(keys)
    results: list[dict[str, Any] | None] = [None] * n
    out = Path(args.out)
    log = (out / "worker.log").open("ab")
    rows_file = (out / rows_name).open("w")  # as they come: a run cut short keeps what it measured
    start, t_begin = 0, time.monotonic()
    while start < n:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--start", str(start), *_passthrough(args)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=dict(os.environ, **THREAD_ENV))
        reader = _Lines(proc)
        current: int | None = None
        deadline = time.monotonic() + 600
        failure = ""
        while True:
            msg = reader.next(deadline)
            if isinstance(msg, str):
                failure = msg
                break
            ev = msg.get("ev")
            if ev == "start":
                current = int(msg["i"])
            elif ev == "result":
                results[int(msg["i"])] = msg
                rows_file.write(json.dumps(msg) + "\n")
                rows_file.flush()
                current = None
                done = sum(r is not None for r in results)
                if done % 100 == 0 or done == n:
                    sys.stderr.write(f"\r[mask_tail {args.tokenizer}] {done}/{n} {time.monotonic() - t_begin:.0f}s  ")
                    sys.stderr.flush()
            elif ev == "done":
                break
            deadline = time.monotonic() + args.timeout
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.sel.close()
        if not failure:
            break
        if current is None:
            sys.stderr.write(f"\nworker {failure} outside a schema (rc={proc.returncode}); see worker.log\n")
            break
        status = "timeout" if failure == "timeout" else "crash"
        results[current] = {"key": keys[current], "status": status, "detail": f"rc={proc.returncode}"}
        start = current + 1
    log.close()
    rows_file.close()
    sys.stderr.write("\n")
    return [
        r if r is not None else {"key": keys[i], "status": "error", "detail": "no result"}
        for i, r in enumerate(results)
    ]


RECHECK_ROWS = "rows-recheck.jsonl"


def _slowest(row: dict[str, Any]) -> float:
    return max((row[name]["max"] for name in ("first", "warm") if name in row), default=0.0)


def recheck(args: argparse.Namespace, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The schemas whose slowest mask took at least --recheck-over µs, run again in a fresh
    worker (after the warm-up only, as a server that meets them first): a mask slow in one run
    and not in the other was slowed by the machine, not by its work."""
    slow = [r["key"] for r in rows if _slowest(r) >= args.recheck_over]
    if not slow:
        return []
    sys.stderr.write(f"[mask_tail {args.tokenizer}] rechecking {len(slow)} schemas alone\n")
    again = argparse.Namespace(**{**vars(args), "only": ",".join(slow), "stride": 1})
    return run_all(again, RECHECK_ROWS)


def merge_recheck(rows: list[dict[str, Any]], again: list[dict[str, Any]]) -> None:
    """Puts each rechecked schema's pass maxima into its row as "recheck"."""
    by_key = {r["key"]: r for r in again}
    for r in rows:
        a = by_key.get(r["key"])
        if a is not None:
            r["recheck"] = {name: a[name]["max"] for name in ("first", "warm") if name in a}


def _settled_max(row: dict[str, Any], name: str) -> float:
    """A pass's slowest mask, the smaller of the two runs where the schema was rechecked."""
    ours = row[name]["max"]
    again = row.get("recheck", {}).get(name)
    return ours if again is None else min(ours, again)


def _passthrough(args: argparse.Namespace) -> list[str]:
    out = ["--tokenizer", args.tokenizer, "--walks", str(args.walks), "--walk-tokens", str(args.walk_tokens)]
    out += ["--seed", str(args.seed), "--stride", str(args.stride)]
    if args.only:
        out += ["--only", args.only]
    if args.verbose:
        out.append("--verbose")
    return out


def _fmt(us: float | None) -> str:
    if us is None:
        return "—"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def cause(row: dict[str, Any]) -> str:
    """A cause class from where the worst mask was and whether a second compile pays it again."""
    first, warm = row.get("first", {}), row.get("warm", {})
    where = first.get("class", "?")
    if not warm:
        return where
    if warm.get("max", 0) < first.get("max", 0) / 3:
        return f"{where}; first use (vocabulary-level work, not repeated)"
    return f"{where}; every compile (per-grammar work)"


def summarize(args: argparse.Namespace, rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for name in ("first", "warm"):
        n = sum(r[name]["n"] for r in rows if name in r)
        total = sum(r[name]["sum"] for r in rows if name in r)
        hist = [0] * HIST_US
        for r in rows:
            if name in r:
                hist = [a + b for a, b in zip(hist, r[name]["hist"], strict=True)]
        slow = sorted(x for r in rows if name in r for x in r[name]["slow"])

        def rank_value(q: float, hist: list[int] = hist, slow: list[float] = slow, n: int = n) -> float | None:
            """Nearest-rank percentile: exact over HIST_US, the bucket's upper bound under it."""
            if n == 0:
                return None
            rank = max(1, -(-int(q * n) // 100))
            seen = 0
            for us, count in enumerate(hist):
                seen += count
                if seen >= rank:
                    return float(us + 1)
            k = rank - seen - 1
            return slow[min(k, len(slow) - 1)] if slow else None

        stats[name] = {
            "masks": n,
            "mean_us": total / n if n else None,
            "p99_us": rank_value(99.0),
            "p99.9_us": rank_value(99.9),
            "max_us": max((r[name]["max"] for r in rows if name in r), default=None),
            "max_us_rechecked": max((_settled_max(r, name) for r in rows if name in r), default=None),
            "over_1ms": sum(1 for r in rows if name in r for x in r[name]["slow"] if x >= 1000),
            "over_200us": sum(1 for r in rows if name in r for x in r[name]["slow"] if x >= 200),
        }
    statuses: dict[str, int] = {}
    for r in rows:
        status = r["status"].split()[0]
        if status == "not_final" and r.get("walked"):
            status = "pass"  # (rows of earlier runs: a replayed walk cut at its token cap)
        statuses[status] = statuses.get(status, 0) + 1
    return {
        "tokenizer": args.tokenizer,
        "schemas": len(rows),
        "statuses": statuses,
        "walked": sum(1 for r in rows if r.get("walked") and "first" in r),
        "recheck_over_us": args.recheck_over,
        "rechecked": sum(1 for r in rows if "recheck" in r),
        "stats": stats,
        "wall_s": wall_s,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "command": " ".join(sys.argv),
        "commit": _git_commit(),
        "package": _package_dir(),
    }


def _package_dir() -> str:
    """Where the logitgate that the workers import lives (the checkout's, or one installed apart)."""
    spec = importlib.util.find_spec("logitgate")
    return str(Path(spec.origin).parent) if spec and spec.origin else ""


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def _code_label(summary: dict[str, Any]) -> str:
    """The checkout's commit, and the package imported when it is not the checkout's."""
    package = summary.get("package", "")
    checkout = str(Path(__file__).resolve().parents[1])
    if not package or package.startswith(checkout + os.sep):
        return str(summary["commit"])
    return f"{summary['commit']} (logitgate imported from {package}, not the checkout's)"


def markdown(summary: dict[str, Any], rows: list[dict[str, Any]], before: dict[str, dict[str, Any]]) -> str:
    lines = [
        f"# Mask tail, whole corpus, {summary['tokenizer']}",
        "",
        f"`{summary['command']}` on {_code_label(summary)}, {summary['date']}, {summary['wall_s']:.0f} s wall; "
        f"{summary['schemas']} schemas ({', '.join(f'{k} {v}' for k, v in sorted(summary['statuses'].items()))}; "
        f"{summary['walked']} of them without a valid instance, walked at random).",
        "",
        "| pass | masks | mean | p99 | p99.9 | max | masks ≥ 200 µs | masks ≥ 1 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in ("first", "warm"):
        s = summary["stats"][name]
        mean = f"{s['mean_us']:.1f} µs" if s["mean_us"] is not None else "—"
        p99, p999 = _fmt(s["p99_us"]), _fmt(s["p99.9_us"])
        lines.append(
            f"| {name} | {s['masks']} | {mean} | {p99} | {p999} | {_fmt(s['max_us'])} | {s['over_200us']} | "
            f"{s['over_1ms']} |"
        )
    if summary.get("rechecked"):
        first, warm = (_fmt(summary["stats"][name]["max_us_rechecked"]) for name in ("first", "warm"))
        lines += [
            "",
            f"Rechecked: the {summary['rechecked']} schemas with a mask of {_fmt(summary['recheck_over_us'])} or "
            "more ran again, alone in a fresh worker; taking each one's smaller maximum of the two runs, the "
            f"slowest mask is {first} (first pass) and {warm} (warm).",
        ]
    lines += [
        "",
        f"The {WORST} schemas with the slowest mask (first pass; warm: a second fresh compile). `recheck`: the "
        "same schema run again alone (where it was slow enough). `before`: the same schema in the `--before` run. "
        "Where: the JSON position of the slowest first-pass mask, and the text before it.",
        "",
        "| # | schema | first max | warm max | recheck first / warm | before first / warm | where | text before "
        "| cause |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ranked = sorted((r for r in rows if "first" in r), key=lambda r: -_slowest(r))
    for i, r in enumerate(ranked[:WORST], 1):
        b = before.get(r["key"])
        bcol = (
            f"{_fmt(b['first']['max'])} / {_fmt(b['warm']['max'] if 'warm' in b else None)}"
            if b is not None and "first" in b
            else "—"
        )
        text = r["first"]["before"][-32:].replace("|", "\\|").replace("`", "'").replace("\n", "\\n")
        again = r.get("recheck")
        rcol = f"{_fmt(again.get('first'))} / {_fmt(again.get('warm'))}" if again else "—"
        lines.append(
            f"| {i} | {r['key']} | {_fmt(r['first']['max'])} | {_fmt(r['warm']['max'] if 'warm' in r else None)} | "
            f"{rcol} | {bcol} | {r['first']['class']} | `{text}` | {cause(r)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default="smollm2", help="smollm2, llama3 or gemma3")
    ap.add_argument("--out", help="result folder (default bench/results/<UTC date>-<tokenizer>-mask-tail)")
    ap.add_argument("--only", default="", help="comma list of splits or split/id keys")
    ap.add_argument("--stride", type=int, default=1, help="every n-th schema only (quick looks)")
    ap.add_argument("--walks", type=int, default=2, help="random walks for a schema without a valid instance")
    ap.add_argument("--walk-tokens", type=int, default=64, help="tokens per random walk at most")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cold", action="store_true", help="no Compiler.warm_up() before the first schema")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per schema")
    ap.add_argument("--before", help="an earlier run's folder: its numbers go beside this run's worst schemas")
    ap.add_argument(
        "--recheck-over",
        type=float,
        default=1000.0,
        metavar="US",
        help="run the schemas with a mask of at least US µs again, alone (0: none; default 1000)",
    )
    ap.add_argument("--verbose", action="store_true", help="print every mask time of each schema (with --only)")
    ap.add_argument("--summarize", action="store_true", help="only write the summary of --out's rows.jsonl")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker_main(args)
    # Mistakes that would otherwise show only after the run (or as an empty table): said first.
    before_path = _summary_path(Path(args.before)) if args.before else None
    if args.before and before_path is None:
        ap.error(f"--before {args.before}: no summary.json or summary.json.gz there")
    if args.only and not args.summarize:
        for w in (k for k in args.only.split(",") if k):
            if not any(_in_only(k, w) for k in corpus_keys()):
                ap.error(f"--only {w}: no such split or schema in {CORPUS} (keys look like Github_trivial/o78117)")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    out = Path(args.out or f"bench/results/{stamp}-{args.tokenizer}-mask-tail")
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    t0 = time.monotonic()
    if args.summarize:
        rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines() if line.strip()]
        if (out / RECHECK_ROWS).is_file():
            text = (out / RECHECK_ROWS).read_text()
            merge_recheck(rows, [json.loads(line) for line in text.splitlines() if line.strip()])
    else:
        rows = run_all(args)
        if args.recheck_over > 0:
            merge_recheck(rows, recheck(args, rows))
    summary = summarize(args, rows, time.monotonic() - t0)
    before: dict[str, dict[str, Any]] = {}
    if args.before:
        assert before_path is not None
        for r in _read_summary(before_path)["rows"]:
            before[r["key"]] = r
    if args.verbose:
        for r in rows:
            for name in ("first", "warm"):
                if name in r:
                    times = " ".join(f"{t:.0f}" for t in r[name].pop("times"))
                    print(f"{r['key']} {name}: {times}")
    md = markdown(summary, rows, before)
    (out / "summary.md").write_text(md)
    for r in rows:  # (the per-mask data stays in rows.jsonl)
        r.pop("ev", None)
        r.pop("i", None)
        for name in ("first", "warm"):
            if name in r:
                r[name].pop("hist", None)
                r[name]["slow"] = r[name]["slow"][:8]
    (out / "summary.json").write_text(json.dumps({**summary, "rows": rows}, separators=(",", ":")) + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
