"""Pareto frontiers of (TPS/user, throughput per GPU) and policy comparison at SLA tiers.

Definitions (DESIGN.md vocabulary; the DSpark paper's §5 reports Fig. 7 this way):

* Frontier of a curve (a policy with its knobs): over its load points (seed means of
  ``mean_tps_per_user`` x and ``output_throughput_per_gpu`` y), the non-dominated set: a point is
  dropped when another has x' >= x and y' >= y with one strict. Sorted by x ascending, the kept points
  have y strictly decreasing.
* Interpolation rule: linear in TPS/user between adjacent frontier points, which keeps the curve
  monotone (decreasing). No extrapolation: a tier above the frontier's largest TPS/user is
  ``infeasible`` (even the lightest load does not reach it) and reads as NaN; a tier below its smallest
  TPS/user is ``covered`` (every frontier point meets it) and reads the best throughput among the points
  meeting it, which is the frontier's heaviest-load point (any point meeting the tier is dominated by a
  frontier point that meets it too). Never NaN when some point meets the tier.
* Load advice (:func:`load_advice`; where a covered curve's heavier load failed, that load is named instead:
  the answer may lie there): "add heavier loads" only for a covered tier whose curve's heaviest
  load still raises throughput by more than ``RISING`` (2%) over the load before it, or whose curve has one
  load (nothing then shows that heavier loads lose throughput); "add lighter loads"
  only when the lightest load's TPS/user is below the tier (and it is not already one closed-loop user);
  "add loads between A and B" when the tier falls between loads A and B and the throughput interpolated at
  it is more than ``BRACKET_GAP`` (5%) above A's, the load that meets it (the answer then rests on the line
  between two distant points).
* Winner per tier: :func:`specsim.analysis.tiers.tier_winners`, its margin judged by the one paired rule
  of :mod:`specsim.analysis.significance`.
* Throughput at an SLA tier t: y(t). Gain of A over B at t: y_A(t) / y_B(t) - 1.
* TPS/user at matched throughput: at B's throughput y_B(t), A's TPS/user x_A(y_B(t)) by the inverse
  of the same piecewise-linear curve; its gain is x_A / x_B - 1 with x_B = x_B(y_B(t)), B's own TPS/user at
  that throughput (the paper's "+60-85% TPS/user"): t itself where the tier lies on B's frontier, B's
  faster point where B covers the tier (its best point meeting it runs above t), so B's gain is 0.
  Beyond the frontier's throughput range: ``infeasible`` above its largest throughput, ``uncovered``
  below its smallest.
* SLA attainment of a point at tier t: the share of its measured multi-token requests whose TPS/user
  >= t. Goodput: output tokens per second per GPU from those requests, i.e. the point's
  ``output_throughput_per_gpu`` times the share of the measured output tokens that belong to them.
  Per curve and tier we report the load with the largest goodput (seed means).
* Fraction of the oracle: y_A(t) / y_oracle(t) when the ``oracle`` policy is in the sweep (the oracle
  curve with the same knobs when it was swept over knobs too, else its only curve).
* Tolerance: every comparison of a TPS/user or a throughput against a tier (frontier status, interpolation,
  SLA attainment) uses :func:`specsim.analysis.metrics.at_least` / :func:`specsim.analysis.metrics.at_most` (relative
  tolerance ``specsim.analysis.metrics.REL_TOL``): a point whose TPS/user equals the tier up to rounding
  (49.99999999999478 at tier 50) meets it, in the frontier and in attainment alike; a tier within the
  tolerance of a frontier end reads that end's value.
* Spread over seeds: the frontier is also built per seed; ``throughput_std`` is the standard deviation
  (ddof 1) of y(t) over the seeds where it is defined (NaN with fewer than two).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError, did_you_mean
from specsim.analysis.metrics import at_least, at_most, check_slos
from specsim.analysis.tiers import as_tiers, goodput_notes, mark_winners, tiers_json
from specsim.analysis.answer_notes import flagged_answer_notes
from specsim.analysis.sweep_records import as_records
from specsim.analysis.sweep_tables import (cautions, measured, one_scenario_frame, results_frame, seed_spread,
                                          winner_cautions)
from specsim.analysis.tier_notes import (attainment_notes, baseline_edge, baseline_edge_notes, winner_attainment,
                                        with_throughput)

X = "mean_tps_per_user"
Y = "output_throughput_per_gpu"
#: Relative throughput growth between a curve's two heaviest loads above which heavier loads may still help.
RISING = 0.02
#: The throughput interpolated at a tier this much above the load meeting it asks for loads in between.
BRACKET_GAP = 0.05


def pareto_mask(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(n,) bool: True where (x_i, y_i) is not dominated (another point >= in both, > in one).

    Exact duplicates (the same x and y, e.g. two loads that saturate alike) keep only their first occurrence, so
    a frontier draws one point; :meth:`Frontier.from_points` keeps the others' loads in ``duplicate_loads``.
    NaN points are never on the frontier.
    """
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    ge = (x[None, :] >= x[:, None]) & (y[None, :] >= y[:, None]) & ok[None, :]       # (n, n): j >= i in both
    gt = (x[None, :] > x[:, None]) | (y[None, :] > y[:, None])
    dominated = (ge & gt).any(axis=1)
    same = (x[None, :] == x[:, None]) & (y[None, :] == y[:, None]) & ok[None, :]
    earlier_dup = np.tril(same, k=-1).any(axis=1)
    return ok & ~dominated & ~earlier_dup


