"""logitgate: structured output for LLMs, invalid by construction.

Compile a structure (JSON Schema, Pydantic model, GBNF grammar, regex or choice list) for a
tokenizer's vocabulary, then per decoding step fill a token bitmask, apply it to the logits,
sample, and accept the token (or let ``lg.generate`` run that loop)::

    import logitgate as lg
    vocab = lg.Vocabulary.from_huggingface(tokenizer)
    g = lg.Compiler(vocab).compile_regex(r"\\d{3}-\\d{4}")
    m = g.matcher()
    bits = lg.allocate_mask(vocab)
    m.fill_mask(bits, row=0); lg.apply_mask(logits, bits); ...; m.accept(token_id)

``import logitgate`` never imports torch or transformers.
"""

from __future__ import annotations

import os as _os
from typing import Any as _Any

from .errors import (
    CacheFileError,
    CompileCancelled,
    CompileTimeout,
    GrammarError,
    LimitExceeded,
    LogitgateError,
    OutputValidationError,
    SchemaError,
    StructuralTagError,
    TokenRejected,
    TruncatedOutput,
    UnsupportedSchemaError,
    UsageError,
    VocabularyError,
)
from .limits import Limits
from .tool_calls import tool_call_structure

__version__ = "0.1.0"

__all__ = [
    "CacheFileError",
    "CancelToken",
    "CompileCancelled",
    "CompileTimeout",
    "CompiledGrammar",
    "Compiler",
    "EnforcementReport",
    "ExtractionError",
    "ExtractionResult",
    "Finding",
    "GenerationResult",
    "GrammarError",
    "LimitExceeded",
    "Limits",
    "LogitgateError",
    "Matcher",
    "OutputValidationError",
    "SchemaError",
    "StrictConversionError",
    "StructuralTagError",
    "TokenRejected",
    "TruncatedOutput",
    "UnsupportedSchemaError",
    "UsageError",
    "Vocabulary",
    "VocabularyError",
    "allocate_mask",
    "apply_mask",
    "enforcement_report",
    "extract",
    "fill_masks",
    "from_strict_value",
    "generate",
    "grammars",
    "lint",
    "to_strict",
    "tool_call_structure",
    "with_refusal",
]

# LOGITGATE_NO_CORE=1 lets pure-Python parts (frontends, loaders) be imported and tested before
# the extension is built. It is a development switch, not a mode of the library.
if not _os.environ.get("LOGITGATE_NO_CORE"):
    # The schema toolkit (pure Python over the compiler): lint, strict conversion, refusal,
    # extraction with retries, enforcement reports, containment grammars.
    from . import grammars
    from ._core import Matcher
    from .cancel import CancelToken
    from .compiler import CompiledGrammar, Compiler
    from .masks import allocate_mask, apply_mask, fill_masks
    from .toolkit import (
        EnforcementReport,
        ExtractionError,
        ExtractionResult,
        Finding,
        StrictConversionError,
        enforcement_report,
        extract,
        from_strict_value,
        lint,
        to_strict,
        with_refusal,
    )
    from .vocabulary import Vocabulary


def __getattr__(name: str) -> _Any:
    """Lazy exports that need torch: ``generate`` and ``GenerationResult`` import
    ``logitgate.generation`` (and torch) on first use only."""
    if name in ("generate", "GenerationResult"):
        from . import generation

        return getattr(generation, name)
    raise AttributeError(f"module 'logitgate' has no attribute {name!r}")
