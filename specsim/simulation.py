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
from specsim.cluster import ClosedLoopWindow, Cluster
from specsim.errors import SpecsimInputError
from specsim.fitting import resolve_acceptance_model
from specsim.hardware.drafter import DrafterCost
from specsim.hardware.drafter import drafter_cost as default_drafter_cost
from specsim.hardware.profile import StepTimeProfile, resolve_profile
from specsim.metrics import domain_breakdown, request_frame, summarize
from specsim.policies import make_policy, policy_knobs
from specsim.scenario import Scenario, load_scenario
from specsim.steplog import write_step_log


@dataclass
class SimulationResult:
    """Everything one run produced.

    Attributes:
        summary: flat metrics dict (specsim.metrics names) plus policy, seed, wall_time_s, provenance.
        requests: one row per trace request (specsim.metrics.request_frame).
        steps: one row per engine step (specsim.cluster.STEP_COLUMNS).
        step_log: per (step, request) rows in the specsim.steplog format, or None when not recorded.
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
    policy the scenario's drafter unless ``drafter`` overrides it.

    Returns:
        (policy_factory, policy_name, drafter_name, gamma, profile)
    """
    if "threshold" in policy_knobs(policy):      # the scenario's threshold reaches only policies with that knob
        knobs.setdefault("threshold", scenario.policy.threshold)
    if isinstance(policy, str):
        probe = make_policy(policy, gamma=gamma, **knobs)
        factory = lambda: make_policy(policy, gamma=gamma, **knobs)  # noqa: E731
    else:
        from specsim.policies.base import as_policy
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
    prof = profile or resolve_profile(scenario.profile.name, scenario.profile.lookup or None)
    return factory, probe.name, dname, g, prof


