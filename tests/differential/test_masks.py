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
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from tests.differential.walks import (
    compare_full,
    format_disagreements,
    mask_to_bools,
    random_walk,
    vocab_view,
)
from tests.reference.recognizer import Reference

from logitgate import _core
from logitgate.grammar.ir import Alt, ByteClass, CharClass, Grammar, Literal, Repeat, Seq

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


PATTERNS_ALL = _load_patterns()

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
    return how(lg.Compiler(vocab))


def _supported(pattern: str) -> bool:
    """Out-of-scope regex constructs (lookarounds, backreferences, ...) must fail typed."""
    try:
        lg.Compiler(lg.Vocabulary.from_tokens([b"a"])).compile_regex(pattern)
    except lg.GrammarError as e:
        assert e.code == "regex-unsupported", e
        return False
    return True


PATTERNS = [p for p in PATTERNS_ALL if _supported(p)]


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
    assert len(PATTERNS) >= 200, f"only {len(PATTERNS)} sampled patterns are supported"
    for pattern in PATTERNS:
        compiler.compile_regex(pattern)


@pytest.mark.parametrize("key", sorted(CHOICES))
def test_choice_masks_match_reference(key: str, smollm2_vocab: Any) -> None:
    compiled = _compile(smollm2_vocab, lambda c: c.compile_choice(CHOICES[key]))
    run_differential(f"choice {key}", compiled, vocab_view(smollm2_vocab), walks=6, max_tokens=4, checks_per_walk=2)


# Shapes that exercise the mask walk's subtree shortcut: loops (string bodies, free text),
# chains (bounded repetitions, where each position is its own configuration), both with
# multi-byte characters, exclusions of single characters, and a bound shorter than tokens.
SPLIT_PATTERNS = [
    # chains past the vocabulary's length masks (tokens of 64 bytes and more: SmolLM2's runs of
    # dashes and spaces), cut to the chain's length token by token
    r"[ a-z-]{1,64};",
    r"x[ a-z-]{0,66}",
    # loops over ASCII sets that read no multi-byte character (the split walk)
    r"[a-zA-Z_][a-zA-Z0-9_]*[(= ;]",
    r"(https?://)?[\w.-]+(/[\w .-]*)*",
    r"([a-z]+ )*[a-z]+\.",
    # chains over such sets (the split walk cut to the chain's length): bounded repetitions,
    # a first character then a loop, chains whose later positions read more bytes
    r"[a-z ]{0,30}\.",
    r"[a-zA-Z0-9 ]{1,255}x",
    r"[ -~]{1,30}\n",
    r"[a-zA-Z0-9]{5,20}[.@]",
    r"[a-z0-9]+(\.[a-z0-9]+)*@[a-z]+\.[a-z]{2,6}",
    r"[a-zA-Z_]{3}[^\n]{0,10}x",
    # a loop or chain entered by the first byte (a leading space): the split of that byte's
    # subtree (an identifier after a space, words of at most six letters, camel case)
    r"a( [a-z ]*)?[.,]",
    r"x( [!-~]*)?\n",
    r"( [a-z][a-z0-9_]*)+[.,;]",
    r"( [a-zA-Z]{1,6})+\.",
    r"( [a-z]{1,8}[A-M][a-z]*)+;",
    # multi-byte characters after the set: behind an ASCII boundary byte (walked from the
    # boundary node), and at a later position of the chain (the root split's boundary nodes
    # past 0x7F)
    r"[a-z]+[:=][^\x00-\x7f]+",
    r"[a-z]{2,8}(é|ü|日)[a-z]*\.",
    # multi-byte characters read at every position of a loop or chain (an e-mail address's
    # `[^@\s]`): the root split over the ASCII bytes, its boundary nodes past 0x7F below paths
    # of the set, the subtrees of non-ASCII first bytes walked
    r"[^@\s]{1,30}@[^@.\s]{1,20}(\.[^@.\s]+)*",
    r"[^@^\s]+@[^@^.\s]+(\.[^@^.\s]*)*.gov.uk",
    r"([^<\s]|<[a-z])*>",
    # a position that reads ASCII bytes only, whose chain then reads a few multi-byte
    # characters (a name's letters, then `\s`: U+00A0, U+2000...): the root split with those
    # boundary nodes; after a space, the space's split that keeps the boundary nodes on the
    # leads the chain reads (Vocabulary::loop_split's `wide` bytes)
    r"[a-zA-Z]+(\s+[a-zA-Z]+)*\.",
    r"x( [a-z]+(\s[a-z]+)*)+;",
    r"[a-z]+((\s+|-)[a-z]+)*,",
    # chains whose later position reads only a few of the set's bytes (a date-time's `-`, `T`
    # and `:` after runs of any character): the set less those bytes, the chain ending there
    r"....-..-..T..:..:..(Z|[+-]..:..)",
    r"[a-z ]{4}[-+][a-z ]{2}(:|=)[a-z ]{0,3}\.",
    # a first step into a loop over a wider set (the wide split): letters but a keyword's
    # first ones start an identifier that then reads every letter and digit
    r"((if|for|while)\(|[a-eg-hj-vx-z_][a-zA-Z0-9_]*[ =(])+",
    r"(return [0-9]+;|[a-qs-z][a-z0-9]*=)+",
    # string bodies over a class whose only other bytes are the closing quote and escapes (the
    # quote nodes' walk, Matcher::QuoteLoopWalk)
    r'"[a-z ]*" ?',
    r'"([a-zA-Z0-9_-]|\\[nt"])*"',
    # classes that hold only part of some of the vocabulary's byte groups (Vocabulary::AsciiGroup:
    # a-f and g-z, digits, '/' with ':'), whose tokens the alphabet mask checks one by one
    r'"[a-cx-z .]*"',
    r'"[A-Fa-f0-9/]*"',
]
SHORTCUT_PATTERNS = [
    r'"[^"\\]*"',
    r'"[^"\\]{0,40}"',
    r"[^\n\u0085\u2028]{1,25}\n",
    r"(é|[a-z]){2,12}",
    r"[^a]{3}",
    # plain text but the characters of a few lead bytes (list.gbnf's item text): a loop, a
    # first character then the loop, the same after a space (the space subtree cut)
    r"(- [^\r\n\x0b\x0c\x85\u2028\u2029]+\n)+",
    r"[^\n\u2028\u2029]*\n",
    r"a [^\n\u00a0-\u00bf]+\.",
    # free text that reads every plain character back into itself but a few rare ASCII ones,
    # which lead elsewhere (a trigger's or an end tag's first character): the plain loop with
    # those bytes' tokens decided one by one
    r"([^<]|<[^/<])*</end>",
    r"([^{|~]|\{[a-z]|\|[^~|{])*\|~",
    *SPLIT_PATTERNS,
]


@pytest.mark.parametrize("pattern", SHORTCUT_PATTERNS)
def test_walk_shortcuts_match_reference(pattern: str, smollm2_vocab: Any) -> None:
    compiled = _compile(smollm2_vocab, lambda c: c.compile_regex(pattern))
    run_differential(
        f"regex {pattern!r}", compiled, vocab_view(smollm2_vocab), walks=3, max_tokens=12, checks_per_walk=4
    )


@pytest.fixture
def splits_at_once() -> Iterable[None]:
    """Walks compute the loop split of any configuration it applies to at once (by default a
    walk that stays cheap never does, and the splits are shared by the whole session)."""
    previous = _core._set_split_walk_budget(0)
    try:
        yield
    finally:
        _core._set_split_walk_budget(previous)


@pytest.mark.parametrize("pattern", SPLIT_PATTERNS)
def test_split_walks_match_reference(pattern: str, smollm2_vocab: Any, splits_at_once: None) -> None:
    compiled = _compile(smollm2_vocab, lambda c: c.compile_regex(pattern))
    run_differential(
        f"regex {pattern!r} (splits at once)",
        compiled,
        vocab_view(smollm2_vocab),
        walks=3,
        max_tokens=12,
        checks_per_walk=4,
    )


