"""Sweep records as DataFrames: one row per point, and the spread of each load point over seeds.

Reads records only (a sweep directory or a list of record dicts, :mod:`specsim.analysis.sweep_records`); it
never runs a point. Importable from ``specsim.sweep`` too (``from specsim.sweep import results_frame``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from specsim import fmt
from specsim.analysis.sweep_records import SUMMARY_KEYS, canonical_sha, load_records
from specsim.errors import SpecsimInputError

#: Metrics summarised over seeds by :func:`seed_spread` (mean, std, min, max).
SPREAD_METRICS = ("mean_tps_per_user", "output_throughput_per_gpu", "mean_verify_tokens_per_request",
                  "mean_acceptance_length", "mean_ttft_ms", "median_tps_per_user")

_IDENTITY = ("policy", "drafter", "gamma", "seed")   # summary keys the identity columns already hold


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


#: Each policy's gamma and drafter under the bundled default scenario (engine.gamma 7, drafter dspark), as
#: :func:`specsim.run_config.resolve_policy` resolves them (a test holds the two together); the policies that fix
#: their own are listed, every other (plug-ins included) takes the default scenario's.
DEFAULT_KNOBS, OWN_KNOBS = (7, "dspark"), {"mtp1": (1, "mtp"), "none": (0, "none")}


def curve_title(curve: str, policy: str, gamma: Any, drafter: Any, always: bool = False) -> str:
    """A curve's label as tables, legends and the report show it: ``curve`` itself, or where its drafter or gamma is
    not the policy's default (:data:`DEFAULT_KNOBS`) and the label does not already name them, ``static (gamma=2,
    drafter=mtp)`` as ``specsim recommend`` writes a curve (two folders of static, MTP k = 2 and DSpark k = 7, were
    both shown as ``static``). ``always``: name the gamma and drafter the label lacks even at their defaults
    (``specsim speedup``, whose table sets curves of several folders side by side)."""
    try:
        knobs = (int(gamma), str(drafter))
    except (TypeError, ValueError):
        return curve
    if not always and ("=" in curve or knobs == OWN_KNOBS.get(policy, DEFAULT_KNOBS)):
        return curve
    parts = [f"{k}={v}" for k, v in (("gamma", knobs[0]), ("drafter", knobs[1])) if f"{k}=" not in curve]
    return f"{curve} ({', '.join(parts)})" if parts else curve


def curve_titles(df: pd.DataFrame) -> dict[str, str]:
    """{curve: :func:`curve_title`} of a :func:`results_frame` (each curve's first row: its points share the knobs
    the label does not name); {} when empty."""
    if df.empty or not {"curve", "policy", "gamma", "drafter"} <= set(df.columns):
        return {}
    first = df.drop_duplicates("curve")
    return {str(r.curve): curve_title(str(r.curve), str(r.policy), r.gamma, r.drafter) for r in first.itertuples()}


def scoped(summary: dict[str, Any], closed: bool, key: str) -> Any:
    """A run summary's figure ``key`` in the scope of its measured requests: a closed-loop run's (``closed``) from
    its measurement window where the summary's ``window`` block has it (records written before the block existed
    held the window's figures at the top level), else the whole run's; None when the summary lacks it."""
    win = (summary.get("window") or {}) if closed else {}
    return win[key] if key in win else summary.get(key)


def measured(r: dict[str, Any], key: str) -> Any:
    """A record's figure ``key`` as every table and search reads it (:func:`scoped`)."""
    return scoped(r.get("summary") or {}, r["config"]["load"]["mode"] == "closed", key)


