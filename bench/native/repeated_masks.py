"""How much of the walks' time recomputes a mask the same grammar already produced.

Reads `build/walk_bench DIR --verbose` output (stdin or a file) and prints, over every case's
mask fills after its first: the copies (memoized masks) and the walks; of the walks, those whose
mask an earlier fill of the same case had produced already, those whose configuration has the
heads' states (stacks aside) of an earlier fill, and those whose mask is the previous fill's; and
the repeated walks' time by the last character before them. Then, for stacks cut to 1-4 frames:
the walks of a configuration not seen before whose heads, so cut, an earlier fill had (what a memo
keyed so would spare), and the keys that met two different masks (a cut too shallow to be exact).
Walks of a configuration seen before (cheap walks, not memoized) are counted apart.

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
    r" mask (?P<mask>[0-9a-f]+) states (?P<states>[0-9a-f]+)(?: config (?P<config>\d+) keys (?P<keys>[0-9a-f,]+))?"
    r"(?P<first> \(first\))?  \.\.\.(?P<text>.*)$"
)


CUTS = (1, 2, 3, 4)  # the stack depths of walk_bench's keys, in order


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
    seen_configs: set[str] = set()
    same_config = [0, 0.0]
    key_masks: list[dict[str, str]] = [{} for _ in CUTS]  # per cut: key -> the first mask it met
    spared = [[0, 0.0] for _ in CUTS]
    conflicts: list[set[str]] = [set() for _ in CUTS]
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
            seen_configs.clear()
            for seen in key_masks:
                seen.clear()
        us, mask, states = float(m["us"]), m["mask"], m["states"]
        keys = m["keys"].split(",") if m["keys"] else []
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
                if m["config"] in seen_configs:
                    same_config[0] += 1
                    same_config[1] += us
                else:
                    for i, key in enumerate(keys):
                        if key in key_masks[i]:
                            spared[i][0] += 1
                            spared[i][1] += us
        for i, key in enumerate(keys):
            if key_masks[i].setdefault(key, mask) != mask:
                conflicts[i].add(f"{case} {key}")
        if m["config"] is not None:
            seen_configs.add(m["config"])
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
    if seen_configs:
        out.append(f"walks of a configuration an earlier fill had (not memoized): {share(same_config)}")
        for i, cut in enumerate(CUTS):
            out.append(
                f"stacks cut to {cut} frame{'s' if cut > 1 else ''}: walks of a new configuration whose key an earlier"
                f" fill had {share(spared[i])}; keys that met two masks: {len(conflicts[i])}"
            )
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
