"""The earlier analytic generator (linear layers only) and the GEMM calibration the step model builds on.

Superseded for profiles by :mod:`specsim.hardware.stepmodel` (issue 12: every term of a step, the drafter
from its shape, ``specsim profile analytic`` and ``profile fit``); :func:`analytic_profile` stays for the
earlier bundled ``*-analytic`` profiles (marked ``superseded_by``) and :func:`calibrate` supplies the step
model's default ``flops_eff``, ``bw_eff`` and ``kernel_s``.

A roofline per GEMM with tile quantisation, plus memory-bound elementwise work, a fixed cost per
kernel, a KV-read term and CUDA-graph batch padding. Labelled ``kind: analytic`` in the metadata.

Per layer and step of B tokens, for each weight matrix (N outputs, K inputs; per TP shard)::

    rows    = ceil(M / 16) * 16 up to 64 tokens, else ceil(M / TILE_M) * TILE_M      M = tokens reaching the GEMM
    compute = rows * ceil(N / TILE_N) * TILE_N * 2K / (peak_flops * flops_eff)   # the tiles' FLOPs (tile_flops)
    memory  = (N*K + M*K + M*N) * 2 bytes / (hbm_bw * bw_eff)
    t_gemm  = max(compute, memory) + kernel_s

plus elementwise work (norms, activation, residual, rope: ``ELEMENTWISE_PASSES`` passes of B x hidden
activations over HBM) and ``kernels_per_layer`` launches of ``kernel_s``. The step is L layers plus the
embedding gather; the KV term is ``kv_bytes_per_token / (hbm_bw * bw_eff)``.

MoE layers (DeepSeek-V3 style, Liu et al. 2024, arXiv:2412.19437, config.json of deepseek-ai/DeepSeek-V3):
each of B tokens picks ``top_k`` of ``num_experts`` routed experts; the expected number of distinct experts
touched is ``E * (1 - (1 - k/E)^B)`` (uniform routing), each reading its weights once and running a GEMM
over ``B * k / active`` tokens (tile-quantised); shared experts run as a dense MLP over B tokens. MLA
attention caches ``kv_lora_rank + rope_dim`` values per token per layer.

CUDA graphs: the step of B tokens runs in the smallest captured size >= B (vLLM's default capture sizes
1, 2, 4 and multiples of 8 up to 512; beyond that eager, modelled on a multiple-of-8 grid); the profile uses
``padded`` lookup.

Calibration (:func:`calibrate`): ``bw_eff``, ``flops_eff`` and ``kernel_s`` are fitted (least squares on the
log of step time) to the H100 Vidur curves of Llama-2-7B and Llama-2-70B (TP 1, linear layers and
elementwise ops, eager, no attention); the per-model error is reported by ``specsim profile analytic
--calibrate`` and in docs/profiles.md.
"""

from __future__ import annotations

import datetime as _dt
import functools
from dataclasses import dataclass, field

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.hardware.gpus import GpuSpec, gpu_spec
from specsim.hardware.model_config import MODELS, ModelConfig  # noqa: F401  (re-exported)
from specsim.hardware.profile import StepTimeProfile

TILE_M, TILE_N = 64, 128          # CUTLASS/cuBLAS-style CTA tile for bf16 GEMMs (M = tokens)
SMALL_TILE_M = 16                 # token rows of the narrow tiles a GEMM of at most TILE_M tokens runs (tile_flops)
ELEMENTWISE_PASSES = 12           # 2 norms (r+w), act (r 2x, w 1x), residual adds (r 2x, w 1x), rope
BYTES = 2                         # bf16/fp16 weights and activations


