"""Anthropic strict tool use rules, from Anthropic's "Structured outputs" page, section
"JSON Schema limitations", and "Strict tool use" (platform.claude.com/docs/en/build-with-claude/
structured-outputs and .../agents-and-tools/tool-use/strict-tool-use, as published in early
2026). The per-request limits (tools, optional parameters, union-typed parameters) are counted
over every schema given to one :func:`~logitgate.lint` call (a list of tool input schemas is
one request). docs/toolkit.md lists each rule with its source."""

from __future__ import annotations

from typing import Any

from .findings import Finding
from .rules_subset import subset_findings
from .schema_walk import is_object_schema, join, list_at, ref_cycles, walk

__all__ = ["DOC", "anthropic_request_rules", "anthropic_rules"]

DOC = "Anthropic Structured outputs, 'JSON Schema limitations', and Strict tool use (2026)"
SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "enum",
        "const",
        "anyOf",
        "allOf",
        "$ref",
        "$defs",
        "definitions",
        "format",
        "pattern",
        "title",
        "description",
        "default",
        "$schema",
        "$comment",
        "examples",
    }
)
SUPPORTED_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
MAX_STRICT_TOOLS = 20
MAX_OPTIONAL = 24
MAX_UNION = 16


def _f(code: str, pointer: str, message: str, fix: str) -> Finding:
    return Finding(code, "error", pointer, message, fix, "anthropic")


def anthropic_rules(root: Any) -> list[Finding]:
    """Rules on one schema (the per-request counts are :func:`anthropic_request_rules`)."""
    out: list[Finding] = []
    for node in walk(root):
        s, ptr = node.schema, node.pointer
        if not isinstance(s, dict):
            continue
        out += subset_findings(
            s, ptr, "anthropic", SUPPORTED_KEYWORDS, SUPPORTED_FORMATS, "the SDKs move it into the description"
        )
        mi = s.get("minItems")
        if mi is not None and mi not in (0, 1):
            out.append(
                _f(
                    "anthropic-min-items",
                    join(ptr, "minItems"),
                    f"minItems {mi} (only 0 or 1 are supported)",
                    "use minItems 0 or 1 and check the count after generation",
                )
            )
        enum = s.get("enum")
        if isinstance(enum, list) and any(isinstance(v, (dict, list)) for v in enum):
            out.append(
                _f(
                    "anthropic-complex-enum",
                    join(ptr, "enum"),
                    "enum values must be strings, numbers, booleans or null",
                    "use anyOf of const objects",
                )
            )
        ref = s.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            out.append(
                _f(
                    "anthropic-external-ref",
                    join(ptr, "$ref"),
                    f"external reference {ref!r}",
                    "inline the referenced schema under $defs",
                )
            )
        if isinstance(s.get("allOf"), list) and any(isinstance(b, dict) and "$ref" in b for b in s["allOf"]):
            out.append(
                _f(
                    "anthropic-allof-ref",
                    join(ptr, "allOf"),
                    "allOf with $ref is not supported",
                    "inline the referenced schema (lg.to_strict does)",
                )
            )
        if is_object_schema(s) and s.get("additionalProperties") is not False:
            out.append(
                _f(
                    "anthropic-additional-properties",
                    ptr,
                    "an object needs 'additionalProperties': false",
                    'add "additionalProperties": false',
                )
            )
    for ptr in ref_cycles(root):
        out.append(
            _f(
                "anthropic-recursive",
                ptr,
                "recursive schemas are not supported",
                "unroll the recursion to a fixed depth",
            )
        )
    return out


def _counts(root: Any) -> tuple[int, int]:
    """(optional properties, properties whose schema is a union: anyOf or a type list)."""
    optional = union = 0
    for node in walk(root):
        s = node.schema
        if not (isinstance(s, dict) and is_object_schema(s) and isinstance(s.get("properties"), dict)):
            continue
        required = list_at(s, "required")
        for name, p in s["properties"].items():
            optional += name not in required
            union += isinstance(p, dict) and ("anyOf" in p or isinstance(p.get("type"), list))
    return optional, union


def anthropic_request_rules(roots: list[Any]) -> list[Finding]:
    """The limits per request, over all the strict tools' input schemas in ``roots``."""
    out: list[Finding] = []
    if len(roots) > MAX_STRICT_TOOLS:
        out.append(
            _f(
                "anthropic-too-many-tools",
                "#",
                f"{len(roots)} strict tools (at most {MAX_STRICT_TOOLS} per request)",
                "send fewer tools as strict",
            )
        )
    optional = union = 0
    for r in roots:
        o, u = _counts(r)
        optional += o
        union += u
    if optional > MAX_OPTIONAL:
        out.append(
            _f(
                "anthropic-too-many-optional",
                "#",
                f"{optional} optional parameters (at most {MAX_OPTIONAL} per request)",
                "make parameters required (with a null path where the fact may be absent)",
            )
        )
    if union > MAX_UNION:
        out.append(
            _f(
                "anthropic-too-many-unions",
                "#",
                f"{union} parameters with anyOf or a type list (at most {MAX_UNION} per request)",
                "use fewer union-typed parameters",
            )
        )
    return out
