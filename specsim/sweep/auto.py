"""Load found for the user: ``sweep --concurrency auto`` / ``--rate-scales auto``.

Like guidellm's sweep (a synchronous run, a throughput run, then rates spread between them) and inference-perf's
sweep mode, the search finds each policy's load range itself, in rounds of ordinary sweep points (so it is
resumable like any sweep: a re-run replays the same decisions from the stored records and computes only what is
missing):

1. **Bracket.** Start at one load (concurrency 1; rate scale 1). While some SLA tier lies below every TPS/user
   a curve of the policy measured (seed means per load point), double the heaviest load; in open loop, while
   some tier lies above every TPS/user measured, halve the lightest rate scale. A direction stops at the load
   cap (in closed loop at most (N - 1) // 2 users for a trace of N requests, the most a closed-loop window
   allows), at a point that fails (a closed-loop window the trace is too short for first gets one try at the
   geometric midpoint of the last load that ran and the one that failed), or once it stops paying:
   going up, two doublings in a row each adding less than :data:`SATURATION_GAIN` throughput (saturation: more
   load only queues); going down, two halvings each adding less than it to TPS/user (an idle cluster is no
   faster, so a tier above that is infeasible).
2. **Spread.** For every tier, the two adjacent loads whose TPS/user straddle it get their geometric midpoint
   (rounded for concurrency) when they are more than a factor :data:`REFINE_RATIO` apart, ``refine`` times, so
   the frontier is interpolated over short spans where the tiers are.

A tier is **bracketed** for a curve when one of its load points has TPS/user >= the tier and another <= it
(:func:`bracket_status`); ``infeasible`` when even the lightest load is slower than the tier (closed loop:
concurrency 1 is the lightest there is). The frontier table of ``specsim compare`` may say ``covered`` past
saturation: a heavier load then delivers no more throughput, so those points are off the Pareto frontier, and the
tier reads the best point meeting it. The manifest stores the tiers for later commands.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from specsim.analysis.frontier import frontiers
from specsim.analysis.metrics import at_least, at_most
from specsim.analysis.sweep_records import load_records
from specsim.analysis.sweep_tables import results_frame, seed_spread
from specsim.sweep.runner import run_sweep
from specsim.sweep.spec import SweepSpec
from specsim.sweep.store import write_manifest
from specsim.workload.extra import conversation_counts

#: Throughput (going up) or TPS/user (going down) gain under which one more doubling / halving "does not pay".
SATURATION_GAIN = 0.02
#: Adjacent bracketing loads farther apart than this factor get a midpoint in the spread phase.
REFINE_RATIO = 1.5
#: Default load caps: closed-loop users, and open-loop rate scales (both directions).
MAX_CONCURRENCY, MAX_RATE_SCALE = 4096, 1024.0


@dataclass
class AutoOutcome:
    """What :func:`auto_sweep` did.

    Attributes:
        loads: policy -> the loads it ran, ascending.
        computed, skipped: points computed by this call, and found finished from an earlier one.
        runs: all points of the search (computed + skipped).
        failed: ids of points whose status is ``error``.
        brackets: curve -> tier -> ``bracketed``, ``infeasible`` or ``unbracketed`` (:func:`bracket_status`).
        frontier: curve -> tier -> the Pareto frontier's status there (``ok``, ``covered``, ``infeasible``:
            :meth:`specsim.analysis.frontier.Frontier.status_at`); ``covered`` at a bracketed tier means the
            curve saturated above it (its heavier points deliver no more throughput).
        stopped: policy -> why the upward (and, open loop, downward) search stopped.
        bracket_loads: curve -> tier -> the loads that bracket it (:func:`bracket_loads`), for bracketed tiers.
        flagged: curve -> tier -> ``(load, kinds)`` of those loads whose figures measure something other than the
            policy (thrashing, prefill-bound, think-bound, cut off:
            :func:`specsim.analysis.sweep_tables.flagged_points`): a bracket that rests on them may move once that
            limit is lifted.
        rounds: rounds run (bracket and spread); wall_time_s: wall seconds of this call.
        ids: ids of every point of the search.
    """

    loads: dict[str, list[float]]
    computed: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    brackets: dict[str, dict[float, str]] = field(default_factory=dict)
    frontier: dict[str, dict[float, str]] = field(default_factory=dict)
    stopped: dict[str, list[str]] = field(default_factory=dict)
    bracket_loads: dict[str, dict[float, tuple[float, ...]]] = field(default_factory=dict)
    flagged: dict[str, dict[float, list[tuple[float, list[str]]]]] = field(default_factory=dict)
    rounds: int = 0
    wall_time_s: float = 0.0
    ids: list[str] = field(default_factory=list)

    @property
    def runs(self) -> int:
        return self.computed + self.skipped


def bracket_status(tps_by_load: np.ndarray, tier: float) -> str:
    """``bracketed`` (some load's TPS/user >= tier and some <= tier), ``infeasible`` (all below) or ``unbracketed``
    (all above: more load is needed). ``tps_by_load``: (m,) seed-mean TPS/user of one curve's load points."""
    t = np.asarray(tps_by_load, float)
    t = t[np.isfinite(t)]
    if t.size == 0 or not at_least(t.max(), tier):
        return "infeasible"
    return "bracketed" if at_most(t.min(), tier) else "unbracketed"


def bracket_loads(loads: np.ndarray, tps_by_load: np.ndarray, tier: float) -> tuple[float, ...]:
    """The loads of one curve that bracket ``tier``: the first adjacent pair (ascending load) whose seed-mean
    TPS/user straddles it, or the one load that meets it exactly; () when none does."""
    x, t = np.asarray(loads, float), np.asarray(tps_by_load, float)
    for i in range(x.size):
        if np.isclose(t[i], tier, rtol=1e-9, atol=0.0):
            return (float(x[i]),)
        if i and at_least(t[i - 1], tier) and at_most(t[i], tier):
            return (float(x[i - 1]), float(x[i]))
    return ()


def _curves(df, policy: str) -> dict[str, Any]:
    """curve -> its seed-spread rows (ascending load) for ``policy``'s successful points."""
    sub = df[(df.policy == policy) & (df.status == "ok")] if len(df) else df
    if not len(sub):
        return {}
    spread = seed_spread(sub)
    return {str(c): g.sort_values("load") for c, g in spread.groupby("curve", sort=True)}


def _gain(values: np.ndarray) -> float:
    """Relative gain of the last of ``values`` over the one before (inf with fewer than two)."""
    return float(values[-1] / values[-2] - 1.0) if values.size >= 2 and values[-2] > 0 else math.inf


def _next_loads(df, policy: str, loads: list[float], tiers: list[float], mode: str, cap: float,
                stopped: list[str], cap_why: str = "") -> list[float]:
    """The loads of the next bracket round for ``policy`` (module docstring, step 1); [] when done. ``cap_why``:
    why the search stops at ``cap`` (default ``load cap CAP``)."""
    curves = _curves(df, policy)
    failed = df[(df.policy == policy) & (df.status != "ok")].load.tolist() if len(df) else []
    stat = {c: {t: bracket_status(g.mean_tps_per_user_mean.to_numpy(), t) for t in tiers} for c, g in curves.items()}
    out = []
    up = not curves or any(s == "unbracketed" for st in stat.values() for s in st.values())
    hi = max(loads)
    thr = [g[g.load <= hi].output_throughput_per_gpu_mean.to_numpy() for g in curves.values()]
    saturated = all(len(x) >= 3 and _gain(x) < SATURATION_GAIN and _gain(x[:-1]) < SATURATION_GAIN for x in thr)
    if up:
        why = None
        ok = df[(df.policy == policy) & (df.status == "ok")].load if len(df) else []
        if failed and max(failed) >= hi:
            top = max(ok) if len(ok) else None
            lo_fail = min([f for f in failed if top is None or f > top] or [max(failed)])   # lightest above success
            window = _window_failure(df, policy, lo_fail)
            mid = float(round(math.sqrt(top * lo_fail))) if top and mode == "closed" and window and \
                lo_fail / top > REFINE_RATIO else None
            if mid is not None and mid not in loads:      # the trace's window: between the two a load may fit
                out.append(mid)
            else:
                why = f"a point failed at load {lo_fail:g}" + (
                    " (the trace too short for its closed-loop window)" if window else "")
        elif hi * 2 > cap:
            why = cap_why or f"load cap {cap:g}"
        elif saturated and thr:
            why = _saturation_text(curves, hi, mode)
        else:
            out.append(hi * 2)
        if why is not None and why not in stopped:
            stopped.append(why)
    if mode == "open" and any(s == "infeasible" for st in stat.values() for s in st.values()):
        lo = min(loads)
        tps = [g[g.load >= lo].mean_tps_per_user_mean.to_numpy()[::-1] for g in curves.values()]   # light last
        idle = all(len(x) >= 3 and _gain(x) < SATURATION_GAIN and _gain(x[:-1]) < SATURATION_GAIN for x in tps)
        if lo / 2 >= 1.0 / cap and not idle:
            out.append(lo / 2)
        elif (why := "lighter loads stopped raising TPS/user (the tier is infeasible)" if idle
                else f"load floor {1.0 / cap:g}") not in stopped:
            stopped.append(why)
    return [x for x in out if x not in loads]


def _saturation_text(curves: dict[str, Any], hi: float, mode: str) -> str:
    """Why the upward search stopped at load ``hi`` on saturation, as what happened to each curve's throughput over
    its last three loads (``curves``: :func:`_curves`): it fell, or it stayed flat (each doubling under
    :data:`SATURATION_GAIN`). A fresh user's search said "throughput +<2% over two doublings" where it fell from
    3,291 to 2,952 tok/s/GPU."""
    said = []
    for name, g in curves.items():
        g = g[g.load <= hi]
        load, y = g.load.to_numpy()[-3:], g.output_throughput_per_gpu_mean.to_numpy()[-3:]
        if y.size < 3:
            continue
        trend = "fell" if y[-1] < y[0] else f"stayed flat (under +{SATURATION_GAIN:.0%} a doubling)"
        where = ", ".join(f"{x:g}" for x in load) + (" users" if mode == "closed" else " x the trace's rate")
        said.append(("" if len(curves) == 1 else f"{name}: ") + f"throughput {trend} over the last two doublings, "
                    + " -> ".join(f"{v:,.0f}" for v in y) + f" tok/s/GPU at {where}")
    return f"saturated at load {hi:g}: " + "; ".join(said) + " (more load only queues)"


def _window_failure(df, policy: str, load: float) -> bool:
    """Whether ``policy``'s points at ``load`` failed for want of a closed-loop window (the trace too short)."""
    bad = df[(df.policy == policy) & (df.load == load) & (df.status != "ok")]
    return bool(len(bad)) and bad.error.astype(str).str.contains("closed-loop window").all()


def _midpoints(df, policy: str, loads: list[float], tiers: list[float], mode: str) -> list[float]:
    """Spread phase (module docstring, step 2): midpoints of the loads that straddle each tier."""
    out = set()
    for g in _curves(df, policy).values():
        load, tps = g.load.to_numpy(), g.mean_tps_per_user_mean.to_numpy()
        for t in tiers:
            for a, b, ta, tb in zip(load, load[1:], tps, tps[1:]):
                if at_least(ta, t) and at_most(tb, t) and b / a > REFINE_RATIO:
                    m = math.sqrt(a * b)
                    out.add(float(round(m)) if mode == "closed" else float(f"{m:.4g}"))
    return sorted(x for x in out if x not in loads)


def _spec_for(spec: SweepSpec, policy: str, mode: str, loads: list[float]) -> SweepSpec:
    load = tuple(int(x) for x in loads) if mode == "closed" else tuple(loads)
    return replace(spec, policies=(policy,), concurrency=load if mode == "closed" else (),
                   rate_scales=load if mode == "open" else ())


def auto_sweep(spec: SweepSpec, mode: str, tiers, scenario, trace, out_dir: str | Path, *, refine: int = 1,
               max_load: float | None = None, max_rounds: int = 16,
               on_round: Callable[[int, dict[str, list[float]]], None] | None = None, **run: Any) -> AutoOutcome:
    """Find every policy's load range for ``tiers`` (module docstring) and run it as sweep points in ``out_dir``.

    Args:
        spec: the sweep's axes except load (its concurrency / rate_scales are replaced).
        mode: ``closed`` (concurrency) or ``open`` (rate scales).
        tiers: SLA tiers, TPS/user (tok/s).
        scenario, trace, out_dir: as :func:`specsim.sweep.runner.run_sweep`.
        refine: spread rounds (module docstring, step 2).
        max_load: load cap (default :data:`MAX_CONCURRENCY` users or :data:`MAX_RATE_SCALE`).
        on_round: called with (round, loads per policy) before each round's points run.
        run: keywords of :func:`specsim.sweep.runner.run_sweep` (executor, jobs, address, retry_failed, force,
            progress).

    Returns:
        An :class:`AutoOutcome`; ``sweep.json`` lists every point of the search.
    """
    t0 = time.perf_counter()
    cap = float(max_load or (MAX_CONCURRENCY if mode == "closed" else MAX_RATE_SCALE))
    cap_why, size, what = "", len(trace) if hasattr(trace, "__len__") else None, "requests"
    convs = conversation_counts(trace)
    if convs is not None:                                   # a closed-loop user runs a whole conversation
        size, what = int(convs[-1]), "conversations"
    if mode == "closed" and size is not None and (size - 1) // 2 < cap:     # a window needs n > 2 x the users
        cap = float(max((size - 1) // 2, 1))
        cap_why = (f"the trace's {size:,} {what} (a closed-loop window needs more than twice the users: at most "
                   f"{cap:g} users)")
    tiers = sorted(float(t) for t in tiers)
    res = AutoOutcome({p: [1.0] for p in spec.policies}, stopped={p: [] for p in spec.policies})
    points: dict[str, Any] = {}
    pending, rnd, spreading = {p: [1.0] for p in spec.policies}, 0, False
    while True:
        if not any(pending.values()):                          # bracketing done: spread, ``refine`` times
            if refine <= 0:
                break
            refine, spreading = refine - 1, True
            df = results_frame(load_records(out_dir, list(points)))
            pending = {p: _midpoints(df, p, res.loads[p], tiers, mode) for p in spec.policies}
            if not any(pending.values()):
                break
        if on_round is not None:
            on_round(rnd, {p: v for p, v in pending.items() if v})
        _run_round(spec, mode, pending, scenario, trace, out_dir, res, points, run)
        rnd += 1
        df = results_frame(load_records(out_dir, list(points)))
        pending = ({p: _next_loads(df, p, res.loads[p], tiers, mode, cap, res.stopped[p], cap_why)
                    for p in spec.policies}
                   if rnd < max_rounds and not spreading else {})
    res.rounds, res.ids = rnd, list(points)
    df = results_frame(load_records(out_dir, list(points)))
    res.failed = sorted(df[df.status != "ok"].id.tolist()) if len(df) else []
    res.brackets = {c: {t: bracket_status(g.mean_tps_per_user_mean.to_numpy(), t) for t in tiers}
                    for p in spec.policies for c, g in _curves(df, p).items()}
    _note_bracket_loads(res, df, spec.policies, tiers)
    ok = df[df.status == "ok"] if len(df) else df
    res.frontier = ({c: {t: f.status_at(t) for t in tiers} for c, f in frontiers(seed_spread(ok)).items()}
                    if len(ok) else {})
    all_loads = sorted({x for v in res.loads.values() for x in v})
    manifest = replace(_spec_for(spec, spec.policies[0], mode, all_loads), policies=tuple(spec.policies))
    write_manifest(out_dir, manifest, scenario, trace, list(points.values()), tiers)
    res.wall_time_s = time.perf_counter() - t0
    return res


def _note_bracket_loads(res: AutoOutcome, df, policies, tiers: list[float]) -> None:
    """Fill ``res.bracket_loads`` and ``res.flagged`` (:class:`AutoOutcome`) from the search's records ``df``. A
    fresh user's search bracketed tier 100 with a thrashing point at 91 users and said only "bracketed"."""
    from specsim.analysis.sweep_tables import flagged_points

    flags = flagged_points(df) if len(df) else {}
    for p in policies:
        for c, g in _curves(df, p).items():
            at = {t: bracket_loads(g.load.to_numpy(), g.mean_tps_per_user_mean.to_numpy(), t) for t in tiers
                  if res.brackets.get(c, {}).get(t) == "bracketed"}
            res.bracket_loads[c] = at
            res.flagged[c] = {t: hits for t, loads in at.items()
                              if (hits := [(x, flags[(c, f"{x:g}")]) for x in loads if (c, f"{x:g}") in flags])}


def _counting_on(run: dict[str, Any], res: AutoOutcome) -> dict[str, Any]:
    """``run`` whose progress callback counts on from the search's earlier runs: the bar reads "points so far of
    the search", not the current run's few (the search's total is not known until it ends)."""
    progress, before = run.get("progress"), res.computed + res.skipped
    if progress is None or not before:
        return run
    return {**run, "progress": lambda ev: progress(replace(ev, done=ev.done + before, total=ev.total + before))}


def _run_round(spec: SweepSpec, mode: str, pending: dict[str, list[float]], scenario, trace, out_dir,
               res: AutoOutcome, points: dict[str, Any], run: dict[str, Any]) -> None:
    """Run each policy's new loads as sweep points (finished ones are skipped) and note them in ``res``."""
    for p, new in pending.items():
        if not new:
            continue
        res.loads[p] = sorted(set(res.loads[p]) | set(new))
        out = run_sweep(_spec_for(spec, p, mode, new), scenario, trace, out_dir, **_counting_on(run, res))
        res.computed, res.skipped = res.computed + out.computed, res.skipped + out.skipped
        points.update({q.id: q for q in out.points})
