"""``lg.lint``: a schema checked against a target's strict-mode rules (OpenAI, Anthropic, or
logitgate's own compiler) and against the design rules, before anything is deployed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from .._json_reader import JsonTextError, read_json
from ..errors import SchemaError, UnsupportedSchemaError, UsageError
from .compiled import LenientCompile, compile_lenient
from .findings import SEVERITIES, Finding
from .rules_anthropic import anthropic_request_rules, anthropic_rules
from .rules_design import design_rules
from .rules_logitgate import logitgate_rules
from .rules_openai import openai_rules

if TYPE_CHECKING:
    from ..vocabulary import Vocabulary

__all__ = ["TARGETS", "Target", "has_errors", "lint", "schema_document"]

Target = Literal["openai", "anthropic", "logitgate"]
TARGETS: tuple[Target, ...] = ("openai", "anthropic", "logitgate")


def _parse(text: str | bytes) -> Any:
    try:
        return read_json(text)
    except JsonTextError as e:
        raise SchemaError(f"schema {e.reason}", pointer="", code="schema-json") from None


def schema_document(schema: Any) -> Any:
    """``schema`` as JSON data: JSON text is parsed, a Pydantic model class gives its JSON
    Schema; a dict or a bool is returned as it is."""
    if isinstance(schema, (str, bytes)):
        schema = _parse(schema)
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        from ..frontends.pydantic import pydantic_schema

        return pydantic_schema(schema)
    if not isinstance(schema, (dict, bool)):
        raise SchemaError(
            f"a schema must be an object or a boolean (or JSON text), got {type(schema).__name__}",
            pointer="",
            code="schema-type",
        )
    return schema


def lint(
    schema: Any, target: Target = "openai", *, vocab: Vocabulary | None = None, budget: bool = True
) -> list[Finding]:
    """The findings on ``schema`` for ``target``, errors first, then by pointer.

    ``schema`` is a dict, a bool, JSON text or a Pydantic model class; for ``anthropic`` a list
    of them is one request's strict tools (the per-request limits count over all of them; each
    finding's pointer is then prefixed ``#/<tool index>``). The design rules run for every
    target. ``budget`` adds the token budget (from a lenient compile, for ``vocab`` or a byte
    vocabulary) to the unbounded-output findings.
    """
    if target not in TARGETS:
        raise UsageError(f"unknown lint target {target!r} (one of {', '.join(TARGETS)})", code="lint-target")
    if isinstance(schema, (str, bytes)):
        schema = _parse(schema)
    if isinstance(schema, list):
        if target != "anthropic":
            raise UsageError(
                "a list of schemas (one request's tools) is linted for target='anthropic' only", code="lint-target"
            )
        docs = [schema_document(s) for s in schema]
        out = anthropic_request_rules(docs)
        for i, d in enumerate(docs):
            out += [_under(f, i) for f in _lint_one(d, target, vocab, budget)]
        return _ordered(out)
    doc = schema_document(schema)
    request = anthropic_request_rules([doc]) if target == "anthropic" else []
    return _ordered(request + _lint_one(doc, target, vocab, budget))


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def _lint_one(doc: Any, target: Target, vocab: Vocabulary | None, budget: bool) -> list[Finding]:
    out: list[Finding] = []
    compiled = compile_lenient(doc, vocab)
    if target == "openai":
        out += openai_rules(doc) + _malformed(compiled)
    elif target == "anthropic":
        out += anthropic_rules(doc) + _malformed(compiled)
    else:
        out += logitgate_rules(compiled)
    design = design_rules(doc)
    if budget and any(f.code.startswith("design-unbounded") for f in design):
        note = _budget_note(compiled)
        design = [_with_note(f, note) if f.code.startswith("design-unbounded") else f for f in design]
    return out + design


def _malformed(compiled: LenientCompile) -> list[Finding]:
    """A malformed schema is wrong for every target. Not reported here: what logitgate does not
    support, and an unsatisfiable part (``schema-empty``), which is valid JSON Schema."""
    e = compiled.error
    if not isinstance(e, SchemaError) or isinstance(e, UnsupportedSchemaError) or e.code == "schema-empty":
        return []
    return [f for f in logitgate_rules(compiled) if f.code == "logitgate-invalid"]


def _budget_note(compiled: LenientCompile) -> str:
    if compiled.grammar is None:
        return ""
    tb = compiled.grammar.token_budget()
    unit = "byte tokens" if compiled.grammar.vocab.size == 257 else "tokens"
    if tb.max_tokens is None:
        return f" (token budget: at least {tb.min_tokens} {unit}, no maximum)"
    return f" (token budget: {tb.min_tokens} to {tb.max_tokens} {unit})"


def _with_note(f: Finding, note: str) -> Finding:
    return Finding(f.code, f.severity, f.pointer, f.message + note, f.fix, f.source)


def _under(f: Finding, i: int) -> Finding:
    return Finding(f.code, f.severity, f"#/{i}" + f.pointer[1:], f.message, f.fix, f.source)


def _ordered(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.pointer, f.code))
