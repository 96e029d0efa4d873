"""Figures of a sweep (matplotlib figures made without pyplot, :mod:`specsim.figures`; PNG).

* :func:`plot_frontiers`: throughput per GPU vs mean TPS/user, every load point (seed mean with its
  seed min-max as error bars) and each curve's Pareto frontier joined by the interpolation rule of
  specsim.analysis.frontier; one panel per sweep directory, side by side, SLA tiers as dotted verticals (the
  layout of the DSpark paper's Fig. 7, §5). Measured points (real ``vllm bench serve`` or
  guidellm runs read by :mod:`specsim.analysis.results`) are drawn on every panel as black stars labelled
  ``measured: ...``, on the same axes.
* :func:`plot_budget`: mean verify tokens per request vs concurrency (the paper's Fig. 8).
* :func:`plot_throughput_vs_load`: throughput per GPU vs concurrency (or rate scale).
* :func:`plot_tuned_frontiers`: the untuned curves' frontiers with each tuned frontier (specsim.sweep.tune)
  drawn over them: its throughput per tier (seed std as error bars), each point labelled with its knob value.

Every figure follows the same rules: SLA tiers are dotted verticals labelled with their value; the title says
what was swept (curves, load range, seeds); tick labels are plain numbers (``1 2 4 8``, not ``2^0``); error
bars, and their legend glyphs, only where there are two or more seeds; legends sit outside the axes, right
of the plot, so they never cover data.

One TPS/user estimator per figure (:func:`tps_estimator`): the simulator's is the mean over requests of each
request's TPS/user (``mean_tps_per_user``); a ``vllm bench serve`` summary file without ``--save-detailed``
gives only mean TPOT, so when a drawn measured point has only that, every point of the figure, simulated
ones included, uses 1000 / mean TPOT (the x-axis label says which). The two differ by Jensen's inequality
(1000 / mean TPOT <= the per-request mean).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import matplotlib
import numpy as np

from specsim import figures, fmt
from specsim.analysis.frontier import X, Y, Frontier, frontiers
from specsim.analysis.sweep_records import as_records
from specsim.analysis.sweep_tables import results_frame, seed_spread
from specsim.analysis.tiers import as_tiers
from specsim.errors import SpecsimInputError


#: The two TPS/user estimators (see the module docstring): label -> x-axis text.
ESTIMATORS = {"per-request": "TPS/user (tok/s; mean over requests of each request's TPS/user)",
              "1000 / mean TPOT": "TPS/user (tok/s; 1000 / mean TPOT, as vllm bench serve summaries give it)"}
#: The column of a results frame holding the 1000 / mean TPOT estimator.
X_TPOT = "tps_per_user_from_mean_tpot"


def tps_estimator(measured: Sequence[Any]) -> str:
    """The TPS/user estimator of a frontier figure: ``"per-request"`` unless a drawn measured point only has
    ``"1000 / mean TPOT"`` (:class:`specsim.analysis.results.MeasuredPoint.tps_per_user_basis`)."""
    drawn = [p for p in measured if p.tps_per_user is not None and p.throughput_per_gpu is not None]
    return "1000 / mean TPOT" if any(p.tps_per_user_basis != "per-request" for p in drawn) else "per-request"


def swept_title(name: str, records: list[dict[str, Any]]) -> str:
    """What a sweep folder swept, for a figure title: ``NAME: curves; closed loop 1-64 users; 3 seeds``, over the
    points that finished (a load where every point failed is not drawn, so not named)."""
    df = results_frame(records)
    df = df[df.status == "ok"] if not df.empty else df
    if df.empty:
        return name
    parts = [", ".join(sorted(df.curve.unique()))]
    for mode, sub in df.groupby("mode", sort=True):
        lo, hi = sub.load.min(), sub.load.max()
        span = f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"
        parts.append(f"closed loop {span} users" if mode == "closed" else f"open loop x{span} rate")
    n = df.seed.nunique()
    parts.append(f"{n} seed{'s' if n > 1 else ''}")
    return f"{name}: " + "; ".join(parts)


def _colors(curves: Sequence[str]) -> dict[str, Any]:
    cmap = figures.colormap("tab10")
    return {c: cmap(i % 10) for i, c in enumerate(sorted(curves))}


def plot_frontiers(panels: Sequence[Any] | str | Path, out_png: str | Path,
                   tiers: Sequence[float] = (), measured: Sequence[Any] = ()) -> Path:
    """Throughput per GPU vs TPS/user, one panel per (title, records) pair or per sweep folder of a list (titled by
    the folder's name: :func:`_panels`), or one panel of a sweep folder or of a list of records; returns the PNG
    path written (``.png`` added to a name without a suffix). ``tiers``: as :func:`specsim.analysis.tiers.as_tiers`
    takes them.

    ``measured``: :class:`specsim.analysis.results.MeasuredPoint` objects drawn on every panel (points without
    TPS/user or throughput are skipped). Simulated and measured points share one TPS/user estimator
    (:func:`tps_estimator`); a panel's title is :func:`swept_title` of its name.
    """
    return _save(frontier_figure(panels, tiers, measured), out_png)


def _panels(panels: Any) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(title, records)`` pairs from what a caller passes: pairs as they are; one sweep folder, or a list of
    sweep folders (``["runs/a", "runs/b"]``, str or Path; pairs may stand among them), each titled by its folder's
    name (:func:`specsim.fmt.folder_titles`: folders of one name are told apart by their parents); or one list of records
    (titled ``sweep``). Each panel's records are read by :func:`as_records`.

    Raises:
        SpecsimInputError: anything else, or a panel without a finished point.
    """
    if isinstance(panels, (str, Path)):
        panels = [panels]
    elif isinstance(panels, list) and panels and all(isinstance(r, dict) for r in panels):
        panels = [("sweep", panels)]
    elif isinstance(panels, (list, tuple)) and not panels:
        raise SpecsimInputError(None, None, "panels", "at least one (title, records) pair or sweep folder", "none")
    try:
        panels = list(panels)
        titles = iter(fmt.folder_titles([p for p in panels if isinstance(p, (str, Path))]))
        panels = [(next(titles), p) if isinstance(p, (str, Path)) else p for p in panels]
        pairs = [(str(t), as_records(r, f"panel {t!r}")) for t, r in panels]
    except SpecsimInputError:
        raise
    except (TypeError, ValueError):                 # not an iterable of pairs or folders
        raise SpecsimInputError(None, None, "panels", "(title, records) pairs, sweep folders or a list of records",
                                type(panels).__name__) from None
    for title, recs in pairs:
        if not any(r.get("status") == "ok" for r in recs):
            raise SpecsimInputError(None, None, f"panel {title!r}", "sweep records with a finished point", "none")
    return pairs


def frontier_figure(panels: Sequence[Any] | str | Path, tiers: Sequence[float] = (),
                    measured: Sequence[Any] = (), width_in: float = 7.4, height_in: float = 4.6,
                    hover: dict[str, list[str]] | None = None):
    """The matplotlib figure :func:`plot_frontiers` saves (``specsim report`` inlines it), made without pyplot
    (:mod:`specsim.figures`: nothing to close). ``panels``: as :func:`plot_frontiers` takes them (``[("a",
    "runs/a"), ...]`` pairs, ``["runs/a", "runs/b"]`` folders, one folder or one list of records); ``width_in``,
    ``height_in``: one panel's size in inches. ``hover``, when given, is filled with each point series' artist id
    -> one label per drawn point (curve, load, TPS/user, throughput), in drawing order, for :func:`svg_with_titles`.

    Raises:
        SpecsimInputError: ``panels`` of another shape, a folder without records, or a panel with no finished point.
    """
    from specsim.analysis.sweep_tables import curve_titles, flagged_points, gpu_split

    panels, tiers = _panels(panels), () if tiers is None else as_tiers(tiers)
    est = tps_estimator(measured)
    fig, axes = figures.subplots(1, len(panels), figsize=(width_in * len(panels), height_in), squeeze=False)
    for ax, (title, recs) in zip(axes[0], panels):
        df, sp, fr, x_col = _spread_and_frontiers(recs, est)
        flags, titles = flagged_points(df), curve_titles(df)
        colors = _colors(sp.curve.unique())
        any_flagged = False
        for curve, f in fr.items():
            sub = sp[sp.curve == curve]
            c = colors[curve]
            x, y = sub[f"{x_col}_mean"].to_numpy(), sub[f"{Y}_mean"].to_numpy()
            bad = np.array([(curve, f"{load:g}") in flags for load in sub["load"]], bool)
            if bad.any():                   # thrashing, prefill- or think-bound: crossed out (flagged_points)
                ax.plot(x[bad], y[bad], "x", ms=8, mew=1.6, color=c, zorder=3)
                any_flagged = True
            if (sub.num_seeds > 1).any():
                xerr = np.abs(np.vstack([x - sub[f"{x_col}_min"], sub[f"{x_col}_max"] - x]))
                yerr = np.abs(np.vstack([y - sub[f"{Y}_min"], sub[f"{Y}_max"] - y]))
                pts = ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=3.5, color=c, alpha=0.45, lw=0.8)[0]
            else:
                pts = ax.plot(x, y, "o", ms=3.5, color=c, alpha=0.45)[0]
            if hover is not None:
                _mark(pts, hover, [_point_label(curve, r, x_col) for _, r in sub.iterrows()], x, y)
            ax.plot(f.tps_per_user, f.throughput_per_gpu, "-", color=c, lw=1.8, label=titles.get(curve, curve))
        if any_flagged:
            ax.plot([], [], "x", ms=8, mew=1.6, color="0.25", label="flagged point (warnings)")
        _draw_measured(ax, measured, hover)
        split = gpu_split(recs)
        _frontier_axes(ax, swept_title(title, recs), tiers, ESTIMATORS[est],
                       ylabel=f"output throughput per decode GPU (tok/s; + {split[1]} prefill GPU"
                              f"{'s' if split[1] > 1 else ''})" if split and split[1] else YLABEL)
    return fig




