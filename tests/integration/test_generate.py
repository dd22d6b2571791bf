"""End-to-end generation with the embedded SmolLM2-135M-Instruct model (CPU).

One model per session. Greedy decoding everywhere (deterministic), short outputs: the default
suite stays fast; the 20-schema run is marked slow.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import logitgate as lg

pytest.importorskip("torch")
pytest.importorskip("transformers")

ORDER_GBNF = r"""
root   ::= "{\"order_id\":" int ",\"status\":" status ",\"note\":\"ok\"}"
int    ::= [1-9] [0-9]{0,5}
status ::= "\"pending\"" | "\"shipped\"" | "\"delivered\"" | "\"cancelled\""
"""


@pytest.fixture(scope="session")
def vocab(smol: tuple[Any, Any]) -> lg.Vocabulary:
    from logitgate.integrations.transformers import vocabulary_for

    return vocabulary_for(*smol)


def _needs_json_schema() -> None:
    pytest.importorskip("logitgate.frontends.json_schema", reason="JSON Schema frontend not built yet")


# -- import hygiene ---------------------------------------------------------------------------


def test_import_logitgate_does_not_import_torch() -> None:
    code = (
        "import sys, logitgate as lg\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
        "assert 'logitgate.integrations.transformers' not in sys.modules\n"
        "assert callable(lg.generate) and 'torch' in sys.modules\n"
        "from logitgate.generation import GenerationResult\n"
        "assert callable(lg.generate) and lg.GenerationResult is GenerationResult\n"
    )
    subprocess.run([sys.executable, "-W", "ignore", "-c", code], check=True, timeout=120)


def test_vocabulary_is_sized_by_the_logits(smol: tuple[Any, Any], vocab: lg.Vocabulary) -> None:
    from logitgate.integrations.transformers import logits_width, vocabulary_for

    model, tok = smol
    assert vocab.size == logits_width(model) == model.get_output_embeddings().weight.shape[0]
    assert vocabulary_for(model, tok) is vocab  # cached
    assert tok.eos_token_id in vocab.eos_ids


# -- generate() -------------------------------------------------------------------------------


def test_generate_regex(smol: tuple[Any, Any]) -> None:
    pattern = r"[0-9]{3}-[0-9]{3}-[0-9]{4}"
    r = lg.generate(*smol, "Write a US phone number.", regex=pattern, max_tokens=30)
    assert re.fullmatch(pattern, r.text), r.text
    assert r.finish_reason == "stop" and r.complete
    assert r.value is None and r.kind == "text"
    assert r.prompt_tokens > 5 and r.completion_tokens >= 4
    t = r.timings
    assert t.compile_s >= 0 and t.first_token_s > 0 and t.per_token_s > 0 and t.model_s_total > 0
    assert 0 < t.mask_s_total < t.model_s_total


def test_generate_with_a_float32_model(smol: tuple[Any, Any]) -> None:
    # float32 logits come out of inference mode as they are (no dtype conversion makes a copy);
    # masking them in place raised "Inplace update to inference tensor outside InferenceMode".
    import copy

    import torch

    model, tok = smol
    model32 = copy.deepcopy(model).to(torch.float32)
    r = lg.generate(model32, tok, "Write a US phone number.", regex=r"[0-9]{3}-[0-9]{3}-[0-9]{4}", max_tokens=30)
    assert re.fullmatch(r"[0-9]{3}-[0-9]{3}-[0-9]{4}", r.text), r.text
    assert r.complete


def test_generate_choice_and_messages(smol: tuple[Any, Any]) -> None:
    choices = ["positive", "negative", "neutral"]
    msgs = [
        {"role": "system", "content": "Classify the sentiment."},
        {"role": "user", "content": "I love this phone, it is wonderful!"},
    ]
    r = lg.generate(*smol, msgs, choice=choices, max_tokens=10)
    assert r.text in choices and r.complete
    # The grammar admits nothing after a full choice: generation stops without asking for EOS.
    assert r.forward_passes <= r.completion_tokens


def test_generate_ebnf_jump_forward_saves_passes(smol: tuple[Any, Any]) -> None:
    r = lg.generate(*smol, "Order 4821 was shipped. Give it as JSON.", ebnf=ORDER_GBNF, max_tokens=60, trace=True)
    doc = json.loads(r.text)
    assert doc["status"] in {"pending", "shipped", "delivered", "cancelled"} and doc["note"] == "ok"
    assert r.forced_tokens > 0
    assert r.forward_passes < r.completion_tokens
    assert r.forward_passes_saved == r.completion_tokens - r.forward_passes
    assert sum(s.forced for s in r.trace) == r.forced_tokens
    assert all(s.allowed > 0 for s in r.trace if not s.forced)
    assert "".join(s.text for s in r.trace) == r.text

    slow = lg.generate(
        *smol, "Order 4821 was shipped. Give it as JSON.", ebnf=ORDER_GBNF, max_tokens=60, jump_forward=False
    )
    json.loads(slow.text)
    assert slow.forced_tokens == 0 and slow.forward_passes > r.forward_passes


def test_forced_tokens_are_canonical_and_hold_back(smol: tuple[Any, Any], vocab: lg.Vocabulary) -> None:
    from logitgate.generation import forced_tokens

    _, tok = smol
    c = lg.Compiler(vocab)
    # Forced text that ends where the model chooses next: the last token(s) are held back when a
    # longer vocabulary token could span the boundary (here ' "' / ' "x...' style tokens).
    m = c.compile_ebnf('root ::= "{\\"name\\": " [a-z]+ "}"').matcher()
    ids, replaced = forced_tokens(m, vocab, tok, budget=50)
    assert not replaced
    full = tok.encode('{"name": ', add_special_tokens=False)
    assert ids == full[: len(ids)] and 0 < len(ids) < len(full)
    assert vocab.table.decode(ids) + m.forced_bytes() == b'{"name": '
    # A forced ending that nothing may follow is taken whole.
    m = c.compile_choice(["supercalifragilistic"]).matcher()
    ids, _ = forced_tokens(m, vocab, tok, budget=50)
    assert ids == tok.encode("supercalifragilistic", add_special_tokens=False) and m.is_terminated()
    # The budget caps it.
    m = c.compile_choice(["supercalifragilistic"]).matcher()
    ids, _ = forced_tokens(m, vocab, tok, budget=1)
    assert len(ids) == 1 and m.num_accepted == 1


def test_forced_tokens_merge_with_the_sampled_token(smol: tuple[Any, Any], vocab: lg.Vocabulary) -> None:
    from logitgate.generation import forced_tokens

    _, tok = smol
    m = lg.Compiler(vocab).compile_ebnf('root ::= [a-z] "ello world" [0-9]').matcher()
    h = tok.encode("h", add_special_tokens=False)
    assert len(h) == 1 and m.accept(h[0])
    ids, replaced = forced_tokens(m, vocab, tok, budget=50, last=h[0])
    canonical = tok.encode("hello world", add_special_tokens=False)
    assert replaced and ids == canonical[: len(ids)] and ids[0] != h[0]
    assert vocab.table.decode(ids) + m.forced_bytes() == b"hello world"


def test_sampling_is_seeded_and_masked(smol: tuple[Any, Any]) -> None:
    kw: dict[str, Any] = {"regex": r"[a-z]{2,8}( [a-z]{2,8}){1,3}", "max_tokens": 30, "temperature": 1.3, "top_p": 0.9}
    a = lg.generate(*smol, "Say something.", seed=7, **kw)
    b = lg.generate(*smol, "Say something.", seed=7, **kw)
    assert a.text == b.text and a.token_ids == b.token_ids
    assert re.fullmatch(kw["regex"], a.text), a.text


def test_truncation_is_typed(smol: tuple[Any, Any]) -> None:
    r = lg.generate(*smol, "Write a long word.", regex=r"[a-z]{60}", max_tokens=3)
    assert r.finish_reason == "length" and not r.complete
    assert r.completion_tokens == 3
    with pytest.raises(lg.TruncatedOutput) as e:
        _ = r.value
    assert e.value.text == r.text and re.fullmatch(r"[a-z]+", r.text)
    assert e.value.code == "truncated" and isinstance(e.value, lg.LogitgateError)
    with pytest.raises(lg.TruncatedOutput):
        lg.generate(*smol, "Write a long word.", regex=r"[a-z]{60}", max_tokens=3, parse=True)


def test_unconstrained_with_stop(smol: tuple[Any, Any]) -> None:
    r = lg.generate(*smol, "Count from 1 to 20 separated by commas.", max_tokens=40, stop=["5"])
    assert "5" not in r.text and r.finish_reason == "stop"
    assert r.kind == "none" and r.forced_tokens == 0 and r.timings.mask_s_total == 0


def test_rejects_two_structures(smol: tuple[Any, Any]) -> None:
    with pytest.raises(ValueError, match="at most one"):
        lg.generate(*smol, "x", regex="a", choice=["a"])
    with pytest.raises(lg.GrammarError):
        lg.generate(*smol, "x", ebnf="root ::= undefined_rule")


def test_generate_json_schema(smol: tuple[Any, Any]) -> None:
    _needs_json_schema()
    jsonschema = pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    r = lg.generate(*smol, "John is 31 years old. Give his name and age as JSON.", json_schema=schema, max_tokens=60)
    jsonschema.validate(r.value, schema)
    assert r.kind == "json" and r.forward_passes < r.completion_tokens

    t = lg.generate(*smol, "John is 31 years old.", json_schema=schema, max_tokens=2)
    assert t.finish_reason == "length"
    with pytest.raises(lg.TruncatedOutput):
        _ = t.value


def test_text_stream_sends_whole_characters_and_nothing_a_stop_string_cuts() -> None:
    from logitgate.generation import _TextStream

    pieces: list[str] = []
    stream = _TextStream(pieces.append, ["5", "STOP"])
    data = b""
    for chunk in [b"1, 2,", b" 3, 4", b", 15, 16", b" caf\xc3", b"\xa9"]:
        data += chunk
        stream.update(data)
    # "5" arrived inside a token: nothing from it on is sent; "STOP" holds back 3 characters.
    assert "".join(pieces) == "1, 2, 3, 4, 1"
    stream.finish("1, 2, 3, 4, 1")  # the text, cut before the stop string
    assert "".join(pieces) == "1, 2, 3, 4, 1"
    pieces.clear()
    stream = _TextStream(pieces.append, None)
    for data in [b"caf", b"caf\xc3", b"caf\xc3\xa9"]:  # a character split across tokens
        stream.update(data)
    assert pieces == ["caf", "é"]


@pytest.mark.parametrize("top_p", [0.0, 1e-9, 0.5])
def test_top_p_keeps_at_least_the_most_likely_token(top_p: float) -> None:
    import torch

    from logitgate.generation import _sample

    logits = torch.tensor([0.0, 3.0, 1.0, float("-inf")])
    gen = torch.Generator().manual_seed(0)
    picks = {_sample(logits, 1.0, top_p, gen) for _ in range(50)}
    assert picks == {1} if top_p < 0.8 else picks <= {0, 1, 2}


def test_top_p_zero_samples_greedily(smol: tuple[Any, Any]) -> None:
    """top_p=0 keeps the most likely token (it used to leave none: torch's "invalid
    multinomial distribution")."""
    kw: dict[str, Any] = {"regex": r"[a-z]{2,8}( [a-z]{2,8}){1,3}", "max_tokens": 12}
    greedy = lg.generate(*smol, "Say something.", **kw)
    sampled = lg.generate(*smol, "Say something.", temperature=1.5, top_p=0.0, seed=3, **kw)
    assert sampled.token_ids == greedy.token_ids


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"top_p": 1.5}, "top_p must be in"),
        ({"top_p": -0.1}, "top_p must be in"),
        ({"temperature": -1.0}, "temperature must be >= 0"),
        ({"temperature": float("nan")}, "temperature must be >= 0"),
        ({"max_tokens": 0}, "max_tokens must be an integer >= 1"),
        ({"seed": 2**64}, "seed must be an integer in"),  # (past torch's range: it raised ValueError)
        ({"seed": -(2**63) - 1}, "seed must be an integer in"),
    ],
)
def test_arguments_out_of_range_are_usage_errors(smol: tuple[Any, Any], kw: dict[str, Any], message: str) -> None:
    with pytest.raises(lg.UsageError, match=message) as e:
        lg.generate(*smol, "x", regex="a", **kw)
    assert e.value.code == "usage" and isinstance(e.value, ValueError)


