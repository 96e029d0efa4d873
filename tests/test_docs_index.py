"""The README stays a short first read with a complete index of docs/ (issue 19)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario

REPO = Path(__file__).resolve().parent.parent


def test_readme_indexes_every_docs_page_and_stays_short():
    readme = (REPO / "README.md").read_text()
    missing = [p.name for p in sorted((REPO / "docs").glob("*.md")) if f"`docs/{p.name}`" not in readme]
    assert not missing
    assert len(readme.splitlines()) <= 180


def test_a_misspelt_scenario_key_names_the_closest_key():
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(overrides=["cluster.num_replica=2"])
    assert e.value.field == "cluster.num_replica" and "closest valid: 'num_replicas'" in e.value.expected
