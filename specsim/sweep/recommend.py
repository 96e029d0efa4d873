"""``specsim recommend`` (reads a sweep directory, so it sits with the sweeps): per SLA tier, the policy to deploy, its knobs and load, and the configuration to paste.

Per tier the winner is :func:`specsim.analysis.tiers.mark_winners`'s (deployable curves only, its margin
judged by the one paired rule). The load reported is the winner's frontier point that meets the tier
with the most throughput (the smallest TPS/user >= the tier): a point that was simulated, not an
interpolation. The configurations come from :mod:`specsim.sweep.engine_configs` (keys checked against the
engines' sources). Where curves tie exactly at a tier (:func:`specsim.analysis.tiers.mark_winners`), the tie
is said, naming them all, and the configurations are those of the tied curve the most engines run exactly
(then the first by name), never a winner crowned by name order. A lead too close to call
(:func:`specsim.analysis.tiers.too_close`, the rule compare's winner cell and the report's answer line read) is
said to be one, a tie as far as the sweep can tell.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from specsim.analysis.frontier import compare, frontiers, sla_table
from specsim.analysis.metrics import queued, users_in_system
from specsim.analysis.overload import overloaded
from specsim.analysis.sweep_tables import admission_limit, flagged_points, resident_column, results_frame, seed_spread
from specsim.analysis.tier_notes import TierAttainment, meeting_point, tier_attainment, with_throughput
from specsim.analysis.tiers import deployable, winners
from specsim.errors import SpecsimInputError
from specsim.sweep.engine_configs import EngineConfig, engine_configs
from specsim.sweep.recommendation import Recommendation, recommendations_text

__all__ = ["Recommendation", "recommend", "recommendations_text"]


def _knobs_of(records: list[dict[str, Any]], ids: Iterable[str]) -> dict[str, Any]:
    """The policy and the knobs a curve's points ran with: the scenario's ``[policy.knobs]`` (``--set
    policy.knobs.K=V``) that the policy declares, overridden by the point's own (gamma, drafter, a swept
    threshold), as the run merges them (another policy's entry in the shared table is not this one's)."""
    from specsim.policies import policy_knobs

    rec = next(r for r in records if r["id"] in set(ids))
    cfg = rec["config"]
    scenario = ((cfg.get("scenario") or {}).get("policy") or {}).get("knobs") or {}
    try:                                 # the table is shared by a sweep's policies: keep this one's own knobs
        declared = policy_knobs(cfg["policy"])
        scenario = {k: v for k, v in scenario.items() if k in declared}
    except SpecsimInputError:
        pass                             # a plug-in no longer importable: its record's table as it is
    return {"policy": cfg["policy"], **scenario, **cfg["knobs"]}


def _point(spread, curve: str, tier: float) -> dict[str, Any]:
    """The curve's frontier point meeting ``tier`` with the most throughput (smallest TPS/user >= tier:
    :func:`specsim.analysis.tier_notes.meeting_point`, the point compare's and the report's cautions read)."""
    f = frontiers(spread[spread.curve == curve])[curve]
    i = meeting_point(f, tier)
    load = float(f.loads[i])
    mode = str(spread[(spread.curve == curve) & (spread.load == load)]["mode"].iloc[0])
    return {"load": load, "mode": mode, "tps": float(f.tps_per_user[i]), "thr": float(f.throughput_per_gpu[i])}


def recommend(records: list[dict[str, Any]], tiers: Iterable[float]) -> list[Recommendation]:
    """One :class:`Recommendation` per tier that some deployable curve meets, ascending tier.

    Raises:
        SpecsimInputError: as :func:`specsim.analysis.frontier.compare` (no successful point, mixed scenarios).
    """
    table = compare(records, tiers)
    df = results_frame(records)
    spread = seed_spread(df)
    sla = with_throughput(sla_table(records, sorted(set(table.tier))), spread)
    flags, out = flagged_points(df), []
    for _, w in winners(table).iterrows():
        curve, tied = _tie_pick(w, table, df, records)
        ids = df[(df.curve == curve) & (df.status == "ok")].id
        kn = _knobs_of(records, ids)
        policy = kn.pop("policy")
        p = _point(spread, curve, float(w.tier))
        rec = Recommendation(float(w.tier), curve, policy, kn, p["mode"], p["load"], p["tps"], p["thr"],
                             float(w.throughput_per_gpu), (tied[0] if tied else w.runner_up) or None,
                             float(w.margin) if np.isfinite(w.margin) else None, w.margin_verdict, tied_with=tied)
        rec.status, rec.advice = str(w.status), str(w.advice or "")
        rec.engines = engine_configs(policy, kn)
        for e in rec.engines:
            if e.config is None or not e.exact:
                e.alternative = _best_exact(e.engine, table[table.tier == w.tier], df, spread, records, curve)
            if e.runs_as is not None:
                e.simulated = _simulated_as(e, table[table.tier == w.tier], df, records)
        rec.recomputed_share = _recomputed_share(df, curve, p["load"])
        at = _at_point(df, curve, p["load"])
        if "mean_prefill_wait_ms" in at and at.mean_prefill_wait_ms.notna().any():
            rec.prefill_wait_ms, rec.ttft_ms = float(at.mean_prefill_wait_ms.mean()), float(at.mean_ttft_ms.mean())
        busy = [users_in_system(x, e, r)
                for x, e, r in zip(at.request_throughput, at.mean_e2el_ms, resident_column(at))]
        if p["mode"] == "closed" and busy and np.isfinite(busy).all():
            rec.users_in_system = float(np.mean(busy))
        if p["mode"] == "closed" and "mean_waiting_requests" in at and at.mean_waiting_requests.notna().all():
            rec.waiting, rec.p99_ttft_ms = float(at.mean_waiting_requests.mean()), float(at.p99_ttft_ms.mean())
            rec.wait_in_tpot = bool("admission_wait_in_tpot" in at and (at.admission_wait_in_tpot == 1).any())
            rec.limit = admission_limit(*(at[k].iloc[0] if k in at else None for k in
                                          ("kv_max_requests", "kv_tokens", "max_num_seqs")),
                                        at.mean_running_requests.max() if "mean_running_requests" in at else None)
        rec.caution = _row_caution(table, rec.tier, curve)        # the winner's row, or in a tie the tied curve's
        if p["mode"] == "closed" and "measured_requests" in at and at.measured_requests.notna().all():
            rec.measured_requests = float(at.measured_requests.mean())
        rec.runner_up_queue = _queue_of(df, spread, rec.runner_up, rec.tier) if rec.runner_up else ""
        rec.runner_up_caution = (_row_caution(table, rec.tier, rec.runner_up) if tied else     # a tied curve's
                                 str(w.get("runner_up_caution", "") or ""))
        rec.heavier = _heavier(spread, flags, curve, p["load"])
        spans = [float(at[k].mean()) if k in at else None for k in ("duration_s", "arrival_span_s")]
        if p["mode"] == "open" and not at.empty and overloaded(at.mean_waiting_requests.mean(),
                                                                at.mean_running_requests.mean(), *spans):
            rec.overload = (float(at.mean_waiting_requests.mean()), float(at.mean_running_requests.mean()))
            rec.overload_spans = (spans[0], spans[1])
        _attainment(rec, tier_attainment(sla, curve, rec.tier, rec.load))
        out.append(rec)
    return out


def _tie_pick(w, table, df, records: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """(the curve a tier's answer gives, the curves tied with it exactly) for winner row ``w`` of the compare
    ``table`` ((``w.curve``, []) without a tie, :func:`specsim.analysis.tiers.mark_winners`): of the tied curves,
    the one the most engines run exactly, then the one the most engines express at all, then the first in the
    table (name order); never a winner crowned by name order alone where an engine tells them apart."""
    rows = table[(table.tier == w.tier) & table.tied_with.map(lambda x: isinstance(x, str) and bool(x))]
    if w.curve not in set(rows.curve):
        return w.curve, []

    def runs(curve: str) -> tuple[int, int]:
        kn = _knobs_of(records, df[(df.curve == curve) & (df.status == "ok")].id)
        es = engine_configs(kn.pop("policy"), kn)
        return sum(e.config is not None and e.exact for e in es), sum(e.config is not None for e in es)
    curves = list(rows.curve)
    best = max(curves, key=runs)                   # the first of the best, in table order
    return best, [c for c in curves if c != best]


def _attainment(rec: Recommendation, a: TierAttainment | None) -> None:
    """Fill ``rec``'s attainment fields from its point's :class:`specsim.analysis.tier_notes.TierAttainment`."""
    if a is not None:
        rec.attainment, rec.attained_load = a.share, a.attained_load
        rec.attained_share, rec.attained_throughput_per_gpu = a.attained_share, a.attained_throughput_per_gpu


def _queue_of(df, spread, curve: str, tier: float) -> str:
    """Where ``curve``'s point at ``tier`` (:func:`_point`) is a closed loop whose users queue for admission, the
    phrase saying how many and its mean TTFT; "" elsewhere."""
    if curve not in set(spread.curve):
        return ""
    p = _point(spread, curve, tier)
    at = _at_point(df, curve, p["load"])
    if p["mode"] != "closed" or "mean_waiting_requests" not in at or not at.mean_waiting_requests.notna().all():
        return ""
    waiting = float(at.mean_waiting_requests.mean())
    return (f"point at load {p['load']:g} has {waiting:.1f} of its users queued for admission (mean TTFT "
            f"{at.mean_ttft_ms.mean():,.0f} ms)") if queued(waiting, p["load"]) else ""


def _row_caution(table, tier: float, curve: str | None) -> str:
    """The ``caution`` of ``curve``'s row at ``tier`` of the compare ``table`` (set on the winner's row and on the rows
    tied with it: :func:`specsim.analysis.sweep_tables.winner_cautions`), "" elsewhere."""
    said = table.loc[(table.tier == tier) & (table.curve == curve), "caution"]
    return str(said.iloc[0] or "") if len(said) else ""


def _heavier(spread, flags: dict, curve: str, load: float) -> list[tuple[float, float, list[str]]]:
    """:class:`Recommendation`'s ``heavier``: the curve's simulated loads above ``load`` (seed means in ``spread``),
    each with its throughput per GPU and its flags (``flags``: :func:`specsim.analysis.sweep_tables.flagged_points`)."""
    rows = spread[(spread.curve == curve) & (spread.load > load)].sort_values("load")
    return [(float(r.load), float(r.output_throughput_per_gpu_mean), list(flags.get((curve, f"{r.load:g}"), [])))
            for _, r in rows.iterrows()]


def _at_point(df, curve: str, load: float):
    """The successful rows (one per seed) of the curve's point at ``load``."""
    return df[(df.curve == curve) & (df.status == "ok") & (df.load == load)]


