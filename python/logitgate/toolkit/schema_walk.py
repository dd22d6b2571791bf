"""Walking a JSON Schema document: every subschema with its JSON pointer, local ``$ref``
resolution, and the object nesting height. Iterative throughout (an explicit stack), so a
deep schema never becomes deep Python recursion.

Pointers here are URI fragments: ``#`` is the root, ``#/properties/a~1b`` the property
``a/b`` (RFC 6901 escaping).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "INSTANCE_LISTS",
    "INSTANCE_MAPS",
    "INSTANCE_VALUES",
    "SchemaNode",
    "child_schemas",
    "dict_at",
    "is_object_schema",
    "join",
    "list_at",
    "nesting_path",
    "ref_cycles",
    "resolve_local",
    "schema_types",
    "walk",
]

# Keywords whose values are subschemas that apply to the instance or a part of it.
INSTANCE_MAPS = ("properties", "patternProperties", "dependentSchemas")
INSTANCE_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf")
INSTANCE_VALUES = (
    "additionalProperties",
    "items",
    "additionalItems",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "not",
    "if",
    "then",
    "else",
)
# Keywords that hold definitions, reached only through $ref.
DEFINITION_MAPS = ("$defs", "definitions")


def join(pointer: str, *tokens: str | int) -> str:
    """``pointer`` extended by ``tokens`` (escaped as RFC 6901 says)."""
    for t in tokens:
        pointer += "/" + str(t).replace("~", "~0").replace("/", "~1")
    return pointer


@dataclass(frozen=True)
class SchemaNode:
    """A subschema found by :func:`walk`: its pointer, its value (a dict or a bool), and the
    keyword that holds it (``"properties"`` for a property's schema, ``""`` for the root)."""

    pointer: str
    schema: Any
    keyword: str


def child_schemas(schema: Any, pointer: str, definitions: bool = True) -> list[SchemaNode]:
    """The direct subschemas of ``schema``, in document order (``definitions=False`` leaves out
    ``$defs``/``definitions``)."""
    if not isinstance(schema, dict):
        return []
    out: list[SchemaNode] = []
    for kw, v in schema.items():
        if kw in INSTANCE_MAPS or (definitions and kw in DEFINITION_MAPS):
            if isinstance(v, dict):
                out.extend(SchemaNode(join(pointer, kw, k), s, kw) for k, s in v.items() if isinstance(s, (dict, bool)))
        elif kw in INSTANCE_LISTS or (kw == "items" and isinstance(v, list)):
            if isinstance(v, list):
                out.extend(
                    SchemaNode(join(pointer, kw, i), s, kw) for i, s in enumerate(v) if isinstance(s, (dict, bool))
                )
        elif kw in INSTANCE_VALUES and isinstance(v, (dict, bool)):
            out.append(SchemaNode(join(pointer, kw), v, kw))
    return out


def walk(root: Any) -> Iterator[SchemaNode]:
    """Every subschema of ``root`` (the root first), depth-first in document order; ``$ref`` is
    not followed (definitions are visited where they are written)."""
    stack = [SchemaNode("#", root, "")]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(child_schemas(node.schema, node.pointer)))


def resolve_local(root: Any, ref: str) -> tuple[str, Any] | None:
    """The (pointer, schema) a local ``$ref`` (``#`` or ``#/...``) names in ``root``; None for
    a remote, anchor or dangling reference."""
    if ref == "#":
        return "#", root
    if not ref.startswith("#/"):
        return None
    node = root
    for raw in ref[2:].split("/"):
        tok = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and tok in node:
            node = node[tok]
        elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
            node = node[int(tok)]
        else:
            return None
    return ref, node


def schema_types(schema: Any) -> set[str]:
    """The types ``schema`` names in ``type`` (empty when it names none)."""
    if not isinstance(schema, dict):
        return set()
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    return set()


def is_object_schema(schema: Any) -> bool:
    """True when ``schema`` describes an object (``type: object`` or ``properties``)."""
    return isinstance(schema, dict) and ("object" in schema_types(schema) or "properties" in schema)


def _instance_children(root: Any, node: SchemaNode) -> list[SchemaNode]:
    """Subschemas of ``node`` that apply to the instance, the ``$ref`` target included."""
    out = child_schemas(node.schema, node.pointer, definitions=False)
    ref = node.schema.get("$ref") if isinstance(node.schema, dict) else None
    if isinstance(ref, str):
        hit = resolve_local(root, ref)
        if hit is not None:
            out.append(SchemaNode(hit[0], hit[1], "$ref"))
    return out


def nesting_path(root: Any) -> list[SchemaNode]:
    """The object schemas along the deepest chain of nested objects from the root (following
    local ``$ref``; a reference cycle is cut where it closes, so a recursive schema counts each
    definition once per chain). Its length is the schema's object nesting depth."""
    # Post-order over (pointer) with memoized heights: each subschema's height is computed
    # once, so shared definitions cost nothing more.
    height: dict[str, int] = {}
    best_child: dict[str, SchemaNode | None] = {}
    on_path: set[str] = set()
    start = SchemaNode("#", root, "")
    stack: list[tuple[SchemaNode, bool]] = [(start, False)]
    while stack:
        node, done = stack.pop()
        if done:
            on_path.discard(node.pointer)
            best: SchemaNode | None = None
            h = 0
            for c in _instance_children(root, node):
                ch = height.get(c.pointer, 0)  # a child on the current path (a cycle) counts 0
                if ch > h:
                    h, best = ch, c
            height[node.pointer] = h + (1 if is_object_schema(node.schema) else 0)
            best_child[node.pointer] = best
            continue
        if node.pointer in height or node.pointer in on_path:
            continue
        on_path.add(node.pointer)
        stack.append((node, True))
        for c in reversed(_instance_children(root, node)):
            if c.pointer not in height and c.pointer not in on_path:
                stack.append((c, False))
    path: list[SchemaNode] = []
    cur: SchemaNode | None = start
    seen: set[str] = set()
    while cur is not None and cur.pointer not in seen:
        seen.add(cur.pointer)
        if is_object_schema(cur.schema):
            path.append(cur)
        cur = best_child.get(cur.pointer)
    return path


def ref_cycles(root: Any) -> list[str]:
    """Pointers of the ``$ref`` keywords that close a reference cycle (a recursive schema)."""
    out: list[str] = []
    visited: set[str] = set()
    on_path: set[str] = set()
    stack: list[tuple[SchemaNode, bool]] = [(SchemaNode("#", root, ""), False)]
    while stack:
        node, done = stack.pop()
        if done:
            on_path.discard(node.pointer)
            continue
        if node.pointer in visited:
            continue
        visited.add(node.pointer)
        on_path.add(node.pointer)
        stack.append((node, True))
        for c in reversed(_instance_children(root, node)):
            if c.keyword == "$ref" and c.pointer in on_path:
                where = join(node.pointer, "$ref")
                if where not in out:
                    out.append(where)
            elif c.pointer not in visited:
                stack.append((c, False))
    return out


def list_at(schema: dict[str, Any], keyword: str) -> list[Any]:
    """``schema[keyword]`` when it is a list, else an empty list."""
    v = schema.get(keyword)
    return v if isinstance(v, list) else []


def dict_at(schema: dict[str, Any], keyword: str) -> dict[str, Any]:
    """``schema[keyword]`` when it is an object, else an empty one."""
    v = schema.get(keyword)
    return v if isinstance(v, dict) else {}
