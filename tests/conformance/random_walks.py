"""Random walks through the JSON Schema masks, validated by an independent validator (``jsonschema``).

For each schema that compiles, a walk fills the mask, checks that no special id (other than EOS) is ever
allowed, and picks uniformly among the allowed ids (EOS included) until EOS or a length cap. At the cap
the walk is finished along a shortest completion computed by the reference recognizer
(``tests/reference``, which reads only the grammar IR) using single-byte tokens; when that is not
possible the walk is counted ``truncated`` and not validated. Every completed output must be UTF-8,
``json.loads`` and validate against the schema with format checking on.

Counts per run: ``completed``, ``valid``; bugs: ``invalid`` (validation failure: an under-constraint),
``not_json``, ``stuck`` (no id allowed, EOS not allowed), ``special`` (a special id allowed),
``mask_mismatch`` (an allowed id refused by ``accept``); neutral: ``truncated``, ``validator_error``
(jsonschema itself could not evaluate the schema, e.g. a remote ``$ref``), ``duplicate_keys`` (noted:
JSON Schema validates the last duplicate only).
"""

from __future__ import annotations

import datetime
import json
import random
import re
import time
import zlib
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from tests.conformance.common import LogitgateAdapter, classify_compile_error, load_tok

# ------------------------------------------------------------------------------------------------
# Format checking: jsonschema's FormatChecker lacks some formats without optional packages;
# strict stand-ins are registered for those (RFC 3339 / ISO 8601 / RFC 1123 / RFC 3986 shapes).
# ------------------------------------------------------------------------------------------------
_DATE_TIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$", re.ASCII
)
_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$", re.ASCII)
_DURATION = re.compile(r"^P(?!$)((\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?|\d+W)$", re.ASCII)
_HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$", re.ASCII)
_URI_CHARS = re.compile(r"^([A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*$", re.ASCII)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$", re.ASCII)


def _is_date_time(s: object) -> bool:
    if not isinstance(s, str):
        return True
    m = _DATE_TIME.match(s)
    if not m:
        return False
    try:
        datetime.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return False
    hh, mm, ss = int(m[4]), int(m[5]), int(m[6])
    if hh > 23 or mm > 59 or ss > 60:
        return False
    return not (m[9] is not None and (int(m[9]) > 23 or int(m[10]) > 59))


