"""The binary layout the native drivers read (bench/native/walk_bench.cc, tests/native/threads.cc):
little-endian int32 values, byte strings as a length then the bytes, and the vocabulary file."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any


def _i32(out: bytearray, *values: int) -> None:
    out += struct.pack(f"<{len(values)}i", *values)


def _str(out: bytearray, data: bytes) -> None:
    _i32(out, len(data))
    out += data


def write_vocab(table: Any, out_dir: Path) -> None:
    """``out_dir/vocab.bin``: logits width, the token count, each token's bytes (-1 for a
    missing id), then the special ids and the EOS ids, each list after its length."""
    v = bytearray()
    _i32(v, table.logits_width, len(table.tokens))
    for t in table.tokens:
        if t is None:
            _i32(v, -1)
        else:
            _str(v, t)
    specials, eos = sorted(table.special_ids), list(table.eos_ids)
    _i32(v, len(specials), *specials)
    _i32(v, len(eos), *eos)
    (out_dir / "vocab.bin").write_bytes(bytes(v))