@pytest.mark.parametrize("prompt", ["a\ud800", [{"role": "user", "content": "\udc00"}]])
def test_prompt_with_a_lone_surrogate_is_a_usage_error(smol: tuple[Any, Any], prompt: Any) -> None:
    """Tokenizers take text (a lone surrogate raised TypeError inside one)."""
    with pytest.raises(lg.UsageError, match="lone surrogate") as e:
        lg.generate(*smol, prompt, regex="a")
    assert e.value.code == "prompt-text"
    str(e.value).encode("utf-8")


def test_streaming_callbacks(smol: tuple[Any, Any]) -> None:
    """on_text pieces add up to the text (jump-forward's merged tokens included, stop strings
    held back and cut); on_token sees the trace as it is made."""
    _needs_json_schema()
    schema_file = Path(__file__).resolve().parents[2] / "examples" / "order.json"
    pieces: list[str] = []
    steps: list[Any] = []
    r = lg.generate(
        *smol,
        "Order #4821 for widget and gadget is now shipped.",
        json_schema=json.loads(schema_file.read_text()),
        trace=True,
        on_text=pieces.append,
        on_token=steps.append,
    )
    assert r.complete and r.forced_tokens > 0 and len(pieces) > 3
    assert "".join(pieces) == r.text and steps == r.trace
    pieces.clear()
    # A long stop string that never comes makes the stream hold back its length - 1 characters.
    stop = ["5", "a stop string never written"]
    s = lg.generate(*smol, "Count from 1 to 20 separated by commas.", max_tokens=40, stop=stop, on_text=pieces.append)
    assert s.finish_reason == "stop" and "".join(pieces) == s.text and "5" not in s.text
    assert s.trace == []  # recorded only when asked for


