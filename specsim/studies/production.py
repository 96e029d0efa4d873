"""The paper's production result, predicted: fit a DeepSeek-V4 decode rank to MTP-1, predict DSpark.

Procedure (issue 5, redone for issue 12's step-time model; docs/production.md gives every number's source
and every choice):

1. Workload: a synthetic trace whose domains follow DSpark's training mix (DSpark paper §3.3: math 39.4%,
   code 38.9%, chat 17.6% + instruction-following 4.1% counted as chat) with the fitted public length
   models of :func:`specsim.workload.synth.synth_trace`; closed-loop concurrency sweeps.
2. Serving unit: one decode *rank* (gpus_per_replica = 1). Fig. 7 and Fig. 8 agree only if
   throughput per GPU = concurrency x TPS/user (e.g. Flash DSpark at N = 200: 16.1k / 200 = 80.5 tok/s/user,
   Fig. 7 gives 16.0k at 80), so the concurrency of Fig. 8 counts the requests of one GPU: a
   data-parallel-attention rank of a wide expert-parallel deployment, all ranks stepping in lockstep.
3. Step time of the rank, :func:`rank_step_model`: the engine-level
   :class:`~specsim.hardware.stepmodel.StepModel` of the whole V4 model (:class:`V4Config`, FP4 routed experts
   against FP8 activations (W4A8 at the H800's FP8 rate) beside FP8 (W8A8) for the rest,
   the compressed sparse attention's KV bytes per context token) on one H800 (:data:`H800`) with tp = 1 and
   ep = the deployment's EP: attention, the shared expert and the LM head over the rank's B tokens, the
   ``num_experts / ep`` local routed experts over the tokens of ``ep`` ranks, and the EP all-to-all (dispatch
   and combine per MoE layer) across nodes over InfiniBand (:func:`ep_link_bytes_per_s`).
4. Fit (:func:`fit_mtp1`): only the terms named in ``Deployment.fit_params`` are freed (flops_eff, kernel_s
   and ``a2a_exposed``, the fraction of the all-to-all that the dual micro-batch overlap leaves exposed), inside
   :data:`PARAM_BOUNDS` (:data:`specsim.hardware.profile_fit.FIT_BOUNDS`: efficiencies <= 1, times >= 0; the
   fraction in (0, 1]), by least squares of log TPS/user at the concurrencies of the MTP-1 frontier points of
   Fig. 7 (N = throughput / tier) on a smooth closed-loop surrogate of MTP-1 (:func:`surrogate_tps`), then corrected against simulated sweeps (each iteration refits the surrogate to
   the targets divided by the simulation/surrogate ratio at the targets' concurrencies). Nothing about
   DSpark enters the fit. The profile written is :meth:`StepModel.profile` (``metadata.step_model``), so the
   drafters' costs come from their shapes: MTP = 1 layer, DSpark-5 on V4 = 3 layers + the Markov head.
5. Predict (:func:`predict`): simulate ``dspark-async`` (gamma 5, Fig. 2 DSpark rates) and ``mtp1`` on
   the fitted scenario; report the gain at the SLA tier, TPS/user at matched throughput, frontier reach,
   the verify budget per request vs concurrency, and the fit's residuals.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
from scipy.optimize import least_squares

from specsim.acceptance.tables import MTP_ALPHA, PRODUCTION_DOMAIN_MIX
from specsim import fmt
from specsim.errors import SpecsimInputError
from specsim.jsonfiles import jsonable
from specsim.hardware.drafter import shaped_drafter_cost
from specsim.hardware.gpus import GpuSpec, gpu_spec
from specsim.hardware.profile import StepTimeProfile
from specsim.hardware.profile_fit import FIT_BOUNDS
from specsim.hardware.stepmodel import EngineTerms, StepModel
from specsim.hardware.v4 import KV_BYTES_PER_LAYER_TOKEN, V4_FLASH, V4_PRO, V4Config  # noqa: F401 (shapes here too)
from specsim.progress import counting
from specsim.scenario import Scenario
from specsim.simulation import simulate
from specsim.workload import Trace, synth_trace

#: MTP-1's conditional acceptance (specsim.acceptance.tables: DeepSeek-V3 report, 85-90%) and DSpark's
#: training-data mix (DSpark paper §3.3; instruction-following counted as chat), shared with the acceptance model.
TRAINING_MIX = PRODUCTION_DOMAIN_MIX


#: DeepSeek's GPU: the H800 SXM5 (:mod:`specsim.hardware.gpus`, NVIDIA H800 product brief: H100 SXM5 compute
#: and HBM3 3.35 TB/s, dense FP8 1,978.9 TFLOPS, NVLink 400 GB/s bidirectional).
H800 = gpu_spec("h800")
#: InfiniBand bandwidth per GPU, bytes/s: DeepSeek-V3 technical report (arXiv:2412.19437, section 3.2.2),
#: H800 nodes of 8 GPUs on NVLink, one 400 Gb/s InfiniBand NIC per GPU (50 GB/s).
IB_BYTES_PER_S = 400e9 / 8
#: Bytes the step model charges per element of a routed hidden vector, dispatch and combine alike (bf16),
#: and the bytes DeepSeek sends: FP8 dispatch (+ a 1/128 scale), BF16 combine (DeepSeek-V3 report, 3.3.2).
STEP_MODEL_A2A_BYTES = 2.0 + 2.0
DEEPSEEK_A2A_BYTES = 1.0 + 4.0 / 128 + 2.0


#: What the MTP-1 fit may free: :data:`FIT_BOUNDS` (efficiencies <= 1, times >= 0) and ``a2a_exposed``, the
#: fraction of the EP all-to-all that DeepSeek's dual micro-batch overlap leaves on the critical path.
PARAM_BOUNDS: dict[str, tuple[float, float]] = {**FIT_BOUNDS, "a2a_exposed": (0.02, 1.0)}


def ep_link_bytes_per_s(ib_bytes_per_s: float = IB_BYTES_PER_S) -> float:
    """The ``ep_link_bytes_per_s`` given to the step model: the InfiniBand bandwidth per GPU expressed per
    byte the model charges (it counts BF16 both ways, DeepSeek dispatches in FP8), i.e.
    ``ib x STEP_MODEL_A2A_BYTES / DEEPSEEK_A2A_BYTES`` (bytes/s, 1.31 x IB)."""
    return ib_bytes_per_s * STEP_MODEL_A2A_BYTES / DEEPSEEK_A2A_BYTES


@dataclass(frozen=True)
class Deployment:
    """One V4 engine as served in the paper's production figures, with the targets of the fit.

    Attributes:
        name: ``v4-flash`` or ``v4-pro``.
        model: the full model's shape (FP4 routed experts, FP8 for the rest, FP8 activations, V4's KV bytes).
        ep: expert-parallel degree (local routed experts per rank = num_experts / ep); our choice.
        mtp1_points: ((TPS/user tok/s, throughput tok/s/GPU), ...) MTP-1 frontier of Fig. 7 used in the fit.
        dspark_points: Fig. 7 DSpark frontier (never fitted; for comparison only).
        sla: the headline tier (tok/s/user) and the published gain there.
        budget: {concurrency: mean verify tokens per request} of Fig. 8 (comparison only).
        fit_params: the :class:`EngineTerms` fields the MTP-1 points fit (at most one per point).
        drafter_layers: DSpark's draft layers on V4 (DSpark paper §5: 3 MoE layers + the Markov head).
        gpu: the GPU's datasheet (:data:`H800`).
    """

    name: str
    model: V4Config
    ep: int
    mtp1_points: tuple[tuple[float, float], ...]
    dspark_points: tuple[tuple[float, float], ...]
    sla: tuple[float, float]
    budget: dict[int, float]
    fit_params: tuple[str, ...] = ("flops_eff", "kernel_s", "a2a_exposed")
    drafter_layers: int = 3
    gpu: GpuSpec = H800
    concurrency: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 8, 12, 16, 25, 32, 50, 64, 100, 128, 150, 190, 200, 256)
    notes: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        bad = [p for p in self.fit_params if p not in PARAM_BOUNDS]
        if bad or len(self.fit_params) > len(self.mtp1_points):
            raise SpecsimInputError(None, None, "fit_params", f"at most {len(self.mtp1_points)} names from "
                                    f"{sorted(PARAM_BOUNDS)}", ",".join(self.fit_params))


DEPLOYMENTS: dict[str, Deployment] = {
    "v4-flash": Deployment(
        "v4-flash", V4_FLASH, ep=32,
        mtp1_points=((80, 10600), (100, 4500), (120, 1500), (136, 630)),
        dspark_points=((80, 16000), (100, 13800), (120, 11500), (140, 9300), (160, 7100), (180, 4300),
                       (200, 2600), (231, 1200)),
        sla=(80.0, 0.51), budget={25: 4.9, 50: 4.6, 100: 4.1, 150: 3.75, 200: 3.5},
        # up to Fig. 8's 200 users: at 256, DSpark's closed-loop window does not close within 12 rounds
        concurrency=(1, 2, 3, 4, 5, 6, 8, 12, 16, 25, 32, 50, 64, 100, 128, 150, 190, 200)),
    "v4-pro": Deployment(
        "v4-pro", V4_PRO, ep=48,
        mtp1_points=((30, 5000), (35, 3700), (40, 2300), (50, 830), (60, 320)),
        dspark_points=((35, 5700), (40, 5200), (50, 4200), (60, 3200), (70, 2200), (80, 1300), (90, 780),
                       (100, 450), (118, 160)),
        sla=(35.0, 0.52), budget={5: 5.4, 25: 5.0, 50: 4.6, 100: 4.0, 150: 3.6, 190: 3.5}),
}


def deployment(name: str) -> Deployment:
    """The :class:`Deployment` called ``name``.

    Raises:
        SpecsimInputError: unknown name.
    """
    if name not in DEPLOYMENTS:
        raise SpecsimInputError(None, None, "model", f"one of {sorted(DEPLOYMENTS)}", repr(name))
    return DEPLOYMENTS[name]


# ------------------------------------------------------------------------------------------ profile
#: Where the unfitted terms come from: :class:`EngineTerms`' defaults (H100 Vidur calibration, A100
#: FlashAttention fit, link_eff 0.8), per-request and fixed costs 0 until fitted.
#: The paper's points are MTP-1 runs of DeepSeek's own engine, so the fitted constants already hold speculation's
#: own overhead (spec_* = 0, not charged twice), and that engine's CUDA-graph limit is not published (no eager term).
BASE_TERMS = EngineTerms(spec_step_s=0.0, spec_request_s=0.0, eager_kernel_s=0.0,
                         source="EngineTerms defaults (no speculation or eager terms: see BASE_TERMS); fitted terms "
                                "replaced by specsim.studies.production.fit_mtp1")


def rank_step_model(dep: Deployment, terms: EngineTerms = BASE_TERMS, a2a_exposed: float = 1.0) -> StepModel:
    """The step model of one decode rank: the whole V4 model on one H800, tp = 1, ep = ``dep.ep``, the EP
    all-to-all over InfiniBand (:func:`ep_link_bytes_per_s`), of which the fraction ``a2a_exposed`` is left
    exposed by the dual micro-batch overlap (the step model sums its terms; the all-to-all's seconds are
    multiplied by ``a2a_exposed`` through the link bandwidth, latency included only once per call).

    Raises:
        SpecsimInputError: an EP the model's experts do not allow, ``a2a_exposed`` outside (0, 1].
    """
    if not 0.0 < a2a_exposed <= 1.0:
        raise SpecsimInputError(None, None, "a2a_exposed", "a fraction in (0, 1]", repr(a2a_exposed))
    return StepModel(dep.model, dep.gpu, terms, tp=1, ep=dep.ep,
                     ep_link_bytes_per_s=ep_link_bytes_per_s() / a2a_exposed)


def rank_profile(dep: Deployment, terms: EngineTerms = BASE_TERMS, a2a_exposed: float = 1.0,
                 max_batch_tokens: int = 2048, provenance: dict[str, Any] | None = None) -> StepTimeProfile:
    """The rank's :class:`StepTimeProfile`: :meth:`StepModel.profile` of :func:`rank_step_model`
    (padded CUDA-graph table to ``max_batch_tokens``; DSpark-5 at 256 users verifies up to 1,536 tokens),
    named :func:`profile_name`, kind ``fitted``, ``metadata.step_model`` set."""
    sm = rank_step_model(dep, terms, a2a_exposed)
    return sm.profile(max_batch_tokens, name=profile_name(dep), kind="fitted",
                      provenance={"deployment": dep.name, **(provenance or {})})


# ------------------------------------------------------------------------------------------ workload
def production_trace(num_requests: int, seed: int = 0) -> Trace:
    """The training-mix trace (:data:`TRAINING_MIX`); arrival times are unused in closed loop."""
    return synth_trace(num_requests, 10.0, mix=TRAINING_MIX, seed=seed)


def num_requests_for(concurrency: int) -> int:
    """Requests per closed-loop point: about eight rounds of the users, at least 64 (compute budget); twelve
    above 200 users, where eight rounds of the trace's long-tailed outputs can end before every user has
    completed a request (the closed-loop window's rule)."""
    return int(max(64, (8 if concurrency <= 200 else 12) * concurrency))


def base_scenario(dep: Deployment, kv_capacity_tokens: int, profile_name: str = "") -> Scenario:
    """The deployment's scenario (docs/production.md documents every value)."""
    updates = {
        "cluster": {"num_replicas": 1, "gpus_per_replica": 1, "max_num_seqs": 256,
                    "kv_capacity_tokens": int(kv_capacity_tokens)},
        "prefill": {"mode": "disaggregated", "num_instances": 256, "gpus_per_instance": 8,
                    "time_per_token_s": PREFILL_S_PER_TOKEN[dep.name]},
        "drafter": {"name": "dspark", "layers": dep.drafter_layers},
        "engine": {"gamma": 5, "host_overhead_s": HOST_OVERHEAD_S},
    }
    if profile_name:
        updates["profile"] = {"name": profile_name, "lookup": None}
    return Scenario().with_updates(updates, src=f"<{dep.name}>")


#: Host (CPU scheduling) time per step, seconds. Our choice: ZOS hides it for mtp1 and dspark-async (the
#: two policies compared), so it moves neither prediction; it is charged to dspark / dspark-global only.
HOST_OVERHEAD_S = 0.001
#: Disaggregated prefill seconds per prompt token on one 8-GPU prefill instance: 2 x active params FLOPs
#: per token at 40% of 8 x 989 TFLOPS (V4-Flash 13B, V4-Pro 49B active). Only TTFT sees it.
PREFILL_S_PER_TOKEN = {"v4-flash": 2 * 13e9 / (0.4 * 8 * 989e12), "v4-pro": 2 * 49e9 / (0.4 * 8 * 989e12)}


# ------------------------------------------------------------------------------------------ surrogate
def surrogate_tps(sm: StepModel, concurrency: np.ndarray, mean_context_tokens: float,
                  alpha: float = MTP_ALPHA) -> np.ndarray:
    """Closed-loop MTP-1 TPS/user at (fractional) concurrency N, a smooth stand-in for simulation.

    Every step verifies B = 2N tokens (padded to the CUDA-graph sizes) from N requests reading
    N x context cached tokens and emits 1 + alpha per request; it lasts ``sm.step_time`` plus one MTP
    layer's draft (:func:`specsim.hardware.drafter.shaped_drafter_cost`). Linear in N between integers.

    Args:
        sm: the rank's step model. concurrency: (n,) users. mean_context_tokens: context per request.

    Returns:
        (n,) tok/s/user.
    """
    n = np.asarray(concurrency, float)
    lo = np.clip(np.floor(n), 1, None)
    w = np.clip(n - lo, 0.0, 1.0)
    mtp = shaped_drafter_cost("mtp", sm)

    def tps(k: np.ndarray) -> np.ndarray:
        t = sm.step_time(sm.graph_tokens(2 * k), k, k * mean_context_tokens)
        t = t + np.array([mtp.draft_time_s(int(x), 1, None, x * mean_context_tokens) for x in k])
        return (1.0 + alpha) / t

    return (1 - w) * tps(lo) + w * tps(lo + 1)


# ------------------------------------------------------------------------------------------ sweeps
def _code_hash() -> str:
    """sha256 of the simulator sources a point depends on, so a code change invalidates cached points."""
    root = Path(__file__).resolve().parent.parent
    files = sorted(f for f in root.rglob("*.py") if not {"cli", "backends", "studies"} & set(f.relative_to(root).parts))
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([_code_hash(), *parts], sort_keys=True, default=str).encode()).hexdigest()[:20]


