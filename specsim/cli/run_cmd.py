"""``specsim run``: one simulation on a trace, a metrics summary."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app, written_to
from specsim.errors import SpecsimInputError


#: The metrics of the summary table, in order (whole-run scope; the window block repeats the starred ones).
SUMMARY_ROWS = ("completed", "unfinished", "unservable", "not_issued", "total", "total_output_tokens", "duration_s",
                "request_throughput", "output_throughput", "output_throughput_per_gpu",
                "output_throughput_per_all_gpus", "mean_ttft_ms",
                "median_ttft_ms", "p90_ttft_ms", "p99_ttft_ms", "p99.9_ttft_ms", "mean_tpot_ms", "median_tpot_ms",
                "p90_tpot_ms", "p99_tpot_ms", "p99.9_tpot_ms", "mean_itl_ms", "p90_itl_ms", "p99_itl_ms",
                "p99.9_itl_ms", "mean_e2el_ms", "median_e2el_ms", "p90_e2el_ms", "p99_e2el_ms", "p99.9_e2el_ms",
                "mean_tps_per_user", "median_tps_per_user", "mean_running_requests", "mean_waiting_requests",
                "mean_acceptance_length", "acceptance_rate",
                "mean_verify_tokens_per_request", "good_requests", "request_goodput", "clipped_verify_lengths",
                "undrafted_steps",
                "num_preemptions", "preempted_requests", "recomputed_tokens", "kv_clipped_verify_lengths",
                "drafter_kv_lost_drafts",
                "prefix_cache_hit_rate", "recompute_prefix_hit_rate", "steps", "wall_time_s")

#: The closed-loop window's rows.
WINDOW_ROWS = ("start_s", "end_s", "duration_s", "requests_issued", "measured_requests", "output_tokens",
               "output_throughput",
               "output_throughput_per_gpu", "output_throughput_per_all_gpus", "mean_ttft_ms", "p99_ttft_ms",
               "mean_tpot_ms", "p99_tpot_ms",
               "mean_itl_ms", "mean_e2el_ms", "mean_tps_per_user", "mean_running_requests", "mean_waiting_requests",
               "mean_acceptance_length",
               "mean_verify_tokens_per_request", "good_requests", "request_goodput")

DOMAIN_COLUMNS = ("requests", "mean_ttft_ms", "mean_tpot_ms", "mean_tps_per_user", "mean_acceptance_length",
                  "acceptance_rate")


#: ``specsim run``'s policy when ``--policy`` is not given: the deployable policy (not ``oracle`` or ``dspark-global``)
#: that wins the most SLA tiers (50, 100, 150, 200 TPS/user) across the default, V4-Flash and h100-qwen3-8b-tp1-terms
#: (8 prefill instances) frontiers of ``benchmarks/policy_targets.py --frontiers`` (issue 21; the table and the why
#: are in docs/policies.md, "The default of specsim run"). The Python API (``simulate``) keeps ``dspark``, the paper's.
DEFAULT_POLICY = "dspark-async"

STAGE_COLUMNS = ("start_s", "end_s", "requests", "request_rate", "request_throughput", "output_throughput",
                 "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_tps_per_user")


def _non_default_knobs(s: dict) -> dict:
    """The run's knob values that differ from its policy's declared defaults (all of them when the defaults
    cannot be read, e.g. a plug-in no longer on disk)."""
    knobs = (s.get("provenance") or {}).get("effective", {}).get("knobs") or {}
    try:
        from specsim.policies import policy_knobs

        defaults = policy_knobs(s["policy"])
    except Exception:                       # noqa: BLE001 - a header must not fail on an odd policy
        return knobs
    return {k: v for k, v in knobs.items() if k not in defaults or defaults[k] != v}


def summary_text(s: dict, width: int | None = None, percentiles=()) -> str:
    """The run summary as text: the metrics (whole run), the closed-loop window, load stages, the per-domain breakdown.

    Every name and number is shown whole at any ``width`` (:func:`specsim.fmt.table` stacks a table that
    does not fit).

    Args:
        s: a run summary (``SimulationResult.summary``: vllm-bench metric names, ``load``, ``per_domain``,
            ``window`` in closed loop).
        width: characters to fit (None: the terminal's width).
        percentiles: ``--metric-percentiles``: show these latency percentiles in place of the default rows.
    """
    load = s["load"]
    where = (f"closed loop, {fmt.users(load['concurrency'])}" if load["mode"] == "closed"
             else f"open loop x{load['rate_scale']:g}")
    knobs = _non_default_knobs(s)
    shown = "".join(f", {k} {v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else f", {k} {v}"
                    for k, v in knobs.items() if k not in ("gamma", "drafter"))
    gpus = (f"; per GPU = per decode GPU ({s['decode_gpus']}; the {s['prefill_gpus']} prefill GPU"
            f"{'s' if s['prefill_gpus'] != 1 else ''} not counted; per_all_gpus counts them)"
            if s.get("prefill_gpus") else "")
    title = (f"specsim run: policy {s['policy']} (drafter {s['drafter']}, gamma {s['gamma']}{shown}), seed "
             f"{s['seed']}, {where}; whole run (completed requests, first arrival to last completion){gpus}")
    parts = [fmt.table(["metric", "value"], [[k, fmt.value(s.get(k))] for k in _rows(percentiles) if k in s],
                       title=title, width=width)]
    w = s.get("window")
    if w:
        parts.append(fmt.table(["window", "value"], [[k, fmt.value(w.get(k))] for k in WINDOW_ROWS if k in w],
                               title="closed-loop measurement window (requests completed inside it; sweeps and "
                                     "frontiers use these figures)", width=width))
    if s.get("stages"):
        rows = [[f"{st['stage']}{'*' if st.get('partial') else ''}"] + [fmt.value(st.get(c)) for c in STAGE_COLUMNS]
                for st in s["stages"]]
        cut = [f"stage {st['stage']}* ends where the run does (--max-sim-s or --num-requests): at "
               f"{st['end_s']:g} s, not at its nominal end {st['nominal_end_s']:g} s" for st in s["stages"]
               if st.get("partial")]
        parts.append(fmt.table(["stage", *STAGE_COLUMNS], rows, width=width, notes=cut,
                               title="per load stage (requests arriving in it; rates and throughput over its span)"))
    rows = [[dom] + [fmt.value(m.get(c)) for c in DOMAIN_COLUMNS] for dom, m in s["per_domain"].items()]
    parts.append(fmt.table(["domain", *DOMAIN_COLUMNS], rows, width=width,
                           title=f"per domain ({s['completed']} completed requests of the whole run)"))
    for lines in run_notes(s):
        if lines:
            parts.append(fmt.table([], [], width=width, notes=lines))
    return "\n\n".join(parts)


def run_notes(s: dict) -> tuple[list[str], list[str], list[str]]:
    """The lines printed under a run's tables, in three groups: the unservable requests' warnings
    (:func:`unservable_warnings`), the cautions (a horizon, thrashing, a think-bound or queued closed loop, an
    overloaded open loop) and the notices (:func:`run_notices`); ``specsim report`` shows them as the run page's
    notes."""
    from specsim.analysis.metrics import horizon_warning, queued_warning, think_bound_warning, thrashing_warning
    from specsim.analysis.overload import overload_warning
    cautions = [w for w in (horizon_warning(s), thrashing_warning(s), think_bound_warning(s), queued_warning(s),
                            overload_warning(s)) if w]
    return unservable_warnings(s), cautions, run_notices(s)


def run_notices(s: dict) -> list[str]:
    """The ``notice:`` lines of summary ``s`` (the profile's range and speculation terms, the replica's GPUs, a
    confidence-reading policy on a CPU drafter, a prefill pool that limits the load, the context window, a
    --max-model-len above the model's, a closed-loop window of few requests, the scheduler's cost table): printed
    under the tables, and on stderr with --json."""
    notices = [f"notice: {n}" for n in s.get("profile_range", {}).get("notices", [])]
    notices += [f"notice: {n}" for n in [prefill_wait_notice(s)] if n]
    cw = s.get("context_window") or {}
    notices += [f"notice: {n}" for n in [context_notice(cw, s["total"])] if n and not cw.get("unservable")]
    if cw.get("model_window"):
        own, src = cw["model_window"]
        notices.append(f"notice: --max-model-len {cw['max_model_len']} is above the model's own window of {own} "
                       f"tokens ({src}): vLLM refuses it unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, and the model "
                       "was not trained past it; a longer-context model's profile answers for long requests")
    load, win = s.get("load") or {}, s.get("window") if isinstance(s.get("window"), dict) else {}
    users, measured = load.get("concurrency"), win.get("measured_requests")
    if users and measured is not None and measured < 2 * users:
        notices.append(f"notice: the closed-loop window measured {measured} request{'s' * (measured != 1)} for "
                       f"{users} users (it opens when every user has completed one, closes when the last request "
                       "is issued and counts the requests that complete in between, so each policy's window "
                       "holds other requests); more --num-requests widens it")
    table = s.get("scheduler_cost_table")
    if table and table.get("mean_rel_error") is not None:
        notices.append(f"notice: the policy scheduled on the {table['kind']} cost table (profiled at "
                       f"{table['profile_context_len']} context tokens per request); its mean relative error "
                       f"against the cost charged was {table['mean_rel_error']:.1%} over {table['steps']} steps")
    return notices


def _rows(percentiles) -> tuple[str, ...]:
    """:data:`SUMMARY_ROWS`, its percentile rows replaced by ``percentiles`` when given (vLLM's order)."""
    if not percentiles:
        return SUMMARY_ROWS
    from specsim.analysis.metrics import percentile_key
    out: list[str] = []
    for k in SUMMARY_ROWS:
        if k.startswith("p") and k.endswith("_ms"):
            continue
        out.append(k)
        for name in ("ttft", "tpot", "itl", "e2el"):
            if k == f"mean_{name}_ms":
                out.extend(percentile_key(p, name) for p in percentiles)
    return tuple(out)


def unservable_warnings(s: dict) -> list[str]:
    """Warning lines for the unservable requests of summary ``s``: those refused for the context window
    (:func:`context_notice`), those whose KV can never fit a replica, and where to read each one's reason."""
    cw = s.get("context_window") or {}
    refused = int(cw.get("unservable") or 0)
    out = [f"warning: {context_notice(cw, s['total'])}"] if refused else []
    if s["unservable"] > refused:
        out.append(f"warning: {s['unservable'] - refused} of {s['total']} requests are unservable: they need more "
                   "KV blocks than a replica has")
    if out:
        out.append("(why each: unservable_requests in --json, unservable_reason in requests.parquet with --out)")
    return out


def prefill_wait_notice(s: dict) -> str | None:
    """One line when requests spent most of their TTFT waiting for a disaggregated prefill instance
    (:func:`specsim.analysis.metrics.prefill_bound`): the prefill pool, not decode, limits the load; else None.
    A closed loop is judged on its measurement window (what sweeps and frontiers read), not on the whole run,
    whose start-up burst of every user's first request queues at the prefill pool whatever the load."""
    from specsim.analysis.metrics import prefill_bound

    win = s.get("window")
    scope = win if isinstance(win, dict) and "mean_prefill_wait_ms" in win else s
    wait, ttft = scope.get("mean_prefill_wait_ms"), scope.get("mean_ttft_ms")
    if not prefill_bound(wait, ttft):
        return None
    gpus = s.get("prefill_gpus")
    pool = f" ({gpus} GPU{'' if gpus == 1 else 's'})" if gpus else ""
    return (f"requests waited {wait:,.0f} ms on average for a prefill instance, {wait / ttft:.0%} of their mean "
            f"TTFT of {ttft:,.0f} ms: the prefill pool{pool}, not decode, limits this load; prefill.num_instances "
            "sizes it")


def context_notice(cw: dict | None, total: int) -> str | None:
    """One line saying how many requests exceeded the context window, what became of them, the window and its
    source, and how to change it; None when none exceeded it."""
    if not cw or not cw.get("over_context"):
        return None
    window = f"the context window of {cw['max_model_len']} tokens ({cw['source']})"
    if cw.get("overflow") == "truncate":
        return (f"{cw['over_context']} of {total} requests exceed {window}: {cw['truncated_requests']} had their "
                f"output truncated to fit ({cw['truncated_output_tokens']} tokens cut), {cw['unservable']} "
                f"{'is' if cw['unservable'] == 1 else 'are'} unservable (the prompt alone fills it); "
                "--max-model-len N sets the window")
    return (f"{cw['unservable']} of {total} requests are unservable for {window}: prompt + output exceeds it; "
            "--max-model-len N sets the window, --set engine.context_overflow=truncate cuts their outputs to fit")


def print_summary(s: dict, console=None) -> None:
    """Print :func:`summary_text` at the terminal's width (``console``: unused, kept for callers)."""
    print(summary_text(s))


@app.command()
def run(
    trace: Path = typer.Option(..., "--trace", help="Request trace (canonical JSONL)."),
    policy: str = typer.Option(DEFAULT_POLICY, "--policy", help="Policy name (list: specsim policies) or "
                               "path/to/file.py:Name. Default dspark-async: of the deployable policies it wins "
                               "the most SLA tiers on docs/policies.md's three frontiers (their KV capacity "
                               "raised); elsewhere another may win: sweep and compare yours."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario TOML (default: bundled)."),
    set_: list[str] = typer.Option([], "--set", help="Override: section.key=value (repeatable)."),
    seed: int = typer.Option(0, "--seed", help="The one seed of every random draw."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Closed loop with N users."),
    rate_scale: Optional[float] = typer.Option(None, "--rate-scale",
                                               help="Open loop only: divide arrival times by x (default 1)."),
    gamma: Optional[int] = typer.Option(None, "--gamma", help="Draft block length (overrides engine.gamma)."),
    drafter: Optional[str] = typer.Option(None, "--drafter", help="dspark, dflash, eagle3, mtp, or the CPU "
                                          "drafters ngram and suffix (these need acceptance.length)."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="specdecpp threshold h."),
    num_requests: Optional[int] = typer.Option(None, "--num-requests", help="Use the first N requests (only their "
                                               "lines of the trace are read and checked)."),
    max_sim_s: Optional[float] = typer.Option(
        None, "--max-sim-s", help="Stop at simulated time T. The horizon includes T: every event at a time <= T is "
        "processed, so a request that finishes exactly at T is completed; requests still running are unfinished. "
        "In closed loop T must come after the window closes (when the last request is issued). At "
        "most 1e9 s, specsim's bound on simulated time (arrivals / --rate-scale too)."),
    goodput: list[str] = typer.Option(
        [], "--goodput", help="Request goodput limits in ms, as vllm bench serve: 'ttft:200 tpot:50 e2el:3000' "
        "(quoted, unquoted as vLLM takes it, or the option repeated); a request is good when every given limit "
        "holds; adds good_requests and request_goodput (good requests/s)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write summary.json and Parquet records here."),
    result_format: Optional[str] = typer.Option(None, "--result-format", help="vllm: also write <out>/vllm_result.json"
                                                " with the keys of vllm bench serve --save-result."),
    trace_events: Optional[Path] = typer.Option(None, "--trace-events", help="Write per-replica steps as "
                                                "Chrome trace events (JSON; Perfetto opens it)."),
    metric_percentiles: Optional[str] = typer.Option(
        None, "--metric-percentiles", help="Latency percentiles to report, as vllm bench serve: '50,90,99' "
        "(p<P>_ttft_ms, _tpot_ms, _itl_ms, _e2el_ms; the default 50,90,99,99.9 stay in the JSON)."),
    csv: bool = typer.Option(False, "--csv", help="With --out: also write summary.csv (one flat row), "
                             "requests.csv and steps.csv."),
    max_model_len: Optional[int] = typer.Option(
        None, "--max-model-len", min=1, help="Context window in tokens (prompt + output), as vLLM's flag: a longer "
        "request is unservable (or its output truncated with --set engine.context_overflow=truncate). Default: "
        "the model's (docs/memory.md)."),
) -> None:
    """Simulate a speculative-decoding serving cluster on a trace and print its metrics."""
    from specsim.analysis.metrics import add_goodput, parse_goodput, parse_percentiles
    from specsim.scenario import load_scenario
    from specsim.simulation import simulate
    from specsim.cli.results_cmd import check_result_format, write_result_format
    from specsim.workload import load_trace

    check_result_format(result_format, out)
    if csv and out is None:
        raise SpecsimInputError("--csv", None, None, "--csv with --out (the CSV files go beside the Parquet ones)",
                                "--csv without --out")
    pcts = parse_percentiles(metric_percentiles) if metric_percentiles else ()
    if num_requests is not None and num_requests < 1:
        raise SpecsimInputError("--num-requests", None, "num_requests", "an int >= 1", str(num_requests))
    _check_conflicts(policy, concurrency, rate_scale, gamma, drafter)
    _check_set_against_flags(set_, {"engine.gamma": ("--gamma", gamma), "drafter.name": ("--drafter", drafter),
                                    "engine.max_model_len": ("--max-model-len", max_model_len)})
    slos = parse_goodput(goodput)
    if max_model_len is not None:
        set_ = [*set_, f"engine.max_model_len={max_model_len}"]
    scen = load_scenario(scenario, set_)
    tr = load_trace(trace, None if num_requests is None else num_requests + 1)   # one more: head's cut time
    if num_requests is not None:
        from specsim.cli.sweep_notes import note_more_requests_than_trace
        note_more_requests_than_trace(num_requests, trace, len(tr))
        tr = tr.head(num_requests)
    from specsim.cli.sweep_notes import conversations_text
    few = conversations_text(tr, trace, (concurrency,), run=True) if concurrency else None
    if few:                                 # a window of too few conversations may not open (docs/workloads.md)
        print(fmt.wrapped(f"warning: {few}"), file=sys.stderr)
    knobs = {} if threshold is None else {"threshold": threshold}
    _note_unused_knobs(policy, scen.policy.knobs)
    from specsim.cli.sweep_notes import note_unit_warnings
    note_unit_warnings(scen)
    _check_outputs(out, trace_events)
    from specsim.progress import command_line, run_progress
    from specsim.simulation import NoWindowError
    try:
        with run_progress(len(tr)) as bar:
            res = simulate(tr, policy, scen, seed=seed, concurrency=concurrency,
                           rate_scale=1.0 if rate_scale is None else rate_scale, max_sim_s=max_sim_s, gamma=gamma,
                           drafter=drafter, record_step_log=out is not None, progress=bar,
                           metric_percentiles=pcts, **knobs)
    except NoWindowError as e:              # nothing computed is lost: the whole run's records go to --out
        if out is not None and e.result is not None:
            _clear_earlier_run(Path(out))
            e.result.save(out)
            print(f"note: the run ended without a closed-loop window; its records and whole-run summary (no "
                  f"window metrics, load.window_start_s null) are in {out}", file=sys.stderr)
        if e.result is not None:                # no window because nothing could be served: say that instead
            _refuse_all_unservable(e.result.summary, trace)
        raise
    _refuse_all_unservable(res.summary, trace)
    res.summary["command_line"] = command_line()
    if slos:
        add_goodput(res.summary, res.requests, slos)
    res.summary["provenance"]["command"] = {
        "argv": ["specsim", *sys.argv[1:]] if sys.argv and "specsim" in Path(sys.argv[0]).name else None,
        "options": {"trace": str(trace), "policy": policy, "scenario": None if scenario is None else str(scenario),
                    "set": list(set_), "seed": seed, "concurrency": concurrency, "rate_scale": rate_scale,
                    "gamma": gamma, "drafter": drafter, "threshold": threshold, "num_requests": num_requests,
                    "max_sim_s": max_sim_s, "goodput": slos or None}}
    if trace_events is not None:
        from specsim.analysis.trace_events import write_trace_events
        write_trace_events(res.steps, trace_events, f"specsim run: {res.summary['policy']}")
        written_to(trace_events, "Chrome trace events (Perfetto)", to_stderr=True)
    if out is not None:
        _clear_earlier_run(Path(out))
        res.save(out)
        for name in SAVED_FILES:
            if (Path(out) / name).is_file():
                written_to(Path(out) / name, to_stderr=True)
        vllm = write_result_format(res, result_format, out)
        if vllm is not None:
            written_to(vllm, "vllm bench serve result", to_stderr=True)
        if csv:
            from specsim.analysis.tables_out import write_run_csv
            for p in write_run_csv(res.summary, res.requests, res.steps, out):
                written_to(p, to_stderr=True)
    if as_json:
        print(json.dumps(res.summary, default=float))
        for line in [*unservable_warnings(res.summary), *run_notices(res.summary)]:   # stdout stays one JSON object
            print(line, file=sys.stderr)
    else:
        print(fmt.table([], [], notes=[res.summary["kv_capacity"]["describe"]]))
        print(summary_text(res.summary, percentiles=pcts))


#: The files ``SimulationResult.save`` writes, then every file ``specsim run --out`` may write (the result
#: formats and --csv included).
SAVED_FILES = ("summary.json", "requests.parquet", "steps.parquet", "step_log.parquet")
RUN_FILES = (*SAVED_FILES, "vllm_result.json", "summary.csv", "requests.csv", "steps.csv")


def _clear_earlier_run(out: Path) -> None:
    """Remove an earlier run's files from ``out`` (a note on stderr says so), so that none of them stays beside
    this run's (a vllm_result.json of another policy did). Other files in the folder are left alone."""
    old = [out / n for n in RUN_FILES if (out / n).is_file()]
    if old:
        for p in old:
            p.unlink()
        print(f"note: --out {out} held an earlier run: its {len(old)} files were replaced", file=sys.stderr)


def _refuse_all_unservable(s: dict, trace: Path) -> None:
    """Exit 2 with one line when no request of the trace could be served (every figure would be empty): the
    number and the first request's reason."""
    if s["unservable"] and s["unservable"] == s["total"]:
        first = next(iter(s["unservable_requests"].items()))
        raise SpecsimInputError(str(trace), None, "requests", "at least one request the cluster can serve",
                                f"all {s['total']} unservable, e.g. request {first[0]!r}: {first[1]}")


def _note_unused_knobs(policy: str, table: dict) -> None:
    """On stderr, the scenario's ``[policy.knobs]`` entries ``policy`` does not declare: the table is shared by the
    policies of a sweep, so another policy's knob is skipped, neither used nor type-checked in this run (an
    entry no policy declares is an error, raised when the policy is made)."""
    from specsim.policies import policy_knobs
    from specsim.policies.registry import known_knobs

    if not table:
        return
    try:
        declared = policy_knobs(policy)
    except SpecsimInputError:
        return                                  # an unknown policy: simulate names it
    unused = sorted(k for k in table if k not in declared and k in known_knobs())     # else a typo: an error
    if unused:
        print(fmt.wrapped(f"note: [policy.knobs] {', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not "
                          f"a knob of policy {policy}: not used (nor checked) in this run"), file=sys.stderr)


def _check_outputs(out: Path | None, trace_events: Path | None) -> None:
    """Check ``--out`` and ``--trace-events`` before simulating (specsim.cli.outputs); notes go to stderr."""
    from specsim.cli.outputs import output_dir, output_file
    notes = [output_dir(out, "--out") if out is not None else None,
             output_file(trace_events, "--trace-events") if trace_events is not None else None]
    for note in filter(None, notes):
        print(f"note: {note}", file=sys.stderr)


def _check_conflicts(policy: str, concurrency: int | None, rate_scale: float | None, gamma: int | None,
                     drafter: str | None) -> None:
    """Refuse options that cannot both apply (SpecsimInputError, one line, exit 2)."""
    def bad(flag: str, why: str, got: str) -> SpecsimInputError:
        return SpecsimInputError(flag, None, None, why, got)
    if concurrency is not None and rate_scale is not None:
        raise bad("--rate-scale", "--rate-scale in open loop only (leave it out with --concurrency)",
                  f"--concurrency {concurrency} --rate-scale {rate_scale:g}")
    if policy == "none" and (gamma not in (None, 0) or drafter not in (None, "none")):
        raise bad("--gamma" if gamma not in (None, 0) else "--drafter",
                  "no --gamma or --drafter with --policy none (it never drafts)",
                  f"--gamma {gamma}" if gamma not in (None, 0) else f"--drafter {drafter}")
    if policy == "mtp1" and (gamma not in (None, 1) or drafter not in (None, "mtp")):
        raise bad("--gamma" if gamma not in (None, 1) else "--drafter",
                  "no --gamma or --drafter with --policy mtp1 (it is the mtp drafter at gamma 1)",
                  f"--gamma {gamma}" if gamma not in (None, 1) else f"--drafter {drafter}")


def _check_set_against_flags(set_: list[str], flags: dict[str, tuple[str, object]]) -> None:
    """Refuse a ``--set section.key=value`` that a flag of the same command line contradicts (``--set
    engine.gamma=3 --gamma 5``: a fresh user's report, where the flag won silently). Equal values pass, and so
    does a key no flag gives; the scenario checks each value itself.

    Args:
        set_: the ``--set`` items as typed.
        flags: scenario key -> (flag name, the flag's value or None when not given).

    Raises:
        SpecsimInputError: a key both set and flagged with different values, naming both.
    """
    for item in set_:
        key, eq, value = item.partition("=")
        flag, given = flags.get(key.strip(), (None, None))
        if not eq or given is None:
            continue
        value = value.strip().strip("'\"")
        if value != str(given) and not (value.lstrip("+-").isdigit() and int(value) == given):
            raise SpecsimInputError(flag, None, key.strip(), f"one value (give {flag} or --set {key.strip()}, not "
                                    "two that disagree)", f"{flag} {given} and --set {item.strip()}")
