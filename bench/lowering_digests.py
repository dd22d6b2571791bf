#!/usr/bin/env python
"""Behaviour gate of the JSON Schema frontend: a digest of every lowering of the corpora.

    python bench/lowering_digests.py            # write bench/lowering_digests/ (make lowering-digests)
    python bench/lowering_digests.py --check    # compare with the committed files (make lowering-digests-check)
    python bench/lowering_digests.py --check --every 20   # every 20th schema only: a quick look while editing

For every schema of JSONSchemaBench (``<shared>/corpora/jsonschemabench/*/schemas.jsonl``) and of the
JSON-Schema-Test-Suite draft 2020-12 (every case of ``<shared>/corpora/json-schema-test-suite``), under
each option set of ``OPTION_SETS``, the frontend's output alone (``schema_to_grammar``, no core compile)
is reduced to one digest: of the grammar's IR text (``repr`` of its rules, in order), the dropped list and the
rule -> JSON pointer map; or, when lowering raises, of the error's class, code, pointer and message.

Output: ``digests.tsv.gz`` (one line per schema: its id, then one 12-hex digest per option set in
the order of the header line, ``!``-prefixed where lowering raised; gzip without a timestamp, so
equal digests give equal bytes) and ``SUMMARY`` (per option set: how many lowered, how many raised,
and a sha256 over the column). A refactoring that changes no behaviour leaves both files
byte-identical; ``--check`` names every (schema, option set) whose digest changed.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import itertools
import json
import multiprocessing as mp
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.conformance.common import CORPORA_DIR  # noqa: E402

from logitgate.errors import LogitgateError  # noqa: E402
from logitgate.frontends.json_schema import schema_to_grammar  # noqa: E402
from logitgate.limits import DEFAULT_LIMITS  # noqa: E402

OUT_DIR = REPO / "bench" / "lowering_digests"
# Name -> schema_to_grammar keyword arguments (the frontend's options, one changed at a time).
OPTION_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "compact": {"whitespace": "compact"},
    "any_order": {"property_order": "any"},
    "strict": {"strict": True},
    "lenient": {"lenient": True},
    "oneof_anyof": {"oneof": "anyof"},
}


def corpus() -> Iterator[tuple[str, Any]]:
    """(id, schema) of every schema, in a fixed order."""
    for path in sorted((CORPORA_DIR / "jsonschemabench").glob("*/schemas.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                yield f"jsb/{path.parent.name}/{row['id']}", row["schema"]
    suite = CORPORA_DIR / "json-schema-test-suite" / "tests" / "draft2020-12"
    for path in sorted(suite.rglob("*.json")):
        rel = path.relative_to(suite).as_posix()
        for i, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            yield f"jsts/{rel}#{i}", case["schema"]


def digest(schema: Any) -> list[str]:
    """The 12-hex digest of each option set's lowering of ``schema``."""
    out = []
    for options in OPTION_SETS.values():
        pointers: dict[str, str] = {}
        try:
            grammar, dropped = schema_to_grammar(schema, limits=DEFAULT_LIMITS, pointers=pointers, **options)
            record = repr(grammar.rules) + "\0" + json.dumps(dropped) + "\0" + json.dumps(pointers)
        except LogitgateError as e:
            what = [type(e).__name__, getattr(e, "code", ""), getattr(e, "pointer", ""), str(e)]
            record = "error\0" + json.dumps(what)
        mark = "!" if record.startswith("error\0") else ""
        out.append(mark + hashlib.sha256(record.encode("utf-8", "surrogatepass")).hexdigest()[:12])
    return out


def _digest_row(item: tuple[str, Any]) -> str:
    name, schema = item
    return "\t".join([name, *digest(schema)])


def build(jobs: int, every: int = 1) -> list[str]:
    """The digest table's lines (header first), of every ``every``-th schema."""
    lines = ["id\t" + "\t".join(OPTION_SETS)]
    items = itertools.islice(corpus(), 0, None, every)
    if jobs <= 1:
        lines.extend(map(_digest_row, items))
    else:
        with mp.get_context("fork").Pool(jobs) as pool:
            lines.extend(pool.imap(_digest_row, items, chunksize=16))
    return lines


def summary(lines: list[str]) -> str:
    """Per option set: the column's sha256 and how many schemas lowered or raised."""
    header = lines[0].split("\t")[1:]
    rows = [line.split("\t") for line in lines[1:]]
    out = [f"schemas\t{len(rows)}"]
    for j, name in enumerate(header, start=1):
        column = "\n".join(f"{r[0]}\t{r[j]}" for r in rows)
        raised = sum(r[j].startswith("!") for r in rows)
        sha = hashlib.sha256(column.encode()).hexdigest()
        out.append(f"{name}\tlowered={len(rows) - raised}\traised={raised}\tsha256={sha}")
    table = "\n".join(lines) + "\n"
    out.append(f"all\tsha256={hashlib.sha256(table.encode()).hexdigest()}")
    return "\n".join(out) + "\n"


def gzip_bytes(text: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as f:
        f.write(text.encode())
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--every", type=int, default=1, help="check every k-th schema only (with --check)")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    if args.every != 1 and not args.check:
        ap.error("--every is for --check only: the committed files hold every schema")
    lines = build(args.jobs, args.every)
    table = "\n".join(lines) + "\n"
    text = summary(lines)
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "digests.tsv.gz").write_bytes(gzip_bytes(table))
        (args.out / "SUMMARY").write_text(text)
        print(text, end="")
        return 0
    old_lines = gzip.decompress((args.out / "digests.tsv.gz").read_bytes()).decode().splitlines()
    old = {line.split("\t", 1)[0]: line.split("\t")[1:] for line in old_lines}
    names = lines[0].split("\t")[1:]
    changed = 0
    for line in lines[1:]:
        name, *cells = line.split("\t")
        before = old.pop(name, None)
        if before != cells:
            changed += 1
            which = [n for n, a, b in zip(names, before or [""] * len(names), cells, strict=True) if a != b]
            print(f"changed\t{name}\t{','.join(which)}")
    if args.every == 1:
        for name in old:
            if name != "id":
                changed += 1
                print(f"missing\t{name}")
    same = (args.out / "SUMMARY").read_text() == text if args.every == 1 else True
    print(text, end="")
    print(f"{'identical' if same and not changed else f'{changed} schemas differ'} ({len(lines) - 1} schemas)")
    return 0 if same and not changed else 1


if __name__ == "__main__":
    sys.exit(main())
