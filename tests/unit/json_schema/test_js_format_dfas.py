"""The formats lowered as their minimal DFA (formats.AUTOMATON_FORMATS): the stored DFAs are the
regexes' own, the grammar is the regex's language in every JSON spelling, and its rules are
built once per process."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.unit.json_schema.acceptance import accepts

import logitgate as lg
from logitgate.frontends.json_schema import formats, schema_to_grammar
from logitgate.frontends.json_schema.length_rules import format_contents
from logitgate.frontends.json_schema.pattern_dfa import minimal_dfa
from logitgate.frontends.json_schema.patterns import _Nfa
from logitgate.grammar.ir import Ref

TABLES = Path(formats.__file__).with_name("format_dfa_tables.py")


def _vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens([bytes([b]) for b in range(256)] + [None], eos_ids=[256])


def test_the_stored_dfas_are_the_regexes_minimal_dfas() -> None:
    # What `make format-dfas` would write is what is committed, and it decodes to the minimal
    # DFA built from each regex (so a regex edited without regenerating fails here).
    assert TABLES.read_text() == formats.dfa_tables_source()
    for fmt in sorted(formats.AUTOMATON_FORMATS):
        nfa = _Nfa.build(formats._format_node(fmt, lg.Limits()), lg.Limits())
        assert nfa is not None
        assert formats.stored_dfa(fmt) == minimal_dfa([nfa]), fmt


@pytest.mark.parametrize("fmt", sorted(formats.AUTOMATON_FORMATS))
def test_an_automaton_format_is_its_regexs_language(fmt: str) -> None:
    g = lg.Compiler(_vocab()).compile_json_schema({"type": "string", "format": fmt})
    regex = re.compile(formats._FORMATS[fmt])
    texts = [
        "http://example.com/a?b=c#d",
        "urn:isbn:0451450523",
        "//host/path",
        "/a/b",
        "a/b?c",
        "",
        "::1",
        "2001:db8::8a2e:370:7334",
        "1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7:8:9",
        "::ffff:192.0.2.128",
        "http://[::1]:80/",
        "http://[::1",
        "h ttp://x",
        "ht%zz://x",
        "x:%41%4",
        "ü:x",
    ]
    for text in texts:
        assert accepts(g, text) == bool(regex.fullmatch(text)), (fmt, text)


def test_an_automaton_format_under_a_length_bound_is_its_stored_dfa_counted() -> None:
    # Under maxLength the length product is built from the stored DFA (formats.stored_dfa).
    g = lg.Compiler(_vocab()).compile_json_schema({"type": "string", "format": "ipv6", "maxLength": 10})
    regex = re.compile(formats._FORMATS["ipv6"])
    for text in ["::1", "1::2", "a:b:c:d::1", "2001:db8::1", "1:2:3:4:5:6:7:8", ":::", "::g"]:
        assert accepts(g, text) == (bool(regex.fullmatch(text)) and len(text) <= 10), text


def test_every_character_of_an_automaton_format_accepts_every_spelling() -> None:
    # Each move is a class, so a literal character may be escaped too (PHP writes `\/`); a
    # regex node's literal characters accept their json.dumps spellings only (docs/json_schema.md).
    g = lg.Compiler(_vocab()).compile_json_schema({"type": "string", "format": "uri"})
    for text in ['"http:\\/\\/a.b\\/c"', '"http\\u003a//a.b/c"', '"http://a.b/c"']:
        assert json.loads(text) == "http://a.b/c"
        m = g.matcher()
        assert m.accept_bytes(text.encode()) and m.is_complete(), text
    m = g.matcher()
    assert not m.accept_bytes(b'"http:\\/\\/a b"')


def test_a_formats_contents_are_built_once_per_process() -> None:
    # A lone format's rules (and claims, where a wide repetition is chained) are built once and
    # added to each lowering's table: every grammar holds the same rule objects.
    schema = {
        "type": "object",
        "properties": {
            "a": {"format": "uri"},
            "b": {"type": "string", "format": "uri"},
            "c": {"type": "string", "format": "date-time"},
            "d": {"type": "string", "format": "hostname"},
        },
    }
    first, _ = schema_to_grammar(schema, limits=lg.Limits())
    again, _ = schema_to_grammar(schema, limits=lg.Limits())
    uri = format_contents("uri", lg.Limits())
    assert uri.node == Ref("fmt_uri_0") and "fmt_uri_0" in uri.rules and len(uri.rules) > 100
    for fmt in ("uri", "date-time", "hostname"):
        shared = format_contents(fmt, lg.Limits())
        assert shared is format_contents(fmt, lg.Limits())
        for grammar in (first, again):
            assert all(grammar.rules[name] is node for name, node in shared.rules.items()), fmt
            assert set(shared.stand_ins) <= set(grammar.stand_ins), fmt
    assert formats.format_automata(formats._format_node("uri", lg.Limits())).dfa is formats.stored_dfa("uri")


def test_a_pattern_beside_an_automaton_format_ends_in_the_formats_shared_states() -> None:
    # Derivatives intersect the pattern with uri until only uri constrains the rest; that rest
    # is the rule of the DFA state the text so far reached, not uri's regex remainder.
    for pattern in ["^https?://", "^[a-z]+://[a-z]+\\.example\\.org/", "\\.com$"]:
        schema = {"type": "string", "format": "uri", "pattern": pattern}
        grammar, _ = schema_to_grammar(schema, limits=lg.Limits())
        shared = format_contents("uri", lg.Limits())
        uses_states = all(grammar.rules.get(name) is node for name, node in shared.rules.items())
        assert uses_states == (pattern != "\\.com$"), pattern  # (a suffix pattern never drops out)
        g = lg.Compiler(_vocab()).compile_json_schema(schema)
        uri, searched = re.compile(formats._FORMATS["uri"]), re.compile(pattern)
        for text in ["http://a.b/c", "https://x.example.org/p?q#f", "ftp://x", "http://a.com", "http//a", "HTTP://A"]:
            assert accepts(g, text) == bool(uri.fullmatch(text) and searched.search(text)), (pattern, text)
    g = lg.Compiler(_vocab()).compile_json_schema({"type": "string", "format": "uri", "pattern": "^https?://"})
    m = g.matcher()
    assert m.accept_bytes(b'"https://a.b\\/c"') and m.is_complete()
