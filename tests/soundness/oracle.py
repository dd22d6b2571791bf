"""The soundness oracle: random schemas, random walks through their masks, `jsonschema` as the judge.

Independent of the lowering: the schemas come from :mod:`tests.soundness.schema_gen`, the walks see
only the mask of a byte vocabulary (256 single bytes and EOS), and every verdict is `jsonschema`'s
(draft from `$schema`, default 2020-12, format checking on). Per schema:

- compile with random options (whitespace, property order, `strict`); a typed `LogitgateError` is a
  refusal, counted by code; any other exception is a failure (``crash``). An empty-language refusal
  is a failure when the instance generator finds a value the schema accepts (``false_empty``);
- walks: random allowed bytes, weighted away from whitespace, escapes and non-ASCII, and towards
  EOS, closing brackets and quotes once the output is long; a walk that reaches the step bound is
  ``truncated`` (not judged). Every completed output must be UTF-8 JSON valid against the schema
  (``invalid``, ``not_json``), with no duplicate key among the names the schema lists
  (``duplicate_key``); a walk with no allowed byte is ``stuck``, an allowed byte the matcher then
  refuses is ``mask_mismatch``;
- over-constraint: candidate instances accepted by `jsonschema` are serialized in the spelling the
  compile options promise (docs/json_schema.md) and fed byte by byte, each byte checked against the
  mask, then EOS; a rejection is ``over_constraint`` unless it falls under a documented departure
  (counted by departure).

Every failure is shrunk (keywords removed, subschemas replaced by `true` while the failure persists)
and reported as a reproducer: schema, options, text. ``python -m tests.soundness.oracle --help``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tests.soundness.schema_gen import InstanceGen, SchemaGen

import logitgate as lg
from logitgate.masks import mask_to_bool

EOS = 256
WIDTH = 257

_COMPILER: lg.Compiler | None = None


def compiler() -> lg.Compiler:
    global _COMPILER
    if _COMPILER is None:
        vocab = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[EOS])
        _COMPILER = lg.Compiler(vocab)
    return _COMPILER


# Byte weights of a walk: whitespace, escapes and non-ASCII stay possible but rare, so walks end.
_BASE = np.ones(WIDTH)
_BASE[[0x20, 0x09, 0x0A, 0x0D]] = 0.08
_BASE[0x5C] = 0.3
_BASE[0x80:0x100] = 0.02
_BASE[:0x20] = 0.05
_BASE[EOS] = 2.0
_CLOSE = np.zeros(WIDTH)
_CLOSE[EOS] = 200.0
_CLOSE[[ord("}"), ord("]")]] = 60.0
_CLOSE[ord('"')] = 20.0
_CLOSE[[ord(","), ord(":")]] = -0.9  # under pressure, do not open another member or item


def validator(schema: Any) -> Any:
    """A `jsonschema` validator for ``schema`` in its own draft (default 2020-12), formats checked."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator) if isinstance(schema, dict) else Draft202012Validator
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def walk(g: lg.CompiledGrammar, rng: np.random.Generator, bits: np.ndarray, max_steps: int, soft: int) -> Any:
    """One random walk; returns (bytes, outcome) with outcome done/truncated/stuck/mask_mismatch."""
    m = g.matcher()
    out = bytearray()
    for step in range(max_steps):
        m.fill_mask(bits, 0)
        allowed = np.flatnonzero(mask_to_bool(bits[0], WIDTH))
        if allowed.size == 0:
            return bytes(out), "stuck"
        w = _BASE[allowed]
        if step >= soft:  # the pressure to finish grows with the length
            w = w * np.maximum(0.02, 1.0 + _CLOSE[allowed] * (1 + (step - soft) / 8))
        c = np.cumsum(w)
        tid = int(allowed[min(int(np.searchsorted(c, rng.random() * c[-1], side="right")), allowed.size - 1)])
        if tid == EOS:
            return bytes(out), "done"
        if not m.accept(tid):
            return bytes(out) + bytes([tid]), "mask_mismatch"
        out.append(tid)
    return bytes(out), "truncated"


class _Object(dict):  # type: ignore[type-arg]
    """A parsed JSON object that remembers the keys its text repeated."""

    repeated: tuple[str, ...] = ()


