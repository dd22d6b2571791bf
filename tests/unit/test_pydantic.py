"""Pydantic models compile to documents their own validation accepts (frontends/pydantic.py)."""

from __future__ import annotations

import datetime
import decimal
import json
import random
import uuid

import numpy as np
import pytest

import logitgate as lg
from logitgate.masks import mask_to_bool

pydantic = pytest.importorskip("pydantic")

EOS = 256


class Narrowed(pydantic.BaseModel):
    address: pydantic.IPvAnyAddress
    interface: pydantic.IPvAnyInterface
    amount: decimal.Decimal
    ratio: pydantic.condecimal(ge=0, le=10)  # type: ignore[valid-type]
    wait: datetime.timedelta
    at: datetime.datetime
    local: pydantic.NaiveDatetime
    clock: datetime.time
    day: datetime.date
    key: pydantic.UUID4


@pytest.fixture(scope="module")
def byte_vocab() -> lg.Vocabulary:
    return lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"</s>"], eos_ids=[EOS])


@pytest.fixture(scope="module")
def grammar(byte_vocab: lg.Vocabulary) -> lg.CompiledGrammar:
    return lg.Compiler(byte_vocab).compile_pydantic(Narrowed, whitespace="compact", strict=True)


def _accepts(g: lg.CompiledGrammar, text: str) -> bool:
    m = g.matcher()
    return m.accept_bytes(text.encode()) and m.is_complete()


GOOD = {
    "address": "10.0.0.1",
    "interface": "::1/128",
    "amount": "-1.5e3",
    "ratio": 2.5,
    "wait": "P3DT4H",
    "at": "2020-12-31T23:59:59Z",
    "local": "2020-12-31T23:59:59",
    "clock": "23:59:59.5+01:00",
    "day": "2024-02-29",
    "key": str(uuid.UUID(int=7, version=4)),
}


def _doc(**change: object) -> str:
    return json.dumps({**GOOD, **change}, separators=(",", ":"))


def test_a_valid_document_is_accepted(grammar: lg.CompiledGrammar) -> None:
    Narrowed.model_validate_json(_doc())
    assert _accepts(grammar, _doc())


# (type, a value Pydantic accepts, a value it refuses that the printed JSON Schema allows), as
# JSON texts
CASES = [
    (pydantic.IPvAnyAddress, '"10.0.0.1"', '"not-an-ip"'),  # format "ipvanyaddress": Pydantic's own name
    (pydantic.IPvAnyInterface, '"::1/128"', '"1.2.3.4/33"'),
    (decimal.Decimal, '"-1.5e3"', '"abc"'),  # Decimal's schema allows any string
    (decimal.Decimal, '"2.5"', '"1e9999999999999999999"'),  # an exponent Decimal refuses
    (decimal.Decimal, "2.5", "1e400"),  # a JSON number Pydantic parses to infinity
    (pydantic.condecimal(ge=0, le=10), "2.5", '"11"'),  # a bounded Decimal: bounded numbers only
    (datetime.timedelta, '"P3DT4H"', '"P99999999999D"'),  # beyond timedelta's range
    (datetime.timedelta, '"PT999999H"', '"PT99999999H"'),  # beyond Pydantic's 32-bit seconds
    (datetime.datetime, '"2016-12-31T23:59:59Z"', '"2016-12-31T23:59:60Z"'),  # leap second
    (datetime.time, '"23:59:59.5+01:00"', '"23:59:60Z"'),
    (pydantic.NaiveDatetime, '"2020-12-31T23:59:59"', '"2020-12-31T23:59:59Z"'),  # refuses an offset
    (pydantic.UUID4, f'"{uuid.UUID(int=7, version=4)}"', f'"{uuid.UUID(int=7, version=1)}"'),
]


@pytest.mark.parametrize(("annotation", "good", "bad"), CASES, ids=lambda v: getattr(v, "__name__", "v"))
def test_what_pydantic_refuses_is_excluded(byte_vocab: lg.Vocabulary, annotation: object, good: str, bad: str) -> None:
    one = pydantic.create_model("One", x=(annotation, ...))
    g = lg.Compiler(byte_vocab).compile_pydantic(one, whitespace="compact")
    good_doc, bad_doc = '{"x":' + good + "}", '{"x":' + bad + "}"
    one.model_validate_json(good_doc)
    with pytest.raises(pydantic.ValidationError):
        one.model_validate_json(bad_doc)
    assert _accepts(g, good_doc)
    assert not _accepts(g, bad_doc)


def test_random_walks_validate(grammar: lg.CompiledGrammar, byte_vocab: lg.Vocabulary) -> None:
    """Uniform random walks through the masks: every completed document passes the model's
    validation (before the narrowing, about 1 walk in 14 failed on durations and decimals
    alone, and every IP address field was unconstrained)."""
    rng = random.Random(0)
    bits = lg.allocate_mask(byte_vocab)
    completed = 0
    for _ in range(150):
        m = grammar.matcher()
        out = bytearray()
        for _ in range(3000):
            m.fill_mask(bits, 0)
            allowed = np.flatnonzero(mask_to_bool(bits[0], byte_vocab.size))
            if EOS in allowed:
                break
            tok = int(rng.choice(allowed))
            assert m.accept(tok)
            out.append(tok)
        else:
            continue
        Narrowed.model_validate_json(bytes(out))
        completed += 1
    assert completed > 100


def test_the_schema_a_user_sees_is_unchanged() -> None:
    from logitgate.frontends.pydantic import pydantic_schema

    narrowed = pydantic_schema(Narrowed)
    assert Narrowed.model_json_schema()["properties"]["address"]["format"] == "ipvanyaddress"
    assert "format" not in narrowed["properties"]["address"] and narrowed["properties"]["address"]["pattern"]


def test_not_a_model_is_a_type_error(byte_vocab: lg.Vocabulary) -> None:
    with pytest.raises(TypeError, match="Pydantic v2 model class"):
        lg.Compiler(byte_vocab).compile_pydantic(dict)


def test_a_validator_the_grammar_cannot_express_raises_a_typed_error() -> None:
    """A complete output that the model's validator refuses is an OutputValidationError with
    the text, never Pydantic's own exception."""
    from logitgate.generation import validate_pydantic

    class Even(pydantic.BaseModel):
        n: int

        @pydantic.field_validator("n")
        @classmethod
        def _even(cls, v: int) -> int:
            if v % 2:
                raise ValueError("n must be even")
            return v

    assert validate_pydantic(Even, '{"n":2}').n == 2
    with pytest.raises(lg.OutputValidationError) as e:
        validate_pydantic(Even, '{"n":3}')
    assert e.value.code == "output-invalid" and e.value.text == '{"n":3}'
    assert "n: Value error, n must be even" in str(e.value) and e.value.errors[0]["loc"] == ("n",)