@dataclass(frozen=True)
class Frontier:
    """One curve's Pareto frontier (module docstring rules).

    Attributes:
        curve: curve label.
        tps_per_user: (m,) frontier TPS/user, tok/s, ascending.
        throughput_per_gpu: (m,) frontier output throughput per GPU, tok/s, strictly decreasing.
        loads: (m,) the load (concurrency or rate scale) of each frontier point.
        duplicate_loads: (m,) tuples: the loads of the other points that duplicate each frontier point exactly
            (same TPS/user and throughput; drawn once, at ``loads``); empty for most points.
    """

    curve: str
    tps_per_user: np.ndarray
    throughput_per_gpu: np.ndarray
    loads: np.ndarray
    duplicate_loads: tuple = ()

    @classmethod
    def from_points(cls, curve: str, x: np.ndarray, y: np.ndarray, loads: np.ndarray) -> "Frontier":
        """The frontier of points (x TPS/user, y throughput per GPU) at ``loads`` (duplicates: :func:`pareto_mask`)."""
        x, y, loads = np.asarray(x, float), np.asarray(y, float), np.asarray(loads, float)
        keep = pareto_mask(x, y)
        order = np.argsort(x[keep], kind="stable")
        idx = np.flatnonzero(keep)[order]                                           # (m,) kept, by TPS/user
        same = (x[idx, None] == x[None, :]) & (y[idx, None] == y[None, :])          # (m, n) exact duplicates
        dups = tuple(tuple(float(v) for v in loads[row & (np.arange(x.size) != i)]) for i, row in zip(idx, same))
        return cls(curve, x[idx], y[idx], loads[idx], dups)

    def points_table(self) -> list[dict[str, Any]]:
        """One row per frontier load, duplicates included and marked: ``load``, ``tps_per_user``,
        ``throughput_per_gpu``, ``duplicate_of`` (the drawn point's load for a duplicate, else None)."""
        rows = []
        for i, load in enumerate(self.loads):
            point = {"tps_per_user": float(self.tps_per_user[i]),
                     "throughput_per_gpu": float(self.throughput_per_gpu[i])}
            rows.append({"load": float(load), **point, "duplicate_of": None})
            dups = self.duplicate_loads[i] if self.duplicate_loads else ()
            rows += [{"load": d, **point, "duplicate_of": float(load)} for d in dups]
        return rows

    def status_at(self, tier: float) -> str:
        """``ok``, ``infeasible`` (tier above the largest TPS/user) or ``covered`` (below the smallest)."""
        if self.tps_per_user.size == 0 or not at_least(self.tps_per_user[-1], tier):
            return "infeasible"
        if not at_most(self.tps_per_user[0], tier):
            return "covered"
        return "ok"

    def throughput_at(self, tier: float) -> float:
        """Throughput per GPU (tok/s) at TPS/user ``tier``: linear between frontier points; the heaviest-load
        point's throughput when the tier is ``covered``; NaN when ``infeasible``."""
        st = self.status_at(tier)
        if st == "infeasible":
            return float("nan")
        if st == "covered":
            return float(self.throughput_per_gpu[0])
        x = min(max(tier, self.tps_per_user[0]), self.tps_per_user[-1])      # within the tolerance of an end
        return float(np.interp(x, self.tps_per_user, self.throughput_per_gpu))

    def throughput_status(self, throughput: float) -> str:
        """``ok``, ``infeasible`` (above the largest throughput) or ``uncovered`` (below the smallest)."""
        if self.throughput_per_gpu.size == 0 or not at_least(self.throughput_per_gpu[0], throughput):
            return "infeasible"
        if not at_most(self.throughput_per_gpu[-1], throughput):
            return "uncovered"
        return "ok"

    def tps_at_throughput(self, throughput: float) -> float:
        """TPS/user (tok/s) at which the frontier delivers ``throughput`` per GPU; NaN outside its range."""
        if not np.isfinite(throughput) or self.throughput_status(throughput) != "ok":
            return float("nan")
        # y strictly decreasing in x: interpolate x over the reversed (increasing) y
        y = min(max(throughput, self.throughput_per_gpu[-1]), self.throughput_per_gpu[0])
        return float(np.interp(y, self.throughput_per_gpu[::-1], self.tps_per_user[::-1]))


