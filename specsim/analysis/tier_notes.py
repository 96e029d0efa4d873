"""What qualifies a tier's answer: a tier met by the mean TPS/user alone, and a baseline met only at its edge.

* **Attainment** (:func:`tier_attainment`, :func:`attainment_caution`): a tier is met by the mean TPS/user of a
  point's requests (the frontier's axis), so a point can meet it while some of its users run slower. The answer's
  point is the curve's frontier point meeting the tier with the most throughput (:func:`meeting_point`: the
  smallest TPS/user at or above the tier, a simulated point); its attainment is the share of its measured requests
  whose own TPS/user meets the tier (seed mean, :func:`specsim.analysis.frontier.sla_table`, without latency
  limits). Below :data:`ATTAINMENT_GOAL` the caution names the curve's load with the most throughput where that
  goal is met. One rule and one sentence for ``recommend``, ``compare`` (its notes) and the report's answer line
  (a fresh user's report said "6,560 tok/s/GPU" at tier 100 where 61% of the point's requests ran at 100 TPS/user).
* **Baseline edge** (:func:`baseline_edge`, :func:`baseline_edge_notes`): where the baseline meets a tier only at
  its lightest load (its fastest frontier point) and its throughput there is below :data:`EDGE_SHARE` of the most
  it serves on its frontier (its heaviest frontier load's), it runs near its speed ceiling and serves little, so a
  gain over it is large by construction: against the baseline's best throughput the same curve's ratio would be
  less than half as large. A tier whose figure the baseline reads between its lightest load and a heavier one
  that serves nearly as much is no such edge (a fresh user's 3,054 tok/s/GPU at tier 50 against 3,084 at 64 users
  drew the note on a sparse grid).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np
import pandas as pd

from specsim import fmt
from specsim.analysis.metrics import at_least

#: The share of requests that must meet a tier for a load to serve it to (nearly) every user: nine in ten, a p10
#: TPS/user at the tier (``recommend``'s attained load, the cautions of this module).
ATTAINMENT_GOAL = 0.9
#: A baseline figure at a tier below this share of the baseline's most throughput makes gains over it large by
#: construction (module docstring).
EDGE_SHARE = 0.5


@dataclass(frozen=True)
class TierAttainment:
    """The attainment of a curve's answer at a tier (module docstring).

    Attributes:
        curve, tier: the curve and the tier (TPS/user). mode, load: the point's load (closed: users; open: rate
            scale). share: its requests meeting the tier (seed mean, in [0, 1]).
        attained_load, attained_share, attained_throughput_per_gpu: the curve's load with the most throughput among
            those where at least :data:`ATTAINMENT_GOAL` of the requests meet the tier (its attainment and tok/s/GPU,
            seed means); None where the point itself does, or no load does.
    """

    curve: str
    tier: float
    mode: str
    load: float
    share: float
    attained_load: float | None = None
    attained_share: float | None = None
    attained_throughput_per_gpu: float | None = None


def meeting_point(f, tier: float) -> int:
    """The index in frontier ``f`` (:class:`specsim.analysis.frontier.Frontier`) of its point meeting ``tier`` with
    the most throughput (the smallest TPS/user at or above it), or of its fastest point where none meets it."""
    ok = np.flatnonzero(f.tps_per_user >= tier * (1 - 1e-9))
    return int(ok[0]) if ok.size else f.tps_per_user.size - 1


def with_throughput(sla: pd.DataFrame, spread: pd.DataFrame) -> pd.DataFrame:
    """``sla`` (:func:`specsim.analysis.frontier.sla_table`) with each (curve, load)'s seed-mean
    ``throughput_per_gpu`` from ``spread`` (:func:`specsim.analysis.sweep_tables.seed_spread`)."""
    thr = spread.set_index(["curve", "load"])["output_throughput_per_gpu_mean"]
    out = sla.copy()
    out["throughput_per_gpu"] = [thr.get((c, ld), np.nan) for c, ld in zip(sla.curve, sla.load)]
    return out


def tier_attainment(sla: pd.DataFrame, curve: str, tier: float, load: float) -> TierAttainment | None:
    """The attainment of ``curve``'s point at ``load`` at ``tier`` and, below :data:`ATTAINMENT_GOAL`, its load
    that meets the goal with the most throughput (module docstring).

    Args:
        sla: :func:`with_throughput` rows (``curve, mode, load, tier, attainment, throughput_per_gpu``).
        curve, tier, load: the answer's curve, tier and load (:func:`meeting_point`).

    Returns:
        A :class:`TierAttainment`, None where the point has no per-request record at the tier.
    """
    rows = sla[(sla.curve == curve) & (sla.tier == float(tier))]
    here = rows[rows.load == load]
    if here.empty or not np.isfinite(here.attainment.iloc[0]):
        return None
    a = TierAttainment(curve, float(tier), str(here["mode"].iloc[0]), float(load), float(here.attainment.iloc[0]))
    good = rows[(rows.attainment >= ATTAINMENT_GOAL) & rows.throughput_per_gpu.notna()]
    if a.share >= ATTAINMENT_GOAL or good.empty:
        return a
    best = good.loc[good.throughput_per_gpu.idxmax()]
    return TierAttainment(a.curve, a.tier, a.mode, a.load, a.share, float(best.load), float(best.attainment),
                          float(best.throughput_per_gpu))


#: Where :func:`attainment_caution` sends the reader for each curve's goodput at the tier, by default.
GOODPUT_SEE = "compare's goodput* column gives each curve's best goodput at the tier"


def attainment_caution(a: TierAttainment | None, point: str | None = None, see: str = GOODPUT_SEE) -> str:
    """The one sentence saying that ``a``'s tier is met by the mean TPS/user alone, "" where at least
    :data:`ATTAINMENT_GOAL` of the point's requests meet it (or ``a`` is None). ``point`` names the point
    (default: ``"<curve>'s point at <mode> load <load>"``; ``recommend`` says "this point"); ``see``: where each
    curve's goodput at the tier is shown (the report: its goodput table)."""
    if a is None or a.share >= ATTAINMENT_GOAL:
        return ""
    point = point or f"{a.curve}'s point at {a.mode} load {a.load:g}"
    return (f"the tier is met by the mean: {a.share:.0%} of the requests of {point} run at >= {a.tier:g} "
            "TPS/user; " + (
                f"for {ATTAINMENT_GOAL:.0%} of them, {a.curve} at {a.mode} load {a.attained_load:g} delivers "
                f"{a.attained_throughput_per_gpu:,.0f} tok/s/GPU ({a.attained_share:.0%} meet it; {see})"
                if a.attained_load is not None else
                f"no simulated load of this curve gets {ATTAINMENT_GOAL:.0%} of its requests there (lighter loads, or "
                "a lower tier, would)"))


