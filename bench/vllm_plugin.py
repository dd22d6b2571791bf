"""vLLM's own structured outputs (xgrammar backend) against the logitgate logits processor, in one
engine and one run: the same eight JSON Schema requests as one batch, greedy, through each route
in turn; tokens/s of each (generated tokens over wall time of the batch) and the ratio, and every
output checked against its schema.

    HF_HUB_OFFLINE=1 VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 \\
        .venv-vllm/bin/python bench/vllm_plugin.py [--rounds 3] [--out bench/results/NAME.json]

(`make bench-vllm`.) The routes alternate round by round after one untimed warm-up round each
(compiles cached on both sides), so load on the machine falls on both; the median round is
reported. The engine loads the logitgate processor for both routes: on the native route it holds
no rows and returns at once.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "vllm_plugin"))

from vllm_cases import MAX_TOKENS, schema_cases  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    for k, v in {"HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1"}.items():
        os.environ.setdefault(k, v)

    import jsonschema
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    import logitgate
    from logitgate.models import model_folder

    model = str(model_folder(quiet=True))
    llm = LLM(
        model=model,
        seed=0,
        max_model_len=1024,
        max_num_seqs=8,
        enforce_eager=True,
        structured_outputs_config={"backend": "xgrammar"},
    )
    tokenizer = llm.get_tokenizer()
    cases = schema_cases()
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": c["prompt"]}], tokenize=False, add_generation_prompt=True
        )
        for c in cases
    ]

    def params(route: str) -> list[Any]:
        if route == "native":
            return [
                SamplingParams(
                    temperature=0, max_tokens=MAX_TOKENS, structured_outputs=StructuredOutputsParams(json=c["schema"])
                )
                for c in cases
            ]
        return [
            SamplingParams(temperature=0, max_tokens=MAX_TOKENS, extra_args={"logitgate": {"json_schema": c["schema"]}})
            for c in cases
        ]

    def run(route: str) -> dict[str, Any]:
        ps = params(route)
        t0 = time.perf_counter()
        outs = llm.generate(prompts, ps, use_tqdm=False)
        wall = time.perf_counter() - t0
        tokens = sum(len(o.outputs[0].token_ids) for o in outs)
        valid = 0
        for case, o in zip(cases, outs, strict=True):
            try:
                jsonschema.validate(json.loads(o.outputs[0].text), case["schema"])
                valid += 1
            except (ValueError, jsonschema.ValidationError):
                pass
        return {
            "wall_s": wall,
            "tokens": tokens,
            "tokens_per_s": tokens / wall,
            "valid": valid,
            "finish": [o.outputs[0].finish_reason for o in outs],
            "texts": [o.outputs[0].text for o in outs],
        }

    routes = ("native", "logitgate")
    for route in routes:  # warm-up: compiles, first-call paths
        run(route)
    rounds: dict[str, list[dict[str, Any]]] = {r: [] for r in routes}
    for _ in range(args.rounds):
        for route in routes:
            rounds[route].append(run(route))

    summary: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "versions": {"vllm": vllm.__version__, "logitgate": logitgate.__version__, "xgrammar": _version("xgrammar")},
        "batch": len(cases),
        "max_tokens": MAX_TOKENS,
        "rounds": args.rounds,
    }
    for route in routes:
        rs = rounds[route]
        summary[route] = {
            "tokens_per_s_median": statistics.median(r["tokens_per_s"] for r in rs),
            "tokens_per_s_rounds": [round(r["tokens_per_s"], 2) for r in rs],
            "tokens_rounds": [r["tokens"] for r in rs],
            "valid": f"{min(r['valid'] for r in rs)}/{len(cases)} (worst round)",
            "finish_reasons": sorted({f for r in rs for f in r["finish"]}),
            "sample_output": rs[-1]["texts"][0],
        }
    summary["ratio_logitgate_over_native"] = (
        summary["logitgate"]["tokens_per_s_median"] / summary["native"]["tokens_per_s_median"]
    )
    text = json.dumps(summary, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "absent"


if __name__ == "__main__":
    main()
