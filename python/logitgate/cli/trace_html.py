"""``logitgate generate --trace-html FILE``: the generation's trace as one HTML page.

The path is checked before the model loads (its folder must exist), and the page is written
whether or not the output completed: a truncated generation is one a trace helps explain.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from logitgate.errors import LogitgateError

__all__ = ["add_trace_html_flag", "check_trace_html_path", "write_trace_html"]


class _TraceFileError(LogitgateError):
    """The --trace-html file cannot be written."""

    code = "file-unwritable"


def add_trace_html_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trace-html",
        metavar="FILE",
        help="write a self-contained HTML page of the generation's trace: per step the allowed tokens, "
        "forced and budget steps, the top tokens before and after the mask (default: off; see docs/trace.md)",
    )


def check_trace_html_path(args: argparse.Namespace) -> None:
    """Fails before anything loads when the page could not be written."""
    if args.trace_html is None:
        return
    path = Path(args.trace_html)
    if path.is_dir():
        raise _TraceFileError(f"--trace-html {args.trace_html}: is a folder, not a file")
    if not path.parent.is_dir():
        raise _TraceFileError(f"--trace-html {args.trace_html}: no such folder {str(path.parent)!r}")


def write_trace_html(args: argparse.Namespace, result: Any, title: str) -> None:
    """Writes ``result.trace`` as a page to ``--trace-html`` (when given)."""
    if args.trace_html is None:
        return
    try:
        Path(args.trace_html).write_text(result.trace.to_html(title=title), encoding="utf-8")
    except OSError as e:
        raise _TraceFileError(f"--trace-html {args.trace_html}: cannot write: {e.strerror or e}") from None
    if not args.quiet:
        print(f"logitgate: trace of {len(result.trace)} steps written to {args.trace_html}", file=sys.stderr)
