"""JSON text building blocks shared by the JSON Schema frontend and the IR: smart constructors,
digit-range automata (integers, ``\\uXXXX`` escapes) and the JSON string spellings of
characters and words, all as IR nodes.

A *spelling* of a character is any way a JSON string may write it: raw (where JSON allows:
not ``"``, ``\\`` or a control), a short escape (``\\n``), ``\\uXXXX`` in either case, or a
surrogate pair. :func:`encoded_class` gives every spelling of one character of a class;
:func:`expand_string_except` is the IR meaning of :class:`~logitgate.grammar.ir.StringExcept`,
which the core builds natively (cpp/core/string_except.cc).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

from .ir import EMPTY, Alt, CharClass, Literal, Node, Ref, Repeat, Seq, complement_ranges, merge_ranges, references

__all__ = [
    "ANY_CHARACTER",
    "EMPTY_LANG",
    "ESCAPES",
    "ValueRules",
    "alt",
    "any_value_rules",
    "dec_class",
    "digits_node",
    "encoded_class",
    "encoded_class_ascii",
    "encoded_literal",
    "expand_string_except",
    "hex_class",
    "hex_digits",
    "intersect",
    "intersect_ranges",
    "is_empty_language",
    "non_ascii_escape_tail",
    "opt",
    "positive_ranges",
    "raw_ranges",
    "seq",
    "split_fixed",
]

EMPTY_LANG = Alt(())


def is_empty_language(node: Node | None) -> bool:
    """True for the empty language, ``Alt(())`` (any such object, not only EMPTY_LANG): a type
    check, cheaper than a dataclass ``==`` in code that tests every node it builds."""
    return type(node) is Alt and not node.items  # type: ignore[union-attr]


# Digit ranges (integers, \\uXXXX escapes).


def split_fixed(lo: int, hi: int, width: int, base: int) -> list[list[tuple[int, int]]]:
    """Fixed-width digit strings with values in [lo, hi], as per-position digit ranges: the
    digits lo and hi share, then lo's side (lo's digit, then the rest from lo up), the digits
    strictly between (any rest), and hi's side (hi's digit, then the rest up to hi). Iterative:
    a bound's digit count (a JSON Schema ``minimum``, up to 1,200 digits) is the depth."""
    prefix: list[tuple[int, int]] = []
    while width > 0:
        p = base ** (width - 1)
        lo_d, lo_r = divmod(lo, p)
        hi_d, hi_r = divmod(hi, p)
        if lo_d != hi_d:
            break
        prefix.append((lo_d, lo_d))
        lo, hi, width = lo_r, hi_r, width - 1
    else:
        return [prefix]
    any_rest = [(0, base - 1)] * (width - 1)
    out: list[list[tuple[int, int]]] = []
    if lo_r != 0:
        out += [[*prefix, (lo_d, lo_d), *s] for s in _split_from(lo_r, width - 1, base)]
        lo_d += 1
    tail: list[list[tuple[int, int]]] = []
    if hi_r != p - 1:
        tail = [[*prefix, (hi_d, hi_d), *s] for s in _split_upto(hi_r, width - 1, base)]
        hi_d -= 1
    if lo_d <= hi_d:
        out.append([*prefix, (lo_d, hi_d), *any_rest])
    return out + tail


def _split_from(lo: int, width: int, base: int) -> list[list[tuple[int, int]]]:
    """``split_fixed(lo, base**width - 1, width, base)``: each step's larger digits (any rest)
    come after the strings that keep lo's digit."""
    prefix: list[tuple[int, int]] = []
    after: list[list[tuple[int, int]]] = []
    first: list[list[tuple[int, int]]]
    while True:
        if width == 0:
            first = [prefix]
            break
        p = base ** (width - 1)
        lo_d, lo_r = divmod(lo, p)
        if lo_d == base - 1:  # lo's digit is the top one: shared with the upper end
            prefix = [*prefix, (lo_d, lo_d)]
        elif lo_r == 0:
            first = [[*prefix, (lo_d, base - 1), *[(0, base - 1)] * (width - 1)]]
            break
        else:
            after.append([*prefix, (lo_d + 1, base - 1), *[(0, base - 1)] * (width - 1)])
            prefix = [*prefix, (lo_d, lo_d)]
        lo, width = lo_r, width - 1
    return first + after[::-1]


