"""``logitgate`` command line.

Subcommands:
  generate  run a model (the embedded SmolLM2-135M-Instruct by default) under a JSON Schema,
            Pydantic model, regex, GBNF grammar or choice list; print the output on stdout.
  demo      a guided tour: the allowed tokens at each step of a random constrained walk.
  debug     print a structure's grammar as EBNF, its compiled size, and the mask after a prefix
            (for bug reports).
  budget    the shortest and longest output of a structure in bytes and tokens (sizes --max-tokens).
  lint      a JSON Schema checked for a provider's strict mode (or logitgate's) and design problems.
  inspect   what a compiled JSON Schema enforces per JSON pointer, and its token budget.

Each subcommand takes its structure the same way (``add_structure_arguments``) and compiles it
in one place (``compile_structure``); every failure goes through one place (``report``), which
prints one line ``logitgate: error [code]: ...`` and returns the exit code. ``generate``
compiles against the tokenizer before it loads the model's weights, so a mistake in the
structure is reported in about a second, not after the model has loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from logitgate.errors import LogitgateError, OutputValidationError

from .budget import add_budget_command, add_generate_flags, report_budget
from .inspect import add_inspect_command
from .lint import add_lint_command
from .reasoning import add_reasoning_flags, reasoning_kwargs, report_reasoning
from .repetition import add_repetition_flags, repetition_kwargs
from .serve import add_serve_command
from .trace_html import add_trace_html_flag, check_trace_html_path, write_trace_html

__all__ = ["EXIT_CODES", "main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
EXIT_TRUNCATED = 3
EXIT_INVALID_OUTPUT = 4
EXIT_INTERRUPTED = 130

EXIT_CODES = f"""exit codes:
  {EXIT_OK}    success
  {EXIT_FAILED}    demo: the walk did not complete; debug: the prefix is not viable; lint: an error
       finding; inspect: the schema did not compile
  {EXIT_ERROR}    an error in the input (arguments, a file, a grammar, regex or schema, a --pydantic
       class, a --model or --vocab path): one line "logitgate: error [code]: ..." on stderr
  {EXIT_TRUNCATED}    generate: --max-tokens ran out before the output was complete (the partial text
       and finish_reason=length on stderr)
  {EXIT_INVALID_OUTPUT}    generate: the output matches the Pydantic model's schema but its validators
       reject it (the text on stderr)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)"""

DEMO_GRAMMAR = r"""# A tiny order record: JSON with a fixed shape.
root   ::= "{" ws "\"id\":" ws id "," ws "\"status\":" ws status "," ws "\"items\":" ws items "}"
id     ::= [1-9] [0-9]{0,5}
status ::= "\"pending\"" | "\"shipped\"" | "\"delivered\""
items  ::= "[" ws item ("," ws item){0,2} "]"
item   ::= "\"" [a-z]{1,12} "\""
ws     ::= " "?
"""


class CommandError(LogitgateError):
    """A mistake the command line found in its input: an argument, a file, a ``--pydantic``
    class, a ``--model`` or ``--vocab`` path. ``code`` names the kind."""

    code = "usage"


# -- arguments --------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with our one-line error format (argparse's own prints the usage first)."""

    def error(self, message: str) -> NoReturn:
        print(f"logitgate: error [usage]: {self.prog}: {message} (see '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def _int_at_least(lo: int) -> Any:
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if n < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, got {n}")
        return n

    return parse


def _float_in(lo: float, hi: float | None) -> Any:
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not (x >= lo and (hi is None or x <= hi)):  # also refuses nan
            bounds = f"between {lo:g} and {hi:g}" if hi is not None else f"at least {lo:g}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {text}")
        return x

    return parse


