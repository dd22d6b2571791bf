"""``generate``'s repetition-control flags (see logitgate.repetition for each penalty).

The defaults are for the embedded SmolLM2-135M, measured on the end-to-end extraction suite
(tests/e2e/tasks.py; docs/generation.md, "Repetition control"). ``lg.generate`` itself leaves
every penalty off: the right values depend on the model.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["DEFAULTS", "add_repetition_flags", "repetition_kwargs"]

DEFAULTS: dict[str, float] = {
    "repetition_penalty": 1.0,
    "frequency_penalty": 0.3,
    "presence_penalty": 0.0,
    "dry_multiplier": 0.8,
}

_HELP = {
    "repetition_penalty": "divide (multiply when negative) the logits of tokens already in the output; 1 = off",
    "frequency_penalty": "subtract this times each token's count in the output from its logit (OpenAI)",
    "presence_penalty": "subtract this from the logit of every token already in the output (OpenAI)",
    "dry_multiplier": "DRY n-gram penalty: lower tokens that would extend a repeated sequence; 0 = off",
}


def add_repetition_flags(p: argparse.ArgumentParser) -> None:
    for name, default in DEFAULTS.items():
        p.add_argument(
            "--" + name.replace("_", "-"), type=float, default=default, help=f"{_HELP[name]} (default: {default:g})"
        )


def repetition_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name in DEFAULTS}
