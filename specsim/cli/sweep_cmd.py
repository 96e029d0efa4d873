"""``specsim sweep``, ``specsim compare``, ``specsim plot``: load sweeps, SLA-tier tables, figures.

The command line's side of sweeps lives here: parsing comma lists (``1,2,4,...,256``) and the tables; the
progress bar is :class:`specsim.progress.ProgressBar`, fed by the library's progress callback. Top-level
imports stay light (typer and the standard library; specsim.errors is imported with the package anyway): the library, rich and pandas are
imported inside the commands, so ``specsim --help`` does not pay for them.
"""

from __future__ import annotations

import json
import re
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from specsim import fmt
from specsim.cli import EXIT_INTERRUPTED, app, interrupted
from specsim.cli.sweep_notes import (check_closed_points, check_thresholds, folder_records, note_closed_loads,
                                     note_gammas, note_more_requests_than_trace, note_point_requests,
                                     note_unit_warnings, note_whole_trace_folder, print_speculation_notes,
                                     warn_mixed_folder)
from specsim.errors import SpecsimInputError


_PCT_HELP = ("Latency percentiles, as vllm bench serve: '50,90,99' (TTFT, TPOT, E2EL per load point; in the "
             "tables and --csv, and compare's --json).")
_GOODPUT_HELP = ("Request goodput limits in ms, as vllm bench serve: 'ttft:200 tpot:50 e2el:3000' (quoted, unquoted "
                 "as vLLM takes it, or the option repeated); a request is good when every given limit holds; "
                 "request_goodput = good requests/s.")


# --------------------------------------------------------------------------------------------- lists
def parse_list(text: str, kind: type = float, flag: str = "list") -> list:
    """Parse ``"1,2,4,...,256"``: comma-separated values; ``...`` continues the progression up to the value after it.

    Rule: with three or more values before ``...`` the last three say which progression it is (equal
    ratios: geometric, equal differences: arithmetic). With two values a, b the progression must reach the
    end exactly: geometric (ratio b/a) when it does, else arithmetic (step b - a) when it does; when
    both do (1,2,...,8) geometric wins, since sweeps double load points. 1,2,4,...,256 gives the powers
    of two; 10,20,...,50 gives 10,20,30,40,50.

    Args:
        text: the flag's value.
        kind: the value type (``int`` or ``float``).
        flag: the flag's name without dashes, for the error.

    Raises:
        SpecsimInputError: a value that does not parse, an empty item (``100,,200``), ``...`` without two
            values before it and one after, or a progression that does not reach the end value exactly.
    """
    def bad() -> SpecsimInputError:
        return SpecsimInputError(f"--{flag}", None, flag,
                                 f"comma-separated {kind.__name__} values (a,b,...,z continues a progression "
                                 "that reaches z exactly)", repr(text))

    def value(part: str):
        try:
            return kind(part)
        except ValueError:
            raise bad() from None

    parts = [p.strip() for p in text.split(",")]
    if not all(parts):                  # "100,,200": an empty item is a typo, not a value to drop
        raise bad()
    out: list = []
    i = 0
    while i < len(parts):
        if parts[i] != "...":
            out.append(value(parts[i]))
            i += 1
            continue
        if len(out) < 2 or i + 1 >= len(parts):
            raise bad()
        seq = _continue(out, value(parts[i + 1]))
        if seq is None:
            raise bad()
        out.extend(kind(x) for x in seq)
        i += 2
    return out


def _continue(out: list, end: float) -> list[float] | None:
    """The values after ``out[-1]`` up to ``end`` by the progression ``out`` ends with (parse_list's rule)."""
    a, b = out[-2], out[-1]
    geo = _progression(b, end, lambda x: x * (b / a)) if a > 0 and b > a else None
    ari = _progression(b, end, lambda x: x + (b - a)) if b > a else None
    if len(out) < 3:
        return geo if geo is not None else ari
    z = out[-3]
    if z > 0 and a * a == z * b:
        return geo
    return ari if a - z == b - a else None


def _progression(start: float, end: float, step: Callable[[float], float]) -> list[float] | None:
    """Values after ``start`` up to ``end`` by ``step``; None unless ``end`` is hit (within 1e-9 relative)."""
    seq, x = [], start
    while len(seq) < 100000:
        x = step(x)
        if x > end * (1 + 1e-9):
            return None
        seq.append(end if abs(x - end) <= 1e-9 * abs(end) else x)
        if seq[-1] == end:
            return seq
    return None