def _point_label(curve: str, row, x_col: str) -> str:
    """The hover text of one simulated load point (seed means)."""
    load = fmt.users(row["load"]) if row["mode"] == "closed" else f"rate x{row['load']:g}"
    seeds = f", mean of {int(row['num_seeds'])} seeds" if row["num_seeds"] > 1 else ""
    return (f"{curve}, {load}: {row[f'{x_col}_mean']:,.1f} tok/s/user, {row[f'{Y}_mean']:,.0f} tok/s/GPU"
            f"{seeds}")


def _mark(artist, hover: dict[str, list[str]], labels: list[str], x, y) -> None:
    """Give ``artist`` (a Line2D of markers) an id and record its points' labels; matplotlib draws no marker
    for a non-finite point, so neither is a label kept for one."""
    gid = f"points-{len(hover)}"
    artist.set_gid(gid)
    keep = np.isfinite(np.asarray(x, float)) & np.isfinite(np.asarray(y, float))
    hover[gid] = [lab for lab, k in zip(labels, keep) if k]


def svg_with_titles(fig, hover: dict[str, list[str]]) -> str:
    """``fig`` as SVG text whose marked points (:func:`frontier_figure`'s ``hover``) each carry a ``<title>``:
    a browser shows it when the pointer rests on the point (SVG 1.1, section 5.4), so the page stays one
    offline file with no script. Element ids are salted for reproducible output."""
    import io
    import xml.etree.ElementTree as ET

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "specsim", "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    ns = {"svg": "http://www.w3.org/2000/svg"}
    ET.register_namespace("", ns["svg"])
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    root = ET.fromstring(buf.getvalue())
    for group in root.iter(f"{{{ns['svg']}}}g"):
        labels = hover.get(group.get("id", ""))
        if labels is None:
            continue
        marks = list(group.iter(f"{{{ns['svg']}}}use"))
        if len(marks) != len(labels):
            raise RuntimeError(f"{group.get('id')}: {len(marks)} markers drawn for {len(labels)} labels")
        for use, text in zip(marks, labels):
            ET.SubElement(use, f"{{{ns['svg']}}}title").text = text
    return ET.tostring(root, encoding="unicode")


