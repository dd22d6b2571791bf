"""Resolution: one iterative walk over the document records every schema object's JSON pointer
and base URI, every ``$id`` resource and ``$anchor``; ``$ref`` is resolved against that index only.
The index is also the atom registry: an atom is a schema object's number (synthetic schemas
included), and atom sets are the unit of lowering."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import Any

from logitgate.errors import LimitExceeded, SchemaError, UnsupportedSchemaError
from logitgate.limits import Limits

from .fold import COMBINATORS, constant_value
from .keywords import (
    _NOT_ALIAS,
    _SCHEMA_CHILDREN,
    _SCHEMA_LISTS,
    _SCHEMA_MAPS,
    _SCHEMA_VALUES,
    _legacy_draft,
    _ref_overrides_siblings,
)
from .synthetic import Synthetic
from .values import _ptr_join

_DEFAULT_BASE = "https://logitgate.invalid/schema.json"


# Atoms: a schema object's number (1, 2, ... in the order the index meets them: document
# order, then synthetic schemas as lowering makes them), or one of these markers. Numbers, not
# id()s: atom sets are iterated and sorted, and an order that follows memory addresses made
# the grammar (its size, even) differ from run to run for one schema.
_FALSE = -1


def _join(base: str, ref: str, pointer: str) -> tuple[str, str]:
    """``ref`` resolved against ``base``: (URL, fragment). A reference urllib cannot parse (an
    unclosed IPv6 bracket, say) is the schema's error, not a crash."""
    try:
        return urllib.parse.urldefrag(urllib.parse.urljoin(base, ref))
    except ValueError as e:
        raise SchemaError(f"invalid URI reference {ref!r}: {e}", pointer=pointer, code="schema-ref") from None


