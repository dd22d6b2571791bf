"""How much of the walks' time recomputes a mask the same grammar already produced.

Reads `build/walk_bench DIR --verbose` output (stdin or a file) and prints, over every case's
mask fills after its first: the copies (memoized masks) and the walks; of the walks, those whose
mask an earlier fill of the same case had produced already, those whose configuration has the
heads' states (stacks aside) of an earlier fill, and those whose mask is the previous fill's; and
the repeated walks' time by the last character before them. Across cases (the grammars of one
vocabulary): the walks whose mask any earlier fill produced, the masks that took the most walking
time with the number of cases they met, and the fill mean if every repeated walk were a copy (a
memo per grammar, and one shared by the vocabulary's grammars). Then, for stacks cut to 1-4 frames:
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
    seen_anywhere: set[str] = set()  # masks of every case so far
    anywhere = [0, 0.0]
    per_mask: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # walks, time
    mask_cases: dict[str, set[str]] = defaultdict(set)
    mask_text: dict[str, str] = {}
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
                if mask in seen_anywhere:
                    anywhere[0] += 1
                    anywhere[1] += us
                per_mask[mask][0] += 1
                per_mask[mask][1] += us
                mask_cases[mask].add(m["case"])
                mask_text.setdefault(mask, m["text"][-16:])
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
        seen_anywhere.add(mask)
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
    fills = copies[0] + walks[0]
    copy_mean = copies[1] / max(copies[0], 1)

    def mean_if_copied(part: list[float]) -> float:
        return (copies[1] + walks[1] - part[1] + part[0] * copy_mean) / max(fills, 1)

    out += [
        f"walks whose mask an earlier fill of any case produced: {share(anywhere)}",
        f"fill mean {(copies[1] + walks[1]) / max(fills, 1):.2f} us; if every repeated walk were a copy"
        f" ({copy_mean:.2f} us): {mean_if_copied(repeated):.2f} us (a memo per grammar),"
        f" {mean_if_copied(anywhere):.2f} us (one shared by the grammars)",
        "the masks that took the most walking time:",
    ]
    for mask, (n, t) in sorted(per_mask.items(), key=lambda kv: -kv[1][1])[:8]:
        out.append(
            f"  {mask}: {int(n)} walks in {len(mask_cases[mask])} cases, {t / 1e3:.1f} ms"
            f" ({100 * t / max(walks[1], 1e-9):.0f}%), first after ...{mask_text[mask]!r}"
        )
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
