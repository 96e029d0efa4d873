"""One simulation run end to end: resolve the configuration, run the cluster, check invariants, summarise.

This is the library form of ``specsim run``; notebooks call :func:`simulate` directly.
"""

from __future__ import annotations

import inspect
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import specsim
from specsim.engine.cluster import ClosedLoopWindow, Cluster
from specsim.errors import MAX_SIM_TIME_S, SpecsimInputError, closest, plain
from specsim.acceptance.exchange import acceptance_report
from specsim.acceptance.fitting import resolve_acceptance_model
from specsim.hardware.drafter import DrafterCost
from specsim.hardware.context import ContextWindow, context_window
from specsim.hardware.profile import StepTimeProfile, range_report, speculation_overhead
from specsim.hardware.capture import eager_report
from specsim.analysis.metrics import (PERCENTILES, decode_queue_notice, domain_breakdown, measured_mask,
                                     memory_summary, request_frame, summarize)
from specsim.policies.base import policy_hooks
from specsim.run_config import ResolvedRun, RunConfig, in_scenario_file, refused_by_window, resolve_run
from specsim.run_notices import acceptance_error, acceptance_notices, fitted_overhead_notice, given_length_notice
from specsim.policies.cost_table import table_report
from specsim.scenario import Scenario, load_scenario
from specsim.analysis.stage_metrics import stage_breakdown
from specsim.acceptance.steplog import write_step_log

__all__ = ["HORIZON_RULE", "RunConfig", "SimulationResult", "run", "run_until", "simulate"]

@dataclass
class SimulationResult:
    """Everything one run produced.

    Attributes:
        summary: flat metrics dict (specsim.analysis.metrics names) plus policy, seed, wall_time_s, provenance.
        requests: one row per trace request (specsim.analysis.metrics.request_frame).
        steps: one row per engine step (specsim.engine.cluster.STEP_COLUMNS).
        step_log: per (step, request) rows in the specsim.acceptance.steplog format, or None when not recorded.
    """

    summary: dict[str, Any]
    requests: pd.DataFrame
    steps: pd.DataFrame
    step_log: pd.DataFrame | None = None

    def __repr__(self) -> str:
        """One line a notebook can read (the dataclass repr printed every frame and the whole summary)."""
        s = self.summary
        head = ", ".join(f"{k}={s[k]!r}" for k in ("policy", "drafter", "gamma", "seed") if k in s)
        figures = ", ".join(f"{k}={s[k]:.6g}" for k in ("completed", "output_throughput_per_gpu", "mean_tps_per_user",
                                                         "mean_ttft_ms", "mean_tpot_ms")
                            if isinstance(s.get(k), (int, float)))
        log = "None" if self.step_log is None else f"<{len(self.step_log)} rows>"
        return (f"SimulationResult({head}; {figures}; requests=<{len(self.requests)} rows>, "
                f"steps=<{len(self.steps)} rows>, step_log={log}; the rest in .summary)")

    def save(self, out_dir: str | Path) -> Path:
        """Write summary.json, requests.parquet, steps.parquet (and step_log.parquet) into ``out_dir``."""
        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        (d / "summary.json").write_text(json.dumps(self.summary, indent=1, default=_json_default) + "\n")
        self.requests.to_parquet(d / "requests.parquet", index=False)
        self.steps.to_parquet(d / "steps.parquet", index=False)
        if self.step_log is not None:
            write_step_log(self.step_log, d / "step_log.parquet")
        return d


def _fixed_lengths(trace) -> bool:
    """Whether every request of ``trace`` has the same prompt and the same output length (a fresh user's fixed-length
    synthetic trace put a closed loop in lockstep: TTFT without speculation came out 163 ms against 31 ms with
    spread lengths, and speculation seemed to cut it 3x)."""
    return len(trace) > 1 and np.ptp(trace.prompt_tokens) == 0 and np.ptp(trace.output_tokens) == 0


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    raise TypeError(type(x))