def _spread_and_frontiers(recs: list[dict[str, Any]], estimator: str):
    """Points, seed spread and frontiers of ``recs`` on the TPS/user ``estimator``; returns (results frame, spread,
    frontiers, x column)."""
    df = results_frame(recs)
    if estimator == "per-request":
        sp = seed_spread(df)
        return df, sp, frontiers(sp), X
    df[X_TPOT] = 1000.0 / df["mean_tpot_ms"]
    sp = seed_spread(df, [X_TPOT, Y])
    fr = {str(c): Frontier.from_points(str(c), sub[f"{X_TPOT}_mean"].to_numpy(), sub[f"{Y}_mean"].to_numpy(),
                                       sub["load"].to_numpy()) for c, sub in sp.groupby("curve", sort=True)}
    return df, sp, fr, X_TPOT


def _draw_measured(ax, measured: Sequence[Any], hover: dict[str, list[str]] | None = None) -> None:
    """Measured points as stars, one marker shade per label (``hover``: as :func:`frontier_figure`)."""
    pts = [p for p in measured if p.tps_per_user is not None and p.throughput_per_gpu is not None]
    labels = sorted({p.label for p in pts})
    shades = {lab: str(0.45 * i / max(1, len(labels) - 1)) for i, lab in enumerate(labels)}  # black to grey
    for lab in labels:
        sub = [p for p in pts if p.label == lab]
        x, y = [p.tps_per_user for p in sub], [p.throughput_per_gpu for p in sub]
        line = ax.plot(x, y, "*", ms=11, color=shades[lab], markeredgecolor="white", markeredgewidth=0.6,
                       label=lab, zorder=5)[0]
        if hover is not None:
            _mark(line, hover, [f"{lab}: {a:,.1f} tok/s/user, {b:,.0f} tok/s/GPU" for a, b in zip(x, y)], x, y)


