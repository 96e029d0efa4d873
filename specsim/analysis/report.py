"""One self-contained HTML page for a run directory or a sweep directory (``specsim report DIR``).

A **run** directory is what ``specsim run --out DIR`` writes (``summary.json``, ``requests.parquet``,
``steps.parquet``, optionally ``step_log.parquet``); a **sweep** directory what ``specsim sweep --out DIR``
writes (``sweep.json`` and ``points/``). The page holds no external reference: figures are matplotlib PNGs
inlined as ``data:`` URIs, the style sheet is inline, there is no script, so it opens offline.

Every figure is a ``<figure id="fig-NAME">`` (:data:`RUN_FIGURES`, :data:`SWEEP_FIGURES`); every number
taken from ``summary.json`` sits in a cell ``<td class="num" data-key="KEY">`` written with
:func:`shown` (6 significant digits), so a reader (or a test) can check it against the file.
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError

#: Figures of a run page: id -> caption.
RUN_FIGURES = {
    "latency-cdf": "Latency CDFs of the measured requests (those summary.json counts): TTFT, TPOT and E2EL (ms)",
    "step-profile": "Step time vs batch tokens: simulated steps (with drafting and host overheads) and the "
                    "profile's terms",
    "acceptance": "Acceptance per draft position: conditional rate and share of verified positions accepted",
    "step-timeline": "Running requests and KV blocks in use over simulated time (per replica)",
}
#: Figures of a sweep page: id -> caption.
SWEEP_FIGURES = {
    "frontier": "Throughput per GPU vs TPS/user: load points (seed mean, min-max bars) and each curve's frontier",
    "budget": "Verification budget vs load: mean verify tokens per request (seed mean +- std)",
    "tps-cdf": "TPS/user CDFs of measured requests at each curve's highest load",
    "step-profile": "The scenario's step-time profile",
    "acceptance": "Mean acceptance length vs load",
}
#: summary.json keys shown in a run's metrics table (those present).
RUN_METRICS = ("completed", "unfinished", "unservable", "total", "measured_requests", "duration_s",
               "request_throughput", "request_goodput", "output_throughput", "output_throughput_per_gpu",
               "mean_ttft_ms", "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
               "p90_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms",
               "mean_tps_per_user", "median_tps_per_user", "mean_acceptance_length", "acceptance_rate",
               "mean_verify_tokens_per_request", "num_preemptions", "prefix_cache_hit_rate", "steps",
               "wall_time_s")
#: SLA tiers (TPS/user) of the goodput tables unless given.
DEFAULT_TIERS = (50.0, 100.0, 150.0, 200.0)

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1100px;
color:#1b1b1b;background:#fff;line-height:1.4}
h1{font-size:1.5em;margin-bottom:0}h2{font-size:1.15em;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:28px}
.sub{color:#555;margin-top:4px}table{border-collapse:collapse;margin:8px 0;font-size:0.9em}
td,th{border:1px solid #ddd;padding:3px 8px}th{background:#f4f4f4;text-align:left}td.num{text-align:right;
font-variant-numeric:tabular-nums}figure{margin:14px 0;display:inline-block;vertical-align:top}
figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:0.85em;color:#444;max-width:640px}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:0.82em;white-space:pre-wrap;word-break:break-all}
"""


def shown(v: Any) -> str:
    """How the page writes a summary number: 6 significant digits (``shown(0.712345678) == "0.712346"``),
    integers whole, ``-`` for None or non-finite; anything else as ``str``."""
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v)


@dataclass(frozen=True)
class Report:
    """A written report: ``path`` of the HTML file, ``kind`` (``run`` or ``sweep``) and its figure ids."""

    path: Path
    kind: str
    figures: tuple[str, ...]