def simulate(trace, policy: str | Any = "dspark", scenario: Scenario | None = None, seed: int = 0,
             concurrency: int | None = None, rate_scale: float = 1.0, max_sim_s: float | None = None,
             gamma: int | None = None, drafter: str | None = None, profile: StepTimeProfile | str | None = None,
             record_step_log: bool = False, drafter_cost: DrafterCost | None = None,
             progress=None, metric_percentiles: tuple[float, ...] = (), **knobs: Any) -> SimulationResult:
    """Simulate ``trace`` on the scenario's cluster under ``policy`` (the arguments of :class:`RunConfig`).

    Args:
        trace: a :class:`specsim.workload.trace.Trace`, or the path of a JSONL trace (loaded with
            :func:`specsim.workload.load_trace`).
        scenario: a :class:`~specsim.scenario.Scenario`, the path of a scenario TOML, or None for the default.
        profile: override the scenario's step-time profile: a profile, a bundled profile's name or a profile file.
        drafter_cost: a measured drafter cost model replacing the drafter's defaults (the replay uses it).
        progress: a :data:`specsim.progress.ProgressCallback` told (done, total, simulated s) as the run goes.
        Every other argument: see :class:`specsim.run_config.RunConfig` (``knobs`` are policy knobs such as
            ``threshold``).

    Raises:
        SpecsimInputError: bad configuration or a domain missing from the acceptance tables.
        RuntimeError: an internal invariant broke (a request lost or over-emitted).
    """
    if isinstance(trace, (str, Path)):
        from specsim.workload import load_trace
        trace = load_trace(trace)
    if isinstance(scenario, (str, Path)):
        scenario = load_scenario(scenario)
    if isinstance(profile, (str, Path)):                 # a bundled name or a profile file, as the scenario names one
        from specsim.hardware.profile import resolve_profile
        profile = resolve_profile(profile)
    if profile is not None and not isinstance(profile, StepTimeProfile):
        raise SpecsimInputError(None, None, "profile", "a StepTimeProfile, a bundled profile name or a profile file",
                                type(profile).__name__)
    if not hasattr(trace, "arrival_s"):
        raise SpecsimInputError(None, None, "trace", "a Trace (specsim.workload.load_trace(path)) or a JSONL path",
                                type(trace).__name__)
    _check_fixed_drafting(policy, gamma, drafter)
    if progress is not None and not callable(progress):
        raise SpecsimInputError(None, None, "progress", "a callable (done, total, simulated s) or None",
                                type(progress).__name__)
    pcts = (metric_percentiles,) if isinstance(metric_percentiles, (str, int, float)) else metric_percentiles
    config = RunConfig(policy=policy, scenario=scenario or load_scenario(), seed=seed, concurrency=concurrency,
                       rate_scale=rate_scale, max_sim_s=max_sim_s, gamma=gamma, drafter=drafter, knobs=knobs,
                       record_step_log=record_step_log, metric_percentiles=tuple(pcts))
    try:
        return run(trace, config, profile=profile, drafter_cost=drafter_cost, progress=progress)
    except SpecsimInputError as e:
        raise _misspelt_argument(e, knobs) from None


#: Policies whose drafting is fixed: (gamma, drafter) each runs with, as ``specsim run`` refuses other values.
FIXED_DRAFTING = {"none": (0, "none"), "mtp1": (1, "mtp")}


def _check_fixed_drafting(policy: Any, gamma: int | None, drafter: str | None) -> None:
    """Refuse a ``gamma`` or ``drafter`` that ``none`` or ``mtp1`` would ignore (``mtp1`` is the MTP drafter at
    gamma 1; a fresh user's ``simulate(tr, "mtp1", gamma=5, drafter="eagle3")`` ran gamma 1 with MTP in silence,
    where ``specsim run`` refuses the same flags).

    Raises:
        SpecsimInputError: naming ``gamma`` or ``drafter``.
    """
    if not isinstance(policy, str) or policy not in FIXED_DRAFTING:
        return
    g, d = FIXED_DRAFTING[policy]
    for name, value, fixed in (("gamma", gamma, g), ("drafter", drafter, d)):
        if value is not None and value != fixed:
            what = "it never drafts" if policy == "none" else "it is the mtp drafter at gamma 1"
            raise SpecsimInputError(None, None, name, f"no {name} other than {fixed!r} with policy {policy!r} ({what}; "
                                    "'static' takes any gamma and drafter)", plain(value))


