"""Fixed caps of the JSON Schema frontend (json_schema/caps.py) are reported under their own
names, not under a Limits field they are not."""

from __future__ import annotations

import pytest

import logitgate as lg
from logitgate.frontends.json_schema import driver, schema_to_grammar
from logitgate.frontends.json_schema.caps import SCHEMA_RULES, Cap


def test_schema_rules_cap_is_reported_under_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # (Lowered to 5 here: 200,000 distinct schema sets take minutes.) It was reported as
    # max_automaton_states with that limit's value, which the schema had not reached.
    small = Cap(SCHEMA_RULES.name, 5, SCHEMA_RULES.reason)
    monkeypatch.setattr(driver, "SCHEMA_RULES", small)
    schema = {"type": "object", "properties": {f"p{i}": {"type": "integer", "minimum": i} for i in range(10)}}
    with pytest.raises(lg.LimitExceeded) as e:
        schema_to_grammar(schema, limits=lg.Limits())
    assert (e.value.limit, e.value.value) == ("json_schema_rules", 5)
    monkeypatch.undo()
    schema_to_grammar(schema, limits=lg.Limits())  # under the real cap
