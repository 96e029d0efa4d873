"""Engine-level step-time model: a step's seconds as a sum of physical terms (issue 12).

A :class:`StepModel` is one model shape (:class:`~specsim.hardware.analytic.ModelConfig`) served on one GPU
(:class:`~specsim.hardware.gpus.GpuSpec`) with tensor parallelism ``tp`` and expert parallelism ``ep``, plus
the engine's constants (:class:`EngineTerms`). For a step of B tokens from R requests reading K cached KV
tokens it gives every term separately (:meth:`StepModel.breakdown`), in seconds per step on one GPU:

==================  ===========================================================================================
``gemm``            weight GEMMs of every layer (attention projections, dense MLP, routed and shared experts,
                    MoE router; the touched routed experts as one grouped GEMM, as vLLM's fused MoE kernel runs
                    them): tile-quantised roofline, ``max(tile FLOPs / (peak(dtype) * flops_eff),
                    bytes / (HBM * bw_eff))`` per GEMM (module :mod:`specsim.hardware.analytic`); each GEMM's
                    peak and weight bytes follow its component's dtype (``ModelConfig.gemm_dtype``: attention,
                    routed experts, the rest), the router's the weights' dtype (its weights are BF16 in FP8/FP4
                    checkpoints; its few microseconds, mostly the weight stream, are kept at that rate); the
                    tiles are not rounded up to whole waves of SMs (stream-K, ``tile_flops``); the peak is that of
                    :meth:`StepModel.compute_dtype` (weight-only at BF16 where the GPU lacks the dtype; W4A8 / W8A8
                    at the FP8 peak with ``ModelConfig.activation_dtype = "fp8"``)
``elementwise``     norms, activation, residual adds, rope: ``ELEMENTWISE_PASSES`` passes of B x hidden
                    activations over HBM per layer
``attention``       decode: the KV read, ``K * kv_bytes_per_token / (HBM * attn_bw_eff)``, plus
                    ``attn_request_s`` per request per layer (FlashAttention's per-sequence work); hybrid models'
                    linear-attention state, read once per request and written after every token of the step
                    (a speculative step keeps the state at each verified position to roll back to the accepted
                    prefix); prefill chunks: ``4 * heads * head_dim * c * (k + (c + 1) / 2)`` FLOPs per layer
                    for a chunk of c tokens over k cached ones, at ``flops_eff``, and the linear-attention state
                    moved as the chunked kernel moves it, ``2 + ceil(c / 64)`` times in place of the table's c
                    writes (:meth:`StepModel.prefill_attention_s`)
``lm_head``         the LM head over the B verified tokens (vocabulary / tp per GPU; BF16 weights whatever the
                    checkpoint's ``weight_dtype``, :meth:`ModelConfig.gemm_dtype` ``"head"``) and the embedding gather
``sampling``        sampling and rejection sampling per verified token: ``SAMPLING_PASSES`` passes over B x
                    vocabulary fp32 logits
``per_request``     ``per_request_step_s * R``: scheduler and input preparation inside each step (distinct from
                    the engine's once-per-request ``request_overhead_s`` and the CPU ``host_overhead_s``)
``fixed``           ``fixed_step_s``: per-step GPU-side fixed cost
``kernels``         ``kernel_s`` per kernel (GEMMs, elementwise, attention, communication, sampling)
``communication``   TP all-reduce (2 per layer and the LM head's gather) and, with data-parallel attention
                    (EP > TP), EP all-to-all (dispatch and combine per MoE layer, in place of that layer's MoE
                    all-reduce): ``latency + size / (link * link_eff)``, ring factor ``2 (n-1)/n``. With EP = TP
                    every rank already holds every token, so the experts' outputs meet in the MoE all-reduce and
                    no all-to-all runs (vLLM uses its all-to-all kernels only with data parallelism)
``eager``           ``eager_kernel_s`` per kernel for a step of more tokens than the last captured size (at most
                    ``cudagraph_max_tokens``): beyond it the engine launches every kernel from the host (issue 20)
==================  ===========================================================================================

Decode-only steps run in CUDA graphs: B is padded to the next captured size (vLLM's list: 1, 2, 4, every 8 to
248, every 16 from 256 up to ``cudagraph_max_tokens``, whose default is vLLM's for the GPU; eager beyond the
last captured size, on a multiple-of-8 grid, paying the ``eager`` term); steps that carry prefill chunks run
with no padding, in piecewise graphs up to the limit and eager beyond it (:meth:`StepModel.profile` writes both
tables on one grid of 1, 2, 4 and every multiple of 8, the decode one priced at each size's padded graph).
Every constant of :class:`EngineTerms` is an efficiency <= 1 or a time >= 0 and names its source.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.hardware.analytic import (capture_text, default_capture_tokens, graph_grid, graph_limit,
                                       padded_tokens, tile_flops)
from specsim.hardware.engine_terms import EngineTerms
from specsim.hardware.model_config import BYTES_PER_DTYPE, MODELS, OPTIONAL_DTYPES, ModelConfig
from specsim.hardware.gpus import GpuSpec, resolve_gpu
from specsim.hardware.profile import StepTimeProfile
from specsim.hardware.spec_check import from_json
from specsim.hardware.step_profile import prefill_state_moves
from specsim.hardware.v4 import V4_MODELS, V4Config

#: Names of the terms, in the order they are stacked in ``specsim profile show --terms``.
TERMS = ("gemm", "elementwise", "attention", "lm_head", "sampling", "per_request", "fixed", "kernels",
         "communication", "eager")

ELEMENTWISE_PASSES = 12   # 2 norms (r+w), activation (r 2x, w 1x), residual adds (r 2x, w 1x), rope
SAMPLING_PASSES = 3       # softmax (read + write) and the sampling/rejection read of fp32 logits
ACT_BYTES = 2             # bf16 activations
LOGIT_BYTES = 4           # fp32 logits (vLLM samples in fp32)
KERNELS_PER_LAYER_FIXED = 8   # 2 norms, activation, 2 residual adds, rope, 2 attention kernels (cache write, attn)
SAMPLING_KERNELS = 6      # temperature, softmax, top-k/top-p, sample, rejection accept, gather


@dataclass(frozen=True)
class StepModel:
    """One model on one GPU type under TP/EP, with the engine's constants.

    Args:
        model: the shape (:class:`ModelConfig`, with its ``weight_dtype`` and ``kv_dtype``).
        gpu: datasheet numbers.
        terms: the engine's constants.
        tp: tensor-parallel degree (attention heads, dense MLP and LM head split; all-reduce per layer).
        ep: expert-parallel degree (routed experts split over ep GPUs; attention data-parallel over ep / tp
            groups, so each GPU's experts see the tokens of ep / tp batches; all-to-all per MoE layer).
        ep_link_bytes_per_s: bandwidth of the all-to-all link when EP spans nodes (None: the GPU's link).

    Raises:
        SpecsimInputError: tp or ep not an int >= 1; ep_link_bytes_per_s not > 0; ep > 1 on a dense model,
            not a multiple of tp or more than the experts; tp not dividing the attention heads or incompatible
            with the KV heads; an fp4 KV cache on a GPU without FP4 support.
    """

    model: ModelConfig
    gpu: GpuSpec
    terms: EngineTerms = EngineTerms()
    tp: int = 1
    ep: int = 1
    ep_link_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        for key in ("tp", "ep"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise SpecsimInputError(None, None, key, "an int >= 1 (GPUs)", repr(v))
        link = self.ep_link_bytes_per_s
        if link is not None and (isinstance(link, bool) or not isinstance(link, (int, float, np.number))
                                 or not np.isfinite(link) or link <= 0):
            raise SpecsimInputError(None, None, "ep_link_bytes_per_s", "a number > 0 (bytes/s), or None (the "
                                    "GPU's link)", repr(link))
        m = self.model
        if self.ep > 1 and not m.num_experts:
            raise SpecsimInputError(None, None, "ep", "1: expert parallelism needs a MoE model", f"ep={self.ep}")
        if self.ep > 1 and (self.ep % self.tp or m.num_experts % self.ep):
            raise SpecsimInputError(None, None, "ep", "a multiple of tp that divides the model's experts",
                                    f"ep={self.ep} (tp={self.tp}, experts={m.num_experts})")
        if m.kv_dtype == "fp4" and self.gpu.fp4_flops_per_s is None:
            raise SpecsimInputError(None, None, "kv_dtype", f"fp8 or bf16 on {self.gpu.label}: an FP4 KV cache "
                                    "(NVFP4, as TensorRT-LLM stores it) needs a GPU with FP4 support (Blackwell)",
                                    "fp4")
        m.attention_gemms(self.tp)          # a shape may refuse the TP (DeepSeek-V4: data-parallel attention only)
        kv_ok = m.kv_lora_rank or m.num_kv_heads % self.tp == 0 or self.tp % m.num_kv_heads == 0
        if m.num_heads % self.tp or not kv_ok:
            raise SpecsimInputError(None, None, "tp", f"a divisor of the {m.num_heads} attention heads that divides "
                                    f"or is a multiple of the {m.num_kv_heads} KV heads (as vLLM requires)",
                                    str(self.tp))
        if self.terms.cudagraph_max_tokens is None:     # the engine's default for this GPU
            cap = default_capture_tokens(self.gpu)
            object.__setattr__(self, "terms", replace(self.terms, cudagraph_max_tokens=cap))

    # ------------------------------------------------------------------ shape helpers
    @property
    def weight_bytes_per_param(self) -> float:
        """Bytes per weight of ``weight_dtype`` (bf16 2, fp8 1, fp4 0.5; routed experts and attention may differ:
        ``BYTES_PER_DTYPE[model.gemm_dtype(part)]``)."""
        return BYTES_PER_DTYPE[self.model.weight_dtype]

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one GPU reads per cached token per step (all layers; ``kv_dtype``)."""
        return float(self.model.kv_bytes_per_token(self.tp))

    def compute_dtype(self, part: str) -> str:
        """The dtype the GEMMs of ``part`` run at (the tensor-core rate :meth:`GpuSpec.flops_per_s` gives).

        With ``model.activation_dtype`` None: the dtype their weights are stored in (:meth:`ModelConfig.gemm_dtype`)
        where the GPU has tensor cores for it, else ``"bf16"``: weight-only quantization, the weights read at their
        stored bytes and dequantized to BF16 in the kernel, as vLLM runs FP4 weights on Hopper and Ampere and FP8
        weights on Ampere (Marlin W4A16 / W8A16 kernels; vLLM's ``Mxfp4Config`` takes BF16 activations;
        docs/profiles.md).

        With an ``activation_dtype``: the wider of the weights' and the activations' dtypes (an MMA runs at the
        rate of its wider operand) where the GPU has tensor cores for it, else as above. So ``"fp8"`` runs FP4
        weights W4A8 at the FP8 rate on Hopper (the FP4 weights expanded to FP8 in registers: DeepGEMM's
        ``sm90_m_grouped_fp8_fp4_gemm_contiguous_1d1d``, csrc/jit_kernels/impls/sm90_fp8_fp4_gemm_1d2d.hpp, FP8
        e4m3 activations x packed FP4 weights; vLLM's ``CutlassW4A8LinearKernel``,
        vllm/model_executor/kernels/linear/mixed_precision/cutlass.py, does the same for INT4 weights and
        "requires compute capability of 90 (Hopper)") and at the
        FP8 rate on Blackwell too (``tcgen05.mma kind::f8f6f4`` mixes FP8 and FP4 operands at the FP8 rate; only
        ``kind::mxf4`` / ``kind::mxf4nvf4``, both operands FP4, run at the FP4 rate; PTX ISA, tcgen05.mma; CUTLASS's
        Blackwell docs: kind::f8f6f4 2x Hopper's FP8 WGMMA, kind::mxf4 4x); FP8 weights W8A8; BF16 weights
        stay BF16; on a GPU without FP8 (Ampere) as with None. Activation bytes stay BF16 (``ACT_BYTES``): the
        quantization reads the BF16 activations that the previous kernel wrote.
        """
        stored = self.model.gemm_dtype(part)
        act = self.model.activation_dtype
        if act is not None:
            wider = max(stored, act, key=lambda d: BYTES_PER_DTYPE[d])
            if self.gpu.supports(wider):
                return wider
        return stored if self.gpu.supports(stored) else "bf16"

    def gemm_kernel(self, part: str) -> str:
        """The GEMMs of ``part`` as ``W<bits>A<bits>``: the weights' stored bits and the bits of the dtype they
        run at (:meth:`compute_dtype`), e.g. ``W4A16`` (weight-only FP4 at the BF16 rate), ``W4A8`` (FP4
        weights against FP8 activations at the FP8 rate), ``W8A8``, ``W16A16``."""
        def bits(d: str) -> int:
            return int(8 * BYTES_PER_DTYPE[d])
        return f"W{bits(self.model.gemm_dtype(part))}A{bits(self.compute_dtype(part))}"

    def _parts(self) -> tuple[str, ...]:
        return ("attention", "experts", "other") if self.model.num_experts else ("attention", "other")

    def weight_only_parts(self) -> list[str]:
        """The parts (``attention``, ``experts``, ``other``) whose GEMMs run weight-only at the BF16 rate: stored
        narrower than they compute, at a 16-bit rate (:meth:`compute_dtype`); [] when none (``experts`` only for
        a MoE model). A W4A8 part is not weight-only (:meth:`mixed_input_parts`)."""
        return [p for p in self._parts() if self.compute_dtype(p) in ("bf16", "fp16")
                and self.compute_dtype(p) != self.model.gemm_dtype(p)]

    def mixed_input_parts(self) -> list[str]:
        """The parts whose weights are dequantized in the kernel to a low-precision rate, not to BF16 (FP4
        weights against FP8 activations, ``W4A8``: :meth:`compute_dtype` with ``activation_dtype="fp8"``)."""
        return [p for p in self._parts() if self.compute_dtype(p) not in ("bf16", "fp16", self.model.gemm_dtype(p))]

    def _gemm(self, m: np.ndarray, n: int, k: int, part: str = "other") -> np.ndarray:
        """Tile-quantised roofline seconds (:func:`~specsim.hardware.analytic.tile_flops`) of an (m x k) @ (k x n)
        GEMM, vectorised over m tokens, its weights in the dtype of ``part`` (:meth:`ModelConfig.gemm_dtype`), at
        the peak of its :meth:`compute_dtype`."""
        g, e = self.gpu, self.terms
        dtype = self.model.gemm_dtype(part)
        m = np.asarray(m, dtype=np.float64)
        compute = tile_flops(m, n, k) / (g.flops_per_s(self.compute_dtype(part)) * e.flops_eff)
        memory = (n * k * BYTES_PER_DTYPE[dtype] + (m * k + m * n) * ACT_BYTES) / (g.hbm_bytes_per_s * e.bw_eff)
        return np.where(m > 0, np.maximum(compute, memory), 0.0)

    def _mlp(self, m: np.ndarray, ffn: int) -> tuple[np.ndarray, int]:
        """(seconds, kernels) of a gated MLP of width ``ffn`` per shard over m tokens."""
        h = self.model.hidden
        return self._gemm(m, 2 * ffn, h) + self._gemm(m, h, ffn), 2

    def _grouped_gemm(self, groups: np.ndarray, m: np.ndarray, n: int, k: int) -> np.ndarray:
        """Roofline seconds of one grouped GEMM (vLLM's fused MoE kernel): ``groups`` experts of (m x k) @ (k x n)
        whose tiles run together, charged their tiles' FLOPs (``groups * tile_flops``), vectorised over steps; the
        routed experts' dtype (``gemm_dtype("experts")``) sets the weight bytes, its :meth:`compute_dtype` the peak."""
        g, e = self.gpu, self.terms
        dtype = self.model.gemm_dtype("experts")
        compute = groups * tile_flops(m, n, k) / (g.flops_per_s(self.compute_dtype("experts")) * e.flops_eff)
        memory = groups * (n * k * BYTES_PER_DTYPE[dtype] + m * (k + n) * ACT_BYTES) / (g.hbm_bytes_per_s * e.bw_eff)
        return np.where(groups * m > 0, np.maximum(compute, memory), 0.0)

    def _moe(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(seconds, kernels) of one MoE layer: the touched local experts as two grouped GEMMs (gate/up, down),
        the shared experts, the router.

        Layouts (vLLM's fused MoE, ``--enable-expert-parallel`` or not): with EP = 1 every GPU holds every
        expert with its FFN split over the TP ranks (each expert's GEMMs are ``expert_ffn / tp`` wide) and sees
        all B tokens; with EP > 1 (a multiple of TP) each GPU holds ``E / ep`` whole experts and sees the tokens
        of the ``ep / tp`` data-parallel attention groups, ``B * ep / tp``. Either way every routed token costs
        its top-k experts' GEMMs somewhere (issue 20: EP 1 at TP > 1 used to see ``B * (1 // tp) = 0`` tokens).
        """
        m = self.model
        E, k = m.num_experts, m.top_k
        tokens = b * max(1, self.ep // self.tp)                             # tokens the GPU's experts see
        local = E // self.ep
        touched = local * (1.0 - (1.0 - k / E) ** tokens)                   # expected distinct local experts
        per_expert = np.ceil(np.where(touched > 0, tokens * k / E * local / np.maximum(touched, 1e-12), 0))
        ffn = m.expert_ffn // (self.tp if self.ep == 1 else 1)
        routed = (self._grouped_gemm(touched, per_expert, 2 * ffn, m.hidden)
                  + self._grouped_gemm(touched, per_expert, m.hidden, ffn))
        shared, _ = self._mlp(b, max(1, m.shared_ffn) // self.tp)
        t = routed + (shared if m.num_shared_experts else 0.0) + self._gemm(b, E, m.hidden)
        return t, np.full(b.shape, 2 + 2 * (m.num_shared_experts > 0) + 1, float)

    def _layers(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(gemm seconds, gemm kernels) of all layers over b tokens: token mixers (softmax- and linear-attention
        layers) and MLPs (dense layers, MoE layers)."""
        m = self.model
        full, lin = m.attention_gemms(self.tp), m.linear_attention_gemms(self.tp)
        mixer = (m.attention_layers * sum(self._gemm(b, n, k, "attention") for n, k in full)
                 + m.linear_layers * sum((self._gemm(b, n, k, "attention") for n, k in lin), np.zeros_like(b)))
        n_mixer = m.attention_layers * len(full) + m.linear_layers * len(lin)
        dense, n_dense = self._mlp(b, m.ffn // self.tp)
        nd, nm = m.num_dense_layers, m.num_layers - m.num_dense_layers
        if not nm:
            return mixer + nd * dense, np.full(b.shape, n_mixer + nd * n_dense, float)
        moe, n_moe = self._moe(b)
        return mixer + nd * dense + nm * moe, n_mixer + nd * n_dense + nm * n_moe

    def _comm(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(seconds, kernels) of TP all-reduces and EP all-to-alls over b tokens."""
        m, e = self.model, self.terms
        bw, lat = self.gpu.link_bytes_per_s, self.gpu.link_latency_s
        t, n = np.zeros_like(b), np.zeros_like(b)
        if self.tp > 1:
            ring = 2.0 * (self.tp - 1) / self.tp
            per = lat + ring * b * m.hidden * ACT_BYTES / (bw * e.link_eff)
            count = 2 * m.num_layers + 1                                     # + the LM head's gather
            t, n = t + count * per, n + count
        if self.ep > self.tp:           # data-parallel attention groups: tokens travel to the experts and back
            moe_layers = m.num_layers - m.first_dense_layers
            ep_bw = self.ep_link_bytes_per_s or bw
            size = b * m.top_k * m.hidden * ACT_BYTES * (self.ep - 1) / self.ep
            t, n = t + 2 * moe_layers * (lat + size / (ep_bw * e.link_eff)), n + 2 * moe_layers
            if self.tp > 1:             # the MoE output's TP all-reduce is the combine's work instead
                t, n = t - moe_layers * per, n - moe_layers
        return t, n

    # ------------------------------------------------------------------ the terms
    def breakdown(self, batch_tokens, num_requests=None, kv_tokens=0.0) -> dict[str, np.ndarray]:
        """Every term of the step, in seconds, vectorised over steps.

        Args:
            batch_tokens: (n,) B, tokens in each step (as run: pad first for CUDA graphs).
            num_requests: (n,) R, requests in each step (default B: one token per request).
            kv_tokens: (n,) or scalar K, cached KV tokens the step's attention reads (all requests).

        Returns:
            {term name: (n,) seconds} in the order of :data:`TERMS`.

        Raises:
            SpecsimInputError: a negative or non-finite B, R or K, naming it.
        """
        b = np.atleast_1d(np.asarray(batch_tokens, dtype=np.float64))
        try:
            r = b if num_requests is None else np.broadcast_to(np.asarray(num_requests, np.float64), b.shape)
            kv = np.broadcast_to(np.asarray(kv_tokens, np.float64), b.shape)
        except ValueError:           # shapes that do not broadcast to B's, or text
            raise SpecsimInputError(None, None, "num_requests, kv_tokens", f"numbers, one per step of the {b.size} "
                                    "batch sizes (or one for all)", f"shapes {np.shape(num_requests)} and "
                                    f"{np.shape(kv_tokens)}") from None
        for key, v in (("batch_tokens", b), ("num_requests", r), ("kv_tokens", kv)):
            if v.size and not (np.isfinite(v).all() and v.min() >= 0.0):     # vectorised: fits call it often
                bad = v[~(np.isfinite(v) & (v >= 0.0))][0]
                raise SpecsimInputError(None, None, key, "finite numbers >= 0 (tokens or requests per step; 0 "
                                        "is an empty step)", repr(float(bad)))
        m, g, e = self.model, self.gpu, self.terms
        gemm, n_gemm = self._layers(b)
        elem = m.num_layers * ELEMENTWISE_PASSES * b * m.hidden * ACT_BYTES / (g.hbm_bytes_per_s * e.bw_eff)
        attn = (kv * self.kv_bytes_per_token / (g.hbm_bytes_per_s * e.attn_bw_eff)
                + r * (m.num_layers * e.attn_request_s + self.state_s_per_request)
                + b * self.state_s_per_request)
        lm = self._gemm(b, m.vocab // self.tp, m.hidden, "head") + b * m.hidden * ACT_BYTES / (g.hbm_bytes_per_s * e.bw_eff)
        samp = SAMPLING_PASSES * b * m.vocab * LOGIT_BYTES / (g.hbm_bytes_per_s * e.bw_eff)
        comm, n_comm = self._comm(b)
        n_kernels = n_gemm + m.num_layers * KERNELS_PER_LAYER_FIXED + 2 + SAMPLING_KERNELS + n_comm
        eager = np.where(b > graph_limit(e.cudagraph_max_tokens), n_kernels * e.eager_kernel_s, 0.0)
        return {"gemm": gemm, "elementwise": elem, "attention": attn, "lm_head": lm, "sampling": samp,
                "per_request": r * e.per_request_step_s, "fixed": np.full(b.shape, e.fixed_step_s),
                "kernels": n_kernels * e.kernel_s, "communication": comm, "eager": eager}

    def step_time(self, batch_tokens, num_requests=None, kv_tokens=0.0) -> np.ndarray:
        """(n,) seconds: the sum of :meth:`breakdown`."""
        return sum(self.breakdown(batch_tokens, num_requests, kv_tokens).values())

    @property
    def kv_read_s_per_token(self) -> float:
        """Seconds per cached KV token read in a step (the profile's KV term)."""
        return self.kv_bytes_per_token / (self.gpu.hbm_bytes_per_s * self.terms.attn_bw_eff)

    @property
    def state_s_per_request(self) -> float:
        """Seconds to move one request's linear-attention state once (0 without such layers): a step reads it
        once per request and writes it after every token it verifies, since a speculative step must be able
        to roll back to the accepted prefix (without speculation: one read and one write per request)."""
        return self.model.linear_state_bytes(self.tp) / (self.gpu.hbm_bytes_per_s * self.terms.attn_bw_eff)

    @property
    def per_request_s(self) -> float:
        """Seconds per running request per step: the per-request term, decode attention's per-request work and
        the linear-attention state."""
        return (self.terms.per_request_step_s + self.model.num_layers * self.terms.attn_request_s
                + self.state_s_per_request)

    @property
    def prefill_attn_s_per_pair(self) -> float:
        """Prefill-attention seconds per (chunk token x attended token) pair, all layers, one GPU."""
        m = self.model
        heads = max(1, m.num_heads // self.tp)
        qk = m.head_dim + m.rope_dim if m.kv_lora_rank else m.head_dim
        flops = 2.0 * heads * (qk + (m.v_head_dim or m.head_dim)) * m.attention_layers
        return flops / (self.gpu.flops_per_s("bf16") * self.terms.flops_eff)

    def prefill_attention_s(self, chunk_tokens, context_tokens) -> float:
        """Seconds of attention that prefill chunks of c tokens over k cached tokens add to the table's step
        (summed): causal softmax attention, and for hybrid models the linear-attention state correction
        (:func:`prefill_state_moves`: the table writes the state after each of the c tokens, the chunked kernel
        moves it 2 + ceil(c / 64) times), negative for chunks of more than three tokens.

        Args:
            chunk_tokens: (n,) tokens of each chunk. context_tokens: (n,) tokens already cached.
        """
        c = np.asarray(chunk_tokens, np.float64)
        k = np.asarray(context_tokens, np.float64)
        return float(self.prefill_attn_s_per_pair * np.sum(c * (k + (c + 1.0) / 2.0))
                     + np.sum(self.prefill_state_s(c)))

    def prefill_state_s(self, chunk_tokens) -> np.ndarray:
        """(n,) seconds by which a prefill chunk's linear-attention state traffic differs from the table's (which
        writes the state after every token): ``state_s_per_request * (2 + ceil(c / 64) - c)``, 0 without
        linear-attention layers (:func:`~specsim.hardware.step_profile.prefill_state_moves`).

        Args:
            chunk_tokens: (n,) tokens of each prefill chunk.
        """
        c = np.asarray(chunk_tokens, np.float64)
        return self.state_s_per_request * (prefill_state_moves(c) - c)

    # ------------------------------------------------------------------ the profile
    def grid(self, max_batch_tokens: int) -> np.ndarray:
        """The table's batch sizes: 1, 2, 4 and every multiple of 8 (int64; ``analytic.graph_grid``)."""
        return graph_grid(max_batch_tokens)

    def graph_tokens(self, batch_tokens) -> np.ndarray:
        """(n,) float64: decode steps of ``batch_tokens`` tokens padded to their CUDA graphs (``padded_tokens``)."""
        return padded_tokens(batch_tokens, self.terms.cudagraph_max_tokens)

    def table_terms(self, max_batch_tokens: int, padded: bool = True) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """(grid, {term: (n,) s}) of the B-dependent terms at R = 0 and K = 0 (the profile's table parts): with
        ``padded`` each size priced at its decode step's graph (:meth:`graph_tokens`), else unpadded (prefill)."""
        b = self.grid(max_batch_tokens)
        at = self.graph_tokens(b) if padded else b
        return b, self.breakdown(at, num_requests=np.zeros(b.shape), kv_tokens=0.0)

    def profile(self, max_batch_tokens: int = 4096, name: str | None = None, kind: str = "analytic",
                date: str | None = None, provenance: dict[str, Any] | None = None) -> StepTimeProfile:
        """The :class:`StepTimeProfile` of this model: padded CUDA-graph table for decode steps, the eager
        table (``mixed_step_time_s``) for steps with prefill, the KV, per-request and prefill-attention
        coefficients, and ``metadata.step_model`` (this model's spec, so the terms can be shown and the
        drafter built on the same GPU).

        Args:
            max_batch_tokens: the table's last B (tokens).
            name: the profile's label (default ``<gpu>-<model>-tp<tp>``, ``-ep<ep>`` beyond EP 1; a GPU spec file's
                GPU as ``<name>-from-<file stem>``: :attr:`specsim.hardware.gpus.GpuSpec.name_in_files`).
            kind: ``analytic``, ``fitted`` or ``measured-fit``.
            provenance: extra metadata (e.g. the files a fit used).

        Raises:
            SpecsimInputError: ``max_batch_tokens`` not an int >= 1.
        """
        if (isinstance(max_batch_tokens, bool) or not isinstance(max_batch_tokens, (int, np.integer))
                or max_batch_tokens < 1):
            raise SpecsimInputError(None, None, "max_batch_tokens", "an int >= 1: the table's largest step in "
                                    "tokens (at least one request's decode step)", repr(max_batch_tokens))
        b, t = self.table_terms(max_batch_tokens)
        step = sum(t.values())
        unpadded = sum(self.table_terms(max_batch_tokens, padded=False)[1].values())
        ep = f"-ep{self.ep}" if self.ep > 1 else ""
        name = name or f"{self.gpu.name_in_files}-{self.model.name}-tp{self.tp}{ep}"
        meta = {
            "kind": kind, "name": name, "gpu": self.gpu.label, "model": self.model.name, "tp": self.tp,
            "ep": self.ep, "dtype": self.model.weight_dtype, "kv_dtype": self.model.kv_dtype,
            **{k: v for k in OPTIONAL_DTYPES if (v := getattr(self.model, k))},
            "engine": (f"decode in CUDA graphs at capture sizes {capture_text(self.terms.cudagraph_max_tokens)} "
                       "(eager and multiple-of-8 beyond)" if self.terms.cudagraph_max_tokens > 0 else
                       "no CUDA graphs: every step eager (multiple-of-8 grid)")
                      + "; mixed prefill steps unpadded (mixed_step_time_s), eager beyond the same limit"
                      + (f", + mixed_step_s {self.terms.mixed_step_s * 1e3:.3g} ms each" if self.terms.mixed_step_s
                         else ""),
            "cudagraph_max_tokens": int(self.terms.cudagraph_max_tokens),
            "source": f"specsim.hardware.stepmodel engine-level terms; {self.gpu.source}; {self.terms.source}",
            "date": date or _dt.date.today().isoformat(), "step_model": self.spec(),
            **(provenance or {}),
        }
        e = self.terms
        return StepTimeProfile(batch_tokens=b, step_time_s=step, lookup="padded",
                               kv_read_s_per_token=self.kv_read_s_per_token, per_request_s=self.per_request_s,
                               mixed_step_time_s=unpadded + e.mixed_step_s,
                               prefill_attn_s_per_pair=self.prefill_attn_s_per_pair,
                               linear_state_s=self.state_s_per_request,
                               extrapolate="error", metadata=meta, source=f"<step model {name}>",
                               spec_step_s=e.spec_step_s, spec_request_s=e.spec_request_s,
                               spec_zero_draft_pays=bool(e.spec_zero_draft_pays))

    def spec(self) -> dict[str, Any]:
        """A JSON-serialisable description that :func:`step_model_from_spec` rebuilds."""
        model = {k: v for k, v in asdict(self.model).items()      # unset optional dtypes stay out, so a
                 if not (k in OPTIONAL_DTYPES and v is None)}      # profile reads as before
        return {"model": {"class": type(self.model).__name__, **model}, "gpu": asdict(self.gpu),
                "terms": self.terms.to_dict(), "tp": self.tp, "ep": self.ep,
                "ep_link_bytes_per_s": self.ep_link_bytes_per_s}

    def with_terms(self, **changes: Any) -> "StepModel":
        """A copy with some :class:`EngineTerms` fields replaced."""
        return replace(self, terms=replace(self.terms, **changes))


#: Terms a profile written before issue 20 does not name keep the values it was built with: no speculation
#: overhead, no eager term and the 512-token capture limit (a profile never gains a cost silently when loaded).
PRE_ISSUE_20_TERMS = {"spec_step_s": 0.0, "spec_request_s": 0.0, "eager_kernel_s": 0.0,
                      "cudagraph_max_tokens": 512}


def step_model_from_spec(spec: dict[str, Any], source: str | None = None) -> StepModel:
    """Rebuild a :class:`StepModel` from :meth:`StepModel.spec` (a profile's ``metadata.step_model``; terms it
    does not name take :data:`PRE_ISSUE_20_TERMS`, then the :class:`EngineTerms` defaults).

    Args:
        spec: the JSON object. source: the profile file, named in errors.

    Raises:
        SpecsimInputError: not an object, a missing or malformed part, naming ``source`` and the field
            (``metadata.step_model.gpu``, ``metadata.step_model.terms.cudagraph_max_tokens``).
    """
    where = "metadata.step_model"
    if not isinstance(spec, dict):
        raise SpecsimInputError(source, None, where, "a JSON object with model, gpu and terms (and tp, ep)",
                                type(spec).__name__)
    parts = {"model": "the model's shape", "gpu": "the GPU's datasheet numbers", "terms": "the engine's terms"}
    for key, what in parts.items():
        if key not in spec:
            raise SpecsimInputError(source, None, f"{where}.{key}", f"a JSON object, {what}", "nothing (missing)")
    mdict = spec["model"]
    cls_name = mdict.get("class", "ModelConfig") if isinstance(mdict, dict) else None
    cls = _MODEL_CLASSES.get(cls_name) if isinstance(cls_name, str) else None
    if isinstance(mdict, dict) and cls is None:
        raise SpecsimInputError(source, None, f"{where}.model.class", f"one of {sorted(_MODEL_CLASSES)}",
                                repr(cls_name))
    model = from_json(cls or ModelConfig, {k: v for k, v in mdict.items() if k != "class"}
                      if isinstance(mdict, dict) else mdict, source, f"{where}.model")
    gpu = from_json(GpuSpec, spec["gpu"], source, f"{where}.gpu")
    terms = from_json(EngineTerms, spec["terms"], source, f"{where}.terms", PRE_ISSUE_20_TERMS)
    try:
        return StepModel(model, gpu, terms, spec.get("tp", 1), spec.get("ep", 1), spec.get("ep_link_bytes_per_s"))
    except SpecsimInputError as e:
        raise SpecsimInputError(source, None, f"{where}.{e.field}", e.expected, e.got) from None


_MODEL_CLASSES: dict[str, type] = {"ModelConfig": ModelConfig, "V4Config": V4Config}   # a spec's model.class


def model_presets() -> dict[str, ModelConfig]:
    """Model shapes by preset name: ``MODELS`` and DeepSeek-V4's (``v4-flash``, ``v4-pro``; TP 1, ``V4_MODELS``)."""
    return {**MODELS, **V4_MODELS}


def step_model_of(profile: StepTimeProfile) -> StepModel | None:
    """The :class:`StepModel` a profile was built from (``metadata.step_model``), or None for tables."""
    spec = profile.metadata.get("step_model")
    return None if spec is None else step_model_from_spec(spec, profile.source)


def step_model(model: str | ModelConfig, gpu: str | GpuSpec, tp: int = 1, ep: int = 1,
               terms: EngineTerms | None = None, **kw: Any) -> StepModel:
    """A :class:`StepModel` from a preset name (:func:`model_presets`) or :class:`ModelConfig`, and a GPU.

    Raises:
        SpecsimInputError: unknown preset or GPU, bad tp/ep.
    """
    if isinstance(model, str):
        if model not in (presets := model_presets()):
            raise SpecsimInputError(None, None, "model", f"one of {sorted(presets)} or a config.json", repr(model))
        model = presets[model]
    if not isinstance(model, ModelConfig):                  # None, a dict: an AttributeError from deep inside
        raise SpecsimInputError(None, None, "model", "a preset name or a ModelConfig (specsim.hardware.model_config)",
                                repr(model))
    spec = resolve_gpu(gpu)
    return StepModel(model, spec, terms or EngineTerms(), tp, ep, **kw)


def terms_table(sm: StepModel, batch_tokens, num_requests=None, kv_tokens=0.0):
    """A pandas DataFrame of the terms in milliseconds, one row per B, with the total (for ``--terms``)."""
    import pandas as pd

    b = np.atleast_1d(np.asarray(batch_tokens, np.float64))
    t = sm.breakdown(b, num_requests, kv_tokens)
    df = pd.DataFrame({"batch_tokens": b.astype(int), **{k: v * 1e3 for k, v in t.items()}})
    df["total"] = df[list(TERMS)].sum(axis=1)
    return df


__all__ = ["TERMS", "EngineTerms", "StepModel", "model_presets", "step_model", "step_model_from_spec", "step_model_of",
           "terms_table", "BYTES_PER_DTYPE"]
