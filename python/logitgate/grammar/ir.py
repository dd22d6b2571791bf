"""Grammar IR: the one language every frontend lowers to and the core compiles.

A :class:`Grammar` is a set of named rules over *bytes*. Each rule body is a tree of
:class:`Node` values:

- :class:`Literal`   exact bytes (``b"true"``); ``Literal(b"")`` is the empty string.
- :class:`CharClass` one Unicode scalar value from a set of code point ranges (optionally
  negated); the core lowers it to a UTF-8 byte automaton, so classes never match surrogates
  and negation means "any other scalar value".
- :class:`ByteClass` one raw byte from a set of byte ranges (for grammars over bytes).
- :class:`Seq`       concatenation; ``Seq(())`` is the empty string.
- :class:`Alt`       alternation; ``Alt(())`` is the empty language (rejected at compile).
- :class:`Repeat`    ``item{min,max}``; ``max=None`` is unbounded.
- :class:`Ref`       a reference to another rule by name (recursion allowed; left recursion is
  rejected by the core with :class:`~logitgate.GrammarError`).
- :class:`StringExcept` JSON string contents spelling any string but a few words (the keys a
  JSON object does not list); built natively by the core, printed through its IR expansion
  (:func:`logitgate.grammar.json_text.expand_string_except`).
- :class:`TokenSet`  exactly one whole *token* whose id is in a set (or, negated, any token
  whose id is not): how a grammar names special tokens (``<|im_end|>``, ``<[128010]>``). It
  never matches bytes: text never produces a special token, and a token terminal never
  matches text, even text that spells the token's name. A negated set reads text tokens too
  (as whole tokens: ``<[^5]>`` is any one token but id 5) but never an EOS id, which ends
  the grammar. Ids are the vocabulary's, so an IR with token sets compiles for the vocabulary
  it was resolved against (:meth:`logitgate.Vocabulary.special_token_id`); the GBNF frontend
  and structural tags lower to it, and so may other frontends (``<|...|>`` in Lark).

Nodes are immutable and hashable, so grammars can be compared and cached by value.

>>> from logitgate.grammar.ir import Grammar, Literal, Repeat, CharClass, Seq, Ref
>>> g = Grammar({"root": Seq((Literal(b"a"), Ref("digits"))),
...              "digits": Repeat(CharClass(((48, 57),)), 1, 3)})
>>> print(g.to_ebnf(), end="")
root ::= "a" digits
digits ::= [0-9]{1,3}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import GrammarError, _int_text

__all__ = [
    "EMPTY",
    "MAX_CODE_POINT",
    "Alt",
    "ByteClass",
    "CharClass",
    "Grammar",
    "Literal",
    "Node",
    "Ref",
    "Repeat",
    "Seq",
    "StringExcept",
    "TokenSet",
    "children",
    "distinct_nodes",
    "references",
]

MAX_CODE_POINT = 0x10FFFF


# The node classes are frozen, slotted dataclasses with hand-written __init__s: the generated
# ones set each field through object.__setattr__, and a compile builds a node for every piece
# of its grammar. Each __init__ writes its fields through the slots' own setters (bound below
# each class, `_set_<class>_<field>`), which a frozen class's __setattr__ does not stand in
# front of. Slots rather than an instance dict: a node is one small object where it was two
# (the instance and its dict, three times the memory), and a cold compile pays per cache line
# it touches, in the lowering and in the serializer that reads every node. The classes stay
# frozen (assignment raises), hashable and comparable by value.


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """The setter of ``cls``'s slot ``name`` (for its __init__)."""
    setter: Callable[[Any, Any], None] = cls.__dict__[name].__set__
    return setter


@dataclass(frozen=True, init=False, slots=True)
class Literal:
    """Exact bytes."""

    value: bytes

    def __init__(self, value: bytes) -> None:
        _set_literal_value(self, value)

    def __hash__(self) -> int:  # the field's own hash (the generated one hashes a 1-tuple)
        return hash(self.value)


_set_literal_value = _slot_setter(Literal, "value")