def add_structure_arguments(p: argparse.ArgumentParser, *, what: str) -> None:
    """The structure (at most one) and the JSON Schema options, shared by every subcommand."""
    src = p.add_mutually_exclusive_group()
    src.add_argument("--schema", metavar="FILE", help="a JSON Schema file")
    src.add_argument("--pydantic", metavar="MODULE:CLASS", help="a Pydantic v2 model (module importable from here)")
    src.add_argument("--regex", metavar="PATTERN", help="a regular expression the whole output matches")
    src.add_argument("--grammar", metavar="FILE", help="a GBNF grammar file (llama.cpp's dialect, start rule 'root')")
    src.add_argument("--lark", metavar="FILE", help="a Lark grammar file (llguidance's dialect, start rule 'start')")
    src.add_argument(
        "--choice", metavar="A,B,...", help="comma-separated alternatives (spaces around each are stripped)"
    )
    p.set_defaults(structure_default=what)
    opts = p.add_argument_group("JSON Schema options (--schema, --pydantic; see docs/json_schema.md)")
    opts.add_argument(
        "--strict",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="forbid properties a schema does not list where additionalProperties is absent "
        "(default: off for --schema, as JSON Schema says; on for --pydantic)",
    )
    opts.add_argument(
        "--lenient",
        action="store_true",
        help="drop unsupported constraints instead of failing, and list them on stderr (default: off)",
    )
    opts.add_argument(
        "--property-order",
        choices=("schema", "any"),
        default="schema",
        help="'schema': listed properties in the schema's order; 'any': any order (default: schema)",
    )
    opts.add_argument(
        "--whitespace",
        choices=("compact", "flexible"),
        default="compact",
        help="JSON whitespace between tokens: none, or JSON's own (default: compact)",
    )
    opts.add_argument(
        "--max-whitespace",
        type=_int_at_least(0),
        metavar="N",
        help="with --whitespace flexible: per gap one newline then at most N spaces (default: unbounded)",
    )


def schema_options(args: argparse.Namespace, *, pydantic: bool) -> dict[str, Any]:
    strict = args.strict if args.strict is not None else pydantic
    opts: dict[str, Any] = {
        "strict": strict,
        "lenient": args.lenient,
        "property_order": args.property_order,
        "whitespace": args.whitespace,
    }
    if args.max_whitespace is not None:
        opts["max_whitespace"] = args.max_whitespace
    return opts


# -- the structure ----------------------------------------------------------------------------


@dataclass
class StructureSpec:
    """The structure the arguments ask for, read (files, the --pydantic class) but not compiled."""

    kind: str  # "schema", "pydantic", "regex", "ebnf", "lark", "choice", or "none"
    source: Any  # schema or grammar text, the model class, the pattern, the choice list
    label: str  # how messages name it: "--schema order.json"
    options: dict[str, Any]  # JSON Schema options

    def schema(self) -> Any:
        """The JSON Schema a model is shown in the system message (None for other kinds)."""
        import json

        if self.kind == "schema":
            return json.loads(self.source)
        if self.kind == "pydantic":
            return self.source.model_json_schema()
        return None


@dataclass
class Structure:
    """A :class:`StructureSpec` compiled for one vocabulary."""

    spec: StructureSpec
    grammar: Any  # CompiledGrammar, or None: unconstrained

    @property
    def label(self) -> str:
        return self.spec.label


def _read_text(flag: str, path: str) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise CommandError(f"{flag} {path}: no such file", code="file-not-found") from None
    except IsADirectoryError:
        raise CommandError(f"{flag} {path}: is a folder, not a file", code="file-unreadable") from None
    except OSError as e:
        raise CommandError(f"{flag} {path}: cannot read: {e.strerror or e}", code="file-unreadable") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CommandError(
            f"{flag} {path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})", code="file-encoding"
        ) from None


