"""Compile-time behaviour of the core: typed errors for bad grammars, limits, caching."""

from __future__ import annotations

import threading

import pytest

import logitgate as lg
from logitgate.grammar.ir import Alt, Grammar, Literal, Ref, Repeat, Seq


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


def test_to_ebnf_round_trips(compiler: lg.Compiler) -> None:
    g = compiler.compile_ebnf('root ::= "a" [b-c]{2,3} item*\nitem ::= "a" | "b"\n')
    again = compiler.compile_ebnf(g.to_ebnf())
    assert dict(again.grammar.rules) == dict(g.grammar.rules)