def _split_upto(hi: int, width: int, base: int) -> list[list[tuple[int, int]]]:
    """``split_fixed(0, hi, width, base)``: each step's smaller digits (any rest) come before
    the strings that keep hi's digit."""
    prefix: list[tuple[int, int]] = []
    out: list[list[tuple[int, int]]] = []
    while True:
        if width == 0:
            out.append(prefix)
            return out
        p = base ** (width - 1)
        hi_d, hi_r = divmod(hi, p)
        if hi_d == 0:  # hi's digit is the bottom one: shared with the lower end
            prefix = [*prefix, (0, 0)]
        elif hi_r == p - 1:
            out.append([*prefix, (0, hi_d), *[(0, base - 1)] * (width - 1)])
            return out
        else:
            out.append([*prefix, (0, hi_d - 1), *[(0, base - 1)] * (width - 1)])
            prefix = [*prefix, (hi_d, hi_d)]
        hi, width = hi_r, width - 1


def dec_class(a: int, b: int) -> Node:
    return Literal(str(a).encode()) if a == b else CharClass(((0x30 + a, 0x30 + b),))


def hex_class(a: int, b: int) -> Node:
    ranges: list[tuple[int, int]] = []
    if a <= 9:
        ranges.append((0x30 + a, 0x30 + min(b, 9)))
    if b >= 10:
        x, y = max(a, 10) - 10, b - 10
        ranges += [(0x41 + x, 0x41 + y), (0x61 + x, 0x61 + y)]
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return Literal(bytes([ranges[0][0]]))
    return CharClass(tuple(ranges))


def digits_node(parts: list[list[tuple[int, int]]], base: int, cls: Callable[[int, int], Node]) -> Node:
    alts: list[Node] = []
    for positions in parts:
        items: list[Node] = []
        i = 0
        while i < len(positions):
            a, b = positions[i]
            if (a, b) == (0, base - 1):
                j = i
                while j < len(positions) and positions[j] == (0, base - 1):
                    j += 1
                items.append(Repeat(cls(0, base - 1), j - i, j - i) if j - i > 1 else cls(0, base - 1))
                i = j
                continue
            items.append(cls(a, b))
            i += 1
        alts.append(seq(items))
    return alt(alts)


def seq(items: Iterable[Node]) -> Node:
    """Sequence of ``items``: nested sequences flattened, adjacent literals merged, empty
    literals dropped; the empty language absorbs everything. (Exact type checks, one branch
    per item: this runs for every node the lowering builds.)"""
    merged: list[Node] = []
    for it in items:
        t = type(it)
        if t is Literal:
            if it.value:  # type: ignore[union-attr]
                if merged and type(merged[-1]) is Literal:
                    merged[-1] = Literal(merged[-1].value + it.value)  # type: ignore[union-attr]
                else:
                    merged.append(it)
        elif t is Seq:
            for p in it.items:  # type: ignore[union-attr]
                if type(p) is not Literal:
                    merged.append(p)
                elif not p.value:  # type: ignore[union-attr]
                    continue
                elif merged and type(merged[-1]) is Literal:
                    merged[-1] = Literal(merged[-1].value + p.value)  # type: ignore[union-attr]
                else:
                    merged.append(p)
        elif is_empty_language(it):
            return EMPTY_LANG
        else:
            merged.append(it)
    return merged[0] if len(merged) == 1 else Seq(tuple(merged))


_LEAVES = (Literal, Ref, CharClass)


def alt(items: Iterable[Node]) -> Node:
    out: list[Node] = []
    seen: set[object] = set()
    for it in items:
        for p in it.items if type(it) is Alt else (it,):  # type: ignore[union-attr]
            # Dedupe leaves by value; composite nodes by identity (hashing them is O(size)).
            key: object = p if type(p) in _LEAVES else id(p)
            if key not in seen:
                seen.add(key)
                out.append(p)
    return out[0] if len(out) == 1 else Alt(tuple(out))


def opt(node: Node) -> Node:
    return EMPTY if is_empty_language(node) else alt([node, EMPTY])


ESCAPES = {
    0x22: b'\\"',
    0x5C: b"\\\\",
    0x2F: b"\\/",
    0x08: b"\\b",
    0x0C: b"\\f",
    0x0A: b"\\n",
    0x0D: b"\\r",
    0x09: b"\\t",
}


def positive_ranges(cc: CharClass) -> list[tuple[int, int]]:
    merged = list(merge_ranges(cc.ranges))
    return list(complement_ranges(merged)) if cc.negated else merged


