"""MaskBench conformance: real-world schemas with valid and invalid instances, for logitgate and its peers.

Every instance is serialized with ``json.dumps(data)`` and encoded once with the chosen tokenizer
(the ``tokenizers`` library on the tokenizer's ``tokenizer.json``), so every engine receives the same ids.
Per schema: ``passed`` (compiled; every valid accepted with EOS allowed at the end; every invalid rejected
somewhere), ``under`` (some invalid accepted; takes precedence), ``over`` (some valid rejected),
``unsupported``, ``compile_error``, ``timeout``, ``crash``.

Peers (xgrammar, llguidance) run through ``bench/engines.py``'s adapters with their defaults. They have
no separate "unsupported" error type; a compile error whose message says a feature is not supported /
unknown / unimplemented is counted ``unsupported``, any other one ``compile_error``.

Sample: the same stratified draw as ``bench/run.py --sample N --seed S``: among schemas with at least one
valid instance, each split gets ``max(1, floor(N * n_split / n_total))`` schemas, the remainder goes to the
splits with the largest fractional parts (one each, in that order), and each split's ids are drawn with
``random.Random(seed).sample`` (one generator, splits in byte order). Default N=998, seed 0.
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

from tests.conformance.common import (
    COMPILE_ERROR,
    CORPORA_DIR,
    OVER,
    PASSED,
    RUNTIME_ERROR,
    UNDER,
    UNSUPPORTED,
    LogitgateAdapter,
    check_ids,
    classify_compile_error,
    load_tok,
    peer_compile_outcome,
    tokenizer_dir,
)

MASKBENCH_DIR = CORPORA_DIR / "jsonschemabench"
LLG_EXPECTED = CORPORA_DIR / "llguidance" / "expected_maskbench.json"
DEFAULT_SAMPLE = 998
ENGINE_NAMES = ("logitgate", "xgrammar", "llguidance")


def splits() -> list[str]:
    return sorted(p.name for p in MASKBENCH_DIR.iterdir() if p.is_dir() and (p / "tests.jsonl").is_file())


def eligible_ids() -> dict[str, list[str]]:
    """Per split, the ids (file order) of schemas with at least one valid instance."""
    out: dict[str, list[str]] = {}
    for split in splits():
        ids = []
        with (MASKBENCH_DIR / split / "tests.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                if any(t.get("valid") for t in row["tests"]):
                    ids.append(row["id"])
        if ids:
            out[split] = ids
    return out


def stratified_sample(n: int | None, seed: int = 0) -> dict[str, set[str]]:
    """The draw described in the module docstring (``None`` = every eligible schema)."""
    eligible = eligible_ids()
    total = sum(len(v) for v in eligible.values())
    if n is None or n >= total:
        return {k: set(v) for k, v in eligible.items()}
    quota = {k: max(1, math.floor(n * len(v) / total)) for k, v in eligible.items()}
    by_fraction = sorted(eligible, key=lambda k: -(n * len(eligible[k]) / total % 1))
    i = 0
    while sum(quota.values()) < n:
        k = by_fraction[i % len(by_fraction)]
        if quota[k] < len(eligible[k]):
            quota[k] += 1
        i += 1
    while sum(quota.values()) > n:
        k = max(quota, key=lambda s: quota[s])
        quota[k] -= 1
    rng = random.Random(seed)
    return {k: set(rng.sample(v, min(quota[k], len(v)))) for k, v in eligible.items() if quota[k] > 0}


def iter_schemas(chosen: dict[str, set[str]]) -> Iterator[tuple[tuple[str, str], dict[str, Any]]]:
    """``((split, id), {"schema", "tests": [[valid, text], ...]})`` for the chosen schemas, file order."""
    for split in sorted(chosen):
        picked = chosen[split]
        d = MASKBENCH_DIR / split
        with (d / "schemas.jsonl").open(encoding="utf-8") as fs, (d / "tests.jsonl").open(encoding="utf-8") as ft:
            for ls, lt in zip(fs, ft, strict=True):
                srow = json.loads(ls)
                if srow["id"] not in picked:
                    continue
                trow = json.loads(lt)
                assert trow["id"] == srow["id"]
                tests = [[bool(t["valid"]), json.dumps(t["data"])] for t in trow["tests"]]
                yield (split, srow["id"]), {"schema": srow["schema"], "tests": tests}


def expected_key(split: str, sid: str) -> str:
    """The file name llguidance's ``expected_maskbench.json`` uses for a schema."""
    return f"{sid}.json" if split.startswith("BFCL") or split == "JME" else f"{split}---{sid}.json"


# ----------------------------------------------------------------------------------------------
# Worker side: one engine per worker process
# ----------------------------------------------------------------------------------------------
_STATE: dict[str, Any] = {}


def init_worker(arg: dict[str, Any]) -> None:
    tok = load_tok(arg["tokenizer"])
    _STATE["tok"] = tok
    _STATE["mask_every"] = int(arg.get("mask_every", 1))
    name = arg["engine"]
    _STATE["engine"] = name
    if name == "logitgate":
        _STATE["eng"] = LogitgateAdapter(tok, **arg.get("options", {}))
        return
    from transformers import AutoTokenizer

    import engines  # bench/engines.py

    eng = engines.ENGINES[name]()
    eng.setup(AutoTokenizer.from_pretrained(str(tokenizer_dir(arg["tokenizer"]))))
    _STATE["eng"] = eng


def _compile(schema: Any) -> Any:
    eng = _STATE["eng"]
    if _STATE["engine"] == "logitgate":
        return eng.compile(schema)
    return eng.compile("json_schema", json.dumps(schema))


