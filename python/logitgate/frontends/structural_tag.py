"""Structural tags: XGrammar 0.2.9's JSON format for free text with constrained spans, accepted
verbatim, lowered to one :class:`~logitgate.grammar.ir.Grammar` (docs/structural_tags.md).

Input: a format object (``{"type": "tag", ...}``), the response-format wrapper
``{"type": "structural_tag", "format": {...}}``, or the legacy envelope
``{"type": "structural_tag", "structures": [{"begin", "schema", "end"}], "triggers": [...]}``;
a dict or its JSON text. A format may omit ``type``: it is inferred from its fields in
XGrammar's order (tag, const_string, json_schema, any_text, sequence, or, triggered_tags,
tags_with_separator, optional, plus, star, repeat, dispatch, token_dispatch).

Lowering:

- Text formats lower through the other frontends (``json_schema`` through the public
  JSON Schema lowering, ``grammar`` through GBNF, ``regex``), their rules renamed under a
  prefix of their own.
- *Free text* (``any_text``, the text between ``triggered_tags``' tags, ``dispatch``) is an
  Aho-Corasick automaton over its patterns, one IR rule per automaton state: the text reads on
  until a pattern completes; an exclude is a dead end, a trigger continues with its tags, and
  inside a ``tag`` whose end is text, the end continues after the tag (the first occurrence of
  the end ends the content, as XGrammar's end detection does).
- Token formats lower to :class:`~logitgate.grammar.ir.TokenSet` terminals: whole tokens,
  never text. Inside a ``tag`` whose end is a token, ``exclude_token``, ``any_tokens`` and
  ``token_triggered_tags`` exclude that token.

What cannot be lowered exactly is a :class:`~logitgate.errors.StructuralTagError` naming the
path inside the structural tag (``$.format.elements[1].content``), never a silent drop.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._json_reader import JsonTextError, read_json
from ..errors import LogitgateError, StructuralTagError, _int_text, _surrogate_at
from ..grammar.ir import (
    EMPTY,
    Alt,
    ByteClass,
    CharClass,
    Grammar,
    Literal,
    Node,
    Ref,
    Repeat,
    Seq,
    StringExcept,
    TokenSet,
    merge_ranges,
    references,
)
from ..limits import Limits

__all__ = ["lower_structural_tag", "rename_refs"]

# The most Aho-Corasick states one free-text span may have (each is an IR rule).
MAX_FREE_TEXT_STATES = 1 << 16
# The most IR rules an any_text with max_chars may take (automaton states x (max_chars + 1)).
MAX_BOUNDED_TEXT_RULES = 1 << 14

_TYPES = (
    "const_string",
    "json_schema",
    "grammar",
    "regex",
    "any_text",
    "sequence",
    "or",
    "optional",
    "plus",
    "star",
    "repeat",
    "tag",
    "triggered_tags",
    "tags_with_separator",
    "dispatch",
    "token",
    "exclude_token",
    "any_tokens",
    "token_triggered_tags",
    "token_dispatch",
)
# Fields each format requires, and (for inference) may have; XGrammar's inference order.
_REQUIRED: dict[str, tuple[str, ...]] = {
    "tag": ("begin", "content", "end"),
    "const_string": ("value",),
    "json_schema": ("json_schema",),
    "any_text": (),
    "sequence": ("elements",),
    "or": ("elements",),
    "triggered_tags": ("triggers", "tags"),
    "tags_with_separator": ("tags", "separator"),
    "optional": ("content",),
    "plus": ("content",),
    "star": ("content",),
    "repeat": ("min", "max", "content"),
    "dispatch": ("rules",),
    "token_dispatch": ("rules",),
}
_ALLOWED: dict[str, frozenset[str]] = {
    "const_string": frozenset({"value"}),
    "json_schema": frozenset({"json_schema", "style", "any_order", "max_whitespace_cnt", "excludes"}),
    "grammar": frozenset({"grammar", "syntax"}),
    "regex": frozenset({"pattern"}),
    "any_text": frozenset({"excludes", "max_tokens", "max_chars"}),
    "sequence": frozenset({"elements"}),
    "or": frozenset({"elements"}),
    "optional": frozenset({"content"}),
    "plus": frozenset({"content"}),
    "star": frozenset({"content"}),
    "repeat": frozenset({"min", "max", "content"}),
    "tag": frozenset({"begin", "content", "end"}),
    "triggered_tags": frozenset({"triggers", "tags", "at_least_one", "stop_after_first", "excludes"}),
    "tags_with_separator": frozenset({"tags", "separator", "at_least_one", "stop_after_first"}),
    "dispatch": frozenset({"rules", "loop", "excludes"}),
    "token": frozenset({"token"}),
    "exclude_token": frozenset({"exclude_tokens"}),
    "any_tokens": frozenset({"exclude_tokens", "max_tokens"}),
    "token_triggered_tags": frozenset({"trigger_tokens", "tags", "exclude_tokens", "at_least_one", "stop_after_first"}),
    "token_dispatch": frozenset({"rules", "loop", "exclude_tokens"}),
}


def lower_structural_tag(
    spec: Mapping[str, Any] | str,
    *,
    limits: Limits,
    token_id: Callable[[str], int | None],
    json_schema: Callable[[Any, str, dict[str, Any]], Grammar],
    special_texts: Mapping[str, int] | None = None,
    json_schemas: Callable[[list[Any], dict[str, Any]], tuple[Grammar, list[str | None]] | None] | None = None,
    vocab_size: int | None = None,
) -> Grammar:
    """The grammar of a structural tag. ``token_id`` resolves token names, and a token id at or
    past ``vocab_size`` (when given) is refused at its path; ``json_schema``
    lowers a schema (its arguments: the schema, its path, the options) to a grammar;
    ``special_texts`` maps the text of each special token to its id: a delimiter (a tag's
    begin or end, a trigger, a separator) holding that text also accepts the token there.
    ``json_schemas``, when given, lowers several schemas (the same options) in one pass to one
    grammar and the name of each schema's rule in it (None for a schema it leaves out), or
    returns None (they are then lowered one by one, for the error of the one that fails): the
    spans of many tools share rules."""
    if isinstance(spec, str):
        if len(spec.encode("utf-8", "surrogatepass")) > limits.max_source_bytes:
            from ..errors import LimitExceeded

            raise LimitExceeded("max_source_bytes", limits.max_source_bytes, "structural tag text")
        try:
            spec = read_json(spec)
        except JsonTextError as e:
            code = "structural-tag-limit" if e.problem == "digits" else "structural-tag"
            raise StructuralTagError(f"the text {e.reason}", path="$", code=code) from None
    if not isinstance(spec, Mapping):
        raise StructuralTagError(f"a structural tag is an object, not {type(spec).__name__}", path="$")
    _check_text(spec)
    lowering = _Lowering(limits, token_id, json_schema, dict(special_texts or {}), vocab_size)
    fmt, path = _unwrap(spec)
    if json_schemas is not None:
        lowering.prelower_schemas(fmt, json_schemas)
    root = lowering.lower(fmt, path, None)
    lowering.rules["root"] = root
    rules = {"root": root, **{k: v for k, v in lowering.rules.items() if k != "root"}}
    return Grammar(rules, stand_ins=tuple(lowering.stand_ins))


def _check_text(spec: Mapping[str, Any]) -> None:
    """Refuses a lone surrogate anywhere in ``spec`` (a str may hold one, JSON's ``"\\ud800"``
    decodes to one; no UTF-8 text does), naming its path: delimiters, constants and token names
    become UTF-8 bytes, and a tag's schemas are refused alike, so one rule covers every field."""
    try:
        json.dumps(spec, ensure_ascii=False).encode("utf-8")
        return  # (the common case, checked in C)
    except UnicodeEncodeError:
        pass
    except (TypeError, ValueError, RecursionError):
        pass  # not plain JSON: the walk below checks what it can reach
    todo: list[tuple[Any, str]] = [(spec, "$")]
    while todo:
        value, path = todo.pop()
        if isinstance(value, str):
            if _surrogate_at(value) >= 0:
                raise StructuralTagError("lone surrogate, which no UTF-8 text holds", path=path)
        elif isinstance(value, Mapping):
            for key, sub in reversed(list(value.items())):
                where = f"{path}.{key}" if isinstance(key, str) else f"{path}[{key!r}]"
                if isinstance(key, str) and _surrogate_at(key) >= 0:
                    raise StructuralTagError("lone surrogate in a key, which no UTF-8 text holds", path=where)
                todo.append((sub, where))
        elif isinstance(value, (list, tuple)):
            todo.extend((sub, f"{path}[{i}]") for i, sub in reversed(list(enumerate(value))))


