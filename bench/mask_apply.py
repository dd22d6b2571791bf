"""Cost of applying a token bitmask to logits: the core's in-place kernel against unpacking the
mask to booleans and ``masked_fill_`` (the way logitgate applied masks before the kernel).

Two parts, both in one process so that the machine's load is shared alike:

- micro: one logits row of SmolLM2's width (49,152), masks of three densities (allowed share),
  float32 / bfloat16 / float16 torch tensors and a float32 numpy array; median microseconds
  per application.
- generate: ``lg.generate`` on the order example (``examples/order.json``, the prompt of
  ``make demo``, the embedded SmolLM2-135M, greedy), alternating the two ways of applying the
  mask; the mask overhead per sampled token is ``timings.mask_s_total`` (filling and applying)
  over the forward passes that sampled under a mask. Both ways produce the same text.

    python bench/mask_apply.py [--repeat 5] [--skip-generate] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import logitgate as lg
import logitgate.generation as generation
from logitgate.masks import apply_mask_counted, mask_to_bool
from logitgate.models import set_threads

WIDTH = 49_152  # SmolLM2's logits width
ORDER_SCHEMA = Path(__file__).resolve().parent.parent / "examples" / "order.json"
ORDER_PROMPT = "Order #4821 for widget and gadget is now shipped."


def unpack_and_fill(logits: Any, bits: np.ndarray) -> int:
    """The previous way: unpack the bits to booleans, pad to the logits' width, masked_fill_.
    Returns a non-zero count (generate only checks it against 0; counting would add time)."""
    keep = torch.from_numpy(mask_to_bool(bits[0], min(logits.shape[-1], bits.shape[-1] * 32)))
    if keep.shape[0] < logits.shape[-1]:
        keep = torch.nn.functional.pad(keep, (0, logits.shape[-1] - keep.shape[0]))
    logits.masked_fill_(~keep.to(logits.device), float("-inf"))
    return 1


def micro(reps: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    rows = []
    warm_bits = np.zeros((1, WIDTH // 32), dtype=np.int32)
    for _ in range(reps):  # torch's thread pool and the first page faults, not measured
        for fn in (apply_mask_counted, unpack_and_fill):
            fn(torch.zeros(WIDTH), warm_bits)
    for density in (0.001, 0.5, 0.999):
        allowed = rng.random(WIDTH) < density
        bits = np.packbits(allowed, bitorder="little").view(np.int32).reshape(1, -1).copy()
        for dtype in (torch.float32, torch.bfloat16, torch.float16, "numpy float32"):
            base: Any = (
                np.random.default_rng(1).standard_normal(WIDTH).astype(np.float32)
                if isinstance(dtype, str)
                else torch.randn(WIDTH, generator=torch.Generator().manual_seed(1)).to(dtype)
            )
            ways = {"core": apply_mask_counted}
            if not isinstance(dtype, str):
                ways["unpack+masked_fill_"] = unpack_and_fill
            row: dict[str, Any] = {"density": density, "dtype": str(dtype)}
            for name, fn in ways.items():
                times = []
                for _ in range(reps):
                    x = base.copy() if isinstance(base, np.ndarray) else base.clone()
                    t0 = time.perf_counter()
                    fn(x, bits)
                    times.append(time.perf_counter() - t0)
                row[name] = 1e6 * statistics.median(times)
            rows.append(row)
    return rows


class TimedMatcher:
    """A matcher whose fill_mask calls are timed into `log`; everything else is the matcher's."""

    def __init__(self, matcher: Any, log: list[float]) -> None:
        self._matcher, self._log = matcher, log

    def fill_mask(self, bits: np.ndarray, row: int = 0) -> None:
        t0 = time.perf_counter()
        self._matcher.fill_mask(bits, row)
        self._log.append(time.perf_counter() - t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._matcher, name)


