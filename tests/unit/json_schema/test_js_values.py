"""JSON value semantics of the JSON Schema frontend (json_schema/values.py): equality and
hashing of JSON values, as enums and value checks use them."""

from __future__ import annotations

import importlib
import json
import pkgutil
from typing import Any

import pytest

import logitgate as lg
from logitgate.frontends.json_schema import schema_to_grammar


def test_long_enum_lowering_compares_values_linearly(monkeypatch: pytest.MonkeyPatch) -> None:
    # Counted, not timed: an enum of n values checked against itself (and intersected with
    # another) one pair at a time made n * n comparisons (4000 strings: 6 s).
    from logitgate.frontends import json_schema as js
    from logitgate.frontends.json_schema import values

    calls = 0
    json_eq = values._json_eq

    def counting(a: Any, b: Any) -> bool:
        nonlocal calls
        calls += 1
        return json_eq(a, b)

    for info in pkgutil.iter_modules(js.__path__):  # every module's own binding of the name
        module = importlib.import_module(f"{js.__name__}.{info.name}")
        if hasattr(module, "_json_eq"):
            monkeypatch.setattr(module, "_json_eq", counting)
    values: list[Any] = [f"v{i}" for i in range(1500)] + list(range(1500)) + [{"k": [i]} for i in range(100)]
    schema_to_grammar({"allOf": [{"enum": values}, {"enum": values[::2]}]}, limits=lg.Limits(), check_empty=False)
    assert calls < len(values)


def test_value_set_membership() -> None:
    from logitgate.frontends.json_schema.caps import _KEY_DEPTH
    from logitgate.frontends.json_schema.values import _ValueSet

    deep: Any = 0
    for _ in range(_KEY_DEPTH + 3):  # past the hash key's depth: compared one by one
        deep = [deep]
    values = [1, 2.5, True, "1", None, [1, [True]], {"k": {"x": 1}}, deep, float("nan")]
    s = _ValueSet(values)
    for v in [1.0, 2.5, True, "1", None, [1.0, [True]], {"k": {"x": 1.0}}, json.loads(json.dumps(deep))]:
        assert v in s, v
    for v in [False, 0, "2.5", [[True], 1], [1, [1]], {"k": {"x": 2}}, {"k": {}}, [deep], float("nan")]:
        assert v not in s, v
