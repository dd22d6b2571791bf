"""Tool calling: the structural tag of a model family's native tool-call format.

:func:`tool_call_structure` builds, for OpenAI-style ``tools`` and ``tool_choice``, a structural
tag (XGrammar's format, compiled by :meth:`~logitgate.Compiler.compile_structural_tag`) that
allows exactly what the family's chat format allows: free text, then calls whose arguments
follow each tool's JSON Schema. ``tool_choice`` and ``parallel_tool_calls`` map the way
XGrammar's docs map them:

- ``"auto"``: ``triggered_tags`` (text, and calls after their trigger);
- ``"required"``: the same with ``at_least_one`` (the output starts with a call);
- a named function (``{"type": "function", "function": {"name": ...}}``): one fixed ``tag``;
- ``{"type": "allowed_tools", "allowed_tools": {"mode": "auto" | "required", "tools": [...]}}``:
  auto or required over the listed tools only (each listed as ``{"type": "function",
  "function": {"name": ...}}`` or ``{"type": "function", "name": ...}``; a name that is not
  among ``tools`` is an error);
- ``"none"`` (or no tools): free text only;
- ``parallel_tool_calls=False``: ``stop_after_first``.

``calls_only`` (with ``"required"``, or ``allowed_tools`` in required mode): no free text
before, between or after the calls; Qwen3's and Llama 3's calls are then separated by a
newline (``tags_with_separator``). The other families' required outputs are calls only either
way. Without it, required follows XGrammar (a call first, then text and calls as in auto).

``reasoning`` puts a reasoning span first where the family has one (``<think>...</think>``
for Qwen3 and DeepSeek, the analysis channel for gpt-oss): True requires it, ``"auto"`` makes
it optional, False leaves it out.

>>> tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
>>> tool_call_structure("qwen3", tools)["format"]["type"]
'triggered_tags'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .errors import UsageError, _surrogate_at

__all__ = ["FAMILIES", "tool_call_structure"]

FAMILIES = ("llama3", "qwen3", "mistral", "deepseek_v3", "harmony")
"""The families :func:`tool_call_structure` knows (``hermes`` is an alias of ``qwen3``)."""

_THINK_EXCLUDES = ["<think>", "</think>"]

Format = dict[str, Any]


def tool_call_structure(
    family: str,
    tools: Sequence[Mapping[str, Any]],
    tool_choice: str | Mapping[str, Any] | None = "auto",
    parallel_tool_calls: bool = True,
    reasoning: bool | Literal["auto"] = False,
    calls_only: bool = False,
) -> dict[str, Any]:
    """The structural tag (``{"type": "structural_tag", "format": ...}``) of ``family``'s
    tool-call format for ``tools`` (OpenAI Chat Completions shape). Raises
    :class:`~logitgate.UsageError` (code ``tool-call``) for an unknown family, a malformed
    tool, or a ``tool_choice`` naming no available tool."""
    family = "qwen3" if family == "hermes" else family
    if family not in FAMILIES:
        raise UsageError(f"unknown tool-call family {family!r}; known: {', '.join(FAMILIES)}", code="tool-call")
    functions = [_function(t, i) for i, t in enumerate(tools)]
    mode, chosen = _choice(tool_choice, functions)
    if calls_only and mode == "required":
        mode = "calls"
    builder = {
        "llama3": _llama3,
        "qwen3": _qwen3,
        "mistral": _mistral,
        "deepseek_v3": _deepseek_v3,
        "harmony": _harmony,
    }[family]
    return {"type": "structural_tag", "format": builder(chosen, mode, parallel_tool_calls, reasoning)}


def _function(tool: Mapping[str, Any], index: int) -> tuple[str, Any]:
    """(name, parameters schema) of an OpenAI function tool."""
    fn = tool.get("function") if isinstance(tool, Mapping) else None
    if not isinstance(tool, Mapping) or tool.get("type", "function") != "function" or not isinstance(fn, Mapping):
        raise UsageError(f"tools[{index}] is not a function tool", code="tool-call")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise UsageError(f"tools[{index}].function.name must be a non-empty string", code="tool-call")
    if _surrogate_at(name) >= 0:  # (the parameters' schema is checked by the structural tag's compile)
        raise UsageError(f"tools[{index}].function.name {name!r} holds a lone surrogate", code="tool-call")
    params = fn.get("parameters", {"type": "object", "properties": {}})
    if fn.get("strict") is False and params is None:
        params = True
    return name, params


def _choice(
    tool_choice: str | Mapping[str, Any] | None, functions: list[tuple[str, Any]]
) -> tuple[str, list[tuple[str, Any]]]:
    """("none" | "auto" | "required" | "forced", the tools it leaves); :func:`tool_call_structure`
    turns "required" into "calls" with ``calls_only``."""
    if tool_choice is None or tool_choice == "auto":
        return ("auto", functions) if functions else ("none", [])
    if tool_choice == "none":
        return "none", []
    if tool_choice == "required":
        if not functions:
            raise UsageError("tool_choice 'required' needs at least one tool", code="tool-call")
        return "required", functions
    if isinstance(tool_choice, Mapping):
        kind = tool_choice.get("type")
        if kind == "function":
            name = (tool_choice.get("function") or {}).get("name")
            picked = [f for f in functions if f[0] == name]
            if not picked:
                raise UsageError(f"tool_choice names {name!r}, which is not among the tools", code="tool-call")
            return "forced", picked[:1]
        if kind == "allowed_tools":
            spec = tool_choice.get("allowed_tools") or {}
            mode = spec.get("mode", "auto")
            listed = spec.get("tools", [])
            if not isinstance(listed, list) or not all(isinstance(t, Mapping) for t in listed):
                raise UsageError("allowed_tools.tools must be a list of tool objects", code="tool-call")
            # Chat Completions' shape ({"function": {"name"}}) or the Responses API's ({"name"}).
            names = {(t.get("function") or {}).get("name", t.get("name")) for t in listed}
            unknown = sorted(str(n) for n in names - {f[0] for f in functions})
            if unknown:
                raise UsageError(f"allowed_tools lists tools that are not among the tools: {unknown}", code="tool-call")
            picked = [f for f in functions if f[0] in names]
            if mode not in ("auto", "required"):
                raise UsageError(f"allowed_tools mode must be 'auto' or 'required', not {mode!r}", code="tool-call")
            if mode == "required" and not picked:
                raise UsageError("allowed_tools 'required' lists none of the tools", code="tool-call")
            return (mode if picked else "none"), picked
    raise UsageError(f"unsupported tool_choice {tool_choice!r}", code="tool-call")


def _json(schema: Any) -> Format:
    return {"type": "json_schema", "json_schema": schema}


def _calls_or_text(tags: list[Format], trigger: str, mode: str, parallel: bool, excludes: list[str]) -> Format:
    """The common shape: free text with calls after ``trigger`` (auto), calls first (required)."""
    if mode == "none":
        return {"type": "any_text", "excludes": excludes}
    if mode == "forced":
        return tags[0]
    if mode == "calls":
        return {
            "type": "tags_with_separator",
            "tags": tags,
            "separator": "\n",
            "at_least_one": True,
            "stop_after_first": not parallel,
        }
    return {
        "type": "triggered_tags",
        "triggers": [trigger],
        "tags": tags,
        "excludes": excludes,
        "at_least_one": mode == "required",
        "stop_after_first": not parallel,
    }


def _with_reasoning(suffix: Format, reasoning: bool | str, end_suffix: str = "") -> Format:
    if not reasoning:
        return suffix
    think: Format = {
        "type": "tag",
        "begin": "<think>",
        "content": {"type": "any_text", "excludes": _THINK_EXCLUDES},
        "end": "</think>",
    }
    if end_suffix:
        think = {"type": "sequence", "elements": [think, {"type": "const_string", "value": end_suffix}]}
    if reasoning == "auto":
        think = {"type": "optional", "content": think}
    return {"type": "sequence", "elements": [think, suffix]}


def _llama3(functions: list[tuple[str, Any]], mode: str, parallel: bool, reasoning: bool | str) -> Format:
    # Llama 3.1/3.2 JSON tool calls: {"name": "f", "parameters": {...}} in the text.
    tags = [
        {"type": "tag", "begin": '{"name": "' + name + '", "parameters": ', "content": _json(params), "end": "}"}
        for name, params in functions
    ]
    return _calls_or_text(tags, '{"name": ', mode, parallel, list(_THINK_EXCLUDES))


def _qwen3(functions: list[tuple[str, Any]], mode: str, parallel: bool, reasoning: bool | str) -> Format:
    # Qwen3 / Hermes: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
    tags = [
        {
            "type": "tag",
            "begin": '<tool_call>\n{"name": "' + name + '", "arguments": ',
            "content": _json(params),
            "end": "}\n</tool_call>",
        }
        for name, params in functions
    ]
    suffix = _calls_or_text(tags, "<tool_call>", mode, parallel, list(_THINK_EXCLUDES))
    return _with_reasoning(suffix, reasoning, "\n\n")


def _call_block(
    calls: list[Format], begin: str, separator: str, end: str, mode: str, parallel: bool, excludes: list[str]
) -> Format:
    """Calls in one delimited block (``begin`` call ``separator`` call ... ``end``), after free
    text (auto) or at once (required, forced)."""
    body: Format = {
        "type": "tags_with_separator",
        "tags": calls,
        "separator": separator,
        "at_least_one": True,
        "stop_after_first": not parallel or mode == "forced",
    }
    block = {"type": "tag", "begin": begin, "content": body, "end": end}
    if mode in ("forced", "required", "calls"):
        return block
    trigger = {"type": "triggered_tags", "triggers": [begin], "tags": [block], "stop_after_first": True}
    if excludes:
        trigger["excludes"] = excludes
    return trigger


def _mistral(functions: list[tuple[str, Any]], mode: str, parallel: bool, reasoning: bool | str) -> Format:
    # Mistral (v0.3, Nemo): [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
    if mode == "none":
        return {"type": "any_text"}
    calls = [
        {"type": "tag", "begin": '{"name": "' + name + '", "arguments": ', "content": _json(params), "end": "}"}
        for name, params in functions
    ]
    return _call_block(calls, "[TOOL_CALLS][", ", ", "]", mode, parallel, [])


def _deepseek_v3(functions: list[tuple[str, Any]], mode: str, parallel: bool, reasoning: bool | str) -> Format:
    # DeepSeek V3 (its chat template): <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function
    # <｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
    if mode == "none":
        return _with_reasoning({"type": "any_text", "excludes": list(_THINK_EXCLUDES)}, reasoning)
    calls = [
        {
            "type": "tag",
            "begin": "<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + name + "\n```json\n",
            "content": _json(params),
            "end": "\n```<｜tool▁call▁end｜>",
        }
        for name, params in functions
    ]
    block = _call_block(
        calls, "<｜tool▁calls▁begin｜>", "\n", "<｜tool▁calls▁end｜>", mode, parallel, list(_THINK_EXCLUDES)
    )
    return _with_reasoning(block, reasoning)


def _harmony(functions: list[tuple[str, Any]], mode: str, parallel: bool, reasoning: bool | str) -> Format:
    # gpt-oss (OpenAI Harmony): messages on channels, separated by <|start|>assistant; a call is
    # <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>.
    separator = "<|start|>assistant"
    calls = [
        {
            "type": "tag",
            "begin": f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>",
            "content": _json(params),
            "end": "<|call|>",
        }
        for name, params in functions
    ]
    messages: list[Format] = []
    if mode in ("auto", "none"):
        messages.append(
            {
                "type": "tag",
                "begin": "<|channel|>final<|message|>",
                "content": {"type": "any_text"},
                "end": ["<|end|>", "<|return|>"],
            }
        )
    if reasoning:
        messages.append(
            {
                "type": "tag",
                "begin": "<|channel|>analysis<|message|>",
                "content": {"type": "any_text"},
                "end": "<|end|>",
            }
        )
    if mode == "forced":
        calls = calls[:1]
    if parallel or not calls:
        return {"type": "tags_with_separator", "tags": messages + calls, "separator": separator, "at_least_one": True}
    one_call: Format = {
        "type": "tags_with_separator",
        "tags": calls,
        "separator": separator,
        "at_least_one": True,
        "stop_after_first": True,
    }
    if not messages:
        return one_call
    return {
        "type": "or",
        "elements": [
            {"type": "tags_with_separator", "tags": messages, "separator": separator, "at_least_one": True},
            one_call,
            {
                "type": "sequence",
                "elements": [
                    {"type": "tags_with_separator", "tags": messages, "separator": separator, "at_least_one": True},
                    {"type": "const_string", "value": separator},
                    one_call,
                ],
            },
        ],
    }
