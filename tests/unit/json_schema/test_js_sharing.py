"""Sub-lowerings shared within one compile: equal subschemas (same JSON text, same base URI)
lower to one rule; patterns and formats are lowered once. Sharing changes rule names only,
never the language."""

from __future__ import annotations

import copy
import json
from typing import Any

import logitgate as lg
from logitgate.frontends.json_schema import formats, schema_to_grammar

_ADDRESS = {
    "type": "object",
    "properties": {
        "street": {"type": "string", "minLength": 1},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
    },
    "required": ["street"],
}


def _rules(schema: Any) -> dict[str, Any]:
    grammar, _ = schema_to_grammar(schema, limits=lg.Limits())
    return grammar.rules


def _tokens_accept(compiled: lg.CompiledGrammar, text: str) -> bool:
    m = compiled.matcher()
    return bool(m.accept_bytes(text.encode())) and bool(m.is_complete())


def _vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def test_equal_subschemas_lower_to_one_rule() -> None:
    one = {"type": "object", "properties": {"home": _ADDRESS}}
    two = {"type": "object", "properties": {"home": _ADDRESS, "work": copy.deepcopy(_ADDRESS)}}
    # The second copy adds its member to the object's position rules, and no rule of its own.
    assert len(_rules(two)) - len(_rules(one)) <= 3
    differing = copy.deepcopy(two)
    differing["properties"]["work"]["properties"]["street"]["minLength"] = 2
    assert len(_rules(differing)) > len(_rules(two))


def test_shared_rules_keep_the_language() -> None:
    schema = {"type": "object", "properties": {"home": _ADDRESS, "work": copy.deepcopy(_ADDRESS)}}
    schema["properties"]["work"]["required"] = ["street", "tags"]  # differs: its own rule
    g = lg.Compiler(_vocab()).compile_json_schema(schema, whitespace="compact")
    ok = {"home": {"street": "a"}, "work": {"street": "b", "tags": ["x"]}}
    assert _tokens_accept(g, json.dumps(ok, separators=(",", ":")))
    for bad in (
        {"home": {"street": ""}},  # minLength in the first copy
        {"work": {"street": "b"}},  # tags required in the second only
        {"home": {"street": "a", "tags": ["X"]}},  # the pattern of the shared items
    ):
        assert not _tokens_accept(g, json.dumps(bad, separators=(",", ":"))), bad


def test_equal_text_under_another_base_is_not_shared() -> None:
    # The same "$ref": "#/$defs/x" means two definitions under two resources. (Copies: the
    # index tells schema objects apart by identity, as parsed JSON text never shares them.)
    def sub() -> dict[str, Any]:  # "w" has the same text in both: only its base differs
        return {"type": "object", "properties": {"w": {"type": "object", "properties": {"v": {"$ref": "#/$defs/x"}}}}}

    schema = {
        "type": "object",
        "properties": {
            "a": {"$id": "https://example.com/a.json", "$defs": {"x": {"type": "integer"}}, **sub()},
            "b": {"$id": "https://example.com/b.json", "$defs": {"x": {"type": "string"}}, **sub()},
        },
    }
    g = lg.Compiler(_vocab()).compile_json_schema(schema, whitespace="compact")
    assert _tokens_accept(g, '{"a":{"w":{"v":1}},"b":{"w":{"v":"s"}}}')
    assert not _tokens_accept(g, '{"a":{"w":{"v":"s"}}}')
    assert not _tokens_accept(g, '{"b":{"w":{"v":1}}}')


def test_a_format_is_lowered_once_per_process() -> None:
    formats._FORMAT_NODES.clear()
    limits = lg.Limits()
    schema_to_grammar({"type": "string", "format": "date"}, limits=limits)
    node = formats._FORMAT_NODES[("date", limits)]
    schema_to_grammar({"type": "string", "format": "date", "maxLength": 20}, limits=limits)
    assert formats._FORMAT_NODES[("date", limits)] is node


def test_a_formats_automata_are_built_once_per_process(monkeypatch: Any) -> None:
    # A format under a length bound needs its Thompson NFA (email, under a bound too long for
    # its DFA's product), or its minimal DFA and that of its counts unbounded (hostname): built
    # for the first lowering that asks, then taken from formats.format_automata by every later
    # one, with the same grammar.
    from logitgate.frontends.json_schema import pattern_dfa, patterns

    formats._FORMAT_NODES.clear()
    limits = lg.Limits()
    schemas = [
        {"type": "string", "format": "email", "maxLength": 300},
        {"type": "string", "format": "hostname", "maxLength": 20},
    ]
    first = [schema_to_grammar(schema, limits=limits)[0] for schema in schemas]
    email = formats.format_automata(formats._FORMAT_NODES[("email", limits)])
    hostname = formats.format_automata(formats._FORMAT_NODES[("hostname", limits)])
    assert email is not None and hostname is not None
    assert hostname.relaxed is not hostname.node  # (its labels' wide counts)
    assert formats.format_automata(hostname.relaxed) is not None
    built: list[str] = []
    nfa_build, determinize = patterns._Nfa.build.__func__, pattern_dfa.determinize  # type: ignore[attr-defined]
    monkeypatch.setattr(patterns._Nfa, "build", classmethod(lambda cls, *a: built.append("nfa") or nfa_build(cls, *a)))
    monkeypatch.setattr(pattern_dfa, "determinize", lambda *a: built.append("dfa") or determinize(*a))
    again = [schema_to_grammar(schema, limits=limits)[0] for schema in schemas]
    assert again == first
    assert built.count("nfa") == 0
    assert built.count("dfa") == 0
    assert formats.format_automata(patterns.ANY_STRING) is None  # any other node: per lowering
