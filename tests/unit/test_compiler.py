"""Compile-time behaviour of the core: typed errors for bad grammars, limits, caching."""

from __future__ import annotations

import gc
import json
import random
import threading
import weakref
from typing import Any

import numpy as np
import pytest
from tests.unit.trees import tree_document, tree_schema

import logitgate as lg
from logitgate.grammar.ir import Alt, CharClass, Grammar, Literal, Ref, Repeat, Seq
from logitgate.masks import mask_to_bool


@pytest.fixture
def compiler() -> lg.Compiler:
    return lg.Compiler(lg.Vocabulary.from_tokens([b"a", b"b", b"c"]))


def test_left_recursion_is_rejected_with_the_cycle(compiler: lg.Compiler) -> None:
    text = 'root ::= expr\nexpr ::= term | expr "+" term\nterm ::= "a"\n'
    with pytest.raises(lg.GrammarError) as e:
        compiler.compile_ebnf(text)
    assert e.value.code == "left-recursion" and e.value.rule == "expr"
    assert "expr -> expr" in str(e.value)


def test_hidden_left_recursion_through_nullable_rules(compiler: lg.Compiler) -> None:
    text = 'root ::= opt root "a" | "b"\nopt ::= "c"?\n'
    with pytest.raises(lg.GrammarError) as e:
        compiler.compile_ebnf(text)
    assert e.value.code == "left-recursion"


def test_right_recursion_is_fine(compiler: lg.Compiler) -> None:
    g = compiler.compile_ebnf('root ::= "a" root | "b"\n')
    assert g.matcher().accept_bytes(b"aab")


def test_empty_language(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.GrammarError) as e:
        compiler.compile_ebnf('root ::= "a" root\n')
    assert e.value.code == "empty-language"
    with pytest.raises(lg.GrammarError):
        compiler.compile_grammar(Grammar({"root": Alt(())}))


def test_unproductive_alternatives_are_pruned_exactly(compiler: lg.Compiler) -> None:
    # `loop` never ends, so "c..." can never complete: "c" must not be allowed at all.
    g = compiler.compile_ebnf('root ::= "a" | loop\nloop ::= "c" loop\n')
    m = g.matcher()
    assert not m.accept_bytes(b"c")
    assert m.accept_bytes(b"a") and m.is_complete()


@pytest.mark.parametrize(
    "grammar",
    [
        # "ab" leads only into `loop`, which never ends; "ac" ends. Determinized, both branches
        # share the state after "a": its edge on "b" must be pruned there.
        Grammar(
            {
                "root": Alt((Seq((Literal(b"ab"), Ref("loop"))), Literal(b"ac"))),
                "loop": Seq((Literal(b"x"), Ref("loop"))),
            }
        ),
        # A dead branch through an empty class: "ab" then "x" leads nowhere.
        Grammar({"root": Alt((Seq((Literal(b"abx"), CharClass(()))), Literal(b"ac")))}),
    ],
)
def test_dead_branches_merged_by_determinization_are_pruned(grammar: Grammar) -> None:
    tokens = [b"a", b"b", b"c", b"ab", b"ac", b"x"]
    vocab = lg.Vocabulary.from_tokens(tokens)
    g = lg.Compiler(vocab).compile_grammar(grammar)
    bits = lg.allocate_mask(vocab)

    def allowed(m: lg.Matcher) -> set[bytes]:
        m.fill_mask(bits, row=0)
        return {tokens[i] for i in np.flatnonzero(mask_to_bool(bits[0], vocab.size))}

    m = g.matcher()
    assert allowed(m) == {b"a", b"ac"}
    assert m.accept_bytes(b"a")
    assert allowed(m) == {b"c"}
    assert not g.matcher().accept_bytes(b"ab")
    assert g.matcher().accept_bytes(b"ac")


def test_automaton_size_limit() -> None:
    c = lg.Compiler(lg.Vocabulary.from_tokens([b"a"]), limits=lg.Limits(max_automaton_states=1000))
    with pytest.raises(lg.LimitExceeded) as e:
        c.compile_regex("(a{100}){100}")
    assert e.value.limit == "max_automaton_states"


def test_repeat_limit(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.LimitExceeded) as e:
        compiler.compile_grammar(Grammar({"root": Repeat(Literal(b"a"), 0, 10**6)}))
    assert e.value.limit == "max_repeat"


def test_deep_ir_nesting(compiler: lg.Compiler) -> None:
    node: Seq | Literal = Literal(b"a")
    for _ in range(500):
        node = Seq((node, Literal(b"b")))
    with pytest.raises(lg.LimitExceeded) as e:
        compiler.compile_grammar(Grammar({"root": node}))
    assert e.value.limit == "max_nesting"


def test_undefined_rule_in_ir(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.GrammarError) as e:
        compiler.compile_grammar(Grammar({"root": Ref("missing")}))
    assert e.value.code == "undefined-rule"


def test_choice_errors(compiler: lg.Compiler) -> None:
    with pytest.raises(lg.GrammarError):
        compiler.compile_choice([])
    with pytest.raises(lg.GrammarError):
        compiler.compile_choice("yes")  # a string, not a list