def frontiers(spread: pd.DataFrame) -> dict[str, Frontier]:
    """Per curve, the frontier of its seed-mean load points (a :func:`specsim.analysis.sweep_tables.seed_spread` frame).

    Raises:
        SpecsimInputError: ``spread`` is not a seed-spread frame (e.g. :func:`results_frame`'s rows, one per seed).
    """
    if not isinstance(spread, pd.DataFrame):
        raise SpecsimInputError(None, None, "spread", "a seed_spread frame (specsim.analysis.sweep_tables."
                                "seed_spread(results_frame(records)))", type(spread).__name__)
    missing = [c for c in ("curve", "load", f"{X}_mean", f"{Y}_mean") if c not in spread.columns]
    if missing:
        raise SpecsimInputError(None, None, "spread", "a seed_spread frame (specsim.analysis.sweep_tables."
                                "seed_spread(results_frame(records)))", f"a frame without {', '.join(missing)}")
    out = {}
    for curve, sub in spread.groupby("curve", sort=True):
        out[str(curve)] = Frontier.from_points(str(curve), sub[f"{X}_mean"].to_numpy(),
                                               sub[f"{Y}_mean"].to_numpy(), sub["load"].to_numpy())
    return out


def load_advice(points: pd.DataFrame, tier: float) -> str:
    """Whether more load points could change a curve's answer at ``tier`` (module docstring rule).

    Args:
        points: one curve's load points, columns ``load, mode`` and the seed means ``<X>_mean, <Y>_mean``
            (:func:`specsim.analysis.sweep_tables.seed_spread` rows of one curve).
        tier: the SLA tier, TPS/user.

    Returns:
        ``"add heavier loads"``, ``"add lighter loads"``, ``"add loads between A and B"`` or ``""``.
    """
    p = points.sort_values("load")
    x, y = p[f"{X}_mean"].to_numpy(float), p[f"{Y}_mean"].to_numpy(float)
    if x.size == 0:
        return ""
    if not at_least(x[0], tier):                          # the lightest load is below the tier
        one_user = p["mode"].iloc[0] == "closed" and float(p["load"].iloc[0]) <= 1
        return "" if one_user else "add lighter loads"
    covered = not at_most(np.nanmin(x), tier)             # every load point beats the tier
    if covered and (x.size == 1 or (y[-2] > 0 and y[-1] / y[-2] - 1 > RISING)):
        return "add heavier loads"                        # one load: nothing says heavier ones lose throughput
    loads = p["load"].to_numpy(float)
    for i in range(x.size - 1):                           # the tier between load i (meets it) and i + 1
        if at_least(x[i], tier) and not at_least(x[i + 1], tier) and y[i] > 0 and x[i] > x[i + 1]:
            y_t = y[i] + (x[i] - tier) / (x[i] - x[i + 1]) * (y[i + 1] - y[i])
            if y_t / y[i] - 1 > BRACKET_GAP:
                return f"add loads between {loads[i]:g} and {loads[i + 1]:g}"
    return ""


