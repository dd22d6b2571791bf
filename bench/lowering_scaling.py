"""How JSON Schema lowering time grows with the size of one construct.

MaskBench schemas are small; a user's may hold an enum of ten thousand values, an object of
thousands of properties or an allOf of hundreds of parts. For each such construct this lowers
a schema of n and of 4n items (warm, single-threaded, the cyclic GC paused) and prints both
times and their ratio: about 4 is linear, 16 quadratic. A ratio over 8 is flagged.

    python bench/lowering_scaling.py            # n = 1000
    python bench/lowering_scaling.py --n 250    # quicker

Lowering only (schema to grammar IR, the Python half of a compile): the core's compile grows
with the grammar, which these constructs keep linear in n.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from logitgate.compiler import _gc_paused
from logitgate.frontends.json_schema import schema_to_grammar
from logitgate.limits import DEFAULT_LIMITS

# Each builds a schema whose size grows linearly with n.
CONSTRUCTS: dict[str, Callable[[int], Any]] = {
    "enum of strings": lambda n: {"enum": [f"value-{i}" for i in range(n)]},
    "enum of objects": lambda n: {"enum": [{"id": i, "tags": [i, str(i)]} for i in range(n)]},
    "enum ∩ enum (allOf)": lambda n: {"allOf": [{"enum": list(range(n))}, {"enum": list(range(0, 2 * n, 2))}]},
    "properties, half required": lambda n: {
        "type": "object",
        "properties": {f"p{i}": {"type": "integer"} for i in range(n)},
        "required": [f"p{i}" for i in range(0, n, 2)],
    },
    "allOf of one-property parts": lambda n: {
        "allOf": [{"properties": {f"p{i}": {"type": "string"}}} for i in range(n)],
    },
    "propertyNames enum": lambda n: {"type": "object", "propertyNames": {"enum": [f"k{i}" for i in range(n)]}},
    "$ref chain": lambda n: {
        "$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} if i < n - 1 else {"type": "integer"} for i in range(n)},
        "$ref": "#/$defs/d0",
    },
    "prefixItems": lambda n: {"type": "array", "prefixItems": [{"type": "integer"}] * n, "items": False},
    # Pairs of patterns are compared (a key matching several must satisfy each): quadratic by
    # nature, so a quarter of n.
    "patternProperties (n/4)": lambda n: {
        "type": "object",
        "patternProperties": {f"^x{i}_": {"type": "integer"} for i in range(max(1, n // 4))},
    },
}


def lower_ms(schema: Any, repeat: int = 3) -> float:
    """Milliseconds of the fastest of ``repeat`` lowerings of ``schema``, after a warm-up one
    (the fastest: this VM's timing noise only ever adds)."""
    schema_to_grammar(schema, limits=DEFAULT_LIMITS, check_empty=False)
    best = float("inf")
    with _gc_paused():
        for _ in range(repeat):
            t0 = time.perf_counter()
            schema_to_grammar(schema, limits=DEFAULT_LIMITS, check_empty=False)
            best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="the smaller size (the larger is 4n)")
    args = ap.parse_args()
    n = max(4, args.n)
    print(f"| construct | n = {n} | n = {4 * n} | ratio |")
    print("|---|---|---|---|")
    flagged = 0
    for name, build in CONSTRUCTS.items():
        small, large = lower_ms(build(n)), lower_ms(build(4 * n))
        ratio = large / small if small > 0 else float("inf")
        flag = " (superlinear)" if ratio > 8 else ""
        flagged += bool(flag)
        print(f"| {name} | {small:.1f} ms | {large:.1f} ms | {ratio:.1f}{flag} |", flush=True)
    print(f"\n{flagged} of {len(CONSTRUCTS)} constructs grow superlinearly (ratio over 8)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
