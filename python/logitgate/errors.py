"""Typed errors. Every error logitgate raises derives from :class:`LogitgateError` and carries a
stable ``code`` (a slug that never changes meaning) so callers can branch on it.

Families:

- :class:`GrammarError`  a grammar, regex or choice list cannot be compiled (``line``/``column``
  when the input is text, plus a caret line in the message).
- :class:`SchemaError`   a JSON Schema is invalid or cannot be lowered (``pointer``: JSON pointer).
  :class:`UnsupportedSchemaError` is the subclass for valid schemas using what we cannot lower.
- :class:`LimitExceeded` a documented limit of :class:`~logitgate.Limits` was hit (``limit``,
  ``value``; ``pointer`` when a JSON Schema keyword asked for it).
- :class:`CompileCancelled` a compile stopped because its :class:`~logitgate.CancelToken` was
  cancelled; :class:`CompileTimeout` (a :class:`LimitExceeded`) one that ran past its
  ``timeout``. Nothing of the compile is kept.
- :class:`UsageError`    an API call whose arguments cannot work: an argument out of its
  documented range (``top_p=2``), a mask or logits buffer of the
  wrong dtype, shape, layout, device or byte order, a row out of range, a rollback past the
  history, the same matcher twice in one ``fill_masks``.
- :class:`TokenRejected` raised only by helpers that demand acceptance; the hot-path
  ``Matcher.accept`` returns ``False`` instead and leaves the state unchanged.
- :class:`CacheFileError` a file of the on-disk grammar cache that cannot be used (truncated,
  corrupt, another format version); the compiler counts it and compiles instead.
- :class:`OutputValidationError` a generated text matched the grammar but a validation the
  grammar cannot express (a Pydantic validator, ``max_digits``...) rejected it.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "CacheFileError",
    "CompileCancelled",
    "CompileTimeout",
    "GrammarError",
    "LimitExceeded",
    "LogitgateError",
    "OutputValidationError",
    "SchemaError",
    "TokenRejected",
    "TruncatedOutput",
    "UnsupportedSchemaError",
    "UsageError",
    "VocabularyError",
]


class LogitgateError(Exception):
    """Root of every logitgate error. ``code`` is a stable slug."""

    code: str = "error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        message = _printable(message)
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class GrammarError(LogitgateError, ValueError):
    """A grammar (GBNF, regex, choice, IR) is malformed or has an empty/left-recursive language.

    ``line`` and ``column`` are 1-based positions in the source text when there is one;
    ``rule`` names the offending rule when the problem is a rule's.
    """

    code = "grammar"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        source: str | None = None,
        offset: int | None = None,
        rule: str | None = None,
    ) -> None:
        self.line: int | None = None
        self.column: int | None = None
        self.rule = rule
        self.offset = offset
        full = message
        if source is not None and offset is not None:
            offset = max(0, min(offset, len(source)))
            self.line = source.count("\n", 0, offset) + 1
            line_start = source.rfind("\n", 0, offset) + 1
            self.column = offset - line_start + 1
            line_end = source.find("\n", offset)
            text = source[line_start : line_end if line_end >= 0 else len(source)]
            caret = self.column - 1  # characters before the caret
            if len(text) > 120:  # keep the caret readable on huge one-line inputs
                cut = max(0, caret - 59)
                text = text[cut : cut + 120]
                caret -= cut
            # (A surrogate before the caret prints as six characters: the caret follows it.)
            caret = len(_printable(text[:caret]))
            full = f"{message} at line {self.line}, column {self.column}\n  {_printable(text)}\n  {' ' * caret}^"
        elif rule is not None:
            full = f"{message} (rule {rule!r})"
        super().__init__(full, code=code)


class StructuralTagError(GrammarError):
    """A structural tag cannot be compiled: ``path`` locates the format inside it
    (``$.format.elements[1].content``); ``code`` is ``structural-tag`` (malformed),
    ``structural-tag-unsupported`` (valid, but not supported), ``structural-tag-token`` (a token
    the vocabulary lacks) or ``structural-tag-limit``."""

    code = "structural-tag"

    def __init__(self, message: str, *, path: str, code: str | None = None) -> None:
        self.path = path
        super().__init__(f"{message} at {path}", code=code)


class SchemaError(LogitgateError, ValueError):
    """A JSON Schema is invalid; ``pointer`` is the JSON pointer of the offending keyword."""

    code = "schema"

    def __init__(self, message: str, *, pointer: str = "", code: str | None = None) -> None:
        self.pointer = pointer
        super().__init__(f"{message} at {pointer or '#'}", code=code)


class UnsupportedSchemaError(SchemaError):
    """A valid JSON Schema uses a construct logitgate cannot lower exactly."""

    code = "schema-unsupported"

    def __init__(self, keyword: str, message: str, *, pointer: str = "") -> None:
        self.keyword = keyword
        super().__init__(f"unsupported {keyword!r}: {message}", pointer=pointer)


class LimitExceeded(LogitgateError):
    """A limit of :class:`~logitgate.Limits` (or a fixed cap of the JSON Schema frontend,
    docs/limits.md) was exceeded: ``limit`` names it, ``value`` is its setting; ``pointer`` is
    the JSON pointer of the schema keyword that asked for more, when a JSON Schema keyword did
    (``/minItems``), else None."""

    code = "limit"

    def __init__(self, limit: str, value: int | float, message: str = "", *, pointer: str | None = None) -> None:
        self.limit = limit
        self.value = value
        self.pointer = pointer
        where = "" if pointer is None else f" at {pointer or '#'}"
        super().__init__(f"limit {limit}={value} exceeded" + (f": {message}" if message else "") + where)


class CompileTimeout(LimitExceeded):
    """A compile ran past the ``timeout`` (seconds) it was given; ``limit`` is
    ``"compile_timeout"`` and ``value`` the timeout. Everything the compile built is released."""

    code = "compile-timeout"

    def __init__(self, timeout: float) -> None:
        super().__init__("compile_timeout", timeout, "the compile took longer than its timeout (seconds)")


class CompileCancelled(LogitgateError):
    """A compile stopped because its :class:`~logitgate.CancelToken` was cancelled (from any
    thread). Everything the compile built is released."""

    code = "compile-cancelled"

    def __init__(self, message: str = "compile cancelled") -> None:
        super().__init__(message)


class CacheFileError(LogitgateError):
    """A file of the on-disk cache of compiled grammars (``Compiler(cache_dir=...)``) cannot be
    used; ``code`` says why: ``cache-truncated``, ``cache-checksum`` (the bytes changed),
    ``cache-foreign`` (not a logitgate cache file, or another byte order), ``cache-version``
    (another format version), ``cache-key`` (a file of another entry), ``cache-limits``
    (compiled under other limits) or ``cache-inconsistent`` (an index out of its range). The
    compiler treats such a file as a miss: it compiles, and replaces the file."""

    code = "cache-file"


class UsageError(LogitgateError, ValueError):
    """An API call whose arguments cannot work (``top_p=2``, ``max_tokens=0``, a mask of the
    wrong dtype); ``code`` says which kind (``usage`` for an argument out of range, ``mask-dtype``,
    ``mask-shape``, ``mask-layout``, ``mask-readonly``, ``mask-byteorder``, ``mask-device``,
    ``mask-row``, ``logits-dtype``, ``logits-shape``, ``logits-layout``, ``logits-readonly``,
    ``logits-byteorder``, ``logits-grad``, ``rollback``, ``duplicate-matcher``, ...)."""

    code = "usage"


class TokenRejected(LogitgateError):
    """A token the grammar does not allow was forced in."""

    code = "token-rejected"


class VocabularyError(LogitgateError, ValueError):
    """A tokenizer could not be turned into exact per-token bytes."""

    code = "vocabulary"


class TruncatedOutput(LogitgateError):
    """A generation hit ``max_tokens`` before the grammar completed, and a parsed value was asked
    for. ``text`` is the partial output (a valid prefix of the language, not a full sentence)."""

    code = "truncated"

    def __init__(self, text: str, message: str = "") -> None:
        self.text = text
        super().__init__(message or f"output truncated at max_tokens before the grammar completed: {text[:80]!r}")


class OutputValidationError(LogitgateError, ValueError):
    """A complete output that the structure's own validation rejects: a Pydantic model's
    validators (or ``max_digits``, ``PastDate``...) check more than its JSON Schema can say.
    ``text`` is the output; ``errors`` the validator's error list (Pydantic's ``errors()``)."""

    code = "output-invalid"

    def __init__(self, text: str, message: str, errors: list[Any] | None = None) -> None:
        self.text = text
        self.errors = errors or []
        super().__init__(message)


def _printable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``). Inputs may hold
    them (JSON's ``"\\ud800"`` decodes to one), and a message quoting one could not be printed,
    logged or sent as UTF-8: every :class:`LogitgateError` message passes through here."""
    if _surrogate_at(text) < 0:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _surrogate_at(text: str) -> int:
    """The index of the first surrogate code point of ``text`` (a Python str may hold one; no
    UTF-8 text does), or -1. Frontends refuse such input with their typed error, at this index."""
    if text.isascii():
        return -1
    hit = _SURROGATE.search(text)
    return -1 if hit is None else hit.start()


_SURROGATE = re.compile("[\ud800-\udfff]")


def _int_text(n: int) -> str:
    """``n`` for an error message. Python refuses to print an int of more than 4,300 digits
    (ValueError), and a schema or IR node may hold one: reporting it must not raise."""
    if n.bit_length() <= 4000:  # about 1,200 digits
        return str(n)
    return f"{'-' if n < 0 else ''}an integer of about {int(n.bit_length() * 0.30103)} digits"
