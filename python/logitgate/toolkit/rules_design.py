"""Design rules: schemas that parse but make a model fabricate, decide before it reasons, or
run without bound. Heuristic by nature (they read property names); each finding is a warning
or an info unless the structure is extreme (nesting over 5 levels is an error)."""

from __future__ import annotations

import re
from typing import Any

from .findings import Finding, Severity
from .schema_walk import dict_at, join, list_at, nesting_path, resolve_local, schema_types, walk

__all__ = ["design_rules", "name_words"]

CONCLUSION_WORDS = frozenset(
    {
        "verdict",
        "classification",
        "decision",
        "answer",
        "score",
        "conclusion",
        "label",
        "rating",
        "prediction",
        "judgment",
        "judgement",
        "outcome",
        "result",
    }
)
REASONING_WORDS = frozenset(
    {
        "reasoning",
        "rationale",
        "explanation",
        "evidence",
        "analysis",
        "justification",
        "thoughts",
        "thinking",
        "reasons",
        "steps",
        "chain",
        "quotes",
        "citations",
    }
)
# Names of categorical facts: a free string there invites spelling variants.
CATEGORICAL_WORDS = frozenset(
    {
        "status",
        "state",
        "severity",
        "priority",
        "level",
        "category",
        "kind",
        "type",
        "sentiment",
        "classification",
        "verdict",
        "decision",
        "rating",
        "grade",
        "tier",
        "stage",
        "phase",
        "outcome",
        "risk",
        "urgency",
        "label",
    }
)
UNKNOWN_WORDS = frozenset(
    {
        "unknown",
        "other",
        "none",
        "n/a",
        "na",
        "unclear",
        "undetermined",
        "unspecified",
        "insufficient",
        "not_applicable",
        "not_enough_information",
        "cannot_determine",
        "null",
    }
)
_UNINFORMATIVE = re.compile(
    r"^(?:(?:field|value|val|prop|property|attr|attribute|column|col|param|arg|item|data|var|key|obj|thing|foo|bar|baz|tmp|temp|unnamed|untitled|[a-z])[_\-]?\d+|[a-z])$",
    re.I,
)
NESTING_WARNING = 2
NESTING_ERROR = 5


