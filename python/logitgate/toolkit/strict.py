"""``lg.to_strict``: a JSON Schema rewritten for OpenAI's strict mode, or a typed refusal.

The rewrite keeps the meaning: every output valid against the strict schema is valid against
the original once the keys that were optional and came back ``null`` are removed
(:func:`from_strict_value` does that), and every valid original instance has a strict
counterpart. Steps, per object: every property required, an optional one made nullable (``null``
means absent); ``additionalProperties: false`` where it was absent or ``true`` (an output
never needs keys the schema does not name); a single-branch ``allOf`` merged into its parent;
a ``$ref`` with siblings replaced by its target merged with them; ``minLength``/``maxLength``
on a string without a pattern written as an anchored pattern. Anything else strict mode cannot
say (``oneOf``, ``not``, ``if``, a map's ``additionalProperties`` schema, an unsupported
format...) raises :class:`StrictConversionError` naming the keyword and the pointer: dropping
it would let the provider emit values the schema forbids.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import SchemaError, UsageError
from .lint import schema_document
from .rules_openai import SUPPORTED_FORMATS, SUPPORTED_KEYWORDS
from .schema_walk import dict_at, is_object_schema, join, list_at, resolve_local, schema_types

__all__ = ["StrictConversionError", "from_strict_value", "to_strict"]

_MAX_DEPTH = 256
_ANNOTATIONS = frozenset({"title", "description", "$comment", "examples", "default", "$schema"})


class StrictConversionError(SchemaError):
    """The schema holds a constraint OpenAI's strict mode cannot express; ``keyword`` names it
    and ``pointer`` says where (``#/...``)."""

    code = "strict-unsupported"

    def __init__(self, keyword: str, message: str, *, pointer: str) -> None:
        self.keyword = keyword
        super().__init__(f"{keyword!r}: {message}", pointer=pointer, code="strict-unsupported")


def to_strict(schema: Any, target: str = "openai") -> dict[str, Any]:
    """``schema`` (a dict, JSON text or a Pydantic model class) rewritten for ``target``'s
    strict mode (only ``"openai"``). The input is not modified."""
    if target != "openai":
        raise UsageError(f"to_strict supports target='openai' only, not {target!r}", code="strict-target")
    doc = schema_document(schema)
    if not isinstance(doc, dict):
        raise StrictConversionError("type", "a boolean schema has no strict form", pointer="#")
    root = copy.deepcopy(doc)
    if schema_types(root) != {"object"} and not (is_object_schema(root) and "type" not in root):
        raise StrictConversionError("type", "the root must be an object; wrap the value in a property", pointer="#")
    if "anyOf" in root:
        raise StrictConversionError("anyOf", "the root must not be anyOf; wrap it in a property", pointer="#")
    return _Rewrite(root).node(root, "#", 0)


def from_strict_value(value: Any, original: Any) -> Any:
    """A strict output mapped back to the original schema: the keys that were optional there
    and are ``null`` here are removed (where ``null`` is not itself a valid value of theirs)."""
    doc = schema_document(original)
    return _strip_nulls(value, doc, doc, 0)


def _strip_nulls(value: Any, s: Any, root: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH or not isinstance(s, dict):
        return value
    while isinstance(s.get("$ref"), str) and (hit := resolve_local(root, s["$ref"])) is not None and hit[1] is not s:
        s = {**hit[1], **{k: v for k, v in s.items() if k != "$ref"}}
        depth += 1
        if depth > _MAX_DEPTH:
            return value
    for b in s.get("allOf") or []:
        if isinstance(b, dict):
            s = {**s, **b}
    if isinstance(value, dict) and isinstance(s.get("properties"), dict):
        required = s.get("required") or []
        out = {}
        for k, v in value.items():
            p = s["properties"].get(k)
            if v is None and k not in required and not _allows_null(p):
                continue
            out[k] = _strip_nulls(v, p, root, depth + 1) if p is not None else v
        return out
    if isinstance(value, list) and isinstance(s.get("items"), dict):
        return [_strip_nulls(v, s["items"], root, depth + 1) for v in value]
    return value


def _allows_null(s: Any, depth: int = 0) -> bool:
    """Whether ``s`` admits null on its face (a type, enum, const or anyOf branch says so, or
    it constrains nothing); a ``$ref`` is not followed (then a null branch may be added twice,
    which means the same)."""
    if not isinstance(s, dict) or depth > _MAX_DEPTH:
        return s is True
    if "null" in schema_types(s) or None in (s.get("enum") or []) or ("const" in s and s["const"] is None):
        return True
    if any(_allows_null(b, depth + 1) for b in list_at(s, "anyOf")):
        return True
    return not (schema_types(s) or s.keys() - _ANNOTATIONS)


class _Rewrite:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def node(self, s: Any, ptr: str, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise StrictConversionError("$ref", f"schema nested more than {_MAX_DEPTH} levels", pointer=ptr)
        if isinstance(s, bool):
            raise StrictConversionError("type", f"boolean schema {str(s).lower()} has no strict form", pointer=ptr)
        if not isinstance(s, dict):
            return s
        s = self._merge_ref_siblings(s, ptr, depth)
        s = self._inline_single_all_of(s, ptr)
        s = self._length_as_pattern(s, ptr)
        for kw in s:
            if kw not in SUPPORTED_KEYWORDS:
                raise StrictConversionError(kw, "not expressible in strict mode", pointer=join(ptr, kw))
        fmt = s.get("format")
        if isinstance(fmt, str) and fmt not in SUPPORTED_FORMATS:
            raise StrictConversionError("format", f"format {fmt!r} is not supported", pointer=join(ptr, "format"))
        if isinstance(s.get("items"), list):
            raise StrictConversionError("items", "tuple items are not supported", pointer=join(ptr, "items"))
        out = dict(s)
        for kw in ("$defs", "definitions"):
            if isinstance(s.get(kw), dict):
                out[kw] = {k: self.node(v, join(ptr, kw, k), depth + 1) for k, v in s[kw].items()}
        if isinstance(s.get("anyOf"), list):
            out["anyOf"] = [self.node(b, join(ptr, "anyOf", i), depth + 1) for i, b in enumerate(s["anyOf"])]
        if isinstance(s.get("items"), (dict, bool)):
            out["items"] = self.node(s["items"], join(ptr, "items"), depth + 1)
        if is_object_schema(s):
            out = self._object(out, ptr, depth)
        return out

    def _object(self, s: dict[str, Any], ptr: str, depth: int) -> dict[str, Any]:
        extra = s.get("additionalProperties", True)
        if extra not in (True, False) and extra != {}:
            raise StrictConversionError(
                "additionalProperties",
                "a map of other keys has no strict form (use a list of key/value objects)",
                pointer=join(ptr, "additionalProperties"),
            )
        props = dict_at(s, "properties")
        required = [r for r in s.get("required") or [] if isinstance(r, str)]
        missing = [r for r in required if r not in props]
        if missing:
            raise StrictConversionError(
                "required", f"required {missing[0]!r} is not a listed property", pointer=join(ptr, "required")
            )
        new_props = {}
        for name, p in props.items():
            q = self.node(p, join(ptr, "properties", name), depth + 1)
            new_props[name] = q if name in required else _nullable(q)
        out = {k: v for k, v in s.items() if k not in ("properties", "required", "additionalProperties")}
        if "type" not in out:
            out["type"] = "object"
        out["properties"] = new_props
        out["required"] = list(new_props)
        out["additionalProperties"] = False
        return out

    def _merge_ref_siblings(self, s: dict[str, Any], ptr: str, depth: int) -> dict[str, Any]:
        ref = s.get("$ref")
        if not isinstance(ref, str) or len(s) == 1:
            return s
        hit = resolve_local(self.root, ref)
        if hit is None:
            raise StrictConversionError("$ref", f"reference {ref!r} is not local", pointer=join(ptr, "$ref"))
        siblings = {k: v for k, v in s.items() if k != "$ref"}
        target = hit[1]
        if self._refers_back(target, ref, depth):
            if siblings.keys() - _ANNOTATIONS:
                raise StrictConversionError(
                    "$ref", "a recursive $ref with constraining siblings cannot be merged", pointer=ptr
                )
            return {"$ref": ref}  # annotations only: the reference alone means the same
        return self._merge(target, siblings, ptr)

    def _refers_back(self, target: Any, ref: str, depth: int) -> bool:
        """Whether ``target`` reaches ``ref`` again (a recursive definition)."""
        seen: set[str] = set()
        stack = [target]
        while stack:
            s = stack.pop()
            if isinstance(s, dict):
                r = s.get("$ref")
                if isinstance(r, str):
                    if r == ref:
                        return True
                    if r not in seen:
                        seen.add(r)
                        hit = resolve_local(self.root, r)
                        if hit is not None:
                            stack.append(hit[1])
                stack.extend(v for k, v in s.items() if k != "$ref" and isinstance(v, (dict, list)))
            elif isinstance(s, list):
                stack.extend(v for v in s if isinstance(v, (dict, list)))
        return False

    def _inline_single_all_of(self, s: dict[str, Any], ptr: str) -> dict[str, Any]:
        branches = s.get("allOf")
        if not isinstance(branches, list) or len(branches) != 1:
            return s
        b = branches[0]
        if isinstance(b, dict) and isinstance(b.get("$ref"), str) and len(b) == 1:
            hit = resolve_local(self.root, b["$ref"])
            if hit is None:
                raise StrictConversionError(
                    "$ref", f"reference {b['$ref']!r} is not local", pointer=join(ptr, "allOf", 0, "$ref")
                )
            b = hit[1]
        if not isinstance(b, dict):
            raise StrictConversionError(
                "allOf", "a boolean allOf branch has no strict form", pointer=join(ptr, "allOf", 0)
            )
        return self._merge(b, {k: v for k, v in s.items() if k != "allOf"}, join(ptr, "allOf"))

    @staticmethod
    def _merge(base: dict[str, Any], over: dict[str, Any], ptr: str) -> dict[str, Any]:
        """``base`` and ``over`` conjoined: the same key in both must agree (annotations: ``over``
        wins, as it is the more specific text)."""
        out = dict(base)
        for k, v in over.items():
            if k in out and out[k] != v and k not in _ANNOTATIONS:
                raise StrictConversionError(
                    k, "conflicting values when merging a $ref or allOf into its parent", pointer=join(ptr, k)
                )
            out[k] = v
        return out

    @staticmethod
    def _length_as_pattern(s: dict[str, Any], ptr: str) -> dict[str, Any]:
        if "minLength" not in s and "maxLength" not in s:
            return s
        if "pattern" in s:
            raise StrictConversionError(
                "maxLength" if "maxLength" in s else "minLength",
                "a length bound beside a pattern has no strict form",
                pointer=ptr,
            )
        lo = s.get("minLength", 0)
        hi = s.get("maxLength")
        out = {k: v for k, v in s.items() if k not in ("minLength", "maxLength")}
        out["pattern"] = f"^[\\s\\S]{{{lo},{'' if hi is None else hi}}}$"
        return out


def _nullable(s: Any) -> Any:
    """``s`` or null (``s`` unchanged when it already admits null)."""
    if _allows_null(s):
        return s
    t = s.get("type")
    plain = isinstance(t, (str, list)) and not any(k in s for k in ("$ref", "anyOf", "const"))
    if plain:
        out = dict(s)
        out["type"] = [*(t if isinstance(t, list) else [t]), "null"]
        if isinstance(s.get("enum"), list):
            out["enum"] = [*s["enum"], None]
        return out
    if isinstance(s.get("anyOf"), list) and s.keys() - _ANNOTATIONS == {"anyOf"}:
        return {**s, "anyOf": [*s["anyOf"], {"type": "null"}]}
    return {"anyOf": [s, {"type": "null"}]}