def _unwrap(spec: Mapping[str, Any]) -> tuple[Any, str]:
    """The format object of any accepted envelope, and its path."""
    if "structures" in spec or ("triggers" in spec and "tags" not in spec):
        if spec.get("type", "structural_tag") != "structural_tag":
            raise StructuralTagError("the legacy envelope's type must be 'structural_tag'", path="$.type")
        structures = spec.get("structures")
        triggers = spec.get("triggers")
        if not isinstance(structures, list) or not isinstance(triggers, list):
            raise StructuralTagError("the legacy envelope needs lists 'structures' and 'triggers'", path="$")
        tags = []
        for i, s in enumerate(structures):
            if not isinstance(s, Mapping) or not {"begin", "schema", "end"} <= set(s):
                raise StructuralTagError("a structure needs 'begin', 'schema' and 'end'", path=f"$.structures[{i}]")
            tags.append(
                {
                    "type": "tag",
                    "begin": s["begin"],
                    "content": {"type": "json_schema", "json_schema": s["schema"]},
                    "end": s["end"],
                }
            )
        return {"type": "triggered_tags", "triggers": triggers, "tags": tags}, "$"
    if spec.get("type") == "structural_tag" or ("format" in spec and "type" not in spec):
        if "format" not in spec:
            raise StructuralTagError("a structural tag needs a 'format'", path="$")
        return spec["format"], "$.format"
    return spec, "$"


@dataclass(frozen=True)
class _End:
    """The end of the enclosing tag, for formats that read on until it: its strings (text
    level) or its token id (token level)."""

    strings: tuple[str, ...] = ()
    token: int | None = None