#: ``specsim run`` options that are no argument of :func:`simulate`, with what the API does instead.
CLI_ONLY = {"num_requests": "the trace's first N requests as simulate(trace.head(N), ...) (the CLI's --num-requests)"}


def _misspelt_argument(error: SpecsimInputError, knobs: dict[str, Any]) -> SpecsimInputError:
    """``error`` itself, or, where it refuses a knob whose name is close to one of :func:`simulate`'s own
    arguments (``concurency``), an error that names that argument: the extra keyword arguments of ``simulate`` go
    to the policy as knobs, so a misspelt argument would otherwise be reported as the policy's unknown knob."""
    field = str(error.field or "")
    knob = field.rsplit(", knob ", 1)[-1] if ", knob " in field else None
    if knob not in knobs or "closest valid" in str(error.expected):      # a knob's own typo stays the knob's
        return error
    if knob in CLI_ONLY:
        return SpecsimInputError(None, None, knob, f"{CLI_ONLY[knob]}: simulate() has no such argument, and every "
                                 f"other keyword argument goes to the policy as a knob ({error.expected})",
                                 plain(knobs[knob]))
    params = [n for n in inspect.signature(simulate).parameters if n not in ("knobs", "trace")]
    match = closest(knob, params)
    if match is None:
        return error
    return SpecsimInputError(None, None, knob, f"one of simulate()'s arguments (closest: '{match}'), or a knob of "
                             f"the policy: every other keyword argument is passed to it ({error.expected})",
                             plain(knobs[knob]))


def _check_time_bound(trace, config: RunConfig) -> None:
    """Refuse arrivals beyond :data:`~specsim.errors.MAX_SIM_TIME_S` once divided by the rate scale.

    Raises:
        SpecsimInputError: naming ``rate_scale`` (``--rate-scale``) when the scale pushes the last arrival
            past the bound, else the trace's source and the first request beyond it.
    """
    if config.concurrency is not None:
        return
    scaled = np.asarray(trace.arrival_s, float) / config.rate_scale
    beyond = np.flatnonzero(~(scaled <= MAX_SIM_TIME_S))
    if beyond.size == 0:
        return
    i = int(beyond[0])
    if config.rate_scale != 1.0:
        least = trace.arrival_s[-1] / MAX_SIM_TIME_S
        raise SpecsimInputError("--rate-scale", None, "rate_scale",
                                f"a scale >= {least:.3g} so the last arrival ({trace.arrival_s[-1]:g} s) stays within "
                                f"specsim's bound on simulated time, {MAX_SIM_TIME_S:g} s", f"{config.rate_scale:g}")
    raise SpecsimInputError(getattr(trace, "file", None), None, f"arrival_s of request {i + 1}",
                            f"a time <= {MAX_SIM_TIME_S:g} s (specsim's bound on simulated time)",
                            f"{trace.arrival_s[i]:g}")


def run(trace, config: RunConfig, profile: StepTimeProfile | None = None,
        drafter_cost: DrafterCost | None = None, progress=None) -> SimulationResult:
    """Build the cluster of ``config``, run it on ``trace``, check invariants and summarise (see :func:`simulate`)."""
    wall0 = time.perf_counter()
    if len(trace) == 0:
        raise SpecsimInputError(getattr(trace, "source", None), None, None, "a non-empty trace", "0 requests")
    _check_time_bound(trace, config)
    _check_closed_loop(trace, config)
    _warm_kernels(trace, config, profile, drafter_cost)
    built = _build(trace, config, profile, drafter_cost)
    window = None if config.concurrency is None else ClosedLoopWindow(np.nan, np.nan)
    cluster = built.cluster
    driver = (cluster.open_loop(config.rate_scale) if window is None
              else cluster.closed_loop(config.concurrency, window))
    cluster.env.process(driver)
    if progress is not None:
        from specsim.progress import progress_ticker
        cluster.env.process(progress_ticker(cluster, len(trace), progress))
    loop0, cpu0 = time.perf_counter(), time.process_time()
    run_until(cluster.env, config.max_sim_s)
    for rep in cluster.replicas:
        rep.report_running()
    timing = {"event_loop_wall_s": time.perf_counter() - loop0, "event_loop_cpu_s": time.process_time() - cpu0}
    result = _summarise(built.trace, config, built, window)
    result.summary.update(timing)
    result.summary["wall_time_s"] = time.perf_counter() - wall0
    return result


