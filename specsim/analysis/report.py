"""One self-contained HTML page for a run directory or a sweep directory (``specsim report DIR``).

A **run** directory is what ``specsim run --out DIR`` writes (``summary.json``, ``requests.parquet``,
``steps.parquet``, optionally ``step_log.parquet``); a **sweep** directory what ``specsim sweep --out DIR``
writes (``sweep.json`` and ``points/``). The page is rendered from one jinja2 template
(``specsim/analysis/templates/report.html.j2``) and holds no external reference: figures are matplotlib PNGs
inlined as ``data:`` URIs, except a sweep's frontier, inline SVG whose every point carries its values as an SVG
``<title>`` that the browser shows on hover (:func:`specsim.analysis.plots.svg_with_titles`); the style sheet
is inline, there is no script, so it opens offline.

The first screen answers the question. A sweep page opens with the winner per SLA tier (its throughput per
GPU, its margin over the runner-up and its gain over the baseline; :func:`decision_rows`), then the frontier
figure (:func:`specsim.analysis.plots.frontier_figure`, the one ``specsim plot`` draws); a run page with its
headline numbers. Detail tables follow, their numbers written as the CLI writes them (:mod:`specsim.fmt`),
then the provenance: every curve's acceptance and profile source and every point's trace slice.

Every figure is a ``<figure id="fig-NAME">`` (:data:`RUN_FIGURES`, :data:`SWEEP_FIGURES`); every number taken
from ``summary.json`` sits in a cell ``<td class="num" data-key="KEY" data-value="EXACT">`` (the text as the
CLI prints it, ``data-value`` the full-precision number), so a reader or a test can check it against the file.
"""

from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim import fmt
from specsim.analysis import report_figures as figs
from specsim.analysis.metrics import measured_mask
from specsim.errors import SpecsimInputError
from specsim.analysis.tiers import DEFAULT_TIERS as _DEFAULT_TIERS, TIE_MARGIN, as_tiers, too_close

#: Figures of a run page: id -> caption.
RUN_FIGURES = {
    "latency-cdf": "Latency CDFs of the measured requests (those summary.json counts): TTFT, TPOT and E2EL (ms)",
    "step-profile": "Step time vs batch tokens: simulated steps (with drafting and host overheads) over the "
                    "profile drawn at the KV contexts the steps ran (crosses: each step's own batch and context; "
                    "band: shortest to longest context; line: median)",
    "acceptance": "Acceptance per draft position: conditional rate and share of verified positions accepted",
    "step-timeline": "Running requests and KV blocks in use over simulated time (per replica)",
}
#: Figures of a sweep page: id -> caption (``frontier`` leads the page, under the winners).
SWEEP_FIGURES = {
    "frontier": "Throughput per GPU vs TPS/user: load points (seed mean, min-max bars with two or more seeds) "
                "and each curve's Pareto frontier; dotted lines: the SLA tiers; hover a point for its values",
    "budget": "Verification budget vs load: mean verify tokens per request (seed mean, +- std with two or more "
              "seeds)",
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
               "mean_verify_tokens_per_request", "num_preemptions", "recomputed_tokens", "prefix_cache_hit_rate",
               "steps", "wall_time_s")
#: The run page's headline numbers (first screen).
RUN_HEADLINE = ("output_throughput_per_gpu", "mean_tps_per_user", "mean_ttft_ms", "mean_tpot_ms",
                "mean_acceptance_length", "completed")
