#!/usr/bin/env python
"""The import graph of a package's modules, from their source (nothing is imported).

    python tests/import_graph.py                                   # the JSON Schema frontend
    python tests/import_graph.py python/logitgate/frontends/json_schema

Prints one line per module, ``level  layer  module -> the package modules it imports``, by layer
then level: a module's level is one more than the highest level it imports (0: imports none);
its layer is the one ``LAYERS`` assigns it. Exit status 1, naming what is wrong, when the imports
have a cycle, when a module imports from a higher layer, or when a module has no layer.
tests/unit/json_schema/test_js_layers.py runs it; docs/design.md shows its output.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "python" / "logitgate" / "frontends" / "json_schema"
# The JSON Schema frontend's layers, bottom first: a module imports from its own layer or below.
LAYERS: dict[str, tuple[str, ...]] = {
    "data": (
        "caps",
        "format_dfa_tables",
        "formats",
        "synthetic",
        "patterns",
        "pattern_dfa",
        "values",
        "keywords",
        "facts",
        "diagnostics",
        "rules",
    ),
    "resolution": ("fold", "resolve"),
    "algebra": ("negation", "expand", "merge", "decide", "distribute"),
    "emitters": ("numbers", "length_rules", "strings", "members", "literals", "arrays", "objects"),
    "driver": ("driver",),
}


def imports(package: Path) -> dict[str, set[str]]:
    """Module name -> the modules of the same package it imports (``__init__`` left out)."""
    dotted = ".".join(package.relative_to(REPO / "python").parts)
    names = {p.stem for p in package.glob("*.py")} - {"__init__"}
    graph: dict[str, set[str]] = {}
    for name in sorted(names):
        tree = ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1 and node.module:
                    target = node.module.split(".")[0]
                elif node.level == 0 and node.module and node.module.startswith(dotted + "."):
                    target = node.module[len(dotted) + 1 :].split(".")[0]
                else:
                    continue
                if target in names and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path that ends where it starts, or None (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def levels(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each module's level (the graph must be acyclic)."""
    out: dict[str, int] = {}
    while len(out) < len(graph):
        for name, deps in graph.items():
            if name not in out and all(d in out for d in deps):
                out[name] = 1 + max((out[d] for d in deps), default=-1)
    return out


def layer_violations(graph: dict[str, set[str]], layers: dict[str, tuple[str, ...]]) -> list[str]:
    """Modules without a layer, and imports from a higher layer."""
    rank = {m: i for i, mods in enumerate(layers.values()) for m in mods}
    out = [f"{m}: no layer" for m in sorted(graph) if m not in rank]
    for m, deps in sorted(graph.items()):
        out.extend(f"{m} imports {d} from a higher layer" for d in sorted(deps) if rank.get(d, -1) > rank.get(m, -1))
    return out


def main(argv: list[str]) -> int:
    package = Path(argv[0]).resolve() if argv else DEFAULT
    graph = imports(package)
    cycle = find_cycle(graph)
    if cycle is not None:
        print("cycle: " + " -> ".join(cycle))
        return 1
    wrong = layer_violations(graph, LAYERS) if package == DEFAULT else []
    for line in wrong:
        print(line)
    if wrong:
        return 1
    layer_of = {m: name for name, mods in LAYERS.items() for m in mods}
    rank = {name: i for i, name in enumerate(LAYERS)}
    level = levels(graph)
    for name in sorted(graph, key=lambda n: (rank.get(layer_of.get(n, ""), -1), level[n], n)):
        print(f"{level[name]:>2}  {layer_of.get(name, ''):<10}  {name} -> {', '.join(sorted(graph[name])) or '(none)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
