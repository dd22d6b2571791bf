"""The grammar backend against SGLang's own classes and code, without an engine: the interface
SGLang's base classes define is implemented, masks go into real torch tensors of SGLang's
layout through SGLang's own batch code, and accept / rollback / copy / terminate / jump-forward
behave as SGLang's scheduler expects, on a small vocabulary."""

from __future__ import annotations

import inspect
import json
from typing import Any

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.sglang

# ids: 0 "a", 1 "b", 2 "ab", 3 "1", 4 "2", 5 "x", 6 EOS, 7 another end token (a model's own EOS)
TOKENS = [b"a", b"b", b"ab", b"1", b"2", b"x", None, None]
EOS, EOS2 = 6, 7
WIDTH = 40  # wider than the vocabulary, like a padded model head


def grammar(kind: str, spec: Any) -> Any:
    import logitgate as lg
    from logitgate.integrations.sglang import LogitgateGrammar

    vocab = lg.Vocabulary.from_tokens(TOKENS, eos_ids=[EOS, EOS2], logits_width=WIDTH)
    compiler = lg.Compiler(vocab)
    compiled = {"regex": compiler.compile_regex, "ebnf": compiler.compile_ebnf}[kind](spec)
    return LogitgateGrammar(compiled, (kind, spec))


def allowed(mask: torch.Tensor, row: int = 0) -> set[int]:
    bits = np.unpackbits(mask[row].numpy().view(np.uint8), bitorder="little")
    return {int(i) for i in np.nonzero(bits[:WIDTH])[0]}


def test_implements_sglang_interface() -> None:
    from sglang.srt.constrained.base_grammar_backend import BaseGrammarBackend, BaseGrammarObject

    from logitgate.integrations.sglang import LogitgateGrammar, LogitgateGrammarBackend

    assert issubclass(LogitgateGrammarBackend, BaseGrammarBackend)
    assert isinstance(grammar("regex", "a+b"), BaseGrammarObject)
    # Every method of SGLang's base grammar object that only raises NotImplementedError is ours.
    abstract = [
        name
        for name, fn in vars(BaseGrammarObject).items()
        if callable(getattr(fn, "__func__", fn))
        and "raise NotImplementedError" in inspect.getsource(getattr(fn, "__func__", fn))
    ]
    assert {"accept_token", "rollback", "fill_vocab_mask", "apply_vocab_mask", "jump_and_retokenize"} <= set(abstract)
    for name in abstract:
        assert name in vars(LogitgateGrammar), f"LogitgateGrammar does not define {name}"
    for name in ("dispatch_json", "dispatch_regex", "dispatch_ebnf", "dispatch_structural_tag"):
        assert name in vars(LogitgateGrammarBackend), name
    # Signatures match SGLang's (names and order of the parameters).
    for name in [*abstract, "is_terminated", "copy"]:
        ours = list(inspect.signature(getattr(LogitgateGrammar, name)).parameters)
        theirs = list(inspect.signature(getattr(BaseGrammarObject, name)).parameters)
        assert ours == theirs, (name, ours, theirs)


def test_mask_layout_matches_sglang_xgrammar_buffer() -> None:
    from xgrammar import bitmask_dtype, get_bitmask_shape

    g = grammar("regex", "a+b")
    mask = g.allocate_vocab_mask(vocab_size=WIDTH, batch_size=3, device="cpu")
    assert isinstance(mask, torch.Tensor) and mask.dtype == bitmask_dtype == torch.int32
    assert tuple(mask.shape) == tuple(get_bitmask_shape(3, WIDTH))
    assert bool((mask == -1).all())  # rows SGLang leaves unfilled are unconstrained


def test_fill_batched_writes_only_listed_rows_and_apply_masks_logits() -> None:
    from sglang.srt.constrained.base_grammar_backend import GrammarRow

    from logitgate.integrations.sglang import LogitgateGrammar

    g1, g2 = grammar("regex", "a+b"), grammar("regex", "(12|x)")
    mask = g1.allocate_vocab_mask(WIDTH, 4, "cpu")
    LogitgateGrammar.fill_vocab_mask_batched([GrammarRow(0, g1), GrammarRow(2, g2)], mask)
    assert allowed(mask, 0) == {0, 2}
    assert allowed(mask, 1) == set(range(WIDTH))  # untouched
    assert allowed(mask, 2) == {3, 5}
    assert allowed(mask, 3) == set(range(WIDTH))
    moved = LogitgateGrammar.move_vocab_mask(mask, torch.device("cpu"))
    logits = torch.randn(4, WIDTH)
    before = logits.clone()
    LogitgateGrammar.apply_vocab_mask(logits, moved)
    for row in range(4):
        keep = allowed(mask, row)
        for i in range(WIDTH):
            assert logits[row, i] == (before[row, i] if i in keep else float("-inf"))
    LogitgateGrammar.reset_vocab_mask(mask)
    assert bool((mask == -1).all())


