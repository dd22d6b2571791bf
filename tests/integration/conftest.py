"""Fixtures shared by the integration tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def smol() -> tuple[Any, Any]:
    """The embedded SmolLM2-135M-Instruct model and tokenizer, loaded once per session."""
    from logitgate.models import default_gguf_path, load_default_model

    try:
        default_gguf_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return load_default_model(quiet=True)