def _is_date(s: object) -> bool:
    if not isinstance(s, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", s, re.ASCII):
        return False
    try:
        datetime.date(int(s[:4]), int(s[5:7]), int(s[8:10]))
    except ValueError:
        return False
    return True


def _is_time(s: object) -> bool:
    if not isinstance(s, str):
        return True
    m = _TIME.match(s)
    if not m:
        return False
    if int(m[1]) > 23 or int(m[2]) > 59 or int(m[3]) > 60:
        return False
    return not (m[6] is not None and (int(m[6]) > 23 or int(m[7]) > 59))


def _is_duration(s: object) -> bool:
    return not isinstance(s, str) or bool(_DURATION.match(s))


def _is_hostname(s: object) -> bool:
    if not isinstance(s, str):
        return True
    name = s[:-1] if s.endswith(".") else s
    return 0 < len(name) <= 253 and all(_HOST_LABEL.match(label) for label in name.split("."))


def _is_uri_reference(s: object) -> bool:
    if not isinstance(s, str):
        return True
    if not _URI_CHARS.match(s):
        return False
    try:
        urlsplit(s)
    except ValueError:
        return False
    return True


def _is_uri(s: object) -> bool:
    if not isinstance(s, str):
        return True
    if not _is_uri_reference(s):
        return False
    scheme, colon, _rest = s.partition(":")
    return bool(colon) and bool(_SCHEME.match(scheme))


def format_checker(base: Any = None) -> Any:
    """The draft's own format checker (``FormatChecker()`` without arguments mixes every draft's checkers,
    e.g. draft 3's ``time`` = ``%H:%M:%S``) plus stand-ins for the formats it cannot check here."""
    from jsonschema import Draft202012Validator, FormatChecker

    src = base if base is not None else Draft202012Validator.FORMAT_CHECKER
    fc = FormatChecker(formats=())
    fc.checkers = dict(src.checkers)
    extra = {
        "date-time": _is_date_time,
        "date": _is_date,
        "time": _is_time,
        "duration": _is_duration,
        "hostname": _is_hostname,
        "uri": _is_uri,
        "uri-reference": _is_uri_reference,
    }
    for name, fn in extra.items():
        if name not in fc.checkers:
            fc.checks(name)(fn)
    return fc


def validate(schema: Any, value: Any) -> list[str]:
    """Validation errors (messages) of ``value`` against ``schema``, with the schema's own draft."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft202012Validator) if isinstance(schema, dict) else Draft202012Validator
    validator = cls(schema, format_checker=format_checker(getattr(cls, "FORMAT_CHECKER", None)))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"[:300] for e in validator.iter_errors(value)]


# ------------------------------------------------------------------------------------------------
# Worker side
# ------------------------------------------------------------------------------------------------
_STATE: dict[str, Any] = {}


def init_worker(arg: dict[str, Any]) -> None:
    tok = load_tok(arg.get("tokenizer", "smollm2"))
    _STATE["eng"] = LogitgateAdapter(tok, **arg.get("options", {}))
    _STATE["cfg"] = arg
    vocab = tok.vocab
    _STATE["single_byte"] = {}
    for i in range(vocab.size):
        tb = vocab.token_bytes(i)
        if tb is not None and len(tb) == 1 and i not in vocab.special_ids and tb[0] not in _STATE["single_byte"]:
            _STATE["single_byte"][tb[0]] = i


def _finish(compiled: Any, m: Any, text: bytes, deadline: float) -> tuple[bytes, bool, str]:
    """Completes ``text`` along the reference's shortest completion with single-byte tokens."""
    from tests.differential.walks import shortest_completion_first_byte
    from tests.reference.recognizer import Reference

    eng: LogitgateAdapter = _STATE["eng"]
    ref = _STATE.get("ref")
    if ref is None:  # built on first need, once per schema (run_schema resets it)
        ref = _STATE["ref"] = Reference(compiled.grammar)
    state = ref.advance(ref.start(), text)
    if state is None:
        return text, False, "reference rejects the prefix the masks allowed"
    for _ in range(20_000):
        if time.monotonic() > deadline:
            return text, False, "finish over time"
        if ref.is_complete(state):
            eng.fill(m)
            if any(eng.allowed(e) for e in eng.eos_ids):
                return text, True, ""
            # complete for the reference but not for the masks: keep going only if bytes remain
        first = shortest_completion_first_byte(ref, state)
        if first is None:
            return text, False, "no completion"
        tid = _STATE["single_byte"].get(first)
        if tid is None or not eng.accept(m, tid):
            return text, False, f"byte {first:#x} not accepted"
        text += bytes((first,))
        state = ref.advance(state, bytes((first,)))
        if state is None:
            return text, False, "reference has no state after its own completion byte"
    return text, False, "completion too long"


def _walk(
    compiled: Any,
    rng: random.Random,
    special: np.ndarray,
    eos: np.ndarray,
    width: int,
    deadline: float,
    counts: Counter[str],
    bugs: list[str],
) -> tuple[bytes, bool]:
    """One walk; returns (output, completed). Bug observations go to ``counts``/``bugs``."""
    from logitgate.masks import mask_to_bool

    eng: LogitgateAdapter = _STATE["eng"]
    tok = eng.tok
    cfg = _STATE["cfg"]
    m = eng.matcher(compiled)
    text = b""
    done = False
    for _step in range(int(cfg.get("max_tokens", 64))):
        eng.fill(m)
        counts["steps"] += 1
        allowed = mask_to_bool(eng.mask[0], width)
        if special.size and allowed[special].any():
            counts["special"] += 1
            bugs.append(f"special id allowed after {text[:200]!r}: {special[allowed[special]][:5].tolist()}")
        ids = np.flatnonzero(allowed)
        if ids.size == 0:
            counts["stuck"] += 1
            bugs.append(f"stuck (nothing allowed) after {text[:300]!r}")
            break
        tid = int(ids[rng.randrange(ids.size)])
        if tid in eos:
            done = True
            break
        if not eng.accept(m, tid):
            counts["mask_mismatch"] += 1
            bugs.append(f"allowed token {tid} refused after {text[:200]!r}")
            break
        text += tok.vocab.token_bytes(tid) or b""
    else:
        try:
            text, done, why = _finish(compiled, m, text, deadline)
        except Exception as exc:
            done, why = False, f"{type(exc).__name__}: {exc}"
        if not done:
            counts["truncated"] += 1
            if why.startswith("reference rejects") or why.startswith("byte"):
                bugs.append(f"finish: {why}: {text[:200]!r}")
                counts["finish_disagreement"] += 1
    return text, done


def run_schema(payload: dict[str, Any]) -> dict[str, Any]:
    """Compiles and walks one schema; result counts plus the outputs that failed."""

    eng: LogitgateAdapter = _STATE["eng"]
    cfg = _STATE["cfg"]
    tok = eng.tok
    schema = payload["schema"]
    _STATE["ref"] = None
    try:
        compiled = eng.compile(schema)
    except Exception as exc:
        status, detail = classify_compile_error(exc)
        return {"status": status, "detail": detail}
    rng = random.Random(zlib.crc32(payload["name"].encode()) ^ int(cfg.get("seed", 0)))
    width = tok.vocab.size
    special = np.array(tok.special_non_eos, dtype=np.int64)
    eos = np.array(tok.eos, dtype=np.int64)
    counts: Counter[str] = Counter()
    bugs: list[str] = []
    notes: list[str] = []
    deadline = time.monotonic() + float(cfg.get("walk_budget", 20.0))
    for _w in range(int(cfg.get("walks", 2))):
        try:
            text, done = _walk(compiled, rng, special, eos, width, deadline, counts, bugs)
        except Exception as exc:  # a matcher limit (e.g. LimitExceeded): counted, not a validity verdict
            counts["runtime_error"] += 1
            bugs.append(f"runtime error (not counted as a bug): {type(exc).__name__}: {exc}"[:300])
            continue
        if not done:
            continue
        counts["completed"] += 1
        try:
            pairs_seen: list[bool] = []

            def hook(pairs: list[tuple[str, Any]], seen: list[bool] = pairs_seen) -> dict[str, Any]:
                if len({k for k, _ in pairs}) != len(pairs):
                    seen.append(True)
                return dict(pairs)

            value = json.loads(text.decode("utf-8"), object_pairs_hook=hook)
        except (UnicodeDecodeError, ValueError) as exc:
            counts["not_json"] += 1
            bugs.append(f"not JSON ({exc}): {text[:300]!r}")
            continue
        if pairs_seen:
            counts["duplicate_keys"] += 1
            notes.append(f"duplicate keys: {text[:300]!r}")
        try:
            errors = validate(schema, value)
        except Exception as exc:
            counts["validator_error"] += 1
            _STATE.setdefault("validator_errors", []).append(f"{type(exc).__name__}: {exc}"[:200])
            continue
        if errors:
            counts["invalid"] += 1
            bugs.append(f"invalid: {errors[0]}: {text[:300]!r}")
        else:
            counts["valid"] += 1
    bug_kinds = ("invalid", "not_json", "stuck", "special", "mask_mismatch", "finish_disagreement")
    status = "bug" if any(counts[k] for k in bug_kinds) else "ok"
    return {"status": status, "counts": dict(counts), "bugs": bugs[:5], "notes": notes[:3]}


# ------------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------------
def run_walks(
    n_schemas: int = 500,
    *,
    tokenizer: str = "smollm2",
    walks: int = 2,
    max_tokens: int = 64,
    seed: int = 0,
    jobs: int = 2,
    timeout: float = 60.0,
    progress: bool = False,
) -> dict[str, Any]:
    """Walks ``n_schemas`` MaskBench schemas that compile (drawn stratified, then shuffled, with ``seed``;
    schemas that do not compile are skipped and counted)."""
    from tests.conformance.common import progress_printer, run_pool
    from tests.conformance.maskbench import iter_schemas, stratified_sample

    chosen = stratified_sample(min(4 * n_schemas, 100_000), seed=seed + 1)
    items = [
        (f"{split}/{sid}", {"name": f"{split}/{sid}", "schema": p["schema"]})
        for (split, sid), p in iter_schemas(chosen)
    ]
    random.Random(seed).shuffle(items)
    walked = 0

    def tasks() -> Any:
        for item in items:
            if walked >= n_schemas:
                return
            yield item

    init = (
        "tests.conformance.random_walks:init_worker",
        {"tokenizer": tokenizer, "walks": walks, "max_tokens": max_tokens, "seed": seed, "walk_budget": timeout / 2},
    )
    cb = progress_printer(n_schemas, f"walks/{tokenizer}") if progress else None
    totals: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    bugs: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    for key, res in run_pool(
        "tests.conformance.random_walks:run_schema", tasks(), jobs=jobs, timeout=timeout, progress=cb, init=init
    ):
        if walked >= n_schemas:  # a result prefetched past the quota
            continue
        statuses[res["status"]] += 1
        if res["status"] in ("ok", "bug"):
            walked += 1
            totals.update(res.get("counts", {}))
        if res.get("notes"):
            notes[key] = res["notes"]
        if res.get("bugs"):
            bugs[key] = res["bugs"]
        elif res["status"] in ("timeout", "crash"):
            bugs[key] = [res.get("detail", res["status"])]
    return {
        "schemas_walked": walked,
        "schema_status": dict(statuses),
        "walks": dict(totals),
        "bugs": bugs,
        "notes": notes,
        "tokenizer": tokenizer,
        "walks_per_schema": walks,
        "max_tokens": max_tokens,
        "seed": seed,
    }
