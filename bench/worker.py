"""One engine's worker process: loads the tokenizer and the engine, then measures cases in order.

Protocol (one JSON object per line on the original stdout; everything the libraries print goes to stderr):
  {"ev": "ready", "version", "load_s", "setup_s", "eos_ids"}          once, after the tokenizer-info build
  {"ev": "start", "i"}                                                before each case (the parent's timeout clock)
  {"ev": "result", "i", "status", "compile_us", "first_mask_us", "mask_us", "rss_delta", "detail"}
The parent kills us on a per-case timeout and restarts a fresh worker at the next case, so a hang or a crash
costs one case, never the run.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import pin_threads

pin_threads()


def _emit(out: TextIO, obj: dict[str, Any]) -> None:
    out.write(json.dumps(obj) + "\n")
    out.flush()


_SWEEP = bytearray(64 << 20)


def _evict_caches() -> None:
    """Writes 64 MiB (more than L2 and the TLBs cover), so that every engine's compile starts
    from the same cold caches."""
    ctypes.memset((ctypes.c_char * len(_SWEEP)).from_buffer(_SWEEP), 1, len(_SWEEP))


def run_case(eng: Any, case: dict[str, Any], observe: Callable[[Any], None] | None = None) -> dict[str, Any]:
    """Compile once (cold), then walk every instance's tokens, timing each mask fill.
    ``observe(matcher)`` runs after each fill that lands in ``mask_us``, outside the timing
    (bench/fill_kinds.py tells copies from walks with it)."""
    from common import rss_peak, rss_reset_peak
    from engines import CompileError, Unsupported

    res: dict[str, Any] = {"status": "pass", "compile_us": None, "first_mask_us": None, "mask_us": [], "detail": ""}
    rss0 = rss_reset_peak()
    _evict_caches()
    try:
        t0 = time.perf_counter_ns()
        compiled = eng.compile(case["kind"], case["source"])
        res["compile_us"] = (time.perf_counter_ns() - t0) / 1e3
    except Unsupported as exc:
        res.update(status="unsupported", detail=str(exc)[:300])
        return res
    except CompileError as exc:
        res.update(status="compile_error", detail=str(exc)[:300])
        return res
    masks: list[float] = res["mask_us"]
    first = True
    try:
        for inst, tokens in enumerate(case["instances"]):
            m = eng.matcher(compiled)
            for pos in range(len(tokens) + 1):
                t0 = time.perf_counter_ns()
                eng.fill(m)
                dt = (time.perf_counter_ns() - t0) / 1e3
                if first:
                    res["first_mask_us"] = dt
                    first = False
                else:
                    masks.append(dt)
                    if observe is not None:
                        observe(m)
                if pos == len(tokens):
                    if not any(eng.allowed(e) for e in eng.eos_ids):
                        res.update(status="not_final", detail=f"instance {inst}: EOS not allowed at the end")
                    break
                tid = tokens[pos]
                if not eng.allowed(tid):
                    res.update(status="reject", detail=f"instance {inst}: token {tid} masked at position {pos}")
                    break
                if not eng.accept(m, tid):
                    res.update(status="reject", detail=f"instance {inst}: token {tid} not accepted at position {pos}")
                    break
            if res["status"] != "pass":
                break
    except Exception as exc:  # an engine exception is a result, not a worker crash
        res.update(status="error", detail=f"{type(exc).__name__}: {exc}"[:300])
    res["rss_delta"] = max(0, rss_peak() - rss0)
    del compiled
    return res


def run_case_quiet(eng: Any, case: dict[str, Any]) -> dict[str, Any]:
    """run_case with Python's cyclic GC off, so collector pauses don't land inside timed calls."""
    gc.collect()
    gc.disable()
    try:
        return run_case(eng, case)
    finally:
        gc.enable()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()

    # Keep the protocol channel clean: fd 1 now points at stderr; we write to a private duplicate.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    from common import load_tokenizer
    from engines import ENGINES

    with open(args.cases) as fh:
        cases = json.load(fh)["cases"]
    t0 = time.perf_counter()
    tok = load_tokenizer(args.tokenizer)
    load_s = time.perf_counter() - t0
    eng = ENGINES[args.engine]()
    t0 = time.perf_counter()
    eng.setup(tok)
    setup_s = time.perf_counter() - t0
    _emit(
        out,
        {"ev": "ready", "version": eng.version(), "load_s": load_s, "setup_s": setup_s, "eos_ids": list(eng.eos_ids)},
    )
    # What setup left (the tokenizer's objects, the libraries: 250k+ objects with the Hugging
    # Face tokenizers) is frozen out of the per-case collections. A full collection walks every
    # tracked object; walked just before each timed compile, that left each engine's compile
    # as cold as the walk happened to leave it (llguidance's far colder than a cache sweep
    # does). The cold state is _evict_caches' now, the same for every engine.
    gc.collect()
    gc.freeze()
    _evict_caches()  # (its pages resident before the first case's RSS is read)
    for i in range(args.start, len(cases)):
        _emit(out, {"ev": "start", "i": i})
        try:
            res = run_case_quiet(eng, cases[i])
        except Exception as exc:
            res = {"status": "error", "detail": f"{type(exc).__name__}: {exc}"[:300], "mask_us": []}
            traceback.print_exc()
        res.update(ev="result", i=i)
        _emit(out, res)
    _emit(out, {"ev": "done"})
    gc.unfreeze()  # (frozen objects are not freed at exit: their owners would report leaks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