def winner_attainment(table: pd.DataFrame, fronts: dict, sla: pd.DataFrame) -> dict[float, TierAttainment]:
    """``{tier: TierAttainment}`` of each tier's winner (a :func:`specsim.analysis.tiers.mark_winners` table) at
    its :func:`meeting_point`, from ``sla`` (:func:`with_throughput` rows, without latency limits)."""
    out = {}
    for _, w in table[table.winner.astype(bool)].iterrows():
        f = fronts.get(w.curve)
        if f is None or not f.tps_per_user.size:
            continue
        a = tier_attainment(sla, w.curve, float(w.tier), float(f.loads[meeting_point(f, float(w.tier))]))
        if a is not None:
            out[float(w.tier)] = a
    return out


def attainment_notes(table: pd.DataFrame) -> list[str]:
    """compare's ``caution:`` line per tier whose winner meets it by the mean alone (``table.attrs["attainment"]``,
    :func:`winner_attainment`; :func:`attainment_caution`)."""
    found = table.attrs.get("attainment") or {}
    return [f"caution: at tier {t:g}, {text}" for t, a in sorted(found.items()) if (text := attainment_caution(a))]


def baseline_edge(f, tiers: Iterable[float]) -> dict[float, tuple[float, float, float, float, float]]:
    """``{tier: (load, TPS/user, tok/s/GPU, heaviest frontier load, its tok/s/GPU)}`` of the baseline frontier
    ``f``'s fastest point, for the tiers it meets only at that point (its lightest load) where its throughput at
    the tier is below :data:`EDGE_SHARE` of its heaviest frontier point's (module docstring)."""
    x, y = f.tps_per_user, f.throughput_per_gpu
    out = {}
    for t in tiers:
        edge = x.size and at_least(x[-1:], t)[0] and not (x.size > 1 and at_least(x[-2:-1], t)[0])
        if edge and f.throughput_at(t) < EDGE_SHARE * float(y[0]):
            out[float(t)] = (float(f.loads[-1]), float(x[-1]), float(y[-1]), float(f.loads[0]), float(y[0]))
    return out


def baseline_edge_notes(table: pd.DataFrame) -> list[str]:
    """Notes for the tiers of a :func:`specsim.analysis.frontier.compare` table that its baseline meets only at its
    lightest load, serving there under half what it serves at its heaviest frontier load (:func:`baseline_edge`):
    it runs near its speed ceiling and serves little, so a gain over it (+3,666% in a fresh user's sweep: ``none``
    met 150 TPS/user only at one user) says how far beyond that ceiling the others run, not what speculation adds
    at a load both serve. Tiers met at the same edge point share one note, which gives each tier's figure the gains
    divide by where it is interpolated (a fresh user's tour sweep printed the same note at tiers 150 and 200). []
    when there is none (or no baseline)."""
    from specsim.analysis.answer_notes import tiers_phrase

    base, edge = table.attrs.get("baseline"), table.attrs.get("baseline_edge") or {}
    same: dict[tuple[float, ...], list[tuple[float, float]]] = {}
    for t, point in edge.items():
        y = table.loc[(table.tier == t) & (table.curve == base), "throughput_per_gpu"]
        same.setdefault(point, []).append((float(t), float(y.iloc[0]) if len(y) else float("nan")))
    notes = []
    for (load, tps, thr, heavy, peak), tiers in same.items():
        used = [(t, y) for t, y in tiers if np.isfinite(y) and round(y) != round(thr)]
        where = ("" if len(tiers) == 1 else ", respectively," if len(used) == len(tiers) else
                 f" at {tiers_phrase(t for t, _ in used)}")
        said = (f"; the {fmt.and_list(f'{y:,.0f}' for _, y in used)} tok/s/GPU the gains divide by{where} "
                f"{'is' if len(used) == 1 else 'are'} interpolated from it towards its next load, which misses the "
                "tier" if used else "")
        one = len(tiers) == 1
        notes.append(f"note: at {tiers_phrase(t for t, _ in tiers)} the baseline {base} meets "
                     f"{'the tier' if one else 'each'} only at its lightest load, {load:g} ({tps:.1f} TPS/user, "
                     f"{thr:,.0f} tok/s/GPU){said}: under half the {peak:,.0f} tok/s/GPU it serves at load {heavy:g}, "
                     "the throughput of a server near its speed ceiling, so the gains at "
                     f"{'that tier' if one else 'those tiers'} are large by construction; read the throughputs "
                     "themselves")
    return notes