def _parse(text: str, keep_first: bool) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> _Object:
        obj = _Object(reversed(pairs) if keep_first else pairs)
        if len(obj) != len(pairs):
            counts = Counter(k for k, _ in pairs)
            obj.repeated = tuple(k for k, n in counts.items() if n > 1)
        return obj

    return json.loads(text, object_pairs_hook=hook)


def _resolve(root: Any, ref: str) -> Any:
    node = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return None
    return node


def _conjuncts(root: Any, schemas: list[Any], branches: bool = False) -> list[dict[str, Any]]:
    """The schema objects that apply to a value for certain: ``schemas`` and, transitively, their
    `allOf` members, local `$ref` targets and what a double `not` holds; with ``branches``, those
    that may apply (the branches of `anyOf`, `oneOf`, `if`/`then`/`else` and `dependentSchemas`
    too, and a `not`'s `if`: the negation of `if P then Q` asserts P)."""
    out: list[dict[str, Any]] = []
    stack = list(schemas)
    while stack and len(out) < 200:
        s = stack.pop()
        if not isinstance(s, dict) or any(s is o for o in out):
            continue
        out.append(s)
        for kw in ("allOf", "anyOf", "oneOf") if branches else ("allOf",):
            stack.extend(x for x in s.get(kw, []) if isinstance(x, dict))
        if branches:
            stack.extend(s.get(kw) for kw in ("if", "then", "else"))
            stack.extend(s.get("dependentSchemas", {}).values())
            if isinstance(s.get("not"), dict):
                stack.append(s["not"].get("if"))
        if isinstance(s.get("not"), dict) and isinstance(s["not"].get("not"), dict):
            stack.append(s["not"]["not"])  # (a double negation asserts its inner schema)
        if isinstance(s.get("$ref"), str) and s["$ref"].startswith("#"):
            stack.append(_resolve(root, s["$ref"]))
    return out


def _children(root: Any, applied: list[dict[str, Any]], step: str | int, branches: bool = False) -> list[Any]:
    """The schemas that certainly (or, with ``branches``, possibly) apply to member/item ``step`` of a
    value ``applied`` applies to."""
    out: list[Any] = []
    for d in applied:
        if isinstance(step, str):
            props = d.get("properties") if isinstance(d.get("properties"), dict) else {}
            pats = d.get("patternProperties") if isinstance(d.get("patternProperties"), dict) else {}
            matched = [v for p, v in pats.items() if re.search(p, step)]
            if step in props:
                out.append(props[step])
            out.extend(matched)
            if step not in props and not matched and "additionalProperties" in d:
                out.append(d["additionalProperties"])
        else:
            prefix = d.get("prefixItems") if isinstance(d.get("prefixItems"), list) else None
            items = d.get("items")
            if isinstance(items, list):  # draft-07 spelling
                prefix, items = items, d.get("additionalItems")
            if prefix is not None and step < len(prefix):
                out.append(prefix[step])
            elif items is not None:
                out.append(items)
            if branches and "contains" in d:
                out.append(d["contains"])
    return _conjuncts(root, out, branches)


def _finite_names(applied: list[dict[str, Any]]) -> set[str]:
    """Names an object schema lists (properties, a `propertyNames` const/enum): never repeated."""
    names: set[str] = set()
    for d in applied:
        if isinstance(d.get("properties"), dict):
            names.update(d["properties"])
        pn = d.get("propertyNames")
        if isinstance(pn, dict):
            if isinstance(pn.get("const"), str):
                names.add(pn["const"])
            names.update(v for v in pn.get("enum", []) if isinstance(v, str))
    return names


def repeated_listed_keys(schema: Any, value: Any) -> list[str]:
    """Keys that ``value`` repeats where the schema that certainly applies lists them."""
    found: list[str] = []
    stack: list[tuple[Any, list[dict[str, Any]]]] = [(value, _conjuncts(schema, [schema]))]
    while stack:
        v, applied = stack.pop()
        if isinstance(v, _Object):
            if v.repeated:
                found.extend(k for k in v.repeated if k in _finite_names(applied))
            stack.extend((x, _children(schema, applied, k)) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, _children(schema, applied, i)) for i, x in enumerate(v))
    return found


