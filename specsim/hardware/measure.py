"""Measure a step-time profile with torch (``specsim profile measure``): random weights, any device.

A Llama-style decoder (RMSNorm, GQA attention with RoPE-free scaled-dot-product attention, gated SiLU MLP)
is built from a :class:`specsim.hardware.analytic.ModelConfig` with random weights (nothing downloaded).
A step of B tokens is B decode sequences, each with one new token attending over ``context_tokens``
cached tokens plus itself, through all layers and the LM head (hidden -> vocab logits).

Timing: ``warmup`` untimed runs, then the median of ``repeats`` timed runs. On CUDA: bf16, each B captured
in a CUDA graph (as serving engines do) and timed with CUDA events (device-side); on CPU: fp32 (CPU bf16
matmuls are slow and unrepresentative), ``time.perf_counter`` around a full forward.

torch is imported lazily: the rest of specsim does not need it.
"""

from __future__ import annotations

import datetime as _dt
import platform
import time

import numpy as np

from specsim.errors import SpecsimInputError, torch_missing
from specsim.hardware.analytic import MODELS, ModelConfig
from specsim.hardware.profile import StepTimeProfile

#: The small model of the torch backend (a few MB of random weights, runs on a laptop CPU).
TINY = ModelConfig("specsim-tiny", num_layers=4, hidden=256, num_heads=8, num_kv_heads=4, head_dim=32,
                   ffn=704, vocab=4096)


#: Repeats of one batch size whose slowest run took more than this factor times the fastest are flagged: on an
#: idle CPU with pinned threads a forward's repeats agree within tens of percent; a 2x gap means some runs shared
#: the cores (the median kept is then only as good as the majority of runs).
SPREAD_FACTOR = 2.0
#: A larger batch measured faster than a smaller one by more than this factor is flagged: more tokens per forward
#: never cost less, so a falling curve is timing noise (or a spike that slowed the smaller batch).
FALL_FACTOR = 1.2
#: Over at least ``FLAT_SPAN`` times more tokens, a step time that rises by less than ``FLAT_RISE`` is flagged: the
#: CPU forwards this backend times grow with the tokens (the tiny target: about 3x from 1 to 64 tokens), so a flat
#: curve means the small batches were slowed.
FLAT_SPAN, FLAT_RISE = 16, 1.02


def timing_warnings(batch_tokens, samples_s) -> list[str]:
    """What is suspicious in a measured step-time curve: repeats that disagree, a falling or a flat curve.

    Args:
        batch_tokens: (n,) increasing batch sizes B, tokens.
        samples_s: n sequences of timed repeats, seconds; the falling and flat checks read their medians.

    Returns:
        one sentence per finding (empty when the curve looks physical): each batch size whose repeats
        spread more than :data:`SPREAD_FACTOR`, the first B measured more than :data:`FALL_FACTOR` faster than a
        smaller B, or else the first pair of points :data:`FLAT_SPAN` x or more apart in B whose step times differ by
        less than :data:`FLAT_RISE`.
    """
    b = [int(x) for x in batch_tokens]
    med = np.array([float(np.median(s)) for s in samples_s])
    out = []
    for bi, s in zip(b, samples_s):
        lo, hi = float(np.min(s)), float(np.max(s))
        if hi > SPREAD_FACTOR * lo:
            out.append(f"B={bi}: its {len(s)} repeats range {1e3 * lo:.2f}-{1e3 * hi:.2f} ms ({hi / lo:.1f}x, more "
                       f"than {SPREAD_FACTOR:g}x): the machine was busy while measuring")
    falls = [j for j in range(1, len(b)) if med[j] * FALL_FACTOR < med[:j].max()]
    if falls:
        j = falls[0]
        k = int(np.argmax(med[:j]))
        out.append(f"falling curve: B={b[j]} measured {1e3 * med[j]:.2f} ms, {med[k] / med[j]:.1f}x faster than "
                   f"B={b[k]} ({1e3 * med[k]:.2f} ms): a larger batch cannot be faster (non-physical: timing noise)")
    else:
        flat = [(i, j) for j in range(len(b)) for i in range(j) if b[j] >= FLAT_SPAN * b[i]
                and med[j] < FLAT_RISE * med[i]]
        if flat:
            i, j = flat[0]
            out.append(f"flat curve: B={b[j]} measured {1e3 * med[j]:.2f} ms, less than {FLAT_RISE - 1:.0%} above "
                       f"B={b[i]}'s {1e3 * med[i]:.2f} ms with {b[j] // b[i]}x the tokens (non-physical on a CPU: "
                       "the smaller batches were slowed)")
    return out


def _import_torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - depends on the environment
        raise torch_missing("specsim profile measure") from None
    return torch


