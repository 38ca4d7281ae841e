"""gaca imports without cycles and without upward imports between its layers (function-level imports
counted: they can hide a cycle). The layers are docs/design.md's."""

from __future__ import annotations

import ast
from pathlib import Path

import gaca
import gaca.envs

#: Lower layers never import higher ones (docs/design.md); equal ranks are siblings that do not import
#: each other. Utility modules (registry, validate, persist, config) are the bottom layer.
LAYERS = {
    "gaca.registry": 0, "gaca.validate": 0, "gaca.persist": 0, "gaca.config": 1,
    "gaca.advantage": 2, "gaca.envs": 2, "gaca.policy": 2,
    "gaca.rollout": 3, "gaca.integrations": 4, "gaca.train": 4, "gaca.testing": 5, "gaca.lab": 5, "gaca.cli": 6,
}


def _layer(module: str) -> tuple[str, int]:
    top = ".".join(module.split(".")[:2])
    return top, LAYERS[top]


def _modules(package: Path, name: str) -> dict[str, Path]:
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = [name, *path.relative_to(package).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(package: Path, name: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its source (a submodule named by
    ``from pkg import sub`` counts as ``pkg.sub``; an import of a name counts as its module)."""
    modules = _modules(package, name)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                while target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles a depth-first search closes (none if and only if the graph has no cycle)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                found.append([*path[path.index(dep):], dep])
            elif dep not in state:
                visit(dep)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_the_envs_package_has_no_import_cycle():
    graph = import_graph(Path(gaca.envs.__file__).parent, "gaca.envs")
    assert "gaca.envs.alfworld.generator" in graph["gaca.envs.alfworld"]  # function-level imports are seen
    assert cycles(graph) == []


def test_gaca_has_no_import_cycle_and_no_upward_import():
    graph = import_graph(Path(gaca.__file__).parent, "gaca")
    assert cycles(graph) == []
    upward = sorted((a, b) for a, deps in graph.items() if a != "gaca" for b in deps if b != "gaca"
                    and _layer(a)[0] != _layer(b)[0] and _layer(b)[1] >= _layer(a)[1])
    assert upward == []


def test_cycles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
