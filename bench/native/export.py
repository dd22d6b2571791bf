"""Exports a harness run's inputs for the native driver (bench/native/walk_bench.cc).

    python bench/native/export.py bench/results/<run>/cases.json OUT_DIR [--tokenizer smollm2]

Writes OUT_DIR/vocab.bin (the tokenizer's exact token bytes, special and EOS ids) and
OUT_DIR/cases.bin (per case: id, the serialized grammar program, rule names, limits and the
instances' token ids), so that mask walks and core compiles can be measured and profiled
(perf, valgrind) without Python in the loop. Cases the frontends reject are left out.
Little-endian int32/int64 throughout; strings are a length followed by bytes.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from array import array
from dataclasses import astuple
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layout import _i32, _str, write_vocab

from common import load_tokenizer, pin_threads

pin_threads()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cases", help="cases.json of a bench/run.py run")
    ap.add_argument("out", help="output folder")
    ap.add_argument("--tokenizer", default=None, help="default: the one cases.json names")
    args = ap.parse_args()

    import logitgate as lg
    from logitgate.frontends.gbnf import parse_gbnf
    from logitgate.frontends.json_schema import schema_to_grammar
    from logitgate.frontends.regex import parse_regex
    from logitgate.grammar.program import serialize

    data = json.loads(Path(args.cases).read_text())
    tok = load_tokenizer(args.tokenizer or data["tokenizer"])
    vocab = lg.Vocabulary.from_huggingface(tok)
    table = vocab.table
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    write_vocab(table, out_dir)

    limits = lg.Limits()
    c = bytearray()
    kept = []
    for case in data["cases"]:
        try:
            if case["kind"] == "gbnf":
                grammar = parse_gbnf(case["source"], root="root", limits=limits)
            elif case["kind"] == "regex":
                grammar = parse_regex(case["source"], limits=limits)
            else:
                grammar, _ = schema_to_grammar(case["source"], limits=limits, check_empty=False)
            program, names = serialize(grammar, limits)
        except Exception as exc:  # the frontends' typed errors: the case is not exported
            print(f"skip {case['id']}: {type(exc).__name__}", file=sys.stderr)
            continue
        kept.append(case)
        _str(c, case["id"].encode())
        ints = array("i", program)
        _i32(c, len(ints), *ints)
        _i32(c, len(names))
        for n in names:
            _str(c, n.encode())
        c += struct.pack("<7q", *astuple(limits)[1:8])
        _i32(c, len(case["instances"]))
        for inst in case["instances"]:
            _i32(c, len(inst), *inst)
    (out_dir / "cases.bin").write_bytes(struct.pack("<i", len(kept)) + bytes(c))
    print(f"{len(kept)} of {len(data['cases'])} cases, vocabulary of {len(table.tokens)} tokens -> {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
