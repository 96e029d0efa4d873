"""The studies ship their inputs as package data; the engine and the hardware model never import the studies."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import specsim
from specsim.studies import validation

PKG = Path(specsim.__file__).resolve().parent
TESTS_DATA = Path(__file__).resolve().parent / "data"


def test_validation_reads_package_data_not_tests():
    assert validation.DATA == PKG / "studies" / "data" / "validation"
    assert validation.CONFIGS == PKG / "studies" / "data" / "hf_configs"
    rows = validation.load_rows()
    assert set(validation.SETUPS) <= set(rows.series)          # every modelled series has its rows


@pytest.mark.parametrize("folder", ["validation", "hf_configs"])
def test_packaged_copy_equals_the_tests_copy(folder):
    """tests/data keeps its own copy for the other tests; the two must not drift apart."""
    packaged = {p.name: p.read_bytes() for p in (PKG / "studies" / "data" / folder).iterdir()}
    ours = {p.name: p.read_bytes() for p in (TESTS_DATA / folder).iterdir()}
    assert packaged == ours


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    mods = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    return mods | {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}


@pytest.mark.parametrize("layer", ["engine", "hardware"])
def test_engine_and_hardware_never_import_the_studies(layer):
    bad = {str(p.relative_to(PKG)): m for p in (PKG / layer).rglob("*.py") for m in _imports(p)
           if m.startswith("specsim.studies")}
    assert not bad


def test_the_library_never_reads_tests():
    """No library module builds a path into the repository's tests/ folder (an installed package has none)."""
    hits = [str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
            if '"tests"' in p.read_text() or "'tests'" in p.read_text() or '/ "tests" /' in p.read_text()]
    assert not hits
