"""Fixtures of the JSON Schema frontend's layer tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tests.unit.token_level import byte_vocabulary

import logitgate as lg
from logitgate.frontends.json_schema import driver
from logitgate.limits import DEFAULT_LIMITS, Limits


@pytest.fixture
def new_lowering() -> Callable[..., driver.Lowering]:
    """A factory of empty lowerings under the default options (``limits`` may be given), for
    tests that drive one layer (a string emitter's length product, say) directly."""

    def make(limits: Limits = DEFAULT_LIMITS) -> driver.Lowering:
        return driver.Lowering(
            {},
            limits=limits,
            whitespace="flexible",
            max_whitespace=None,
            property_order="schema",
            strict=False,
            lenient=False,
            oneof="exact",
        )

    return make


@pytest.fixture(scope="module")
def compiler() -> lg.Compiler:
    """A compiler over the byte vocabulary (tests.unit.token_level.byte_vocabulary)."""
    return lg.Compiler(byte_vocabulary())
