"""Function tools: a request's ``tools``, ``tool_choice`` and ``parallel_tool_calls`` as the
structural tag of :func:`logitgate.tool_call_structure` (the library's one builder of tool-call
structures), the system text that shows the model its tools, and the calls read back from
the model's answer.

The server writes calls in the Hermes / Qwen3 format (:data:`TOOL_FAMILY`, one block per call,
free text around them where ``tool_choice`` allows it)::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

The prompt: a chat template that renders Hermes tool calls itself (it holds ``<tool_call>``:
Qwen2.5's, Qwen3's, :func:`template_renders_tools`) gets the request's tools, its assistant
``tool_calls`` and ``tool`` messages as they are; any other (SmolLM2's, the default model's:
ChatML with no tool format) gets the server's system text listing the tools
(:func:`tools_prompt`) and the earlier calls and results written in the same format
(:func:`render_tool_history`). Request validation (names, the shape of ``parameters``) stays
here, as 400s naming the field; what ``tool_choice`` allows (auto, required, a named function,
``allowed_tools``, one call or several) is the builder's.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from ..compiler import CompiledGrammar, Compiler
from ..errors import LimitExceeded, SchemaError, StructuralTagError, UsageError
from ..frontends.json_schema import schema_to_grammar
from ..generation import prompt_ids
from ..tool_calls import tool_call_structure
from .protocol import ApiError, ChatMessage

__all__ = [
    "TOOL_FAMILY",
    "ToolPlan",
    "chat_prompt_ids",
    "plan_tools",
    "render_tool_history",
    "split_tool_calls",
    "template_renders_tools",
    "tool_call_grammar",
    "tools_prompt",
]

TOOL_FAMILY = "qwen3"
"""The :func:`~logitgate.tool_call_structure` family whose format the server writes."""

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "\n</tool_call>"
TRIGGER = "<tool_call>"
"""Text that starts a call: free text never holds it (the structure's trigger)."""
_CALL_RE = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


@dataclass(frozen=True)
class ToolPlan:
    """What the request allows: ``structure``, the structural tag of the answer
    (:func:`~logitgate.tool_call_structure`), and ``functions``, every tool of the request
    (OpenAI's ``function`` objects, for the prompt: the model sees all its tools even where
    ``tool_choice`` allows some only, as OpenAI's ``allowed_tools`` intends)."""

    structure: dict[str, Any]
    functions: tuple[dict[str, Any], ...]

    def key(self) -> str:
        """Canonical text of the structure (part of the compile cache's key)."""
        return json.dumps(self.structure, separators=(",", ":"), ensure_ascii=False)


def _functions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function")
        if tool.get("type") != "function" or not isinstance(fn, dict):
            raise ApiError(
                400, f"tools[{i}]: only function tools are supported", code="unsupported_tool", param=f"tools[{i}]"
            )
        name = fn.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ApiError(
                400,
                f"tools[{i}].function.name must match [A-Za-z0-9_-]{{1,64}}",
                code="invalid_value",
                param=f"tools[{i}].function.name",
            )
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise ApiError(
                400,
                f"tools[{i}].function.parameters must be an object",
                code="invalid_value",
                param=f"tools[{i}].function.parameters",
            )
        out.append({"name": name, "description": fn.get("description", ""), "parameters": params})
    if len({f["name"] for f in out}) != len(out):
        raise ApiError(400, "tools: function names must be unique", code="invalid_value", param="tools")
    return out


def plan_tools(tools: list[dict[str, Any]] | None, tool_choice: Any, parallel: bool | None) -> ToolPlan | None:
    """The tool plan of a request, or None when no tool may be called (no tools, or
    ``tool_choice`` "none")."""
    if not tools:
        if tool_choice not in (None, "none"):
            raise ApiError(400, "tool_choice needs tools", code="invalid_value", param="tool_choice")
        return None
    functions = _functions(tools)
    if tool_choice == "none":
        return None
    as_tools = [{"type": "function", "function": {"name": f["name"], "parameters": f["parameters"]}} for f in functions]
    try:
        structure = tool_call_structure(
            TOOL_FAMILY,
            as_tools,
            "auto" if tool_choice is None else tool_choice,
            parallel is not False,
            calls_only=True,  # required: calls, no text around them
        )
    except UsageError as e:  # the tools were checked above: what is left is tool_choice's
        raise ApiError(400, f"tool_choice: {e}", code="invalid_value", param="tool_choice") from None
    return ToolPlan(structure, tuple(functions))


def tools_prompt(plan: ToolPlan) -> str:
    """The system text that shows the model its tools and the call format."""
    listing = "\n".join(
        json.dumps({k: f[k] for k in ("name", "description", "parameters")}, separators=(",", ":"))
        for f in plan.functions
    )
    return (
        "You can call functions. To call one, answer with only:\n"
        f"{CALL_OPEN}"
        '{"name": <function name>, "arguments": <its arguments as a JSON object>}'
        f"{CALL_CLOSE}\n"
        "one block per call. The functions:\n" + listing
    )


def render_tool_history(role: str, content: str, tool_calls: list[dict[str, Any]] | None) -> dict[str, str]:
    """An earlier turn of a tool conversation as a chat-template message."""
    if role == "assistant" and tool_calls:
        blocks = []
        for call in tool_calls:
            fn = call.get("function") or {}
            args = fn.get("arguments") or "{}"
            blocks.append(f'{CALL_OPEN}{{"name": {json.dumps(fn.get("name"))}, "arguments": {args}}}{CALL_CLOSE}')
        return {"role": "assistant", "content": "\n".join([content, *blocks]).strip()}
    if role == "tool":
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}
    return {"role": role, "content": content}