def sweep(dep: Deployment, scenario: Scenario, profile: StepTimeProfile, policy: str,
          concurrency: tuple[int, ...], seed: int = 0, cache_dir: Path | None = None,
          tick: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """Closed-loop points of one policy: [{concurrency, tps, thr, verify, ...}] (cached on disk by content);
    ``tick(label)`` after each point, simulated or read from the cache (:func:`specsim.progress.counting`)."""
    out = []
    for n in concurrency:
        out.append(_sweep_point(scenario, profile, policy, n, seed, cache_dir))
        if tick is not None:
            tick(f"{policy} at {fmt.users(n)}")
    return out


def _sweep_point(scenario: Scenario, profile: StepTimeProfile, policy: str, n: int, seed: int,
                 cache_dir: Path | None) -> dict[str, Any]:
    """One closed-loop point of :func:`sweep` at ``n`` users, from the cache when it holds it."""
    nreq = num_requests_for(n)
    key = _key(scenario.to_dict(), profile.to_dict(), policy, n, seed, nreq)
    path = cache_dir / f"{key}.json" if cache_dir else None
    if path is not None and path.exists():
        return json.loads(path.read_text())
    full = simulate(production_trace(nreq, seed), policy, scenario, seed=seed, concurrency=n, profile=profile).summary
    s = {**full, **full["window"]}                   # the closed-loop window's figures (steady state)
    rec = {"policy": policy, "concurrency": n, "tps": s["mean_tps_per_user"],
           "thr": s["output_throughput_per_gpu"], "verify": s["mean_verify_tokens_per_request"],
           "acceptance_length": s["mean_acceptance_length"], "num_requests": nreq,
           "wall_s": s["wall_time_s"]}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec))
    return rec


