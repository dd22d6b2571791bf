"""Self-test of the harness (needs the benchmark dependencies): `pytest bench/test_harness.py`.

Checks the property the harness exists for: a case that hangs or kills its worker is recorded and the run goes on
with a fresh worker; that the statistics helpers compute nearest-rank percentiles; and that a mask-tail summary says
when the logitgate it measured is not the checkout's.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mask_tail
from common import percentile, summarize
from mask_tail import _code_label
from run import aggregate, markdown, ratios, run_engine


def test_percentiles_nearest_rank() -> None:
    vals = [float(x) for x in range(1, 101)]
    assert percentile(vals, 50) == 50.0
    assert percentile(vals, 99) == 99.0
    assert percentile(vals, 100) == 100.0
    s = summarize([3.0, 1.0, 2.0])
    assert (s["n"], s["mean"], s["p50"], s["max"]) == (3, 2.0, 2.0, 3.0)
    assert math.isnan(summarize([])["mean"])


def test_hang_and_crash_are_recorded_not_fatal(tmp_path: Path) -> None:
    sources = ["ok", "hang", "ok", "crash", "bad", "ok"]
    cases = [
        {"suite": "t", "id": f"c{i}", "kind": "regex", "source": s, "instances": [[1, 2, 3]]}
        for i, s in enumerate(sources)
    ]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"cases": cases}))
    info, results = run_engine("_fault", "smollm2", cases, path, tmp_path, timeout=3.0, load_timeout=120.0)
    assert [r["status"] for r in results] == ["pass", "timeout", "pass", "crash", "compile_error", "pass"]
    assert info["version"] == "0"
    assert all(len(r["mask_us"]) == 3 for r in results if r["status"] == "pass")  # 4 fills, first one separate
    assert all(r["first_mask_us"] is not None for r in results if r["status"] == "pass")


def test_cases_only_writes_the_inputs_and_runs_no_engine(tmp_path: Path) -> None:
    from run import main

    assert main(["--suite", "regex", "--engines", "logitgate", "--cases-only", "--out", str(tmp_path)]) == 0
    cases = json.loads((tmp_path / "cases.json").read_text())
    assert cases["tokenizer"] == "smollm2" and cases["cases"]
    assert all(c["suite"] == "regex" and c["instances"] for c in cases["cases"])
    assert not list(tmp_path.glob("*.jsonl")) and not (tmp_path / "summary.md").exists()


def test_mask_tail_names_a_package_imported_from_elsewhere() -> None:
    checkout = Path(__file__).resolve().parents[1]
    ours = {"commit": "abc1234", "package": str(checkout / "python" / "logitgate")}
    assert _code_label(ours) == "abc1234"
    apart = {"commit": "abc1234", "package": "/tmp/old/logitgate"}
    assert _code_label(apart) == "abc1234 (logitgate imported from /tmp/old/logitgate, not the checkout's)"
    assert _code_label({"commit": "abc1234"}) == "abc1234"  # summaries written before the field


def _tail_row(key: str, first: float, warm: float) -> dict[str, object]:
    def one(mx: float) -> dict[str, object]:
        return {
            "n": 2,
            "sum": mx + 1.0,
            "max": mx,
            "hist": [0] * 100,
            "slow": [mx],
            "class": "key start",
            "before": '{"',
        }

    return {"key": key, "status": "pass", "instances": 1, "walked": False, "first": one(first), "warm": one(warm)}


def test_mask_tail_recheck_keeps_the_smaller_of_two_runs() -> None:
    import argparse

    rows = [_tail_row("S/spike", 3700.0, 90.0), _tail_row("S/slow", 1500.0, 1400.0), _tail_row("S/fast", 50.0, 40.0)]
    mask_tail.merge_recheck(rows, [_tail_row("S/spike", 96.0, 80.0), _tail_row("S/slow", 1450.0, 1600.0)])
    assert rows[0]["recheck"] == {"first": 96.0, "warm": 80.0} and "recheck" not in rows[2]
    args = argparse.Namespace(tokenizer="t", recheck_over=1000.0)
    summary = mask_tail.summarize(args, rows, 1.0)
    first, warm = summary["stats"]["first"], summary["stats"]["warm"]
    assert (first["max_us"], first["max_us_rechecked"]) == (3700.0, 1450.0)  # the spike goes, the slow mask stays
    assert (warm["max_us"], warm["max_us_rechecked"]) == (1400.0, 1400.0)
    assert summary["rechecked"] == 2
    md = mask_tail.markdown(summary, rows, {})
    assert "slowest mask is 1.45 ms (first pass) and 1.40 ms (warm)" in md
    assert "| S/spike | 3.70 ms | 90 µs | 96 µs / 80 µs |" in md


def test_report_rows_fill_every_column_and_ratios_name_compile_p90() -> None:
    def result(i: int, compile_us: float, masks: list[float]) -> dict:
        return {
            "suite": "t",
            "id": f"c{i}",
            "status": "pass",
            "compile_us": compile_us,
            "first_mask_us": 1.0,
            "mask_us": masks,
            "rss_delta": 0,
        }

    runs = {
        "logitgate": [result(i, 100.0 * (i + 1), [1.0, 2.0]) for i in range(10)],
        "llguidance": [result(i, 50.0 * (i + 1), [4.0, 4.0]) for i in range(10)],
    }
    report = {
        "date": "d",
        "command": "c",
        "tokenizer": "t",
        "machine": {"cpu_model": "m", "nproc": 2},
        "engines": {e: {"version": "1"} for e in runs},
        "suites": {"t": {e: aggregate(rs) for e, rs in runs.items()}},
        "ratios": {"t": ratios("t", runs)},
    }
    table = [line for line in markdown(report).splitlines() if line.startswith("|")]
    assert "compile p90" in table[0]
    assert len({line.count("|") for line in table}) == 1, table
    assert report["ratios"]["t"]["compile_p90"] == {"ratio": 2.0, "peer": "llguidance", "common": 10}


def test_collapsed_positions_meets_a_member_key_and_counts_a_coarse_one() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "native"))
    from collapsed_positions import census

    def fill(pos: int, config: int, us: float, mask: str, nodes: int = 10) -> str:
        return (
            f"  t/a  pos {pos:3d} {us:8.2f} us nodes {nodes:7d} transitions    1 mask {mask} states 00 config {config}"
            " keys 0,0,0,0  ..."
        )

    log = [
        "  t/a  pos   0 config 1: 2 new  ...",
        "    c1: 5(ob1_p0_0)<9(s0) 7(keyc0)<3(ob1_p0_0)<9(s0)",
        "    c2: 8(string)<4(ob1_p0_0)<9(s0)",
        fill(0, 1, 3.0, "aa"),
        # Another member's key start: its position rule's states differ, its mask does not.
        "  t/a  pos   1 config 3: 1 new  ...",
        "    c3: 6(ob2_p1_0)<9(s0) 7(keyc0)<3(ob2_p1_0)<9(s0)",
        fill(1, 3, 4.0, "aa"),
        # Same collapsed key, another mask: the key is too coarse there.
        "  t/a  pos   2 config 4: 1 new  ...",
        "    c4: 11(ob5_q0)<9(s0) 7(keyc0)<12(ob5_q0)<9(s0)",
        fill(2, 4, 5.0, "bb"),
        fill(3, 4, 0.2, "bb", nodes=0),  # a copy: no walk
    ]
    c = census(log)
    assert (c.built, c.holding) == (4, 4)
    assert c.walk_us == 12.0 and c.met == 2 and c.met_us == 9.0
    assert c.spared_us == 4.0 and c.conflicts == 1
