"""``lg.grammars.shell_command``: a GBNF grammar of one command line from an allowlist.

The language: a program of the allowlist, then flags from that program's own set (each at most
once is not enforced; at most ``max_flags``), then at most ``max_args`` arguments, each in
single quotes. Inside single quotes a POSIX shell expands nothing; an argument holds no quote,
no control character, and does not start with ``-`` (so it cannot pass as a flag). Nothing
else can be written: no ``;``, ``|``, ``&``, redirection, substitution, globbing or second
command. Run the result with an argument vector (``shlex.split`` then ``subprocess.run`` without
``shell=True``), not through a shell: the grammar contains the command, the runner must too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..errors import UsageError

__all__ = ["shell_command"]

_PROGRAM = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}$")
_FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]{0,63}(=[A-Za-z0-9_.,:/+-]{1,64})?$")


def shell_command(
    allowlist: Mapping[str, Sequence[str]],
    *,
    max_flags: int = 4,
    max_args: int = 4,
    max_arg_length: int = 128,
) -> str:
    """The GBNF grammar (start rule ``root``) of one command line: ``allowlist`` maps each
    program to its allowed flags (spelled whole: ``-l``, ``--max-count=5``). Bad names or bounds
    raise :class:`~logitgate.UsageError`."""
    if not isinstance(allowlist, Mapping) or not allowlist:
        raise UsageError("allowlist must be a non-empty mapping of program to its flags", code="shell-allowlist")
    for name, value in (("max_flags", max_flags), ("max_args", max_args), ("max_arg_length", max_arg_length)):
        if not isinstance(value, int) or not 0 <= value <= 4096:
            raise UsageError(f"{name} must be an integer in 0..4096, got {value!r}", code="shell-bound")
    lines = ["root ::= " + " | ".join(f"p{i}" for i in range(len(allowlist)))]
    lines.append(f'arg ::= "\'" (argfirst argchar{{0,{max(0, max_arg_length - 1)}}})? "\'"')
    lines.append("argfirst ::= [^'\\-\\x00-\\x1f\\x7f]")
    lines.append("argchar ::= [^'\\x00-\\x1f\\x7f]")
    for i, (program, flags) in enumerate(allowlist.items()):
        if not isinstance(program, str) or not _PROGRAM.match(program):
            raise UsageError(f"program {program!r} must match {_PROGRAM.pattern}", code="shell-allowlist")
        if isinstance(flags, str):
            raise UsageError(f"the flags of {program!r} must be a list of strings", code="shell-allowlist")
        for f in flags:
            if not isinstance(f, str) or not _FLAG.match(f):
                raise UsageError(f"flag {f!r} of {program!r} must match {_FLAG.pattern}", code="shell-allowlist")
        body = f'"{program}"'
        if flags and max_flags:
            lines.append(f"p{i}flag ::= " + " | ".join(f'"{f}"' for f in flags))
            body += f' (" " p{i}flag){{0,{max_flags}}}'
        if max_args:
            body += f' (" " arg){{0,{max_args}}}'
        lines.append(f"p{i} ::= {body}")
    return "\n".join(lines) + "\n"
