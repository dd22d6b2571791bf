"""Function tools for a model whose chat template has none (SmolLM2's): the prompt that lists
the tools, the constrained output format of tool calls, and its parsing.

Output format (one block per call, blocks separated by a newline)::

    <tool_call>
    {"name":"get_weather","arguments":{"city":"Paris"}}
    </tool_call>

The JSON line is constrained to ``{"name": <an allowed tool>, "arguments": <that tool's
parameters schema>}``: strict tools get exactly their schema. With ``tool_choice`` "required" or
a named tool the output is tool calls only; with "auto" it is tool calls or free text that does
not start with ``<``; ``parallel_tool_calls`` false allows one call. The whole structure is built
by :func:`tool_call_grammar`, the one function to swap for another format.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from ..compiler import CompiledGrammar, Compiler
from ..errors import SchemaError
from ..grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, Seq
from ..grammar.ir import Ref as RuleRef
from .protocol import ApiError

__all__ = ["ToolPlan", "parse_tool_calls", "plan_tools", "render_tool_history", "tool_call_grammar", "tools_prompt"]

CALL_OPEN = "<tool_call>\n"
CALL_CLOSE = "\n</tool_call>"
_CALL_RE = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.S)


@dataclass(frozen=True)
class ToolPlan:
    """What the request allows: ``mode`` "auto" (text or calls) or "required" (calls only), the
    tools that may be called (``functions``: OpenAI's ``function`` objects), one call or several."""

    mode: str
    functions: tuple[dict[str, Any], ...]
    parallel: bool

    def key(self) -> str:
        """Canonical text of the plan (part of the compile cache's key)."""
        return json.dumps([self.mode, self.functions, self.parallel], sort_keys=True, separators=(",", ":"))


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
        out.append(
            {
                "name": name,
                "description": fn.get("description", ""),
                "parameters": params,
                "strict": bool(fn.get("strict", False)),
            }
        )
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
    by_name = {f["name"]: f for f in functions}
    choice = "auto" if tool_choice is None else tool_choice
    mode, allowed = "auto", functions
    if choice == "none":
        return None
    if choice in ("auto", "required"):
        mode = choice
    elif isinstance(choice, dict) and choice.get("type") == "function":
        name = (choice.get("function") or {}).get("name")
        if name not in by_name:
            raise ApiError(
                400, f"tool_choice names an unknown function {name!r}", code="invalid_value", param="tool_choice"
            )
        mode, allowed = "required", [by_name[name]]
    elif isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        spec = choice.get("allowed_tools") or {}
        mode = spec.get("mode", "auto")
        if mode not in ("auto", "required"):
            raise ApiError(
                400,
                "tool_choice.allowed_tools.mode must be 'auto' or 'required'",
                code="invalid_value",
                param="tool_choice",
            )
        names = [(t.get("function") or {}).get("name", t.get("name")) for t in spec.get("tools", [])]
        unknown = [n for n in names if n not in by_name]
        if unknown or not names:
            raise ApiError(
                400,
                f"tool_choice.allowed_tools: unknown or no tools {unknown}",
                code="invalid_value",
                param="tool_choice",
            )
        allowed = [by_name[n] for n in names]
    else:
        raise ApiError(400, f"unsupported tool_choice {choice!r}", code="invalid_value", param="tool_choice")
    return ToolPlan(mode, tuple(allowed), parallel is not False)


def tools_prompt(plan: ToolPlan) -> str:
    """The system text that shows the model its tools and the call format."""
    listing = "\n".join(
        json.dumps({k: f[k] for k in ("name", "description", "parameters")}, separators=(",", ":"))
        for f in plan.functions
    )
    return (
        "You can call functions. To call one, answer with only:\n"
        f"{CALL_OPEN}"
        '{"name":<function name>,"arguments":<its arguments as a JSON object>}'
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
            blocks.append(f'{CALL_OPEN}{{"name":{json.dumps(fn.get("name"))},"arguments":{args}}}{CALL_CLOSE}')
        return {"role": "assistant", "content": "\n".join([content, *blocks]).strip()}
    if role == "tool":
        return {"role": "user", "content": f"<tool_response>\n{content}\n</tool_response>"}
    return {"role": role, "content": content}


def _local_refs(schema: Any, base: str) -> Any:
    """``schema`` with every local ``$ref`` ("#...") moved under ``base`` (the schema is placed
    at ``base`` inside a larger document)."""
    if isinstance(schema, dict):
        out = {}
        for k, v in schema.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#"):
                out[k] = base + v[1:]
            else:
                out[k] = _local_refs(v, base)
        return out
    if isinstance(schema, list):
        return [_local_refs(v, base) for v in schema]
    return schema


def _call_schema(plan: ToolPlan) -> dict[str, Any]:
    """The JSON Schema of one call: ``{"name": <tool>, "arguments": <its parameters>}``, each
    tool's parameters placed at ``#/$defs/t<i>``."""
    defs = {f"t{i}": _local_refs(f["parameters"], f"#/$defs/t{i}") for i, f in enumerate(plan.functions)}
    branches = [
        {
            "type": "object",
            "properties": {"name": {"const": f["name"]}, "arguments": {"$ref": f"#/$defs/t{i}"}},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for i, f in enumerate(plan.functions)
    ]
    return {"anyOf": branches, "$defs": defs} if len(branches) > 1 else {**branches[0], "$defs": defs}


def tool_call_grammar(compiler: Compiler, plan: ToolPlan) -> CompiledGrammar:
    """The compiled structure of the model's answer under ``plan``. Schema errors name the
    tool's parameters (``tools[i].function.parameters#/...``)."""
    strict = all(f["strict"] for f in plan.functions)
    try:
        call = compiler.compile_json_schema(_call_schema(plan), whitespace="compact", strict=strict)
    except SchemaError as e:
        message = str(e)
        for i, f in enumerate(plan.functions):
            message = message.replace(f"#/$defs/t{i}", f"tools[function {f['name']}].function.parameters#")
        raise ApiError(400, f"tools: {message}", code=e.code, param="tools") from None
    rules = dict(call.grammar.rules)
    names = {"call": "tc_call", "calls": "tc_calls", "text": "tc_text", "root": "tc_root"}
    assert not set(names.values()) & set(rules), "tool rule names collide with the schema's"
    rules[names["call"]] = Seq((Literal(CALL_OPEN.encode()), RuleRef(call.grammar.root), Literal(CALL_CLOSE.encode())))
    more = Repeat(Seq((Literal(b"\n"), RuleRef(names["call"]))), 0, None if plan.parallel else 0)
    rules[names["calls"]] = Seq((RuleRef(names["call"]), more))
    if plan.mode == "auto":
        # Free text that cannot be mistaken for a call: empty, or not starting with "<".
        any_char = CharClass((), negated=True)
        text = Alt((Literal(b""), Seq((CharClass(((ord("<"), ord("<")),), negated=True), Repeat(any_char, 0, None)))))
        rules[names["text"]] = text
        rules[names["root"]] = Alt((RuleRef(names["calls"]), RuleRef(names["text"])))
    else:
        rules[names["root"]] = RuleRef(names["calls"])
    return compiler.compile_grammar(Grammar(rules, root=names["root"]))


def parse_tool_calls(text: str) -> list[dict[str, Any]] | None:
    """The tool calls in a complete answer, in OpenAI's shape (ids, JSON ``arguments``), or None
    when the answer is text."""
    if not text.startswith(CALL_OPEN):
        return None
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
    return calls