def build_model(cfg: ModelConfig, device: str, dtype, seed: int = 0):
    """A random-weight decoder for ``cfg`` (dense configs only) as a callable ``f(tokens (B,)) -> logits``.

    Raises:
        SpecsimInputError: an MoE or MLA config (not supported by the measuring model).
    """
    torch = _import_torch()
    if cfg.num_experts or cfg.kv_lora_rank:
        raise SpecsimInputError(None, None, "model", "a dense GQA/MHA config", cfg.name)
    g = torch.Generator(device="cpu").manual_seed(seed)

    def w(*shape):
        return (torch.randn(*shape, generator=g) / np.sqrt(shape[-1])).to(device=device, dtype=dtype)

    h, nq, nkv, hd = cfg.hidden, cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    layers = [dict(qkv=w((nq + 2 * nkv) * hd, h), o=w(h, nq * hd), gate_up=w(2 * cfg.ffn, h),
                   down=w(h, cfg.ffn), n1=torch.ones(h, device=device, dtype=dtype),
                   n2=torch.ones(h, device=device, dtype=dtype)) for _ in range(cfg.num_layers)]
    emb = w(cfg.vocab, h)
    norm_f = torch.ones(h, device=device, dtype=dtype)
    F = torch.nn.functional

    def forward(tokens, k_cache, v_cache):
        # tokens: (B,); k_cache, v_cache: (L, B, nkv, ctx, hd)
        x = emb[tokens]                                                    # (B, h)
        b = x.shape[0]
        for i, lay in enumerate(layers):
            y = F.rms_norm(x, (h,), lay["n1"])
            q, k, v = F.linear(y, lay["qkv"]).split([nq * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.view(b, nq, 1, hd)
            k = torch.cat([k_cache[i], k.view(b, nkv, 1, hd)], dim=2)    # (B, nkv, ctx+1, hd)
            v = torch.cat([v_cache[i], v.view(b, nkv, 1, hd)], dim=2)
            a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)  # (B, nq, 1, hd)
            x = x + F.linear(a.reshape(b, nq * hd), lay["o"])
            y = F.rms_norm(x, (h,), lay["n2"])
            gate, up = F.linear(y, lay["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, lay["down"])
        return F.linear(F.rms_norm(x, (h,), norm_f), emb)                 # (B, vocab)

    return forward


def measure_profile(cfg: ModelConfig | str = TINY, batch_tokens=(1, 2, 4, 8, 16, 32, 64), device: str = "cpu",
                    context_tokens: int = 0, warmup: int = 3, repeats: int = 10, cuda_graphs: bool = True,
                    seed: int = 0, num_threads: int | None = None) -> StepTimeProfile:
    """Time forward steps of B tokens and return a ``kind: measured`` profile (``linear`` lookup).

    Args:
        cfg: a :class:`ModelConfig` or a preset name (``specsim-tiny`` or :data:`analytic.MODELS`).
        batch_tokens: (n,) increasing B values to measure.
        device: ``cpu``, ``cuda``, ``cuda:1``, ``mps`` ...
        context_tokens: KV tokens already cached per sequence (0: attention over the new token only).
        warmup, repeats: untimed and timed runs per B; the median of the timed runs is kept.
        cuda_graphs: capture each B in a CUDA graph on CUDA devices.
        num_threads: CPU threads for torch (default: torch's choice); 1 is steadier on shared machines.

    Raises:
        SpecsimInputError: unknown preset, non-increasing B values, unsupported config, no torch.
    """
    torch = _import_torch()
    if isinstance(cfg, str):
        presets = {TINY.name: TINY, **MODELS}
        if cfg not in presets:
            raise SpecsimInputError(None, None, "model", f"one of {sorted(presets)}", repr(cfg))
        cfg = presets[cfg]
    bs = [int(b) for b in batch_tokens]
    if not bs or bs[0] < 1 or any(b2 <= b1 for b1, b2 in zip(bs, bs[1:])):
        raise SpecsimInputError(None, None, "batch_tokens", "strictly increasing sizes >= 1", str(bs))
    if num_threads:
        torch.set_num_threads(int(num_threads))
    is_cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if is_cuda else torch.float32
    fwd = build_model(cfg, device, dtype, seed)
    times = []
    with torch.inference_mode():
        for b in bs:
            tok = torch.randint(0, cfg.vocab, (b,), device=device)
            kc = torch.randn(cfg.num_layers, b, cfg.num_kv_heads, context_tokens, cfg.head_dim,
                             device=device, dtype=dtype)
            vc = torch.randn_like(kc)
            times.append(_time_cuda(torch, fwd, (tok, kc, vc), warmup, repeats, cuda_graphs) if is_cuda
                         else _time_host(torch, fwd, (tok, kc, vc), warmup, repeats, device))
    meta = {
        "kind": "measured", "gpu": torch.cuda.get_device_name(device) if is_cuda else
        f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)",
        "model": cfg.name, "dtype": str(dtype).replace("torch.", ""), "tp": 1,
        "engine": ("torch eager" if not is_cuda else "torch + CUDA graphs" if cuda_graphs else "torch eager")
        + f", random weights, {context_tokens} cached tokens per sequence",
        "source": f"specsim profile measure (torch {torch.__version__}), median of {repeats} after {warmup} warm-up",
        "model_config": {k: v for k, v in cfg.__dict__.items() if v},
        "date": _dt.date.today().isoformat(),
    }
    return StepTimeProfile(batch_tokens=np.array(bs), step_time_s=np.array(times), lookup="linear",
                           metadata=meta, source=f"<measured {cfg.name} on {device}>")


def _time_host(torch, fwd, args, warmup: int, repeats: int, device: str) -> float:
    sync = torch.mps.synchronize if device.startswith("mps") else (lambda: None)
    for _ in range(warmup):
        fwd(*args)
    sync()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fwd(*args)
        sync()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def _time_cuda(torch, fwd, args, warmup: int, repeats: int, cuda_graphs: bool) -> float:  # pragma: no cover
    run = lambda: fwd(*args)  # noqa: E731
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    if cuda_graphs:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fwd(*args)
        run = graph.replay
        for _ in range(warmup):
            run()
        torch.cuda.synchronize()
    ts = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        ts.append(start.elapsed_time(end) * 1e-3)
    return float(np.median(ts))