def judge_output(schema: Any, text: bytes, v: Any = None) -> str | None:
    """None if ``text`` is a valid document for ``schema``, else ``"kind: why"``. A text that repeats
    a key must be valid whichever occurrence a parser keeps (first or last), and must not repeat a
    key the schema lists."""
    try:
        decoded = text.decode("utf-8")
        last = _parse(decoded, keep_first=False)
    except (UnicodeDecodeError, ValueError) as e:
        return f"not_json: {e}"
    v = v if v is not None else validator(schema)
    values = [last]
    if _has_repeats(last):
        values.append(_parse(decoded, keep_first=True))
    for value in values:
        try:
            err = next(iter(v.iter_errors(value)), None)
        except (OverflowError, ValueError) as e:  # a number beyond doubles parses as inf (multipleOf fails)
            return f"unjudged: validator error {e}"
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # jsonschema recurses per nesting level: a deep output is not judged
            # (RecursionError, or pyo3's PanicException, a BaseException, when the Rust internals hit it)
            return f"unjudged: too deep for the validator ({type(e).__name__})"
        if err is not None:
            return f"invalid: /{'/'.join(map(str, err.absolute_path))}: {err.message}"[:300]
    if len(values) > 1:
        listed = repeated_listed_keys(schema, last)
        if listed:
            return f"duplicate_key: {sorted(set(listed))}"
    return None


def _has_repeats(value: Any) -> bool:
    stack = [value]
    while stack:
        x = stack.pop()
        if isinstance(x, _Object):
            if x.repeated:
                return True
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return False


def spelling(value: Any, options: dict[str, Any], rng: random.Random) -> bytes:
    """``value`` in a spelling the compile options promise to accept: keys sorted (the schema order of
    the generator) or shuffled under ``property_order="any"``, separators per whitespace policy."""
    if options.get("property_order") == "any":
        value = _shuffled(value, rng)
    compact = options.get("whitespace") == "compact"
    return json.dumps(
        value,
        separators=(",", ":") if compact else (", ", ": "),
        sort_keys=options.get("property_order") != "any",
        ensure_ascii=rng.random() < 0.5,
    ).encode()


def _shuffled(v: Any, rng: random.Random) -> Any:
    if isinstance(v, dict):
        keys = list(v)
        rng.shuffle(keys)
        return {k: _shuffled(v[k], rng) for k in keys}
    if isinstance(v, list):
        return [_shuffled(x, rng) for x in v]
    return v


def feed(g: lg.CompiledGrammar, text: bytes, bits: np.ndarray) -> str | None:
    """None if the mask allows every byte of ``text`` then EOS (and the matcher accepts them)."""
    m = g.matcher()
    for i, b in enumerate(text):
        m.fill_mask(bits, 0)
        if not mask_to_bool(bits[0], WIDTH)[b]:
            return f"byte {i} ({bytes([b])!r}) not allowed after {text[:i]!r}"
        if not m.accept(b):
            return f"byte {i} allowed but refused"
    m.fill_mask(bits, 0)
    if not mask_to_bool(bits[0], WIDTH)[EOS]:
        return "EOS not allowed at the end"
    return None


def schema_objects(schema: Any) -> list[dict[str, Any]]:
    """Every schema object of a document (values of `const`/`enum` excluded)."""
    out: list[dict[str, Any]] = []
    stack = [schema]
    while stack:
        s = stack.pop()
        if isinstance(s, list):
            stack.extend(s)
        elif isinstance(s, dict):
            out.append(s)
            stack.extend(v for k, v in s.items() if k not in ("const", "enum"))
    return out


def departure(schema: Any, value: Any) -> str | None:
    """The documented departure (docs/json_schema.md) a rejected valid ``value`` may fall under."""
    stack: list[tuple[Any, list[dict[str, Any]]]] = [(value, _conjuncts(schema, [schema], True))]
    while stack:
        v, applied = stack.pop()
        if isinstance(v, dict):
            for d in applied:
                pats = d.get("patternProperties")
                props = d.get("properties") if isinstance(d.get("properties"), dict) else {}
                if isinstance(pats, dict) and any(k not in props and not any(re.search(p, k) for p in pats) for k in v):
                    return "patternProperties: a key matching no pattern"
                if isinstance(pats, dict) and len(pats) > 1 and any(k not in props for k in v):
                    return "patternProperties: several patterns that may match one key"
            stack.extend((x, _children(schema, applied, k, True)) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, _children(schema, applied, i, True)) for i, x in enumerate(v))
    return None


