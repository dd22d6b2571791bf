"""``logitgate inspect --schema F``: what the mask compiled from a JSON Schema enforces, per
JSON pointer (enforced, enforced with a documented departure, dropped by a lenient compile, not
enforced), and its token budget for a vocabulary (default: the embedded SmolLM2's)."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_inspect_command"]


def add_inspect_command(sub: Any) -> None:
    """Registers the ``inspect`` subcommand on ``sub`` (argparse subparsers)."""
    from .main import EXIT_CODES, _add_vocab_argument

    p = sub.add_parser(
        "inspect",
        help="what a compiled JSON Schema enforces per pointer, and its token budget",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--schema", metavar="FILE", required=True, help="a JSON Schema file")
    _add_vocab_argument(p)
    p.add_argument("--json", action="store_true", help="print the report as one JSON object (default: text)")
    p.set_defaults(func=cmd_inspect)


def cmd_inspect(args: argparse.Namespace) -> int:
    from logitgate.toolkit import enforcement_report

    from .main import _load_vocab, _read_text

    report = enforcement_report(_read_text("--schema", args.schema), vocab=_load_vocab(args.vocab))
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.to_text())
    return 1 if report.error else 0
