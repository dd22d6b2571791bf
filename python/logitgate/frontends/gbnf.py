"""GBNF frontend: llama.cpp's grammar dialect -> :class:`~logitgate.grammar.ir.Grammar`.

Dialect (as documented in llama.cpp's grammars/README.md):

- ``name ::= alternatives``; names are ``[A-Za-z0-9_-]+``; ``#`` starts a comment to end of line.
- Spaces and tabs separate tokens anywhere. A newline is whitespace inside parentheses, right after
  ``::=`` and right after ``|``; anywhere else at nesting level 0 it ends the rule body. So a rule body
  can continue on the next line only after ``|`` or inside ``( ... )``.
- Elements: ``"literal"``, ``[class]`` / ``[^class]`` with ``a-z`` ranges, ``.`` (any code point),
  ``( group )``, rule references, and postfix ``* + ? {m} {m,} {m,n} {,n}`` (operators may stack).
- Escapes in literals and classes: ``\\n \\r \\t \\\\ \\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH``, all meaning
  code points (``\\xHH`` is U+00HH, not a raw byte). ``\\-`` and ``\\^`` are accepted too because
  :meth:`Grammar.to_ebnf` prints them inside classes.

Token terminals (llguidance's notation, which llama.cpp shares in part): ``<|im_end|>`` (any text
between ``<`` and ``>``) is the one token of that name, resolved through the vocabulary
(:meth:`logitgate.Vocabulary.token_id`); ``<[128010]>`` a token by id; ``<[128000-128255]>`` and
``<[1,5-9]>`` any one of several; ``<[^1,5-9]>`` any one token but those; ``<[*]>`` any one token;
``!<...>`` negates a name or id list (llama.cpp). They lower to :class:`~logitgate.grammar.ir.TokenSet`:
a whole token, never text. Without a vocabulary (``token_id`` None) a name is a ``gbnf-unknown-token``
error; an unknown name is one too.

Departures from llama.cpp, all rejections of what it accepts: duplicate rule definitions, ``{}`` and
``{,}`` raise :class:`GrammarError`.

IR shape (canonical, so ``parse_gbnf(g.to_ebnf())`` round-trips): a one-item sequence is the item, a
one-branch alternation is the branch, nested sequences/alternations are flattened into their parent,
``""`` is ``Seq(())``, a literal is one :class:`Literal` of its UTF-8 bytes, a class has sorted merged
ranges.

Invariants: the parser is a loop over the text with an explicit stack of open groups (no recursion).
``Limits.max_nesting`` bounds both the parenthesis depth and the depth of every produced IR tree (a
leaf is depth 0; each Seq/Alt/Repeat level adds one), so consumers walking the IR get bounded depth.
Every failure is a :class:`GrammarError` (with source offset) or :class:`LimitExceeded`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from logitgate.errors import GrammarError, LimitExceeded, _surrogate_at
from logitgate.grammar.ir import (
    MAX_CODE_POINT,
    Alt,
    CharClass,
    Grammar,
    Literal,
    Node,
    Ref,
    Repeat,
    Seq,
    TokenSet,
    merge_ranges,
)
from logitgate.limits import DEFAULT_LIMITS, Limits

__all__ = ["parse_gbnf"]

# Stable error codes (one per family).
CODE_SYNTAX = "gbnf-syntax"
CODE_BAD_ESCAPE = "gbnf-bad-escape"
CODE_BAD_CODEPOINT = "gbnf-bad-codepoint"
CODE_BAD_RANGE = "gbnf-bad-range"
CODE_BAD_REPEAT = "gbnf-bad-repeat"
CODE_UNDEFINED_RULE = "gbnf-undefined-rule"
CODE_DUPLICATE_RULE = "gbnf-duplicate-rule"
CODE_MISSING_ROOT = "gbnf-missing-root"
CODE_UNKNOWN_TOKEN = "gbnf-unknown-token"
CODE_BAD_TOKEN_SET = "gbnf-bad-token-set"

# The most ids one ``<[a-b]>`` may spell (larger than any vocabulary).
MAX_TOKEN_SET_IDS = 1 << 22
_TOKEN_ITEM_RE = re.compile(r"\s*([0-9]{1,9})\s*(?:-\s*([0-9]{1,9})\s*)?")

_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")
_STRING_RUN_RE = re.compile(r'[^"\\]+')
_DIGITS_RE = re.compile(r"[0-9]*")
_INLINE_SPACE_RE = re.compile(r"[ \t]*")
_COMMENT_RE = re.compile(r"#[^\r\n]*")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45, "^": 94}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
_ANY = CharClass(((0, MAX_CODE_POINT),))
# More digits than this is certainly above any max_repeat (and avoids int() on huge digit strings).
_MAX_BOUND_DIGITS = 19


def parse_gbnf(
    text: str,
    root: str = "root",
    limits: Limits | None = None,
    token_id: Callable[[str], int | None] | None = None,
) -> Grammar:
    """Parse GBNF ``text`` into a :class:`Grammar` whose start rule is ``root``; ``token_id``
    resolves a token name (``<|im_end|>``) to its id, or None when the vocabulary has none.

    Rules keep their definition order; a rule may be referenced before it is defined.

    Raises:
        GrammarError: malformed text (``code`` is one of the ``gbnf-*`` slugs of this module;
            ``line``/``column`` point at the fault).
        LimitExceeded: ``max_source_bytes``, ``max_nesting`` or ``max_repeat`` was exceeded.

    >>> g = parse_gbnf('root ::= "a" [0-9]{1,3}')
    >>> print(g.to_ebnf(), end="")
    root ::= "a" [0-9]{1,3}
    """
    lim = limits if limits is not None else DEFAULT_LIMITS
    if len(text) > lim.max_source_bytes:
        raise LimitExceeded("max_source_bytes", lim.max_source_bytes, f"GBNF text has {len(text)} characters")
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > lim.max_source_bytes:
        raise LimitExceeded("max_source_bytes", lim.max_source_bytes, f"GBNF text is {size} bytes")
    at = _surrogate_at(text)
    if at >= 0:  # (an escape spelling one is refused where it is read)
        raise GrammarError("lone surrogate, which no UTF-8 text holds", code=CODE_BAD_CODEPOINT, source=text, offset=at)
    return _Parser(text, lim, token_id).parse(root)


@dataclass
class _Group:
    """One open parenthesis level: finished branches plus the sequence being built.

    Items carry their IR depth so ``max_nesting`` is checked where the tree grows.
    """

    open_offset: int
    branches: list[tuple[Node, int]] = field(default_factory=list)
    items: list[tuple[Node, int]] = field(default_factory=list)


def _make_seq(items: list[tuple[Node, int]]) -> tuple[Node, int]:
    """Canonical sequence of ``items`` (flattened) with its IR depth."""
    return _flatten(Seq, items)


def _make_alt(branches: list[tuple[Node, int]]) -> tuple[Node, int]:
    """Canonical alternation of ``branches`` (flattened) with its IR depth."""
    return _flatten(Alt, branches)


def _flatten(kind: type[Seq | Alt], parts: list[tuple[Node, int]]) -> tuple[Node, int]:
    """Splice children of the same ``kind`` into the parent; a single part stands for itself.

    Depths are IR depths (leaf 0). A spliced child of depth d has children of depth at most d-1
    (exactly d-1 for the deepest), so the parent's depth stays exact without revisiting nodes.
    """
    flat: list[Node] = []
    depths: list[int] = []
    for node, depth in parts:
        if isinstance(node, kind):
            flat.extend(node.items)
            if node.items:
                depths.append(depth - 1)
        else:
            flat.append(node)
            depths.append(depth)
    if len(flat) == 1:
        return flat[0], depths[0]
    return kind(tuple(flat)), 1 + max(depths, default=-1)


class _Parser:
    """Single-pass parser over ``text``; ``pos`` is a character offset into it."""

    def __init__(self, text: str, limits: Limits, token_id: Callable[[str], int | None] | None = None) -> None:
        self.token_id = token_id
        self.text = text
        self.n = len(text)
        self.limits = limits
        self.rule: str | None = None  # rule being parsed, for error context
        self.refs: list[tuple[str, int, str]] = []  # (name, offset, referring rule)

    # -- errors -----------------------------------------------------------------------------------

    def _error(self, message: str, code: str, offset: int) -> GrammarError:
        return GrammarError(message, code=code, source=self.text, offset=offset, rule=self.rule)

    def _where(self, offset: int) -> str:
        line = self.text.count("\n", 0, offset) + 1
        column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
        return f"line {line}, column {column}"

    def _check_nest(self, nest: int, offset: int) -> None:
        if nest > self.limits.max_nesting:
            raise LimitExceeded(
                "max_nesting", self.limits.max_nesting, f"GBNF nesting too deep at {self._where(offset)}"
            )

    # -- top level --------------------------------------------------------------------------------

    def parse(self, root: str) -> Grammar:
        text = self.text
        rules: dict[str, Node] = {}
        defined_at: dict[str, int] = {}
        pos = 1 if text.startswith("\ufeff") else 0
        while True:
            pos = self._skip_blank(pos)
            if pos >= self.n:
                break
            name_start = pos
            m = _NAME_RE.match(text, pos)
            if m is None:
                raise self._unexpected(pos, "expected a rule name")
            name = m.group()
            pos = self._skip_inline(m.end())
            if not text.startswith("::=", pos):
                raise self._error(f"expected '::=' after rule name {name!r}", CODE_SYNTAX, pos)
            if name in defined_at:
                raise self._error(
                    f"rule {name!r} is defined twice (first at {self._where(defined_at[name])})",
                    CODE_DUPLICATE_RULE,
                    name_start,
                )
            self.rule = name
            body, pos = self._parse_body(pos + 3)
            rules[name] = body
            defined_at[name] = name_start
            self.rule = None
        if root not in rules:
            raise GrammarError(f"no root rule {root!r} is defined", code=CODE_MISSING_ROOT, source=text, offset=0)
        for name, offset, referrer in self.refs:
            if name not in rules:
                raise GrammarError(
                    f"rule {name!r} is referenced but not defined",
                    code=CODE_UNDEFINED_RULE,
                    source=text,
                    offset=offset,
                    rule=referrer,
                )
        return Grammar(rules=rules, root=root)

    def _skip_blank(self, pos: int) -> int:
        """Skip spaces, tabs, newlines and comments."""
        text, n = self.text, self.n
        while pos < n:
            c = text[pos]
            if c in " \t\r\n":
                pos += 1
            elif c == "#":
                pos = self._skip_comment(pos)
            else:
                break
        return pos

    def _skip_inline(self, pos: int) -> int:
        """Skip spaces, tabs and a trailing comment, stopping at a newline."""
        while True:
            m = _INLINE_SPACE_RE.match(self.text, pos)
            pos = m.end() if m else pos
            if pos < self.n and self.text[pos] == "#":
                pos = self._skip_comment(pos)
            else:
                return pos

    def _skip_comment(self, pos: int) -> int:
        """From a ``#``, return the offset of the ending newline (or the end)."""
        m = _COMMENT_RE.match(self.text, pos)
        assert m is not None  # '#' always matches
        return m.end()

    def _unexpected(self, pos: int, what: str) -> GrammarError:
        c = self.text[pos]
        if self.text.startswith("::=", pos):
            return self._error(
                "unexpected '::=': a rule must start on its own line (a newline right after '::=' or '|'"
                " does not end the previous rule)",
                CODE_SYNTAX,
                pos,
            )
        return self._error(f"unexpected {c!r}: {what}", CODE_SYNTAX, pos)

    # -- rule bodies ------------------------------------------------------------------------------

    def _parse_body(self, pos: int) -> tuple[Node, int]:
        """Parse alternatives from just after ``::=`` to the end of the rule; return (node, offset)."""
        text, n = self.text, self.n
        stack = [_Group(open_offset=pos)]
        newline_ok = True  # right after '::=' or '|' a newline does not end the rule
        while True:
            if pos >= n:
                if len(stack) > 1:
                    raise self._error("unclosed '('", CODE_SYNTAX, stack[-1].open_offset)
                break
            c = text[pos]
            if c == " " or c == "\t":
                pos += 1
                continue
            if c == "#":
                pos = self._skip_comment(pos)
                continue
            if c == "\n" or c == "\r":
                if len(stack) == 1 and not newline_ok:
                    break  # end of this rule's body; the newline is left for the caller
                pos += 1
                continue
            group = stack[-1]
            newline_ok = False
            if c == '"':
                node, pos = self._parse_string(pos)
                group.items.append((node, 0))
            elif c == "[":
                node, pos = self._parse_class(pos)
                group.items.append((node, 0))
            elif c == ".":
                group.items.append((_ANY, 0))
                pos += 1
            elif c == "<" or (c == "!" and text.startswith("<", pos + 1)):
                node, pos = self._parse_token(pos)
                group.items.append((node, 0))
            elif c == "(":
                self._check_nest(len(stack), pos)
                stack.append(_Group(open_offset=pos))
                pos += 1
            elif c == ")":
                if len(stack) == 1:
                    raise self._error("unmatched ')'", CODE_SYNTAX, pos)
                stack.pop()
                group.branches.append(_make_seq(group.items))
                node, depth = _make_alt(group.branches)
                self._check_nest(depth, group.open_offset)
                stack[-1].items.append((node, depth))
                pos += 1
            elif c == "|":
                group.branches.append(_make_seq(group.items))
                group.items = []
                newline_ok = True
                pos += 1
            elif c in "*+?":
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                self._apply_repeat(group, lo, hi, pos)
                pos += 1
            elif c == "{":
                lo, hi, end = self._parse_braces(pos)
                self._apply_repeat(group, lo, hi, pos)
                pos = end
            else:
                m = _NAME_RE.match(text, pos)
                if m is None:
                    raise self._unexpected(pos, "expected a literal, class, group, rule name, '|' or newline")
                self.refs.append((m.group(), pos, self.rule or ""))
                group.items.append((Ref(m.group()), 0))
                pos = m.end()
        top = stack[0]
        top.branches.append(_make_seq(top.items))
        node, depth = _make_alt(top.branches)
        self._check_nest(depth, top.open_offset)
        return node, pos

    def _parse_token(self, pos: int) -> tuple[Node, int]:
        """A token terminal at ``pos`` (``<name>``, ``<[ids]>``, either after ``!``)."""
        start = pos
        negated = self.text[pos] == "!"
        pos += 1 if negated else 0
        end = self.text.find(">", pos + 1)
        newline = min((i for i in (self.text.find("\n", pos), self.text.find("\r", pos)) if i >= 0), default=-1)
        if end < 0 or (0 <= newline < end):
            raise self._error("unclosed token reference: '<' needs a '>' on the same line", CODE_SYNTAX, start)
        inner = self.text[pos + 1 : end]
        if inner.startswith("[") and inner.endswith("]"):
            spec = inner[1:-1].strip()
            if spec.startswith("^"):
                negated = not negated
                spec = spec[1:]
            if spec.strip() == "*":
                if negated:
                    raise self._error("'<[^*]>' matches no token", CODE_BAD_TOKEN_SET, start)
                return TokenSet((), negated=True), end + 1
            ids: set[int] = set()
            for item in spec.split(","):
                m = _TOKEN_ITEM_RE.fullmatch(item)
                if m is None:
                    raise self._error(
                        f"bad token id list {inner!r}: expected ids and ranges like 5,7-9", CODE_BAD_TOKEN_SET, start
                    )
                lo = int(m.group(1))
                hi = int(m.group(2)) if m.group(2) is not None else lo
                if hi < lo or len(ids) + hi - lo + 1 > MAX_TOKEN_SET_IDS:
                    raise self._error(f"bad token id range {lo}-{hi}", CODE_BAD_TOKEN_SET, start)
                ids.update(range(lo, hi + 1))
            return TokenSet(ids, negated=negated), end + 1
        if not inner:
            raise self._error("empty token name '<>'", CODE_SYNTAX, start)
        name = "<" + inner + ">"
        resolved = self.token_id(name) if self.token_id is not None else None
        if resolved is None:
            why = "is not a token of this vocabulary" if self.token_id is not None else "needs a vocabulary to resolve"
            raise self._error(f"token {name} {why}", CODE_UNKNOWN_TOKEN, start)
        return TokenSet((resolved,), negated=negated), end + 1

    def _apply_repeat(self, group: _Group, lo: int, hi: int | None, pos: int) -> None:
        if not group.items:
            raise self._error(f"{self.text[pos]!r} must follow an item to repeat", CODE_SYNTAX, pos)
        node, nest = group.items[-1]
        self._check_nest(nest + 1, pos)
        group.items[-1] = (Repeat(node, lo, hi), nest + 1)

    def _parse_braces(self, pos: int) -> tuple[int, int | None, int]:
        """Parse ``{m}``, ``{m,}``, ``{m,n}`` or ``{,n}`` at ``pos``; return (min, max, end offset)."""
        start = pos
        pos = self._skip_spaces(pos + 1)
        lo_text, pos = self._digits(pos)
        pos = self._skip_spaces(pos)
        hi_text: str | None
        if pos < self.n and self.text[pos] == ",":
            pos = self._skip_spaces(pos + 1)
            hi_text, pos = self._digits(pos)
            pos = self._skip_spaces(pos)
        else:
            hi_text = lo_text
        if pos >= self.n or self.text[pos] != "}":
            raise self._error("expected '}' to close the repetition bounds", CODE_BAD_REPEAT, pos)
        if not lo_text and not hi_text:
            raise self._error("repetition bounds need at least one number", CODE_BAD_REPEAT, start)
        lo = self._bound(lo_text, start) if lo_text else 0
        hi = self._bound(hi_text, start) if hi_text else None
        if hi is not None and hi < lo:
            raise self._error(f"repetition minimum {lo} exceeds maximum {hi}", CODE_BAD_REPEAT, start)
        return lo, hi, pos + 1

    def _bound(self, digits: str, offset: int) -> int:
        digits = digits.lstrip("0") or "0"
        cap = self.limits.max_repeat
        if len(digits) > _MAX_BOUND_DIGITS or int(digits) > cap:
            raise LimitExceeded("max_repeat", cap, f"repetition bound {digits[:30]} at {self._where(offset)}")
        return int(digits)

    def _digits(self, pos: int) -> tuple[str, int]:
        m = _DIGITS_RE.match(self.text, pos)
        assert m is not None  # [0-9]* always matches
        return m.group(), m.end()

    def _skip_spaces(self, pos: int) -> int:
        m = _INLINE_SPACE_RE.match(self.text, pos)
        return m.end() if m else pos

    # -- terminals --------------------------------------------------------------------------------

    def _parse_string(self, pos: int) -> tuple[Node, int]:
        start = pos
        text, n = self.text, self.n
        parts: list[str] = []
        pos += 1
        while True:
            if pos >= n:
                raise self._error("unterminated string literal", CODE_SYNTAX, start)
            c = text[pos]
            if c == '"':
                pos += 1
                break
            if c == "\\":
                cp, pos = self._parse_escape(pos, start)
                parts.append(chr(cp))
                continue
            m = _STRING_RUN_RE.match(text, pos)
            assert m is not None  # text[pos] is neither '"' nor '\\'
            parts.append(m.group())
            pos = m.end()
        value = "".join(parts).encode("utf-8")
        return (Literal(value) if value else Seq(())), pos

    def _parse_class(self, pos: int) -> tuple[Node, int]:
        start = pos
        text, n = self.text, self.n
        pos += 1
        negated = pos < n and text[pos] == "^"
        if negated:
            pos += 1
        ranges: list[tuple[int, int]] = []
        while True:
            if pos >= n:
                raise self._error("unterminated character class", CODE_SYNTAX, start)
            if text[pos] == "]":
                pos += 1
                break
            lo_offset = pos
            lo, pos = self._class_char(pos, start)
            hi = lo
            if pos + 1 < n and text[pos] == "-" and text[pos + 1] != "]":
                hi, pos = self._class_char(pos + 1, start)
                if hi < lo:
                    raise self._error(f"class range {lo:#x}-{hi:#x} is reversed", CODE_BAD_RANGE, lo_offset)
            ranges.append((lo, hi))
        return CharClass(merge_ranges(ranges), negated), pos

    def _class_char(self, pos: int, start: int) -> tuple[int, int]:
        if pos >= self.n:
            raise self._error("unterminated character class", CODE_SYNTAX, start)
        c = self.text[pos]
        if c == "\\":
            return self._parse_escape(pos, start)
        return ord(c), pos + 1

    def _parse_escape(self, pos: int, start: int) -> tuple[int, int]:
        """Decode the escape at ``pos`` (a backslash) inside the literal/class opened at ``start``."""
        if pos + 1 >= self.n:
            what = "string literal" if self.text[start] == '"' else "character class"
            raise self._error(f"unterminated {what}", CODE_SYNTAX, start)
        e = self.text[pos + 1]
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e], pos + 2
        width = _HEX_ESCAPES.get(e)
        if width is None:
            raise self._error(f"unknown escape '\\{e}'", CODE_BAD_ESCAPE, pos)
        digits = self.text[pos + 2 : pos + 2 + width]
        if len(digits) != width or not all(d in _HEX_DIGITS for d in digits):
            raise self._error(f"'\\{e}' needs exactly {width} hex digits", CODE_BAD_ESCAPE, pos)
        cp = int(digits, 16)
        if cp > MAX_CODE_POINT or 0xD800 <= cp <= 0xDFFF:
            raise self._error(f"invalid code point U+{cp:04X}", CODE_BAD_CODEPOINT, pos)
        return cp, pos + 2 + width