# ------------------------------------------------------------------------------------------------
# Shrinking
# ------------------------------------------------------------------------------------------------
def _variants(node: Any) -> Any:
    """Smaller versions of a JSON tree: one key dropped, one list item dropped, one sub-tree replaced
    by `true`/`{}` or by one of its children."""
    if isinstance(node, dict):
        for k in list(node):
            if k != "$schema":  # the draft decides what the other keywords mean
                yield {kk: vv for kk, vv in node.items() if kk != k}
        for k, v in node.items():
            for sub in _variants(v):
                yield {**node, k: sub}
    elif isinstance(node, list):
        for i in range(len(node)):
            if len(node) > 1:
                yield node[:i] + node[i + 1 :]
        for i, v in enumerate(node):
            for sub in _variants(v):
                yield [*node[:i], sub, *node[i + 1 :]]
    if isinstance(node, dict) and node:
        yield True
        yield {}


def shrink(schema: Any, still_fails: Any, budget_s: float = 20.0) -> Any:
    """Greedy: the first smaller variant that still fails replaces the schema, until none does."""
    deadline = time.monotonic() + budget_s
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for cand in _variants(schema):
            if time.monotonic() > deadline:
                break
            try:
                ok = still_fails(cand)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:  # a candidate jsonschema cannot evaluate (see judge_output)
                ok = False
            if ok:
                schema, progress = cand, True
                break
    return schema


def compile_schema(schema: Any, options: dict[str, Any]) -> lg.CompiledGrammar:
    return compiler().compile_json_schema(schema, **options)


def _still_accepts_invalid(text: bytes, options: dict[str, Any]) -> Any:
    def check(schema: Any) -> bool:
        g = compile_schema(schema, options)
        m = g.matcher()
        verdict = judge_output(schema, text)
        return m.accept_bytes(text) and m.is_complete() and verdict is not None and not verdict.startswith("unjudged")

    return check


def _still_rejects_valid(value: Any, text: bytes, options: dict[str, Any], bits: np.ndarray) -> Any:
    def check(schema: Any) -> bool:
        if not validator(schema).is_valid(value) or departure(schema, value):
            return False
        try:
            g = compile_schema(schema, options)
        except lg.UnsupportedSchemaError:
            return False
        except lg.SchemaError as e:
            return e.code == "schema-empty"
        return feed(g, text, bits) is not None

    return check


def _still_empty(value: Any, options: dict[str, Any]) -> Any:
    def check(schema: Any) -> bool:
        if not validator(schema).is_valid(value) or departure(schema, value):
            return False
        try:
            compile_schema(schema, options)
        except lg.SchemaError as e:
            return e.code == "schema-empty"
        return False

    return check


# The issue 22 items (docs: issues show 22) a failure belongs to, by the keywords of its reproducer.
KNOWN_ITEMS = {
    1: "issue 22 item 1: not of an object/array const/enum",
    2: "issue 22 item 2: not/if of type-specific keywords (vacuous truth)",
    3: "issue 22 item 3: oneOf misses vacuous matches",
    4: "issue 22 item 4: maxContains does not count vacuous matches",
    5: "issue 22 item 5: duplicate keys",
}


def known_item(failure: dict[str, Any]) -> int | None:
    """The open issue 22 item a failure (as reported by check_schema) is an instance of, if any."""
    text = failure.get("text")
    if failure["kind"] == "duplicate_key" or (text is not None and _has_repeats(_safe_parse(text))):
        return 5
    objs = schema_objects(failure["schema"])
    if any("maxContains" in s for s in objs):
        return 4
    if any("oneOf" in s for s in objs):
        return 3
    negated = [s["not"] for s in objs if isinstance(s.get("not"), dict)]
    if any(isinstance(x.get("const", x.get("enum")), (dict, list)) for n in negated for x in schema_objects(n)):
        return 1
    if negated or any("if" in s for s in objs):
        return 2
    return None


def _safe_parse(text: str) -> Any:
    try:
        return _parse(text, keep_first=False)
    except ValueError:
        return None


# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------
@dataclass
class Report:
    counts: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    departures: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    slowest: list[tuple[float, str]] = field(default_factory=list)  # (seconds, schema), the 3 slowest

    def summary(self) -> str:
        c = self.counts
        lines = [
            f"schemas generated {c['schemas']}, compiled {c['compiled']}, refused {c['refused']}"
            f" ({', '.join(f'{k} {v}' for k, v in self.refusals.most_common())})",
            f"walks completed {c['walks']} (truncated {c['truncated']}), invalid outputs {c['invalid']},"
            f" not JSON {c['not_json']}, duplicate listed keys {c['duplicate_key']}, stuck {c['stuck']},"
            f" mask/accept mismatches {c['mask_mismatch']}, not judged (too deep, inf) {c['unjudged']},"
            f" schemas over their time budget {c['over_budget']}",
            f"valid instances fed {c['instances']}, over-constraint rejections {c['over_constraint']},"
            f" departures {sum(self.departures.values())} ({dict(self.departures)}),"
            f" false empty {c['false_empty']}, crashes {c['crash']}",
            f"slowest schemas: {', '.join(f'{t:.1f} s {js[:120]}' for t, js in self.slowest)}",
        ]
        return "\n".join(lines)


