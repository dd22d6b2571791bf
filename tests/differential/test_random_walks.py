"""Random walks through the core's masks end in sentences of the language.

Each walk samples allowed tokens, then finishes along the reference's shortest completion and takes
EOS. Every walk that ends with EOS must be a sentence for the reference; json.gbnf outputs must parse
with ``json.loads``; for a few regexes whose meaning Python's ``re`` shares (ASCII only, no ``\\s``,
no ``.``) the outputs must ``re.fullmatch`` -- an oracle independent of both the frontend and the core.
"""

from __future__ import annotations

import json
import random
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from tests.differential.walks import format_disagreements, random_walk, vocab_view
from tests.reference.recognizer import Reference

CORPORA_DIR = Path(__file__).resolve().parents[3] / "shared" / "corpora"

lg = pytest.importorskip("logitgate")
if not hasattr(lg, "Compiler"):  # pragma: no cover - the core is not built
    pytest.skip("logitgate core is not built", allow_module_level=True)

# Patterns whose ECMA meaning (the frontend's) equals Python's with re.ASCII.
PY_COMPATIBLE_REGEXES = [
    r"^[A-Fa-f\d]{24}$",
    r"^[a-f0-9]{8}-[a-f0-9]{4}-[1-5][a-f0-9]{3}-[89ab][a-f0-9]{3}-[a-f0-9]{12}$",
    r"^[a-z_]+$",
    r"^[0-9a-zA-Z_-]{1,255}$",
    r"^/(([a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-F]{2})+(/([a-zA-Z0-9._~!$&'()*+,;=:@-]|%[0-9a-fA-F]{2})*)*)?$",
    r"(ab|cd)*e?f{2,3}",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"[^a-z]{0,3}x",
]


def _walks(compiled: Any, vocab: Any, name: str, n: int, max_tokens: int) -> list[bytes]:
    ref = Reference(compiled.grammar)
    view = vocab_view(vocab)
    rng = random.Random(zlib.crc32(name.encode()))
    outputs = []
    for _ in range(n):
        result = random_walk(name, compiled, ref, view, rng, max_tokens=max_tokens, eos_prob=0.2, finish=True)
        assert not result.disagreements, format_disagreements(result.disagreements)
        assert result.ended_with_eos, f"[{name}] walk did not reach EOS: {result.text!r}"
        assert ref.is_complete(ref.advance(ref.start(), result.text)), f"[{name}] not a sentence: {result.text!r}"
        outputs.append(result.text)
    return outputs


def test_json_gbnf_walks_parse_as_json(smollm2_vocab: Any) -> None:
    text = (CORPORA_DIR / "gbnf" / "json.gbnf").read_text(encoding="utf-8")
    compiled = lg.Compiler(smollm2_vocab).compile_ebnf(text, root="root")
    outputs = _walks(compiled, smollm2_vocab, "json.gbnf", n=8, max_tokens=30)
    for out in outputs:
        value = json.loads(out.decode("utf-8"))
        assert isinstance(value, dict), out


@pytest.mark.parametrize("name", ["arithmetic.gbnf", "list.gbnf", "chess.gbnf", "json_arr.gbnf"])
def test_gbnf_walks_end_in_sentences(name: str, smollm2_vocab: Any) -> None:
    text = (CORPORA_DIR / "gbnf" / name).read_text(encoding="utf-8")
    compiled = lg.Compiler(smollm2_vocab).compile_ebnf(text, root="root")
    outputs = _walks(compiled, smollm2_vocab, name, n=4, max_tokens=16)
    if name == "json_arr.gbnf":
        for out in outputs:
            assert isinstance(json.loads(out.decode("utf-8")), list), out


@pytest.mark.parametrize("pattern", PY_COMPATIBLE_REGEXES)
def test_regex_walks_fullmatch_python_re(pattern: str, smollm2_vocab: Any) -> None:
    rx = re.compile(pattern, re.ASCII)
    compiled = lg.Compiler(smollm2_vocab).compile_regex(pattern)
    for out in _walks(compiled, smollm2_vocab, f"regex {pattern!r}", n=4, max_tokens=12):
        assert rx.fullmatch(out.decode("utf-8")), (pattern, out)


@pytest.mark.parametrize("pattern", PY_COMPATIBLE_REGEXES)
def test_regex_frontend_ir_agrees_with_python_re(pattern: str, smollm2_vocab: Any) -> None:
    """The compiled grammar (judged by the reference) and Python re agree on walk outputs and on
    random one-character mutations of them -- positive and negative cases for the regex frontend."""
    rx = re.compile(pattern, re.ASCII)
    compiled = lg.Compiler(smollm2_vocab).compile_regex(pattern)
    ref = Reference(compiled.grammar)
    rng = random.Random(zlib.crc32(pattern.encode()))
    outputs = _walks(compiled, smollm2_vocab, f"regex {pattern!r}", n=3, max_tokens=10)
    alphabet = "aAbcdefxz_-09/%.:+eE é"
    for out in outputs:
        s = out.decode("utf-8")
        for _ in range(60):
            chars = list(s)
            op = rng.randrange(3)
            pos = rng.randrange(len(chars) + 1)
            if op == 0:
                chars.insert(pos, rng.choice(alphabet))
            elif op == 1 and chars:
                del chars[min(pos, len(chars) - 1)]
            elif chars:
                chars[min(pos, len(chars) - 1)] = rng.choice(alphabet)
            mutated = "".join(chars)
            assert ref.accepts(mutated.encode()) == bool(rx.fullmatch(mutated)), (pattern, mutated)
