"""The sweep runner: expand the points, skip finished ones, run the rest, write each record at once.

Re-running skips finished points (:func:`specsim.sweep.store.finished_ids`); a killed sweep (Ctrl-C,
SIGKILL) loses only the points still running. ``retry_failed`` recomputes points recorded with status
``error``; ``force`` recomputes every point. Progress is reported through an optional callback, so the
library draws nothing (``specsim sweep`` draws a progress bar from it).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from specsim.analysis.sweep_records import load_records
from specsim.scenario import Scenario
from specsim.sweep.executors import Executor, get_executor
from specsim.sweep.point import PointTask
from specsim.sweep.spec import SweepPoint, SweepSpec, expand_points, sweep_inputs
from specsim.sweep.store import check_same_scenario, check_same_trace, finished_ids, write_manifest, write_record


@dataclass(frozen=True)
class SweepProgress:
    """A progress report of :func:`run_sweep`.

    Attributes:
        total: points of the sweep.
        done: points finished (before this call or by it).
        running: the point(s) running now (at most ``jobs`` for ray and dask; empty at the start).
    """

    total: int
    done: int
    running: tuple[SweepPoint, ...] = ()


ProgressCallback = Callable[[SweepProgress], None]


@dataclass
class SweepOutcome:
    """What :func:`run_sweep` did.

    Attributes:
        points: every point of the sweep.
        skipped: points already finished before this call.
        computed: points computed by this call.
        recomputed_bad: records that failed their checks and were recomputed.
        failed: ids of points whose status is ``error``.
        wall_time_s: wall seconds of this call.
    """

    points: list[SweepPoint]
    skipped: int
    computed: int
    recomputed_bad: int
    failed: list[str]
    wall_time_s: float


def _tasks(points: list[SweepPoint], scenario: Scenario, trace) -> list[PointTask]:
    """One task per point, biggest first (better packing on a pool; an ETA that errs on the safe side)."""
    todo = sorted(points, key=lambda p: (-p.num_requests * (p.load if p.mode == "closed" else 1.0), p.id))
    heads: dict[int, Any] = {}

    def head(n: int):
        if n not in heads:
            heads[n] = trace.head(n) if n < len(trace) else trace
        return heads[n]
    return [PointTask(p, scenario, head(p.num_requests), p.num_requests >= len(trace)) for p in todo]


def _run_and_record(run: Executor, tasks: list[PointTask], jobs: int, address: str | None, out_dir: str | Path,
                    state: SweepProgress, report: ProgressCallback) -> list[str]:
    """Run ``tasks`` on ``run``, write each record as it arrives and report progress; returns failed ids."""
    failed: list[str] = []
    report(state)

    def on_start(running: list[SweepPoint]) -> None:
        nonlocal state
        state = replace(state, running=tuple(running))
        report(state)
    for rec in run(tasks, jobs, address, on_start):
        write_record(out_dir, rec)
        if rec["status"] != "ok":
            failed.append(rec["id"])
        state = SweepProgress(state.total, state.done + 1, tuple(p for p in state.running if p.id != rec["id"]))
        report(state)
    return failed


def run_sweep(spec: SweepSpec, scenario: Scenario, trace, out_dir: str | Path, *, executor: str = "process",
              jobs: int | None = None, address: str | None = None, retry_failed: bool = False,
              force: bool = False, progress: ProgressCallback | None = None,
              tiers: tuple[float, ...] | None = None) -> SweepOutcome:
    """Run every unfinished point of ``spec`` and write each record as soon as it finishes.

    Args:
        spec: the sweep axes; scenario: a Scenario, a scenario TOML path or None (the default); trace: the full
            trace, a Trace or a JSONL path (:func:`specsim.sweep.spec.sweep_inputs`).
        out_dir: results directory (``sweep.json`` + ``points/``).
        executor: ``serial``, ``process``, ``ray`` or ``dask``.
        jobs: parallel workers (default: the CPU count); ignored by ``serial``.
        address: ray or dask scheduler address (default: start a local cluster).
        retry_failed: recompute points recorded with status ``error``.
        force: recompute every point.
        progress: called with a :class:`SweepProgress` at the start, whenever the running points change
            and after each record is written; None (or False) for no reports. It runs in the driver.
        tiers: SLA tiers (TPS/user) stored in the manifest for later commands (default:
            :data:`specsim.analysis.tiers.DEFAULT_TIERS`).

    Raises:
        SpecsimInputError: bad axes, unknown executor, policy, drafter or profile; a missing extra; an
            ``out_dir`` holding points of another scenario, or of another trace that this sweep leaves in place.
    """
    scenario, trace = sweep_inputs(scenario, trace)
    run = get_executor(executor)
    t0 = time.perf_counter()
    jobs = max(1, jobs or os.cpu_count() or 1)
    points = expand_points(spec, scenario, trace)
    from specsim.analysis.tiers import DEFAULT_TIERS

    check_same_scenario(out_dir, scenario)
    check_same_trace(out_dir, points, trace)
    write_manifest(out_dir, spec, scenario, trace, points, DEFAULT_TIERS if tiers is None else tiers)
    done, bad = (set(), 0) if force else finished_ids(out_dir, [p.id for p in points], retry_failed)
    tasks = _tasks([p for p in points if p.id not in done], scenario, trace)
    failed = [r["id"] for r in load_records(out_dir, [p.id for p in points if p.id in done]) if r["status"] != "ok"]
    failed += _run_and_record(run, tasks, jobs, address, out_dir, SweepProgress(len(points), len(done)),
                              progress or (lambda _: None))
    return SweepOutcome(points, len(done), len(tasks), bad, sorted(failed), time.perf_counter() - t0)
