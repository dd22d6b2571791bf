"""Every ```python block in README.md and docs/*.md runs, and every docstring example passes."""

from __future__ import annotations

import doctest
import functools
import importlib
import importlib.util
import itertools
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)
BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)
# `print(...)  # -> TEXT`: the line the example prints (checked where the model runs).
PRINTS = re.compile(r"^\s*print\(.*#\s*-> (.*)$", re.M)
# Blocks that load the embedded model say so on their first line; they run in the slow suite.
NEEDS_EXTERNAL = "# needs:"
# Blocks that talk to a running server: tests/server/test_doc_examples.py runs them against one.
NEEDS_SERVER = "# needs: logitgate serve"
# Blocks that need a vLLM engine: tests/vllm_plugin (make test-vllm) runs them.
NEEDS_VLLM = "# needs: vllm"
# Blocks that need SGLang: tests/sglang_plugin (make test-sglang) runs them.
NEEDS_SGLANG = "# needs: sglang"


# What the embedded model prints depends on the floating-point kernels its matmuls run on: the
# docs show what it printed where they were recorded (an Intel Xeon), and a greedy choice may
# differ elsewhere. Here, per CPU (its model name, and the kernels torch dispatches to there),
# what that machine prints instead of a doc's line; a machine not listed must print the doc's.
_DOC_ALICE = "{'name': 'Alice', 'age': 30, 'gender': 'Female', 'country': 'USA'}"
_AMD_ALICE = "{'name': 'Alice', 'age': 30, 'gender': 'Female', 'address': '123 Main Street, New York, NY 10021'}"
_DOC_ORDER = (
    '{"order_id":2821,"items":["Widget and Gadget 4821","Basket","Basket 4821","Basket 4821"],"status":"pending"}'
)


def _order_ending(last_item: str) -> str:
    """generation.md's order with its last item printed otherwise."""
    return _DOC_ORDER.replace('"Basket 4821"],', f'"{last_item}"],')


OTHER_CPUS_PRINT: dict[tuple[str, str], dict[str, str]] = {
    ("AMD EPYC", "AVX2"): {
        _DOC_ALICE: _AMD_ALICE,
        _DOC_ORDER: _order_ending("Widget and Gadget 4799350000135673656973"),
    },
    ("AMD EPYC", "AVX512"): {
        _DOC_ALICE: _AMD_ALICE,
        _DOC_ORDER: _order_ending("Widget and Gadget 4799350000135673596789"),
    },
}


@functools.cache
def _cpu() -> tuple[str, str]:
    """This machine's CPU model name (as the benchmark reports name it: bench/common.py's
    machine_info) and torch's CPU capability."""
    import torch

    spec = importlib.util.spec_from_file_location("bench_common", REPO / "bench" / "common.py")
    assert spec is not None and spec.loader is not None
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    return common.machine_info()["cpu_model"], torch.backends.cpu.get_cpu_capability()


def _printed_here(expected: list[str]) -> list[str]:
    """The doc's printed lines as this machine's CPU prints them (OTHER_CPUS_PRINT)."""
    instead = OTHER_CPUS_PRINT.get(_cpu(), {})
    return [instead.get(line, line) for line in expected]


def _blocks() -> list[tuple[str, int, str]]:
    out = []
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        for i, m in enumerate(BLOCK.finditer(text)):
            out.append((path.name, i, m.group(1)))
    return out


def _needs_model(code: str) -> bool:
    return code.lstrip().startswith(NEEDS_EXTERNAL)


@pytest.mark.parametrize(
    ("doc", "index", "code"),
    [b for b in _blocks() if not _needs_model(b[2])],
    ids=lambda v: str(v)[:20],
)
def test_doc_block_runs(doc: str, index: int, code: str) -> None:
    exec(compile(code, f"{doc}[block {index}]", "exec"), {"__name__": "__doc_example__"})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("doc", "index", "code"),
    [
        b
        for b in _blocks()
        if _needs_model(b[2]) and not b[2].lstrip().startswith((NEEDS_SERVER, NEEDS_VLLM, NEEDS_SGLANG))
    ],
    ids=lambda v: str(v)[:20],
)
def test_doc_block_with_model_runs(doc: str, index: int, code: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Blocks that load the embedded model: run in the slow suite (make test-all); a print
    commented ``# -> TEXT`` must print TEXT."""
    exec(compile(code, f"{doc}[block {index}]", "exec"), {"__name__": "__doc_example__"})
    printed = capsys.readouterr().out.splitlines()
    expected = _printed_here(PRINTS.findall(code))
    assert [line for line in printed if line in expected] == expected, (_cpu(), printed)


def _cli_examples() -> list[tuple[str, str, str]]:
    """``logitgate ...`` lines of bash blocks followed by ``# -> OUTPUT``."""
    out = []
    for path in DOC_FILES:
        for block in BASH_BLOCK.findall(path.read_text(encoding="utf-8")):
            lines = block.splitlines()
            for line, after in itertools.pairwise(lines):
                if line.startswith("logitgate ") and after.startswith("# -> "):
                    out.append((path.name, line, after[len("# -> ") :]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("doc", "command", "output"), _cli_examples(), ids=lambda v: str(v)[:40])
def test_doc_cli_example_prints_its_output(
    doc: str, command: str, output: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from logitgate.cli.main import main

    monkeypatch.chdir(REPO)
    assert main([*shlex.split(command)[1:], "--no-stream"]) == 0
    assert capsys.readouterr().out.strip() == _printed_here([output])[0], _cpu()


def test_other_cpus_print_lines_the_docs_show() -> None:
    """Every line OTHER_CPUS_PRINT replaces is one a doc example prints (a doc edit must keep it)."""
    shown = {line for _, _, code in _blocks() for line in PRINTS.findall(code)}
    shown |= {output for _, _, output in _cli_examples()}
    for cpu, lines in OTHER_CPUS_PRINT.items():
        assert set(lines) <= shown, (cpu, set(lines) - shown)


def test_doc_cli_examples_are_found() -> None:
    assert len(_cli_examples()) >= 3


MODULES = [
    "logitgate.grammar.ir",
    "logitgate.grammar.derivatives",
    "logitgate.frontends.regex",
    "logitgate.frontends.lark",
    "logitgate.vocabulary",
    "logitgate.compiler",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
