"""Extraction tasks written for logitgate's end-to-end suite, and their runner.

Each task: a JSON Schema, an input text, and the expected values of its key fields (JSON
pointer -> value; a list means any of those values). The runner sends each task through the
CLI's ``generate`` command (``main([...])`` in process, with the model loaded once) with the
CLI's defaults, and records: exit code, whether stdout is a schema-valid document, whether the
budget closed it (the CLI's stderr warning), and field accuracy.

``python -m tests.e2e.tasks [--flag ...]`` runs every task with extra CLI flags and prints one
line per task and the totals (docs/generation.md has the measured table).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Task:
    name: str
    schema: dict[str, Any]
    text: str
    expected: dict[str, Any]


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
    }


S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}
B = {"type": "boolean"}
DATE = {"type": "string", "format": "date"}
LINE = _obj({"description": S, "quantity": I, "unit_price": N})
COMMENT = {
    "$defs": {"c": _obj({"author": S, "text": S, "replies": {"type": "array", "items": {"$ref": "#/$defs/c"}}})},
    "$ref": "#/$defs/c",
}
EMPLOYEE = {
    "$defs": {"e": _obj({"name": S, "title": S, "reports": {"type": "array", "items": {"$ref": "#/$defs/e"}}})},
    "$ref": "#/$defs/e",
}

TASKS: list[Task] = [
    Task(
        "invoice_lines",
        _obj(
            {
                "invoice_number": {"type": "string", "pattern": "^INV-[0-9]{4}$"},
                "customer": S,
                "currency": {"enum": ["USD", "EUR", "GBP"]},
                "lines": {"type": "array", "items": LINE, "minItems": 1, "maxItems": 5},
                "total": N,
            }
        ),
        "Invoice INV-1042 for Acme Corp: 3 hammers at 12.50 USD each and 2 saws at 30.00 USD. Total 97.50 USD.",
        {"/invoice_number": "INV-1042", "/customer": "Acme Corp", "/currency": "USD", "/total": 97.5},
    ),
    Task(
        "invoice_unbounded",
        _obj({"vendor": S, "lines": {"type": "array", "items": LINE}, "total": N}),
        "Bill from Green Farm: 10 kg apples at 2.00 each, 5 kg pears at 3.00 each. Total due 35.00.",
        {"/vendor": "Green Farm", "/total": 35},
    ),
    Task(
        "invoice_vendor_vat",
        _obj(
            {
                "vendor": _obj({"name": S, "vat_id": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{8,10}$"}}),
                "lines": {
                    "type": "array",
                    "items": _obj({"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}, "qty": I}),
                    "maxItems": 4,
                },
                "due_date": DATE,
            }
        ),
        "Nordic Supplies (VAT SE12345678) bills 7 units of PAD-22 and 2 units of BOX-10, due 2024-05-31.",
        {"/vendor/name": "Nordic Supplies", "/vendor/vat_id": "SE12345678", "/due_date": "2024-05-31"},
    ),
    Task(
        "receipt_date",
        _obj({"store": S, "date": DATE, "amount": N}),
        "Receipt from Bean There Cafe on 2024-03-15, paid 8.40 dollars.",
        {"/store": "Bean There Cafe", "/date": "2024-03-15", "/amount": 8.4},
    ),
    Task(
        "contact_email",
        _obj({"name": S, "age": I, "email": {"type": "string", "format": "email"}}),
        "Contact Maria Lopez, 34, at maria.lopez@example.com.",
        {"/name": "Maria Lopez", "/age": 34, "/email": "maria.lopez@example.com"},
    ),
    Task(
        "triage_reasoning_first",
        _obj(
            {
                "reasoning": {"type": "string", "maxLength": 200},
                "severity": {"enum": ["low", "medium", "high", "critical"]},
                "component": {"enum": ["checkout", "search", "login", "unknown"]},
            }
        ),
        "Since the last deploy the checkout page crashes for every user and no payment goes through.",
        {"/severity": ["high", "critical"], "/component": "checkout"},
    ),
    Task(
        "math_reasoning_first",
        _obj({"reasoning": {"type": "string", "maxLength": 200}, "answer": I}),
        "Tom has 3 apples and buys 4 more. How many apples does he have now?",
        {"/answer": 7},
    ),
    Task(
        "sentiment_reasoning_first",
        _obj(
            {
                "reasoning": {"type": "string", "maxLength": 150},
                "sentiment": {"enum": ["positive", "negative", "neutral"]},
            }
        ),
        "I absolutely loved the food, best dinner in years!",
        {"/sentiment": "positive"},
    ),
    Task(
        "comment_thread",
        COMMENT,
        "Ann wrote 'Great post!' and Bob replied 'Thanks, Ann.'",
        {"/author": "Ann", "/replies/0/author": "Bob"},
    ),
    Task(
        "org_chart",
        EMPLOYEE,
        "Dana is the CEO. Eli, the CTO, reports to Dana.",
        {"/name": "Dana", "/title": "CEO", "/reports/0/name": "Eli"},
    ),
    Task(
        "color_unknown_member",
        _obj({"object": S, "color": {"enum": ["red", "green", "blue", "unknown"]}}),
        "The car in the garage is painted purple.",
        {"/object": "car", "/color": "unknown"},
    ),
    Task(
        "shipment_status",
        _obj({"status": {"enum": ["pending", "shipped", "delivered", "cancelled", "unknown"]}, "when": S}),
        "Your package was delivered yesterday.",
        {"/status": "delivered"},
    ),
    Task(
        "meeting_time_pattern",
        _obj({"event": S, "date": DATE, "time": {"type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$"}}),
        "Team meeting on 2025-01-20 at 14:30 in room B.",
        {"/date": "2025-01-20", "/time": "14:30"},
    ),
    Task(
        "phone_pattern",
        _obj({"name": S, "phone": {"type": "string", "pattern": "^\\+[0-9]{2} [0-9 ]{7,14}$"}}),
        "Call Raj Patel at +44 20 7946 0958 after six.",
        {"/name": "Raj Patel", "/phone": "+44 20 7946 0958"},
    ),
    Task(
        "blog_tags",
        _obj({"title": S, "tags": {"type": "array", "items": S}}),
        "New blog post 'Sourdough basics', tagged baking, bread and fermentation.",
        {"/title": "Sourdough basics", "/tags/0": "baking"},
    ),
    Task(
        "shopping_list",
        _obj({"items": {"type": "array", "items": _obj({"name": S, "qty": I})}}),
        "Buy 2 lemons, 1 bag of flour and 6 eggs.",
        {"/items/0/name": ["lemons", "lemon"], "/items/0/qty": 2},
    ),
    Task(
        "flight",
        _obj(
            {
                "flight_number": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2,4}$"},
                "from": S,
                "to": S,
                "date": DATE,
            }
        ),
        "Flight BA287 from London to San Francisco departs on 2024-07-02.",
        {"/flight_number": "BA287", "/from": "London", "/to": "San Francisco", "/date": "2024-07-02"},
    ),
    Task(
        "address_nested",
        _obj(
            {
                "name": S,
                "address": _obj({"street": S, "city": S, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}}),
            }
        ),
        "Ship to John Smith, 12 Oak Street, Springfield 62704.",
        {"/name": "John Smith", "/address/city": "Springfield", "/address/zip": "62704"},
    ),
    Task(
        "product_stock",
        _obj({"name": S, "price": N, "in_stock": B}),
        "The Nimbus 2000 broom costs 499.99 and is currently out of stock.",
        {"/name": ["Nimbus 2000", "Nimbus 2000 broom"], "/price": 499.99, "/in_stock": False},
    ),
    Task(
        "book",
        _obj({"title": S, "author": S, "year": {"type": "integer", "minimum": 1000, "maximum": 2100}}),
        "'Dune' by Frank Herbert was published in 1965.",
        {"/title": "Dune", "/author": "Frank Herbert", "/year": 1965},
    ),
    Task(
        "weather",
        _obj({"city": S, "temperature_c": N, "condition": {"enum": ["sunny", "cloudy", "rain", "snow", "unknown"]}}),
        "In Oslo it is snowing and -3 degrees Celsius.",
        {"/city": "Oslo", "/temperature_c": -3, "/condition": "snow"},
    ),
    Task(
        "meeting_attendees",
        _obj({"topic": S, "attendees": {"type": "array", "items": S}}),
        "Budget review meeting with Alice, Bob and Carol.",
        {"/attendees/0": "Alice", "/attendees/1": "Bob"},
    ),
    Task(
        "job_posting",
        _obj({"title": S, "company": S, "salary_min": I, "salary_max": I, "remote": B}),
        "Acme is hiring a Senior Python Developer, fully remote, paying 90000 to 120000 a year.",
        {"/company": "Acme", "/salary_min": 90000, "/salary_max": 120000, "/remote": True},
    ),
    Task(
        "recipe_unbounded",
        _obj({"name": S, "servings": I, "ingredients": {"type": "array", "items": S}}),
        "Pancakes for 4 people: flour, milk, eggs and butter.",
        {"/name": "Pancakes", "/servings": 4},
    ),
    Task(
        "bug_report_strings",
        _obj({"title": S, "expected": S, "actual": S}),
        "Login fails: after entering the password and tapping login I expected the dashboard but got error 500.",
        {"/actual": ["error 500", "Error 500"]},
    ),
    Task(
        "tool_call_union",
        {
            "anyOf": [
                _obj({"tool": {"const": "weather"}, "city": S}),
                _obj({"tool": {"const": "calculator"}, "expression": S}),
            ]
        },
        "What's the weather like in Paris today?",
        {"/tool": "weather", "/city": "Paris"},
    ),
]

# The default run's subset: short outputs, one of each kind (nested, enum, date, pattern, union).
QUICK = ("receipt_date", "shipment_status", "book", "flight", "tool_call_union")


def _pointer(value: Any, ptr: str) -> Any:
    for part in ptr.split("/")[1:]:
        key: Any = int(part) if isinstance(value, list) else part
        value = value[key]
    return value


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, list):
        return any(_same(got, w) for w in want)
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        return abs(got - want) < 1e-9
    if isinstance(want, str) and isinstance(got, str):
        return got.strip().lower() == want.strip().lower()
    return bool(got == want)


def score(task: Task, value: Any) -> tuple[int, list[str]]:
    """How many of the task's key fields ``value`` has right, and ``pointer=value`` for each
    one it has wrong (``value`` None: none right)."""
    right, wrong = 0, []
    for ptr, want in task.expected.items():
        try:
            got = _pointer(value, ptr)
        except (KeyError, IndexError, TypeError):
            got = None
        if got is not None and _same(got, want):
            right += 1
        else:
            wrong.append(f"{ptr}={got!r}")
    return right, wrong


@dataclass
class Outcome:
    name: str
    exit_code: int
    valid: bool
    budget_closed: bool
    fields_right: int
    fields: int
    value: Any = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    wrong: list[str] = field(default_factory=list)


def run_task(task: Task, flags: list[str] | None = None) -> Outcome:
    """Runs ``logitgate generate --schema <task schema> [flags] <text>`` in process."""
    import jsonschema

    from logitgate.cli.main import main

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{task.name}.json"
        path.write_text(json.dumps(task.schema))
        out, err = io.StringIO(), io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["generate", "--schema", str(path), *(flags or []), task.text])
        seconds = time.perf_counter() - t0
    stderr = err.getvalue()
    value: Any = None
    valid = False
    if rc == 0:
        value = json.loads(out.getvalue())
        jsonschema.validate(value, task.schema, format_checker=jsonschema.FormatChecker())
        valid = True
    right, wrong = score(task, value)
    closed = "warning: --max-tokens shaped the output" in stderr
    n = len(task.expected)
    return Outcome(task.name, rc, valid, closed, right, n, value, out.getvalue(), stderr, seconds, wrong)


def use_model_once() -> None:
    """Makes the CLI reuse one loaded model (the embedded SmolLM2) for every task."""
    import logitgate.models
    from logitgate.models import load_default_model

    loaded = load_default_model(quiet=True)
    logitgate.models.load_model = lambda path=None, dtype=None, quiet=False, tokenizer=None: loaded  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    use_model_once()
    outcomes = []
    for task in TASKS:
        o = run_task(task, argv)
        outcomes.append(o)
        flag = "CLOSED" if o.budget_closed else ""
        print(
            f"{o.name:28s} rc={o.exit_code} valid={o.valid} {flag:6s} fields {o.fields_right}/{o.fields} "
            f"{o.seconds:5.1f}s {' '.join(o.wrong)}  {json.dumps(o.value)[:160]}",
            flush=True,
        )
    right = sum(o.fields_right for o in outcomes)
    total = sum(o.fields for o in outcomes)
    print(
        f"TOTAL tasks={len(outcomes)} invalid={sum(not o.valid for o in outcomes)} "
        f"budget_closed={sum(o.budget_closed for o in outcomes)} "
        f"complete_unclosed={sum(o.valid and not o.budget_closed for o in outcomes)} "
        f"fields={right}/{total} ({100 * right / total:.0f}%) flags={' '.join(argv) or '(defaults)'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