_WARMED: set = set()     # (policy, gamma, drafter) whose compiled kernels this process has loaded
_WARM_REQUESTS = 4


def _warm_kernels(trace, config: RunConfig, profile, drafter_cost) -> None:
    """Load the compiled kernels a run will call before its event loop is timed (issue 25).

    The first call of each numba kernel loads it from numba's on-disk cache (0.17-0.25 s each), which
    would otherwise land inside ``event_loop_wall_s``. Once per process and (policy name, gamma, drafter): the
    same configuration runs in open loop on the trace's first :data:`_WARM_REQUESTS` requests and its result
    is dropped (its own cluster, records and counter-based draws: the real run is unchanged).
    """
    key = (config.policy, config.gamma, config.drafter)
    if (not isinstance(config.policy, str) or key in _WARMED or not hasattr(trace, "head")
            or len(trace) <= _WARM_REQUESTS):           # a policy object may keep state: never run it twice
        return
    _WARMED.add(key)
    try:
        run(trace.head(_WARM_REQUESTS), replace(config, concurrency=None, rate_scale=1.0, max_sim_s=None,
                                                record_step_log=False), profile, drafter_cost)
    except SpecsimInputError:
        pass                 # the real run reports its own input errors


#: The horizon rule, as ``specsim run --help`` states it.
HORIZON_RULE = ("the horizon includes T: every event at simulated time <= T is processed (a request that "
                "finishes exactly at T is completed); requests still running after it are unfinished")


def run_until(env, horizon_s: float | None) -> None:
    """Run the SimPy environment ``env`` to the end, or through simulated time ``horizon_s`` inclusive.

    SimPy's ``env.run(until=T)`` stops before the events scheduled at T (its stop event is urgent), so a
    step that ends exactly at T would not be processed; here every event at time <= T is (:data:`HORIZON_RULE`).

    Args:
        env: a ``simpy.Environment``.
        horizon_s: the horizon T in simulated seconds, or None (run until no event is left).
    """
    if horizon_s is None:
        env.run()
        return
    if horizon_s > env.now:
        env.run(until=horizon_s)            # every event strictly before T (and none at T)
    while env.peek() <= horizon_s:          # then the events at T, including those they schedule at T
        env.step()


@dataclass(frozen=True)
class _Built:
    resolved: ResolvedRun
    cluster: Cluster
    acceptance: Any
    trace: Any                                      # the trace as run (outputs cut when the context truncates)
    context: dict                                   # the summary's context_window block
    policies: list = field(default_factory=list)   # the policy objects the replicas run (for their diagnostics)


def _build(trace, config: RunConfig, profile: StepTimeProfile | None, drafter_cost: DrafterCost | None) -> _Built:
    """Resolve the run once (:func:`specsim.run_config.resolve_run`), build its acceptance model and cluster."""
    rr = resolve_run(config, profile, drafter_cost)
    pc = rr.policy
    sc = config.scenario
    with in_scenario_file(sc, config.gamma is not None):       # its gamma beyond the rate table: the file's line
        model = _acceptance(trace, sc, pc.drafter, pc.gamma) if pc.gamma > 0 else None
    trace, context, reasons = _fit_context(trace, context_window(rr.profile, sc.engine.max_model_len,
                                                                 sc.engine.context_overflow))
    runtime = replace(rr.cluster_runtime(), context_reasons=reasons)
    policies: list = []
    cluster = Cluster(trace, runtime, lambda: policy_hooks(_keep(policies, pc.make())), model,
                      rr.profile, rr.drafter_cost, config.record_step_log, horizon_s=config.max_sim_s)
    return _Built(rr, cluster, model, trace, context, policies)


