"""The JSON pointer (RFC 6901) of every character of a JSON text, complete or cut short.

A trace names each step's grammar position by the place in the document its token writes:

- a value's characters (a string with its quotes, a number, a literal) and the brackets of an
  object or array belong to that value's pointer;
- a member's key (with its quotes) and the colon after it belong to the member's pointer
  (``{"a":1}``: ``"a":`` and ``1`` are ``/a``), so a token that writes a key is placed where
  the key leads;
- commas and whitespace belong to the enclosing container.

The text is read once, left to right, with a stack of open containers (no recursion: the
depth is the text's). A key is known only at its closing quote, so its characters are filled
in then. Text that is not JSON from some point on (cut short, or a grammar that is not JSON)
leaves the rest at the last container's pointer: a trace's positions are a reading aid, never
a validator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["json_pointers"]

_LITERAL_CHARS = frozenset("0123456789+-.eEtruefalsn")


@dataclass
class _Container:
    pointer: str
    is_object: bool
    index: int = 0  # arrays: the next element's index
    key: str | None = None  # objects: the current member's key, once read


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _decode_key(raw: str) -> str:
    """The key a string's source spells (``raw`` without its quotes; cut short: as written)."""
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def json_pointers(text: str) -> list[str]:
    """One JSON pointer per character of ``text`` (see the module docstring).

    >>> json_pointers('{"a":[1,2]}')[5:10]
    ['/a', '/a/0', '/a', '/a/1', '/a']
    """
    out = [""] * len(text)
    stack: list[_Container] = []
    i, n = 0, len(text)
    expect_key = False  # inside an object, before a key

    def value_pointer() -> str:
        if not stack:
            return ""
        top = stack[-1]
        if top.is_object:
            return f"{top.pointer}/{_escape(top.key or '')}"
        return f"{top.pointer}/{top.index}"

    while i < n:
        c = text[i]
        here = stack[-1].pointer if stack else ""
        if c in " \t\r\n":
            out[i] = here
            i += 1
        elif c == '"':
            end, closed = _string_end(text, i)
            if expect_key and stack:
                stack[-1].key = _decode_key(text[i + 1 : end - 1 if closed else end])
                expect_key = False
            p = value_pointer()
            out[i:end] = [p] * (end - i)
            i = end
        elif c == ":":
            out[i] = value_pointer()
            i += 1
        elif c in "{[":
            p = value_pointer()
            out[i] = p
            stack.append(_Container(p, c == "{"))
            expect_key = c == "{"
            i += 1
        elif c in "}]":
            if stack:
                out[i] = stack.pop().pointer
            i += 1
            expect_key = False
        elif c == ",":
            out[i] = here
            if stack:
                top = stack[-1]
                if top.is_object:
                    top.key = None
                    expect_key = True
                else:
                    top.index += 1
            i += 1
        elif c in _LITERAL_CHARS:
            p = value_pointer()
            while i < n and text[i] in _LITERAL_CHARS:
                out[i] = p
                i += 1
        else:  # not JSON: the rest stays with the innermost container
            out[i:] = [here] * (n - i)
            break
    return out


def _string_end(text: str, start: int) -> tuple[int, bool]:
    """Index after the string starting with the quote at ``start``, and whether its closing
    quote is there (cut short: ``len(text)``, False)."""
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1, True
        else:
            i += 1
    return len(text), False
