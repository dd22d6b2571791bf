"""lg.to_strict against the openai SDK's own to_strict_json_schema on 20 Pydantic models: the
same schema once the documented differences are normalized (docs/toolkit.md), lint-clean for
openai, and the same verdict on sample instances; typed refusals name the pointer."""

from __future__ import annotations

import copy
import datetime
import enum
import uuid
from typing import Any, Literal

import jsonschema
import pytest

import logitgate as lg

pydantic = pytest.importorskip("pydantic")
openai_pydantic = pytest.importorskip("openai.lib._pydantic")
from pydantic import BaseModel, Field  # noqa: E402


class Color(str, enum.Enum):
    red = "red"
    green = "green"
    unknown = "unknown"


class Address(BaseModel):
    street: str
    city: str
    zip_code: str | None = None


class Item(BaseModel):
    name: str
    quantity: int = Field(ge=1, le=100)


class Node(BaseModel):
    label: str
    children: list[Node] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class M01Plain(BaseModel):
    name: str
    age: int


class M02Optional(BaseModel):
    name: str
    nickname: str | None = None


class M03Default(BaseModel):
    name: str
    retries: int = 3


class M04Nested(BaseModel):
    customer: str
    address: Address


class M05ListOfModels(BaseModel):
    items: list[Item]


class M06Enum(BaseModel):
    color: Color


class M07EnumWithDescription(BaseModel):
    color: Color = Field(description="the main color")


class M08Literal(BaseModel):
    mode: Literal["fast", "slow", "unknown"]


class M09Datetime(BaseModel):
    at: datetime.datetime
    on: datetime.date


class M10Uuid(BaseModel):
    id: uuid.UUID


class M11Recursive(BaseModel):
    root: Node


class M12Union(BaseModel):
    pet: Cat | Dog


class M13Bounds(BaseModel):
    score: float = Field(ge=0, le=1)


class M14NestedDescription(BaseModel):
    home: Address = Field(description="where they live")


class M15OptionalNested(BaseModel):
    billing: Address | None = None


class M16ListOfStrings(BaseModel):
    tags: list[str] = Field(max_length=5)


class M17Bool(BaseModel):
    active: bool
    note: str | None = None


class M18StrLength(BaseModel):
    code: str = Field(min_length=2, max_length=8)