def test_trace_records_what_the_mask_did(smol: tuple[Any, Any]) -> None:
    """trace=True: the model's top tokens before and after the mask, the budget's cut, the
    JSON pointer each token writes, and spans that tile the output (docs/trace.md)."""
    _needs_json_schema()
    schema = json.loads((Path(__file__).resolve().parents[2] / "examples" / "severity.json").read_text())
    prompt = "Since the last deploy the checkout page crashes for every user and no payment goes through."
    r = lg.generate(*smol, prompt, json_schema=schema, trace=True, max_tokens=40)
    t = r.trace
    assert r.complete and t.text == r.text and t.kind == "json" and t.complete
    assert len(t) == r.completion_tokens + sum(st.merged for st in t)
    assert sum(st.forced for st in t) - sum(st.merged for st in t) == r.forced_tokens
    sampled = [st for st in t if not st.forced]
    assert sampled and all(st.top_before and st.top_after and st.prob_after is not None for st in sampled)
    for st in sampled:  # the chosen token is the masked argmax (greedy), never masked itself
        assert st.top_after[0].token_id == st.token_id and st.prob_after >= st.prob_before
        assert all(x.prob >= y.prob for x, y in itertools.pairwise(st.top_after))
        assert len(st.top_after) <= st.allowed
    value = min((st for st in t if st.position == "/severity" and not st.forced), key=lambda st: st.allowed)
    assert 4 <= value.allowed < 50  # the enum's values and their prefixes, out of 49,152
    assert "".join(t.text[a:b] for a, b in (st.span for st in t)) == t.text
    assert {st.position for st in t} >= {"/summary", "/severity", "/component"}
    assert not r.budget_closed and not any(st.budget_shaped for st in t)
    # A tight budget shapes the output (it closes the summary early, picks a shorter enum
    # value), and the trace says at which steps.
    tight = lg.generate(*smol, prompt, json_schema=schema, trace=True, max_tokens=20)
    assert tight.complete and tight.budget_closed
    shaped = [st for st in tight.trace if st.budget_shaped]
    assert shaped and all(st.budget_cut > 0 and st.position for st in shaped)


