"""vLLM integration tests: run by `make test-vllm` in .venv-vllm (each module sets
``pytestmark = pytest.mark.vllm``, which every other run excludes). vLLM itself runs in child
processes (its engine core is spawned and must not share the test process); a missing vLLM
fails these tests, never skips them."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The embedded SmolLM2 as a transformers checkpoint (converted once into logitgate's cache)."""
    from logitgate.models import model_folder

    return model_folder(quiet=True)