def intersect_ranges(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(max(x, y), min(p, q)) for x, p in a for y, q in b if max(x, y) <= min(p, q)]


def intersect(ranges: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in ranges if max(a, lo) <= min(b, hi)]


def hex_digits(lo: int, hi: int) -> Node:
    """Four hex digits (either case) with values in [lo, hi]."""
    return digits_node(split_fixed(lo, hi, 4, 16), 16, hex_class)


@functools.lru_cache(maxsize=4096)
def encoded_literal(value: bytes) -> Node:
    """The JSON string spellings of the text ``value`` (UTF-8): ASCII-escaped and not."""
    text = value.decode("utf-8")
    forms = {json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]}
    return alt(Literal(x.encode("utf-8")) for x in sorted(forms))


def raw_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The characters of ``ranges`` a JSON string may hold unescaped (not '"', '\\', controls)."""
    raw: list[tuple[int, int]] = []
    for lo, hi in ranges:
        for a, b in ((lo, min(hi, 0x21)), (max(lo, 0x23), min(hi, 0x5B)), (max(lo, 0x5D), hi)):
            a = max(a, 0x20)
            if a <= b:
                raw.append((a, b))
    return raw


def _escapes(ranges: list[tuple[int, int]], u_tails: list[Node]) -> list[Node]:
    """The escapes of the characters of ``ranges``, factored: one backslash, then a short
    escape's letter or ``u`` and one of ``u_tails`` (so the core builds one state per prefix
    instead of one per alternative: a JSON character's rule was 139 NFA states, now about 60)."""
    letters = [esc[1] for cp, esc in ESCAPES.items() if any(lo <= cp <= hi for lo, hi in ranges)]
    after: list[Node] = []
    if letters:
        after.append(CharClass(tuple(merge_ranges((b, b) for b in letters))))
    if u_tails:
        after.append(seq([Literal(b"u"), alt(u_tails)]))
    return [seq([Literal(b"\\"), alt(after)])] if after else []


@functools.lru_cache(maxsize=4096)
def encoded_class(cc: CharClass) -> Node:
    """The JSON string spellings of one character of ``cc``: raw (where JSON allows it), short
    escapes, ``\\uXXXX`` and surrogate pairs. Pure and immutable, so cached across compiles."""
    ranges = positive_ranges(cc)
    raw = raw_ranges(ranges)
    alts: list[Node] = []
    if raw:
        alts.append(CharClass(tuple(raw)))
    u_tails: list[Node] = []
    for lo, hi in intersect(ranges, 0, 0xD7FF) + intersect(ranges, 0xE000, 0xFFFF):
        u_tails.append(hex_digits(lo, hi))
    low_escape = Literal(b"\\u")
    for lo, hi in intersect(ranges, 0x10000, 0x10FFFF):
        ha, la = 0xD800 + ((lo - 0x10000) >> 10), 0xDC00 + ((lo - 0x10000) & 0x3FF)
        hb, lb = 0xD800 + ((hi - 0x10000) >> 10), 0xDC00 + ((hi - 0x10000) & 0x3FF)
        if ha == hb:
            u_tails.append(seq([hex_digits(ha, ha), low_escape, hex_digits(la, lb)]))
            continue
        # High surrogates whose every low half is in: one alternative for all of them.
        full_lo, full_hi = (ha if la == 0xDC00 else ha + 1), (hb if lb == 0xDFFF else hb - 1)
        if la != 0xDC00:
            u_tails.append(seq([hex_digits(ha, ha), low_escape, hex_digits(la, 0xDFFF)]))
        if full_lo <= full_hi:
            u_tails.append(seq([hex_digits(full_lo, full_hi), low_escape, hex_digits(0xDC00, 0xDFFF)]))
        if lb != 0xDFFF:
            u_tails.append(seq([hex_digits(hb, hb), low_escape, hex_digits(0xDC00, lb)]))
    alts += _escapes(ranges, u_tails)
    return alt(alts) if alts else EMPTY_LANG


def non_ascii_escape_tail() -> Node:
    pair = seq([hex_digits(0xD800, 0xDBFF), Literal(b"\\u"), hex_digits(0xDC00, 0xDFFF)])
    return alt([hex_digits(0x80, 0xD7FF), hex_digits(0xE000, 0xFFFF), pair])