def _per_load(records: list[dict[str, Any]], metric: str, ax, ylabel: str) -> None:
    records = as_records(records)
    if not any(r["status"] == "ok" for r in records):
        raise SpecsimInputError(None, None, "records", "sweep records with a finished point", "none")
    from specsim.analysis.sweep_tables import curve_titles

    df = results_frame(records)
    sp, titles = seed_spread(df, [metric]), curve_titles(df)
    colors = _colors(sp.curve.unique())
    for curve, sub in sp.groupby("curve", sort=True):
        sub, label = sub.sort_values("load"), titles.get(curve, curve)
        if (sub.num_seeds > 1).any():       # error bars (and their legend glyph) only with a spread to show
            ax.errorbar(sub["load"], sub[f"{metric}_mean"], yerr=sub[f"{metric}_std"], marker="o", ms=3.5,
                        color=colors[curve], lw=1.5, capsize=2, label=label)
        else:
            ax.plot(sub["load"], sub[f"{metric}_mean"], marker="o", ms=3.5, color=colors[curve], lw=1.5, label=label)
    modes = set(sp["mode"])
    ax.set_xscale("log", base=2)
    _plain_ticks(ax.xaxis, sorted(sp["load"].unique()))
    ax.set_xlabel("concurrent requests per cluster" if modes == {"closed"} else "load (concurrency or rate scale)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    _legend_outside(ax)


def _plain_ticks(axis, values: Sequence[float]) -> None:
    """Tick a log axis at the swept values, written as plain numbers (``1 2 4 8``, not ``2^0 .. 2^3``)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    vals = [float(v) for v in values if v > 0]
    if len(vals) > 12:                       # keep about a dozen labels
        vals = vals[::int(np.ceil(len(vals) / 12))]
    axis.set_major_locator(FixedLocator(vals))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def _legend_outside(ax) -> None:
    """The legend right of the axes (never over the data); nothing when no artist is labelled."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)


def plot_budget(records: list[dict[str, Any]], out_png: str | Path, title: str = "") -> Path:
    """Mean verify tokens per request (1 + l_r, mean over request-steps) vs load, seed mean +- std."""
    fig, ax = figures.subplots(figsize=(7.4, 4.4))
    _per_load(records, "mean_verify_tokens_per_request", ax, "mean verify tokens per request")
    ax.set_title(title or "verification budget per request", fontsize=10)
    return _save(fig, out_png)


def plot_throughput_vs_load(records: list[dict[str, Any]], out_png: str | Path, title: str = "") -> Path:
    """Output throughput per GPU vs load, seed mean +- std."""
    fig, ax = figures.subplots(figsize=(7.4, 4.4))
    _per_load(records, Y, ax, "output throughput per GPU (tok/s)")
    ax.set_title(title or "throughput vs load", fontsize=10)
    return _save(fig, out_png)


def _save(fig, out_png: str | Path) -> Path:
    """Write ``fig`` to ``out_png`` (``.png`` added where the name has no suffix, as matplotlib adds it) and
    return the path written."""
    p = Path(out_png)
    if not p.suffix:
        p = p.with_name(p.name + ".png")
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(p, dpi=130, bbox_inches="tight")        # keeps the legends outside the axes in the file
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
    fig, axes = figures.subplots(1, len(panels), figsize=(7.4 * len(panels), 4.6), squeeze=False)
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
            color = "black" if i == 0 else figures.colormap("Dark2")(i)
            if len(t["spec"].get("seeds", ())) > 1:
                ax.errorbar(x, y, yerr=e, fmt="D--", ms=6, color=color, lw=1.6, capsize=3, label=t["curve"])
            else:
                ax.plot(x, y, "D--", ms=6, color=color, lw=1.6, label=t["curve"])
            for j, r in enumerate(ok):      # alternate above / below, shifted per tuned curve: no overlap
                dy = (10 + 9 * i) * (1 if j % 2 == 0 else -1)
                ax.annotate(f"{t['spec']['knob']['name']}={r['value']:g}", (r["tier"], r["throughput_per_gpu"]),
                            textcoords="offset points", xytext=(4, dy), fontsize=7, va="center", color=color,
                            bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
        lo, hi = ax.get_ylim()                  # headroom for the labels above the topmost tuned points
        ax.set_ylim(lo, hi + 0.12 * (hi - lo))
        _frontier_axes(ax, swept_title(title, recs) if recs else title, tiers, tier_labels="bottom")
    return _save(fig, out_png)


#: The frontier panels' y label (per decode GPU where a sweep also runs prefill GPUs: :func:`frontier_figure`).
YLABEL = "output throughput per GPU (tok/s)"


def _frontier_axes(ax, title: str, tiers, xlabel: str = ESTIMATORS["per-request"], tier_labels: str = "top",
                   ylabel: str = YLABEL) -> None:
    """Labelled tier lines, axis labels, title, grid and the legend (outside) of one frontier panel; ``tier_labels``
    ``"top"`` or ``"bottom"`` of the panel (the tuned plot's points sit on the tier lines, near the top), each on a
    pale box so a curve crossing it leaves it readable."""
    from matplotlib.transforms import blended_transform_factory

    top = blended_transform_factory(ax.transData, ax.transAxes)       # x in data, y in axes fraction
    y, va = (0.99, "top") if tier_labels == "top" else (0.01, "bottom")
    for t in tiers:
        ax.axvline(t, color="0.5", ls=":", lw=1)
        ax.text(t, y, f" SLA {t:g} tok/s ", transform=top, rotation=90, va=va, ha="right", fontsize=7,
                color="0.35", zorder=4, bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 0.5})
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9 if len(ylabel) > 40 else None)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    _legend_outside(ax)


def plot_step_terms(df, terms: list[str], out, title: str = "") -> None:
    """Stacked area plot of a step's terms (``specsim profile show --terms``).

    Args:
        df: a frame with ``batch_tokens`` and one column per term in ms (:func:`specsim.hardware.stepmodel.terms_table`).
        terms: the columns to stack, bottom first.
        out: the PNG path.
    """
    fig, ax = figures.subplots(figsize=(8, 4.5))
    ax.stackplot(df["batch_tokens"], *[df[t] for t in terms], labels=terms)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("B (tokens in the step)")
    ax.set_ylabel("step time (ms)")
    ax.set_title(title, fontsize=9)
    _plain_ticks(ax.xaxis, list(df["batch_tokens"]))
    _legend_outside(ax)
    fig.tight_layout()
    fig.savefig(out, dpi=110, bbox_inches="tight")
