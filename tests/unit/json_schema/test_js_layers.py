"""The JSON Schema frontend's package shape: its import graph has no cycle and respects the
layers (tests/import_graph.py), docs/design.md shows the current graph, and no module outgrows
one concern."""

from __future__ import annotations

import contextlib
import importlib.util
import io
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "python" / "logitgate" / "frontends" / "json_schema"


def _import_graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "tests" / "import_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_cycle_and_no_upward_import() -> None:
    ig = _import_graph()
    graph = ig.imports(PACKAGE)
    assert ig.find_cycle(graph) is None
    assert ig.layer_violations(graph, ig.LAYERS) == []
    assert "driver" in graph and len(graph) > 10


def test_checks_find_a_cycle_and_an_upward_import() -> None:
    ig = _import_graph()
    assert ig.find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    layers = {"low": ("a",), "high": ("b",)}
    assert ig.layer_violations({"a": {"b"}, "b": set(), "c": set()}, layers) == [
        "c: no layer",
        "a imports b from a higher layer",
    ]


def test_design_doc_shows_the_current_graph() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert _import_graph().main([]) == 0
    assert out.getvalue() in (REPO / "docs" / "design.md").read_text()


def test_modules_stay_small() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert max(sizes.values()) <= 600, sizes


def test_caps_are_documented_under_their_names() -> None:
    from logitgate.frontends.json_schema.caps import CAPS

    doc = (REPO / "docs" / "limits.md").read_text()
    for cap in CAPS:
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{cap.name}` |")), None)
        assert row is not None, cap.name
        assert f"| {cap.value:,} |" in row, (cap, row)