def _failed_heavier(df: pd.DataFrame, curve: str) -> tuple[list[str], bool | str]:
    """The loads of ``curve`` heavier than its heaviest finished one at which every point failed, as text, and
    whether every one of them failed for want of requests (a closed loop too short for its window: a rerun fails
    again; ``"whole"`` where each ran the whole trace); ([], False) when none."""
    c = df[df.curve == curve]
    ok = c[c.status == "ok"]
    if ok.empty:
        return [], False
    heavier = c[(c.load > ok.load.max()) & (c["mode"] == ok["mode"].iloc[-1])]
    failed = heavier[~heavier.load.isin(heavier[heavier.status == "ok"].load)]
    errors = failed.error.astype(str)
    short = bool(len(failed)) and errors.str.contains("closed-loop window").all()
    whole = short and errors.str.contains("ran the whole trace").all()
    return [f"{v:g}" for v in sorted(set(failed.load))], "whole" if whole else short


def failed_heavier_advice(failed: list[str], short: bool | str) -> str:
    """The advice of a covered tier whose curve failed at heavier loads (:func:`_failed_heavier`)."""
    loads = f"heavier load{'s' if len(failed) > 1 else ''} {', '.join(failed)}"
    if short == "whole":
        return (f"{loads} failed for want of requests: those points ran the whole trace, too short for a "
                "closed-loop window there; the answer may lie there, and a longer trace would tell")
    if short:
        return (f"{loads} failed for want of requests (the trace is too short for a closed-loop window there): "
                "the answer may lie there; more --requests-per-user would tell, or a longer trace where those "
                "points ran all of it (compare lists the error)")
    return f"{loads} failed: the answer may lie there (rerun it; compare lists the error)"


def _rising(points: pd.DataFrame) -> bool:
    """Whether a curve's throughput still rises by more than :data:`RISING` from its second-heaviest load point to
    its heaviest (one point: True), the rule that advises heavier loads (:func:`load_advice`)."""
    y = points.sort_values("load")[f"{Y}_mean"].to_numpy(float)
    return y.size < 2 or (y[-2] > 0 and y[-1] / y[-2] - 1 > RISING)


def _per_seed_frontiers(df: pd.DataFrame) -> dict[tuple[str, int], Frontier]:
    ok = df[df.status == "ok"]
    return {(str(c), int(s)): Frontier.from_points(str(c), sub[X].to_numpy(), sub[Y].to_numpy(),
                                                   sub["load"].to_numpy())
            for (c, s), sub in ok.groupby(["curve", "seed"], sort=True)}


def _goodputs(rec: dict[str, Any], tiers: list[float],
              slos_ms: dict[str, float] | None = None) -> list[tuple[float, float]]:
    """(attainment, goodput tok/s/GPU) of one record at each of ``tiers`` (module docstring); with ``slos_ms`` a
    request meets a tier only if it also meets those limits (``{"ttft"|"tpot"|"e2el": ms}``, vLLM's ``--goodput``).
    The record's per-request lists are read once for all the tiers."""
    tps = np.asarray(rec["requests"]["tps_per_user"], float)
    out = np.asarray(rec["requests"]["output_tokens"], float)
    if tps.size == 0 or out.sum() == 0:
        return [(float("nan"), float("nan"))] * len(tiers)
    good = _within_slos(rec, slos_ms, tps.size) if slos_ms else None
    thr = measured(rec, "output_throughput_per_gpu")
    pairs = []
    for tier in tiers:
        meet = at_least(tps, tier)
        if good is not None:
            meet &= good
        pairs.append((float(meet.mean()),
                      float(thr * out[meet].sum() / out.sum()) if thr is not None else float("nan")))
    return pairs


