"""End-to-end extraction through the CLI (``logitgate generate --schema F TEXT``) with its
default settings on the embedded SmolLM2-135M: every output is a schema-valid document within
its schema's token_budget() maximum where it has one, and the budget closes few of them, always
with its warning (the whole suite checks each against a run without the budget). Field accuracy
is measured, not asserted (a 135M model's reading); tasks.py's ``main`` prints it
(docs/generation.md).

The default run takes five short tasks; the whole suite is slow (seconds per task on a quiet CPU).
"""

from __future__ import annotations

from typing import Any

import pytest

import logitgate as lg

from .tasks import QUICK, TASKS, Outcome, Task, run_task

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("jsonschema")

# token_budget's max_bytes depends on the grammar alone: a byte vocabulary serves.
_BYTES = lg.Compiler(lg.Vocabulary.from_tokens([bytes([b]) for b in range(256)] + [b"<eos>"], eos_ids=[256]))


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


def _check(task: Task, o: Outcome) -> None:
    # run_task validates stdout against the schema (jsonschema, formats checked) when rc == 0.
    assert o.exit_code == 0 and o.valid, (o.name, o.exit_code, o.stderr[-500:])
    # A bounded schema's token_budget().max_bytes is above what the model wrote (and so is its
    # max_tokens, one more than max_bytes: every token holds a byte).
    g = _BYTES.compile_json_schema(task.schema, whitespace="compact")  # as the CLI compiles
    max_bytes = g.token_budget().max_bytes
    if max_bytes is not None:
        assert len(o.stdout.strip().encode()) <= max_bytes, (o.name, max_bytes)


@pytest.mark.parametrize("name", QUICK)
def test_quick_subset(cli_model: Any, name: str) -> None:
    task = next(t for t in TASKS if t.name == name)
    o = run_task(task)
    _check(task, o)
    assert not o.budget_closed, o.value


@pytest.mark.slow
@pytest.mark.timeout(900)  # 52 generations: about 3 minutes on two idle cores, past 5 under other load
def test_whole_suite(cli_model: Any) -> None:
    assert len(TASKS) >= 25
    outcomes = [run_task(t) for t in TASKS]
    for t, o in zip(TASKS, outcomes, strict=True):
        _check(t, o)
        # Every output the budget shaped is reported, and only those: greedy decoding without
        # the budget gives the same document exactly when the CLI printed no budget warning.
        plain = run_task(t, ["--no-budget"])
        shaped = plain.exit_code != 0 or plain.value != o.value
        assert o.budget_closed == shaped, (t.name, o.value, plain.exit_code, plain.value)
    closed = [o.name for o in outcomes if o.budget_closed]
    assert len(TASKS) - len(closed) >= 24, closed