def test_sources_of_the_wrong_type_are_typed_errors(compiler: lg.Compiler) -> None:
    for compile_text in (compiler.compile_ebnf, compiler.compile_regex):
        for bad in (b'root ::= "a"', None, 3):
            with pytest.raises(lg.GrammarError) as e:
                compile_text(bad)  # type: ignore[arg-type]
            assert e.value.code == "source-type" and type(bad).__name__ in str(e.value)
    for bad_schema in (None, 3, [1]):
        with pytest.raises(lg.SchemaError) as s:
            compiler.compile_json_schema(bad_schema)  # type: ignore[arg-type]
        assert s.value.code == "schema-type" and type(bad_schema).__name__ in str(s.value)
    with pytest.raises(lg.SchemaError) as s:
        compiler.compile_json_schema(b'{"type": "string", "const": "\xff"}')
    assert s.value.code == "schema-json" and "UTF-8" in str(s.value)
    assert compiler.compile_json_schema(b'{"const": "a"}').matcher().accept_bytes(b'"a"')  # UTF-8 text is fine


def test_cache_returns_same_object_and_is_thread_safe(compiler: lg.Compiler) -> None:
    results: list[lg.CompiledGrammar] = []

    def work() -> None:
        results.append(compiler.compile_regex("[ab]+c"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(r) for r in results[1:]} | {id(compiler.compile_regex("[ab]+c"))}) == 1


BYTE_VOCAB = [bytes([i]) for i in range(256)]


