"""Serialization of an IR :class:`~logitgate.grammar.ir.Grammar` to the flat int32 program the
core compiles (cpp/core/automaton.h documents the opcodes; keep both in sync).

Layout: ``[n_rules, root_index, body(rule 0), body(rule 1), ...]`` with each body in prefix
form: ``[1, n, byte...]`` literal, ``[2|3, negated, n, lo, hi, ...]`` character / byte class,
``[4|5, n, child...]`` sequence / alternation, ``[6, min, max or -1, child]`` repetition,
``[7, rule]`` reference, ``[8, n_words, (n, code point...)..., tail]`` StringExcept,
``[9, negated, n, id...]`` token set; then, where the grammar has stand-ins, ``[n, a0, b0,
...]`` (rule indices of each pair). The core
walks the IR itself (cpp/bindings/ir_program.cc, an explicit stack: IR depth is user-driven);
this runs once per node of every compiled grammar, and in Python it was a fifth of a JSON
Schema compile.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

from .. import _core
from ..cancel import current_interrupt
from ..errors import GrammarError
from ..limits import Limits
from .ir import Alt, ByteClass, CharClass, Grammar, Literal, Node, Ref, Repeat, Seq, StringExcept, TokenSet

__all__ = ["deserialize", "serialize"]

_IR_TYPES = (Literal, CharClass, ByteClass, Seq, Alt, Repeat, Ref, StringExcept, TokenSet)


def serialize(grammar: Grammar, limits: Limits) -> tuple[bytes, list[str]]:
    """Returns the program (native int32s as bytes) and the rule names (index = rule id).
    Raises GrammarError for an undefined rule (``undefined-rule``), a Repeat whose fields are
    not ordered non-negative ints (``bad-repeat``) or a token id past int32 (``unknown-token``),
    and LimitExceeded past ``max_nesting`` or ``max_repeat`` (ints of any size: never
    OverflowError)."""
    names = list(grammar.rules)
    if grammar.root not in grammar.rules:
        raise GrammarError(f"the root rule {grammar.root!r} is not defined", code="missing-root", rule=grammar.root)
    program = _core.serialize_ir(
        _IR_TYPES,
        list(grammar.rules.values()),
        names,
        names.index(grammar.root),
        limits.max_nesting,
        limits.max_repeat,
        current_interrupt(),
    )
    if grammar.stand_ins:
        index = {name: i for i, name in enumerate(names)}
        claims = array("i", [len(grammar.stand_ins)])
        for pair in grammar.stand_ins:
            for name in pair:
                if name not in index:
                    raise GrammarError(f"stand-in names undefined rule {name!r}", code="undefined-rule", rule=name)
                claims.append(index[name])
        program += claims.tobytes()
    return program, names


def deserialize(program: bytes, names: Sequence[str]) -> Grammar:
    """The IR grammar of a program (the inverse of :func:`serialize`: serializing the result
    gives ``program`` again). For grammars loaded from the on-disk cache, whose IR is rebuilt
    only when asked for. Iterative (IR depth is user-driven); raises GrammarError
    (``bad-program``) for a malformed program."""
    p = array("i")
    p.frombytes(program)
    try:
        n_rules, root = p[0], p[1]
        if n_rules != len(names) or not 0 <= root < n_rules:
            raise IndexError
        pos = 2
        rules: dict[str, Node] = {}
        for r in range(n_rules):
            rules[names[r]], pos = _read_node(p, pos, names)
    except (IndexError, ValueError):
        raise GrammarError("malformed grammar program", code="bad-program") from None
    stand_ins: list[tuple[str, str]] = []
    if pos != len(p):  # the stand-in claims: n, then n pairs of rule indices
        claims = p[pos + 1 :].tolist()
        if p[pos] <= 0 or len(claims) != 2 * p[pos] or not all(0 <= r < n_rules for r in claims):
            raise GrammarError("trailing data after grammar program", code="bad-program")
        stand_ins = [(names[a], names[b]) for a, b in zip(claims[::2], claims[1::2], strict=True)]
    return Grammar(rules, root=names[root], stand_ins=tuple(stand_ins))


def _read_node(p: array[int], pos: int, names: Sequence[str]) -> tuple[Node, int]:
    """The node in prefix form at ``pos``, and the position after it."""
    # Open Seq/Alt/Repeat/StringExcept nodes: [op, children needed, children, fields...].
    stack: list[list[Any]] = []
    while True:
        op = p[pos]
        node: Node
        if op == _LITERAL:
            n = p[pos + 1]
            node = Literal(bytes(p[pos + 2 : pos + 2 + n].tolist()))
            if len(node.value) != n:
                raise IndexError
            pos += 2 + n
        elif op in (_CHAR_CLASS, _BYTE_CLASS):
            negated, n = p[pos + 1], p[pos + 2]
            bounds = p[pos + 3 : pos + 3 + 2 * n].tolist()
            if len(bounds) != 2 * n:
                raise IndexError
            ranges = tuple(zip(bounds[::2], bounds[1::2], strict=True))
            node = (CharClass if op == _CHAR_CLASS else ByteClass)(ranges, bool(negated))
            pos += 3 + 2 * n
        elif op in (_SEQ, _ALT):
            n = p[pos + 1]
            pos += 2
            if n > 0:
                stack.append([op, n, []])
                continue
            node = Seq(()) if op == _SEQ else Alt(())
        elif op == _REPEAT:
            stack.append([op, 1, [], p[pos + 1], p[pos + 2]])
            pos += 3
            continue
        elif op == _REF:
            node = Ref(names[p[pos + 1]])
            pos += 2
        elif op == _STRING_EXCEPT:
            n_words = p[pos + 1]
            pos += 2
            words = []
            for _ in range(n_words):
                n = p[pos]
                chars = p[pos + 1 : pos + 1 + n].tolist()
                if len(chars) != n:
                    raise IndexError
                words.append("".join(map(chr, chars)))
                pos += 1 + n
            stack.append([op, 1, [], tuple(words)])
            continue
        elif op == _TOKEN_SET:
            negated, n = p[pos + 1], p[pos + 2]
            ids = p[pos + 3 : pos + 3 + n].tolist()
            if len(ids) != n:
                raise IndexError
            node = TokenSet(ids, bool(negated))
            pos += 3 + n
        else:
            raise ValueError(op)
        # Hand the node to the open nodes, closing each that is complete.
        while stack:
            frame = stack[-1]
            frame[2].append(node)
            if len(frame[2]) < frame[1]:
                break
            stack.pop()
            kind, _, items = frame[0], frame[1], frame[2]
            if kind == _SEQ:
                node = Seq(tuple(items))
            elif kind == _ALT:
                node = Alt(tuple(items))
            elif kind == _REPEAT:
                node = Repeat(items[0], frame[3], None if frame[4] == -1 else frame[4])
            else:
                node = StringExcept(frame[3], items[0])
        else:
            return node, pos


# Opcodes (cpp/core/automaton.h).
_LITERAL, _CHAR_CLASS, _BYTE_CLASS, _SEQ, _ALT, _REPEAT, _REF, _STRING_EXCEPT, _TOKEN_SET = range(1, 10)
