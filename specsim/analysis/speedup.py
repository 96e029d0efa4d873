"""Speed-up per load: how much a speculative curve gains over its folder's baseline at each swept load, and the load
where that gain ends (``specsim speedup``; docs/sweeps.md "Speed-up per load").

``specsim compare`` answers per SLA tier; an operator who runs a fixed load asks instead "at MY load, how much does
speculation gain, and where does it stop paying?". The rules:

* Rows: one per (folder, curve, mode, load) of every curve but the baseline, where the load is a closed loop's users
  or an open loop's rate scale. Only successful points count.
* Ratios: ``throughput_speedup`` = mean(curve's ``output_throughput_per_gpu``) / mean(baseline's), and
  ``tps_speedup`` the same of ``mean_tps_per_user``, the means over the seeds both ran at that load (seeds are paired:
  a seed fixes the workload and the acceptance draws, DESIGN.md). The baseline is the SAME folder's curve at the
  same mode and load; NaN where the baseline has no common seed there.
* Spread over seeds (two or more common seeds): ``throughput_speedup_std``, the standard deviation (ddof 1) of the
  per-seed ratios, and ``throughput_verdict``, the paired rule of :mod:`specsim.analysis.significance` applied on the
  side of 1 the ratio lies (a speed-up tested as curve > baseline, a slow-down as baseline > curve): ``above 1:
  holds (p=..., 3 seeds)`` says the speed-up holds over the seeds, ``below 1: ...`` the slow-down.
* Flags: a point whose figures measure something other than the policy (thrashing, prefill-bound, think-bound, cut
  off, an overloaded open loop: :func:`specsim.analysis.sweep_tables.flagged_points`) is listed in ``curve_flags`` /
  ``baseline_flags``; ``both_flagged`` says the ratio divides one flagged point by another. ``curve_notes`` /
  ``baseline_notes`` list the cautions that are no such flag (:func:`specsim.analysis.sweep_tables.cautions`):
  ``queued`` (closed-loop requests waited for admission: the load's real answer, where a speculative curve's drafts
  fill the KV pool sooner, but TTFT then holds the queue while TPS/user counts decode speed only) and
  ``short-window`` (the window counted fewer completions than twice the users: noisy figures).
* Crossover (:func:`crossovers`): per (folder, curve, mode), over its loads in ascending order, the first pair of
  neighbouring loads L1 < L2 whose throughput speed-ups s1 >= 1 > s2 bracket 1, interpolated linearly in the load:
  ``L1 + (1 - s1) * (L2 - L1) / (s2 - s1)``. ``below 1 already at the lightest load`` when s < 1 there;
  ``none within the swept loads`` when every s >= 1.
* Labels: ``static (gamma=7, drafter=dspark)``: the curve with the gamma and drafter its records ran (the
  config's knobs; :func:`specsim.analysis.sweep_tables.curve_title`, as every table writes a curve), so curves of
  folders swept with other drafters sit in one table; ``folder`` names the folder.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from specsim.analysis.significance import paired_margin
from specsim.analysis.sweep_records import as_records
from specsim.analysis.sweep_tables import (curve_title, flagged_points, one_scenario_frame, queued_points,
                                          short_window_points)
from specsim.errors import SpecsimInputError, did_you_mean

X = "mean_tps_per_user"
Y = "output_throughput_per_gpu"

#: Crossover statuses (:func:`crossovers`).
CROSSES, NEVER_BELOW = "crosses", "none within the swept loads"
BELOW_AT_LIGHTEST = "below 1 already at the lightest load"

#: Columns of :func:`speedup_table`, in order.
COLUMNS = ("folder", "curve", "label", "policy", "drafter", "gamma", "mode", "load", "num_seeds",
           "throughput_per_gpu", "baseline_throughput_per_gpu", "throughput_speedup", "throughput_speedup_std",
           "throughput_verdict", "tps_per_user", "baseline_tps_per_user", "tps_speedup", "curve_flags",
           "baseline_flags", "both_flagged", "curve_notes", "baseline_notes")

#: Columns of :func:`crossovers`, in order.
CROSSOVER_COLUMNS = ("folder", "curve", "label", "mode", "status", "crossover_load", "between", "flagged",
                     "edge_load", "edge_speedup")


def _baseline_curve(name: str, curves: list[str], folder: str) -> str:
    """The curve called ``name``, or the only curve of policy ``name``; SpecsimInputError naming the folder."""
    if name in curves:
        return name
    hits = [c for c in curves if c.split(" ", 1)[0] == name]
    if len(hits) == 1:
        return hits[0]
    names = set(curves) | {c.split(" ", 1)[0] for c in curves}
    raise SpecsimInputError(folder, None, "--baseline", f"one of the folder's curves {sorted(curves)}"
                            f"{did_you_mean(name, names)}", repr(name))


def _by_seed(sub: pd.DataFrame, col: str) -> dict[int, float]:
    """``{seed: value}`` of one point's successful runs."""
    return {int(s): float(v) for s, v in zip(sub.seed, sub[col]) if np.isfinite(v)}


