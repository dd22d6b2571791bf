"""The schema toolkit: what the mask does not solve, as tools that read the same schema.

- :func:`lint` (``logitgate lint``): provider strict-mode rules, logitgate's own refusals,
  and design rules, each finding with a stable code, a JSON pointer and a fix.
- :func:`to_strict`: a schema rewritten for OpenAI's strict mode, or a typed refusal.
- :func:`with_refusal`: lets the model answer ``{"refusal": "..."}`` instead of the object.
- :func:`extract`: generation, Pydantic validation, and retries that feed the errors back.
- :func:`enforcement_report` (``logitgate inspect``): what a compiled schema enforces, per pointer.
"""

from __future__ import annotations

from .enforcement import EnforcementEntry, EnforcementReport, enforcement_report
from .extract import ExtractionError, ExtractionResult, extract
from .findings import Finding
from .lint import has_errors, lint
from .refusal import with_refusal
from .strict import StrictConversionError, from_strict_value, to_strict

__all__ = [
    "EnforcementEntry",
    "EnforcementReport",
    "ExtractionError",
    "ExtractionResult",
    "Finding",
    "StrictConversionError",
    "enforcement_report",
    "extract",
    "from_strict_value",
    "has_errors",
    "lint",
    "to_strict",
    "with_refusal",
]
