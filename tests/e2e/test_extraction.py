"""End-to-end extraction through the CLI (``logitgate generate --schema F TEXT``) with its
default settings on the embedded SmolLM2-135M: every output is a schema-valid document, and the
budget closes few of them, always with its warning. Field accuracy is measured, not asserted
(a 135M model's reading); tasks.py's ``main`` prints it (docs/generation.md).

The default run takes five short tasks; the whole suite is slow (seconds per task on a quiet CPU).
"""

from __future__ import annotations

from typing import Any

import pytest

from .tasks import QUICK, TASKS, Outcome, run_task

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def cli_model() -> Any:
    import logitgate.models
    from logitgate.models import default_gguf_path, load_default_model

    try:
        default_gguf_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    loaded = load_default_model(quiet=True)
    patch = pytest.MonkeyPatch()
    patch.setattr(logitgate.models, "load_model", lambda path=None, dtype=None, quiet=False, tokenizer=None: loaded)
    yield loaded
    patch.undo()


def _check(o: Outcome) -> None:
    # run_task validates stdout against the schema (jsonschema, formats checked) when rc == 0.
    assert o.exit_code == 0 and o.valid, (o.name, o.exit_code, o.stderr[-500:])
    assert o.budget_closed == ("--max-tokens shaped the output" in o.stderr)


@pytest.mark.parametrize("name", QUICK)
def test_quick_subset(cli_model: Any, name: str) -> None:
    task = next(t for t in TASKS if t.name == name)
    o = run_task(task)
    _check(o)
    assert not o.budget_closed, o.value


@pytest.mark.slow
def test_whole_suite(cli_model: Any) -> None:
    assert len(TASKS) >= 25
    outcomes = [run_task(t) for t in TASKS]
    for o in outcomes:
        _check(o)
    closed = [o.name for o in outcomes if o.budget_closed]
    assert len(TASKS) - len(closed) >= 24, closed