def tool_call_grammar(compiler: Compiler, plan: ToolPlan) -> CompiledGrammar:
    """The compiled structure of the model's answer under ``plan``. A tool whose parameters
    cannot be compiled is a 400 naming it (``tools[i].function.parameters``), the keyword and
    its JSON pointer."""
    try:
        return compiler.compile_structural_tag(plan.structure)
    except StructuralTagError as e:
        if e.code in ("structural-tag-schema", "structural-tag-limit"):
            _raise_for_parameters(compiler, plan)
        raise ApiError(400, f"tools: {e}", code=e.code, param="tools") from None


def _raise_for_parameters(compiler: Compiler, plan: ToolPlan) -> None:
    """Raises the 400 of the first tool whose parameters schema does not lower (the structural
    tag's error locates the schema inside the tag, not in the request)."""
    for i, f in enumerate(plan.functions):
        try:
            schema_to_grammar(f["parameters"], limits=compiler.limits, check_empty=False)
        except (SchemaError, LimitExceeded) as e:  # (a limit: minItems past max_repeat, say)
            param = f"tools[{i}].function.parameters"
            raise ApiError(400, f"{param} ({f['name']}): {e}", code=e.code, param=param) from None


def split_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """A complete answer's text outside its calls (stripped; None when empty) and its calls in
    OpenAI's shape (ids, JSON ``arguments``); no calls: the whole text and ``[]``."""
    calls = []
    for m in _CALL_RE.finditer(text):
        obj = json.loads(m.group(1))
        calls.append(
            {
                "id": f"call_{secrets.token_hex(12)}",
                "type": "function",
                "function": {"name": obj["name"], "arguments": json.dumps(obj["arguments"], ensure_ascii=False)},
            }
        )
    if not calls:
        return text, []
    content = _CALL_RE.sub("", text).strip()
    return content or None, calls


def template_renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template lists tools and writes calls in the Hermes format
    itself (Qwen2.5's and Qwen3's templates: they hold ``<tool_call>``)."""
    template = getattr(tokenizer, "chat_template", None)
    return isinstance(template, str) and TRIGGER in template and "tools" in template


def chat_prompt_ids(tokenizer: Any, messages: list[ChatMessage], plan: ToolPlan | None, native: bool) -> list[int]:
    """The prompt's token ids: with ``native`` (:func:`template_renders_tools`) the template
    renders the tools and the tool turns; otherwise the server's tool text and rendering."""
    if native:
        turns: list[dict[str, Any]] = []
        for m in messages:
            turn: dict[str, Any] = {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
            if m.tool_calls:
                turn["tool_calls"] = m.tool_calls
            if m.tool_call_id is not None:
                turn["tool_call_id"] = m.tool_call_id
            turns.append(turn)
        tools = None
        if plan is not None:
            keys = ("name", "description", "parameters")
            tools = [{"type": "function", "function": {k: f[k] for k in keys}} for f in plan.functions]
        text = tokenizer.apply_chat_template(turns, tools=tools, tokenize=False, add_generation_prompt=True)
        return [int(i) for i in tokenizer.encode(text, add_special_tokens=False)]
    rendered = [render_tool_history(m.role, m.text(), m.tool_calls) for m in messages]
    for r in rendered:
        if r["role"] == "developer":
            r["role"] = "system"
    if plan is not None:
        if rendered and rendered[0]["role"] == "system":
            rendered[0] = {"role": "system", "content": rendered[0]["content"] + "\n\n" + tools_prompt(plan)}
        else:
            rendered.insert(0, {"role": "system", "content": tools_prompt(plan)})
    return prompt_ids(tokenizer, rendered)
