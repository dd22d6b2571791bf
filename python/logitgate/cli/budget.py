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
from typing import Any

__all__ = ["add_budget_command", "add_generate_flags", "report_budget"]


def add_budget_command(sub: Any) -> None:
    """Registers the ``budget`` subcommand on ``sub`` (argparse subparsers)."""
    from .main import EXIT_CODES, _add_vocab_argument, add_structure_arguments

    p = sub.add_parser(
        "budget",
        help="shortest and longest output of a structure, in bytes and tokens (sizes --max-tokens)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_structure_arguments(p, what="required")
    _add_vocab_argument(p)
    p.add_argument("--json", action="store_true", help="print the budget as one JSON object (default: text)")
    p.set_defaults(func=cmd_budget)


def cmd_budget(args: argparse.Namespace) -> int:
    import logitgate as lg

    from .main import _load_vocab, compile_structure, read_structure

    spec = read_structure(args)
    compiled = compile_structure(spec, lg.Compiler(_load_vocab(args.vocab))).grammar
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