def frontier_of(points: list[dict[str, Any]]):
    """The Pareto frontier (specsim.analysis.frontier rules) of sweep points."""
    from specsim.analysis.frontier import Frontier

    x = np.array([p["tps"] for p in points], float)
    y = np.array([p["thr"] for p in points], float)
    return Frontier.from_points(points[0]["policy"], x, y, np.array([p["concurrency"] for p in points], float))


# ------------------------------------------------------------------------------------------ fit
@dataclass
class FitResult:
    """Fitted engine-level terms, their residuals and the history of the correction loop.

    Attributes:
        params: {EngineTerms field: fitted value} (efficiencies dimensionless, times in seconds).
        terms: the full fitted :class:`EngineTerms` as a dict.
        a2a_exposed: the fraction of the EP all-to-all on the critical path (1 unless fitted).
        residuals: {tier: log(simulated / paper MTP-1 throughput)}, NaN (null in a file) for a tier not reached.
    """

    deployment: str
    params: dict[str, float]
    terms: dict[str, Any]
    a2a_exposed: float
    kv_capacity_tokens: int
    kv_capacity_lower_bound: int
    residuals: dict[str, float]
    iterations: list[dict[str, Any]]
    mean_context_tokens: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def engine_terms(self) -> EngineTerms:
        """The fitted :class:`EngineTerms`."""
        return EngineTerms(**self.terms)