def _load_pydantic(spec: str) -> type:
    """``module:Class`` (the module importable from the current folder or ``sys.path``)."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CommandError(f"--pydantic takes MODULE:CLASS, got {spec!r}", code="pydantic-spec")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        obj: object = importlib.import_module(module_name)
    except Exception as e:  # an import runs the module's code: any error can come out
        why = f"no module named {module_name!r}" if isinstance(e, ModuleNotFoundError) else _one_line(e)
        raise CommandError(f"--pydantic {spec}: cannot import {module_name!r}: {why}", code="pydantic-import") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CommandError(f"--pydantic {spec}: {module_name!r} has no attribute {attr!r}", code="pydantic-class")
        obj = getattr(obj, part)
    if not isinstance(obj, type) or not hasattr(obj, "model_json_schema"):
        raise CommandError(f"--pydantic {spec}: not a Pydantic v2 model class", code="pydantic-class")
    return obj


def _choices(text: str) -> list[str]:
    items = [c.strip() for c in text.split(",")]
    for i, c in enumerate(items, 1):
        if not c:
            raise CommandError(f"--choice {text!r}: alternative {i} is empty", code="choice-empty")
    return items


def read_structure(args: argparse.Namespace) -> StructureSpec:
    """The structure the arguments give (or the subcommand's default), with its files read and
    its --pydantic class imported: every mistake that needs no compiling shows here."""
    if args.schema:
        text = _read_text("--schema", args.schema)
        return StructureSpec("schema", text, f"--schema {args.schema}", schema_options(args, pydantic=False))
    if args.pydantic:
        label = f"--pydantic {args.pydantic}"
        model = _load_pydantic(args.pydantic)
        try:
            model.model_json_schema()  # type: ignore[attr-defined]
        except Exception as e:  # Pydantic's own errors, for a type without a JSON Schema
            raise CommandError(f"{label}: no JSON Schema: {_one_line(e)}", code="pydantic-schema") from None
        return StructureSpec("pydantic", model, label, schema_options(args, pydantic=True))
    if args.regex is not None:
        return StructureSpec("regex", args.regex, f"--regex {args.regex!r}", {})
    if args.grammar:
        return StructureSpec("ebnf", _read_text("--grammar", args.grammar), f"--grammar {args.grammar}", {})
    if args.lark:
        return StructureSpec("lark", _read_text("--lark", args.lark), f"--lark {args.lark}", {})
    if args.choice is not None:
        return StructureSpec("choice", _choices(args.choice), f"--choice {args.choice!r}", {})
    if args.structure_default == "demo":
        return StructureSpec("ebnf", DEMO_GRAMMAR, "the demo grammar", {})
    if args.structure_default == "required":
        raise CommandError("give a structure: --schema, --pydantic, --regex, --grammar or --choice", code="usage")
    return StructureSpec("none", None, "no structure", {})


def compile_structure(spec: StructureSpec, compiler: Any) -> Structure:
    """Compiles ``spec`` with ``compiler``; errors are typed and name the argument."""
    compile_with = {
        "schema": compiler.compile_json_schema,
        "pydantic": compiler.compile_pydantic,
        "regex": compiler.compile_regex,
        "ebnf": compiler.compile_ebnf,
        "lark": compiler.compile_lark,
        "choice": compiler.compile_choice,
    }.get(spec.kind)
    if compile_with is None:
        return Structure(spec, None)
    with _naming(spec.label):
        return Structure(spec, compile_with(spec.source, **spec.options))


def check_structure(spec: StructureSpec) -> None:
    """Compiles ``spec`` against a vocabulary of the 256 bytes, in milliseconds and without
    torch: the frontends' and the core's errors depend on the language, not on the tokenizer,
    so they show before any model file is read."""
    import logitgate as lg

    compile_structure(spec, lg.Compiler(lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)])))


@contextlib.contextmanager
def _naming(label: str) -> Iterator[None]:
    """A compile error as a :class:`CommandError` (same code) naming the argument it came from."""
    try:
        yield
    except CommandError:
        raise
    except LogitgateError as e:
        raise CommandError(f"{label}: {e}", code=e.code) from e


def _warn_dropped(structure: Structure) -> None:
    for entry in getattr(structure.grammar, "dropped", ()):
        print(f"logitgate: warning: {structure.label}: dropped {entry}", file=sys.stderr)


# -- vocabularies and models ------------------------------------------------------------------


def _load_vocab(path: str | None) -> Any:
    """``--vocab``: a GGUF file, a ``.tiktoken`` rank file, or a tokenizer folder / tokenizer.json
    (default: the embedded SmolLM2's GGUF)."""
    import logitgate as lg
    from logitgate.models import default_gguf_path

    if path is None:
        try:
            p = default_gguf_path()
        except FileNotFoundError as e:
            raise CommandError(str(e), code="model-not-found") from None
    else:
        p = Path(path)
        if not p.exists():
            raise CommandError(f"--vocab {path}: no such file or folder", code="vocab-not-found")
    if p.suffix == ".gguf":
        return lg.Vocabulary.from_gguf(p)
    if p.suffix == ".tiktoken":
        return lg.Vocabulary.from_tiktoken(p)
    return lg.Vocabulary.from_huggingface(str(p))


def _check_model_path(path: str | None) -> None:
    """``--model`` names a model folder or a .gguf file (checked before anything loads)."""
    if path is None:
        return
    p = Path(path).expanduser()
    if not p.exists():
        raise CommandError(f"--model {path}: no such file or folder", code="model-not-found")
    if p.is_dir() and not (p / "config.json").is_file():
        raise CommandError(f"--model {path}: a folder without config.json is not a model", code="model-load")
    if not p.is_dir() and p.suffix != ".gguf":
        raise CommandError(f"--model {path}: not a model folder or a .gguf file", code="model-load")


@contextlib.contextmanager
def _model_errors(path: str | None) -> Iterator[None]:
    """Model loading failures as one-line errors naming ``--model``."""
    name = f"--model {path}" if path else "the embedded model"
    try:
        yield
    except LogitgateError:
        raise
    except FileNotFoundError as e:
        raise CommandError(f"{name}: {_one_line(e)}", code="model-not-found") from None
    except (OSError, ValueError, KeyError, ImportError) as e:
        raise CommandError(f"{name}: cannot load: {_one_line(e)}", code="model-load") from None


class _Progress:
    """Progress lines on stderr (``--quiet`` silences them), so loading is never silent."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self._t0 = time.perf_counter()

    def start(self, what: str) -> None:
        self._t0 = time.perf_counter()
        if not self.quiet:
            print(f"logitgate: {what}...", file=sys.stderr, flush=True)

    def elapsed(self) -> float:
        return time.perf_counter() - self._t0

    def say(self, line: str) -> None:
        if not self.quiet:
            print(f"logitgate: {line}", file=sys.stderr, flush=True)


# -- subcommands ------------------------------------------------------------------------------


def _show(b: bytes) -> str:
    return repr(b.decode("utf-8", errors="backslashreplace"))


def _allowed(bits: Any, width: int) -> Any:
    import numpy as np

    from logitgate.masks import mask_to_bool

    return np.flatnonzero(mask_to_bool(bits[0], width))


def cmd_demo(args: argparse.Namespace) -> int:
    import logitgate as lg

    spec = read_structure(args)
    check_structure(spec)
    t0 = time.perf_counter()
    vocab = _load_vocab(args.vocab)
    print(f"vocabulary: {vocab!r} ({(time.perf_counter() - t0) * 1e3:.0f} ms)")
    t0 = time.perf_counter()
    structure = compile_structure(spec, lg.Compiler(vocab))
    compiled = structure.grammar
    _warn_dropped(structure)
    print(f"structure: {structure.label}")
    if structure.label == "the demo grammar":
        print(DEMO_GRAMMAR)
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
        if not text:  # complete, and the vocabulary has no EOS to end with
            break
        # Prefer longer tokens so the walk reads like text a model would write.
        tok = max(rng.sample(text, min(8, len(text))), key=lambda t: len(vocab.token_bytes(t) or b""))
        m.accept(tok)
        out += vocab.token_bytes(tok) or b""
        print(f"         -> {_show(vocab.token_bytes(tok) or b'')} (id {tok})")
    print(f"\nresult: {out.decode('utf-8', errors='replace')}")
    print(f"complete: {m.is_complete()}  masks: mean {sum(mask_us) / len(mask_us):.1f} µs, max {max(mask_us):.1f} µs")
    return EXIT_OK if m.is_complete() else EXIT_FAILED


def cmd_debug(args: argparse.Namespace) -> int:
    import logitgate as lg

    spec = read_structure(args)
    check_structure(spec)
    vocab = _load_vocab(args.vocab)
    structure = compile_structure(spec, lg.Compiler(vocab))
    compiled = structure.grammar
    _warn_dropped(structure)
    print(compiled.to_ebnf())
    print(repr(compiled))
    m = compiled.matcher()
    prefix = args.prefix.encode("utf-8")
    if not m.accept_bytes(prefix):
        print(f"prefix {_show(prefix)} is not a viable prefix of the grammar")
        return EXIT_FAILED
    bits = lg.allocate_mask(vocab)
    m.fill_mask(bits, row=0)
    allowed = _allowed(bits, vocab.size)
    print(f"after {_show(prefix)}: complete={m.is_complete()} forced={_show(m.forced_bytes())}")
    print(
        f"{len(allowed)} allowed tokens: "
        + ", ".join(f"{int(t)}:{_show(vocab.token_bytes(int(t)) or b'')}" for t in allowed[: args.show])
    )
    return EXIT_OK


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


@dataclass
class _Setup:
    """Seconds spent before generation, for ``--stats``."""

    tokenizer_s: float = 0.0
    vocab_s: float = 0.0
    compile_s: float = 0.0
    model_s: float = 0.0


def cmd_generate(args: argparse.Namespace) -> int:
    spec = read_structure(args)
    check_structure(spec)
    _check_model_path(args.model)
    check_trace_html_path(args)
    # Only now torch and transformers are imported (seconds).
    import logitgate as lg
    from logitgate import models
    from logitgate.generation import compiler_for, validate_pydantic
    from logitgate.integrations.transformers import vocabulary_for, vocabulary_for_width

    progress = _Progress(args.quiet)
    setup = _Setup()
    progress.start(f"loading the tokenizer of {args.model or 'the embedded SmolLM2-135M-Instruct'}")
    with _model_errors(args.model):
        tokenizer = models.load_tokenizer(args.model, quiet=args.quiet)
        width = models.config_logits_width(args.model)
    setup.tokenizer_s = progress.elapsed()
    t0 = time.perf_counter()
    vocab = vocabulary_for_width(tokenizer, width)
    setup.vocab_s = time.perf_counter() - t0
    # Compiled before the weights load: what depends on the tokenizer shows before them too.
    t0 = time.perf_counter()
    structure = compile_structure(spec, compiler_for(vocab))
    setup.compile_s = time.perf_counter() - t0
    _warn_dropped(structure)
    if structure.grammar is not None:
        progress.say(f"compiled {structure.label} in {setup.compile_s * 1e3:.1f} ms")
    progress.start("loading the model")
    with _model_errors(args.model):
        model, _ = models.load_model(args.model, quiet=args.quiet, tokenizer=tokenizer)
    setup.model_s = progress.elapsed()
    if structure.grammar is not None and vocabulary_for(model, tokenizer) is not vocab:
        # The config announced another logits width than the weights have: compile for those.
        structure = compile_structure(spec, compiler_for(vocabulary_for(model, tokenizer)))
    progress.say(f"model loaded in {setup.model_s:.1f} s; generating")
    stream = args.stream if args.stream is not None else sys.stdout.isatty()
    prompt: object = args.prompt if args.raw else _messages(args, spec.schema())
    res = lg.generate(
        model,
        tokenizer,
        prompt,  # type: ignore[arg-type]
        grammar=structure.grammar,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        raw=args.raw,
        on_token=_print_trace_step if args.trace else None,
        on_text=_write_stdout if stream else None,
        budget_aware=not args.no_budget,
        trace=args.trace_html is not None,
        **repetition_kwargs(args),
        **reasoning_kwargs(args),
    )
    if stream:
        print(flush=True)
    write_trace_html(args, res, f"logitgate generate {structure.label}: {args.prompt}")
    if args.stats:
        _print_stats(res, setup)
    report_budget(res, args.stats)
    report_reasoning(res)
    if not res.complete:
        print(f"logitgate: finish_reason={res.finish_reason} (truncated)", file=sys.stderr)
        if not stream:
            print(res.text, file=sys.stderr)
        return EXIT_TRUNCATED
    if spec.kind == "pydantic":
        try:
            validate_pydantic(spec.source, res.text)
        except OutputValidationError as e:
            code = report(e)
            if not stream:
                print(res.text, file=sys.stderr)
            return code
    if not stream:
        print(res.text)
    return EXIT_OK


def _write_stdout(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()


def _print_trace_step(st: Any) -> None:
    allowed = "forced" if st.forced else f"{st.allowed} allowed"
    print(f"step {st.step:3d}: {allowed:>14}  -> {st.token_id:6d} {st.text!r}", file=sys.stderr, flush=True)


def _print_stats(res: Any, setup: _Setup) -> None:
    t = res.timings
    n = res.completion_tokens
    sampled = max(1, n - res.forced_tokens)
    decode_passes = res.forward_passes - 1  # the first pass is the prefill
    model_per_pass = (t.model_s_total - t.prefill_s) / decode_passes if decode_passes > 0 else 0.0
    mask_per_tok = t.mask_s_total / sampled
    share = 100.0 * res.forced_tokens / max(1, n)
    overhead = f"{100.0 * mask_per_tok / model_per_pass:.2f}%" if model_per_pass > 0 else "n/a"
    speed = f"{1 / t.per_token_s:.1f} tokens/s, {t.per_token_s * 1e3:.1f} ms/token" if t.per_token_s > 0 else "n/a"
    if decode_passes <= 0:
        speed = "n/a (one output token)"
    lines = [
        f"tokenizer       {setup.tokenizer_s:.2f} s, vocabulary {setup.vocab_s * 1e3:.0f} ms",
        f"compile         {setup.compile_s * 1e3:.1f} ms (vocabulary excluded)",
        f"model load      {setup.model_s:.2f} s",
        f"prefill         {t.prefill_s * 1e3:.1f} ms (prompt {res.prompt_tokens} tokens)",
        f"first token     {t.first_token_s * 1e3:.1f} ms (prefill included)",
        f"tokens          {n} output, {res.forced_tokens} forced ({share:.0f}%), "
        f"{res.forward_passes} forward passes ({res.forward_passes_saved} saved)",
        f"speed           {speed} after the first token (prefill excluded)",
        f"mask overhead   {mask_per_tok * 1e3:.3f} ms per sampled token = {overhead} of the model's time per "
        f"decode pass ({model_per_pass * 1e3:.1f} ms, prefill excluded)",
        f"finish_reason   {res.finish_reason}",
    ]
    for line in lines:
        print(f"stats: {line}", file=sys.stderr)


# -- errors -----------------------------------------------------------------------------------


def _one_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def report(e: LogitgateError | KeyboardInterrupt) -> int:
    """Prints ``e`` for a person (one line; a grammar error's excerpt and caret follow,
    indented) and returns the exit code."""
    if isinstance(e, KeyboardInterrupt):
        print("\nlogitgate: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    first, *rest = str(e).splitlines() or [""]
    print(f"logitgate: error [{e.code}]: {first}", file=sys.stderr)
    for line in rest:
        print(line, file=sys.stderr)
    return EXIT_INVALID_OUTPUT if isinstance(e, OutputValidationError) else EXIT_ERROR


# -- main -------------------------------------------------------------------------------------


def _subcommand(sub: Any, name: str, summary: str, description: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=description,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return p


def _add_vocab_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--vocab",
        metavar="PATH",
        help="a .gguf file, a .tiktoken file, or a tokenizer folder (default: the embedded SmolLM2's)",
    )


def build_parser() -> argparse.ArgumentParser:
    from logitgate import __version__

    parser = _Parser(
        prog="logitgate",
        description="Structured output for LLMs, invalid by construction.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"logitgate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = _subcommand(
        sub,
        "generate",
        "generate structured output with a model (default: the embedded SmolLM2-135M)",
        "Generate output that matches a structure. The output goes to stdout; progress, --trace and --stats "
        "go to stderr.",
    )
    add_structure_arguments(p, what="none")
    p.add_argument(
        "--model",
        metavar="PATH",
        help="a transformers model folder or a .gguf file (default: the embedded SmolLM2-135M-Instruct)",
    )
    p.add_argument(
        "--max-tokens", type=_int_at_least(1), default=256, metavar="N", help="output token budget (default: 256)"
    )
    p.add_argument("--temperature", type=_float_in(0.0, None), default=0.0, metavar="T", help="0 = greedy (default: 0)")
    p.add_argument(
        "--top-p", type=_float_in(0.0, 1.0), default=1.0, metavar="P", help="nucleus sampling; 0 = greedy (default: 1)"
    )
    p.add_argument("--seed", type=int, metavar="N", help="seed for sampling (default: random)")
    p.add_argument(
        "--system", metavar="TEXT", help="system message (default for --schema/--pydantic: one that shows the schema)"
    )
    p.add_argument("--raw", action="store_true", help="send PROMPT as is, without the chat template (default: off)")
    p.add_argument(
        "--stream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write the output as it is generated (default: when stdout is a terminal)",
    )
    p.add_argument(
        "--stats", action="store_true", help="timings, tokens/s, forced share, mask overhead on stderr (default: off)"
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="each output token with its allowed-token count, on stderr as generated (default: off)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr (default: off)")
    add_generate_flags(p)
    add_reasoning_flags(p)
    add_repetition_flags(p)
    add_trace_html_flag(p)
    p.add_argument("prompt", help="the user message (or, with --raw, the whole prompt)")
    p.set_defaults(func=cmd_generate)

    p = _subcommand(
        sub,
        "demo",
        "a constrained random walk, step by step (default: a small order grammar)",
        "Walk randomly through a structure's masks on a vocabulary and print the allowed tokens at each step.",
    )
    add_structure_arguments(p, what="demo")
    _add_vocab_argument(p)
    p.add_argument("--seed", type=int, default=4821, metavar="N", help="seed of the walk (default: 4821)")
    p.add_argument("--max-steps", type=_int_at_least(1), default=64, metavar="N", help="steps at most (default: 64)")
    p.set_defaults(func=cmd_demo)

    p = _subcommand(
        sub,
        "debug",
        "print a structure's grammar, size and the mask after a prefix",
        "Print a structure's grammar as EBNF, its compiled size, and the allowed tokens after "
        "a prefix of the output (for bug reports).",
    )
    add_structure_arguments(p, what="required")
    p.add_argument("--prefix", default="", metavar="TEXT", help="the output so far (default: empty)")
    _add_vocab_argument(p)
    p.add_argument(
        "--show", type=_int_at_least(0), default=20, metavar="N", help="allowed tokens to print (default: 20)"
    )
    p.set_defaults(func=cmd_debug)

    add_budget_command(sub)
    add_serve_command(sub)
    add_lint_command(sub)
    add_inspect_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args))
    except (LogitgateError, KeyboardInterrupt) as e:
        return report(e)


if __name__ == "__main__":
    sys.exit(main())