def test_sglang_batch_code_fills_and_applies_our_masks() -> None:
    """SGLang's own SamplingBatchInfo.update_regex_vocab_mask and GrammarMask.apply: rows
    without a grammar and finished grammars stay unconstrained."""
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

    g_open, g_done = grammar("regex", "a+b"), grammar("regex", "x")
    g_done.accept_token(5)
    g_done.accept_token(EOS)
    info = object.__new__(SamplingBatchInfo)
    info.grammars = [g_open, None, g_done]
    info.vocab_size = WIDTH
    info.temperatures = torch.ones(3, 1)
    info.device = "cpu"
    info.update_regex_vocab_mask()
    assert info.grammar_mask is not None
    logits = torch.zeros(3, WIDTH)
    info.grammar_mask.apply(logits)
    assert {i for i in range(WIDTH) if logits[0, i] == 0} == {0, 2}
    assert bool((logits[1] == 0).all()) and bool((logits[2] == 0).all())


def test_accept_terminate_and_end_tokens() -> None:
    g = grammar("regex", "a+b")
    mask = g.allocate_vocab_mask(WIDTH, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    assert allowed(mask) == {0, 2}  # no end token before the grammar may end
    g.accept_token(0)
    g.accept_token(1)  # "ab": complete, nothing may follow but an end token
    assert not g.is_terminated()
    g.fill_vocab_mask(mask, 0)
    assert allowed(mask) == {EOS, EOS2}
    g.accept_token(EOS2)  # the model's own EOS ends it too
    assert g.is_terminated()
    g.accept_token(3)  # after the end, SGLang's tokens are ignored (as its own backends do)
    assert g.is_terminated() and g.matcher.num_accepted == 3


def test_rejected_token_raises_value_error() -> None:
    g = grammar("regex", "a+b")
    with pytest.raises(ValueError, match="not allowed"):
        g.accept_token(1)  # "b" first
    with pytest.raises(ValueError):
        g.accept_token(EOS)  # an end token where the grammar may not end
    g.accept_token(0)  # the state is unchanged by the rejections
    assert g.matcher.num_accepted == 1


def test_rollback_undoes_tokens_and_the_end() -> None:
    g = grammar("regex", "a+b")
    for t in (0, 0, 1, EOS):
        g.accept_token(t)
    assert g.is_terminated()
    g.rollback(1)  # speculative decoding: the end token was a draft
    assert not g.is_terminated() and g.matcher.num_accepted == 3
    g.rollback(2)  # back to "a"
    mask = g.allocate_vocab_mask(WIDTH, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    assert allowed(mask) == {0, 1, 2}
    g.rollback(0)
    assert g.matcher.num_accepted == 1


def test_copy_is_a_fresh_grammar_sharing_the_compiled_one() -> None:
    g = grammar("regex", "a+b")
    g.accept_token(0)
    c = g.copy()
    assert c is not g and c.compiled is g.compiled and c.matcher.num_accepted == 0
    c.accept_token(2)
    c.accept_token(EOS)
    assert c.is_terminated() and not g.is_terminated() and g.matcher.num_accepted == 1


def test_jump_forward_string_and_retokenize() -> None:
    g = grammar("ebnf", 'root ::= "ab" [12] "xa"')
    helper = g.try_jump_forward(tokenizer=None)
    assert helper is not None
    text, state = g.jump_forward_str_state(helper)
    assert text == "ab" and state == -1
    g.jump_and_retokenize([], [0, 1], state)  # the engine spelled "ab" as "a", "b"
    assert g.try_jump_forward(None) is None  # the model chooses 1 or 2
    g.accept_token(3)
    assert g.jump_forward_str_state(g.try_jump_forward(None))[0] == "xa"
    # retokenized: "a" "b" "1" becomes "ab" "1" (common prefix none: all rolled back)
    g.jump_and_retokenize([0, 1, 3], [2, 3], -1)
    assert g.matcher.num_accepted == 2
    with pytest.raises(ValueError):
        g.jump_and_retokenize([2, 3], [2, 4, 4], -1)


def test_backend_registered_through_sglang_plugin_entry_point() -> None:
    """SGLang's own plugin loader finds the entry point and the name becomes a backend choice."""
    from importlib.metadata import entry_points

    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.plugins import GENERAL_PLUGINS_GROUP, load_plugins

    from logitgate.integrations.sglang import create_backend, register

    found = [ep for ep in entry_points(group=GENERAL_PLUGINS_GROUP) if ep.name == "logitgate"]
    assert len(found) == 1 and found[0].load() is register
    load_plugins()
    assert GRAMMAR_BACKEND_REGISTRY["logitgate"] is create_backend
    assert GRAMMAR_BACKEND_CHOICES.count("logitgate") == 1
    register()  # idempotent
    assert GRAMMAR_BACKEND_CHOICES.count("logitgate") == 1


def test_sglang_dispatch_and_cache_path(tokenizer: Any) -> None:
    """SGLang's own _init_value_dispatch / get_cached_or_future_value on the backend: good
    specs give our grammar objects, bad ones an InvalidGrammarObject with the error."""
    from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject

    from logitgate.integrations.sglang import LogitgateGrammar, LogitgateGrammarBackend

    backend = LogitgateGrammarBackend(tokenizer, 49152, [tokenizer.eos_token_id])
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    good = {
        ("json", schema),
        ("json", "$$ANY$$"),
        ("regex", r"\d+"),
        ("ebnf", 'root ::= "yes" | "no"'),
        ("structural_tag", json.dumps({"type": "structural_tag", "format": {"type": "const_string", "value": "hi"}})),
        (
            "structural_tag",
            json.dumps({"structures": [{"begin": "<f>", "schema": None, "end": "</f>"}], "triggers": ["<f>"]}),
        ),
    }
    for key in sorted(good):
        g = backend._init_value_dispatch(key, require_reasoning=False)
        assert isinstance(g, LogitgateGrammar), (key, g)
        assert g.grammar_stats.compilation_time is not None
    bad = {
        ("json", '{"type": "object"'): "Expecting",
        ("json", json.dumps({"type": "integer", "minimum": 5, "maximum": 1})): "schema",
        ("regex", "(ab"): "regex",
        ("ebnf", 'root ::= "a'): "gbnf-syntax",
        ("ebnf", "root ::= missing"): "",
        ("structural_tag", json.dumps({"type": "structural_tag", "format": {"type": "nope"}})): "structural",
        ("json", '{"type": "string", "pattern": "\\u0000"}'): "NUL",  # SGLang's own check, before ours
    }
    for key, word in bad.items():
        g = backend._init_value_dispatch(key, require_reasoning=False)
        assert isinstance(g, InvalidGrammarObject), (key, g)
        assert word.lower() in g.error_message.lower(), (key, g.error_message)
    value, hit = backend.get_cached_or_future_value(("regex", r"\d+"), require_reasoning=False)
    assert not hit
    compiled = value.result(timeout=60)
    backend.set_cache(("regex", r"\d+"), compiled.copy())
    again, hit = backend.get_cached_or_future_value(("regex", r"\d+"), require_reasoning=False)
    assert hit and isinstance(again, LogitgateGrammar) and again.grammar_stats.is_cache_hit


def _server_args(**kw: Any) -> Any:
    from types import SimpleNamespace

    base = {
        "constrained_json_disable_any_whitespace": False,
        "constrained_json_max_whitespace_cnt": None,
        "constrained_json_whitespace_pattern": None,
        "reasoning_parser": None,
        "enable_strict_thinking": False,
    }
    return SimpleNamespace(**{**base, **kw})


def test_create_backend_reads_sglang_json_options(tokenizer: Any) -> None:
    from logitgate.integrations.sglang import LogitgateGrammarBackend, create_backend

    compact = create_backend(_server_args(constrained_json_disable_any_whitespace=True), tokenizer, 49152, [2])
    assert isinstance(compact, LogitgateGrammarBackend) and compact.json_options == {"whitespace": "compact"}
    bounded = create_backend(_server_args(constrained_json_max_whitespace_cnt=2), tokenizer, 49152, None)
    assert bounded.json_options == {"whitespace": "flexible", "max_whitespace": 2}
    g = compact.dispatch_json(json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}}))
    assert g.matcher.accept_bytes(b'{"a":1}') and not compact.dispatch_json("{}").matcher.accept_bytes(b"{ }")


