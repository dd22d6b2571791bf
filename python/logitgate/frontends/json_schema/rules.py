"""The rule table: the grammar's rules as lowering defines them, the fixed-name rules (whitespace,
any value, string characters) and the rules shared between equal scalar constraint sets."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from logitgate.grammar.ir import (
    EMPTY,
    Alt,
    ByteClass,
    CharClass,
    Literal,
    Node,
    Ref,
    Repeat,
    Seq,
    StringExcept,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import any_value_rules as _any_value_rules
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.grammar.json_text import opt as _opt
from logitgate.grammar.json_text import seq as _seq

from .facts import _Facts

# Shared references to the fixed-name rules (a Ref per call was most of the Refs built).
_WS_REF = Ref("ws")
_COLON = Literal(b":")
_VALUE_REFS = {name: Ref(name) for name in _any_value_rules(False)}


def _flat_items(node: Node) -> tuple[Node, ...]:
    """The items ``seq([node, x])`` puts before ``x`` (``x`` not a literal)."""
    if type(node) is Seq:
        return node.items
    if type(node) is Literal and not node.value:
        return ()
    return (node,)


def _alt_of_distinct(items: list[Node]) -> Node:
    """``alt(items)`` for distinct items none of which is an alternative (not checked here: it
    runs once per object position; test_object_position_rules_are_what_seq_and_alt_make is
    the check)."""
    return items[0] if len(items) == 1 else Alt(tuple(items))


def _then(prefix: Node, last: Ref) -> Node:
    """``_seq([prefix, last])`` for a ``prefix`` that ``_seq`` built (its items need no merging)."""
    t = type(prefix)
    if t is Seq:
        return Seq((*prefix.items, last))  # type: ignore[union-attr]
    if t is Literal and not prefix.value:  # type: ignore[union-attr]
        return last
    if _is_empty(prefix):
        return _EMPTY_LANG
    return Seq((prefix, last))


def _ends_outside_words(n: StringExcept) -> bool:
    """Whether some trie prefix of ``n``'s words that is no word ends its contents (else they
    end only through its tail)."""
    words = set(n.words)
    return any(w[:k] not in words for w in n.words or ("",) for k in range(len(w) + 1))


def shows_text(rules: Mapping[str, Node], root: str, budget: int) -> bool:
    """True when a depth-first search finds that rule ``root`` derives some text: of each
    choice, the first alternative that does; a rule on the search's own path counts as
    deriving none, so False may be wrong (the exact fixpoint decides then), and so is False
    past ``budget`` steps. A derivation is found long before the whole grammar is read: a JSON
    value's first alternatives are short (an empty object, an empty string)."""
    proven: set[str] = set()
    active: set[str] = set()

    def now(n: Node) -> bool | None:
        """``n``'s answer without a frame of its own, or None when it needs one."""
        t = type(n)
        if t is Literal:
            return True
        if t is CharClass or t is ByteClass:
            return bool(n.ranges) or n.negated  # type: ignore[union-attr]
        if t is Ref:
            name = n.name  # type: ignore[union-attr]
            if name in proven:
                return True
            return False if name in active or name not in rules else None
        if t is Seq:
            return True if not n.items else None  # type: ignore[union-attr]
        if t is Alt:
            return False if not n.items else None  # type: ignore[union-attr]
        if t is Repeat:
            return True if n.min == 0 else None  # type: ignore[union-attr]
        if t is StringExcept:
            return True if _ends_outside_words(n) else None  # type: ignore[arg-type]
        raise TypeError(n)

    top: Node = Ref(root)
    result = now(top)
    if result is not None:
        return result
    frames: list[list[Any]] = [[top, 0]]  # [node, index of the child being evaluated]
    active.add(root)
    result = None
    steps = 0
    while frames:
        steps += 1
        if steps > budget:
            return False
        frame = frames[-1]
        n, i = frame
        t = type(n)
        if result is None:
            if t is Ref:
                child = rules[n.name]
            elif t is Seq or t is Alt:
                child = n.items[i]
            elif t is Repeat:
                child = n.item
            else:  # StringExcept
                child = n.tail
            result = now(child)
            if result is None:
                frames.append([child, 0])
                if type(child) is Ref:
                    active.add(child.name)  # type: ignore[union-attr]
                continue
        # ``result`` is the answer of the frame's current child.
        if (t is Seq and result) or (t is Alt and not result):
            if i + 1 < len(n.items):
                frame[1] = i + 1
                result = None
                continue
        frames.pop()
        if t is Ref:
            active.discard(n.name)
            if result:
                proven.add(n.name)
    return bool(result)