@functools.lru_cache(maxsize=4096)
def encoded_class_ascii(ascii_ranges: tuple[tuple[int, int], ...], non_ascii_escape: Ref) -> Node:
    """encoded_class for the characters of ``ascii_ranges`` (all below 0x80) and every
    non-ASCII character, whose escapes continue as ``non_ascii_escape`` after the ``\\u``."""
    alts: list[Node] = [CharClass((*raw_ranges(ascii_ranges), (0x80, 0x10FFFF)))]
    ascii_hex = [hex_digits(lo, hi) for lo, hi in ascii_ranges]
    return alt(alts + _escapes(list(ascii_ranges), [*ascii_hex, non_ascii_escape]))


def expand_string_except(words: Iterable[str], tail: Node) -> Node:
    """The IR of ``StringExcept(words, tail)``: a trie of ``words`` read one character at a
    time in any of its spellings; a node that is no word may end the contents, and the first
    character without a child in the trie (any spelling) is followed by ``tail``. The core
    builds the same language natively; this form is for printing and for the reference
    recognizer. Iterative (words may be long)."""
    trie: dict[str, dict] = {}
    for w in words:
        t = trie
        for ch in w:
            t = t.setdefault(ch, {})
        t[""] = {}
    every = encoded_class(CharClass(((0, 0x10FFFF),)))
    done: dict[int, Node] = {}
    stack: list[tuple[dict[str, dict], bool]] = [(trie, False)]
    while stack:
        t, visited = stack.pop()
        kids = sorted(k for k in t if k)
        if not visited:
            stack.append((t, True))
            stack.extend((t[k], False) for k in kids)
            continue
        alts: list[Node] = [] if "" in t else [EMPTY]
        others = encoded_class(CharClass(tuple((ord(k), ord(k)) for k in kids), negated=True)) if kids else every
        alts.append(seq([others, tail]))
        for k in kids:
            alts.append(seq([encoded_class(CharClass(((ord(k), ord(k)),))), done[id(t[k])]]))
        done[id(t)] = alt(alts)
    return done[id(trie)]


ANY_CHARACTER = CharClass(((0, 0x10FFFF),))

#: The rules of "any JSON value": name -> (body, the rules the body references). Bodies refer
#: to each other and to ``ws`` by these fixed names.
ValueRules = Mapping[str, tuple[Node, tuple[str, ...]]]


@functools.lru_cache(maxsize=2)
def any_value_rules(compact: bool) -> ValueRules:
    """The schema-independent rules every schema with an unconstrained value, string or number
    uses (``value``, ``any_object``, ``any_array``, ``string``, ``string_tail``, ``number``,
    ``char``: one character's spellings), built once per process: they were a tenth of
    lowering a median schema. ``compact``: no whitespace between tokens (else ``ws``, which the
    caller defines). Read-only: one mapping serves every compile."""
    ws: Node = EMPTY if compact else Ref("ws")
    char = Ref("char")
    digits = CharClass(((0x30, 0x39),))
    sep = seq([ws, Literal(b","), ws])
    member = seq([Ref("string"), ws, Literal(b":"), ws, Ref("value")])
    value = Ref("value")
    sign = CharClass(((0x2B, 0x2B), (0x2D, 0x2D)))
    exponent = seq([CharClass(((0x45, 0x45), (0x65, 0x65))), opt(sign), Repeat(digits, 1, None)])
    bodies: dict[str, Node] = {
        "char": encoded_class(ANY_CHARACTER),
        "string_tail": Repeat(char, 0, None),
        "string": seq([Literal(b'"'), Repeat(char, 0, None), Literal(b'"')]),
        "number": seq(
            [
                opt(Literal(b"-")),
                alt([Literal(b"0"), seq([CharClass(((0x31, 0x39),)), Repeat(digits, 0, None)])]),
                opt(seq([Literal(b"."), Repeat(digits, 1, None)])),
                opt(exponent),
            ]
        ),
        "any_object": seq(
            [Literal(b"{"), ws, opt(seq([member, Repeat(seq([sep, member]), 0, None), ws])), Literal(b"}")]
        ),
        "any_array": seq([Literal(b"["), ws, opt(seq([value, Repeat(seq([sep, value]), 0, None), ws])), Literal(b"]")]),
        "value": alt(
            [
                Ref("any_object"),
                Ref("any_array"),
                Ref("string"),
                Ref("number"),
                Literal(b"true"),
                Literal(b"false"),
                Literal(b"null"),
            ]
        ),
    }
    return MappingProxyType({name: (body, references(body)) for name, body in bodies.items()})
