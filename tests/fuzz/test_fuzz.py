"""The fuzz harness cannot rot: every target runs its seeds and a few hundred mutations, every
saved finding is replayed, and the atheris driver runs a few hundred inputs end to end.

The long runs are `make fuzz` (tests/fuzz/campaign.py); docs/hardening.md has their counts.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from tests.fuzz.targets import TARGETS, FuzzContext

ROOT = Path(__file__).resolve().parents[2]
REGRESSIONS = Path(__file__).resolve().parent / "regressions"
SMOKE_SEEDS = 40
SMOKE_MUTATIONS = 200

_CTX: list[FuzzContext] = []


def _ctx() -> FuzzContext:
    if not _CTX:
        _CTX.append(FuzzContext.create())
    return _CTX[0]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        pos = rng.randint(0, len(b))
        if op == 0 and b:
            del b[min(pos, len(b) - 1)]
        elif op == 1:
            b[pos:pos] = bytes([rng.randrange(256)])
        elif op == 2 and b:
            b[min(pos, len(b) - 1)] = rng.randrange(256)
        else:
            b[pos:pos] = bytes([rng.choice(b"()[]{}|*+?\\\"':,.-0123456789abc ")])
    return bytes(b)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_target_smoke(name: str) -> None:
    """Seeds and mutations: only typed errors may escape (the targets swallow those), and a
    smoke run compiles something, so the target is not rejecting everything."""
    target = TARGETS[name]
    ctx = _ctx()
    seeds = target.seeds()
    assert seeds, f"{name}: no seeds"
    rng = random.Random(name)
    picked = seeds if len(seeds) <= SMOKE_SEEDS else rng.sample(seeds, SMOKE_SEEDS)
    ctx.outcomes.clear()
    for data in picked:
        target.run(ctx, data)
    for _ in range(SMOKE_MUTATIONS):
        target.run(ctx, _mutate(rng, rng.choice(picked)))
    assert ctx.outcomes["compiled"] + ctx.outcomes["mask-grammars"] > 0, dict(ctx.outcomes)


def _regressions() -> list[Path]:
    return sorted(p for d in REGRESSIONS.iterdir() if d.is_dir() and d.name in TARGETS for p in d.iterdir())


@pytest.mark.parametrize("path", _regressions(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_regression_replays(path: Path) -> None:
    """Each input a fuzz run found (a crash, a hang, an untyped error, a mask disagreement) now
    passes its target: tests/fuzz/regressions/TARGET/NAME holds the raw bytes."""
    TARGETS[path.parent.name].run(_ctx(), path.read_bytes())


def test_driver_runs_under_atheris(tmp_path: Path) -> None:
    """The libFuzzer driver end to end, in a fresh directory (libFuzzer counts the seeds among the runs)."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.run", "gbnf", "-runs=300", "-timeout=20", "-seed=1"],
        cwd=ROOT,
        env={**os.environ, "FUZZ_OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "stat::number_of_executed_units: 300" in proc.stderr, proc.stderr[-3000:]
    assert json.loads((tmp_path / "outcomes-gbnf.json").read_text(encoding="utf-8"))["inputs"] == 300


def test_campaign_workers_share_one_target(tmp_path: Path) -> None:
    """Two workers of one target: each runs its half, the summary sums their inputs and outcomes."""
    args = ["--runs", "400", "--timeout", "20", "--workers", "2", "--targets", "gbnf"]
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.campaign", *args],
        cwd=ROOT,
        env={**os.environ, "FUZZ_OUT": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [row] = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert (row["target"], row["inputs"], row["workers"], row["findings"]) == ("gbnf", 400, 2, [])
    shares = [json.loads((tmp_path / f"outcomes-gbnf-w{i}.json").read_text(encoding="utf-8")) for i in (0, 1)]
    assert [s["inputs"] for s in shares] == [200, 200]
    assert row["outcomes"]["compiled"] == sum(s["outcomes"].get("compiled", 0) for s in shares) > 0
