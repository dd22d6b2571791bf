"""The many-tools workload (XGrammar PR #753): 400 function tools under one ``triggered_tags``
structure on the Qwen3 tokenizer. Compile time and masks along one output (text, then a call
of tool 237, then text), logitgate against xgrammar and llguidance in one process.

    LOGITGATE_THREADS=1 python bench/many_tools.py [--tools 400] [--repeat 3]

Each engine compiles cold --repeat times (no cache; the best is reported) and walks each
compiled grammar once, filling the mask at every step of the same token sequence (first fills
only: each walk is the grammar's first, so lazily built state is built in it, llguidance's and
ours; the mask statistics are over every step of every walk).
Reported: compile time, mask p50 / p99 / max, and the ratios logitgate / peer. The structure
is lg.tool_call_structure("qwen3", tools) compiled by logitgate and xgrammar from the same JSON;
llguidance gets the equivalent StructTag Lark grammar (its own structural-tag API).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import logitgate as lg
from common import machine_info, percentile, pin_threads

QWEN3 = Path(__file__).resolve().parents[2] / "shared" / "tokenizers" / "qwen3" / "tokenizer.json"
WIDTH = 151936


def make_tools(n: int) -> list[dict[str, Any]]:
    tools = []
    for i in range(n):
        props: dict[str, Any] = {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
        }
        if i % 3 == 0:
            props["mode"] = {"enum": ["fast", "slow", f"m{i}"]}
        if i % 5 == 0:
            props["tags"] = {"type": "array", "items": {"type": "string"}, "maxItems": 4}
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": f"tool_{i:03d}",
                    "parameters": {"type": "object", "properties": props, "required": ["query"]},
                },
            }
        )
    return tools


def output_ids(tok: Any) -> list[int]:
    """The walked output: text, <tool_call> (the special token), a call of tool 237, and the
    closing tag spelled as text (llguidance's StructTag reads only the trigger as a special
    token), then text."""
    call = {"name": "tool_237", "arguments": {"query": "weather in Oslo", "limit": 5}}
    pieces = ["Let me look that up.<tool_call>\n" + json.dumps(call) + "\n</", "tool_call> Done."]
    return [t for p in pieces for t in tok.encode(p, add_special_tokens=False).ids]


def stats(ns: list[float]) -> dict[str, float]:
    s = sorted(ns)
    return {"p50_us": percentile(s, 50) / 1e3, "p99_us": percentile(s, 99) / 1e3, "max_us": s[-1] / 1e3}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args(argv)
    pin_threads()
    import tokenizers
    import xgrammar as xgr
    from transformers import PreTrainedTokenizerFast

    tok = tokenizers.Tokenizer.from_file(str(QWEN3))
    tools = make_tools(args.tools)
    structure = lg.tool_call_structure("qwen3", tools)
    ids = output_ids(tok)
    results: dict[str, Any] = {
        "tools": args.tools,
        "steps": len(ids),
        "walks": args.repeat,
        "command": " ".join(["python", "bench/many_tools.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine_info(),
    }

    # logitgate
    vocab = lg.Vocabulary.from_huggingface(tok, logits_width=WIDTH)
    best = float("inf")
    bits = lg.allocate_mask(vocab)
    times = []
    for _ in range(args.repeat):
        compiler = lg.Compiler(vocab, cache_size=0)
        t0 = time.perf_counter_ns()
        g = compiler.compile_structural_tag(structure)
        best = min(best, time.perf_counter_ns() - t0)
        m = g.matcher()
        for t in ids:
            t0 = time.perf_counter_ns()
            m.fill_mask(bits, row=0)
            times.append(time.perf_counter_ns() - t0)
            assert m.accept(t), t
    results["logitgate"] = {"compile_ms": best / 1e6, **stats(times)}

    # xgrammar
    strings = [""] * WIDTH
    for s, i in tok.get_vocab(with_added_tokens=True).items():
        strings[i] = s
    info = xgr.TokenizerInfo(
        strings, vocab_type=xgr.VocabType.BYTE_LEVEL, vocab_size=WIDTH, stop_token_ids=list(vocab.eos_ids)
    )
    text = json.dumps(structure)
    best = float("inf")
    xbits = xgr.allocate_token_bitmask(1, WIDTH)
    times = []
    for _ in range(args.repeat):
        xc = xgr.GrammarCompiler(info, cache_enabled=False)
        t0 = time.perf_counter_ns()
        xg = xc.compile_structural_tag(text)
        best = min(best, time.perf_counter_ns() - t0)
        xm = xgr.GrammarMatcher(xg)
        for t in ids:
            t0 = time.perf_counter_ns()
            xm.fill_next_token_bitmask(xbits)
            times.append(time.perf_counter_ns() - t0)
            assert xm.accept_token(t), t
    results["xgrammar"] = {"compile_ms": best / 1e6, **stats(times)}

    # llguidance
    try:
        import llguidance
        import llguidance.hf
        import llguidance.numpy as lnp
    except ImportError:
        results["llguidance"] = None
    else:
        ltok = llguidance.hf.from_tokenizer(PreTrainedTokenizerFast(tokenizer_object=tok), n_vocab=WIDTH)
        tags = [
            llguidance.StructTag(
                trigger="<tool_call>",
                begin='<tool_call>\n{"name": "' + t["function"]["name"] + '", "arguments": ',
                grammar=t["function"]["parameters"],
                end="}\n</tool_call>",
            )
            for t in tools
        ]
        lark = llguidance.StructTag.to_grammar(tags)
        best = float("inf")
        lbits = lnp.allocate_token_bitmask(1, ltok.vocab_size)
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter_ns()
            lm = llguidance.LLMatcher(ltok, llguidance.grammar_from("lark", lark), log_level=0)
            best = min(best, time.perf_counter_ns() - t0)
            assert not lm.is_error(), lm.get_error()
            for t in ids:
                t0 = time.perf_counter_ns()
                lnp.fill_next_token_bitmask(lm, lbits, 0)
                times.append(time.perf_counter_ns() - t0)
                assert lm.consume_token(t), (t, lm.get_error())
        results["llguidance"] = {"compile_ms": best / 1e6, **stats(times)}

    ours = results["logitgate"]
    for peer in ("xgrammar", "llguidance"):
        r = results.get(peer)
        if r:
            results[f"ratio_vs_{peer}"] = {k: ours[k] / r[k] for k in ("compile_ms", "p50_us", "max_us") if r[k] > 0}
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