class M19Pattern(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{4}$")


class M20Mixed(BaseModel):
    title: str
    items: list[Item] = []
    color: Color | None = None
    ratio: float = 0.5


MODELS = [
    M01Plain, M02Optional, M03Default, M04Nested, M05ListOfModels, M06Enum, M07EnumWithDescription,
    M08Literal, M09Datetime, M10Uuid, M11Recursive, M12Union, M13Bounds, M14NestedDescription,
    M15OptionalNested, M16ListOfStrings, M17Bool, M18StrLength, M19Pattern, M20Mixed,
]  # fmt: skip


def _normalized(schema: Any) -> Any:
    """The documented differences taken out: ``default`` and ``title`` annotations dropped,
    ``minLength``/``maxLength`` written as the pattern to_strict writes, and a ``null`` that
    to_strict adds to an optional property (``anyOf [X, null]`` / ``type [T, "null"]``) kept
    as the SDK writes it only when the original has it too (see _strip_added_nulls)."""
    if isinstance(schema, list):
        return [_normalized(x) for x in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _normalized(v) for k, v in schema.items() if k not in ("default", "title")}
    if "minLength" in out or "maxLength" in out:
        lo, hi = out.pop("minLength", 0), out.pop("maxLength", None)
        out["pattern"] = f"^[\\s\\S]{{{lo},{'' if hi is None else hi}}}$"
    return out


def _strip_added_nulls(strict: Any, original: Any) -> Any:
    """to_strict's output with the nulls it added to optional properties removed."""
    if isinstance(strict, dict) and isinstance(original, dict):
        out = dict(strict)
        if isinstance(strict.get("properties"), dict) and isinstance(original.get("properties"), dict):
            required = original.get("required", [])
            props = {}
            for k, v in strict["properties"].items():
                o = original["properties"].get(k)
                if k not in required and not _has_null(o):
                    v = _drop_null(v)
                props[k] = _strip_added_nulls(v, o)
            out["properties"] = props
        for kw in ("$defs", "items"):
            if kw in strict and kw in original:
                if kw == "$defs":
                    out[kw] = {k: _strip_added_nulls(v, original[kw].get(k)) for k, v in strict[kw].items()}
                else:
                    out[kw] = _strip_added_nulls(strict[kw], original[kw])
        if isinstance(strict.get("anyOf"), list) and isinstance(original.get("anyOf"), list):
            out["anyOf"] = [_strip_added_nulls(a, b) for a, b in zip(strict["anyOf"], original["anyOf"], strict=False)]
        return out
    return strict


def _has_null(s: Any) -> bool:
    if not isinstance(s, dict):
        return False
    t = s.get("type")
    return t == "null" or (isinstance(t, list) and "null" in t) or any(_has_null(b) for b in s.get("anyOf", []))


def _drop_null(s: dict[str, Any]) -> dict[str, Any]:
    if isinstance(s.get("type"), list) and "null" in s["type"]:
        out = dict(s)
        rest = [t for t in s["type"] if t != "null"]
        out["type"] = rest[0] if len(rest) == 1 else rest
        if isinstance(out.get("enum"), list):
            out["enum"] = [v for v in out["enum"] if v is not None]
        return out
    if isinstance(s.get("anyOf"), list) and s["anyOf"][-1] == {"type": "null"}:
        rest = s["anyOf"][:-1]
        if len(rest) == 1 and set(s) == {"anyOf"}:
            return dict(rest[0])
        return {**s, "anyOf": rest}
    return s


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_to_strict_means_what_the_sdk_means(model: type[BaseModel]) -> None:
    original = model.model_json_schema()
    ours = lg.to_strict(copy.deepcopy(original))
    sdk = openai_pydantic.to_strict_json_schema(model)
    assert _normalized(_strip_added_nulls(ours, original)) == _normalized(sdk)
    assert not lg.toolkit.has_errors(lg.lint(ours, target="openai")), [
        str(f) for f in lg.lint(ours, "openai") if f.severity == "error"
    ]
    assert original == model.model_json_schema()  # the input is not modified


SAMPLES: dict[str, list[dict[str, Any]]] = {
    "M02Optional": [{"name": "a", "nickname": None}, {"name": "a", "nickname": "b"}],
    "M03Default": [{"name": "a", "retries": 3}],
    "M12Union": [{"pet": {"kind": "cat", "lives": 9}}, {"pet": {"kind": "dog", "good": True}}],
    "M18StrLength": [{"code": "ab"}, {"code": "abcdefgh"}],
}
REJECTED: dict[str, list[dict[str, Any]]] = {
    "M12Union": [{"pet": {"kind": "cat", "good": True}}],
    "M18StrLength": [{"code": "a"}, {"code": "abcdefghi"}],
    "M13Bounds": [{"score": 1.5}],
}


@pytest.mark.parametrize("name", sorted(set(SAMPLES) | set(REJECTED)))
def test_to_strict_keeps_the_verdicts(name: str) -> None:
    model = next(m for m in MODELS if m.__name__ == name)
    ours = lg.to_strict(model.model_json_schema())
    for value in SAMPLES.get(name, []):
        jsonschema.validate(value, ours)
        model.model_validate(lg.from_strict_value(value, model.model_json_schema()))
    for value in REJECTED.get(name, []):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(value, ours)


def test_optional_becomes_nullable_and_required_and_maps_back() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string", "enum": ["x", "y"]}},
        "required": ["a"],
    }
    strict = lg.to_strict(schema)
    assert strict["required"] == ["a", "b"] and strict["additionalProperties"] is False
    assert strict["properties"]["b"] == {"type": ["string", "null"], "enum": ["x", "y", None]}
    assert lg.from_strict_value({"a": 1, "b": None}, schema) == {"a": 1}


def test_single_allof_and_ref_siblings_are_inlined() -> None:
    schema = {
        "type": "object",
        "$defs": {"Name": {"type": "string", "pattern": "^[a-z]{1,9}$"}},
        "properties": {
            "a": {"allOf": [{"$ref": "#/$defs/Name"}], "description": "first"},
            "b": {"$ref": "#/$defs/Name", "description": "second"},
        },
        "required": ["a", "b"],
    }
    strict = lg.to_strict(schema)
    assert strict["properties"]["a"] == {"type": "string", "pattern": "^[a-z]{1,9}$", "description": "first"}
    assert strict["properties"]["b"] == {"type": "string", "pattern": "^[a-z]{1,9}$", "description": "second"}


@pytest.mark.parametrize(
    ("schema", "keyword", "pointer"),
    [
        (
            {"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}},
            "oneOf",
            "#/properties/a/oneOf",
        ),
        (
            {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "integer"}}}},
            "additionalProperties",
            "#/properties/m/additionalProperties",
        ),
        (
            {"type": "object", "properties": {"u": {"type": "string", "format": "uri"}}},
            "format",
            "#/properties/u/format",
        ),
        ({"type": "array", "items": {"type": "string"}}, "type", "#"),
        ({"type": "object", "anyOf": [{"required": ["a"]}]}, "anyOf", "#"),
        (
            {"type": "object", "properties": {"a": {"type": "string", "maxLength": 3, "pattern": "^a"}}},
            "maxLength",
            "#/properties/a",
        ),
        (
            {"type": "object", "properties": {"a": {"allOf": [{"minimum": 1}], "minimum": 2}}},
            "minimum",
            "#/properties/a/allOf/minimum",
        ),
    ],
)
def test_refusals_name_keyword_and_pointer(schema: dict[str, Any], keyword: str, pointer: str) -> None:
    with pytest.raises(lg.StrictConversionError) as e:
        lg.to_strict(schema)
    assert (e.value.keyword, e.value.pointer, e.value.code) == (keyword, pointer, "strict-unsupported")
    assert isinstance(e.value, lg.SchemaError)


def test_bad_target_is_a_usage_error() -> None:
    with pytest.raises(lg.UsageError):
        lg.to_strict({"type": "object"}, target="anthropic")