def _mean_context(nreq: int = 4000) -> tuple[float, float]:
    """(mean context tokens while decoding, mean KV reservation) of the training-mix trace."""
    tr = production_trace(nreq, seed=12345)
    p, o = tr.prompt_tokens.astype(float), tr.output_tokens.astype(float)
    # time-average over a request's decode: prompt + half its output, weighted by output length
    ctx = float(np.sum(o * (p + o / 2)) / np.sum(o))
    reserve = float(np.mean(p + o + 6))
    return ctx, reserve


#: Log residual charged to a tier the simulated frontier does not reach (so such an iteration is never kept).
UNREACHED_RESIDUAL = 3.0


def _loss(residuals: dict[str, float]) -> float:
    """Sum of squared log residuals, :data:`UNREACHED_RESIDUAL` for a tier not reached."""
    r = np.array(list(residuals.values()), float)
    return float(np.sum(np.square(np.where(np.isfinite(r), r, UNREACHED_RESIDUAL))))


def _exposed(dep: Deployment, x: np.ndarray) -> float:
    return float(dict(zip(dep.fit_params, x)).get("a2a_exposed", 1.0))


def _model_at(dep: Deployment, x: np.ndarray) -> StepModel:
    """The rank's step model with ``dep.fit_params`` set to ``x``."""
    vals = {p: float(v) for p, v in zip(dep.fit_params, x)}
    exposed = vals.pop("a2a_exposed", 1.0)
    return rank_step_model(dep, replace(BASE_TERMS, **vals), exposed)


