"""Random small JSON Schemas over the whole keyword set, and candidate instances for them.

The generator knows nothing about how logitgate lowers a schema: it draws keyword groups at random
(typed and type-less, applicators nested a few levels deep) from small pools of names, numbers and
strings, so that the applicators interact (a `not` over `required`, a `oneOf` whose branches both
hold vacuously, a `contains` over items of another type). `properties` always lists its names in
sorted order, so that `json.dumps(value, sort_keys=True)` is a spelling in schema order
(docs/json_schema.md, option `property_order`).

Instances are drawn from the same pools, guided by the schema's keywords (one branch of each
disjunction, the listed names, the literals) and then filtered by `jsonschema`: only values it accepts
are used to look for over-constraint.
"""

from __future__ import annotations

import random
from typing import Any

DRAFT_2020 = "https://json-schema.org/draft/2020-12/schema"
DRAFT_07 = "http://json-schema.org/draft-07/schema#"

NAMES = ("a", "b", "c", "d")
STRINGS = ("", "a", "b", "x", "ab", "ba", "aa", "xa", "abc", "é")
NUMBERS = (-2, -1, 0, 1, 2, 3, 5, 0.5, -0.5, 1.5, 2.25)
BOUNDS = (-1, 0, 1, 2, 3, 0.5, 1.5)
PATTERNS = ("^a", "b$", "^[ab]*$", "x", "^[a-c]+$", "^.$", "^(a|ba)$")
NAME_PATTERNS = ("^x", "^[ab]$", "c", "^[ab]", "^(c|dd)$")
FORMATS = ("date", "ipv4", "email", "ipv6")
FORMAT_SAMPLES = ("2024-02-29", "1.2.3.4", "a@b.co", "::1")
TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")


