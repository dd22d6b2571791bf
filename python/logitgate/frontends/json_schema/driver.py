"""The driver: atom sets to rules (a worklist, not Python recursion), the distribution of
disjunctions, dispatch to the emitters per JSON type, and :func:`schema_to_grammar`."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Sequence
from typing import Any

from logitgate._json_reader import JsonTextError, read_json, text_nesting
from logitgate.cancel import checkpoint, discard_later
from logitgate.errors import (
    CompileCancelled,
    CompileTimeout,
    LimitExceeded,
    SchemaError,
    UnsupportedSchemaError,
    UsageError,
    _int_text,
)
from logitgate.grammar.ir import (
    EMPTY,
    Grammar,
    Literal,
    Node,
    Ref,
    references,
)
from logitgate.grammar.json_text import EMPTY_LANG as _EMPTY_LANG
from logitgate.grammar.json_text import alt as _alt
from logitgate.grammar.json_text import is_empty_language as _is_empty
from logitgate.limits import Limits

from .arrays import ArrayEmitter
from .caps import _DERIVATION_STEPS_PER_RULE, DECIMAL_DIGITS, SCHEMA_RULES
from .decide import Decider
from .diagnostics import Diagnostics
from .distribute import Distributor
from .expand import Expander
from .facts import _Facts
from .keywords import _LEAF_KEYWORDS, _NOT_LEAF, _legacy_draft
from .literals import LiteralEmitter
from .members import MemberPositions
from .merge import Merger
from .negation import Negator
from .numbers import NumberEmitter
from .objects import ObjectEmitter
from .resolve import _DEFAULT_BASE, _FALSE, _Index
from .rules import RuleTable, _productive, shows_text
from .strings import StringEmitter
from .values import _ptr_join


def schema_to_grammar(
    schema: dict[str, Any] | bool | str,
    *,
    limits: Limits,
    whitespace: str = "flexible",
    max_whitespace: int | None = None,
    property_order: str = "schema",
    strict: bool = False,
    lenient: bool = False,
    oneof: str = "exact",
    check_empty: bool = True,
    pointers: dict[str, str] | None = None,
) -> tuple[Grammar, list[str]]:
    """The grammar of JSON texts valid against ``schema``, and the dropped constraints.

    ``check_empty=False`` skips the (costly) search for an empty language here: the compiler
    passes it because the core finds an empty root language anyway, and only then asks this
    function again for the error with its JSON pointer.

    ``pointers``, when given, receives the JSON pointer of each rule that lowers a schema (its
    name to the pointers of the subschemas it lowers, joined by " & ").

    Options (see docs/json_schema.md): ``whitespace`` "flexible" (any JSON whitespace between
    tokens; with ``max_whitespace`` N, at most one newline then at most N spaces/tabs per gap)
    or "compact" (none); ``property_order`` "schema" or "any" (objects of up to 8 listed properties);
    ``strict`` forbids properties not listed wherever ``additionalProperties`` is absent;
    ``lenient`` drops unsupported constraints and lists them instead of raising; ``oneof``
    "exact" (branches must be provably disjoint) or "anyof" (treat oneOf as anyOf).
    """
    if isinstance(schema, (bytes, str)):
        try:
            text = schema.decode("utf-8") if isinstance(schema, bytes) else schema
        except UnicodeDecodeError as e:
            raise SchemaError(f"schema text is not UTF-8: {e}", pointer="", code="schema-json") from None
        if len(text.encode("utf-8", "surrogatepass")) > limits.max_source_bytes:
            raise LimitExceeded("max_source_bytes", limits.max_source_bytes, "schema text")
        try:
            schema = read_json(text)
        except JsonTextError as e:
            if e.problem == "digits":
                raise DECIMAL_DIGITS.exceeded(f"schema text {e.reason}") from None
            if e.problem == "syntax":
                raise SchemaError(f"schema {e.reason}", pointer="", code="schema-json") from None
            # Valid JSON nested deeper than Python's parser recurses: a depth problem, not a syntax one.
            depth = text_nesting(text)
            if depth > limits.max_nesting:
                why = f"schema text nested {depth} levels deep"
                raise LimitExceeded("max_nesting", limits.max_nesting, why) from None
            raise SchemaError(
                f"schema text nested {depth} levels deep: deeper than Python's JSON parser goes",
                pointer="",
                code="schema-too-deep",
            ) from None
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(
            f"a schema must be an object or a boolean (or JSON text), got {type(schema).__name__}",
            pointer="",
            code="schema-type",
        )
    try:
        low = Lowering(
            schema,
            limits=limits,
            whitespace=whitespace,
            max_whitespace=max_whitespace,
            property_order=property_order,
            strict=strict,
            lenient=lenient,
            oneof=oneof,
        )
        if schema is True:
            return Grammar({"root": low.table.any_value(), **low.table.rules}), []
        try:
            grammar = low.run(check_empty)
        except (CompileCancelled, CompileTimeout):
            low.release()
            raise
        if pointers is not None:
            pointers.update(low.pointers)
    except (TypeError, AttributeError):
        # A schema passed as Python data may hold what JSON cannot (a set, an object, a
        # non-string key), which fails deep inside the lowering: looked for here, after the
        # fact, so that JSON schemas pay nothing; any other failure is raised as it is.
        found = _non_json_value(schema)
        if found is None:
            raise
        pointer, what = found
        raise SchemaError(f"the schema holds {what}, which is not JSON data", pointer=pointer) from None
    return grammar, list(low.diag.dropped)


def _non_json_value(schema: Any) -> tuple[str, str] | None:
    """The pointer and a description of the first value in ``schema`` that is not JSON data
    (iterative; containers met twice, as in a cyclic structure, are not walked again)."""
    stack: list[tuple[Any, str]] = [(schema, "")]
    seen: set[int] = set()
    while stack:
        v, ptr = stack.pop()
        if v is None or isinstance(v, (str, bool, int, float)):
            continue
        if isinstance(v, (dict, list)):
            if id(v) in seen:
                continue
            seen.add(id(v))
            if isinstance(v, list):
                stack.extend((x, _ptr_join(ptr, i)) for i, x in enumerate(v))
                continue
            for k, x in v.items():
                if not isinstance(k, str):
                    return ptr, f"a key of type {type(k).__name__} ({k!r})"
                stack.append((x, _ptr_join(ptr, k)))
            continue
        return ptr, f"a value of type {type(v).__name__}"
    return None


class Lowering:
    """One schema document lowered: atom sets to named rules, each lowered once."""

    def __init__(
        self,
        root: Any,
        *,
        limits: Limits,
        whitespace: str,
        max_whitespace: int | None,
        property_order: str,
        strict: bool,
        lenient: bool,
        oneof: str,
    ) -> None:
        if whitespace not in ("flexible", "compact"):
            raise UsageError(
                f"whitespace must be 'flexible' or 'compact', got {whitespace!r}", code="json-schema-option"
            )
        if property_order not in ("schema", "any"):
            raise UsageError(
                f"property_order must be 'schema' or 'any', got {property_order!r}", code="json-schema-option"
            )
        if oneof not in ("exact", "anyof"):
            raise UsageError(f"oneof must be 'exact' or 'anyof', got {oneof!r}", code="json-schema-option")
        if max_whitespace is not None and (not isinstance(max_whitespace, int) or max_whitespace < 0):
            shown = _int_text(max_whitespace) if isinstance(max_whitespace, int) else repr(max_whitespace)
            raise UsageError(
                f"max_whitespace must be None or a non-negative int, got {shown}", code="json-schema-option"
            )
        if max_whitespace is not None and max_whitespace > limits.max_repeat:  # a gap's one repetition
            raise LimitExceeded("max_repeat", limits.max_repeat, f"max_whitespace {_int_text(max_whitespace)}")
        self.limits = limits
        self.diag = Diagnostics(lenient)
        self.table = RuleTable(whitespace == "compact", max_whitespace)
        self.index = _Index(root, limits, oneof_as_anyof=oneof == "anyof")
        neg = Negator(self.index, self.diag)
        self.merger = Merger(self.index, self.diag)
        self.exp = Expander(
            self.index,
            self.diag,
            neg,
            lambda alts: dec.pairwise_disjoint(alts),
            lambda alts: dec.overlapping_types(alts),
            oneof == "anyof",
        )
        dec = Decider(self.exp, self.merger, self.diag, limits)
        self.dist = Distributor(self.index, self.exp, self.merger, self.diag)
        self.nums = NumberEmitter(self.table, self.diag, limits, not _legacy_draft(root))
        self.strs = StringEmitter(self.table, self.diag, dec, limits)
        members = MemberPositions(self.table)
        self.lits = LiteralEmitter(self.table, dec, members, limits)
        self.arrs = ArrayEmitter(self.table, self.diag, dec, self.index, self.lits, self.atoms_ref, limits)
        self.objs = ObjectEmitter(
            self.table,
            self.diag,
            dec,
            self.exp,
            self.strs,
            self.lits,
            members,
            self.atoms_ref,
            limits,
            strict=strict,
            order_any=property_order == "any",
        )
        self.names: dict[frozenset[int], str] = {}
        self.pointers: dict[str, str] = {}  # rule name -> JSON pointer(s) of the schema set it lowers
        self.work: list[tuple[frozenset[int], str]] = []
        self.leaf_names: dict[tuple[Any, ...], str] = {}  # _leaf_key -> the rule of the first such leaf

    def release(self, now: bool = False) -> None:
        """Hands the lowering's work to a background thread to free (an interrupted compile
        returns at once). Its parts refer to one another (emitters to the driver's callbacks,
        the expander to the decider): left to the cycle collector, the work would be walked by
        its next collection, in whichever thread, long after the interrupt. With ``now``, the
        parts are cleared here and reference counting frees the work at once."""
        parts = [self, *vars(self).values()]
        for part in parts:
            for value in list(getattr(part, "__dict__", {}).values()):
                if type(value).__module__.startswith("logitgate.frontends.json_schema"):
                    if value not in parts:
                        parts.append(value)
        work = []
        for part in parts:
            d = getattr(part, "__dict__", None)
            if d is not None and type(part).__module__.startswith("logitgate.frontends.json_schema"):
                if not now:
                    work.append(dict(d))
                d.clear()
        if not now:
            discard_later(work)

    def atoms_ref(self, atoms: Iterable[int]) -> Node:
        key = frozenset(atoms)
        if 0 in key:
            key = key - {0}
        if _FALSE in key:
            return _EMPTY_LANG
        if not key:
            return self.table.any_value()
        name = self.names.get(key)
        if name is None:
            leaf = None
            if len(key) == 1:
                (atom,) = key
                try:
                    target = self.index.alias_target(atom)
                except UnsupportedSchemaError:  # a remote reference: lowered (and dropped) by expand
                    if not self.diag.lenient:
                        raise
                    target = None
                if target is not None:
                    node = self.atoms_ref((target,))
                    if type(node) is Ref:
                        self.names[key] = node.name
                    return node
                leaf = self._leaf_key(atom)
            if leaf is not None:
                name = self.leaf_names.get(leaf)
                if name is not None:
                    self.names[key] = name
                    return Ref(name)
            if len(self.names) > SCHEMA_RULES.value:
                raise SCHEMA_RULES.exceeded("too many schema rules")
            name = f"s{len(self.names)}"
            self.names[key] = name
            self.pointers[name] = " & ".join(sorted({"#" + self.index.info[a][1] for a in key if a in self.index.info}))
            if leaf is not None:
                self.leaf_names[leaf] = name
            self.work.append((key, name))
        return Ref(name)

    def _leaf_key(self, atom: int) -> tuple[Any, ...] | None:
        """The constraints of a schema that is a leaf (scalar keywords, annotations and unknown
        keywords only), as a hashable key: leaves with the same key lower to the same rule.
        Schemas repeat their leaves: Github_ultra/o15627's 285 leaf property schemas are 4
        distinct ones. None when not a leaf, and always when lenient (each occurrence of a
        dropped constraint is reported at its own pointer)."""
        if self.diag.lenient or atom in self.index.synthetic:
            return None
        d, ptr, base = self.index.info[atom]
        if not d.keys().isdisjoint(_NOT_LEAF):
            # (Not the root: it has no copy, and its text is the whole document.)
            return self._subschema_key(d, base) if ptr else None
        parts = []
        for k in sorted(d.keys() & _LEAF_KEYWORDS):
            v = d[k]
            # Values compare as written (1 and 1.0, true and 1 are different keys): an enum of
            # 1.0 is spelled otherwise than one of 1, and a missed share costs only time.
            if isinstance(v, (list, dict)):
                try:
                    v = json.dumps(v, sort_keys=True)
                except (RecursionError, ValueError, TypeError):  # too deep, or not JSON
                    return None
            parts.append((k, (type(v), v)))
        return tuple(parts)

    @staticmethod
    def _subschema_key(d: dict[str, Any], base: str) -> tuple[Any, ...] | None:
        """The key of a schema with subschemas: its JSON text (keys in document order) and its
        base URI. Two such schemas with equal keys have one language: every ``$ref`` in them
        resolves from the same base in the same document, and so does every ``$id`` and
        ``$anchor`` they hold (the index keeps the first of equal resources). Schemas inline
        copies of their definitions (Github_trivial/o36276 lowers to a quarter of its rules).
        Not for dynamic references (their target depends on the path that reached them)."""
        try:
            text = json.dumps(d)
        except (RecursionError, ValueError, TypeError):  # too deep, or not JSON
            return None
        if "$dynamicRef" in text or "$recursiveRef" in text:
            return None
        return ("$subschema", base, text)

    def run(self, check_empty: bool = True) -> Grammar:
        root_atom = self.index.atom(self.index.root, "", _DEFAULT_BASE)
        if root_atom == _FALSE:
            raise SchemaError("empty language: the schema is false", pointer="", code="schema-empty")
        self.table.rules["root"] = EMPTY
        body = self.atoms_ref([root_atom])
        self.lower_queued()
        self.table.rules["root"] = body
        if check_empty:
            self._check_productive()
        return Grammar(dict(self.table.rules), stand_ins=tuple(self.table.stand_ins))

    def lower_queued(self) -> None:
        """Lowers every queued atom set into its rule (lowering one may queue others)."""
        while self.work:
            checkpoint()  # one rule per round: a schema can ask for up to SCHEMA_RULES of them
            atoms, name = self.work.pop()
            self.table.rules[name] = self.lower_set(atoms)

    def _check_productive(self) -> None:
        rules = self.table.rules
        if shows_text(rules, "root", _DERIVATION_STEPS_PER_RULE * (len(rules) + 256)):
            return
        productive: set[str] = set()
        users: dict[str, list[str]] = {}
        for name, node in self.table.rules.items():
            for ref in references(node):
                users.setdefault(ref, []).append(name)
        queue = collections.deque(self.table.rules)
        while queue:  # re-evaluate a rule only when one of its references became productive
            checkpoint()
            name = queue.popleft()
            if name in productive or not _productive(self.table.rules[name], productive):
                continue
            productive.add(name)
            queue.extend(u for u in users.get(name, ()) if u not in productive)
        if "root" not in productive:
            ptr, msg = (
                self.diag.empty_reasons[0] if self.diag.empty_reasons else ("", "no JSON value satisfies the schema")
            )
            raise SchemaError(f"empty language: {msg}", pointer=ptr, code="schema-empty")

    def lower_set(self, atoms: frozenset[int]) -> Node:
        exp = self.exp.expand(atoms)
        if exp is None:
            return _EMPTY_LANG
        pure, disj = exp
        if disj and self.dist.declared_types(pure) <= {"string"}:
            # Strings only: the disjunctions as they nest, one automaton, where it is one.
            tree = self.dist.string_tree(atoms, exp)
            node = None if tree is None else self.strs.emit_union(tree)
            if node is not None:
                return node
        if disj:
            combos = self.dist.branches(pure, disj)
            if combos is None:
                return _EMPTY_LANG
            if combos:
                return _alt(self.atoms_ref(c) for c in combos)
        self.diag.lowering(self.index.schema_of(pure[0])[1] if pure else "")
        f = self.merger.merge(pure)
        node = self.emit(f)
        if _is_empty(node) and f.empty_reason is not None:
            self.diag.empty(*f.empty_reason)
        return node

    def emit(self, f: _Facts) -> Node:
        if f.enum is not None:
            return self.lits.emit_enum(f)
        types = f.types
        alts: list[Node] = []
        excluded = f.not_enum
        if "null" in types and not any(v is None for v in excluded):
            alts.append(Literal(b"null"))
        if "boolean" in types:
            for lit, val in ((b"true", True), (b"false", False)):
                if not any(v is val for v in excluded):
                    alts.append(Literal(lit))
        if "fraction" in types or "integer" in types:
            alts.append(self.table.shared("num", f, self.nums.emit_number))
        if "string" in types:
            alts.append(self.table.shared("str", f, self.strs.emit_string))
        if "array" in types:
            alts.append(self.arrs.emit_array(f))
        if "object" in types:
            alts.append(self.objs.emit_object(f))
        alts = [a for a in alts if not _is_empty(a)]
        return _alt(alts) if alts else _EMPTY_LANG


def schemas_to_grammar(
    schemas: Sequence[Any],
    *,
    limits: Limits,
    whitespace: str = "flexible",
    max_whitespace: int | None = None,
    property_order: str = "schema",
    strict: bool = False,
    oneof: str = "exact",
) -> tuple[Grammar, list[str | None]]:
    """Several schemas lowered in one pass, as subschemas of one document: the grammar's rule
    ``names[i]`` is the language of ``schemas[i]`` (the one
    ``schema_to_grammar(schemas[i], check_empty=False)`` lowers), and the schemas share their
    rules (whitespace, strings, each distinct leaf and scalar constraint set, each repeated
    subschema). For the many schemas of one structural tag (a tool list).

    Only self-contained schemas (:func:`self_contained`) are lowered, each its own resource (an
    ``$id`` of its own is added), so that its ``#...`` references resolve inside it as they do
    when it is the document; ``names[i]`` is None for any other. Errors are those of
    ``schema_to_grammar``, but their pointers are into the combined document
    (``/$defs/<i>/...``), and the rule count is capped for all the schemas together: callers
    lower one schema alone for its own error."""
    chosen = {str(i): {**s, "$id": _SCHEMA_BASE.format(i)} for i, s in enumerate(schemas) if self_contained(s)}
    document = {"$defs": chosen}
    low = Lowering(
        document,
        limits=limits,
        whitespace=whitespace,
        max_whitespace=max_whitespace,
        property_order=property_order,
        strict=strict,
        lenient=False,
        oneof=oneof,
    )
    names: list[str | None] = []
    for i in range(len(schemas)):
        schema = chosen.get(str(i))
        if schema is None:
            names.append(None)
            continue
        node = low.atoms_ref([low.index.atom(schema, f"/$defs/{i}", _SCHEMA_BASE.format(i))])
        if type(node) is not Ref:  # (a rule of its own, when not one already)
            low.table.rules[f"root{i}"] = node
            node = Ref(f"root{i}")
        names.append(node.name)
    try:
        low.lower_queued()
    except (CompileCancelled, CompileTimeout):
        low.release()
        raise
    root = next((n for n in names if n is not None), "root")
    grammar = Grammar(dict(low.table.rules), root=root, stand_ins=tuple(low.table.stand_ins))
    low.release(now=True)  # (its many rules: freed now, not walked by a collection first)
    return grammar, names


# The base URI of schemas_to_grammar's i-th schema (each a resource of the combined document).
_SCHEMA_BASE = "https://logitgate.invalid/schemas/{}.json"
# The "$" keywords a self-contained schema may hold ("$ref" only to a "#" fragment).
_SELF_CONTAINED_KEYS = frozenset({"$ref", "$defs", "$comment"})


def self_contained(schema: Any) -> bool:
    """Whether ``schema`` is an object schema whose meaning cannot depend on the document
    around it: it declares no ``$id``, ``$schema``, anchor or dynamic reference (no ``$`` key
    but ``$defs``, ``$comment`` and ``$ref``), and each ``$ref`` is a fragment (``#...``) of
    the schema itself. Conservative: a ``$`` key anywhere (a property named so) counts."""
    if not isinstance(schema, dict):
        return False
    stack: list[Any] = [schema]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    return False
                if k.startswith("$"):
                    if k not in _SELF_CONTAINED_KEYS:
                        return False
                    if k == "$ref" and not (isinstance(x, str) and x.startswith("#")):
                        return False
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return True
