"""Emission of strings: contents built at code point level (length, patterns, formats), then
JSON-encoded, so escapes never weaken a constraint."""

from __future__ import annotations

import itertools
import re

from logitgate.cancel import checkpoint
from logitgate.errors import GrammarError, LimitExceeded, _int_text
from logitgate.frontends.regex import ANY_STRING as _ANY_STRING
from logitgate.frontends.regex import regex_to_node
from logitgate.grammar.derivatives import NOTHING as _NOTHING
from logitgate.grammar.derivatives import Derivatives as _Derivatives
from logitgate.grammar.ir import (
    EMPTY,
    MAX_CODE_POINT,
    Alt,
    CharClass,
    Literal,
    Node,
    Ref,
    Repeat,
    StringExcept,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import intersect_ranges as _intersect_ranges
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.grammar.json_text import non_ascii_escape_tail as _non_ascii_escape_tail
from logitgate.grammar.json_text import opt as _opt
from logitgate.grammar.json_text import seq as _seq
from logitgate.limits import Limits

from .caps import (
    _BLOCK,
    _BLOCKS_MAX,
    _DERIVATIVE_TUPLES,
    _DFA_LENGTH_RULES,
    _FIT_LENGTH,
    _LENGTH_PRODUCT_RULES_TOTAL,
    _LONGEST,
    _NFA_PRODUCT_RULES,
    _UNROLLED_MAX,
)
from .decide import Decider
from .diagnostics import Diagnostics
from .facts import StringSet, _Facts
from .formats import _FORMATS, AUTOMATON_FORMATS, _format_node, format_automata, stored_dfa
from .length_rules import (
    chain_wide_repetition,
    encoded_leaf,
    format_contents,
    format_state_rule,
    length_product_rules,
    spelled_class,
)
from .pattern_dfa import Dfa, LengthProduct, minimal_dfa, minimal_intersection, minimal_union
from .pattern_dfa import with_length as dfa_with_length
from .patterns import (
    _fit_length,
    _length_product_size,
    _LengthRanges,
    _map_leaves,
    _Nfa,
    _relax_counts,
    _restrict_length,
)
from .rules import RuleTable


class StringEmitter:
    """String rules from facts."""

    def __init__(self, table: RuleTable, diag: Diagnostics, dec: Decider, limits: Limits) -> None:
        self.table = table
        self.diag = diag
        self.dec = dec
        self.limits = limits
        self.enc_memo: dict[Node, Node] = {}
        self.format_memo: dict[str, Node] = {}
        # A pattern's node (search semantics) and its encoded form, per pattern: schemas repeat
        # their patterns (one patternProperties key per object variant, a pattern per leaf),
        # and parsing one is the costly part of the objects and strings that use it.
        self.pattern_memo: dict[str, Node] = {}
        self.encoded_memo: dict[str, Node] = {}
        # Minimal DFAs per intersected nodes (a format recurs under several length bounds), and
        # the rules this lowering's length products (DFA or NFA) hold.
        self.dfa_memo: dict[tuple[Node, ...], Dfa | None] = {}
        self.product_rules = 0

    def bounded(self, item: Ref, lo: int, hi: int | None) -> Node:
        """``item{lo,hi}``. Up to _UNROLLED_MAX, plain repetition: ``item`` is a rule, so each
        copy costs two automaton states, and the parser steps through one configuration per
        position (which the mask walk's chain shortcut handles well). Up to _BLOCKS_MAX blocks,
        a block decomposition: whole blocks of _BLOCK items (one shared rule), then a partial
        block, so the automaton holds O(n / _BLOCK + _BLOCK) states and a position has two or
        three parse heads (in a block, in the partial block). Larger bounds use a binary
        decomposition (rules item^(2^j)) so the automaton stays O(log n); it is unambiguous
        as a parse, but a prefix fits several decompositions, so masks there cost more."""
        small = min(_UNROLLED_MAX, self.limits.max_repeat)
        if lo <= small and (hi is None or hi <= small):
            return Repeat(item, lo, hi)
        most = max(lo, hi - lo if hi is not None else 0)
        if most // _BLOCK <= _BLOCKS_MAX and max(_BLOCK, most // _BLOCK) <= self.limits.max_repeat:
            block = self.table.rule(f"{item.name}_block", lambda: Repeat(item, _BLOCK, _BLOCK))

            def blocks_then(n: int, upto: bool) -> Node:
                """``item{n}`` (``item{0,n}`` when ``upto``) in blocks."""
                if n <= small:
                    return Repeat(item, 0 if upto else n, n)
                q, r = divmod(n, _BLOCK)
                if not upto:
                    return _seq([Repeat(block, q, q), Repeat(item, r, r)])
                # Fewer than q blocks then a partial block, or q blocks then at most r items:
                # one parse per length (a partial block is shorter than a block).
                return _alt(
                    [
                        _seq([Repeat(block, 0, q - 1), Repeat(item, 0, _BLOCK - 1)]),
                        _seq([Repeat(block, q, q), Repeat(item, 0, r)]),
                    ]
                )

            tail = Repeat(item, 0, None) if hi is None else blocks_then(hi - lo, True)
            return _seq([blocks_then(lo, False), tail])
        if lo > _LONGEST:
            raise LimitExceeded("max_repeat", self.limits.max_repeat, f"minimum length {_int_text(lo)}")
        if hi is not None and hi > _LONGEST:
            hi = _LONGEST  # tightening (sound): longer strings cannot be generated anyway

        def power(j: int) -> Node:
            if (1 << j) <= 64:
                return Repeat(item, 1 << j, 1 << j)
            name = f"{item.name}_x{1 << j}"
            if name not in self.table.rules:
                self.table.rules[name] = _seq([power(j - 1), power(j - 1)])
            return Ref(name)

        def exact(n: int) -> Node:
            return _seq(power(j) for j in range(n.bit_length() - 1, -1, -1) if n >> j & 1)

        def upto(m: int) -> Node:
            if m == 0:
                return EMPTY
            k = m.bit_length() - 1
            below = _seq(_opt(power(j)) for j in range(k - 1, -1, -1))
            return _alt([below, _seq([power(k), upto(m - (1 << k))])])

        head = exact(lo) if lo > 64 else Repeat(item, lo, lo)
        tail = Repeat(item, 0, None) if hi is None else upto(hi - lo)
        return _seq([head, tail])

    def non_ascii_escape(self) -> Ref:
        """What follows ``\\u`` in the escape of any character above 0x7F: four hex digits
        (0080-D7FF, E000-FFFF) or a surrogate pair."""
        return self.table.rule("u_non_ascii", _non_ascii_escape_tail)

    def encode_class(self, cc: CharClass) -> Node:
        hit = self.enc_memo.get(cc)
        if hit is not None:
            return hit
        node = spelled_class(cc, self.non_ascii_escape, self.table.char_rule)
        if isinstance(node, Alt):  # raw characters | escapes: a rule, not a copy per use
            name = f"cls{len(self.enc_memo)}"
            self.table.rules[name] = node
            node = Ref(name)
        self.enc_memo[cc] = node
        return node

    def encode_leaf(self, n: Node) -> Node:
        """One code-point-level leaf -> its JSON string spellings (other nodes unchanged)."""
        return encoded_leaf(n, self.encode_class)

    def encode(self, node: Node) -> Node:
        """Code-point-level node -> JSON string content bytes (every encoding decodes back)."""
        return _map_leaves(node, self.encode_leaf, self.limits)

    def pattern_node(self, pattern: str) -> Node:
        """``pattern``'s code-point node with JSON Schema (search) semantics; raises what
        :func:`regex_to_node` raises (failures are not memoized: they end or skip a lowering)."""
        hit = self.pattern_memo.get(pattern)
        if hit is None:
            hit, _ = regex_to_node(pattern, self.limits, anchored_search=True)
            self.pattern_memo[pattern] = hit
        return hit

    def encoded_pattern(self, pattern: str) -> Node:
        """The JSON string contents whose decoded text ``pattern`` matches (search semantics)."""
        hit = self.encoded_memo.get(pattern)
        if hit is None:
            hit = self.encoded_memo[pattern] = self.encode(self.pattern_node(pattern))
        return hit

    def format_node(self, fmt: str) -> Node:
        hit = self.format_memo.get(fmt)
        if hit is None:
            hit = self.format_memo[fmt] = _format_node(fmt, self.limits)
        return hit

    def emit_string(self, f: _Facts) -> Node:
        if not (f.patterns or f.formats or f.min_len or f.max_len is not None):
            if not any(isinstance(v, str) for v in f.not_enum):
                return self.table.any_string()
        body = self.string_contents(f)
        return _EMPTY_LANG if _is_empty(body) else _seq([Literal(b'"'), body, Literal(b'"')])

    def string_contents(self, f: _Facts) -> Node:
        """The encoded text between a string's quotes (a key's, too) under the string facts."""
        if f.max_len is not None and f.min_len > f.max_len:
            self.diag.contradiction(f, "", "minLength > maxLength")
            return _EMPTY_LANG
        if f.min_len > _LONGEST:
            raise LimitExceeded(
                "max_repeat", self.limits.max_repeat, f"minLength {_int_text(f.min_len)}", pointer=f.min_len_ptr
            )
        contents: list[tuple[Node, str, str]] = []
        for p, ptr in f.patterns:
            try:
                node = self.pattern_node(p)
            except GrammarError as e:
                self.diag.pattern_not_lowered("pattern", e, ptr)
                continue
            contents.append((node, "pattern", ptr))
        for fmt, ptr in f.formats:
            contents.append((self.format_node(fmt), "format", ptr))
        excluded = [v for v in f.not_enum if isinstance(v, str)]
        if not contents:
            if excluded:
                excluded = [v for v in excluded if f.min_len <= len(v) and (f.max_len is None or len(v) <= f.max_len)]
            if excluded:
                if f.min_len or f.max_len is not None:
                    self.diag.unsupported("not", "excluding strings under length bounds is not lowered", "")
                return StringExcept(tuple(sorted(set(excluded))), self.table.string_tail())
            if f.min_len == 0 and f.max_len is None:
                return Repeat(self.table.char_rule(), 0, None)
            return self.bounded(self.table.char_rule(), f.min_len, f.max_len)
        node, kw, ptr = contents[0]
        encoded: Node | None = None
        if len(contents) > 1:
            nodes = [c[0] for c in contents]
            if f.min_len == 0 and f.max_len is None:
                encoded = self.intersect_by_derivatives(nodes)
            if encoded is None:
                encoded = self.with_length(nodes, f.min_len, f.max_len)
            if encoded is None:
                _, kw2, ptr2 = contents[1]
                self.diag.unsupported(kw2, "several patterns/formats on one string: intersection too large", ptr2)
        if encoded is None and (f.min_len > 0 or f.max_len is not None):
            lengths = _LengthRanges(self.limits)  # (one memo for the walks over this node below)
            try:
                restricted = _restrict_length(node, f.min_len, f.max_len, self.limits, lengths=lengths)
            except LimitExceeded as e:  # (the pattern's repetition: no decomposition as above)
                raise LimitExceeded(
                    e.limit, e.value, f"minLength {_int_text(f.min_len)} with this {kw}", pointer=f.min_len_ptr
                ) from None
            if restricted is None:
                encoded = self.with_length([node], f.min_len, f.max_len)
            if restricted is None and encoded is None and kw == "format" and f.max_len is not None:
                # Too large to intersect exactly: the format narrowed to fit (a departure).
                try:
                    fit = min(f.max_len, max(_FIT_LENGTH, f.min_len))
                    fitted = _fit_length(node, fit, self.limits, lengths=lengths)
                    restricted = _restrict_length(fitted, f.min_len, f.max_len, self.limits, lengths=lengths)
                except LimitExceeded as e:
                    raise LimitExceeded(
                        e.limit, e.value, f"maxLength {_int_text(f.max_len)} with this {kw}", pointer=f.max_len_ptr
                    ) from None
            if restricted is None and encoded is None:
                self.diag.unsupported(
                    "maxLength" if f.max_len is not None else "minLength",
                    f"length bounds combined with this {kw} are not lowered",
                    ptr,
                )
            elif restricted is not None:
                node = restricted
        for v in excluded:
            # An excluded string the grammar cannot produce anyway needs no exclusion.
            matches = all(self.dec.py_search(p, v, pp) for p, pp in f.patterns) and all(
                re.fullmatch(_FORMATS[x], v) is not None for x, _ in f.formats
            )
            if matches:
                self.diag.unsupported("not", "excluding strings matched by a pattern/format is not lowered", ptr)
                break
        if _is_empty(node) or _is_empty(encoded):
            self.diag.contradiction(f, ptr, f"{kw} and length bounds leave no string")
            return _EMPTY_LANG
        if encoded is None and kw == "format" and len(contents) == 1 and node is contents[0][0]:
            return self.format_contents(f.formats[0][0])
        return chain_wide_repetition(self.table, node, self.encode, self.limits) if encoded is None else encoded

    def format_contents(self, fmt: str) -> Node:
        """A lone format without length bounds: its contents shared by every compile
        (length_rules.format_contents), their rules and claims added to the table once."""
        shared = format_contents(fmt, self.limits)
        if not shared.rules.keys() <= self.table.rules.keys():
            self.table.rules.update(shared.rules)
            self.table.stand_ins.extend(shared.stand_ins)
        return shared.node

    def intersect_by_derivatives(self, nodes: list[Node]) -> Node | None:
        """Encoded content of ``nodes[0] ∩ nodes[1] ∩ ...`` (grammar/derivatives.py): one rule per
        reachable tuple of derivatives, its moves one encoded class per distinct next tuple; a
        tuple where all sides but one accept anything is that side's derivative, encoded as it
        is. ``^https?://`` ∩ uri is eight rules and the rest of uri, where the automaton product
        builds a rule per state of uri's (740, a third of that schema's compile). None past
        ``_DERIVATIVE_TUPLES`` tuples: the caller falls back to the product."""
        base = f"nd{len(self.table.rules)}_"
        walk = _Derivatives()
        try:
            start = tuple(walk.intern(n) for n in nodes)
        except LimitExceeded:
            return None
        # Keyed by the ids of the derivatives: the walk hash-conses them, and keeps them alive.
        first = base + "0"
        names: dict[tuple[int, ...], str] = {tuple(map(id, start)): first}
        work = [start]
        rules: dict[str, Node] = {}
        # A side that is a format lowered as its DFA: the state each tuple has reached on it (one
        # per tuple, as a derivative is a language), so that its rest is that state's shared rule.
        side, fmt = next(
            ((i, a.fmt) for i, a in enumerate(map(format_automata, nodes)) if a and a.fmt in AUTOMATON_FORMATS),
            (0, None),
        )
        reached: dict[str, int | None] = {first: 0 if fmt else None}
        reaches_dfa = False
        try:
            while work:
                state = work.pop()
                here = names[tuple(map(id, state))]
                rest = [n for n in state if n != _ANY_STRING]
                if len(rest) <= 1:
                    q = reached[here]
                    if fmt and q is not None and rest and rest[0] is state[side]:
                        rules[here] = Ref(format_state_rule(fmt, q))
                        reaches_dfa = True
                    else:
                        rules[here] = self.encode(rest[0] if rest else _ANY_STRING)
                    continue
                alts: list[Node] = [EMPTY] if all(walk.nullable(n) for n in state) else []
                points = {0, 0xD800, 0xE000, MAX_CODE_POINT + 1}  # (surrogates: no derivative)
                for n in state:
                    walk.first_boundaries(n, points)
                cuts = sorted(points)
                moves: dict[tuple[int, ...], tuple[tuple[Node, ...], list[tuple[int, int]]]] = {}
                for lo, nxt in itertools.pairwise(cuts):
                    if lo == 0xD800:
                        continue
                    d = tuple(walk.derivative(n, lo) for n in state)
                    if _NOTHING in d:
                        continue
                    key = tuple(map(id, d))
                    if key in moves:
                        moves[key][1].append((lo, nxt - 1))
                    else:
                        moves[key] = (d, [(lo, nxt - 1)])
                for key, (d, ranges) in moves.items():
                    name = names.get(key)
                    if name is None:
                        if len(names) >= _DERIVATIVE_TUPLES:
                            return None
                        name = names[key] = f"{base}{len(names)}"
                        q = reached[here]
                        reached[name] = None if fmt is None or q is None else stored_dfa(fmt).step(q, ranges[0][0])
                        work.append(d)
                    alts.append(_seq([self.encode_class(CharClass(tuple(ranges))), Ref(name)]))
                rules[here] = _alt(alts) if alts else _EMPTY_LANG
        except LimitExceeded:
            return None  # nested too deep for derivatives: the product has its own bound
        if fmt and reaches_dfa:
            self.format_contents(fmt)  # (the rules of the DFA's states)
        self.table.rules.update(rules)
        return Ref(first)

    def with_length(self, nodes: list[Node], lo: int, hi: int | None) -> Node | None:
        """Encoded content of ``nodes[0] ∩ nodes[1] ∩ ...`` ∩ strings of [lo, hi] code points: the
        minimal DFA's length product (pattern_dfa.py: one live rule per position), or the NFA
        product where that is too large; None when both are. The DFA is not built for a node
        whose Thompson NFA's own length product is past _DFA_LENGTH_RULES (a count of a few ms,
        where determinizing and minimizing it would not pay), nor once this lowering's DFA
        products hold _LENGTH_PRODUCT_RULES_TOTAL rules."""
        nfas = self._nfas(nodes)
        if nfas is None:
            return None
        cap = hi if hi is not None else lo
        product = dfa = None
        if all(_length_product_size(n, hi, cap, _DFA_LENGTH_RULES) <= _DFA_LENGTH_RULES for n in nfas):
            dfa = self._minimal_dfa(nodes, nfas)
            left = _LENGTH_PRODUCT_RULES_TOTAL - self.product_rules
            product = None if dfa is None else dfa_with_length(dfa, lo, hi, min(_DFA_LENGTH_RULES, left))
        if product is None or dfa is None:
            return self.nfa_with_length(nfas, lo, hi)
        if not product.pairs:
            return _EMPTY_LANG
        relaxed = [self._relaxed(n) for n in nodes]
        loop = None if all(r is n for r, n in zip(relaxed, nodes, strict=True)) else self._minimal_dfa(relaxed)
        return self._length_product_rules(product, dfa, lo, hi, loop)

    def _length_product_rules(
        self, product: LengthProduct, dfa: Dfa, lo: int, hi: int | None, loop: Dfa | None = None
    ) -> Node:
        """The rules of a non-empty length product (length_rules.py), counted against this
        lowering's budget of product rules."""
        self.product_rules += len(product.pairs)
        return length_product_rules(self.table, self.encode_class, product, dfa, lo, hi, loop)

    def emit_union(self, tree: StringSet) -> Node | None:
        """A string of ``tree``'s language (distribute.py: a string-only set's intersections
        and unions of patterns and formats, as they nest, under the root's length bounds): its
        minimal DFA, built bottom-up, × the length, one rule per kept (state, length) pair,
        where the set's branches multiplied out would be one length product each, all of them
        live at once in the parser. Only under length bounds, where each branch would be such
        a product too. None otherwise, and where a pattern does not lower, an automaton is
        past its bound or the language is empty: the caller then lowers the branches one by
        one, which reports why."""
        lo, hi = tree.facts.min_len, tree.facts.max_len
        if (lo == 0 and hi is None) or lo > _LONGEST or (hi is not None and lo > hi):
            return None  # (unbounded: each branch stays a compact regex, not a DFA)
        memo: dict[int, Dfa | None] = {}
        order = _bottom_up(tree)
        for t in order:
            checkpoint()  # (one automaton per node: a tree holds up to _MAX_BRANCHES of them)
            memo[id(t)] = self._set_dfa(t, memo)
        whole = memo[id(tree)]
        left = _LENGTH_PRODUCT_RULES_TOTAL - self.product_rules
        product = None if whole is None else dfa_with_length(whole, lo, hi, min(_DFA_LENGTH_RULES, left))
        if whole is None or product is None or not product.pairs:
            return None
        return _seq([Literal(b'"'), self._length_product_rules(product, whole, lo, hi), Literal(b'"')])

    def _set_dfa(self, t: StringSet, below: dict[int, Dfa | None]) -> Dfa | None:
        """The minimal DFA of one node of a string tree, its alternatives' already in ``below``:
        its patterns and formats intersected with the union of each disjunction. None where a
        pattern does not lower or an automaton is past its bound."""
        try:
            nodes = [self.pattern_node(p) for p, _ in t.facts.patterns]
        except GrammarError:
            return None
        nodes += [self.format_node(x) for x, _ in t.facts.formats]
        parts: list[Dfa] = []
        if nodes:
            own = self._minimal_dfa(nodes)
            if own is None:
                return None
            parts.append(own)
        for alts in t.disjunctions:
            dfas = [below[id(a)] for a in alts]
            if any(d is None for d in dfas):
                return None
            union = minimal_union([d for d in dfas if d is not None])
            if union is None:
                return None
            parts.append(union)
        if not parts:
            return _ANY_STRING_DFA
        return minimal_intersection(parts)

    def _minimal_dfa(self, nodes: list[Node], nfas: list[_Nfa] | None = None) -> Dfa | None:
        """The minimal DFA of ``nodes[0] ∩ nodes[1] ∩ ...`` (``nfas``: their NFAs, when the
        caller has built them), memoized per nodes; None where an automaton is too large."""
        key = tuple(nodes)
        if key not in self.dfa_memo:
            if nfas is None:
                nfas = self._nfas(nodes)
            self.dfa_memo[key] = None if nfas is None else self._intersected_dfa(nodes, nfas)
        return self.dfa_memo[key]

    def _relaxed(self, node: Node) -> Node:
        """``_relax_counts(node)``; a format's shared one (formats.py)."""
        shared = format_automata(node)
        return _relax_counts(node, self.limits) if shared is None else shared.relaxed

    def _intersected_dfa(self, nodes: list[Node], nfas: list[_Nfa]) -> Dfa | None:
        """``minimal_dfa(nfas)``, with a format node's own minimal DFA taken from its shared
        automata (formats.py)."""
        dfas = []
        for node, nfa in zip(nodes, nfas, strict=True):
            shared = format_automata(node)
            dfa = minimal_dfa([nfa]) if shared is None else shared.dfa
            if dfa is None:
                return None
            dfas.append(dfa)
        return minimal_intersection(dfas)

    def _nfas(self, nodes: list[Node]) -> list[_Nfa] | None:
        """Thompson NFAs of ``nodes`` (a format's from its shared automata); None when one is
        too large to build."""
        nfas = []
        for node in nodes:
            shared = format_automata(node)
            nfa = _Nfa.build(node, self.limits) if shared is None else shared.nfa
            if nfa is None:
                return None
            nfas.append(nfa)
        return nfas

    def nfa_with_length(self, nfas: list[_Nfa], lo: int, hi: int | None) -> Node | None:
        """Encoded content of ``nfas[0] ∩ nfas[1] ∩ ...`` ∩ strings of [lo, hi] code points: the
        product of the NFAs with a length counter, one rule per reachable (states, length). None
        when the product would exceed a few thousand rules."""
        cap = hi if hi is not None else lo  # lengths above lo are equivalent when hi is open
        if len(nfas) == 1 and _length_product_size(nfas[0], hi, cap) > _NFA_PRODUCT_RULES:
            return None  # known too large before a rule is built (labels never meet empty here)
        base = f"nl{len(self.table.rules)}_"

        def name(qs: tuple[int, ...], k: int) -> str:
            return base + "_".join(map(str, qs)) + f"_{k}"

        start = tuple(n.start for n in nfas)
        made: set[tuple[tuple[int, ...], int]] = {(start, 0)}
        work = [(start, 0)]
        rules: dict[str, Node] = {}
        # Per state tuple: whether it accepts, and its moves (encoded class, target tuple). They do
        # not depend on the length, and one tuple recurs at up to hi + 1 lengths.
        moves_memo: dict[tuple[int, ...], tuple[bool, list[tuple[Node, tuple[int, ...]]]]] = {}

        def moves(qs: tuple[int, ...]) -> tuple[bool, list[tuple[Node, tuple[int, ...]]]] | None:
            """None when the product's moves from qs alone exceed the budget."""
            hit = moves_memo.get(qs)
            if hit is not None:
                return hit
            cls = [n.closure(q) for n, q in zip(nfas, qs, strict=True)]
            accepts = all(n.accept in c for n, c in zip(nfas, cls, strict=True))
            # moves of the product: a transition of every NFA, labels intersected
            combos: list[tuple[list[tuple[int, int]], tuple[int, ...]]] = [([(0, 0x10FFFF)], ())]
            for i, (n, c) in enumerate(zip(nfas, cls, strict=True)):
                nxt = []
                for ranges, targets in combos:
                    for x in sorted(c):
                        for lab, t in n.moves[x]:
                            inter = list(lab) if i == 0 else _intersect_ranges(ranges, list(lab))
                            if inter:
                                nxt.append((inter, (*targets, t)))
                combos = nxt
                if len(combos) > _NFA_PRODUCT_RULES:
                    return None
            out = moves_memo[qs] = (accepts, [(self.encode_class(CharClass(tuple(r))), t) for r, t in combos])
            return out

        while work:
            qs, k = work.pop()
            if len(made) > min(_NFA_PRODUCT_RULES, _LENGTH_PRODUCT_RULES_TOTAL - self.product_rules):
                return None
            found = moves(qs)
            if found is None:
                return None
            accepts, edges = found
            alts: list[Node] = []
            if k >= lo and accepts:
                alts.append(EMPTY)
            if hi is None or k < hi:
                k2 = min(k + 1, cap) if hi is None else k + 1
                for label, targets in edges:
                    if (targets, k2) not in made:
                        made.add((targets, k2))
                        work.append((targets, k2))
                    alts.append(_seq([label, Ref(name(targets, k2))]))
            rules[name(qs, k)] = _alt(alts) if alts else _EMPTY_LANG
        self.product_rules += len(rules)
        self.table.rules.update(rules)
        return Ref(name(start, 0))


# Every string: one accepting state that moves to itself on every code point but surrogates.
_EVERY_CODE_POINT = ((0, 0xD7FF), (0xE000, MAX_CODE_POINT))
_ANY_STRING_DFA = Dfa((((_EVERY_CODE_POINT, 0),),), (True,))


def _bottom_up(tree: StringSet) -> list[StringSet]:
    """The distinct nodes of ``tree``, every node after all of its alternatives (a node that
    several alternatives share is placed once, before the first node that needs it)."""
    order: list[StringSet] = []
    # Nodes are marked when expanded, not when pushed: a node one parent pushed may be reached
    # through another parent first, and must then come before that one.
    seen: set[int] = set()
    stack: list[tuple[StringSet, bool]] = [(tree, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        for alts in t.disjunctions:
            for a in alts:
                if id(a) not in seen:
                    stack.append((a, False))
    return order
