"""Must-show 1, offline: one `LLM.generate` batch of eight requests (JSON Schema twice, regex,
choice, GBNF, three unconstrained) through the logitgate processor; every constrained output is
valid and ends by its grammar, and the unconstrained rows are token for token those of a run
without the processor (same seeds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_cases import batch_cases, check_output
from vllm_support import run_script

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1800)]  # vLLM starts in minutes here


@pytest.fixture(scope="module")
def runs(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    out = tmp_path_factory.mktemp("offline")
    with_plugin, without = out / "plugin.json", out / "baseline.json"
    run_script("offline_batch.py", str(model_dir), str(with_plugin), timeout=900)
    run_script("offline_batch.py", str(model_dir), str(without), "--no-plugin", timeout=900)
    return json.loads(with_plugin.read_text()), json.loads(without.read_text())


def test_processor_loaded_through_entry_point(runs: tuple[dict, dict]) -> None:
    plugin, baseline = runs
    assert "LogitgateLogitsProcessor" in plugin["processors"]
    assert "LogitgateLogitsProcessor" not in baseline["processors"]
    assert baseline["processors"], "the baseline run must still list vLLM's own processors"


def test_constrained_rows_valid(runs: tuple[dict, dict]) -> None:
    plugin, _ = runs
    for case, row in zip(batch_cases(), plugin["rows"], strict=True):
        if case["spec"] is None:
            continue
        assert row["finish_reason"] == "stop", (case["spec"], row)
        check_output(case["spec"], row["text"])


def test_unconstrained_rows_unchanged(runs: tuple[dict, dict]) -> None:
    plugin, baseline = runs
    free = [i for i, c in enumerate(batch_cases()) if c["spec"] is None]
    assert len(free) == 3
    for i in free:
        assert plugin["rows"][i]["token_ids"] == baseline["rows"][i]["token_ids"], i
        assert plugin["rows"][i]["token_ids"], "an unconstrained row generated nothing"


def test_constraints_took_effect(runs: tuple[dict, dict]) -> None:
    """The baseline's outputs for the constrained prompts are not all valid: the processor,
    not the prompts, made them valid."""
    _, baseline = runs
    invalid = 0
    for case, row in zip(batch_cases(), baseline["rows"], strict=True):
        if case["spec"] is None:
            continue
        try:
            check_output(case["spec"], row["text"])
        except (AssertionError, ValueError):
            invalid += 1
    assert invalid >= 3, baseline["rows"]