def capture_list(cudagraph_max_tokens: int) -> np.ndarray:
    """(n,) int64: vLLM's default CUDA-graph capture sizes of at most ``cudagraph_max_tokens`` tokens: 1, 2, 4,
    every 8 from 8 to 248, every 16 from 256 (``VllmConfig._set_cudagraph_sizes``, vLLM >= 0.11; a limit between
    two sizes captures up to the lower one, as vLLM truncates it). Empty for a limit of 0 (no graphs)."""
    cap = max(int(cudagraph_max_tokens), 0)
    return np.array([s for s in (1, 2, 4) if s <= cap] + list(range(8, min(cap + 1, 256), 8))
                    + list(range(256, cap + 1, 16)), dtype=np.int64)


@functools.lru_cache(maxsize=None)
def graph_limit(cudagraph_max_tokens: int) -> int:
    """The largest captured size in tokens (:func:`capture_list`'s last; 0 without graphs): a step of more tokens
    runs eager."""
    sizes = capture_list(cudagraph_max_tokens)
    return int(sizes[-1]) if sizes.size else 0


def _eager_sizes(limit: int, top: int) -> list[int]:
    """The grid beyond ``limit`` up to ``top``: 1, 2, 4, then every multiple of 8."""
    return [s for s in (1, 2, 4) if limit < s <= top] + list(range((limit // 8 + 1) * 8, top + 1, 8))


def graph_grid(max_batch_tokens: int) -> np.ndarray:
    """(n,) int64 table sizes: 1, 2, 4 and every multiple of 8 up to ``max_batch_tokens`` (the next multiple of 8
    closes the table where ``max_batch_tokens`` is not one). Every capture size of :func:`capture_list` is on it, so
    a decode table holds at each size the cost of the graph it pads to (:func:`padded_tokens`), while a table read
    unpadded (steps that carry prefill) keeps an 8-token resolution across the GEMMs' tile steps."""
    sizes = np.array(_eager_sizes(0, int(np.ceil(max(int(max_batch_tokens), 1) / 8.0)) * 8), dtype=np.int64)
    return sizes[: int(np.searchsorted(sizes, max_batch_tokens)) + 1]


def capture_sizes(cudagraph_max_tokens: int) -> tuple[np.ndarray, int]:
    """(the captured sizes, (n,) int64, :func:`capture_list`; the first eager size of the grid beyond them)."""
    limit = graph_limit(cudagraph_max_tokens)
    return capture_list(cudagraph_max_tokens), _eager_sizes(limit, limit + 8)[0]


def capture_text(cudagraph_max_tokens: int) -> str:
    """The captured sizes in words: ``1, 2, 4, 8..248 step 8, 256..512 step 16``, ``1, 2, 4, 8..200 step 8``,
    ``1, 2, 4`` (a limit of 5), ``none`` (0)."""
    sizes = capture_list(cudagraph_max_tokens)
    if sizes.size <= 5:
        return ", ".join(str(int(v)) for v in sizes) or "none"
    text = f"1, 2, 4, 8..{int(sizes[sizes < 256][-1])} step 8"
    return text + (f", 256..{int(sizes[-1])} step 16" if sizes[-1] >= 256 else "")


#: The CUDA compute capability family (major version) where vLLM >= 0.28 captures CUDA graphs up to 1,024 tokens by
#: default, data-center Blackwell (B200, GB200: 10.0; B300, GB300: 10.3): vLLM PR 49390 ("Raise Blackwell CUDA graph
#: capture default to 1024", commit 021b7d98, first released in v0.28.0), ``VllmConfig._set_cudagraph_sizes``:
#: ``default_max_graph_size = 1024 if current_platform.is_device_capability_family(100) else 512``. The RTX PRO
#: 6000 (12.0) is not of the family.
LARGE_CAPTURE_FAMILY = 10


def default_capture_tokens(gpu: GpuSpec) -> int:
    """vLLM's default largest CUDA-graph capture size on ``gpu``, tokens: 1,024 where its ``compute_capability`` is
    of :data:`LARGE_CAPTURE_FAMILY` (10.x: data-center Blackwell), else 512; a GPU that gives no compute capability
    (a GPU spec file without it, an AMD part) takes 512, whatever its name (a file naming its GPU ``b200`` took the
    bundled B200's 1,024).

    vLLM's default is ``min(max_num_seqs x (1 + K) x 2, that ceiling)``: with vLLM's default ``max_num_seqs`` on
    GPUs of 70 GiB or more (1,024 since v0.28) the ceiling binds; a server run with ``max_num_seqs`` below
    ceiling / (2 (1 + K)) (256 without speculation on a B200) captures less: set ``cudagraph_max_tokens`` for it,
    as for an engine before v0.28, which capped at 512 on every GPU (docs/profiles.md, "The CUDA-graph capture
    limit")."""
    return 1024 if gpu.compute_family == LARGE_CAPTURE_FAMILY else 512


def padded_tokens(b, cudagraph_max_tokens: int) -> np.ndarray:
    """Token counts padded as the engine pads them (float64, vectorised; 0 stays 0): up to the capture limit the
    next capture size (:func:`capture_list`), beyond it the eager grid's next size (1, 2, 4, then the next
    multiple of 8), so :func:`graph_grid`'s tables are read at their own sizes.

    Args:
        b: (n,) tokens in each step.
        cudagraph_max_tokens: the engine's capture limit in tokens (``EngineTerms.cudagraph_max_tokens``)."""
    b = np.ceil(np.asarray(b, dtype=np.float64))
    eager = np.where(b <= 2, b, np.where(b <= 4, 4.0, np.ceil(b / 8.0) * 8.0))
    sizes = capture_list(cudagraph_max_tokens).astype(np.float64)
    if not sizes.size:
        return eager
    graph = sizes[np.minimum(np.searchsorted(sizes, b), sizes.size - 1)]
    return np.where((b >= 1) & (b <= sizes[-1]), graph, eager)


@dataclass(frozen=True)
class Efficiency:
    """Calibrated constants: achieved fractions of peak and the fixed cost per kernel (seconds)."""

    bw_eff: float = 0.80
    flops_eff: float = 0.70
    kernel_s: float = 4e-6
    source: str = "defaults before calibration"


def tile_flops(m, n: int, k: int) -> np.ndarray:
    """FLOPs of an (m x k) @ (k x n) GEMM as its output tiles compute them, vectorised over m tokens (float64, like
    m): ``rows * ceil(n / TILE_N) * TILE_N * 2k``, the token rows padded to ``SMALL_TILE_M`` (16) up to ``TILE_M``
    (64) tokens and to ``TILE_M`` beyond.

    A partly filled tile is charged whole (the padding of a small batch). Up to 64 tokens the engines run narrow
    tiles: vLLM's fused-MoE Triton kernel takes ``BLOCK_SIZE_M`` 16 where a batch has no more tokens than experts
    (``get_default_config``) and its tuned configs do at small batches; dense GEMMs of few rows run swapped (the
    tokens on the MMA's N side, 8 to 256 wide) or as split-K GEMVs. Charging whole 64-row tiles there made small
    batches compute bound on GPUs of little compute per byte (an H20's 148 TFLOPS against 4 TB/s: Llama-2-7B's
    GEMMs at 8.6 ms for one token against a 3.5 ms weight stream). The tiles are not rounded up to whole waves of
    the GPU's SMs, because stream-K and split-K scheduling (Osama et al. 2023, arXiv:2301.03598; in CUTLASS and
    cuBLAS) spread a partial wave's K loop over every SM. The public B200 GEMM times support that: vLLM PR 18778
    (torch BF16 on B200, N = 6144, K = 4096: 1,112-1,433 TFLOP/s at 256-1,024 tokens) sits 10-15% under this
    charge with the B200 fit's ``kernel_s`` and 20-44% under the whole-wave one (docs/validation.md, "GEMM tiles
    without whole waves")."""
    m = np.asarray(m, dtype=np.float64)
    rows = np.where(m <= TILE_M, np.ceil(m / SMALL_TILE_M) * SMALL_TILE_M, np.ceil(m / TILE_M) * TILE_M)
    return rows * np.ceil(n / TILE_N) * (TILE_N * 2.0 * k)


def _gemm_s(m: np.ndarray, n: int, k: int, gpu: GpuSpec, eff: Efficiency) -> np.ndarray:
    """Tile-quantised roofline time of an (m x k) @ (k x n) GEMM, vectorised over m (tokens)."""
    m = np.asarray(m, dtype=np.float64)
    compute = tile_flops(m, n, k) / (gpu.bf16_flops_per_s * eff.flops_eff)
    memory = (n * k + m * k + m * n) * BYTES / (gpu.hbm_bytes_per_s * eff.bw_eff)
    return np.where(m > 0, np.maximum(compute, memory) + eff.kernel_s, 0.0)


def _mlp_s(m: np.ndarray, ffn: int, hidden: int, gpu: GpuSpec, eff: Efficiency) -> np.ndarray:
    return _gemm_s(m, 2 * ffn, hidden, gpu, eff) + _gemm_s(m, hidden, ffn, gpu, eff)


def linear_step_s(model: ModelConfig, batch_tokens: np.ndarray, gpu: GpuSpec, eff: Efficiency,
                  tp: int = 1) -> np.ndarray:
    """Seconds per step for the linear layers, elementwise ops and embedding (no attention, no KV).

    Args:
        batch_tokens: (n,) B values (tokens in the step).
    Returns:
        (n,) seconds.
    """
    b = np.asarray(batch_tokens, dtype=np.float64)
    attn = sum(_gemm_s(b, n, k, gpu, eff) for n, k in model.attention_gemms(tp))
    elem = (ELEMENTWISE_PASSES * b * model.hidden * BYTES / (gpu.hbm_bytes_per_s * eff.bw_eff)
            + 6 * eff.kernel_s)
    dense_mlp = _mlp_s(b, model.ffn // tp, model.hidden, gpu, eff)
    if model.num_experts:
        e, k = model.num_experts, model.top_k
        active = e * (1.0 - (1.0 - k / e) ** b)                          # expected experts touched
        per_expert_tokens = np.ceil(b * k / active)                       # tokens per touched expert
        moe = (active * _mlp_s(per_expert_tokens, model.expert_ffn // tp, model.hidden, gpu, eff)
               + model.num_shared_experts * _mlp_s(b, model.expert_ffn // tp, model.hidden, gpu, eff)
               + _gemm_s(b, e, model.hidden, gpu, eff))                  # router
        n_dense = model.first_dense_layers
        layers = n_dense * (attn + elem + dense_mlp) + (model.num_layers - n_dense) * (attn + elem + moe)
    else:
        layers = model.num_layers * (attn + elem + dense_mlp)
    emb = 2 * b * model.hidden * BYTES / (gpu.hbm_bytes_per_s * eff.bw_eff) + eff.kernel_s
    return layers + emb


def analytic_profile(model: str | ModelConfig, gpu: str, tp: int = 1, max_batch_tokens: int = 4096,
                     eff: Efficiency | None = None, cuda_graphs: bool = True,
                     date: str | None = None) -> StepTimeProfile:
    """An analytic :class:`StepTimeProfile` of the linear layers (module docstring), labelled ``kind: analytic``;
    superseded by :meth:`specsim.hardware.stepmodel.StepModel.profile`.

    Args:
        model: a preset name in :data:`MODELS` or a :class:`ModelConfig`.
        gpu: ``h100``, ``h200``, ``b200`` or ``a100``.
        tp: tensor-parallel degree (per-shard GEMMs; no all-reduce term, state it when comparing).
        max_batch_tokens: last B of the table.
        eff: calibrated constants (default: :func:`default_efficiency`).
        cuda_graphs: pad B to the captured sizes (``padded`` lookup) or evaluate every multiple of 8.

    Raises:
        SpecsimInputError: unknown model preset or GPU.
    """
    if isinstance(model, str):
        if model not in MODELS:
            raise SpecsimInputError(None, None, "model", f"one of {sorted(MODELS)}", repr(model))
        model = MODELS[model]
    spec = gpu_spec(gpu)
    eff = eff or default_efficiency()
    grid = graph_grid(max_batch_tokens)
    step = linear_step_s(model, grid, spec, eff, tp)
    kv_s = model.kv_bytes_per_token(tp) / (spec.hbm_bytes_per_s * eff.bw_eff)
    meta = {
        "kind": "analytic", "gpu": spec.name, "model": model.name, "dtype": "bf16", "tp": tp,
        "engine": "CUDA graphs at vLLM default capture sizes (1,2,4,8..512 step 8), eager beyond"
                  if cuda_graphs else "eager, multiple-of-8 grid",
        "source": f"specsim.hardware.analytic roofline; {spec.source}; constants: {eff.source}",
        "bw_eff": eff.bw_eff, "flops_eff": eff.flops_eff, "kernel_s": eff.kernel_s,
        "tile": [TILE_M, TILE_N], "date": date or _dt.date.today().isoformat(),
        "note": "no TP all-reduce term" if tp > 1 else "",
    }
    return StepTimeProfile(batch_tokens=grid, step_time_s=step, lookup="padded", kv_read_s_per_token=kv_s,
                           extrapolate="error", metadata=meta, source=f"<analytic {model.name} {spec.name}>")


@dataclass
class CalibrationResult:
    """Fitted :class:`Efficiency` and the error per calibration curve (median / max absolute relative)."""

    efficiency: Efficiency
    errors: dict[str, tuple[float, float]] = field(default_factory=dict)


def calibrate(curves: dict[str, tuple[ModelConfig, np.ndarray, np.ndarray]], gpu: str = "h100",
              source: str = "") -> CalibrationResult:
    """Fit ``bw_eff``, ``flops_eff`` and ``kernel_s`` to measured linear-layer curves.

    Args:
        curves: label -> (model, B values (n,), measured seconds (n,)), TP 1.
        gpu: the GPU the curves were measured on.
        source: provenance for :attr:`Efficiency.source`.
    """
    from scipy.optimize import least_squares

    spec = gpu_spec(gpu)

    def residuals(x: np.ndarray) -> np.ndarray:
        eff = Efficiency(*x)
        return np.concatenate([np.log(linear_step_s(m, b, spec, eff) / t) for m, b, t in curves.values()])

    fit = least_squares(residuals, x0=[0.8, 0.7, 4e-6], bounds=([0.2, 0.1, 0.0], [1.0, 1.0, 5e-5]))
    eff = Efficiency(*map(float, fit.x), source=source or "calibrated")
    errors = {}
    for name, (m, b, t) in curves.items():
        rel = np.abs(linear_step_s(m, b, spec, eff) / t - 1.0)
        errors[name] = (float(np.median(rel)), float(rel.max()))
    return CalibrationResult(eff, errors)


# Fitted by `specsim profile analytic --calibrate` on the H100 Vidur curves (Llama-2-7B, Llama-2-70B,
# TP 1, B = 1..4096): see docs/profiles.md for the per-model error. Re-run to refresh.
# Median / max error: Llama-2-7B 5.0% / 22.5%, Llama-2-70B 3.4% / 24.8% (with whole SM waves, before
# 2026-12-06: 0.8958, 0.6693, 5.878e-6; 5.4% / 18.8% and 3.3% / 22.5%).
_CALIBRATED = Efficiency(bw_eff=0.9232, flops_eff=0.6538, kernel_s=7.840e-6,
                         source="calibrated on H100 Vidur mlp.csv Llama-2-7B and Llama-2-70B, TP 1 "
                                "(SOURCES.md 2a); median error 5.0% and 3.4%")


def default_efficiency() -> Efficiency:
    """The calibrated constants used by :func:`analytic_profile` when none are given."""
    return _CALIBRATED