def test_trace_marks_tokens_jump_forward_merged(smol: tuple[Any, Any]) -> None:
    """A sampled token that jump-forward replaced by a longer forced token (``"`` then ``",``)
    stays in the trace, marked merged and spelling nothing: the forced token holds its bytes."""
    _needs_json_schema()
    schema = json.loads((Path(__file__).resolve().parents[2] / "examples" / "order.json").read_text())
    r = lg.generate(*smol, "Order #4821 for widget and gadget is now shipped.", json_schema=schema, trace=True)
    merged = [st for st in r.trace if st.merged]
    assert r.complete and merged and len(r.trace) == r.completion_tokens + len(merged)
    for st in merged:
        after = r.trace[st.step + 1]
        assert st.span[0] == st.span[1] and after.forced and r.text[slice(*after.span)].startswith(st.text)
    assert [st.token_id for st in r.trace if not st.merged] == r.token_ids


def test_timings_report_vocabulary_and_prefill_apart(smol: tuple[Any, Any]) -> None:
    r = lg.generate(*smol, "A phone number?", regex=r"[0-9]{3}-[0-9]{4}")
    t = r.timings
    assert 0 < t.prefill_s < t.model_s_total and t.prefill_s < t.first_token_s
    assert t.vocab_s >= 0 and t.compile_s > 0 and t.vocab_s + t.compile_s < t.total_s


def test_pydantic_validator_failure_is_typed(smol: tuple[Any, Any]) -> None:
    from pydantic import BaseModel, field_validator

    class Never(BaseModel):
        n: int

        @field_validator("n")
        @classmethod
        def _never(cls, v: int) -> int:
            raise ValueError("never valid")

    r = lg.generate(*smol, "A number as JSON.", pydantic=Never, max_tokens=12)
    assert r.complete
    with pytest.raises(lg.OutputValidationError) as e:
        _ = r.value
    assert e.value.text == r.text and "never valid" in str(e.value)