def _ratio_row(a: dict[int, float], b: dict[int, float]) -> tuple[float, float, str]:
    """(mean(a) / mean(b), std of the per-seed ratios, paired verdict) over the seeds both hold (module docstring)."""
    seeds = sorted(set(a) & set(b))
    if not seeds or not np.mean([b[s] for s in seeds]) > 0:
        return math.nan, math.nan, "no common seed"
    ya, yb = np.array([a[s] for s in seeds]), np.array([b[s] for s in seeds])     # (n,) paired by seed
    ratio = float(ya.mean() / yb.mean())
    std = float(np.std(ya / yb, ddof=1)) if len(seeds) > 1 and (yb > 0).all() else math.nan
    m = paired_margin(ya, yb) if ratio >= 1 else paired_margin(yb, ya)
    side = "" if len(seeds) < 2 else "above 1: " if ratio >= 1 else "below 1: "
    return ratio, std, side + m.verdict


def _folder_rows(recs: list[dict[str, Any]], folder: str, baseline: str) -> list[dict[str, Any]]:
    """:func:`speedup_table`'s rows of one folder's records."""
    df = one_scenario_frame(recs, folder)
    ok = df[df.status == "ok"]
    base = _baseline_curve(baseline, sorted(ok.curve.unique()), folder)
    flags = flagged_points(df)
    noted = {kind: set(names) for kind, names in (("queued", queued_points(df)),
                                                   ("short-window", short_window_points(df)))}
    rows = []
    for (curve, mode, load), sub in ok.groupby(["curve", "mode", "load"], sort=True):
        if curve == base:
            continue
        bsub = ok[(ok.curve == base) & (ok["mode"] == mode) & (ok.load == load)]
        thr, thr_std, verdict = _ratio_row(_by_seed(sub, Y), _by_seed(bsub, Y))
        tps, _, _ = _ratio_row(_by_seed(sub, X), _by_seed(bsub, X))
        seeds = sorted(set(sub.seed) & set(bsub.seed))
        mine = flags.get((curve, f"{load:g}"), [])
        theirs = flags.get((base, f"{load:g}"), []) if seeds else []
        first = sub.iloc[0]
        label = curve_title(curve, first.policy, first.gamma, first.drafter, always=True)
        rows.append({"folder": folder, "curve": curve, "label": label,
                     "policy": first.policy, "drafter": first.drafter, "gamma": first.gamma, "mode": mode,
                     "load": float(load), "num_seeds": len(seeds),
                     "throughput_per_gpu": _mean(sub, Y, seeds), "baseline_throughput_per_gpu": _mean(bsub, Y, seeds),
                     "throughput_speedup": thr, "throughput_speedup_std": thr_std,
                     "throughput_verdict": verdict if seeds else "baseline not swept at this load",
                     "tps_per_user": _mean(sub, X, seeds), "baseline_tps_per_user": _mean(bsub, X, seeds),
                     "tps_speedup": tps, "curve_flags": list(mine), "baseline_flags": list(theirs),
                     "both_flagged": bool(mine and theirs),
                     "curve_notes": [k for k, names in noted.items() if f"{curve} at {load:g}" in names],
                     "baseline_notes": [k for k, names in noted.items() if seeds and f"{base} at {load:g}" in names]})
    return rows


def _mean(sub: pd.DataFrame, col: str, seeds: list[int]) -> float:
    """Mean of ``col`` over ``seeds`` (NaN without any)."""
    v = sub.loc[sub.seed.isin(seeds), col]
    return float(v.mean()) if len(v) else math.nan


def speedup_table(folders: str | Path | list[dict[str, Any]] | Sequence[str | Path | list[dict[str, Any]]],
                  baseline: str = "none", names: Sequence[str] | None = None) -> pd.DataFrame:
    """Speed-up of every curve over its own folder's baseline at each swept load (module docstring rules).

    Args:
        folders: a sweep folder, a list of records (:func:`specsim.analysis.sweep_records.load_records`), or a
            sequence of either (several folders: one swept with MTP, one with DSpark).
        baseline: the curve (or the policy with one curve) each folder's ratios divide by; ``none`` (no
            speculation) by default.
        names: a name per folder for the ``folder`` column (default: the folder's path; ``records N`` for a
            list of records, N from 1).

    Returns:
        One row per (folder, curve, mode, load), columns :data:`COLUMNS`: throughputs in tok/s per decode GPU,
        TPS/user in tok/s, ``throughput_speedup`` and ``tps_speedup`` as ratios (1.25 = 25% faster), flags as
        lists of kinds. ``attrs["baseline"]``: ``baseline``; ``attrs["crossovers"]``: :func:`crossovers` of it.

    Raises:
        SpecsimInputError: no folder, a folder without a successful point, with several scenarios, or without
            the baseline curve (naming the folder); ``names`` of another length than ``folders``.
    """
    many = not (isinstance(folders, (str, Path)) or (isinstance(folders, list) and folders
                                                     and isinstance(folders[0], dict)))
    sources = list(folders) if many else [folders]
    if not sources:
        raise SpecsimInputError(None, None, "folders", "at least one sweep folder or list of records", "none")
    if names is not None and len(names) != len(sources):
        raise SpecsimInputError(None, None, "names", f"one name per folder ({len(sources)})", str(len(names)))
    rows: list[dict[str, Any]] = []
    for i, src in enumerate(sources):
        name = names[i] if names is not None else str(src) if isinstance(src, (str, Path)) else f"records {i + 1}"
        rows += _folder_rows(as_records(src, "folders"), name, baseline)
    tab = pd.DataFrame(rows, columns=list(COLUMNS))
    tab.attrs["baseline"] = baseline
    tab.attrs["crossovers"] = crossovers(tab)
    return tab