def random_options(rng: random.Random) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if rng.random() < 0.5:
        opts["whitespace"] = "compact"
    if rng.random() < 0.3:
        opts["property_order"] = "any"
    if rng.random() < 0.15:
        opts["strict"] = True
    return opts


def _valid_instances(schema: Any, v: Any, rng: random.Random, tries: int, keep: int) -> list[Any]:
    gen = InstanceGen(schema, rng)
    found: list[Any] = []
    seen: set[str] = set()
    for _ in range(tries):
        x = gen.candidate()
        key = json.dumps(x, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        try:
            if v.is_valid(x):
                found.append(x)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # jsonschema too deep or beyond doubles: not a verdict (see judge_output)
            continue
        if len(found) >= keep:
            break
    return found


def check_schema(
    schema: Any,
    options: dict[str, Any],
    seed: int,
    report: Report,
    *,
    walks: int = 12,
    instances: int = 4,
    max_steps: int = 400,
    soft: int = 40,
    shrink_s: float = 20.0,
    budget_s: float = 30.0,
) -> None:
    """Compiles ``schema``, walks it and feeds it valid instances (no new walk or instance after
    ``budget_s``); updates ``report``."""
    start = time.monotonic()
    deadline = start + budget_s
    _check_schema(schema, options, seed, report, walks, instances, max_steps, soft, shrink_s, deadline)
    elapsed = time.monotonic() - start
    if len(report.slowest) < 3 or elapsed > report.slowest[-1][0]:
        report.slowest = sorted([*report.slowest, (elapsed, json.dumps(schema))], reverse=True)[:3]


def _check_schema(
    schema: Any,
    options: dict[str, Any],
    seed: int,
    report: Report,
    walks: int,
    instances: int,
    max_steps: int,
    soft: int,
    shrink_s: float,
    deadline: float,
) -> None:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    bits = lg.allocate_mask(compiler().vocab)
    c = report.counts
    c["schemas"] += 1
    v = validator(schema)

    def fail(kind: str, detail: str, text: bytes | None = None, small: Any = None) -> None:
        c[kind] += 1
        report.failures.append(
            {
                "kind": kind,
                "schema": small if small is not None else schema,
                "original": schema,
                "options": options,
                "text": None if text is None else text.decode("utf-8", "replace"),
                "detail": detail,
                "seed": seed,
            }
        )

    try:
        g = compile_schema(schema, options)
    except lg.LogitgateError as e:
        c["refused"] += 1
        report.refusals[e.code] += 1
        if e.code == "schema-empty" and not options.get("strict"):
            found = _valid_instances(schema, v, rng, 200, 1)
            dep = departure(schema, found[0]) if found else None
            if dep is not None:
                report.departures[dep] += 1
            elif found:
                text = spelling(found[0], options, rng)
                small = shrink(schema, _still_empty(found[0], options), shrink_s)
                fail("false_empty", f"{e}; valid: {text!r}", text, small=small)
        return
    except Exception as e:
        fail("crash", f"{type(e).__name__}: {e}"[:300])
        return
    c["compiled"] += 1
    for _ in range(walks):
        if time.monotonic() > deadline:
            c["over_budget"] += 1
            return
        try:
            text, outcome = walk(g, nrng, bits, max_steps, soft)
        except lg.LogitgateError as e:
            c["walk_refused"] += 1
            report.refusals[f"walk:{e.code}"] += 1
            continue
        if outcome == "truncated":
            c["truncated"] += 1
            continue
        if outcome != "done":
            fail(outcome, f"after {text!r}", text)
            continue
        c["walks"] += 1
        verdict = judge_output(schema, text, v)
        if verdict is not None and verdict.startswith("unjudged"):
            c["unjudged"] += 1
        elif verdict is not None:
            small = shrink(schema, _still_accepts_invalid(text, options), shrink_s)
            kind, _, detail = (judge_output(small, text) or verdict).partition(": ")
            fail(kind, detail, text, small=small)
            return  # one reproducer per schema
    if options.get("strict"):
        return  # strict=True forbids unlisted properties: a different language than jsonschema's
    for value in _valid_instances(schema, v, rng, 30, instances):
        if time.monotonic() > deadline:
            c["over_budget"] += 1
            return
        text = spelling(value, options, rng)
        c["instances"] += 1
        try:
            why = feed(g, text, bits)
        except lg.LogitgateError as e:
            # A documented limit met on the way (max_parse_heads on a deeply nested instance of
            # an ambiguous grammar): a typed refusal, as in the walks above, not a soundness bug.
            report.refusals[f"instance:{e.code}"] += 1
            continue
        if why is None:
            continue
        dep = departure(schema, value)
        if dep is not None:
            report.departures[dep] += 1
            continue
        small = shrink(schema, _still_rejects_valid(value, text, options, bits), shrink_s)
        fail("over_constraint", why, text, small=small)
        return


def run(n: int, seed: int, *, seconds: float | None = None, progress: bool = False, **kw: Any) -> Report:
    """Generates and checks ``n`` schemas (or as many as fit in ``seconds``) from ``seed``."""
    report = Report()
    rng = random.Random(seed)
    gen = SchemaGen(rng)
    start = time.monotonic()
    for i in range(n):
        if seconds is not None and time.monotonic() - start > seconds:
            break
        schema = gen.document()
        options = random_options(rng)
        check_schema(schema, options, rng.randrange(2**32), report, **kw)
        if progress and (i + 1) % 500 == 0:
            print(f"[{i + 1}] {time.monotonic() - start:.0f}s", report.summary().replace("\n", "; "), flush=True)
    report.counts["seconds"] = int(time.monotonic() - start)
    return report


def reproducer(f: dict[str, Any]) -> str:
    return json.dumps({k: f[k] for k in ("kind", "schema", "options", "text", "detail")}, ensure_ascii=False)


REGRESSIONS = Path(__file__).with_name("regressions.json")


def regression_case(f: dict[str, Any], source: str) -> dict[str, Any]:
    """A failure as a regression case: the text must be rejected (an under-constraint) or accepted
    (an over-constraint); ``item`` names the open issue it belongs to, if any."""
    expect = "accept" if f["kind"] in ("over_constraint", "false_empty") else "reject"
    return {
        "schema": f["schema"],
        "options": f["options"],
        "text": f["text"],
        "expect": expect,
        "item": known_item(f),
        "found": f"{f['kind']}: {f['detail']}"[:200],
        "source": source,
    }


def record(failures: list[dict[str, Any]], source: str, path: Path = REGRESSIONS) -> int:
    """Appends the failures that have a text and a schema not already there to ``path``; returns how many."""
    cases = json.loads(path.read_text()) if path.exists() else []
    seen = {json.dumps(c["schema"], sort_keys=True) for c in cases}  # one case per reproducer schema
    added = 0
    for f in failures:
        key = json.dumps(f["schema"], sort_keys=True)
        if f["text"] is None or key in seen:
            continue
        seen.add(key)
        cases.append(regression_case(f, source))
        added += 1
    path.write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    return added


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.soundness.oracle", description=__doc__.split("\n")[0])
    ap.add_argument("--schemas", type=int, default=20_000, help="schemas to generate (default 20000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=None, help="stop after this long")
    ap.add_argument("--walks", type=int, default=24, help="walks per compiled schema")
    ap.add_argument("--instances", type=int, default=4, help="valid instances fed per compiled schema")
    ap.add_argument("--out", default=None, help="write the failures (reproducers) to this JSON file")
    ap.add_argument("--record", action="store_true", help=f"append the failures to {REGRESSIONS.name}")
    args = ap.parse_args(argv)
    report = run(
        args.schemas,
        args.seed,
        seconds=None if args.minutes is None else args.minutes * 60,
        progress=True,
        walks=args.walks,
        instances=args.instances,
    )
    print(report.summary())
    print(f"seconds {report.counts['seconds']}")
    for f in report.failures:
        print("FAIL", reproducer(f))
    if args.record:
        n = record(report.failures, f"oracle --seed {args.seed}")
        print(f"{n} new regression cases in {REGRESSIONS}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report.failures, fh, indent=1, ensure_ascii=False)
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