# Closed regions (Matcher::RegionWalk): a pattern that searches for a word after any character
# of a wide class (an address ending in `.gov.uk`; an image path ending in `._SL75_.jpg`, in its
# path, query and fragment), from positions before, within and past the word.
REGION_CASES: list[tuple[str, list[str]]] = [
    (r"[a-z]+@[^@\s.]+(\.[^@\s.]*)*.gov.uk", ["user@ex", "user@example", "user@example.gov", "user@e.gov.u"]),
    # (A class without `a`: tokens of accented letters then an `a`, `ça`, die; the others of
    # accented and ASCII letters are allowed by their bytes.)
    (r"[b-z]+@[^@\s.a]+(\.[^@\s.a]*)*\.gov\.uk", ["b@xyz", "b@xyz.gov", "b@ç", "b@é.go"]),
    (
        r"https://x\.com/images/[a-zA-Z0-9/._-]*(no-image)?\._SL75_\.(gif|jpg)(\?[a-z=&.]*)?(#[a-z.]*)?",
        ["https://x.com/images/", "https://x.com/images/G/09/no-", "https://x.com/images/a._SL75_.gif?q=a"],
    ),
]


@pytest.mark.parametrize("vocab_name", ["smollm2_vocab", "gemma3_vocab"])
@pytest.mark.parametrize("pattern, prefixes", REGION_CASES, ids=["gov-uk", "no-a", "image-url"])
def test_region_walks_match_reference(
    pattern: str, prefixes: list[str], vocab_name: str, request: pytest.FixtureRequest
) -> None:
    # (Gemma 3's many tokens of accented letters after ASCII ones are read by the region's
    # multi-byte characters: a sample of its 262k tokens.)
    vocab = request.getfixturevalue(vocab_name)
    view = vocab_view(vocab, sample=5000 if vocab_name == "gemma3_vocab" else None)
    compiled = _compile(vocab, lambda c: c.compile_regex(pattern))
    ref = Reference(compiled.grammar)
    bits = lg.allocate_mask(vocab)
    nodes: dict[bool, list[int]] = {}
    for regions in (True, False):
        previous = _core._set_region_walks(regions)
        try:
            fresh = _compile(vocab, lambda c: c.compile_regex(pattern))
            nodes[regions] = []
            for prefix in prefixes:
                m = fresh.matcher()
                assert m.accept_bytes(prefix.encode()), prefix
                m.fill_mask(bits, row=0)
                nodes[regions].append(m.last_walk_nodes)
                state = ref.advance(ref.start(), prefix.encode())
                assert state is not None
                bad = compare_full(
                    f"{pattern} after {prefix!r}", ref, state, prefix.encode(), mask_to_bools(bits, view.width), view
                )
                assert not bad, "core and reference disagree:\n" + format_disagreements(bad)
        finally:
            _core._set_region_walks(previous)
    # Some position took the region's walk (it visits other nodes than the walks without it).
    assert nodes[True] != nodes[False]


# Patterns under length bounds whose positions far from both bounds take their masks from the
# pattern's uncounted loop (Grammar.stand_ins): prefixes in that window, and short of minLength
# or nearer the upper bound than the longest token, where the counted positions' own masks hold.
STAND_IN_CASES: list[tuple[dict[str, Any], list[str]]] = [
    (
        {"pattern": r"^[^@^\s]+@[^@^\.^\s]+(\.[^@^\.^\s]*)*.gov.uk", "minLength": 5, "maxLength": 254},
        ['"te', '"test@example', '"test@example.gov', '"tést@exämple.gov.', '"' + "x" * 60 + "@" + "y" * 120],
    ),
    (
        {"pattern": "^[a-z]+( [a-z]+)*$", "minLength": 20, "maxLength": 200},
        ['"', '"the quick brown fox', '"' + "ab " * 10, '"' + "ab " * 40, '"' + "a" * 150, '"' + "a" * 190],
    ),
    # a count in the pattern itself: a rule per word, its loop standing in far from the 99th
    (
        {"pattern": r"^(?:\S+\s+){0,99}\S+$", "minLength": 1},
        ['"a', '"one two\\tthree\\n', '"' + "wörd " * 30, '"' + "w " * 80, '"' + "w " * 99 + "end"],
    ),
]


@pytest.mark.parametrize("vocab_name", ["smollm2_vocab", "gemma3_vocab"])
@pytest.mark.parametrize("keywords, prefixes", STAND_IN_CASES, ids=["gov-uk", "words", "word-count"])
def test_stand_ins_match_reference(
    keywords: dict[str, Any], prefixes: list[str], vocab_name: str, request: pytest.FixtureRequest
) -> None:
    schema = json.dumps({"type": "string", **keywords})
    vocab = request.getfixturevalue(vocab_name)
    view = vocab_view(vocab, sample=5000 if vocab_name == "gemma3_vocab" else None)
    bits = lg.allocate_mask(vocab)
    configurations: dict[bool, int] = {}
    for enabled in (True, False):
        previous = _core._set_stand_ins(enabled)
        try:
            compiled = _compile(vocab, lambda c: c.compile_json_schema(schema))
            assert compiled.grammar.stand_ins
            ref = Reference(compiled.grammar)
            for prefix in prefixes:
                m = compiled.matcher()
                assert m.accept_bytes(prefix.encode()), prefix
                m.fill_mask(bits, row=0)
                state = ref.advance(ref.start(), prefix.encode())
                assert state is not None
                bad = compare_full(
                    f"{schema} after {prefix!r}", ref, state, prefix.encode(), mask_to_bools(bits, view.width), view
                )
                assert not bad, "core and reference disagree:\n" + format_disagreements(bad)
            configurations[enabled] = compiled._core.num_configurations
        finally:
            _core._set_stand_ins(previous)
    # The loop stood in somewhere: its walks intern other configurations than the counted ones.
    assert configurations[True] != configurations[False]


# Text heads: the plain-capacity shortcut (universal loops, bounded strings whose character
# rule is inlined or called, unanchored patterns, key complements that call a shared tail).
TEXT_HEAD_CASES: list[tuple[str, str]] = [
    ("json", '{"type": "string", "maxLength": 40}'),
    ("json", '{"type": "string", "minLength": 3, "maxLength": 300}'),
    ("json", '{"type": "string", "pattern": "[0-9a-f]{4}-"}'),
    ("json", '{"type": "object", "properties": {"ab": {"type": "string", "maxLength": 5}, "ac": {"type": "integer"}}}'),
    ("gbnf", 'root ::= "\\"" ch{0,600} "\\""\nch ::= [^"\\\\\\x00-\\x1f] | "\\\\" ["\\\\/bfnrt]'),
    ("json", '{"type": "object", "additionalProperties": {"type": "string"}}'),
    ("json", '{"type": "string", "pattern": "^[ -~]+$", "minLength": 30, "maxLength": 30}'),
    ("json", '{"type": "string", "format": "email"}'),
    # a key a pattern is searched in (Matcher::RestWalk); a string body of a pattern's class
    ("json", '{"type": "object", "patternProperties": {"[A-Za-z0-9-_.:]{1,255}": {"type": "string"}}}'),
    ("json", '{"type": "object", "properties": {"s": {"type": "string", "pattern": "^([a-z]|[ ])*$"}}}'),
    # a pattern's `.` (no U+2028, U+2029) before a suffix: near universal string bodies
    ("json", '{"type": "object", "properties": {"name": {"type": "string", "pattern": "^.*.txt$"}}}'),
    # a searched class under length bounds: each position calls the class's rule and the other
    # characters' rule (their heads together read every character: a capacity) and tail-calls
    # the next position; an e-mail address whose classes read multi-byte characters
    ("json", '{"type": "string", "pattern": "[0-9a-fA-F]+", "minLength": 12, "maxLength": 12}'),
    ("json", '{"type": "string", "pattern": "[a-zA-Z0-9_.-]+", "minLength": 3, "maxLength": 40}'),
    ("json", '{"type": "string", "pattern": "^[^@^\\\\s]+@[^@^.\\\\s]+$", "minLength": 5, "maxLength": 30}'),
    # searched patterns under short length bounds: positions that tell "matched" from "not yet"
    # make no chain; plain text is viable up to the capacity, none past a bound a character or
    # two further (Matcher::CapacityWalk)
    ("json", '{"type": "string", "pattern": "[A-Z]", "minLength": 4, "maxLength": 6}'),
    ("json", '{"type": "string", "pattern": "ab", "maxLength": 9}'),
    ("json", '{"type": "string", "pattern": "[0-9]", "minLength": 2, "maxLength": 3}'),
    # ... and one whose capacity outlasts every plain token (the rest trie alone)
    ("json", '{"type": "string", "pattern": "[0-9]", "maxLength": 300}'),
    # a pattern's `.` (no U+2028, U+2029) searched under length bounds: no plain capacity, a
    # capacity without those characters (Matcher::NearCapacity), their tokens decided one by one
    ("json", '{"type": "string", "pattern": ".+[@].+[.]___", "minLength": 10, "maxLength": 200}'),
    ("json", '{"type": "string", "pattern": "a.b", "maxLength": 12}'),
    # a bounded string of plain text but a few ASCII characters (a chain with exceptions: the
    # tokens holding a comma decided one by one)
    ("json", '{"type": "string", "pattern": "^[^,\\"]+$", "maxLength": 255}'),
    ("json", '{"type": "string", "pattern": "^[^,:]+$", "minLength": 2, "maxLength": 9}'),
]