def run_schema(payload: dict[str, Any]) -> dict[str, Any]:
    eng = _STATE["eng"]
    tok = _STATE["tok"]
    try:
        compiled = _compile(payload["schema"])
    except Exception as exc:
        if _STATE["engine"] == "logitgate":
            status, detail = classify_compile_error(exc)
            internal = not isinstance(exc, eng.lg.LogitgateError)
        else:
            status, detail = peer_compile_outcome(exc)
            internal = False
        return {"status": status, "detail": detail, "internal": internal}
    counts: Counter[str] = Counter()
    bad: list[str] = []
    mismatch: list[str] = []
    for valid, text in payload["tests"]:
        ids = tok.encode(text)
        if tok.spell(ids) != text.encode("utf-8"):
            counts["tokenize_mismatch"] += 1
            continue
        try:
            v = check_ids(eng, compiled, ids, _STATE["mask_every"])
        except Exception as exc:
            return {"status": RUNTIME_ERROR, "detail": f"{type(exc).__name__}: {exc}"[:300], "tests": dict(counts)}
        if v.mask_mismatch:
            mismatch.append(v.mask_mismatch)
        if v.accepted == valid:
            counts["pass"] += 1
        else:
            kind = "over" if valid else "under"
            counts[kind] += 1
            if len(bad) < 3:
                bad.append(f"{kind}: {text[:300]}")
    status = UNDER if counts["under"] else OVER if counts["over"] else PASSED
    out: dict[str, Any] = {"status": status, "tests": dict(counts)}
    if bad:
        out["examples"] = bad
    if mismatch:
        out["mask_mismatch"] = mismatch[:3]
    return out


# ----------------------------------------------------------------------------------------------
# Driver and report
# ----------------------------------------------------------------------------------------------
def run_maskbench(
    chosen: dict[str, set[str]],
    *,
    engines: tuple[str, ...] = ENGINE_NAMES,
    tokenizer: str = "smollm2",
    jobs: int = 2,
    timeout: float = 30.0,
    mask_every: int = 1,
    options: dict[str, Any] | None = None,
    progress: bool = False,
) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    """``{engine: {(split, id): result}}``; engines run one after another, each in its own workers."""
    from tests.conformance.common import progress_printer, run_pool

    cases = list(iter_schemas(chosen))
    out: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for name in engines:
        init = (
            "tests.conformance.maskbench:init_worker",
            {"engine": name, "tokenizer": tokenizer, "mask_every": mask_every, "options": options or {}},
        )
        cb = progress_printer(len(cases), f"maskbench/{name}") if progress else None
        try:
            out[name] = dict(
                run_pool(
                    "tests.conformance.maskbench:run_schema", cases, jobs=jobs, timeout=timeout, progress=cb, init=init
                )
            )
        except RuntimeError as exc:  # the engine cannot start here (not installed, no tokenizer): skip it
            if name == "logitgate":
                raise
            print(f"[maskbench] skipping {name}: {exc}", file=sys.stderr)
    return out


def summarize(results: dict[str, dict[tuple[str, str], dict[str, Any]]]) -> dict[str, Any]:
    """``{engine: {split: {outcome: n}}}`` plus llguidance's published expectation on the same schemas."""
    table: dict[str, Any] = {}
    for name, res in results.items():
        per: dict[str, Counter[str]] = {}
        for (split, _sid), r in res.items():
            per.setdefault(split, Counter())[r["status"]] += 1
        table[name] = {k: dict(v) for k, v in sorted(per.items())}
    if LLG_EXPECTED.is_file() and results:
        expected = json.loads(LLG_EXPECTED.read_text(encoding="utf-8"))
        keys = next(iter(results.values())).keys()
        per_exp: dict[str, Counter[str]] = {}
        for split, sid in keys:
            e = expected.get(expected_key(split, sid))
            status = "missing" if e is None else PASSED if not e else next(iter(e))
            per_exp.setdefault(split, Counter())[status] += 1
        table["llguidance_expected"] = {k: dict(v) for k, v in sorted(per_exp.items())}
    return table


def render_markdown(table: dict[str, Any]) -> str:
    """One row per split; per engine: pass, over, under, unsup, err (= compile/runtime error, timeout, crash;
    broken down in the totals)."""
    engines = [e for e in table if e != "llguidance_expected"]
    all_splits = sorted({s for e in engines for s in table[e]})
    cols = ("pass", "over", "under", "unsup", "err")

    def cells(c: dict[str, int]) -> list[str]:
        err = c.get(COMPILE_ERROR, 0) + c.get(RUNTIME_ERROR, 0) + c.get("timeout", 0) + c.get("crash", 0)
        return [str(c.get(PASSED, 0)), str(c.get(OVER, 0)), str(c.get(UNDER, 0)), str(c.get(UNSUPPORTED, 0)), str(err)]

    head = ["split", "n"] + [f"{e} {c}" for e in engines for c in cols]
    has_exp = "llguidance_expected" in table
    if has_exp:
        head.append("llg published pass")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    totals: dict[str, Counter[str]] = {e: Counter() for e in engines}
    exp_total = 0
    for split in all_splits:
        row = [split, str(sum(table[engines[0]].get(split, {}).values()))]
        for e in engines:
            c = table[e].get(split, {})
            totals[e].update(c)
            row += cells(c)
        if has_exp:
            p = table["llguidance_expected"].get(split, {}).get(PASSED, 0)
            exp_total += p
            row.append(str(p))
        lines.append("| " + " | ".join(row) + " |")
    row = ["**total**", str(sum(totals[engines[0]].values()))]
    for e in engines:
        row += [f"**{x}**" for x in cells(totals[e])]
    if has_exp:
        row.append(str(exp_total))
    lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def totals(table: dict[str, Any]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for e, per in table.items():
        c: Counter[str] = Counter()
        for v in per.values():
            c.update(v)
        out[e] = dict(c)
    return out
