"""No module of specsim imports another that imports it back, counting every import.

The graph is read from the source with ``ast``, so it counts what running the code would not always show:
imports at top level, inside functions (lazy imports), under ``if TYPE_CHECKING:``, in ``try`` blocks, and
``importlib.import_module("a.literal.name")``. ``from pkg import name`` is an edge to ``pkg.name`` when that
is a module, else to ``pkg``; importing a module is not counted as importing its parent packages (that is
how packages work, not a cycle). A cycle is a strongly connected component of two or more modules; the
failure message prints one concrete loop through each, with the file and line of every import on it.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import specsim

PKG_DIR = Path(specsim.__file__).resolve().parent



# ------------------------------------------------------------------------------------------ the graph

def module_files(pkg_dir: Path, pkg_name: str) -> dict[str, Path]:
    """Dotted module name -> source file for every ``.py`` under ``pkg_dir`` (packages by their __init__)."""
    out = {}
    for path in sorted(pkg_dir.rglob("*.py")):
        parts = [pkg_name, *path.relative_to(pkg_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _deepest_module(name: str, modules: dict[str, Path]) -> str | None:
    """The longest dotted prefix of ``name`` that is one of ``modules`` (None outside the package)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def _import_targets(node: ast.AST, module: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    """Modules of the package that one import statement (or import_module call) imports."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:                                     # relative: from the module's own package up
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
          and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
          and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        names = [node.args[0].value]
    else:
        return []
    return [t for t in (_deepest_module(n, modules) for n in names) if t is not None and t != module]


def import_graph(pkg_dir: Path, pkg_name: str) -> dict[str, dict[str, tuple[Path, int]]]:
    """module -> {imported module of the package: (file, line) of its first import there}."""
    modules = module_files(pkg_dir, pkg_name)
    graph: dict[str, dict[str, tuple[Path, int]]] = {}
    for module, path in modules.items():
        edges: dict[str, tuple[Path, int]] = {}
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            for target in _import_targets(node, module, path.name == "__init__.py", modules):
                if target not in edges or node.lineno < edges[target][1]:
                    edges[target] = (path, node.lineno)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, dict]) -> list[list[str]]:
    """Strongly connected components with two or more modules (Tarjan), each sorted, sorted by first name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def loop_through(graph: dict[str, dict], component: list[str]) -> list[str]:
    """One closed path a -> ... -> a inside a strongly connected component (breadth-first, shortest)."""
    start, members = component[0], set(component)
    parent: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(parent[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if w in members and w not in parent:
                    parent[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no loop through {component}")


def describe_cycle(graph: dict[str, dict], component: list[str], root: Path) -> str:
    """``a -> b (a.py:12) -> a (b.py:30)`` for one loop of the component, then its other members."""
    path = loop_through(graph, component)
    steps = [path[0]]
    for a, b in zip(path, path[1:]):
        file, line = graph[a][b]
        steps.append(f"{b} ({file.relative_to(root)}:{line})")
    rest = sorted(set(component) - set(path))
    return " -> ".join(steps) + (f"; also in the cycle: {', '.join(rest)}" if rest else "")


# ------------------------------------------------------------------------------------------ specsim

def test_no_import_cycle_in_specsim():
    graph = import_graph(PKG_DIR, "specsim")
    assert len(graph) > 30 and "specsim.policies.base" in graph                 # the whole package was read
    found = list(cycles(graph))
    assert not found, "import cycles (a module imports another that imports it back):\n" + "\n".join(
        describe_cycle(graph, c, PKG_DIR.parent) for c in found)


def test_known_cycles_stay_fixed():
    """The two cycles issue 11 found behind lazy imports point one way now."""
    graph = import_graph(PKG_DIR, "specsim")
    assert "specsim.acceptance.model" in graph["specsim.acceptance.fitting"] and "specsim.acceptance.fitting" not in graph["specsim.acceptance.model"]
    assert "specsim.policies.base" in graph["specsim.policies.plugins"]
    assert "specsim.policies.plugins" in graph["specsim.policies.registry"]
    assert not {"specsim.policies", "specsim.policies.registry"} & set(graph["specsim.policies.plugins"])


# ------------------------------------------------------------------------------------------ the checker itself

def _write_package(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root / "pkg"


def test_graph_counts_lazy_type_checking_relative_and_import_module(tmp_path):
    pkg = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": """
            import os

            def f():
                from pkg import b          # lazy, inside a function
                return b
            """,
        "pkg/b.py": """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from .a import f           # relative, type checking only
            """,
        "pkg/c.py": """
            import importlib
            def load():
                return importlib.import_module("pkg.d")
            """,
        "pkg/d.py": "from . import c\n",
        "pkg/sub/__init__.py": "from .e import g\n",
        "pkg/sub/e.py": """
            try:
                from .. import a
                from ..b import TYPE_CHECKING
                import pkg.sub.e as me      # itself: not an edge
            except ImportError:
                pass
            g = 1
            """,
    })
    graph = import_graph(pkg, "pkg")
    assert {m: sorted(e) for m, e in graph.items()} == {
        "pkg": [], "pkg.a": ["pkg.b"], "pkg.b": ["pkg.a"], "pkg.c": ["pkg.d"], "pkg.d": ["pkg.c"],
        "pkg.sub": ["pkg.sub.e"], "pkg.sub.e": ["pkg.a", "pkg.b"]}
    assert graph["pkg.a"]["pkg.b"][1] == 5 and graph["pkg.b"]["pkg.a"][1] == 4   # the line of the import
    assert cycles(graph) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]
    assert describe_cycle(graph, ["pkg.a", "pkg.b"], tmp_path) == "pkg.a -> pkg.b (pkg/a.py:5) -> pkg.a (pkg/b.py:4)"


def test_cycle_of_three_reports_one_loop_and_acyclic_graph_passes():
    graph = {"a": {"b": (Path("a.py"), 1)}, "b": {"c": (Path("b.py"), 2)},
             "c": {"a": (Path("c.py"), 3), "d": (Path("c.py"), 4)}, "d": {}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert loop_through(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]
    assert describe_cycle(graph, ["a", "b", "c"], Path(".")) == "a -> b (a.py:1) -> c (b.py:2) -> a (c.py:3)"
    del graph["c"]["a"]
    assert cycles(graph) == []
