"""``logitgate lint FILE``: a JSON Schema checked against a provider's strict-mode rules
(``--target openai|anthropic``) or logitgate's own compiler (``--target logitgate``), and
against the design rules. Exit status 1 when a finding is an error."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = ["add_lint_command"]


def add_lint_command(sub: Any) -> None:
    """Registers the ``lint`` subcommand on ``sub`` (argparse subparsers)."""
    from .main import EXIT_CODES

    p = sub.add_parser(
        "lint",
        help="check a JSON Schema for a provider's strict mode and for design problems",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "file", metavar="FILE", help="a JSON Schema file (a JSON array: one request's tools, --target anthropic)"
    )
    p.add_argument(
        "--target",
        choices=("openai", "anthropic", "logitgate"),
        default="openai",
        help="rules to apply (default: openai)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.set_defaults(func=cmd_lint)


def cmd_lint(args: argparse.Namespace) -> int:
    from logitgate.toolkit import has_errors, lint

    from .main import _read_text

    findings = lint(_read_text("FILE", args.file), target=args.target)
    if args.format == "json":
        print(json.dumps([f.to_dict() for f in findings], indent=1))
    else:
        for f in findings:
            print(f)
        counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
        print(", ".join(f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items()))
    return 1 if has_errors(findings) else 0