def _fit_surrogate(dep: Deployment, targets: np.ndarray, ctx: float, x0: np.ndarray) -> np.ndarray:
    """Bounded least squares of log TPS at N_i = thr_i / tier_i against ``targets`` (tok/s/user);
    x = the values of ``dep.fit_params`` inside :data:`FIT_BOUNDS`."""
    thr = np.array([p[1] for p in dep.mtp1_points], float)
    conc = thr / np.array([p[0] for p in dep.mtp1_points], float)
    lo = np.array([PARAM_BOUNDS[p][0] for p in dep.fit_params])
    hi = np.array([PARAM_BOUNDS[p][1] for p in dep.fit_params])

    def res(u):
        return np.log(surrogate_tps(_model_at(dep, u * hi), conc, ctx) / targets)

    fit = least_squares(res, np.clip(x0, lo, hi) / hi, bounds=(lo / hi, hi / hi), diff_step=1e-3)
    return fit.x * hi


def fit_mtp1(dep: Deployment, iterations: int = 2, seed: int = 0, cache_dir: Path | None = None,
             log=print, progress: Callable[[int, int, str], None] | None = None) -> FitResult:
    """Fit ``dep.fit_params`` of the rank's :class:`EngineTerms` to the MTP-1 frontier points of Fig. 7.

    Surrogate least squares, then ``iterations`` simulate-and-correct rounds (module docstring, step 4);
    the iteration with the smallest sum of squared log residuals is kept.
    KV capacity: the MTP-1 points only bound it from below (the 80-tok/s point needs N = thr / tier
    requests running); it is set so that 256 requests of mean reservation fit, which admits Fig. 8's
    largest concurrency (200) without binding (docs/production.md).

    Args:
        progress: told ``(points done, points in all, label)`` as the rounds' points finish (e.g.
            :meth:`specsim.progress.ProgressBar.update`); ``log``: a callable for each round's line.

    Returns:
        :class:`FitResult` with residuals log(simulated / target throughput) at each tier.
    """
    tiers = np.array([p[0] for p in dep.mtp1_points], float)
    thr_t = np.array([p[1] for p in dep.mtp1_points], float)
    conc_t = thr_t / tiers
    ctx, reserve = _mean_context()
    kv_lower = int(np.ceil(conc_t.max() * reserve))
    kv_cap = int(np.ceil(256 * reserve / 1000.0) * 1000)
    scenario = base_scenario(dep, kv_cap)
    x0 = np.array([getattr(BASE_TERMS, p) if p != "a2a_exposed" else 0.5 for p in dep.fit_params])
    x = _fit_surrogate(dep, tiers, ctx, x0)
    history = []
    conc = tuple(c for c in dep.concurrency if c <= 1.6 * conc_t.max())  # from 1 user: covers the top tier
    tick = counting(progress, (iterations + 1) * len(conc))
    for it in range(iterations + 1):
        sm = _model_at(dep, x)
        prof = rank_profile(dep, sm.terms, _exposed(dep, x))
        pts = sweep(dep, scenario, prof, "mtp1", conc, seed, cache_dir, tick)
        fr = frontier_of(pts)
        sim_thr = np.array([fr.throughput_at(t) for t in tiers])
        resid = {f"{t:g}": float(np.log(s / y)) if np.isfinite(s) else float("nan")
                 for t, s, y in zip(tiers, sim_thr, thr_t)}
        # simulated TPS at the targets' concurrencies (log-linear in N) vs the surrogate's
        n_sim = np.array([p["concurrency"] for p in pts], float)
        tps_sim = np.exp(np.interp(np.log(conc_t), np.log(n_sim), np.log([p["tps"] for p in pts])))
        ratio = tps_sim / surrogate_tps(sm, conc_t, ctx)
        params = {p: float(v) for p, v in zip(dep.fit_params, x)}
        history.append({"iteration": it, "params": params, "residual_log_thr": resid,
                        "sim_over_surrogate": ratio.round(4).tolist()})
        log(f"[{dep.name}] fit iteration {it}: {', '.join(f'{k} {v:.4g}' for k, v in params.items())}; "
            f"log residuals {', '.join(f'{k}: {v:+.3f}' for k, v in resid.items())}")
        if it == iterations:
            break
        # the surrogate at these parameters is off by `ratio` at the targets: aim it at tier / ratio
        x = _fit_surrogate(dep, tiers / ratio, ctx, x)
    best = min(history, key=lambda h: _loss(h["residual_log_thr"]))
    x = np.array(list(best["params"].values()))
    note = (f"EngineTerms defaults; {', '.join(dep.fit_params)} fitted to the MTP-1 frontier of the DSpark "
            f"paper's Fig. 7 by specsim.studies.production.fit_mtp1")
    terms = replace(_model_at(dep, x).terms, source=note)
    return FitResult(dep.name, best["params"], terms.to_dict(), _exposed(dep, x), kv_cap, kv_lower,
                     best["residual_log_thr"], history, ctx)