def write_report(src: str | Path, out: str | Path | None = None, tiers: tuple[float, ...] = DEFAULT_TIERS) -> Report:
    """Write the HTML page of run or sweep directory ``src``.

    Args:
        src: a run directory (``summary.json``) or a sweep directory (``sweep.json`` or ``points/``).
        out: the HTML path; default ``src/report.html``.
        tiers: TPS/user SLA tiers of the goodput table, tok/s.

    Returns:
        The :class:`Report` written.

    Raises:
        SpecsimInputError: ``src`` is neither kind, or its files are unreadable.
    """
    d = Path(src)
    if (d / "summary.json").is_file():
        kind, title, body, figs = "run", *_run_page(d, tiers)
    elif (d / "sweep.json").is_file() or (d / "points").is_dir():
        kind, title, body, figs = "sweep", *_sweep_page(d, tiers)
    else:
        raise SpecsimInputError(str(d), None, None, "a run directory (summary.json from specsim run --out) or a "
                                "sweep directory (sweep.json, points/ from specsim sweep --out)", "neither")
    path = Path(out) if out is not None else d / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_page(title, body), encoding="utf-8")
    return Report(path, kind, tuple(figs))


# ----------------------------------------------------------------------------------------------- pieces
def _page(title: str, body: str) -> str:
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<link rel="icon" href="data:,"><style>{_CSS}</style></head><body>\n{body}\n</body></html>\n')