@dataclass(frozen=True, init=False, slots=True)
class CharClass:
    """One Unicode scalar value in ``ranges`` (inclusive pairs), or not in them if ``negated``."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def __init__(self, ranges: tuple[tuple[int, int], ...], negated: bool = False) -> None:
        for lo, hi in ranges:
            if not (0 <= lo <= hi <= MAX_CODE_POINT):
                raise GrammarError(f"bad code point range {lo:#x}-{hi:#x}", code="bad-class")
        _set_charclass_ranges(self, ranges)
        _set_charclass_negated(self, negated)


_set_charclass_ranges = _slot_setter(CharClass, "ranges")
_set_charclass_negated = _slot_setter(CharClass, "negated")


@dataclass(frozen=True, init=False, slots=True)
class ByteClass:
    """One byte in ``ranges`` (inclusive pairs), or not in them if ``negated``."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def __init__(self, ranges: tuple[tuple[int, int], ...], negated: bool = False) -> None:
        for lo, hi in ranges:
            if not (0 <= lo <= hi <= 255):
                raise GrammarError(f"bad byte range {lo:#x}-{hi:#x}", code="bad-class")
        _set_byteclass_ranges(self, ranges)
        _set_byteclass_negated(self, negated)


_set_byteclass_ranges = _slot_setter(ByteClass, "ranges")
_set_byteclass_negated = _slot_setter(ByteClass, "negated")


@dataclass(frozen=True, init=False, slots=True)
class Seq:
    """Concatenation of ``items``."""

    items: tuple[Node, ...]

    def __init__(self, items: tuple[Node, ...]) -> None:
        _set_seq_items(self, items)


_set_seq_items = _slot_setter(Seq, "items")


@dataclass(frozen=True, init=False, slots=True)
class Alt:
    """Alternation of ``items``."""

    items: tuple[Node, ...]

    def __init__(self, items: tuple[Node, ...]) -> None:
        _set_alt_items(self, items)


_set_alt_items = _slot_setter(Alt, "items")


@dataclass(frozen=True, init=False, slots=True)
class Repeat:
    """``item`` repeated ``min`` to ``max`` times (``max=None``: unbounded)."""

    item: Node
    min: int = 0
    max: int | None = None

    def __init__(self, item: Node, min: int = 0, max: int | None = None) -> None:
        if min < 0 or (max is not None and max < min):
            shown = f"{{{_int_text(min)},{'' if max is None else _int_text(max)}}}"
            raise GrammarError(f"bad repetition bounds {shown}", code="bad-repeat")
        _set_repeat_item(self, item)
        _set_repeat_min(self, min)
        _set_repeat_max(self, max)


_set_repeat_item = _slot_setter(Repeat, "item")
_set_repeat_min = _slot_setter(Repeat, "min")
_set_repeat_max = _slot_setter(Repeat, "max")


@dataclass(frozen=True, init=False, slots=True)
class Ref:
    """Reference to the rule called ``name``."""

    name: str

    def __init__(self, name: str) -> None:
        _set_ref_name(self, name)

    def __hash__(self) -> int:  # the field's own hash (the generated one hashes a 1-tuple)
        return hash(self.name)


_set_ref_name = _slot_setter(Ref, "name")


@dataclass(frozen=True, init=False, slots=True)
class StringExcept:
    """JSON string contents (the bytes between the quotes) that spell any string but
    ``words``: read through the trie of ``words`` one character at a time, in any JSON
    spelling of the character (raw where JSON allows it, a short escape, ``\\uXXXX`` in
    either case, a surrogate pair); the contents may end at a trie node that is not a word,
    and the first character that leaves the trie is followed by ``tail``. With ``tail`` any
    string content (the JSON frontend's ``string_tail`` rule) this is every spelling of every
    string not among ``words``."""

    words: tuple[str, ...]
    tail: Node

    def __init__(self, words: tuple[str, ...], tail: Node) -> None:
        _set_stringexcept_words(self, words)
        _set_stringexcept_tail(self, tail)


