"""The figures of ``specsim report`` pages (matplotlib; each function returns an open figure the page inlines).

Run page: latency CDFs, simulated step times against the profile (drawn at the contexts the steps ran),
acceptance per draft position, the step timeline. Sweep page: per-load curves, TPS/user CDFs, the scenario's
step-time profile; the frontier figure is :func:`specsim.analysis.plots.frontier_figure`, the one ``specsim
plot`` draws.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim import figures, fmt
from specsim.analysis.metrics import measured_mask
from specsim.analysis.plots import _legend_outside, _plain_ticks


def step_profile(st: pd.DataFrame | None, s: dict[str, Any]):
    """Simulated step times vs batch tokens, over the profile drawn at the contexts the steps ran.

    The profile's step time depends on batch tokens and on the KV tokens read (``kv_read_s_per_token``); one
    line at one context would sit below every step at a longer one. So the profile is drawn as a band from
    the shortest to the longest KV context of the run's steps (blocks in use x block size), with the line at
    their median, and at each step's own (batch tokens, KV context) as a cross; simulated steps add drafting
    and host overheads on top of it (DESIGN.md, step time), the gap between a dot and its cross.
    """
    fig, ax = figures.subplots(figsize=(7.4, 4.0))
    if st is not None and len(st):
        pre = st.prefill_tokens.to_numpy() > 0
        ax.scatter(st.batch_tokens[~pre], st.duration_s[~pre] * 1e3, s=6, alpha=0.4, label="decode steps")
        if pre.any():
            ax.scatter(st.batch_tokens[pre], st.duration_s[pre] * 1e3, s=6, alpha=0.4, label="mixed steps")
        _profile_band(ax, s.get("provenance", {}), int(st.batch_tokens.max()), st, s)
    else:
        _no_data(ax, "no steps recorded")
    ax.set_xlabel("batch tokens (target tokens per step)")
    ax.set_ylabel("step time (ms)")
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    return fig


def _profile_band(ax, prov: dict[str, Any], bmax: int, st: pd.DataFrame, s: dict[str, Any]) -> None:
    """The profile's step time at the run's KV contexts: a band (min-max) and its median line."""
    try:
        from specsim.hardware.profile import resolve_profile
        prof = resolve_profile(prov["profile_source"])
    except Exception:   # a report must not fail on a profile that moved: the steps alone are drawn
        return
    b = np.unique(np.linspace(1, min(max(bmax, 2), prof.max_batch_tokens), 200).astype(int))
    base = np.asarray(prof.step_time(b)) * 1e3                                   # (200,) ms, no KV read
    if not prof.kv_read_s_per_token or "kv_blocks_used" not in st:
        ax.plot(b, base, "k-", lw=1.2, label="profile (no KV-read term)")
        return
    kvc = s.get("kv_capacity") or {}
    block, state = kvc.get("block_size", 16), kvc.get("state_blocks", 0)      # a hybrid model's state: no KV read
    held = st.kv_blocks_used.to_numpy(float)
    if state and "num_running" in st:
        held = np.maximum(held - state * st.num_running.to_numpy(float), 0.0)
    kv = held * block                                                            # (steps,) KV tokens read
    lo, mid, hi = (base + prof.kv_read_s_per_token * np.quantile(kv, q) * 1e3 for q in (0.0, 0.5, 1.0))
    ax.fill_between(b, lo, hi, color="0.2", alpha=0.15, lw=0,
                    label=f"profile at the steps' KV contexts ({np.min(kv):,.0f}-{np.max(kv):,.0f} tokens)")
    ax.plot(b, mid, "k-", lw=1.0, label=f"profile at the median context ({np.median(kv):,.0f} tokens)")
    own = (np.asarray(prof.step_time(st.batch_tokens.to_numpy())) + prof.kv_read_s_per_token * kv) * 1e3
    ax.scatter(st.batch_tokens, own, s=5, marker="x", color="k", lw=0.6, alpha=0.5,
               label="profile at each step's batch and KV context\n(the gap above: drafting, speculation terms, host time)")


def _no_data(ax, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="0.3")
    ax.set_frame_on(True)


def latency_cdf(rq: pd.DataFrame | None, s: dict[str, Any]):
    fig, axes = figures.subplots(1, 3, figsize=(11, 3.3))
    for ax, (col, name) in zip(axes, [("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2el_s", "E2EL")]):
        v = np.sort(rq[col][measured_mask(rq, s)].dropna().to_numpy(float)) * 1e3 if rq is not None else []
        if len(v):
            ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color="tab:blue")
            for q, ls in ((0.5, "--"), (0.99, ":")):
                ax.axvline(np.quantile(v, q), color="0.4", ls=ls, lw=1, label=f"p{int(q * 100)}")
            ax.legend(fontsize=7)
        else:
            _no_data(ax, "no completed requests")
        ax.set_xlabel(f"{name} (ms)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("share of requests")           # one label for the shared scale (it crowded each neighbour)
    return fig


def acceptance(log: pd.DataFrame | None, s: dict[str, Any]):
    fig, ax = figures.subplots(figsize=(6.2, 4.0))
    if log is not None and len(log) and int(log.verify_len.max()) > 0:
        vl, acc = log.verify_len.to_numpy(int), log.num_accepted.to_numpy(int)
        k = np.arange(1, int(vl.max()) + 1)                                   # (K,) positions
        verified = (vl[:, None] >= k[None, :])                                # (N, K)
        reached = verified & (acc[:, None] >= k[None, :] - 1)                 # position verified and reached
        accepted = verified & (acc[:, None] >= k[None, :])
        cond = accepted.sum(0) / np.maximum(reached.sum(0), 1)
        share = accepted.sum(0) / np.maximum(verified.sum(0), 1)
        ax.plot(k, cond, "o-", ms=9, mfc="none", mew=1.5, label="conditional: accepted / reached")   # hollow: the
        ax.plot(k, share, "s--", ms=5, label="accepted / verified")           # two coincide at position 1
        ax.set_ylim(0, 1.02)
        ax.set_xticks(k)
        ax.legend(fontsize=7)
    else:
        _no_data(ax, f"no step log (mean acceptance length {fmt.value(s.get('mean_acceptance_length'))})")
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate")
    ax.grid(alpha=0.3)
    return fig


def timeline(st: pd.DataFrame | None):
    fig, ax = figures.subplots(figsize=(6.2, 4.0))
    if st is not None and len(st):
        ax2 = ax.twinx()
        for rep, sub in st.groupby("replica"):
            t = (sub.start_s + sub.duration_s).to_numpy()
            ax.plot(t, sub.num_running, lw=1, label=f"replica {rep} running")
            ax2.plot(t, sub.kv_blocks_used, lw=1, ls=":", label=f"replica {rep} KV blocks")
        ax2.set_ylabel("KV blocks in use")
        lines, labels = ax.get_legend_handles_labels()
        more, more_labels = ax2.get_legend_handles_labels()          # the dotted KV lines are on the twin axis
        ax.legend(lines + more, labels + more_labels, fontsize=7, loc="upper left")
    else:
        _no_data(ax, "no steps recorded")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("running requests")
    from matplotlib.ticker import MaxNLocator
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))      # a count: no 1.5 requests
    ax.grid(alpha=0.3)
    return fig


def per_load(frame: pd.DataFrame, metric: str):
    """``metric`` (seed mean, +- std with two or more seeds) against load, one line per curve."""
    fig, ax = figures.subplots(figsize=(7.4, 4.0))
    for curve, sub in frame.groupby("curve", sort=True):
        sub = sub.sort_values("load")
        if (sub.num_seeds > 1).any():
            ax.errorbar(sub["load"], sub[f"{metric}_mean"], yerr=sub[f"{metric}_std"], marker="o", ms=3.5,
                        lw=1.5, capsize=2, label=curve)
        else:                                    # one seed: no error bars, no error-bar glyph in the legend
            ax.plot(sub["load"], sub[f"{metric}_mean"], marker="o", ms=3.5, lw=1.5, label=curve)
    if (frame["load"] > 0).all() and frame["load"].nunique() > 1:
        ax.set_xscale("log", base=2)
        _plain_ticks(ax.xaxis, sorted(frame["load"].unique()))
    modes = set(frame["mode"]) if "mode" in frame else set()
    ax.set_xlabel("concurrent requests per cluster" if modes == {"closed"}      # as specsim plot labels it
                  else "open-loop rate scale" if modes == {"open"} else "load (concurrency or rate scale)")
    ax.set_ylabel(metric.replace("_", " "))
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    return fig


def tps_cdf(ok: list[dict[str, Any]], df: pd.DataFrame):
    fig, ax = figures.subplots(figsize=(6.2, 4.0))
    by_id = {r["id"]: r for r in ok}
    for curve, sub in df.groupby("curve", sort=True):
        top = sub[sub.load == sub.load.max()]
        v = np.sort(np.concatenate([np.asarray(by_id[i]["requests"]["tps_per_user"], float) for i in top.id]))
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=f"{curve} @ {top.load.iloc[0]:g}")
    ax.set_xlim(left=0)                          # a CDF read from 0 tok/s/user
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("TPS/user (tok/s)")
    ax.set_ylabel("share of requests")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def sweep_profile(man: dict[str, Any]):
    fig, ax = figures.subplots(figsize=(6.2, 4.0))
    name = ((man.get("scenario") or {}).get("profile") or {}).get("name")
    try:
        from specsim.hardware.profile import resolve_profile
        prof = resolve_profile(name)
        b = np.unique(np.linspace(1, min(4096, prof.max_batch_tokens), 200).astype(int))
        ax.plot(b, np.asarray(prof.step_time(b)) * 1e3, "k-", lw=1.2, label=f"{name}: table term")
        if prof.kv_read_s_per_token:
            ax.plot(b, (np.asarray(prof.step_time(b)) + prof.kv_read_s_per_token * 100_000) * 1e3, "k--", lw=1,
                    label="+ KV-read term at 100k tokens")
        ax.legend(fontsize=7)
    except Exception:   # a profile that moved or a manifest without one: say so in the figure
        _no_data(ax, f"profile {name!r} not found")
    ax.set_xlabel("batch tokens")
    ax.set_ylabel("step time (ms)")
    ax.grid(alpha=0.3)
    return fig
