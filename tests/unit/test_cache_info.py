"""The compiler's cache is bounded and observable (Compiler.cache_info, docs/limits.md "The
compiler's cache"); the soak test runs 10,000 distinct schemas through a bounded cache."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import logitgate as lg


def byte_vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)])


def test_hits_misses_and_sizes_are_counted() -> None:
    compiler = lg.Compiler(byte_vocab())
    info = compiler.cache_info()
    assert (info.entries, info.bytes, info.hits, info.misses, info.evictions) == (0, 0, 0, 0, 0)
    a = compiler.compile_regex("[a-z]+")
    assert compiler.compile_regex("[a-z]+") is a
    compiler.compile_json_schema({"type": "integer"})
    info = compiler.cache_info()
    assert (info.entries, info.hits, info.misses) == (2, 1, 2)
    assert info.bytes == compiler.cached_bytes > a.memory_bytes > 0
    assert (info.max_entries, info.max_bytes) == (256, lg.compiler.DEFAULT_CACHE_BYTES)


def test_least_recently_used_go_first_and_are_counted() -> None:
    compiler = lg.Compiler(byte_vocab(), cache_size=2)
    a = compiler.compile_regex("a+")
    compiler.compile_regex("b+")
    assert compiler.compile_regex("a+") is a  # a is now the most recently used
    compiler.compile_regex("c+")  # evicts b
    info = compiler.cache_info()
    assert (info.entries, info.evictions) == (2, 1)
    assert compiler.compile_regex("a+") is a
    misses = compiler.cache_info().misses
    compiler.compile_regex("b+")
    assert compiler.cache_info().misses == misses + 1


def test_byte_bound_holds_and_counts_the_oversized_grammar() -> None:
    compiler = lg.Compiler(byte_vocab(), cache_bytes=1_000_000)
    big = compiler.compile_regex(".{0,2000}")
    assert big.memory_bytes > 1_000_000
    info = compiler.cache_info()
    assert (info.entries, info.bytes, info.evictions) == (0, 0, 1)
    for i in range(40):
        compiler.compile_regex(f"x{{{i + 1}}}[0-9]{{0,{20 + i}}}")
    info = compiler.cache_info()
    assert 0 < info.bytes <= 1_000_000 and info.evictions > 1


def test_vocabulary_masks_are_reported() -> None:
    vocab = lg.Vocabulary.from_tokens([b"a", b"b", b"ab", b"ba", b"\x00", b"{", b'"'])
    compiler = lg.Compiler(vocab)
    before = compiler.cache_info().vocabulary_bytes
    m = compiler.compile_regex("[ab]{0,40}").matcher()
    bits = lg.allocate_mask(vocab)
    for _ in range(5):
        m.fill_mask(bits)
        m.accept(2)
    assert compiler.cache_info().vocabulary_bytes >= before >= 0


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_soak_ten_thousand_schemas_through_a_bounded_cache(tmp_path: Path) -> None:
    # Resident memory while 10,000 distinct schemas are compiled (and each one's matcher used
    # for a step) through a cache of 16 MiB: it levels off under the bound plus a fixed
    # overhead, and stops growing once the cache is full. The compiles also fill an on-disk
    # cache; a second process (a restarted server) then compiles the same 10,000 from it:
    # it compiles nothing, within the same memory bound.
    script = textwrap.dedent(
        """
        import ctypes, gc, json, sys, time
        import logitgate as lg
        libc = ctypes.CDLL("libc.so.6")

        def rss():
            gc.collect()
            libc.malloc_trim(0)
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096

        vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)])
        bound = 16 * 1024 * 1024
        compiler = lg.Compiler(vocab, cache_size=100_000, cache_bytes=bound, cache_dir=sys.argv[1])
        bits = lg.allocate_mask(vocab)
        compiler.compile_json_schema({"type": "integer"})
        start = rss()
        samples = []
        t0 = time.perf_counter()
        for i in range(10_000):
            schema = {
                "type": "object",
                "properties": {
                    f"k{i % 97}": {"type": "integer", "minimum": i},
                    "name": {"type": "string", "maxLength": 1 + i % 50},
                    "tags": {"type": "array", "items": {"enum": [f"t{i}", f"u{i % 13}"]}, "maxItems": 1 + i % 7},
                },
                "required": [f"k{i % 97}"],
            }
            m = compiler.compile_json_schema(schema).matcher()
            m.fill_mask(bits)
            if i % 1000 == 999:
                samples.append(rss())
        seconds = time.perf_counter() - t0
        info = compiler.cache_info()
        print(json.dumps({"start": start, "samples": samples, "bytes": info.bytes, "entries": info.entries,
                          "evictions": info.evictions, "misses": info.misses, "bound": bound,
                          "compiles": info.compiles, "disk_hits": info.disk_hits, "disk_errors": info.disk_errors,
                          "disk_bytes": info.disk_bytes, "ms_per_compile": round(seconds / 10.0, 3)}))
        """
    )
    mib = 1024 * 1024
    runs = {}
    for run in ("cold", "warm"):
        out = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=3000, check=True
        )
        r = runs[run] = json.loads(out.stdout.strip().splitlines()[-1])
        print(run, json.dumps(r))  # (shown with -s)
        assert r["misses"] == 10_001 and r["evictions"] > 0 and r["bytes"] <= r["bound"], r  # (+ the warm-up)
        overhead = 48 * mib  # interpreter heap, allocator slack, frontend memo tables
        assert max(r["samples"]) - r["start"] < r["bound"] + overhead, r
        # Once the cache is full the memory stops growing (the cache fills within the first 1,000).
        assert r["samples"][-1] - r["samples"][1] < 8 * mib, r
        assert r["disk_errors"] == 0, r
    assert (runs["cold"]["compiles"], runs["cold"]["disk_hits"]) == (10_001, 0)
    # The restart compiles nothing: every grammar comes from the directory.
    assert (runs["warm"]["compiles"], runs["warm"]["disk_hits"]) == (0, 10_001)