# ------------------------------------------------------------------------------------------ predict
def predict(dep: Deployment, scenario: Scenario, profile: StepTimeProfile, seed: int = 0,
            concurrency: tuple[int, ...] | None = None, cache_dir: Path | None = None,
            policies: tuple[str, str] = ("dspark-async", "mtp1"),
            progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Simulate DSpark (``dspark-async``, gamma 5) against MTP-1 and compare with the paper's numbers.

    Returns a JSON-able dict: per policy the points and frontier; at the SLA tier both throughputs and the
    gain; TPS/user of DSpark at MTP-1's throughput at each of MTP-1's fitted tiers; DSpark's reach (its
    largest TPS/user); the mean verify budget per request at Fig. 8's concurrencies; the paper's values.
    ``progress`` is told ``(points done, points in all, label)`` as points finish (as :func:`fit_mtp1`).
    """
    conc = tuple(concurrency or dep.concurrency)
    tick = counting(progress, len(policies) * len(conc))
    pts = {p: sweep(dep, scenario, profile, p, conc, seed, cache_dir, tick) for p in policies}
    fr = {p: frontier_of(v) for p, v in pts.items()}
    ds, mt = policies
    tier, paper_gain = dep.sla
    thr_ds, thr_mt = fr[ds].throughput_at(tier), fr[mt].throughput_at(tier)
    matched = {}
    for t, _ in dep.mtp1_points:
        y = fr[mt].throughput_at(t)
        x = fr[ds].tps_at_throughput(y)
        # over mtp1's own TPS/user at that throughput (t, or above t where mtp1 covers the tier)
        matched[f"{t:g}"] = {"mtp1_throughput": y, "dspark_tps": x, "tps_gain": x / fr[mt].tps_at_throughput(y) - 1.0}
    budget = {}
    for n, paper in dep.budget.items():
        got = [p["verify"] for p in pts[ds] if p["concurrency"] == n]
        budget[str(n)] = {"predicted": got[0] if got else None, "paper": paper}
    mtp_budget = sorted({round(p["verify"], 3) for p in pts[mt]})
    dspark_at_paper = {f"{t:g}": {"predicted": fr[ds].throughput_at(t), "paper": y} for t, y in dep.dspark_points}
    return {
        "deployment": dep.name,
        "sla_tier": tier,
        "throughput_at_sla": {ds: thr_ds, mt: thr_mt},
        "gain_at_sla": thr_ds / thr_mt - 1.0, "paper_gain_at_sla": paper_gain,
        "tps_at_matched_throughput": matched,
        "reach_tps": {ds: float(fr[ds].tps_per_user[-1]), mt: float(fr[mt].tps_per_user[-1])},
        "budget": budget, "mtp1_budget_values": mtp_budget,
        "dspark_frontier_vs_paper": dspark_at_paper,
        "points": pts,
    }


# ------------------------------------------------------------------------------------------ files
def profile_name(dep: Deployment) -> str:
    """Bundled name of the fitted rank profile (``specsim/data/profiles/<name>.json``)."""
    return f"{dep.name}-rank-terms"


def scenario_toml(dep: Deployment, fit: FitResult) -> str:
    """The fitted scenario as TOML text, every value with its provenance in a comment."""
    res = ", ".join(f"{k}: {v:+.3f}" if v is not None and np.isfinite(v) else f"{k}: not reached"   # null: a file's
                    for k, v in fit.residuals.items())
    pts, kern = ", ".join(f"{t:g}: {y / 1000:g}k" for t, y in dep.mtp1_points), rank_step_model(dep).gemm_kernel
    par = ", ".join(f"{k} {v:.4g}" for k, v in fit.params.items())
    return f"""# {dep.name}: one decode rank of a DeepSeek-V4-{dep.name[3:].capitalize()}-like deployment, fitted by
