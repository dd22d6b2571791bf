"""Exact per-token bytes for every tokenizer family logitgate supports.

A grammar constrains *bytes*; a model samples *token ids*. The bridge is a :class:`TokenTable`:
for each id, the exact bytes that id contributes to the output text (``None`` when the id has
no bytes), which ids are special (never produced by grammar text), which ids end generation,
and the model's logits width (the size every mask must have).

Invariants of a :class:`TokenTable` (checked on construction):

- ``len(tokens) <= logits_width``; ids in ``[len(tokens), logits_width)`` have no bytes.
- ``eos_ids`` is a subset of ``special_ids``, and every special id is ``< len(tokens)``.
- joining ``tokens[i]`` over the ids a tokenizer produces for a text gives the text's UTF-8
  bytes (for texts the tokenizer's normalizer leaves unchanged; see docs/tokenizers.md).

This module is pure Python: no torch, no native core. Loaders read tokenizer files themselves
(``tokenizer.json``, ``.tiktoken`` rank files, GGUF metadata) and treat them as untrusted input:
a malformed file raises :class:`~logitgate.errors.VocabularyError`, never crashes or allocates
without bound.
"""

from __future__ import annotations

import base64
import binascii
import json
import mmap
import os
import re
import struct
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from logitgate.errors import VocabularyError

__all__ = [
    "EOS_TOKEN_NAMES",
    "GgufMetadata",
    "TokenTable",
    "read_gguf_metadata",
    "table_from_gguf",
    "table_from_huggingface",
    "table_from_tiktoken",
    "table_from_tokens",
]

#: Largest vocabulary / logits width accepted (16 Mi ids). Real models are below 1 Mi; the cap
#: stops a corrupt file from asking for a giant allocation.
MAX_VOCAB = 1 << 24

#: Token texts that end a turn or a document in common model families. A token with one of these
#: texts is added to ``eos_ids`` when it is special in its table (Gemma has an ordinary HTML
#: token ``</s>``; it is text there, so it is not an EOS). The tokenizer's own EOS id is always
#: added too.
EOS_TOKEN_NAMES: tuple[str, ...] = (
    "<|im_end|>",  # ChatML (Qwen, SmolLM, many fine-tunes)
    "<|eot_id|>",  # Llama 3 end of turn
    "<|eom_id|>",  # Llama 3.1 end of message (tool call follows)
    "<|end_of_text|>",  # Llama 3 end of document
    "<|endoftext|>",  # GPT-2 / tiktoken / Qwen / SmolLM end of document
    "<end_of_turn>",  # Gemma end of turn
    "<eos>",  # Gemma end of document
    "<|end|>",  # Phi-3 end of turn
    "</s>",  # SentencePiece (Llama 2, Mistral) end of document
)

# HTML element names. Gemma's vocabulary has added tokens such as "<table>" and "</b>" that
# the model emits as ordinary HTML text; they look like control tokens but are text.
_HTML_ELEMENTS = frozenset(
    "a abbr b blockquote body br caption cite code col dd del details div dl dt em figcaption figure "
    "footer h1 h2 h3 h4 h5 h6 head header hr html i iframe img ins kbd li mark ol p pre q s samp "
    "section small span strong sub summary sup table tbody td tfoot th thead tr u ul".split()
)
_HTML_TAG = re.compile(r"</?([a-z][a-z0-9]*)>")
_CONTROL_LOOKING = re.compile(r"<[^<>]*>|\[[^\[\]]*\]|<\|.*\|>", re.DOTALL)
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
# The marker a chat template appends right after a message's content, e.g.
# ``message['content'] | trim + '<|eot_id|>'``: that marker ends the model's turn.
_TEMPLATE_END = re.compile(r"""content['"]?\]?\s*(?:\|\s*trim\s*)?\+\s*['"](<[^<>'"]+>)""")
_SPIECE_SPACE = "\u2581"  # '▁', SentencePiece's visible space


