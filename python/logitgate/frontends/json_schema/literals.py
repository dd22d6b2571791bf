"""Emission of literal values (``enum``, ``const``) under the whitespace policy."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from logitgate.errors import LimitExceeded
from logitgate.grammar.ir import (
    Literal,
    Node,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import seq as _seq
from logitgate.limits import Limits

from .caps import _ANY_ORDER_LITERAL, _DIGITS_BOUND, DECIMAL_DIGITS
from .decide import Decider
from .facts import _Facts
from .members import MemberPositions
from .rules import RuleTable
from .values import _plain_json_text

# A high surrogate then a low one, two code points of a Python str: JSON has no spelling of
# them (``"\ud83d\ude00"`` reads back as the one character they pair to), so a string holding
# them is no JSON value's. (A lone surrogate has one: its lowercase ``\u`` escape.)
_SPLIT_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


class LiteralEmitter:
    """Literal JSON values."""

    def __init__(self, table: RuleTable, dec: Decider, members: MemberPositions, limits: Limits) -> None:
        self.table = table
        self.dec = dec
        self.members = members
        self.limits = limits

    def emit_enum(self, f: _Facts) -> Node:
        assert f.enum is not None
        alts: list[Node] = []
        for v in f.enum:
            if self.dec.check(v, f, 0):
                alts.append(self.value_literal(v, 0))
        return _alt(alts) if alts else _EMPTY_LANG

    def value_literal(self, v: Any, depth: int) -> Node:
        """Exactly the JSON value ``v`` under the whitespace policy (keys in ``v``'s order)."""
        if depth > self.limits.max_nesting:
            raise LimitExceeded("max_nesting", self.limits.max_nesting, "enum/const value nesting")
        if isinstance(v, dict):
            if not v:
                return _seq([Literal(b"{"), self.table.ws(), Literal(b"}")])
            if 1 < len(v) <= _ANY_ORDER_LITERAL:  # key order carries no meaning: accept any order
                members = [
                    (
                        k,
                        _seq(
                            [
                                self.string_literal(k),
                                self.table.ws(),
                                Literal(b":"),
                                self.table.ws(),
                                self.value_literal(x, depth + 1),
                            ]
                        ),
                        True,
                    )
                    for k, x in v.items()
                ]
                return self.members.object_any_order(members, None, 0, None, 0)
            parts: list[Node] = [Literal(b"{")]
            for i, (k, x) in enumerate(v.items()):
                if i:
                    parts += [self.table.ws(), Literal(b",")]
                parts += [
                    self.table.ws(),
                    self.string_literal(k),
                    self.table.ws(),
                    Literal(b":"),
                    self.table.ws(),
                    self.value_literal(x, depth + 1),
                ]
            return _seq([*parts, self.table.ws(), Literal(b"}")])
        if isinstance(v, list):
            if not v:
                return _seq([Literal(b"["), self.table.ws(), Literal(b"]")])
            parts = [Literal(b"[")]
            for i, x in enumerate(v):
                if i:
                    parts += [self.table.ws(), Literal(b",")]
                parts += [self.table.ws(), self.value_literal(x, depth + 1)]
            return _seq([*parts, self.table.ws(), Literal(b"]")])
        if isinstance(v, str):
            return self.string_literal(v)
        if isinstance(v, bool) or v is None:
            return Literal(json.dumps(v).encode())
        if isinstance(v, float) and not math.isfinite(v):
            return _EMPTY_LANG
        if (isinstance(v, float) and v.is_integer()) or isinstance(v, int):
            n = int(v)
            if abs(n) >= _DIGITS_BOUND:  # (and Python prints no int of more than 4,300 digits)
                raise DECIMAL_DIGITS.exceeded("integer value with too many decimal digits")
            forms = {str(n)}
            try:
                if abs(n) <= 2**53 or float(n) == n:
                    forms.add(json.dumps(float(n)))
            except OverflowError:
                pass  # past the largest double: no float spelling
            return _alt(Literal(s.encode()) for s in sorted(forms))
        return Literal(json.dumps(v).encode())

    def string_content_literal(self, s: str) -> Node:
        """The content (between the quotes) of the JSON string ``s``, both serializations."""
        if _plain_json_text(s):
            return Literal(s.encode())
        if _SPLIT_PAIR.search(s):
            return _EMPTY_LANG
        forms = {json.dumps(s)[1:-1]}
        try:
            forms.add(json.dumps(s, ensure_ascii=False)[1:-1].encode("utf-8").decode("utf-8"))
        except UnicodeEncodeError:
            pass
        return _alt(Literal(x.encode("utf-8")) for x in sorted(forms))

    def string_literal(self, s: str) -> Node:
        """The JSON string ``s``: its raw UTF-8 form and its ensure_ascii form."""
        if _plain_json_text(s):
            return Literal(b'"' + s.encode() + b'"')
        if _SPLIT_PAIR.search(s):
            return _EMPTY_LANG
        forms = {json.dumps(s)}
        try:
            forms.add(json.dumps(s, ensure_ascii=False).encode("utf-8").decode("utf-8"))
        except UnicodeEncodeError:
            pass
        out = []
        for form in sorted(forms):
            try:
                out.append(Literal(form.encode("utf-8")))
            except UnicodeEncodeError:
                continue
        return _alt(out)
