"""Inputs whose compile takes far longer than any test may wait, for the tests of compile
timeouts and cancellation (tests/unit/test_cancel.py, tests/server/test_compile_limits.py)."""

from __future__ import annotations

from typing import Any


def product_schema(cycles: list[int]) -> dict[str, Any]:
    """allOf over reference cycles of the given lengths, each member with a ``not``: the
    lowering meets every combination of positions, lcm(cycles) schema sets (2*3*5*7*11*13:
    30,030 of them, half a minute of lowering and then more automaton states than the limit),
    a compile that only an interrupt ends early."""
    defs: dict[str, Any] = {}
    for n in cycles:
        for i in range(n):
            defs[f"c{n}_{i}"] = {
                "type": "object",
                "properties": {"x": {"$ref": f"#/$defs/c{n}_{(i + 1) % n}"}},
                "not": {"required": [f"k{n}_{i}"]},
            }
    return {"$defs": defs, "allOf": [{"$ref": f"#/$defs/c{n}_0"} for n in cycles]}


PATHOLOGICAL = product_schema([2, 3, 5, 7, 11, 13])
