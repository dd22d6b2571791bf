"""What a lint rule reports: :class:`Finding`, one problem at one JSON pointer."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["SEVERITIES", "Finding", "Severity"]

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One lint finding.

    ``code`` is a stable slug (``openai-not-required``, ``design-conclusion-first``...; the
    full list is in docs/toolkit.md); ``source`` the rule set that made it (``openai``,
    ``anthropic``, ``logitgate``, ``design``); ``pointer`` a JSON pointer in URI-fragment form
    (``#`` is the root, ``#/properties/a`` a property); ``fix`` says what to change.
    """

    code: str
    severity: Severity
    pointer: str
    message: str
    fix: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.pointer}: {self.severity} [{self.code}] {self.message} (fix: {self.fix})"
