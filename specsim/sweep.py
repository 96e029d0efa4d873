"""Load sweeps: every (policy, knobs, load, seed) point of a grid, run resumably on an executor.

A sweep expands its axes into points; each point is one :func:`specsim.simulation.simulate` call.

* Load: closed-loop concurrency (N users) or open-loop rate scale; policy knobs (``gamma``,
  ``threshold``) are extra axes. A knob a policy ignores is dropped from its points (``mtp1`` forces
  gamma 1, ``none`` gamma 0, only policies whose state changes with ``threshold`` keep it), so no point
  is simulated twice under two names.
* Identity: a point's id is the SHA-256 (first 20 hex digits) of its fully resolved configuration:
  the resolved scenario dict, the step-time profile's content, the policy name (and a plug-in file's
  content), the resolved knobs (gamma, drafter, threshold), the load, the seed, the number of trace
  requests, the horizon, and the trace's content hash. The simulator's own code is not part of it:
  after changing the engine, sweep into a fresh directory (or pass ``--force``).
* Records: each finished point is written at once to ``DIR/points/<id>.json`` through a temporary file,
  fsync and ``os.replace``, so a record is either complete or absent; each record also carries a
  SHA-256 checksum of its body, and a record that fails to parse or to match its checksum (a file cut
  off outside this protocol) is deleted and recomputed. Re-running skips finished points; a killed
  sweep (Ctrl-C, SIGKILL) loses only the points still running.
* Failed points (a :class:`SpecsimInputError`, e.g. a closed-loop window that never opens because the
  trace is too short for the concurrency) are recorded with status ``error`` and their message; the
  sweep goes on. ``retry_failed`` recomputes them.
* Executors: ``serial``, ``process`` (a local process pool, the default), ``ray`` and ``dask`` (optional
  extras, imported only when chosen; they connect to ``address`` or start a local cluster). Records are
  written by the driver, so workers need no shared file system. A point's numbers depend only on its
  configuration, so every executor gives identical records (wall_time_s aside).

Per point, a record keeps the run's summary (``vllm bench serve`` names, see specsim.metrics) and, for
SLA attainment and goodput (specsim.frontier), the per-request TPS/user and output tokens of the
measured multi-token requests (closed loop: those issued inside the window).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError
from specsim.scenario import Scenario

RECORD_VERSION = 1
EXECUTORS = ("serial", "process", "ray", "dask")

#: Summary keys copied into a record (plus ``load`` and ``per_domain``).
SUMMARY_KEYS = (
    "completed", "unfinished", "unservable", "total", "measured_requests", "total_input_tokens",
    "total_output_tokens", "duration_s", "request_throughput", "output_throughput", "output_throughput_per_gpu",
    "decode_gpus", "prefill_gpus", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms",
    "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "mean_tps_per_user",
    "median_tps_per_user", "num_single_token", "mean_acceptance_length", "acceptance_rate",
    "mean_verify_tokens_per_request", "steps", "clipped_verify_lengths", "policy", "drafter", "gamma", "seed",
)

#: Metrics summarised over seeds by :func:`seed_spread` (mean, std, min, max).
SPREAD_METRICS = ("mean_tps_per_user", "output_throughput_per_gpu", "mean_verify_tokens_per_request",
                  "mean_acceptance_length", "mean_ttft_ms", "median_tps_per_user")


# --------------------------------------------------------------------------------------------- spec
@dataclass(frozen=True)
class SweepSpec:
    """The axes of a sweep.

    Args:
        policies: policy names (registry names or ``path/file.py:Name``).
        concurrency: closed-loop user counts (>= 1); may be combined with ``rate_scales``.
        rate_scales: open-loop rate scales (> 0): arrival times divided by each.
        seeds: run seeds; each (policy, knobs, load) point runs once per seed.
        gammas: draft block lengths to sweep; None = the scenario's ``engine.gamma``.
        thresholds: specdecpp thresholds to sweep; None = the scenario's ``policy.threshold``.
        num_requests: the first N trace requests (None = all).
        requests_per_user: closed loop only: a point at concurrency C uses
            min(len(trace), max(num_requests, requests_per_user * C)) requests, so that every run has a
            closed-loop window (None: num_requests for every load).
        max_sim_s: explicit horizon in simulated seconds (None: run to completion).
        drafter: override the scenario's drafter (``mtp1`` and ``none`` force their own).

    Raises:
        SpecsimInputError: an empty axis or a value out of range (naming the flag).
    """

    policies: tuple[str, ...]
    concurrency: tuple[int, ...] = ()
    rate_scales: tuple[float, ...] = ()
    seeds: tuple[int, ...] = (0,)
    gammas: tuple[int | None, ...] = (None,)
    thresholds: tuple[float | None, ...] = (None,)
    num_requests: int | None = None
    requests_per_user: int | None = None
    max_sim_s: float | None = None
    drafter: str | None = None

    def __post_init__(self) -> None:
        def bad(flag: str, expected: str, got: Any) -> None:
            raise SpecsimInputError(f"--{flag}", None, flag, expected, repr(got))
        if not self.policies:
            bad("policies", "at least one policy", self.policies)
        if not self.concurrency and not self.rate_scales:
            bad("concurrency", "at least one load point (--concurrency or --rate-scales)", ())
        if any(c < 1 for c in self.concurrency):
            bad("concurrency", "ints >= 1", self.concurrency)
        if any(not (r > 0 and math.isfinite(r)) for r in self.rate_scales):
            bad("rate-scales", "finite values > 0", self.rate_scales)
        if not self.seeds:
            bad("seeds", "at least one seed", self.seeds)
        if any(g is not None and g < 0 for g in self.gammas) or not self.gammas:
            bad("gamma", "ints >= 0", self.gammas)
        if any(t is not None and not 0 <= t <= 1 for t in self.thresholds) or not self.thresholds:
            bad("threshold", "values in [0, 1]", self.thresholds)
        if self.num_requests is not None and self.num_requests < 1:
            bad("num-requests", "an int >= 1", self.num_requests)
        if self.requests_per_user is not None and self.requests_per_user < 1:
            bad("requests-per-user", "an int >= 1", self.requests_per_user)


@dataclass(frozen=True)
class SweepPoint:
    """One simulation of a sweep: a fully resolved configuration and its id.

    Attributes:
        id: SHA-256 (20 hex digits) of ``config`` (module docstring).
        policy: policy name as given.
        knobs: resolved knobs: ``gamma`` and ``drafter`` always, ``threshold`` when the policy uses it.
        mode: ``closed`` or ``open``.
        load: concurrency (closed) or rate scale (open).
        seed: run seed.
        num_requests: trace requests simulated (the first N).
        config: the canonical dict the id hashes.
    """

    id: str
    policy: str
    knobs: dict[str, Any]
    mode: str
    load: float
    seed: int
    num_requests: int
    max_sim_s: float | None
    config: dict[str, Any] = field(repr=False)

    def label(self) -> str:
        """A short human label: ``policy gamma=.. c=.. seed=..``."""
        load = f"c={int(self.load)}" if self.mode == "closed" else f"x{self.load:g}"
        kn = " ".join(f"{k}={v}" for k, v in self.knobs.items() if k != "drafter")
        return f"{self.policy} {kn} {load} seed={self.seed}".replace("  ", " ")


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _file_sha(path: str) -> str | None:
    p = Path(path)
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None


def resolve_knobs(policy: str, scenario: Scenario, gamma: int | None, threshold: float | None,
                  drafter: str | None) -> dict[str, Any]:
    """The knobs a policy actually runs with: resolved gamma and drafter, and threshold when it matters.

    Threshold matters when the policy declares a ``threshold`` knob (``policy_knobs``; plug-ins alike).

    Raises:
        SpecsimInputError: unknown policy or drafter.
    """
    from specsim.policies import policy_knobs
    from specsim.simulation import resolve_run

    thr = scenario.policy.threshold if threshold is None else float(threshold)
    extra = {"threshold": thr} if "threshold" in policy_knobs(policy) else {}
    _, _, dname, g, _ = resolve_run(policy, scenario, gamma, drafter, profile=_NO_PROFILE, **extra)
    return {"gamma": int(g), "drafter": dname, **extra}


class _NoProfile:
    """Stands in for a profile while resolving knobs (resolve_run only loads one when none is given)."""


_NO_PROFILE = _NoProfile()


def expand_points(spec: SweepSpec, scenario: Scenario, trace) -> list[SweepPoint]:
    """All distinct points of ``spec`` (module docstring), in a stable order.

    Args:
        spec: the sweep axes.
        scenario: the resolved scenario.
        trace: the full trace (:class:`specsim.trace.Trace`); points use its first ``num_requests``.

    Raises:
        SpecsimInputError: unknown policy, drafter or profile.
    """
    from specsim.hardware.profile import resolve_profile

    scen = scenario.to_dict()
    prof = resolve_profile(scenario.profile.name, scenario.profile.lookup or None)
    base = {"record_version": RECORD_VERSION, "scenario": scen, "profile_sha": _sha(prof.to_dict()),
            "max_sim_s": spec.max_sim_s}
    n_all = len(trace)
    n_base = min(n_all, spec.num_requests or n_all)
    trace_hashes: dict[int, str] = {}

    def trace_hash(n: int) -> str:
        if n not in trace_hashes:
            trace_hashes[n] = trace.head(n).content_hash() if n < n_all else trace.content_hash()
        return trace_hashes[n]

    loads = [("closed", float(c)) for c in spec.concurrency] + [("open", float(r)) for r in spec.rate_scales]
    points: list[SweepPoint] = []
    seen: set[str] = set()
    for policy in spec.policies:
        plugin_sha = _file_sha(policy.rsplit(":", 1)[0]) if ":" in policy else None
        for g in spec.gammas:
            for h in spec.thresholds:
                knobs = resolve_knobs(policy, scenario, g, h, spec.drafter)
                for mode, load in loads:
                    n = n_base
                    if mode == "closed" and spec.requests_per_user:
                        n = min(n_all, max(n_base, spec.requests_per_user * int(load)))
                    for seed in spec.seeds:
                        cfg = dict(base, policy=policy, plugin_sha=plugin_sha, knobs=knobs,
                                   load={"mode": mode, "value": load}, seed=int(seed), num_requests=n,
                                   trace_sha=trace_hash(n))
                        pid = _sha(cfg)[:20]
                        if pid in seen:
                            continue
                        seen.add(pid)
                        points.append(SweepPoint(pid, policy, knobs, mode, load, int(seed), n, spec.max_sim_s, cfg))
    return points


# --------------------------------------------------------------------------------------------- one point
@dataclass(frozen=True)
class PointTask:
    """What a worker needs to run one point: the point, the scenario and its trace slice (picklable)."""

    point: SweepPoint
    scenario: Scenario
    trace: Any


def _round6(x: np.ndarray) -> list[float]:
    return [float(f"{v:.6g}") for v in x.tolist()]


def run_point(task: PointTask) -> dict[str, Any]:
    """Simulate one point and return its record (never raises for a point's own failure).

    Returns:
        A record dict: ``id``, ``config``, ``status`` (``ok`` or ``error``), ``error`` (message or None),
        ``error_type``, ``summary`` (SUMMARY_KEYS plus ``load``, ``per_domain``), ``requests`` (per measured
        multi-token request: ``tps_per_user`` tok/s and ``output_tokens``), ``provenance``, ``wall_time_s``.
    """
    from specsim.simulation import simulate

    p = task.point
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"record_version": RECORD_VERSION, "id": p.id, "config": p.config,
                           "status": "ok", "error": None, "error_type": None, "summary": None,
                           "requests": None, "provenance": None}
    knobs = {k: v for k, v in p.knobs.items() if k == "threshold"}
    try:
        res = simulate(task.trace, p.policy, task.scenario, seed=p.seed,
                       concurrency=int(p.load) if p.mode == "closed" else None,
                       rate_scale=p.load if p.mode == "open" else 1.0, max_sim_s=p.max_sim_s,
                       gamma=p.knobs["gamma"], drafter=p.knobs["drafter"], **knobs)
    except SpecsimInputError as e:  # a point the configuration cannot run is recorded, the sweep goes on
        rec.update(status="error", error=str(e), error_type=type(e).__name__)
        rec["wall_time_s"] = time.perf_counter() - t0
        return rec
    s = res.summary
    summary = {k: s.get(k) for k in SUMMARY_KEYS}
    summary["load"] = s["load"]
    summary["per_domain"] = s["per_domain"]
    rq = res.requests
    meas = (rq.status == "completed") & (rq.output_tokens > 1)
    if s["load"]["mode"] == "closed":
        meas &= (rq.arrival_s >= s["load"]["window_start_s"]) & (rq.arrival_s <= s["load"]["window_end_s"])
    rec["summary"] = _jsonable(summary)
    rec["requests"] = {"tps_per_user": _round6(rq.tps_per_user[meas].to_numpy()),
                       "output_tokens": rq.output_tokens[meas].astype(int).tolist()}
    pv = s["provenance"]
    rec["provenance"] = {"specsim_version": pv["specsim_version"], "profile_source": pv["profile_source"],
                         "acceptance_source": pv["acceptance_source"], "trace": str(pv["trace"])}
    rec["wall_time_s"] = time.perf_counter() - t0
    return rec


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        x = float(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


# --------------------------------------------------------------------------------------------- records
def _body_checksum(rec: dict[str, Any]) -> str:
    body = {k: v for k, v in rec.items() if k not in ("checksum", "wall_time_s")}
    return _sha(body)


def points_dir(out_dir: str | Path) -> Path:
    """``DIR/points``: one JSON record per finished point."""
    return Path(out_dir) / "points"


def write_record(out_dir: str | Path, rec: dict[str, Any]) -> Path:
    """Write a record atomically: temporary file, fsync, ``os.replace`` onto ``points/<id>.json``."""
    d = points_dir(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    rec = dict(rec, checksum=_body_checksum(rec))
    final = d / f"{rec['id']}.json"
    tmp = d / f".{rec['id']}.json.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(json.dumps(rec, separators=(",", ":")))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    return final


def read_record(path: str | Path) -> dict[str, Any] | None:
    """A record, or None when the file is cut off, unparsable or fails its checksum."""
    try:
        rec = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("checksum") != _body_checksum(rec):
        return None
    if rec.get("id") != Path(path).stem:
        return None
    return rec


def load_records(out_dir: str | Path, ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Valid records of ``DIR`` (all, or those with the given ids), sorted by id; bad files are skipped."""
    d = points_dir(out_dir)
    if ids is not None:
        paths = [d / f"{i}.json" for i in ids]
    else:
        paths = sorted(d.glob("*.json")) if d.is_dir() else []
    out = []
    for p in paths:
        if p.is_file():
            rec = read_record(p)
            if rec is not None:
                out.append(rec)
    return sorted(out, key=lambda r: r["id"])


def _finished(out_dir: Path, points: list[SweepPoint], retry_failed: bool) -> tuple[set[str], int]:
    """Ids of points already done; removes leftover temporary files and records that fail their checks."""
    d = points_dir(out_dir)
    done: set[str] = set()
    bad = 0
    if not d.is_dir():
        return done, bad
    for tmp in d.glob(".*.json.tmp-*"):
        tmp.unlink(missing_ok=True)
    for p in points:
        f = d / f"{p.id}.json"
        if not f.exists():
            continue
        rec = read_record(f)
        if rec is None:
            bad += 1
            f.unlink(missing_ok=True)
        elif rec["status"] == "ok" or not retry_failed:
            done.add(p.id)
    return done, bad


# --------------------------------------------------------------------------------------------- executors
def _iter_serial(tasks: list[PointTask], jobs: int, address: str | None, on_start) -> Iterator[dict]:
    for t in tasks:
        on_start([t.point])
        yield run_point(t)


def _iter_process(tasks: list[PointTask], jobs: int, address: str | None, on_start) -> Iterator[dict]:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    import multiprocessing as mp

    # fork where the platform has it: workers start warm (the parent's cached acceptance models) and
    # scripts need no ``if __name__ == "__main__"`` guard. The progress bar runs without a refresh
    # thread, so the driver holds no locks a child could inherit. Elsewhere spawn (then the guard applies).
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)
    pending = {}
    queue = list(tasks)
    try:
        while queue or pending:
            while queue and len(pending) < 2 * jobs:   # bounded in flight: the progress line stays honest
                t = queue.pop(0)
                pending[ex.submit(run_point, t)] = t
            on_start([t.point for t in pending.values()])
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                pending.pop(fut)
                yield fut.result()
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _iter_ray(tasks: list[PointTask], jobs: int, address: str | None, on_start) -> Iterator[dict]:
    try:
        import ray
    except ImportError:
        raise SpecsimInputError("--executor", None, "executor", "ray installed (pip install 'specsim[ray]')",
                                "ray is not installed") from None
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=jobs, log_to_driver=False, include_dashboard=False)
    remote = ray.remote(num_cpus=1)(run_point)
    refs = {remote.remote(t): t for t in tasks}
    while refs:
        on_start([t.point for t in refs.values()][:jobs])
        ready, _ = ray.wait(list(refs), num_returns=1)
        for r in ready:
            refs.pop(r)
            yield ray.get(r)