# --------------------------------------------------------------------------------------------- sweep
def _spec(policies: str, concurrency: str | None, rate_scales: str | None, seeds: int, base_seed: int,
          gamma: str | None, threshold: str | None, **rest: Any):
    """The :class:`specsim.sweep.SweepSpec` of the command's flags (``rest``: the other spec fields)."""
    from specsim.sweep import SweepSpec

    if seeds < 1:
        raise SpecsimInputError("--seeds", None, "seeds", "the number of seeds per point, an int >= 1", str(seeds))
    return SweepSpec(
        policies=tuple(p.strip() for p in policies.split(",") if p.strip()),
        concurrency=tuple(parse_list(concurrency, int, "concurrency")) if concurrency else (),
        rate_scales=tuple(parse_list(rate_scales, float, "rate-scales")) if rate_scales else (),
        seeds=tuple(range(base_seed, base_seed + seeds)),
        gammas=tuple(parse_list(gamma, int, "gamma")) if gamma else (None,),
        thresholds=tuple(parse_list(threshold, float, "threshold")) if threshold else (None,), **rest)


@app.command()
def sweep(
    trace: Path = typer.Option(..., "--trace", help="Request trace (canonical JSONL)."),
    out: Path = typer.Option(..., "--out", help="Results directory (sweep.json + points/*.json)."),
    policies: str = typer.Option("mtp1,static,specdecpp,dspark,dspark-async", "--policies",
                                 help="Comma-separated policy names or path/file.py:Name."),
    concurrency: Optional[str] = typer.Option(None, "--concurrency",
                                              help="Closed-loop users, e.g. 1,2,4,...,256, or auto (found per "
                                                   "policy so that every --tiers tier is bracketed)."),
    rate_scales: Optional[str] = typer.Option(None, "--rate-scales", help="Open-loop rate scales, e.g. 0.5,1,2, "
                                              "or auto."),
    tiers: Optional[str] = typer.Option(None, "--tiers", help="SLA tiers (TPS/user) stored with the sweep for "
                                        "compare, report, plot and recommend, and with auto the tiers to bracket "
                                        "(default: 50,100,150,200)."),
    max_load: Optional[float] = typer.Option(None, "--max-load", help="With auto: the load cap (default 4096 "
                                             "users, or rate scales within x1024 of 1)."),
    seeds: int = typer.Option(1, "--seeds", help="Number of seeds per point (base-seed .. base-seed+N-1)."),
    base_seed: int = typer.Option(0, "--base-seed", help="First seed."),
    gamma: Optional[str] = typer.Option(None, "--gamma", help="Gamma values to sweep, e.g. 3,5,7."),
    threshold: Optional[str] = typer.Option(None, "--threshold", help="specdecpp thresholds to sweep."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario TOML (default: bundled)."),
    set_: list[str] = typer.Option([], "--set", help="Override: section.key=value (repeatable)."),
    drafter: Optional[str] = typer.Option(None, "--drafter", help="Override the scenario's drafter."),
    num_requests: Optional[int] = typer.Option(None, "--num-requests", help="Each point runs the trace's first N "
                                               "requests (default: all; see --requests-per-user)."),
    requests_per_user: Optional[int] = typer.Option(
        None, "--requests-per-user", help="Closed loop: a point at C users runs the trace's first K x C requests "
        "(with --num-requests N: max(N, K x C); never more than the trace), so that a measuring window opens (8 on "
        "traces/prod.jsonl; too few fail the point: docs/sweeps.md). Without it a point runs N, or the whole trace."),
    max_sim_s: Optional[float] = typer.Option(None, "--max-sim-s", help="Stop each run at this simulated time."),
    executor: str = typer.Option("process", "--executor", help="serial, process, ray or dask."),
    jobs: Optional[int] = typer.Option(None, "--jobs", min=1, help="Parallel workers (default: CPU count)."),
    address: Optional[str] = typer.Option(None, "--address", help="ray/dask scheduler address."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Recompute points that failed before."),
    force: bool = typer.Option(False, "--force", help="Recompute every point."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar or table."),
    goodput: list[str] = typer.Option([], "--goodput", help=_GOODPUT_HELP),
    metric_percentiles: Optional[str] = typer.Option(None, "--metric-percentiles", help=_PCT_HELP),
    csv: bool = typer.Option(False, "--csv", help="Also write <out>/results.csv (one row per point, with the "
                             "--metric-percentiles columns) and <out>/load_percentiles.csv."),
) -> None:
    """Run every (policy, knobs, load, seed) point; finished points are kept and skipped on re-runs.

    --concurrency and --rate-scales may be given together (closed- and open-loop points in one sweep);
    --requests-per-user needs --concurrency. Exits 1 when every point failed (each is recorded with its error).
    """
    from specsim.analysis.metrics import parse_goodput, parse_percentiles
    from specsim.scenario import load_scenario
    from specsim.sweep import load_records, results_frame, run_sweep
    from specsim.workload import load_trace

    if requests_per_user is not None and not concurrency:
        raise SpecsimInputError("--requests-per-user", None, None, "--requests-per-user with --concurrency (it "
                                "applies to closed-loop points only)", f"--requests-per-user {requests_per_user} "
                                "without --concurrency")
    slos = parse_goodput(goodput)
    pcts = parse_percentiles(metric_percentiles)
    auto = _auto_mode(concurrency, rate_scales)
    from specsim.analysis.tiers import DEFAULT_TIERS

    tier_list = tuple(parse_tiers(tiers)) if tiers else DEFAULT_TIERS
    spec = _spec(policies, "1" if auto == "closed" else concurrency, "1" if auto == "open" else rate_scales, seeds,
                 base_seed, gamma, threshold, num_requests=num_requests, requests_per_user=requests_per_user,
                 max_sim_s=max_sim_s, drafter=drafter)
    scen = load_scenario(scenario, set_)
    note_unit_warnings(scen)                             # once for the whole sweep, not per point
    tr = load_trace(trace)
    from specsim.policies import policy_knobs

    takes_threshold = [name for name in spec.policies   # an unknown name or a broken plug-in fails before --out
                       if "threshold" in policy_knobs(name)]
    note_gammas(spec.policies, [g for g in spec.gammas if g is not None])
    check_thresholds(spec.policies, takes_threshold, [t for t in spec.thresholds if t is not None])
    from specsim.sweep.executors import get_executor

    get_executor(executor)                               # a bad --executor fails before --out is created
    check_closed_points(num_requests, requests_per_user, () if auto else spec.concurrency, spec.rate_scales, trace, tr)
    run_kw = dict(executor=executor, jobs=jobs, address=address, retry_failed=retry_failed, force=force)
    from specsim.cli.outputs import output_dir
    note = output_dir(out, "--out")
    _check_folder(out, spec, scen, tr, auto)             # a refusal stands alone, before the notes on the points
    if note:
        print(fmt.wrapped(f"note: {note}"), file=sys.stderr)
    note_more_requests_than_trace(num_requests, trace, len(tr))
    note_point_requests(num_requests, requests_per_user, spec.concurrency, spec.rate_scales, trace, len(tr), auto)
    note_closed_loads(tr, trace, () if auto else spec.concurrency, scen, num_requests, requests_per_user)
    note_whole_trace_folder(out, requests_per_user, num_requests, tr)
    from specsim.progress import ProgressBar
    with resumable(Path(out), "sweep"), ProgressBar("sweep", "points", enabled=not quiet) as bar:
        if auto:
            ids = _run_auto(spec, auto, tier_list, max_load, scen, tr, out, run_kw, bar, quiet)
        else:
            res = run_sweep(spec, scen, tr, out, progress=bar, tiers=tier_list, **run_kw)
            ids = [p.id for p in res.points]
    from specsim.progress import record_command_line
    record_command_line(Path(out) / "sweep.json")
    if not auto:
        print(fmt.wrapped(f"{len(res.points)} points: {res.computed} computed"
                          + (f" ({len(res.failed)} of them failed)" if res.failed else "")
                          + f", {res.skipped} already done"
                          + (f", {res.recomputed_bad} cut-off records recomputed" if res.recomputed_bad else "")
                          + f"; {res.wall_time_s:.1f} s; records written to {out / 'points'}"))
    recs = load_records(out, ids)
    warn_mixed_folder(Path(out))
    df = results_frame(recs)
    if csv:
        _write_sweep_csv(recs, df, Path(out), pcts)
    if not quiet:
        texts = [spread_text(df), failed_text(df), caution_text(df), goodput_text(recs, slos) if slos else "",
                 percentile_text(recs, df, pcts) if metric_percentiles else ""]
        for text in texts:
            if text:
                print(text)
        print_speculation_notes(recs)
    if recs and all(r["status"] != "ok" for r in recs):
        where = f"in {out / 'points'}" if quiet else f"above and in {out / 'points'}"
        print(f"specsim: error: every one of the sweep's {len(recs)} points failed (their errors are {where}; "
              f"specsim compare {out} names them)", file=sys.stderr)
        raise typer.Exit(1)


def _check_folder(out: Path, spec, scen, tr, auto: str | None) -> None:
    """The refusals of :func:`specsim.sweep.run_sweep` for ``--out`` (another scenario; points of another trace
    left beside this sweep's: :mod:`specsim.sweep.store`), made before the command's notes on its points, so that a
    refusal is its one line (an auto search's points are not known yet: its rounds check the trace as they run)."""
    from specsim.sweep.spec import expand_points
    from specsim.sweep.store import check_same_scenario, check_same_trace

    check_same_scenario(out, scen)
    if not auto:
        check_same_trace(out, expand_points(spec, scen, tr), tr)


@contextmanager
def resumable(out: Path, what: str):
    """Ctrl-C inside (a KeyboardInterrupt, or numba's SystemError from inside a compiled kernel) ends the command
    with status 130 and one line: how many point records this ``what`` (sweep, tune) finished, kept in
    ``out/points``, and that the same command resumes (a fresh user's interrupted sweep said nothing); a pool
    worker that died (its pool broken) ends it with status 1 and the same line, not a traceback."""
    from concurrent.futures.process import BrokenProcessPool

    before = set((out / "points").glob("*.json"))

    def kept() -> str:
        new = len(set((out / "points").glob("*.json")) - before)
        return (f"the {new} point record{'s' if new != 1 else ''} this {what} finished {'are' if new != 1 else 'is'} "
                f"kept in {out / 'points'}; the same command again resumes (finished points are skipped)")
    try:
        yield
    except (KeyboardInterrupt, SystemError) as e:
        if not interrupted(e):
            raise
        print(fmt.wrapped(f"interrupted: {kept()}"), file=sys.stderr)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except BrokenProcessPool:        # a worker killed (out of memory, a signal to the group the parent ignored)
        print(fmt.wrapped(f"error: a worker process of the {what} ended abruptly (killed, or out of memory: fewer "
                          f"--jobs use less); {kept()}"), file=sys.stderr)
        raise typer.Exit(1) from None


def _auto_mode(concurrency: str | None, rate_scales: str | None) -> str | None:
    """``closed`` / ``open`` when that load axis is ``auto`` (the other one must then be absent), else None."""
    c_auto, r_auto = concurrency == "auto", rate_scales == "auto"
    if (c_auto and rate_scales) or (r_auto and concurrency):
        raise SpecsimInputError("--concurrency" if c_auto else "--rate-scales", None, None,
                                "auto for one load axis, without the other axis", f"--concurrency {concurrency} "
                                f"--rate-scales {rate_scales}")
    return "closed" if c_auto else "open" if r_auto else None


def _run_auto(spec, mode: str, tier_list: tuple[float, ...], max_load: float | None, scen, tr, out: Path,
              run_kw: dict, bar, quiet: bool) -> list[str]:
    """The auto load search (:mod:`specsim.sweep.auto`) for the tiers ``tier_list`` (checked, > 0); prints the
    number of runs and each tier's bracket."""
    from specsim.sweep.auto import auto_sweep

    tier_list = list(tier_list)
    note = (lambda i, loads: None) if quiet else (lambda i, loads: print(
        f"auto round {i}: " + "; ".join(f"{p} {','.join(f'{x:g}' for x in v)}" for p, v in loads.items()),
        file=sys.stderr))
    res = auto_sweep(spec, mode, tier_list, scen, tr, out, max_load=max_load, on_round=note, progress=bar, **run_kw)
    print(f"auto ({'concurrency' if mode == 'closed' else 'rate scales'}): {res.runs} runs ({res.computed} "
          f"computed, {res.skipped} already done) in {res.rounds} rounds, {len(res.failed)} of the runs failed; "
          f"{res.wall_time_s:.1f} s; results in {out}")
    for p, loads in res.loads.items():
        stop = f" (stopped: {'; '.join(res.stopped[p])})" if res.stopped.get(p) else ""
        print(f"  {p}: loads {','.join(f'{x:g}' for x in loads)}{stop}")
    for curve, st in res.brackets.items():
        print(f"  {curve}: " + ", ".join(_bracket_said(res, curve, t, s) for t, s in st.items()))
        for line in _bracket_warnings(res, curve):
            print(textwrap.fill(line, fmt.terminal_width(), initial_indent="    ", subsequent_indent="      ",
                                break_long_words=False, break_on_hyphens=False))
    (Path(out) / "auto.json").write_text(json.dumps({
        "mode": mode, "tiers": tier_list, "loads": res.loads, "runs": res.runs, "rounds": res.rounds,
        "brackets": {c: {f"{t:g}": s for t, s in st.items()} for c, st in res.brackets.items()},
        "frontier": {c: {f"{t:g}": s for t, s in st.items()} for c, st in res.frontier.items()},
        "stopped": res.stopped, "failed": res.failed,
        "flagged": {c: {f"{t:g}": {f"{x:g}": k for x, k in hits} for t, hits in v.items()}
                    for c, v in res.flagged.items() if v}}, indent=1) + "\n")
    return res.ids


def _bracket_said(res, curve: str, tier: float, status: str) -> str:
    """One tier's bracket for the auto search's printout: its status and the loads that bracket it."""
    text = f"tier {tier:g} {status}"
    loads = res.bracket_loads.get(curve, {}).get(tier, ())
    if status == "bracketed" and loads:
        text += f" by load{'s' * (len(loads) > 1)} {' and '.join(f'{x:g}' for x in loads)}"
    if status == "bracketed" and res.frontier.get(curve, {}).get(tier) == "covered":
        text += " (saturated above it: compare reads its best point meeting the tier, covered)"
    return text


def _bracket_warnings(res, curve: str) -> list[str]:
    """One ``warning:`` per tier of ``curve`` bracketed by a point that thrashes (or is prefill-bound, think-bound,
    cut off: ``res.flagged``): the bracket, and the tier's answer, rest on figures that measure that limit, not the
    policy (a fresh user's "tier 100 bracketed" rested on a thrashing point at 91 users, without a word)."""
    limit = {"thrashing": "the KV cache", "prefill-bound": "the prefill pool", "think-bound": "the users' think time",
             "cut-off": "the horizon (--max-sim-s)"}
    out = []
    for tier, hits in res.flagged.get(curve, {}).items():
        said = " and ".join(f"load {x:g} ({' and '.join(kinds)})" for x, kinds in hits)
        what = " and ".join(dict.fromkeys(limit.get(k, k) for _, kinds in hits for k in kinds))
        one, single = len(hits) == 1, " and " not in what
        out.append(f"warning: tier {tier:g} is bracketed by {said}: {what} limit{'s' * single} "
                   f"{'it' if one else 'them'} there, so {'its' if one else 'their'} figures measure "
                   f"{'that limit' if single else 'those limits'}, not the policy, and the tier's answer may change "
                   f"once {'it is' if single else 'they are'} lifted")
    return out


def _write_sweep_csv(recs: list, df, out: Path, pcts) -> None:
    """``results.csv`` (results_frame + per-point percentiles) and ``load_percentiles.csv`` in ``out``; a
    percentile the results frame already holds (``p99_ttft_ms`` from the run's summary) is written once."""
    from specsim.analysis.tables_out import load_percentiles, point_percentiles, write_csv

    per = point_percentiles(recs, pcts)
    per = per.drop(columns=[c for c in per.columns if c != "id" and c in df.columns])
    full = df.merge(per, on="id", how="left") if len(per) else df
    print(f"wrote {write_csv(full, out / 'results.csv')} and "
          f"{write_csv(load_percentiles(recs, df, pcts), out / 'load_percentiles.csv')}")


def percentile_text(recs: list, df, pcts, width: int | None = None) -> str:
    """TTFT, TPOT and E2EL percentiles per (curve, load), pooled over seeds (``--metric-percentiles``), as text."""
    from specsim.analysis.metrics import percentile_key
    from specsim.analysis.tables_out import load_percentiles

    tab = load_percentiles(recs, df, pcts)
    if tab.empty:
        return ""
    cols = [percentile_key(p, n) for n in ("ttft", "tpot", "e2el") for p in pcts]
    rows = [[r["curve"], f"{r['load']:g}", str(r["num_seeds"])] + [fmt.number(r[c]) for c in cols]
            for _, r in tab.iterrows()]
    return fmt.table(["curve", "load", "seeds", *cols], rows, keys=2, width=width,
                     title="latency percentiles (ms) per load point, pooled over seeds' measured requests")


def spread_text(df, width: int | None = None) -> str:
    """The seed-spread table of a sweep's successful points (mean +- std over seeds per load point), as text.

    Args:
        df: :func:`specsim.sweep.results_frame` of the sweep.
        width: characters to fit (None: the terminal's); names and numbers are never cut.
    """
    from specsim.analysis.sweep_tables import curve_titles
    from specsim.sweep import seed_spread

    if df.empty or not (df.status == "ok").any():
        return ""
    sp, titles = seed_spread(df), curve_titles(df)
    multi = bool((sp.num_seeds > 1).any())          # a spread exists only with two or more seeds
    rows, modes = [], set(sp["mode"])
    for _, r in sp.iterrows():
        load = f"{r.load:g}" if len(modes) == 1 else f"{r.load:g} users" if r["mode"] == "closed" else f"x{r.load:g}"
        row = [titles.get(r.curve, r.curve), load, str(r.num_seeds), fmt.number(r.mean_tps_per_user_mean)]
        row += [fmt.number(r.mean_tps_per_user_std) if r.num_seeds > 1 else fmt.MISSING] if multi else []
        row += [fmt.number(r.output_throughput_per_gpu_mean, 0)]
        row += [fmt.number(r.output_throughput_per_gpu_std, 0) if r.num_seeds > 1 else fmt.MISSING] if multi else []
        rows.append(row + [fmt.number(r.mean_verify_tokens_per_request_mean, 2)])
    head = "users" if modes == {"closed"} else "rate x" if modes == {"open"} else "load"
    cols = ["curve", head, "seeds", "TPS/user"] + (["+-std"] if multi else []) + ["tok/s/GPU"]
    cols += (["+-std"] if multi else []) + ["verify tok/req"]
    what = "mean and std over seeds" if multi else "one seed: no spread"
    where = ("closed loop: the measurement window" if modes == {"closed"} else "open loop: the rate scale's whole run"
             if modes == {"open"} else "closed loop (users): the measurement window; open loop (x the trace's rate): "
             "the whole run")
    return fmt.table(cols, rows, keys=2, width=width, title=f"per load point ({what}; {where})")


def caution_notes(df) -> list[str]:
    """Warnings naming the points whose figures measure something other than the policy
    (:func:`specsim.analysis.sweep_tables.cautions`: thrashing, prefill-, think-bound, cut off, few requests, queued,
    overloaded); [] when none."""
    from specsim.analysis.sweep_tables import cautions

    return [f"warning: {sentence}" for _, sentence in cautions(df)]


def caution_text(df) -> str:
    """The :func:`caution_notes` as text, or ""."""
    notes = caution_notes(df)
    return fmt.table([], [], notes=notes) if notes else ""


def failed_text(df, width: int | None = None) -> str:
    """The failed points, one row per (curve, load, error) with their seeds, as text (errors wrap, never cut)."""
    bad = df[df.status != "ok"] if not df.empty else df
    if not len(bad):
        return ""
    rows = [[curve, f"{load:g}", ",".join(str(s) for s in sub.seed), str(err)]
            for (curve, load, err), sub in bad.groupby(["curve", "load", "error"], sort=True)]
    return fmt.table(["curve", "load", "seeds", "error"], rows, keys=2, width=width,
                     title="failed points (recorded; --retry-failed recomputes them)")


def goodput_text(records: list, slos_ms: dict, width: int | None = None) -> str:
    """vLLM's request goodput per curve and load (:func:`specsim.analysis.frontier.request_goodput_table`), as text."""
    from specsim.analysis.frontier import request_goodput_table

    tab = request_goodput_table(records, slos_ms)
    limits = " ".join(f"{k}<={v:g}ms" for k, v in slos_ms.items())
    rows = [[r.curve, f"{r.load:g}", str(r.num_seeds), fmt.percent(r.good_share), fmt.number(r.request_goodput, 3)]
            for _, r in tab.iterrows()]
    return fmt.table(["curve", "load", "seeds", "good", "request_goodput"], rows, keys=2, width=width,
                     title=f"request goodput (req/s; good: {limits}; closed loop: the measurement window)")


# --------------------------------------------------------------------------------------------- compare, plot
def parse_tiers(text: str) -> list[float]:
    """``--tiers`` values (a :func:`parse_list`) under the API's one rule
    (:func:`specsim.analysis.tiers.as_tiers`: each finite and > 0, a repeated value once: ``100,100`` printed every
    row twice); SpecsimInputError naming the flag."""
    from specsim.analysis.tiers import as_tiers

    tier_list = as_tiers(parse_list(text, float, "tiers"), source="--tiers")
    if not tier_list:
        raise SpecsimInputError("--tiers", None, "tiers", "SLA tiers in tok/s/user, each > 0", repr(text))
    return list(tier_list)


def resolve_tiers(text: str | None, sweep_dir: Path) -> list[float]:
    """``--tiers`` when given, else the tiers stored with the sweep (:func:`specsim.analysis.tiers.sweep_tiers`),
    under the same rule (a folder swept before tiers below 1 tok/s/user were refused may store ``0.05``)."""
    from specsim.analysis.tiers import as_tiers, sweep_tiers

    if text:
        return parse_tiers(text)
    return list(as_tiers(sweep_tiers(sweep_dir), source=f"{Path(sweep_dir) / 'sweep.json'} (its stored tiers; "
                         "--tiers replaces them)"))


@app.command()
def compare(
    sweep_dir: Path = typer.Argument(..., help="A directory written by specsim sweep --out."),
    tiers: Optional[str] = typer.Option(None, "--tiers", help="SLA tiers, TPS/user (tok/s); default: the tiers "
                                        "stored with the sweep (specsim sweep --tiers), else 50,100,150,200."),
    baseline: Optional[str] = typer.Option(None, "--baseline",
                                           help="Curve the gains are measured against (default: mtp1 when swept)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    goodput: list[str] = typer.Option([], "--goodput", help=_GOODPUT_HELP),
    metric_percentiles: Optional[str] = typer.Option(None, "--metric-percentiles", help=_PCT_HELP),
    csv: Optional[Path] = typer.Option(None, "--csv", help="Also write the tier table as CSV here (and, with "
                                       "--metric-percentiles, <stem>_percentiles.csv beside it)."),
) -> None:
    """Throughput per GPU at each SLA tier, the winner per tier with its margin, gains over the baseline,
    TPS/user at matched throughput."""
    from specsim.analysis.frontier import compare as compare_table, comparison_json
    from specsim.analysis.metrics import parse_goodput, parse_percentiles

    tier_list = resolve_tiers(tiers, sweep_dir)
    from specsim.analysis.tuned import read_tuned, tuned_rows

    slos = parse_goodput(goodput)
    pcts = parse_percentiles(metric_percentiles)
    recs, tuned = read_tuned(sweep_dir, folder_records(sweep_dir))     # tuning-only points left out (specsim tune)
    if baseline is None and any(r["config"]["policy"] == "mtp1" for r in recs):
        baseline = "mtp1"
    from specsim.analysis.sweep_tables import gpu_split, results_frame

    tab, df = compare_table(recs, tier_list, baseline or None, slos or None), results_frame(recs)
    if csv is not None:
        _write_compare_csv(tab, recs, csv, pcts if metric_percentiles else None)
    if as_json:
        js = comparison_json(recs, tier_list, baseline or None, slos or None)
        js["warnings"] = tab.attrs["warnings"]          # figures that measure something else (frontier.compare)
        if metric_percentiles:
            from specsim.analysis.tables_out import load_percentiles
            js["latency_percentiles"] = json.loads(load_percentiles(recs, df, pcts).to_json(orient="records"))
        print(json.dumps(dict(js, tuned=tuned) if tuned else js))
        return
    from specsim.cli.compare_table import compare_text

    print(compare_text(tuned_rows(tab, tuned), sweep_dir, gpus=gpu_split(recs)))
    caution = fmt.table([], [], notes=tab.attrs["warnings"]) if tab.attrs["warnings"] else ""
    if caution:
        print(caution)
    if slos:
        print()
        print(goodput_text(recs, slos))
    if metric_percentiles:
        print()
        print(percentile_text(recs, df, pcts))


def _write_compare_csv(tab, recs: list, path: Path, pcts) -> None:
    """The tier table as CSV at ``path`` (and the load percentiles beside it when ``pcts``)."""
    from specsim.analysis.tables_out import load_percentiles, write_csv

    written = [write_csv(tab, path)]
    if pcts:
        from specsim.sweep import results_frame
        written.append(write_csv(load_percentiles(recs, results_frame(recs), pcts),
                                 path.with_name(f"{path.stem}_percentiles.csv")))
    import sys
    print("wrote " + " and ".join(str(p) for p in written), file=sys.stderr)


@app.command()
def plot(
    sweep_dirs: list[Path] = typer.Argument(..., help="One or more sweep directories (one frontier panel each)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output folder (default: <first dir>/plots)."),
    tiers: Optional[str] = typer.Option(None, "--tiers", help="SLA tiers drawn as dotted lines (default: the "
                                        "first directory's stored tiers, else 50,100,150,200)."),
    measured: list[Path] = typer.Option([], "--measured", help="Measured points (import-results --out); "
                                        "<dir>/measured.json is drawn too."),
) -> None:
    """Write frontiers.png (Fig. 7 layout), budget.png (Fig. 8), throughput.png per sweep directory, and
    tuned.png where a directory holds tuning results (specsim tune)."""
    tier_list = resolve_tiers(tiers, sweep_dirs[0])      # a bad tier fails before --out is created
    from specsim.cli.outputs import check_output
    check_output(out, "--out", folder=True)
    from specsim.analysis.tuned import read_tuned
    from specsim.analysis.plots import plot_budget, plot_frontiers, plot_throughput_vs_load, plot_tuned_frontiers

    from specsim.fmt import folder_titles
    # (title, untuned records, tuned); folders of one name told apart by their parents, as the panels are
    split = [(t, *read_tuned(d, folder_records(d))) for t, d in zip(folder_titles(sweep_dirs), sweep_dirs)]
    recs = [(name, r) for name, r, _ in split]
    if not any(x["status"] == "ok" for _, r, _ in split for x in r) and not any(t for _, _, t in split):
        # nothing to draw: refuse rather than write blank axes
        raise SpecsimInputError(", ".join(str(d) for d in sweep_dirs), None, "points",
                                "a sweep with at least one finished point to draw (the warning above names the "
                                "failed ones)", "no point finished")
    dest = out or sweep_dirs[0] / "plots"
    from specsim.analysis.plots import tps_estimator
    from specsim.analysis.results import measured_for_plot
    points = measured_for_plot(sweep_dirs, measured)
    if tps_estimator(points) != "per-request":
        import sys
        print(fmt.wrapped("note: a measured point gives only mean TPOT, so the frontier figure puts every point, the "
                          "simulated ones too, at TPS/user = 1000 / mean TPOT (compare and recommend keep the mean "
                          "over requests of each request's TPS/user, which is higher)"), file=sys.stderr)
    written = [plot_frontiers(recs, dest / "frontiers.png", tier_list, points)]
    for name, r in recs:
        suffix = "-" + re.sub(r"[^\w.-]+", "-", name).strip("-") if len(recs) > 1 else ""   # x/sweep -> -x-sweep
        written.append(plot_budget(r, dest / f"budget{suffix}.png", title=f"{name}: verification budget"))
        written.append(plot_throughput_vs_load(r, dest / f"throughput{suffix}.png", title=f"{name}: throughput"))
    if any(t for _, _, t in split):
        written.append(plot_tuned_frontiers(split, dest / "tuned.png", tier_list))
    for p in written:
        print(f"figure written to {p}")