class _Lowering:
    def __init__(
        self,
        limits: Limits,
        token_id: Callable[[str], int | None],
        json_schema: Callable[[Any, str, dict[str, Any]], Grammar],
        special_texts: dict[str, int],
        vocab_size: int | None = None,
    ) -> None:
        self.special_texts = special_texts
        self.limits = limits
        self.token_id = token_id
        self.vocab_size = vocab_size
        self.json_schema = json_schema
        self.rules: dict[str, Node] = {}
        # The embedded grammars' stand-ins (Grammar.stand_ins), under their rules' new names.
        self.stand_ins: list[tuple[str, str]] = []
        self.shared: dict[Node, str] = {}  # embedded rule bodies -> their names (embed)
        # embed's memos: by (id of a body, its references' rule names) the rule it became (the
        # bodies are kept alive so that their ids stay theirs), and the references of a body.
        self.embedded: dict[tuple[int, tuple[str, ...]], str] = {}
        self.refs: dict[int, tuple[str, ...]] = {}
        self.keep: list[Node] = []
        # Lowered json_schema spans by (schema text, options): tools often share a schema.
        self.schemas: dict[tuple[str, str], Node] = {}
        # That key of each json_schema format met by prelower_schemas, by the format's id (the
        # formats are the caller's, alive while lowering).
        self.schema_keys: dict[int, tuple[str, str]] = {}
        self.delimiters: dict[str, Node] = {}
        # The special tokens' texts, longest first: a regex alternation then finds, at the
        # leftmost position holding one, the longest (as a scan position by position would).
        self.special_re = (
            re.compile("|".join(re.escape(t) for t in sorted(special_texts, key=len, reverse=True) if t))
            if any(special_texts)
            else None
        )
        self.n = 0

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"st{self.n}_{stem}"

    # -- helpers ---------------------------------------------------------------------------------
    def delimiter(self, text: str) -> Node:
        """A delimiter's text; where it holds the text of a special token, that token too (a
        model emits ``<tool_call>`` as its one special token; the text spelling stays valid)."""
        node = self.delimiters.get(text)
        if node is None:
            node = self.delimiters[text] = self._delimiter(text)
        return node

    def _delimiter(self, text: str) -> Node:
        if self.special_re is None or self.special_re.search(text) is None:
            return Literal(text.encode())
        parts: list[Node] = []
        plain_start = 0
        for hit in self.special_re.finditer(text):
            if plain_start < hit.start():
                parts.append(Literal(text[plain_start : hit.start()].encode()))
            parts.append(Alt((Literal(hit.group().encode()), TokenSet((self.special_texts[hit.group()],)))))
            plain_start = hit.end()
        if plain_start < len(text) or not parts:
            parts.append(Literal(text[plain_start:].encode()))
        return parts[0] if len(parts) == 1 else Seq(tuple(parts))

    def special_prefix(self, text: str) -> tuple[int, str] | None:
        """(id, rest) when ``text`` starts with a special token's text."""
        hit = None if self.special_re is None else self.special_re.match(text)
        return None if hit is None else (self.special_texts[hit.group()], text[hit.end() :])

    def references(self, body: Node) -> tuple[str, ...]:
        found = self.refs.get(id(body))
        if found is None:
            found = self.refs[id(body)] = references(body)
            self.keep.append(body)
        return found

    def embed(self, grammar: Grammar, stem: str) -> Node:
        """Adds ``grammar``'s rules (:meth:`embed_rules`); returns a reference to its root."""
        return Ref(self.embed_rules(grammar, stem)[grammar.root])

    def embed_rules(self, grammar: Grammar, stem: str) -> dict[str, str]:
        """Adds ``grammar``'s rules; returns the name each became. Rules are hash-consed:
        a rule whose body (its references resolved the same way) equals one added before is
        that rule, so the spans of many tools share their string, number and whitespace rules
        (400 tools' schemas: one copy of each). Rules on a reference cycle get fresh names."""
        canon: dict[str, str] = {}
        refs = {name: self.references(body) for name, body in grammar.rules.items()}
        # Kahn's order: a rule is resolved once every rule it references is; those left are on
        # (or above) a reference cycle, or reference an undefined name.
        waiting = {name: sum(1 for r in set(refs[name]) if r in grammar.rules) for name in grammar.rules}
        users: dict[str, list[str]] = {}
        for name, names in refs.items():
            for r in set(names):
                users.setdefault(r, []).append(name)
        ready = [name for name, n in waiting.items() if n == 0]
        while ready:
            name = ready.pop()
            body = grammar.rules[name]
            # A body object the frontend shares between lowerings (a JSON string's rules), its
            # references resolved the same way, is the rule it was before.
            key = (id(body), tuple(canon[r] for r in refs[name]))
            existing = self.embedded.get(key)
            if existing is None:
                resolved = rename_refs(body, canon) if refs[name] else body
                existing = self.shared.get(resolved)
                if existing is None:
                    existing = f"{self.fresh(stem)}_{name}"
                    self.rules[existing] = resolved
                    self.shared[resolved] = existing
                self.embedded[key] = existing
                self.keep.append(body)
            canon[name] = existing
            for user in users.get(name, ()):
                waiting[user] -= 1
                if waiting[user] == 0:
                    ready.append(user)
        pending = [name for name in grammar.rules if name not in canon]
        prefix = self.fresh(stem)
        for name in pending:
            canon[name] = f"{prefix}_{name}"
        for name in pending:
            self.rules[canon[name]] = rename_refs(grammar.rules[name], canon)
        self.stand_ins.extend((canon[a], canon[b]) for a, b in grammar.stand_ins)
        return canon

    def field(self, fmt: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str) -> Any:
        if key not in fmt:
            raise StructuralTagError(f"missing field {key!r}", path=path)
        value = fmt[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _as_tuple(kind)):
            raise StructuralTagError(f"field {key!r} has the wrong type ({type(value).__name__})", path=f"{path}.{key}")
        return value

    def opt(self, fmt: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any, path: str) -> Any:
        if key not in fmt or (fmt[key] is None and default is None):
            return default
        return self.field(fmt, key, kind, path)

    def strings(self, fmt: Mapping[str, Any], key: str, path: str, required: bool = False) -> list[str]:
        value = self.field(fmt, key, list, path) if required else self.opt(fmt, key, list, [], path)
        for i, s in enumerate(value):
            if not isinstance(s, str):
                raise StructuralTagError(f"{key} must hold strings", path=f"{path}.{key}[{i}]")
        return list(value)

    def token(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise StructuralTagError("a token is an id or a token string", path=path)
        if isinstance(value, int):
            if value < 0:
                raise StructuralTagError(f"token id {value} is negative", path=path)
            if self.vocab_size is not None and value >= self.vocab_size:
                why = f"token id {_int_text(value)} is not in the vocabulary (of {self.vocab_size} tokens)"
                raise StructuralTagError(why, path=path, code="structural-tag-token")
            return value
        resolved = self.token_id(value)
        if resolved is None:
            raise StructuralTagError(
                f"token {value!r} is not in the vocabulary", path=path, code="structural-tag-token"
            )
        return resolved

    def tokens(self, fmt: Mapping[str, Any], key: str, path: str, required: bool = False) -> list[int]:
        value = self.field(fmt, key, list, path) if required else self.opt(fmt, key, list, [], path)
        return [self.token(v, f"{path}.{key}[{i}]") for i, v in enumerate(value)]

    def type_of(self, fmt: Mapping[str, Any], path: str) -> str:
        if "type" in fmt:
            t = fmt["type"]
            if t == "qwen_xml_parameter":
                return "json_schema"
            if not isinstance(t, str) or t not in _TYPES:
                raise StructuralTagError(f"unknown format type {t!r}", path=f"{path}.type")
            return t
        for t, required in _REQUIRED.items():
            if all(k in fmt for k in required) and set(fmt) <= _ALLOWED[t]:
                return t
        raise StructuralTagError("cannot infer the format's type from its fields", path=path)

    # -- formats ---------------------------------------------------------------------------------
    def lower(self, fmt: Any, path: str, end: _End | None) -> Node:
        """The IR of ``fmt``. With ``end``, formats that read on until the enclosing tag's end
        consume that end themselves (``reads_end`` says which)."""
        if not isinstance(fmt, Mapping):
            raise StructuralTagError(f"a format is an object, not {type(fmt).__name__}", path=path)
        t = self.type_of(fmt, path)
        extra = set(fmt) - _ALLOWED[t] - {"type"}
        if extra:
            raise StructuralTagError(f"unknown field(s) {sorted(extra)} for {t}", path=path)
        method: Callable[[Mapping[str, Any], str, _End | None], Node] = getattr(self, "_" + t)
        return method(fmt, path, end)

    def reads_end(self, fmt: Any, end: _End) -> bool:
        """True when ``fmt`` is a format that reads on until the enclosing end of its level."""
        if not isinstance(fmt, Mapping):
            return False
        t = fmt.get("type")
        if t is None:
            try:
                t = self.type_of(fmt, "$")
            except LogitgateError:
                return False
        if end.token is not None:
            return t in ("any_tokens", "token_triggered_tags", "exclude_token")
        return t in ("any_text", "triggered_tags")

    def _const_string(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        return Literal(self.field(fmt, "value", str, path).encode())

    def _json_schema(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        key = self.schema_keys.get(id(fmt))
        if key is not None and key in self.schemas:
            return self.schemas[key]  # (prelower_schemas checked the format)
        schema, style, options = self.schema_request(fmt, path)
        if style != "json":
            return self.xml_arguments(schema, style, path)
        if self.opt(fmt, "any_order", bool, False, path) and _object_keywords(schema):
            return self.any_order_object(schema, options, path)
        key = (json.dumps(schema, ensure_ascii=False), json.dumps(options, sort_keys=True))
        lowered = self.schemas.get(key)
        if lowered is None:
            grammar = self.json_schema(_close_objects(schema), f"{path}.json_schema", options)
            lowered = self.schemas[key] = self.embed(grammar, "json")
        return lowered

    def schema_request(self, fmt: Mapping[str, Any], path: str) -> tuple[Any, str, dict[str, Any]]:
        """A json_schema format's schema, style and lowering options (checked)."""
        schema = self.field(fmt, "json_schema", (dict, bool), path)
        style = self.opt(fmt, "style", str, "json", path)
        if fmt.get("type") == "qwen_xml_parameter":
            style = "qwen_xml"
        if style != "json" and style not in _XML_STYLES:
            raise StructuralTagError(
                f"json_schema style {style!r} is not supported", path=f"{path}.style", code="structural-tag-unsupported"
            )
        if self.strings(fmt, "excludes", path):
            raise StructuralTagError(
                "json_schema excludes are not supported", path=f"{path}.excludes", code="structural-tag-unsupported"
            )
        if self.opt(fmt, "any_order", bool, False, path) and style != "json":
            raise StructuralTagError(
                f"any_order with style {style!r} is not supported",
                path=f"{path}.any_order",
                code="structural-tag-unsupported",
            )
        options: dict[str, Any] = {}
        cnt = self.opt(fmt, "max_whitespace_cnt", int, None, path)
        if cnt is not None:
            if cnt < 0:
                raise StructuralTagError("max_whitespace_cnt must be >= 0", path=f"{path}.max_whitespace_cnt")
            if cnt > self.limits.max_repeat:  # (a gap's whitespace is one repetition)
                raise StructuralTagError(
                    f"max_whitespace_cnt over max_repeat={self.limits.max_repeat}",
                    path=f"{path}.max_whitespace_cnt",
                    code="structural-tag-limit",
                )
            if style != "json":
                raise StructuralTagError(
                    f"max_whitespace_cnt with style {style!r} is not supported",
                    path=f"{path}.max_whitespace_cnt",
                    code="structural-tag-unsupported",
                )
            options["max_whitespace"] = cnt
        return schema, style, options

    def prelower_schemas(
        self,
        fmt: Any,
        json_schemas: Callable[[list[Any], dict[str, Any]], tuple[Grammar, list[str | None]] | None],
    ) -> None:
        """Lowers the JSON-style json_schema formats under ``fmt`` (through the formats'
        contents, elements, tags and rules) together, per options, into ``self.schemas``: the
        tools of a tool list share their property rules, and their rules are embedded in one
        pass. A format this cannot use (malformed, another style) is left to :meth:`lower`."""
        groups: dict[str, dict[str, Any]] = {}  # options text -> schema text -> closed schema
        options_of: dict[str, dict[str, Any]] = {}
        stack = [fmt]
        while stack:
            f = stack.pop()
            if not isinstance(f, Mapping):
                continue
            try:
                t = self.type_of(f, "$")
            except LogitgateError:
                continue
            if t == "json_schema":
                try:
                    schema, style, options = self.schema_request(f, "$")
                except LogitgateError:
                    continue
                if style != "json" or not isinstance(schema, dict) or f.get("any_order"):
                    continue
                key = self.schema_keys[id(f)] = (
                    json.dumps(schema, ensure_ascii=False),
                    json.dumps(options, sort_keys=True),
                )
                if key not in self.schemas:
                    group = groups.setdefault(key[1], {})
                    if key[0] not in group:
                        group[key[0]] = _close_objects(schema)
                    options_of[key[1]] = options
                continue
            for k in ("content", "elements", "tags", "rules"):
                v = f.get(k)
                if isinstance(v, Mapping):
                    stack.append(v)
                elif isinstance(v, list):
                    for item in reversed(v):
                        stack.append(item[1] if k == "rules" and isinstance(item, list) and len(item) == 2 else item)
        for options_text, group in groups.items():
            if len(group) < 2:
                continue
            lowered = json_schemas(list(group.values()), options_of[options_text])
            if lowered is None:
                continue
            grammar, roots = lowered
            # One lowering's rules: shared within it already, so added as they are, renamed
            # under one prefix (not hash-consed with the rules added before).
            prefix = self.fresh("json")
            canon = {name: f"{prefix}_{name}" for name in grammar.rules}
            for name, body in grammar.rules.items():
                self.rules[canon[name]] = rename_refs(body, canon)
            self.stand_ins.extend((canon[a], canon[b]) for a, b in grammar.stand_ins)
            for text, root in zip(group, roots, strict=True):
                if root is not None:  # (else lowered alone when met)
                    self.schemas[(text, options_text)] = Ref(canon[root])

    def any_order_object(self, schema: Any, options: dict[str, Any], path: str) -> Node:
        """``any_order``: XGrammar's looser object language, ``{`` entries ``}`` where each
        entry is any listed property with a value of its schema, in any order, repeats
        allowed and presence unchecked, their count in ``[max(minProperties, #required),
        maxProperties]``. Supported: an object schema that lists its properties (closed, as
        strict mode closes it) whose property schemas hold no object keywords (XGrammar applies
        the order to nested objects too); other shapes are typed errors."""
        at = f"{path}.json_schema"

        def unsupported(why: str, where: str) -> StructuralTagError:
            return StructuralTagError(f"any_order: {why}", path=where, code="structural-tag-unsupported")

        if options:
            raise unsupported("max_whitespace_cnt with any_order is not supported", f"{path}.max_whitespace_cnt")
        properties = schema.get("properties") if isinstance(schema, dict) else None
        if schema.get("type") != "object" or not isinstance(properties, dict) or not properties:
            raise unsupported("only an object schema with 'properties' is supported", at)
        other = set(schema) - _ANY_ORDER_KEYS
        if other or schema.get("additionalProperties", False) is not False:
            raise unsupported(f"object keywords {sorted(other) or ['additionalProperties']}", at)
        required = schema.get("required", [])
        if not isinstance(required, list) or not set(required) <= set(properties):
            raise unsupported("every required property must be listed in 'properties'", f"{at}.required")
        bounds = [schema.get(k) for k in ("minProperties", "maxProperties")]
        if any(b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 0) for b in bounds):
            raise StructuralTagError("minProperties and maxProperties are counts", path=at)
        lo = max(bounds[0] or 0, len(set(required)))
        hi = bounds[1]
        if hi is not None and hi < lo:
            raise StructuralTagError(
                "empty language: maxProperties is below the required count", path=at, code="structural-tag-schema"
            )
        # The members after the first are one repetition (names may repeat, as in XGrammar).
        for kw, count in (("minProperties", lo), ("maxProperties", hi)):
            if count is not None and count - 1 > self.limits.max_repeat:
                raise StructuralTagError(
                    f"any_order: {kw} over max_repeat={self.limits.max_repeat}",
                    path=f"{at}.{kw}",
                    code="structural-tag-limit",
                )
        ws = Repeat(CharClass(((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))), 0, None)
        members: list[Node] = []
        for name, sub in properties.items():
            where = f"{at}.properties.{name}"
            if not name.isascii() or not name.isprintable() or '"' in name or "\\" in name:
                raise unsupported("property names are printable ASCII without quotes or backslashes", where)
            if _object_keywords(sub):
                raise unsupported("a property's schema holds object keywords (nested any_order)", where)
            value = self.json_value(sub, where)
            members.append(Seq((Literal(f'"{name}"'.encode()), ws, Literal(b":"), ws, value)))
        member = self.fresh("member")
        self.rules[member] = Alt(tuple(members))
        empty = Seq((Literal(b"{"), ws, Literal(b"}")))
        if hi == 0:
            return empty
        more = Repeat(Seq((ws, Literal(b","), ws, Ref(member))), max(lo - 1, 0), None if hi is None else hi - 1)
        entries = Seq((Literal(b"{"), ws, Ref(member), more, ws, Literal(b"}")))
        return entries if lo else Alt((empty, entries))

    def json_value(self, schema: Any, path: str) -> Node:
        """A JSON value of ``schema`` (closed as XGrammar's strict mode closes it), embedded."""
        key = (json.dumps(schema, ensure_ascii=False), "{}")
        lowered = self.schemas.get(key)
        if lowered is None:
            grammar = self.json_schema(_close_objects(schema), path, {})
            lowered = self.schemas[key] = self.embed(grammar, "json")
        return lowered

    def xml_arguments(self, schema: Any, style: str, path: str) -> Node:
        """An XML argument style (``_XML_STYLES``): an object's properties, in their declared
        order, each ``OPEN(NAME) VALUE CLOSE`` (``<parameter=NAME>VALUE</parameter>`` for
        qwen_xml) with whitespace around them; a string property's value is raw text up to the
        first CLOSE, any other value is JSON with whitespace around it. Supported: an object
        schema that lists its properties (closed), each a plain ``{"type": "string"}`` or a
        schema whose one type is not string; other shapes (XGrammar writes their strings raw
        in ways of its own) are typed errors."""
        at = f"{path}.json_schema"
        open_string, open_json, close = _XML_STYLES[style]

        def unsupported(why: str, where: str) -> StructuralTagError:
            return StructuralTagError(
                f"json_schema style {style!r}: {why}", path=where, code="structural-tag-unsupported"
            )

        if (
            not isinstance(schema, dict)
            or schema.get("type") != "object"
            or not isinstance(schema.get("properties"), dict)
        ):
            raise unsupported("only an object schema with 'properties' is supported", at)
        other = set(schema) - _XML_OBJECT_KEYS
        if other or schema.get("additionalProperties", False) is not False:
            raise unsupported(f"object keywords {sorted(other) or ['additionalProperties']}", at)
        required = schema.get("required", [])
        if not isinstance(required, list) or not set(required) <= set(schema["properties"]):
            raise unsupported("every required property must be listed in 'properties'", f"{at}.required")
        ws = Repeat(CharClass(((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))), 0, None)
        items: list[Node] = [ws]
        for name, sub in schema["properties"].items():
            where = f"{at}.properties.{name}"
            if not isinstance(sub, dict):
                raise unsupported("a property schema must be an object", where)
            kind = sub.get("type")
            if kind == "string" and not set(sub) - _ANNOTATIONS - {"type"}:
                opening = open_string
                value: Node = self.free_text([(close, _Action("end", EMPTY))], can_stop=False, path=where)
            elif isinstance(kind, str) and kind != "string" and not set(sub) & _XML_RAW_STRINGS:
                opening = open_json
                value = Seq((ws, self.json_value(sub, where), ws, self.delimiter(close)))
            else:
                raise unsupported("a property is a plain string or of one non-string type", where)
            head: list[Node] = []
            for i, piece in enumerate(opening.split("\0")):  # "\0": whitespace there
                head += [ws] if i else []
                head.append(self.delimiter(piece.replace("{name}", name)))
            item = Seq((*head, value, ws))
            items.append(item if name in required else Repeat(item, 0, 1))
        return Seq(tuple(items))

    def _grammar(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        from .gbnf import parse_gbnf
        from .lark import parse_lark

        text = self.field(fmt, "grammar", str, path)
        syntax = self.opt(fmt, "syntax", str, "ebnf", path)
        if syntax == "ebnf":
            return self.embed(parse_gbnf(text, limits=self.limits, token_id=self.token_id), "grammar")
        if syntax == "lark":
            return self.embed(parse_lark(text, limits=self.limits, token_id=self.token_id), "lark")
        raise StructuralTagError(
            f"grammar syntax {syntax!r} is not supported (ebnf or lark)",
            path=f"{path}.syntax",
            code="structural-tag-unsupported",
        )

    def _regex(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        from .regex import parse_regex

        return self.embed(parse_regex(self.field(fmt, "pattern", str, path), limits=self.limits), "regex")

    def _any_text(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        excludes = self.strings(fmt, "excludes", path)
        if self.opt(fmt, "max_tokens", int, None, path) is not None:
            raise StructuralTagError(
                "any_text max_tokens is not supported in grammars",
                path=f"{path}.max_tokens",
                code="structural-tag-unsupported",
            )
        max_chars = self.opt(fmt, "max_chars", int, None, path)
        ends = end.strings if end is not None else ()
        if max_chars is not None:
            if max_chars < 0:
                raise StructuralTagError("max_chars must be >= 0", path=f"{path}.max_chars")
            return self.bounded_text(excludes + list(ends), max_chars, end, path)
        patterns = [(s, _Action("exclude")) for s in excludes if s]
        patterns += [(s, _Action("end", EMPTY)) for s in ends]
        return self.free_text(patterns, can_stop=end is None or not end.strings, path=path)

    def _sequence(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        elements = self.field(fmt, "elements", list, path)
        if not elements:
            raise StructuralTagError("a sequence needs elements", path=f"{path}.elements")
        return Seq(tuple(self.lower(e, f"{path}.elements[{i}]", None) for i, e in enumerate(elements)))

    def _or(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        elements = self.field(fmt, "elements", list, path)
        if not elements:
            raise StructuralTagError("an or needs elements", path=f"{path}.elements")
        return Alt(tuple(self.lower(e, f"{path}.elements[{i}]", None) for i, e in enumerate(elements)))

    def _repeated(self, fmt: Mapping[str, Any], path: str, lo: int, hi: int | None) -> Node:
        inner = self.lower(self.field(fmt, "content", Mapping, path), f"{path}.content", None)
        name = self.fresh("repeat")
        self.rules[name] = inner
        return Repeat(Ref(name), lo, hi)

    def _optional(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        return self._repeated(fmt, path, 0, 1)

    def _plus(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        return self._repeated(fmt, path, 1, None)

    def _star(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        return self._repeated(fmt, path, 0, None)

    def _repeat(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        lo = self.field(fmt, "min", int, path)
        hi = self.field(fmt, "max", int, path)
        if lo < 0 or hi < -1 or (hi != -1 and hi < lo):
            raise StructuralTagError(f"bad repeat bounds min={lo} max={hi}", path=path)
        if max(lo, hi) > self.limits.max_repeat:
            raise StructuralTagError(
                f"repeat bound over max_repeat={self.limits.max_repeat}", path=path, code="structural-tag-limit"
            )
        return self._repeated(fmt, path, lo, None if hi == -1 else hi)

    # -- tags ------------------------------------------------------------------------------------
    def tag_parts(self, tag: Any, path: str) -> tuple[Node, str | None, Node]:
        """A tag's begin node, its begin string (None for a token begin), and the rest (the
        content and the end)."""
        if not isinstance(tag, Mapping):
            raise StructuralTagError("a tag is an object", path=path)
        if tag.get("type", "tag") != "tag":
            raise StructuralTagError("expected a tag", path=f"{path}.type")
        extra = set(tag) - _ALLOWED["tag"] - {"type"}
        if extra:
            raise StructuralTagError(f"unknown field(s) {sorted(extra)} for tag", path=path)
        for key in ("begin", "content", "end"):
            if key not in tag:
                raise StructuralTagError(f"missing field {key!r}", path=path)
        begin, raw_end = tag["begin"], tag["end"]
        begin_text: str | None = None
        if isinstance(begin, str):
            begin_text = begin
            begin_node: Node = self.delimiter(begin)
        else:
            begin_node = TokenSet((self.token_format(begin, f"{path}.begin"),))
        if isinstance(raw_end, str):
            end = _End(strings=(raw_end,))
        elif isinstance(raw_end, list):
            if not raw_end or not all(isinstance(e, str) for e in raw_end):
                raise StructuralTagError("end is a string, a non-empty list of strings or a token", path=f"{path}.end")
            end = _End(strings=tuple(raw_end))
        else:
            end = _End(token=self.token_format(raw_end, f"{path}.end"))
        content = tag["content"]
        if self.reads_end(content, end) and (end.token is not None or all(end.strings)):
            rest = self.lower(content, f"{path}.content", end)
        else:
            if end.token is not None:
                end_node: Node = TokenSet((end.token,))
            else:
                end_node = Alt(tuple(self.delimiter(s) for s in end.strings))
            rest = Seq((self.lower(content, f"{path}.content", None), end_node))
        return begin_node, begin_text, rest

    def token_format(self, value: Any, path: str) -> int:
        if not isinstance(value, Mapping) or value.get("type", "token") != "token" or "token" not in value:
            raise StructuralTagError("expected a string or a token format", path=path)
        return self.token(value["token"], f"{path}.token")

    def _tag(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        begin, _, rest = self.tag_parts(fmt, path)
        return Seq((begin, rest))

    def _triggered_tags(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        triggers = self.strings(fmt, "triggers", path, required=True)
        tags = self.field(fmt, "tags", list, path)
        at_least_one = self.opt(fmt, "at_least_one", bool, False, path)
        stop_after_first = self.opt(fmt, "stop_after_first", bool, False, path)
        excludes = self.strings(fmt, "excludes", path)
        if not triggers or "" in triggers:
            raise StructuralTagError("triggers must be non-empty strings", path=f"{path}.triggers")
        if not tags:
            raise StructuralTagError("triggered_tags needs tags", path=f"{path}.tags")
        by_trigger: dict[str, list[Node]] = {t: [] for t in triggers}
        whole: list[Node] = []
        for i, tag in enumerate(tags):
            tag_path = f"{path}.tags[{i}]"
            begin, begin_text, rest = self.tag_parts(tag, tag_path)
            if begin_text is None:
                raise StructuralTagError("triggered_tags' tags begin with a string", path=f"{tag_path}.begin")
            matching = [t for t in triggers if begin_text.startswith(t)]
            if len(matching) != 1:
                raise StructuralTagError(
                    f"a tag's begin must start with exactly one trigger ({len(matching)} do)", path=f"{tag_path}.begin"
                )
            by_trigger[matching[0]].append(Seq((self.delimiter(begin_text[len(matching[0]) :]), rest)))
            whole.append(Seq((begin, rest)))
        after_end: Node = EMPTY
        loop = self.fresh("text")
        # After a tag: more free text, or (stop_after_first) the structure ends, which inside
        # a tag means its end comes next.
        after_tag: Node = Ref(loop)
        if stop_after_first:
            after_tag = self.end_node(end) if end is not None else EMPTY
        patterns = [(s, _Action("exclude")) for s in excludes if s]
        if end is not None:
            patterns += [(s, _Action("end", after_end)) for s in end.strings]
        for t, nodes in by_trigger.items():
            if nodes:
                # One rule per trigger: the free text's states (and its special-token entry)
                # all continue there, so the tags are serialized once.
                tags_name = self.fresh("tags")
                self.rules[tags_name] = Seq((Alt(tuple(nodes)), after_tag))
                patterns.append((t, _Action("trigger", Ref(tags_name))))
        text = self.free_text(patterns, can_stop=end is None, path=path)
        self.rules[loop] = text
        if at_least_one:
            return Seq((Alt(tuple(whole)), after_tag))
        return Ref(loop)

    def end_node(self, end: _End) -> Node:
        if end.token is not None:
            return TokenSet((end.token,))
        return Alt(tuple(self.delimiter(s) for s in end.strings))

    def _tags_with_separator(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        tags = self.field(fmt, "tags", list, path)
        separator = self.field(fmt, "separator", str, path)
        at_least_one = self.opt(fmt, "at_least_one", bool, False, path)
        stop_after_first = self.opt(fmt, "stop_after_first", bool, False, path)
        if not tags:
            raise StructuralTagError("tags_with_separator needs tags", path=f"{path}.tags")
        alts = []
        for i, tag in enumerate(tags):
            begin, _, rest = self.tag_parts(tag, f"{path}.tags[{i}]")
            alts.append(Seq((begin, rest)))
        one_name = self.fresh("tag")
        self.rules[one_name] = Alt(tuple(alts))
        one: Node = Ref(one_name)
        body: Node = one if stop_after_first else Seq((one, Repeat(Seq((self.delimiter(separator), one)), 0, None)))
        return body if at_least_one else Repeat(body, 0, 1)

    def _dispatch(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        rules = self.field(fmt, "rules", list, path)
        loop_on = self.opt(fmt, "loop", bool, True, path)
        excludes = self.strings(fmt, "excludes", path)
        loop = self.fresh("dispatch")
        patterns = [(s, _Action("exclude")) for s in excludes if s]
        for i, rule in enumerate(rules):
            if not (isinstance(rule, list) and len(rule) == 2 and isinstance(rule[0], str) and rule[0]):
                raise StructuralTagError("a dispatch rule is [pattern, format]", path=f"{path}.rules[{i}]")
            body = self.lower(rule[1], f"{path}.rules[{i}][1]", None)
            patterns.append((rule[0], _Action("trigger", Seq((body, Ref(loop))) if loop_on else body)))
        self.rules[loop] = self.free_text(patterns, can_stop=True, path=path)
        return Ref(loop)

    # -- token level -----------------------------------------------------------------------------
    def _token(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        return TokenSet((self.token(self.field(fmt, "token", (int, str), path), f"{path}.token"),))

    def _exclude_token(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        excluded = self.tokens(fmt, "exclude_tokens", path)
        if end is not None and end.token is not None:
            return Seq((TokenSet([*excluded, end.token], negated=True), TokenSet((end.token,))))
        return TokenSet(excluded, negated=True)

    def _any_tokens(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        excluded = self.tokens(fmt, "exclude_tokens", path)
        max_tokens = self.opt(fmt, "max_tokens", int, None, path)
        if max_tokens is not None and not 0 <= max_tokens <= self.limits.max_repeat:
            raise StructuralTagError(f"max_tokens must be in 0..{self.limits.max_repeat}", path=f"{path}.max_tokens")
        if end is not None and end.token is not None:
            return Seq((Repeat(TokenSet([*excluded, end.token], negated=True), 0, max_tokens), TokenSet((end.token,))))
        return Repeat(TokenSet(excluded, negated=True), 0, max_tokens)

    def _token_triggered_tags(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        triggers = self.tokens(fmt, "trigger_tokens", path, required=True)
        tags = self.field(fmt, "tags", list, path)
        excluded = self.tokens(fmt, "exclude_tokens", path)
        at_least_one = self.opt(fmt, "at_least_one", bool, False, path)
        stop_after_first = self.opt(fmt, "stop_after_first", bool, False, path)
        if not triggers or not tags:
            raise StructuralTagError("token_triggered_tags needs trigger_tokens and tags", path=path)
        alts = []
        for i, tag in enumerate(tags):
            tag_path = f"{path}.tags[{i}]"
            begin, begin_text, rest = self.tag_parts(tag, tag_path)
            if begin_text is not None or not isinstance(begin, TokenSet) or begin.ids[0] not in triggers:
                raise StructuralTagError(
                    "token_triggered_tags' tags begin with a trigger token", path=f"{tag_path}.begin"
                )
            alts.append(Seq((begin, rest)))
        tag_name = self.fresh("token_tag")
        self.rules[tag_name] = Alt(tuple(alts))
        end_token = end.token if end is not None else None
        free = TokenSet(triggers + excluded + ([end_token] if end_token is not None else []), negated=True)
        closing: Node = TokenSet((end_token,)) if end_token is not None else EMPTY
        if stop_after_first:
            # Free tokens, one tag, and (inside a tag) free tokens until the end.
            if at_least_one:
                return Seq((Ref(tag_name), Seq((Repeat(free, 0, None), closing)) if end_token is not None else EMPTY))
            tail = Seq((Repeat(free, 0, None), closing))
            return Seq((Repeat(free, 0, None), Alt((Seq((Ref(tag_name), tail)), closing))))
        body: Node = Repeat(Alt((free, Ref(tag_name))), 0, None)
        if at_least_one:
            body = Seq((Ref(tag_name), body))
        return Seq((body, closing))

    def _token_dispatch(self, fmt: Mapping[str, Any], path: str, end: _End | None) -> Node:
        rules = self.field(fmt, "rules", list, path)
        loop_on = self.opt(fmt, "loop", bool, True, path)
        excluded = self.tokens(fmt, "exclude_tokens", path)
        ids: list[int] = []
        alts: list[Node] = []
        for i, rule in enumerate(rules):
            if not (isinstance(rule, list) and len(rule) == 2):
                raise StructuralTagError("a token_dispatch rule is [token, format]", path=f"{path}.rules[{i}]")
            token = self.token(rule[0], f"{path}.rules[{i}][0]")
            ids.append(token)
            alts.append(Seq((TokenSet((token,)), self.lower(rule[1], f"{path}.rules[{i}][1]", None))))
        free = TokenSet(ids + excluded, negated=True)
        if loop_on:
            return Repeat(Alt((free, *alts)), 0, None)
        return Seq((Repeat(free, 0, None), Repeat(Alt(tuple(alts)), 0, 1)))

    # -- free text -------------------------------------------------------------------------------
    def free_text(self, patterns: list[tuple[str, _Action]], can_stop: bool, path: str) -> Node:
        """Text read through an Aho-Corasick automaton of ``patterns``: where one completes,
        its action decides (exclude: dead; end or trigger: its continuation); ``can_stop``: the
        text may end anywhere else."""
        automaton = _AhoCorasick([p for p, _ in patterns])
        if len(automaton.goto) > MAX_FREE_TEXT_STATES:
            raise StructuralTagError(
                f"the free text's patterns need over {MAX_FREE_TEXT_STATES} automaton states",
                path=path,
                code="structural-tag-limit",
            )
        names = [self.fresh("ft") for _ in automaton.goto]
        # A pattern that starts with a special token's text also starts with that token, after
        # any text (the token is never text, so no pattern is in progress across it).
        by_token: list[Node] = []
        for p, action in patterns:
            special = self.special_prefix(p)
            if special is not None and action.kind != "exclude":
                token, rest = special
                by_token.append(Seq((TokenSet((token,)), self.delimiter(rest) if rest else EMPTY, action.then)))
        for q in range(len(automaton.goto)):
            alts: list[Node] = []
            if can_stop:
                alts.append(EMPTY)
            chars = sorted(automaton.interesting(q))
            for c in chars:
                t = automaton.step(q, c)
                done = automaton.outputs[t]
                lit = Literal(c.encode("utf-8", "surrogatepass"))
                if done:
                    continuations = [patterns[k][1] for k in done if patterns[k][1].kind != "exclude"]
                    if continuations:
                        alts.extend(Seq((lit, a.then)) for a in continuations)
                    continue
                alts.append(Seq((lit, Ref(names[t]))))
            others = merge_ranges((ord(c), ord(c)) for c in chars)
            alts.append(Seq((CharClass(others, negated=True), Ref(names[0]))))
            alts.extend(by_token)
            self.rules[names[q]] = Alt(tuple(alts))
        return Ref(names[0])

    def bounded_text(self, forbidden: list[str], max_chars: int, end: _End | None, path: str) -> Node:
        """At most ``max_chars`` characters that hold none of ``forbidden`` (the excludes and
        the enclosing tag's ends), then the end if there is one: the count is the text's own,
        the end is not part of it (XGrammar counts the characters its any_text rule reads).
        One IR rule per (automaton state, characters read)."""
        automaton = _AhoCorasick([p for p in forbidden if p])
        n = len(automaton.goto) * (max_chars + 1)
        if len(automaton.goto) > MAX_FREE_TEXT_STATES or n > MAX_BOUNDED_TEXT_RULES:
            raise StructuralTagError(
                f"max_chars text needs {n} rules (at most {MAX_BOUNDED_TEXT_RULES})",
                path=f"{path}.max_chars",
                code="structural-tag-limit",
            )
        stem = self.fresh("bt")
        after: Node = EMPTY if end is None else self.end_node(end)
        todo = [(0, 0)]
        seen = {(0, 0)}
        while todo:
            q, k = todo.pop()
            alts: list[Node] = [after]
            if k < max_chars:
                chars = sorted(automaton.interesting(q))
                nexts: list[tuple[Node, int]] = [
                    (Literal(c.encode("utf-8", "surrogatepass")), automaton.step(q, c)) for c in chars
                ]
                nexts.append((CharClass(merge_ranges((ord(c), ord(c)) for c in chars), negated=True), 0))
                for node, t in nexts:
                    if automaton.outputs[t]:
                        continue  # a forbidden string completes
                    alts.append(Seq((node, Ref(f"{stem}_{t}_{k + 1}"))))
                    if (t, k + 1) not in seen:
                        seen.add((t, k + 1))
                        todo.append((t, k + 1))
            self.rules[f"{stem}_{q}_{k}"] = Alt(tuple(alts))
        return Ref(f"{stem}_0_0")


@dataclass(frozen=True)
class _Action:
    kind: str  # "exclude", "end" or "trigger"
    then: Node = EMPTY


class _AhoCorasick:
    """The Aho-Corasick automaton of a few patterns, over characters. ``outputs[q]``: the
    patterns (indices) that end at state q, its dictionary suffixes included."""

    def __init__(self, patterns: list[str]) -> None:
        self.goto: list[dict[str, int]] = [{}]
        self.outputs: list[list[int]] = [[]]
        for k, p in enumerate(patterns):
            q = 0
            for c in p:
                if c not in self.goto[q]:
                    self.goto.append({})
                    self.outputs.append([])
                    self.goto[q][c] = len(self.goto) - 1
                    if len(self.goto) > MAX_FREE_TEXT_STATES + 1:
                        return
                q = self.goto[q][c]
            self.outputs[q].append(k)
        self.fail = [0] * len(self.goto)
        order = list(self.goto[0].values())
        i = 0
        while i < len(order):
            q = order[i]
            i += 1
            for c, t in self.goto[q].items():
                f = self.fail[q]
                while f and c not in self.goto[f]:
                    f = self.fail[f]
                self.fail[t] = self.goto[f].get(c, 0)
                self.outputs[t] = self.outputs[t] + self.outputs[self.fail[t]]
                order.append(t)
        self._interesting: dict[int, frozenset[str]] = {}

    def step(self, q: int, c: str) -> int:
        while q and c not in self.goto[q]:
            q = self.fail[q]
        return self.goto[q].get(c, 0)

    def interesting(self, q: int) -> frozenset[str]:
        """Characters that lead somewhere other than the root from q."""
        if q not in self._interesting:
            chars = set(self.goto[q])
            f = q
            while f:
                f = self.fail[f]
                chars |= set(self.goto[f])
            self._interesting[q] = frozenset(chars)
        return self._interesting[q]


# XML argument styles: (opening of a string property, opening of another, closing); NAME is
# the property's name, "\0" whitespace ([ \t\n\r]*).
_DSML = "\uff5cDSML\uff5c"
_XML_STYLES: dict[str, tuple[str, str, str]] = {
    "qwen_xml": ("<parameter={name}>", "<parameter={name}>", "</parameter>"),
    "minimax_xml": ('<parameter name="{name}">', '<parameter name="{name}">', "</parameter>"),
    "glm_xml": ("<arg_key>{name}</arg_key>\0<arg_value>", "<arg_key>{name}</arg_key>\0<arg_value>", "</arg_value>"),
    "deepseek_xml": (
        f'<{_DSML}parameter name="{{name}}" string="true">',
        f'<{_DSML}parameter name="{{name}}" string="false">',
        f"</{_DSML}parameter>",
    ),
}

# XML styles: the keywords of a supported object, annotations, and the keywords by which a
# non-string property could still hold a string (XGrammar writes those raw).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated"})
_XML_OBJECT_KEYS = frozenset({"type", "properties", "required", "additionalProperties"}) | _ANNOTATIONS
_XML_RAW_STRINGS = frozenset({"enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref", "if", "then", "else"})

# any_order: the keywords of a supported object, and the keywords that make a schema one that
# XGrammar's any_order changes (its objects, nested ones included, lose their order).
_ANY_ORDER_KEYS = frozenset(
    {"type", "properties", "required", "additionalProperties", "minProperties", "maxProperties"}
)
_ANY_ORDER_KEYS |= _ANNOTATIONS
_OBJECT_KEYWORDS = frozenset(
    {
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "dependentRequired",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
        "$ref",
        "$dynamicRef",
        "$recursiveRef",
    }
)

# Keywords whose values are data, not subschemas.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples", "required"})


def _close_objects(schema: Any) -> Any:
    """``schema`` with ``"additionalProperties": false`` in every object schema that lists
    ``properties`` and says nothing of other properties: XGrammar compiles structural-tag
    schemas in its strict mode, which closes exactly those objects (an object schema without
    ``properties`` still takes any property). Iterative: schema depth is user-driven."""
    if not isinstance(schema, dict):
        return schema
    root: dict[str, Any] = {}
    stack: list[tuple[dict[str, Any], dict[str, Any]]] = [(schema, root)]
    while stack:
        src, dst = stack.pop()
        for key, value in src.items():
            if key in _DATA_KEYWORDS:
                dst[key] = value
            elif isinstance(value, dict):
                dst[key] = {}
                stack.append((value, dst[key]))
            elif isinstance(value, list):
                items: list[Any] = []
                for v in value:
                    if isinstance(v, dict):
                        items.append({})
                        stack.append((v, items[-1]))
                    else:
                        items.append(v)
                dst[key] = items
            else:
                dst[key] = value
        if (
            isinstance(src.get("properties"), dict)
            and "additionalProperties" not in src
            and "patternProperties" not in src
            and "unevaluatedProperties" not in src
        ):
            dst["additionalProperties"] = False
    return root


def _object_keywords(schema: Any) -> bool:
    """Whether ``schema`` holds an object keyword (``_OBJECT_KEYWORDS``) or an object among
    its enum and const values, at any depth (iterative: schema depth is user-driven)."""
    stack: list[tuple[Any, bool]] = [(schema, False)]
    while stack:
        v, data = stack.pop()
        if isinstance(v, dict):
            if data or not v.keys().isdisjoint(_OBJECT_KEYWORDS):
                return True
            stack.extend((x, k in ("enum", "const")) for k, x in v.items() if k not in _ANNOTATIONS)
        elif isinstance(v, list):
            stack.extend((x, data) for x in v)
    return False


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _rename_shallow(node: Node, names: Mapping[str, str], depth: int, budget: list[int]) -> Node | None:
    """rename_refs for a node at most ``depth`` levels deep and ``budget[0]`` nodes as a tree
    (sharing is not memoized here), else None."""
    budget[0] -= 1
    if budget[0] < 0:
        return None
    if isinstance(node, Ref):
        return Ref(names.get(node.name, node.name))
    if isinstance(node, (Literal, CharClass, ByteClass, TokenSet)):
        return node
    if depth == 0:
        return None
    if isinstance(node, (Seq, Alt)):
        items = []
        for k in node.items:
            renamed = _rename_shallow(k, names, depth - 1, budget)
            if renamed is None:
                return None
            items.append(renamed)
        return Seq(tuple(items)) if isinstance(node, Seq) else Alt(tuple(items))
    if isinstance(node, Repeat):
        item = _rename_shallow(node.item, names, depth - 1, budget)
        return None if item is None else Repeat(item, node.min, node.max)
    return None


def rename_refs(node: Node, names: Mapping[str, str]) -> Node:
    """``node`` with every reference renamed through ``names`` (iterative: IR depth is
    user-driven)."""
    # Most rule bodies are shallow: renamed by recursion a few levels deep, else by the walk.
    shallow = _rename_shallow(node, names, 6, [256])
    if shallow is not None:
        return shallow
    out: dict[int, Node] = {}
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        n, done = stack.pop()
        kids: tuple[Node, ...] = ()
        if isinstance(n, (Seq, Alt)):
            kids = n.items
        elif isinstance(n, Repeat):
            kids = (n.item,)
        elif isinstance(n, StringExcept):
            kids = (n.tail,)
        if not done and kids:
            stack.append((n, True))
            stack.extend((k, False) for k in kids)
            continue
        if isinstance(n, Ref):
            out[id(n)] = Ref(names.get(n.name, n.name))
        elif isinstance(n, Seq):
            out[id(n)] = Seq(tuple(out[id(k)] for k in n.items))
        elif isinstance(n, Alt):
            out[id(n)] = Alt(tuple(out[id(k)] for k in n.items))
        elif isinstance(n, Repeat):
            out[id(n)] = Repeat(out[id(n.item)], n.min, n.max)
        elif isinstance(n, StringExcept):
            out[id(n)] = StringExcept(n.words, out[id(n.tail)])
        else:
            out[id(n)] = n
    return out[id(node)]
