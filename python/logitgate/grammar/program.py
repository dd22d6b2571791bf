"""Serialization of an IR :class:`~logitgate.grammar.ir.Grammar` to the flat int32 program the
core compiles (cpp/core/automaton.h documents the opcodes; keep both in sync).

Layout: ``[n_rules, root_index, body(rule 0), body(rule 1), ...]`` with each body in prefix
form: ``[1, n, byte...]`` literal, ``[2|3, negated, n, lo, hi, ...]`` character / byte class,
``[4|5, n, child...]`` sequence / alternation, ``[6, min, max or -1, child]`` repetition,
``[7, rule]`` reference, ``[8, n_words, (n, code point...)..., tail]`` StringExcept,
``[9, negated, n, id...]`` token set. The core
walks the IR itself (cpp/bindings/ir_program.cc, an explicit stack: IR depth is user-driven);
this runs once per node of every compiled grammar, and in Python it was a fifth of a JSON
Schema compile.
"""

from __future__ import annotations

from .. import _core
from ..cancel import current_interrupt
from ..errors import GrammarError
from ..limits import Limits
from .ir import Alt, ByteClass, CharClass, Grammar, Literal, Ref, Repeat, Seq, StringExcept, TokenSet

__all__ = ["serialize"]

_IR_TYPES = (Literal, CharClass, ByteClass, Seq, Alt, Repeat, Ref, StringExcept, TokenSet)


def serialize(grammar: Grammar, limits: Limits) -> tuple[bytes, list[str]]:
    """Returns the program (native int32s as bytes) and the rule names (index = rule id).
    Raises GrammarError for an undefined rule and LimitExceeded past ``max_nesting`` or
    ``max_repeat``."""
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
    return program, names
