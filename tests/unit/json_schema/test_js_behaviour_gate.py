"""The frontend's behaviour gate in the default run: bench/lowering_digests.py's committed digests.

Every corpus lowering in bench/lowering_digests/ (1,471 schemas, six option sets) must come out
the same, in a process whose string hash seed is not the one that wrote them: a lowering that
changes without its digests being regenerated (`make lowering-digests`, with the reason in the
commit) fails here, and so does one that depends on set order.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_lowerings_match_the_committed_digests_under_another_hash_seed() -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "lowering_digests.py"), "--check"],
        cwd=REPO,
        env={**os.environ, "PYTHONHASHSEED": "5"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.stdout.rstrip().endswith("schemas)") and "identical" in run.stdout.splitlines()[-1]