def simulate(trace, policy: str | Any = "dspark", scenario: Scenario | None = None, seed: int = 0,
             concurrency: int | None = None, rate_scale: float = 1.0, max_sim_s: float | None = None,
             gamma: int | None = None, drafter: str | None = None, profile: StepTimeProfile | None = None,
             record_step_log: bool = False, drafter_cost: DrafterCost | None = None,
             **knobs: Any) -> SimulationResult:
    """Simulate ``trace`` on the scenario's cluster under ``policy``.

    Args:
        trace: a :class:`specsim.trace.Trace`.
        policy: a registered name, ``path/file.py:Name``, or a policy object / function.
        scenario: resolved scenario (default: the bundled defaults).
        seed: the one seed of every random draw (request r's draws: SeedSequence([seed, r])).
        concurrency: closed loop with this many users; None = open loop at the trace's arrivals.
        rate_scale: open loop only: arrival times are divided by it (2.0 = twice the rate).
        max_sim_s: explicit horizon in simulated seconds; requests still in the system are ``unfinished``.
        gamma, drafter: override the scenario's (see :func:`resolve_run`).
        profile: override the scenario's step-time profile.
        record_step_log: keep per (step, request) rows (needed for ``--out`` step logs and calibration).
        drafter_cost: a measured drafter cost model replacing the drafter's defaults (the replay uses it).
        knobs: policy knobs (``threshold`` ...).

    Raises:
        SpecsimInputError: bad configuration or a domain missing from the acceptance tables.
        RuntimeError: an internal invariant broke (a request lost or over-emitted).
    """
    wall0 = time.perf_counter()
    scenario = scenario or load_scenario()
    if len(trace) == 0:
        raise SpecsimInputError(getattr(trace, "source", None), None, None, "a non-empty trace", "0 requests")
    if rate_scale <= 0 or not np.isfinite(rate_scale):
        raise SpecsimInputError("--rate-scale", None, "rate_scale", "a finite value > 0", repr(rate_scale))
    if gamma is not None and not 0 <= gamma <= 64:
        raise SpecsimInputError("--gamma", None, "gamma", "an int in [0, 64]", repr(gamma))
    if max_sim_s is not None and not (np.isfinite(max_sim_s) and max_sim_s > 0):
        raise SpecsimInputError("--max-sim-s", None, "max_sim_s", "a finite time > 0 s", repr(max_sim_s))
    if concurrency is not None and concurrency < 1:
        raise SpecsimInputError("--concurrency", None, "concurrency", "an int >= 1", repr(concurrency))
    factory, pname, dname, g, prof = resolve_run(policy, scenario, gamma, drafter, profile, **knobs)
    cost = default_drafter_cost(dname) if drafter_cost is None else drafter_cost
    dc = scenario.drafter
    if drafter_cost is None and dname == dc.name and (dc.base_fraction >= 0 or dc.per_draft_fraction >= 0):
        cost = replace(cost, **{k: getattr(dc, k) for k in ("base_fraction", "per_draft_fraction")
                                if getattr(dc, k) >= 0})
    model = None
    if g > 0:
        domains = np.asarray(trace.domain, dtype=object)
        model = resolve_acceptance_model(dname, g, domains=tuple(np.unique(domains)),
                                         **scenario.to_dict()["acceptance"])
        for dom in np.unique(domains):
            if dom not in model.alpha:
                line = int(np.flatnonzero(domains == dom)[0]) + 1
                raise SpecsimInputError(getattr(trace, "source", None), line, "domain",
                                        f"a domain of the '{dname}' acceptance table {model.domains}", repr(dom))
    cluster = Cluster(trace, scenario, factory, g, model, prof, cost, seed, record_step_log)
    window = None
    if concurrency is None:
        cluster.env.process(cluster.open_loop(rate_scale))
    else:
        window = ClosedLoopWindow(np.nan, np.nan)
        cluster.env.process(cluster.closed_loop(concurrency, window))
    loop0, cpu0 = time.perf_counter(), time.process_time()
    cluster.env.run(until=max_sim_s)
    loop_wall, loop_cpu = time.perf_counter() - loop0, time.process_time() - cpu0
    requests = request_frame(cluster)
    _check_invariants(cluster, requests, horizon=max_sim_s is not None or False)
    steps = cluster.steps_frame()
    win = None
    if window is not None:
        if not (np.isfinite(window.start_s) and np.isfinite(window.end_s)) or window.end_s <= window.start_s:
            raise SpecsimInputError(getattr(trace, "source", None), None, "concurrency",
                                    f"a trace long enough for a closed-loop window with {concurrency} users "
                                    f"(the window closes when the last of {len(trace)} requests is issued, "
                                    "before every user completed one request); use more requests or fewer users")
        win = (window.start_s, window.end_s)
    mean_l = None
    if window is None and (requests.status == "completed").any():
        t0 = float(np.nanmin(cluster.arrival_s))
        t1 = float(np.nanmax(cluster.done_s))
        area = cluster.integrate_until(t1)
        mean_l = area / (t1 - t0) if t1 > t0 else None
    sc = scenario
    summary = summarize(requests, steps, cluster.itl_s(win), window=win,
                        decode_gpus=sc.cluster.num_replicas * sc.cluster.gpus_per_replica,
                        prefill_gpus=0 if cluster.colocated else sc.prefill.num_instances * sc.prefill.gpus_per_instance,
                        mean_in_system=mean_l)
    measured = requests.status == "completed"
    if win is not None:
        measured &= (requests.arrival_s >= win[0]) & (requests.arrival_s <= win[1])
    summary["clipped_verify_lengths"] = cluster.num_clips
    summary["load"] = ({"mode": "closed", "concurrency": concurrency, "window_start_s": win[0], "window_end_s": win[1]}
                       if win else {"mode": "open", "rate_scale": rate_scale})
    summary["per_domain"] = domain_breakdown(requests, measured)
    summary["policy"] = pname
    summary["drafter"] = dname
    summary["gamma"] = g
    summary["seed"] = int(seed)
    summary["provenance"] = {
        "specsim_version": specsim.__version__,
        "scenario": sc.to_dict(), "scenario_hash": sc.hash(), "scenario_source": sc.source,
        "trace": getattr(trace, "source", None),
        "trace_hash": trace.content_hash() if hasattr(trace, "content_hash") else None,
        "profile_source": prof.source, "profile_metadata": prof.metadata,
        "acceptance_source": model.source if model else None,
    }
    summary["event_loop_wall_s"] = loop_wall
    summary["event_loop_cpu_s"] = loop_cpu
    summary["wall_time_s"] = time.perf_counter() - wall0
    log = cluster.step_log_frame() if record_step_log else None
    return SimulationResult(summary, requests, steps, log)


def _check_invariants(cluster: Cluster, requests: pd.DataFrame, horizon: bool) -> None:
    """Every issued request completed (or is unfinished only under an explicit horizon); tokens conserved."""
    st = requests.status
    if not horizon and (st == "unfinished").any():
        n = int((st == "unfinished").sum())
        raise RuntimeError(f"internal error: {n} requests neither completed nor unservable without a horizon")
    if not horizon and (st == "not_issued").any():
        raise RuntimeError("internal error: some trace requests were never issued")
    done = (st == "completed").to_numpy()
    emitted = cluster.req_accepted + cluster.req_steps + 1  # decode emissions + the prefill token
    if np.any(emitted[done] != cluster.output[done]):
        bad = int(np.flatnonzero(done & (emitted != cluster.output))[0])
        raise RuntimeError(f"internal error: request {bad} emitted {emitted[bad]} tokens, "
                           f"expected {cluster.output[bad]}")
    if np.any(requests.ttft_s[done] < requests.prefill_s[done] - 1e-12):
        raise RuntimeError("internal error: a request's TTFT is shorter than its prefill time")
