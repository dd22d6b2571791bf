"""How much of the walks' time a mask memo keyed without object member positions could spare.

Reads `build/walk_bench DIR --verbose --configs` output (stdin or a file). Each configuration a
fill builds is keyed by its heads as --configs prints them (stacks cut to four frames) with every
state of a JSON Schema object's position rules (`ob<n>_...`, python/logitgate/frontends/
json_schema/members.py) written as one symbol: members and objects alike. A walk whose
configuration's key an earlier fill of the same case had is one such a memo would meet; it
counts as spared where that fill's mask was the same, and as a conflict (the key too coarse)
where it was not. Every count is an upper bound for a memo that leaves the member's position
out: the key drops more than that.

    build/walk_bench /tmp/native --evict --verbose --configs | python bench/native/collapsed_positions.py
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from typing import NamedTuple

from repeated_masks import LINE as VERBOSE  # a --verbose line

FILL = re.compile(r"^  (?P<case>\S+)\s+pos\s+\d+ config \d+: \d+ new")
CONFIG = re.compile(r"^    c(?P<id>\d+):(?P<heads>.*)$")
POSITION_STATE = re.compile(r"\d+\(ob\d+_[^)]*\)")


def collapsed(heads: str) -> str:
    """A configuration's heads as --configs prints them, object position states as one symbol."""
    return " ".join(sorted(set(POSITION_STATE.sub("OB", heads).split())))


class Census(NamedTuple):
    built: int  # new configurations
    holding: int  # of those, with an object position state
    walk_us: float  # the walks' time (fills that visited a trie node)
    met: int  # walks whose collapsed configuration an earlier fill of the case had
    met_us: float
    spared_us: float  # of met_us, where that fill's mask was the same
    conflicts: int  # met walks whose mask differed


def census(lines: Iterable[str]) -> Census:
    case = None
    keys: dict[int, str] = {}  # configuration id -> collapsed key, for the current case
    first_mask: dict[str, str] = {}  # collapsed key -> the mask of its first fill
    built = holding = met = conflicts = 0
    walk_us = met_us = spared_us = 0.0
    for line in lines:
        if m := FILL.match(line):
            if m["case"] != case:
                case, keys, first_mask = m["case"], {}, {}
            continue
        if m := CONFIG.match(line):
            built += 1
            holding += POSITION_STATE.search(m["heads"]) is not None
            keys[int(m["id"])] = collapsed(m["heads"])
            continue
        if not (m := VERBOSE.match(line)):
            continue
        if m["config"] is None:  # (walk_bench prints the configuration with its keys)
            continue
        us, key = float(m["us"]), keys.get(int(m["config"]))
        if int(m["nodes"]) > 0:  # a walk (a copy visits no node)
            walk_us += us
            if key is not None and key in first_mask:
                met += 1
                met_us += us
                if first_mask[key] == m["mask"]:
                    spared_us += us
                else:
                    conflicts += 1
        if key is not None:
            first_mask.setdefault(key, m["mask"])
    return Census(built, holding, walk_us, met, met_us, spared_us, conflicts)


def report(c: Census) -> str:
    if c.walk_us == 0:
        return "no walks read (was walk_bench run with --verbose --configs?)\n"
    return (
        f"new configurations {c.built}, holding an object position state {c.holding} "
        f"({100 * c.holding / max(1, c.built):.0f}%)\n"
        f"walks' time {c.walk_us / 1e3:.1f} ms; walks whose collapsed configuration an earlier fill had: {c.met}, "
        f"{c.met_us / 1e3:.1f} ms ({100 * c.met_us / c.walk_us:.0f}%); with that fill's mask "
        f"{c.spared_us / 1e3:.1f} ms ({100 * c.spared_us / c.walk_us:.0f}%), with another: {c.conflicts} walks\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", nargs="?", help="walk_bench --verbose --configs output (default: stdin)")
    args = ap.parse_args()
    if args.log is None:
        sys.stdout.write(report(census(sys.stdin)))
        return
    try:
        with open(args.log) as f:
            sys.stdout.write(report(census(f)))
    except OSError as e:
        ap.error(f"cannot read {args.log}: {e.strerror}")


if __name__ == "__main__":
    main()