def generate_overhead(repeat: int) -> dict[str, Any]:
    from logitgate.compiler import CompiledGrammar
    from logitgate.models import load_default_model

    model, tok = load_default_model(quiet=True)
    schema = json.loads(ORDER_SCHEMA.read_text(encoding="utf-8"))
    system = "Extract the information from the user's message as JSON that follows this JSON Schema: "
    msgs = [
        {"role": "system", "content": system + json.dumps(schema, separators=(",", ":"))},
        {"role": "user", "content": ORDER_PROMPT},
    ]
    # Warm up: the vocabulary, the compile, and the masks the grammar memoizes on first visits.
    lg.generate(model, tok, msgs, json_schema=schema)
    per_way: dict[str, list[float]] = {"core": [], "unpack+masked_fill_": []}
    # Per step, fill + apply timed apart: on a loaded machine one preempted step moves a
    # run's mean, the median of the steps much less.
    steps: dict[str, list[float]] = {"core": [], "unpack+masked_fill_": []}
    parts: dict[str, dict[str, list[float]]] = {way: {"fill": [], "apply": []} for way in steps}
    texts: dict[str, str] = {}
    new_matcher = CompiledGrammar.matcher
    for _ in range(repeat):
        for way, fn in (("unpack+masked_fill_", unpack_and_fill), ("core", apply_mask_counted)):
            fills: list[float] = []
            applies: list[float] = []

            def timed_apply(logits: Any, bits: np.ndarray, fn: Any = fn, applies: list[float] = applies) -> int:
                t0 = time.perf_counter()
                n = int(fn(logits, bits))
                applies.append(time.perf_counter() - t0)
                return n

            generation.apply_mask_counted = timed_apply  # the one mask-application call of the decode loop
            CompiledGrammar.matcher = lambda self, fills=fills: TimedMatcher(new_matcher(self), fills)  # type: ignore[method-assign]
            try:
                r = lg.generate(model, tok, msgs, json_schema=schema)
            finally:
                generation.apply_mask_counted = apply_mask_counted
                CompiledGrammar.matcher = new_matcher  # type: ignore[method-assign]
            per_way[way].append(1e6 * r.timings.mask_s_total / max(1, r.forward_passes))
            steps[way] += [1e6 * (f + a) for f, a in zip(fills, applies, strict=True)]
            parts[way]["fill"] += [1e6 * f for f in fills]
            parts[way]["apply"] += [1e6 * a for a in applies]
            texts[way] = r.text
    assert texts["core"] == texts["unpack+masked_fill_"], texts
    med = {way: statistics.median(v) for way, v in per_way.items()}
    step_med = {way: statistics.median(v) for way, v in steps.items()}
    return {
        "text": texts["core"],
        "mask_us_per_sampled_token": med,
        "runs": per_way,
        "ratio": med["unpack+masked_fill_"] / med["core"],
        "step_median_us": step_med,
        "step_ratio": step_med["unpack+masked_fill_"] / step_med["core"],
        "step_part_median_us": {
            way: {part: statistics.median(v) for part, v in by_part.items()} for way, by_part in parts.items()
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="lg.generate runs per way")
    ap.add_argument("--reps", type=int, default=300, help="applications per micro-benchmark cell")
    ap.add_argument("--skip-generate", action="store_true")
    ap.add_argument("--json", help="write the report here")
    args = ap.parse_args()
    set_threads()  # torch's threads as lg.generate's default model loader sets them, for both parts
    report: dict[str, Any] = {"micro": micro(args.reps)}
    print(f"{'allowed':>8} {'dtype':<15} {'core us':>8} {'unpack+masked_fill_ us':>23}")
    for row in report["micro"]:
        old = row.get("unpack+masked_fill_")
        print(
            f"{row['density']:>8.3f} {row['dtype']:<15} {row['core']:>8.1f} {'' if old is None else f'{old:.1f}':>23}"
        )
    if not args.skip_generate:
        gen = report["generate"] = generate_overhead(args.repeat)
        med = gen["mask_us_per_sampled_token"]
        print(f"lg.generate, order example: {gen['text']}")
        print(
            f"mask overhead per sampled token (fill + apply, median of {args.repeat}): "
            f"unpack+masked_fill_ {med['unpack+masked_fill_']:.1f} us, core {med['core']:.1f} us, "
            f"{gen['ratio']:.1f}x lower"
        )
        step = gen["step_median_us"]
        print(
            f"median step (fill + apply): unpack+masked_fill_ {step['unpack+masked_fill_']:.1f} us, "
            f"core {step['core']:.1f} us, {gen['step_ratio']:.1f}x lower"
        )
        for way, by_part in gen["step_part_median_us"].items():
            print(f"  {way}: median fill {by_part['fill']:.1f} us, median apply {by_part['apply']:.1f} us")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
