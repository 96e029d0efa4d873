"""Figures of a sweep (matplotlib, Agg backend, PNG).

* :func:`plot_frontiers`: throughput per GPU vs mean TPS/user, every load point (seed mean with its
  seed min-max as error bars) and each curve's Pareto frontier joined by the interpolation rule of
  specsim.analysis.frontier; one panel per sweep directory, side by side, SLA tiers as dotted verticals (the
  layout of the paper's Fig. 7: PAPER.md section 8.5). Measured points (real ``vllm bench serve`` or
  guidellm runs read by :mod:`specsim.analysis.results`) are drawn on every panel as black stars labelled
  ``measured: ...``, on the same axes.
* :func:`plot_budget`: mean verify tokens per request vs concurrency (the paper's Fig. 8).
* :func:`plot_throughput_vs_load`: throughput per GPU vs concurrency (or rate scale).
* :func:`plot_tuned_frontiers`: the untuned curves' frontiers with each tuned frontier (specsim.sweep.tune)
  drawn over them: its throughput per tier (seed std as error bars), each point labelled with its knob value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from specsim.analysis.frontier import X, Y, frontiers  # noqa: E402
from specsim.sweep import results_frame, seed_spread  # noqa: E402


def _colors(curves: Sequence[str]) -> dict[str, Any]:
    cmap = plt.get_cmap("tab10")
    return {c: cmap(i % 10) for i, c in enumerate(sorted(curves))}


def plot_frontiers(panels: Sequence[tuple[str, list[dict[str, Any]]]], out_png: str | Path,
                   tiers: Sequence[float] = (), measured: Sequence[Any] = ()) -> Path:
    """Throughput per GPU vs TPS/user, one panel per (title, records) pair; returns the PNG path.

    ``measured``: :class:`specsim.analysis.results.MeasuredPoint` objects drawn on every panel (points without
    TPS/user or throughput are skipped).
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.6), squeeze=False)
    for ax, (title, recs) in zip(axes[0], panels):
        sp = seed_spread(results_frame(recs))
        colors = _colors(sp.curve.unique())
        for curve, f in frontiers(sp).items():
            sub = sp[sp.curve == curve]
            c = colors[curve]
            x, y = sub[f"{X}_mean"].to_numpy(), sub[f"{Y}_mean"].to_numpy()
            xerr = np.abs(np.vstack([x - sub[f"{X}_min"], sub[f"{X}_max"] - x]))
            yerr = np.abs(np.vstack([y - sub[f"{Y}_min"], sub[f"{Y}_max"] - y]))
            ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=3.5, color=c, alpha=0.45, lw=0.8)
            ax.plot(f.tps_per_user, f.throughput_per_gpu, "-", color=c, lw=1.8, label=curve)
        _draw_measured(ax, measured)
        _frontier_axes(ax, title, tiers)
    return _save(fig, out_png)


def _draw_measured(ax, measured: Sequence[Any]) -> None:
    """Measured points as stars, one marker shade per label, annotated with their load."""
    pts = [p for p in measured if p.tps_per_user is not None and p.throughput_per_gpu is not None]
    labels = sorted({p.label for p in pts})
    shades = {lab: str(0.45 * i / max(1, len(labels) - 1)) for i, lab in enumerate(labels)}  # black to grey
    for lab in labels:
        sub = [p for p in pts if p.label == lab]
        ax.plot([p.tps_per_user for p in sub], [p.throughput_per_gpu for p in sub], "*", ms=11,
                color=shades[lab], markeredgecolor="white", markeredgewidth=0.6, label=lab, zorder=5)


