#!/usr/bin/env python
"""Random walks through logitgate's JSON Schema masks, validated with `jsonschema` (issue 3, "Must show" 3, 4).

    python bench/conformance_walks.py                              # 500 schemas, 2 walks each, smollm2
    python bench/conformance_walks.py --tokenizer llama3,gemma3 -n 100   # special ids never allowed

Every completed output must be JSON and validate (format checking on); a special id (other than EOS) allowed
at any step is a bug. Prints the counts and every failing schema id with its output. Exit status 1 on any bug.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conformance import random_walks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--schemas", type=int, default=500, help="schemas that compile to walk (500)")
    ap.add_argument("--walks", type=int, default=2, help="walks per schema")
    ap.add_argument("--max-tokens", type=int, default=64, help="length cap before the shortest completion")
    ap.add_argument("--tokenizer", default="smollm2", help="comma list of bytes, smollm2, llama3, gemma3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema")
    ap.add_argument("--out", default="bench/results/conformance", help="folder for walks-<tokenizer>.json")
    args = ap.parse_args(argv)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    bad = False
    for name in [t for t in args.tokenizer.split(",") if t]:
        t0 = time.monotonic()
        rep = random_walks.run_walks(
            args.schemas,
            tokenizer=name,
            walks=args.walks,
            max_tokens=args.max_tokens,
            seed=args.seed,
            jobs=args.jobs,
            timeout=args.timeout,
            progress=True,
        )
        print(f"\n## Random walks, tokenizer {name} ({time.monotonic() - t0:.0f}s)")
        print(f"schemas walked: {rep['schemas_walked']}; schema outcomes: {json.dumps(rep['schema_status'])}")
        print(f"walks: {json.dumps(rep['walks'], sort_keys=True)}")
        w = rep["walks"]
        print(f"special ids (other than EOS) allowed: {w.get('special', 0)} times in {w.get('steps', 0)} masks")
        for key, lines in sorted(rep["bugs"].items()):
            for line in lines:
                print(f"  {key}: {line}")
        for key, lines in sorted(rep["notes"].items()):
            for line in lines:
                print(f"  note {key}: {line}")
        bad |= rep["schema_status"].get("bug", 0) > 0
        (out_dir / f"walks-{name}.json").write_text(json.dumps(rep, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
