"""JSON-Schema-Test-Suite (draft 2020-12) conformance of the JSON Schema frontend, token by token.

For every test case (one schema) the schema is compiled; for every test the instance is serialized
with ``json.dumps(data)`` and encoded with the chosen tokenizer. A valid instance must be accepted
token by token with EOS allowed at the end; an invalid one must be rejected somewhere (a token not
accepted, or EOS not allowed at the end).

Per test: ``pass``, ``over`` (valid rejected), ``under`` (invalid accepted), ``unsupported``
(``UnsupportedSchemaError``), ``compile_error`` (any other compile failure, e.g. remote ``$ref``),
``tokenize_mismatch`` (the tokenizer cannot spell the text; not scored).
Per case: ``passed`` (compiled, every test right), ``under`` (some invalid accepted; takes precedence),
``over`` (some valid rejected), ``unsupported``, ``compile_error``, ``timeout``, ``crash``.

llguidance's published results (``expected_json_schema_test_suite.json``) are per *test*
(file -> case description -> test description -> status), so the comparison is given in both units:
tests (llguidance's) and cases (the issue's).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
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
)

SUITE_DIR = CORPORA_DIR / "json-schema-test-suite" / "tests" / "draft2020-12"
LLG_EXPECTED = CORPORA_DIR / "llguidance" / "expected_json_schema_test_suite.json"
SECTIONS = ("core", "optional", "format")
_SECTION_DIRS = {"core": "", "optional": "optional", "format": "optional/format"}
# llguidance's per-test statuses, and ours mapped onto them.
LLG_STATUS = {
    "pass": "pass",
    "over": "false_negative",
    "under": "false_positive",
    "unsupported": "skip_compile",
    "compile_error": "compile_error",
}


def suite_files(section: str) -> list[Path]:
    folder = SUITE_DIR / _SECTION_DIRS[section] if _SECTION_DIRS[section] else SUITE_DIR
    return sorted(folder.glob("*.json"))


def file_key(path: Path) -> str:
    """``"allOf"`` / ``"optional/bignum"`` / ``"optional/format/date"``: llguidance's file keys."""
    return path.relative_to(SUITE_DIR).with_suffix("").as_posix()


def iter_cases(sections: tuple[str, ...] = SECTIONS, only: set[str] | None = None) -> Iterator[tuple[Any, Any]]:
    """``((section, file_key, index), payload)`` for every case, in file order."""
    for section in sections:
        for path in suite_files(section):
            fk = file_key(path)
            if only and fk not in only and path.stem not in only:
                continue
            for i, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
                payload = {"description": case["description"], "schema": case["schema"], "tests": case["tests"]}
                yield (section, fk, i), payload


# ----------------------------------------------------------------------------------------------
# Worker side
# ----------------------------------------------------------------------------------------------
_STATE: dict[str, Any] = {}


def init_worker(arg: dict[str, Any]) -> None:
    _STATE["mask_every"] = int(arg.get("mask_every", 1))
    _STATE["engine"] = engine = arg.get("engine", "logitgate")
    if engine == "logitgate":
        tok = load_tok(arg.get("tokenizer", "bytes"))
        _STATE["eng"] = LogitgateAdapter(tok, **arg.get("options", {}))
        _STATE["tok"] = tok
        return
    from tests.conformance import maskbench  # a peer, set up through bench/engines.py as in MaskBench

    maskbench.init_worker({**arg, "engine": engine})
    _STATE["eng"] = maskbench._STATE["eng"]
    _STATE["tok"] = maskbench._STATE["tok"]


def run_case(payload: dict[str, Any]) -> dict[str, Any]:
    """One test-suite case; see the module docstring for the statuses."""
    if "eng" not in _STATE:
        init_worker({})
    eng = _STATE["eng"]
    tok = _STATE["tok"]
    tests = payload["tests"]
    is_lg = _STATE["engine"] == "logitgate"
    try:
        compiled = (
            eng.compile(payload["schema"]) if is_lg else eng.compile("json_schema", json.dumps(payload["schema"]))
        )
    except Exception as exc:
        if is_lg:
            status, detail = classify_compile_error(exc)
        else:
            status, detail = peer_compile_outcome(exc)
        return {
            "status": status,
            "detail": detail,
            "internal": is_lg and not isinstance(exc, eng.lg.LogitgateError),
            "tests": [{"description": t["description"], "valid": t["valid"], "result": status} for t in tests],
        }
    results = []
    mismatches: list[str] = []
    runtime_errors: list[str] = []
    for t in tests:
        text = json.dumps(t["data"])
        ids = tok.encode(text)
        if tok.spell(ids) != text.encode("utf-8"):
            results.append({"description": t["description"], "valid": t["valid"], "result": "tokenize_mismatch"})
            continue
        try:
            v = check_ids(eng, compiled, ids, _STATE["mask_every"])
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"[:300]
            results.append({"description": t["description"], "valid": t["valid"], "result": RUNTIME_ERROR})
            runtime_errors.append(detail)
            continue
        if v.mask_mismatch:
            mismatches.append(f"{text[:80]}: {v.mask_mismatch}")
        if v.accepted == bool(t["valid"]):
            res = "pass"
        else:
            res = "over" if t["valid"] else "under"
        row = {"description": t["description"], "valid": t["valid"], "result": res}
        if res != "pass":
            row["text"] = text[:200]
        results.append(row)
    counts = Counter(r["result"] for r in results)
    status = UNDER if counts["under"] else OVER if counts["over"] else RUNTIME_ERROR if runtime_errors else PASSED
    out: dict[str, Any] = {"status": status, "tests": results}
    if runtime_errors:
        out["detail"] = runtime_errors[0]
    if mismatches:
        out["mask_mismatch"] = mismatches[:5]
    return out


