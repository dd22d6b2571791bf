"""lg.lint: 33 hand-written schemas, each breaking one rule (or two where one structure
breaks both a provider's and a design rule), give exactly the expected findings; the MaskBench
corpus lints for openai without a crash."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import logitgate as lg
from logitgate.toolkit.findings import Finding

CLEAN = {"type": ["string", "null"], "pattern": "^[A-Za-z ]{1,40}$"}
PLAIN = {"type": "string", "pattern": "^[A-Za-z ]{1,40}$"}
COLOR = {"type": "string", "enum": ["red", "green", "unknown"]}
MASKBENCH = Path("/work/shared/corpora/jsonschemabench")


def obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
        "additionalProperties": False,
        **extra,
    }


def nested(levels: int) -> dict[str, Any]:
    s = obj({"name": CLEAN})
    for i in range(levels - 1):
        s = obj({f"level_{'abcdefghijklmnop'[i]}": s})
    return s


def chain(levels: int, at: int) -> str:
    """Pointer of the ``at``-th object (0-based) in ``nested(levels)``."""
    p = "#"
    for i in range(at):
        p += f"/properties/level_{'abcdefghijklmnop'[levels - 2 - i]}"
    return p


NAME = "#/properties/name"
CASES: list[tuple[str, str, Any, set[tuple[str, str]]]] = [
    # -- openai ----------------------------------------------------------------------------
    (
        "root-not-object",
        "openai",
        {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 5}, "maxItems": 3},
        {("openai-root-not-object", "#")},
    ),
    (
        "root-anyof",
        "openai",
        {"type": "object", "additionalProperties": False, "anyOf": [obj({"name": CLEAN}), obj({"name": CLEAN})]},
        {("openai-root-anyof", "#")},
    ),
    (
        "not-required",
        "openai",
        obj({"name": CLEAN, "nick": CLEAN}, required=["name"]),
        {("openai-not-required", "#/properties/nick")},
    ),
    (
        "additional-properties",
        "openai",
        {k: v for k, v in obj({"name": CLEAN}).items() if k != "additionalProperties"},
        {("openai-additional-properties", "#")},
    ),
    (
        "unsupported-keyword",
        "openai",
        obj({"name": {**CLEAN, "not": {"const": "x"}}}),
        {("openai-unsupported-keyword", NAME + "/not")},
    ),
    (
        "unsupported-format",
        "openai",
        obj({"link": {"type": ["string", "null"], "format": "uri"}}),
        {("openai-unsupported-format", "#/properties/link/format")},
    ),
    ("nesting-11", "openai", nested(11), {("openai-nesting", chain(11, 10)), ("design-nesting", chain(11, 5))}),
    (
        "too-many-properties",
        "openai",
        obj({f"name_{i}": CLEAN for i in range(5001)}),
        {("openai-too-many-properties", "#")},
    ),
    (
        "too-many-enum-values",
        "openai",
        obj({"city": {"type": "string", "enum": [f"city{i:04}" for i in range(1000)] + ["unknown"]}}),
        {("openai-too-many-enum-values", "#")},
    ),
    (
        "large-enum-length",
        "openai",
        obj({"city": {"type": "string", "enum": [f"{i:03}" + "x" * 57 for i in range(299)] + ["unknown"]}}),
        {("openai-large-enum-length", "#/properties/city/enum")},
    ),
    (
        "string-total",
        "openai",
        obj({"motto": {"type": ["string", "null"], "const": "y" * 121_000}}),
        {("openai-string-total", "#")},
    ),
    ("boolean-schema", "openai", obj({"name": True}), {("openai-boolean-schema", NAME)}),
    # -- anthropic -------------------------------------------------------------------------
    (
        "max-length",
        "anthropic",
        obj({"name": {"type": ["string", "null"], "maxLength": 20}}),
        {("anthropic-unsupported-keyword", NAME + "/maxLength")},
    ),
    (
        "min-items",
        "anthropic",
        obj({"tags": {"type": ["array", "null"], "items": CLEAN, "minItems": 2, "maxItems": 5}}),
        {
            ("anthropic-min-items", "#/properties/tags/minItems"),
            ("anthropic-unsupported-keyword", "#/properties/tags/maxItems"),
        },
    ),
    (
        "recursive",
        "anthropic",
        {
            "$defs": {"node": obj({"name": CLEAN, "child": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}})},
            "$ref": "#/$defs/node",
        },
        {("anthropic-recursive", "#/$defs/node/properties/child/anyOf/0/$ref")},
    ),
    (
        "too-many-optional",
        "anthropic",
        obj({f"name_{i}": PLAIN for i in range(25)}, required=[]),
        {("anthropic-too-many-optional", "#")},
    ),
    (
        "too-many-unions",
        "anthropic",
        obj({f"name_{i}": CLEAN for i in range(17)}),
        {("anthropic-too-many-unions", "#")},
    ),
    ("too-many-tools", "anthropic", [obj({"color": COLOR})] * 21, {("anthropic-too-many-tools", "#")}),
    (
        "complex-enum",
        "anthropic",
        obj({"point": {"enum": [{"x": 1}, {"x": 2}, None]}}),
        {("anthropic-complex-enum", "#/properties/point/enum")},
    ),
    (
        "external-ref",
        "anthropic",
        obj({"name": {"$ref": "https://example.com/name.json"}}),
        {("anthropic-external-ref", NAME + "/$ref")},
    ),
    (
        "anthropic-additional-properties",
        "anthropic",
        {k: v for k, v in obj({"name": CLEAN}).items() if k != "additionalProperties"},
        {("anthropic-additional-properties", "#")},
    ),
    # -- logitgate -------------------------------------------------------------------------
    (
        "unique-items",
        "logitgate",
        obj({"tags": {"type": ["array", "null"], "items": PLAIN, "uniqueItems": True, "maxItems": 5}}),
        {("logitgate-unsupported", "#/properties/tags/uniqueItems")},
    ),
    (
        "format-iri",
        "logitgate",
        obj({"link": {"type": ["string", "null"], "format": "iri"}}),
        {("logitgate-unsupported", "#/properties/link/format")},
    ),
    ("dangling-ref", "logitgate", obj({"name": {"$ref": "#/$defs/missing"}}), {("logitgate-invalid", NAME + "/$ref")}),
    # -- design ----------------------------------------------------------------------------
    (
        "conclusion-first",
        "logitgate",
        obj({"verdict": {"type": ["string", "null"], "enum": ["guilty", "innocent", None]}, "reasoning": CLEAN}),
        {("design-conclusion-first", "#/properties/verdict")},
    ),
    (
        "enum-no-unknown",
        "logitgate",
        obj({"color": {"type": "string", "enum": ["red", "green"]}}),
        {("design-enum-no-unknown", "#/properties/color/enum")},
    ),
    ("required-no-null", "logitgate", obj({"name": PLAIN}), {("design-required-no-null", NAME)}),
    ("nesting-3", "logitgate", nested(3), {("design-nesting", chain(3, 2))}),
    ("nesting-6", "logitgate", nested(6), {("design-nesting", chain(6, 5))}),
    (
        "uninformative-name",
        "logitgate",
        obj({"field_3": CLEAN}),
        {("design-uninformative-name", "#/properties/field_3")},
    ),
    (
        "free-string-enum",
        "logitgate",
        obj({"order_status": {"type": ["string", "null"], "maxLength": 30}}),
        {("design-free-string-enum", "#/properties/order_status")},
    ),
    (
        "unbounded-array",
        "logitgate",
        obj({"tags": {"type": ["array", "null"], "items": CLEAN}}),
        {("design-unbounded-array", "#/properties/tags")},
    ),
    ("unbounded-string", "logitgate", obj({"name": {"type": ["string", "null"]}}), {("design-unbounded-string", NAME)}),
]


def _found(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(f.code, f.pointer) for f in findings}


def test_thirty_cases_at_least() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("name", "target", "schema", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_schema_gives_exactly_its_findings(
    name: str, target: str, schema: Any, expected: set[tuple[str, str]]
) -> None:
    findings = lg.lint(schema, target=target)  # type: ignore[arg-type]
    assert _found(findings) == expected, [str(f) for f in findings]
    assert len(findings) == len(expected)
    for f in findings:
        assert f.message and f.fix and f.source == f.code.split("-")[0]


@pytest.mark.parametrize("target", ["openai", "anthropic", "logitgate"])
def test_the_clean_base_is_clean(target: str) -> None:
    assert lg.lint(obj({"name": CLEAN}), target=target) == []  # type: ignore[arg-type]


def test_unbounded_findings_carry_the_token_budget() -> None:
    (f,) = lg.lint(obj({"name": {"type": ["string", "null"]}}), target="logitgate")
    assert "token budget: at least 11 byte tokens, no maximum" in f.message  # {"name":""}
    (g,) = lg.lint(obj({"name": {"type": ["string", "null"]}}), target="logitgate", budget=False)
    assert "token budget" not in g.message


def test_errors_sort_first_and_json_text_is_accepted() -> None:
    schema = obj({"name": PLAIN, "nick": CLEAN}, required=["name"])
    findings = lg.lint(json.dumps(schema), target="openai")
    assert [f.severity for f in findings] == ["error", "info"]
    assert lg.toolkit.has_errors(findings)


def test_pydantic_model_is_linted_through_its_schema() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Review(pydantic.BaseModel):
        score: int
        reasoning: str

    codes = {f.code for f in lg.lint(Review, target="openai")}
    assert {"design-conclusion-first", "design-unbounded-string"} <= codes


def test_bad_target_and_bad_schema_are_typed() -> None:
    with pytest.raises(lg.UsageError) as e:
        lg.lint({}, target="gemini")  # type: ignore[arg-type]
    assert e.value.code == "lint-target"
    with pytest.raises(lg.SchemaError) as s:
        lg.lint("{not json", target="openai")
    assert s.value.code == "schema-json"
    with pytest.raises(lg.UsageError):
        lg.lint([{}], target="openai")


def test_deep_schema_does_not_recurse() -> None:
    s: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        s = {"anyOf": [s, {"type": "null"}]}
    codes = {f.code for f in lg.lint(obj({"name": s}), target="openai", budget=False)}
    assert "openai-unsupported-keyword" not in codes


def _maskbench(per_split: int | None) -> list[tuple[str, Any]]:
    out = []
    for path in sorted(MASKBENCH.glob("*/schemas.jsonl")):
        with path.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if per_split is not None and i >= per_split:
                    break
                row = json.loads(line)
                out.append((f"{path.parent.name}/{row['id']}", row["schema"]))
    return out


def _lint_corpus(rows: list[tuple[str, Any]]) -> int:
    n = 0
    for name, schema in rows:
        try:
            findings = lg.lint(schema, target="openai")
        except (lg.SchemaError, lg.LimitExceeded):
            continue  # a typed refusal of an invalid document is not a crash
        except Exception as e:  # pragma: no cover - the failure message names the schema
            raise AssertionError(f"{name}: {type(e).__name__}: {e}") from e
        assert all(f.pointer.startswith("#") and f.code for f in findings), name
        n += 1
    return n


@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="MaskBench corpus not present")
def test_maskbench_subset_lints_for_openai() -> None:
    rows = _maskbench(per_split=3)
    assert _lint_corpus(rows) >= len(rows) - 3


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.skipif(not MASKBENCH.is_dir(), reason="MaskBench corpus not present")
def test_every_maskbench_schema_lints_for_openai() -> None:
    rows = _maskbench(per_split=None)
    assert len(rows) > 11_000
    assert _lint_corpus(rows) >= len(rows) - 50


@pytest.mark.parametrize("target", ["openai", "anthropic", "logitgate"])
def test_a_malformed_schema_is_an_error_for_every_target(target: str) -> None:
    """A schema that is wrong as JSON Schema (an unknown type) is reported whatever the target,
    at the keyword's pointer; the provider rules alone never look at type names."""
    schema = {"type": "object", "properties": {"a": {"type": "strin"}}, "required": ["a"]}
    schema["additionalProperties"] = False
    found = [f for f in lg.lint(schema, target=target) if f.code == "logitgate-invalid"]
    assert [(f.severity, f.pointer) for f in found] == [("error", "#/properties/a/type")]
