"""The ``logitgate`` command line: ordinary mistakes give one line and a documented exit code,
and content errors show before any model file is read (the model loaders are replaced by
functions that fail the test when called)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import logitgate as lg
from logitgate.cli import main as cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a tokenizer or a model fails the test: errors must show before."""
    import logitgate.models

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before the error was reported")

    monkeypatch.setattr(logitgate.models, "load_tokenizer", fail)
    monkeypatch.setattr(logitgate.models, "load_model", fail)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's --help / --version, and its usage errors
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def _one_error_line(err: str, code: str) -> str:
    """The error line; what may follow is a grammar error's excerpt and caret, indented."""
    first, *excerpt = err.rstrip("\n").splitlines()
    assert first.startswith(f"logitgate: error [{code}]: "), err
    assert len(excerpt) in (0, 2) and all(line.startswith("  ") for line in excerpt), err
    return first


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "bad.json").write_text('{"type": "object",')
    (tmp_path / "latin1.gbnf").write_bytes(b'root ::= "caf\xe9"\n')
    (tmp_path / "unsupported.json").write_text('{"type": "array", "uniqueItems": true, "items": {"type": "object"}}')
    (tmp_path / "undefined.gbnf").write_text('root ::= "a" item\n')
    (tmp_path / "undefined.lark").write_text('start: "a" item\n')
    (tmp_path / "notamodel").mkdir()
    (tmp_path / "models_here.py").write_text(
        "import pydantic\nclass Plain:\n    pass\nclass Order(pydantic.BaseModel):\n    id: int\n"
    )
    (tmp_path / "broken_module.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


MISTAKES = [
    (["--schema", "missing.json"], "file-not-found", "--schema missing.json: no such file"),
    (["--grammar", "missing.gbnf"], "file-not-found", "--grammar missing.gbnf: no such file"),
    (["--lark", "undefined.lark"], "lark-undefined", "--lark undefined.lark: undefined name 'item'"),
    (["--schema", "notamodel"], "file-unreadable", "is a folder"),
    (["--schema", "bad.json"], "schema-json", "--schema bad.json: schema is not valid JSON"),
    (["--grammar", "latin1.gbnf"], "file-encoding", "not UTF-8 text (byte 0xe9 at offset 13)"),
    (["--pydantic", "no_such_module:Order"], "pydantic-import", "cannot import 'no_such_module'"),
    (["--pydantic", "broken_module:Order"], "pydantic-import", "boom at import"),
    (["--pydantic", "models_here:Missing"], "pydantic-class", "has no attribute 'Missing'"),
    (["--pydantic", "models_here:Plain"], "pydantic-class", "not a Pydantic v2 model class"),
    (["--pydantic", "models_here"], "pydantic-spec", "takes MODULE:CLASS"),
    (["--model", "no/such/model"], "model-not-found", "--model no/such/model: no such file or folder"),
    (["--model", "notamodel"], "model-load", "without config.json"),
    (["--model", "bad.json"], "model-load", "not a model folder or a .gguf file"),
    (["--choice", "red,,blue"], "choice-empty", "alternative 2 is empty"),
    (["--choice", ""], "choice-empty", "alternative 1 is empty"),
    # Content errors: the structure is compiled before any model file is read.
    (["--regex", "[z-a]"], "regex-syntax", "--regex '[z-a]': regex syntax error"),
    (["--regex", "a{200000}"], "limit", "limit max_repeat=100000 exceeded"),
    (["--schema", "unsupported.json"], "schema-unsupported", "unsupported 'uniqueItems'"),
]


@pytest.mark.parametrize(
    ("args", "code", "message"), MISTAKES, ids=lambda v: "-".join(v) if isinstance(v, list) else ""
)
def test_generate_mistakes_are_one_line(
    files: Path, no_model: None, capsys: pytest.CaptureFixture[str], args: list[str], code: str, message: str
) -> None:
    pytest.importorskip("pydantic")
    rc, out, err = _run(["generate", *args, "a prompt"], capsys)
    assert rc == cli.EXIT_ERROR == 2 and out == ""
    assert message in _one_error_line(err, code)


def test_a_grammar_error_shows_line_and_caret(files: Path, no_model: None, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["generate", "--grammar", "undefined.gbnf", "a prompt"], capsys)
    first, excerpt, caret = err.strip("\n").splitlines()
    assert rc == 2 and first.startswith("logitgate: error [gbnf-undefined-rule]: --grammar undefined.gbnf: ")
    assert "line 1, column 14" in first and excerpt.strip() == 'root ::= "a" item' and caret.strip() == "^"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-tokens", "0"], "argument --max-tokens: must be at least 1, got 0"),
        (["--max-tokens", "x"], "argument --max-tokens: expected an integer, got 'x'"),
        (["--top-p", "1.5"], "argument --top-p: must be between 0 and 1, got 1.5"),
        (["--temperature", "-1"], "argument --temperature: must be at least 0, got -1"),
        (["--regex", "a", "--choice", "b"], "not allowed with argument"),
        (["--no-such-flag"], "unrecognized arguments"),
    ],
)
def test_argument_mistakes_are_one_line(
    no_model: None, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc, out, err = _run(["generate", *args, "a prompt"], capsys)
    assert rc == 2 and out == ""
    assert message in _one_error_line(err, "usage")


def test_ctrl_c_exits_130_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import logitgate.models

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(logitgate.models, "load_tokenizer", interrupted)
    rc, out, err = _run(["generate", "--regex", "[0-9]+", "-q", "a prompt"], capsys)
    assert rc == cli.EXIT_INTERRUPTED == 130 and out == ""
    assert err.strip() == "logitgate: interrupted" and "Traceback" not in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["--version"], capsys)
    assert rc == 0 and out.strip() == f"logitgate {lg.__version__}"