# `specsim production fit --model {dep.name}` (specsim/studies/production.py; docs/production.md explains every value).
# - Serving unit: one GPU = one data-parallel-attention rank of an EP{dep.ep} decode deployment
#   (gpus_per_replica = 1); concurrency counts that GPU's requests (Fig. 7 and Fig. 8 of the DSpark paper
#   agree only if throughput per GPU = concurrency x TPS/user, DSpark paper §5).
# - Profile {profile_name(dep)}: the engine-level step model (specsim.hardware.stepmodel) of the whole
#   model on one H800 (datasheet; GEMMs {kern("experts")} routed experts, {kern("other")} the rest), tp 1, ep {dep.ep}, V4's
#   compressed KV bytes per context token, the EP all-to-all over 50 GB/s of InfiniBand per GPU (DeepSeek-V3
#   report) with FP8 dispatch and BF16 combine.
#   Fitted to the MTP-1 frontier of Fig. 7 and nothing else (tok/s/user: tok/s/GPU):
#     {pts};
#   freed terms (physical bounds): {par}
#   (a2a_exposed: the fraction of the all-to-all left exposed by the dual micro-batch overlap);
#   residuals log(simulated / paper throughput) by tier:
#     {res}.
# - kv_capacity_tokens: the MTP-1 points only bound it from below ({fit.kv_capacity_lower_bound} tokens =
#   the slowest tier's concurrency x mean reservation); set to 256 mean reservations so Fig. 8's 200 users fit.
# - Prefill: disaggregated, sized never to queue; seconds per prompt token = 2 x active params FLOPs at 40%
#   of an 8-GPU H800 instance (only TTFT sees it). host_overhead_s: our choice, 1 ms; ZOS hides it for
#   mtp1 and dspark-async, so neither prediction depends on it.
# - Drafter dspark, gamma 5 (DSpark-5, DSpark paper §5), its cost from its shape: {dep.drafter_layers} layers of the
#   target's layer config + the Markov head (DSpark paper §5: 3 MoE layers); mtp1 forces the MTP drafter (1 layer,
#   alpha 0.875) and gamma 1. Acceptance: the DSpark paper's Fig. 2 DSpark rows with the acceptance model's
#   default latent spreads.

