"""How much of each compiled automaton the masks reach: what a core that built its rules, or its
states, on first use would still build.

Reads `build/walk_bench DIR --reach` output (stdin or a file): per case, the automaton states that
some parser configuration held once its instances ran (a head's state, or a frame's return state;
every mask walk's configurations count, not only the instances' path), the rules they belong to, and
all the states of those rules. Prints these shares weighted by each case's core compile time, and
their medians over bands of cases by compile time (the middle fifth, p85-p95, the slowest 3%).

    build/walk_bench /tmp/native --reach | python bench/native/reach.py
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from typing import NamedTuple, TextIO

LINE = re.compile(
    r"^(?P<case>\S+)\s+reach: states (?P<states>\d+)/(?P<all_states>\d+), rules (?P<rules>\d+)/(?P<all_rules>\d+), "
    r"states of those rules (?P<in_rules>\d+); compile (?P<us>[\d.]+) us$"
)


class Case(NamedTuple):
    name: str
    states: float  # reached / all
    rules: float
    in_rules: float  # states of the reached rules / all states
    compile_us: float


def read(stream: TextIO) -> list[Case]:
    cases = []
    for line in stream:
        m = LINE.match(line.rstrip("\n"))
        if m is None:
            continue
        all_states, all_rules = int(m["all_states"]), int(m["all_rules"])
        cases.append(
            Case(
                m["case"],
                int(m["states"]) / all_states,
                int(m["rules"]) / all_rules,
                int(m["in_rules"]) / all_states,
                float(m["us"]),
            )
        )
    return cases


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", nargs="?", type=argparse.FileType("r"), default=sys.stdin)
    args = ap.parse_args()
    cases = sorted(read(args.log), key=lambda c: c.compile_us)
    if not cases:
        print("no `reach:` lines (run walk_bench with --reach)", file=sys.stderr)
        return 1
    total = sum(c.compile_us for c in cases)

    def weighted(field: str) -> float:
        return 100 * sum(c.compile_us * getattr(c, field) for c in cases) / total

    print(
        f"{len(cases)} cases, core compile {total / 1e3:.0f} ms; weighted by compile time, reached: "
        f"states {weighted('states'):.1f}%, rules {weighted('rules'):.1f}%, "
        f"states of the reached rules {weighted('in_rules'):.1f}%"
    )
    n = len(cases)
    for label, lo, hi in (("middle fifth", 0.4, 0.6), ("p85-p95", 0.85, 0.95), ("slowest 3%", 0.97, 1.0)):
        band = cases[int(lo * n) : max(int(hi * n), int(lo * n) + 1)]

        def median(field: str, band: list[Case] = band) -> float:
            return 100 * statistics.median(getattr(c, field) for c in band)

        compile_median = statistics.median(c.compile_us for c in band)
        print(
            f"  {label:12s} ({len(band)} cases, compile median {compile_median:.0f} us): "
            f"states {median('states'):.1f}%, rules {median('rules'):.1f}%, "
            f"states of the reached rules {median('in_rules'):.1f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
