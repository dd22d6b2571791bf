"""``logitgate budget``: the shortest and longest output of a grammar, in bytes and in tokens of
a vocabulary (the embedded SmolLM2's by default), and what makes the longest unbounded. Also the
budget flags and report of ``logitgate generate`` (``--no-budget``, the stderr warning).

The grammar is compiled as ``generate`` compiles it (JSON Schemas and Pydantic models compact),
so the numbers size ``--max-tokens``: with budget-aware decoding (the default) any
``--max-tokens`` of at least the minimum gives a complete document.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_budget_command", "add_generate_flags", "report_budget"]


def add_budget_command(sub: Any) -> None:
    """Registers the ``budget`` subcommand on ``sub`` (argparse subparsers)."""
    p = sub.add_parser(
        "budget",
        help="shortest and longest output of a grammar, in bytes and tokens (sizes --max-tokens)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--schema", help="JSON Schema file (compiled compact, as generate does)")
    src.add_argument("--pydantic", help="module:Model (a Pydantic v2 class)")
    src.add_argument("--grammar", help="GBNF file")
    src.add_argument("--regex", help="regular expression")
    p.add_argument("--vocab", help="GGUF file or tokenizer folder (default: embedded SmolLM2)")
    p.add_argument("--json", action="store_true", help="print the budget as one JSON object (default: text)")
    p.set_defaults(func=cmd_budget)


def cmd_budget(args: argparse.Namespace) -> int:
    import logitgate as lg

    from .main import _load_pydantic, _load_vocab

    compiler = lg.Compiler(_load_vocab(args.vocab))
    if args.schema:
        schema = json.loads(Path(args.schema).read_text(encoding="utf-8"))
        compiled = compiler.compile_json_schema(schema, whitespace="compact")
    elif args.pydantic:
        compiled = compiler.compile_pydantic(_load_pydantic(args.pydantic), whitespace="compact", strict=True)
    elif args.grammar:
        compiled = compiler.compile_ebnf(Path(args.grammar).read_text(encoding="utf-8"))
    else:
        compiled = compiler.compile_regex(args.regex)
    tb = compiled.token_budget()
    if args.json:
        print(
            json.dumps(
                {
                    "min_bytes": tb.min_bytes,
                    "min_tokens": tb.min_tokens,
                    "max_bytes": tb.max_bytes,
                    "max_tokens": tb.max_tokens,
                    "unbounded_by": list(tb.unbounded_by),
                    "shortest": tb.shortest.decode("utf-8", errors="replace"),
                }
            )
        )
    else:
        print(tb.summary())
    return 0


def add_generate_flags(p: argparse.ArgumentParser) -> None:
    """``generate``'s budget flag."""
    p.add_argument(
        "--no-budget",
        action="store_true",
        help="turn off budget-aware decoding (default: on: with --max-tokens at least the grammar's "
        "minimum, the output is complete; see `logitgate budget`)",
    )


def report_budget(res: Any, stats: bool) -> None:
    """Says on stderr when the budget shaped the output (never silent), and a --stats line."""
    if stats:
        state = "closed the output early" if res.budget_closed else "not tight"
        print(f"stats: budget          {state}", file=sys.stderr)
    if res.budget_closed:
        print(
            "logitgate: warning: --max-tokens shaped the output: budget-aware decoding closed it earlier "
            "than the model would have (raise --max-tokens, or --no-budget to truncate instead)",
            file=sys.stderr,
        )
