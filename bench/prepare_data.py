"""Prepare the engine-agnostic inputs under bench/data/ (run once; the outputs are committed).

- gbnf_samples.json: hand-written texts, each in the language of its corpus grammar. Each is checked with
  logitgate's `accept_bytes` when logitgate is importable, otherwise with llguidance (recorded in the file).
- regex_cases.json: a deterministic sample of 100 corpus regexes with one matching string each. Strings come
  from a small generator over Python's own regex parse tree (no engine involved) and are checked with
  `re.fullmatch`. Patterns that Python cannot parse, or that use lookarounds/backreferences, are skipped.

Regex convention used by the harness: the JSON Schema `pattern` is matched against the whole output, with one
leading `^` and one trailing `$` stripped (engines' regex entry points already anchor both ends).
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DATA_DIR, SHARED, pin_threads

pin_threads()

try:  # Python 3.11+: re._parser; earlier: sre_parse
    from re import _constants as sre_c  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

GBNF_SAMPLES: dict[str, list[str]] = {
    "arithmetic.gbnf": ["a+b*2=(c-1)\nresult_x=(alpha +beta*2)\ny = (42)\n", "x=(1+2)\n"],
    "c.gbnf": [
        "int main(){int x = 1;return x;}",
        "float f(int a){while(a<10){a = a+1;}if(a==10){return a*2;}else{return 0;}}",
    ],
    "chess.gbnf": ["1. e4 e5\n2. Nf3 Nc6\n3. Bb5 a6\n4. O-O Nf6\n"],
    "english.gbnf": ["Hello world, this is a (small) test: 42 items!\nSecond line."],
    "japanese.gbnf": ["こんにちは 世界\nカタカナ、ひらがな"],
    "json.gbnf": [
        '{"name": "logitgate", "version": 1, "tags": ["a", "b\\n"], "ok": true, "pi": 3.14, "none": null}',
        '{"nested": {"list": [1, -2, 3.5e12, {"k": "v"}], "empty": {}}}',
    ],
    "json_arr.gbnf": ['[\n{"a": 1},\n"x",\n2.5,\n[true, false]\n]'],
    "list.gbnf": ["- apples\n- pears and plums\n- 3 lemons\n"],
    "from-llguidance/vllm-sql.gbnf": ["SELECTcol_1fromtable_1wherecol_2=1"],
}


class _Skip(Exception):
    pass


_CATEGORY_CHARS = {
    sre_c.CATEGORY_DIGIT: "0123456789",
    sre_c.CATEGORY_WORD: "abcxyzABCXYZ0189_",
    sre_c.CATEGORY_SPACE: " ",
    sre_c.CATEGORY_NOT_DIGIT: "abcXYZ-_ ",
    sre_c.CATEGORY_NOT_WORD: " -.:/",
    sre_c.CATEGORY_NOT_SPACE: "abcXYZ019-_",
}
_POOL = [chr(c) for c in range(0x20, 0x7F)] + ["é", "ß", "中"]


def _class_chars(items: list[Any]) -> tuple[list[str], bool]:
    """Candidate characters of a character class and whether it is negated."""
    negate = False
    chars: list[str] = []
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            chars.append(chr(av))
        elif op is sre_c.RANGE:
            lo, hi = av
            chars.extend(chr(c) for c in {lo, hi, (lo + hi) // 2, min(hi, lo + 1)})
        elif op is sre_c.CATEGORY:
            chars.extend(_CATEGORY_CHARS.get(av, ""))
        else:
            raise _Skip(str(op))
    return chars, negate


def _gen(tree: Any, rng: random.Random, out: list[str], budget: list[int]) -> None:
    """Append a random string matching `tree` (an sre parse list) to `out`; explicit stack, no recursion."""
    stack: list[Any] = [iter(list(tree))]
    while stack:
        try:
            op, av = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        budget[0] -= 1
        if budget[0] < 0:
            raise _Skip("too long")
        if op is sre_c.LITERAL:
            out.append(chr(av))
        elif op is sre_c.NOT_LITERAL:
            out.append(next(c for c in "ab0 " if ord(c) != av))
        elif op is sre_c.ANY:
            out.append(rng.choice("abc019 -"))
        elif op is sre_c.IN:
            chars, negate = _class_chars(av)
            if negate:
                pool = [c for c in _POOL if c not in chars and re.fullmatch(_class_src(av), c)]
                if not pool:
                    raise _Skip("empty negated class")
                out.append(rng.choice(pool))
            else:
                if not chars:
                    raise _Skip("empty class")
                out.append(rng.choice(chars))
        elif op is sre_c.BRANCH:
            stack.append(iter(list(rng.choice(av[1]))))
        elif op is sre_c.SUBPATTERN:
            stack.append(iter(list(av[-1])))
        elif op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            hi = min(hi, lo + 3) if hi != sre_c.MAXREPEAT else lo + 3
            n = rng.randint(lo, hi)
            if n > 64:
                raise _Skip("repeat too large")
            stack.append(iter(list(sub) * n))
        elif op is sre_c.AT:
            continue  # anchors: the whole output is matched anyway
        elif op is sre_c.ATOMIC_GROUP if hasattr(sre_c, "ATOMIC_GROUP") else False:
            stack.append(iter(list(av)))
        else:
            raise _Skip(f"unsupported construct {op}")


def _class_src(items: list[Any]) -> str:
    """Rebuild a class regex for verifying a negated-class pick (cheap and exact)."""
    parts = []
    negate = ""
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = "^"
        elif op is sre_c.LITERAL:
            parts.append(re.escape(chr(av)))
        elif op is sre_c.RANGE:
            parts.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op is sre_c.CATEGORY:
            parts.append(
                {
                    sre_c.CATEGORY_DIGIT: r"\d",
                    sre_c.CATEGORY_WORD: r"\w",
                    sre_c.CATEGORY_SPACE: r"\s",
                    sre_c.CATEGORY_NOT_DIGIT: r"\D",
                    sre_c.CATEGORY_NOT_WORD: r"\W",
                    sre_c.CATEGORY_NOT_SPACE: r"\S",
                }[av]
            )
    return f"[{negate}{''.join(parts)}]"


def strip_anchors(pattern: str) -> str:
    """Drop one leading `^` and one unescaped trailing `$` (the harness matches whole outputs)."""
    if pattern.startswith("^"):
        pattern = pattern[1:]
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1]
    return pattern


def sample_string(pattern: str, rng: random.Random) -> str | None:
    """A string that Python's `re.fullmatch` accepts for `pattern`, or None when we cannot make one."""
    try:
        tree = sre_parse.parse(pattern)
    except (re.error, OverflowError, RecursionError):
        return None
    for _ in range(20):
        out: list[str] = []
        try:
            _gen(tree, rng, out, [2000])
        except _Skip:
            return None
        text = "".join(out)
        if len(text) <= 300 and re.fullmatch(pattern, text, flags=re.ASCII):
            return text
    return None


