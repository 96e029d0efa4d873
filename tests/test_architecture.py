"""The core stays easy to see (issues 11 and 19): small engine functions, the layers of docs/architecture.md,
one KV manager that changes the block pool, records written only through their own methods."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import specsim
from specsim.engine.records import Records

PKG = Path(specsim.__file__).resolve().parent
CORE = ["engine/replica.py", "engine/scheduler.py", "engine/kv_manager.py", "engine/step_runner.py",
        "engine/policy_calls.py", "engine/state.py", "engine/cluster.py", "engine/kv.py", "engine/workload.py",
        "engine/draws.py", "engine/kernels.py"]

#: The layer diagram of docs/architecture.md: which part of specsim/ (a sub-package or a top-level module) may
#: import which. Read top-down; an entry lists every part it may import.
# usable from every level (__init__: the version)
UTILITIES = {"errors", "fmt", "progress", "tomlfile", "jsonfiles", "twins", "figures", "sections", "__init__"}
LAYERS: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {"backends", "studies", "sweep", "simulation", "run_config", "run_notices", "analysis", "engine", "policies",
            "acceptance", "hardware", "workload", "scenario", "scenario_schema"},
    "backends": {"simulation", "analysis", "engine", "policies", "acceptance", "hardware", "scenario"},
    "studies": {"simulation", "analysis", "acceptance", "hardware", "workload", "scenario"},
    "sweep": {"simulation", "run_config", "analysis", "policies", "hardware", "scenario", "workload"},
    "simulation": {"run_config", "run_notices", "analysis", "engine", "policies", "acceptance", "hardware", "scenario",
                   "workload"},
    "run_config": {"engine", "policies", "hardware", "scenario"},
    "run_notices": {"acceptance", "hardware", "scenario"},
    "analysis": {"hardware"},
    "engine": {"policies", "acceptance"},
    "policies": {"hardware"},
    "acceptance": {"scenario"},
    "hardware": {"scenario"},
    "workload": set(),
    "scenario_schema": {"scenario"},
    "scenario": set(),
}

#: Imports that point up the diagram, each with the one file that makes it; listed so that no new one appears
#: unnoticed (remove an entry when its import goes).
UPWARD: dict[tuple[str, str], str] = {}


def _part(module: str) -> str | None:
    """The part of specsim/ a dotted module name belongs to (None outside specsim)."""
    names = module.split(".")
    if names[0] != "specsim":
        return None
    return names[1] if len(names) > 1 else "__init__"


def _imports(path: Path) -> set[str]:
    """Parts of specsim/ imported anywhere in ``path`` (function-level imports included)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] if node.module != "specsim" else [f"specsim.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {p for p in map(_part, names) if p is not None}
    return out


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        part = path.relative_to(PKG).parts[0].removesuffix(".py")
        edges.setdefault(part, set()).update(_imports(path) - {part} - UTILITIES)
    return edges


def _sources():
    for path in sorted(PKG.rglob("*.py")):
        yield path.relative_to(PKG).as_posix(), ast.parse(path.read_text())


#: No module in specsim/ is longer than this (lines; the project's rule, issue 19).
MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines():
    lines = {name: len(path.read_text().splitlines())
             for name, path in ((p.relative_to(PKG).as_posix(), p) for p in sorted(PKG.rglob("*.py")))}
    long = {name: n for name, n in lines.items() if n > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
    assert len(lines) > 50 and max(lines.values()) > 300      # it read the package's modules


@pytest.mark.parametrize("name", CORE)
def test_core_functions_are_under_30_lines(name):
    tree = ast.parse((PKG / name).read_text())
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 >= 30]
    assert not long, f"{name}: functions of 30 lines or more: {long}"


def test_imports_follow_the_layer_diagram():
    edges = _edges()
    assert set(edges) - UTILITIES <= set(LAYERS), f"parts missing from the diagram: {set(edges) - set(LAYERS)}"
    wrong = {(a, b) for a, bs in edges.items() if a not in UTILITIES for b in bs
             if b not in LAYERS[a] and (a, b) not in UPWARD}
    assert not wrong, f"imports the layer diagram does not draw: {sorted(wrong)}"


def test_the_diagram_has_no_cycle_besides_the_listed_upward_imports():
    order: list[str] = []
    seen: set[str] = set()

    def visit(part: str, path: tuple[str, ...]) -> None:
        assert part not in path, f"cycle in the layer diagram: {path + (part,)}"
        if part not in seen:
            for below in sorted(LAYERS[part]):
                visit(below, path + (part,))
            seen.add(part)
            order.append(part)

    for part in LAYERS:
        visit(part, ())
    assert order[0] in {"scenario", "workload"} and set(order) == set(LAYERS)


def test_engine_hardware_and_acceptance_never_import_upward():
    edges = _edges()
    assert not edges["engine"] & {"analysis", "sweep", "cli", "studies", "simulation", "backends", "hardware"}
    assert not edges["hardware"] & {"engine", "studies", "simulation", "sweep", "cli", "policies"}
    assert not edges["acceptance"] & {"engine", "policies", "simulation", "sweep", "cli", "studies"}


REPLICA_SIDE = ["replica.py", "scheduler.py", "kv_manager.py", "step_runner.py", "policy_calls.py", "state.py"]


@pytest.mark.parametrize("name", REPLICA_SIDE)
def test_the_replica_never_sees_the_cluster_or_the_simulation(name):
    tree = ast.parse((PKG / "engine" / name).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not imported & {"specsim.engine.cluster", "specsim.simulation", "specsim.analysis.metrics"}


POOL_CHANGES = {"take", "release", "acquire_cached", "publish", "drop_cached"}   # BlockPool's mutating methods


def _pool_changes(tree: ast.AST) -> list[tuple[int, str]]:
    """Calls of BlockPool's mutating methods on an expression naming a pool (``pool``, ``self.kv.pool``...)."""
    return [(node.lineno, ast.unparse(node.func)) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in POOL_CHANGES and "pool" in ast.unparse(node.func.value).lower()]


def _records_attributes() -> set[str]:
    """Records' data attributes (its per-request arrays and counters)."""
    return {k for k, v in vars(Records(1)).items() if not k.startswith("_") and not callable(v)}


def _records_writes(tree: ast.AST, attrs: set[str]) -> list[tuple[int, str]]:
    """Assignments to ``<records>.<attr>`` or ``<records>.<attr>[...]`` (``records``, ``rec``, ``self.records``)."""
    out = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for t in targets:
            base = t.value if isinstance(t, ast.Subscript) else t
            if (isinstance(base, ast.Attribute) and base.attr in attrs
                    and ast.unparse(base.value).split(".")[-1] in {"records", "rec", "_records"}):
                out.append((node.lineno, ast.unparse(t)))
    return out


def test_only_the_kv_manager_changes_a_block_pool():
    found = [(name, *c) for name, tree in _sources() if name not in {"engine/kv_manager.py", "engine/kv.py"}
             for c in _pool_changes(tree)]
    assert not found, f"BlockPool changed outside engine/kv_manager.py: {found}"
    assert len(_pool_changes(ast.parse((PKG / "engine" / "kv_manager.py").read_text()))) >= 9


def test_records_are_written_only_through_their_methods():
    attrs = _records_attributes()
    assert {"preemptions", "first_token_s", "num_clips", "unservable_reason"} <= attrs
    found = [(name, *w) for name, tree in _sources() if name != "engine/records.py"
             for w in _records_writes(tree, attrs)]
    assert not found, f"Records written outside its methods: {found}"


def test_the_write_checks_see_writes():
    """The two AST checks above find what they look for (so they cannot pass for want of looking)."""
    tree = ast.parse("records.preemptions[idx] += 1\nself.records.num_clips = 0\nrec.done_s[ids] = t\n"
                     "s.preemptions[i] = 1\nself.kv.pool.take(3)\nslots.take(2)\n")
    assert [line for line, _ in _records_writes(tree, _records_attributes())] == [1, 2, 3]
    assert _pool_changes(tree) == [(5, "self.kv.pool.take")]