_set_stringexcept_words = _slot_setter(StringExcept, "words")
_set_stringexcept_tail = _slot_setter(StringExcept, "tail")


@dataclass(frozen=True, init=False, slots=True)
class TokenSet:
    """One whole token whose id is in ``ids`` (sorted, distinct), or not in them if ``negated``.

    >>> print(Grammar({"root": Seq((Literal(b"hi"), TokenSet((7,))))}).to_ebnf(), end="")
    root ::= "hi" <[7]>
    """

    ids: tuple[int, ...]
    negated: bool = False

    def __init__(self, ids: Iterable[int], negated: bool = False) -> None:
        ordered = tuple(sorted(set(ids)))
        if ordered and ordered[0] < 0:
            raise GrammarError(f"negative token id {_int_text(ordered[0])}", code="bad-token-set")
        if not ordered and not negated:
            raise GrammarError("an empty token set matches nothing", code="bad-token-set")
        _set_tokenset_ids(self, ordered)
        _set_tokenset_negated(self, negated)


_set_tokenset_ids = _slot_setter(TokenSet, "ids")
_set_tokenset_negated = _slot_setter(TokenSet, "negated")


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorts inclusive ranges and merges overlapping or adjacent ones."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


def complement_ranges(ranges: Iterable[tuple[int, int]], top: int = MAX_CODE_POINT) -> tuple[tuple[int, int], ...]:
    """The ranges of [0, top] not covered by ``ranges`` (surrogates are kept: the core drops them)."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in merge_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= top:
        out.append((nxt, top))
    return tuple(out)


Node = Literal | CharClass | ByteClass | Seq | Alt | Repeat | Ref | StringExcept | TokenSet

EMPTY = Seq(())


@dataclass(frozen=True)
class Grammar:
    """Named rules; ``root`` names the start rule. Rule order is kept for printing.

    ``stand_ins`` are pairs of rule names ``(a, b)``: a hint that ``b`` reads what ``a`` reads
    for as long as a token reaches (the JSON Schema frontend pairs each position of a pattern
    under a length bound with the pattern's uncounted loop). The core checks each claim on the
    compiled automaton and takes the masks at ``a`` from ``b`` only as far as it holds, so a
    wrong claim costs nothing but the check (docs/design.md, "Stand-ins")."""

    rules: Mapping[str, Node]
    root: str = "root"
    stand_ins: tuple[tuple[str, str], ...] = ()
    _frozen_rules: tuple[tuple[str, Node], ...] = field(init=False, repr=False, compare=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_frozen_rules", tuple(self.rules.items()))

    def __hash__(self) -> int:
        return hash((self._frozen_rules, self.root, self.stand_ins))

    def to_ebnf(self) -> str:
        """Print the grammar in the GBNF dialect (root rule first)."""
        order = [self.root] + [n for n in self.rules if n != self.root]
        return "\n".join(f"{name} ::= {_print(self.rules[name], 0)}" for name in order if name in self.rules) + "\n"

    def iter_nodes(self) -> Iterator[Node]:
        """Every node of every rule, each node object once (see :func:`distinct_nodes`)."""
        return distinct_nodes(self.rules.values())


def children(node: Node) -> tuple[Node, ...]:
    """The nodes directly below ``node`` (none for leaves and references)."""
    if isinstance(node, (Seq, Alt)):
        return node.items
    if isinstance(node, Repeat):
        return (node.item,)
    if isinstance(node, StringExcept):
        return (node.tail,)
    return ()


def distinct_nodes(roots: Iterable[Node]) -> Iterator[Node]:
    """The nodes under ``roots``, roots included, each node object once, iteratively (no
    recursion: IR depth is user-driven). Nodes are shared (the IR is a DAG): a walk as a tree
    would be exponential in the sharing depth."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(children(node))


def references(node: Node) -> tuple[str, ...]:
    """The names of the rules ``node`` references, each once, in the order a left-to-right
    reading meets them (iterative: IR depth is user-driven). Nodes are shared (the IR is a
    DAG): each node object is read once, so sharing never makes the walk exponential."""
    names: dict[str, None] = {}
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue  # a preorder walk meets every reference below a node on its first visit
        seen.add(id(n))
        if isinstance(n, Ref):
            names.setdefault(n.name)
        stack.extend(reversed(children(n)))
    return tuple(names)


# Printing precedence: 0 = alternation context, 1 = sequence item, 2 = repetition operand.
def _print(node: Node, prec: int) -> str:
    if isinstance(node, Literal):
        return '"' + "".join(_escape_byte_char(c) for c in _decode_lossless(node.value)) + '"'
    if isinstance(node, CharClass):
        return _print_class(node.ranges, node.negated, unicode=True)
    if isinstance(node, ByteClass):
        return _print_class(node.ranges, node.negated, unicode=False)
    if isinstance(node, Ref):
        return node.name
    if isinstance(node, Seq):
        if not node.items:
            return '""'
        s = " ".join(_print(i, 1) for i in node.items)
        return f"({s})" if prec >= 2 and len(node.items) > 1 else s
    if isinstance(node, Alt):
        if not node.items:
            return "[^\\x00-\\U0010FFFF]"  # prints as an empty class: the empty language
        s = " | ".join(_print(i, 0) for i in node.items)
        return f"({s})" if prec >= 1 and len(node.items) > 1 else s
    if isinstance(node, Repeat):
        inner = _print(node.item, 2)
        lo, hi = node.min, node.max
        if (lo, hi) == (0, None):
            op = "*"
        elif (lo, hi) == (1, None):
            op = "+"
        elif (lo, hi) == (0, 1):
            op = "?"
        elif hi is None:
            op = f"{{{lo},}}"
        elif lo == hi:
            op = f"{{{lo}}}"
        else:
            op = f"{{{lo},{hi}}}"
        return inner + op
    if isinstance(node, TokenSet):
        return _print_token_set(node)
    if isinstance(node, StringExcept):
        from .json_text import expand_string_except  # imports this module

        return _print(expand_string_except(node.words, node.tail), prec)
    raise TypeError(f"not an IR node: {node!r}")


def _decode_lossless(data: bytes) -> list[str | int]:
    """Characters of valid UTF-8 runs, ints for stray bytes."""
    out: list[str | int] = []
    i = 0
    while i < len(data):
        for n in (1, 2, 3, 4):
            try:
                out.append(data[i : i + n].decode("utf-8"))
                i += n
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(data[i])
            i += 1
    return out


_SIMPLE_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_byte_char(c: str | int) -> str:
    if isinstance(c, int):
        return f"\\x{c:02X}"  # a raw byte (GBNF reads \xNN as a code point; printing only)
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c]
    cp = ord(c)
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02X}"
    return c


