"""How much of the walks' time recomputes a mask the same grammar already produced.

Reads `build/walk_bench DIR --verbose` output (stdin or a file) and prints, over every case's
mask fills after its first: the copies (memoized masks) and the walks; of the walks, those whose
mask an earlier fill of the same case had produced already, those whose configuration has the
heads' states (stacks aside) of an earlier fill, and those whose mask is the previous fill's; and
the repeated walks' time by the last character before them.

    build/walk_bench /tmp/native --evict --verbose | python bench/native/repeated_masks.py
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from typing import TextIO

LINE = re.compile(
    r"^  (?P<case>\S+)\s+pos\s+(?P<pos>\d+)\s+(?P<us>[\d.]+) us nodes\s+(?P<nodes>\d+) transitions\s+(?P<tr>\d+)"
    r" mask (?P<mask>[0-9a-f]+) states (?P<states>[0-9a-f]+)(?P<first> \(first\))?  \.\.\.(?P<text>.*)$"
)


def analyse(lines: TextIO) -> str:
    seen_masks: set[str] = set()
    seen_states: set[str] = set()
    case = previous = None
    copies = [0, 0.0]
    walks = [0, 0.0]
    repeated = [0, 0.0]
    same_states = [0, 0.0]
    same_as_previous = [0, 0.0]
    by_last: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    matched = 0
    for line in lines:
        m = LINE.match(line.rstrip("\n"))
        if m is None:
            continue
        matched += 1
        if m["case"] != case:
            case, previous = m["case"], None
            seen_masks.clear()
            seen_states.clear()
        us, mask, states = float(m["us"]), m["mask"], m["states"]
        if not m["first"]:
            if int(m["nodes"]) == 0:
                copies[0] += 1
                copies[1] += us
            else:
                walks[0] += 1
                walks[1] += us
                if mask in seen_masks:
                    repeated[0] += 1
                    repeated[1] += us
                    last = by_last[m["text"][-1:] or "(start)"]
                    last[0] += 1
                    last[1] += us
                if states in seen_states:
                    same_states[0] += 1
                    same_states[1] += us
                if mask == previous:
                    same_as_previous[0] += 1
                    same_as_previous[1] += us
        seen_masks.add(mask)
        seen_states.add(states)
        previous = mask
    if matched == 0:
        raise SystemExit("no walk_bench --verbose lines with mask and states digests found")

    def share(part: list[float]) -> str:
        return f"{int(part[0])} ({part[1] / 1e3:.1f} ms, {100 * part[1] / max(walks[1], 1e-9):.0f}% of the walks' time)"

    out = [
        f"copies: {int(copies[0])} ({copies[1] / 1e3:.1f} ms); walks: {int(walks[0])} ({walks[1] / 1e3:.1f} ms)",
        f"walks whose mask an earlier fill of the case produced: {share(repeated)}",
        f"walks whose heads' states an earlier fill had: {share(same_states)}",
        f"walks whose mask is the previous fill's: {share(same_as_previous)}",
        "repeated walks by the character before them:",
    ]
    for ch, (n, t) in sorted(by_last.items(), key=lambda kv: -kv[1][1])[:8]:
        out.append(f"  {ch!r}: {int(n)} walks, {t / 1e3:.1f} ms")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "log",
        nargs="?",
        type=argparse.FileType("r"),
        default=sys.stdin,
        help="walk_bench --verbose output (default: stdin)",
    )
    args = ap.parse_args(argv)
    with args.log:
        print(analyse(args.log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