@pytest.mark.parametrize(("kind", "source"), TEXT_HEAD_CASES)
def test_text_head_shortcuts_match_reference(kind: str, source: str, smollm2_vocab: Any) -> None:
    compiled = _compile(
        smollm2_vocab, lambda c: c.compile_json_schema(source) if kind == "json" else c.compile_ebnf(source)
    )
    run_differential(
        f"{kind} {source!r}", compiled, vocab_view(smollm2_vocab), walks=3, max_tokens=14, checks_per_walk=4
    )


# Grammars with few coarse byte classes (Automaton::CoarseClasses), each compiled with a class
# trie whatever its size, so that its walks go over it (Matcher::ClassWalk): combinations of
# searched patterns under length bounds (the allany schemas' length products), strings with
# escapes (tokens holding a backslash are decided by their bytes; heads inside an escape are not
# covered), strings nested in arrays and objects, and recursive grammars (return states on the
# stack are checked too).
CLASS_WALK_CASES: list[tuple[str, str]] = [
    (
        "json",
        '{"type": "string", "allOf": [{"not": {"anyOf": [{"not": {"anyOf": [{"pattern": "ab1"}, {"pattern": "b12"}]}},'
        ' {"not": {"anyOf": [{"pattern": "c2"}, {"pattern": "^[\\\\w]*$"}]}}]}}, {"pattern": "[aA][12].*[zZ]"}],'
        ' "minLength": 5, "maxLength": 14}',
    ),
    ("json", '{"type": "string", "anyOf": [{"pattern": "^[\\\\w]*$"}, {"pattern": "\\\\d\\\\d"}], "maxLength": 12}'),
    ("json", '{"type": "string", "pattern": "^[a-c]{2}.*z$", "minLength": 3, "maxLength": 12}'),
    ("json", '{"type": "array", "items": {"type": "string", "pattern": "ab|ba", "maxLength": 6}}'),
    (
        "json",
        '{"type": "object", "properties": {"k": {"type": "string", "pattern": "^x+y*$"}}, "required": ["k"],'
        ' "additionalProperties": false}',
    ),
    ("regex", r"(ab|ba)*[0-9]{2,4}"),
    ("regex", r"[^ab]*a[^b]*b"),
    ("gbnf", 'root ::= "(" root ")" | [a-c]+'),
    ("gbnf", 'root ::= item ("," item)*\nitem ::= "[" root "]" | [a-z]{1,3}'),
]


@pytest.fixture
def class_tries_everywhere() -> Iterable[None]:
    """Grammars compiled meanwhile get a class trie wherever their automaton has coarse classes
    (by default only automata of thousands of states, with a trie a quarter of the token trie's)."""
    previous = _core._set_class_trie_min_states(0)
    try:
        yield
    finally:
        _core._set_class_trie_min_states(previous)


@pytest.mark.parametrize(("kind", "source"), CLASS_WALK_CASES)
def test_class_walks_match_reference(kind: str, source: str, smollm2_vocab: Any, class_tries_everywhere: None) -> None:
    def compile_it(c: Any) -> Any:
        if kind == "json":
            return c.compile_json_schema(source)
        return c.compile_regex(source) if kind == "regex" else c.compile_ebnf(source, root="root")

    compiled = _compile(smollm2_vocab, compile_it)
    assert compiled._core.class_trie_nodes > 0
    run_differential(
        f"{kind} {source!r} (class walk)",
        compiled,
        vocab_view(smollm2_vocab),
        walks=4,
        max_tokens=14,
        checks_per_walk=4,
    )


# Classes that read only some characters of a lead byte (Latin-1 letters without `×` and `÷`,
# part of the CJK block, a Cyrillic range across two leads, emoji of one block), under length
# bounds and nested: their positions are decided from the vocabulary's character split
# (Matcher::CharacterChainWalk). Escapes of members (`\\u00e9`) and the string's end are
# the exits decided by their bytes.
CHARACTER_CHAIN_CASES: dict[str, Any] = {
    "latin-cjk": {"type": "string", "pattern": "^[a-zA-Z\u00c0-\u00d6\u00d8-\u00f6\u4e00-\u9fa5 _-]{1,12}$"},
    # another head reads a byte that is no exit (the comma): walked
    "then-comma": {
        "type": "string",
        "pattern": "^[a-zA-Z\u00c0-\u00d6\u00d8-\u00f6\u4e00-\u9fa5 _-]{1,100}(,[a-z]+)?$",
    },
    # the chain ends where another head reads members too: longer tokens are walked
    "then-letters": {
        "type": "string",
        "pattern": "^[a-zA-Z\u00c0-\u00d6\u00d8-\u00f6\u4e00-\u9fa5 _-]{1,100}[a-z0-9]*$",
    },
    "cyrillic-in-object": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^[\u0410-\u044f\u3041-\u3096\u4e00-\u9fa50-9 ]{2,300}$"},
            "n": {"type": "integer"},
        },
        "required": ["name"],
    },
    "array": {
        "type": "array",
        "items": {"type": "string", "pattern": "^[\u00e0-\u00ef\u0430-\u0437\u4e00-\u9fa5a-f]{0,100}$"},
    },
    "emoji": {"type": "string", "pattern": "^[a-z\u00c0-\u00d6\u00d8-\u00f6\U0001f600-\U0001f60f]{1,400}$"},
}

CHARACTER_PIECES = [
    "a",
    "b",
    "Z",
    " ",
    "_",
    "-",
    "0",
    "7",
    "\u00e9",
    "\u00c0",
    "\u00d7",
    "\u00f7",
    "\u00ff",
    "\u4e2d",
    "\u6587",
    "\u9fa6",
    "\u3042",
    "\u0416",
    "\u044f",
    "\u0451",
    "\u0430",
    "\U0001f600",
    "\U0001f64f",
    '"',
    "\\",
    "\\u00e9",
    ",",
    "}",
    "]",
    ":",
]


def _character_tokens(seed: int) -> list[bytes | None]:
    """_synthetic_tokens plus strings of class members and of characters under the same leads
    that are none, quotes, backslashes and escapes, and cuts of them inside a character."""
    rng = random.Random(seed)
    extra = []
    for _ in range(1500):
        text = "".join(rng.choice(CHARACTER_PIECES) for _ in range(rng.randint(1, 6))).encode()
        extra.append(text)
        extra.append(text[: rng.randint(1, len(text))])
    return _with_new(_synthetic_tokens(seed), extra)


@pytest.mark.parametrize("key", sorted(CHARACTER_CHAIN_CASES))
def test_character_chain_masks_match_reference(key: str, smollm2_vocab: Any) -> None:
    schema = CHARACTER_CHAIN_CASES[key]
    tokens = _character_tokens(_seed(key))
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1], logits_width=len(tokens) + 5)
    for name, v in (("synthetic", vocab), ("smollm2", smollm2_vocab)):
        compiled = _compile(v, lambda c: c.compile_json_schema(schema))
        assert compiled._core.character_chains == 1
        run_differential(
            f"character chain {key} ({name})", compiled, vocab_view(v), walks=8, max_tokens=12, checks_per_walk=8
        )


SYNTHETIC_TEXTS = [
    '{"name": "Zoë", "tags": ["日本語", "emoji 😀", "\\u00e9"], "n": -12.5e3, "ok": true}',
    "こんにちは、世界。ひらがなとカタカナ。漢字も。",
    "café naïve Ünïcödé ß ü é 🙂 \x7f\x00 tab\t end",
]