def _row(r: dict[str, Any]) -> dict[str, Any]:
    """One record as a flat row (identity, status, summary metrics, closed-loop window)."""
    cfg = r["config"]
    kn = cfg["knobs"]
    row = {"id": r["id"], "policy": cfg["policy"], "drafter": kn["drafter"], "gamma": kn["gamma"],
           "threshold": kn.get("threshold", np.nan), "mode": cfg["load"]["mode"],
           "load": cfg["load"]["value"], "seed": cfg["seed"], "num_requests": cfg["num_requests"],
           "scenario_sha": canonical_sha(cfg["scenario"])[:16], "trace_sha": cfg["trace_sha"][:16],
           "status": r["status"], "error": r["error"], "wall_time_s": r.get("wall_time_s")}
    s = r.get("summary") or {}
    for k in SUMMARY_KEYS:
        if k not in row and k not in _IDENTITY:
            row[k] = measured(r, k)
    limit = s.get("admission_limit") or {}              # records before it: unknown (None)
    row.update({k: limit.get(k) for k in ("kv_max_requests", "kv_tokens", "max_num_seqs")})
    load = s.get("load") or {}
    row["window_start_s"] = load.get("window_start_s")
    row["window_end_s"] = load.get("window_end_s")
    return row


def results_frame(records_or_dir: str | Path | list[dict[str, Any]]) -> pd.DataFrame:
    """One row per point: identity columns, status, error, and the summary metrics.

    Args:
        records_or_dir: a sweep directory, or a list of records (:func:`specsim.analysis.sweep_records.load_records`).

    Returns:
        Columns ``id, curve, policy, drafter, gamma, threshold, mode, load, concurrency, rate_scale, seed,
        num_requests, status, error`` then every SUMMARY_KEYS metric (NaN for failed points; closed-loop
        points give the measurement window's figure where the summary's ``window`` block has it), plus
        ``window_start_s, window_end_s`` for closed-loop points and ``wall_time_s``; sorted by curve,
        mode, load, seed. Empty (no columns) without records.
    """
    recs = records_or_dir if isinstance(records_or_dir, list) else load_records(records_or_dir)
    df = pd.DataFrame([_row(r) for r in recs])
    if df.empty:
        return df
    num = [k for k in SUMMARY_KEYS if k in df and k not in ("policy", "drafter")]
    df[num] = df[num].apply(pd.to_numeric, errors="coerce")
    df["concurrency"] = np.where(df["mode"] == "closed", df["load"], np.nan)
    df["rate_scale"] = np.where(df["mode"] == "open", df["load"], np.nan)
    df.insert(1, "curve", _curve_labels(df))
    return df.sort_values(["curve", "mode", "load", "seed"], kind="stable").reset_index(drop=True)


def one_scenario_frame(records: Any, where: str | None = None) -> pd.DataFrame:
    """:func:`results_frame` of sweep records that an answer can be read from: at least one successful point, all of
    one scenario (what compare and speedup read).

    Raises:
        SpecsimInputError: no successful point, or points of several scenarios (``where``: the folder, for the
            message).
    """
    df = results_frame(records)
    if df.empty or not (df.status == "ok").any():
        raise SpecsimInputError(where, None, "points", "at least one successful sweep point", "none")
    if df.scenario_sha.nunique() > 1:
        raise SpecsimInputError(where, None, "points", "points of one scenario (use one --out per scenario)",
                                f"{df.scenario_sha.nunique()} scenarios")
    return df