def make_regex_cases(n: int = 100, seed: int = 0) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (SHARED / "corpora/regex/jsonschemabench_patterns.jsonl").open()]
    rng = random.Random(seed)
    order = list(range(len(rows)))
    rng.shuffle(order)
    cases: list[dict[str, Any]] = []
    for idx in order:
        pat = strip_anchors(rows[idx]["regex"])
        if "(?=" in pat or "(?!" in pat or "(?<" in pat or re.search(r"\\[1-9]", pat):
            continue  # lookarounds / backreferences: out of scope for every engine's regex entry point
        text = sample_string(pat, random.Random(idx))
        if text is None or text == "":
            continue
        cases.append(
            {"id": f"re{idx:04d}", "line": idx, "pattern": pat, "original": rows[idx]["regex"], "sample": text}
        )
        if len(cases) == n:
            break
    cases.sort(key=lambda c: c["line"])
    return cases


def _verifier() -> tuple[str, Any]:
    """Return (name, check(grammar_text, sample) -> bool) using logitgate if importable, else llguidance."""
    try:
        import logitgate as lg
        from common import load_tokenizer

        vocab = lg.Vocabulary.from_huggingface(load_tokenizer("smollm2"))
        comp = lg.Compiler(vocab)

        def check_lg(text: str, sample: str) -> bool:
            m = comp.compile_ebnf(text).matcher()
            return bool(m.accept_bytes(sample.encode())) and bool(m.is_complete())

        return "logitgate accept_bytes", check_lg
    except Exception:
        import llguidance
        import llguidance.hf

        from common import load_tokenizer

        tok = load_tokenizer("smollm2")
        lt = llguidance.hf.from_tokenizer(tok)

        def check_llg(text: str, sample: str) -> bool:
            m = llguidance.LLMatcher(lt, llguidance.grammar_from("gbnf", text), log_level=0)
            ok = m.consume_tokens(tok.encode(sample, add_special_tokens=False))
            return bool(ok) and bool(m.is_accepting())

        return "llguidance consume_tokens (logitgate not importable)", check_llg


def main() -> int:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    name, check = _verifier()
    bad = 0
    for fname, samples in GBNF_SAMPLES.items():
        text = (SHARED / "corpora/gbnf" / fname).read_text()
        for s in samples:
            if not check(text, s):
                print(f"INVALID sample for {fname}: {s!r}", file=sys.stderr)
                bad += 1
    (DATA_DIR / "gbnf_samples.json").write_text(
        json.dumps({"verified_with": name, "samples": GBNF_SAMPLES}, indent=1, ensure_ascii=False) + "\n"
    )
    cases = make_regex_cases()
    (DATA_DIR / "regex_cases.json").write_text(
        json.dumps(
            {"seed": 0, "anchors": "one leading ^ and trailing $ stripped; whole-output match", "cases": cases},
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )
    print(f"gbnf samples verified with {name}: {bad} invalid; regex cases: {len(cases)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
