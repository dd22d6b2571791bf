"""The server's tools on ``lg.tool_call_structure`` (no model): a request's tools and
tool_choice to the library's structure, the 400s, the prompt (the server's tool text, or the
chat template's own), the calls read back from an answer, and streamed answers split into
content and tool-call deltas."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import logitgate as lg
from logitgate.server.app import _chat_choice, _ChatChunks
from logitgate.server.engine import Completion
from logitgate.server.protocol import ApiError, ChatMessage
from logitgate.server.tools import (
    TOOL_FAMILY,
    chat_prompt_ids,
    plan_tools,
    split_tool_calls,
    template_renders_tools,
    tool_call_grammar,
)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER, "strict": True}},
    {"type": "function", "function": {"name": "noop", "description": "does nothing"}},
]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
NOOP = '<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>'
VOCAB = lg.Vocabulary.from_tokens([bytes([b]) for b in range(256)] + [b"<eos>"], eos_ids=[256])


def accepts(tool_choice: Any, text: str, parallel: bool | None = None) -> bool:
    plan = plan_tools(TOOLS, tool_choice, parallel)
    assert plan is not None
    m = tool_call_grammar(lg.Compiler(VOCAB), plan).matcher()
    return all(m.accept(b) for b in text.encode()) and bool(m.is_complete())


def test_the_structure_is_the_librarys() -> None:
    plan = plan_tools(TOOLS, "required", False)
    assert plan is not None
    lib_tools = [
        {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
        {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}},
    ]
    assert plan.structure == lg.tool_call_structure(TOOL_FAMILY, lib_tools, "required", False, calls_only=True)
    assert [f["name"] for f in plan.functions] == ["get_weather", "noop"]


def test_tool_choice_and_parallel_calls() -> None:
    assert accepts("auto", "Just text.") and accepts(None, "Let me look. " + CALL)
    assert not accepts("required", "Just text.") and accepts("required", CALL + "\n" + NOOP)
    assert not accepts("required", CALL + " Done.") and not accepts("required", "So: " + CALL)  # calls only
    assert not accepts("required", CALL + "\n" + NOOP, parallel=False) and accepts("required", CALL, parallel=False)
    named = {"type": "function", "function": {"name": "noop"}}
    assert accepts(named, NOOP) and not accepts(named, CALL)
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "required", "tools": [{"type": "function", "name": "noop"}]},
    }
    assert accepts(allowed, NOOP) and not accepts(allowed, CALL) and not accepts(allowed, "text")
    assert not accepts("auto", CALL.replace('"Oslo"', "7"))  # arguments follow the schema
    assert not accepts("auto", CALL.replace('"Oslo"}', '"Oslo", "days": 2}'))  # objects closed
    assert plan_tools(TOOLS, "none", None) is None and plan_tools(None, None, None) is None


@pytest.mark.parametrize(
    ("tools", "choice", "param"),
    [
        (None, "required", "tool_choice"),
        (TOOLS, {"type": "function", "function": {"name": "missing"}}, "tool_choice"),
        (
            TOOLS,
            {"type": "allowed_tools", "allowed_tools": {"tools": [{"type": "function", "name": "x"}]}},
            "tool_choice",
        ),
        (TOOLS, {"type": "allowed_tools", "allowed_tools": {"mode": "sometimes", "tools": []}}, "tool_choice"),
        (TOOLS, "sometimes", "tool_choice"),
        ([{"type": "function", "function": {"name": "bad name"}}], "auto", "tools[0].function.name"),
        ([{"type": "function", "function": {"name": "f", "parameters": []}}], "auto", "tools[0].function.parameters"),
        ([TOOLS[0], TOOLS[0]], "auto", "tools"),
        ([{"type": "web_search"}], "auto", "tools[0]"),
    ],
)
def test_bad_tools_are_400s_naming_the_field(tools: Any, choice: Any, param: str) -> None:
    with pytest.raises(ApiError) as e:
        plan_tools(tools, choice, None)
    assert (e.value.status, e.value.body()["error"]["param"]) == (400, param)


def test_bad_parameters_schema_names_the_tool() -> None:
    bad = {"type": "object", "properties": {"when": {"type": "string", "pattern": "(?<=a)b"}}}
    tools = [TOOLS[1], {"type": "function", "function": {"name": "at", "parameters": bad}}]
    plan = plan_tools(tools, "auto", None)
    assert plan is not None
    with pytest.raises(ApiError) as e:
        tool_call_grammar(lg.Compiler(VOCAB), plan)
    body = e.value.body()["error"]
    assert (e.value.status, body["param"]) == (400, "tools[1].function.parameters")
    assert (
        "'pattern'" in body["message"] and "/properties/when/pattern" in body["message"] and "(at)" in body["message"]
    )


def test_parameters_past_a_limit_name_the_tool_and_keyword() -> None:
    """minItems at 2^63 is a LimitExceeded inside the tag (it was an OverflowError, a 500)."""
    huge = {"type": "object", "properties": {"xs": {"type": "array", "minItems": 2**63}}, "required": ["xs"]}
    tools = [TOOLS[1], {"type": "function", "function": {"name": "many", "parameters": huge}}]
    plan = plan_tools(tools, "auto", None)
    assert plan is not None
    with pytest.raises(ApiError) as e:
        tool_call_grammar(lg.Compiler(VOCAB), plan)
    body = e.value.body()["error"]
    assert (e.value.status, body["param"], body["code"]) == (400, "tools[1].function.parameters", "limit")
    assert "minItems 9223372036854775808 at /properties/xs/minItems" in body["message"]


def test_calls_read_back_with_the_text_around_them() -> None:
    content, calls = split_tool_calls("Looking it up.\n" + CALL + "\n" + NOOP)
    assert content == "Looking it up."
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("get_weather", {"city": "Oslo"}),
        ("noop", {}),
    ]
    assert all(c["id"].startswith("call_") and c["type"] == "function" for c in calls)
    assert split_tool_calls(CALL)[0] is None
    assert split_tool_calls("no call") == ("no call", [])


def _done(text: str, complete: bool = True) -> Completion:
    return Completion(text, "stop" if complete else "length", complete, 10, 5)


def test_reply_message() -> None:
    plan = plan_tools(TOOLS, "auto", None)
    choice = _chat_choice(0, _done("Sure. " + CALL), plan, False)
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Sure."
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    cut = _chat_choice(0, _done(CALL[:30], complete=False), plan, False)  # cut by max_tokens: text
    assert cut["finish_reason"] == "length" and cut["message"]["content"] == CALL[:30]
    assert "tool_calls" not in cut["message"]


def _stream(text: str, pieces: int, complete: bool = True) -> tuple[str, list[dict[str, Any]], str | None]:
    """``text`` streamed in pieces of ``pieces`` characters: the content sent, the tool-call
    deltas, the finish reason."""
    chunks = _ChatChunks("id", "m", False, plan_tools(TOOLS, "auto", None), False)
    out = chunks.start(0)
    sent_before_done = ""
    for i in range(0, len(text), pieces):
        out += chunks.text(0, text[i : i + pieces])
        sent_before_done = "".join(c["choices"][0]["delta"].get("content") or "" for c in out)
        assert "<tool_call" not in sent_before_done and "<tool_" not in sent_before_done
    out += chunks.done(0, _done(text, complete))
    deltas = [c["choices"][0]["delta"] for c in out]
    content = "".join(d.get("content") or "" for d in deltas)
    calls = [call for d in deltas for call in d.get("tool_calls") or []]
    return content, calls, out[-1]["choices"][0]["finish_reason"]


@pytest.mark.parametrize("pieces", [1, 3, 7, 1000])
def test_streamed_calls_and_text(pieces: int) -> None:
    content, calls, finish = _stream("I will check <b>now</b>. " + CALL + "\n" + NOOP + " Done.", pieces)
    assert content == "I will check <b>now</b>. Done." and finish == "tool_calls"
    assert [(c["index"], c["function"]["name"]) for c in calls] == [(0, "get_weather"), (1, "noop")]
    content, calls, finish = _stream("Plain text <tool", pieces)  # a tail that never became a call
    assert (content, calls, finish) == ("Plain text <tool", [], "stop")
    content, calls, finish = _stream(CALL[:40], pieces, complete=False)  # cut mid-call: text
    assert (content, calls, finish) == (CALL[:40], [], "length")


QWEN3 = Path(os.environ.get("LOGITGATE_TOKENIZERS", "/work/shared/tokenizers")) / "qwen3"


def test_smollm2_prompt_lists_the_tools_in_a_system_message() -> None:
    from logitgate.models import load_tokenizer

    tok = load_tokenizer(quiet=True)
    assert not template_renders_tools(tok)  # SmolLM2's ChatML template has no tool format
    plan = plan_tools(TOOLS, "required", None)
    history = [
        ChatMessage(role="user", content="Weather in Oslo?"),
        ChatMessage(role="assistant", tool_calls=[_call("get_weather", '{"city": "Oslo"}')]),
        ChatMessage(role="tool", tool_call_id="c1", content="sunny"),
    ]
    text = tok.decode(chat_prompt_ids(tok, history, plan, native=False))
    assert text.index("You can call functions") < text.index("Weather in Oslo?")
    assert '{"name":"noop","description":"does nothing"' in text  # every tool listed
    assert CALL in text and "<tool_response>\nsunny\n</tool_response>" in text


@pytest.mark.skipif(not QWEN3.exists(), reason=f"{QWEN3} is absent")
def test_a_template_that_renders_hermes_tools_gets_them() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(QWEN3))
    assert template_renders_tools(tok)
    plan = plan_tools(TOOLS, "auto", None)
    history = [
        ChatMessage(role="developer", content="Be brief."),
        ChatMessage(role="user", content="Weather in Oslo?"),
        ChatMessage(role="assistant", tool_calls=[_call("get_weather", '{"city": "Oslo"}')]),
        ChatMessage(role="tool", tool_call_id="c1", content="sunny"),
    ]
    text = tok.decode(chat_prompt_ids(tok, history, plan, native=True))
    assert "<tools>" in text and '"name": "noop"' in text and "You can call functions" not in text
    assert CALL in text and "<tool_response>\nsunny\n</tool_response>" in text  # the template's own rendering
    assert text.startswith("<|im_start|>system\nBe brief.")


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
