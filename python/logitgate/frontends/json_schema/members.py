"""Object member positions: members in schema order (one rule per suffix) or in any order."""

from __future__ import annotations

from typing import Any

from logitgate.grammar.ir import (
    EMPTY,
    Alt,
    Literal,
    Node,
    Ref,
    Seq,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import seq as _seq

from .caps import _OBJECT_KEY_BLOCK
from .rules import RuleTable, _alt_of_distinct, _flat_items, _then


class MemberPositions:
    """Object bodies from member positions (memoized: objects share their suffixes)."""

    def __init__(self, table: RuleTable) -> None:
        self.table = table
        # Ordered objects (object_in_order): an object's suffixes (members from a position on)
        # -> numbers; the numbers whose rules exist.
        self.object_suffixes: dict[tuple[Any, ...], int] = {}
        self.object_built: set[int] = set()
        # Suffixes built as an object's start only: the rules of their position but the one a
        # member or an other key leads to (nothing does, at the start of a closed object).
        self.object_start_only: set[int] = set()
        self.any_order_objects: dict[tuple[Any, ...], Node] = {}  # object_any_order's inputs -> its object

    def object_in_order(
        self,
        members: list[tuple[str, Node, bool]],
        idents: list[tuple[str, Node]],
        other: Node | None,
        lo: int,
        hi: int | None,
        cap: int,
        counting: bool,
    ) -> Node:
        # P(i) is the position after the members before i were emitted or skipped (optional
        # ones only), with additional keys allowed in between. Its alternatives put the keys of
        # every member that may come next into one rule, so that the compiled automaton reads a
        # key through one trie instead of one path per member: the members up to the end of i's
        # block are inlined, later blocks come through a chain of tail calls T. Blocks are
        # counted from the object's end, so what a position's rules hold depends only on the
        # members from it on (and the "other" keys and counting): its suffix. Each object text
        # has exactly one parse (listed keys fix the member, other keys stay at i). Size
        # O(n * block).
        #
        # Positions with the same suffix are the same rules in every object of the schema: they
        # are named by the suffix's number and built once. The variants that dependencies,
        # anyOf or if/then split an object into differ in a few members (one required, one
        # absent), and share every position after the last of them (Github_hard/o58639: nine
        # variants of a 45-member object).
        ws = self.table.ws()
        n = len(members)
        block = _OBJECT_KEY_BLOCK
        required = [r for _, _, r in members]
        # optional_until[i] = the first required member at or after i (n when none).
        optional_until = [n] * (n + 1)
        for i in range(n - 1, -1, -1):
            optional_until[i] = i if required[i] else optional_until[i + 1]
        suffixes = self.object_suffixes
        sid = [0] * (n + 1)
        key: tuple[Any, ...] = ("end", other, counting, lo, hi, cap)
        sid[n] = suffixes.setdefault(key, len(suffixes))
        for i in range(n - 1, -1, -1):
            key = (idents[i], required[i], sid[i + 1])
            sid[i] = suffixes.setdefault(key, len(suffixes))
        # Positions whose rules an earlier object built: a suffix of this one (built sets are
        # closed under "the position after").
        built = self.object_built
        todo = n + 1
        while todo > 0 and sid[todo - 1] in built:
            todo -= 1
        start_name = f"ob{sid[0]}_p0_0"
        top = _seq([Literal(b"{"), Ref(start_name), ws, Literal(b"}")])
        if (todo == 0 or (todo == 1 and sid[0] in self.object_start_only)) and start_name in self.table.rules:
            return top
        # A closed object's start is a position no member and no other key leads to: its
        # "started" rules are left out (referenced only where this suffix comes later in
        # another object, which then builds them).
        closed_start = other is None
        names = [f"ob{s}_" for s in sid]
        # The positions' references per count (P(i, started, c) for started; the object's
        # start, the only position no member leads to, is named apart).
        p_refs: dict[int, list[Ref]] = {}

        def prefs(c: int) -> list[Ref]:
            refs = p_refs.get(c)
            if refs is None:
                tail = f"p1_{c}"
                refs = p_refs[c] = [Ref(name + tail) for name in names]
            return refs

        # Per (block end, count after the member): member j followed by the position after it
        # for every member j of the block; a position's choices are a slice of its block's.
        member_items = [m.items if type(m) is Seq else (m,) for _, m, _ in members]
        block_thens: dict[tuple[int, int], list[Node]] = {}

        def nexts(i: int, c: int, c2: int) -> list[Node]:
            """Members that may come next from position i within i's block, then the chain."""
            last = n - (n - 1 - i) // block * block  # the end of i's block
            first = max(0, last - block)
            thens = block_thens.get((last, c2))
            if thens is None:
                after = prefs(c2)
                thens = block_thens[(last, c2)] = [Seq((*member_items[j], after[j + 1])) for j in range(first, last)]
            out = thens[i - first : min(last, optional_until[i] + 1) - first]
            if optional_until[i] >= last and last < n:
                out.append(Ref(f"{names[last]}t{c}"))
            return out

        # The position rules are built with the node constructors directly, in the form
        # seq()/alt() would give (they were a quarter of a median lowering): members are
        # sequences ending in a reference, choices distinct sequences or references (no
        # nested alternative, nothing to dedupe), and a lead is flattened once.
        lead_items = {False: _flat_items(ws), True: _flat_items(self.table.comma())}
        rules = self.table.rules
        counts = range(cap + 1) if counting else range(1)
        for c in counts:
            room = not counting or hi is None or c < hi
            end_ok = not counting or c >= lo
            c2 = min(c + 1, cap) if counting else 0
            here = prefs(c)
            for e in range(n - block, 0, -block):  # block starts after the first, from the end
                if e < todo:
                    rules[f"{names[e]}t{c}"] = _alt_of_distinct(nexts(e, c, c2)) if room else _EMPTY_LANG
            for i in range(todo - 1 if todo else 0, -1, -1):
                # The choices after the lead, shared by both leads (a tail call from P).
                choices = nexts(i, c, c2) if room and i < n else []
                if room and other is not None:
                    choices.append(Seq((other, prefs(c2)[i])))
                # The choices are a rule of their own only where both leads call them (an open
                # object's start, built here in both forms); elsewhere one rule calls them, and
                # they are inlined into it.
                q_ref: Node | None = None
                shared_q = i == 0 and c == 0 and i < todo and not closed_start
                if choices:
                    if shared_q:
                        q_ref = Ref(f"{names[i]}q{c}")
                        rules[q_ref.name] = _alt_of_distinct(choices)
                    else:
                        q_ref = _alt_of_distinct(choices)
                may_end = optional_until[i] == n and end_ok
                # Only the object's start is a position no member led to (nothing else calls
                # P(i, not started): building those rules was a sixth of a median grammar).
                for started in (False, True) if i == 0 and c == 0 else (True,):
                    if started and (i >= todo or (i == 0 and closed_start)):
                        continue
                    if q_ref is None:
                        body: Node = EMPTY if may_end else _EMPTY_LANG
                    elif shared_q:
                        items = lead_items[started]
                        lead_q = Seq((*items, q_ref)) if items else q_ref
                        body = Alt((EMPTY, lead_q)) if may_end else lead_q
                    else:  # the inlined choices after the lead, as _seq() and _alt() would give them
                        items = lead_items[started]
                        tail = q_ref.items if type(q_ref) is Seq else (q_ref,)  # type: ignore[union-attr]
                        if not items:
                            lead_q = q_ref
                        elif type(items[-1]) is Literal and type(tail[0]) is Literal:  # compact: "," "key"
                            joined = Literal(items[-1].value + tail[0].value)  # type: ignore[union-attr]
                            lead_q = Seq((*items[:-1], joined, *tail[1:]))
                        else:
                            lead_q = Seq((*items, *tail))
                        if may_end:
                            body = Alt((EMPTY, *(lead_q.items if type(lead_q) is Alt else (lead_q,))))  # type: ignore[union-attr]
                        else:
                            body = lead_q
                    rules[here[i].name if started else start_name] = body
        if closed_start and todo > 0:
            built.update(sid[1:todo])
            self.object_start_only.add(sid[0])
        else:
            built.update(sid[:todo])
        return top

    def object_any_order(
        self, members: list[tuple[str, Node, bool]], other: Node | None, lo: int, hi: int | None, cap: int
    ) -> Node:
        # Objects of the same members, other keys and counting are one set of rules (a
        # definition reached through several schema paths is met once per path).
        memo_key = (tuple((member, r) for _, member, r in members), other, lo, hi, cap)
        top = self.any_order_objects.get(memo_key)
        if top is not None:
            return top
        ws = self.table.ws()
        n = len(members)
        base = f"oa{len(self.table.rules)}_"
        req_mask = sum(1 << i for i, (_, _, r) in enumerate(members) if r)
        counting = cap > 0 or hi is not None
        sep_ws = self.table.comma()

        def rname(mask: int, started: bool, c: int) -> str:
            return f"{base}{mask}_{int(started)}_{c}"

        counts = range(cap + 1) if counting else range(1)
        # 2^n positions of about n alternatives each: what repeats across them is built once.
        # Each member after either lead is a rule of its own, called from the 2^(n-1)
        # positions that offer it (inlined, every position would hold its own copy of the
        # member's key and value call: a larger automaton for the same masks); each position
        # is referenced once.
        leads = (ws, sep_ws)
        member_after = []
        for i, (_, member, _) in enumerate(members):
            after = []
            for led, lead in enumerate(leads):  # 0: after the opening brace, 1: after a comma
                self.table.rules[f"{base}m{i}_{led}"] = _seq([lead, member])
                after.append(Ref(f"{base}m{i}_{led}"))
            member_after.append(after)
        other_after = [_seq([lead, other]) for lead in leads] if other is not None else None
        refs = [[Ref(rname(mask, True, c)) for c in counts] for mask in range(1 << n)]
        for mask in range(1 << n):
            for started in (False, True) if mask == 0 else (True,):  # only the start is not led to
                for c in counts if started else (0,):
                    alts: list[Node] = []
                    room = not counting or hi is None or c < hi
                    c2 = min(c + 1, cap) if counting else 0
                    if mask & req_mask == req_mask and (not counting or c >= lo):
                        alts.append(EMPTY)
                    if room:
                        for i in range(n):
                            if not mask & (1 << i):
                                alts.append(_then(member_after[i][started], refs[mask | (1 << i)][c2]))
                        if other_after is not None:
                            alts.append(_then(other_after[started], refs[mask][c2]))
                    self.table.rules[rname(mask, started, c)] = _alt(alts) if alts else _EMPTY_LANG
        top = self.any_order_objects[memo_key] = _seq([Literal(b"{"), Ref(rname(0, False, 0)), ws, Literal(b"}")])
        return top