def _synthetic_tokens(seed: int) -> list[bytes | None]:
    """Ids 0-2 are EOS, a special and a hole; then every single byte, an empty token, and random
    slices of UTF-8 texts (cut anywhere, so many split a character) plus random byte pairs."""
    rng = random.Random(seed)
    tokens: list[bytes | None] = [b"<eos>", b"<special>", None, b""]
    tokens += [bytes((b,)) for b in range(256)]
    seen = set(tokens)
    blobs = [t.encode("utf-8") for t in SYNTHETIC_TEXTS]
    while len(tokens) < 3000:
        if rng.random() < 0.8:
            blob = rng.choice(blobs)
            i = rng.randrange(len(blob))
            tok = blob[i : i + rng.randint(2, 7)]
        else:
            tok = bytes((rng.randrange(256), rng.randrange(256)))
        if tok not in seen:
            seen.add(tok)
            tokens.append(tok)
    return tokens


SYNTHETIC_CASES: dict[str, Callable[[Any], Any]] = {
    "json.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "json.gbnf").read_text(encoding="utf-8")),
    "japanese.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "japanese.gbnf").read_text(encoding="utf-8")),
    "regex-classes": lambda c: c.compile_regex(r"([^a-z\x00-\x1f]{1,3}|[à-ÿ]+|[\u3040-\u30ff]{2})*[😀-🙏]?x"),
    "choice-unicode": lambda c: c.compile_choice(CHOICES["unicode"]),
    # Plain loops (string bodies): walked as plain tokens plus the trie of non-plain suffixes.
    "json-schema-string-map": lambda c: c.compile_json_schema(
        {"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    ),
    "gbnf-raw-string": lambda c: c.compile_ebnf('root ::= "\\"" ([^"\\\\] | "\\\\" ["\\\\])* "\\"" [\\n]?'),
    "ir-bytes-and-chars": lambda c: c.compile_grammar(
        Grammar(
            {
                "root": Repeat(
                    Alt((ByteClass(((0x80, 0xBF),)), CharClass(((0xE9, 0xFC),)), Literal("ok😀".encode()))), 1, 6
                ),
            }
        )
    ),
}


@pytest.mark.parametrize("key", sorted(SYNTHETIC_CASES))
def test_synthetic_vocab_masks_match_reference(key: str) -> None:
    """A small vocabulary full of split UTF-8 characters and odd bytes, with padding ids past the end."""
    tokens = _synthetic_tokens(_seed(key))
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1], logits_width=len(tokens) + 37)
    compiled = _compile(vocab, SYNTHETIC_CASES[key])
    run_differential(f"synthetic {key}", compiled, vocab_view(vocab), walks=6, max_tokens=30, checks_per_walk=6)


LINE_TEXT_CASES = {
    "list.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "list.gbnf").read_text(encoding="utf-8")),
    "loop": lambda c: c.compile_regex(r"[^\n\u2028\u2029]*\n"),
    "after-a-space": lambda c: c.compile_regex(r"a [^\n\u0085]+\."),
}


@pytest.mark.parametrize("key", sorted(LINE_TEXT_CASES))
def test_missing_lead_masks_match_reference(key: str) -> None:
    """Plain text but the characters of a few lead bytes (U+0085 under 0xC2, U+2028 and U+2029
    under 0xE2), on a vocabulary with tokens of those characters and of others under the same
    leads (the tokens the plain shortcuts decide one by one), and a large space subtree."""
    rng = random.Random(_seed(key))
    tokens = _synthetic_tokens(_seed(key))
    pieces = ["a", "b", " ", "x y", "\u2028", "\u2029", "\x85", "\u2014", "\u00e9", "\u00a0", "\n", "."]
    extra = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))).encode() for _ in range(120)]
    extra += [b" " + bytes(rng.choice(b"abcdefgh.-") for _ in range(rng.randint(0, 5))) for _ in range(500)]
    tokens = _with_new(tokens, extra)
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1])
    compiled = _compile(vocab, LINE_TEXT_CASES[key])
    run_differential(f"lines {key}", compiled, vocab_view(vocab), walks=6, max_tokens=30, checks_per_walk=6)


NEAR_UNIVERSAL_CASES = {
    "dot-suffix": lambda c: c.compile_json_schema({"type": "string", "pattern": "^.*a b$"}),
    "searched-suffix": lambda c: c.compile_regex(r"[^\n\u2028\u2029]*ab"),
    # the same under length bounds: no plain capacity, a capacity without those characters
    # (Matcher::NearCapacity) past every plain token's length, or within it
    "dot-searched-bounded": lambda c: c.compile_json_schema(
        {"type": "string", "pattern": ".+[@].+[.]___", "minLength": 10, "maxLength": 40}
    ),
    "dot-bounded-short": lambda c: c.compile_json_schema({"type": "string", "pattern": "a.b", "maxLength": 5}),
}


@pytest.mark.parametrize("key", sorted(NEAR_UNIVERSAL_CASES))
def test_near_universal_masks_match_reference(key: str) -> None:
    """Universal but for the characters of U+2028 and U+2029 (and U+0085) without looping on
    itself: a suffix searched for after a pattern's `.`, in a JSON string and in free text (its
    states are near universal, Automaton::is_near_universal; Matcher::Walk decides the tokens of
    those lead bytes one by one). The vocabulary holds tokens of those characters and others of
    the same leads, and enough plain tokens that deciding them one by one pays."""
    rng = random.Random(_seed(key))
    tokens = _synthetic_tokens(_seed(key))
    pieces = ["a", "b", " ", "x y", "\u2028", "\u2029", "\x85", "\u2014", "\u00e9", "\u00a0", "\n", "."]
    extra = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 4))).encode() for _ in range(120)]
    extra += [bytes(rng.choice(b" abcdefgh.-") for _ in range(rng.randint(1, 6))) for _ in range(3000)]
    tokens = _with_new(tokens, extra)
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1])
    compiled = _compile(vocab, NEAR_UNIVERSAL_CASES[key])
    run_differential(f"near universal {key}", compiled, vocab_view(vocab), walks=6, max_tokens=30, checks_per_walk=6)


FIRST_CHARACTER_CASES = {
    # a pattern's unescaped `.` between literals: any character but U+2028, U+2029 and U+0085
    # (their leads' other characters step along: odd leads, walked whole), then a narrow set
    "dot-then-digit": lambda c: c.compile_json_schema({"type": "string", "pattern": "^[0-9].[0-9]$"}),
    "dot-between-words": lambda c: c.compile_json_schema({"type": "string", "pattern": "^uk.gov.x$"}),
    # every character steps along (no odd lead), and the string may end after it
    "any-then-letter": lambda c: c.compile_json_schema({"type": "string", "pattern": r"^a[\s\S]b?$"}),
    # free text: an escape or a quote are plain starts no more; the character then `;`
    "free-text": lambda c: c.compile_regex(r"x[^\n];"),
    # raw bytes beside the characters: a lead then ASCII (no character) is read too, so the
    # tokens of an invalid first character are decided by their bytes
    "ir-raw-lead": lambda c: c.compile_grammar(
        Grammar(
            {
                "root": Alt(
                    (
                        Seq((CharClass(((0x20, 0x10FFFF),)), Literal(b";"))),
                        Seq((ByteClass(((0xC3, 0xC3), (0xE4, 0xE4))), Literal(b"A;"))),
                    )
                )
            }
        )
    ),
}


@pytest.mark.parametrize("key", sorted(FIRST_CHARACTER_CASES))
def test_first_character_masks_match_reference(key: str) -> None:
    """A position where every plain character leads to one configuration that reads few bytes
    (Matcher::FirstCharWalk): tokens of one character, then only the children on those bytes
    below each first character (Vocabulary::after_first_char). The vocabulary holds many
    distinct first characters (so that the shortcut pays), tokens whose first character is no
    valid UTF-8 (a lead, then ASCII), parts of a character, and the characters of U+2028's
    and U+0085's leads."""
    rng = random.Random(_seed(key))
    tokens = _synthetic_tokens(_seed(key))
    firsts = [chr(c) for c in range(0x3B1, 0x3C9)] + [chr(c) for c in range(0x4E00, 0x4E00 + 1500)]
    firsts += ["\u2028", "\u2029", "\u2014", "\x85", "\u00e9", "a", "b", " ", "."]
    # (the bytes read after the first character start few of the rests, so the shortcut pays)
    common = ["", "", "x", "y", "z", "w", "q", ".", '"', '",', "\u2028"]
    rare = ["1", "7", "g", "go", "gov", ";", "b"]
    extra = [(rng.choice(firsts) + rng.choice(rare if rng.random() < 0.05 else common)).encode() for _ in range(4000)]
    extra += [b"\xc3A", b"\xe2\x80", b"\xe4\xb8", b"\xe0\x80a", b"\xc2\x85g", b"\xe2\x80\xa8g", b"\xe2\x80\xa81"]
    tokens = _with_new(tokens, extra)
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1])
    compiled = _compile(vocab, FIRST_CHARACTER_CASES[key])
    run_differential(f"first character {key}", compiled, vocab_view(vocab), walks=8, max_tokens=10, checks_per_walk=10)


