"""Regex frontend: the common subset of ECMA-262 and Python ``re`` lowered to the Grammar IR.

Owns parsing a pattern into a small internal tree, resolving ``^``/``$`` anchors, and lowering
the tree to IR nodes (:class:`Literal` runs, :class:`CharClass`, :class:`Seq`, :class:`Alt`,
:class:`Repeat`). Two entry points:

- :func:`parse_regex` -- the whole output must match the pattern (one rule ``root``).
- :func:`regex_to_node` -- the node alone, for reuse by the JSON Schema frontend; with
  ``anchored_search=True`` it has JSON Schema ``pattern`` semantics (the pattern may match
  anywhere unless anchored), expressed by an any-string on each unanchored side.

Semantics (where ECMA and Python disagree, ECMA wins, since JSON Schema patterns are ECMA):

- ``.`` is any code point except ``\\n \\r \\u2028 \\u2029``; ``\\d \\w \\s`` have ECMA meanings
  (``\\s`` includes the Unicode space separators and U+FEFF).
- A ``{`` that does not start a valid quantifier, and an unbalanced ``]`` or ``}``, are literals
  (ECMA Annex B); a class escape at a range end (``[\\d-z]``) makes the ``-`` literal.
- ``(?i)`` at the very start folds ASCII letters only (``k`` also matches ``K`` but not U+212A;
  non-ASCII letters stay case-sensitive); no other inline flag is accepted.
- ``\\p{..}``/``\\P{..}`` accept General_Category values (short or long names, optionally as
  ``gc=``/``General_Category=``) and ``Any``, ``ASCII``, ``Assigned``; scripts are rejected.
- ``^`` and ``$`` are exact only where they sit on the leading/trailing edge of the whole pattern,
  possibly through groups and alternation (``^a$|^b$``, ``(^a|b)$``); anywhere else they raise.

Invariants: the parser is a loop over an explicit frame stack and lowering is an explicit
post-order walk, so pattern nesting never turns into Python recursion; group depth is bounded
by ``Limits.max_nesting`` and quantifier bounds by ``Limits.max_repeat``. Every failure is a
:class:`GrammarError` (code ``regex-syntax`` or ``regex-unsupported``, with the pattern and the
offset of the fault) or a :class:`LimitExceeded`.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass, field

from logitgate.errors import GrammarError, LimitExceeded
from logitgate.grammar.ir import (
    EMPTY,
    Alt,
    CharClass,
    Grammar,
    Literal,
    Node,
    Repeat,
    Seq,
    complement_ranges,
    merge_ranges,
)
from logitgate.limits import Limits

__all__ = ["ANY_STRING", "parse_regex", "regex_to_node"]

_SYNTAX = "regex-syntax"
_UNSUPPORTED = "regex-unsupported"

Ranges = tuple[tuple[int, int], ...]

_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE: Ranges = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
_DOT_EXCLUDED: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_ANY: Ranges = ((0, 0x10FFFF),)
# Any string: what search mode (``anchored_search=True``) puts on each edge a pattern leaves open.
ANY_STRING = Repeat(CharClass(_ANY), 0, None)


# ---------------------------------------------------------------------------------------------
# Internal tree. Mutable so anchor resolution can edit sequences in place; each object occurs
# once in the tree, so identity (id()) is a valid key while lowering.


@dataclass(eq=False)
class _Char:
    cp: int


@dataclass(eq=False)
class _Set:
    ranges: Ranges
    negated: bool = False


@dataclass(eq=False)
class _Group:
    alts: list[list[_Item]]
    offset: int


@dataclass(eq=False)
class _Rep:
    item: _Item
    lo: int
    hi: int | None


@dataclass(eq=False)
class _Anchor:
    kind: str  # "^" or "$"
    offset: int


@dataclass(eq=False)
class _AnyString:
    """Inserted by search mode on an unanchored edge: any code points, newlines included."""


_Item = _Char | _Set | _Group | _Rep | _Anchor | _AnyString


@dataclass
class _Frame:
    offset: int  # of the "(" (0 for the implicit top-level frame)
    alts: list[list[_Item]] = field(default_factory=list)
    cur: list[_Item] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Range arithmetic.


def _fold_ascii(ranges: Ranges) -> Ranges:
    """Add the other ASCII case of every ASCII letter in ``ranges``."""
    extra: list[tuple[int, int]] = []
    for lo, hi in ranges:
        for a, b, shift in ((0x41, 0x5A, 32), (0x61, 0x7A, -32)):
            s, e = max(lo, a), min(hi, b)
            if s <= e:
                extra.append((s + shift, e + shift))
    return merge_ranges(list(ranges) + extra) if extra else ranges


# ---------------------------------------------------------------------------------------------
# Unicode properties (computed from unicodedata once, cached).

_GC_LONG = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc", "Enclosing_Mark": "Me",
    "Number": "N", "Decimal_Number": "Nd", "digit": "Nd", "Letter_Number": "Nl", "Other_Number": "No",
    "Punctuation": "P", "punct": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
    "Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi",
    "Final_Punctuation": "Pf", "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm",
    "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z",
    "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp", "Other": "C",
    "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs", "Private_Use": "Co",
    "Unassigned": "Cn",
}  # fmt: skip
_GC_SHORT = {v for v in _GC_LONG.values()}


@functools.lru_cache(maxsize=1)
def _category_table() -> dict[str, Ranges]:
    """Two-letter General_Category -> ranges, from one pass over every code point."""
    acc: dict[str, list[tuple[int, int]]] = {}
    cur_cat = unicodedata.category(chr(0))
    start = 0
    for cp in range(1, 0x110000):
        cat = unicodedata.category(chr(cp))
        if cat != cur_cat:
            acc.setdefault(cur_cat, []).append((start, cp - 1))
            cur_cat, start = cat, cp
    acc.setdefault(cur_cat, []).append((start, 0x10FFFF))
    return {k: tuple(v) for k, v in acc.items()}


@functools.lru_cache(maxsize=256)
def _category_ranges(short: str) -> Ranges:
    table = _category_table()
    if short == "LC":
        return merge_ranges(list(table.get("Lu", ())) + list(table.get("Ll", ())) + list(table.get("Lt", ())))
    if len(short) == 1:
        merged: list[tuple[int, int]] = []
        for cat, rs in table.items():
            if cat[0] == short:
                merged.extend(rs)
        return merge_ranges(merged)
    return table.get(short, ())


def _property_ranges(name: str) -> Ranges | None:
    """Ranges of a ``\\p{name}`` value, or None when the property is not supported."""
    if "=" in name:
        key, _, value = name.partition("=")
        if key not in ("gc", "General_Category"):
            return None
        name = value
    if name == "Any":
        return _ANY
    if name == "ASCII":
        return ((0, 0x7F),)
    if name == "Assigned":
        return complement_ranges(_category_ranges("Cn"))
    short = _GC_LONG.get(name, name)
    if short in _GC_SHORT:
        return _category_ranges(short)
    return None


# ---------------------------------------------------------------------------------------------
# Parser.

_HEX = "0123456789abcdefABCDEF"
_QUANT_START = "*+?{"


class _Parser:
    """Single pass over the pattern with an explicit stack of open groups."""

    def __init__(self, pattern: str, limits: Limits) -> None:
        self.p = pattern
        self.n = len(pattern)
        self.i = 0
        self.limits = limits
        self.icase = False

    # -- errors -------------------------------------------------------------------------------

    def syntax(self, msg: str, offset: int) -> GrammarError:
        return GrammarError(f"regex syntax error: {msg}", code=_SYNTAX, source=self.p, offset=offset)

    def unsupported(self, construct: str, offset: int, detail: str = "") -> GrammarError:
        msg = f"regex construct not supported: {construct}" + (f" ({detail})" if detail else "")
        return GrammarError(msg, code=_UNSUPPORTED, source=self.p, offset=offset)

    # -- main loop ----------------------------------------------------------------------------

    def parse(self) -> _Group:
        p = self.p
        if p.startswith("(?i)"):
            self.icase = True
            self.i = 4
        stack: list[_Frame] = [_Frame(0)]
        while self.i < self.n:
            c = p[self.i]
            top = stack[-1]
            if c == "(":
                self.open_group(stack)
                continue
            if c == ")":
                if len(stack) == 1:
                    raise self.syntax("unbalanced ')'", self.i)
                frame = stack.pop()
                frame.alts.append(frame.cur)
                self.i += 1
                stack[-1].cur.append(_Group(frame.alts, frame.offset))
                self.quantifier(stack[-1].cur)
                continue
            if c == "|":
                top.alts.append(top.cur)
                top.cur = []
                self.i += 1
                continue
            if c in "^$":
                top.cur.append(_Anchor(c, self.i))
                self.i += 1
                continue
            if c in "*+?":
                raise self.syntax(f"nothing to repeat before {c!r}", self.i)
            if c == "{" and self.read_braces(self.i) is not None:
                raise self.syntax("nothing to repeat before '{'", self.i)
            top.cur.append(self.atom())
            self.quantifier(top.cur)
        if len(stack) > 1:
            raise self.syntax("unbalanced '(': missing ')'", stack[-1].offset)
        root = stack[0]
        root.alts.append(root.cur)
        return _Group(root.alts, 0)

    def open_group(self, stack: list[_Frame]) -> None:
        p, start = self.p, self.i
        if len(stack) > self.limits.max_nesting:
            raise LimitExceeded(
                "max_nesting", self.limits.max_nesting, f"regex groups nest deeper than that at offset {start}"
            )
        if not p.startswith("(?", start):
            self.i += 1
            stack.append(_Frame(start))
            return
        rest = p[start + 2 : start + 4]
        if rest.startswith(":"):
            self.i += 3
        elif rest.startswith("="):
            raise self.unsupported("lookahead", start, "(?=...)")
        elif rest.startswith("!"):
            raise self.unsupported("lookahead", start, "(?!...)")
        elif rest in ("<=", "<!"):
            raise self.unsupported("lookbehind", start, f"(?{rest}...)")
        elif rest.startswith(">"):
            raise self.unsupported("atomic group", start, "(?>...)")
        elif rest.startswith("("):
            raise self.unsupported("conditional", start, "(?(...)...)")
        elif rest.startswith("#"):
            end = p.find(")", start)
            if end < 0:
                raise self.syntax("unterminated comment", start)
            self.i = end + 1  # Python comment group: matches the empty string
            return
        elif rest == "P=":
            raise self.unsupported("backreference", start, "(?P=name)")
        elif rest.startswith("<") or rest == "P<":
            name_start = start + (3 if rest.startswith("<") else 4)
            end = p.find(">", name_start)
            name = p[name_start:end] if end >= 0 else ""
            if end < 0 or not name or not all(ch.isalnum() or ch in "_$" for ch in name) or name[0].isdigit():
                raise self.syntax("bad group name", name_start)
            self.i = end + 1
        elif rest[:1].isalpha() or rest[:1] == "-":
            raise self.unsupported("inline flag", start, "only (?i) at the very start is accepted")
        else:
            raise self.syntax("unknown group extension", start)
        stack.append(_Frame(start))

    # -- quantifiers --------------------------------------------------------------------------

    def read_braces(self, at: int) -> tuple[int, int | None, int] | None:
        """Parse ``{n}``, ``{n,}``, ``{n,m}`` at ``at``: (lo, hi, end) or None if not a quantifier."""
        p, j = self.p, at + 1
        k = j
        while k < self.n and p[k].isdigit() and p[k].isascii():
            k += 1
        if k == j:
            return None
        lo = int(p[j:k])
        if k < self.n and p[k] == "}":
            return lo, lo, k + 1
        if k >= self.n or p[k] != ",":
            return None
        m = k + 1
        while m < self.n and p[m].isdigit() and p[m].isascii():
            m += 1
        if m >= self.n or p[m] != "}":
            return None
        hi = int(p[k + 1 : m]) if m > k + 1 else None
        return lo, hi, m + 1

    def quantifier(self, cur: list[_Item]) -> None:
        if self.i >= self.n:
            return
        p, start = self.p, self.i
        c = p[start]
        lo: int
        hi: int | None
        if c == "*":
            lo, hi, end = 0, None, start + 1
        elif c == "+":
            lo, hi, end = 1, None, start + 1
        elif c == "?":
            lo, hi, end = 0, 1, start + 1
        elif c == "{":
            braces = self.read_braces(start)
            if braces is None:
                return  # Annex B: a literal '{', read as the next atom
            lo, hi, end = braces
            if hi is not None and hi < lo:
                raise self.syntax(f"numbers out of order in quantifier {{{lo},{hi}}}", start)
            limit = self.limits.max_repeat
            if lo > limit or (hi is not None and hi > limit):
                raise LimitExceeded("max_repeat", limit, f"regex quantifier {p[start:end]} at offset {start}")
        else:
            return
        if end < self.n and p[end] == "?":
            end += 1  # lazy: same language
        elif end < self.n and p[end] == "+":
            raise self.unsupported("possessive quantifier", end)
        self.i = end
        cur[-1] = _Rep(cur[-1], lo, hi)
        if end < self.n and (p[end] in "*+?" or (p[end] == "{" and self.read_braces(end) is not None)):
            raise self.syntax("multiple repeat", end)

    # -- atoms --------------------------------------------------------------------------------

    def char_item(self, cp: int) -> _Item:
        if self.icase and (0x41 <= cp <= 0x5A or 0x61 <= cp <= 0x7A):
            return _Set(_fold_ascii(((cp, cp),)))
        return _Char(cp)

    def set_item(self, ranges: Ranges, negated: bool = False) -> _Set:
        ranges = merge_ranges(ranges)
        if self.icase:
            ranges = _fold_ascii(ranges)
        return _Set(ranges, negated)

    def atom(self) -> _Item:
        p, start = self.p, self.i
        c = p[start]
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return _Set(_DOT_EXCLUDED, True)
        if c == "\\":
            kind, value = self.escape(in_class=False)
            if kind == "set":
                assert isinstance(value, tuple)
                return self.set_item(value)
            assert isinstance(value, int)
            return self.code_point_item(value, start)
        cp = ord(c)
        self.i += 1
        if 0xD800 <= cp <= 0xDFFF:
            raise self.unsupported("lone surrogate", start, "cannot occur in UTF-8 output")
        return self.char_item(cp)

    def code_point_item(self, cp: int, start: int) -> _Item:
        if 0xD800 <= cp <= 0xDFFF:
            raise self.unsupported("lone surrogate", start, "cannot occur in UTF-8 output")
        return self.char_item(cp)

    def hex_digits(self, at: int, count: int) -> int | None:
        s = self.p[at : at + count]
        if len(s) == count and all(ch in _HEX for ch in s):
            return int(s, 16)
        return None

    def escape(self, in_class: bool) -> tuple[str, int | Ranges]:
        """Read an escape at ``self.i`` (a backslash). Returns ("cp", code point) or ("set", ranges)."""
        p, start = self.p, self.i
        if start + 1 >= self.n:
            raise self.syntax("pattern ends with a lone backslash", start)
        c = p[start + 1]
        self.i = start + 2
        simple = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "v": 0x0B}
        if c in simple:
            return "cp", simple[c]
        if c in "dDwWsS":
            base = {"d": _DIGIT, "w": _WORD, "s": _SPACE}[c.lower()]
            return "set", (base if c.islower() else complement_ranges(base))
        if c == "b":
            if in_class:
                return "cp", 0x08
            raise self.unsupported("word boundary", start, "\\b")
        if c == "B":
            raise self.unsupported("word boundary", start, "\\B")
        if c == "0":
            j = self.i
            while j < self.n and j < start + 4 and p[j] in "01234567":
                j += 1
            self.i = j
            return "cp", int(p[start + 1 : j], 8)
        if c in "1234567" and in_class:  # octal in a class (ECMA Annex B and Python agree)
            j = self.i
            while j < self.n and j < start + 4 and p[j] in "01234567":
                j += 1
            self.i = j
            return "cp", int(p[start + 1 : j], 8)
        if c in "123456789":
            if in_class:
                raise self.syntax(f"bad escape \\{c} in class", start)
            raise self.unsupported("backreference", start, f"\\{c}")
        if c == "k":
            raise self.unsupported("backreference", start, "\\k<name>")
        if c == "x":
            v = self.hex_digits(start + 2, 2)
            if v is None:
                raise self.syntax("bad \\x escape (expected two hex digits)", start)
            self.i = start + 4
            return "cp", v
        if c == "u":
            return "cp", self.unicode_escape(start)
        if c == "c":
            if start + 2 < self.n and p[start + 2].isascii() and p[start + 2].isalpha():
                self.i = start + 3
                return "cp", ord(p[start + 2]) % 32
            raise self.syntax("bad \\c escape (expected an ASCII letter)", start)
        if c in "pP":
            return "set", self.property_escape(start, negated=c == "P")
        if c in "AZzGQEeaUNhHRXKlLg":
            raise self.unsupported("dialect-specific escape", start, f"\\{c} has no common ECMA-262/Python meaning")
        if c.isascii() and c.isalnum():
            raise self.syntax(f"bad escape \\{c}", start)
        return "cp", ord(c)  # identity escape of punctuation or a non-ASCII character

    def unicode_escape(self, start: int) -> int:
        p = self.p
        if start + 2 < self.n and p[start + 2] == "{":
            end = p.find("}", start + 3)
            digits = p[start + 3 : end] if end >= 0 else ""
            if not digits or len(digits) > 8 or not all(ch in _HEX for ch in digits) or int(digits, 16) > 0x10FFFF:
                raise self.syntax("bad \\u{...} escape", start)
            self.i = end + 1
            return int(digits, 16)
        v = self.hex_digits(start + 2, 4)
        if v is None:
            raise self.syntax("bad \\u escape (expected four hex digits)", start)
        self.i = start + 6
        if 0xD800 <= v <= 0xDBFF and p.startswith("\\u", self.i):
            low = self.hex_digits(self.i + 2, 4)
            if low is not None and 0xDC00 <= low <= 0xDFFF:  # UTF-16 pair: one astral code point
                self.i += 6
                return 0x10000 + ((v - 0xD800) << 10) + (low - 0xDC00)
        return v

    def property_escape(self, start: int, negated: bool) -> Ranges:
        p = self.p
        if start + 2 >= self.n or p[start + 2] != "{":
            raise self.syntax("bad \\p escape (expected '{')", start)
        end = p.find("}", start + 3)
        if end < 0:
            raise self.syntax("unterminated \\p{...}", start)
        name = p[start + 3 : end]
        ranges = _property_ranges(name)
        if ranges is None:
            raise self.unsupported(
                "unicode property", start, f"\\p{{{name}}}: only General_Category, Any, ASCII, Assigned"
            )
        self.i = end + 1
        return complement_ranges(ranges) if negated else ranges

    def char_class(self) -> _Set:
        p, start = self.p, self.i
        self.i += 1
        negated = False
        if self.i < self.n and p[self.i] == "^":
            negated = True
            self.i += 1
        ranges: list[tuple[int, int]] = []
        while True:
            if self.i >= self.n:
                raise self.syntax("unterminated character class", start)
            if p[self.i] == "]":
                self.i += 1
                break
            lo_at = self.i
            lo_kind, lo_val = self.class_atom()
            if self.i + 1 < self.n and p[self.i] == "-" and p[self.i + 1] != "]":
                self.i += 1
                hi_kind, hi_val = self.class_atom()
                if lo_kind == "set" or hi_kind == "set":
                    # Annex B: a class escape at a range end makes '-' literal.
                    for kind, val in ((lo_kind, lo_val), (hi_kind, hi_val)):
                        self.add_class_part(ranges, kind, val)
                    ranges.append((0x2D, 0x2D))
                    continue
                assert isinstance(lo_val, int) and isinstance(hi_val, int)
                if hi_val < lo_val:
                    raise self.syntax("bad character range (out of order)", lo_at)
                ranges.append((lo_val, hi_val))
                continue
            self.add_class_part(ranges, lo_kind, lo_val)
        return self.set_item(tuple(ranges), negated)

    @staticmethod
    def add_class_part(ranges: list[tuple[int, int]], kind: str, val: int | Ranges) -> None:
        if isinstance(val, int):
            ranges.append((val, val))
        else:
            ranges.extend(val)

    def class_atom(self) -> tuple[str, int | Ranges]:
        p = self.p
        c = p[self.i]
        if c == "\\":
            return self.escape(in_class=True)
        self.i += 1
        return "cp", ord(c)


# ---------------------------------------------------------------------------------------------
# Anchors and lowering.


def _resolve_anchors(root: _Group, search: bool) -> None:
    """Drop ``^``/``$`` on the leading/trailing edges; in search mode pad the unanchored edges.

    Walks only the edge spine (first/last items, through plain groups), with a worklist.
    Anchors left anywhere else are rejected while lowering.
    """
    for leading in (True, False):
        kind = "^" if leading else "$"
        # (sequence, already anchored by an enclosing edge anchor)
        work: list[tuple[list[_Item], bool]] = [(alt, False) for alt in root.alts]
        while work:
            seq, anchored = work.pop()
            while seq:
                edge = seq[0] if leading else seq[-1]
                if not (isinstance(edge, _Anchor) and edge.kind == kind):
                    break
                seq.pop(0 if leading else -1)
                anchored = True
            edge_item = (seq[0] if leading else seq[-1]) if seq else None
            if isinstance(edge_item, _Group) and (anchored or not search or _edge_has_anchor(edge_item, leading)):
                work.extend((alt, anchored) for alt in edge_item.alts)
            elif search and not anchored and not (len(seq) == 1 and isinstance(seq[0], _AnyString)):
                _trim_edge_repeats(seq, leading)
                seq.insert(0 if leading else len(seq), _AnyString())


def _trim_edge_repeats(seq: list[_Item], leading: bool) -> None:
    """Cut a character repetition on an edge that search mode pads down to its minimum count.

    Next to an any-string, ``x{m,n}`` is ``x{m}``: a match with more of them is a match with m
    and more any-string. The same language with far fewer automaton states: the counted
    positions of ``[a-z]{1,255}`` would otherwise be distinct states, and a key or string of such
    a pattern a distinct parse configuration per character read. (Only single characters and
    classes: a group may hold anchors, whose errors must stay.)
    """
    while seq:
        k = 0 if leading else len(seq) - 1
        rep = seq[k]
        if not (isinstance(rep, _Rep) and isinstance(rep.item, _Char | _Set) and rep.hi != rep.lo):
            return
        if rep.lo > 0:
            seq[k] = _Rep(rep.item, rep.lo, rep.lo)
            return
        seq.pop(k)  # x{0,n} or x*: nothing at all


def _edge_has_anchor(group: _Group, leading: bool) -> bool:
    """Whether an edge anchor of ``group`` is reachable along its leading/trailing spine.

    Search mode pads a group's branches one by one only when some branch is anchored; otherwise
    one any-string outside the group is the same language with less ambiguity.
    """
    work = [group]
    while work:
        g = work.pop()
        for alt in g.alts:
            edge = (alt[0] if leading else alt[-1]) if alt else None
            if isinstance(edge, _Anchor):
                return True
            if isinstance(edge, _Group):
                work.append(edge)
    return False


def _lower(root: _Group, pattern: str) -> Node:
    """Post-order walk with an explicit stack; merges runs of code points into one Literal."""
    done: dict[int, Node] = {}
    stack: list[tuple[_Item, bool]] = [(root, False)]
    while stack:
        item, expanded = stack.pop()
        if isinstance(item, _Char):
            done[id(item)] = Literal(chr(item.cp).encode("utf-8"))
        elif isinstance(item, _Set):
            done[id(item)] = CharClass(item.ranges, item.negated)
        elif isinstance(item, _AnyString):
            done[id(item)] = ANY_STRING
        elif isinstance(item, _Anchor):
            raise GrammarError(
                f"regex construct not supported: anchor {item.kind!r} away from the start/end of the pattern",
                code=_UNSUPPORTED,
                source=pattern,
                offset=item.offset,
            )
        elif isinstance(item, _Rep):
            if not expanded:
                stack.append((item, True))
                stack.append((item.item, False))
            else:
                inner = done.pop(id(item.item))
                if item.hi == 0:
                    done[id(item)] = EMPTY
                elif item.lo == 1 and item.hi == 1:
                    done[id(item)] = inner
                else:
                    done[id(item)] = Repeat(inner, item.lo, item.hi)
        else:
            if not expanded:
                stack.append((item, True))
                for alt in item.alts:
                    for sub in alt:
                        if not isinstance(sub, _Char):
                            stack.append((sub, False))
            else:
                branches: list[Node] = []
                for alt in item.alts:
                    parts: list[Node] = []
                    run = bytearray()
                    for sub in alt:
                        if isinstance(sub, _Char):
                            run += chr(sub.cp).encode("utf-8")
                            continue
                        if run:
                            parts.append(Literal(bytes(run)))
                            run = bytearray()
                        node = done.pop(id(sub))
                        if isinstance(node, Seq):
                            parts.extend(node.items)  # flatten nested sequences
                        else:
                            parts.append(node)
                    if run:
                        parts.append(Literal(bytes(run)))
                    branches.append(parts[0] if len(parts) == 1 else Seq(tuple(parts)))
                if len(branches) > 1:
                    branches = _share_any_string(branches, (True, False))
                done[id(item)] = _alt_node(branches)
    return done[id(root)]


def _alt_node(items: list[Node]) -> Node:
    return items[0] if len(items) == 1 else Alt(tuple(items))


def _share_any_string(branches: list[Node], sides: tuple[bool, ...]) -> list[Node]:
    """``.*a|.*b`` -> ``.*(a|b)`` and ``a.*|b.*`` -> ``(a|b).*``: the same language. Search mode
    pads every branch of an alternation on its own (``^x|y|z$``), and each copy of the loop would
    run beside the others in every automaton state: determinizing ``^dev|alpha|beta|rc|RC|stable$``
    as a JSON string took 5 ms with six loops and 0.5 ms with two. Recursion depth: len(sides)."""
    for k, leading in enumerate(sides):
        shared: list[Node] = []
        rest: list[Node] = []
        for b in branches:
            items = b.items if isinstance(b, Seq) else (b,)
            if len(items) > 1 and items[0 if leading else -1] == ANY_STRING:
                left = items[1:] if leading else items[:-1]
                shared.append(left[0] if len(left) == 1 else Seq(left))
            else:
                rest.append(b)
        if len(shared) < 2:
            continue
        shared = _share_any_string(shared, sides[k + 1 :])
        inner = shared[0].items if len(shared) == 1 and isinstance(shared[0], Seq) else (_alt_node(shared),)
        rest.append(Seq((ANY_STRING, *inner) if leading else (*inner, ANY_STRING)))
        branches = rest
    return branches


def regex_to_node(
    pattern: str, limits: Limits | None = None, *, anchored_search: bool = False
) -> tuple[Node, dict[str, Node]]:
    """Lower ``pattern`` to one IR node plus helper rules (currently always empty).

    ``anchored_search=False``: the node matches exactly the strings the pattern matches in full.
    ``anchored_search=True``: JSON Schema ``pattern`` semantics -- strings *containing* a match,
    i.e. an any-string is added on each side the pattern does not anchor with ``^``/``$``.

    Raises GrammarError (``regex-syntax``/``regex-unsupported``) or LimitExceeded.
    """
    limits = limits or Limits()
    size = len(pattern.encode("utf-8", "surrogatepass"))
    if size > limits.max_source_bytes:
        raise LimitExceeded("max_source_bytes", limits.max_source_bytes, f"regex is {size} bytes")
    root = _Parser(pattern, limits).parse()
    _resolve_anchors(root, anchored_search)
    return _lower(root, pattern), {}


def parse_regex(pattern: str, limits: Limits | None = None) -> Grammar:
    """Grammar whose one rule ``root`` matches exactly the strings ``pattern`` fully matches.

    >>> print(parse_regex(r"^[a-c]\\d{2,3}$").to_ebnf())
    root ::= [a-c] [0-9]{2,3}
    <BLANKLINE>
    """
    node, helpers = regex_to_node(pattern, limits)
    return Grammar({"root": node, **helpers})
