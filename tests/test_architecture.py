"""The core stays easy to see (issue 11): small engine functions, replicas that never see the cluster."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import specsim

PKG = Path(specsim.__file__).resolve().parent
CORE = ["engine/replica.py", "engine/cluster.py", "engine/kv.py", "engine/workload.py", "engine/draws.py", "engine/kernels.py"]


@pytest.mark.parametrize("name", CORE)
def test_core_functions_are_under_30_lines(name):
    tree = ast.parse((PKG / name).read_text())
    long = [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 >= 30]
    assert not long, f"{name}: functions of 30 lines or more: {long}"


def test_engine_never_imports_the_cluster_or_the_simulation():
    tree = ast.parse((PKG / "engine" / "replica.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not imported & {"specsim.engine.cluster", "specsim.simulation", "specsim.analysis.metrics"}
