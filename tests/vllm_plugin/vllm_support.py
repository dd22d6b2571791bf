"""How the vLLM tests start vLLM: its environment on this CPU and child processes for its scripts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]

# No hub access, the CPU platform, a 1 GiB KV cache.
VLLM_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def vllm_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(VLLM_ENV)
    env.update(extra)
    return env


def run_script(name: str, *args: str, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    """Runs the script ``name`` (in this folder, or a path) with this interpreter; its output is
    shown when it fails."""
    proc = subprocess.run(
        [sys.executable, str(HERE / name), *args],
        env=vllm_env(**env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{name} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-8000:]}"
        )
    return proc
