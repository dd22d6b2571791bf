#!/usr/bin/env python
"""The ladder of structured output, measured (issue 24): the end-to-end extraction tasks
(tests/e2e/tasks.py) run four ways on the embedded SmolLM2-135M.

    LOGITGATE_THREADS=1 nice python bench/ladder.py                 # every task, four ways
    python bench/ladder.py --tasks 10 --out bench/results/ladder.md # the first 10 tasks
    python bench/ladder.py --only book,flight                       # named tasks

1. ``hope``: prompt and hope. Unconstrained generation, then ``json.loads`` (after stripping
   a Markdown code fence, which small chat models like to add) and ``jsonschema`` validation.
2. ``retry``: the same, and up to 2 retries with validation feedback (the error goes back to
   the model as a user message; the output is the last attempt's).
3. ``constrained``: ``lg.generate(json_schema=...)`` with budget-aware decoding off.
4. ``budget``: the same with budget-aware decoding (``lg.generate``'s default).

Every way gets the chat the CLI sends for ``--schema`` (a system message showing the schema,
the task's text as the user message), greedy decoding, ``max_tokens`` 256 per attempt and the
CLI's repetition-control defaults (``--no-repetition`` turns them off everywhere). Per task and
way: parsed, schema-valid, key fields right (the task's expected values), output tokens and
wall time (all attempts). Prints a Markdown table and the totals; ``--out`` also writes it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.tasks import TASKS, Task, score

WAYS = ("hope", "retry", "constrained", "budget")
RETRIES = 2
SYSTEM = "Extract the information from the user's message as JSON that follows this JSON Schema: "
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)


@dataclass
class Row:
    task: str
    way: str
    parsed: bool
    valid: bool
    right: int
    fields: int
    tokens: int
    seconds: float
    attempts: int = 1


def check(task: Task, text: str) -> tuple[Any, str | None]:
    """(value, None) when ``text`` is a schema-valid document, else (value or None, error)."""
    import jsonschema

    m = _FENCE.match(text)
    try:
        value = json.loads(m.group(1) if m else text)
    except json.JSONDecodeError as e:
        return None, f"not JSON: {e}"
    try:
        jsonschema.validate(value, task.schema, format_checker=jsonschema.FormatChecker())
    except jsonschema.ValidationError as e:
        return value, f"not valid: {e.message} at {'/'.join(map(str, e.absolute_path)) or 'the top level'}"
    return value, None


def run(model: Any, task: Task, way: str, options: dict[str, Any], first: Any = None) -> tuple[Row, Any]:
    """One task one way; returns its row and its first attempt's result. ``first``: the
    result of this chat's first attempt when already generated (greedy decoding makes ``retry``'s
    first attempt ``hope``'s, so it is reused, its time counted again)."""
    import logitgate as lg

    msgs = [
        {"role": "system", "content": SYSTEM + json.dumps(task.schema, separators=(",", ":"))},
        {"role": "user", "content": task.text},
    ]
    tokens, seconds, attempts = 0, 0.0, 0
    structure: dict[str, Any] = {}
    if way in ("constrained", "budget"):
        structure = {"json_schema": task.schema, "budget_aware": way == "budget"}
    first_result = first
    while True:
        if attempts == 0 and first is not None:
            r = first
        else:
            r = lg.generate(*model, msgs, max_tokens=256, **structure, **options)
        first_result = first_result or r
        seconds += r.timings.total_s
        tokens += r.completion_tokens
        attempts += 1
        value, error = check(task, r.text)
        if error is None or way != "retry" or attempts > RETRIES:
            break
        msgs = [
            *msgs,
            {"role": "assistant", "content": r.text},
            {"role": "user", "content": f"That output is {error}. Reply with only the corrected JSON."},
        ]
    parsed = error is None or not error.startswith("not JSON")
    right, _ = score(task, value if error is None else None)
    row = Row(task.name, way, parsed, error is None, right, len(task.expected), tokens, seconds, attempts)
    return row, first_result


def table(rows: list[Row], tasks: list[Task]) -> str:
    out = [
        "| task | " + " | ".join(WAYS) + " |",
        "|---|" + "---|" * len(WAYS),
    ]
    by = {(r.task, r.way): r for r in rows}
    for t in tasks:
        cells = []
        for w in WAYS:
            r = by.get((t.name, w))
            if r is None:
                cells.append("")
                continue
            mark = "valid" if r.valid else "parsed" if r.parsed else "no JSON"
            tries = f", {r.attempts} tries" if r.attempts > 1 else ""
            cells.append(f"{mark}, {r.right}/{r.fields}, {r.tokens} tok, {r.seconds:.1f}s{tries}")
        out.append(f"| {t.name} | " + " | ".join(cells) + " |")
    out += ["", "| way | parsed | schema-valid | key fields right | output tokens | wall time |"]
    out += ["|---|---|---|---|---|---|"]
    for w in WAYS:
        rs = [r for r in rows if r.way == w]
        if not rs:
            continue
        n, fields = len(rs), sum(r.fields for r in rs)
        right = sum(r.right for r in rs)
        out.append(
            f"| {w} | {sum(r.parsed for r in rs)}/{n} | {sum(r.valid for r in rs)}/{n} | "
            f"{right}/{fields} ({100 * right / fields:.0f}%) | {sum(r.tokens for r in rs)} | "
            f"{sum(r.seconds for r in rs):.0f} s |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=len(TASKS), help=f"run the first N tasks (default: all {len(TASKS)})")
    ap.add_argument("--only", help="comma-separated task names (default: the first --tasks tasks)")
    ap.add_argument("--no-repetition", action="store_true", help="repetition control off in every way")
    ap.add_argument("--out", type=Path, help="also write the Markdown table here")
    args = ap.parse_args(argv)
    from logitgate.cli.repetition import DEFAULTS
    from logitgate.models import load_default_model

    options = {name: 1.0 if name == "repetition_penalty" else 0.0 for name in DEFAULTS}
    if not args.no_repetition:
        options = dict(DEFAULTS)
    model = load_default_model(quiet=True)
    tasks = [t for t in TASKS if t.name in args.only.split(",")] if args.only else TASKS[: args.tasks]
    rows: list[Row] = []
    for i, t in enumerate(tasks):
        hope = None
        for w in WAYS:
            r, first = run(model, t, w, options, hope if w == "retry" else None)
            hope = first if w == "hope" else hope
            rows.append(r)
            print(
                f"{r.task:24s} {r.way:11s} parsed={r.parsed} valid={r.valid} fields {r.right}/{r.fields} "
                f"{r.tokens} tok {r.seconds:.1f}s attempts={r.attempts}",
                file=sys.stderr,
                flush=True,
            )
        if args.out:  # after each task, so that a run cut short keeps what it measured
            args.out.write_text(table(rows, tasks[: i + 1]) + "\n")
    text = table(rows, tasks)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
