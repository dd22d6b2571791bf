"""Load test of ``logitgate serve`` over loopback (docs/server.md, "Load").

Starts the server (the embedded SmolLM2-135M) on 127.0.0.1 and a free port, unless ``--url``
names a running one, then:

1. ``--clients`` concurrent clients (default 50) send ``--requests`` requests (default 100):
   JSON Schema, Pydantic-style strict schema, regex, choice and strict tool calls, half of them
   streamed. Every output is checked (jsonschema, regex, choice, tool arguments): invalid outputs
   and 5xx answers are counted. Reports p50/p99 latency and total output tokens/s.
2. The same ``--compare`` requests (default 16) sent by 8 concurrent clients, then one at a time:
   output tokens/s of each and their ratio (batched decoding vs sequential).

After each phase, where the engine's time went (from ``GET /metrics``: seconds per phase of the
engine loop, forward passes with their mean rows and positions), so a lost ratio can be read.

Bounded: ``--timeout`` seconds per request, the whole run stops after ``--max-seconds``.
Usage: ``.venv/bin/python bench/serve_load.py [--clients 50] [--requests 100] [--compare 16]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jsonschema

MODEL = "smollm2-135m-instruct"
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "maximum": 150}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
ORDER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer", "minimum": 1, "maximum": 99999},
        "status": {"enum": ["pending", "shipped", "delivered"]},
        "items": {"type": "array", "items": {"type": "string", "maxLength": 10}, "minItems": 1, "maxItems": 3},
    },
    "required": ["id", "status", "items"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 16}, "celsius": {"type": "boolean"}},
            "required": ["city", "celsius"],
            "additionalProperties": False,
        },
    },
}
PHONE = r"[0-9]{3}-[0-9]{4}"


def _case(i: int) -> tuple[dict[str, Any], Any]:
    """Request ``i`` of the mix and its checker (output text or message -> valid)."""
    kind = i % 5
    msg = [{"role": "user", "content": f"Order #{4000 + i} for a widget shipped to Alice, 31, in Paris."}]
    body: dict[str, Any] = {"model": MODEL, "messages": msg, "max_tokens": 48, "temperature": 0.7, "seed": i}
    if kind == 0:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "p", "schema": PERSON, "strict": True},
        }
        return body, lambda m: _valid_json(m.get("content"), PERSON)
    if kind == 1:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "o", "schema": ORDER, "strict": True}}
        return body, lambda m: _valid_json(m.get("content"), ORDER)
    if kind == 2:
        body["structured_outputs"] = {"regex": PHONE}
        return body, lambda m: re.fullmatch(PHONE, m.get("content") or "") is not None
    if kind == 3:
        body["structured_outputs"] = {"choice": ["shipped", "pending", "lost"]}
        return body, lambda m: m.get("content") in ("shipped", "pending", "lost")
    body["tools"] = [WEATHER_TOOL]
    body["tool_choice"] = "required"
    body["parallel_tool_calls"] = False
    params = WEATHER_TOOL["function"]["parameters"]  # type: ignore[index]
    return (
        body,
        lambda m: (
            len(m.get("tool_calls") or []) == 1 and _valid_json(m["tool_calls"][0]["function"]["arguments"], params)
        ),
    )


#: The first request id of the warm-up (out of the range the phases use).
_WARM = 1000


def _valid_json(text: str | None, schema: Any) -> bool:
    try:
        jsonschema.validate(json.loads(text or ""), schema)
    except (ValueError, jsonschema.ValidationError):
        return False
    return True


async def _one(client: httpx.AsyncClient, url: str, body: dict[str, Any], stream: bool) -> dict[str, Any]:
    """Sends one request; returns status, latency, output tokens and the assistant message."""
    t0 = time.perf_counter()
    if not stream:
        r = await client.post(f"{url}/v1/chat/completions", json=body)
        if r.status_code != 200:
            return {"status": r.status_code, "latency": time.perf_counter() - t0, "tokens": 0, "message": {}}
        data = r.json()
        return {
            "status": 200,
            "latency": time.perf_counter() - t0,
            "tokens": data["usage"]["completion_tokens"],
            "message": data["choices"][0]["message"],
        }
    body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    message: dict[str, Any] = {"content": "", "tool_calls": []}
    tokens = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        if r.status_code != 200:
            return {"status": r.status_code, "latency": time.perf_counter() - t0, "tokens": 0, "message": {}}
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                return {"status": 500, "latency": time.perf_counter() - t0, "tokens": 0, "message": {}}
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for c in chunk["choices"]:
                message["content"] += c["delta"].get("content") or ""
                for call in c["delta"].get("tool_calls") or []:
                    message["tool_calls"].append({"function": call["function"]})
    return {"status": 200, "latency": time.perf_counter() - t0, "tokens": tokens, "message": message}


async def _run(url: str, ids: list[int], clients: int, timeout: float) -> tuple[list[dict[str, Any]], float]:
    """Requests ``ids`` of the mix from ``clients`` concurrent workers; results and wall time."""
    todo = list(ids)
    results: list[dict[str, Any]] = []

    async def worker(client: httpx.AsyncClient) -> None:
        while todo:
            i = todo.pop(0)
            body, check = _case(i)
            try:
                res = await _one(client, url, body, stream=i % 2 == 1)
            except httpx.HTTPError as e:  # no answer (--timeout passed, connection lost): not a 5xx
                res = {"status": 0, "latency": timeout, "tokens": 0, "message": {}, "error": repr(e)}
            res["valid"] = res["status"] == 200 and check(res["message"])
            results.append(res)

    t0 = time.perf_counter()
    limits = httpx.Limits(max_connections=clients + 4)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:
        await asyncio.gather(*(worker(client) for _ in range(clients)))
    return results, time.perf_counter() - t0


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))] if xs else float("nan")


def _report(name: str, results: list[dict[str, Any]], wall: float) -> dict[str, Any]:
    lat = [r["latency"] for r in results]
    tokens = sum(r["tokens"] for r in results)
    out = {
        "requests": len(results),
        "invalid": sum(not r["valid"] for r in results if r["status"] == 200),
        "5xx": sum(r["status"] >= 500 for r in results),
        "no_answer": sum(r["status"] == 0 for r in results),
        "non_200": sum(r["status"] != 200 for r in results),
        "p50_s": round(_pct(lat, 0.5), 3),
        "p99_s": round(_pct(lat, 0.99), 3),
        "tokens": tokens,
        "wall_s": round(wall, 2),
        "tokens_per_s": round(tokens / wall, 2) if wall > 0 else 0.0,
    }
    print(f"{name}: {json.dumps(out)}", flush=True)
    return out


_ENGINE_LINE = re.compile(r'^logitgate_engine_(\w+)_total\{\w+="(\w+)"\} (\S+)$')


async def _engine_counters(client: httpx.AsyncClient, url: str) -> dict[tuple[str, str], float]:
    """The engine's profile counters (``logitgate_engine_*``) from the server's metrics."""
    r = await client.get(f"{url}/metrics")
    out = {}
    for line in r.text.splitlines():
        m = _ENGINE_LINE.match(line)
        if m:
            out[(m[1], m[2])] = float(m[3])
    return out


def _breakdown(
    name: str, before: dict[tuple[str, str], float], after: dict[tuple[str, str], float], wall: float
) -> dict[str, Any]:
    """What the engine did between two readings: seconds per phase (and the share of ``wall``,
    and the decode thread's CPU time in it); per kind of pass the count, mean rows and mean
    positions."""
    d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    phases = {ph: round(v, 2) for (what, ph), v in d.items() if what == "seconds"}
    passes = {}
    for (what, kind), n in d.items():
        if what == "passes" and n:
            passes[kind] = {
                "passes": int(n),
                "mean_rows": round(d[("rows", kind)] / n, 2),
                "mean_positions": round(d[("positions", kind)] / n, 1),
                "ms_per_pass": round(1000 * d[("seconds", kind)] / n, 1),
            }
    cpu = {ph: round(v, 2) for (what, ph), v in d.items() if what == "cpu_seconds"}
    shares = " ".join(
        f"{ph} {v:.1f}s ({100 * v / wall:.0f}%, cpu {cpu.get(ph, 0.0):.1f}s)" for ph, v in phases.items() if v >= 0.005
    )
    print(f"  {name} engine: {shares}", flush=True)
    for kind, x in passes.items():
        print(f"  {name} {kind} passes: {json.dumps(x)}", flush=True)
    return {"seconds": phases, "cpu_seconds": cpu, "passes": passes}


async def _measured(name: str, url: str, ids: list[int], clients: int, timeout: float) -> dict[str, Any]:
    """Runs ``ids`` with ``clients`` workers; the report, with the engine's breakdown."""
    async with httpx.AsyncClient(timeout=timeout) as client:
        before = await _engine_counters(client, url)
        results, wall = await _run(url, ids, clients, timeout)
        after = await _engine_counters(client, url)
    out = _report(name, results, wall)
    out["engine"] = _breakdown(name, before, after, wall)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    cli = Path(sys.executable).with_name("logitgate")
    proc = subprocess.Popen([str(cli), "serve", "--port", str(port), "--max-batch", "64"])
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("the server did not start")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server (default: start one on loopback)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=100)
    ap.add_argument("--compare", type=int, default=16, help="requests of the batched-vs-sequential comparison")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per request")
    ap.add_argument("--max-seconds", type=float, default=1800.0, help="the whole run")
    args = ap.parse_args()
    if args.url and not re.match(r"https?://(127\.0\.0\.1|localhost|\[::1\])[:/]", args.url):
        raise SystemExit("--url must be a loopback address")
    proc, url = (None, args.url) if args.url else _start_server()
    try:
        summary = asyncio.run(asyncio.wait_for(_all(url, args), args.max_seconds))
        print(json.dumps(summary, indent=1))
        phases = ("load", "batched_8", "sequential")
        ok = all(summary[k][x] == 0 for k in phases for x in ("invalid", "5xx", "no_answer"))
        print(
            f"RATIO batched (8 concurrent) / one at a time, output tokens/s: {summary['ratio']:.2f}x (target >= 2)",
            flush=True,
        )
        return 0 if ok else 1
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)


async def _all(url: str, args: argparse.Namespace) -> dict[str, Any]:
    # Warm the compile cache, and the prefix cache with two different prompts of each kind (it
    # stores what distinct prompts share): neither phase below then starts colder than the other.
    await _run(url, list(range(_WARM, _WARM + 10)), 5, args.timeout)
    load = await _measured(
        f"load ({args.clients} clients)", url, list(range(args.requests)), args.clients, args.timeout
    )
    ids = list(range(args.compare))
    batched = await _measured("8 concurrent", url, ids, 8, args.timeout)
    sequential = await _measured("one at a time", url, ids, 1, args.timeout)
    rate = {k: r["tokens"] / r["wall_s"] if r["wall_s"] else 0.0 for k, r in (("b", batched), ("s", sequential))}
    ratio = rate["b"] / rate["s"] if rate["s"] else float("nan")
    print(f"batched / sequential tokens/s: {ratio:.2f}x", flush=True)
    return {
        "load": load,
        "batched_8": batched,
        "sequential": sequential,
        "ratio": round(ratio, 2),
        "threads": os.environ.get("LOGITGATE_THREADS"),
    }


if __name__ == "__main__":
    sys.exit(main())
