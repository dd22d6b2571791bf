"""Lark syntax (llguidance's dialect): source text -> a small typed tree (:class:`LarkFile`).

Owns reading the text only; what the tree means is :mod:`logitgate.frontends.lark`'s job.

The dialect, as llguidance reads it (docs/lark.md lists what we support):

- ``name: expansions`` defines a rule (lowercase name, ``-`` allowed; ``?name`` and ``!name``
  only shape Lark's parse tree), ``NAME: expansions`` a terminal (uppercase, optional ``_``).
  ``name[capture]`` attributes, ``.N`` priorities and ``{a, b}`` template parameters are read
  and kept for the lowering to accept or refuse.
- ``|`` alternation (a newline ends a definition unless the next line starts with ``|``;
  inside ``(...)`` and ``[...]`` newlines are whitespace), ``-> alias`` (tree shaping only),
  ``( )`` grouping, ``[ ]`` optional, postfix ``? * +``, ``{n}``, ``{m,n}``, ``{m,}``, ``{,n}``,
  ``~ n`` and ``~ m..n``.
- Atoms: ``"string"`` (JSON escapes plus ``\\xNN``) with an ``i`` flag, ``/regex/flags``,
  ``"a".."z"`` ranges, names, ``<special token>``, ``%json {...}``; ``@grammar`` references,
  ``%regex {...}`` and ``%lark {...}`` are read and refused by the lowering.
- Statements: ``%ignore expansions``, ``%import common.NAME [-> ALIAS]``,
  ``%import common (A, B)``, ``%llguidance {...}`` (JSON), ``%declare``/``%override`` (refused).
- ``//`` and ``#`` start comments.

Invariants: the tokenizer and the parser are loops (expression nesting uses an explicit stack
of open groups), so no input turns into deep Python recursion; group depth is bounded by
``Limits.max_nesting``. Every failure is a :class:`GrammarError` with code ``lark-syntax`` and
the offset of the fault (``line``/``column`` on the error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from logitgate.errors import GrammarError, LimitExceeded, _surrogate_at
from logitgate.limits import Limits

__all__ = [
    "Alternatives",
    "Definition",
    "Expr",
    "JsonSchema",
    "LarkFile",
    "Name",
    "Quantified",
    "RegexLit",
    "Sequence",
    "SpecialToken",
    "StringLit",
    "StringRange",
    "Unsupported",
    "parse_lark_syntax",
]

CODE_SYNTAX = "lark-syntax"

# ---------------------------------------------------------------------------------------------
# The tree. Every node keeps the character offset of its first character for error messages.


@dataclass(frozen=True)
class StringLit:
    value: str
    icase: bool
    offset: int


@dataclass(frozen=True)
class RegexLit:
    pattern: str
    flags: str
    offset: int


@dataclass(frozen=True)
class StringRange:
    """``"a".."z"``: one character between two one-character strings."""

    lo: str
    hi: str
    offset: int


@dataclass(frozen=True)
class Name:
    name: str
    offset: int


@dataclass(frozen=True)
class SpecialToken:
    """A token named by the vocabulary rather than spelled by bytes, as llguidance writes it:
    ``<|im_end|>`` (``name`` is the whole text, brackets included), ``<[128010]>``,
    ``<[128000-128255,5]>``, ``<[^1,5-9]>`` (``ids``: inclusive ranges, ``None`` as the upper
    end meaning the last id, ``negated`` for ``^``), ``<[*]>`` (every id: ``((0, None),)``)."""

    text: str
    offset: int
    name: str | None = None
    ids: tuple[tuple[int, int | None], ...] = ()
    negated: bool = False


_ID_RANGE_RE = re.compile(r"([0-9]+)(?:-([0-9]+|MAX))?")


def _special_token(tok: _Tok, source: str) -> SpecialToken:
    inner = tok.text[1:-1]
    if not (inner.startswith("[") and inner.endswith("]")):
        return SpecialToken(tok.text, tok.offset, name=tok.text)
    body = inner[1:-1]
    if body == "*":
        return SpecialToken(tok.text, tok.offset, ids=((0, None),))
    negated = body.startswith("^")
    ranges: list[tuple[int, int | None]] = []
    for part in (body[1:] if negated else body).split(","):
        m = _ID_RANGE_RE.fullmatch(part)
        if m is None or len(part) > 40:
            raise GrammarError(
                f"bad token id list {tok.text!r} (expected <[id]>, <[a-b,c]>, <[^...]> or <[*]>)",
                code=CODE_SYNTAX,
                source=source,
                offset=tok.offset,
            )
        lo = int(m.group(1))
        hi: int | None = lo if m.group(2) is None else None if m.group(2) == "MAX" else int(m.group(2))
        if hi is not None and hi < lo:
            raise GrammarError(
                f"token id range out of order in {tok.text!r}", code=CODE_SYNTAX, source=source, offset=tok.offset
            )
        ranges.append((lo, hi))
    return SpecialToken(tok.text, tok.offset, ids=tuple(ranges), negated=negated)


@dataclass(frozen=True)
class JsonSchema:
    """``%json {...}``: the schema as parsed JSON."""

    schema: Any
    offset: int


@dataclass(frozen=True)
class Unsupported:
    """A construct read so that the lowering can refuse it with its position."""

    what: str
    offset: int


@dataclass(frozen=True)
class Sequence:
    items: tuple[Expr, ...]
    offset: int


@dataclass(frozen=True)
class Alternatives:
    items: tuple[Expr, ...]
    offset: int


@dataclass(frozen=True)
class Quantified:
    item: Expr
    lo: int
    hi: int | None
    offset: int


Expr = (
    StringLit
    | RegexLit
    | StringRange
    | Name
    | SpecialToken
    | JsonSchema
    | Unsupported
    | Sequence
    | Alternatives
    | Quantified
)


@dataclass
class Definition:
    name: str
    terminal: bool
    body: Expr
    offset: int
    attributes: tuple[tuple[str, int], ...] = ()  # (key, offset) of each [key=...] attribute
    priority_offset: int | None = None
    template_offset: int | None = None


@dataclass
class LarkFile:
    definitions: list[Definition] = field(default_factory=list)
    ignores: list[Expr] = field(default_factory=list)
    imports: list[tuple[str, str, int]] = field(default_factory=list)  # (module.NAME, alias, offset)
    options: list[tuple[dict[str, Any], int]] = field(default_factory=list)  # %llguidance objects
    refused: list[Unsupported] = field(default_factory=list)  # statements we do not support


# ---------------------------------------------------------------------------------------------
# Tokenizer.

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\f]+|\\\r?\n)
  | (?P<comment>(?://|\#)[^\n]*)
  | (?P<newline>(?:\r?\n[ \t\f]*)+)
  | (?P<directive>%[a-z_]+)
  | (?P<string>"(?:\\.|[^"\\\n])*"i?)
  | (?P<regex>/(?:\\.|[^/\\\n])+/[imslux]*)
  | (?P<special><[^<>\s]+>)
  | (?P<ref>@[A-Za-z0-9_\-]+)
  | (?P<name>[!?]?_?[A-Za-z][A-Za-z0-9_\-]*)
  | (?P<number>[0-9]+)
  | (?P<punct>->|\.\.|[:|()\[\]{},.~=+*?&])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    offset: int


def _tokenize(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise GrammarError(f"unexpected character {text[pos]!r}", code=CODE_SYNTAX, source=text, offset=pos)
        kind = m.lastgroup or ""
        if kind == "directive" and m.group() in ("%json", "%llguidance", "%regex", "%lark"):
            out.append(_Tok(kind, m.group(), pos))
            body_start = _skip_blank(text, m.end())
            body_end = _balanced_end(text, body_start)
            out.append(_Tok("json", text[body_start:body_end], body_start))
            pos = body_end
            continue
        if kind == "newline" and out and out[-1].kind == "newline":
            pass  # lines of comments between a rule and its `|` continuation
        elif kind not in ("ws", "comment"):
            out.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    out.append(_Tok("eof", "", n))
    return out


def _skip_blank(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _balanced_end(text: str, start: int) -> int:
    """End of the ``{...}`` (or ``[...]``) JSON value at ``start``: brackets counted outside strings."""
    if start >= len(text) or text[start] not in "{[":
        raise GrammarError("expected a JSON object after the directive", code=CODE_SYNTAX, source=text, offset=start)
    depth, i, in_string = 0, start, False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise GrammarError("unterminated JSON value", code=CODE_SYNTAX, source=text, offset=start)


# ---------------------------------------------------------------------------------------------
# String literals: JSON escapes plus \xNN (llguidance's lexer accepts exactly these).

_STRING_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _string_value(tok: _Tok, source: str) -> tuple[str, bool]:
    raw = tok.text
    icase = raw.endswith("i")
    body = raw[1 : -2 if icase else -1]
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in _STRING_ESCAPES:
            out.append(_STRING_ESCAPES[e])
            i += 2
        elif e in "xu" and re.fullmatch(r"[0-9a-fA-F]+", body[i + 2 : i + (4 if e == "x" else 6)] or "-"):
            width = 2 if e == "x" else 4
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width:
                raise GrammarError("bad escape in string", code=CODE_SYNTAX, source=source, offset=tok.offset + 1 + i)
            cp = int(digits, 16)
            i += 2 + width
            if 0xD800 <= cp <= 0xDBFF and body.startswith("\\u", i):  # UTF-16 surrogate pair
                low = int(body[i + 2 : i + 6], 16) if re.fullmatch(r"[0-9a-fA-F]{4}", body[i + 2 : i + 6]) else 0
                if 0xDC00 <= low <= 0xDFFF:
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
            if 0xD800 <= cp <= 0xDFFF:
                raise GrammarError(
                    "lone surrogate in string", code=CODE_SYNTAX, source=source, offset=tok.offset + 1 + i
                )
            out.append(chr(cp))
        else:
            raise GrammarError(
                f"bad escape \\{e} in string (JSON escapes and \\xNN only)",
                code=CODE_SYNTAX,
                source=source,
                offset=tok.offset + 1 + i,
            )
    return "".join(out), icase


# ---------------------------------------------------------------------------------------------
# Parser.


@dataclass
class _Open:
    """One open ``(`` or ``[``: finished alternatives and the sequence being read."""

    closer: str
    offset: int
    alts: list[Expr] = field(default_factory=list)
    items: list[Expr] = field(default_factory=list)
    seq_offset: int = 0


class _Parser:
    def __init__(self, text: str, limits: Limits) -> None:
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0
        self.limits = limits

    # -- helpers ----------------------------------------------------------------------------

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def error(self, message: str, offset: int | None = None) -> GrammarError:
        at = self.tok.offset if offset is None else offset
        return GrammarError(message, code=CODE_SYNTAX, source=self.text, offset=at)

    def is_punct(self, text: str) -> bool:
        return self.tok.kind == "punct" and self.tok.text == text

    def expect_punct(self, text: str) -> _Tok:
        if not self.is_punct(text):
            raise self.error(f"expected {text!r}, found {self.tok.text or 'end of input'!r}")
        t = self.tok
        self.i += 1
        return t

    def end_statement(self) -> None:
        if self.tok.kind == "newline":
            self.i += 1
        elif self.tok.kind != "eof":
            raise self.error(f"unexpected {self.tok.text!r} (expected the end of the line)")

    # -- file -------------------------------------------------------------------------------

    def parse(self) -> LarkFile:
        out = LarkFile()
        while self.tok.kind != "eof":
            t = self.tok
            if t.kind == "newline":
                self.i += 1
            elif t.kind == "name":
                out.definitions.append(self.definition())
            elif t.kind == "directive":
                self.directive(out)
            else:
                raise self.error(f"expected a rule, a terminal or a %directive, found {t.text!r}")
        return out

    def definition(self) -> Definition:
        t = self.tok
        self.i += 1
        bare = t.text.lstrip("!?")
        terminal = bare.lstrip("_")[:1].isupper()
        if terminal and t.text[0] in "!?":
            raise self.error(f"{t.text[0]!r} applies to rules, not terminals", t.offset)
        d = Definition(bare, terminal, Sequence((), t.offset), t.offset)
        if self.is_punct("{"):
            d.template_offset = self.tok.offset
            while not self.is_punct("}"):
                if self.tok.kind in ("eof", "newline"):
                    raise self.error("unterminated template parameters")
                self.i += 1
            self.i += 1
        if self.is_punct("."):
            d.priority_offset = self.tok.offset
            self.i += 1
            if self.tok.kind != "number":
                raise self.error("expected a priority number after '.'")
            self.i += 1
        if self.is_punct("["):
            d.attributes = self.attributes()
        self.expect_punct(":")
        d.body = self.expansions(d.offset)
        self.end_statement()
        return d

    def attributes(self) -> tuple[tuple[str, int], ...]:
        self.expect_punct("[")
        attrs: list[tuple[str, int]] = []
        while not self.is_punct("]"):
            if self.tok.kind != "name":
                raise self.error("expected an attribute name")
            attrs.append((self.tok.text, self.tok.offset))
            self.i += 1
            if self.is_punct("="):
                self.i += 1
                if self.tok.kind not in ("string", "regex", "number", "name"):
                    raise self.error("expected an attribute value")
                self.i += 1
            if not self.is_punct("]"):
                self.expect_punct(",")
        self.i += 1
        return tuple(attrs)

    def directive(self, out: LarkFile) -> None:
        t = self.tok
        self.i += 1
        if t.text == "%ignore":
            out.ignores.append(self.expansions(t.offset))
        elif t.text == "%import":
            self.import_statement(out, t.offset)
        elif t.text == "%llguidance":
            value = self.json_value()
            if not isinstance(value, dict):
                raise self.error("%llguidance takes a JSON object", t.offset)
            out.options.append((value, t.offset))
        elif t.text in ("%declare", "%override", "%lark", "%regex", "%json"):
            out.refused.append(Unsupported(f"{t.text} statement", t.offset))
            while self.tok.kind not in ("newline", "eof"):
                self.i += 1
        else:
            raise self.error(f"unknown directive {t.text!r}", t.offset)
        self.end_statement()

    def import_statement(self, out: LarkFile, offset: int) -> None:
        parts: list[str] = []
        while True:
            if self.tok.kind != "name":
                raise self.error("expected a module path after %import")
            parts.append(self.tok.text)
            self.i += 1
            if not self.is_punct("."):
                break
            self.i += 1
        if self.is_punct("("):  # %import module (A, B)
            self.i += 1
            while not self.is_punct(")"):
                if self.tok.kind != "name":
                    raise self.error("expected a name in the import list")
                out.imports.append((".".join([*parts, self.tok.text]), self.tok.text, self.tok.offset))
                self.i += 1
                if not self.is_punct(")"):
                    self.expect_punct(",")
            self.i += 1
            return
        if len(parts) < 2:
            raise self.error("expected module.NAME after %import", offset)
        alias = parts[-1]
        if self.is_punct("->"):
            self.i += 1
            if self.tok.kind != "name":
                raise self.error("expected a name after '->'")
            alias = self.tok.text
            self.i += 1
        out.imports.append((".".join(parts), alias, offset))

    def json_value(self) -> Any:
        import json

        if self.tok.kind != "json":
            raise self.error("expected a JSON value")
        t = self.tok
        self.i += 1
        try:
            return json.loads(t.text)
        except json.JSONDecodeError as e:
            raise self.error(f"invalid JSON: {e.msg}", t.offset + e.pos) from None

    # -- expressions ------------------------------------------------------------------------

    def expansions(self, offset: int) -> Expr:
        """Alternatives up to the end of the statement, with an explicit stack for groups."""
        stack = [_Open("", offset, seq_offset=self.tok.offset)]
        while True:
            top = stack[-1]
            t = self.tok
            if t.kind == "newline":
                nxt = self.toks[self.i + 1]
                if len(stack) > 1 or (nxt.kind == "punct" and nxt.text == "|"):
                    self.i += 1  # whitespace inside a group, or a continuation line
                    continue
                break
            if t.kind == "eof":
                break
            if t.kind == "punct" and t.text == "|":
                top.alts.append(_seq(top.items, top.seq_offset))
                top.items = []
                self.i += 1
                top.seq_offset = self.tok.offset
                continue
            if t.kind == "punct" and t.text == "->":
                self.i += 1
                if self.tok.kind != "name":
                    raise self.error("expected an alias name after '->'")
                self.i += 1
                continue
            if t.kind == "punct" and t.text in "([":
                if len(stack) > self.limits.max_nesting:
                    raise LimitExceeded(
                        "max_nesting",
                        self.limits.max_nesting,
                        f"Lark groups nest deeper than that at offset {t.offset}",
                    )
                self.i += 1
                stack.append(_Open(")" if t.text == "(" else "]", t.offset, seq_offset=self.tok.offset))
                continue
            if t.kind == "punct" and t.text in ")]":
                if len(stack) == 1 or t.text != top.closer:
                    raise self.error(f"unbalanced {t.text!r}")
                self.i += 1
                stack.pop()
                top.alts.append(_seq(top.items, top.seq_offset))
                inner = _alt(top.alts, top.offset)
                if top.closer == "]":
                    inner = Quantified(inner, 0, 1, top.offset)
                stack[-1].items.append(self.postfix(inner, top.offset))
                continue
            stack[-1].items.append(self.postfix(self.atom(), t.offset))
        if len(stack) > 1:
            raise self.error(f"missing {stack[-1].closer!r}", stack[-1].offset)
        root = stack[0]
        root.alts.append(_seq(root.items, root.seq_offset))
        return _alt(root.alts, offset)

    def atom(self) -> Expr:
        t = self.tok
        self.i += 1
        if t.kind == "string":
            value, icase = _string_value(t, self.text)
            if self.is_punct(".."):
                self.i += 1
                if self.tok.kind != "string":
                    raise self.error("expected a string after '..'")
                hi, hi_icase = _string_value(self.tok, self.text)
                self.i += 1
                if len(value) != 1 or len(hi) != 1 or icase or hi_icase:
                    raise self.error('a range takes two one-character strings: "a".."z"', t.offset)
                if ord(hi) < ord(value):
                    raise self.error("range out of order", t.offset)
                return StringRange(value, hi, t.offset)
            return StringLit(value, icase, t.offset)
        if t.kind == "regex":
            end = t.text.rindex("/")
            return RegexLit(t.text[1:end], t.text[end + 1 :], t.offset)
        if t.kind == "name":
            if t.text[0] in "!?":
                raise self.error(f"{t.text[0]!r} prefixes a rule definition, not a reference", t.offset)
            return Name(t.text, t.offset)
        if t.kind == "special":
            return _special_token(t, self.text)
        if t.kind == "directive" and t.text == "%json":
            return JsonSchema(self.json_value(), t.offset)
        if t.kind == "directive" and t.text in ("%regex", "%lark"):
            self.json_value()
            return Unsupported(t.text, t.offset)
        if t.kind == "ref":
            return Unsupported("grammar reference (@name)", t.offset)
        if t.kind == "punct" and t.text in "~&":
            return Unsupported(f"regex operator {t.text!r} (and/not)", t.offset)
        raise self.error(f"unexpected {t.text or 'end of input'!r}", t.offset)

    def postfix(self, item: Expr, offset: int) -> Expr:
        for _ in range(self.limits.max_nesting + 1):
            t = self.tok
            if t.kind != "punct":
                return item
            if t.text in "?*+" and len(t.text) == 1:
                self.i += 1
                lo, hi = {"?": (0, 1), "*": (0, None), "+": (1, None)}[t.text]
                item = Quantified(item, lo, hi, t.offset)
            elif t.text == "~":
                self.i += 1
                lo = hi = self.number()
                if self.is_punct(".."):
                    self.i += 1
                    hi = self.number()
                item = self.bounded(item, lo, hi, t.offset)
            elif t.text == "{":
                self.i += 1
                lo2: int | None = self.number() if self.tok.kind == "number" else None
                hi2: int | None = lo2
                if self.is_punct(","):
                    self.i += 1
                    hi2 = self.number() if self.tok.kind == "number" else None
                elif lo2 is None:
                    raise self.error("expected {n}, {m,n}, {m,} or {,n}", t.offset)
                self.expect_punct("}")
                item = self.bounded(item, lo2 or 0, hi2, t.offset)
            else:
                return item
        raise LimitExceeded(
            "max_nesting", self.limits.max_nesting, f"Lark operators stack deeper than that at {offset}"
        )

    def bounded(self, item: Expr, lo: int, hi: int | None, offset: int) -> Quantified:
        limit = self.limits.max_repeat
        if lo > limit or (hi is not None and hi > limit):
            raise LimitExceeded("max_repeat", limit, f"Lark repetition at offset {offset}")
        if hi is not None and hi < lo:
            raise self.error(f"repetition bounds out of order {{{lo},{hi}}}", offset)
        return Quantified(item, lo, hi, offset)

    def number(self) -> int:
        if self.tok.kind != "number":
            raise self.error("expected a number")
        t = self.tok
        self.i += 1
        if len(t.text) > 19:
            raise LimitExceeded("max_repeat", self.limits.max_repeat, f"Lark repetition at offset {t.offset}")
        return int(t.text)


def _seq(items: list[Expr], offset: int) -> Expr:
    return items[0] if len(items) == 1 else Sequence(tuple(items), offset)


def _alt(alts: list[Expr], offset: int) -> Expr:
    return alts[0] if len(alts) == 1 else Alternatives(tuple(alts), offset)


def parse_lark_syntax(text: str, limits: Limits) -> LarkFile:
    """Reads Lark ``text`` into a :class:`LarkFile` (syntax only: names are not resolved)."""
    at = _surrogate_at(text)
    if at >= 0:  # (an escape spelling one is refused where it is read)
        raise GrammarError("lone surrogate, which no UTF-8 text holds", code=CODE_SYNTAX, source=text, offset=at)
    return _Parser(text, limits).parse()
