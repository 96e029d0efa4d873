"""Tuned rows beside the frontiers: the tuning results of ``specsim tune`` (``DIR/tuned/*.json``,
:mod:`specsim.sweep.tune`) read out of a sweep directory, and added to :func:`specsim.analysis.frontier.compare`'s
tier table as one row per (tier, tuned curve)."""

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
