"""Diagnostics of one lowering: unsupported constraints (raised, or recorded when lenient) and
the reasons a language came out empty."""

from __future__ import annotations

from logitgate.errors import GrammarError, SchemaError, UnsupportedSchemaError

from .facts import _Facts


class Diagnostics:
    """Dropped constraints (lenient), the reasons languages came out empty, and the pointer of
    the schema set being lowered (errors raised without a keyword's own pointer name it)."""

    def __init__(self, lenient: bool) -> None:
        self.lenient = lenient
        self.dropped: list[str] = []
        self.empty_reasons: list[tuple[str, str]] = []
        self.where = ""

    def unsupported(self, keyword: str, message: str, pointer: str) -> None:
        """Raise, or (lenient) record the dropped constraint and return so the caller skips it."""
        pointer = pointer or self.where
        if not self.lenient:
            raise UnsupportedSchemaError(keyword, message, pointer=pointer)
        entry = f"{pointer or '#'}: {keyword}: {message}"
        if entry not in self.dropped:
            self.dropped.append(entry)

    def pattern_not_lowered(self, keyword: str, e: GrammarError, pointer: str) -> None:
        """A pattern the regex frontend refused: a syntax error makes the schema invalid (raised
        even when lenient: nothing valid is dropped); a construct it cannot lower is
        unsupported."""
        first = e.message.splitlines()[0]
        if e.code == "regex-syntax":
            raise SchemaError(f"invalid {keyword} regex: {first}", pointer=pointer, code="schema-invalid-pattern")
        self.unsupported(keyword, f"pattern not lowered: {first}", pointer)

    def lowering(self, pointer: str) -> None:
        """The schema set at ``pointer`` is being lowered (errors without a pointer name it)."""
        self.where = pointer

    def empty(self, pointer: str, message: str) -> None:
        """Records why a language came out empty (the first one recorded is reported)."""
        self.empty_reasons.append((pointer, message))

    def contradiction(self, f: _Facts, ptr: str, msg: str) -> None:
        """Records on ``f`` the first reason its language is empty."""
        if f.empty_reason is None:
            f.empty_reason = (ptr or self.where, msg)