def _fit_context(trace, ctx: ContextWindow) -> tuple[Any, dict[str, Any], dict[int, str]]:
    """Apply the context window (specsim.hardware.context): returns the trace (outputs cut when truncating),
    the summary's ``context_window`` block, and the unservable reason of each request still beyond it."""
    prompt, output = np.asarray(trace.prompt_tokens), np.asarray(trace.output_tokens)
    over = ctx.over(prompt, output)
    cut = ctx.truncated_output(prompt, output)
    if (cut != output).any():
        trace = replace(trace, output_tokens=cut)
    beyond = np.flatnonzero(refused_by_window(ctx, prompt, output))
    reasons = {int(i): ctx.reason(int(prompt[i]), int(cut[i])) for i in beyond}
    block = {"max_model_len": ctx.max_model_len, "source": ctx.source, "overflow": ctx.overflow,
             "model_window": list(ctx.model_window) if ctx.model_window else None,
             "over_context": int(over.sum()), "unservable": len(reasons),
             "truncated_requests": int((cut != output).sum()), "truncated_output_tokens": int((output - cut).sum())}
    return trace, block, reasons


def _context_block(built: _Built, requests: pd.DataFrame) -> dict[str, Any]:
    """The summary's ``context_window`` block: ``unservable`` counts the requests refused for the window that
    arrived (a horizon may end the run before the others are issued); the other counts cover the trace."""
    beyond = list(built.cluster.config.context_reasons)
    refused = int((requests.status.to_numpy()[beyond] == "unservable").sum()) if beyond else 0
    return {**built.context, "unservable": refused}


def _keep(policies: list, policy: Any) -> Any:
    """``policy``, appended to ``policies`` (once)."""
    if not any(p is policy for p in policies):
        policies.append(policy)
    return policy