def test_compiling_an_input_again_skips_its_frontend(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a cache_dir too: the same text or JSON data with the same options finds its
    # grammar in memory, details included, without lowering it again.
    import logitgate.frontends.json_schema as frontend
    import logitgate.frontends.regex as regex_frontend

    compiler = lg.Compiler(lg.Vocabulary.from_tokens(BYTE_VOCAB))
    unique = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    text = '{"type": "object", "properties": {"a": {"type": "string"}}}'
    a = compiler.compile_json_schema(unique, lenient=True)
    b = compiler.compile_json_schema(text)
    r = compiler.compile_regex("[ab]+c")
    assert a.dropped and a.rule_pointers

    def no_frontend(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the frontend ran")

    monkeypatch.setattr(frontend, "schema_to_grammar", no_frontend)
    monkeypatch.setattr(regex_frontend, "parse_regex", no_frontend)
    a2 = compiler.compile_json_schema(unique, lenient=True)
    assert a2._core is a._core and (a2.dropped, a2.rule_pointers) == (a.dropped, a.rule_pointers)
    assert compiler.compile_json_schema(text)._core is b._core
    assert compiler.compile_regex("[ab]+c") is r
    info = compiler.cache_info()
    assert (info.hits, info.misses) == (3, 3)
    # Options, other text, data that is not plain JSON (a tuple), and text and data that spell
    # each other (the two forms of key never meet) run the frontend.
    for again in (
        lambda: compiler.compile_json_schema(unique),
        lambda: compiler.compile_json_schema(text + " "),
        lambda: compiler.compile_json_schema(text, whitespace="compact"),
        lambda: compiler.compile_json_schema(json.loads(text)),
        lambda: compiler.compile_json_schema(json.dumps(unique, separators=(",", ":")), lenient=True),
        lambda: compiler.compile_json_schema({"enum": ("x",)}),
        lambda: compiler.compile_regex("[ab]+d"),
    ):
        with pytest.raises(AssertionError, match="the frontend ran"):
            again()
    # With the cache off, nothing is found again.
    monkeypatch.undo()
    off = lg.Compiler(lg.Vocabulary.from_tokens(BYTE_VOCAB), cache_size=0)
    off.compile_json_schema(text)
    monkeypatch.setattr(frontend, "schema_to_grammar", no_frontend)
    with pytest.raises(AssertionError, match="the frontend ran"):
        off.compile_json_schema(text)


def test_memory_bytes_counts_the_automaton_and_what_matchers_build() -> None:
    compiler = lg.Compiler(lg.Vocabulary.from_tokens(BYTE_VOCAB), cache_size=0)
    small, large = compiler.compile_regex(".{0,1000}"), compiler.compile_regex(".{0,10000}")
    assert large.num_states > 9 * small.num_states
    # Every state holds edge lists and flags: far more than 100 bytes (it was 11 KB in all).
    assert large.memory_bytes > 100 * large.num_states
    assert large.memory_bytes > 8 * small.memory_bytes
    g = compiler.compile_regex("[a-z]{0,400}")
    before = g.memory_bytes
    m, bits = g.matcher(), lg.allocate_mask(g.vocab)
    for _ in range(400):  # a configuration per position, each mask walked and memoized
        m.fill_mask(bits)
        m.fill_mask(bits)
        assert m.accept(ord("a"))
    assert g._core.num_configurations > 400
    assert g.memory_bytes - before > 400 * len(bits[0]) * 4  # the memoized masks at least


def test_cache_is_bounded_by_bytes() -> None:
    vocab = lg.Vocabulary.from_tokens(BYTE_VOCAB)
    probe = lg.Compiler(vocab).compile_regex("a{1}").memory_bytes
    compiler = lg.Compiler(vocab, cache_bytes=int(2.5 * probe))
    first = [compiler.compile_regex(f"a{{{i}}}") for i in range(1, 4)]
    assert compiler.compile_regex("a{3}") is first[2] and compiler.compile_regex("a{2}") is first[1]
    assert compiler.cached_bytes <= int(2.5 * probe)
    dropped = weakref.ref(first[0])
    del first
    gc.collect()
    assert dropped() is None  # the least recently used went, and nothing else held it
    big = weakref.ref(compiler.compile_regex(".{0,2000}"))  # larger than the bound alone
    gc.collect()
    assert big() is None
    with pytest.raises(lg.UsageError):
        lg.Compiler(vocab, cache_bytes=-1)


def test_cache_count_bound_still_holds() -> None:
    compiler = lg.Compiler(lg.Vocabulary.from_tokens(BYTE_VOCAB), cache_size=2)
    a = compiler.compile_regex("a")
    compiler.compile_regex("b")
    compiler.compile_regex("c")
    assert compiler.compile_regex("a") is not a and len(compiler._cache) == 2


def test_to_ebnf_round_trips(compiler: lg.Compiler) -> None:
    g = compiler.compile_ebnf('root ::= "a" [b-c]{2,3} item*\nitem ::= "a" | "b"\n')
    again = compiler.compile_ebnf(g.to_ebnf())
    assert dict(again.grammar.rules) == dict(g.grammar.rules)


_TREE_SCHEMA = tree_schema(1500)


def test_configuration_budget_is_per_request_not_per_grammar() -> None:
    # One compiled grammar (the compiler's cache hands out the same one) serving requests of
    # growing depth: together they build far more than max_configurations parser
    # configurations (with the default limits the store filled after about 80 requests, and
    # every later request failed). Full stores are replaced; requests in flight move over.
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[256])
    compiler = lg.Compiler(vocab)
    rng = random.Random(0)
    in_flight = []
    for depth in range(130):
        g = compiler.compile_json_schema(_TREE_SCHEMA)
        m = g.matcher()
        doc = tree_document(depth, rng)
        assert m.accept_bytes(doc[:-1]), depth
        in_flight.append((m, doc[-1:]))
        if len(in_flight) > 20:
            old, rest = in_flight.pop(0)
            assert old.accept_bytes(rest) and old.is_complete() and old.accept(256)
    assert compiler.compile_json_schema(_TREE_SCHEMA)._core is g._core  # the cached grammar
    bits = lg.allocate_mask(vocab)
    for m, rest in in_flight:
        m.fill_mask(bits)
        assert m.accept_bytes(rest) and m.is_complete()
        m.rollback(1)
        assert m.accept_bytes(rest) and m.accept(256)


def test_one_request_past_max_configurations_fails_alone() -> None:
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[256])
    compiler = lg.Compiler(vocab, limits=lg.Limits(max_configurations=2_000))
    deep = tree_document(60, random.Random(0))
    with pytest.raises(lg.LimitExceeded) as e:
        compiler.compile_json_schema(_TREE_SCHEMA).matcher().accept_bytes(deep)
    assert e.value.limit == "max_configurations" and e.value.value == 2_000
    for _ in range(3):
        m = compiler.compile_json_schema(_TREE_SCHEMA).matcher()
        assert m.accept_bytes(b'{"label":"a","children":[]}') and m.is_complete()


def test_limits_cross_to_the_core_by_name() -> None:
    # The core reads its limits by field name: every Limits field is either passed or the
    # frontends' own, and a dict missing a field or holding an unknown one is refused by name.
    from dataclasses import fields

    from logitgate import _core
    from logitgate.compiler import CORE_LIMIT_FIELDS, _limits_forms

    assert {f.name for f in fields(lg.Limits)} == {*CORE_LIMIT_FIELDS, "max_source_bytes"}
    limits = lg.Limits(max_stack_depth=7, mask_cache_entries=9)
    _, named = _limits_forms(limits)
    assert named["max_stack_depth"] == 7 and named["mask_cache_entries"] == 9
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[256])
    deep = "[" * 40 + "]" * 40  # nests rules far deeper than 7: the core got max_stack_depth itself
    for lim, ok in ((lg.Limits(), True), (limits, False)):
        m = lg.Compiler(vocab, limits=lim).compile_json_schema({}).matcher()
        assert (bool(m.accept_bytes(deep.encode())) and bool(m.is_complete())) == ok
    missing = {k: v for k, v in named.items() if k != "max_parse_heads"}
    with pytest.raises(lg.UsageError, match="missing field max_parse_heads"):
        _core.compile(vocab._core, b"", [], missing)
    with pytest.raises(lg.UsageError, match="unknown field max_heads"):
        _core.compile(vocab._core, b"", [], {**named, "max_heads": 1})
