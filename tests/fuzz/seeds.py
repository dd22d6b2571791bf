"""Seed inputs for each fuzz target (tests/fuzz/targets.py), mostly from ../shared/corpora.

Seeds are kept small (libFuzzer's ``-max_len`` would cut a longer one into invalid text): the
JSON Schemas and patterns over MAX_SEED_BYTES are left out. Where the corpora are absent the
inline seeds remain, so the smoke test still has inputs.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

__all__ = ["CORPORA", "MAX_SEED_BYTES", "gbnf", "json_schema", "lark", "masks", "regex", "structural_tag"]

CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"
MAX_SEED_BYTES = 4096
JSONSCHEMABENCH_SEEDS = 400  # a fixed sample of the ~10k small schemas


def _small(texts: list[str]) -> list[bytes]:
    out = [t.encode() for t in texts]
    return sorted({b for b in out if len(b) <= MAX_SEED_BYTES})


def json_schema() -> list[bytes]:
    """Schema texts behind an even first byte (targets.py: the text form), and a few
    keyword-grammar inputs behind an odd one."""
    texts = ['{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}', "true", "{}"]
    for path in sorted((CORPORA / "json-schema-test-suite" / "tests" / "draft2020-12").glob("*.json")):
        texts += [json.dumps(group["schema"]) for group in json.loads(path.read_text(encoding="utf-8"))]
    bench: list[str] = []
    for path in sorted((CORPORA / "jsonschemabench").glob("*/schemas.jsonl")):
        with path.open(encoding="utf-8") as f:
            lines = [line for line in f if len(line) <= MAX_SEED_BYTES + 40]
        bench += [json.dumps(json.loads(line)["schema"]) for line in lines if line.strip()]
    rng = random.Random(0)
    texts += rng.sample(bench, min(JSONSCHEMABENCH_SEEDS, len(bench)))
    structured = [bytes([1]) + bytes(rng.randrange(256) for _ in range(64)) for _ in range(16)]
    return [b"\x00" + t for t in _small(texts)] + structured


def regex() -> list[bytes]:
    texts = ["^[a-z]+$", "(ab|cd)*e?f{2,3}", r"\d{3}-\d{4}", "[^\\x00-\\x1f]*", "(?:a|b)+c"]
    path = CORPORA / "regex" / "jsonschemabench_patterns.jsonl"
    if path.exists():
        with path.open(encoding="utf-8") as f:
            texts += [json.loads(line)["regex"] for line in f if line.strip()]
    return _small(texts)


def gbnf() -> list[bytes]:
    texts = ['root ::= "a" | "b" root', 'root ::= [0-9]+ ("." [0-9]+)?', "root ::= x\nx ::= [a-z]{1,3} x?"]
    texts += [p.read_text(encoding="utf-8") for p in sorted((CORPORA / "gbnf").rglob("*.gbnf"))]
    return _small(texts)


def lark() -> list[bytes]:
    texts = [
        'start: greet NAME\ngreet: "hi " | "hello "\nNAME: /[a-z]+/',
        'start: D{2,3} ("x" | "y")+ "z"? [ "w" ] "q"~2\nD: "0".."9"',
        '?start: pair\n!pair: INT "=" INT\nINT: DIGIT+\nDIGIT: /[0-9]/',
        '%ignore " "\nstart: sum\nsum: sum "+" INT | INT\n%import common.INT',
        '%llguidance {"allow_initial_skip": true}\n%ignore " "\nstart: "x"',
        '%import common (WS, CNAME)\n%ignore WS\nstart: CNAME "=" /[0-9]+/',
        'start: "call " fn\nfn: %json {"type": "object", "properties": {"n": {"type": "integer"}}}',
        'start: "go" <[268]>',
        'start: "ok"i /a.c/s',
    ]
    texts += [p.read_text(encoding="utf-8") for p in sorted((CORPORA / "lark").rglob("*.lark"))]
    return _small(texts)


def structural_tag() -> list[bytes]:
    weather = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    any_text = {"type": "any_text"}
    specs = [
        {"type": "const_string", "value": "hi"},
        {"type": "tag", "begin": "<think>", "content": any_text, "end": "</think>"},
        {"type": "any_text", "excludes": ["bad"], "max_chars": 5},
        {"type": "sequence",
         "elements": [{"type": "const_string", "value": "A: "}, {"type": "regex", "pattern": "[0-9]+"}]},
        {"type": "or",
         "elements": [{"type": "const_string", "value": "yes"}, {"type": "grammar", "grammar": 'root ::= "no"'}]},
        {"type": "repeat", "min": 1, "max": 2, "content": {"type": "const_string", "value": "ab"}},
        {"type": "star", "content": {"type": "const_string", "value": "x"}},
        {"type": "tags_with_separator", "separator": ",",
         "tags": [{"begin": "<i>", "content": {"type": "const_string", "value": "1"}, "end": "</i>"}]},
        {"type": "dispatch", "rules": [["#", {"type": "regex", "pattern": "[0-9]"}]], "loop": True},
        {"type": "grammar", "syntax": "lark", "grammar": 'start: "n=" NUM\nNUM: /[0-9]+/'},
        {"type": "token", "token": "<call>"},
        {"type": "tag", "begin": {"type": "token", "token": "<think>"}, "content": {"type": "any_tokens"},
         "end": {"type": "token", "token": "<call>"}},
        {"type": "token_dispatch", "rules": [["<call>", {"type": "const_string", "value": "!"}]], "loop": True},
        {"type": "triggered_tags", "triggers": ["<function="], "at_least_one": True, "stop_after_first": False,
         "tags": [{"type": "tag", "begin": "<function=get_weather>",
                   "content": {"type": "json_schema", "json_schema": weather}, "end": "</function>"}]},
        {"type": "json_schema", "json_schema": weather, "style": "qwen_xml"},
        {"type": "structural_tag", "format": {"value": "x"}},
        {"type": "structural_tag", "structures": [{"begin": "<f>", "schema": {"type": "integer"}, "end": "</f>"}],
         "triggers": ["<f>"]},
    ]  # fmt: skip
    return _small([json.dumps(s) for s in specs])


def masks() -> list[bytes]:
    """Arbitrary bytes: the target builds its grammar from them."""
    rng = random.Random(1)
    return [bytes(rng.randrange(256) for _ in range(rng.randint(8, 96))) for _ in range(32)]