def test_reasoning_parser_wraps_backend_in_sglang_reasoning_wrapper(tokenizer: Any) -> None:
    """With --reasoning-parser, constraints start after the think-end token (SGLang's wrapper,
    applied by create_backend since SGLang skips it for registered backends)."""
    import copy

    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend, ReasonerGrammarObject

    from logitgate.integrations.sglang import create_backend

    tok = copy.deepcopy(tokenizer)
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    width = len(tok)
    backend = create_backend(_server_args(reasoning_parser="deepseek-r1"), tok, width, [2])
    assert isinstance(backend, ReasonerGrammarBackend)
    g = backend._init_value_dispatch(("regex", r"\d\d"), True)
    assert isinstance(g, ReasonerGrammarObject)
    mask = g.allocate_vocab_mask(width, 1, "cpu")
    thinking = tok.encode("Let me think", add_special_tokens=False)
    for t in thinking:
        g.accept_token(t)  # free text while thinking
    g.fill_vocab_mask(mask, 0)
    assert bool((mask == -1).all())
    g.accept_token(tok.convert_tokens_to_ids("</think>"))
    g.fill_vocab_mask(mask, 0)
    bits = np.unpackbits(mask[0].numpy().view(np.uint8), bitorder="little")[:width]
    assert {tok.decode([int(i)]) for i in np.nonzero(bits)[0]} == set("0123456789")