def name_words(name: str) -> list[str]:
    """The lower-case words of a property name (snake_case, kebab-case, camelCase)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.lower() for w in re.split(r"[\s_\-.]+", spaced) if w]


def _f(code: str, severity: Severity, pointer: str, message: str, fix: str) -> Finding:
    return Finding(code, severity, pointer, message, fix, "design")


def _deref(root: Any, s: Any) -> Any:
    """``s`` with a local ``$ref`` followed (one step at a time, at most 32)."""
    for _ in range(32):
        if not (isinstance(s, dict) and isinstance(s.get("$ref"), str)):
            break
        hit = resolve_local(root, s["$ref"])
        if hit is None:
            break
        s = hit[1]
    return s


def _allows_null(root: Any, s: Any, depth: int = 0) -> bool:
    s = _deref(root, s)
    if depth > 32:  # nested unions that deep: say no rather than recurse further
        return False
    if not isinstance(s, dict):
        return s is True
    if "null" in schema_types(s) or None in (s.get("enum") or []) or ("const" in s and s["const"] is None):
        return True
    return any(
        _allows_null(root, b, depth + 1)
        for kw in ("anyOf", "oneOf")
        for b in s.get(kw) or []
        if isinstance(b, (dict, bool))
    )


def _bounded_pattern(p: Any) -> bool:
    """An anchored pattern without unbounded repetition (``*``, ``+``, ``{n,}``)."""
    return isinstance(p, str) and p.startswith("^") and p.endswith("$") and not re.search(r"(?<!\\)[*+]|\{\d*,\}", p)


def _is_free_string(s: dict[str, Any]) -> bool:
    return "string" in schema_types(s) and not any(k in s for k in ("enum", "const", "format", "pattern"))


def _is_categorical_enum(s: dict[str, Any]) -> bool:
    enum = s.get("enum")
    return isinstance(enum, list) and len(enum) >= 2 and all(isinstance(v, str) for v in enum)


def design_rules(root: Any) -> list[Finding]:
    out: list[Finding] = []
    for node in walk(root):
        s, ptr = node.schema, node.pointer
        if not isinstance(s, dict):
            continue
        props = dict_at(s, "properties")
        if props:
            out.extend(_object_rules(root, s, ptr, props))
        if _is_categorical_enum(s):
            values = {v.lower().replace(" ", "_").replace("-", "_") for v in s["enum"]}
            if not values & UNKNOWN_WORDS and not _allows_null(root, s) and not (node.keyword == "anyOf"):
                out.append(
                    _f(
                        "design-enum-no-unknown",
                        "warning",
                        join(ptr, "enum"),
                        f"categorical enum {s['enum'][:4]!r}{'...' if len(s['enum']) > 4 else ''} has no member for "
                        "'unknown' or 'insufficient evidence': the model must pick a category even when the "
                        "input shows none",
                        'add an "unknown" member (or allow null)',
                    )
                )
        types = schema_types(s)
        if (
            "array" in types
            and "maxItems" not in s
            and not isinstance(s.get("items"), list)
            and s.get("items") is not False
        ):
            out.append(
                _f(
                    "design-unbounded-array",
                    "warning",
                    ptr,
                    "array without maxItems: the output has no length bound",
                    "add maxItems",
                )
            )
        if (
            "string" in types
            and "maxLength" not in s
            and not any(k in s for k in ("enum", "const", "format"))
            and not _bounded_pattern(s.get("pattern"))
        ):
            out.append(
                _f(
                    "design-unbounded-string",
                    "warning",
                    ptr,
                    "string without maxLength (or an enum, format or anchored bounded pattern): "
                    "the output has no length bound",
                    "add maxLength (or a bounded pattern such as ^.{0,200}$)",
                )
            )
    path = nesting_path(root)
    if len(path) > NESTING_WARNING:
        error = len(path) > NESTING_ERROR
        at = path[NESTING_ERROR if error else NESTING_WARNING]
        out.append(
            _f(
                "design-nesting",
                "error" if error else "warning",
                at.pointer,
                f"objects nest {len(path)} levels deep (more than {NESTING_ERROR if error else NESTING_WARNING}): "
                "deep structures are filled less reliably",
                "flatten: move nested facts up, or split the extraction",
            )
        )
    return out


def _object_rules(root: Any, s: dict[str, Any], ptr: str, props: dict[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    names = list(props)
    reasoning_at = [i for i, n in enumerate(names) if set(name_words(n)) & REASONING_WORDS]
    required = list_at(s, "required")
    for i, name in enumerate(names):
        pptr = join(ptr, "properties", name)
        words = set(name_words(name))
        if words & CONCLUSION_WORDS and not words & REASONING_WORDS and any(j > i for j in reasoning_at):
            later = names[next(j for j in reasoning_at if j > i)]
            out.append(
                _f(
                    "design-conclusion-first",
                    "warning",
                    pptr,
                    f"conclusion {name!r} comes before {later!r}: "
                    "the model commits to it before generating its reasons",
                    f"move {name!r} after {later!r}",
                )
            )
        if _UNINFORMATIVE.match(name):
            out.append(
                _f(
                    "design-uninformative-name",
                    "warning",
                    pptr,
                    f"property name {name!r} does not say what it holds",
                    "name it after its meaning (the model reads the names)",
                )
            )
        p = _deref(root, props[name])
        if isinstance(p, dict):
            words_last = name_words(name)[-1:] if name_words(name) else []
            if _is_free_string(p) and set(words_last) & CATEGORICAL_WORDS:
                out.append(
                    _f(
                        "design-free-string-enum",
                        "warning",
                        pptr,
                        f"{name!r} names a category but is a free string",
                        'use an enum of the allowed values (with an "unknown" member)',
                    )
                )
            if name in required and not words & REASONING_WORDS and not _allows_null(root, p) and _is_fact(p):
                out.append(
                    _f(
                        "design-required-no-null",
                        "info",
                        pptr,
                        f"{name!r} is required and cannot be null: "
                        "when the input lacks it the model must invent a value",
                        'allow null ("type": ["...", "null"]) unless every input states it',
                    )
                )
    return out


def _is_fact(s: dict[str, Any]) -> bool:
    """A scalar read from the input (string, number, integer), not a category or a structure."""
    t = schema_types(s)
    return bool(t) and t <= {"string", "number", "integer"} and "enum" not in s and "const" not in s