@pytest.mark.parametrize(
    "pattern",
    [
        r"(return [0-9]+;|[a-qs-z][a-z0-9]*=)+",
        r"((if|in)\(|[a-hj-z][a-z0-9]*[=(])+",
        # into a chain of positions instead of a loop (a bounded repetition after the first letter)
        r"(return [0-9]+;|[a-qs-z][a-z0-9]{0,7}=)+",
        r"((if|in)\(|[a-hj-z][a-z0-9]{1,5}[=(])+",
        # chains whose later positions step the letters apart (Automaton::SetTarget tells them)
        r"([a-z]([a-m][a-z]{0,6}|[n-z][0-9]{0,6})=)+",
        r"([a-z]{2}([a-m]x|[n-z]y)[a-z]{0,4}=)+",
    ],
)
def test_wide_split_masks_match_reference(pattern: str, splits_at_once: None) -> None:
    """A wide split on a vocabulary where identifiers' letters start most tokens, with tokens
    that spell an identifier after a keyword's first letter (``rx=``, ``ix(``: dead, the
    keyword's letter does not start one) and keywords' prefixes."""
    rng = random.Random(_seed(pattern))
    tokens = _synthetic_tokens(_seed(pattern))
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    extra = [
        ("".join(rng.choice(letters) for _ in range(rng.randint(1, 9))) + rng.choice(["", "=", "(", ";"])).encode()
        for _ in range(2500)
    ]
    extra += [f"{k}{c}{e}".encode() for k in ("r", "re", "ret", "i", "in") for c in "xa9" for e in ("", "=", "(", "x=")]
    tokens = _with_new(tokens, [*extra, b"return", b"return 1;", b"if(", b"in(", b"ret"])
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1])
    compiled = _compile(vocab, lambda c: c.compile_regex(pattern))
    run_differential(f"wide split {pattern!r}", compiled, vocab_view(vocab), walks=6, max_tokens=20, checks_per_walk=6)


@pytest.mark.parametrize("pattern", [r"x( [a-z]+(\s[a-z]+)*)+;", r"[a-z]+(\s+[a-z]+)*\."])
def test_wide_chain_split_masks_match_reference(pattern: str, splits_at_once: None) -> None:
    r"""Splits for chains that read a few lead bytes (`\s`'s U+00A0, U+2003, U+3000) past
    positions that read ASCII bytes only, on a vocabulary whose words (most after a space) hold
    those characters and others of the same leads (U+00E9, U+2019, U+3042) after their letters,
    and deep in subtrees of letters only otherwise (the wide split's scan may skip none of them)."""
    rng = random.Random(_seed(pattern))
    tokens = _synthetic_tokens(_seed(pattern))
    letters = "abcdefgh"
    spaces, others = ["\u00a0", "\u2003", "\u3000"], ["\u00e9", "\u2019", "\u3042"]

    def word() -> str:
        return "".join(rng.choice(letters) for _ in range(rng.randint(1, 6)))

    extra = [(rng.choice(["", " "]) + word()).encode() for _ in range(1500)]
    extra += [(" " + word() + rng.choice(spaces + others) + rng.choice(["", word()])).encode() for _ in range(800)]
    extra += [(word() + rng.choice(spaces + others) + word()).encode() for _ in range(200)]
    tokens = _with_new(tokens, [*extra, *(c.encode() for c in spaces + others), b" ", b";", b"."])
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1])
    compiled = _compile(vocab, lambda c: c.compile_regex(pattern))
    run_differential(f"wide chain {pattern!r}", compiled, vocab_view(vocab), walks=8, max_tokens=20, checks_per_walk=8)


WIDE_TAIL_CASES: dict[str, dict[str, Any]] = {
    # A name's body under a far bound (o358's): every non-ASCII character steps along.
    "far-bound": {"type": "string", "maxLength": 260, "pattern": "^[A-Za-z0-9_][^<>*#.%&:\\\\+?/]*$"},
    # A bound within the tokens' characters: past it, their characters die (the chain's end).
    "near-bound": {"type": "string", "maxLength": 7, "pattern": "^[^<>.:]*$"},
    # Cyrillic never steps along (its leads walk as before), nor one CJK character (its lead's
    # tokens are decided by their bytes).
    "lead-out": {"type": "string", "maxLength": 40, "pattern": "^[^<>.:\u0400-\u04ff\u65e5]*$"},
    # Positions that differ in the leads they step along: Cyrillic only at the first three,
    # or only after them.
    "lead-first": {"type": "string", "pattern": "^[^<>.:]{3}[^<>.:\u0400-\u04ff]{0,20}$"},
    "lead-after": {"type": "string", "pattern": "^[^<>.:\u0400-\u04ff]{3}[^<>.:]{0,20}$"},
    # A loop (no bound): the chain is one position.
    "loop": {"type": "string", "pattern": "^[^<>.:]*$"},
}


def _wide_tail_tokens(seed: int) -> list[bytes | None]:
    """Words, and tokens of an ASCII prefix (a space, letters, both) before characters
    of several leads (é, Cyrillic, CJK, an emoji), from one to twenty-four of them (past the
    chain's reach of 16), some with ASCII after them or cut inside their last character."""
    rng = random.Random(seed)
    letters = "abcdefghij"
    wides = ["\u00e9", "\u0431\u0432", "\u043c\u0441", "\u65e5\u672c", "\u8a9e", "\U0001f600", "\u00fc"]

    def word(most: int) -> str:
        return "".join(rng.choice(letters) for _ in range(rng.randint(1, most)))

    extra = [(rng.choice(["", " "]) + word(8)).encode() for _ in range(3000)]
    for _ in range(1500):
        prefix = rng.choice([" ", word(3), " " + word(2), "_"])
        body = "".join(rng.choice(wides) for _ in range(rng.randint(1, 12)))
        tail = rng.choice(["", "", "", word(2), ".", "<"])
        data = (prefix + body + tail).encode()
        if rng.random() < 0.15:
            data = data[:-1] if not tail else data  # cut inside the last character
        extra.append(data)
    return _with_new(_synthetic_tokens(seed), extra)


@pytest.mark.parametrize("key", sorted(WIDE_TAIL_CASES))
def test_wide_tail_masks_match_reference(key: str, splits_at_once: None) -> None:
    """Boundary nodes on a lead byte below an ASCII path of a split's set (a space, then a
    Cyrillic word): their tokens of whole characters decided by their counts along the chain
    (Matcher::WideTokensAlong with Vocabulary::wide_tail_tokens), the others by their bytes;
    checked at every position of a few values and along random walks."""
    vocab = lg.Vocabulary.from_tokens(_wide_tail_tokens(_seed(key)), eos_ids=[0], special_ids=[1])
    schema = {"type": "object", "properties": {"n": WIDE_TAIL_CASES[key]}}
    compiled = _compile(vocab, lambda c: c.compile_json_schema(schema))
    values = ["Az бв日本", "a мс😀é", "_" + "бв" * 6, "ab cd 日本語 ü", "x" * 5 + "é" * 3, "a" + "日本" * 9]
    values += ["abcбвг", "aбвг"]
    texts = [json.dumps({"n": v}, ensure_ascii=False).encode() for v in values]
    _check_prefixes(f"wide tail {key}", compiled, vocab, texts, lambda data, i: i >= 7)
    run_differential(f"wide tail {key}", compiled, vocab_view(vocab), walks=6, max_tokens=20, checks_per_walk=6)


def _with_new(tokens: list[bytes | None], extra: Iterable[bytes]) -> list[bytes | None]:
    """``tokens`` followed by the non-empty tokens of ``extra`` not in it yet, in order."""
    seen = set(tokens)
    for tok in extra:
        if tok and tok not in seen:
            seen.add(tok)
            tokens.append(tok)
    return tokens


