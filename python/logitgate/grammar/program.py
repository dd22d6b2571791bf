"""Serialization of an IR :class:`~logitgate.grammar.ir.Grammar` to the flat int32 program the
core compiles (cpp/core/automaton.h documents the opcodes; keep both in sync).

Layout: ``[n_rules, root_index, body(rule 0), body(rule 1), ...]`` with each body in prefix
form. The walk uses an explicit stack: IR depth is user-driven.
"""

from __future__ import annotations

from array import array

from ..errors import GrammarError, LimitExceeded
from ..limits import Limits
from .ir import Alt, ByteClass, CharClass, Grammar, Literal, Node, Ref, Repeat, Seq

__all__ = ["serialize"]

OP_LITERAL, OP_CHAR_CLASS, OP_BYTE_CLASS, OP_SEQ, OP_ALT, OP_REPEAT, OP_REF = range(1, 8)


def serialize(grammar: Grammar, limits: Limits) -> tuple[array, list[str]]:
    """Returns the program and the rule names (index = rule id)."""
    names = list(grammar.rules)
    if grammar.root not in grammar.rules:
        raise GrammarError(f"the root rule {grammar.root!r} is not defined", code="missing-root", rule=grammar.root)
    index = {n: i for i, n in enumerate(names)}
    out = array("i", [len(names), index[grammar.root]])
    for name in names:
        # Stack of (node, depth); children pushed in reverse so they come out in order.
        stack: list[tuple[Node, int]] = [(grammar.rules[name], 0)]
        while stack:
            node, depth = stack.pop()
            if depth > limits.max_nesting:
                raise LimitExceeded("max_nesting", limits.max_nesting, f"rule {name!r} nests too deeply")
            if isinstance(node, Literal):
                out.append(OP_LITERAL)
                out.append(len(node.value))
                out.extend(node.value)
            elif isinstance(node, (CharClass, ByteClass)):
                out.append(OP_CHAR_CLASS if isinstance(node, CharClass) else OP_BYTE_CLASS)
                out.append(int(node.negated))
                out.append(len(node.ranges))
                for lo, hi in node.ranges:
                    out.append(lo)
                    out.append(hi)
            elif isinstance(node, (Seq, Alt)):
                out.append(OP_SEQ if isinstance(node, Seq) else OP_ALT)
                out.append(len(node.items))
                stack.extend((item, depth + 1) for item in reversed(node.items))
            elif isinstance(node, Repeat):
                if node.min > limits.max_repeat or (node.max or 0) > limits.max_repeat:
                    raise LimitExceeded("max_repeat", limits.max_repeat, f"repetition in rule {name!r}")
                out.append(OP_REPEAT)
                out.append(node.min)
                out.append(-1 if node.max is None else node.max)
                stack.append((node.item, depth + 1))
            elif isinstance(node, Ref):
                if node.name not in index:
                    raise GrammarError(f"undefined rule {node.name!r}", code="undefined-rule", rule=name)
                out.append(OP_REF)
                out.append(index[node.name])
            else:
                raise TypeError(f"not an IR node: {node!r}")
    return out, names
