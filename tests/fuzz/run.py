"""Run one fuzz target (tests/fuzz/targets.py) under atheris, coverage-guided over logitgate's Python.

    .venv/bin/python -m tests.fuzz.run regex -runs=1000000 -timeout=10

Arguments after the target name go to libFuzzer unchanged (``-runs``, ``-timeout`` per input in
seconds, ``-max_len``, ``-max_total_time``, ``-seed``...); ``-entropic_scale_per_exec_time=1`` is
the default (slow inputs are picked less often). The seeds (tests/fuzz/seeds.py) are
written to build/fuzz/seeds/TARGET; the corpus libFuzzer grows lives in build/fuzz/corpus/TARGET;
a crashing or hanging input is written to build/fuzz/artifacts/TARGET/ (``crash-*``,
``timeout-*``). Outcome counts (typed errors by class and code, compiles, walks, mask checks) go
to build/fuzz/outcomes-TARGET.json every OUTCOMES_EVERY inputs and at the last one. The
environment variable ``FUZZ_OUT`` replaces build/fuzz; ``FUZZ_WORKER`` (a suffix such as ``-w1``,
set by the campaign's ``--workers``) names this process's seeds directory and outcomes file, so
that workers of one target share only the corpus.

The C++ core is not coverage-instrumented (that needs clang); it still runs on every input, and
its crashes and aborts end the run like a Python exception.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import sys
import types
from pathlib import Path

import atheris
from tests.fuzz.targets import TARGETS, FuzzContext

# Loaded before instrumenting: the compile methods import them lazily.
import logitgate.frontends.gbnf
import logitgate.frontends.json_schema
import logitgate.frontends.lark
import logitgate.frontends.regex
import logitgate.frontends.structural_tag  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(os.environ.get("FUZZ_OUT", ROOT / "build" / "fuzz"))  # the smoke test points it elsewhere
OUTCOMES_EVERY = 5_000
MAX_LEN = {"masks": 256}  # default 4096 (seeds.MAX_SEED_BYTES)


def _instrument_logitgate() -> int:
    """Coverage feedback from logitgate's Python functions, the lazily imported frontends included.

    ``atheris.instrument_imports`` does not reach them: the editable install's loader executes
    modules without the ``get_code`` that atheris overrides. So the loaded functions are
    patched in place, as ``atheris.instrument_all`` does, but only logitgate's."""
    funcs = [
        f
        for f in gc.get_objects()
        if isinstance(f, types.FunctionType) and (f.__module__ or "").split(".")[0] == "logitgate"
    ]
    for f in funcs:
        atheris.instrument_func(f)
    return len(funcs)


def _runs(argv: list[str]) -> int | None:
    for a in argv:
        if a.startswith("-runs="):
            return int(a.split("=", 1)[1])
    return None


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: python -m tests.fuzz.run {{{','.join(TARGETS)}}} [libFuzzer flags]")
    target = TARGETS[sys.argv[1]]
    flags = sys.argv[2:]
    worker = os.environ.get("FUZZ_WORKER", "")
    seeds = OUT / "seeds" / f"{target.name}{worker}"
    corpus = OUT / "corpus" / target.name
    artifacts = OUT / "artifacts" / target.name
    shutil.rmtree(seeds, ignore_errors=True)
    for d in (seeds, corpus, artifacts):
        d.mkdir(parents=True, exist_ok=True)
    for s in target.seeds():
        (seeds / hashlib.sha1(s).hexdigest()).write_bytes(s)
    outcomes_path = OUT / f"outcomes-{target.name}{worker}.json"
    print(f"INFO: instrumented {_instrument_logitgate()} logitgate functions", file=sys.stderr)
    ctx = FuzzContext.create()
    last = _runs(flags)
    count = 0

    def one_input(data: bytes) -> None:
        nonlocal count
        target.run(ctx, data)
        count += 1
        if count % OUTCOMES_EVERY == 0 or count == last:
            payload = {"target": target.name, "inputs": count, "outcomes": dict(ctx.outcomes.most_common())}
            outcomes_path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")

    if not any(f.startswith("-max_len=") for f in flags):
        flags.append(f"-max_len={MAX_LEN.get(target.name, 4096)}")
    # Inputs are picked with their energy scaled by their execution time: the targets are
    # bound by Python frontends whose cost varies by orders of magnitude between inputs, and
    # without it the slow inputs' mutations take most of the time.
    if not any(f.startswith("-entropic_scale_per_exec_time=") for f in flags):
        flags.append("-entropic_scale_per_exec_time=1")
    args = [sys.argv[0], *flags, f"-artifact_prefix={artifacts}/", "-print_final_stats=1", str(corpus), str(seeds)]
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