class _Index:
    """Pointer, base URI, resources and anchors of one schema document (one iterative walk)."""

    def __init__(self, root: Any, limits: Limits, oneof_as_anyof: bool = False) -> None:
        self.root = root
        self.oneof_as_anyof = oneof_as_anyof
        self._constants: dict[int, bool | None] = {}  # id(schema) -> fold.constant_value()
        # "id" names a resource only in drafts 03 and 04 (as "$id" from draft-06 on): elsewhere,
        # a nested draft-04 "id" is an unknown keyword, and the root's "$schema" decides.
        legacy_id = _legacy_draft(root)
        # Up to draft-07, "$ref" overrides its siblings: they are not part of the schema.
        self.ref_overrides = _ref_overrides_siblings(root)
        self.info: dict[int, tuple[Any, str, str]] = {}  # atom -> (schema, pointer, base uri)
        self.atoms: dict[int, int] = {}  # id(schema) -> atom
        self.resources: dict[str, tuple[Any, str]] = {}  # uri without fragment -> (schema, pointer)
        self.anchors: dict[str, tuple[Any, str]] = {}  # absolute uri#anchor -> (schema, pointer)
        self._keep: list[Any] = []  # synthetic schemas stay alive so their ids stay unique
        self._synth: dict[tuple[Any, ...], Any] = {}
        self.synthetic: dict[int, Synthetic] = {}  # synthetic atom -> what it adds to its schema object
        self.bool_atoms: dict[bool, int] = {}
        self._resolved: dict[tuple[str, str], tuple[Any, str, str]] = {}  # (ref, base) -> resolve()
        stack: list[tuple[Any, str, str, int]] = [(root, "", _DEFAULT_BASE, 0)]
        self.resources[_DEFAULT_BASE] = (root, "")
        while stack:
            node, ptr, base, depth = stack.pop()
            if depth > limits.max_nesting:
                raise LimitExceeded("max_nesting", limits.max_nesting, f"schema nesting at {ptr or '#'}")
            if isinstance(node, list):
                stack.extend((v, _ptr_join(ptr, i), base, depth + 1) for i, v in enumerate(node))
                continue
            if not isinstance(node, dict):
                continue
            # (Most schema objects have no id and no anchor: two lookups tell.)
            if "$id" in node or (legacy_id and "id" in node):
                sid = node.get("$id", node.get("id"))
                if isinstance(sid, str) and not (node.get("id") is sid and isinstance(node.get("type"), dict)):
                    url, frag = _join(base, sid, _ptr_join(ptr, "$id" if "$id" in node else "id"))
                    if (url and url != base) or ptr == "":
                        base = url or base
                        self.resources.setdefault(base, (node, ptr))
                    if frag and not frag.startswith("/"):  # draft-04..07 "$id": "#name" is an anchor
                        self.anchors.setdefault(base + "#" + frag, (node, ptr))
            if "$anchor" in node or "$dynamicAnchor" in node:
                for key in ("$anchor", "$dynamicAnchor"):
                    anchor = node.get(key)
                    if isinstance(anchor, str):
                        self.anchors.setdefault(base + "#" + anchor, (node, ptr))
            self._register(node, ptr, base)
            for k, v in node.items():
                if k not in _SCHEMA_CHILDREN:
                    continue
                if k in _SCHEMA_MAPS and isinstance(v, dict):
                    for name, sub in v.items():
                        if isinstance(sub, dict):
                            stack.append((sub, _ptr_join(ptr, k, name), base, depth + 1))
                elif k in _SCHEMA_LISTS and isinstance(v, list):
                    for i, sub in enumerate(v):
                        if isinstance(sub, dict):
                            stack.append((sub, _ptr_join(ptr, k, i), base, depth + 1))
                elif k in _SCHEMA_VALUES and isinstance(v, dict):
                    stack.append((v, _ptr_join(ptr, k), base, depth + 1))

    def atom(self, schema: Any, pointer: str, base: str) -> int:
        """Atom of a schema value met at ``pointer`` (registers values found through $ref)."""
        if isinstance(schema, bool):
            if schema is False:
                return _FALSE
            return 0  # callers drop the True atom
        if not isinstance(schema, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(schema).__name__}", pointer=pointer)
        if not schema.keys().isdisjoint(COMBINATORS):
            value = constant_value(schema, self._constants, self.oneof_as_anyof)
            if value is not None:
                return 0 if value else _FALSE
        return self._register(schema, pointer, base)

    def _register(self, schema: dict[str, Any], pointer: str, base: str) -> int:
        """The atom of ``schema``, numbered on first sight (the schema must stay alive: the
        document holds its own, ``_keep`` the synthetic ones)."""
        atom = self.atoms.get(id(schema))
        if atom is None:
            atom = self.atoms[id(schema)] = len(self.atoms) + 1
            if self.ref_overrides and "$ref" in schema and len(schema) > 1:
                schema = {"$ref": schema["$ref"]}
                self._keep.append(schema)
            self.info[atom] = (schema, pointer, base)
        return atom

    def base_of(self, schema: Any, default: str) -> str:
        """The base URI the index recorded for ``schema``, else ``default``."""
        atom = self.atoms.get(id(schema))
        return default if atom is None else self.info[atom][2]

    def synth(
        self,
        key: tuple[Any, ...],
        schema: dict[str, Any],
        pointer: str,
        base: str,
        record: Synthetic | None = None,
    ) -> int:
        """A synthetic schema (from dependentRequired, not, ...) memoized by ``key`` so that the
        same construct always yields the same atom (atom sets must compare equal); ``record``
        holds what it adds that no keyword spells."""
        hit = self._synth.get(key)
        if hit is None:
            self._keep.append(schema)
            self._synth[key] = schema
            atom = self._register(schema, pointer, base)
            if record is not None:
                self.synthetic[atom] = record
            return atom
        return self.atoms[id(hit)]

    def resolve(self, ref: str, base: str, pointer: str) -> tuple[Any, str, str]:
        """The schema ``ref`` names from ``base``: (schema, its pointer, its base URI).
        Memoized (``pointer`` only names the $ref in errors): schemas refer to a few
        definitions from many places, and URI joins cost more than the rest of a resolution."""
        key = (ref, base)
        hit = self._resolved.get(key)
        if hit is None:
            hit = self._resolved[key] = self._resolve(ref, base, pointer)
        return hit

    def _resolve(self, ref: str, base: str, pointer: str) -> tuple[Any, str, str]:
        if ref.startswith("#") and "#" not in base:
            url, frag = base, ref[1:]  # what urljoin and urldefrag make of a fragment, directly
        else:
            url, frag = _join(base, ref, pointer)
        res = self.resources.get(url)
        if res is None:
            # A full-URI anchor may be registered under its resource even if url has no match.
            raise UnsupportedSchemaError("$ref", f"remote or unknown reference {ref!r}", pointer=pointer)
        doc, doc_ptr = res
        if not frag:
            return doc, doc_ptr, url
        if not frag.startswith("/"):
            hit = self.anchors.get(url + "#" + frag)
            if hit is None:
                raise SchemaError(f"$ref anchor {ref!r} not found", pointer=pointer, code="schema-ref")
            return hit[0], hit[1], self.base_of(hit[0], url)
        node: Any = doc
        node_ptr = doc_ptr
        node_base = url
        for raw in frag[1:].split("/"):
            tok = urllib.parse.unquote(raw) if "%" in raw else raw
            if "~" in tok:
                tok = tok.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and tok in node:
                node = node[tok]
            elif isinstance(node, list) and tok.isdigit() and int(tok) < len(node):
                node = node[int(tok)]
            else:
                raise SchemaError(f"$ref {ref!r} does not resolve", pointer=pointer, code="schema-ref")
            node_ptr = _ptr_join(node_ptr, tok)
            if isinstance(node, dict):
                node_base = self.base_of(node, node_base)
        return node, node_ptr, node_base

    def sub(self, value: Any, pointer: str, base: str) -> int:
        return self.atom(value, pointer, base)

    def schema_of(self, atom: int) -> tuple[dict[str, Any], str, str]:
        d, ptr, base = self.info[atom]
        return d, ptr, base

    def static_dynamic_ok(self, ref: str, base: str) -> bool:
        """$dynamicRef is static when no $dynamicAnchor of that name exists anywhere but its
        static target (then dynamic scope cannot change the target)."""
        if not ref.startswith("#") or ref.startswith("#/"):
            return ref.startswith("#/")
        name = ref[1:]
        owners = [k for k in self.anchors if k.endswith("#" + name)]
        return len(owners) <= 1

    def not_atom(self, atom: int, ptr: str, base: str) -> int:
        if atom == 0:
            return _FALSE
        if atom == _FALSE:
            return 0
        return self.synth(("not", atom), {}, ptr, base, Synthetic(negates=atom))

    def embed(self, atom: int) -> Any:
        """The schema value of an atom, for use inside a synthetic schema."""
        if atom == 0:
            return True
        if atom == _FALSE:
            return False
        return self.info[atom][0]

    def types_atom(self, types: Iterable[str], ptr: str, base: str) -> int:
        ts = sorted(set(types))
        return self.synth(("types", *ts), {}, ptr, base, Synthetic(types=tuple(ts)))

    def alias_target(self, atom: int) -> int | None:
        """The atom that a schema of only a $ref (and annotations) stands for, through chains
        of such: its set is lowered as the target's rule. None when ``atom`` is no alias, and
        for a cycle of aliases (expand() lowers those)."""
        seen: set[int] = set()
        a = atom
        while a not in (0, _FALSE):
            d, ptr, base = self.info[a]
            ref = d.get("$ref")
            if not isinstance(ref, str) or not d.keys().isdisjoint(_NOT_ALIAS):
                break
            if a in seen:
                return None
            seen.add(a)
            t, tptr, tbase = self.resolve(ref, base, _ptr_join(ptr, "$ref"))
            a = self.sub(t, tptr, tbase)
        return None if a == atom else a
