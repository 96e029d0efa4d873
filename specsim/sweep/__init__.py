"""Load sweeps: every (policy, knobs, load, seed) point of a grid, run resumably on an executor.

A sweep expands its axes into points; each point is one :func:`specsim.simulation.simulate` call.
One concern per module, data flowing one way (spec -> point -> executors -> runner; store and
tables only read and write records):

* :mod:`~specsim.sweep.spec`: :class:`SweepSpec` (the axes, validated), point expansion and identity
  (a point's id hashes its fully resolved configuration), which knobs a policy uses.
* :mod:`~specsim.sweep.point`: one point as a simulation, turned into a record (a point's own input
  error is recorded with status ``error``; the sweep goes on).
* :mod:`~specsim.sweep.executors`: ``serial``, ``process``, ``ray``, ``dask``; identical records.
* :mod:`~specsim.sweep.store`: records on disk (each written atomically as soon as its point
  finishes, checksummed, resumable) and the manifest.
* :mod:`~specsim.sweep.tables`: records as DataFrames (:func:`results_frame`, :func:`seed_spread`).
* :mod:`~specsim.sweep.runner`: :func:`run_sweep`, reporting progress through an optional callback.

:mod:`specsim.frontier` reads records through ``store`` and ``tables`` only. Parsing of comma lists
and the progress bar live in the CLI (``specsim/cli/sweep_cmd.py``).
"""

from specsim.sweep.executors import EXECUTORS
from specsim.sweep.point import PointTask, run_point
from specsim.sweep.runner import ProgressCallback, SweepOutcome, SweepProgress, run_sweep
from specsim.sweep.spec import SweepPoint, SweepSpec, expand_points, policy_uses_threshold, resolve_knobs
from specsim.sweep.store import (RECORD_VERSION, SUMMARY_KEYS, finished_ids, load_records, points_dir, read_record,
                                 write_manifest, write_record)
from specsim.sweep.tables import SPREAD_METRICS, results_frame, seed_spread

__all__ = [
    "EXECUTORS", "PointTask", "ProgressCallback", "RECORD_VERSION", "SPREAD_METRICS", "SUMMARY_KEYS",
    "SweepOutcome", "SweepPoint", "SweepProgress", "SweepSpec", "expand_points", "finished_ids", "load_records",
    "points_dir", "policy_uses_threshold", "read_record", "resolve_knobs", "results_frame", "run_point",
    "run_sweep", "seed_spread", "write_manifest", "write_record",
]
