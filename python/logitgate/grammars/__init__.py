"""Containment grammars: outputs that can only be what a downstream system is allowed to run.

- :func:`sql_select`: one read-only ``SELECT`` over named tables and columns.
- :func:`shell_command`: one command line of allowlisted programs, flags and quoted arguments.

Containment, not an injection defence: the grammar bounds what the model can write (no other
statement, table, function or program), so a prompt injection can at worst choose among the
allowed queries or commands. It does not decide whether an allowed query is the right one, nor
whether its values are safe to show to whoever asked; keep the database user read-only and the
command runner without a shell.
"""

from __future__ import annotations

from .shell import shell_command
from .sql import sql_select

__all__ = ["shell_command", "sql_select"]