def _within_slos(rec: dict[str, Any], slos_ms: dict[str, float], n: int) -> np.ndarray:
    """(n,) bool: which of the record's measured multi-token requests (its ``requests`` arrays) meet every limit
    of ``slos_ms``; its ``latencies`` list the one-token requests too (TPOT 0, vLLM's convention), left out here.

    Raises:
        SpecsimInputError: a record without per-request latencies, or whose two lists do not match.
    """
    lat = rec.get("latencies")
    if lat is None:
        raise SpecsimInputError(str(rec.get("id")), None, "latencies",
                                "sweep records with per-request latencies (--goodput needs them; records written "
                                "by an older specsim lack them: rerun the sweep with --force)", "none")
    multi = np.asarray(lat["tpot_ms"], float) > 0
    good = np.ones(int(multi.sum()), bool)
    sizes = {len(lat[f"{name}_ms"]) for name in slos_ms} | {multi.size}
    for name, limit in slos_ms.items():
        if len(sizes) == 1:
            good &= at_most(np.asarray(lat[f"{name}_ms"], float)[multi], limit)
    if good.size != n or len(sizes) > 1:
        raise SpecsimInputError(str(rec.get("id")), None, "latencies",
                                f"one entry per measured multi-token request ({n})", str(good.size))
    return good


def sla_table(records: list[dict[str, Any]], tiers: Iterable[float],
              slos_ms: dict[str, float] | None = None) -> pd.DataFrame:
    """SLA attainment and goodput per (curve, mode, load, tier), seed means of the ``ok`` points (with
    ``slos_ms``, checked by :func:`~specsim.analysis.metrics.check_slos`, a request must meet them too: _goodputs).

    Returns:
        Columns ``curve, mode, load, tier, attainment, goodput_per_gpu`` (share in [0, 1]; tok/s/GPU).
    """
    df, slos_ms = results_frame(records), check_slos(slos_ms) or None
    by_id = {r["id"]: r for r in records}
    rows, tiers = [], [float(t) for t in tiers]
    for _, row in df[df.status == "ok"].iterrows():
        for t, (att, gp) in zip(tiers, _goodputs(by_id[row.id], tiers, slos_ms)):
            rows.append({"curve": row.curve, "mode": row["mode"], "load": row.load, "seed": row.seed,
                         "tier": t, "attainment": att, "goodput_per_gpu": gp})
    if not rows:
        return pd.DataFrame(columns=["curve", "mode", "load", "tier", "attainment", "goodput_per_gpu"])
    g = pd.DataFrame(rows).groupby(["curve", "mode", "load", "tier"], sort=True)
    return g[["attainment", "goodput_per_gpu"]].mean().reset_index()


def _record_goodput(rec: dict[str, Any], slos_ms: dict[str, float]) -> tuple[float, float]:
    """(share of good requests, request goodput req/s) of one record under vLLM's rule (specsim.analysis.metrics)."""
    lat = rec.get("latencies")
    if lat is None:
        raise SpecsimInputError(str(rec.get("id")), None, "latencies",
                                "sweep records with per-request latencies (--goodput needs them; records written "
                                "by an older specsim lack them: rerun the sweep with --force)", "none")
    duration = measured(rec, "duration_s")
    good = np.ones(len(lat["ttft_ms"]), bool)
    for name, limit in slos_ms.items():
        good &= at_most(np.asarray(lat[f"{name}_ms"], float), limit) if good.size else good
    share = float(good.mean()) if good.size else float("nan")
    return share, (float(good.sum() / duration) if duration else float("nan"))


