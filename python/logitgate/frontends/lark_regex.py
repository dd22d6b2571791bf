"""Lark terminals' regexes and strings with llguidance's meaning, as IR nodes.

llguidance reads ``/.../`` with Rust's ``regex`` crate syntax and Unicode semantics, which
differ from the ECMA-flavoured :mod:`logitgate.frontends.regex` in a few places. This module
rewrites a Rust pattern into one that frontend reads with the same language:

- ``.`` is any character but ``\\n`` (flag ``s``: any character), not ECMA's four excluded ones;
- ``\\d`` is Unicode ``Nd``; ``\\s`` Unicode White_Space (with U+0085); ``\\w`` Unicode word
  characters (letters, marks, ``Nd``, ``Nl``, ``Pc``, the joiners, and the Other_Alphabetic
  symbols ``Ⓐ``…); ``\\D \\S \\W`` their complements (outside classes only);
- strings with the ``i`` flag fold case the way Rust's ``(?i)`` does (simple case folding:
  ``k`` also matches ``K`` and the Kelvin sign U+212A).

Refused with a typed error: regex flags other than ``s`` (``i`` included: the regex frontend
folds ASCII only, Rust folds all of Unicode), ``\\D \\S \\W`` inside a class, and what the regex
frontend itself refuses (lookaround, backreferences, inline flag groups such as ``(?s:...)``).
"""

from __future__ import annotations

import functools

from logitgate.errors import GrammarError, LimitExceeded
from logitgate.frontends.regex import regex_to_node
from logitgate.grammar.ir import CharClass, Literal, Node, Seq
from logitgate.limits import Limits

__all__ = ["CODE_REGEX", "regex_node", "string_node"]

CODE_REGEX = "lark-regex"

# Rust's \s: the Unicode White_Space property.
_SPACE = r"\t-\r\x20\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"
# Rust's \w: Alphabetic, M, Nd, Pc, Join_Control; Alphabetic is L, Nl and Other_Alphabetic,
# whose members outside M are the circled and squared letters listed here.
_WORD = (
    r"\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\u200C\u200D\u24B6-\u24E9\u{1F130}-\u{1F149}\u{1F150}-\u{1F169}\u{1F170}-\u{1F189}"
)
_CLASS_ESCAPES = {"d": r"\p{Nd}", "s": _SPACE, "w": _WORD}


def _to_frontend_syntax(pattern: str, dot_all: bool) -> str:
    """The pattern with ``.``, ``\\d``, ``\\s``, ``\\w`` (and complements) spelled out.
    Raises ValueError(offset) for a complement inside a class."""
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e.lower() in _CLASS_ESCAPES:
                body = _CLASS_ESCAPES[e.lower()]
                if in_class:
                    if e.isupper():
                        raise ValueError(i)
                    out.append(body)
                else:
                    out.append(("[^" if e.isupper() else "[") + body + "]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]" and not (out and out[-1] in ("[", "[^")):
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            if pattern.startswith("[^", i):
                out.append("[^")
                i += 2
                if i < n and pattern[i] == "]":  # a leading ']' is a member
                    out.append("\\]")
                    i += 1
                continue
            out.append("[")
            if i + 1 < n and pattern[i + 1] == "]":
                out.append("\\]")
                i += 1
        elif c == ".":
            out.append(r"[\s\S]" if dot_all else r"[^\n]")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def regex_node(pattern: str, flags: str, source: str, offset: int, limits: Limits) -> Node:
    """The IR node of the Lark regex ``/pattern/flags`` found at ``offset`` of ``source``."""
    for f in flags:
        if f != "s":
            raise GrammarError(
                f"regex flag {f!r} is not supported (only 's')", code=CODE_REGEX, source=source, offset=offset
            )
    try:
        rewritten = _to_frontend_syntax(pattern, "s" in flags)
    except ValueError as e:
        raise GrammarError(
            "\\D, \\S and \\W inside a character class are not supported",
            code=CODE_REGEX,
            source=source,
            offset=offset + 1 + int(e.args[0]),
        ) from None
    try:
        node, _ = regex_to_node(rewritten, limits)
    except GrammarError as e:
        raise GrammarError(
            f"in regex /{pattern}/: {e.message.splitlines()[0].split(' at line ')[0]}",
            code=CODE_REGEX,
            source=source,
            offset=offset,
        ) from None
    except LimitExceeded:
        raise
    return node


@functools.lru_cache(maxsize=1)
def _case_partners() -> dict[int, tuple[int, ...]]:
    """Code point -> the code points simple case folding makes equal to it (itself included)."""
    groups: dict[str, set[int]] = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        key = ch.casefold()
        if len(key) != 1:
            key = ch.lower()
        if len(key) == 1 and (key != ch or ch.upper() != ch):
            groups.setdefault(key, {ord(key)}).add(cp)
    partners: dict[int, tuple[int, ...]] = {}
    for members in groups.values():
        if len(members) > 1:
            t = tuple(sorted(members))
            for m in members:
                partners[m] = t
    return partners


def string_node(value: str, icase: bool) -> Node:
    """A string literal; with ``icase``, each cased character is the class of its case partners."""
    if not icase:
        return Literal(value.encode("utf-8"))
    partners = _case_partners()
    parts: list[Node] = []
    run: list[str] = []
    for ch in value:
        alts = partners.get(ord(ch))
        if alts is None:
            run.append(ch)
            continue
        if run:
            parts.append(Literal("".join(run).encode("utf-8")))
            run = []
        parts.append(CharClass(tuple((cp, cp) for cp in alts)))
    if run:
        parts.append(Literal("".join(run).encode("utf-8")))
    return parts[0] if len(parts) == 1 else Seq(tuple(parts))