def test_generate_pydantic(smol: tuple[Any, Any]) -> None:
    _needs_json_schema()
    from pydantic import BaseModel, Field

    class City(BaseModel):
        name: str = Field(max_length=20)
        population: int = Field(ge=0)

    r = lg.generate(*smol, "Paris has 2 million people. As JSON.", pydantic=City, max_tokens=60, parse=True)
    assert isinstance(r.value, City)


# -- the LogitsProcessor inside model.generate() ----------------------------------------------


def test_logits_processor_batch_of_four(smol: tuple[Any, Any], vocab: lg.Vocabulary) -> None:
    from transformers import LogitsProcessorList

    from logitgate.integrations.transformers import GrammarLogitsProcessor

    model, tok = smol
    c = lg.Compiler(vocab)
    rows = [
        (r"[0-9]{3}-[0-9]{4}", c.compile_regex(r"[0-9]{3}-[0-9]{4}"), "A phone number?"),
        (
            r"(red|green|blue)",
            c.compile_choice(["red", "green", "blue"]),
            "What colour is the clear sky on a summer day?",
        ),
        (
            r"\[[0-9]{1,2}(,[0-9]{1,2}){0,2}\]",
            c.compile_ebnf('root ::= "[" n ("," n){0,2} "]"\nn ::= [0-9]{1,2}'),
            "Primes",
        ),
        (r"(yes|no)", c.compile_choice(["yes", "no"]), "Is water wet? Answer yes or no, please, short."),
    ]
    texts = [
        tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for _, _, p in rows
    ]
    side = tok.padding_side
    tok.padding_side = "left"
    try:
        batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tok.padding_side = side
    assert len(set(batch["attention_mask"].sum(1).tolist())) > 1  # prompts really are padded
    proc = GrammarLogitsProcessor([g for _, g, _ in rows], pad_token_id=tok.pad_token_id, trace=True)
    out = model.generate(
        **batch,
        logits_processor=LogitsProcessorList([proc]),
        max_new_tokens=16,
        do_sample=False,
        pad_token_id=tok.pad_token_id,
    )
    width = batch["input_ids"].shape[1]
    for i, (pattern, _, _) in enumerate(rows):
        text = tok.decode(out[i, width:], skip_special_tokens=True)
        assert re.fullmatch(pattern, text), (i, text)
        assert proc.finished[i]
    assert proc.trace and all(len(t) == 4 for t in proc.trace)


def test_logits_processor_single_grammar_broadcast(smol: tuple[Any, Any], vocab: lg.Vocabulary) -> None:
    from transformers import LogitsProcessorList

    from logitgate.integrations.transformers import GrammarLogitsProcessor

    model, tok = smol
    g = lg.Compiler(vocab).compile_regex(r"[A-Z][a-z]{1,9}")
    ids = tok("Name a city:", return_tensors="pt")
    proc = GrammarLogitsProcessor(g)
    out = model.generate(
        **ids,
        logits_processor=LogitsProcessorList([proc]),
        max_new_tokens=8,
        do_sample=False,
        pad_token_id=tok.pad_token_id,
    )
    text = tok.decode(out[0, ids["input_ids"].shape[1] :], skip_special_tokens=True)
    assert re.fullmatch(r"[A-Z][a-z]{1,9}", text), text


# -- CLI --------------------------------------------------------------------------------------


