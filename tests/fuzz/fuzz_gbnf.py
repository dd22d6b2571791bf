"""Time-boxed fuzzer for the GBNF frontend.

    python tests/fuzz/fuzz_gbnf.py --minutes 10 [--seed N] [--save-dir DIR]

Feeds ``parse_gbnf`` random token soups and random mutations (insert/delete/replace/splice) of the
corpus grammars, under small limits so limit paths are hit too. A finding is:

- any exception other than GrammarError / LimitExceeded (a crash), or
- a grammar that parses but whose ``to_ebnf()`` does not parse back to the same rules (round trip).

Findings are printed as ``repr`` (and written to ``--save-dir`` as ``<kind>-<n>.gbnf`` when given, ready
to become a regression test). Exit status 1 when anything was found. Deterministic for a given seed
except for how far it gets in the time box.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from logitgate.errors import GrammarError, LimitExceeded  # noqa: E402
from logitgate.frontends.gbnf import parse_gbnf  # noqa: E402
from logitgate.limits import Limits  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpora" / "gbnf"
LIMITS = Limits(max_repeat=50, max_nesting=30, max_source_bytes=1 << 16)

PIECES = [
    *'rot ::=|()[]^-*+?{},."\\#\n\r\t abxuU0123456789<>!é\u2028\ud800\x00',
    "::=",
    "\\x",
    "\\u00",
    "\\U0010",
    "\\UFFFFFFFF",
    "root ::= ",
    "\nroot ::= ",
    "\nx ::= ",
    '"',
    "[^",
    "{0,",
    "{99999999999999999999}",
    "((((",
    "))))",
    "|\n",
    "# c\n",
]


def _mutate(rng: random.Random, text: str, seeds: list[str]) -> str:
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(text) + 1)
        op = rng.randrange(5)
        if op == 0:
            text = text[:i] + rng.choice(PIECES) + text[i:]
        elif op == 1:
            text = text[:i] + text[i + rng.randint(1, 5) :]
        elif op == 2:
            text = text[:i] + rng.choice(PIECES) + text[i + 1 :]
        elif op == 3:  # splice a slice of another seed
            other = rng.choice(seeds)
            j = rng.randrange(len(other) + 1)
            text = text[:i] + other[j : j + rng.randint(1, 40)] + text[i:]
        else:  # duplicate a slice (nesting, repeated rules)
            j = rng.randrange(len(text) + 1)
            text = text[:i] + text[i:j] * rng.randint(1, 4) + text[i:]
    return text


def _soup(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60)))


def _check(text: str) -> tuple[str, str] | None:
    """None if fine, else (kind, detail)."""
    try:
        g = parse_gbnf(text, limits=LIMITS)
    except (GrammarError, LimitExceeded):
        return None
    except Exception:  # the point is to catch anything untyped
        return "crash", traceback.format_exc()
    try:
        printed = g.to_ebnf()
        again = parse_gbnf(printed, limits=LIMITS)
    except Exception:
        return "roundtrip", traceback.format_exc()
    if dict(again.rules) != dict(g.rules):
        return "roundtrip", f"printed:\n{printed}"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save-dir", type=Path, default=None)
    args = ap.parse_args()

    seeds = [p.read_text(encoding="utf-8") for p in sorted(CORPUS.rglob("*.gbnf"))]
    if not seeds:
        print(f"no corpus grammars under {CORPUS}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    deadline = time.monotonic() + args.minutes * 60
    runs = parsed = 0
    findings: dict[str, int] = {}
    while time.monotonic() < deadline:
        text = _soup(rng) if rng.random() < 0.2 else _mutate(rng, rng.choice(seeds), seeds)
        runs += 1
        result = _check(text)
        if result is None:
            continue
        kind, detail = result
        findings[kind] = findings.get(kind, 0) + 1
        if findings[kind] <= 5:
            print(f"--- {kind} #{findings[kind]}: {text!r}\n{detail}", flush=True)
            if args.save_dir is not None:
                args.save_dir.mkdir(parents=True, exist_ok=True)
                (args.save_dir / f"{kind}-{findings[kind]}.gbnf").write_text(
                    text, encoding="utf-8", errors="surrogatepass"
                )
    # Count how many inputs parsed successfully, to show the fuzzer gets past the parser's front door.
    rng2 = random.Random(args.seed)
    for _ in range(2000):
        text = _mutate(rng2, rng2.choice(seeds), seeds)
        try:
            parse_gbnf(text, limits=LIMITS)
            parsed += 1
        except (GrammarError, LimitExceeded):
            pass
    print(f"runs={runs} findings={findings or 'none'} (valid after mutation: {parsed / 20:.1f}% of a 2000 sample)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
