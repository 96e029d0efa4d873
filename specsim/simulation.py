"""One simulation run end to end: resolve the configuration, run the cluster, check invariants, summarise.

This is the library form of ``specsim run``; notebooks call :func:`simulate` directly.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import specsim
from specsim.engine.cluster import ClosedLoopWindow, Cluster, ClusterConfig
from specsim.engine.replica import ReplicaConfig
from specsim.errors import SpecsimInputError
from specsim.acceptance.exchange import acceptance_report
from specsim.acceptance.fitting import resolve_acceptance_model
from specsim.hardware.drafter import DrafterCost
from specsim.hardware.drafter import (DRAFTER_FAMILY_OF, DRAFTER_LAYERS, ShapedDrafterCost, drafter_kv_fraction,
                                      shaped_drafter_cost)
from specsim.hardware.drafter import drafter_cost as default_drafter_cost
from specsim.hardware.profile import StepTimeProfile, range_report, resolve_profile
from specsim.hardware.stepmodel import step_model_of
from specsim.engine.kv import DRAFTER_KV_FRACTION
from specsim.hardware.kv_capacity import kv_capacity
from specsim.analysis.metrics import PERCENTILES, domain_breakdown, memory_summary, request_frame, summarize
from specsim.policies import make_policy, policy_knobs
from specsim.policies.base import as_policy, policy_hooks
from specsim.policies.cost_table import table_report
from specsim.scenario import Scenario, load_scenario
from specsim.analysis.stage_metrics import stage_breakdown
from specsim.analysis.steplog import write_step_log


@dataclass
class SimulationResult:
    """Everything one run produced.

    Attributes:
        summary: flat metrics dict (specsim.analysis.metrics names) plus policy, seed, wall_time_s, provenance.
        requests: one row per trace request (specsim.analysis.metrics.request_frame).
        steps: one row per engine step (specsim.engine.cluster.STEP_COLUMNS).
        step_log: per (step, request) rows in the specsim.analysis.steplog format, or None when not recorded.
    """

    summary: dict[str, Any]
    requests: pd.DataFrame
    steps: pd.DataFrame
    step_log: pd.DataFrame | None = None

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


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    raise TypeError(type(x))


def resolve_run(policy: str | Any, scenario: Scenario, gamma: int | None, drafter: str | None,
                profile: StepTimeProfile | None = None, **knobs: Any):
    """Resolve the policy object factory, drafter, gamma and profile of a run.

    ``mtp1`` uses the MTP drafter with gamma forced to 1; ``none`` no drafter (gamma 0); every other
    policy the scenario's drafter unless ``drafter`` overrides it. Knobs are the scenario's ``[policy.knobs]``
    table (the knobs the policy declares) updated with ``knobs`` (each must be declared: SpecsimInputError).

    Returns:
        (policy_factory, policy_name, drafter_name, gamma, profile)
    """
    knobs = {**_scenario_knobs(scenario, policy), **knobs}
    if isinstance(policy, str):
        probe = make_policy(policy, gamma=gamma, **knobs)
        factory = lambda: make_policy(policy, gamma=gamma, **knobs)  # noqa: E731
    else:
        probe = as_policy(policy)
        factory = lambda: probe  # noqa: E731  (a user object is shared: it must be stateless or per-run)
    forced_drafter = getattr(probe, "drafter", None)
    dname = forced_drafter or drafter or scenario.drafter.name
    if dname == "none":
        g = 0
    elif getattr(probe, "gamma", None) is not None and forced_drafter:
        g = int(probe.gamma)
    else:
        g = scenario.engine.gamma if gamma is None else int(gamma)
    prof = profile or resolve_profile(scenario.profile.name, scenario.profile.lookup)
    chunk = scenario.prefill.chunk_tokens            # colocated: mixed steps reach it (prefill shares the steps)
    if scenario.prefill.mode == "colocated" and prof.batch_limit is not None and prof.max_batch_tokens < chunk:
        raise SpecsimInputError(prof.source, None, "batch_tokens", f"a profile reaching the scenario's prefill "
                                f"chunk of {chunk} tokens (prefill.chunk_tokens; build it with profile analytic "
                                f"--max-batch-tokens {chunk} or more)", f"last size {prof.max_batch_tokens}")
    return factory, probe.name, dname, g, prof


def _scenario_knobs(scenario: Scenario, policy: str | Any) -> dict[str, Any]:
    """The scenario's ``[policy.knobs]`` that ``policy`` declares (the table is shared by every policy of a
    scenario, as in a sweep; knobs given to a run directly must all be declared)."""
    declared = policy_knobs(policy)
    return {k: v for k, v in scenario.policy.knobs.items() if k in declared}


@dataclass(frozen=True)
class RunConfig:
    """One run's configuration, validated on construction (every problem raises SpecsimInputError).

    Attributes:
        policy: a registered name, ``path/file.py:Name``, or a policy object / function.
        scenario: the resolved scenario.
        seed: the one seed of every random draw (request r's draws: SeedSequence([seed, r])).
        concurrency: closed loop with this many users; None = open loop at the trace's arrivals.
        rate_scale: open loop only: arrival times are divided by it (2.0 = twice the rate).
        max_sim_s: explicit horizon T in simulated seconds, or None (run until every request leaves); T is
            included (:data:`HORIZON_RULE`).
        gamma, drafter: override the scenario's (see :func:`resolve_run`).
        knobs: policy knobs, over the scenario's ``[policy.knobs]``.
        record_step_log: keep per (step, request) rows.
        metric_percentiles: extra latency percentiles to report (vLLM's ``--metric-percentiles``), kept beside
            :data:`specsim.analysis.metrics.PERCENTILES` (other tools read those keys).
    """

    policy: Any = "dspark"
    scenario: Scenario = field(default_factory=load_scenario)
    seed: int = 0
    concurrency: int | None = None
    rate_scale: float = 1.0
    max_sim_s: float | None = None
    gamma: int | None = None
    drafter: str | None = None
    knobs: dict = field(default_factory=dict)
    record_step_log: bool = False
    metric_percentiles: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        def bad(name: str, want: str, got: Any) -> None:
            raise SpecsimInputError(None, None, name, want, repr(got))
        if not (isinstance(self.rate_scale, (int, float)) and np.isfinite(self.rate_scale) and self.rate_scale > 0):
            bad("rate_scale", "a finite value > 0", self.rate_scale)
        if self.gamma is not None and not 0 <= self.gamma <= 64:
            bad("gamma", "an int in [0, 64]", self.gamma)
        if self.max_sim_s is not None and not (np.isfinite(self.max_sim_s) and self.max_sim_s > 0):
            bad("max_sim_s", "a finite time > 0 s", self.max_sim_s)
        if self.concurrency is not None and self.concurrency < 1:
            bad("concurrency", "an int >= 1", self.concurrency)
        if self.concurrency is not None and self.rate_scale != 1.0:
            raise SpecsimInputError(None, None, "rate_scale", "rate_scale applies to open loop only (no "
                                    "concurrency)", f"rate_scale {self.rate_scale:g} with concurrency "
                                    f"{self.concurrency}")


def simulate(trace, policy: str | Any = "dspark", scenario: Scenario | None = None, seed: int = 0,
             concurrency: int | None = None, rate_scale: float = 1.0, max_sim_s: float | None = None,
             gamma: int | None = None, drafter: str | None = None, profile: StepTimeProfile | None = None,
             record_step_log: bool = False, drafter_cost: DrafterCost | None = None,
             progress=None, metric_percentiles: tuple[float, ...] = (), **knobs: Any) -> SimulationResult:
    """Simulate ``trace`` on the scenario's cluster under ``policy`` (the arguments of :class:`RunConfig`).

    Args:
        trace: a :class:`specsim.workload.trace.Trace`.
        profile: override the scenario's step-time profile.
        drafter_cost: a measured drafter cost model replacing the drafter's defaults (the replay uses it).
        progress: a :data:`specsim.progress.ProgressCallback` told (done, total, simulated s) as the run goes.
        Every other argument: see :class:`RunConfig` (``knobs`` are policy knobs such as ``threshold``).

    Raises:
        SpecsimInputError: bad configuration or a domain missing from the acceptance tables.
        RuntimeError: an internal invariant broke (a request lost or over-emitted).
    """
    config = RunConfig(policy=policy, scenario=scenario or load_scenario(), seed=seed, concurrency=concurrency,
                       rate_scale=rate_scale, max_sim_s=max_sim_s, gamma=gamma, drafter=drafter, knobs=knobs,
                       record_step_log=record_step_log, metric_percentiles=tuple(metric_percentiles))
    return run(trace, config, profile=profile, drafter_cost=drafter_cost, progress=progress)


def run(trace, config: RunConfig, profile: StepTimeProfile | None = None,
        drafter_cost: DrafterCost | None = None, progress=None) -> SimulationResult:
    """Build the cluster of ``config``, run it on ``trace``, check invariants and summarise (see :func:`simulate`)."""
    wall0 = time.perf_counter()
    if len(trace) == 0:
        raise SpecsimInputError(getattr(trace, "source", None), None, None, "a non-empty trace", "0 requests")
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
    result = _summarise(trace, config, built, window)
    result.summary.update(timing)
    result.summary["wall_time_s"] = time.perf_counter() - wall0
    return result


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
    cluster: Cluster
    policy_name: str
    drafter_name: str
    gamma: int
    profile: StepTimeProfile
    acceptance: Any
    policies: list = field(default_factory=list)   # the policy objects the replicas run (for their diagnostics)


def _build(trace, config: RunConfig, profile: StepTimeProfile | None, drafter_cost: DrafterCost | None) -> _Built:
    """Resolve the policy, drafter, acceptance model and profile, and build the cluster."""
    sc = config.scenario
    factory, pname, dname, g, prof = resolve_run(config.policy, sc, config.gamma, config.drafter, profile,
                                                 **config.knobs)
    cost = _drafter_cost(sc, dname, drafter_cost, prof)
    model = _acceptance(trace, sc, dname, g) if g > 0 else None
    cc = cluster_config(sc, g, dname, config.seed, prof)
    policies: list = []
    cluster = Cluster(trace, cc, lambda: policy_hooks(_keep(policies, factory())), model, prof, cost,
                      config.record_step_log)
    return _Built(cluster, pname, dname, g, prof, model, policies)


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


def _drafter_cost(sc: Scenario, dname: str, measured: DrafterCost | None,
                  profile: StepTimeProfile) -> DrafterCost | ShapedDrafterCost:
    """The drafter's cost model, first that applies: the scenario's explicit fractions (0 allowed), the
    measured one (replay), the drafter's shape through the profile's step model (profiles built by
    :mod:`specsim.hardware.stepmodel`), else the family's default fractions (plain tables)."""
    dc = sc.drafter
    overrides = {k: getattr(dc, k) for k in ("base_fraction", "per_draft_fraction") if getattr(dc, k) is not None}
    if dname == dc.name and overrides:
        return replace(default_drafter_cost(dname), **overrides)
    if measured is not None:
        return measured
    target = step_model_of(profile)
    if target is not None and dname in DRAFTER_LAYERS:
        return shaped_drafter_cost(dname, target, dc.layers if dname == dc.name else None)
    return default_drafter_cost(dname)


def _drafter_kv_fraction(sc: Scenario, dname: str, profile: StepTimeProfile | None) -> float:
    """The drafter's KV per target KV token: from the two shapes where the profile has a step model (issue 20),
    else the family's constant (:data:`specsim.engine.kv.DRAFTER_KV_FRACTION`, plain tables)."""
    target = step_model_of(profile) if profile is not None else None
    if target is not None and dname in DRAFTER_LAYERS:
        return drafter_kv_fraction(dname, target, sc.drafter.layers if dname == sc.drafter.name else None)
    return DRAFTER_KV_FRACTION[DRAFTER_FAMILY_OF[dname]]


def _acceptance(trace, sc: Scenario, dname: str, g: int):
    """The acceptance model of the trace's domains; an unknown domain names its first line."""
    domains = np.asarray(trace.domain, dtype=object)
    model = resolve_acceptance_model(dname, g, domains=tuple(np.unique(domains)), **sc.to_dict()["acceptance"])
    for dom in np.unique(domains):
        if dom not in model.alpha:
            line = int(np.flatnonzero(domains == dom)[0]) + 1
            raise SpecsimInputError(getattr(trace, "source", None), line, "domain",
                                    f"a domain of the '{dname}' acceptance table {model.domains}", repr(dom))
    return model


def cluster_config(sc: Scenario, gamma: int, drafter: str, seed: int,
                   profile: StepTimeProfile | None = None) -> ClusterConfig:
    """The cluster and replica settings of scenario ``sc`` for a run with ``gamma`` drafts of ``drafter``
    (``profile``: the run's step-time profile, whose model shape a derived KV capacity needs)."""
    c, e = sc.cluster, sc.engine
    block = c.block_size
    kv_fraction = sc.drafter.kv_fraction
    if kv_fraction is None:
        kv_fraction = _drafter_kv_fraction(sc, drafter, profile) if gamma > 0 else 0.0
    kv_tokens = kv_capacity(sc, profile, gamma, float(kv_fraction)).tokens
    replicas = tuple(ReplicaConfig(
        index=i, gamma=gamma, colocated=sc.prefill.mode == "colocated", max_num_seqs=c.max_num_seqs,
        kv_allocation=c.kv_allocation, num_blocks=kv_tokens // block,
        block_size=block, prefix_caching=c.prefix_caching,
        chunk_tokens=sc.prefill.chunk_tokens, host_overhead_s=e.host_overhead_s,
        emission_overhead_s=e.emission_overhead_s, drafter_kv_fraction=float(kv_fraction))
        for i in range(c.num_replicas))
    return ClusterConfig(
        replicas=replicas, kv_capacity_tokens=kv_tokens, router=c.router, colocated=sc.prefill.mode == "colocated",
        num_prefill_instances=sc.prefill.num_instances, prefill_time_per_token_s=sc.prefill.time_per_token_s,
        prefill_chunk_tokens=sc.prefill.chunk_tokens,
        request_overhead_s=e.request_overhead_s, seed=int(seed))


def _summarise(trace, config: RunConfig, built: _Built, window: ClosedLoopWindow | None) -> SimulationResult:
    """Check invariants, then the summary, request and step frames of a finished run."""
    cluster, rec, sc = built.cluster, built.cluster.records, config.scenario
    requests = request_frame(rec, cluster.workload, trace)
    _check_invariants(rec, cluster.workload, requests, horizon=config.max_sim_s is not None)
    steps = rec.steps_frame()
    win = _window(trace, config, window)
    summary = summarize(requests, steps, rec.itl_s(None), window=win,
                        decode_gpus=sc.cluster.num_replicas * sc.cluster.gpus_per_replica,
                        prefill_gpus=0 if cluster.config.colocated
                        else sc.prefill.num_instances * sc.prefill.gpus_per_instance,
                        mean_in_system=_mean_in_system(cluster, rec, requests),
                        window_itl_s=rec.itl_s(win) if win is not None else None,
                        percentiles=tuple(sorted(set(PERCENTILES) | set(config.metric_percentiles))))
    completed = requests.status == "completed"
    summary.update(memory_summary(rec, requests))
    summary["clipped_verify_lengths"] = rec.num_clips
    summary["load"] = ({"mode": "closed", "concurrency": config.concurrency, "window_start_s": win[0],
                        "window_end_s": win[1]} if win else {"mode": "open", "rate_scale": config.rate_scale})
    summary["per_domain"] = domain_breakdown(requests, completed)
    if win is not None:
        summary["window"]["per_domain"] = domain_breakdown(
            requests, completed & (requests.arrival_s >= win[0]) & (requests.arrival_s <= win[1]))
    summary["profile_range"] = range_report(built.profile, steps, built.gamma)   # padded / capped steps
    diagnostics = policy_diagnostics(built.policies)
    if diagnostics is not None:
        summary["policy_diagnostics"] = diagnostics
    summary.update(policy=built.policy_name, drafter=built.drafter_name, gamma=built.gamma, seed=int(config.seed))
    summary["kv_capacity"] = kv_capacity(sc, built.profile, built.gamma,
                                         cluster.config.replicas[0].drafter_kv_fraction).as_dict()
    summary["provenance"] = _provenance(trace, config, built)
    table = table_report(built.policies)
    if table is not None:
        summary["scheduler_cost_table"] = table
    log = rec.step_log_frame(trace.request_id, cluster.workload.domain) if config.record_step_log else None
    if config.concurrency is None and "stage" in (getattr(trace, "extra", None) or {}):   # load stages (issue 23)
        summary["stages"] = stage_breakdown(requests, steps, trace, config.rate_scale,
                                            tuple(sorted(set(PERCENTILES) | set(config.metric_percentiles))))
    if built.gamma > 0:                       # vLLM's spec_decode_* and DeepSpec's names for the run (issue 23)
        summary["acceptance_exchange"] = acceptance_report(log, steps)
    return SimulationResult(summary, requests, steps, log)


def effective_knobs(policy: str | Any, scenario: Scenario, knobs: dict[str, Any]) -> dict[str, Any]:
    """The knob values a run's policy uses: its declared defaults, then the scenario's ``[policy.knobs]``
    (those it declares), then ``knobs`` (the run's own, e.g. ``--threshold``)."""
    try:
        declared = dict(policy_knobs(policy))
    except SpecsimInputError:
        declared = {}
    return {**declared, **_scenario_knobs(scenario, policy), **knobs}


def _provenance(trace, config: RunConfig, built: _Built) -> dict[str, Any]:
    """Where a run's figures come from, with every effective value (not only the scenario's).

    ``scenario`` is the resolved scenario as the run used it: its ``policy.knobs`` hold the knob values the
    policy ran with (CLI and API knobs included) and ``profile.lookup`` the lookup rule applied;
    ``scenario_hash`` is the hash of the scenario as given. ``effective`` lists the run's own settings.
    """
    sc, prof = config.scenario, built.profile
    knobs = effective_knobs(config.policy, sc, config.knobs)
    scen = sc.to_dict()
    scen["policy"]["knobs"] = {**scen["policy"].get("knobs", {}), **knobs}
    scen["profile"]["lookup"] = prof.lookup
    scen["engine"]["gamma"] = built.gamma
    scen["drafter"]["name"] = built.drafter_name
    return {
        "specsim_version": specsim.__version__,
        "scenario": scen, "scenario_hash": sc.hash(), "scenario_source": sc.source,
        "effective": {
            "policy": built.policy_name, "knobs": knobs, "drafter": built.drafter_name, "gamma": built.gamma,
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


def _window(trace, config: RunConfig, window: ClosedLoopWindow | None) -> tuple[float, float] | None:
    """The closed-loop window (start_s, end_s), or None in open loop."""
    if window is None:
        return None
    if not (np.isfinite(window.start_s) and np.isfinite(window.end_s)) or window.end_s <= window.start_s:
        raise SpecsimInputError(getattr(trace, "source", None), None, "concurrency",
                                f"a trace long enough for a closed-loop window with {config.concurrency} users "
                                f"(the window closes when the last of {len(trace)} requests is issued, "
                                "before every user completed one request); use more requests or fewer users")
    return (window.start_s, window.end_s)


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
