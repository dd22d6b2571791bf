"""``generate --reasoning``: a free reasoning span before the structure (logitgate.reasoning).
The reasoning goes to stderr, the structured value to stdout as usual."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_reasoning_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--reasoning",
        action="store_true",
        help="let the model reason freely in <think>...</think> before the structure (default: off)",
    )
    p.add_argument(
        "--thinking-budget",
        type=int,
        default=None,
        metavar="N",
        help="with --reasoning: force </think> after N tokens of reasoning (default: no budget)",
    )


def reasoning_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    if not args.reasoning:
        return {}
    from logitgate.reasoning import Reasoning

    return {"reasoning": Reasoning(budget=args.thinking_budget)}


def report_reasoning(res: Any) -> None:
    """The reasoning span's text on stderr."""
    if getattr(res, "reasoning", None) is not None:
        print(f"reasoning: {res.reasoning}", file=sys.stderr)
