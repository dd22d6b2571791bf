"""The on-disk cache of compiled grammars (Compiler(cache_dir=...), logitgate/disk_cache.py,
cpp/core/automaton_image.cc): a second compiler on the same directory loads instead of
compiling, with identical masks; unusable files are typed errors counted as misses; processes
share a directory; its size stays bounded."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import logitgate as lg
from logitgate import _core
from logitgate.disk_cache import ENVELOPE_VERSION, SUFFIX, DiskCache, pack, pack_entry, unpack, unpack_entry

# Every byte as a text token, some multi-byte pieces, two special tokens and EOS.
PIECES = [b'{"', b'":', b'",', b"true", b"false", b"null", b"name", b"ab", b"  ", b"\xc3\xa9", b"<tool>", b"</tool>"]
TOKENS: list[bytes | None] = [bytes([b]) for b in range(256)] + PIECES + [b"<think>", b"</think>", b"<eos>"]
THINK, END_THINK, EOS = len(TOKENS) - 3, len(TOKENS) - 2, len(TOKENS) - 1


def vocabulary() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens(TOKENS, eos_ids=[EOS], special_ids=[THINK, END_THINK])


SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "é"]}, "maxItems": 3},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age"],
}
TAG = {
    "type": "triggered_tags",
    "triggers": ["<tool>"],
    "tags": [
        {
            "type": "tag",
            "begin": "<tool>",
            "content": {
                "type": "json_schema",
                "json_schema": {"type": "object", "properties": {"x": {"type": "integer"}}},
            },
            "end": "</tool>",
        }
    ],
}
THINKING = {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}
GBNF = 'root ::= "(" item ("," item)* ")"\nitem ::= [a-z]+ | root'

# (what, compile call) for every frontend kind the cache serves.
KINDS: list[tuple[str, Any]] = [
    ("json_schema", lambda c: c.compile_json_schema(SCHEMA)),
    ("regex", lambda c: c.compile_regex(r"(ab|[0-9]{2,5}-)+(é|x{3})?")),
    ("gbnf", lambda c: c.compile_ebnf(GBNF)),
    ("structural_tag", lambda c: c.compile_structural_tag(TAG)),
    ("special_tokens", lambda c: c.compile_structural_tag(THINKING)),
]


def allowed(bits: np.ndarray, size: int) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(bits[0].view(np.uint8), bitorder="little")[:size])


def walk_masks_equal(a: lg.CompiledGrammar, b: lg.CompiledGrammar, seed: int, steps: int = 80) -> int:
    """Walks both grammars with the same random tokens; asserts every mask is identical.
    Returns the steps taken."""
    vocab = a.vocab
    ma, mb = a.matcher(), b.matcher()
    bits_a, bits_b = lg.allocate_mask(vocab), lg.allocate_mask(vocab)
    rng = random.Random(seed)
    for step in range(steps):
        ma.fill_mask(bits_a)
        mb.fill_mask(bits_b)
        assert np.array_equal(bits_a, bits_b), f"masks differ at step {step}"
        ids = allowed(bits_a, vocab.size)
        if ids.size == 0:
            return step
        choices = [int(i) for i in ids if i != EOS] or [EOS]
        t = EOS if EOS in ids and rng.random() < 0.15 else rng.choice(choices)
        assert ma.accept(t) and mb.accept(t)
        assert ma.is_complete() == mb.is_complete()
        if ma.is_terminated():
            return step + 1
    return steps


@pytest.mark.parametrize(("kind", "compile_fn"), KINDS, ids=[k for k, _ in KINDS])
def test_a_second_compiler_loads_instead_of_compiling(tmp_path: Path, kind: str, compile_fn: Any) -> None:
    vocab = vocabulary()
    first = lg.Compiler(vocab, cache_dir=tmp_path)
    a = compile_fn(first)
    info = first.cache_info()
    assert (info.compiles, info.disk_hits, info.disk_misses, info.disk_errors) == (1, 0, 1, 0)
    assert len(list(tmp_path.glob("*" + SUFFIX))) == 1 and info.disk_bytes > 0

    second = lg.Compiler(vocab, cache_dir=tmp_path)
    b = compile_fn(second)
    info = second.cache_info()
    assert (info.compiles, info.disk_hits, info.disk_misses, info.disk_errors) == (0, 1, 0, 0)
    assert b.num_states == a.num_states and b.to_ebnf() == a.to_ebnf()
    # The loaded automaton is the compiled one: its image is byte-identical.
    assert b._core.save_image() == a._core.save_image()
    plain = compile_fn(lg.Compiler(vocab))  # and masks agree with a compile without a cache
    steps = [walk_masks_equal(a, b, seed) for seed in range(12)] + [walk_masks_equal(plain, b, 99)]
    assert max(steps) > 3, steps


def test_real_tokenizer_round_trip(tmp_path: Path, smollm2_vocab: lg.Vocabulary) -> None:
    a = lg.Compiler(smollm2_vocab, cache_dir=tmp_path).compile_json_schema(SCHEMA)
    second = lg.Compiler(smollm2_vocab, cache_dir=tmp_path)
    b = second.compile_json_schema(SCHEMA)
    assert second.cache_info().compiles == 0
    vocab = smollm2_vocab
    for seed in range(4):
        ma, mb = a.matcher(), b.matcher()
        bits_a, bits_b = lg.allocate_mask(vocab), lg.allocate_mask(vocab)
        rng = random.Random(seed)
        for _ in range(40):
            ma.fill_mask(bits_a)
            mb.fill_mask(bits_b)
            assert np.array_equal(bits_a, bits_b)
            ids = [int(i) for i in allowed(bits_a, vocab.size) if int(i) not in vocab.eos_ids]
            if not ids:
                break
            t = rng.choice(ids)
            assert ma.accept(t) and mb.accept(t)


def test_the_key_holds_vocabulary_and_limits(tmp_path: Path) -> None:
    vocab = vocabulary()
    lg.Compiler(vocab, cache_dir=tmp_path).compile_regex("[a-c]{4}")
    other_vocab = lg.Vocabulary.from_tokens([*TOKENS[:-3], b"<think>", b"</think>", b"<end>"], eos_ids=[EOS])
    for compiler in (
        lg.Compiler(other_vocab, cache_dir=tmp_path),
        lg.Compiler(vocab, limits=lg.Limits(max_stack_depth=50), cache_dir=tmp_path),
    ):
        compiler.compile_regex("[a-c]{4}")
        assert (compiler.cache_info().compiles, compiler.cache_info().disk_hits) == (1, 0)
    assert len(list(tmp_path.glob("*" + SUFFIX))) == 3
    assert vocab.fingerprint() == vocabulary().fingerprint() != other_vocab.fingerprint()


def only_file(directory: Path) -> Path:
    (path,) = directory.glob("*" + SUFFIX)
    return path


def compile_again(directory: Path) -> lg.compiler.CacheInfo:
    compiler = lg.Compiler(vocabulary(), cache_dir=directory)
    compiler.compile_json_schema(SCHEMA)
    return compiler.cache_info()


def damage_image(data: bytes, offset: int, value: bytes) -> bytes:
    """The file with its automaton image changed at ``offset`` (from the end when negative)
    and the entry and envelope made consistent again (lengths, checksum): only the C++ loader
    can find what is wrong."""
    key = data[12:44]
    entry = unpack_entry(unpack(key, data))
    image = bytearray(entry.image)
    at = offset % len(image)
    image[at : at + len(value)] = value
    return pack(key, pack_entry(dataclasses.replace(entry, image=bytes(image))))


@pytest.mark.parametrize(
    ("damage", "code"),
    [
        (lambda d: d[: len(d) // 2], "cache-truncated"),
        (lambda d: d[:20], "cache-truncated"),
        (lambda d: d[:-1], "cache-truncated"),
        (lambda d: d + b"\0", "cache-inconsistent"),
        (lambda d: d[:-9] + bytes([d[-9] ^ 1]) + d[-8:], "cache-checksum"),
        (lambda d: b"PK\x03\x04" + d[4:], "cache-foreign"),
        (lambda d: b"", "cache-truncated"),
        (lambda d: d[:8] + struct.pack("<I", ENVELOPE_VERSION + 1) + d[12:], "cache-version"),
        (lambda d: damage_image(d, 4, struct.pack("<I", _core.image_version + 1)), "cache-version"),
        (lambda d: damage_image(d, 0, b"XXXX"), "cache-foreign"),
        (lambda d: damage_image(d, 12, struct.pack("<q", 7)), "cache-limits"),
        (lambda d: damage_image(d, -200, b"\xff\xff\xff\x7f"), None),  # an index or a count
        (lambda d: d[:44] + struct.pack("<Q", 3) + d[52:], "cache-inconsistent"),  # contents length
    ],
)
def test_an_unusable_file_is_a_counted_miss_and_is_replaced(tmp_path: Path, damage: Any, code: str | None) -> None:
    compile_again(tmp_path)
    path = only_file(tmp_path)
    data = path.read_bytes()
    damaged = damage(data)
    path.write_bytes(damaged)
    if code is not None:
        with pytest.raises(lg.CacheFileError) as e:
            image = unpack_entry(unpack(data[12:44], damaged)).image
            _core.load_grammar(vocabulary()._core, image, lg.compiler._limits_forms(lg.Limits())[1])
        assert e.value.code == code
    info = compile_again(tmp_path)
    assert (info.compiles, info.disk_hits, info.disk_errors) == (1, 0, 1)
    assert only_file(tmp_path).read_bytes() == data  # compiled again and rewritten
    assert compile_again(tmp_path).disk_hits == 1


def test_a_file_of_another_entry_is_refused(tmp_path: Path) -> None:
    compiler = lg.Compiler(vocabulary(), cache_dir=tmp_path)
    compiler.compile_regex("a+")
    first = only_file(tmp_path)
    data = first.read_bytes()
    first.unlink()
    compiler.compile_regex("b+")
    only_file(tmp_path).write_bytes(data)  # a+'s file under b+'s name
    again = lg.Compiler(vocabulary(), cache_dir=tmp_path)
    again.compile_regex("b+")
    assert (again.cache_info().disk_errors, again.cache_info().compiles) == (1, 1)


def test_every_truncation_and_every_byte_of_an_image_is_checked() -> None:
    # The C++ loader alone (no checksum in front): every prefix is refused with a typed error,
    # and a change at any byte is refused or loads, never crashes.
    vocab = vocabulary()
    limits = lg.compiler._limits_forms(lg.Limits())[1]
    image = lg.Compiler(vocab).compile_structural_tag(TAG)._core.save_image()
    assert _core.load_grammar(vocab._core, image, limits).save_image() == image
    for n in range(len(image)):
        with pytest.raises(lg.CacheFileError) as e:
            _core.load_grammar(vocab._core, image[:n], limits)
        assert e.value.code in ("cache-truncated", "cache-foreign"), (n, e.value.code)
    refused = 0
    for i in range(len(image)):
        for value in (0x00, 0xFF, image[i] ^ 0x80):
            changed = image[:i] + bytes([value]) + image[i + 1 :]
            try:
                _core.load_grammar(vocab._core, changed, limits)
            except lg.CacheFileError:
                refused += 1
            except lg.LogitgateError:  # what the checks cannot see, the grammar's own may
                pass
    assert refused > len(image)


def test_directory_size_is_bounded_least_recently_used_first(tmp_path: Path) -> None:
    vocab = vocabulary()
    compiler = lg.Compiler(vocab, cache_dir=tmp_path)
    compiler.compile_regex("keep[0-9]{1,3}")
    one = compiler.cache_info().disk_bytes
    bound = one * 12
    compiler = lg.Compiler(vocab, cache_size=0, cache_dir=tmp_path, cache_dir_bytes=bound)
    for i in range(60):
        compiler.compile_regex(f"x{i}[0-9]{{1,3}}")
        compiler.compile_regex("keep[0-9]{1,3}")  # a disk hit each time: recently used
        assert compiler.cache_info().disk_bytes <= bound
    info = compiler.cache_info()
    assert info.max_disk_bytes == bound and info.disk_hits == 60
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_grammar_larger_than_the_bound_is_not_written(tmp_path: Path) -> None:
    compiler = lg.Compiler(vocabulary(), cache_dir=tmp_path, cache_dir_bytes=1000)
    compiler.compile_regex("[a-z]{0,200}")
    assert compiler.cache_info().disk_bytes == 0


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(lg.UsageError):
        lg.Compiler(vocabulary(), cache_dir=tmp_path, cache_dir_bytes=-1)
    (tmp_path / "file").write_text("")
    with pytest.raises(lg.UsageError) as e:  # a file where the directory should be
        lg.Compiler(vocabulary(), cache_dir=tmp_path / "file")
    assert e.value.code == "compiler-cache-dir" and str(tmp_path / "file") in str(e.value)
    with pytest.raises(lg.UsageError) as e:
        lg.Compiler(vocabulary(), cache_dir=123)  # type: ignore[arg-type]
    assert e.value.code == "compiler-cache-dir"


def test_disk_cache_unpack_codes() -> None:
    key = bytes(32)
    data = pack(key, b"image")
    assert unpack(key, data) == b"image"
    with pytest.raises(lg.CacheFileError) as e:
        unpack(bytes([1]) * 32, data)
    assert e.value.code == "cache-key"
    with pytest.raises(lg.CacheFileError) as e:
        unpack(key, b"hello")
    assert e.value.code == "cache-foreign"


WRITER = textwrap.dedent(
    """
    import json, sys
    import logitgate as lg
    directory, worker, bound = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])
    compiler = lg.Compiler(vocab, cache_size=0, cache_dir=directory, cache_dir_bytes=bound)
    for i in range(120):
        k = (i * (worker + 1)) % 40  # the workers overlap on the same 40 grammars, in different orders
        compiler.compile_json_schema({"type": "object", "properties": {f"k{k}": {"type": "integer", "maximum": k}},
                                      "required": [f"k{k}"]})
    info = compiler.cache_info()
    print(json.dumps({"compiles": info.compiles, "disk_hits": info.disk_hits, "disk_errors": info.disk_errors}))
    """
)


def test_concurrent_writers_share_a_directory(tmp_path: Path) -> None:
    bound = 4 * 1024 * 1024
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(w), str(bound)], stdout=subprocess.PIPE, text=True
        )
        for w in range(4)
    ]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["disk_errors"] == 0 for r in results), results
    assert sum(r["disk_hits"] for r in results) > 0, results
    assert not list(tmp_path.glob(".tmp-*"))
    # Every file is whole: a fresh reader loads all 40 without compiling one.
    vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])
    files = sorted(tmp_path.glob("*" + SUFFIX))
    assert len(files) == 40
    cache = DiskCache(tmp_path)
    limits = lg.compiler._limits_forms(lg.Limits())[1]
    for f in files:
        blob = cache.load(bytes.fromhex(f.name[: -len(SUFFIX)]))
        assert blob is not None
        _core.load_grammar(vocab._core, unpack_entry(blob).image, limits)
    reader = lg.Compiler(vocab, cache_dir=tmp_path)
    for k in range(40):
        reader.compile_json_schema(
            {"type": "object", "properties": {f"k{k}": {"type": "integer", "maximum": k}}, "required": [f"k{k}"]}
        )
    assert (reader.cache_info().compiles, reader.cache_info().disk_hits) == (0, 40)
    assert os.path.getsize(files[0]) > 0


def test_a_hit_on_an_input_skips_its_frontend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vocab = vocabulary()
    unique = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    a = lg.Compiler(vocab, cache_dir=tmp_path).compile_json_schema(unique, lenient=True)
    assert a.dropped and a.rule_pointers

    import logitgate.frontends.json_schema as frontend

    def no_lowering(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the frontend ran")

    monkeypatch.setattr(frontend, "schema_to_grammar", no_lowering)
    second = lg.Compiler(vocab, cache_dir=tmp_path)
    b = second.compile_json_schema(unique, lenient=True)
    assert (b.dropped, b.rule_pointers) == (a.dropped, a.rule_pointers)
    assert b._grammar is None  # the IR is rebuilt only when asked for
    assert b.grammar == a.grammar and b.to_ebnf() == a.to_ebnf()
    assert b.token_budget().max_bytes == a.token_budget().max_bytes
    # Again in the same compiler: from memory (neither the file nor the frontend).
    assert second.compile_json_schema(unique, lenient=True)._core is b._core
    info = second.cache_info()
    assert (info.hits, info.misses, info.disk_hits, info.compiles) == (1, 1, 1, 0)
    # Options and property order are part of the input.
    with pytest.raises(AssertionError, match="the frontend ran"):
        second.compile_json_schema(unique)
    reordered = {"properties": {"b": {}, "a": {}}, "type": "object"}
    monkeypatch.undo()
    second.compile_json_schema({"type": "object", "properties": {"a": {}, "b": {}}})
    assert (
        second.compile_json_schema(reordered).to_ebnf()
        != second.compile_json_schema({"type": "object", "properties": {"a": {}, "b": {}}}).to_ebnf()
    )


def test_ir_grammars_and_choices_are_keyed_by_program(tmp_path: Path) -> None:
    from logitgate.grammar.ir import Grammar, Literal, Repeat

    vocab = vocabulary()
    ir = Grammar({"root": Repeat(Literal(b"ab"), 1, 4)})
    first = lg.Compiler(vocab, cache_dir=tmp_path)
    compiled = [first.compile_grammar(ir), first.compile_choice(["x", b"y"])]
    second = lg.Compiler(vocab, cache_dir=tmp_path)
    again = [second.compile_grammar(ir), second.compile_choice(["x", b"y"])]
    info = second.cache_info()
    assert (info.compiles, info.disk_hits) == (0, 2)
    for a, b in zip(compiled, again, strict=True):
        assert b._core.save_image() == a._core.save_image() and b.grammar == a.grammar


def write_images(directory: str) -> None:
    """Writes the automaton image of each of KINDS' compiles (and a 2,000-state regex) into
    ``directory``, for tests/native/image_load.cc (AddressSanitizer over the C++ loader)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    compiler = lg.Compiler(vocabulary())
    for kind, compile_fn in KINDS:
        (out / f"{kind}.img").write_bytes(compile_fn(compiler)._core.save_image())
    (out / "regex_2000.img").write_bytes(compiler.compile_regex("[a-z]{0,200}x")._core.save_image())


def test_concurrent_threads_share_a_directory(tmp_path: Path) -> None:
    import threading

    vocab = vocabulary()
    schemas = [{"type": "object", "properties": {f"p{i}": {"type": "integer", "minimum": i}}} for i in range(12)]
    compiler = lg.Compiler(vocab, cache_dir=tmp_path)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for k in range(len(schemas)):
                compiler.compile_json_schema(schemas[(k + offset) % len(schemas)])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(list(tmp_path.glob("*" + SUFFIX))) == len(schemas)
    assert lg.Compiler(vocab, cache_dir=tmp_path).compile_json_schema(schemas[3])._grammar is None  # from disk
