"""One lenient compile of a schema, shared by the lint rules and the enforcement report.

Without a vocabulary the schema is compiled for a byte vocabulary (one token per byte, plus
EOS): token budgets are then byte counts, an upper bound for any real tokenizer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LimitExceeded, SchemaError

if TYPE_CHECKING:
    from ..compiler import CompiledGrammar, Compiler
    from ..vocabulary import Vocabulary

__all__ = ["DroppedConstraint", "LenientCompile", "compile_lenient", "parse_dropped", "refusal_pointer"]


@functools.lru_cache(maxsize=1)
def _byte_compiler() -> Compiler:
    from ..compiler import Compiler
    from ..vocabulary import Vocabulary

    vocab = Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])
    return Compiler(vocab)


@dataclass(frozen=True)
class DroppedConstraint:
    """One entry of :attr:`CompiledGrammar.dropped`, split: pointer (``#/...``), keyword, why."""

    pointer: str
    keyword: str
    reason: str


def parse_dropped(entry: str) -> DroppedConstraint:
    """Splits a ``"<pointer>: <keyword>: <why>"`` line of ``CompiledGrammar.dropped``."""
    pointer, _, rest = entry.partition(": ")
    keyword, _, reason = rest.partition(": ")
    if not pointer.startswith("#"):
        pointer = "#" + pointer
    return DroppedConstraint(pointer, keyword, reason)


@dataclass(frozen=True)
class LenientCompile:
    """A lenient compile's outcome: the grammar (None when it failed), the constraints it
    dropped, and the error that stopped it (a :class:`SchemaError` or :class:`LimitExceeded`)."""

    grammar: CompiledGrammar | None
    dropped: tuple[DroppedConstraint, ...]
    error: SchemaError | LimitExceeded | None


def compile_lenient(schema: Any, vocab: Vocabulary | None = None, **options: Any) -> LenientCompile:
    """Compiles ``schema`` with ``lenient=True`` (compact whitespace unless ``options`` says
    otherwise, as :func:`~logitgate.generate` does)."""
    from ..compiler import Compiler

    compiler = _byte_compiler() if vocab is None else Compiler(vocab)
    try:
        g = compiler.compile_json_schema(schema, **{"whitespace": "compact", "lenient": True, **options})
    except (SchemaError, LimitExceeded) as e:
        return LenientCompile(None, (), e)
    return LenientCompile(g, tuple(parse_dropped(d) for d in g.dropped), None)


def refusal_pointer(e: SchemaError | LimitExceeded) -> str:
    """The pointer an error names, in ``#/...`` form."""
    p = e.pointer if isinstance(e, SchemaError) else ""
    return p if p.startswith("#") else "#" + p