@pytest.fixture
def cli_model(smol: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import logitgate.models
    from logitgate.integrations.transformers import logits_width

    model, tok = smol
    monkeypatch.setattr(logitgate.models, "load_tokenizer", lambda path=None, quiet=False: tok)
    monkeypatch.setattr(logitgate.models, "config_logits_width", lambda path=None: logits_width(model))
    monkeypatch.setattr(logitgate.models, "load_model", lambda path=None, dtype=None, quiet=False, tokenizer=None: smol)


def test_cli_generate_choice(cli_model: None, capsys: pytest.CaptureFixture[str]) -> None:
    from logitgate.cli.main import main

    rc = main(["generate", "--choice", "yes, no", "--trace", "Is the sky blue?"])
    out, err = capsys.readouterr()
    assert rc == 0 and out.strip() in {"yes", "no"}  # the space after the comma is not part of "no"
    assert "allowed" in err


def test_cli_generate_stats(cli_model: None, capsys: pytest.CaptureFixture[str]) -> None:
    from logitgate.cli.main import main

    rc = main(["generate", "--regex", "[0-9]{3}-[0-9]{4}", "--stats", "A phone number?"])
    out, err = capsys.readouterr()
    assert rc == 0 and re.fullmatch(r"[0-9]{3}-[0-9]{4}\n", out)
    assert "mask overhead" in err and "tokens/s" in err and "forced" in err
    # Progress while loading; the vocabulary and the prefill reported apart from compile and decoding.
    assert "logitgate: loading the model..." in err and "logitgate: compiled --regex" in err
    assert "stats: tokenizer" in err and "vocabulary" in err and "(vocabulary excluded)" in err
    assert re.search(r"stats: prefill +[0-9.]+ ms \(prompt [0-9]+ tokens\)", err)
    assert "tokens/s" in err and "(prefill excluded)" in err


def test_cli_streams_the_output_and_the_trace(cli_model: None, capsys: pytest.CaptureFixture[str]) -> None:
    """--stream writes each piece of text as it is generated, and --trace each step, both before
    generate() returns (seen through the callbacks, which the CLI must pass)."""
    import logitgate.cli.main as cli

    seen: list[tuple[str, str]] = []
    real = lg.generate

    def spy(*args: Any, **kwargs: Any) -> Any:
        on_text, on_token = kwargs["on_text"], kwargs["on_token"]
        kwargs["on_text"] = lambda piece: (seen.append(("text", piece)), on_text(piece))
        kwargs["on_token"] = lambda st: (seen.append(("step", st.text)), on_token(st))
        return real(*args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lg, "generate", spy)
        rc = cli.main(["generate", "--regex", "[0-9]{3}-[0-9]{4}", "--stream", "--trace", "-q", "A phone number?"])
    out, err = capsys.readouterr()
    assert rc == 0 and re.fullmatch(r"[0-9]{3}-[0-9]{4}\n", out)
    assert "".join(p for kind, p in seen if kind == "text") == out.strip()
    assert [k for k, _ in seen].count("step") == len(re.findall(r"^step ", err, re.M)) > 1
    assert err.startswith("step ")  # -q: no progress lines


def test_cli_pydantic_validation_failure_is_typed(
    cli_model: None, capsys: pytest.CaptureFixture[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A validator the grammar cannot express rejects the output: exit 4, one line, the text."""
    from logitgate.cli.main import EXIT_INVALID_OUTPUT, main

    (tmp_path / "never_valid.py").write_text(
        "import pydantic\n"
        "class Answer(pydantic.BaseModel):\n"
        "    n: int = pydantic.Field(ge=0, le=9)\n"
        "    @pydantic.field_validator('n')\n"
        "    @classmethod\n"
        "    def _never(cls, v):\n"
        "        raise ValueError('no number is good enough')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = main(["generate", "--pydantic", "never_valid:Answer", "-q", "A digit?"])
    out, err = capsys.readouterr()
    first, text = err.strip().splitlines()
    assert rc == EXIT_INVALID_OUTPUT == 4 and out == "" and "Traceback" not in err
    assert first.startswith("logitgate: error [output-invalid]: the output matches Answer's schema")
    assert "n: Value error, no number is good enough" in first and re.fullmatch(r'\{"n":[0-9]\}', text)


def test_cli_generate_grammar_file(cli_model: None, capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    from logitgate.cli.main import main

    f = tmp_path / "order.gbnf"
    f.write_text(ORDER_GBNF)
    rc = main(["generate", "--grammar", str(f), "Order #4821 is shipped."])
    out, _ = capsys.readouterr()
    assert rc == 0 and json.loads(out)["note"] == "ok"


def test_cli_generate_truncated(cli_model: None, capsys: pytest.CaptureFixture[str]) -> None:
    from logitgate.cli.main import EXIT_TRUNCATED, main

    rc = main(["generate", "--regex", "[a-z]{60}", "--max-tokens", "2", "A long word?"])
    out, err = capsys.readouterr()
    assert rc == EXIT_TRUNCATED == 3 and out == ""
    assert "finish_reason=length (truncated)" in err and re.search(r"\n[a-z]+\n", err)


def test_cli_generate_schema(cli_model: None, capsys: pytest.CaptureFixture[str]) -> None:
    _needs_json_schema()
    from logitgate.cli.main import main

    schema_file = Path(__file__).resolve().parents[2] / "examples" / "order.json"
    rc = main(["generate", "--schema", str(schema_file), "Order #4821 for widget and gadget is now shipped."])
    out, _ = capsys.readouterr()
    assert rc == 0
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(out), json.loads(schema_file.read_text()))
    assert "\n" not in out.strip()  # compact


# -- 20 varied structures, every output parses and validates (slow) ---------------------------

_S = {"type": "string", "maxLength": 16}
CASES: list[tuple[str, str, Any, dict[str, Any]]] = [
    ("enum", "What is the order status? It was shipped.", None, {"enum": ["pending", "shipped", "delivered"]}),
    ("bool", "Is the sun hot? JSON boolean.", None, {"type": "boolean"}),
    ("int-range", "Pick a number from 1 to 10.", None, {"type": "integer", "minimum": 1, "maximum": 10}),
    ("number", "What is 3 divided by 2? Answer with a JSON number.", None, {"type": "number"}),
    (
        "person",
        "Alice is 30.",
        None,
        {
            "type": "object",
            "properties": {"name": _S, "age": {"type": "integer", "minimum": 0, "maximum": 130}},
            "required": ["name", "age"],
            "additionalProperties": False,
        },
    ),
    (
        "nested",
        "Bob lives in Paris, France.",
        None,
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["name", "address"],
            "properties": {
                "name": _S,
                "address": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["city", "country"],
                    "properties": {"city": _S, "country": _S},
                },
            },
        },
    ),
    ("array-bounds", "List two fruits.", None, {"type": "array", "items": _S, "minItems": 2, "maxItems": 3}),
    (
        "array-ints",
        "Three small primes.",
        None,
        {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "minItems": 1, "maxItems": 4},
    ),
    (
        "unique",
        "Tags for a cooking blog.",
        None,
        {"type": "array", "items": {"enum": ["food", "recipe", "cooking", "baking"]}, "minItems": 1, "maxItems": 3},
    ),
    ("date", "When did WW2 end? ISO date.", None, {"type": "string", "format": "date"}),
    ("email", "An email address for John.", None, {"type": "string", "format": "email"}),
    ("uuid", "Generate a UUID.", None, {"type": "string", "format": "uuid"}),
    ("pattern", "A product code like AB-1234.", None, {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}),
    (
        "recursion",
        'Copy this tree exactly: {"name":"food","children":[{"name":"fruit"},{"name":"bread"}]}',
        None,
        {
            "$defs": {
                "node": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string", "maxLength": 20},
                        "children": {"type": "array", "maxItems": 2, "items": {"$ref": "#/$defs/node"}},
                    },
                }
            },
            "$ref": "#/$defs/node",
        },
    ),
    (
        "anyof",
        "The answer is 42.",
        None,
        {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 1000}, {"type": "null"}]},
    ),
    (
        "optional",
        "A book: Dune by Frank Herbert.",
        None,
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["title"],
            "properties": {"title": _S, "author": _S, "year": {"type": "integer", "minimum": 1000, "maximum": 2100}},
        },
    ),
    (
        "order",
        "Order #4821 for widget and gadget is now shipped.",
        None,
        json.loads(
            '{"type":"object","additionalProperties":false,"required":["order_id","items","status"],"properties":'
            '{"order_id":{"type":"integer","minimum":0,"maximum":999999},"items":{"type":"array","items":'
            '{"type":"string","maxLength":16},"minItems":1,"maxItems":4},"status":{"enum":["pending","shipped",'
            '"delivered","cancelled"]}}}'
        ),
    ),
    # Non-schema structures whose output is JSON, validated against a schema all the same.
    (
        "regex",
        "A rating from 1 to 5 as JSON.",
        ("regex", r'\{"rating": [1-5]\}'),
        {
            "type": "object",
            "properties": {"rating": {"type": "integer", "minimum": 1, "maximum": 5}},
            "required": ["rating"],
        },
    ),
    ("choice", "Is it raining? JSON boolean.", ("choice", ["true", "false"]), {"type": "boolean"}),
    (
        "ebnf",
        "Give a point as JSON.",
        ("ebnf", 'root ::= "{\\"x\\": " n ", \\"y\\": " n "}"\nn ::= "-"? [0-9]{1,3}'),
        {"type": "object", "required": ["x", "y"], "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}},
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "prompt", "structure", "schema"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_twenty_structures(
    smol: tuple[Any, Any], name: str, prompt: str, structure: Any, schema: dict[str, Any]
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    if structure is None:
        _needs_json_schema()
        kw: dict[str, Any] = {"json_schema": schema}
        system = "Answer with JSON that follows this JSON Schema: " + json.dumps(schema)
    else:
        kw = {structure[0]: structure[1]}
        system = "Answer with JSON."
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    r = lg.generate(*smol, msgs, max_tokens=200, **kw)
    assert r.finish_reason == "stop" and r.complete, (name, r.text)
    value = json.loads(r.text)
    if structure is None:
        assert r.value == value
    jsonschema.validate(value, schema, format_checker=jsonschema.FormatChecker())
    assert r.completion_tokens > 0 and r.forward_passes <= r.completion_tokens + 1


@pytest.mark.slow
def test_truncation_on_every_kind(smol: tuple[Any, Any], vocab: lg.Vocabulary) -> None:
    # One token ends every generation here before its value does, whatever the model picks (its
    # greedy text depends on the CPU's kernels): no token the first mask allows completes a value.
    from logitgate.masks import mask_to_bool

    _needs_json_schema()
    for name, prompt, structure, schema in CASES[4:8]:
        assert structure is None
        matcher = lg.Compiler(vocab).compile_json_schema(schema).matcher()
        bits = lg.allocate_mask(vocab)
        matcher.fill_mask(bits)
        for token in mask_to_bool(bits, vocab.size)[0].nonzero()[0]:
            after = matcher.fork()
            assert after.accept(int(token)) and not after.is_complete(), (name, int(token))
        r = lg.generate(*smol, prompt, json_schema=schema, max_tokens=1)
        assert r.finish_reason == "length", (name, r.text)
        with pytest.raises(lg.TruncatedOutput):
            _ = r.value


# -- budget-aware decoding --------------------------------------------------------------------

ORDER_SCHEMA_FILE = "examples/order.json"
ORDER_PROMPT = "Order #4821 for widget and gadget is now shipped."


def _order_schema() -> dict[str, Any]:
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[2] / ORDER_SCHEMA_FILE).read_text())


def test_budget_closes_a_document_the_model_would_run_past(smol: tuple[Any, Any]) -> None:
    """max_tokens between the grammar's minimum and the length the model wants: without the
    budget the output is truncated, with it (the default) it is a complete, valid document and
    the result says the budget shaped it."""
    _needs_json_schema()
    jsonschema = pytest.importorskip("jsonschema")
    schema = _order_schema()
    system = "Extract JSON: " + json.dumps(schema)
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": ORDER_PROMPT}]
    from logitgate.generation import compiler_for, vocabulary_for

    g = compiler_for(vocabulary_for(*smol)).compile_json_schema(schema, whitespace="compact")
    minimum = g.token_budget().min_tokens
    n = minimum + 3
    plain = lg.generate(*smol, msgs, json_schema=schema, max_tokens=n, budget_aware=False)
    assert plain.finish_reason == "length" and not plain.complete and not plain.budget_closed
    r = lg.generate(*smol, msgs, json_schema=schema, max_tokens=n)
    assert r.finish_reason == "stop" and r.complete and r.budget_closed and r.completion_tokens <= n
    jsonschema.validate(r.value, schema)
    below = lg.generate(*smol, msgs, json_schema=schema, max_tokens=minimum - 1)
    assert below.finish_reason == "length" and not below.complete and not below.budget_closed


def test_cli_budget_warning_and_exit_codes(cli_model: None, capsys: pytest.CaptureFixture[str]) -> None:
    """--max-tokens between the grammar's minimum and the length the model wants (the same
    run without the budget is truncated): a schema-valid document, exit 0, the warning on
    stderr. Below the minimum: truncated, exit 3."""
    _needs_json_schema()
    jsonschema = pytest.importorskip("jsonschema")
    from pathlib import Path

    from logitgate.cli.main import EXIT_TRUNCATED, main

    schema_file = str(Path(__file__).resolve().parents[2] / ORDER_SCHEMA_FILE)
    assert main(["budget", "--schema", schema_file, "--json"]) == 0
    minimum = json.loads(capsys.readouterr().out)["min_tokens"]
    n = str(minimum + 2)
    rc = main(["generate", "--schema", schema_file, "--max-tokens", n, "--no-budget", ORDER_PROMPT])
    out, err = capsys.readouterr()
    assert rc == EXIT_TRUNCATED and out == "" and "finish_reason=length" in err  # the model wants more
    rc = main(["generate", "--schema", schema_file, "--max-tokens", n, "--stats", ORDER_PROMPT])
    out, err = capsys.readouterr()
    assert rc == 0
    jsonschema.validate(json.loads(out), _order_schema())
    assert "warning: --max-tokens shaped the output" in err and "stats: budget          closed" in err
    rc = main(["generate", "--schema", schema_file, "--max-tokens", str(minimum - 1), ORDER_PROMPT])
    out, err = capsys.readouterr()
    assert rc == EXIT_TRUNCATED and out == "" and "finish_reason=length" in err
