"""What qualifies a tier's answer: a baseline met only at its edge.

* **Baseline edge** (:func:`baseline_edge`, :func:`baseline_edge_notes`): where the baseline meets a tier only at
  its lightest load (its fastest frontier point) and its throughput there is below :data:`EDGE_SHARE` of the most
  it serves on its frontier (its heaviest frontier load's), it runs near its speed ceiling and serves little, so a
  gain over it is large by construction: against the baseline's best throughput the same curve's ratio would be
  less than half as large. A tier whose figure the baseline reads between its lightest load and a heavier one
  that serves nearly as much is no such edge (a fresh user's 3,054 tok/s/GPU at tier 50 against 3,084 at 64 users
  drew the note on a sparse grid).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from specsim.analysis.metrics import at_least

#: A baseline figure at a tier below this share of the baseline's most throughput makes gains over it large by
#: construction (module docstring).
EDGE_SHARE = 0.5


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
    at a load both serve. [] when there is none (or no baseline)."""
    base, edge = table.attrs.get("baseline"), table.attrs.get("baseline_edge") or {}
    notes = []
    for t, (load, tps, thr, heavy, peak) in edge.items():
        y = table.loc[(table.tier == t) & (table.curve == base), "throughput_per_gpu"]
        y = float(y.iloc[0]) if len(y) else float("nan")
        used = (f"; the {y:,.0f} tok/s/GPU the gains divide by is interpolated from it towards its next load, which "
                "misses the tier" if np.isfinite(y) and round(y) != round(thr) else "")
        notes.append(f"note: at tier {t:g} the baseline {base} meets the tier only at its lightest load, {load:g} "
                     f"({tps:.1f} TPS/user, {thr:,.0f} tok/s/GPU){used}: under half the {peak:,.0f} tok/s/GPU it "
                     f"serves at load {heavy:g}, the throughput of a server near its speed ceiling, so the gains at "
                     "that tier are large by construction; read the throughputs themselves")
    return notes
