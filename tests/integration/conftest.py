"""The embedded model, loaded once per session for every integration test."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def smol() -> tuple[Any, Any]:
    from logitgate.models import default_gguf_path, load_default_model

    try:
        default_gguf_path()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    return load_default_model(quiet=True)
