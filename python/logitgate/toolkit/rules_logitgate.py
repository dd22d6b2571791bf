"""logitgate's own rules: what its JSON Schema compiler refuses by default, or drops under
``lenient=True``, each at its pointer (from one lenient compile)."""

from __future__ import annotations

from .compiled import LenientCompile, refusal_pointer
from .findings import Finding

__all__ = ["logitgate_rules"]


def logitgate_rules(result: LenientCompile) -> list[Finding]:
    out: list[Finding] = []
    for d in result.dropped:
        out.append(
            Finding(
                "logitgate-unsupported",
                "error",
                d.pointer,
                f"{d.keyword!r} cannot be enforced by the mask ({d.reason}); the compiler refuses it",
                "remove it, or compile with lenient=True to drop it (then validate that part after generation)",
                "logitgate",
            )
        )
    e = result.error
    if e is not None:
        limit = e.code == "limit"
        out.append(
            Finding(
                "logitgate-limit" if limit else "logitgate-invalid",
                "error",
                refusal_pointer(e),
                e.message.splitlines()[0],
                "raise the limit in lg.Limits or simplify the schema" if limit else "fix the schema",
                "logitgate",
            )
        )
    return out
