"""Containment grammars: random walks of the SQL mask (Llama 3 and SmolLM2 tokenizers) parse
with sqlglot as one SELECT over the allowed tables, columns and functions; the shell grammar
yields one allowlisted command whose arguments stay arguments; bad allowlists are typed errors."""

from __future__ import annotations

import random
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import logitgate as lg

sqlglot = pytest.importorskip("sqlglot")
from sqlglot import exp  # noqa: E402

TABLES = {"orders": ["id", "status", "total", "placed_at"], "customers": ["id", "name", "city"]}
FUNCTIONS = ("COUNT", "SUM", "AVG", "MIN", "MAX")
LLAMA3 = Path("/work/shared/tokenizers/llama3")


def check_select(text: str, tables: dict[str, list[str]] = TABLES, functions: tuple[str, ...] = FUNCTIONS) -> None:
    """``text`` is one read-only SELECT over one allowed table, its columns and the allowed
    aggregate functions, with no comment and no ';' (raises AssertionError otherwise)."""
    assert ";" not in text, text
    assert all(not t.comments for t in sqlglot.tokenize(text)), text
    statements = sqlglot.parse(text)
    assert len(statements) == 1 and isinstance(statements[0], exp.Select), text
    sel = statements[0]
    names = {t.name for t in sel.find_all(exp.Table)}
    assert len(names) == 1 and next(iter(names)) in tables, text
    table = next(iter(names))
    assert {c.name for c in sel.find_all(exp.Column)} <= set(tables[table]), text
    for node in sel.find_all(exp.Func):
        if isinstance(node, exp.AggFunc):
            assert node.sql_name() in functions, text
        else:
            assert not isinstance(node, exp.Anonymous), text
    forbidden = (exp.Subquery, exp.Union, exp.Join, exp.Drop, exp.Insert, exp.Update, exp.Delete, exp.Command)
    assert not any(sel.find_all(*forbidden)), text


def random_walk(g: lg.CompiledGrammar, rng: random.Random, eos_p: float = 0.3, max_steps: int = 4000) -> str:
    """Uniform among the allowed tokens; EOS (when allowed) with probability ``eos_p``."""
    vocab = g.vocab
    m = g.matcher()
    bits = lg.allocate_mask(vocab)
    eos = np.array(sorted(vocab.eos_ids))
    out = bytearray()
    for _ in range(max_steps):
        m.fill_mask(bits, row=0)
        allowed = np.flatnonzero(np.unpackbits(bits[0].view(np.uint8), bitorder="little")[: vocab.size])
        is_eos = np.isin(allowed, eos)
        ends, rest = allowed[is_eos], allowed[~is_eos]
        if len(ends) and (rng.random() < eos_p or not len(rest)):
            assert m.accept(int(ends[0]))
            return out.decode("utf-8")
        tok = int(rest[rng.randrange(len(rest))])
        assert m.accept(tok)
        out += vocab.token_bytes(tok) or b""
        if m.is_terminated():
            return out.decode("utf-8")
    raise AssertionError(f"walk did not end: {bytes(out)[:200]!r}")


@pytest.fixture(scope="module")
def vocabularies() -> dict[str, lg.Vocabulary]:
    out = {}
    if (LLAMA3 / "tokenizer.json").is_file():
        out["llama3"] = lg.Vocabulary.from_huggingface(str(LLAMA3))
    try:
        from logitgate.models import default_gguf_path

        out["smollm2"] = lg.Vocabulary.from_gguf(default_gguf_path())
    except (FileNotFoundError, ImportError):
        pass
    if not out:
        pytest.skip("no tokenizer available")
    return out


def _walks(vocabularies: dict[str, lg.Vocabulary], n: int) -> int:
    grammar = lg.grammars.sql_select(TABLES)
    done = 0
    for name, vocab in sorted(vocabularies.items()):
        g = lg.Compiler(vocab).compile_ebnf(grammar)
        rng = random.Random(f"sql-{name}")
        for _ in range(n):
            check_select(random_walk(g, rng))
            done += 1
    return done


def test_sql_random_walks_parse_as_allowed_selects(vocabularies: dict[str, lg.Vocabulary]) -> None:
    assert _walks(vocabularies, 25) == 25 * len(vocabularies)


@pytest.mark.slow
def test_sql_thousand_random_walks_per_tokenizer(vocabularies: dict[str, lg.Vocabulary]) -> None:
    assert _walks(vocabularies, 1000) == 1000 * len(vocabularies)


