"""Traces without a model: JSON pointers of output characters, the recorder on synthetic logits,
the page's data and its self-containment, the CLI's --trace-html checks."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from tests.unit.synthetic_traces import synthetic_trace

import logitgate as lg
from logitgate.trace import Trace, TraceStep, render_trace_html
from logitgate.trace.json_pointer import json_pointers
from logitgate.trace.record import TraceRecorder

torch = pytest.importorskip("torch")

# -- JSON pointers ----------------------------------------------------------------------------


def _by_char(text: str) -> list[tuple[str, str]]:
    return list(zip(text, json_pointers(text), strict=True))


def test_pointers_of_an_object_place_keys_where_they_lead() -> None:
    text = '{"a": 1, "b": [true, {"c": "x"}]}'
    got = json_pointers(text)
    assert len(got) == len(text)
    at = {i: p for i, p in enumerate(got)}
    assert at[0] == "" and at[len(text) - 1] == ""  # the root's braces
    assert [at[i] for i in range(1, 5)] == ["/a"] * 4  # "a":
    assert at[5] == ""  # whitespace belongs to the container
    assert at[6] == "/a"  # 1
    assert at[7] == ""  # the comma belongs to the container
    assert at[text.index("true")] == "/b/0"
    assert at[text.index('{"c"')] == "/b/1"
    assert at[text.index('"x"')] == "/b/1/c" and at[text.index('"c"')] == "/b/1/c"
    assert at[text.index("]")] == "/b"


def test_pointers_escape_keys_and_read_escapes() -> None:
    text = '{"a/b~":0,"\\u0041":1}'
    ps = json_pointers(text)
    assert ps[text.index("0")] == "/a~1b~0"
    assert ps[text.index("1}")] == "/A"


def test_pointers_of_cut_and_non_json_text() -> None:
    # Cut inside a key: the key as written so far; cut inside a string value: its pointer.
    assert json_pointers('{"sev')[-1] == "/sev"
    assert json_pointers('{"s":"hig')[-1] == "/s"
    assert json_pointers("[1,[2,")[-1] == "/1"
    assert json_pointers("") == []
    # Not JSON from some point on: the rest stays with the innermost container, no error.
    assert json_pointers('{"a":[1, @@@')[-3:] == ["/a"] * 3
    assert json_pointers("hello") == [""] * 5


def test_pointer_stack_is_not_recursive() -> None:
    deep = "[" * 5000 + "]" * 5000
    ps = json_pointers(deep)
    assert ps[4999] == "/0" * 4999 and ps[0] == ""


# -- the recorder -----------------------------------------------------------------------------

TOKENS = [b"a", b"b", b"c", b'{"', b"\xc3", b"\xa9", None]  # id 6: EOS


@pytest.fixture
def recorder() -> TraceRecorder:
    vocab = lg.Vocabulary.from_tokens(TOKENS, eos_ids=[6])
    return TraceRecorder(vocab.table, temperature=0.0, eos_ids=frozenset({6}), top_k=3)


def test_recorder_top_tokens_before_and_after_the_mask(recorder: TraceRecorder) -> None:
    logits = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0, -1.0, 0.5])
    recorder.before_mask(logits)
    masked = logits.clone()
    masked[[0, 3, 4, 5]] = float("-inf")  # the mask keeps b, c and EOS
    recorder.after_mask(masked, 1, budget_cut=2)
    st = TraceStep(0, 1, "b", 3, False)
    recorder.annotate(st)
    p = torch.softmax(logits, 0)
    q = torch.softmax(masked, 0)
    assert [t.token_id for t in st.top_before] == [0, 1, 2]
    assert [t.masked for t in st.top_before] == [True, False, False]
    assert st.top_before[0].prob == pytest.approx(float(p[0]))
    assert [t.token_id for t in st.top_after] == [1, 2, 6]
    assert [t.text for t in st.top_after] == ["b", "c", "<EOS>"]
    assert sum(t.prob for t in st.top_after) == pytest.approx(1.0)
    assert st.prob_before == pytest.approx(float(p[1])) and st.prob_after == pytest.approx(float(q[1]))
    assert st.budget_cut == 2 and st.budget_shaped
    # The next step starts empty: nothing carries over.
    nxt = TraceStep(1, 2, "c", 1, False)
    recorder.annotate(nxt)
    assert nxt.top_before == () and nxt.prob_after is None and nxt.budget_cut == 0


def test_recorder_uses_the_sampling_temperature() -> None:
    vocab = lg.Vocabulary.from_tokens(TOKENS, eos_ids=[6])
    rec = TraceRecorder(vocab.table, temperature=2.0, eos_ids=frozenset({6}), top_k=2)
    logits = torch.tensor([2.0, 0.0, -9.0, -9.0, -9.0, -9.0, -9.0])
    rec.before_mask(logits)
    rec.after_mask(logits, 0, 0)
    st = TraceStep(0, 0, "a", 7, False)
    rec.annotate(st)
    assert st.prob_before == pytest.approx(float(torch.softmax(logits / 2, 0)[0]))


def test_fewer_allowed_tokens_than_k_leave_no_zero_entries(recorder: TraceRecorder) -> None:
    logits = torch.zeros(7)
    recorder.before_mask(logits)
    masked = torch.full((7,), float("-inf"))
    masked[2] = 0.0
    recorder.after_mask(masked, 2, 0)
    st = TraceStep(0, 2, "c", 1, False)
    recorder.annotate(st)
    assert [(t.token_id, t.prob) for t in st.top_after] == [(2, 1.0)]


def test_finish_tiles_the_text_and_places_json_tokens(recorder: TraceRecorder) -> None:
    # '{"' 'a' (sampled, then merged into the forced 'a'), 'a', split 'é' (\xc3 \xa9), EOS
    ids = [3, 0, 0, 4, 5, 6]
    steps = [TraceStep(i, t, "", 1, False) for i, t in enumerate(ids)]
    steps[1].merged = True
    trace = recorder.finish(steps, None, "json", finish_reason="stop", complete=False, vocab_size=7)
    assert trace.text == '{"aé'
    assert [st.span for st in trace] == [(0, 2), (2, 2), (2, 3), (3, 3), (3, 4), (4, 4)]
    # The split character belongs to the token that completes it; EOS and merged spell nothing.
    assert [st.position for st in trace] == ["/aé", None, "/aé", None, "/aé", None]
    assert trace.eos_ids == (6,) and trace.kind == "json" and trace.top_k == 3


def test_finish_leaves_positions_unknown_for_text_grammars(recorder: TraceRecorder) -> None:
    trace = recorder.finish([TraceStep(0, 3, "", 5, False)], None, "text", finish_reason="stop", complete=True)
    assert trace.text == '{"' and trace[0].position is None


# -- the page ---------------------------------------------------------------------------------


def _embedded(page: str) -> Any:
    m = re.search(r'<script id="trace-data" type="application/json">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_page_is_self_contained_and_embeds_the_trace() -> None:
    trace = synthetic_trace(40)
    page = trace.to_html(title="a <b>run</b>")
    assert page.startswith("<!DOCTYPE html>")
    # Nothing is fetched: no external scripts, styles, images or URLs at all.
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "http://" not in page and "https://" not in page and "<link" not in page
    assert "default-src 'none'" in page  # and the browser is told to refuse any fetch
    assert "<title>a &lt;b&gt;run&lt;/b&gt;</title>" in page
    data = _embedded(page)
    assert len(data["steps"]) == 40 and data["title"] == "a <b>run</b>"
    back = Trace.from_dict(data)
    assert back == trace and back.text == trace.text and back.vocab_size == trace.vocab_size
    assert back[6].budget_shaped and back[2].forced and back[0].top_before[0].masked


def test_page_survives_hostile_token_text() -> None:
    """Token text is data: a token spelling ``</script>`` cannot end the data element."""
    trace = synthetic_trace(3)
    trace[0].text = "</script><script>alert(1)</script><!--"
    trace.text = trace[0].text + trace.text
    page = render_trace_html(trace)
    assert page.count("</script>") == 2  # the data element's and the code's
    assert _embedded(page)["steps"][0][1] == trace[0].text


def test_render_accepts_stored_data() -> None:
    """What a server stores (to_dict) renders the same page as the trace itself."""
    trace = synthetic_trace(5)
    assert render_trace_html(trace.to_dict(), title="t") == render_trace_html(trace, title="t")


def test_malformed_trace_data_is_a_typed_error() -> None:
    with pytest.raises(lg.UsageError) as e:
        Trace.from_dict({"format": 99})
    assert e.value.code == "trace-format" and "format" in str(e.value)
    data = synthetic_trace(2).to_dict()
    data["steps"][1] = [1, "x"]
    with pytest.raises(lg.UsageError) as e:
        render_trace_html(data)
    assert e.value.code == "trace-format"


def test_a_thousand_steps_stay_small() -> None:
    page = synthetic_trace(1000).to_html()
    assert len(_embedded(page)["steps"]) == 1000
    assert len(page.encode()) < 250_000  # about 0.2 KB per step with five top tokens each way (docs/trace.md)


# -- the command line -------------------------------------------------------------------------


def test_cli_refuses_an_unwritable_trace_path_before_loading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from logitgate.cli.main import main

    missing = tmp_path / "no" / "run.html"
    assert main(["generate", "--choice", "a,b", "--trace-html", str(missing), "hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("logitgate: error [file-unwritable]: --trace-html") and "no such folder" in err
    assert main(["generate", "--choice", "a,b", "--trace-html", str(tmp_path), "hi"]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_output_of_a_json_schema_grammar_gets_positions(recorder: TraceRecorder) -> None:
    """The CLI passes a compiled grammar (kind "text"): a JSON Schema's grammar still counts as JSON."""
    g = lg.Compiler(lg.Vocabulary.from_tokens(TOKENS, eos_ids=[6])).compile_json_schema(
        {"type": "object", "properties": {"a": {"type": "string"}}}
    )
    trace = recorder.finish([TraceStep(0, 3, "", 5, False)], g, "text", finish_reason="length", complete=False)
    assert trace.kind == "json" and trace[0].position == "/"
    regex = lg.Compiler(lg.Vocabulary.from_tokens(TOKENS, eos_ids=[6])).compile_regex("[ab]+")
    assert recorder.finish([], regex, "text").kind == "text"


def test_a_token_between_members_is_placed_at_the_key_it_opens() -> None:
    vocab = lg.Vocabulary.from_tokens([b'{"a":"x', b'","', b'b":1}'])
    rec = TraceRecorder(vocab.table, temperature=0.0, eos_ids=frozenset())
    steps = [TraceStep(i, i, "", 1, False) for i in range(3)]
    trace = rec.finish(steps, None, "json", finish_reason="stop", complete=True)
    assert [st.position for st in trace] == ["/a", "/b", "/b"]
