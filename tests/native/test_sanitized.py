"""The sanitized subset of the default run (docs/sanitizers.md): the C++ core built with
AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer) under a native driver on
tests/native/export_sanitized.py's cases, and under tests/native/threads.cc (`make tsan`'s
64-thread, 8-compiling-thread and batch-fill cases) with ThreadSanitizer and with ASan + UBSan.
Python stays out of the sanitized processes: its interpreter is not instrumented. The binaries
are make targets with one object per source under build/, so a second run rebuilds only what
changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from export_sanitized import export  # noqa: E402

# A fresh build under load takes minutes; the runs themselves take seconds to a minute.
BUILD_TIMEOUT_S = 1800


def _build(target: str) -> Path:
    r = subprocess.run(["make", "-s", "-j2", target], cwd=REPO, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert r.returncode == 0, f"make {target} failed:\n{r.stdout}\n{r.stderr}"
    return REPO / target


def _run(cmd: list[str], env: dict[str, str]) -> str:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env={**os.environ, **env})
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Sanitizer" not in out and "runtime error" not in out, out
    return out


@pytest.mark.timeout(BUILD_TIMEOUT_S * 2)
def test_core_under_address_and_ub_sanitizers(tmp_path: Path, smollm2_vocab: Any) -> None:
    binary = _build("build/sanitize/sanitized")
    n = export(smollm2_vocab, tmp_path)
    out = _run(
        [str(binary), str(tmp_path)],
        {"ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1"},
    )
    cases = re.search(r"cases: (\d+) \((\d+) refused\), walks (\d+), masks (\d+), failures (\d+)", out)
    assert cases, out
    assert int(cases[1]) == n and int(cases[2]) >= 10 and int(cases[4]) > 1000 and int(cases[5]) == 0, out
    mutants = re.search(r"mutants: (\d+), (\d+) compiled, failures 0", out)
    assert mutants and int(mutants[2]) > 0, out
    assert re.search(r"interrupted compiles of \S+: failures 0", out), out
    assert "hash index: failures 0" in out, out


THREAD_BUILDS = {
    "tsan": ("build/tsan/threads", {"TSAN_OPTIONS": "halt_on_error=1"}),
    "asan": (
        "build/sanitize/threads",
        {"ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1"},
    ),
}


@pytest.mark.timeout(BUILD_TIMEOUT_S * 2)
@pytest.mark.parametrize("build", sorted(THREAD_BUILDS))
def test_threads_under_sanitizers(tmp_path: Path, build: str) -> None:
    """64 matchers on 64 threads, 8 compiling threads, a batch fill: under ThreadSanitizer, and
    under AddressSanitizer + UndefinedBehaviorSanitizer."""
    target, env = THREAD_BUILDS[build]
    binary = _build(target)
    r = subprocess.run(
        [sys.executable, str(REPO / "tests/native/export_threads.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    out = _run([str(binary), str(tmp_path)], env)
    for phase in ("64 threads on one grammar", "8 compiling threads", r"batch fill of \d+ matchers"):
        assert re.search(phase + r": failures 0", out), out
