"""Differential tests: the core's token masks against the reference recognizer, bit for bit.

Grammars: every GBNF file of the corpus, a deterministic sample of JSON Schema Bench regexes (those
the regex frontend compiles) and a few choice lists. For each, seeded random walks run through the
core's masks; at chosen steps the mask bit of every SmolLM2 token (a sample of Gemma 3's 262k) is
compared with the reference's verdict on the grammar the core compiled (``compiled.grammar``).
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.differential.walks import format_disagreements, random_walk, vocab_view
from tests.reference.recognizer import Reference

CORPORA_DIR = Path(__file__).resolve().parents[3] / "shared" / "corpora"

lg = pytest.importorskip("logitgate")
if not hasattr(lg, "Compiler"):  # pragma: no cover - the core is not built
    pytest.skip("logitgate core is not built", allow_module_level=True)

GBNF_FILES = sorted((CORPORA_DIR / "gbnf").glob("*.gbnf")) + sorted(
    (CORPORA_DIR / "gbnf" / "from-llguidance").glob("*.gbnf")
)
PATTERNS_FILE = CORPORA_DIR / "regex" / "jsonschemabench_patterns.jsonl"
REGEX_STRIDE = 10  # every 10th of 2,665 patterns: 267 candidates, >= 200 of which compile


def _load_patterns() -> list[str]:
    if not PATTERNS_FILE.is_file():
        return []
    with PATTERNS_FILE.open(encoding="utf-8") as f:
        rows = [json.loads(line)["regex"] for line in f if line.strip()]
    return rows[::REGEX_STRIDE]


PATTERNS = _load_patterns()

CHOICES: dict[str, list[str]] = {
    "yes-no": ["yes", "no", "maybe"],
    "prefixes": ["a", "ab", "abc", "abd", "b"],
    "unicode": ["café", "naïve", "日本語", "😀 ok", "Ünïcödé"],
    "json-ish": ['{"a": 1}', '{"a": 2}', "[1, 2, 3]", "null"],
}

_COMPILE_ERRORS: tuple[type[BaseException], ...] = tuple(
    t for t in (getattr(lg, "GrammarError", None), getattr(lg, "LimitExceeded", None)) if isinstance(t, type)
)


def _seed(name: str) -> int:
    return zlib.crc32(name.encode())


def _compile(vocab: Any, how: Callable[[Any], Any]) -> Any:
    try:
        return how(lg.Compiler(vocab))
    except _COMPILE_ERRORS as e:
        pytest.skip(f"core does not compile it: {e}")


def run_differential(
    name: str,
    compiled: Any,
    view: Any,
    *,
    walks: int,
    max_tokens: int,
    checks_per_walk: int,
    finish: bool = True,
) -> int:
    """Walk and compare; fails with the first disagreements. Returns the number of full checks."""
    ref = Reference(compiled.grammar)
    rng = random.Random(_seed(name))
    bad = []
    total_checks = 0
    for _ in range(walks):
        steps = sorted(rng.sample(range(max_tokens), min(checks_per_walk, max_tokens)))
        if checks_per_walk > 1:
            steps[-1] = -1  # one check at the start of the finishing phase
        steps[0] = 0
        result = random_walk(
            name, compiled, ref, view, rng, max_tokens=max_tokens, full_check_steps=steps, finish=finish
        )
        bad += result.disagreements
        total_checks += result.full_checks
        if bad:
            break
    assert not bad, "core and reference disagree:\n" + format_disagreements(bad)
    assert total_checks >= 1
    return total_checks


@pytest.mark.parametrize("path", GBNF_FILES, ids=lambda p: p.name)
def test_gbnf_masks_match_reference(path: Path, smollm2_vocab: Any) -> None:
    text = path.read_text(encoding="utf-8")
    compiled = _compile(smollm2_vocab, lambda c: c.compile_ebnf(text, root="root"))
    run_differential(path.name, compiled, vocab_view(smollm2_vocab), walks=6, max_tokens=24, checks_per_walk=4)


@pytest.mark.parametrize("index", range(len(PATTERNS)), ids=lambda i: f"re{i * REGEX_STRIDE}")
def test_regex_masks_match_reference(index: int, smollm2_vocab: Any) -> None:
    pattern = PATTERNS[index]
    compiled = _compile(smollm2_vocab, lambda c: c.compile_regex(pattern))
    run_differential(
        f"regex {pattern!r}", compiled, vocab_view(smollm2_vocab), walks=2, max_tokens=10, checks_per_walk=3
    )


def test_enough_regexes_compile(smollm2_vocab: Any) -> None:
    """The regex sample must stay meaningful: at least 200 of the sampled patterns compile."""
    compiler = lg.Compiler(smollm2_vocab)
    ok = 0
    for pattern in PATTERNS:
        try:
            compiler.compile_regex(pattern)
            ok += 1
        except _COMPILE_ERRORS:
            pass
    assert ok >= 200, f"only {ok} of {len(PATTERNS)} sampled patterns compile"


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_choice_masks_match_reference(key: str, smollm2_vocab: Any) -> None:
    compiled = _compile(smollm2_vocab, lambda c: c.compile_choice(CHOICES[key]))
    run_differential(f"choice {key}", compiled, vocab_view(smollm2_vocab), walks=6, max_tokens=4, checks_per_walk=2)


GEMMA_CASES: dict[str, Callable[[Any], Any]] = {
    "json.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "json.gbnf").read_text(encoding="utf-8")),
    "japanese.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "japanese.gbnf").read_text(encoding="utf-8")),
    "regex-unicode": lambda c: c.compile_regex(r"[^a-z]{2,6}(é|ß|日本)+"),
    "choice-unicode": lambda c: c.compile_choice(CHOICES["unicode"]),
}


@pytest.mark.parametrize("key", sorted(GEMMA_CASES))
def test_gemma3_sampled_masks_match_reference(key: str, gemma3_vocab: Any) -> None:
    compiled = _compile(gemma3_vocab, GEMMA_CASES[key])
    view = vocab_view(gemma3_vocab, sample=5000)
    run_differential(f"gemma3 {key}", compiled, view, walks=3, max_tokens=12, checks_per_walk=3)


# -- exhaustive variants (make test-all) ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", GBNF_FILES, ids=lambda p: p.name)
def test_gbnf_masks_match_reference_exhaustive(path: Path, smollm2_vocab: Any) -> None:
    text = path.read_text(encoding="utf-8")
    compiled = _compile(smollm2_vocab, lambda c: c.compile_ebnf(text, root="root"))
    run_differential(
        path.name + "/slow", compiled, vocab_view(smollm2_vocab), walks=12, max_tokens=40, checks_per_walk=8
    )


@pytest.mark.slow
@pytest.mark.parametrize("stride_offset", range(REGEX_STRIDE))
def test_all_regex_masks_match_reference_exhaustive(stride_offset: int, smollm2_vocab: Any) -> None:
    """Every corpus pattern the frontend compiles (split in REGEX_STRIDE slices)."""
    with PATTERNS_FILE.open(encoding="utf-8") as f:
        rows = [json.loads(line)["regex"] for line in f if line.strip()]
    compiler = lg.Compiler(smollm2_vocab)
    for pattern in rows[stride_offset::REGEX_STRIDE]:
        try:
            compiled = compiler.compile_regex(pattern)
        except _COMPILE_ERRORS:
            continue
        run_differential(
            f"regex {pattern!r}", compiled, vocab_view(smollm2_vocab), walks=3, max_tokens=16, checks_per_walk=4
        )


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(GEMMA_CASES))
def test_gemma3_full_vocab_masks_match_reference(key: str, gemma3_vocab: Any) -> None:
    compiled = _compile(gemma3_vocab, GEMMA_CASES[key])
    run_differential(
        f"gemma3-full {key}", compiled, vocab_view(gemma3_vocab), walks=2, max_tokens=10, checks_per_walk=3
    )
