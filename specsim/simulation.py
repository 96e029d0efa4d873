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
from specsim.cluster import ClosedLoopWindow, Cluster, ClusterConfig
from specsim.engine import ReplicaConfig
from specsim.errors import SpecsimInputError
from specsim.fitting import resolve_acceptance_model
from specsim.hardware.drafter import DrafterCost
from specsim.hardware.drafter import DRAFTER_FAMILY_OF
from specsim.hardware.drafter import drafter_cost as default_drafter_cost
from specsim.hardware.profile import StepTimeProfile, resolve_profile
from specsim.kv import DRAFTER_KV_FRACTION
from specsim.metrics import domain_breakdown, memory_summary, request_frame, summarize
from specsim.policies import make_policy, policy_knobs
from specsim.policies.base import as_policy, policy_hooks
from specsim.scenario import DEFAULT_KV_CAPACITY_TOKENS, Scenario, load_scenario
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
        max_sim_s: explicit horizon in simulated seconds, or None (run until every request leaves).
        gamma, drafter: override the scenario's (see :func:`resolve_run`).
        knobs: policy knobs, over the scenario's ``[policy.knobs]``.
        record_step_log: keep per (step, request) rows.
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


def simulate(trace, policy: str | Any = "dspark", scenario: Scenario | None = None, seed: int = 0,
             concurrency: int | None = None, rate_scale: float = 1.0, max_sim_s: float | None = None,
             gamma: int | None = None, drafter: str | None = None, profile: StepTimeProfile | None = None,
             record_step_log: bool = False, drafter_cost: DrafterCost | None = None,
             progress=None, **knobs: Any) -> SimulationResult:
    """Simulate ``trace`` on the scenario's cluster under ``policy`` (the arguments of :class:`RunConfig`).

    Args:
        trace: a :class:`specsim.trace.Trace`.
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
                       record_step_log=record_step_log)
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
    cluster.env.run(until=config.max_sim_s)
    for rep in cluster.replicas:
        rep.flush_running()
    timing = {"event_loop_wall_s": time.perf_counter() - loop0, "event_loop_cpu_s": time.process_time() - cpu0}
    result = _summarise(trace, config, built, window)
    result.summary.update(timing)
    result.summary["wall_time_s"] = time.perf_counter() - wall0
    return result


@dataclass(frozen=True)
class _Built:
    cluster: Cluster
    policy_name: str
    drafter_name: str
    gamma: int
    profile: StepTimeProfile
    acceptance: Any


def _build(trace, config: RunConfig, profile: StepTimeProfile | None, drafter_cost: DrafterCost | None) -> _Built:
    """Resolve the policy, drafter, acceptance model and profile, and build the cluster."""
    sc = config.scenario
    factory, pname, dname, g, prof = resolve_run(config.policy, sc, config.gamma, config.drafter, profile,
                                                 **config.knobs)
    cost = _drafter_cost(sc, dname, drafter_cost)
    model = _acceptance(trace, sc, dname, g) if g > 0 else None
    cc = cluster_config(sc, g, dname, config.seed, prof)
    cluster = Cluster(trace, cc, lambda: policy_hooks(factory()), model, prof, cost, config.record_step_log)
    return _Built(cluster, pname, dname, g, prof, model)


def _drafter_cost(sc: Scenario, dname: str, measured: DrafterCost | None) -> DrafterCost:
    """The drafter's cost model: measured, else the family default with the scenario's overrides."""
    if measured is not None:
        return measured
    cost = default_drafter_cost(dname)
    dc = sc.drafter
    overrides = {k: getattr(dc, k) for k in ("base_fraction", "per_draft_fraction") if getattr(dc, k) is not None}
    return replace(cost, **overrides) if dname == dc.name and overrides else cost


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
        kv_fraction = DRAFTER_KV_FRACTION[DRAFTER_FAMILY_OF[drafter]] if gamma > 0 else 0.0
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
    summary = summarize(requests, steps, rec.itl_s(win), window=win,
                        decode_gpus=sc.cluster.num_replicas * sc.cluster.gpus_per_replica,
                        prefill_gpus=0 if cluster.config.colocated
                        else sc.prefill.num_instances * sc.prefill.gpus_per_instance,
                        mean_in_system=_mean_in_system(cluster, rec, requests) if win is None else None)
    measured = requests.status == "completed"
    if win is not None:
        measured &= (requests.arrival_s >= win[0]) & (requests.arrival_s <= win[1])
    summary.update(memory_summary(rec, requests))
    summary["clipped_verify_lengths"] = rec.num_clips
    summary["load"] = ({"mode": "closed", "concurrency": config.concurrency, "window_start_s": win[0],
                        "window_end_s": win[1]} if win else {"mode": "open", "rate_scale": config.rate_scale})
    summary["per_domain"] = domain_breakdown(requests, measured)
    summary.update(policy=built.policy_name, drafter=built.drafter_name, gamma=built.gamma, seed=int(config.seed))
    summary["kv_capacity"] = kv_capacity(sc, built.profile, built.gamma,
                                         cluster.config.replicas[0].drafter_kv_fraction).as_dict()
    summary["provenance"] = {
        "specsim_version": specsim.__version__,
        "scenario": sc.to_dict(), "scenario_hash": sc.hash(), "scenario_source": sc.source,
        "trace": getattr(trace, "source", None),
        "trace_hash": trace.content_hash() if hasattr(trace, "content_hash") else None,
        "profile_source": built.profile.source, "profile_metadata": built.profile.metadata,
        "acceptance_source": built.acceptance.source if built.acceptance else None,
    }
    log = rec.step_log_frame(trace.request_id, cluster.workload.domain) if config.record_step_log else None
    return SimulationResult(summary, requests, steps, log)


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


# ------------------------------------------------------------------------------------------- KV capacity
#: Device memory per GPU in bytes, the total the device reports (nvidia-smi's memory.total, MiB) for the
#: GPUs of specsim.hardware.gpus: A100 SXM4 80GB 81920 MiB, H100 SXM5 80GB 81559 MiB, H200 SXM 141GB
#: 143771 MiB, B200 183359 MiB. vLLM starts from the device's total (torch.cuda.mem_get_info), not the
#: datasheet's decimal GB.
GPU_MEMORY_BYTES: dict[str, float] = {"a100": 81920 * 2.0 ** 20, "h100": 81559 * 2.0 ** 20,
                                      "h200": 143771 * 2.0 ** 20, "b200": 183359 * 2.0 ** 20}
_DTYPE_BYTES = {"fp32": 4, "float32": 4, "fp16": 2, "float16": 2, "bf16": 2, "bfloat16": 2, "fp8": 1}


@dataclass(frozen=True)
class KvCapacity:
    """A replica's KV capacity and, when derived from ``cluster.gpu_memory_utilization``, its parts.

    Derived (vLLM's rule): ``tokens = floor((M x u - W - A) / b / block_size) x block_size`` per GPU shard,
    where M is the GPU memory, u the utilisation, W the weights per GPU, b the KV bytes per token per GPU
    and A the activation reserve of the profiling forward pass over ``T`` tokens,
    ``A = T x (2 hidden + 2 ffn / tp) x dtype_bytes + T x vocab x 4`` (one layer's hidden and MLP
    activations plus the fp32 logits), with ``T = max_num_seqs x (gamma + 1)`` (the largest verify batch;
    plus ``prefill.chunk_tokens`` when prefill is colocated). The pool holds the drafter's KV too: the
    engine charges ``drafter_kv_fraction`` target blocks per target token from it (specsim.kv), so the
    target alone can hold ``tokens / (1 + drafter_kv_fraction)`` tokens when every request drafts.

    Attributes:
        tokens: capacity per replica, tokens (a multiple of ``block_size`` when derived).
        source: ``kv_capacity_tokens`` (set), ``default`` (:data:`DEFAULT_KV_CAPACITY_TOKENS`) or
            ``gpu_memory_utilization`` (derived; the other fields are then filled).
        block_size: tokens per KV block.
        drafter_kv_fraction: the drafter's KV per target KV token charged from the pool.
        gpu, gpu_memory_bytes, utilization, weights_bytes, activation_bytes, activation_tokens,
        kv_bytes_per_token, model, tp, profile: the derivation's inputs (bytes per GPU), None when not derived.
    """

    tokens: int
    source: str
    block_size: int
    drafter_kv_fraction: float = 0.0
    gpu: str | None = None
    gpu_memory_bytes: float | None = None
    utilization: float | None = None
    weights_bytes: float | None = None
    activation_bytes: float | None = None
    activation_tokens: int | None = None
    kv_bytes_per_token: float | None = None
    model: str | None = None
    tp: int | None = None
    profile: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (``blocks``, ``target_tokens_with_drafter`` and ``describe`` added)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["blocks"] = self.tokens // self.block_size
        d["target_tokens_with_drafter"] = int(self.tokens / (1 + self.drafter_kv_fraction))
        d["describe"] = self.describe()
        return d

    def describe(self) -> str:
        """One line for a run header: the capacity, and its parts when derived."""
        head = f"KV capacity {self.tokens:,} tokens per replica ({self.tokens // self.block_size:,} blocks of " \
               f"{self.block_size})"
        share = (f"; the drafter's KV takes {self.drafter_kv_fraction:.3g} of a target token's, leaving "
                 f"{int(self.tokens / (1 + self.drafter_kv_fraction)):,} target tokens when all draft"
                 if self.drafter_kv_fraction else "")
        if self.source != "gpu_memory_utilization":
            where = "cluster.kv_capacity_tokens" if self.source == "kv_capacity_tokens" else "the default"
            return f"{head} from {where}{share}"
        gb = 1e9
        return (f"{head} = ({self.gpu} {self.gpu_memory_bytes / gb:.2f} GB x {self.utilization:g} - weights "
                f"{self.weights_bytes / gb:.2f} GB - activation reserve {self.activation_bytes / gb:.2f} GB "
                f"[T x (2 hidden + 2 ffn/tp) x dtype + T x vocab x 4 B, T = {self.activation_tokens}]) / "
                f"{self.kv_bytes_per_token:,.0f} B per token ({self.model}, TP {self.tp}), floored to blocks{share}")


def _model_shape(profile: StepTimeProfile):
    """The target model's shape from ``profile.metadata`` as an analytic ModelConfig, with dtype bytes and TP.

    Accepts Vidur-style keys (num_layers, n_head, n_kv_head, n_embd, n_expanded_embd, vocab_size), a
    ``model_config`` table, or ``model`` naming a preset of :data:`specsim.hardware.analytic.MODELS`.

    Raises:
        SpecsimInputError: the metadata holds no model shape (naming the profile).
    """
    from specsim.hardware.analytic import MODELS, ModelConfig

    md = profile.metadata or {}
    mc = md.get("model_config")
    if all(k in md for k in ("num_layers", "n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size")):
        model = ModelConfig(str(md.get("model", "?")), int(md["num_layers"]), int(md["n_embd"]), int(md["n_head"]),
                            int(md["n_kv_head"]), int(md["n_embd"]) // int(md["n_head"]),
                            int(md["n_expanded_embd"]), int(md["vocab_size"]))
    elif isinstance(mc, dict):
        model = ModelConfig(str(mc.get("name", md.get("model", "?"))), int(mc["num_layers"]), int(mc["hidden"]),
                            int(mc["num_heads"]), int(mc["num_kv_heads"]), int(mc["head_dim"]), int(mc["ffn"]),
                            int(mc["vocab"]))
    elif str(md.get("model", "")).lower() in MODELS:
        model = MODELS[str(md["model"]).lower()]
    else:
        raise SpecsimInputError(profile.source, None, "metadata",
                                "a profile whose metadata gives the model's shape (num_layers, n_head, n_kv_head, "
                                "n_embd, n_expanded_embd, vocab_size; a model_config table; or a model preset "
                                f"of {sorted(MODELS)}) to derive the KV capacity from cluster.gpu_memory_utilization",
                                f"metadata keys {sorted(md)}")
    dtype = str(md.get("dtype", "bf16")).lower()
    return model, _DTYPE_BYTES.get(dtype, 2), int(md.get("tp", 1) or 1)


def _weight_params(model, tp: int) -> float:
    """Parameters per GPU shard: attention projections, (gated or MoE) MLP and untied embedding + LM head."""
    attn = sum(n * k for n, k in model.attention_gemms(tp))                 # per layer, per shard
    if model.num_experts:
        dense = model.first_dense_layers
        mlp = (dense * 3 * model.hidden * model.ffn
               + (model.num_layers - dense) * (model.num_experts + model.num_shared_experts) * 3 * model.hidden
               * model.expert_ffn) / tp
    else:
        mlp = model.num_layers * 3 * model.hidden * model.ffn / tp
    return model.num_layers * attn + mlp + 2 * model.vocab * model.hidden / tp


def kv_capacity(sc: Scenario, profile: StepTimeProfile | None, gamma: int,
                drafter_kv_fraction: float = 0.0) -> KvCapacity:
    """A replica's KV capacity in tokens: set, the default, or derived from ``cluster.gpu_memory_utilization``
    (the rule and its parts: :class:`KvCapacity`).

    Args:
        sc: the scenario; profile: the run's step-time profile (None: the scenario's, loaded when needed);
        gamma: the run's draft block length; drafter_kv_fraction: the drafter's KV per target KV token.

    Raises:
        SpecsimInputError: the profile's metadata lacks the model shape or names no known GPU (naming the
            profile), or the weights and reserve leave no room for one KV block.
    """
    c = sc.cluster
    if c.gpu_memory_utilization is None:
        tokens = DEFAULT_KV_CAPACITY_TOKENS if c.kv_capacity_tokens is None else c.kv_capacity_tokens
        return KvCapacity(int(tokens), "default" if c.kv_capacity_tokens is None else "kv_capacity_tokens",
                          c.block_size, drafter_kv_fraction)
    prof = profile or resolve_profile(sc.profile.name, sc.profile.lookup)
    model, dtype_bytes, tp = _model_shape(prof)
    gpu = str(prof.metadata.get("gpu", "")).lower().split("-")[0].split("_")[0].split(" ")[0]
    if gpu not in GPU_MEMORY_BYTES:
        raise SpecsimInputError(prof.source, None, "metadata.gpu",
                                f"a GPU of known memory {sorted(GPU_MEMORY_BYTES)} to derive the KV capacity",
                                repr(prof.metadata.get("gpu")))
    mem = GPU_MEMORY_BYTES[gpu]
    weights = _weight_params(model, tp) * dtype_bytes
    t = c.max_num_seqs * (gamma + 1) + (sc.prefill.chunk_tokens if sc.prefill.mode == "colocated" else 0)
    act = t * (2 * model.hidden + 2 * model.ffn / tp) * dtype_bytes + t * model.vocab * 4
    per_token = (model.num_layers * (model.kv_lora_rank + model.rope_dim) if model.kv_lora_rank
                 else 2 * model.num_layers * max(1, model.num_kv_heads // tp) * model.head_dim) * dtype_bytes
    free = mem * c.gpu_memory_utilization - weights - act
    tokens = int(max(free, 0) // per_token) // c.block_size * c.block_size
    if tokens < c.block_size:
        raise SpecsimInputError(prof.source, None, "cluster.gpu_memory_utilization",
                                f"room for at least one KV block: {gpu} {mem / 1e9:.1f} GB x "
                                f"{c.gpu_memory_utilization:g} - weights {weights / 1e9:.2f} GB - activation reserve "
                                f"{act / 1e9:.2f} GB leaves {free / 1e9:.2f} GB", repr(c.gpu_memory_utilization))
    return KvCapacity(tokens, "gpu_memory_utilization", c.block_size, drafter_kv_fraction, gpu, mem,
                      c.gpu_memory_utilization, weights, act, t, float(per_token), model.name, tp, prof.source)