def request_goodput_table(records: list[dict[str, Any]], slos_ms: dict[str, float]) -> pd.DataFrame:
    """vLLM's request goodput per (curve, mode, load), seed means of the ``ok`` points.

    A request is good when every limit of ``slos_ms`` holds (``{"ttft"|"tpot"|"e2el": ms}``,
    :func:`specsim.analysis.metrics.parse_goodput`; a one-token request's TPOT is 0); ``request_goodput`` = good
    requests / the point's duration (the window's in closed loop), req/s; ``good_share`` = good / measured.

    Returns:
        Columns ``curve, mode, load, num_seeds, good_share, request_goodput``.

    Raises:
        SpecsimInputError: a record without per-request latencies (written by an older specsim).
    """
    df = results_frame(records)
    cols = ["curve", "mode", "load", "num_seeds", "good_share", "request_goodput"]
    if df.empty or not (df.status == "ok").any():
        return pd.DataFrame(columns=cols)
    by_id = {r["id"]: r for r in records}
    rows = []
    for _, row in df[df.status == "ok"].iterrows():
        share, gp = _record_goodput(by_id[row.id], slos_ms)
        rows.append({"curve": row.curve, "mode": row["mode"], "load": row.load, "good_share": share,
                     "request_goodput": gp})
    g = pd.DataFrame(rows).groupby(["curve", "mode", "load"], sort=True)
    out = g[["good_share", "request_goodput"]].mean()
    out.insert(0, "num_seeds", g.size())
    return out.reset_index()[cols]


def _ratio(a: float, b: float) -> float:
    return a / b if np.isfinite(a) and np.isfinite(b) and b > 0 else float("nan")


