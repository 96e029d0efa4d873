"""Tuning a policy knob per SLA tier: the knob value with the most throughput per GPU at each TPS/user.

The question "which threshold is best at 150 tok/s/user?" has a brute-force answer: sweep every
(knob value, load, seed) of a grid, build each knob value's Pareto frontier and read it at the tier
(:mod:`specsim.analysis.frontier`). :func:`tune` finds the same pick with far fewer simulated points:

* Load bracketing. At a fixed knob value only the two load points whose TPS/user bracket the tier
  matter, since the frontier is interpolated linearly between adjacent points (specsim.analysis.frontier).
  Closed-loop TPS/user falls as load grows, so the bracket is found by bisection over the sorted load
  list, started from the bracket a neighbouring knob value already found (usually a hit) and from
  every point already simulated at this knob value; one load past the bracket is checked as well,
  since TPS/user can plateau over loads while throughput grows. The tier's throughput is then read off
  the frontier of the simulated points of that knob value, exactly as on the full grid.
* Golden-section search over the knob grid, per tier: the throughput at a tier is taken as unimodal in
  the knob (a threshold too low over-verifies at load, one too high under-verifies). The bracket
  [a, b] (the whole grid at first) keeps one simulated interior value x; each step simulates one new
  value in the larger of [a, x], [x, b] at the golden fraction from x and drops the side beyond the
  worse of the two, so each step costs one knob value. A side is dropped only when the better value's
  lead holds over seeds by the one paired rule (:func:`specsim.analysis.significance.paired_margin`;
  reaching the tier against not reaching it always counts): a lead within seed noise says nothing about
  where the optimum lies, so the search then simulates every value left in the bracket. Once at most
  three values are left, all are simulated. The pick is the best knob value simulated for that tier
  (with decisive comparisons about 3 + ln(n/3) / 0.48 knob values of an n-value grid, each at two to
  three loads).
* Scores: a knob value whose lightest load is already slower than the tier is ``infeasible`` (score
  -inf); one whose heaviest load still beats the tier is ``covered`` and scores with its heaviest
  load's throughput, the best of its points meeting the tier (specsim.analysis.frontier).
* Confidence from seeds: every (knob value, load) runs every seed; per seed the frontier of the same
  points gives that seed's throughput at the tier: ``throughput_std`` (ddof 1) over seeds, and against
  the runner-up knob value the paired rule: ``seed_wins`` (seeds where the pick is better) and
  ``significant`` (the margin holds by the one-sided paired t-test, the rule compare and recommend use).

Points are sweep points (:mod:`specsim.sweep`): the same ids, the same records in ``DIR/points/``,
each written as soon as it finishes, so a killed tune resumes where it stopped and reuses whatever a
sweep into the same directory already computed. The result goes to ``DIR/tuned/<policy>-<knob>.json``
(:func:`specsim.analysis.tuned.read_tuned` reads it for ``specsim compare`` and ``specsim plot``).

Assumptions, said plainly: TPS/user falls with load (up to seed noise) and the throughput at a tier is
unimodal in the knob over the grid. Where either fails, the search can miss the grid's best; the
reported ``num_runs`` / ``grid_runs`` and a ``method="grid"`` run check it.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from specsim.analysis.frontier import X, Y, Frontier
from specsim.analysis.significance import paired_margin
from specsim.analysis.tiers import as_tiers
from specsim.analysis.tuned import edge_note, failed_caution, pick_cautions
from specsim.analysis.sweep_records import canonical_sha, points_dir, read_record
from specsim.analysis.sweep_tables import measured
from specsim.errors import SpecsimInputError
from specsim.jsonfiles import jsonable
from specsim.scenario import Scenario
from specsim.sweep.executors import get_executor
from specsim.sweep.knobs import (KNOB_DIGITS, KnobRange, check_gamma_range, fixed_ends, knob_rejection,  # noqa: F401
                                 parse_knob)
from specsim.sweep.point import PointTask
from specsim.sweep.spec import SweepPoint, SweepSpec, expand_points
from specsim.sweep.store import write_record

#: Golden-section fraction (3 - sqrt 5) / 2 of a bracket where the lower interior point sits.
GOLDEN = (3.0 - math.sqrt(5.0)) / 2.0
METHODS = ("search", "grid")


# --------------------------------------------------------------------------------------------- spec and result
@dataclass(frozen=True)
class TuneSpec:
    """What to tune.

    Args:
        policy: registry name or ``path/file.py:Name``.
        knob: the knob's grid.
        tiers: SLA tiers, TPS/user in tok/s (each > 0).
        concurrency: closed-loop load points (users, >= 1), the load axis of the grid.
        seeds: run seeds; every simulated (knob value, load) runs all of them.
        num_requests, requests_per_user, max_sim_s, drafter, gamma: as in :class:`specsim.sweep.SweepSpec`
            (``gamma``: the run's gamma unless the knob is gamma).

    Raises:
        SpecsimInputError: no tier, a tier <= 0, fewer than two load points, or a bad sweep field.
    """

    policy: str
    knob: KnobRange
    tiers: tuple[float, ...]
    concurrency: tuple[int, ...]
    seeds: tuple[int, ...] = (0,)
    num_requests: int | None = None
    requests_per_user: int | None = None
    max_sim_s: float | None = None
    drafter: str | None = None
    gamma: int | None = None

    def __post_init__(self) -> None:
        if not self.tiers:
            raise SpecsimInputError("--tiers", None, "tiers", "SLA tiers in tok/s/user, each > 0", repr(self.tiers))
        as_tiers(self.tiers, source="--tiers")          # the one tier rule: finite, >= 1 tok/s/user
        if len(set(self.concurrency)) < 2:
            raise SpecsimInputError("--concurrency", None, "concurrency", "at least two load points",
                                    repr(self.concurrency))
        self.sweep_spec(self.knob.values()[0])     # validates the sweep fields

    @property
    def loads(self) -> tuple[int, ...]:
        """The load points, ascending and distinct."""
        return tuple(sorted(set(int(c) for c in self.concurrency)))

    def sweep_spec(self, value: float) -> SweepSpec:
        """The one-knob-value sweep whose points this tune simulates at knob value ``value``."""
        g = int(value) if self.knob.name == "gamma" else self.gamma
        thr = float(value) if self.knob.name == "threshold" else None
        return SweepSpec(policies=(self.policy,), concurrency=self.loads, seeds=self.seeds, gammas=(g,),
                         thresholds=(thr,), num_requests=self.num_requests,
                         requests_per_user=self.requests_per_user, max_sim_s=self.max_sim_s, drafter=self.drafter)

    @property
    def grid_runs(self) -> int:
        """Simulated points of the full knob x load grid, seeds included."""
        return len(self.knob.values()) * len(self.loads) * len(self.seeds)


@dataclass
class TierResult:
    """The pick at one SLA tier.

    Attributes:
        tier: TPS/user, tok/s.
        status: ``ok``; ``covered`` (even the heaviest load of the best knob value beats the tier: its
            throughput is that load's); ``infeasible`` (no knob value reaches the tier).
        value: the best knob value (None when infeasible).
        throughput_per_gpu: seed-mean throughput per GPU at the tier, tok/s (NaN when infeasible).
        throughput_std: its standard deviation over seeds (ddof 1; NaN with one seed).
        num_seeds: seeds whose own frontier reaches the tier.
        runner_up: the second-best knob value simulated for this tier (None if none).
        runner_up_throughput: its seed-mean throughput at the tier, tok/s.
        seed_wins: seeds in which the pick beats the runner-up (paired, same seeds).
        significant: the margin over the runner-up holds by the paired rule
            (:func:`specsim.analysis.significance.paired_margin`; False with one seed).
        scores: ``{knob value: seed-mean throughput at the tier}`` of every value the search simulated.
        frontier: the pick's frontier from its simulated points (``tps_per_user``, ``throughput_per_gpu``,
            ``loads``), as specsim.analysis.frontier builds it.
    """

    tier: float
    status: str
    value: float | None
    throughput_per_gpu: float
    throughput_std: float
    num_seeds: int
    runner_up: float | None
    runner_up_throughput: float
    seed_wins: int
    significant: bool
    scores: dict[float, float]
    frontier: dict[str, list[float]]


@dataclass
class TuneResult:
    """What :func:`tune` found and did.

    Attributes:
        spec: the tune's spec.
        method: ``search`` or ``grid``.
        tiers: one :class:`TierResult` per tier, in the spec's order.
        num_runs: simulated points the answer used (seeds included; computed now or read from disk).
        grid_runs: points of the full knob x load grid.
        computed: points this call simulated; reused: points read from earlier records.
        probe_ids: ids of every point the answer used.
        path: where the result was written (None when no ``out_dir``).
        failed: of those points, how many failed (no closed-loop window, ...): their loads are missing from the
            knob values' frontiers.
        cautions: the ``warning:`` lines ``specsim tune`` prints under its table, each a whole sentence: points that
            failed (:func:`specsim.analysis.tuned.failed_caution`), then one per tier whose pick is read from a
            thrashing, prefill- or think-bound point of its own runs (:func:`specsim.analysis.tuned.pick_cautions`).
            Read them before trusting a pick; [] when there is nothing to warn of.
        notes: the ``note:`` lines it prints in its table's notes: a pick at an end of the knob's range that could
            be widened (:func:`specsim.analysis.tuned.edge_note`); [] when none.
    """

    spec: TuneSpec
    method: str
    tiers: list[TierResult]
    num_runs: int
    grid_runs: int
    computed: int
    reused: int
    probe_ids: list[str] = field(repr=False)
    path: Path | None = None
    failed: int = 0
    cautions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN as None; knob-value keys as strings)."""
        d = asdict(self)
        d["spec"]["knob"]["values"] = list(self.spec.knob.values())
        d["path"] = str(self.path) if self.path else None
        d["curve"] = tuned_label(self.spec.policy, self.spec.knob.name)
        return jsonable(d)


def tuned_label(policy: str, knob: str) -> str:
    """The curve label of a tuned frontier: ``<policy> tuned <knob>``."""
    return f"{policy} tuned {knob}"


# --------------------------------------------------------------------------------------------- evaluation
class _Evaluator:
    """Simulated (knob index, load) cells, each with its records over all seeds; runs missing ones."""

    def __init__(self, spec: TuneSpec, scenario: Scenario, trace, out_dir, executor: str, jobs: int,
                 address: str | None, progress: Callable[[int], None] | None) -> None:
        self.spec, self.scenario, self.trace, self.out_dir = spec, scenario, trace, out_dir
        self.run = get_executor(executor)
        self.jobs, self.address, self.progress = jobs, address, progress or (lambda _n: None)
        self.values = spec.knob.values()
        self.loads = spec.loads
        self.cells: dict[tuple[int, int], list[dict]] = {}      # (knob idx, load) -> records, one per seed
        self._points: dict[int, dict[tuple[float, int], SweepPoint]] = {}
        self._heads: dict[int, Any] = {}
        self.computed = self.reused = 0

    def _points_of(self, k: int) -> dict[tuple[float, int], SweepPoint]:
        """(load, seed) -> the sweep point of knob value ``k`` (other knobs join the config and the id)."""
        if k not in self._points:
            v = self.values[k]
            pts = expand_points(self.spec.sweep_spec(v), self.scenario, self.trace)
            if self.spec.knob.name not in ("threshold", "gamma"):
                pts = [_with_knob(p, self.spec.knob.name, v) for p in pts]
            self._points[k] = {(p.load, p.seed): p for p in pts}
        return self._points[k]

    def ensure(self, cells: list[tuple[int, int]]) -> None:
        """Simulate every seed of the given (knob index, load) cells not known yet; write each record."""
        todo = [c for c in dict.fromkeys(cells) if c not in self.cells]
        if not todo:
            return
        by_id: dict[str, dict] = {}
        missing: list[SweepPoint] = []
        for k, load in todo:
            for seed in self.spec.seeds:
                p = self._points_of(k)[(float(load), int(seed))]
                rec = self._on_disk(p.id)
                if rec is not None:
                    by_id[p.id] = rec
                    self.reused += 1
                else:
                    missing.append(p)
        tasks = [PointTask(p, self.scenario, self._head(p.num_requests), p.num_requests >= len(self.trace))
                 for p in missing]
        for rec in self.run(tasks, self.jobs, self.address, lambda _running: None):
            if self.out_dir is not None:
                write_record(self.out_dir, rec)
            by_id[rec["id"]] = rec
            self.computed += 1
            self.progress(self.computed)
        for k, load in todo:
            self.cells[(k, load)] = [by_id[self._points_of(k)[(float(load), int(s))].id] for s in self.spec.seeds]

    def _on_disk(self, pid: str) -> dict | None:
        if self.out_dir is None:
            return None
        f = points_dir(self.out_dir) / f"{pid}.json"
        return read_record(f) if f.is_file() else None

    def _head(self, n: int):
        if n not in self._heads:
            self._heads[n] = self.trace.head(n) if n < len(self.trace) else self.trace
        return self._heads[n]

    # ----------------------------------------------------------------------------------------- reading
    def xy(self, k: int, seed_index: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(x TPS/user, y throughput per GPU, loads) of knob value ``k``'s simulated loads, ascending load:
        seed means over the successful seeds (``seed_index`` None) or one seed's values (NaN if failed)."""
        loads = sorted(load for (kk, load) in self.cells if kk == k)
        x, y = [], []
        for load in loads:
            recs = self.cells[(k, load)] if seed_index is None else [self.cells[(k, load)][seed_index]]
            ok = [r for r in recs if r["status"] == "ok"]          # the window's figures, as compare reads them
            x.append(np.mean([measured(r, X) for r in ok]) if ok else np.nan)
            y.append(np.mean([measured(r, Y) for r in ok]) if ok else np.nan)
        return np.array(x, float), np.array(y, float), np.array(loads, float)

    def frontier(self, k: int, seed_index: int | None = None) -> Frontier:
        """The Pareto frontier of knob value ``k``'s simulated points (specsim.analysis.frontier's rule)."""
        x, y, loads = self.xy(k, seed_index)
        return Frontier.from_points(f"{self.spec.policy} {self.spec.knob.name}={self.values[k]:g}", x, y, loads)

    def score(self, k: int, tier: float) -> tuple[float, str]:
        """(seed-mean throughput at ``tier``, or -inf when infeasible; status): a ``covered`` tier reads the
        best of the points meeting it, the heaviest load's (specsim.analysis.frontier)."""
        f = self.frontier(k)
        st = f.status_at(tier)
        return (f.throughput_at(tier) if st != "infeasible" else -math.inf), st

    def rank(self, k: int, tier: float) -> tuple[int, float]:
        """The search's order of knob values at ``tier``: reaching it first (by throughput), then how close
        the infeasible ones come (their largest TPS/user), so the search moves towards feasible values."""
        y, st = self.score(k, tier)
        if st != "infeasible":
            return 1, y
        f = self.frontier(k)
        return 0, float(f.tps_per_user[-1]) if f.tps_per_user.size else -math.inf


def _with_knob(p: SweepPoint, name: str, value: float) -> SweepPoint:
    """``p`` with knob ``name`` = ``value`` added to its knobs, its config and hence its id."""
    knobs = dict(p.knobs, **{name: value})
    cfg = dict(p.config, knobs=knobs)
    pid = canonical_sha(cfg)[:20]
    return SweepPoint(pid, p.policy, knobs, p.mode, p.load, p.seed, p.num_requests, p.max_sim_s, cfg)


# --------------------------------------------------------------------------------------------- search
def _bracket(ev: _Evaluator, k: int, tier: float, hint: int | None) -> None:
    """Simulate loads of knob value ``k`` until two adjacent loads bracket ``tier`` (or an end is reached).

    Invariant of the bisection over load indices: x(loads[lo]) >= tier > x(loads[hi]), with lo = -1 and
    hi = m standing for "beyond the ends". Loads already simulated narrow it first; ``hint`` (a bracket
    start found at a neighbouring knob value) is tried next, both of its loads in one batch. Once the
    bracket is two adjacent loads, the load after it is simulated too: where TPS/user plateaus over
    loads (throughput still growing) that heavier load can still reach the tier, and the bisection then
    goes on above it.
    """
    loads, m = ev.loads, len(ev.loads)

    def bounds() -> tuple[int, int]:
        x, _, sim = ev.xy(k)
        idx = {float(L): i for i, L in enumerate(loads)}
        above = [idx[L] for L, xv in zip(sim, x) if np.isfinite(xv) and xv >= tier]
        below = [idx[L] for L, xv in zip(sim, x) if not (np.isfinite(xv) and xv >= tier)]
        lo = max(above) if above else -1
        hi = min([i for i in below if i > lo], default=m)
        return lo, hi

    lo, hi = bounds()
    if hint is not None and hi - lo > 1:
        inside = [(k, loads[i]) for i in (hint, hint + 1) if lo < i < hi]
        ev.ensure(inside)
        lo, hi = bounds()
    while True:
        while hi - lo > 1:
            ev.ensure([(k, loads[(lo + hi) // 2])])
            lo, hi = bounds()
        # look one load past the bracket: TPS/user can plateau over loads while throughput still grows,
        # and a heavier load that still reaches the tier dominates the bracket (then search on from it)
        ahead = hi + 1
        if ahead >= m or (k, loads[ahead]) in ev.cells:
            return
        ev.ensure([(k, loads[ahead])])
        if bounds() == (lo, hi):
            return
        lo, hi = bounds()


def _hint(k: int, brackets: dict[int, int]) -> int | None:
    """The bracket start (lower load index) found at the knob value nearest to ``k``, if any."""
    near = sorted(brackets, key=lambda j: (abs(j - k), j))
    return brackets[near[0]] if near else None


def _lower_index(ev: _Evaluator, k: int, tier: float) -> int | None:
    """Index of the last load whose TPS/user reaches ``tier`` at knob value ``k`` (None at an end)."""
    x, _, sim = ev.xy(k)
    above = [L for L, xv in zip(sim, x) if np.isfinite(xv) and xv >= tier]
    if not above:
        return None
    i = ev.loads.index(int(max(above)))
    return i if i + 1 < len(ev.loads) else None


def _search_tier(ev: _Evaluator, tier: float) -> list[int]:
    """Golden-section search over the knob grid for ``tier``; returns the knob indices it simulated."""
    brackets: dict[int, int] = {}
    seen: list[int] = []

    def f(k: int) -> tuple[int, float]:
        if k not in seen:
            _bracket(ev, k, tier, _hint(k, brackets))
            lo = _lower_index(ev, k, tier)
            if lo is not None:
                brackets[k] = lo
            seen.append(k)
        return ev.rank(k, tier)

    a, b = 0, len(ev.values) - 1
    if b - a > 2:
        x = a + max(1, int(round(GOLDEN * (b - a))))          # the interior point kept between steps
        f(x)
        while b - a > 2:
            # the new point goes into the larger side, at the golden fraction of it from x
            if b - x >= x - a:
                y = x + max(1, int(round(GOLDEN * (b - x))))
            else:
                y = x - max(1, int(round(GOLDEN * (x - a))))
            lo_pt, hi_pt = min(x, y), max(x, y)
            lower_wins = f(lo_pt) >= f(hi_pt)
            if not _decisive(ev, (lo_pt, hi_pt) if lower_wins else (hi_pt, lo_pt), tier):
                break                       # a difference within seed noise cannot say which side to drop
            if lower_wins:
                b, x = hi_pt, lo_pt
            else:
                a, x = lo_pt, hi_pt
    for k in range(a, b + 1):
        f(k)
    return seen


def _decisive(ev: _Evaluator, pair: tuple[int, int], tier: float) -> bool:
    """Whether knob value ``pair[0]`` beats ``pair[1]`` at ``tier`` beyond seed noise: always when either is
    infeasible (reaching the tier is not noise), else by the paired rule over seeds
    (:func:`specsim.analysis.significance.paired_margin`)."""
    if any(ev.score(k, tier)[1] == "infeasible" for k in pair):
        return True
    return paired_margin(_per_seed(ev, pair[0], tier), _per_seed(ev, pair[1], tier)).holds


def _grid_tier(ev: _Evaluator, tier: float) -> list[int]:
    """Brute force: every knob value at every load."""
    ev.ensure([(k, L) for k in range(len(ev.values)) for L in ev.loads])
    return list(range(len(ev.values)))


def _per_seed(ev: _Evaluator, k: int, tier: float) -> np.ndarray:
    """(num_seeds,) throughput per GPU at ``tier`` from each seed's own frontier of knob value ``k``'s points."""
    return np.array([ev.frontier(k, s).throughput_at(tier) for s in range(len(ev.spec.seeds))])


def _tier_result(ev: _Evaluator, tier: float, ks: list[int]) -> TierResult:
    """The pick among knob indices ``ks`` at ``tier``, with its seed spread and the runner-up comparison."""
    scored = sorted(((ev.score(k, tier), k) for k in ks), key=lambda t: (-t[0][0], t[1]))
    scores = {ev.values[k]: (s if math.isfinite(s) else float("nan")) for (s, _), k in scored}
    (best_score, status), best = scored[0]
    nan = float("nan")
    if not math.isfinite(best_score):
        return TierResult(tier, "infeasible", None, nan, nan, 0, None, nan, 0, False, scores, {})
    ys = _per_seed(ev, best, tier)
    ru = scored[1][1] if len(scored) > 1 and math.isfinite(scored[1][0][0]) else None
    m = paired_margin(ys, _per_seed(ev, ru, tier)) if ru is not None else None     # paired over the same seeds
    wins, significant = (m.seed_wins, m.holds) if m is not None else (0, False)
    f = ev.frontier(best)
    fin = ys[np.isfinite(ys)]
    return TierResult(tier, status, ev.values[best], best_score,
                      float(np.std(fin, ddof=1)) if fin.size > 1 else nan, int(fin.size),
                      ev.values[ru] if ru is not None else None, scored[1][0][0] if ru is not None else nan,
                      wins, significant, scores,
                      {"tps_per_user": f.tps_per_user.tolist(), "throughput_per_gpu": f.throughput_per_gpu.tolist(),
                       "loads": f.loads.tolist()})


def tune(spec: TuneSpec, scenario: Scenario, trace, out_dir: str | Path | None = None, *, method: str = "search",
         executor: str = "serial", jobs: int | None = None, address: str | None = None,
         progress: Callable[[int], None] | None = None) -> TuneResult:
    """Find, per SLA tier, the knob value with the most throughput per GPU (module docstring).

    Args:
        spec: the policy, knob grid, tiers, loads and seeds.
        scenario: a Scenario, a scenario TOML path or None (the default); trace: the full trace, a Trace or a
            JSONL path (points use its first ``num_requests``; :func:`specsim.sweep.spec.sweep_inputs`).
        out_dir: results directory: records in ``out_dir/points/`` (shared with sweeps; finished ones are
            reused) and the result in ``out_dir/tuned/<policy>-<knob>.json``; None keeps nothing on disk.
        method: ``search`` (golden section with load bracketing) or ``grid`` (every knob value and load:
            the brute-force reference).
        executor, jobs, address: as for :func:`specsim.sweep.run_sweep` (``jobs`` default: CPU count).
            The search runs a few points at a time, so ``serial`` or a small pool suits it.
        progress: called with the number of points simulated so far after each one.

    Returns:
        A :class:`TuneResult`; its ``cautions`` and ``notes`` hold the lines ``specsim tune`` prints beside the picks.

    Raises:
        SpecsimInputError: unknown method, executor, policy, drafter or profile.
    """
    if method not in METHODS:
        raise SpecsimInputError("--method", None, "method", f"one of {METHODS}", repr(method))
    from specsim.sweep.spec import sweep_inputs

    scenario, trace = sweep_inputs(scenario, trace)
    ev = _Evaluator(spec, scenario, trace, out_dir, executor, max(1, jobs or os.cpu_count() or 1), address, progress)
    step = _grid_tier if method == "grid" else _search_tier
    tiers = [_tier_result(ev, float(t), step(ev, float(t))) for t in spec.tiers]
    ids = sorted(r["id"] for recs in ev.cells.values() for r in recs)
    failed = sum(r["status"] != "ok" for recs in ev.cells.values() for r in recs)
    res = TuneResult(spec, method, tiers, len(ids), spec.grid_runs, ev.computed, ev.reused, ids, failed=failed)
    res.cautions = failed_caution(failed, len(ids)) + pick_cautions(res, [r for recs in ev.cells.values() for r in recs])
    res.notes = edge_note(res, fixed_ends(spec.knob, spec.policy, scenario, spec.drafter))
    if out_dir is not None:
        res.path = write_tuned(out_dir, res)
    return res


def tuned_path(out_dir: str | Path, policy: str, knob: str) -> Path:
    """``DIR/tuned/<policy>-<knob>.json`` (the policy's non-word characters replaced by ``_``)."""
    return Path(out_dir) / "tuned" / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', policy)}-{knob}.json"


def write_tuned(out_dir: str | Path, res: TuneResult, untuned_ids: list[str] = ()) -> Path:
    """Write ``res`` (plus the ids of the untuned comparison points) atomically; returns the path."""
    p = tuned_path(out_dir, res.spec.policy, res.spec.knob.name)
    p.parent.mkdir(parents=True, exist_ok=True)
    d = res.to_dict()
    d["untuned_ids"] = sorted(untuned_ids)
    tmp = p.parent / f".{p.name}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(d, indent=1) + "\n")
    os.replace(tmp, p)
    return p
