"""``lg.grammars.sql_select``: a GBNF grammar of one read-only ``SELECT`` over named tables
and columns.

The language: ``SELECT [DISTINCT] items FROM table [WHERE conditions] [GROUP BY columns]
[ORDER BY keys] [LIMIT n]`` over one table of the allowlist, with that table's columns only,
aggregate functions from an allowlist (one column argument, or ``COUNT(*)``), conditions
``col op value``, ``IS [NOT] NULL``, ``IN (...)``, ``BETWEEN``, ``LIKE`` joined by ``AND``/
``OR``. Keywords are upper case, separated by single spaces. Nothing else can be written: no
other statement, no ``;``, no comment, no subquery, no join or ``UNION``, no other table or
function. Literals are bounded: numbers of at most 12 integer and 6 fraction digits, strings
in single quotes of at most ``max_literal_length`` characters with ``''`` as the only escape
and no backslash, ``;`` or control character (so no dialect reads an escape out of them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from ..errors import UsageError

__all__ = ["DEFAULT_FUNCTIONS", "sql_select"]

DEFAULT_FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
# Words a bare identifier must not be (they would parse as SQL, not as a name).
_RESERVED = frozenset(
    """ALL AND ANY AS ASC BETWEEN BY CASE CAST CREATE CROSS DELETE DESC DISTINCT DROP ELSE END
    EXCEPT EXISTS FALSE FETCH FOR FROM FULL GROUP HAVING IN INNER INSERT INTERSECT INTO IS JOIN
    LEFT LIKE LIMIT NATURAL NOT NULL OFFSET ON OR ORDER OUTER RIGHT SELECT SET TABLE THEN TRUE
    UNION UPDATE USING VALUES WHEN WHERE WITH""".split()
)


def _identifier(name: object, what: str) -> str:
    if not isinstance(name, str) or not _IDENT.match(name) or name.upper() in _RESERVED:
        raise UsageError(
            f"{what} {name!r} must be a plain SQL identifier "
            "([A-Za-z_][A-Za-z0-9_]*, at most 63 characters, not a keyword)",
            code="sql-identifier",
        )
    return name


def _alt(literals: Iterable[str]) -> str:
    return " | ".join(f'"{x}"' for x in literals)


def sql_select(
    tables: Mapping[str, Sequence[str]],
    functions: Sequence[str] = DEFAULT_FUNCTIONS,
    *,
    max_literal_length: int = 64,
    max_conditions: int = 4,
    max_items: int = 8,
    max_limit_digits: int = 4,
) -> str:
    """The GBNF grammar (start rule ``root``) of one ``SELECT`` over ``tables`` (name -> its
    columns). Compile it with :meth:`~logitgate.Compiler.compile_ebnf` or pass it as
    ``lg.generate(..., ebnf=...)``. Bad names or bounds raise :class:`~logitgate.UsageError`."""
    if not isinstance(tables, Mapping) or not tables:
        raise UsageError("tables must be a non-empty mapping of table name to its columns", code="sql-tables")
    for name, value in (
        ("max_literal_length", max_literal_length),
        ("max_conditions", max_conditions),
        ("max_items", max_items),
        ("max_limit_digits", max_limit_digits),
    ):
        if not isinstance(value, int) or not 1 <= value <= 4096:
            raise UsageError(f"{name} must be an integer in 1..4096, got {value!r}", code="sql-bound")
    funcs = [_identifier(f, "function").upper() for f in functions]
    lines = [
        "root ::= " + " | ".join(f"q{i}" for i in range(len(tables))),
        "value ::= number | string",
        'number ::= "-"? [0-9]{1,12} ("." [0-9]{1,6})?',
        # No backslash (an escape in some dialects), no ';', no control characters.
        f'string ::= "\'" strchar{{0,{max_literal_length}}} "\'"',
        "strchar ::= [^'\\\\;\\x00-\\x1f\\x7f] | \"''\"",
        'op ::= "=" | "!=" | "<" | "<=" | ">" | ">="',
        f'limit ::= " LIMIT " [1-9] [0-9]{{0,{max_limit_digits - 1}}}',
    ]
    if funcs:
        lines.append("func ::= " + _alt(funcs))
    for i, (table, columns) in enumerate(tables.items()):
        _identifier(table, "table")
        if isinstance(columns, str) or not columns:
            raise UsageError(f"table {table!r} needs a non-empty list of columns", code="sql-tables")
        cols = [_identifier(c, f"column of {table!r}") for c in columns]
        t = f"t{i}"
        item_alts = [f"{t}col"]
        if funcs:
            item_alts.append(f'func "(" {t}col ")"')
        if "COUNT" in funcs:
            item_alts.append('"COUNT(*)"')
        lines += [
            f'q{i} ::= "SELECT " "DISTINCT "? {t}sel " FROM {table}" {t}where? {t}group? {t}order? limit?',
            f"{t}col ::= " + _alt(cols),
            f'{t}sel ::= "*" | {t}item (", " {t}item){{0,{max_items - 1}}}',
            f"{t}item ::= " + " | ".join(item_alts),
            f'{t}where ::= " WHERE " {t}cond ((" AND " | " OR ") {t}cond){{0,{max_conditions - 1}}}',
            f'{t}cond ::= {t}col " " op " " value | {t}col " IS NULL" | {t}col " IS NOT NULL"'
            f' | {t}col " IN (" value (", " value){{0,7}} ")" | {t}col " BETWEEN " value " AND " value'
            f' | {t}col " LIKE " string',
            f'{t}group ::= " GROUP BY " {t}col (", " {t}col){{0,3}}',
            f'{t}order ::= " ORDER BY " {t}key (", " {t}key){{0,2}}',
            f'{t}key ::= {t}item (" ASC" | " DESC")?',
        ]
    return "\n".join(lines) + "\n"