def _per_load(records: list[dict[str, Any]], metric: str, ax, ylabel: str) -> None:
    sp = seed_spread(results_frame(records), [metric])
    colors = _colors(sp.curve.unique())
    for curve, sub in sp.groupby("curve", sort=True):
        sub = sub.sort_values("load")
        ax.errorbar(sub["load"], sub[f"{metric}_mean"], yerr=sub[f"{metric}_std"], marker="o", ms=3.5,
                    color=colors[curve], lw=1.5, capsize=2, label=curve)
    modes = set(sp["mode"])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent requests per cluster" if modes == {"closed"} else "load (concurrency or rate scale)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def plot_budget(records: list[dict[str, Any]], out_png: str | Path, title: str = "") -> Path:
    """Mean verify tokens per request (1 + l_r, mean over request-steps) vs load, seed mean +- std."""
    fig, ax = plt.subplots(figsize=(6.2, 4.4))
    _per_load(records, "mean_verify_tokens_per_request", ax, "mean verify tokens per request")
    ax.set_title(title or "verification budget per request")
    return _save(fig, out_png)


def plot_throughput_vs_load(records: list[dict[str, Any]], out_png: str | Path, title: str = "") -> Path:
    """Output throughput per GPU vs load, seed mean +- std."""
    fig, ax = plt.subplots(figsize=(6.2, 4.4))
    _per_load(records, Y, ax, "output throughput per GPU (tok/s)")
    ax.set_title(title or "throughput vs load")
    return _save(fig, out_png)


def _save(fig, out_png: str | Path) -> Path:
    p = Path(out_png)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, dpi=130)
    plt.close(fig)
    return p


def plot_tuned_frontiers(panels: Sequence[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]],
                         out_png: str | Path, tiers: Sequence[float] = ()) -> Path:
    """Untuned frontiers and tuned frontiers, one panel per (title, untuned records, tuning results).

    Args:
        panels: (title, records without tuning-only points, tuning results), as
            :func:`specsim.analysis.frontier.read_tuned` returns them.
        out_png: the PNG to write; tiers: SLA tiers drawn as dotted verticals.

    Returns:
        The PNG path.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.6), squeeze=False)
    for ax, (title, recs, tuned) in zip(axes[0], panels):
        if recs:
            sp = seed_spread(results_frame(recs))
            colors = _colors(sp.curve.unique())
            for curve, f in frontiers(sp).items():
                ax.plot(f.tps_per_user, f.throughput_per_gpu, "-", color=colors[curve], lw=1.5, label=curve)
        for i, t in enumerate(tuned):
            ok = [r for r in t["tiers"] if r["throughput_per_gpu"] is not None]
            x = np.array([r["tier"] for r in ok], float)
            y = np.array([r["throughput_per_gpu"] for r in ok], float)
            e = np.array([r["throughput_std"] if r["throughput_std"] is not None else 0.0 for r in ok], float)
            ax.errorbar(x, y, yerr=e, fmt="D--", ms=6, color="black" if i == 0 else plt.get_cmap("Dark2")(i),
                        lw=1.6, capsize=3, label=t["curve"])
            for r in ok:
                ax.annotate(f"{t['spec']['knob']['name']}={r['value']:g}", (r["tier"], r["throughput_per_gpu"]),
                            textcoords="offset points", xytext=(5, 6), fontsize=7)
        _frontier_axes(ax, title, tiers)
    return _save(fig, out_png)


def _frontier_axes(ax, title: str, tiers) -> None:
    """Tier lines, axis labels, title, grid and legend of one frontier panel."""
    for t in tiers:
        ax.axvline(t, color="0.5", ls=":", lw=1)
    ax.set_xlabel("TPS/user (tok/s, mean over requests)")
    ax.set_ylabel("output throughput per GPU (tok/s)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def plot_step_terms(df, terms: list[str], out, title: str = "") -> None:
    """Stacked area plot of a step's terms (``specsim profile show --terms``).

    Args:
        df: a frame with ``batch_tokens`` and one column per term in ms (:func:`specsim.hardware.stepmodel.terms_table`).
        terms: the columns to stack, bottom first.
        out: the PNG path.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.stackplot(df["batch_tokens"], *[df[t] for t in terms], labels=terms)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("B (tokens in the step)")
    ax.set_ylabel("step time (ms)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