# ----------------------------------------------------------------------------------------------
# Reporting
# ----------------------------------------------------------------------------------------------
def summarize(results: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any]:
    """Counts per file and per section, in cases and in tests."""
    files: dict[str, dict[str, Any]] = {}
    sections: dict[str, dict[str, Any]] = {}
    for (section, fk, _i), res in sorted(results.items()):
        for bucket in (files.setdefault(fk, {"section": section}), sections.setdefault(section, {})):
            cases = bucket.setdefault("cases", Counter())
            tests = bucket.setdefault("tests", Counter())
            cases[res["status"]] += 1
            for t in res.get("tests", []):
                tests[t["result"]] += 1
            if res.get("mask_mismatch"):
                bucket["mask_mismatch"] = bucket.get("mask_mismatch", 0) + 1
            if res.get("internal"):
                bucket["internal_errors"] = bucket.get("internal_errors", 0) + 1
            tests_ = res.get("tests", [])
            if res["status"] == COMPILE_ERROR and tests_ and not any(t["valid"] for t in tests_):
                # every instance is invalid: the language is empty, and a SchemaError is the documented verdict
                bucket["compile_error_all_invalid"] = bucket.get("compile_error_all_invalid", 0) + 1
    for bucket in list(files.values()) + list(sections.values()):
        bucket["cases"] = dict(bucket["cases"])
        bucket["tests"] = dict(bucket["tests"])
    return {"files": files, "sections": sections}


def llguidance_comparison(results: dict[tuple[str, str, int], dict[str, Any]]) -> dict[str, Any]:
    """Per section: llguidance's counts (tests and cases) next to ours, on all of its entries and on
    the tests present in both snapshots (matched by file, case description, test description)."""
    if not LLG_EXPECTED.is_file():
        return {}
    llg = json.loads(LLG_EXPECTED.read_text(encoding="utf-8"))["draft2020-12"]

    def section_of(fk: str) -> str:
        return "format" if fk.startswith("optional/format/") else "optional" if fk.startswith("optional/") else "core"

    ours_by_key: dict[tuple[str, str, str], str] = {}
    for (_s, fk, _i), res in results.items():
        case_desc = res.get("description", "")
        for t in res.get("tests", []):
            ours_by_key[(fk, case_desc, t["description"])] = t["result"]
    out: dict[str, Any] = {}
    for fk, cases in llg.items():
        sec = out.setdefault(
            section_of(fk),
            {
                "llg_tests": Counter(),
                "llg_cases": Counter(),
                "matched_tests": 0,
                "llg_pass_matched": 0,
                "ours_pass_matched": 0,
            },
        )
        for case_desc, tests in cases.items():
            statuses = set(tests.values())
            if statuses == {"pass"}:
                sec["llg_cases"]["passed"] += 1
            elif "false_positive" in statuses:
                sec["llg_cases"]["under"] += 1
            elif "false_negative" in statuses:
                sec["llg_cases"]["over"] += 1
            elif statuses & {"skip_compile"}:
                sec["llg_cases"]["unsupported"] += 1
            else:
                sec["llg_cases"]["compile_error"] += 1
            for test_desc, st in tests.items():
                sec["llg_tests"][st] += 1
                ours = ours_by_key.get((fk, case_desc, test_desc))
                if ours is not None:
                    sec["matched_tests"] += 1
                    sec["llg_pass_matched"] += st == "pass"
                    sec["ours_pass_matched"] += ours == "pass"
    per_file = {fk: sum(st == "pass" for tests in cases.values() for st in tests.values()) for fk, cases in llg.items()}
    for sec in out.values():
        sec["llg_tests"] = dict(sec["llg_tests"])
        sec["llg_cases"] = dict(sec["llg_cases"])
    out["_per_file_llg_pass"] = per_file
    return out


