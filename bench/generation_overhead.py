"""Constrained vs unconstrained generation on the embedded SmolLM2-135M-Instruct (CPU).

For each case the same chat prompt runs three ways (greedy): unconstrained, constrained with
jump-forward, constrained without it. Reported per way: output tokens, forward passes, time per
output token, and for constrained runs the mask overhead per sampled token as a share of the
model's time per forward pass (target <= 2%) and the forward passes jump-forward saved.

    python bench/generation_overhead.py [--repeat 3] [--max-tokens 160] [--json out.json]

Uses the JSON Schema frontend when it is built, else the equivalent GBNF grammars below.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from typing import Any

ORDER_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "items", "status"],
    "properties": {
        "order_id": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 4},
        "status": {"enum": ["pending", "shipped", "delivered", "cancelled"]},
    },
}
ORDER_GBNF = r"""root ::= "{\"order_id\":" int ",\"items\":[" str ("," str){0,3} "],\"status\":" st "}"
int ::= "-"? ("0" | [1-9] [0-9]{0,15})
str ::= "\"" ([^"\\\x00-\x1f] | "\\" ["\\/bfnrt])* "\""
st ::= "\"pending\"" | "\"shipped\"" | "\"delivered\"" | "\"cancelled\""
"""
ENUM_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["sentiment", "language", "topic", "urgency"],
    "properties": {
        "sentiment": {"enum": ["positive", "negative", "neutral"]},
        "language": {"enum": ["english", "french", "german", "spanish"]},
        "topic": {"enum": ["billing", "shipping", "product", "account"]},
        "urgency": {"enum": ["low", "medium", "high"]},
    },
}
ENUM_GBNF = r"""root ::= "{\"sentiment\":" s ",\"language\":" l ",\"topic\":" t ",\"urgency\":" u "}"
s ::= "\"positive\"" | "\"negative\"" | "\"neutral\""
l ::= "\"english\"" | "\"french\"" | "\"german\"" | "\"spanish\""
t ::= "\"billing\"" | "\"shipping\"" | "\"product\"" | "\"account\""
u ::= "\"low\"" | "\"medium\"" | "\"high\""
"""
CASES = [
    ("order", "Order #4821 for widget and gadget is now shipped.", ORDER_SCHEMA, ORDER_GBNF),
    ("enum-heavy", "My parcel still has not arrived after three weeks, this is unacceptable!", ENUM_SCHEMA, ENUM_GBNF),
]


def run(args: argparse.Namespace) -> dict[str, Any]:
    import logitgate as lg
    from logitgate.models import load_default_model

    model, tok = load_default_model()
    use_schema = importlib.util.find_spec("logitgate.frontends.json_schema") is not None
    report: dict[str, Any] = {"structure": "json_schema" if use_schema else "gbnf", "cases": {}}
    lg.generate(model, tok, "warm up", max_tokens=4)
    for name, prompt, schema, gbnf in CASES:
        msgs = [
            {"role": "system", "content": "Reply with JSON that follows this JSON Schema: " + json.dumps(schema)},
            {"role": "user", "content": prompt},
        ]
        kw: dict[str, Any] = {"json_schema": schema} if use_schema else {"ebnf": gbnf}
        ways = {
            "unconstrained": {},
            "constrained": kw,
            "constrained_no_jf": {**kw, "jump_forward": False},
        }
        case: dict[str, Any] = {}
        for way, extra in ways.items():
            rows = []
            for _ in range(args.repeat):
                r = lg.generate(model, tok, msgs, max_tokens=args.max_tokens, **extra)
                t = r.timings
                sampled = max(1, r.completion_tokens - r.forced_tokens)
                model_per_pass = t.model_s_total / max(1, r.forward_passes)
                rows.append(
                    {
                        "tokens": r.completion_tokens,
                        "forced": r.forced_tokens,
                        "passes": r.forward_passes,
                        "ms_per_token": 1e3 * t.per_token_s,
                        "model_ms_per_pass": 1e3 * model_per_pass,
                        "mask_ms_per_sampled_token": 1e3 * t.mask_s_total / sampled,
                        "mask_pct_of_model": 100.0 * (t.mask_s_total / sampled) / model_per_pass,
                        "finish": r.finish_reason,
                        "text": r.text,
                    }
                )
            med = {
                k: statistics.median(row[k] for row in rows) for k in rows[0] if isinstance(rows[0][k], (int, float))
            }
            med["finish"] = rows[0]["finish"]
            med["text"] = rows[0]["text"]
            med["passes_saved_pct"] = 100.0 * (1 - med["passes"] / max(1, med["tokens"]))
            case[way] = med
        report["cases"][name] = case
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--json", help="write the full report here")
    args = ap.parse_args()
    rep = run(args)
    print(f"structure given as: {rep['structure']}")
    head = f"{'case':<11} {'way':<18} {'tokens':>6} {'forced':>6} {'passes':>6} {'saved':>6} {'ms/tok':>7} "
    print(head + f"{'model ms/pass':>13} {'mask ms/tok':>11} {'mask %':>7} finish")
    for name, case in rep["cases"].items():
        for way, m in case.items():
            print(
                f"{name:<11} {way:<18} {m['tokens']:>6.0f} {m['forced']:>6.0f} {m['passes']:>6.0f} "
                f"{m['passes_saved_pct']:>5.1f}% {m['ms_per_token']:>7.1f} {m['model_ms_per_pass']:>13.1f} "
                f"{m['mask_ms_per_sampled_token']:>11.3f} {m['mask_pct_of_model']:>6.2f}% {m['finish']}"
            )
        for way, m in case.items():
            print(f"  {name}/{way}: {m['text'][:110]!r}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rep, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