def _iter_dask(tasks: list[PointTask], jobs: int, address: str | None, on_start) -> Iterator[dict]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise SpecsimInputError("--executor", None, "executor",
                                "dask installed (pip install 'specsim[dask]')", "dask is not installed") from None
    cluster = None
    if address:
        client = Client(address)
    else:
        cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        futs = {client.submit(run_point, t, key=f"specsim-point-{t.point.id}", pure=False): t for t in tasks}
        on_start([x.point for x in futs.values()][:jobs])
        for fut in as_completed(list(futs)):
            t = futs.pop(fut)
            on_start([x.point for x in futs.values()][:jobs])
            yield fut.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


_EXECUTORS: dict[str, Callable[..., Iterator[dict]]] = {
    "serial": _iter_serial, "process": _iter_process, "ray": _iter_ray, "dask": _iter_dask}


# --------------------------------------------------------------------------------------------- the sweep
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


def write_manifest(out_dir: str | Path, spec: SweepSpec, scenario: Scenario, trace,
                   points: list[SweepPoint]) -> Path:
    """``DIR/sweep.json``: the spec, resolved scenario, trace hash and point ids of the latest sweep."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    man = {"spec": asdict(spec), "scenario": scenario.to_dict(), "scenario_hash": scenario.hash(),
           "scenario_source": scenario.source, "trace": str(getattr(trace, "source", None)),
           "trace_sha": trace.content_hash(), "point_ids": [p.id for p in points]}
    tmp = d / f".sweep.json.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(_jsonable(man), indent=1) + "\n")
    os.replace(tmp, d / "sweep.json")
    return d / "sweep.json"


def run_sweep(spec: SweepSpec, scenario: Scenario, trace, out_dir: str | Path, *, executor: str = "process",
              jobs: int | None = None, address: str | None = None, retry_failed: bool = False,
              force: bool = False, progress: bool = True) -> SweepOutcome:
    """Run every unfinished point of ``spec`` and write each record as soon as it finishes.

    Args:
        spec: the sweep axes; scenario: the resolved scenario; trace: the full trace.
        out_dir: results directory (``sweep.json`` + ``points/``).
        executor: ``serial``, ``process``, ``ray`` or ``dask``.
        jobs: parallel workers (default: the CPU count); ignored by ``serial``.
        address: ray or dask scheduler address (default: start a local cluster).
        retry_failed: recompute points recorded with status ``error``.
        force: recompute every point.
        progress: show a progress bar (points done, ETA, current points) on stderr.

    Raises:
        SpecsimInputError: bad axes, unknown executor, policy, drafter or profile; a missing extra.
    """
    if executor not in EXECUTORS:
        raise SpecsimInputError("--executor", None, "executor", f"one of {EXECUTORS}", repr(executor))
    t0 = time.perf_counter()
    jobs = max(1, jobs or os.cpu_count() or 1)
    out = Path(out_dir)
    points = expand_points(spec, scenario, trace)
    write_manifest(out, spec, scenario, trace, points)
    done, bad = (set(), 0) if force else _finished(out, points, retry_failed)
    todo = [p for p in points if p.id not in done]
    # biggest first: better packing on a pool, and the ETA errs on the safe side
    todo.sort(key=lambda p: (-p.num_requests * (p.load if p.mode == "closed" else 1.0), p.id))
    heads: dict[int, Any] = {}

    def head(n: int):
        if n not in heads:
            heads[n] = trace.head(n) if n < len(trace) else trace
        return heads[n]

    tasks = [PointTask(p, scenario, head(p.num_requests)) for p in todo]
    failed: list[str] = []
    with _progress(progress, len(points), len(done)) as bar:
        for rec in _EXECUTORS[executor](tasks, jobs, address, bar.current):
            write_record(out, rec)
            if rec["status"] != "ok":
                failed.append(rec["id"])
            bar.advance()
    for rec in load_records(out, [p.id for p in points if p.id in done]):
        if rec["status"] != "ok":
            failed.append(rec["id"])
    return SweepOutcome(points, len(done), len(todo), bad, sorted(failed), time.perf_counter() - t0)


class _progress:
    """A rich progress bar: points done / total, elapsed, ETA, and the point(s) running now."""

    def __init__(self, enabled: bool, total: int, done: int) -> None:
        self.enabled = enabled
        self.total, self.done = total, done

    def __enter__(self) -> "_progress":
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            self.bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}"),
                                console=Console(stderr=True), transient=False, auto_refresh=False)
            self.bar.__enter__()
            self.task = self.bar.add_task("", total=self.total, completed=self.done)
        return self

    def current(self, running: list[SweepPoint]) -> None:
        if self.enabled:
            more = f" (+{len(running) - 1})" if len(running) > 1 else ""
            self.bar.update(self.task, description=(running[0].label() + more) if running else "")
            self.bar.refresh()

    def advance(self) -> None:
        if self.enabled:
            self.bar.advance(self.task)
            self.bar.refresh()

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.bar.update(self.task, description="")
            self.bar.__exit__(*exc)


# --------------------------------------------------------------------------------------------- tables
def _curve_labels(df: pd.DataFrame) -> pd.Series:
    """Curve label per row: the policy name, plus each knob that takes several values for that policy."""
    labels = df.policy.astype(str).copy()
    for pol, sub in df.groupby("policy", sort=False):
        varying = [k for k in ("drafter", "gamma", "threshold") if sub[k].nunique(dropna=False) > 1]
        if varying:
            suffix = sub[varying].apply(lambda r: " ".join(f"{k}={r[k]:g}" if isinstance(r[k], float)
                                                           else f"{k}={r[k]}" for k in varying), axis=1)
            labels.loc[sub.index] = pol + " " + suffix
    return labels


def results_frame(records_or_dir: str | Path | list[dict[str, Any]]) -> pd.DataFrame:
    """One row per point: identity columns, status, error, and the summary metrics.

    Columns: ``id, curve, policy, drafter, gamma, threshold, mode, load, concurrency, rate_scale, seed,
    num_requests, status, error`` then every SUMMARY_KEYS metric (NaN for failed points), plus
    ``window_start_s, window_end_s`` for closed-loop points and ``wall_time_s``.
    """
    recs = records_or_dir if isinstance(records_or_dir, list) else load_records(records_or_dir)
    rows = []
    for r in recs:
        cfg = r["config"]
        kn = cfg["knobs"]
        row = {"id": r["id"], "policy": cfg["policy"], "drafter": kn["drafter"], "gamma": kn["gamma"],
               "threshold": kn.get("threshold", np.nan), "mode": cfg["load"]["mode"],
               "load": cfg["load"]["value"], "seed": cfg["seed"], "num_requests": cfg["num_requests"],
               "scenario_sha": _sha(cfg["scenario"])[:16], "trace_sha": cfg["trace_sha"][:16],
               "status": r["status"], "error": r["error"], "wall_time_s": r.get("wall_time_s")}
        s = r.get("summary") or {}
        for k in SUMMARY_KEYS:
            if k not in row and k not in ("policy", "drafter", "gamma", "seed"):
                row[k] = s.get(k)
        load = s.get("load") or {}
        row["window_start_s"] = load.get("window_start_s")
        row["window_end_s"] = load.get("window_end_s")
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    num = [k for k in SUMMARY_KEYS if k in df and k not in ("policy", "drafter")]
    df[num] = df[num].apply(pd.to_numeric, errors="coerce")
    df["concurrency"] = np.where(df["mode"] == "closed", df["load"], np.nan)
    df["rate_scale"] = np.where(df["mode"] == "open", df["load"], np.nan)
    df.insert(1, "curve", _curve_labels(df))
    return df.sort_values(["curve", "mode", "load", "seed"], kind="stable").reset_index(drop=True)


def seed_spread(df: pd.DataFrame, metrics: Iterable[str] = SPREAD_METRICS) -> pd.DataFrame:
    """Mean, std (ddof 1; 0 for one seed), min and max of ``metrics`` over seeds per (curve, mode, load).

    Only points with status ``ok`` count; ``num_seeds`` says how many did. Columns are flattened as
    ``<metric>_<stat>``.
    """
    ok = df[df.status == "ok"]
    metrics = list(metrics)
    g = ok.groupby(["curve", "mode", "load"], sort=True)
    agg = g[metrics].agg(["mean", "std", "min", "max"])
    agg.columns = [f"{m}_{s}" for m, s in agg.columns]
    for m in metrics:
        agg[f"{m}_std"] = agg[f"{m}_std"].fillna(0.0)
    agg.insert(0, "num_seeds", g.size())
    return agg.reset_index()


def parse_list(text: str, kind: type = float, flag: str = "list") -> list:
    """Parse ``"1,2,4,...,256"``: comma-separated values; ``...`` continues the progression up to the value after it.

    Rule: with three or more values before ``...`` the last three say which progression it is (equal
    ratios: geometric, equal differences: arithmetic). With two values a, b the progression must reach the
    end exactly: geometric (ratio b/a) when it does, else arithmetic (step b - a) when it does; when
    both do (1,2,...,8) geometric wins, since sweeps double load points. 1,2,4,...,256 gives the powers
    of two; 10,20,...,50 gives 10,20,30,40,50.

    Raises:
        SpecsimInputError: a value that does not parse, ``...`` without two values before it and one
            after, or a progression that does not reach the end value exactly.
    """
    def bad() -> SpecsimInputError:
        return SpecsimInputError(f"--{flag}", None, flag,
                                 f"comma-separated {kind.__name__} values (a,b,...,z continues a progression "
                                 "that reaches z exactly)", repr(text))

    parts = [p.strip() for p in text.split(",") if p.strip()]
    out: list = []
    i = 0
    while i < len(parts):
        if parts[i] != "...":
            try:
                out.append(kind(parts[i]))
            except ValueError:
                raise bad() from None
            i += 1
            continue
        if len(out) < 2 or i + 1 >= len(parts):
            raise bad()
        try:
            end = kind(parts[i + 1])
        except ValueError:
            raise bad() from None
        a, b = out[-2], out[-1]
        geo = _progression(b, end, lambda x: x * (b / a)) if a > 0 and b > a else None
        ari = _progression(b, end, lambda x: x + (b - a)) if b > a else None
        if len(out) >= 3:
            z = out[-3]
            is_geo = z > 0 and a * a == z * b
            seq = geo if is_geo else (ari if a - z == b - a else None)
        else:
            seq = geo if geo is not None else ari
        if seq is None:
            raise bad()
        out.extend(kind(x) for x in seq)
        i += 2
    return out


def _progression(start: float, end: float, step) -> list[float] | None:
    """Values after ``start`` up to ``end`` by ``step``; None unless ``end`` is hit (within 1e-9 relative)."""
    seq, x = [], start
    while len(seq) < 100000:
        x = step(x)
        if x > end * (1 + 1e-9):
            return None
        seq.append(end if abs(x - end) <= 1e-9 * abs(end) else x)
        if seq[-1] == end:
            return seq
    return None
