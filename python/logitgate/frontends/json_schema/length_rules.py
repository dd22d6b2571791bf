"""Strings as rules from automata: a pattern's length product (one rule per kept (DFA state,
length) pair) and a pattern's wide repetition (one rule per count), with the stand-ins of their
positions far from the bounds; and a format as its minimal DFA (one rule per state).

A counted position reads what its pattern's uncounted loop reads for as long as neither bound is
near: the product's pairs (q, k) with k past ``minLength`` and far enough below ``maxLength``
are claimed to read what the loop's rule of q reads (Grammar.stand_ins). The core checks each
claim and takes such a position's masks from the loop, whose walks meet the same configurations
again where the counted ones make a new one per position (docs/design.md, "Stand-ins")."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple

from logitgate.errors import GrammarError
from logitgate.grammar.ir import EMPTY, MAX_CODE_POINT, Alt, ByteClass, CharClass, Literal, Node, Ref, Repeat, Seq
from logitgate.grammar.json_text import encoded_class as _encoded_class
from logitgate.grammar.json_text import encoded_class_ascii as _encoded_class_ascii
from logitgate.grammar.json_text import encoded_literal as _encoded_literal
from logitgate.grammar.json_text import intersect as _intersect
from logitgate.grammar.json_text import intersect_ranges as _intersect_ranges
from logitgate.grammar.json_text import non_ascii_escape_tail as _non_ascii_escape_tail
from logitgate.grammar.json_text import positive_ranges as _positive_ranges
from logitgate.grammar.json_text import seq as _seq
from logitgate.limits import Limits

from .caps import _CHAINED_COUNTS, _RELAXED_SPAN, _STAND_IN_WINDOW
from .formats import AUTOMATON_FORMATS, _format_node, stored_dfa
from .pattern_dfa import Dfa, LengthProduct, Ranges, farthest_accept
from .patterns import _LengthRanges, _map_leaves
from .rules import RuleTable, _alt_of_distinct


def length_product_rules(
    table: RuleTable,
    encode: Callable[[CharClass], Node],
    product: LengthProduct,
    dfa: Dfa,
    lo: int,
    hi: int | None,
    loop: Dfa | None = None,
) -> Node:
    """The encoded rules of a non-empty length product of ``dfa`` and [lo, hi] (``encode``: a
    class's JSON spellings), added to ``table`` with the stand-ins of the pairs far from both
    bounds (``loop``: the pattern's DFA with its wide counts unbounded, where it has any);
    returns the reference to the start pair's rule."""
    base = f"dl{len(table.rules)}_"
    rules: dict[str, Node] = {}
    # A DFA's edges recur at every length: each pair's Ref is built once however many pairs
    # move to it, and each edge's class looked up once by its ranges (encode's memo is keyed
    # by the CharClass, which each lookup would build and hash again).
    encoded: dict[Ranges, Node] = {}
    refs: dict[tuple[int, int], Ref] = {}
    for (q, k), (accepts, moves) in product.pairs.items():
        alts: list[Node] = [EMPTY] if accepts else []
        for r, pair in moves:
            enc = encoded.get(r)
            if enc is None:
                enc = encoded[r] = encode(CharClass(r))
            ref = refs.get(pair)
            if ref is None:
                ref = refs[pair] = Ref(f"{base}{pair[0]}_{pair[1]}")
            alts.append(_seq([enc, ref]))
        # A kept pair accepts or moves to a kept pair; its alternatives are distinct nodes
        # (one per edge, and the empty text), so nothing is left for _alt to merge.
        rules[f"{base}{q}_{k}"] = _alt_of_distinct(alts)
    table.rules.update(rules)
    if hi is not None or loop is not None:
        _stand_ins(table, encode, encoded, base, product, dfa, lo, hi, loop or dfa)
    return Ref(f"{base}0_0")


def _stand_ins(
    table: RuleTable,
    encode: Callable[[CharClass], Node],
    encoded: dict[Ranges, Node],
    base: str,
    product: LengthProduct,
    dfa: Dfa,
    lo: int,
    hi: int | None,
    loop: Dfa,
) -> None:
    """Rules ``{base}{q}`` for the states of ``loop`` (``dfa`` without the length, or with its
    wide counts unbounded too), and the claims that each pair (q, k) with k >= lo reads what
    the loop's rules of the states alongside q read. Only pairs with at least
    _STAND_IN_WINDOW code points to spare before ``hi`` (and before the longest way to an
    accepting state) are claimed: nearer, no token would be served."""
    last = None if hi is None else hi - farthest_accept(dfa) - _STAND_IN_WINDOW
    claimed = [(q, k) for q, k in product.pairs if k >= lo and (last is None or k <= last)]
    if not claimed:
        return
    alongside = _alongside(dfa, loop)
    work = sorted({t for q, _ in claimed for t in alongside.get(q, ())})
    seen = set(work)
    for q in work:  # grows while it is walked
        for _, t in loop.edges[q]:
            if t not in seen:
                seen.add(t)
                work.append(t)
    for q in work:
        alts: list[Node] = [EMPTY] if loop.accepting[q] else []
        for r, t in loop.edges[q]:
            enc = encoded.get(r)
            if enc is None:
                enc = encoded[r] = encode(CharClass(r))
            alts.append(_seq([enc, Ref(f"{base}{t}")]))
        table.rules[f"{base}{q}"] = _alt_of_distinct(alts)
    table.stand_ins.extend((f"{base}{q}_{k}", f"{base}{t}") for q, k in claimed for t in sorted(alongside.get(q, ())))


def _alongside(dfa: Dfa, loop: Dfa) -> dict[int, set[int]]:
    """Per state of ``dfa``, the states of ``loop`` some text reaches along with it (from both
    starts, code point by code point): each state itself where ``loop`` is ``dfa``. At most a
    few pairs per state of ``dfa`` are followed (the rest would be claims not worth a check)."""
    if loop is dfa:
        return {q: {q} for q in range(len(dfa.edges))}
    found: dict[int, set[int]] = {0: {0}}
    work = [(0, 0)]
    budget = 4 * len(dfa.edges)
    while work and budget > 0:
        budget -= 1
        q, p = work.pop()
        for ranges, t in dfa.edges[q]:
            for loop_ranges, u in loop.edges[p]:
                if _intersect_ranges(list(ranges), list(loop_ranges)) and u not in found.setdefault(t, set()):
                    found[t].add(u)
                    work.append((t, u))
    return found


class FormatContents(NamedTuple):
    """A format's encoded string contents, the same in every compile of the process: ``node``
    refers to ``rules`` (named ``fmt_<format>_...``, so no table holds them already), which
    hold the claims ``stand_ins``."""

    node: Node
    rules: Mapping[str, Node]
    stand_ins: tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=64)  # (limits vary only across compilers)
def format_contents(fmt: str, limits: Limits) -> FormatContents:
    """The encoded contents of a string of format ``fmt`` without length bounds, built once per
    process (encoding a format's node cost most of a small schema's lowering: date-time's about
    a quarter of a millisecond). A format of formats.AUTOMATON_FORMATS is its stored minimal DFA,
    a rule per state (``fmt_<format>_<q>``, the start 0), each move one character of its
    class then a tail call of the target; any other is its regex's node, its wide repetition
    chained as chain_wide_repetition does. Each class's spellings are one rule
    (``fmt_<format>_c<k>``)."""
    prefix = _format_prefix(fmt)
    bundle = _Bundle()
    classes: dict[CharClass, Node] = {}

    def spelled(cc: CharClass) -> Node:
        hit = classes.get(cc)
        if hit is None:
            hit = spelled_class(cc, lambda: bundle.rule(f"{prefix}u", _non_ascii_escape_tail), _full_range_char)
            if isinstance(hit, Alt):  # raw | escapes: a rule, not a copy per use
                name = f"{prefix}c{len(classes)}"
                bundle.rules[name] = hit
                hit = Ref(name)
            classes[cc] = hit
        return hit

    if fmt in AUTOMATON_FORMATS:
        dfa = stored_dfa(fmt)
        for q, moves in enumerate(dfa.edges):
            alts: list[Node] = [EMPTY] if dfa.accepting[q] else []
            alts += [_seq([spelled(CharClass(ranges)), Ref(f"{prefix}{t}")]) for ranges, t in moves]
            bundle.rules[f"{prefix}{q}"] = _alt_of_distinct(alts)
        node: Node = Ref(f"{prefix}0")
    else:

        def encode(x: Node) -> Node:
            return _map_leaves(x, lambda n: encoded_leaf(n, spelled), limits)

        node = chain_wide_repetition(bundle, _format_node(fmt, limits), encode, limits, prefix)
    return FormatContents(node, MappingProxyType(bundle.rules), tuple(bundle.stand_ins))


def format_state_rule(fmt: str, q: int) -> str:
    """The name of the rule of state ``q`` of an automaton format's DFA, in format_contents."""
    return f"{_format_prefix(fmt)}{q}"


def _format_prefix(fmt: str) -> str:
    return f"fmt_{fmt.replace('-', '_')}_"


class _Bundle:
    """Rules and claims built apart from any table (chain_wide_repetition reads these two)."""

    def __init__(self) -> None:
        self.rules: dict[str, Node] = {}
        self.stand_ins: list[tuple[str, str]] = []

    def rule(self, name: str, body: Callable[[], Node]) -> Ref:
        if name not in self.rules:
            self.rules[name] = body()
        return Ref(name)


def _full_range_char() -> Node:
    return _encoded_class(CharClass(((0, MAX_CODE_POINT),)))


def spelled_class(cc: CharClass, non_ascii_escape: Callable[[], Ref], char: Callable[[], Node]) -> Node:
    """The JSON spellings of one character of ``cc``: ``char()`` for every character, the
    class's ASCII part beside every non-ASCII character (whose ``\\u`` escapes continue as
    ``non_ascii_escape()``, one shared rule, not a copy per class) where it holds them all,
    else json_text.encoded_class."""
    ranges = _positive_ranges(cc)
    if ranges == [(0, MAX_CODE_POINT)]:
        return char()
    if ranges and ranges[-1][0] <= 0x80 and ranges[-1][1] == MAX_CODE_POINT:
        return _encoded_class_ascii(tuple(_intersect(ranges, 0, 0x7F)), non_ascii_escape())
    return _encoded_class(cc)


def encoded_leaf(n: Node, encode_class: Callable[[CharClass], Node]) -> Node:
    """One code-point-level leaf -> its JSON string spellings (``encode_class`` for a class;
    other nodes unchanged)."""
    if isinstance(n, CharClass):
        return encode_class(n)
    if isinstance(n, Literal):
        return _encoded_literal(n.value)
    if isinstance(n, ByteClass):
        raise GrammarError("byte classes cannot appear in a string pattern", code="schema-internal")
    return n


def chain_wide_repetition(
    table: RuleTable | _Bundle, node: Node, encode: Callable[[Node], Node], limits: Limits, prefix: str = ""
) -> Node:
    """The encoded contents of a string of ``node`` (code-point level), its first top-level
    repetition of a part longer than one character over at least _RELAXED_SPAN optional counts
    (``(?:\\S+\\s+){0,99}``) as a chain of rules, one per count, each ending in a call of the next
    or of the rest, with the claims that the repetition's unbounded loop stands for the counts
    past its minimum. The same language; ``encode(node)`` where there is no such repetition (a
    repeated character is served by the core's capacities instead)."""
    items = node.items if isinstance(node, Seq) else (node,)
    lengths = _LengthRanges(limits)
    at = next((i for i, item in enumerate(items) if _wide(item, lengths)), None)
    if at is None:
        return encode(node)
    rep = items[at]
    assert isinstance(rep, Repeat) and rep.max is not None
    part = encode(rep.item)
    base = f"{prefix}rc{len(table.rules)}_"
    rest, loop = Ref(f"{base}rest"), Ref(f"{base}loop")
    table.rules[rest.name] = _seq([encode(i) for i in items[at + 1 :]])
    for j in range(rep.max + 1):
        alts: list[Node] = [rest] if j >= rep.min else []
        if j < rep.max:
            alts.append(_seq([part, Ref(f"{base}{j + 1}")]))
        table.rules[f"{base}{j}"] = _alt_of_distinct(alts)
    table.rules[loop.name] = Alt((rest, _seq([part, loop])))
    table.stand_ins.extend((f"{base}{j}", loop.name) for j in range(rep.min, rep.max - _STAND_IN_WINDOW + 1))
    return _seq([*(encode(i) for i in items[:at]), Ref(f"{base}0")])


def _wide(node: Node, lengths: _LengthRanges) -> bool:
    """A bounded repetition, of at most _CHAINED_COUNTS, over many optional counts of a part
    that is not one character (a class or a one-character literal) and cannot be empty (its
    loop would call itself before reading a byte)."""
    if not isinstance(node, Repeat) or node.max is None:
        return False
    if not _RELAXED_SPAN <= node.max - node.min or node.max > _CHAINED_COUNTS:
        return False
    item = node.item
    if isinstance(item, CharClass) or (isinstance(item, Literal) and len(item.value.decode("utf-8")) <= 1):
        return False
    return lengths(item)[0] > 0
