"""SGLang integration tests: run by `make test-sglang` in .venv-sglang (each module sets
``pytestmark = pytest.mark.sglang``, which every other run excludes). A missing SGLang fails
these tests, never skips them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The embedded SmolLM2 as a transformers checkpoint (converted once into logitgate's cache)."""
    from logitgate.models import model_folder

    return model_folder(quiet=True)


@pytest.fixture(scope="session")
def tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir))


def pytest_configure(config: pytest.Config) -> None:
    # SGLang's imports reach deprecated torch APIs (torch.jit) and warn; not ours to fix.
    for module in ("torch", "sglang", "triton", "xgrammar"):
        config.addinivalue_line("filterwarnings", f"ignore::DeprecationWarning:{module}.*")
        config.addinivalue_line("filterwarnings", f"ignore::FutureWarning:{module}.*")
        config.addinivalue_line("filterwarnings", f"ignore::UserWarning:{module}.*")