def render_markdown(summary: dict[str, Any], comparison: dict[str, Any], per_file: bool = True) -> str:
    cols = (PASSED, OVER, UNDER, UNSUPPORTED, COMPILE_ERROR, RUNTIME_ERROR, "timeout", "crash")
    lines = []
    llg_file = comparison.get("_per_file_llg_pass", {})
    comparison = {k: v for k, v in comparison.items() if not k.startswith("_")}
    if per_file:
        lines += [
            "| file | cases | passed | over | under | unsupported | compile_error | runtime_error | timeout | crash "
            "| tests pass/total | llguidance tests pass |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for fk, b in summary["files"].items():
            c = b["cases"]
            t = b["tests"]
            lines.append(
                f"| {fk} | {sum(c.values())} | "
                + " | ".join(str(c.get(k, 0)) for k in cols)
                + f" | {t.get('pass', 0)}/{sum(t.values())} | {llg_file.get(fk, 'n/a')} |"
            )
        lines.append("")
    lines += [
        "| section | cases | passed | over | under | unsupported | compile_error | runtime_error | timeout | crash "
        "| tests: pass | over | under | total | llguidance tests: pass / total | llguidance cases passed "
        "| matched tests: ours pass vs llguidance pass |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    total_c: Counter[str] = Counter()
    total_t: Counter[str] = Counter()
    for sec, b in summary["sections"].items():
        c, t = b["cases"], b["tests"]
        total_c.update(c)
        total_t.update(t)
        cmp = comparison.get(sec)
        llg_t = f"{cmp['llg_tests'].get('pass', 0)} / {sum(cmp['llg_tests'].values())}" if cmp else "n/a"
        llg_c = f"{cmp['llg_cases'].get('passed', 0)} / {sum(cmp['llg_cases'].values())}" if cmp else "n/a"
        matched = (
            f"{cmp['ours_pass_matched']} vs {cmp['llg_pass_matched']} (of {cmp['matched_tests']})" if cmp else "n/a"
        )
        lines.append(
            f"| {sec} | {sum(c.values())} | "
            + " | ".join(str(c.get(k, 0)) for k in cols)
            + f" | {t.get('pass', 0)} | {t.get('over', 0)} | {t.get('under', 0)} | {sum(t.values())}"
            f" | {llg_t} | {llg_c} | {matched} |"
        )
    llg_all_t = sum(v["llg_tests"].get("pass", 0) for v in comparison.values())
    llg_all_n = sum(sum(v["llg_tests"].values()) for v in comparison.values())
    llg_all_c = sum(v["llg_cases"].get("passed", 0) for v in comparison.values())
    m_ours = sum(v["ours_pass_matched"] for v in comparison.values())
    m_llg = sum(v["llg_pass_matched"] for v in comparison.values())
    m_n = sum(v["matched_tests"] for v in comparison.values())
    lines.append(
        f"| **total** | {sum(total_c.values())} | "
        + " | ".join(str(total_c.get(k, 0)) for k in cols)
        + f" | {total_t.get('pass', 0)} | {total_t.get('over', 0)} | {total_t.get('under', 0)}"
        f" | {sum(total_t.values())} | {llg_all_t} / {llg_all_n} | {llg_all_c} | {m_ours} vs {m_llg} (of {m_n}) |"
    )
    return "\n".join(lines)


def failures(results: dict[tuple[str, str, int], dict[str, Any]], kind: str = "under") -> list[str]:
    """One line per test with result ``kind`` (file, case, test, text)."""
    out = []
    for (_s, fk, i), res in sorted(results.items()):
        for t in res.get("tests", []):
            if t["result"] == kind:
                out.append(f"{fk}[{i}] {res.get('description', '')!r} / {t['description']!r}: {t.get('text', '')}")
    return out


def run_jsts(
    sections: tuple[str, ...] = SECTIONS,
    *,
    tokenizer: str = "bytes",
    jobs: int = 2,
    timeout: float = 60.0,
    mask_every: int = 1,
    only: set[str] | None = None,
    options: dict[str, Any] | None = None,
    progress: bool = False,
    engine: str = "logitgate",
) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Runs the suite in worker processes; ``{(section, file_key, index): case result}``.
    ``engine`` may be a peer (xgrammar, llguidance; needs a real tokenizer), run with the same ids."""
    from tests.conformance.common import progress_printer, run_pool

    cases = list(iter_cases(sections, only))
    descriptions = {key: payload["description"] for key, payload in cases}
    init = (
        "tests.conformance.jsts:init_worker",
        {"tokenizer": tokenizer, "mask_every": mask_every, "options": options or {}, "engine": engine},
    )
    cb = progress_printer(len(cases), f"jsts/{engine}/{tokenizer}") if progress else None
    results: dict[tuple[str, str, int], dict[str, Any]] = {}
    for key, res in run_pool(
        "tests.conformance.jsts:run_case", cases, jobs=jobs, timeout=timeout, progress=cb, init=init
    ):
        res["description"] = descriptions[key]
        results[key] = res
    return results