class SchemaGen:
    """One random schema per call of :meth:`document`; ``draft`` picks 2020-12 or draft-07 spellings."""

    def __init__(self, rng: random.Random, *, max_depth: int = 3) -> None:
        self.rng = rng
        self.max_depth = max_depth
        self.draft07 = False
        self.defs: list[str] = []
        self.guarded = False  # under a member or item: a recursion through the root consumes input

    # -- values --------------------------------------------------------------------------------
    def value(self, depth: int = 0) -> Any:
        """A random small JSON value of any type (for const/enum and instance candidates)."""
        r = self.rng
        kind = r.choice(TYPES if depth < 2 else TYPES[:5])
        if kind == "null":
            return None
        if kind == "boolean":
            return r.random() < 0.5
        if kind == "integer":
            return r.choice([n for n in NUMBERS if isinstance(n, int)])
        if kind == "number":
            return r.choice(NUMBERS)
        if kind == "string":
            return r.choice(STRINGS)
        if kind == "array":
            return [self.value(depth + 1) for _ in range(r.randint(0, 2))]
        return {k: self.value(depth + 1) for k in r.sample(NAMES, r.randint(0, 2))}

    # -- schemas -------------------------------------------------------------------------------
    def document(self) -> Any:
        """A root schema: sometimes boolean, sometimes draft-07, sometimes with `$defs` and `$ref`."""
        r = self.rng
        if r.random() < 0.01:
            return r.random() < 0.7
        self.draft07 = r.random() < 0.1
        self.defs = []
        defs: dict[str, Any] = {}
        if r.random() < 0.15:
            self.guarded = False  # a definition refers to earlier ones, and to the root under a member or item
            for name in ("p", "q")[: r.randint(1, 2)]:
                defs[name] = self.schema(self.max_depth - 1)
                self.defs.append(name)
        self.guarded = False
        root = self.schema(0)
        if not isinstance(root, dict):
            root = {"allOf": [root]}
        if defs:
            root["definitions" if self.draft07 else "$defs"] = defs
        if self.draft07:
            root["$schema"] = DRAFT_07
        elif r.random() < 0.3:
            root["$schema"] = DRAFT_2020
        return root

    def schema(self, depth: int) -> Any:
        r = self.rng
        if depth >= self.max_depth or r.random() < 0.1 * depth:
            return self._leaf()
        s: dict[str, Any] = {}
        groups = [
            (self._type, 3),
            (self._numeric, 2),
            (self._string, 2),
            (self._array, 1.5),
            (self._contains, 1),
            (self._object, 2.5),
            (self._property_names, 0.7),
            (self._dependent, 0.8),
            (self._const, 1),
            (self._enum, 1),
            (self._not, 1.5),
            (self._xof("oneOf"), 1.2),
            (self._xof("anyOf"), 1),
            (self._xof("allOf"), 0.8),
            (self._if, 1),
            (self._ref, 0.4 if self.defs or self.guarded else 0),
        ]
        funcs = [g for g, _ in groups]
        weights = [w for _, w in groups]
        # (dict.fromkeys, not set: a set of bound methods iterates by address, so the schemas
        # a seed makes would differ from run to run.)
        for g in dict.fromkeys(r.choices(funcs, weights, k=r.choice((1, 1, 2, 2, 3, 4)))):
            g(s, depth)
        return s

    def _leaf(self) -> Any:
        r = self.rng
        x = r.random()
        if x < 0.05:
            return r.random() < 0.8
        s: dict[str, Any] = {}
        if x < 0.45:
            self._type(s, 0)
        elif x < 0.6:
            self._const(s, 0)
        elif x < 0.7:
            self._enum(s, 0)
        elif x < 0.8:
            self._numeric(s, 0)
        elif x < 0.9:
            self._string(s, 0)
        else:
            s["required"] = r.sample(NAMES, r.randint(1, 2))
        return s

    def _type(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        s["type"] = r.choice(TYPES) if r.random() < 0.8 else sorted(r.sample(TYPES, 2))

    def _numeric(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        for kw in r.sample(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), r.randint(1, 2)):
            s[kw] = r.choice(BOUNDS)
        if r.random() < 0.2:
            s["multipleOf"] = r.choice((2, 3, 0.5))

    def _string(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        x = r.random()
        if x < 0.5:
            for kw in r.sample(("minLength", "maxLength"), r.randint(1, 2)):
                s[kw] = r.randint(0, 3)
        if 0.3 < x < 0.85:
            s["pattern"] = r.choice(PATTERNS)
        if x >= 0.85:
            s["format"] = r.choice(FORMATS)

    def _array(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        guarded, self.guarded = self.guarded, True
        x = r.random()
        if x < 0.4:
            s["items"] = self.schema(depth + 1)
        elif x < 0.75:
            prefix = [self.schema(depth + 1) for _ in range(r.randint(1, 2))]
            tail = r.choice((None, False, self.schema(depth + 1)))
            if self.draft07:
                s["items"] = prefix
                if tail is not None:
                    s["additionalItems"] = tail
            else:
                s["prefixItems"] = prefix
                if tail is not None:
                    s["items"] = tail
        for kw in r.sample(("minItems", "maxItems"), r.randint(0, 2)):
            s[kw] = r.randint(0, 3)
        if r.random() < 0.1:
            s["uniqueItems"] = True
        self.guarded = guarded

    def _contains(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        guarded, self.guarded = self.guarded, True
        s["contains"] = self.schema(depth + 1)
        self.guarded = guarded
        if self.draft07:
            return
        for kw in r.sample(("minContains", "maxContains"), r.randint(0, 2)):
            s[kw] = r.randint(0, 2)

    def _object(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        guarded, self.guarded = self.guarded, True
        if r.random() < 0.8:
            names = sorted(r.sample(NAMES, r.randint(1, 3)))
            s["properties"] = {n: self.schema(depth + 1) for n in names}
        if r.random() < 0.5:
            s["required"] = r.sample(NAMES, r.randint(1, 2))
        x = r.random()
        if x < 0.15:
            s["additionalProperties"] = False
        elif x < 0.3:
            s["additionalProperties"] = self.schema(depth + 1)
        if r.random() < 0.15:
            s["patternProperties"] = {p: self.schema(depth + 1) for p in r.sample(NAME_PATTERNS, r.choice((1, 1, 2)))}
        for kw in r.sample(("minProperties", "maxProperties"), r.choice((0, 0, 1, 2))):
            s[kw] = r.randint(0, 3)
        self.guarded = guarded

    def _property_names(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        choices: list[Any] = [
            {"enum": r.sample(NAMES, r.randint(1, 3))},
            {"const": r.choice(NAMES)},
            {"maxLength": 1},
            {"pattern": r.choice(("^[ab]", "^[a-c]$", "x"))},
            {"not": {"const": r.choice(NAMES)}},
        ]
        s["propertyNames"] = r.choice(choices)
        if r.random() < 0.5:
            s.setdefault("minProperties", r.randint(1, 3))

    def _dependent(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        key = r.choice(NAMES)
        if r.random() < 0.5:
            dep: Any = r.sample([n for n in NAMES if n != key], r.randint(1, 2))
            kw = "dependentRequired"
        else:
            dep = self.schema(depth + 1)
            kw = "dependentSchemas"
        if self.draft07:
            kw = "dependencies"
        s[kw] = {key: dep}

    def _const(self, s: dict[str, Any], depth: int) -> None:
        s["const"] = self.value()

    def _enum(self, s: dict[str, Any], depth: int) -> None:
        values: list[Any] = []
        for _ in range(self.rng.randint(1, 3)):
            v = self.value()
            if not any(_same(v, w) for w in values):
                values.append(v)
        s["enum"] = values

    def _not(self, s: dict[str, Any], depth: int) -> None:
        s["not"] = self.schema(depth + 1)

    def _xof(self, kw: str) -> Any:
        def add(s: dict[str, Any], depth: int) -> None:
            s[kw] = [self.schema(depth + 1) for _ in range(self.rng.randint(1, 3))]

        return add

    def _if(self, s: dict[str, Any], depth: int) -> None:
        r = self.rng
        s["if"] = self.schema(depth + 1)
        x = r.random()
        if x < 0.7:
            s["then"] = self.schema(depth + 1)
        if x > 0.4:
            s["else"] = self.schema(depth + 1)

    def _ref(self, s: dict[str, Any], depth: int) -> None:
        if self.defs and self.rng.random() < 0.8:
            s["$ref"] = f"#/{'definitions' if self.draft07 else '$defs'}/{self.rng.choice(self.defs)}"
        elif self.guarded:
            s["$ref"] = "#"  # recursion through the root, under a member or item


def _same(a: Any, b: Any) -> bool:
    """JSON equality (1 == 1.0, True != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


# ------------------------------------------------------------------------------------------------
# Instances
# ------------------------------------------------------------------------------------------------
class InstanceGen:
    """Candidate instances for ``schema``: guided by its keywords (one branch per disjunction, listed
    names and literals first), to be filtered by a validator."""

    def __init__(self, schema: Any, rng: random.Random) -> None:
        self.root = schema
        self.rng = rng
        self.values = SchemaGen(rng)

    def candidate(self) -> Any:
        if self.rng.random() < 0.15:
            return self.values.value()
        return self._guided(self.root, 0)

    def _resolve(self, s: dict[str, Any]) -> Any:
        ref = s.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None
        node: Any = self.root
        for part in ref[1:].split("/")[1:]:
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return node

    def _gather(self, s: Any, out: dict[str, Any], depth: int) -> None:
        """Collects the keywords of ``s`` and of one chosen branch of each applicator into ``out``
        (later lists are appended, scalars overwritten: a guess, the validator decides)."""
        if not isinstance(s, dict) or depth > 6:
            return
        r = self.rng
        for k, v in s.items():
            if k in ("allOf", "anyOf", "oneOf", "not", "if", "then", "else", "$ref", "$defs", "definitions"):
                continue
            if k in ("properties", "patternProperties", "dependentSchemas"):
                out.setdefault(k, {}).update(v)
            elif k == "required":
                out.setdefault(k, []).extend(v)
            else:
                out[k] = v
        for sub in s.get("allOf", []):
            self._gather(sub, out, depth + 1)
        for kw in ("anyOf", "oneOf"):
            if s.get(kw):
                self._gather(r.choice(s[kw]), out, depth + 1)
        if "$ref" in s:
            self._gather(self._resolve(s), out, depth + 1)
        if "if" in s:
            self._gather(s.get("then" if r.random() < 0.5 else "else"), out, depth + 1)

    def _guided(self, s: Any, depth: int) -> Any:
        r = self.rng
        if depth > 4 or not isinstance(s, dict) or r.random() < 0.05:
            return self.values.value(2)
        k: dict[str, Any] = {}
        self._gather(s, k, depth)
        if "const" in k and r.random() < 0.9:
            return k["const"]
        if k.get("enum") and r.random() < 0.9:
            return r.choice(k["enum"])
        types = k.get("type")
        if isinstance(types, str):
            types = [types]
        if not types:
            types = [t for t in TYPES if _hints(k, t)] or list(TYPES)
        kind = r.choice(types)
        if kind in ("integer", "number"):
            near = [b for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") for b in [k.get(kw)]]
            pool = [x + d for x in near if isinstance(x, (int, float)) and not isinstance(x, bool) for d in (-1, 0, 1)]
            pool += list(NUMBERS)
            v = r.choice(pool)
            if kind == "integer" or (isinstance(v, float) and v.is_integer()):
                v = int(v)  # canonical integer spelling (a documented departure for 1.0)
            return v
        if kind == "string":
            if "format" in k:
                return r.choice(FORMAT_SAMPLES)
            return r.choice(STRINGS)
        if kind == "array":
            prefix = k.get("prefixItems") or (k.get("items") if isinstance(k.get("items"), list) else [])
            items = k.get("items") if isinstance(k.get("items"), (dict, bool)) else k.get("additionalItems")
            n = r.randint(k.get("minItems", 0), max(k.get("minItems", 0), k.get("maxItems", 3)))
            out = []
            for i in range(n):
                if i < len(prefix):
                    out.append(self._guided(prefix[i], depth + 1))
                elif "contains" in k and r.random() < 0.5:
                    out.append(self._guided(k["contains"], depth + 1))
                else:
                    out.append(self._guided(items if items is not None else {}, depth + 1))
            return out
        if kind == "object":
            props = k.get("properties", {})
            names = list(dict.fromkeys(k.get("required", [])))
            names += [n for n in props if n not in names and r.random() < 0.6]
            if k.get("propertyNames"):
                pn = k["propertyNames"]
                names += [n for n in pn.get("enum", [pn.get("const")]) if isinstance(n, str) and r.random() < 0.5]
            if k.get("patternProperties") and r.random() < 0.6:
                names.append(r.choice(("a", "b", "c", "x", "xa", "cc", "dd", "ab")))
            if k.get("additionalProperties") is not False and r.random() < 0.3:
                names.append(r.choice(("x", "xy", "b", "d")))
            value: dict[str, Any] = {}
            for n in dict.fromkeys(names):
                sub = props.get(n)
                if sub is None:
                    sub = next((v for p, v in k.get("patternProperties", {}).items() if _search(p, n)), None)
                if sub is None:
                    sub = k.get("additionalProperties", {})
                value[n] = self._guided(sub, depth + 1)
            return value
        if kind == "boolean":
            return r.random() < 0.5
        return None


_TYPE_HINTS = {
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "array": ("items", "prefixItems", "contains", "minItems", "maxItems", "uniqueItems", "additionalItems"),
    "object": ("properties", "required", "additionalProperties", "patternProperties", "propertyNames"),
}


def _hints(k: dict[str, Any], t: str) -> bool:
    return any(kw in k for kw in _TYPE_HINTS.get(t, ()))


def _search(pattern: str, s: str) -> bool:
    import re

    return re.search(pattern, s) is not None