def _recomputed_share(df, curve: str, load: float) -> float:
    """Tokens the curve's point at ``load`` recomputed after preemptions per output token, seeds pooled."""
    at = _at_point(df, curve, load)
    return float(at.recomputed_tokens.sum() / max(at.total_output_tokens.sum(), 1))


# --------------------------------------------------------------------------------------------- per engine
def _best_exact(engine: str, rows, df, spread, records: list[dict[str, Any]],
                winner: str) -> dict[str, Any] | None:
    """The deployable curve with the most throughput at the tier (``rows``: the compare table at it) whose
    configuration ``engine`` runs exactly (the same scheduler, as simulated), or None; with the load of its
    point meeting the tier (:func:`_point`) and that point's recomputed share (the thrashing caution)."""
    ok = rows[rows.curve.map(deployable) & np.isfinite(rows.throughput_per_gpu.astype(float))
              & (rows.curve != winner)]
    for _, r in ok.sort_values("throughput_per_gpu", ascending=False).iterrows():
        kn = _knobs_of(records, df[(df.curve == r.curve) & (df.status == "ok")].id)
        policy = kn.pop("policy")
        e = next(c for c in engine_configs(policy, kn) if c.engine == engine)
        if e.config is not None and e.exact:
            p = _point(spread, r.curve, float(r.tier))
            return {"curve": r.curve, "throughput_per_gpu": float(r.throughput_per_gpu), "config": e.config,
                    "note": e.note, "mode": p["mode"], "load": p["load"],
                    "recomputed_share": _recomputed_share(df, r.curve, p["load"])}
    return None


def _simulated_as(e: EngineConfig, rows, df, records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The curve of the sweep that ran ``e``'s nearest setting itself (policy ``e.runs_as`` with the same engine
    configuration) and its throughput at the tier (``rows``: the compare table at it), or None."""
    for _, r in rows[np.isfinite(rows.throughput_per_gpu.astype(float))].iterrows():
        kn = _knobs_of(records, df[(df.curve == r.curve) & (df.status == "ok")].id)
        policy = kn.pop("policy")
        if policy == e.runs_as and next(c for c in engine_configs(policy, kn) if c.engine == e.engine).config \
                == e.config:
            return {"curve": r.curve, "throughput_per_gpu": float(r.throughput_per_gpu)}
    return None
