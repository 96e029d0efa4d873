"""Tuned rows beside the frontiers: the tuning results of ``specsim tune`` (``DIR/tuned/*.json``,
:mod:`specsim.sweep.tune`) read out of a sweep directory, and added to :func:`specsim.analysis.frontier.compare`'s
tier table as one row per (tier, tuned curve); and the lines a tune says beside its picks (:func:`failed_caution`,
:func:`pick_cautions`, :func:`edge_note`), which :func:`specsim.sweep.tune.tune` keeps in its result's ``cautions``
and ``notes`` and ``specsim tune`` prints."""

from __future__ import annotations

from typing import Any

import pandas as pd

from specsim.errors import SpecsimInputError


def read_tuned(sweep_dir: Any, records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The untuned records of a directory and its tuning results (``DIR/tuned/*.json``, :mod:`specsim.sweep.tune`).

    A tune's points sample a policy's knob sparsely, so as curves of their own they would be partial
    frontiers: the records of a tuned policy are left out, except the points of the tune's untuned
    comparison (``untuned_ids``) and of the directory's latest sweep (``DIR/sweep.json``).

    Args:
        sweep_dir: the directory (str or Path); records: its records (:func:`specsim.sweep.load_records`).

    Returns:
        (records without the tuning-only points, tuning results as dicts sorted by curve); with no
        ``tuned/`` folder, (``records``, []).

    Raises:
        SpecsimInputError: a ``tuned/*.json`` that does not parse.
    """
    import json
    from pathlib import Path

    d = Path(sweep_dir)
    tuned = []
    for p in sorted((d / "tuned").glob("*.json")) if (d / "tuned").is_dir() else []:
        try:
            tuned.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            raise SpecsimInputError(str(p), None, None, "a tuning result written by specsim tune",
                                    "unreadable") from None
    if not tuned:
        return records, []
    keep: set[str] = set()
    man = d / "sweep.json"
    if man.is_file():
        keep |= set(json.loads(man.read_text()).get("point_ids", []))
    tuned_policies = {t["spec"]["policy"] for t in tuned}
    for t in tuned:
        keep |= set(t.get("untuned_ids", []))
    return ([r for r in records if r["id"] in keep or r["config"]["policy"] not in tuned_policies],
            sorted(tuned, key=lambda t: t["curve"]))


def tuned_rows(table: pd.DataFrame, tuned: list[dict[str, Any]]) -> pd.DataFrame:
    """:func:`compare`'s table with one row per (tier, tuned curve) added, sorted by tier.

    A tuned row's curve reads ``<policy> tuned <knob> (<knob>=<best value>)``; its ``status``,
    ``throughput_per_gpu``, ``throughput_std`` and ``num_seeds`` are the tune's at that tier (status
    ``not tuned`` at a tier the tune did not cover), ``gain_vs_baseline`` is against the table's baseline
    row at the same tier; the other columns are NaN (no full frontier); ``attrs["tuned"]``: whether any row was added.
    """
    base = table.attrs.get("baseline")
    rows = []
    for tier in sorted(set(table.tier)):
        yb = table[(table.tier == tier) & (table.curve == base)].throughput_per_gpu if base else pd.Series(dtype=float)
        yb = float(yb.iloc[0]) if len(yb) else float("nan")
        for t in tuned:
            hit = [r for r in t["tiers"] if float(r["tier"]) == float(tier)]
            r = hit[0] if hit else {"status": "not tuned", "value": None, "throughput_per_gpu": None,
                                    "throughput_std": None, "num_seeds": 0}
            knob = t["spec"]["knob"]["name"]
            y = float("nan") if r["throughput_per_gpu"] is None else float(r["throughput_per_gpu"])
            label = t["curve"] + (f" ({knob}={r['value']:g})" if r["value"] is not None else "")
            rows.append({"tier": float(tier), "curve": label, "status": r["status"], "throughput_per_gpu": y,
                         "throughput_std": float("nan") if r["throughput_std"] is None else float(r["throughput_std"]),
                         "num_seeds": int(r["num_seeds"]), "gain_vs_baseline": (y / yb if yb > 0 else float("nan")) - 1})
    out = pd.concat([table, pd.DataFrame(rows)], ignore_index=True) if rows else table.copy()
    out = out.sort_values("tier", kind="stable").reset_index(drop=True)
    out.attrs.update(baseline=base, tuned=bool(rows))
    return out


# ------------------------------------------------------------------------ what a tune says beside its picks
# Built here, not in the CLI, so that tune() from Python carries the lines specsim tune prints (TuneResult.notes,
# TuneResult.cautions; a fresh user's Python tune had none of them).
def failed_caution(failed: int, num_runs: int) -> list[str]:
    """The ``warning:`` line of a tune some of whose points failed (``failed`` of ``num_runs``); [] when none
    (``--requests-per-user`` is :class:`specsim.sweep.tune.TuneSpec`'s ``requests_per_user`` from Python)."""
    if not failed:
        return []
    return [f"warning: {failed} of the {num_runs} points failed (e.g. no closed-loop window: more --requests-per-user "
            "helps); their loads are missing from the frontiers, so a 'covered' or near-tier answer may hide a failed "
            "heavier load."]


def pick_cautions(res: Any, records: list[dict[str, Any]]) -> list[str]:
    """One ``warning:`` line per tier whose pick is read from (or interpolated through) a thrashing, prefill- or
    think-bound point of the pick's own runs, as compare and recommend warn of a winner (a fresh user's tune picked
    a value at a prefill-bound load without a word).

    Args:
        res: a tune's result (:class:`specsim.sweep.tune.TuneResult`: its ``spec`` and ``tiers`` are read).
        records: the tune's sweep records (those its answer used, or more: others are ignored).
    """
    from specsim.analysis.frontier import Frontier
    from specsim.analysis.sweep_tables import flagged_points, flagged_read_from, results_frame

    k, out = res.spec.knob.name, []
    for r in res.tiers:
        if r.value is None or not r.frontier.get("loads"):
            continue
        mine = [x for x in records if x["config"]["policy"] == res.spec.policy
                and float((x["config"].get("knobs") or {}).get(k, float("nan"))) == float(r.value)]
        flags = flagged_points(results_frame(mine)) if mine else {}
        f = Frontier.from_points(res.spec.policy, r.frontier["tps_per_user"], r.frontier["throughput_per_gpu"],
                                 r.frontier["loads"])
        said = flagged_read_from(f, r.tier, flags, res.spec.policy)
        if said:
            out.append(f"warning: at tier {r.tier:g} the pick {k}={r.value:g} is read from its point at {said}: "
                       "that figure measures the limit, not the knob, so the pick may change once the limit is "
                       "lifted (compare's and recommend's warnings say the same of a winner)")
    return out


def edge_note(res: Any, fixed_ends: tuple[float, ...] = ()) -> list[str]:
    """The ``note:`` line of a tune whose pick sits at an end of the knob's range at some tier, so the best value
    may lie beyond it; [] when none. ``fixed_ends``: ends no value beyond which the policy (or drafter) allows
    (:func:`specsim.sweep.knobs.fixed_ends`): a pick there is not one to widen. ``--knob`` is
    :func:`specsim.sweep.knobs.parse_knob`'s range from Python."""
    kr = res.spec.knob
    edge = [f"{r.tier:g} ({r.value:g})" for r in res.tiers
            if r.value is not None and kr.lo != kr.hi and r.value in (kr.lo, kr.hi) and r.value not in fixed_ends]
    if not edge:
        return []
    return [f"note: the pick sits at the edge of the range {kr.lo:g}:{kr.hi:g} at tier {', '.join(edge)}: the best "
            f"{kr.name} may lie beyond it; widen --knob to see"]
