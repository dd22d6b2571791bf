"""OpenAI Structured Outputs (``strict: true``) rules, from OpenAI's guide "Structured
Outputs", section "Supported schemas" (platform.openai.com/docs/guides/structured-outputs,
as published in February 2026). docs/toolkit.md lists each rule with its source."""

from __future__ import annotations

from typing import Any

from .findings import Finding
from .rules_subset import subset_findings
from .schema_walk import dict_at, is_object_schema, join, list_at, nesting_path, schema_types, walk

__all__ = ["DOC", "SUPPORTED_FORMATS", "SUPPORTED_KEYWORDS", "openai_rules"]

DOC = "OpenAI Structured Outputs guide, 'Supported schemas' (2026-02)"
SUPPORTED_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        # annotations
        "title",
        "description",
        "$schema",
        "$comment",
        "examples",
        "default",
    }
)
SUPPORTED_FORMATS = frozenset({"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"})
MAX_NESTING = 10
MAX_PROPERTIES = 5_000
MAX_ENUM_VALUES = 1_000
MAX_TOTAL_STRING = 120_000
LARGE_ENUM = 250
MAX_LARGE_ENUM_STRING = 15_000


def _f(code: str, pointer: str, message: str, fix: str) -> Finding:
    return Finding(code, "error", pointer, message, fix, "openai")


def openai_rules(root: Any) -> list[Finding]:
    out: list[Finding] = []
    if not (isinstance(root, dict) and schema_types(root) == {"object"}):
        out.append(
            _f(
                "openai-root-not-object",
                "#",
                "the root schema must be a single object type",
                "wrap the value in an object property",
            )
        )
    if isinstance(root, dict) and "anyOf" in root:
        out.append(
            _f(
                "openai-root-anyof",
                "#",
                "the root schema must not be anyOf",
                "make the root an object with one property holding the anyOf",
            )
        )
    n_props = 0
    n_enum = 0
    total_string = 0
    for node in walk(root):
        s, ptr = node.schema, node.pointer
        if isinstance(s, bool):
            if node.keyword != "additionalProperties":  # that one has its own rule below
                out.append(
                    _f(
                        "openai-boolean-schema",
                        ptr,
                        f"boolean schema {str(s).lower()} is not supported",
                        "write the schema as an object",
                    )
                )
            continue
        out += subset_findings(
            s, ptr, "openai", SUPPORTED_KEYWORDS, SUPPORTED_FORMATS, "check it after generation instead"
        )
        if isinstance(s.get("items"), list):
            out.append(
                _f(
                    "openai-unsupported-keyword",
                    join(ptr, "items"),
                    "tuple 'items' (a list) is not supported",
                    "use an object with named properties",
                )
            )
        if is_object_schema(s):
            props = dict_at(s, "properties")
            n_props += len(props)
            total_string += sum(len(k) for k in props)
            required = list_at(s, "required")
            for name in props:
                if name not in required:
                    out.append(
                        _f(
                            "openai-not-required",
                            join(ptr, "properties", name),
                            f"property {name!r} is not in 'required': strict mode needs every property required",
                            "list it in 'required' and allow null for 'absent' (lg.to_strict does both)",
                        )
                    )
            if s.get("additionalProperties") is not False:
                out.append(
                    _f(
                        "openai-additional-properties",
                        ptr,
                        "an object needs 'additionalProperties': false",
                        'add "additionalProperties": false',
                    )
                )
        for kw in ("$defs", "definitions"):
            if isinstance(s.get(kw), dict):
                total_string += sum(len(k) for k in s[kw])
        enum = s.get("enum")
        if isinstance(enum, list):
            n_enum += len(enum)
            strings = [v for v in enum if isinstance(v, str)]
            total_string += sum(len(v) for v in strings)
            if len(enum) > LARGE_ENUM and sum(len(v) for v in strings) > MAX_LARGE_ENUM_STRING:
                out.append(
                    _f(
                        "openai-large-enum-length",
                        join(ptr, "enum"),
                        f"an enum of {len(enum)} values (over {LARGE_ENUM}) whose strings total over "
                        f"{MAX_LARGE_ENUM_STRING:,} characters",
                        "shorten the values or split the enum",
                    )
                )
        if isinstance(s.get("const"), str):
            total_string += len(s["const"])
    depth = nesting_path(root)
    if len(depth) > MAX_NESTING:
        out.append(
            _f(
                "openai-nesting",
                depth[MAX_NESTING].pointer,
                f"objects nest {len(depth)} levels deep (at most {MAX_NESTING})",
                "flatten the structure",
            )
        )
    if n_props > MAX_PROPERTIES:
        out.append(
            _f(
                "openai-too-many-properties",
                "#",
                f"{n_props:,} object properties in all (at most {MAX_PROPERTIES:,})",
                "split the schema",
            )
        )
    if n_enum > MAX_ENUM_VALUES:
        out.append(
            _f(
                "openai-too-many-enum-values",
                "#",
                f"{n_enum:,} enum values in all (at most {MAX_ENUM_VALUES:,})",
                "shorten the enums or use a pattern",
            )
        )
    if total_string > MAX_TOTAL_STRING:
        out.append(
            _f(
                "openai-string-total",
                "#",
                f"property names, definition names, enum and const values total {total_string:,} characters "
                f"(at most {MAX_TOTAL_STRING:,})",
                "shorten them",
            )
        )
    return out