def _long_tokens(seed: int) -> list[bytes | None]:
    """_synthetic_tokens plus long ones: plain runs past any short maxLength, multi-byte
    characters far into a token (past Vocabulary's kMultibytePlainReach of 16 characters), and
    quotes, escapes and split characters after plain prefixes of every length up to 40."""
    rng = random.Random(seed)
    extra: list[bytes] = []
    for n in range(1, 70):
        extra += [b"a" * n, b"ab" * (n // 2 + 1), "é".encode() * (n // 3 + 1), ("x" * n + "é").encode()]
    for n in range(0, 41):
        prefix = ("".join(rng.choice("abc é日") for _ in range(n))).encode()
        extra += [prefix + end for end in (b'"', b'",', b'"}', b"\\n", b"\\", "日".encode()[:2])]
    blobs = [t.encode("utf-8") for t in SYNTHETIC_TEXTS]
    for _ in range(300):
        blob = rng.choice(blobs)
        i = rng.randrange(len(blob))
        extra.append(blob[i : i + rng.randint(8, 60)])
    return _with_new(_synthetic_tokens(seed), extra)


# Bounded strings (plain chains): walked as plain tokens by character count plus the suffix
# trie from the position after each token's plain prefix.
BOUNDED_CASES: dict[str, Callable[[Any], Any]] = {
    "max-3": lambda c: c.compile_json_schema({"type": "string", "maxLength": 3}),
    "min-5-max-20": lambda c: c.compile_json_schema({"type": "string", "minLength": 5, "maxLength": 20}),
    "max-300": lambda c: c.compile_json_schema({"type": "string", "maxLength": 300}),
    "object-of-bounded": lambda c: c.compile_json_schema(
        {
            "type": "object",
            "properties": {"a": {"type": "string", "maxLength": 12}, "b": {"type": "string", "minLength": 30}},
            "required": ["a", "b"],
        }
    ),
    "gbnf-bounded-raw": lambda c: c.compile_ebnf('root ::= "\\"" ([^"\\\\] | "\\\\" ["\\\\])' + "{0,25}" + ' "\\""'),
    # Any character first, then ASCII only: the chain's multi-byte check must stop it.
    "gbnf-then-ascii": lambda c: c.compile_ebnf('root ::= "\\"" [^"\\\\]{4} [ -!#-\\[\\]-~]{0,10} "\\""'),
    # The same at the last position where tokens hold multi-byte characters (the 16th).
    "gbnf-15-then-ascii": lambda c: c.compile_ebnf('root ::= "\\"" [^"\\\\]{15} [ -!#-\\[\\]-~]{0,10} "\\""'),
    # A pattern's automaton under a bound, whose positions read the multi-byte characters
    # through several classes, one per next state (é or the others; `.` or the line
    # terminators): their capacity counts them all (Automaton::UnionReadsPlainUtf8).
    "search-under-bound": lambda c: c.compile_json_schema({"type": "string", "maxLength": 10, "pattern": "é"}),
    # (é then a letter only: the class of é leads where the capacity is 0.)
    "class-with-no-room-after": lambda c: c.compile_json_schema(
        {"type": "string", "maxLength": 10, "pattern": "^([^é]|é[a-z])*$"}
    ),
    "dot-search-under-bound": lambda c: c.compile_json_schema(
        {"type": "string", "minLength": 3, "maxLength": 14, "anyOf": [{"pattern": "a.*b"}, {"pattern": "日"}]}
    ),
}


def _check_prefixes(
    name: str,
    compiled: Any,
    vocab: Any,
    texts: list[bytes],
    at: Callable[[bytes, int], bool],
    view: Any = None,
    walk_nodes: dict[bytes, int] | None = None,
) -> None:
    """Compares the core's mask with the reference's at every position i of each text where
    at(text, i) holds (the text is fed byte by byte; a text the grammar rejects stops there),
    over ``view`` (default: every token of ``vocab``). ``walk_nodes`` collects, per prefix
    checked, the trie nodes its fill walked."""
    ref, view = Reference(compiled.grammar), view or vocab_view(vocab)
    bits = lg.allocate_mask(vocab)
    for data in texts:
        m, state = compiled.matcher(), ref.start()
        for i in range(len(data) + 1):
            if at(data, i):
                m.fill_mask(bits)
                if walk_nodes is not None:
                    walk_nodes[data[:i]] = m.last_walk_nodes
                bad = compare_full(name, ref, state, data[:i], mask_to_bools(bits, view.width), view)
                assert not bad, format_disagreements(bad)
            if i == len(data) or not m.accept_bytes(data[i : i + 1]):
                break
            state = ref.advance(state, data[i : i + 1])


def test_fitted_format_positions_match_reference(smollm2_vocab: Any) -> None:
    """A `uri` under a large maxLength is fitted (its parts' repetitions counted), and short
    counted repetitions end a few bytes on: each position is a configuration of its own (the
    chain check's positions, Matcher::SubtreeAllowed; test_chain_ending_on_a_frequent_byte
    covers chains that end within a token). Every position of each text, masks against the
    reference."""
    cases = [
        (
            {"type": "string", "format": "uri", "maxLength": 65536},
            [b'"http://proxy.example.com:8080/a/b?q=1#top"', b'"https://user:pw@example.org/images/x.jpg"'],
        ),
        ({"type": "string", "pattern": "^[a-z0-9]{2,8}(-[a-z0-9]{1,4})?$"}, [b'"abc12345-x1"', b'"ab-cdef"']),
    ]
    for schema, texts in cases:
        compiled = _compile(smollm2_vocab, lambda c, schema=schema: c.compile_json_schema(schema))
        _check_prefixes(f"counted {schema}", compiled, smollm2_vocab, texts, lambda data, i: True)


def test_searched_pattern_under_min_length_keeps_any_text_viable(smollm2_vocab: Any) -> None:
    """A pattern searched for under `minLength` is lowered to its DFA times the count, a rule per
    (state, count) that reads a character and tail-calls the next: past the count a cycle of
    tail calls, universal (Automaton::is_universal), so the positions before it keep any text
    of their remaining count and beyond viable and are decided as universal (4.5k trie nodes
    walked at the position below when those calls were not followed)."""
    compiled = _compile(
        smollm2_vocab,
        lambda c: c.compile_json_schema(
            {"type": "string", "pattern": "\\d+-[A-Fa-f0-9]*-[A-Fa-f0-9]{24}", "minLength": 35}
        ),
    )
    text = b'"1-60f6f7e7-0123456789abcdef01'
    walk_nodes: dict[bytes, int] = {}
    _check_prefixes(
        "searched under minLength", compiled, smollm2_vocab, [text], lambda data, i: i >= 20, None, walk_nodes
    )
    assert walk_nodes[text] < 1000, walk_nodes


DIFF_WALK_PATTERNS = [
    "^([^:]+:[a-fA-F0-9]+|[a-fA-F0-9]{32})$",
    "^([^:]+:[a-f0-9]+|[a-f0-9]{3})$",
    "^([g-z][^:]*|[a-f]{2,8})$",
]


def _diff_walk_tokens(pattern: str) -> list[bytes | None]:
    """Words of g-z, most hex-first tokens a hex character then such letters (there the two
    positions meet again), a few runs of hex characters, alone or before what ends the string
    (``abc"``), and ``abz`` (whose hash dies at its third letter where the text goes on)."""
    rng = random.Random(_seed(pattern))
    tokens = _synthetic_tokens(_seed(pattern))

    def run(alphabet: str, most: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, most)))

    letters, hexes = "ghijklmnopqrstuvwxyz", "abcdef0123456789"
    extra = [run(letters, 9).encode() for _ in range(14000)]
    extra += [(rng.choice(hexes) + run(letters, 4)).encode() for _ in range(1500)]
    ends = ["", '"', '",', ":", ":a"]
    extra += [(rng.choice(hexes) + run(hexes, 2) + rng.choice([*ends, run(letters, 2)])).encode() for _ in range(150)]
    return _with_new(tokens, [*extra, b'"', b"abc", b'abc"', b"abz", b"fedcba"])


