"""Load sweeps: every (policy, knobs, load, seed) point of a grid, run resumably on an executor.

A sweep expands its axes into points; each point is one :func:`specsim.simulation.simulate` call.
One concern per module, data flowing one way (spec -> point -> executors -> runner; store only
writes records):

* :mod:`~specsim.sweep.spec`: :class:`SweepSpec` (the axes, validated), point expansion and identity
  (a point's id hashes its fully resolved configuration), which knobs a policy uses.
* :mod:`~specsim.sweep.point`: one point as a simulation, turned into a record (a point's own input
  error is recorded with status ``error``; the sweep goes on).
* :mod:`~specsim.sweep.executors`: ``serial``, ``process``, ``ray``, ``dask``; identical records.
* :mod:`~specsim.sweep.store`: records on disk (each written atomically as soon as its point
  finishes, checksummed, resumable) and the manifest; the record format and its reading are
  :mod:`specsim.analysis.sweep_records`.
* :mod:`specsim.analysis.sweep_tables`: records as DataFrames (:func:`results_frame`, :func:`seed_spread`).
* :mod:`~specsim.sweep.runner`: :func:`run_sweep`, reporting progress through an optional callback.

The analysis side (frontier, report, plots) reads records through ``analysis.sweep_records`` and
``analysis.sweep_tables``, never importing this package. Parsing of comma lists and the progress bar live
in the CLI (``specsim/cli/sweep_cmd.py``).

Every name below is importable from ``specsim.sweep`` and loaded on first use (PEP 562), so importing
one submodule does not load the runner or the executors.
"""

from __future__ import annotations

import importlib
from typing import Any

_RECORDS, _TABLES = "specsim.analysis.sweep_records", "specsim.analysis.sweep_tables"
#: public name -> the submodule that defines it (a dotted path: a module outside this package)
_EXPORTS = {
    "EXECUTORS": "executors",
    "PointTask": "point", "run_point": "point",
    "ProgressCallback": "runner", "SweepOutcome": "runner", "SweepProgress": "runner", "run_sweep": "runner",
    "SweepPoint": "spec", "SweepSpec": "spec", "expand_points": "spec", "policy_uses_threshold": "spec",
    "point_knobs": "spec",
    "RECORD_VERSION": "store", "finished_ids": "store", "write_manifest": "store", "write_record": "store",
    "SUMMARY_KEYS": _RECORDS, "load_records": _RECORDS, "points_dir": _RECORDS, "read_record": _RECORDS,
    "SPREAD_METRICS": _TABLES, "results_frame": _TABLES, "seed_spread": _TABLES,
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Load a public name from its submodule on first use (``from specsim.sweep import run_sweep``)."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'specsim.sweep' has no attribute {name!r}")
    module = _EXPORTS[name] if "." in _EXPORTS[name] else f"specsim.sweep.{_EXPORTS[name]}"
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