[cluster]
num_replicas = 1
gpus_per_replica = 1
router = "round-robin"
max_num_seqs = 256
kv_capacity_tokens = {fit.kv_capacity_tokens}

[prefill]
mode = "disaggregated"
num_instances = 256
gpus_per_instance = 8
time_per_token_s = {PREFILL_S_PER_TOKEN[dep.name]:.6e}
chunk_tokens = 512

[profile]
name = "{profile_name(dep)}"

[drafter]
name = "dspark"
layers = {dep.drafter_layers}

[engine]
gamma = 5
host_overhead_s = {HOST_OVERHEAD_S}
"""


def write_fit(dep: Deployment, fit: FitResult, repo_root: Path, dest: Path | None = None) -> tuple[Path, Path, Path]:
    """Write the fitted profile, the scenario TOML and the fit record (JSON) into folder ``dest`` (the TOML names the
    profile file beside it), or with ``dest`` None as the package's bundled files under ``repo_root``. Returns
    (profile path, scenario path, fit record path)."""
    from specsim.hardware.profile import save_profile

    ppath = (dest or repo_root / "specsim" / "data" / "profiles") / f"{profile_name(dep)}.json"
    sdir = dest or repo_root / "specsim" / "scenarios"
    sdir.mkdir(parents=True, exist_ok=True)                      # with dest, the profile's folder too
    save_profile(fitted_profile(dep, fit), ppath)
    spath, toml = sdir / f"{dep.name}.toml", scenario_toml(dep, fit)
    spath.write_text(toml if dest is None else toml.replace(f'name = "{profile_name(dep)}"', f'name = "{ppath.name}"'))
    fpath = sdir / f"{dep.name}-fit.json"
    fpath.write_text(json.dumps(jsonable(fit.to_dict()), indent=1) + "\n")    # a tier not reached: null, not NaN
    return ppath, spath, fpath


def fitted_profile(dep: Deployment, fit: FitResult) -> StepTimeProfile:
    """The rank profile of a fit (:func:`rank_profile` at the fitted terms), its provenance naming the MTP-1
    points, the freed parameters and the residuals."""
    # the words the bundled v4 profiles hold: a profile's content is part of every sweep point's id, so they stay
    # ("PAPER.md 8.5", a reading note outside the repository, is the paper's §5)
    prov = {"fit": {"fitted_on": "MTP-1 frontier of the DSpark paper's Fig. 7 (PAPER.md 8.5): "
                    + ", ".join(f"{t:g} tok/s/user: {y:g} tok/s/GPU" for t, y in dep.mtp1_points),
                    "params": fit.params, "residual_log_throughput": fit.residuals,
                    "command": f"specsim production fit --model {dep.name}"},
            "a2a_exposed": fit.a2a_exposed, "ib_bytes_per_s": IB_BYTES_PER_S}
    return rank_profile(dep, fit.engine_terms(), fit.a2a_exposed, provenance=prov)
