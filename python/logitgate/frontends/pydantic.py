"""Pydantic v2 models -> the JSON Schema their *validation* accepts, for generation.

``Model.model_json_schema()`` documents a model; for some types Pydantic's validator is
stricter than the schema it prints, so a document valid against that schema can still fail
``Model.model_validate_json``. This module generates the schema with those types narrowed to
text the validator accepts:

- ``datetime`` / ``time``: RFC 3339 without the leap second (Python's types cannot hold
  ``23:59:60``); a naive type (``NaiveDatetime``, ``tz_constraint="naive"``) without an offset.
- ``timedelta``: ISO 8601 durations whose components are small enough that the total stays
  within ``timedelta``'s 999,999,999 days (``P99999999999D`` is refused by Pydantic).
- ``Decimal``: a JSON number within the float range (Pydantic parses larger ones to infinity
  and refuses them; bounded numbers are written without exponent), or a string spelling a
  decimal number (Pydantic's schema allows any string); with bounds (``ge``, ``lt``...), only
  the bounded number.
- ``UUID1``...``UUID8``: the version digit and the RFC 4122 variant are fixed.
- ``IPvAnyAddress``, ``IPvAnyInterface``, ``IPv4Interface``, ``IPv6Interface``: Pydantic's own
  format names, lowered to the address grammars of the JSON Schema formats ``ipv4``/``ipv6``.

What a schema cannot say (validators, ``max_digits``, ``PastDate``, URL schemes, network host
bits...) stays unchecked at generation: :attr:`GenerationResult.value` validates and raises
:class:`~logitgate.OutputValidationError`, which carries the text, when Pydantic rejects it.
The narrowed languages are subsets of what Pydantic accepts: a value outside them (a duration
of ``P999999999D``, ``" 1.5 "`` for a Decimal) cannot be generated.
"""

from __future__ import annotations

from typing import Any

from .json_schema.formats import _DATE_RE, _FORMATS

__all__ = ["pydantic_schema"]

_CLOCK = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
_OFFSET = r"(?:[zZ]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])"
# Bounded digit counts keep every duration within Pydantic's parser: the time part in seconds
# must fit 32 bits (999999 h + 999999 min + 99999999 s < 2**32), and the total within
# timedelta's 999,999,999 days (999999 years of 365 days + 999999 months of 30 + 99999999 days).
_H_M_S = r"T(?:[0-9]{1,6}H(?:[0-9]{1,6}M(?:[0-9]{1,8}S)?)?|[0-9]{1,6}M(?:[0-9]{1,8}S)?|[0-9]{1,8}S)"
_DURATION_RE = (
    rf"P(?:(?:[0-9]{{1,6}}Y(?:[0-9]{{1,6}}M(?:[0-9]{{1,8}}D)?)?|[0-9]{{1,6}}M(?:[0-9]{{1,8}}D)?|[0-9]{{1,8}}D)"
    rf"(?:{_H_M_S})?|{_H_M_S}|[0-9]{{1,6}}W)"
)
# Exponents of at most 9 digits: Python's Decimal refuses exponents beyond 10**18.
_DECIMAL_TEXT_RE = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,9})?"
# The largest finite float: JSON numbers beyond it parse to infinity, which Decimal refuses.
_FLOAT_MAX = 1.7976931348623157e308
_V4_PREFIX = r"(?:3[0-2]|[12]?[0-9])"
_V6_PREFIX = r"(?:12[0-8]|1[01][0-9]|[1-9]?[0-9])"
_V4_INTERFACE = rf"{_FORMATS['ipv4']}(?:/{_V4_PREFIX})?"
_V6_INTERFACE = rf"{_FORMATS['ipv6']}(?:/{_V6_PREFIX})?"
# Pydantic's format names (not JSON Schema's) whose values are regular languages.
_PYDANTIC_FORMATS: dict[str, str] = {
    "ipvanyaddress": rf"{_FORMATS['ipv4']}|{_FORMATS['ipv6']}",
    "ipv4interface": _V4_INTERFACE,
    "ipv6interface": _V6_INTERFACE,
    "ipvanyinterface": rf"{_V4_INTERFACE}|{_V6_INTERFACE}",
}
_HEX = "[0-9a-fA-F]"


def _pattern(regex: str) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^(?:{regex})$"}


def _uuid_re(version: int) -> str:
    return rf"{_HEX}{{8}}-{_HEX}{{4}}-{version}{_HEX}{{3}}-[89abAB]{_HEX}{{3}}-{_HEX}{{12}}"


def _narrow_formats(node: Any) -> None:
    """Replaces Pydantic's own format names by patterns, in place (iterative)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, dict):
            fmt = x.get("format")
            if isinstance(fmt, str) and fmt in _PYDANTIC_FORMATS and "pattern" not in x:
                del x["format"]
                x["pattern"] = _pattern(_PYDANTIC_FORMATS[fmt])["pattern"]
            stack.extend(x.values())


def pydantic_schema(model: Any) -> dict[str, Any]:
    """The JSON Schema of Pydantic v2 ``model`` narrowed to what its validation accepts (see the
    module docstring). Raises ``TypeError`` when ``model`` is not a Pydantic v2 model class."""
    from pydantic.json_schema import GenerateJsonSchema

    class _ValidationSchema(GenerateJsonSchema):
        def datetime_schema(self, schema: Any) -> dict[str, Any]:
            offset = "" if schema.get("tz_constraint") == "naive" else _OFFSET
            return _pattern(f"(?:{_DATE_RE})[tT]{_CLOCK}{offset}")

        def time_schema(self, schema: Any) -> dict[str, Any]:
            offset = "" if schema.get("tz_constraint") == "naive" else f"{_OFFSET}?"
            return _pattern(f"{_CLOCK}{offset}")

        def timedelta_schema(self, schema: Any) -> dict[str, Any]:
            return _pattern(_DURATION_RE)

        def decimal_schema(self, schema: Any) -> dict[str, Any]:
            number: dict[str, Any] = super().decimal_schema(schema)["anyOf"][0]
            number.setdefault("minimum", -_FLOAT_MAX)
            number.setdefault("maximum", _FLOAT_MAX)
            if any(k in schema for k in ("gt", "ge", "lt", "le", "multiple_of")):
                return number  # a string branch would have to spell the bounds too
            return {"anyOf": [number, _pattern(_DECIMAL_TEXT_RE)]}

        def uuid_schema(self, schema: Any) -> dict[str, Any]:
            version = schema.get("version")
            return _pattern(_uuid_re(version)) if version else super().uuid_schema(schema)

    schema_fn = getattr(model, "model_json_schema", None)
    if schema_fn is None:
        raise TypeError(f"compile_pydantic needs a Pydantic v2 model class, got {model!r}")
    out: dict[str, Any] = schema_fn(schema_generator=_ValidationSchema)
    _narrow_formats(out)
    return out
