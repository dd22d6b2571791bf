"""End-to-end: SGLang's offline Engine with ``grammar_backend="logitgate"`` and the embedded
SmolLM2, a batch of regex, JSON Schema, EBNF and unconstrained requests; every constrained output
is checked. Not a pytest module: SGLang's Engine does not start on this CPU-only machine (the
reason is in docs/sglang.md); run it where SGLang runs (a GPU machine with SGLang's own install):

    python tests/sglang_plugin/engine_e2e.py [--device cuda]

Exits 0 and prints ``e2e ok`` when every output is valid.
"""

from __future__ import annotations

import argparse
import json
import re

import jsonschema

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 16},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}
PHONE = r"\(\d{3}\) \d{3}-\d{4}"
LIST_EBNF = 'root ::= "[" num ("," num){0,3} "]"\nnum ::= [1-9] [0-9]?'
LIST_REGEX = r"\[[1-9][0-9]?(,[1-9][0-9]?){0,3}\]"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import sglang as sgl

    from logitgate.models import model_folder

    llm = sgl.Engine(
        model_path=str(model_folder(quiet=True)),
        device=args.device,
        grammar_backend="logitgate",
        disable_cuda_graph=True,
        mem_fraction_static=0.3,
        random_seed=0,
    )
    base = {"max_new_tokens": 64, "temperature": 0}
    prompts = ["Invent a person as JSON:", "A US phone number:", "A few small numbers:", "Hello"]
    params = [
        {**base, "json_schema": json.dumps(SCHEMA)},
        {**base, "regex": PHONE},
        {**base, "ebnf": LIST_EBNF},
        dict(base),
    ]
    outs = llm.generate(prompts, params)
    texts = [o["text"] for o in outs]
    jsonschema.validate(json.loads(texts[0]), SCHEMA)
    assert re.fullmatch(PHONE, texts[1]), texts[1]
    assert re.fullmatch(LIST_REGEX, texts[2]), texts[2]
    bad = llm.generate(["x"], {**base, "regex": "(ab"})  # SGLang aborts the request with our message
    assert "regex" in json.dumps(bad[0]["meta_info"].get("finish_reason")), bad[0]["meta_info"]
    llm.shutdown()
    for t in texts:
        print(repr(t))
    print("e2e ok")


if __name__ == "__main__":  # SGLang spawns its scheduler process, which imports this module
    main()