BYTES = lg.Vocabulary.from_tokens([bytes([i]) for i in range(256)] + [b"<eos>"], eos_ids=[256])


def _accepts(grammar: str, text: str) -> bool:
    m = lg.Compiler(BYTES).compile_ebnf(grammar).matcher()
    return all(m.accept(b) for b in text.encode()) and m.is_complete()


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM orders",
        "SELECT DISTINCT city FROM customers WHERE name LIKE 'A%' ORDER BY city DESC LIMIT 10",
        "SELECT status, COUNT(*) FROM orders WHERE total > 10.5 AND placed_at IS NOT NULL GROUP BY status",
        "SELECT id FROM orders WHERE status IN ('open', 'it''s') LIMIT 5",
    ],
)
def test_sql_accepts_allowed_queries(text: str) -> None:
    assert _accepts(lg.grammars.sql_select(TABLES), text)
    check_select(text)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM orders; DROP TABLE orders",
        "SELECT * FROM orders -- all",
        "SELECT * FROM orders /* x */",
        "SELECT name FROM orders",  # a column of another table
        "SELECT * FROM users",
        "SELECT * FROM orders UNION SELECT * FROM customers",
        "SELECT * FROM orders WHERE status = 'a\\' OR 1=1",  # a backslash escape (MySQL)
        "SELECT UPPER(status) FROM orders",
        "SELECT * FROM orders WHERE id = (SELECT id FROM customers)",
        "DELETE FROM orders",
        "SELECT * FROM orders WHERE status = '" + "x" * 65 + "'",
        "select * from orders",
    ],
)
def test_sql_rejects_everything_else(text: str) -> None:
    assert not _accepts(lg.grammars.sql_select(TABLES), text)


@pytest.mark.parametrize(
    ("tables", "functions", "code"),
    [
        ({}, FUNCTIONS, "sql-tables"),
        ({"orders; DROP": ["id"]}, FUNCTIONS, "sql-identifier"),
        ({"orders": ["select"]}, FUNCTIONS, "sql-identifier"),
        ({"orders": []}, FUNCTIONS, "sql-tables"),
        ({"orders": ["id"]}, ("SLEEP()",), "sql-identifier"),
    ],
)
def test_sql_bad_allowlists_are_typed(tables: dict[str, list[str]], functions: tuple[str, ...], code: str) -> None:
    with pytest.raises(lg.UsageError) as e:
        lg.grammars.sql_select(tables, functions)
    assert e.value.code == code


SHELL = {"ls": ["-l", "-a", "-h"], "grep": ["-i", "-n", "--max-count=5"]}


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("ls", True),
        ("ls -l -a 'docs'", True),
        ("grep -i --max-count=5 'error' 'log.txt'", True),
        ("ls 'a b; rm -rf /'", True),  # one argument, quoted: the shell expands nothing in it
        ("ls; rm -rf /", False),
        ("ls -R", False),
        ("rm 'x'", False),
        ("ls '-rf'", False),  # an argument that would read as a flag
        ("ls $(whoami)", False),
        ("ls 'a' | sh", False),
        ("ls 'it'''", False),
    ],
)
def test_shell_command_allowlist(text: str, ok: bool) -> None:
    grammar = lg.grammars.shell_command(SHELL)
    assert _accepts(grammar, text) == ok
    if ok:
        argv = shlex.split(text)
        assert argv[0] in SHELL and all(a in SHELL[argv[0]] or not a.startswith("-") for a in argv[1:])


def test_shell_random_walks_split_into_allowed_argv() -> None:
    g = lg.Compiler(BYTES).compile_ebnf(lg.grammars.shell_command(SHELL, max_arg_length=12))
    rng = random.Random(7)
    for _ in range(50):
        text = random_walk(g, rng)
        argv = shlex.split(text)
        flags = [a for a in argv[1:] if a.startswith("-")]
        assert argv[0] in SHELL and set(flags) <= set(SHELL[argv[0]]), text


@pytest.mark.parametrize(
    ("allowlist", "kw"),
    [({}, {}), ({"ls;": []}, {}), ({"ls": ["-l;rm"]}, {}), ({"ls": "-l"}, {}), ({"ls": []}, {"max_args": -1})],
)
def test_shell_bad_allowlists_are_typed(allowlist: Any, kw: dict[str, Any]) -> None:
    with pytest.raises(lg.UsageError):
        lg.grammars.shell_command(allowlist, **kw)