def _figure(fid: str, caption: str, fig) -> str:
    """A ``<figure>`` with the matplotlib figure as an inline PNG (the figure is closed)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return (f'<figure id="fig-{fid}"><img alt="{html.escape(caption)}" src="{uri}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _table(rows: list[dict[str, Any]], cols: list[str], table_id: str, key_col: str | None = None) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    out = []
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            num = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            key = f' data-key="{html.escape(str(r[key_col]))}"' if key_col and c == "value" else ""
            cells.append(f'<td class="num"{key}>{shown(v)}</td>' if num
                         else f"<td{key}>{html.escape(shown(v))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table id="{table_id}"><tr>{head}</tr>{"".join(out)}</table>'


def _provenance(prov: dict[str, Any], command: str | None, extra: dict[str, Any]) -> str:
    rows = [{"item": k, "value": v} for k, v in {**extra, **{k: prov.get(k) for k in (
        "specsim_version", "scenario_source", "scenario_hash", "trace", "trace_hash", "profile_source",
        "acceptance_source")}}.items() if v is not None]
    scen = json.dumps(prov.get("scenario"), indent=1, default=str) if prov.get("scenario") else ""
    return ("<h2>Provenance</h2>" + _table(rows, ["item", "value"], "provenance")
            + "<h3>Command line</h3>" + f'<pre id="command-line">{html.escape(command or "(not recorded)")}</pre>'
            + (f"<details><summary>Resolved scenario</summary><pre>{html.escape(scen)}</pre></details>"
               if scen else ""))


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise SpecsimInputError(str(p), None, None, "a readable JSON file", str(e)) from None


# ---------------------------------------------------------------------------------------------- run page
def _run_page(d: Path, tiers: tuple[float, ...]) -> tuple[str, str, list[str]]:
    s = _read_json(d / "summary.json")
    rq = pd.read_parquet(d / "requests.parquet") if (d / "requests.parquet").is_file() else None
    st = pd.read_parquet(d / "steps.parquet") if (d / "steps.parquet").is_file() else None
    log = pd.read_parquet(d / "step_log.parquet") if (d / "step_log.parquet").is_file() else None
    title = f"specsim run: {s.get('policy')} (drafter {s.get('drafter')}, gamma {s.get('gamma')}), seed {s.get('seed')}"
    load = s.get("load", {})
    where = (f"closed loop, {load.get('concurrency')} users" if load.get("mode") == "closed"
             else f"open loop x{load.get('rate_scale')}")
    parts = [f"<h1>{html.escape(title)}</h1>", f'<p class="sub">{html.escape(where)}; {html.escape(str(d))}</p>']
    if isinstance(s.get("kv_capacity"), dict) and s["kv_capacity"].get("describe"):
        parts.append(f'<p id="kv-capacity">{html.escape(s["kv_capacity"]["describe"])}</p>')
    parts.append("<h2>Metrics</h2>" + _table([{"metric": k, "value": s[k]} for k in RUN_METRICS if k in s],
                                             ["metric", "value"], "metrics", key_col="metric"))
    parts.append("<h2>Goodput</h2>" + _run_goodput(s, rq, tiers))
    plt = _plt()
    figs = {"latency-cdf": _latency_cdf(plt, rq, s), "step-profile": _step_profile(plt, st, s),
            "acceptance": _acceptance(plt, log, s), "step-timeline": _timeline(plt, st)}
    parts.append("<h2>Figures</h2>" + "".join(_figure(k, RUN_FIGURES[k], f) for k, f in figs.items()))
    if s.get("per_domain"):
        cols = ["requests", "mean_ttft_ms", "mean_tpot_ms", "mean_tps_per_user", "mean_acceptance_length",
                "acceptance_rate"]
        rows = [{"domain": dom, **{c: m.get(c) for c in cols}} for dom, m in s["per_domain"].items()]
        parts.append("<h2>Per domain</h2>" + _table(rows, ["domain", *cols], "per-domain"))
    parts.append(_provenance(s.get("provenance", {}), s.get("command_line"), {"run directory": str(d)}))
    return title, "\n".join(parts), list(figs)


def _run_goodput(s: dict[str, Any], rq: pd.DataFrame | None, tiers: tuple[float, ...]) -> str:
    """SLA attainment and goodput per TPS/user tier over the measured multi-token requests (specsim.analysis.frontier's
    rule: goodput = throughput per GPU x output tokens of requests meeting the tier / all their tokens)."""
    head = ""
    if "request_goodput" in s:
        head = (f'<p>request_goodput (vLLM\'s meaning: good requests per second): '
                f'<span class="num" data-key="request_goodput">{shown(s["request_goodput"])}</span></p>')
    if rq is None:
        return head + "<p>(requests.parquet missing: no tier table)</p>"
    meas = _measured(rq, s) & (rq.output_tokens > 1)
    tps, out = rq.tps_per_user[meas].to_numpy(float), rq.output_tokens[meas].to_numpy(float)
    thr = s.get("output_throughput_per_gpu")
    rows = []
    for t in tiers:
        ok = tps >= t
        rows.append({"tier_tps_per_user": float(t), "attainment": float(ok.mean()) if tps.size else None,
                     "goodput_per_gpu": float(thr * out[ok].sum() / out.sum()) if out.sum() and thr else None})
    return head + _table(rows, ["tier_tps_per_user", "attainment", "goodput_per_gpu"], "goodput")


def _measured(rq: pd.DataFrame, s: dict[str, Any]) -> pd.Series:
    """The requests the summary measures: completed, and in closed loop issued inside the window."""
    meas = rq.status == "completed"
    load = s.get("load", {})
    if load.get("mode") == "closed":
        meas &= (rq.arrival_s >= load["window_start_s"]) & (rq.arrival_s <= load["window_end_s"])
    return meas


def _no_data(ax, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, color="0.3")
    ax.set_frame_on(True)


def _latency_cdf(plt, rq: pd.DataFrame | None, s: dict[str, Any]):
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3))
    for ax, (col, name) in zip(axes, [("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("e2el_s", "E2EL")]):
        v = np.sort(rq[col][_measured(rq, s)].dropna().to_numpy(float)) * 1e3 if rq is not None else []
        if len(v):
            ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", color="tab:blue")
            for q, ls in ((0.5, "--"), (0.99, ":")):
                ax.axvline(np.quantile(v, q), color="0.4", ls=ls, lw=1, label=f"p{int(q * 100)}")
            ax.legend(fontsize=7)
        else:
            _no_data(ax, "no completed requests")
        ax.set_xlabel(f"{name} (ms)")
        ax.set_ylabel("share of requests")
        ax.grid(alpha=0.3)
    return fig


def _step_profile(plt, st: pd.DataFrame | None, s: dict[str, Any]):
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    if st is not None and len(st):
        pre = st.prefill_tokens.to_numpy() > 0
        ax.scatter(st.batch_tokens[~pre], st.duration_s[~pre] * 1e3, s=6, alpha=0.4, label="decode steps")
        if pre.any():
            ax.scatter(st.batch_tokens[pre], st.duration_s[pre] * 1e3, s=6, alpha=0.4, label="mixed steps")
        _profile_terms(ax, s.get("provenance", {}), int(st.batch_tokens.max()), st, s)
    else:
        _no_data(ax, "no steps recorded")
    ax.set_xlabel("batch tokens (target tokens per step)")
    ax.set_ylabel("step time (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _profile_terms(ax, prov: dict[str, Any], bmax: int, st: pd.DataFrame | None, s: dict[str, Any]) -> None:
    """The profile's table term and, where it has one, table + KV-read term at the run's mean KV tokens."""
    try:
        from specsim.hardware.profile import resolve_profile
        prof = resolve_profile(prov["profile_source"])
    except Exception:   # a report must not fail on a profile that moved: the steps alone are drawn
        return
    b = np.unique(np.linspace(1, min(max(bmax, 2), prof.max_batch_tokens), 200).astype(int))
    ax.plot(b, np.asarray(prof.step_time(b)) * 1e3, "k-", lw=1.2, label="profile: table term")
    if prof.kv_read_s_per_token and st is not None and "kv_blocks_used" in st:
        block = (s.get("kv_capacity") or {}).get("block_size", 16)
        kv = float(st.kv_blocks_used.mean()) * block
        ax.plot(b, (np.asarray(prof.step_time(b)) + prof.kv_read_s_per_token * kv) * 1e3, "k--", lw=1,
                label=f"+ KV-read term at {kv:,.0f} tokens")


def _acceptance(plt, log: pd.DataFrame | None, s: dict[str, Any]):
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    if log is not None and len(log) and int(log.verify_len.max()) > 0:
        vl, acc = log.verify_len.to_numpy(int), log.num_accepted.to_numpy(int)
        k = np.arange(1, int(vl.max()) + 1)                                   # (K,) positions
        verified = (vl[:, None] >= k[None, :])                                # (N, K)
        reached = verified & (acc[:, None] >= k[None, :] - 1)                 # position verified and reached
        accepted = verified & (acc[:, None] >= k[None, :])
        cond = accepted.sum(0) / np.maximum(reached.sum(0), 1)
        share = accepted.sum(0) / np.maximum(verified.sum(0), 1)
        ax.plot(k, cond, "o-", label="conditional: accepted / reached")
        ax.plot(k, share, "s--", label="accepted / verified")
        ax.set_ylim(0, 1.02)
        ax.set_xticks(k)
        ax.legend(fontsize=7)
    else:
        _no_data(ax, f"no step log (mean acceptance length {shown(s.get('mean_acceptance_length'))})")
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate")
    ax.grid(alpha=0.3)
    return fig


def _timeline(plt, st: pd.DataFrame | None):
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    if st is not None and len(st):
        ax2 = ax.twinx()
        for rep, sub in st.groupby("replica"):
            t = (sub.start_s + sub.duration_s).to_numpy()
            ax.plot(t, sub.num_running, lw=1, label=f"replica {rep} running")
            ax2.plot(t, sub.kv_blocks_used, lw=1, ls=":", label=f"replica {rep} KV blocks")
        ax2.set_ylabel("KV blocks in use")
        ax.legend(fontsize=7, loc="upper left")
    else:
        _no_data(ax, "no steps recorded")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("running requests")
    ax.grid(alpha=0.3)
    return fig


# -------------------------------------------------------------------------------------------- sweep page
def _sweep_page(d: Path, tiers: tuple[float, ...]) -> tuple[str, str, list[str]]:
    from specsim.analysis.frontier import X, Y, budget_curve, frontiers, sla_table
    from specsim.sweep import load_records, results_frame, seed_spread

    man = _read_json(d / "sweep.json") if (d / "sweep.json").is_file() else {}
    recs = load_records(d)
    ok = [r for r in recs if r["status"] == "ok"]
    if not ok:
        raise SpecsimInputError(str(d), None, "points", "a sweep directory with finished points", "none ok")
    df = results_frame(ok)
    sp = seed_spread(df)
    title = f"specsim sweep: {', '.join(sorted(df.curve.unique()))}"
    parts = [f"<h1>{html.escape(title)}</h1>",
             f'<p class="sub">{len(recs)} points ({len(ok)} ok); {html.escape(str(d))}</p>']
    fr = frontiers(sp)
    rows = []
    for _, r in sp.iterrows():
        rows.append({"curve": r.curve, "mode": r["mode"], "load": r.load, "seeds": r.num_seeds,
                     X: r[f"{X}_mean"], Y: r[f"{Y}_mean"],
                     "mean_verify_tokens_per_request": r["mean_verify_tokens_per_request_mean"],
                     "mean_ttft_ms": r["mean_ttft_ms_mean"]})
    parts.append("<h2>Load points (seed means)</h2>" + _table(rows, list(rows[0]), "points"))
    sla = sla_table(ok, tiers)
    parts.append("<h2>Goodput per SLA tier</h2>" + _table(sla.to_dict("records"), list(sla.columns), "goodput"))
    ft = [{"curve": c, **{f"throughput_at_{t:g}": f.throughput_at(t) for t in tiers}} for c, f in fr.items()]
    parts.append("<h3>Frontier throughput per GPU at each tier</h3>" + _table(ft, list(ft[0]), "frontier-tiers"))
    plt = _plt()
    figs = {"frontier": _sweep_frontier(plt, sp, fr, tiers), "budget": _per_load(plt, budget_curve(ok),
                                                                                   "mean_verify_tokens_per_request"),
            "tps-cdf": _tps_cdf(plt, ok, df), "step-profile": _sweep_profile(plt, man),
            "acceptance": _per_load(plt, seed_spread(df, ["mean_acceptance_length"]), "mean_acceptance_length")}
    parts.append("<h2>Figures</h2>" + "".join(_figure(k, SWEEP_FIGURES[k], f) for k, f in figs.items()))
    prov = {"scenario": man.get("scenario"), "scenario_hash": man.get("scenario_hash"),
            "scenario_source": man.get("scenario_source"), "trace": man.get("trace"),
            "trace_hash": man.get("trace_sha"), **ok[0].get("provenance", {})}
    parts.append(_provenance(prov, man.get("command_line"), {"sweep directory": str(d)}))
    return title, "\n".join(parts), list(figs)


def _sweep_frontier(plt, sp: pd.DataFrame, fr: dict, tiers: tuple[float, ...]):
    from specsim.analysis.frontier import X, Y

    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    cmap = plt.get_cmap("tab10")
    for i, (curve, f) in enumerate(fr.items()):
        sub = sp[sp.curve == curve]
        x, y = sub[f"{X}_mean"].to_numpy(), sub[f"{Y}_mean"].to_numpy()
        xerr = np.abs(np.vstack([x - sub[f"{X}_min"], sub[f"{X}_max"] - x]))
        yerr = np.abs(np.vstack([y - sub[f"{Y}_min"], sub[f"{Y}_max"] - y]))
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", ms=3.5, color=cmap(i % 10), alpha=0.45, lw=0.8)
        ax.plot(f.tps_per_user, f.throughput_per_gpu, "-", color=cmap(i % 10), lw=1.8, label=curve)
    for t in tiers:
        ax.axvline(t, color="0.6", ls=":", lw=1)
    ax.set_xlabel("TPS/user (tok/s, mean over requests)")
    ax.set_ylabel("output throughput per GPU (tok/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _per_load(plt, frame: pd.DataFrame, metric: str):
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    for curve, sub in frame.groupby("curve", sort=True):
        sub = sub.sort_values("load")
        ax.errorbar(sub["load"], sub[f"{metric}_mean"], yerr=sub[f"{metric}_std"], marker="o", ms=3.5, lw=1.5,
                    capsize=2, label=curve)
    if (frame["load"] > 0).all() and frame["load"].nunique() > 1:
        ax.set_xscale("log", base=2)
    ax.set_xlabel("load (concurrency or rate scale)")
    ax.set_ylabel(metric.replace("_", " "))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _tps_cdf(plt, ok: list[dict[str, Any]], df: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
    by_id = {r["id"]: r for r in ok}
    for curve, sub in df.groupby("curve", sort=True):
        top = sub[sub.load == sub.load.max()]
        v = np.sort(np.concatenate([np.asarray(by_id[i]["requests"]["tps_per_user"], float) for i in top.id]))
        if v.size:
            ax.step(v, np.arange(1, v.size + 1) / v.size, where="post", label=f"{curve} @ {top.load.iloc[0]:g}")
    ax.set_xlabel("TPS/user (tok/s)")
    ax.set_ylabel("share of requests")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _sweep_profile(plt, man: dict[str, Any]):
    fig, ax = plt.subplots(figsize=(6.2, 4.0))
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