def _productive(node: Node, productive: set[str]) -> bool:
    stack: list[tuple[Node, bool]] = [(node, False)]
    results: dict[int, bool] = {}
    keep: list[Node] = []
    while stack:
        n, visited = stack.pop()
        if isinstance(n, (Seq, Alt)) and not visited:
            stack.append((n, True))
            keep.append(n)
            stack.extend((i, False) for i in n.items)
            continue
        if isinstance(n, (Repeat, StringExcept)) and not visited:
            stack.append((n, True))
            keep.append(n)
            stack.append((n.item if isinstance(n, Repeat) else n.tail, False))
            continue
        if isinstance(n, Literal):
            r = True
        elif isinstance(n, (CharClass, ByteClass)):
            r = bool(n.ranges) or n.negated
        elif isinstance(n, Ref):
            r = n.name in productive
        elif isinstance(n, Seq):
            r = all(results[id(i)] for i in n.items)
        elif isinstance(n, Alt):
            r = any(results[id(i)] for i in n.items)
        elif isinstance(n, Repeat):
            r = n.min == 0 or results[id(n.item)]
        elif isinstance(n, StringExcept):
            r = results[id(n.tail)] or _ends_outside_words(n)
        else:
            raise TypeError(n)
        results[id(n)] = r
        keep.append(n)
    return results[id(node)]


class RuleTable:
    """The grammar's rules, in the order they were defined."""

    def __init__(self, compact: bool, max_ws: int | None) -> None:
        self.compact = compact
        self.max_ws = max_ws
        self.rules: dict[str, Node] = {}
        self.shared_memo: dict[tuple[Any, ...], str] = {}
        # Grammar.stand_ins: (counted rule, its uncounted loop's rule), for the core to check.
        self.stand_ins: list[tuple[str, str]] = []

    def ws(self) -> Node:
        if self.compact:
            return EMPTY
        if "ws" not in self.rules:
            if self.max_ws is None:  # JSON's own whitespace: one loop, so one parser state
                self.rules["ws"] = Repeat(CharClass(((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))), 0, None)
            else:
                blanks = Repeat(CharClass(((0x09, 0x09), (0x20, 0x20))), 0, self.max_ws) if self.max_ws else EMPTY
                self.rules["ws"] = _seq([_opt(_seq([_opt(Literal(b"\r")), Literal(b"\n")])), blanks])
        return _WS_REF

    def comma(self) -> Node:
        """The separator between members and items: ``ws "," ws`` (a bare comma when compact)."""
        ws = self.ws()
        return _seq([ws, Literal(b","), ws])

    def rule(self, name: str, build: Callable[[], Node]) -> Ref:
        if name not in self.rules:
            self.rules[name] = _EMPTY_LANG  # placeholder against re-entry
            self.rules[name] = build()
        return Ref(name)

    def value_rule(self, name: str) -> Ref:
        """One of the schema-independent rules of json_text.any_value_rules (``value``,
        ``string``, ``number``, ``char``...), with the rules it references."""
        if name not in self.rules:
            table = _any_value_rules(self.compact)
            stack = [name]
            while stack:  # iterative: the rules reference each other (value <-> any_object)
                n = stack.pop()
                if n == "ws":
                    self.ws()
                elif n not in self.rules:
                    body, uses = table[n]
                    self.rules[n] = body
                    stack.extend(uses)
        return _VALUE_REFS[name]

    def any_value(self) -> Ref:
        return self.value_rule("value")

    def char_rule(self) -> Ref:
        """One JSON string character unit: raw, short escape, \\uXXXX or a surrogate pair.
        The rule holds the alternatives itself: an alias rule in between would hide from the
        core that a call reads exactly one character (Automaton::plain_capacity)."""
        return self.value_rule("char")

    def string_tail(self) -> Ref:
        """Any JSON string content (a rule: referenced from many places, one loop)."""
        return self.value_rule("string_tail")

    def any_string(self) -> Ref:
        return self.value_rule("string")

    def shared(self, kind: str, f: _Facts, build: Callable[[_Facts], Node]) -> Node:
        """One rule per distinct scalar constraint set: the same string/number constraints written
        in many places of a schema compile once."""
        try:
            excluded = json.dumps(f.not_enum, sort_keys=True) if f.not_enum else ""
        except (RecursionError, ValueError, TypeError):
            return build(f)
        if kind == "num":
            key: tuple[Any, ...] = (
                kind,
                "integer" in f.types,
                "fraction" in f.types,
                f.lo,
                f.lo_excl,
                f.hi,
                f.hi_excl,
                tuple(m for m, _ in f.multiple),
                excluded,
            )
        else:
            key = (
                kind,
                f.min_len,
                f.max_len,
                tuple(p for p, _ in f.patterns),
                tuple(x for x, _ in f.formats),
                excluded,
            )
        name = self.shared_memo.get(key)
        if name is None:
            node = build(f)
            if isinstance(node, Ref) or _is_empty(node):
                return node
            name = f"{kind}{len(self.shared_memo)}"
            self.shared_memo[key] = name
            self.rules[name] = node
        return Ref(name)