#: SLA tiers (TPS/user) of the goodput tables unless given: the one default (specsim.analysis.tiers).
DEFAULT_TIERS = _DEFAULT_TIERS
#: The template the page is rendered from (package data).
TEMPLATE = "report.html.j2"

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:16px auto;max-width:1240px;
color:#1b1b1b;background:#fff;line-height:1.35;padding:0 12px}
h1{font-size:1.35em;margin:0}h2{font-size:1.1em;border-bottom:1px solid #ddd;padding-bottom:3px;margin-top:22px}
h3{font-size:1em}.sub{color:#555;margin:2px 0 8px}.note{font-size:0.82em;color:#555;max-width:60em}
#answer{display:flex;flex-wrap:wrap;gap:18px;align-items:flex-start}#answer h2{margin-top:4px}
#decision,#headline{flex:1 1 340px;max-width:470px}.winner{margin:6px 0;font-size:0.98em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:8px 0;font-size:0.88em}td,th{border:1px solid #ddd;padding:2px 7px}
th{background:#f4f4f4;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
figure{margin:10px 0;display:inline-block;vertical-align:top}figure img{max-width:100%;border:1px solid #eee}
figure.svg svg{max-width:100%;height:auto;border:1px solid #eee}figure.svg use{cursor:help}
figcaption{font-size:0.82em;color:#444;max-width:640px}
pre{background:#f7f7f7;padding:8px;overflow-x:auto;font-size:0.82em;white-space:pre-wrap;word-break:break-all}
"""


def shown(v: Any) -> str:
    """A number in 6 significant digits (``shown(0.712345678) == "0.712346"``), integers whole, ``-`` for None
    or non-finite; anything else as ``str`` (provenance values, figure captions)."""
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


def write_report(src: str | Path, out: str | Path | None = None, tiers: tuple[float, ...] = DEFAULT_TIERS,
                 notes: tuple[str, ...] = ()) -> Report:
    """Write the HTML page of run or sweep directory ``src``.

    Args:
        src: a run directory (``summary.json``) or a sweep directory (``sweep.json`` or ``points/``).
        out: the HTML path (``.html`` added to a name without a suffix); default ``src/report.html``.
        tiers: TPS/user SLA tiers (tok/s) of the winners and the goodput tables (a number, numbers or
            ``"100,150"``: :func:`specsim.analysis.tiers.as_tiers`).
        notes: the page's notes (one string is one note), shown under "Notes" (``specsim report`` passes, for a
            sweep, what compare says of the speculation overhead and acceptance its points were charged:
            :func:`specsim.cli.sweep_notes.sweep_notices`; for a run, the warnings and notices its text
            printed: :func:`specsim.cli.run_cmd.run_notes`).

    Returns:
        The :class:`Report` written.

    Raises:
        SpecsimInputError: ``src`` is neither kind, or its files are unreadable.
    """
    if not isinstance(src, (str, Path)):
        raise SpecsimInputError(None, None, "src", "a run folder (specsim run --out) or a sweep folder (specsim sweep "
                                "--out)", type(src).__name__)
    d = Path(src)
    tiers, notes = as_tiers(tiers), _notes(notes)
    if (d / "summary.json").is_file():
        kind, page = "run", _run_page(d, tiers, notes)
    elif (d / "sweep.json").is_file() or (d / "points").is_dir():
        kind, page = "sweep", _sweep_page(d, tiers, notes)
    else:
        raise SpecsimInputError(str(d), None, None, "a run directory (summary.json from specsim run --out) or a "
                                "sweep directory (sweep.json, points/ from specsim sweep --out)", "neither")
    path = Path(out) if out is not None else d / "report.html"
    if not path.suffix:                            # as the plot functions add .png
        path = path.with_name(path.name + ".html")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(page), encoding="utf-8")
    ids = ([page["lead_figure"]["id"]] if page.get("lead_figure") else []) + [f["id"] for f in page["figures"]]
    return Report(path, kind, tuple(ids))


def render(page: dict[str, Any]) -> str:
    """The HTML of a page context (:data:`TEMPLATE`, jinja2 with autoescape: every text is escaped)."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("specsim.analysis", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True)
    return env.get_template(TEMPLATE).render(css=_CSS, **page)


# ----------------------------------------------------------------------------------------------- pieces
def _cell(v: Any, key: str | None = None, digits: int | None = None, pct: bool = False) -> dict[str, Any]:
    """A table cell: text as the CLI writes it (:mod:`specsim.fmt`), the exact number in ``value``."""
    num = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
    if not num:
        return {"text": fmt.MISSING if v is None else str(v), "num": False, "key": key, "value": None}
    finite = math.isfinite(float(v))
    text = (fmt.percent(v) if pct else fmt.number(v, digits) if digits is not None else fmt.value(v))
    exact = (str(int(v)) if isinstance(v, (int, np.integer)) else repr(float(v))) if finite else None
    return {"text": text, "num": True, "key": key, "value": exact}


def _notes(notes: Any) -> tuple[str, ...]:
    """A page's notes: one string is one note; each kept without a trailing full stop (the page adds it); empty
    ones dropped.

    Raises:
        SpecsimInputError: neither a string nor strings.
    """
    items = (notes,) if isinstance(notes, str) else notes
    try:
        items = tuple(items)
    except TypeError:
        raise SpecsimInputError(None, None, "notes", "a note or notes (strings)", type(notes).__name__) from None
    if not all(isinstance(n, str) for n in items):
        raise SpecsimInputError(None, None, "notes", "notes as strings", repr(notes))
    return tuple(n.strip().rstrip(".") for n in items if n.strip())


def _table(tid: str, cols: list[str], rows: list[list[dict[str, Any]]], heading: str = "", note: str = ""):
    return {"id": tid, "cols": cols, "rows": rows, "heading": heading, "note": note}


def _figure(fid: str, caption: str, fig) -> dict[str, str]:
    """A figure of the page: the matplotlib figure (made by :mod:`specsim.figures`) as an inline PNG."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    return {"id": fid, "caption": caption, "uri": "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()}


def _read_json(p: Path) -> Any:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise SpecsimInputError(str(p), None, None, "a readable JSON file", str(e)) from None


def _provenance_items(prov: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    rows = [[_cell(k), _cell(shown(v))] for k, v in {**extra, **{k: prov.get(k) for k in (
        "specsim_version", "scenario_source", "scenario_hash", "trace", "trace_hash", "profile_source",
        "acceptance_source")}}.items() if v is not None]
    return _table("provenance", ["item", "value"], rows)


# ---------------------------------------------------------------------------------------------- run page
def _run_page(d: Path, tiers: tuple[float, ...], notes: tuple[str, ...] = ()) -> dict[str, Any]:
    s = _read_json(d / "summary.json")
    rq = pd.read_parquet(d / "requests.parquet") if (d / "requests.parquet").is_file() else None
    st = pd.read_parquet(d / "steps.parquet") if (d / "steps.parquet").is_file() else None
    log = pd.read_parquet(d / "step_log.parquet") if (d / "step_log.parquet").is_file() else None
    load = s.get("load", {})
    where = (f"closed loop, {load.get('concurrency')} users" if load.get("mode") == "closed"
             else f"open loop x{load.get('rate_scale')}")
    win = s.get("window") if isinstance(s.get("window"), dict) else None
    shown = win or s                # closed loop: the window's figures, the ones sweeps and compare read
    at = "window." if win is not None else ""      # a cell's data-key names the block its number comes from
    head = [[_cell(k), _cell(shown[k], key=at + k)] for k in RUN_HEADLINE if k in shown]
    sections = [{"title": "Metrics (whole run)", "tables": [_table("metrics", ["metric", "value"],
                                                                  _numbers_rows(s, RUN_METRICS))],
                 "text": (s.get("kv_capacity") or {}).get("describe"), "text_id": "kv-capacity"},
                {"title": "Goodput", "tables": [_run_goodput(s, rq, tiers)],
                 "text": _request_goodput_text(s), "text_id": None}]
    if win is not None:
        sections.insert(0, {"title": "Closed-loop window (the figures sweeps, compare and the headline read)",
                            "tables": [_table("window", ["metric", "value"],
                                              _numbers_rows(win, RUN_METRICS, "window."))],
                            "text": f"from {win.get('start_s', 0):.3f} s, once every user has completed one "
                                    f"request, to {win.get('end_s', 0):.3f} s, when the last is issued; its "
                                    "per-request figures cover the requests that complete inside it",
                            "text_id": "window"})
    if s.get("per_domain"):
        cols = ["requests", "mean_ttft_ms", "mean_tpot_ms", "mean_tps_per_user", "mean_acceptance_length",
                "acceptance_rate"]
        rows = [[_cell(dom)] + [_cell(m.get(c), key=f"per_domain.{dom}.{c}") for c in cols]
                for dom, m in s["per_domain"].items()]
        sections.append({"title": "Per domain", "tables": [_table("per-domain", ["domain", *cols], rows)],
                         "text": None, "text_id": None})
    sections += [{"title": "Notes", "tables": [], "text_id": "notes",
                  "text": " ".join(f"{n[0].upper()}{n[1:]}." for n in notes)}] if notes else []
    made = {"latency-cdf": figs.latency_cdf(rq, s), "step-profile": figs.step_profile(st, s),
            "acceptance": figs.acceptance(log, s), "step-timeline": figs.timeline(st)}
    from specsim.analysis.metrics import horizon_warning, thrashing_warning
    warning = "; ".join(w for w in (horizon_warning(s), thrashing_warning(s)) if w)
    return {"title": f"specsim run: {s.get('policy')} (drafter {s.get('drafter')}, gamma {s.get('gamma')}), "
                     f"seed {s.get('seed')}",
            "subtitle": f"{where}; {d}" + (f" -- {warning}" if warning else ""),
            "decision": None, "lead_figure": None,
            "headline": {"heading": "Headline (closed-loop window)" if win is not None else "Headline (whole run)",
                         "table": _table("headline", ["metric", "value"], head)},
            "sections": sections, "figures": [_figure(k, RUN_FIGURES[k], f) for k, f in made.items()],
            "provenance": [_provenance_items(s.get("provenance", {}), {"run directory": str(d)})],
            "command": s.get("command_line"), "scenario": _scenario_text(s.get("provenance", {}).get("scenario"))}


def _numbers_rows(block: dict[str, Any], first: tuple[str, ...], prefix: str = "") -> list[list[dict[str, Any]]]:
    """(metric, value) rows of every number of a summary block (``summary.json``'s top level or its window):
    the keys of ``first`` in that order, then the other numbers by name; each value cell's key is ``prefix`` +
    the name (``window.`` for the window's)."""
    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    keys = [k for k in first if number(block.get(k))]
    keys += sorted(k for k, v in block.items() if number(v) and k not in keys)
    return [[_cell(k), _cell(block[k], key=prefix + k)] for k in keys]


def _scenario_text(scen: Any) -> str:
    return json.dumps(scen, indent=1, default=str) if scen else ""


def _request_goodput_text(s: dict[str, Any]) -> str | None:
    if "request_goodput" not in s:
        return None
    return f"request_goodput (vLLM's meaning: good requests per second): {fmt.value(s['request_goodput'])}"


def _run_goodput(s: dict[str, Any], rq: pd.DataFrame | None, tiers: tuple[float, ...]) -> dict[str, Any]:
    """SLA attainment and goodput per TPS/user tier over the measured multi-token requests (specsim.analysis.frontier's
    rule: goodput = throughput per GPU x output tokens of requests meeting the tier / all their tokens; in closed
    loop the window's throughput, as the requests are the window's)."""
    cols = ["tier (tok/s/user)", "attainment", "goodput (tok/s/GPU)"]
    if rq is None:
        return _table("goodput", cols, [], note="requests.parquet missing: no tier table")
    meas = measured_mask(rq, s) & (rq.output_tokens > 1)
    tps, out = rq.tps_per_user[meas].to_numpy(float), rq.output_tokens[meas].to_numpy(float)
    from specsim.analysis.sweep_tables import scoped

    thr = scoped(s, (s.get("load") or {}).get("mode") == "closed", "output_throughput_per_gpu")   # the window's
    rows = []
    for t in tiers:
        ok = tps >= t
        rows.append([_cell(float(t), digits=0), _cell(float(ok.mean()) if tps.size else None, pct=True),
                     _cell(float(thr * out[ok].sum() / out.sum()) if out.sum() and thr else None, digits=1)])
    return _table("goodput", cols, rows)


# -------------------------------------------------------------------------------------------- sweep page
def decision_rows(tab: pd.DataFrame) -> list[dict[str, Any]]:
    """Per tier, the answer: winner, its throughput per GPU, its margin over the runner-up, its gain over the
    baseline (a :func:`specsim.analysis.frontier.compare` table in; one dict per tier out).

    The seam with the winner rule: when the table carries the winner columns of the policies issue
    (``winner``, ``runner_up``, ``margin``, ``margin_verdict``: ``specsim.analysis.tiers.mark_winners``) they are
    shown as they are. Without them the row with the largest throughput per GPU among the ``ok`` rows of
    curves other than ``oracle`` is shown, with its plain lead over the next one and no verdict.

    Returns:
        Dicts with ``tier``, ``curve`` (None when no curve reaches the tier), ``throughput_per_gpu``,
        ``runner_up``, ``margin``, ``verdict``, ``gain_vs_baseline``, ``status``, ``caution`` (the flagged
        points the winner is read from, :func:`specsim.analysis.sweep_tables.winner_cautions`; ``""``: none),
        ``tied_with`` (the curves in an exact tie with it, ``mark_winners``' rule; ``""``: none), ``attainment`` (the
        caution where its point meets the tier by the mean alone:
        :func:`specsim.analysis.tier_notes.attainment_caution`, the sentence ``recommend`` prints; ``""``: none),
        ``runner_up_caution`` and ``baseline_caution`` (the flagged points the runner-up's and the baseline's
        figures are read from: :func:`specsim.analysis.sweep_tables.reference_cautions`; ``""``: none),
        ``tied_cautions`` (in an exact tie, ``{curve: caution}`` of every tied curve, the winner row's included;
        ``{}`` without a tie).
    """
    from specsim.analysis.tier_notes import attainment_caution

    found, out = tab.attrs.get("attainment") or {}, []
    for tier, rows in tab.groupby("tier", sort=True):
        if "winner" in rows:
            won = rows[rows.winner.astype(bool)]
            w = won.iloc[0] if len(won) else None
            ru, margin = (w.runner_up or None, w.margin) if w is not None else (None, math.nan)
            verdict = w.margin_verdict if w is not None else ""
        else:                           # fallback until the winner columns exist: rank by throughput only
            ok = rows[(rows.status == "ok") & (rows.curve.str.split(" ").str[0] != "oracle")]
            ok = ok.sort_values("throughput_per_gpu", ascending=False, kind="stable")
            w = ok.iloc[0] if len(ok) else None
            ru = ok.iloc[1].curve if len(ok) > 1 else None
            margin = ok.iloc[0].throughput_per_gpu / ok.iloc[1].throughput_per_gpu - 1 if len(ok) > 1 else math.nan
            verdict = ""
        statuses = ", ".join(sorted(set(rows.status) - {"ok"}))
        out.append({"tier": float(tier), "curve": None if w is None else w.curve,
                    "throughput_per_gpu": math.nan if w is None else float(w.throughput_per_gpu),
                    "runner_up": ru, "margin": float(margin), "verdict": verdict,
                    "gain_vs_baseline": math.nan if w is None else float(w.gain_vs_baseline),
                    "status": "ok" if w is not None else (statuses or "no point"),
                    "caution": str(w.get("caution", "") or "") if w is not None else "",
                    "attainment": attainment_caution(found.get(float(tier)), see="the goodput table below gives "
                                                     "each curve's best goodput") if w is not None else "",
                    "runner_up_caution": str(w.get("runner_up_caution", "") or "") if w is not None else "",
                    "baseline_caution": str(w.get("baseline_caution", "") or "") if w is not None else "",
                    "tied_with": w.get("tied_with") if w is not None and isinstance(w.get("tied_with"), str) else "",
                    "tied_cautions": _tied_cautions(rows, w)})
    return out


def _decision(tab: pd.DataFrame) -> dict[str, Any]:
    from specsim.analysis.significance import SEEDS_SCOPE, TRAFFIC_TEST, with_seeds_scope

    base = tab.attrs.get("baseline")
    rows = []
    for r in decision_rows(tab):
        start = f"At {r['tier']:g} tok/s/user:"
        if r["curve"] is None:
            rows.append({"tier": f"{r['tier']:g}", "line_start": start, "curve": "no winner",
                         "line_end": f" (every curve: {r['status']})"})
            continue
        end, curve = f", {fmt.number(r['throughput_per_gpu'], 0)} tok/s/GPU", r["curve"]
        if r["tied_with"]:                      # an exact tie: every tied curve named, none crowned
            curve = f"{r['curve']} and {r['tied_with']}"
            end = f" tie at {fmt.number(r['throughput_per_gpu'], 0)} tok/s/GPU each (equal throughput at the tier)"
        elif r["runner_up"]:
            if too_close(r["margin"], r["verdict"]):        # recommend's tie: neither is crowned (tiers.too_close)
                curve = f"{r['curve']} or {r['runner_up']}"
                end = (f", too close to call: {r['curve']}'s {fmt.number(r['throughput_per_gpu'], 0)} tok/s/GPU is "
                       f"{fmt.percent(r['margin'], signed=True)} over {r['runner_up']}")
            else:
                end += f", {fmt.percent(r['margin'], signed=True)} over {r['runner_up']}"
            end += ", the baseline" if r["runner_up"] == base else ""
            end += f" ({with_seeds_scope(r['verdict'], test=False)})" if r["verdict"] else ""
        if base and r["curve"] != base and r["runner_up"] != base and math.isfinite(r["gain_vs_baseline"]):
            end += f", {fmt.percent(r['gain_vs_baseline'], signed=True)} over the baseline {base}"
        elif base and r["curve"] == base:
            end += " (the baseline)"
        care = _care(r, base)
        end += f"; read with care: {care}, see the warnings below" if care else ""
        end += f"; caution: {r['attainment']}" if r["attainment"] else ""
        rows.append({"tier": f"{r['tier']:g}", "line_start": start, "curve": curve, "line_end": end})
    return {"heading": "The answer per SLA tier", "rows": rows,
            "note": "Throughput per GPU on each curve's Pareto frontier at the tier (linear between load points). "
                    "Margin: the winner's lead over the runner-up, tested by a paired t-test over seeds "
                    f"({SEEDS_SCOPE}: {TRAFFIC_TEST}); too close to call: a lead under {TIE_MARGIN:.0%} that no "
                    "such test upholds, which recommend calls a tie; gain: over the baseline. infeasible: the "
                    "frontier never reaches the tier; covered: every point of the curve's Pareto frontier beats "
                    "the tier, the best point meeting it is shown."}


def _tied_cautions(rows: pd.DataFrame, w) -> dict[str, str]:
    """``{curve: caution}`` of each curve of a tier's exact tie (the winner row ``w``'s and those of its
    ``tied_with``, :func:`specsim.analysis.tiers.answer_curves`), ``{}`` without a tie or a ``caution`` column."""
    from specsim.analysis.tiers import answer_curves

    if w is None or "caution" not in rows or len(names := answer_curves(w)) < 2:
        return {}
    said = dict(zip(rows.curve, rows.caution))
    return {c: str(said.get(c) or "") for c in names}


def _care(r: dict[str, Any], base: str | None) -> str:
    """The answer line's "read with care" words: the flagged points that its figure (in a tie, each tied curve's;
    where the lead is too close to call, the leader's, by name) and the runner-up's or baseline's figure its lead
    divides by are read from (:func:`decision_rows`' ``caution``, ``tied_cautions``, ``runner_up_caution``,
    ``baseline_caution``), each set of points said once; "" where none."""
    tied = r.get("tied_cautions") or {}
    said: dict[str, list[str]] = {}
    it = r["curve"] if too_close(r["margin"], r["verdict"]) else "it"      # "dspark or static": "it" names neither
    for name, text in (tied.items() if tied else [(it, r["caution"])]):
        if text:
            said.setdefault(text, []).append(name if name == "it" else f"{name}'s")
    for text, who in said.items():                    # "aaa-twin's and dspark's figures", one list item
        if who[0] != "it":
            said[text] = [f"{fmt.and_list(who)} figure{'s' if len(who) > 1 else ''}"]
    refs: dict[str, list[str]] = {}
    for key, ref in (("runner_up_caution", None if tied else r["runner_up"]), ("baseline_caution", base)):
        if r.get(key) and ref and ref not in tied:
            refs.setdefault(ref, []).append(key)
    for ref, keys in refs.items():
        lead = "the lead" if "runner_up_caution" in keys else "the gain"
        said.setdefault(r[keys[0]], []).append(f"{lead} over {ref}")
    parts = []
    for points, who in said.items():
        if len(who) > 1 or who[0].endswith("figures"):
            parts.append(f"{fmt.and_list(who)} rest on their points at {points}")
        elif who[0] == "it":
            parts.append(f"it comes from its point at {points}")
        elif who[0].endswith("'s figure"):
            parts.append(f"{who[0]} comes from its point at {points}")
        else:
            ref = who[0].split(" over ", 1)[1]
            parts.append(f"{who[0]} divides by {ref}'s point at {points}")
    return ", and ".join(parts)


def _compare_table(tab: pd.DataFrame, titles: dict[str, str]) -> dict[str, Any]:
    cols = ["tier", "curve", "status", "tok/s/GPU", "+-std", "seeds", "gain", "TPS@match"]
    rows = [[_cell(f"{r.tier:g}"), _cell(titles.get(r.curve, r.curve)), _cell(r.status), _cell(r.throughput_per_gpu, digits=0),
             _cell(r.throughput_std if r.num_seeds > 1 else None, digits=0), _cell(int(r.num_seeds)),
             _cell(r.gain_vs_baseline, pct=True), _cell(r.tps_at_matched_throughput, digits=1)]
            for _, r in tab.iterrows()]
    return _table("frontier-tiers", cols, rows, note=f"baseline: {tab.attrs.get('baseline') or 'none'}; "
                  "status says why a tier has no throughput (infeasible) or reads its best point (covered); gain is '-' "
                  "where the baseline has no throughput at the tier, TPS@match also where the baseline's throughput "
                  "lies outside this curve's frontier.")


def _tuned_section(tuned: list[dict[str, Any]]) -> dict[str, Any]:
    """The results of ``specsim tune`` in the folder, per tier (compare's "tuned" rows): the knob value picked and
    its throughput; its sparse probes are not curves of the page."""
    rows = [[_cell(t["spec"]["policy"]), _cell(f"{r['tier']:g}"), _cell(r.get("status")),
             _cell(f"{t['spec']['knob']['name']}={r['value']:g}" if r.get("value") is not None else None),
             _cell(r.get("throughput_per_gpu"), digits=1)] for t in tuned for r in t.get("tiers", [])]
    return {"title": "Tuned (specsim tune)", "text_id": "tuned", "text": (
        "The knob values specsim tune picked per tier in this folder. A tune samples the knob sparsely, so its "
        "points are not curves above; sweep the value you pick to compare it."), "tables": [_table(
            "tuned", ["policy", "tier", "status", "pick", "tok/s/GPU at the tier"], rows)]}


def _failed_text(failed: list[dict[str, Any]]) -> str:
    """The sweep page's warning naming the failed points and their errors (a fresh user's page said only "9
    points (8 ok)"), as compare says it on stderr; "" when none failed."""
    import textwrap

    if not failed:
        return ""
    shown = "; ".join(f"{c['policy']} at {c['load']['mode']} load {c['load']['value']:g}, seed {c['seed']}: "
                      f"{textwrap.shorten(str(r.get('error') or r.get('error_type')), 160)}"
                      for r, c in ((r, r["config"]) for r in failed[:5]))
    more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
    return (f"{len(failed)} points failed and are left out, so their curves' frontiers miss those loads: "
            f"{shown}{more}.")


def _sweep_page(d: Path, tiers: tuple[float, ...], notes: tuple[str, ...] = ()) -> dict[str, Any]:
    from specsim.analysis.frontier import X, Y, budget_curve, compare, sla_table
    from specsim.analysis.tuned import read_tuned
    from specsim.analysis.plots import frontier_figure, svg_with_titles, swept_title, tps_estimator
    from specsim.analysis.results import measured_for_plot, other_model_note
    from specsim.analysis.sweep_records import load_records, mixed_workloads
    from specsim.analysis.sweep_tables import (CAUTION_TITLES, cautions, curve_titles, gpu_split, per_all_gpus_note,
                                               results_frame, seed_spread)

    man = _read_json(d / "sweep.json") if (d / "sweep.json").is_file() else {}
    recs, tuned = read_tuned(d, load_records(d))    # a tune's sparse probes are not curves, as compare reads them
    ok = [r for r in recs if r["status"] == "ok"]
    if not ok:
        raise SpecsimInputError(str(d), None, "points", "a sweep directory with finished points", "none ok")
    df = results_frame(ok)
    sp, titles = seed_spread(df), curve_titles(df)
    base = "mtp1" if (df.policy == "mtp1").any() else None
    tab = compare(ok, tiers, base)
    points = [[_cell(titles.get(r.curve, r.curve)), _cell(r["mode"]), _cell(f"{r.load:g}"), _cell(int(r.num_seeds)),
               _cell(r[f"{X}_mean"], digits=1), _cell(r[f"{Y}_mean"], digits=1),
               _cell(r["mean_verify_tokens_per_request_mean"], digits=2), _cell(r["mean_ttft_ms_mean"], digits=1)]
              for _, r in sp.iterrows()]
    sla = sla_table(ok, tiers)
    goodput = [[_cell(f"{r.tier:g}"), _cell(titles.get(r.curve, r.curve)), _cell(f"{r.load:g}"), _cell(r.attainment, pct=True),
                _cell(r.goodput_per_gpu, digits=1)] for _, r in sla.iterrows()]
    mixed = mixed_workloads(ok)
    sections = [{"title": "Warning: curves measured on different requests", "tables": [], "text_id": "mixed",
                 "text": f"{mixed[0].upper()}{mixed[1:]}: their throughputs are not comparable."}] if mixed else []
    gpus = per_all_gpus_note(gpu_split(ok))          # the factor compare and recommend state
    notes = (*notes, *([f"tok/s/GPU is per decode GPU. {gpus[:-1]}"] if gpus else []))
    measured = measured_for_plot([d])
    other = other_model_note(measured, d)           # what specsim plot warns of, on the page too
    if tps_estimator(measured) != "per-request":
        notes = (*notes, "the measured points give only their mean TPOT, so the frontier figure's x-axis is "
                         "1000 / mean TPOT for every curve (as specsim plot draws it), while the tables read each "
                         "request's own TPS/user: a point's x in the figure differs from its table value")
    notes = (*notes, *([other] if other else []))
    sections += [{"title": "Notes", "tables": [], "text_id": "notes",
                  "text": " ".join(f"{n[0].upper()}{n[1:]}." for n in notes)}] if notes else []
    sections += [_tuned_section(tuned)] if tuned else []
    sections += [{"title": f"Warning: {CAUTION_TITLES[kind]}", "tables": [], "text_id": kind,
                  "text": f"{text[0].upper()}{text[1:]}."} for kind, text in cautions(df)]    # as sweep and compare
    failed = _failed_text([r for r in recs if r["status"] != "ok"])
    sections += [{"title": "Warning: failed points", "tables": [], "text_id": "failed", "text": failed}] if failed \
        else []
    sections += [{"title": "Throughput per GPU at each tier", "tables": [_compare_table(tab, titles)], "text": None,
                  "text_id": None},
                 {"title": "Load points (seed means)", "text": None, "text_id": None, "tables": [_table(
                     "points", ["curve", "mode", "load", "seeds", X, Y, "mean_verify_tokens_per_request",
                                "mean_ttft_ms"], points)]},
                 {"title": "Goodput per SLA tier", "text": None, "text_id": None, "tables": [_table(
                     "goodput", ["tier", "curve", "load", "attainment", "goodput (tok/s/GPU)"], goodput)]}]
    hover: dict[str, list[str]] = {}
    fig = frontier_figure([(d.name, ok)], tiers, measured, width_in=7.0, height_in=4.2, hover=hover)
    lead = {"id": "frontier", "caption": SWEEP_FIGURES["frontier"], "svg": svg_with_titles(fig, hover)}
    made = {"budget": figs.per_load(budget_curve(ok), "mean_verify_tokens_per_request"),
            "tps-cdf": figs.tps_cdf(ok, df), "step-profile": figs.sweep_profile(man),
            "acceptance": figs.per_load(seed_spread(df, ["mean_acceptance_length"]), "mean_acceptance_length")}
    prov = {"scenario": man.get("scenario"), "scenario_hash": man.get("scenario_hash"),
            "scenario_source": man.get("scenario_source"), "trace": man.get("trace"), "trace_hash": man.get("trace_sha"),
            "specsim_version": ok[0].get("provenance", {}).get("specsim_version")}
    return {"title": f"specsim sweep: {swept_title(d.name, ok)}", "subtitle": f"{len(recs)} points ({len(ok)} ok); {d}",
            "decision": _decision(tab), "headline": None, "lead_figure": lead, "sections": sections,
            "figures": [_figure(k, SWEEP_FIGURES[k], f) for k, f in made.items()],
            "provenance": [_provenance_items(prov, {"sweep directory": str(d)}), *_sweep_sources(ok)],
            "command": man.get("command_line"), "scenario": _scenario_text(man.get("scenario"))}


def _sweep_sources(ok: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Provenance of every curve (acceptance and profile sources) and of every point (its trace slice)."""
    from specsim.analysis.sweep_tables import results_frame

    df = results_frame(ok).set_index("id")
    by_curve: dict[str, set[tuple[str, str]]] = {}
    points = []
    for r in sorted(ok, key=lambda r: (df.curve[r["id"]], df.load[r["id"]], df.seed[r["id"]])):
        pv, cfg = r.get("provenance") or {}, r["config"]
        acc = pv.get("acceptance_source")           # None: a curve that drafts nothing (none) read "none None"
        by_curve.setdefault(df.curve[r["id"]], set()).add((str(acc) if acc is not None else
                                                           "- (no speculation: nothing drafted to accept)",
                                                           str(pv.get("profile_source"))))
        points.append([_cell(r["id"]), _cell(df.curve[r["id"]]), _cell(f"{df.load[r['id']]:g}"),
                       _cell(int(cfg["seed"])), _cell(f"first {cfg['num_requests']} requests of "
                                                      f"{pv.get('trace', '?')} (sha {cfg['trace_sha'][:12]})")])
    curves = [[_cell(c), _cell(a), _cell(p)] for c, srcs in sorted(by_curve.items()) for a, p in sorted(srcs)]
    return [_table("curve-sources", ["curve", "acceptance source", "profile source"], curves,
                   heading="Sources per curve"),
            _table("point-sources", ["point", "curve", "load", "seed", "trace slice"], points,
                   heading="Every point's trace slice")]