def _crossing(loads: np.ndarray, s: np.ndarray) -> tuple[str, float, int]:
    """(status, crossover load, index of the heavier bracketing load or -1) of speed-ups ``s`` (n,) at ascending
    ``loads`` (n,), NaN speed-ups skipped (module docstring rule)."""
    ok = np.isfinite(s)
    loads, s = loads[ok], s[ok]
    if not s.size:
        return "no ratio", math.nan, -1
    if s[0] < 1:
        return BELOW_AT_LIGHTEST, math.nan, -1
    below = np.flatnonzero(s < 1)
    if not below.size:
        return NEVER_BELOW, math.nan, -1
    i = int(below[0])                                     # s[i - 1] >= 1 > s[i]
    x = loads[i - 1] + (1.0 - s[i - 1]) * (loads[i] - loads[i - 1]) / (s[i] - s[i - 1])
    return CROSSES, float(x), i


def crossovers(table: pd.DataFrame) -> pd.DataFrame:
    """The load where each curve's throughput speed-up falls below 1 (module docstring rule).

    Args:
        table: a :func:`speedup_table`.

    Returns:
        One row per (folder, curve, mode): ``folder, curve, label, mode, status`` (:data:`CROSSES`,
        :data:`NEVER_BELOW`, :data:`BELOW_AT_LIGHTEST`, or ``no ratio``), ``crossover_load`` (users or rate
        scale; NaN unless it crosses), ``between`` (the bracketing loads, [] unless it crosses), ``flagged`` (the
        kinds of flag either bracketing point of either curve carries), and ``edge_load``, ``edge_speedup``: the
        swept load a status that does not cross rests on and its throughput speed-up (the heaviest load for
        :data:`NEVER_BELOW`, the lightest for :data:`BELOW_AT_LIGHTEST`; NaN otherwise).
    """
    out = []
    for (folder, curve, mode), sub in table.groupby(["folder", "curve", "mode"], sort=False):
        sub = sub.sort_values("load")
        status, x, i = _crossing(sub.load.to_numpy(float), sub.throughput_speedup.to_numpy(float))
        fine = sub[np.isfinite(sub.throughput_speedup.to_numpy(float))]
        pair = fine.iloc[[i - 1, i]] if i > 0 else fine.iloc[:0]
        kinds = list(dict.fromkeys(k for _, r in pair.iterrows() for k in r.curve_flags + r.baseline_flags))
        edge = fine.iloc[-1] if status == NEVER_BELOW else fine.iloc[0] if status == BELOW_AT_LIGHTEST else None
        out.append({"folder": folder, "curve": curve, "label": sub.label.iloc[0], "mode": mode, "status": status,
                    "crossover_load": x, "between": [float(v) for v in pair.load], "flagged": kinds,
                    "edge_load": math.nan if edge is None else float(edge.load),
                    "edge_speedup": math.nan if edge is None else float(edge.throughput_speedup)})
    return pd.DataFrame(out, columns=list(CROSSOVER_COLUMNS))


def speedup_json(table: pd.DataFrame) -> dict[str, Any]:
    """``specsim speedup --json``'s object: ``baseline``, ``table`` (the rows of ``table``, a :func:`speedup_table`)
    and ``crossovers`` (:func:`crossovers`); NaN becomes None, flags stay lists."""
    def clean(v: Any) -> Any:
        if isinstance(v, (float, np.floating)):
            return float(v) if np.isfinite(v) else None
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.bool_):
            return bool(v)
        return v

    cross = table.attrs.get("crossovers")
    cross = crossovers(table) if cross is None else cross
    return {"baseline": table.attrs.get("baseline"),
            "table": [{k: clean(v) for k, v in r.items()} for r in table.to_dict(orient="records")],
            "crossovers": [{k: clean(v) for k, v in r.items()} for r in cross.to_dict(orient="records")]}