@pytest.mark.parametrize("pattern", DIFF_WALK_PATTERNS)
def test_diff_walk_masks_match_reference(pattern: str) -> None:
    """A string start whose hex characters lead apart from its step successor, the text before a
    colon: their subtrees walked against the successor's mask (Matcher::DiffWalkSubtree), checked
    at every position of a few values, the string start first. A hex character may start a hash
    (tokens like ``abc"`` end it) or the text, and the two meet again at the first other letter;
    with the last pattern it starts only a run of them, which dies where the text goes on."""
    vocab = lg.Vocabulary.from_tokens(_diff_walk_tokens(pattern), eos_ids=[0], special_ids=[1])
    schema = json.dumps({"type": "object", "properties": {"h": {"type": "string", "pattern": pattern}}})
    compiled = _compile(vocab, lambda c: c.compile_json_schema(schema))
    texts = [json.dumps({"h": value}).encode() for value in ["abc", "abzq", "ghi:f0", "fedc", "0a1", "deadbeef" * 4]]
    _check_prefixes(f"diff walk {pattern!r}", compiled, vocab, texts, lambda data, i: i >= 7)


@pytest.mark.parametrize("key", sorted(BOUNDED_CASES))
def test_bounded_string_masks_match_reference(key: str) -> None:
    tokens = _long_tokens(_seed(key))
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1], logits_width=len(tokens) + 5)
    compiled = _compile(vocab, BOUNDED_CASES[key])
    run_differential(f"bounded {key}", compiled, vocab_view(vocab), walks=6, max_tokens=40, checks_per_walk=8)
    # Every position of a few strings (the chain's start and each length left).
    texts = [b'"' + b"x" * 40 + b'"', b'"ab\\"c' + "é日".encode() * 5 + b'"']
    _check_prefixes(f"bounded {key}", compiled, vocab, texts, lambda data, i: i > 0)


def _key_tokens() -> list[bytes | None]:
    """A vocabulary of JSON object pieces: key-like strings (every one or two letters of nine,
    three of three) alone and followed by '"', '":', '": ' or '",', and the punctuation, digits
    and literals around them. Few tokens start with any one letter, as in real vocabularies."""
    letters = "abcdefghé"
    words = [*letters, *(x + y for x in letters for y in letters)]
    words += [x + y + z for x in "abc" for y in "abc" for z in "abc"]
    words += [x + y + z for x in "defg" for y in "defg" for z in "dgh"]
    keys = [(w + end).encode() for w in sorted(set(words)) for end in ("", '"', '":', '": ', '",')]
    glue = [b"{", b"}", b'{"', b',"', b', "', b",", b" ", b":", b'"', b"0", b"1", b"12", b"true", b"\\", b"\\u0061"]
    return _with_new([b"<eos>", b"<special>"], keys + glue)


# Key positions where other keys are allowed too: every plain character but the listed keys'
# next ones leads to the key's string tail (Matcher::PlainStepWithExceptions).
KEY_CASES: dict[str, Any] = {
    "shared-prefixes": {"properties": {"ab": {"type": "integer"}, "ac": {"type": "integer"}, "b": {}}},
    "additional-typed": {
        "properties": {"ab": {"type": "string"}, "c": {"type": "integer"}},
        "additionalProperties": {"type": "integer"},
    },
    "pattern-properties": {
        "properties": {"ab": {"type": "string"}},
        "patternProperties": {"^c": {"type": "integer"}},
        "additionalProperties": {"type": "boolean"},
    },
    # Keys a pattern is searched in: any plain text keeps the key viable, but its letters move
    # it from "not matched yet" to "matched" (Matcher::RestWalk); the counted repetition next
    # to the search's any-string is cut to its minimum.
    "pattern-searched": {"patternProperties": {"[a-c]{1,9}": {"type": "integer"}}},
    "pattern-searched-listed": {
        "properties": {"ab": {"type": "string"}},
        "patternProperties": {"[d-h]+": {"type": "integer"}},
    },
    # A key's string tail that is a chain (its positions counted), not a loop: an exception
    # letter's subtree is not the tail's after one more character, so it is walked whole.
    "bounded-keys": {
        "properties": {"ab": {"type": "integer"}, "b": {}},
        "patternProperties": {"^.{1,4}$": {"type": "integer"}},
        "additionalProperties": False,
    },
}


@pytest.mark.parametrize("key", sorted(KEY_CASES))
def test_key_position_masks_match_reference(key: str) -> None:
    tokens = _key_tokens()
    vocab = lg.Vocabulary.from_tokens(tokens, eos_ids=[0], special_ids=[1])
    compiled = _compile(vocab, lambda c: c.compile_json_schema(KEY_CASES[key], whitespace="compact"))
    run_differential(f"keys {key}", compiled, vocab_view(vocab), walks=12, max_tokens=24, checks_per_walk=8)
    # Every key position of a few fixed objects (after a listed key was used, its spelling is
    # no other key's: tokens starting with an exception letter are not the string tail's).
    objects = ['{"ab":"x","c":1,"d":2}', '{"ab":1,"ac":2,"b":3}', '{"c":1,"dd":2}', '{"ab":"x","cab":1}']
    after = (b'"', b"a", b"c")
    texts = [t.encode() for t in objects]
    _check_prefixes(f"keys {key}", compiled, vocab, texts, lambda data, i: i > 0 and data[i - 1 : i] in after)


def _escape_tokens() -> list[bytes | None]:
    """A vocabulary of JSON string pieces in every spelling: letters and the words' characters
    raw, as short escapes, as \\uXXXX in both cases and cut anywhere inside, surrogate pairs
    and their halves, split UTF-8, and the quotes and punctuation around them."""
    pieces: list[bytes] = [b'"', b'":', b",", b"{", b"}", b":", b"1", b"\\", b"\\u", b"\\\\", b'\\"', b"\\/"]
    for esc in "nrtbf":
        pieces.append(b"\\" + esc.encode())
    for ch in "abxyé/\n😀\U0001f601日":
        cp = ord(ch)
        raw = ch.encode() if cp >= 0x20 else b""
        escapes = []
        if cp <= 0xFFFF:
            escapes += [f"\\u{cp:04x}".encode(), f"\\u{cp:04X}".encode()]
        else:
            hi, lo = 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)
            escapes += [f"\\u{hi:04x}\\u{lo:04x}".encode(), f"\\u{hi:04X}".encode(), f"\\u{lo:04x}".encode()]
        for form in [raw, *escapes]:
            pieces += [form[:k] for k in range(1, len(form) + 1)] + [form + b'"', b"a" + form]
    for d in "0123456789abcdefABCDEF":
        pieces.append(d.encode())
    return _with_new([b"<eos>", b"<special>"], pieces)


# Strings and keys other than a few words (StringExcept, built natively by the core): words with
# characters that have short escapes, non-ASCII and supplementary characters, prefixes of one
# another, the empty string, and a lone surrogate (which no spelling can produce).
EXCEPT_WORDS = ["ab", "a", "a/b", "é", "x\ny", "😀", "😀😁", "", "日本", "b\ud800"]
EXCEPT_CASES: dict[str, Any] = {
    "not-enum": {"type": "string", "not": {"enum": EXCEPT_WORDS}},
    "keys": {"type": "object", "properties": {w: {"type": "integer"} for w in EXCEPT_WORDS if w}},
    # ASCII words only: every trie node reads the other non-ASCII characters through the
    # continuation states the whole trie shares.
    "keys-ascii": {"type": "object", "properties": {w: {"type": "integer"} for w in ["ab", "a", "a/b", "x\ny"]}},
}


@pytest.mark.parametrize("key", sorted(EXCEPT_CASES))
def test_string_except_masks_match_reference(key: str) -> None:
    vocab = lg.Vocabulary.from_tokens(_escape_tokens(), eos_ids=[0], special_ids=[1])
    compiled = _compile(vocab, lambda c: c.compile_json_schema(EXCEPT_CASES[key], whitespace="compact"))
    run_differential(f"except {key}", compiled, vocab_view(vocab), walks=12, max_tokens=16, checks_per_walk=8)
    # Every position of texts that spell the words and their neighbours in other ways.
    contents = [
        "ab",
        "a\\u0062",
        "\\u0061b",
        "abc",
        "\\u00e9",
        "\\u00C9",
        "é",
        "\\ud83d\\ude00",
        "😀\\ud83d\\ude01",
        "x\\ny",
        "x\\u000Ay",
        "a\\/b",
        "a/b",
        "日本語",
        "\\u65e5\\u672c",
        "b",
        "",
    ]
    texts = [f'"{c}"'.encode() if key == "not-enum" else f'{{"{c}":1}}'.encode() for c in contents]
    _check_prefixes(f"except {key}", compiled, vocab, texts, lambda data, i: True)