def compare(records: list[dict[str, Any]] | str | Path, tiers: Iterable[float] | float | str,
            baseline: str | None = None, slos_ms: dict[str, float] | None = None) -> pd.DataFrame:
    """The comparison table: one row per (tier, curve).

    Args:
        records: sweep records (:func:`specsim.analysis.sweep_records.load_records`) or a sweep folder.
        tiers: SLA tiers, TPS/user in tok/s (:func:`specsim.analysis.tiers.as_tiers`: a number, numbers or
            ``"100,150"``).
        baseline: the curve (or policy name) gains are measured against; None for no gains.
        slos_ms: latency limits (``{"ttft"|"tpot"|"e2el": ms}``, ``specsim compare --goodput``) a request must also
            meet to count in ``best_goodput_per_gpu`` and ``attainment_at_best``; None: the tier alone.

    Returns:
        Columns: ``tier, curve, status, throughput_per_gpu, throughput_std, num_seeds, gain_vs_baseline,
        tps_at_matched_throughput, tps_gain_at_matched, oracle_fraction, best_goodput_per_gpu,
        best_goodput_load, attainment_at_best, advice`` (NaN where not defined; see the module docstring)
        and the winner columns of :func:`specsim.analysis.tiers.mark_winners` (``winner, margin,
        margin_holds, margin_verdict, runner_up, tied_with``), ``caution`` (a winner, or a curve tied with it, read
        from a flagged point: :func:`specsim.analysis.sweep_tables.winner_cautions`), ``runner_up_caution`` and
        ``baseline_caution`` (the winner's margin or gain divides by a figure read from a flagged point:
        :func:`specsim.analysis.sweep_tables.reference_cautions`). ``attrs``: ``baseline``, ``per_seed`` (``{(tier,
        curve): {seed: throughput at the tier}}``, the values the paired rule reads), ``baseline_edge``
        (:func:`specsim.analysis.tier_notes.baseline_edge`), ``attainment`` (``{tier: TierAttainment}`` of each
        winner's point: :func:`specsim.analysis.tier_notes.winner_attainment`) and ``warnings``: the lines
        ``specsim compare`` prints under its table (points that thrash, are prefill- or think-bound or overloaded;
        one warning per tier whose winner, or lead over a runner-up or baseline, is read from them:
        :func:`specsim.analysis.answer_notes.flagged_answer_notes`; tiers the baseline meets only at its lightest
        load; tiers alike in either said once; tiers where another curve delivers more goodput than the winner:
        :func:`specsim.analysis.tiers.goodput_notes`, winners that meet the tier by the mean alone:
        :func:`specsim.analysis.tier_notes.attainment_notes`; a notebook user saw none of them).

    Raises:
        SpecsimInputError: no successful point, a baseline that is not a curve of the sweep, or records
            from several scenarios.
    """
    tiers = list(as_tiers(tiers))
    if not tiers:
        raise SpecsimInputError(None, None, "tiers", "at least one SLA tier (TPS/user, tok/s)", "none")
    records = as_records(records)
    df = one_scenario_frame(records)
    spread = seed_spread(df)
    fr = frontiers(spread)
    base = _match_curve(baseline, fr) if baseline else None
    per_seed = _per_seed_frontiers(df)
    sla = sla_table(records, tiers, slos_ms)
    oracle_of = {c: _oracle_curve(c, fr) for c in fr}
    rows, seed_values = [], {}
    failed_of = {c: _failed_heavier(df, c) for c in fr}
    for t in tiers:
        yb = fr[base].throughput_at(t) if base else float("nan")
        xb = fr[base].tps_at_throughput(yb) if base else float("nan")     # t, or above t where base covers it
        for curve, f in fr.items():
            yo = fr[oracle_of[curve]].throughput_at(t) if oracle_of[curve] else float("nan")
            by_seed = {s: pf.throughput_at(t) for (c, s), pf in per_seed.items() if c == curve}
            seed_values[(t, curve)] = {s: y for s, y in by_seed.items() if np.isfinite(y)}
            ys = np.array(list(seed_values[(t, curve)].values()), float)
            row = _tier_row(t, f, (yb, xb), yo, ys, sla[(sla.curve == curve) & (sla.tier == t)])
            row["advice"] = load_advice(spread[spread.curve == curve], t)
            failed, short = failed_of[curve]
            if row["status"] == "covered" and failed and _rising(spread[spread.curve == curve]):
                row["advice"] = failed_heavier_advice(failed, short)     # the answer may lie where none finished
            rows.append(row)
    out = mark_winners(pd.DataFrame(rows), seed_values)
    out.attrs["baseline"] = base
    out.attrs["slos_ms"] = dict(slos_ms or {})
    out.attrs["per_seed"] = seed_values
    out.attrs["baseline_edge"] = baseline_edge(fr[base], tiers) if base else {}
    plain = sla_table(records, tiers) if slos_ms else sla            # attainment of the tier alone, no latency limit
    out.attrs["attainment"] = winner_attainment(out, fr, with_throughput(plain, spread))
    winner_cautions(out, fr, df)
    out.attrs["warnings"] = ([f"warning: {text}" for _, text in cautions(df)] + flagged_answer_notes(out, fr, df)
                             + baseline_edge_notes(out) + goodput_notes(out) + attainment_notes(out))
    return out


def _tier_row(t: float, f: Frontier, base: tuple[float, float], yo: float, ys: np.ndarray,
              sla: pd.DataFrame) -> dict[str, Any]:
    """One row of :func:`compare` for curve ``f`` at tier ``t``.

    Args:
        t: the SLA tier, TPS/user.
        f: the curve's frontier.
        base: (the baseline's throughput per GPU at ``t``, its own TPS/user at that throughput); NaNs without
            a baseline.
        yo: the matching oracle curve's throughput per GPU at ``t`` (NaN without one).
        ys: (s,) the curve's finite per-seed throughputs per GPU at ``t``.
        sla: the curve's :func:`sla_table` rows at ``t``.
    """
    y = f.throughput_at(t)
    yb, xb = base
    x_m = f.tps_at_throughput(yb)
    best = sla.loc[sla.goodput_per_gpu.idxmax()] if sla.goodput_per_gpu.notna().any() else None
    nan = float("nan")
    return {
        "tier": t, "curve": f.curve, "status": f.status_at(t), "throughput_per_gpu": y,
        "throughput_std": float(np.std(ys, ddof=1)) if ys.size > 1 else nan, "num_seeds": int(ys.size),
        "gain_vs_baseline": _ratio(y, yb) - 1, "tps_at_matched_throughput": x_m,
        "tps_gain_at_matched": x_m / xb - 1 if np.isfinite(x_m) and np.isfinite(xb) else nan,
        "oracle_fraction": _ratio(y, yo),
        "best_goodput_per_gpu": float(best.goodput_per_gpu) if best is not None else nan,
        "best_goodput_load": float(best.load) if best is not None else nan,
        "attainment_at_best": float(best.attainment) if best is not None else nan,
    }