@dataclass(frozen=True)
class TokenTable:
    """Per-id bytes and roles of a vocabulary, sized to a model's logits.

    Attributes:
        tokens: index = token id; the id's exact output bytes, or ``None`` for an id with no
            bytes (unused rank, padding). Special tokens keep their text here but are listed
            in ``special_ids``; a grammar never produces them.
        special_ids: ids a grammar never produces as text (control, unknown, unused, EOS...).
        eos_ids: ids allowed exactly when the grammar may end (a subset of ``special_ids``).
        logits_width: the width of a mask; ``>= len(tokens)``; ids beyond ``len(tokens)`` are
            always masked.

    The dataclass is frozen but holds a list, so it is not hashable; treat ``tokens`` as
    read-only.
    """

    tokens: list[bytes | None]
    special_ids: frozenset[int]
    eos_ids: tuple[int, ...]
    logits_width: int
    _n_text: int = field(default=-1, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if not 1 <= self.logits_width <= MAX_VOCAB:
            raise VocabularyError(f"logits width {self.logits_width} outside 1..{MAX_VOCAB}")
        if n > self.logits_width:
            raise VocabularyError(f"{n} tokens exceed the logits width {self.logits_width}")
        for i in self.special_ids:
            if not 0 <= i < n:
                raise VocabularyError(f"special id {i} outside the table of {n} tokens")
        for i in self.eos_ids:
            if i not in self.special_ids:
                raise VocabularyError(f"EOS id {i} is not a special id")
        count = 0
        for i, t in enumerate(self.tokens):
            if t is None:
                continue
            if not isinstance(t, bytes):
                raise VocabularyError(f"token {i} is {type(t).__name__}, not bytes or None")
            if i not in self.special_ids:
                count += 1
        object.__setattr__(self, "_n_text", count)

    @property
    def n_text_tokens(self) -> int:
        """How many ids have bytes and are not special (the ids a grammar can allow)."""
        return self._n_text

    def is_text(self, token_id: int) -> bool:
        """True when ``token_id`` has bytes and is not special."""
        return (
            0 <= token_id < len(self.tokens)
            and self.tokens[token_id] is not None
            and (token_id not in self.special_ids)
        )

    def decode(self, ids: Iterable[int]) -> bytes:
        """Join the bytes of ``ids``; special ids and ids without bytes contribute nothing."""
        out = bytearray()
        n = len(self.tokens)
        for i in ids:
            if 0 <= i < n and i not in self.special_ids:
                t = self.tokens[i]
                if t is not None:
                    out += t
        return bytes(out)


def table_from_tokens(
    tokens: Sequence[bytes | None],
    eos_ids: Iterable[int] = (),
    special_ids: Iterable[int] = (),
    logits_width: int | None = None,
) -> TokenTable:
    """Build a table from explicit per-id bytes.

    ``logits_width`` defaults to ``len(tokens)``. When it is smaller, tokens (and special/EOS
    ids) at or beyond it are dropped: the model can never sample them. EOS ids become special.
    """
    width = len(tokens) if logits_width is None else logits_width
    if isinstance(width, bool) or not isinstance(width, int):
        raise VocabularyError(f"logits width must be an int, got {type(width).__name__}")
    if not 1 <= width <= MAX_VOCAB:
        raise VocabularyError(f"logits width {width} outside 1..{MAX_VOCAB}")
    kept: list[bytes | None] = []
    for i, t in enumerate(tokens[:width]):
        if t is None or isinstance(t, bytes):
            kept.append(t)
        elif isinstance(t, (bytearray, memoryview)):
            kept.append(bytes(t))
        else:
            raise VocabularyError(f"token {i} is {type(t).__name__}, not bytes or None")
    n = len(kept)
    specials: set[int] = set()
    for i in special_ids:
        _check_id(i, "special")
        if i < n:
            specials.add(i)
    eos: list[int] = []
    for i in eos_ids:
        _check_id(i, "EOS")
        if i < n and i not in eos:
            eos.append(i)
            specials.add(i)
    return TokenTable(tokens=kept, special_ids=frozenset(specials), eos_ids=tuple(eos), logits_width=width)


def _check_id(i: object, what: str) -> None:
    if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < MAX_VOCAB:
        raise VocabularyError(f"invalid {what} id {i!r}")


# ---------------------------------------------------------------------------------------------
# Byte-level BPE (GPT-2 family): each byte is shown as one printable character.


def _byte_level_table() -> dict[str, int]:
    """The GPT-2 byte <-> character table, inverted: character -> byte.

    Bytes that are printable and not whitespace in Latin-1 (``!``..``~``, ``¡``..``¬``,
    ``®``..``ÿ``) stand for themselves; the other 68 bytes, in increasing order, take the
    characters U+0100, U+0101, ... (so space, byte 0x20, is ``Ġ`` U+0120 and ``\\n`` is ``Ċ``).
    """
    direct = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    direct_set = set(direct)
    char_to_byte = {chr(b): b for b in direct}
    extra = 0
    for b in range(256):
        if b not in direct_set:
            char_to_byte[chr(0x100 + extra)] = b
            extra += 1
    return char_to_byte


_CHAR_TO_BYTE = _byte_level_table()


def _byte_level_bytes(text: str) -> bytes:
    """Bytes of a byte-level token string; a string with a character outside the table (an
    added token written as plain text) is taken as UTF-8, as Hugging Face decoders do."""
    table = _CHAR_TO_BYTE
    try:
        return bytes([table[c] for c in text])
    except KeyError:
        return text.encode("utf-8")


def _sentencepiece_bytes(text: str, byte_fallback: bool) -> bytes:
    """Bytes of a SentencePiece piece: ``▁`` is a space; ``<0xNN>`` is the single byte NN."""
    if byte_fallback and len(text) == 6 and text.startswith("<0x"):
        m = _BYTE_FALLBACK.fullmatch(text)
        if m:
            return bytes([int(m.group(1), 16)])
    return text.replace(_SPIECE_SPACE, " ").encode("utf-8")


def _looks_control(text: str, byte_fallback: bool) -> bool:
    """True for texts shaped like control tokens (``<unused5>``, ``<|im_start|>``,
    ``[multimodal]``), except byte-fallback pieces and plain HTML tags."""
    if not _CONTROL_LOOKING.fullmatch(text):
        return False
    if byte_fallback and _BYTE_FALLBACK.fullmatch(text):
        return False
    m = _HTML_TAG.fullmatch(text)
    return not (m and m.group(1) in _HTML_ELEMENTS)


def _template_markers(template: str | None) -> tuple[set[str], set[str]]:
    """(tags mentioned in a chat template, tags appended right after a message's content)."""
    if not template:
        return set(), set()
    mentioned = set(re.findall(r"<[^<>\s'\"]+>|\[[^\[\]\s'\"]+\]", template))
    ends = set(_TEMPLATE_END.findall(template))
    return mentioned, ends


def _decide_eos(
    tokens: Sequence[bytes | None],
    texts: Mapping[int, str],
    specials: set[int],
    explicit: Iterable[int],
    template_ends: Collection[str],
) -> list[int]:
    """EOS ids: the tokenizer's own, then special tokens named in EOS_TOKEN_NAMES or appended
    after message content by the chat template. ``texts`` maps candidate ids to their text."""
    eos: list[int] = []
    for i in explicit:
        if 0 <= i < len(tokens) and i not in eos:
            eos.append(i)
    names = set(EOS_TOKEN_NAMES) | set(template_ends)
    for i in sorted(texts):
        if texts[i] in names and i in specials and i not in eos:
            eos.append(i)
    return eos


# ---------------------------------------------------------------------------------------------
# Hugging Face tokenizers (tokenizer.json)


@dataclass
class _HfExtras:
    """What a tokenizer.json alone does not say: the names of bos/eos/pad/unk, extra special
    tokens, the chat template and generation EOS ids (from tokenizer_config.json,
    generation_config.json or a transformers tokenizer's attributes)."""

    named_tokens: set[str] = field(default_factory=set)
    eos_names: set[str] = field(default_factory=set)
    eos_ids: list[int] = field(default_factory=list)
    chat_template: str | None = None


def _token_name(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return getattr(value, "content", None) if isinstance(getattr(value, "content", None), str) else None


def _int_ids(value: object) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _extras_from_config(config: Mapping[str, Any], gen: Mapping[str, Any] | None) -> _HfExtras:
    ex = _HfExtras()
    for key in ("bos_token", "eos_token", "pad_token", "unk_token", "mask_token", "sep_token", "cls_token"):
        name = _token_name(config.get(key))
        if name:
            ex.named_tokens.add(name)
    eos_name = _token_name(config.get("eos_token"))
    if eos_name:
        ex.eos_names.add(eos_name)
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list):
        ex.named_tokens.update(n for n in (_token_name(v) for v in extra) if n)
    extra_map = config.get("extra_special_tokens")
    if isinstance(extra_map, Mapping):
        ex.named_tokens.update(n for n in (_token_name(v) for v in extra_map.values()) if n)
    ct = config.get("chat_template")
    if isinstance(ct, list):  # a list of named templates
        ct = "\n".join(str(t.get("template", "")) for t in ct if isinstance(t, Mapping))
    ex.chat_template = ct if isinstance(ct, str) else None
    if gen:
        ex.eos_ids.extend(_int_ids(gen.get("eos_token_id")))
    return ex


def _read_json_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise VocabularyError(f"cannot read {path}: {e}") from e


def _load_hf_source(tokenizer: object) -> tuple[Mapping[str, Any], _HfExtras]:
    """Return (tokenizer.json as a dict, extras) for a path, a tokenizers.Tokenizer or a
    transformers tokenizer."""
    if isinstance(tokenizer, (str, os.PathLike)):
        path = os.fspath(tokenizer)
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
        data = _read_json_file(file)
        cfg_path = os.path.join(folder, "tokenizer_config.json")
        gen_path = os.path.join(folder, "generation_config.json")
        cfg = _read_json_file(cfg_path) if os.path.isfile(cfg_path) else {}
        gen = _read_json_file(gen_path) if os.path.isfile(gen_path) else None
        if not isinstance(cfg, Mapping):
            cfg = {}
        return data, _extras_from_config(cfg, gen if isinstance(gen, Mapping) else None)
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # a transformers fast tokenizer
        data = _json_of(backend)
        cfg = {
            key: getattr(tokenizer, key, None)
            for key in ("bos_token", "eos_token", "pad_token", "unk_token", "mask_token", "sep_token", "cls_token")
        }
        cfg["additional_special_tokens"] = list(getattr(tokenizer, "additional_special_tokens", None) or [])
        cfg["additional_special_tokens"] += list(getattr(tokenizer, "all_special_tokens", None) or [])
        cfg["chat_template"] = getattr(tokenizer, "chat_template", None)
        gen = getattr(tokenizer, "generation_config", None)
        gen_map: dict[str, Any] = {"eos_token_id": getattr(gen, "eos_token_id", None)} if gen is not None else {}
        ex = _extras_from_config(cfg, gen_map)
        ex.eos_ids[:0] = _int_ids(getattr(tokenizer, "eos_token_id", None))
        return data, ex
    if hasattr(tokenizer, "to_str"):  # a tokenizers.Tokenizer
        return _json_of(tokenizer), _HfExtras()
    raise VocabularyError(
        f"unsupported tokenizer object {type(tokenizer).__name__}: pass a path, a tokenizers.Tokenizer or a "
        "transformers fast tokenizer (use_fast=True)"
    )


def _json_of(backend: Any) -> Mapping[str, Any]:
    fast = _fast_json_of(backend)
    if fast is not None:
        return fast
    try:
        data = json.loads(backend.to_str())
    except (ValueError, TypeError, AttributeError) as e:
        raise VocabularyError(f"cannot serialize the tokenizer to JSON: {e}") from e
    if not isinstance(data, Mapping):
        raise VocabularyError("tokenizer JSON is not an object")
    return data


def _fast_json_of(backend: Any) -> Mapping[str, Any] | None:
    """The parts of the tokenizer JSON we read, through the ``tokenizers`` object API.

    Serializing a whole tokenizer (``to_str``) and parsing it back costs seconds on 262k
    vocabularies, mostly for the merges we never read. Returns None when the object does not
    offer this API (then the full JSON is used).
    """
    try:
        model = backend.model
        mtype = type(model).__name__
        if mtype not in ("BPE", "WordLevel", "Unigram", "WordPiece"):
            return None
        by_text = backend.get_vocab(with_added_tokens=False)
        vocab: Any = by_text
        if mtype == "Unigram":
            vocab = [[t, 0.0] for t, _ in sorted(by_text.items(), key=lambda kv: kv[1])]
        model_json: dict[str, Any] = {
            "type": mtype,
            "vocab": vocab,
            "byte_fallback": getattr(model, "byte_fallback", False),
        }
        if mtype == "Unigram" and getattr(model, "unk_id", None) is not None:
            model_json["unk_id"] = model.unk_id
        added = [
            {"id": i, "content": a.content, "special": a.special}
            for i, a in sorted(backend.get_added_tokens_decoder().items())
        ]
        decoder = json.loads(backend.decoder.__getstate__()) if backend.decoder is not None else None
        pre = json.loads(backend.pre_tokenizer.__getstate__()) if backend.pre_tokenizer is not None else None
    except (AttributeError, TypeError, ValueError):
        return None
    return {"model": model_json, "decoder": decoder, "pre_tokenizer": pre, "added_tokens": added}


def _decoder_kind(data: Mapping[str, Any]) -> tuple[str, bool]:
    """Classify the decoder: ("byte_level" | "sentencepiece", byte_fallback)."""
    model = data.get("model") or {}
    dec = data.get("decoder")
    parts: list[Mapping[str, Any]] = []
    if isinstance(dec, Mapping):
        parts = list(dec.get("decoders") or []) if dec.get("type") == "Sequence" else [dec]
    byte_fallback = bool(model.get("byte_fallback"))
    kind = ""
    for p in parts:
        if not isinstance(p, Mapping):
            raise VocabularyError("malformed decoder entry")
        t = p.get("type")
        if t == "ByteLevel":
            kind = "byte_level"
        elif t == "Metaspace":
            if p.get("replacement", _SPIECE_SPACE) != _SPIECE_SPACE:
                raise VocabularyError(f"Metaspace decoder with replacement {p.get('replacement')!r} is not supported")
            kind = "sentencepiece"
        elif t == "Replace":
            pat = (p.get("pattern") or {}).get("String")
            if pat == _SPIECE_SPACE and p.get("content") == " ":
                kind = "sentencepiece"
            else:
                raise VocabularyError(f"Replace decoder {pat!r} -> {p.get('content')!r} is not supported")
        elif t == "ByteFallback":
            byte_fallback = True
        elif t in ("Fuse", "Strip"):
            # Fuse only joins strings; Strip removes a leading space of the *first* token of a
            # decode call, which per-token bytes cannot express (see docs/tokenizers.md).
            continue
        else:
            raise VocabularyError(f"decoder {t!r} does not give exact per-token bytes")
    if not kind:
        pre = json.dumps(data.get("pre_tokenizer"))
        if '"ByteLevel"' in pre:
            kind = "byte_level"
        elif model.get("type") == "WordPiece":
            raise VocabularyError("WordPiece tokenizers drop the spaces between words: no exact per-token bytes")
        else:
            raise VocabularyError(f"cannot tell how tokens map to bytes (decoder {dec!r})")
    return kind, byte_fallback


def _hf_vocab(model: Mapping[str, Any]) -> dict[int, str]:
    mtype = model.get("type")
    vocab = model.get("vocab")
    out: dict[int, str] = {}
    if mtype in ("BPE", "WordLevel") and isinstance(vocab, Mapping):
        for text, i in vocab.items():
            _check_id(i, "vocabulary")
            if i in out:
                raise VocabularyError(f"id {i} appears twice in the vocabulary")
            out[i] = str(text)
    elif mtype == "Unigram" and isinstance(vocab, list):
        if len(vocab) > MAX_VOCAB:
            raise VocabularyError("vocabulary too large")
        for i, entry in enumerate(vocab):
            if not isinstance(entry, (list, tuple)) or not entry or not isinstance(entry[0], str):
                raise VocabularyError(f"malformed Unigram entry {i}")
            out[i] = entry[0]
    elif mtype == "WordPiece":
        raise VocabularyError("WordPiece tokenizers drop the spaces between words: no exact per-token bytes")
    else:
        raise VocabularyError(f"unsupported tokenizer model {mtype!r}")
    return out


def table_from_huggingface(
    tokenizer: object,
    logits_width: int | None = None,
    *,
    extra_special: Iterable[str] = (),
) -> TokenTable:
    """Build a table from a Hugging Face tokenizer.

    ``tokenizer`` is a ``transformers`` fast tokenizer, a ``tokenizers.Tokenizer``, or a path to
    a ``tokenizer.json`` file or its folder (then ``tokenizer_config.json`` and
    ``generation_config.json`` beside it are read too). Supported: byte-level BPE (GPT-2,
    Llama 3, Qwen) and SentencePiece-style BPE/Unigram (``▁`` spaces, ``<0xNN>`` byte
    fallback, e.g. Gemma). WordPiece raises :class:`VocabularyError`.

    An added token is special when flagged special, when named as bos/eos/pad/unk/extra special
    token, when its text appears as a tag in the chat template, or when it looks like a control
    token (``<...>``, ``[...]``, ``<|...|>``) and is neither a byte-fallback piece nor a plain HTML
    tag. ``extra_special`` names more token texts to treat as special. ``logits_width`` defaults
    to the largest id + 1.
    """
    data, extras = _load_hf_source(tokenizer)
    model = data.get("model")
    if not isinstance(model, Mapping):
        raise VocabularyError("tokenizer JSON has no model")
    kind, byte_fallback = _decoder_kind(data)
    vocab = _hf_vocab(model)
    added = data.get("added_tokens") or []
    if not isinstance(added, list):
        raise VocabularyError("added_tokens is not a list")
    added_by_id: dict[int, Mapping[str, Any]] = {}
    for a in added:
        if not isinstance(a, Mapping) or not isinstance(a.get("content"), str):
            raise VocabularyError("malformed added token")
        _check_id(a.get("id"), "added token")
        added_by_id[int(a["id"])] = a
    max_id = max([*vocab, *added_by_id], default=-1)
    if max_id < 0:
        raise VocabularyError("empty vocabulary")

    def model_bytes(text: str) -> bytes:
        if kind == "byte_level":
            return _byte_level_bytes(text)
        return _sentencepiece_bytes(text, byte_fallback)

    tokens: list[bytes | None] = [None] * (max_id + 1)
    for i, text in vocab.items():
        tokens[i] = model_bytes(text)
    mentioned, template_ends = _template_markers(extras.chat_template)
    named = extras.named_tokens | set(extra_special)
    specials: set[int] = set()
    texts: dict[int, str] = {}
    for i, a in added_by_id.items():
        content = str(a["content"])
        texts[i] = content
        # An added token that is also the model's own piece (Gemma) goes through the model's
        # decoding; one outside the model vocabulary is matched in raw text, so it is UTF-8.
        tokens[i] = model_bytes(content) if vocab.get(i) == content else content.encode("utf-8")
        control = _looks_control(content, byte_fallback)
        if (
            a.get("special")
            or content in named
            or (content in mentioned and _CONTROL_LOOKING.fullmatch(content) is not None)
            or control
        ):
            specials.add(i)
    if model.get("type") == "Unigram" and isinstance(model.get("unk_id"), int):
        specials.add(int(model["unk_id"]))
    eos_ids = [i for i in extras.eos_ids]
    for i, content in texts.items():
        if content in extras.eos_names:
            eos_ids.append(i)
            specials.add(i)
    eos = _decide_eos(tokens, texts, specials, eos_ids, template_ends)
    return table_from_tokens(tokens, eos_ids=eos, special_ids=specials, logits_width=logits_width or max_id + 1)


# ---------------------------------------------------------------------------------------------
# tiktoken rank files

#: Special tokens of the public tiktoken encodings, used when a rank file's name identifies it
#: and ``special_tokens`` is not given.
KNOWN_TIKTOKEN_SPECIALS: dict[str, dict[str, int]] = {
    "r50k_base": {"<|endoftext|>": 50256},
    "p50k_base": {"<|endoftext|>": 50256},
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}


def _parse_tiktoken_file(path: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    try:
        with open(path, "rb") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                parts = line.split()
                if len(parts) != 2:
                    raise VocabularyError(f"{path}:{lineno}: expected '<base64 token> <rank>'")
                try:
                    tok = base64.b64decode(parts[0], validate=True)
                    rank = int(parts[1])
                except (binascii.Error, ValueError) as e:
                    raise VocabularyError(f"{path}:{lineno}: {e}") from e
                if tok in ranks:
                    raise VocabularyError(f"{path}:{lineno}: token {tok!r} listed twice")
                ranks[tok] = rank
    except OSError as e:
        raise VocabularyError(f"cannot read {path}: {e}") from e
    return ranks


def table_from_tiktoken(
    path_or_ranks: str | os.PathLike[str] | Mapping[bytes, int],
    special_tokens: Mapping[str, int] | None = None,
    logits_width: int | None = None,
) -> TokenTable:
    """Build a table from a tiktoken rank table (rank = token id).

    ``path_or_ranks`` is a ``.tiktoken`` file (base64 token and rank per line) or a
    ``dict[bytes, int]``. ``special_tokens`` maps special texts to ids; when omitted and the file
    is named like a public encoding (``cl100k_base.tiktoken``...), its known specials are used.
    Ids missing from the range are ``None``. ``<|endoftext|>`` is the EOS when present.
    """
    if isinstance(path_or_ranks, Mapping):
        ranks = dict(path_or_ranks)
    else:
        path = os.fspath(path_or_ranks)
        ranks = _parse_tiktoken_file(path)
        if special_tokens is None:
            stem = os.path.basename(path).split(".")[0]
            special_tokens = KNOWN_TIKTOKEN_SPECIALS.get(stem)
    specials = dict(special_tokens or {})
    by_id: dict[int, bytes] = {}
    for tok, rank in ranks.items():
        if not isinstance(tok, bytes):
            raise VocabularyError(f"rank table key {tok!r} is not bytes")
        _check_id(rank, "rank")
        if rank in by_id:
            raise VocabularyError(f"rank {rank} is used twice")
        by_id[rank] = tok
    for text, i in specials.items():
        _check_id(i, "special token")
        if i in by_id:
            raise VocabularyError(f"special token {text!r} reuses rank {i}")
        by_id[i] = text.encode("utf-8")
    if not by_id:
        raise VocabularyError("empty rank table")
    tokens: list[bytes | None] = [None] * (max(by_id) + 1)
    for i, tok in by_id.items():
        tokens[i] = tok
    eos = [specials["<|endoftext|>"]] if "<|endoftext|>" in specials else []
    return table_from_tokens(tokens, eos_ids=eos, special_ids=specials.values(), logits_width=logits_width)


# ---------------------------------------------------------------------------------------------
# GGUF metadata

_GGUF_SCALAR: dict[int, str] = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
_GGUF_STRING = 8
_GGUF_ARRAY = 9
_GGUF_MAX_DIMS = 8


@dataclass(frozen=True)
class GgufMetadata:
    """The key/value metadata of a GGUF file (only the requested keys) and the shapes of its
    tensors (``ne`` order: the first dimension is the fastest-varying one)."""

    version: int
    kv: dict[str, Any]
    tensor_shapes: dict[str, tuple[int, ...]]


class _GgufCursor:
    """Bounds-checked little/big-endian reads over a buffer."""

    def __init__(self, buf: bytes | mmap.mmap, endian: str) -> None:
        self.buf = buf
        self.size = len(buf)
        self.pos = 0
        self.endian = endian

    def need(self, n: int) -> None:
        if n < 0 or self.pos + n > self.size:
            raise VocabularyError(f"GGUF file truncated at byte {self.pos} (needs {n} more)")

    def scalar(self, fmt: str) -> Any:
        st = struct.Struct(self.endian + fmt)
        self.need(st.size)
        (v,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v

    def raw_string(self) -> bytes:
        n = self.scalar("Q")
        self.need(n)
        s = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return s

    def string(self) -> str:
        raw = self.raw_string()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise VocabularyError(f"GGUF string before byte {self.pos} is not UTF-8") from e

    def skip_string(self) -> None:
        n = self.scalar("Q")
        self.need(n)
        self.pos += n

    def count(self, min_item: int) -> int:
        """An element count that the rest of the file could possibly hold."""
        n = self.scalar("Q")
        if min_item > 0 and n > (self.size - self.pos) // min_item:
            raise VocabularyError(f"GGUF count {n} at byte {self.pos} exceeds the file size")
        return int(n)

    def value(self, vtype: int, keep: bool) -> Any:
        """Read (keep=True) or skip one value. Arrays of arrays are skipped with an explicit
        stack and read as ``None``."""
        if vtype in _GGUF_SCALAR:
            return self.scalar(_GGUF_SCALAR[vtype])
        if vtype == _GGUF_STRING:
            if keep:
                return self.string()
            self.skip_string()
            return None
        if vtype != _GGUF_ARRAY:
            raise VocabularyError(f"unknown GGUF value type {vtype} at byte {self.pos}")
        etype = self.scalar("I")
        if etype in _GGUF_SCALAR:
            st = struct.Struct(self.endian + _GGUF_SCALAR[etype])
            n = self.count(st.size)
            if not keep:
                self.pos += n * st.size
                return None
            out = [v for (v,) in st.iter_unpack(self.buf[self.pos : self.pos + n * st.size])]
            self.pos += n * st.size
            return out
        if etype == _GGUF_STRING:
            n = self.count(8)
            if not keep:
                for _ in range(n):
                    self.skip_string()
                return None
            return [self.string() for _ in range(n)]
        if etype == _GGUF_ARRAY:  # no tokenizer key is nested: skip, keep nothing
            self._skip_nested(self.count(12))
            return None
        raise VocabularyError(f"unknown GGUF array element type {etype} at byte {self.pos}")

    def _skip_nested(self, n: int) -> None:
        pending = [n]  # arrays of arrays: counts of inner arrays still to skip, per level
        while pending:
            if pending[-1] == 0:
                pending.pop()
                continue
            pending[-1] -= 1
            if len(pending) > 64:
                raise VocabularyError("GGUF arrays nested too deeply")
            etype = self.scalar("I")
            if etype == _GGUF_ARRAY:
                pending.append(self.count(12))
            else:
                self.pos -= 4
                self.value(_GGUF_ARRAY, keep=False)


def read_gguf_metadata(source: str | os.PathLike[str] | bytes, keys: Collection[str] | None = None) -> GgufMetadata:
    """Read a GGUF v2/v3 file's header, key/value metadata and tensor shapes; stop before the
    tensor data. ``source`` is a path or the file's bytes (at least up to the tensor data).
    ``keys`` limits which values are decoded (others are skipped; ``None`` keeps all). Every
    length is checked against the size, so a corrupt file raises :class:`VocabularyError`
    instead of allocating."""
    if isinstance(source, bytes):
        return _read_gguf(source, keys)
    try:
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise VocabularyError(f"{os.fspath(source)}: too small for a GGUF file")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _read_gguf(buf, keys)
    except OSError as e:
        raise VocabularyError(f"cannot read {os.fspath(source)}: {e}") from e


def _read_gguf(buf: bytes | mmap.mmap, keys: Collection[str] | None) -> GgufMetadata:
    if len(buf) < 24:
        raise VocabularyError("too small for a GGUF file")
    if bytes(buf[:4]) != b"GGUF":
        raise VocabularyError("not a GGUF file (bad magic)")
    (le,) = struct.unpack_from("<I", buf, 4)
    (be,) = struct.unpack_from(">I", buf, 4)
    if le in (2, 3):
        cur, version = _GgufCursor(buf, "<"), le
    elif be in (2, 3):
        cur, version = _GgufCursor(buf, ">"), be
    else:
        raise VocabularyError(f"unsupported GGUF version {le}")
    cur.pos = 8
    n_tensors = cur.count(24)
    n_kv = cur.count(13)
    kv: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string()
        vtype = cur.scalar("I")
        keep = keys is None or key in keys
        val = cur.value(vtype, keep)
        if keep:
            kv[key] = val
    shapes: dict[str, tuple[int, ...]] = {}
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.scalar("I")
        if n_dims > _GGUF_MAX_DIMS:
            raise VocabularyError(f"GGUF tensor {name!r} has {n_dims} dimensions")
        dims = tuple(int(cur.scalar("Q")) for _ in range(n_dims))
        cur.scalar("I")  # ggml type
        cur.scalar("Q")  # data offset
        shapes[name] = dims
    return GgufMetadata(version=version, kv=kv, tensor_shapes=shapes)


_GGUF_KEYS = frozenset(
    {
        "general.architecture",
        "tokenizer.ggml.model",
        "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
        "tokenizer.chat_template",
    }
)


class _GgufKeys(Collection[str]):
    """The keys table_from_gguf decodes: the tokenizer keys plus any ``<arch>.vocab_size``."""

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in _GGUF_KEYS or key.endswith(".vocab_size"))

    def __iter__(self) -> Iterator[str]:
        return iter(_GGUF_KEYS)

    def __len__(self) -> int:
        return len(_GGUF_KEYS)


_TT_NORMAL, _TT_UNKNOWN, _TT_CONTROL, _TT_USER, _TT_UNUSED, _TT_BYTE = 1, 2, 3, 4, 5, 6


def table_from_gguf(path: str | os.PathLike[str] | bytes, logits_width: int | None = None) -> TokenTable:
    """Build a table from a GGUF model file's tokenizer metadata (``path`` may also be the
    file's bytes).

    ``tokenizer.ggml.model`` ``"gpt2"`` stores byte-level BPE strings; ``"llama"`` stores
    SentencePiece pieces (``▁`` spaces, ``<0xNN>`` byte tokens). Token types: unknown, control
    and unused are special; byte tokens are their single byte; user-defined tokens that look
    like control tokens are special. EOS: ``eos``/``eot``/``eom`` ids, known EOS names and the
    chat template's end-of-message marker. ``logits_width`` defaults to the vocabulary
    dimension of the output (or embedding) tensor, else ``<arch>.vocab_size``, else the
    token count.
    """
    meta0 = read_gguf_metadata(path, keys=_GgufKeys())
    kv = meta0.kv
    arch = kv.get("general.architecture")
    model = kv.get("tokenizer.ggml.model")
    texts = kv.get("tokenizer.ggml.tokens")
    if not isinstance(texts, list) or not texts:
        raise VocabularyError("GGUF file has no tokenizer.ggml.tokens")
    if len(texts) > MAX_VOCAB:
        raise VocabularyError("GGUF vocabulary too large")
    types = kv.get("tokenizer.ggml.token_type")
    if types is None:
        types = [_TT_NORMAL] * len(texts)
    if not isinstance(types, list) or len(types) != len(texts):
        raise VocabularyError("GGUF tokenizer.ggml.token_type does not match the token list")
    if model == "gpt2":
        byte_level = True
    elif model == "llama":
        byte_level = False
    else:
        raise VocabularyError(f"unsupported GGUF tokenizer model {model!r}")
    mentioned, template_ends = _template_markers(kv.get("tokenizer.chat_template"))
    tokens: list[bytes | None] = []
    specials: set[int] = set()
    named: dict[int, str] = {}
    for i, (text, tt) in enumerate(zip(texts, types, strict=True)):
        if tt == _TT_BYTE:
            m = _BYTE_FALLBACK.fullmatch(text)
            if not m:
                raise VocabularyError(f"GGUF byte token {i} is {text!r}, not <0xNN>")
            tokens.append(bytes([int(m.group(1), 16)]))
            continue
        if tt in (_TT_CONTROL, _TT_UNKNOWN, _TT_UNUSED):
            tokens.append(text.encode("utf-8"))
            specials.add(i)
            named[i] = text
            continue
        if byte_level:
            tokens.append(_byte_level_bytes(text))
        else:
            tokens.append(_sentencepiece_bytes(text, byte_fallback=False))
        if tt == _TT_USER:
            named[i] = text
            if _looks_control(text, byte_fallback=False) or (
                text in mentioned and _CONTROL_LOOKING.fullmatch(text) is not None
            ):
                specials.add(i)
    explicit: list[int] = []
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"):
        v = kv.get(key)
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < len(tokens):
            explicit.append(v)
            specials.add(v)
    eos = _decide_eos(tokens, named, specials, explicit, template_ends)
    if logits_width is None:
        shape = meta0.tensor_shapes.get("output.weight") or meta0.tensor_shapes.get("token_embd.weight")
        vocab_size = kv.get(f"{arch}.vocab_size")
        if shape and len(shape) >= 2:
            logits_width = shape[1]
        elif isinstance(vocab_size, int) and not isinstance(vocab_size, bool):
            logits_width = vocab_size
        else:
            logits_width = len(tokens)
    return table_from_tokens(tokens, eos_ids=eos, special_ids=specials, logits_width=logits_width)