# Positions that read part of what their step successor reads and then go on as it does: the
# first character of `[^/]+`, which may be neither the closing quote nor a slash (the
# successor's mask less the tokens of the first bytes that die, Matcher::NarrowedWalk), and
# loops over plain text that read a few plain bytes elsewhere or not at all (a `[^/]` loop
# after the last slash: PlainLoopWithExceptions). Escaped characters of the classes, non-ASCII
# characters.
NARROWED_CASES: dict[str, tuple[Any, list[str]]] = {
    "path-keys": (
        {"type": "object", "patternProperties": {"^(/[^/]+)+$": {"type": "integer"}}, "additionalProperties": False},
        [r'{"/a/bc": 1, "/\u00e9\"/x\\/y": 2}', '{"/日本/x": 3}'],
    ),
    "path-keys-open": (
        {"type": "object", "patternProperties": {"^(/[^/]+)+$": {"type": "integer"}}},
        [r'{"/a": 1, "/b/\\": 2}'],
    ),
    "two-segments": ({"type": "string", "pattern": "^[^/]+/[^/]+$"}, ['"ab/cd"', r'"日\n/é x"']),
    "key-value": ({"type": "string", "pattern": "^[^:]+:[^:]+$"}, ['"a b:c/d"']),
    "identifier": ({"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}, ['"a1_b"']),
    # a key pattern's first character, but a listed key's, then a chain of the pattern's
    # characters (the wide split into a chain)
    "listed-and-pattern-keys": (
        {
            "properties": {"id": {"type": "string"}},
            "patternProperties": {"^[0-9a-zA-Z_-]{1,40}$": {"type": ["integer", "string"]}},
        },
        ['{"id": "x", "idx": 1, "i": 2, "abc_D-9": 3}'],
    ),
}


def _frequent_t_tokens(seed: int) -> list[bytes | None]:
    """Words of which many hold ``T`` (a byte too frequent for the vocabulary to list its
    tokens), digits and separators, and multi-byte characters, so that a date-time's `T` after
    runs of any character is a frequent byte its chain ends on."""
    rng = random.Random(seed)
    pieces = ["a", "b", "T", "Tx", "1", "2", "0", "-", ":", "é", "日", " "]
    extra = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))).encode() for _ in range(6000)]
    return _with_new(_synthetic_tokens(seed), extra)


@pytest.mark.parametrize("pattern", ["^....-..-..T..:..$", "^.{2}T.{0,6}$"])
def test_chain_ending_on_a_frequent_byte_masks_match_reference(pattern: str, splits_at_once: None) -> None:
    """A chain of positions that read any character (multi-byte ones too) up to one that reads a
    frequent byte only (a date-time's `T`): the split of the set less that byte, where the
    chain ends, taken while that byte's trie nodes within the chain's reach are few
    (Matcher::FewExcludedNodes); checked at every position of a few values."""
    vocab = lg.Vocabulary.from_tokens(_frequent_t_tokens(_seed(pattern)), eos_ids=[0], special_ids=[1])
    schema = {"type": "object", "properties": {"t": {"type": "string", "pattern": pattern}}}
    compiled = _compile(vocab, lambda c: c.compile_json_schema(schema))
    values = ["2022-01-01T12:30", "é日ab-1T-0Tb:Tx", "abTxyz", "日日T", "TTTTT"]
    texts = [json.dumps({"t": v}, ensure_ascii=False).encode() for v in values]
    _check_prefixes(f"frequent byte {pattern!r}", compiled, vocab, texts, lambda data, i: i >= 7)


def _after_separator(data: bytes, i: int) -> bool:
    return i == 0 or data[i - 1 : i] in (b'"', b"/", b":", b"{", b"\\", b"i")


@pytest.mark.parametrize("key", sorted(NARROWED_CASES))
def test_narrowed_position_masks_match_reference(key: str, smollm2_vocab: Any) -> None:
    schema, texts = NARROWED_CASES[key]
    compiled = _compile(smollm2_vocab, lambda c: c.compile_json_schema(schema))
    for text in texts:  # every text is a valid document: each of its positions is checked
        m = compiled.matcher()
        assert m.accept_bytes(text.encode()) and m.is_complete(), text
    _check_prefixes(f"narrowed {key}", compiled, smollm2_vocab, [t.encode() for t in texts], _after_separator)


def test_narrowed_positions_take_the_wider_mask(gemma3_vocab: Any) -> None:
    """On Gemma 3 (262k tokens, a trie of over 400k nodes) the first character of a path
    segment and the segment after the last slash each walked some 75k trie nodes; from the
    wider position's mask they walk a few thousand. Masks still match the reference."""
    view = vocab_view(gemma3_vocab, sample=5000)
    for key in ("path-keys", "two-segments"):
        schema, texts = NARROWED_CASES[key]
        compiled = lg.Compiler(gemma3_vocab).compile_json_schema(schema)
        nodes: dict[bytes, int] = {}
        data = [t.encode() for t in texts]
        _check_prefixes(f"gemma3 narrowed {key}", compiled, gemma3_vocab, data, _after_separator, view, nodes)
        for prefix in (b'{"/', b'"', b'"ab/'):
            if prefix in nodes:
                assert nodes[prefix] < 8000, (key, prefix, nodes[prefix])
        assert any(p in nodes for p in (b'{"/', b'"ab/')), nodes


GEMMA_CASES: dict[str, Callable[[Any], Any]] = {
    "json.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "json.gbnf").read_text(encoding="utf-8")),
    "japanese.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "japanese.gbnf").read_text(encoding="utf-8")),
    "regex-unicode": lambda c: c.compile_regex(r"[^a-z]{2,6}(é|ß|日本)+"),
    "c.gbnf": lambda c: c.compile_ebnf((CORPORA_DIR / "gbnf" / "c.gbnf").read_text(encoding="utf-8")),
    "regex-identifiers": lambda c: c.compile_regex(r"([A-Za-z_][A-Za-z0-9_]*(\(|, | = ))+"),
    "choice-unicode": lambda c: c.compile_choice(CHOICES["unicode"]),
    # e-mail addresses under length bounds: chains that read multi-byte characters (the root
    # split, the tokens of whole characters by their counts), a set narrowed where `@` changes
    # role, a searched suffix whose unescaped dots make each position's set its own
    "email-bounded": lambda c: c.compile_json_schema(
        {"type": "string", "pattern": "^\\S+@\\S+$", "minLength": 5, "maxLength": 255}
    ),
    "email-gov-uk": lambda c: c.compile_json_schema(
        {"type": "string", "pattern": "^[^@^\\s]+@[^@^\\.^\\s]+(\\.[^@^\\.^\\s]*)*.gov.uk", "maxLength": 254}
    ),
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


def test_parallel_first_visits_match_serial_fills(smollm2_vocab: Any) -> None:
    """Matchers of one grammar filled on 2 threads while every configuration is new (transitions,
    class groups and step sets computed concurrently) give the masks of serial fills on a fresh
    copy of the grammar."""
    import numpy as np

    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": {"type": "integer"},
    }
    text = '{"name": "Zoë \\"q\\"", "tags": ["a b", "ü", "x\\ny"], "extra_key": -12, "n2": 7}'
    data = text.encode()
    for round_ in range(3):
        shared = lg.Compiler(smollm2_vocab).compile_json_schema(schema)
        fresh = lg.Compiler(smollm2_vocab).compile_json_schema(schema)
        # Each matcher stops at a different byte, so the batch asks for many new configurations.
        cuts = list(range(round_, len(data), 2))
        matchers = []
        for cut in cuts:
            m = shared.matcher()
            assert m.accept_bytes(data[:cut])
            matchers.append(m)
        bits = lg.allocate_mask(smollm2_vocab, batch=len(matchers))
        lg.fill_masks(matchers, bits, threads=2)
        one = lg.allocate_mask(smollm2_vocab)
        for row, cut in enumerate(cuts):
            m = fresh.matcher()
            assert m.accept_bytes(data[:cut])
            m.fill_mask(one, row=0)
            assert np.array_equal(one[0], bits[row]), f"round {round_}, prefix {data[:cut]!r}"
