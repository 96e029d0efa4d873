"""Shared test fixtures: where the public data lives (``SPECSIM_SHARED``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Tests never read or write the user's acceptance-model cache (specsim.acceptance.cache): one fresh folder a session.
os.environ["SPECSIM_CACHE_DIR"] = tempfile.mkdtemp(prefix="specsim-test-cache-")


def shared_dir() -> Path:
    """The shared data folder: ``$SPECSIM_SHARED`` or ``../shared`` next to the repository."""
    return Path(os.environ.get("SPECSIM_SHARED", REPO.parent / "shared")).resolve()


@pytest.fixture(scope="session")
def shared() -> Path:
    """Path of the shared folder (with ``data/`` and ``anchors/``).

    Skips the test when the folder is absent on a developer's machine; fails when ``CI=true``.
    """
    d = shared_dir()
    if not (d / "data").is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the shared data folder {d} is missing (set SPECSIM_SHARED)")
        pytest.skip(f"shared data folder {d} not found (set SPECSIM_SHARED)")
    return d