def _oracle_curve(curve: str, fr: dict[str, Frontier]) -> str | None:
    """The oracle curve a curve is measured against: ``oracle`` with the same knob suffix, else the only one."""
    suffix = curve.split(" ", 1)[1] if " " in curve else ""
    same = f"oracle {suffix}".strip()
    if same in fr:
        return same
    oracles = [c for c in fr if c.split(" ", 1)[0] == "oracle"]
    return oracles[0] if len(oracles) == 1 else None


def _match_curve(name: str, fr: dict[str, Frontier]) -> str:
    """The curve called ``name``, or the only curve of policy ``name``."""
    if name in fr:
        return name
    hits = [c for c in fr if c.split(" ", 1)[0] == name]
    if len(hits) == 1:
        return hits[0]
    names = set(fr) | {c.split(" ", 1)[0] for c in fr}          # a curve, or a policy with one curve
    raise SpecsimInputError("--baseline", None, "baseline",
                            f"one of the sweep's curves {sorted(fr)}{did_you_mean(name, names)}", repr(name))


def budget_curve(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Mean verify tokens per request vs load per curve (the paper's Fig. 8), seed means with std.

    Returns:
        Columns ``curve, mode, load, mean_verify_tokens_per_request_mean, ..._std, num_seeds``.
    """
    sp = seed_spread(results_frame(records), ["mean_verify_tokens_per_request"])
    return sp[["curve", "mode", "load", "num_seeds", "mean_verify_tokens_per_request_mean",
               "mean_verify_tokens_per_request_std"]]


def comparison_json(records: list[dict[str, Any]], tiers: Iterable[float], baseline: str | None,
                    goodput_slos_ms: dict[str, float] | None = None) -> dict[str, Any]:
    """Everything ``specsim compare --json`` prints: frontiers, the tier table, the winner per tier
    (:func:`specsim.analysis.tiers.tiers_json`), the budget curve, and with
    ``goodput_slos_ms`` the ``request_goodput`` table (:func:`request_goodput_table`) and its limits.

    NaN becomes None; each tier row keeps its ``status`` so an infeasible tier reads as such.
    """
    table = compare(records, tiers, baseline, goodput_slos_ms)
    spread = seed_spread(results_frame(records))
    fr = frontiers(spread)

    def clean(v: Any) -> Any:
        if isinstance(v, (float, np.floating)):
            return float(v) if np.isfinite(v) else None
        if isinstance(v, np.integer):
            return int(v)
        return v

    out = {
        "baseline": table.attrs["baseline"],
        "tiers": [float(t) for t in tiers],
        "frontiers": {c: {"tps_per_user": f.tps_per_user.tolist(), "throughput_per_gpu": f.throughput_per_gpu.tolist(),
                          "loads": f.loads.tolist(), "duplicate_loads": [list(d) for d in f.duplicate_loads],
                          "points": f.points_table()} for c, f in fr.items()},
        "table": [{k: clean(v) for k, v in row.items()} for row in table.to_dict(orient="records")],
        "budget_curve": [{k: clean(v) for k, v in row.items()}
                         for row in budget_curve(records).to_dict(orient="records")],
        "winners": tiers_json(table),
    }
    if goodput_slos_ms:
        out["goodput_slos_ms"] = dict(goodput_slos_ms)
        out["request_goodput"] = [{k: clean(v) for k, v in row.items()} for row in
                                  request_goodput_table(records, goodput_slos_ms).to_dict(orient="records")]
    return out