def test_help_lists_exit_codes_and_every_flag_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():  # type: ignore[union-attr]
        text = sub.format_help()
        assert "exit codes:" in text and "130  interrupted" in text, name
        for action in sub._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
            if action.option_strings and action.default not in (None, False, argparse_suppress()):
                assert "default" in action.help, f"{name} {action.option_strings}: default not in help"
    rc, out, _ = _run(["--help"], capsys)
    assert rc == 0 and "exit codes:" in out


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS


def test_debug_strips_choices_and_takes_a_schema(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(
        ["debug", "--choice", "red, green", "--prefix", "green", "--vocab", str(_byte_vocab_file(files))], capsys
    )
    assert rc == 0 and 'root ::= "red" | "green"' in out and "complete=True" in out
    (files / "order.json").write_text(json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}}))
    rc, out, _ = _run(
        ["debug", "--schema", "order.json", "--prefix", '{"id":', "--vocab", str(_byte_vocab_file(files))], capsys
    )
    assert rc == 0 and "complete=False" in out


def test_debug_takes_a_lark_grammar(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "calc.lark").write_text('%ignore " "\nstart: sum\nsum: sum "+" INT | INT\n%import common.INT\n')
    vocab = str(_byte_vocab_file(files))
    rc, out, _ = _run(["debug", "--lark", "calc.lark", "--prefix", "1 + 2 ", "--vocab", vocab], capsys)
    assert rc == 0 and 'sum ::= INT -ignore* ("+" -ignore* INT -ignore*)*' in out and "complete=True" in out


def test_debug_and_demo_take_pydantic_and_schema_options(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pydantic")
    vocab = str(_byte_vocab_file(files))
    # Pydantic is strict by default: no property beyond the fields; --no-strict allows others.
    rc, out, _ = _run(["debug", "--pydantic", "models_here:Order", "--prefix", '{"id":1,"x"', "--vocab", vocab], capsys)
    assert rc == 1 and "not a viable prefix" in out
    rc, out, _ = _run(
        ["debug", "--pydantic", "models_here:Order", "--no-strict", "--prefix", '{"id":1,"x"', "--vocab", vocab], capsys
    )
    assert rc == 0
    rc, out, _ = _run(["demo", "--pydantic", "models_here:Order", "--vocab", vocab, "--max-steps", "200"], capsys)
    assert rc == 0 and "structure: --pydantic models_here:Order" in out and "complete: True" in out


def test_lenient_lists_what_it_dropped(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vocab = str(_byte_vocab_file(files))
    rc, _, err = _run(["debug", "--schema", "unsupported.json", "--vocab", vocab], capsys)
    assert rc == 2 and "unsupported 'uniqueItems'" in err
    rc, _, err = _run(["debug", "--schema", "unsupported.json", "--lenient", "--vocab", vocab], capsys)
    assert rc == 0 and "logitgate: warning: --schema unsupported.json: dropped /uniqueItems: uniqueItems" in err


def test_demo_and_debug_take_a_tiktoken_vocabulary(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import base64

    path = files / "tiny.tiktoken"
    path.write_text("".join(f"{base64.b64encode(bytes([i])).decode()} {i}\n" for i in range(256)))
    rc, out, _ = _run(["debug", "--regex", "[0-9]{2}", "--vocab", str(path)], capsys)
    assert rc == 0 and "10 allowed tokens" in out
    rc, out, _ = _run(["demo", "--regex", "[0-9]{2}", "--vocab", str(path)], capsys)
    assert rc == 0 and "complete: True" in out


def _byte_vocab_file(folder: Path) -> Path:
    """A tokenizer.json of the 256 bytes (byte-level BPE without merges) and an EOS."""
    path = folder / "bytes" / "tokenizer.json"
    if path.exists():
        return path.parent
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["</s>"])
    path.parent.mkdir(exist_ok=True)
    tok.save(str(path))
    (path.parent / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    return path.parent


def test_the_command_runs_as_a_program(files: Path) -> None:
    """The console entry point: exit code and one line, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "logitgate.cli.main", "generate", "--schema", "missing.json", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "logitgate: error [file-not-found]: --schema missing.json: no such file\n"
