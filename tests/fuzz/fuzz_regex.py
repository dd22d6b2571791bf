"""Time-boxed fuzzer for the regex frontend.

    LOGITGATE_NO_CORE=1 PYTHONPATH=python python tests/fuzz/fuzz_regex.py --minutes 2

Three kinds of input, in turn:

1. token soup: random strings of regex metacharacters and escapes;
2. corpus mutations: JSONSchemaBench patterns with random edits;
3. generated patterns from the syntax both ECMA-262 and Python accept, which are also checked
   differentially: the oracle matcher over the IR (tests/unit/test_regex.py) must agree with
   ``re.fullmatch(..., re.ASCII)`` on generated candidate strings.

Invariants checked on every input: only GrammarError (code regex-syntax / regex-unsupported, with a
column) or LimitExceeded escapes, and one pattern lowers in under a second. Each failing input is
written to tests/fuzz/regressions/regex-<hash>.txt; the exit status is 1 if any was found.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "unit"))

from test_regex import _DISAGREE, CORPUS, candidates, oracle_match  # noqa: E402

from logitgate.errors import GrammarError, LimitExceeded  # noqa: E402
from logitgate.frontends.regex import regex_to_node  # noqa: E402
from logitgate.limits import Limits  # noqa: E402

SOUP = [*"ab()[]{}|*+?.^$\\-,:=!<>0123456789_ é😀", "\\d", "\\w", "\\s", "\\D", "\\p{L}", "\\u00e9", "\\x41"]
SOUP += ["(?:", "(?<n>", "(?=", "{2,3}", "{,", "[^", "\\", "\\b", "\\1", "\\k<n>", "(?i)", "\\u{1F600}", "\\c"]


def soup(rng: random.Random) -> str:
    return "".join(rng.choice(SOUP) for _ in range(rng.randint(0, 30)))


def mutate(rng: random.Random, corpus: list[str]) -> str:
    s = list(rng.choice(corpus))
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(3)
        pos = rng.randint(0, len(s))
        if op == 0 and s:
            del s[min(pos, len(s) - 1)]
        elif op == 1:
            s.insert(pos, rng.choice(SOUP))
        elif s:
            s[min(pos, len(s) - 1)] = rng.choice(SOUP)
    return "".join(s)


def gen_common(rng: random.Random, depth: int = 0) -> str:
    """A pattern in the syntax ECMA-262 and Python both accept with the same meaning."""
    branches = [gen_seq(rng, depth) for _ in range(1 if rng.random() < 0.7 else rng.randint(2, 3))]
    return "|".join(branches)


def gen_seq(rng: random.Random, depth: int) -> str:
    out = []
    for _ in range(rng.randint(0, 4)):
        atom = gen_atom(rng, depth)
        if rng.random() < 0.35:
            q = rng.choice(["*", "+", "?", "{2}", "{0,2}", "{1,}", "{1,3}", "{0}"])
            atom += q + ("?" if rng.random() < 0.2 else "")
        out.append(atom)
    return "".join(out)


def gen_atom(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if depth < 3 and r < 0.2:
        return rng.choice(["(", "(?:", f"(?P<g{rng.randint(0, 99)}>"]) + gen_common(rng, depth + 1) + ")"
    if r < 0.5:
        return rng.choice("abcxyz-_/é")
    if r < 0.6:
        return rng.choice(["\\d", "\\w", "\\s", "\\D", "\\W", "\\S", ".", "\\.", "\\-", "\\\\", "\\x41", "\\u00e9"])
    items = []
    for _ in range(rng.randint(1, 3)):
        k = rng.random()
        if k < 0.4:
            a, b = sorted(rng.sample("abcdexyz0189", 2))
            items.append(f"{a}-{b}")
        elif k < 0.6:
            items.append(rng.choice(["\\d", "\\w", "\\s", "\\D", "\\W"]))
        else:
            items.append(rng.choice("abz_.$*+é"))
    return "[" + ("^" if rng.random() < 0.3 else "") + "".join(items) + "]"


def check(pattern: str, differential: bool, rng: random.Random) -> str | None:
    """Failure description, or None when the invariants hold."""
    start = time.perf_counter()
    node = None
    try:
        node, _ = regex_to_node(pattern, Limits(max_repeat=1000, max_nesting=50), anchored_search=rng.random() < 0.3)
        if differential:
            node, _ = regex_to_node(pattern)
    except GrammarError as e:
        if e.code not in ("regex-syntax", "regex-unsupported") or e.column is None:
            return f"untyped GrammarError: {e!r}"
        if differential:
            return f"common-syntax pattern rejected: {e}"
    except LimitExceeded:
        pass
    except Exception:
        return "crash:\n" + traceback.format_exc()
    if time.perf_counter() - start > 1.0:
        return f"slow: {time.perf_counter() - start:.2f}s"
    if differential and node is not None:
        py = re.compile(pattern, re.ASCII)
        for s in candidates(pattern, node, rng, count=15):
            if _DISAGREE & set(s) or len(s) > 12:
                continue  # length cap: Python's backtracking is exponential on nested quantifiers
            if oracle_match(node, s) != (py.fullmatch(s) is not None):
                return f"differential mismatch on {s!r}: python={py.fullmatch(s) is not None}"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    corpus = [json.loads(line)["regex"] for line in CORPUS.open()] if CORPUS.exists() else ["^[a-z]+$"]
    deadline = time.monotonic() + args.minutes * 60
    counts = {"soup": 0, "mutation": 0, "common": 0}
    failures: list[tuple[str, str]] = []
    while time.monotonic() < deadline:
        kind = rng.choice(list(counts))
        if kind == "soup":
            pattern = soup(rng)
        elif kind == "mutation":
            pattern = mutate(rng, corpus)
        else:
            pattern = gen_common(rng)
            try:
                re.compile(pattern, re.ASCII)
            except re.error:  # e.g. a repeated group name: not in the common subset
                kind = "soup"
        counts[kind] += 1
        problem = check(pattern, kind == "common", rng)
        if problem:
            failures.append((pattern, problem))
            digest = hashlib.sha1(pattern.encode("utf-8", "surrogatepass")).hexdigest()[:12]
            out = HERE / "regressions" / f"regex-{digest}.txt"
            out.parent.mkdir(exist_ok=True)
            out.write_text(json.dumps({"pattern": pattern, "problem": problem}) + "\n")
            print(f"FAIL {pattern!r}: {problem.splitlines()[0]}", flush=True)
    total = sum(counts.values())
    print(f"seed={seed} inputs={total} {counts} failures={len(failures)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