def policy_diagnostics(policies: list) -> dict[str, Any] | None:
    """The opt-in diagnostics of a run's policy objects (their ``diagnostics()``, e.g. dspark's with
    ``diagnose = true``), numbers summed over the replicas' policies; None when none reports any."""
    found = [d for p in policies if callable(getattr(p, "diagnostics", None)) and (d := p.diagnostics())]
    if not found:
        return None
    out = dict(found[0])
    for d in found[1:]:
        out.update({k: out[k] + v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return out


def _acceptance(trace, sc: Scenario, dname: str, g: int):
    """The acceptance model of the trace's domains; an unknown domain names its first line."""
    domains = np.asarray(trace.domain, dtype=object)
    try:
        model = resolve_acceptance_model(dname, g, domains=tuple(np.unique(domains)),
                                         **sc.acceptance.model_args(dname))
    except SpecsimInputError as e:          # a drafter-specific key: name the drafter's own entry, or offer one
        raise acceptance_error(e, sc, dname) from None
    unknown = ~np.isin(domains, np.array(list(model.alpha), dtype=object))
    if unknown.any():                           # the first line with an unknown domain (not the first such domain)
        line = int(np.flatnonzero(unknown)[0])
        raise SpecsimInputError(getattr(trace, "file", None), line + 1, "domain",
                                f"a domain of the '{dname}' acceptance table {model.domains}", repr(domains[line]))
    return model


def _summarise(trace, config: RunConfig, built: _Built, window: ClosedLoopWindow | None) -> SimulationResult:
    """Check invariants, then the summary, request and step frames of a finished run."""
    cluster, rec = built.cluster, built.cluster.records
    requests = request_frame(rec, cluster.workload, trace)
    _check_invariants(rec, cluster.workload, requests, horizon=config.max_sim_s is not None)
    steps = rec.steps_frame()
    try:
        win = _window(trace, config, window)
    except SpecsimInputError as e:         # no window to measure: keep the whole run for the caller to save
        raise NoWindowError(e.file, e.line, e.field, e.expected, e.got,
                            result=_summary_over(trace, config, built, requests, steps, None)) from None
    return _summary_over(trace, config, built, requests, steps, win)


def _summary_over(trace, config: RunConfig, built: _Built, requests: pd.DataFrame, steps: pd.DataFrame,
                win: tuple[float, float] | None) -> SimulationResult:
    """The summary of a finished run over its window ``win`` (closed loop; None: the whole run), with its
    request and step frames."""
    cluster, rec, sc = built.cluster, built.cluster.records, config.scenario
    summary = summarize(requests, steps, rec.itl_s(None), window=win,
                        decode_gpus=sc.cluster.num_replicas * built.resolved.gpus_per_replica,
                        prefill_gpus=0 if cluster.config.colocated
                        else sc.prefill.num_instances * built.resolved.prefill_gpus_per_instance,
                        mean_in_system=_mean_in_system(cluster, rec, requests),
                        window_itl_s=rec.itl_s(win) if win is not None else None,
                        percentiles=tuple(sorted(set(PERCENTILES) | set(config.metric_percentiles))))
    completed = requests.status == "completed"
    summary.update(memory_summary(rec, requests))
    summary["clipped_verify_lengths"] = rec.num_clips
    summary["undrafted_steps"] = rec.num_undrafted_steps
    summary["load"] = ({"mode": "closed", "concurrency": config.concurrency, "window_start_s": win[0],
                        "window_end_s": win[1]} if win else {"mode": "open", "rate_scale": config.rate_scale}
                       if config.concurrency is None else {"mode": "closed", "concurrency": config.concurrency,
                                                           "window_start_s": None, "window_end_s": None})
    summary["per_domain"] = domain_breakdown(requests, completed)
    if win is not None:
        summary["window"]["per_domain"] = domain_breakdown(requests, measured_mask(requests, summary))
    rr, pc = built.resolved, built.resolved.policy
    summary["profile_range"] = eager_report(range_report(rr.profile, steps, pc.gamma), rr.profile, steps)
    summary["speculation_overhead"] = speculation_overhead(rr.profile) if pc.gamma else None
    idle = (f"gamma 0: nothing is drafted, so policy {pc.name} verifies nothing and runs as no speculation (the "
            "same steps as --policy none)") if not pc.gamma and pc.name != "none" else None
    fixed = (f"policy {pc.name} fixes gamma {pc.gamma} (its drafter's); the gamma {config.gamma} given is not used"
             if config.gamma is not None and config.gamma != pc.gamma and pc.name != "none" else None)
    lockstep = ("every request has the same prompt and output lengths, so a closed loop's users finish and arrive "
                "again together (in lockstep): their prefills queue in bursts, which TTFT and TPS/user then measure; "
                "lengths drawn from a distribution (trace synth --prompt-len uniform:A:B) spread them"
                ) if config.concurrency and config.concurrency > 1 and _fixed_lengths(built.trace) else None
    rates = acceptance_notices(sc, pc, built.acceptance.source if built.acceptance else None, rr.profile)
    summary["acceptance_notice"] = "; ".join(rates) or None          # sweeps repeat it (speculation_notes)
    summary["admission_wait_in_tpot"] = not cluster.config.colocated and sc.prefill.first_token == "prefill"
    queue = decode_queue_notice(summary, None if cluster.config.colocated else sc.prefill.first_token)
    for notice in (rr.gpus_notice, None if cluster.config.colocated else rr.prefill_gpus_notice, idle, fixed, lockstep,
                   *rates, fitted_overhead_notice(sc, rr.profile), queue, given_length_notice(sc, pc, summary)):
        if notice:
            summary["profile_range"].setdefault("notices", []).append(notice)
    diagnostics = policy_diagnostics(built.policies)
    if diagnostics is not None:
        summary["policy_diagnostics"] = diagnostics
    summary.update(policy=pc.name, drafter=pc.drafter, gamma=pc.gamma, seed=int(config.seed))
    summary["context_window"] = _context_block(built, requests)
    summary["kv_capacity"] = rr.kv.as_dict()
    summary["provenance"] = _provenance(trace, config, built)
    table = table_report(built.policies)
    if table is not None:
        summary["scheduler_cost_table"] = table
    log = rec.step_log_frame(trace.request_id, cluster.workload.domain) if config.record_step_log else None
    if config.concurrency is None and "stage" in (getattr(trace, "extra", None) or {}):   # load stages (issue 23)
        summary["stages"] = stage_breakdown(requests, steps, trace, config.rate_scale,
                                            tuple(sorted(set(PERCENTILES) | set(config.metric_percentiles))),
                                            horizon_s=config.max_sim_s)
    if built.resolved.policy.gamma > 0:       # vLLM's spec_decode_* and DeepSpec's names for the run (issue 23)
        summary["acceptance_exchange"] = acceptance_report(log, steps)
    return SimulationResult(summary, requests, steps, log)


def _provenance(trace, config: RunConfig, built: _Built) -> dict[str, Any]:
    """Where a run's figures come from, with every effective value (not only the scenario's).

    ``scenario`` is the resolved scenario as the run used it: its ``policy.knobs`` hold the knob values the
    policy ran with (CLI and API knobs included) and ``profile.lookup`` the lookup rule applied;
    ``scenario_hash`` is the hash of the scenario as given. ``effective`` lists the run's own settings.
    """
    sc, prof, pc = config.scenario, built.resolved.profile, built.resolved.policy
    knobs = pc.knobs
    scen = sc.to_dict()
    scen["policy"]["knobs"] = {**scen["policy"].get("knobs", {}), **knobs}
    scen["profile"]["lookup"] = prof.lookup
    scen["engine"]["gamma"] = pc.gamma
    scen["drafter"]["name"] = pc.drafter
    return {
        "specsim_version": specsim.__version__,
        "scenario": scen, "scenario_hash": sc.hash(), "scenario_source": sc.source,
        "effective": {
            "policy": pc.name, "knobs": knobs, "drafter": pc.drafter, "gamma": pc.gamma,
            "seed": int(config.seed), "concurrency": config.concurrency,
            "rate_scale": config.rate_scale if config.concurrency is None else None,
            "max_sim_s": config.max_sim_s, "horizon_rule": HORIZON_RULE if config.max_sim_s is not None else None,
            "profile": {"source": prof.source, "lookup": prof.lookup, "extrapolate": prof.extrapolate},
        },
        "trace": getattr(trace, "source", None),
        "trace_hash": trace.content_hash() if hasattr(trace, "content_hash") else None,
        "profile_source": prof.source, "profile_metadata": prof.provenance(),
        "acceptance_source": built.acceptance.source if built.acceptance else None,
    }


@dataclass
class NoWindowError(SpecsimInputError):
    """A closed-loop run that ended without a measurement window (the horizon came first, or the trace was too
    short): the input error, with the whole run kept in ``result`` (a :class:`SimulationResult` whose summary
    covers the whole run, ``load.window_start_s`` None), so that a caller can save what was computed.

    Attributes:
        result: the run's records and its whole-run summary.
    """

    result: Any = None


def _check_closed_loop(trace, config: RunConfig) -> None:
    """Refuse, before the run, a closed loop whose measurement window cannot open (nothing is computed yet).

    The window opens when every one of the N users has completed a request and closes when the last of the n
    requests (conversations: their first turns) is issued. By the time the last user completes its first
    request, each of the other N - 1 has issued another, so 2N - 1 are out, and the last user then issues one
    more at that instant: with n <= 2N the window closes no later than it opens (:func:`_window` would refuse it
    after the whole run). A longer trace can still close early when some users are much faster than others;
    :func:`_window` catches that after the run. In a session trace a user's request is a whole conversation
    (:func:`specsim.workload.extra.conversation_counts`, the cluster's rule), so n counts conversations.

    Raises:
        SpecsimInputError: ``n <= 2 x concurrency``.
    """
    from specsim.workload.extra import conversation_counts

    users = config.concurrency
    if users is None:
        return
    convs = conversation_counts(trace)
    n = len(trace) if convs is None else int(convs[-1])
    if n > 2 * users:
        return
    what, whole, more = (("requests", "", "") if convs is None else
                         ("conversations", " (a user runs a whole conversation before taking the next)",
                          ", a trace with more conversations,"))
    raise SpecsimInputError(getattr(trace, "source", None), None, "concurrency",
                            f"more than {2 * users} {what} (twice the users) for a closed-loop window with {users} "
                            f"users{whole}: use more requests (--num-requests; in a sweep --requests-per-user K){more} "
                            "or fewer users", f"{n} {what}" + ("" if convs is None else f" in {len(trace)} requests"))


def _window(trace, config: RunConfig, window: ClosedLoopWindow | None) -> tuple[float, float] | None:
    """The closed-loop window (start_s, end_s), or None in open loop."""
    if window is None:
        return None
    if config.max_sim_s is not None and not np.isfinite(window.end_s):
        opened = (f"it opened at {window.start_s:.3g} s, when every user had completed one request"
                  if np.isfinite(window.start_s) else "it had not even opened: not every user completed a request")
        raise SpecsimInputError(None, None, "max_sim_s", "a horizon after the closed loop's window closes (when "
                                f"the last of the {len(trace)} requests is issued; {opened}): raise --max-sim-s "
                                "or use fewer requests (--num-requests; in a sweep --requests-per-user K)",
                                f"{config.max_sim_s:g} s")
    if not (np.isfinite(window.start_s) and np.isfinite(window.end_s)) or window.end_s <= window.start_s:
        units, first, why = _closed_loop_units(trace)
        raise SpecsimInputError(getattr(trace, "source", None), None, "concurrency",
                                f"a trace long enough for a closed-loop window with {config.concurrency} users "
                                f"(the window closes when the last of {units} is issued, before every user "
                                f"completed {first}{why}); use more requests (--num-requests; in a sweep "
                                "--requests-per-user K) or fewer users")
    return (window.start_s, window.end_s)


def _closed_loop_units(trace) -> tuple[str, str, str]:
    """What a closed-loop user takes, in words: (``"160 requests"``, ``"one request"``, ""), or in a session trace
    (``"40 conversations (160 requests)"``, ``"its first conversation"``, why the window needs more of them)."""
    from specsim.workload.extra import conversation_counts

    convs = conversation_counts(trace)
    if convs is None:
        return f"{len(trace)} requests", "one request", ""
    why = ("; a user completes a whole conversation, think times included, before taking the next, so conversations "
           "of unequal length need several times the users: docs/workloads.md")
    return f"{int(convs[-1])} conversations ({len(trace)} requests)", "its first conversation", why


def _mean_in_system(cluster: Cluster, rec, requests: pd.DataFrame) -> float | None:
    """Open loop: the time-average number of requests in the system (Little's law), or None."""
    if not (requests.status == "completed").any():
        return None
    t0, t1 = float(np.nanmin(rec.arrival_s)), float(np.nanmax(rec.done_s))
    area = cluster.integrate_until(t1)
    return area / (t1 - t0) if t1 > t0 else None


def _check_invariants(rec, workload, requests: pd.DataFrame, horizon: bool) -> None:
    """Every issued request completed (or is unfinished only under an explicit horizon); tokens conserved."""
    st = requests.status
    if not horizon and (st == "unfinished").any():
        n = int((st == "unfinished").sum())
        raise RuntimeError(f"internal error: {n} requests neither completed nor unservable without a horizon")
    if not horizon and (st == "not_issued").any():
        raise RuntimeError("internal error: some trace requests were never issued")
    done = (st == "completed").to_numpy()
    emitted, output = rec.emitted_tokens, workload.output
    counted = rec.decode_steps + rec.accepted_drafts + 1 + rec.recompute_emissions   # counted independently
    if np.any(counted[done] != emitted[done]):
        bad = int(np.flatnonzero(done & (counted != emitted))[0])
        raise RuntimeError(f"internal error: request {bad}'s decode counters give {counted[bad]} tokens, "
                           f"its emissions {emitted[bad]}")
    if np.any(emitted[done] != output[done]):
        bad = int(np.flatnonzero(done & (emitted != output))[0])
        raise RuntimeError(f"internal error: request {bad} emitted {emitted[bad]} tokens, expected {output[bad]}")
    if np.any(emitted > output):
        raise RuntimeError("internal error: a request emitted more tokens than its output length")
    if np.any(requests.ttft_s[done] < requests.prefill_s[done] - 1e-12):
        raise RuntimeError("internal error: a request's TTFT is shorter than its prefill time")
