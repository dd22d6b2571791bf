#!/usr/bin/env python
"""Behaviour gate of the JSON Schema frontend: a digest of every lowering of the corpora.

    python bench/lowering_digests.py            # write bench/lowering_digests/ (make lowering-digests)
    python bench/lowering_digests.py --check    # compare with the committed files (make lowering-digests-check)
    python bench/lowering_digests.py --check --every 64   # every 64th schema only: a quick look while editing
    python bench/lowering_digests.py --raised lenient     # redo the rows whose lenient lowering raised

For every ``EVERY``-th schema of JSONSchemaBench (``<shared>/corpora/jsonschemabench/*/schemas.jsonl``)
and of the JSON-Schema-Test-Suite draft 2020-12 cases (``<shared>/corpora/json-schema-test-suite``),
under the default options, and for the test-suite cases and every ``OTHER_STRIDE``-th
JSONSchemaBench schema also under the other option sets of ``OPTION_SETS``, the frontend's output
alone (``schema_to_grammar``, no core compile) is reduced to one digest: of the grammar's IR text
(``repr`` of its rules, in order), the dropped list, the rule -> JSON pointer map and the
stand-ins where there are any; or, when lowering raises, of the error's class, code, pointer and
message.

Output: ``digests.tsv.gz`` (one line per schema: its id, then one 12-hex digest per option set in
the order of the header line, ``!``-prefixed where lowering raised, ``-`` where not computed; gzip
without a timestamp, so equal digests give equal bytes) and ``SUMMARY`` (per option set: how many
lowered, how many raised, and a sha256 over the column). A refactoring that changes no behaviour
leaves both files byte-identical; ``--check`` names every (schema, option set) whose digest
changed.
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
# The committed table holds every EVERY-th schema of the corpus (JSONSchemaBench, then the test
# suite); of JSONSchemaBench, every OTHER_STRIDE-th schema is lowered under every option set, the
# rest under the default options only. (On the shared 2-core machine, all schemas under all option
# sets took over an hour; this sample takes minutes. --check --every K, K a multiple of EVERY,
# checks a subset of the committed lines.)
EVERY = 8
OTHER_STRIDE = 16


def corpus() -> Iterator[tuple[str, Any, bool]]:
    """(id, schema, whether under every option set) of every schema, in a fixed order."""
    n = 0
    for path in sorted((CORPORA_DIR / "jsonschemabench").glob("*/schemas.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                yield f"jsb/{path.parent.name}/{row['id']}", row["schema"], n % OTHER_STRIDE == 0
                n += 1
    suite = CORPORA_DIR / "json-schema-test-suite" / "tests" / "draft2020-12"
    for path in sorted(suite.rglob("*.json")):
        rel = path.relative_to(suite).as_posix()
        for i, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            yield f"jsts/{rel}#{i}", case["schema"], True


def digest(schema: Any, every_option: bool = True) -> list[str]:
    """The 12-hex digest of each option set's lowering of ``schema`` (``-``: not computed)."""
    out = []
    for name, options in OPTION_SETS.items():
        if name != "default" and not every_option:
            out.append("-")
            continue
        pointers: dict[str, str] = {}
        try:
            grammar, dropped = schema_to_grammar(schema, limits=DEFAULT_LIMITS, pointers=pointers, **options)
            record = repr(grammar.rules) + "\0" + json.dumps(dropped) + "\0" + json.dumps(pointers)
            if grammar.stand_ins:
                record += "\0" + repr(grammar.stand_ins)
        except LogitgateError as e:
            what = [type(e).__name__, getattr(e, "code", ""), getattr(e, "pointer", ""), str(e)]
            record = "error\0" + json.dumps(what)
        mark = "!" if record.startswith("error\0") else ""
        out.append(mark + hashlib.sha256(record.encode("utf-8", "surrogatepass")).hexdigest()[:12])
    return out


def _digest_row(item: tuple[str, Any, bool]) -> str:
    name, schema, every_option = item
    return "\t".join([name, *digest(schema, every_option)])


def build(jobs: int, every: int = 1, only: set[str] | None = None) -> list[str]:
    """The digest table's lines (header first), of every ``every``-th schema (of those in ``only``)."""
    lines = ["id\t" + "\t".join(OPTION_SETS)]
    items: Iterator[tuple[str, Any, bool]] = itertools.islice(corpus(), 0, None, every)
    if only is not None:
        items = (item for item in items if item[0] in only)
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
        lowered = sum(r[j] != "-" for r in rows) - raised
        sha = hashlib.sha256(column.encode()).hexdigest()
        out.append(f"{name}\tlowered={lowered}\traised={raised}\tsha256={sha}")
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
    ap.add_argument(
        "--every",
        type=int,
        default=EVERY,
        help=f"every k-th schema only (default {EVERY}, as committed; a multiple of it checks a subset)",
    )
    ap.add_argument(
        "--raised",
        choices=[*OPTION_SETS, "any"],
        help="only the schemas whose committed digest under this option set (any: under one of them) is an "
        "error; when writing, "
        "their rows replace those of the committed table (for a change that only lowers what raised)",
    )
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    if args.every != EVERY and not args.check:
        ap.error(f"the committed files hold every {EVERY}-th schema: --every is for --check only")
    committed: list[str] = []
    only = None
    if args.raised:
        committed = gzip.decompress((args.out / "digests.tsv.gz").read_bytes()).decode().splitlines()
        header = committed[0].split("\t")
        cols = range(1, len(header)) if args.raised == "any" else [header.index(args.raised)]
        only = {row.split("\t")[0] for row in committed[1:] if any(row.split("\t")[c].startswith("!") for c in cols)}
    lines = build(args.jobs, args.every, only)
    if args.raised and not args.check:
        redone = {line.split("\t", 1)[0]: line for line in lines[1:]}
        lines = [committed[0], *(redone.get(row.split("\t", 1)[0], row) for row in committed[1:])]
        for name in sorted(redone):
            old_row = next(row for row in committed if row.startswith(name + "\t"))
            if old_row != redone[name]:
                print(f"changed\t{old_row}\n     ->\t{redone[name]}")
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
    if args.every == EVERY and not args.raised:
        for name in old:
            if name != "id":
                changed += 1
                print(f"missing\t{name}")
    same = (args.out / "SUMMARY").read_text() == text if args.every == EVERY and not args.raised else True
    print(text, end="")
    print(f"{'identical' if same and not changed else f'{changed} schemas differ'} ({len(lines) - 1} schemas)")
    return 0 if same and not changed else 1


if __name__ == "__main__":
    sys.exit(main())
