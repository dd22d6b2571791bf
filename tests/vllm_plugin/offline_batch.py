"""One offline vLLM run of the batch in cases.py; writes each request's output as JSON.

    python tests/vllm_plugin/offline_batch.py MODEL_DIR OUT.json [--no-plugin]

With ``--no-plugin`` the engine loads no logitgate processor (the entry-point loader is patched
to skip it; the engine runs in this process so the patch reaches it) and every request runs
unconstrained: the baseline of the unconstrained rows. Without it, both runs use the in-process
engine too, so the two differ only by the processor.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_cases import MAX_TOKENS, batch_cases

SEED = 1234


def main() -> None:
    model_dir, out_path = sys.argv[1], sys.argv[2]
    no_plugin = "--no-plugin" in sys.argv[3:]
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"

    import vllm.v1.sample.logits_processor as lp
    from vllm import LLM, SamplingParams

    if no_plugin:
        loader = lp._load_logitsprocs_plugins
        lp._load_logitsprocs_plugins = lambda: [c for c in loader() if not c.__module__.startswith("logitgate.")]

    llm = LLM(model=model_dir, seed=0, max_model_len=1024, max_num_seqs=8, enforce_eager=True)
    loaded = [type(p).__name__ for p in _logits_processors(llm)]
    tokenizer = llm.get_tokenizer()
    cases = batch_cases()
    prompts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": c["prompt"]}], tokenize=False, add_generation_prompt=True
        )
        for c in cases
    ]
    params = []
    for i, c in enumerate(cases):
        extra = {"logitgate": c["spec"]} if c["spec"] is not None and not no_plugin else None
        params.append(
            SamplingParams(temperature=0.8, top_p=0.95, seed=SEED + i, max_tokens=MAX_TOKENS, extra_args=extra)
        )
    outputs = llm.generate(prompts, params, use_tqdm=False)
    rows = [
        {
            "text": o.outputs[0].text,
            "token_ids": list(o.outputs[0].token_ids),
            "finish_reason": o.outputs[0].finish_reason,
        }
        for o in outputs
    ]
    Path(out_path).write_text(json.dumps({"processors": loaded, "rows": rows}, indent=1))


def _logits_processors(llm: object) -> list[object]:
    """The engine's logits processors (in-process engine only; empty where the path moved)."""
    try:
        runner = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker.model_runner  # type: ignore[attr-defined]
        return list(runner.input_batch.logitsprocs.all)
    except AttributeError:
        return []


if __name__ == "__main__":
    main()
