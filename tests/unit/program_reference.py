"""A Python reference implementation of the grammar program format (the one the core's
serializer replaced, cpp/bindings/ir_program.cc): tests compare the two on whole corpora."""

from __future__ import annotations

from array import array

from logitgate.errors import GrammarError, LimitExceeded
from logitgate.grammar.ir import Alt, ByteClass, CharClass, Grammar, Literal, Node, Ref, Repeat, Seq, StringExcept
from logitgate.limits import Limits

OP_LITERAL, OP_CHAR_CLASS, OP_BYTE_CLASS, OP_SEQ, OP_ALT, OP_REPEAT, OP_REF, OP_STRING_EXCEPT = range(1, 9)


def serialize_reference(grammar: Grammar, limits: Limits) -> tuple[array, list[str]]:
    """Returns the program and the rule names (index = rule id)."""
    names = list(grammar.rules)
    if grammar.root not in grammar.rules:
        raise GrammarError(f"the root rule {grammar.root!r} is not defined", code="missing-root", rule=grammar.root)
    index = {n: i for i, n in enumerate(names)}
    out: list[int] = [len(names), index[grammar.root]]
    emit = out.append
    extend = out.extend
    max_nesting, max_repeat = limits.max_nesting, limits.max_repeat
    for name in names:
        # Stack of (node, depth); children pushed in reverse so they come out in order.
        stack: list[tuple[Node, int]] = [(grammar.rules[name], 0)]
        pop, push = stack.pop, stack.append
        while stack:
            node, depth = pop()
            if depth > max_nesting:
                raise LimitExceeded("max_nesting", max_nesting, f"rule {name!r} nests too deeply")
            t = type(node)
            if t is Literal:
                value = node.value  # type: ignore[union-attr]
                emit(OP_LITERAL)
                emit(len(value))
                extend(value)
            elif t is Seq or t is Alt:
                items = node.items  # type: ignore[union-attr]
                emit(OP_SEQ if t is Seq else OP_ALT)
                emit(len(items))
                d = depth + 1
                for item in reversed(items):
                    push((item, d))
            elif t is Ref:
                target = index.get(node.name)  # type: ignore[union-attr]
                if target is None:
                    raise GrammarError(f"undefined rule {node.name!r}", code="undefined-rule", rule=name)  # type: ignore[union-attr]
                emit(OP_REF)
                emit(target)
            elif t is CharClass or t is ByteClass:
                ranges = node.ranges  # type: ignore[union-attr]
                emit(OP_CHAR_CLASS if t is CharClass else OP_BYTE_CLASS)
                emit(int(node.negated))  # type: ignore[union-attr]
                emit(len(ranges))
                for lo, hi in ranges:
                    emit(lo)
                    emit(hi)
            elif t is Repeat:
                lo, hi = node.min, node.max  # type: ignore[union-attr]
                if lo > max_repeat or (hi or 0) > max_repeat:
                    raise LimitExceeded("max_repeat", max_repeat, f"repetition in rule {name!r}")
                emit(OP_REPEAT)
                emit(lo)
                emit(-1 if hi is None else hi)
                push((node.item, depth + 1))  # type: ignore[union-attr]
            elif t is StringExcept:
                words = node.words  # type: ignore[union-attr]
                emit(OP_STRING_EXCEPT)
                emit(len(words))
                for w in words:
                    emit(len(w))
                    extend(map(ord, w))
                push((node.tail, depth + 1))  # type: ignore[union-attr]
            else:
                raise TypeError(f"not an IR node: {node!r}")
    return array("i", out), names
