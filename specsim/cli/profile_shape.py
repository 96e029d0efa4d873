"""What `specsim profile analytic` and `profile fit` say of the step model they build: the shape line, its notes
(weight-only and W4A8 GEMMs, a capture limit between capture sizes, a table below the capture limit) and the
checks of the options that size the table (``--max-batch-tokens``, ``--cudagraph-max-tokens``)."""

from __future__ import annotations

import typer

from specsim.cli.profile_fit_report import say as _say
from specsim.errors import SpecsimInputError


def check_table_size(max_batch_tokens: int) -> None:
    """Refuse a ``--max-batch-tokens`` below 1: the table must hold at least one request's plain decode step."""
    if max_batch_tokens < 1:
        raise SpecsimInputError(None, None, "--max-batch-tokens", "an int >= 1: the profile table's largest step "
                                "in tokens (at least one request's decode step; default 4096)", str(max_batch_tokens))


def with_capture_limit(sm, cudagraph_max_tokens: int | None):
    """``sm`` with ``--cudagraph-max-tokens`` set (None: vLLM's default for the GPU, by its compute capability, and a
    note where a GPU spec file gives none), refusing a negative one; a
    limit between two of vLLM's capture sizes is kept, and a note says which size is the last captured (vLLM
    captures its sizes up to the limit, so 100 captures up to 96 and a step of 97 tokens runs eager)."""
    from specsim.hardware.analytic import capture_list, graph_limit

    if cudagraph_max_tokens is None:
        if sm.gpu.spec_file is not None and sm.gpu.compute_capability is None:
            _say(f"note: {sm.gpu.spec_file} gives no compute_capability, so CUDA graphs are taken to capture up to "
                 f"{sm.terms.cudagraph_max_tokens} tokens, vLLM's default off data-center Blackwell (compute "
                 "capability 10.x captures 1,024): add \"compute_capability\" (nvidia-smi --query-gpu=compute_cap) "
                 "to the file, or give --cudagraph-max-tokens")
        return sm
    if cudagraph_max_tokens < 0:
        raise SpecsimInputError(None, None, "--cudagraph-max-tokens", "an int >= 0: the largest CUDA-graph size "
                                "in tokens (0: no graphs, every step eager)", str(cudagraph_max_tokens))
    limit = graph_limit(cudagraph_max_tokens)
    if cudagraph_max_tokens and limit != cudagraph_max_tokens:
        sizes = capture_list(cudagraph_max_tokens + 16)
        above = int(sizes[sizes > cudagraph_max_tokens][0])
        _say(f"note: --cudagraph-max-tokens {cudagraph_max_tokens} is not one of vLLM's capture sizes (1, 2, 4, "
             f"every 8 to 248, every 16 from 256): graphs are captured up to {limit} tokens, as vLLM captures "
             f"the sizes up to its limit, and a step of {limit + 1} or more runs eager (give {limit} or {above} to "
             "say so)")
    return sm.with_terms(cudagraph_max_tokens=cudagraph_max_tokens)


def _other_gemms(m) -> str:
    """The GEMMs of a model's ``other`` part (``ModelConfig.gemm_dtype``) that it has, as a note names them: a
    dense model's MLP; a MoE model's dense-layer MLPs and shared experts where it has them, and its router."""
    if not m.num_experts:
        return "MLP"
    have = [name for name, n in (("dense-MLP", m.num_dense_layers), ("shared-expert", m.num_shared_experts),
                                 ("router", 1)) if n]
    return "/".join(have)


def _listed(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)


def echo_shape(sm) -> None:
    """One line naming the model, GPU and parallelism used; a warning when the weights do not fit the GPU."""
    from dataclasses import replace

    from specsim.hardware.kv_capacity import STEP_MODEL_UTILIZATION
    from specsim.hardware.v4 import V4Config

    m, g = sm.model, sm.gpu
    weights = m.weight_bytes(sm.tp, sm.ep)
    mixed = ", ".join(f"{p} {m.gemm_dtype(p)}" for p in ("experts", "attention") if m.gemm_dtype(p) != m.weight_dtype)
    typer.echo(f"shape: {m.name} ({m.total_params() / 1e9:.1f}B params, {m.weight_dtype} weights"
               + (f" ({mixed})" if mixed else "")
               + (f", {m.activation_dtype} activations" if m.activation_dtype else "") + f", {m.kv_dtype} KV) "
               f"on {g.label}, TP {sm.tp}, EP {sm.ep}: {weights / 1e9:.1f} GB of weights per GPU")
    parts = {"attention": "attention", "experts": "routed-expert", "other": _other_gemms(m)}
    only = [f"{parts[p]} ({m.gemm_dtype(p)})" for p in sm.weight_only_parts()]
    if only:
        _say(f"note: the {g.label} has no tensor cores for the weight dtype of its {_listed(only)} GEMMs: "
             "they run weight-only, their stored bytes at the BF16 rate (vLLM's Marlin path; docs/profiles.md)")
    mixed_in = [f"{parts[p]} ({m.gemm_dtype(p)})" for p in sm.mixed_input_parts()]
    if mixed_in:
        kernels = "/".join(sorted({sm.gemm_kernel(p) for p in sm.mixed_input_parts()}))
        _say(f"note: the {_listed(mixed_in)} GEMMs run {kernels}: their stored bytes against "
             f"{m.activation_dtype} activations at the {g.label}'s {m.activation_dtype.upper()} rate "
             "(--activation-dtype; as DeepGEMM's fp8_fp4 GEMMs on NVIDIA GPUs; docs/profiles.md)")
    plain = replace(sm, model=replace(m, activation_dtype=None))
    if m.activation_dtype and all(sm.compute_dtype(p) == plain.compute_dtype(p) for p in parts
                                  if p != "experts" or m.num_experts):
        _say(f"note: --activation-dtype {m.activation_dtype} changes no GEMM here: a GEMM runs at the rate of "
             f"its wider operand, and the weights are already {m.activation_dtype} or wider (BF16 weights "
             "run BF16); it applies to FP8 or FP4 weights")
    more = "--ep" if isinstance(m, V4Config) else "--tp/--ep"          # V4 runs data-parallel attention (TP 1)
    if weights > g.memory_bytes:
        _say(f"warning: {weights / 1e9:.1f} GB of weights per GPU exceed the {g.label}'s "
             f"{g.memory_bytes / 1e9:.1f} GB: raise {more} or use a smaller weight dtype; the profile "
             "describes a deployment that cannot run")
    elif weights > STEP_MODEL_UTILIZATION * g.memory_bytes:
        _say(f"warning: {weights / 1e9:.1f} GB of weights per GPU leave no KV cache within "
             f"{STEP_MODEL_UTILIZATION:.0%} of the {g.label}'s {g.memory_bytes / 1e9:.1f} GB (vLLM's default "
             f"gpu_memory_utilization): a run on this profile fails; raise {more} or use a smaller weight "
             "dtype")