def seed_spread(df: pd.DataFrame, metrics: Iterable[str] = SPREAD_METRICS) -> pd.DataFrame:
    """Mean, std (ddof 1; 0 for one seed), min and max of ``metrics`` over seeds per (curve, mode, load).

    Args:
        df: a :func:`results_frame`.
        metrics: metric columns to summarise.

    Returns:
        Columns ``curve, mode, load, num_seeds`` then ``<metric>_<stat>`` for stat in mean, std, min,
        max. Only points with status ``ok`` count; ``num_seeds`` says how many did.
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


def thrashing_points(df: pd.DataFrame) -> list[str]:
    """``"curve at load"`` of each successful point of a :func:`results_frame` whose recomputed tokens exceed
    :data:`specsim.analysis.metrics.THRASHING_SHARE` of its output tokens (one entry per point, seeds apart;
    ``specsim sweep`` and the report's page warn of them)."""
    from specsim.analysis.metrics import THRASHING_SHARE

    if df.empty or "recomputed_tokens" not in df:
        return []
    bad = df[(df.status == "ok") & (df.recomputed_tokens > THRASHING_SHARE * df.total_output_tokens)]
    return [f"{r.curve} at {r.load:g}" for _, r in bad.iterrows()]


def prefill_bound_points(df: pd.DataFrame) -> list[str]:
    """``"curve at load"`` of each successful point of a :func:`results_frame` whose requests waited for a prefill
    instance most of their TTFT (:func:`specsim.analysis.metrics.prefill_bound`): its TPS/user and throughput
    measure the prefill pool's queue, not the policy (records written before ``mean_prefill_wait_ms`` was kept
    name none)."""
    from specsim.analysis.metrics import prefill_bound

    if df.empty or "mean_prefill_wait_ms" not in df:
        return []
    bound = np.array([prefill_bound(w, t) for w, t in zip(df.mean_prefill_wait_ms, df.mean_ttft_ms)], bool)
    bad = df[(df.status == "ok").to_numpy() & bound]
    return [f"{r.curve} at {r.load:g}" for _, r in bad.iterrows()]


def resident_column(df: pd.DataFrame) -> pd.Series:
    """Each row's requests on the replicas, ``mean_running_requests + mean_waiting_requests`` (NaN where the record
    predates them; :func:`specsim.analysis.metrics.users_in_system` then keeps Little's law)."""
    if "mean_running_requests" not in df:
        return pd.Series(np.nan, index=df.index)
    return df.mean_running_requests + df.mean_waiting_requests.fillna(0.0)


def think_bound_points(df: pd.DataFrame) -> list[str]:
    """``"curve at load"`` of each successful closed-loop point of a :func:`results_frame` whose users spent most
    of their time between turns (:func:`specsim.analysis.metrics.think_bound`)."""
    from specsim.analysis.metrics import think_bound

    if df.empty or "mean_e2el_ms" not in df:
        return []
    bound = np.array([m == "closed" and think_bound(n, x, e, r) for m, n, x, e, r in
                      zip(df["mode"], df.load, df.request_throughput, df.mean_e2el_ms, resident_column(df))], bool)
    bad = df[(df.status == "ok").to_numpy() & bound]
    return [f"{r.curve} at {r.load:g}" for _, r in bad.iterrows()]


def queued_points(df: pd.DataFrame) -> list[str]:
    """``"curve at load"`` of each successful closed-loop point of a :func:`results_frame` where requests queued
    for admission (:func:`specsim.analysis.metrics.queued`; records written before ``mean_waiting_requests`` was
    kept name none)."""
    from specsim.analysis.metrics import queued

    if df.empty or "mean_waiting_requests" not in df:
        return []
    bound = np.array([m == "closed" and queued(w, n) for m, w, n in zip(df["mode"], df.mean_waiting_requests, df.load)],
                     bool)
    bad = df[(df.status == "ok").to_numpy() & bound]
    return [f"{r.curve} at {r.load:g}" for _, r in bad.iterrows()]


def admission_limit(kv_max_requests: Any, kv_tokens: Any, max_num_seqs: Any, running: Any) -> str:
    """Which limit kept a point's users waiting for admission, with its cap: the KV pool where it holds fewer
    requests than ``max_num_seqs`` (``"the KV pool full: at most 208 requests at once"``), else max_num_seqs; for a
    pool of tokens alone (``kv_max_requests`` None), max_num_seqs where the mean running count reached it, else the
    pool (its tokens); "the KV pool or max_num_seqs full" where the record keeps neither (written before them)."""
    def known(v: Any) -> bool:
        return v is not None and not (isinstance(v, float) and np.isnan(v))

    if not known(max_num_seqs):
        return "the KV pool or max_num_seqs full"
    seqs = f"max_num_seqs full: at most {int(max_num_seqs):,} requests at once"
    if known(kv_max_requests):
        return (f"the KV pool full: at most {int(kv_max_requests):,} requests at once"
                if int(kv_max_requests) < int(max_num_seqs) else seqs)
    if known(running) and float(running) >= 0.95 * float(max_num_seqs):
        return seqs
    return f"the KV pool full ({int(kv_tokens):,} tokens)" if known(kv_tokens) else "the KV pool full"


def admission_limits(df: pd.DataFrame, names: list[str]) -> str:
    """:func:`admission_limit` per curve of the ``"curve at load"`` points ``names`` (:func:`queued_points`), each
    curve by its :func:`curve_title`: ``"static (gamma=2, drafter=mtp): the KV pool full: at most 208 requests at
    once; none: ..."``, the curve left out where only one curve queued."""
    titles, said = curve_titles(df), {}
    for name in names:
        curve, _, load = name.rpartition(" at ")
        rows = df[(df.curve == curve) & (df.load.map(lambda v: f"{v:g}") == load) & (df.status == "ok")]
        if rows.empty or curve in said:
            continue
        r = rows.iloc[0]
        said[curve] = admission_limit(r.get("kv_max_requests"), r.get("kv_tokens"), r.get("max_num_seqs"),
                                      rows.mean_running_requests.max() if "mean_running_requests" in rows else None)
    if len(said) == 1:
        return next(iter(said.values()))
    return "; ".join(f"{titles.get(c, c)}: {text}" for c, text in said.items())


def overloaded_points(df: pd.DataFrame) -> list[str]:
    """``"curve at load"`` of each successful open-loop point of a :func:`results_frame` whose queue ran away
    (:func:`specsim.analysis.overload.overloaded`: at least as many requests waited for admission as ran, on
    average, or with requests waiting the run outlasted its arrivals past the factor; records written before
    ``mean_waiting_requests`` was kept name none, before ``arrival_span_s`` the first rule only)."""
    from specsim.analysis.overload import overloaded

    if df.empty or "mean_waiting_requests" not in df or "mean_running_requests" not in df:
        return []
    spans = [df[k] if k in df else [None] * len(df) for k in ("duration_s", "arrival_span_s")]
    bad = np.array([m == "open" and overloaded(w, n, d, a) for m, w, n, d, a in
                    zip(df["mode"], df.mean_waiting_requests, df.mean_running_requests, *spans)], bool)
    return [f"{r.curve} at {r.load:g}" for _, r in df[(df.status == "ok").to_numpy() & bad].iterrows()]


#: What each kind of :func:`cautions` limits, for its title (the report's "Warning: ..." sections).
CAUTION_TITLES = {"thrashing": "points that thrash", "prefill-bound": "prefill-bound points",
                  "think-bound": "think-bound points", "queued": "points where requests queue",
                  "overloaded": "overloaded open-loop points",
                  "cut-off": "points a horizon cut off", "short-window": "points measured over few requests"}


def short_window_points(df: pd.DataFrame) -> list[str]:
    """``"curve at load"`` of each successful closed-loop point whose measurement window counted fewer requests
    than twice its users (``measured_requests``; ``specsim run`` says so of one run): its figures rest on few
    completions, a share of them from the ramp's lockstep, and move with more ``--requests-per-user``."""
    if df.empty or "measured_requests" not in df:
        return []
    few = (df["mode"] == "closed") & (df.measured_requests < 2 * df.load)
    return [f"{r.curve} at {r.load:g}" for _, r in df[(df.status == "ok") & few].iterrows()]


def cut_off_points(df: pd.DataFrame) -> list[str]:
    """``"curve at load"`` of each successful point whose horizon (``--max-sim-s``) left more than
    :data:`specsim.analysis.metrics.UNFINISHED_SHARE` of its issued requests running: its figures count the
    completed ones only, which favours the short (:func:`specsim.analysis.metrics.horizon_warning`)."""
    from specsim.analysis.metrics import UNFINISHED_SHARE

    if df.empty or "unfinished" not in df:
        return []
    issued = df.unfinished.fillna(0) + df.completed.fillna(0)
    bad = df[(df.status == "ok") & (df.unfinished.fillna(0) > UNFINISHED_SHARE * issued) & (issued > 0)]
    return [f"{r.curve} at {r.load:g}" for _, r in bad.iterrows()]


def _points(names: list[str]) -> str:
    """``"N points"`` of a list of ``"curve at load"`` names, one per seed: each load point counted once."""
    n, seeds = len(set(names)), len(names)
    return f"{n} point{'s' if n != 1 else ''}" + (f" in {seeds} seed runs" if seeds > n else "")


def cautions(df: pd.DataFrame) -> list[tuple[str, str]]:
    """(kind, sentence) for each kind of point whose figures measure something other than the policy: those that
    thrash (:func:`thrashing_points`: the KV cache limits them), those the prefill pool limits
    (:func:`prefill_bound_points`), those whose users mostly think between turns (:func:`think_bound_points`),
    those a horizon cut off (:func:`cut_off_points`), those measured over few requests
    (:func:`short_window_points`), those where requests queue for admission (:func:`queued_points`) and the
    open-loop points whose queue ran away (:func:`overloaded_points`); [] when none. One wording for ``sweep``,
    ``compare`` (``warning:`` lines) and the report (its sections)."""
    from specsim.analysis.metrics import (BUSY_SHARE, PREFILL_WAIT_SHARE, QUEUE_SHOWS, QUEUED_SHARE, THRASHING_SHARE,
                                          UNFINISHED_SHARE)
    from specsim.analysis.overload import KEEP_UP_FACTOR, OVERLOAD_MEANS

    out = []
    bad, slow, idle, wait = thrashing_points(df), prefill_bound_points(df), think_bound_points(df), queued_points(df)
    if bad:
        out.append(("thrashing", f"thrashing at {_points(bad)} ({', '.join(dict.fromkeys(bad))}): recomputed "
                                 f"tokens exceed {THRASHING_SHARE:.0%} of output tokens; the KV cache is too small "
                                 "for those loads"))
    if slow:
        out.append(("prefill-bound", f"prefill-bound at {_points(slow)} ({', '.join(dict.fromkeys(slow))}): "
                                     f"requests waited for a prefill instance more than {PREFILL_WAIT_SHARE:.0%} "
                                     "of their TTFT, so those points' TPS/user and throughput measure the prefill "
                                     "queue, not the policy; more prefill instances (prefill.num_instances) give "
                                     "the decode side's answer"))
    if idle:
        out.append(("think-bound", f"think-bound at {_points(idle)} ({', '.join(dict.fromkeys(idle))}): fewer "
                                   f"than {BUSY_SHARE:.0%} of the users had a request in the system on average (the "
                                   "rest were between turns), so those points measure the users' think time, not "
                                   "the server; more users give its answer"))
    cut = cut_off_points(df)
    if cut:
        out.append(("cut-off", f"cut off at {_points(cut)} ({', '.join(dict.fromkeys(cut))}): the horizon "
                               f"(--max-sim-s) left more than {UNFINISHED_SHARE:.0%} of the issued requests "
                               "running, so those points' figures count the completed requests only, which favours "
                               "the short ones; run them to completion (no --max-sim-s) to compare"))
    few = short_window_points(df)
    if few:
        out.append(("short-window", f"few requests measured at {_points(few)} ({', '.join(dict.fromkeys(few))}): "
                                    "the closed-loop window counted fewer completions than twice the users, so "
                                    "those figures are noisy; more requests per user widen the window "
                                    "(--requests-per-user, --num-requests; a longer trace where a point ran "
                                    "all of it)"))
    if wait:
        in_tpot = bool("admission_wait_in_tpot" in df and (df.admission_wait_in_tpot == 1).any())
        out.append(("queued", f"requests queue at {_points(wait)} ({', '.join(dict.fromkeys(wait))}): at least "
                              f"{QUEUED_SHARE:.0%} of the users waited to be admitted ({admission_limits(df, wait)}"
                              f"), so {QUEUE_SHOWS[in_tpot]}; more users there add waiting, not throughput "
                              "(mean_waiting_requests)"))
    over = overloaded_points(df)
    if over:
        out.append(("overloaded", f"overloaded at {_points(over)} ({', '.join(dict.fromkeys(over))}): at least as "
                                  "many requests waited to be admitted as were admitted, on average (by Little's "
                                  "law, queueing was half or more of their time in the system), or, with requests "
                                  "waiting, the last completion came over "
                                  f"{KEEP_UP_FACTOR:g}x the arrival span after the first arrival (the server did not "
                                  f"keep up with its arrivals): {OVERLOAD_MEANS} (mean_waiting_requests, "
                                  "mean_running_requests, duration_s, arrival_span_s)"))
    return out


def flagged_points(df: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """``{(curve, load formatted with :g): kinds}`` of the points whose figures measure something other than the
    policy (thrashing, prefill-bound, think-bound, cut off by a horizon, an overloaded open loop: :func:`cautions`),
    any seed of the point flagged."""
    out: dict[tuple[str, str], list[str]] = {}
    for kind, names in (("thrashing", thrashing_points(df)), ("prefill-bound", prefill_bound_points(df)),
                        ("think-bound", think_bound_points(df)), ("cut-off", cut_off_points(df)),
                        ("overloaded", overloaded_points(df))):
        for name in names:
            curve, _, load = name.rpartition(" at ")
            kinds = out.setdefault((curve, load), [])
            if kind not in kinds:
                kinds.append(kind)
    return out


def frontier_loads_at(f, tier: float) -> tuple[float, ...]:
    """The loads of frontier ``f`` (:class:`specsim.analysis.frontier.Frontier`) its throughput at ``tier`` is read
    from: the heaviest point where the tier is covered, the point at the tier or the two it interpolates
    between, none where it is infeasible."""
    status = f.status_at(tier)
    if status == "infeasible":
        return ()
    if status == "covered":
        return (float(f.loads[0]),)
    x = np.asarray(f.tps_per_user, float)
    i = int(np.clip(np.searchsorted(x, tier), 0, x.size - 1))
    if np.isclose(x[i], tier) or i == 0:
        return (float(f.loads[i]),)
    return (float(f.loads[i - 1]), float(f.loads[i]))


def flagged_read_from(f, tier: float, flags: dict[tuple[str, str], list[str]], curve: str) -> str:
    """The flagged points (:func:`flagged_points`' ``flags``) that frontier ``f``'s figure at ``tier`` is read from
    (:func:`frontier_loads_at`), as ``"load 64 (thrashing and prefill-bound); ..."``; "" when none."""
    hits = [(load, kinds) for load in frontier_loads_at(f, tier) if (kinds := flags.get((curve, f"{load:g}")))]
    return "; ".join(f"load {load:g} ({' and '.join(kinds)})" for load, kinds in hits)


def winner_cautions(table: pd.DataFrame, fronts: dict, df: pd.DataFrame) -> None:
    """Mark each tier's answer whose throughput comes from (or is interpolated through) a point :func:`cautions`
    names: the ``caution`` column of its winner row, and of every row in an exact tie with it, says which
    (:func:`flagged_read_from`; ``""`` elsewhere; ``table`` is changed in place; a fresh user's report headline named
    a winner read off a prefill-bound point that the same page said measures the prefill queue, not the policy). A
    row advised to "add heavier loads" whose heaviest frontier point is already thrashing or prefill-bound is advised
    to lift that limit instead (an overloaded one: to sweep rates below it). The columns of
    :func:`reference_cautions` (the winner's lead divides by a flagged point) follow; the warning compare prints is
    :func:`specsim.analysis.answer_notes.flagged_answer_notes`, one per tier for all of them.

    Args:
        table: a :func:`specsim.analysis.frontier.compare` table with its winner columns.
        fronts: ``{curve: Frontier}`` of the same points.
        df: their :func:`results_frame`.
    """
    flags = flagged_points(df)
    table["caution"] = ""
    for i, row in table[table.advice == "add heavier loads"].iterrows():
        load = df.loc[(df.curve == row.curve) & (df.status == "ok"), "load"].max()
        heaviest = flags.get((row.curve, f"{load:g}"), [])
        if heaviest == ["overloaded"]:   # a heavier rate only lengthens the queue that already runs away
            table.loc[i, "advice"] = (f"its heaviest load {load:g} is already overloaded: a heavier rate only "
                                      "lengthens its queue; sweep rates below it")
        elif heaviest:                 # more load would only deepen the limit its heaviest point already hit
            table.loc[i, "advice"] = (f"its heaviest load {load:g} is already {' and '.join(heaviest)}: lift that "
                                      "limit (KV capacity, prefill.num_instances) before adding load")
    answers = table.winner.astype(bool) | table.tied_with.map(lambda t: isinstance(t, str) and bool(t))
    for i, row in table[answers].iterrows():
        f = fronts.get(row.curve)
        table.loc[i, "caution"] = flagged_read_from(f, row.tier, flags, row.curve) if f is not None else ""
    reference_cautions(table, fronts, flags)


def reference_cautions(table: pd.DataFrame, fronts: dict, flags: dict[tuple[str, str], list[str]]) -> None:
    """Mark each tier whose winner's lead is measured against a figure read from (or interpolated through) a
    flagged point (:func:`flagged_points`' ``flags``): its margin over the runner-up, or its gain over the baseline
    (``table.attrs["baseline"]``). The winner row's ``runner_up_caution`` and ``baseline_caution`` columns say which
    points (:func:`flagged_read_from`; ``""`` elsewhere; ``table`` is changed in place; a fresh user's compare
    crowned "WINNER +159.1% vs none" over ``none`` at an overloaded rate, its queue running away, and said nothing:
    :func:`specsim.analysis.answer_notes.flagged_answer_notes` warns of them). In an exact tie the runner-up is a
    tied curve: its column says where its equal figure is read from, and there is no lead over it."""
    base = table.attrs.get("baseline")
    table["runner_up_caution"], table["baseline_caution"] = "", ""
    for i, row in table[table.winner.astype(bool)].iterrows():
        for col, ref in (("runner_up_caution", row.runner_up), ("baseline_caution", base)):
            f = fronts.get(ref) if isinstance(ref, str) and ref and ref != row.curve else None
            table.loc[i, col] = flagged_read_from(f, row.tier, flags, ref) if f is not None else ""


def gpu_split(recs: list[dict]) -> tuple[int, int] | None:
    """(decode GPUs, prefill GPUs) of a sweep's runs (its first successful record's), None without one."""
    for r in recs:
        s = r.get("summary") or {}
        if r.get("status") == "ok" and "decode_gpus" in s:
            return int(s["decode_gpus"]), int(s.get("prefill_gpus") or 0)
    return None


def per_all_gpus_note(gpus: tuple[int, int] | None) -> str:
    """A sentence giving the per-GPU figures' factor when disaggregated prefill GPUs run beside the decode ones
    (a fresh user costing per GPU read the decode-only figure as the fleet's), "" without prefill GPUs."""
    if not gpus or not gpus[1]:
        return ""
    d, p = gpus
    return (f"This sweep's scenario runs {p} prefill GPU{'s' if p > 1 else ''} beside {d} decode GPU"
            f"{'s' if d > 1 else ''}: per GPU of both, every tok/s/GPU here is x{fmt.factor(d / (d + p))}"
            + (" (a prefill pool sized for a whole fleet: divide by the decode GPUs it serves)" if p > 8 * d else "")
            + ".")
