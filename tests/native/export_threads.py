"""Writes the inputs of the native thread test (tests/native/threads.cc): the vocabulary and
schemas of tests/unit/test_threads.py, each with token sequences from random walks through
its masks, in bench/native/export.py's layout (vocab.bin, cases.bin).

    python tests/native/export_threads.py OUT_DIR
"""

from __future__ import annotations

import random
import struct
import sys
from dataclasses import astuple
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "native"))

import numpy as np
from layout import _i32, _str, write_vocab
from test_threads import EOS, SCHEMAS, TOKENS, vocab

import logitgate as lg
from logitgate.frontends.json_schema import schema_to_grammar
from logitgate.grammar.program import serialize


def walk(grammar: lg.CompiledGrammar, rng: random.Random, steps: int) -> list[int]:
    m = grammar.matcher()
    bits = lg.allocate_mask(grammar.vocab)
    ids: list[int] = []
    for _ in range(steps):
        m.fill_mask(bits, row=0)
        allowed = np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little")[: len(TOKENS)])
        if len(allowed) == 0:
            break
        t = EOS if EOS in allowed and rng.random() < 0.3 else int(rng.choice(list(allowed)))
        assert m.accept(t)
        ids.append(t)
        if t == EOS:
            break
    return ids


def main() -> None:
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    table = vocab().table
    write_vocab(table, out_dir)
    compiler = lg.Compiler(vocab())
    rng = random.Random(0)
    c = bytearray()
    _i32(c, len(SCHEMAS))
    for k, schema in enumerate(SCHEMAS):
        grammar, _ = schema_to_grammar(schema, limits=compiler.limits)
        program, names = serialize(grammar, compiler.limits)
        _str(c, f"schema{k}".encode())
        ints = np.frombuffer(program, dtype=np.int32)
        _i32(c, len(ints), *ints.tolist())
        _i32(c, len(names))
        for n in names:
            _str(c, n.encode())
        limits = astuple(compiler.limits)[1:]  # the core's fields, in CoreLimits order
        c += struct.pack("<7q", *limits)
        compiled = compiler.compile_json_schema(schema)
        walks = [walk(compiled, rng, 80) for _ in range(16)]
        _i32(c, len(walks))
        for ids in walks:
            _i32(c, len(ids), *ids)
    (out_dir / "cases.bin").write_bytes(bytes(c))


if __name__ == "__main__":
    main()
