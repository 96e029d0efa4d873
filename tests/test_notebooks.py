"""The notebooks run top to bottom headless (nbclient + ipykernel) and match notebooks/build.py.

Each notebook asserts on what it computes (closed-loop invariants, frontiers at SLA tiers, ECE before
and after STS, a custom policy beside dspark), so a notebook that breaks or whose claims stop holding
fails here. Committed notebooks carry no outputs.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(p.name for p in NB_DIR.glob("*.ipynb"))


def _build_module():
    spec = importlib.util.spec_from_file_location("notebooks_build", NB_DIR / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_notebooks_are_built_and_stripped():
    """The committed notebooks are exactly what build.py writes: no outputs, no execution counts."""
    build = _build_module()
    assert NOTEBOOKS == sorted(build.NOTEBOOKS)
    for name in NOTEBOOKS:
        nb = nbformat.read(NB_DIR / name, as_version=4)
        assert nb == build.build(name), f"{name} differs from notebooks/build.py: run python notebooks/build.py"
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NB_DIR / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NB_DIR)}})
    client.execute()                      # raises CellExecutionError naming the failing cell
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