def _class_char(cp: int) -> str:
    if chr(cp) in "]\\[":
        return "\\" + chr(cp)
    if chr(cp) in "^-":  # hex, so llama.cpp reads the printed grammar too
        return f"\\x{cp:02X}"
    if cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF or cp > 0xFFFF or chr(cp).isspace():
        return f"\\x{cp:02X}" if cp <= 0xFF else (f"\\u{cp:04X}" if cp <= 0xFFFF else f"\\U{cp:08X}")
    return chr(cp)


def _print_class(ranges: tuple[tuple[int, int], ...], negated: bool, unicode: bool) -> str:
    parts = []
    for lo, hi in ranges:
        parts.append(_class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}")
    body = ("^" if negated else "") + "".join(parts)
    return f"[{body}]" if unicode else f"[{body}]/*bytes*/"


def _print_token_set(node: TokenSet) -> str:
    """``<[1,4-9]>``, ``<[^3]>``, ``<[*]>`` (llguidance's notation, which the GBNF frontend reads)."""
    if node.negated and not node.ids:
        return "<[*]>"
    parts = []
    for lo, hi in merge_ranges((i, i) for i in node.ids):
        parts.append(str(lo) if lo == hi else f"{lo}-{hi}")
    return "<[" + ("^" if node.negated else "") + ",".join(parts) + "]>"
