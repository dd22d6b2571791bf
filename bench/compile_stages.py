"""Where JSON Schema compile time goes: lowering (Python), serialization, core (C++).

Times each stage of ``Compiler.compile_json_schema`` separately for every schema of a
harness run's cases (the MaskBench sample), warm (each schema is lowered once before it is
timed) and single-threaded, and prints p50/p90/p99 per stage plus the grammar size (program
ints). Use it to see which stage a compile-time change moved.

    python bench/compile_stages.py bench/results/<run>/cases.json

``--case ID`` (repeatable) times only those schemas, best of three, one line each:

    python bench/compile_stages.py bench/results/<run>/cases.json --case Github_hard/o58639

``--lower-only N`` only lowers every schema (once to warm up, then N more times) and prints
nothing else: run it under cachegrind with N = 0 and N = 2, and the difference of the two
instruction counts over 2 × schemas is the lowering's instructions per schema, a measure that
this VM's timing noise does not move:

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        python bench/compile_stages.py bench/results/<run>/cases.json --lower-only 2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import logitgate as lg
from logitgate import _core
from logitgate.compiler import _gc_paused, _limits_forms
from logitgate.frontends.json_schema import schema_to_grammar
from logitgate.grammar.program import serialize
from logitgate.limits import DEFAULT_LIMITS

HERE = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", type=Path, help="cases.json written by bench/run.py (MaskBench suite)")
    ap.add_argument("--lower-only", type=int, metavar="N", help="only lower each schema 1 + N times (see above)")
    ap.add_argument("--case", action="append", metavar="ID", help="time only this schema (repeatable), best of 3")
    args = ap.parse_args()
    cases = [c for c in json.loads(args.cases.read_text())["cases"] if c.get("kind") == "json_schema"]
    if args.case:
        missing = set(args.case) - {c["id"] for c in cases}
        if missing:
            ap.error(f"no JSON Schema case {sorted(missing)} in {args.cases}")
        cases = [c for c in cases if c["id"] in args.case]
    limits = DEFAULT_LIMITS
    if args.lower_only is not None:
        lowered = 0
        for rep in range(1 + args.lower_only):
            for case in cases:
                try:
                    schema_to_grammar(case["source"], limits=limits, check_empty=False)
                    lowered += rep == 0
                except lg.LogitgateError:
                    pass
        print(f"{lowered} schemas lowered {1 + args.lower_only} times", file=sys.stderr)
        return 0
    sys.path.insert(0, str(HERE))
    from common import load_tokenizer, percentile

    vocab = lg.Vocabulary.from_huggingface(load_tokenizer("smollm2"))
    _, core_limits = _limits_forms(limits)
    stages: dict[str, list[float]] = {"lower": [], "serialize": [], "core": []}
    ints = 0
    repeats = 3 if args.case else 1
    for n, case in enumerate(cases, 1):
        best = [float("inf")] * 3
        try:
            schema_to_grammar(case["source"], limits=limits, check_empty=False)  # warm caches
            for _ in range(repeats):
                with _gc_paused():
                    t0 = time.perf_counter()
                    grammar, _ = schema_to_grammar(case["source"], limits=limits, check_empty=False)
                    t1 = time.perf_counter()
                    program, names = serialize(grammar, limits)
                    t2 = time.perf_counter()
                _core.compile(vocab._core, program, names, core_limits)
                t3 = time.perf_counter()
                best = [min(b, (t - u) * 1e3) for b, t, u in zip(best, (t1, t2, t3), (t0, t1, t2), strict=True)]
        except lg.LogitgateError:
            continue  # unsupported schemas are the harness's business
        for name, ms in zip(stages, best, strict=True):
            stages[name].append(ms)
        ints += len(program) // 4
        if args.case:
            lower, ser, core = best
            times = f"lower {lower:6.2f}  serialize {ser:5.2f}  core {core:6.2f} ms"
            print(f"{case['id']:45s} {times}  {len(program) // 4} ints")
        if n % 100 == 0:
            print(f"  {n}/{len(cases)}", file=sys.stderr)
    if args.case:
        return 0
    print(f"{len(stages['core'])} schemas compiled, {ints:,} program ints in all")
    for name, xs in stages.items():
        xs.sort()
        p50, p90, p99 = (percentile(xs, q) for q in (50, 90, 99))  # nearest rank, as the harness
        print(f"{name:9s} p50 {p50:7.2f} ms  p90 {p90:7.2f} ms  p99 {p99:7.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
