"""The enforcement report: per JSON pointer, which keywords a compiled schema's mask enforces,
which it enforces with a documented departure (it accepts fewer spellings of valid values:
docs/json_schema.md, "Departures"), which a lenient compile dropped, and which are annotations
the mask ignores. ``logitgate inspect --schema F`` prints it with the token budget."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .compiled import compile_lenient, refusal_pointer
from .lint import schema_document
from .schema_walk import INSTANCE_LISTS, INSTANCE_MAPS, INSTANCE_VALUES, join, walk

if TYPE_CHECKING:
    from ..budget import TokenBudget
    from ..vocabulary import Vocabulary

__all__ = ["EnforcementEntry", "EnforcementReport", "enforcement_report"]

Status = Literal["enforced", "departure", "dropped", "not-enforced"]

_NOT_ENFORCED = {
    "title": "annotation",
    "description": "annotation",
    "examples": "annotation",
    "default": "annotation: a default is not filled in",
    "$comment": "annotation",
    "readOnly": "annotation",
    "writeOnly": "annotation",
    "deprecated": "annotation",
    "contentMediaType": "annotation",
    "contentEncoding": "annotation",
    "contentSchema": "annotation",
}
# Structural keywords: they hold subschemas (reported at their own pointers) or identify.
_STRUCTURAL = frozenset({"$defs", "definitions", "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$vocabulary"})
_NUMBER_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_KNOWN_FORMATS = frozenset(
    {
        "date",
        "time",
        "date-time",
        "duration",
        "email",
        "idn-email",
        "hostname",
        "ipv4",
        "ipv6",
        "uuid",
        "uri",
        "uri-reference",
        "json-pointer",
        "relative-json-pointer",
    }
)
_FORMAT_DEPARTURES = {
    "hostname": "at most 3 labels of up to 63 characters or 8 of up to 30; no xn-- A-labels",
    "email": "dot-atom local part only (no quoted local parts, no address literals)",
    "idn-email": "dot-atom local part only (no quoted local parts, no address literals)",
    "time": "a leap second only at 23:59:60 UTC",
}
_KNOWN = (
    frozenset(INSTANCE_MAPS)
    | frozenset(INSTANCE_LISTS)
    | frozenset(INSTANCE_VALUES)
    | _NUMBER_BOUNDS
    | frozenset(
        {
            "type",
            "enum",
            "const",
            "multipleOf",
            "minLength",
            "maxLength",
            "pattern",
            "format",
            "minItems",
            "maxItems",
            "uniqueItems",
            "minContains",
            "maxContains",
            "required",
            "minProperties",
            "maxProperties",
            "dependentRequired",
            "dependencies",
            "$ref",
            "$dynamicRef",
            "$recursiveRef",
            "nullable",
        }
    )
)


@dataclass(frozen=True)
class EnforcementEntry:
    pointer: str
    keyword: str
    status: Status
    note: str = ""


@dataclass
class EnforcementReport:
    """Entries in document order; ``budget`` the compiled grammar's token budget (None when the
    schema did not compile, then ``error`` says why)."""

    entries: list[EnforcementEntry] = field(default_factory=list)
    budget: TokenBudget | None = None
    error: str | None = None

    def by_status(self, status: Status) -> list[EnforcementEntry]:
        return [e for e in self.entries if e.status == status]

    def to_dict(self) -> dict[str, Any]:
        b = self.budget
        return {
            "entries": [asdict(e) for e in self.entries],
            "budget": None
            if b is None
            else {
                "min_tokens": b.min_tokens,
                "max_tokens": b.max_tokens,
                "min_bytes": b.min_bytes,
                "max_bytes": b.max_bytes,
                "unbounded_by": list(b.unbounded_by),
            },
            "error": self.error,
        }

    def to_text(self) -> str:
        lines: list[str] = []
        if self.error:
            lines.append(f"not compiled: {self.error}")
        last = None
        for e in self.entries:
            if e.pointer != last:
                lines.append(e.pointer)
                last = e.pointer
            lines.append(f"  {e.status:<13} {e.keyword}" + (f": {e.note}" if e.note else ""))
        counts = {s: len(self.by_status(s)) for s in ("enforced", "departure", "dropped", "not-enforced")}
        lines.append("summary: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
        if self.budget is not None:
            lines.append(self.budget.summary())
        return "\n".join(lines)


def enforcement_report(schema: Any, *, vocab: Vocabulary | None = None, **options: Any) -> EnforcementReport:
    """What the mask compiled from ``schema`` (a dict, JSON text or a Pydantic model class)
    enforces, per pointer. The schema is compiled with ``lenient=True`` (compact whitespace,
    for ``vocab`` or a byte vocabulary; ``options`` as for
    :meth:`~logitgate.Compiler.compile_json_schema`), so a keyword the strict compile refuses
    shows as dropped instead of stopping the report."""
    doc = schema_document(schema)
    compiled = compile_lenient(doc, vocab, **options)
    report = EnforcementReport()
    dropped: dict[tuple[str, str], str] = {(d.pointer, d.keyword): d.reason for d in compiled.dropped}
    if compiled.error is not None:
        report.error = f"{refusal_pointer(compiled.error)}: {compiled.error.message.splitlines()[0]}"
    validators = _pydantic_validators(schema)
    if validators:
        report.entries.append(
            EnforcementEntry(
                "#",
                "validators",
                "not-enforced",
                f"Pydantic validators {', '.join(validators)}: checked after generation (.value, lg.extract)",
            )
        )
    order_any = options.get("property_order") == "any"
    for node in walk(doc):
        s, ptr = node.schema, node.pointer
        if isinstance(s, bool):
            continue  # reported as its parent's keyword
        for kw, v in s.items():
            if kw in _STRUCTURAL:
                continue
            report.entries.append(_entry(ptr, kw, v, s, dropped, order_any))
        for (p, kw), why in dropped.items():  # dropped constraints the walk has no keyword for
            if p == ptr and kw not in s:
                report.entries.append(EnforcementEntry(ptr, kw, "dropped", why))
    if compiled.grammar is not None:
        report.budget = compiled.grammar.token_budget()
    return report


def _entry(
    ptr: str, kw: str, v: Any, s: dict[str, Any], dropped: dict[tuple[str, str], str], order_any: bool
) -> EnforcementEntry:
    key = (ptr, kw)
    if key in dropped or (join(ptr, kw), kw) in dropped:
        return EnforcementEntry(ptr, kw, "dropped", dropped.get(key) or dropped[(join(ptr, kw), kw)])
    if kw in _NOT_ENFORCED:
        return EnforcementEntry(ptr, kw, "not-enforced", _NOT_ENFORCED[kw])
    if kw not in _KNOWN:
        return EnforcementEntry(ptr, kw, "not-enforced", "unknown keyword: an annotation")
    if kw == "format":
        if v not in _KNOWN_FORMATS:
            return EnforcementEntry(ptr, kw, "not-enforced", f"unknown format {v!r}: an annotation")
        note = _FORMAT_DEPARTURES.get(v, "")
        return EnforcementEntry(
            ptr, kw, "departure", "literal characters raw or \\uXXXX as a whole" + (f"; {note}" if note else "")
        )
    if kw in _NUMBER_BOUNDS:
        return EnforcementEntry(ptr, kw, "departure", "no exponent notation; bounds tightened to short decimals")
    if kw == "pattern":
        return EnforcementEntry(ptr, kw, "departure", "literal characters raw or \\uXXXX as a whole")
    if kw == "patternProperties" and s.get("additionalProperties") is not False:
        return EnforcementEntry(ptr, kw, "departure", "keys matching no pattern are not generated")
    if kw == "properties" and not order_any:
        return EnforcementEntry(ptr, kw, "departure", "properties are generated in schema order")
    if kw == "enum" and any(isinstance(x, str) for x in v if isinstance(v, list)):
        return EnforcementEntry(ptr, kw, "departure", "strings in their json.dumps spellings only")
    return EnforcementEntry(ptr, kw, "enforced")


def _pydantic_validators(schema: Any) -> list[str]:
    decorators = getattr(schema, "__pydantic_decorators__", None) if isinstance(schema, type) else None
    if decorators is None:
        return []
    names: list[str] = []
    for group in ("field_validators", "model_validators", "validators", "root_validators"):
        names += list(getattr(decorators, group, {}) or {})
    return names
