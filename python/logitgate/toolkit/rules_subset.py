"""The check both providers' strict modes share: a schema object uses only the provider's
keyword subset and format list (the keyword sets and the sources live with each provider)."""

from __future__ import annotations

from typing import Any

from .findings import Finding
from .schema_walk import join

__all__ = ["subset_findings"]


def subset_findings(
    s: dict[str, Any], ptr: str, source: str, keywords: frozenset[str], formats: frozenset[str], keyword_fix: str
) -> list[Finding]:
    """``<source>-unsupported-keyword`` per keyword outside ``keywords``, and
    ``<source>-unsupported-format`` for a ``format`` outside ``formats``."""
    out = [
        Finding(
            f"{source}-unsupported-keyword",
            "error",
            join(ptr, kw),
            f"keyword {kw!r} is not supported in strict mode",
            f"remove {kw!r} ({keyword_fix})",
            source,
        )
        for kw in s
        if kw not in keywords
    ]
    fmt = s.get("format")
    if isinstance(fmt, str) and fmt not in formats:
        out.append(
            Finding(
                f"{source}-unsupported-format",
                "error",
                join(ptr, "format"),
                f"format {fmt!r} is not supported",
                "use a pattern, or one of " + ", ".join(sorted(formats)),
                source,
            )
        )
    return out
