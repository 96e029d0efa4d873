"""A replica's KV capacity: set, the default, or derived from ``cluster.gpu_memory_utilization`` as vLLM does.

vLLM profiles memory at start-up: the device's memory times ``gpu_memory_utilization``, less the weights and
the peak activations of a profiling forward pass, is the KV cache, cut into blocks. :func:`kv_capacity`
does the same from the model's shape in the step-time profile's metadata (docs/report.md gives the rule
and a worked example; tests/test_kv_capacity.py checks it by hand).
"""

from __future__ import annotations

import math

from dataclasses import asdict, dataclass, replace
from typing import Any

from specsim.errors import SpecsimInputError
from specsim.hardware.hybrid_pages import HybridPageLayout, hybrid_page_layout, state_page_bytes
from specsim.hardware.stepmodel import step_model_of
from specsim.hardware.profile import StepTimeProfile, resolve_profile
from specsim.scenario import DEFAULT_KV_CAPACITY_TOKENS, Scenario

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
    where M is the GPU memory, u the utilisation, W the weights per GPU (the target's and, where the run drafts
    with a model, the drafter's own: :func:`specsim.hardware.drafter.drafter_weight_bytes`), b the KV bytes per
    token per GPU
    and A the activation reserve of vLLM's profiling run, ``A = T x (2 hidden + 2 ffn / tp) x dtype_bytes +
    S x vocab x 4``: one layer's hidden and MLP activations over the ``T`` tokens of the forward pass, plus the
    fp32 logits of the ``S = min(max_num_seqs, T)`` rows it samples. vLLM's ``profile_run`` runs the model over
    ``max_num_batched_tokens`` tokens spread over ``min(max_num_seqs, tokens)`` dummy requests and samples one
    row per request (``_dummy_run``, ``_dummy_sampler_run`` in vllm/v1/worker/gpu_model_runner.py): ``T`` is
    the step's token budget, ``prefill.chunk_tokens`` when prefill is colocated, else the largest verify batch
    ``max_num_seqs x (gamma + 1)``. (Before 2026-12-06 specsim charged fp32 logits for every one of
    ``max_num_seqs x (gamma + 1) + chunk`` tokens: 26.6 GB on one B200 for Qwen3.8-27B with DSpark k = 7, where
    the engine's pool leaves about 7 GB besides the weights; docs/memory.md, "The activation reserve".) The pool
    holds the drafter's KV too: the engine charges ``drafter_kv_fraction`` target blocks per target token from it
    (specsim.engine.kv), so the target alone can hold ``tokens / (1 + drafter_kv_fraction)`` tokens when every
    request drafts.

    A model with linear-attention layers (Gated DeltaNet, as Qwen3.5/Qwen3-Next) keeps a recurrent state per
    request instead of a KV cache in those layers, drawn from the same pool: each running request holds
    ``state_blocks`` blocks from admission to release (:func:`state_blocks_per_request`; (1 + gamma) copies of
    the state under speculation, as vLLM keeps them).

    Attributes:
        tokens: capacity per replica, tokens (a multiple of ``block_size`` when derived).
        source: ``kv_capacity_tokens`` (set), ``default`` (:data:`DEFAULT_KV_CAPACITY_TOKENS`) or
            ``gpu_memory_utilization`` (derived; the other fields are then filled).
        block_size: tokens per KV block.
        drafter_kv_fraction: the drafter's KV per target KV token charged from the pool.
        state_blocks: blocks each running request holds for its linear-attention state (0 without such layers).
        state_bytes: the bytes behind ``state_blocks`` per request per GPU (all its state copies), 0 without.
        memory_tokens: at the default capacity, the tokens the profile's model and GPUs would hold at vLLM's
            0.9 (:func:`_plain_table_memory`), None where its metadata cannot say or the capacity is not the default.
        gpu, gpu_memory_bytes, utilization, weights_bytes, activation_bytes, activation_tokens (T), activation_rows
        (S), kv_bytes_per_token, model, tp, profile: the derivation's inputs (bytes per GPU), None when not derived
        (``weights_bytes`` includes ``drafter_weights_bytes``, the drafter's own weights per GPU, 0 without).
        layout: a hybrid model's page layout where the capacity is derived (:mod:`specsim.hardware.hybrid_pages`:
            ``tokens`` and ``block_size`` are then in its engine blocks, each one vLLM block in every attention
            group of a request, so such ``tokens`` are not a ``cluster.kv_capacity_tokens`` equivalent, which
            counts the scenario's blocks of the target alone), else None.
        engine_groups: the pool's blocks one engine block stands for (a layout's attention groups; else 1).
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
    state_blocks: int = 0
    state_bytes: float = 0.0
    memory_tokens: int | None = None
    drafter_weights_bytes: float = 0.0
    layout: HybridPageLayout | None = None
    activation_rows: int | None = None
    engine_groups: int = 1

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (``blocks``, ``target_tokens_with_drafter`` and ``describe`` added)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "layout"}
        d["layout"] = None if self.layout is None else {**asdict(self.layout), "block_bytes": self.layout.block_bytes,
                                                        "state_blocks": self.layout.state_blocks}
        d["blocks"] = self.tokens // self.block_size
        d["target_tokens_with_drafter"] = int(self.tokens / (1 + self.drafter_kv_fraction))
        d["describe"] = self.describe()
        d["max_requests"] = self.max_requests()
        return d

    def max_requests(self) -> int | None:
        """The most requests the pool holds at once where a hybrid model's page layout fixes each request's blocks
        (its attention blocks up to the layout's block tokens, its state blocks and its drafter's), as the run
        header says it; None for a pool of tokens alone (how many requests fit depends on their lengths)."""
        if self.layout is None:
            return None
        return self.tokens // self.block_size // (self.state_blocks + 1 + math.ceil(self.drafter_kv_fraction))

    def describe(self) -> str:
        """One line for a run header: the capacity, and its parts when derived."""
        head = f"KV capacity {self.tokens:,} tokens per replica ({self.tokens // self.block_size:,} blocks of " \
               f"{self.block_size})"
        lay = self.layout
        share = (f"; the drafter's KV takes {self.drafter_kv_fraction:.3g} of a target token's, leaving "
                 f"{int(self.tokens / (1 + self.drafter_kv_fraction)):,} target tokens when every running request drafts"
                 if self.drafter_kv_fraction and lay is None else "")
        pool = (f"{lay.state_blocks:,} of the pool's: " if lay is not None and self.engine_groups > 1 else "")
        share += (f"; each running request also holds {self.state_blocks:,} blocks of linear-attention state "
                  + (f"({pool}{lay.state_groups} groups x {lay.state_copies} cop"
                     f"{'ies' if lay.state_copies > 1 else 'y'}, " if lay is not None else "(")
                  + f"{self.state_bytes / 1e6:,.0f} MB)" if self.state_blocks else "")
        if lay is not None:
            drafter = math.ceil(self.drafter_kv_fraction)             # a set drafter.kv_fraction: its own blocks
            one = self.state_blocks + 1 + drafter
            share += (f", so at most {self.max_requests():,} requests of up to {lay.block_tokens:,} "
                      f"tokens run at once ({one} blocks each"
                      + (", the drafter's KV in its own group" if lay.drafter_groups and self.engine_groups > 1
                         and not drafter else "")
                      + (f", the drafter's KV {self.drafter_kv_fraction:.3g} of the target's (drafter.kv_fraction)"
                         if drafter else "") + ")")
        if self.source != "gpu_memory_utilization":
            where = "cluster.kv_capacity_tokens" if self.source == "kv_capacity_tokens" else "the default"
            return f"{head} from {where}{share}{self._memory_note()}"
        gb = 1e9
        drafter = (f" (the drafter's {self.drafter_weights_bytes / gb:.2f} GB included)"
                   if self.drafter_weights_bytes else "")
        g = self.engine_groups
        per = (f"{g * lay.block_bytes / 1e6:,.1f} MB per block ({self.model}, TP {self.tp}; {lay.describe()}"
               + (f"; a block of the engine is a {lay.block_tokens}-token attention block in each of a request's {g} "
                  f"attention groups, {g} of the pool's blocks of {lay.block_bytes / 1e6:,.1f} MB)" if g > 1 else ")")
               if lay is not None else
               f"{self.kv_bytes_per_token:,.0f} B per token ({self.model}, TP {self.tp}), floored to blocks")
        return (f"{head} = ({self.gpu} {self.gpu_memory_bytes / gb:.2f} GB x {self.utilization:g} - weights "
                f"{self.weights_bytes / gb:.2f} GB{drafter} - activation reserve {self.activation_bytes / gb:.2f} GB "
                f"[T x (2 hidden + 2 ffn/tp) x dtype + S x vocab x 4 B, T = {self.activation_tokens} tokens, S = "
                f"{self.activation_rows} sampled rows]) / {per}{share}")


    def _memory_note(self) -> str:
        """At the default capacity, what the profile's GPUs would hold (:attr:`memory_tokens`), when it differs."""
        m = self.memory_tokens
        if m is None or abs(m - self.tokens) <= 0.1 * self.tokens:
            return ""
        how = "more than the GPUs can hold" if m < self.tokens else "less than the GPUs would hold"
        return (f" ({how}: this profile's model and GPUs hold {m:,} tokens at vLLM's gpu_memory_utilization "
                f"{STEP_MODEL_UTILIZATION}; set cluster.gpu_memory_utilization=0.9 to use that)")


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


#: gpu_memory_utilization assumed for a step-model profile when the scenario sets no capacity (vLLM's default).
STEP_MODEL_UTILIZATION = 0.9


def state_blocks_per_request(model, tp: int, gamma: int, kv_bytes_per_token: float,
                             block_size: int) -> tuple[int, float]:
    """Blocks (and bytes) of linear-attention state one running request holds in the KV pool, per GPU shard.

    ``bytes = (1 + gamma) x linear_layers x state page`` (the fp32 recurrent state and the convolution's last
    ``kernel - 1 + gamma`` inputs of a linear-attention layer, :func:`specsim.hardware.hybrid_pages.state_page_bytes`;
    used where ``cluster.kv_capacity_tokens`` sets the pool in tokens, without the page layout's padding): vLLM
    (V1) gives each request one state block per such layer plus ``num_speculative_blocks`` =
    ``num_speculative_tokens`` more under speculation, so a verify step can roll back to any accepted prefix
    (``MambaBase.get_kv_cache_spec``, vllm/model_executor/layers/mamba/abstract.py; the default
    ``mamba_cache_mode = "none"``, no prefix caching of states). ``blocks = ceil(bytes / (kv_bytes_per_token x
    block_size))``: the pool is one pool of bytes shared with the attention layers' KV, counted here in blocks
    of the attention KV. ``(0, 0.0)`` for a model without linear-attention layers.

    Args:
        model: the target's :class:`~specsim.hardware.model_config.ModelConfig`; tp: tensor-parallel size;
        gamma: drafts per request per step (0: no speculation); kv_bytes_per_token: the attention KV bytes per
        token per shard; block_size: tokens per KV block.
    """
    state = ((1 + max(int(gamma), 0)) * float(model.linear_layers * state_page_bytes(model, tp, gamma))
             if model.linear_layers else 0.0)
    if state <= 0.0 or kv_bytes_per_token <= 0.0:
        return 0, 0.0
    return int(-(-state // (kv_bytes_per_token * block_size))), state


def kv_capacity(sc: Scenario, profile: StepTimeProfile | None, gamma: int,
                drafter_kv_fraction: float = 0.0, drafter_weights_bytes: float = 0.0,
                drafter_attention: tuple[int, bool] | None = None) -> KvCapacity:
    """A replica's KV capacity in tokens: set, derived from ``cluster.gpu_memory_utilization`` (the rule and its
    parts: :class:`KvCapacity`), derived at vLLM's 0.9 for a step-model profile (it knows the model and GPU), or
    the default for a plain table.

    Args:
        sc: the scenario; profile: the run's step-time profile (None: the scenario's, loaded when needed);
        gamma: the run's draft block length; drafter_kv_fraction: the drafter's KV per target KV token;
        drafter_weights_bytes: the drafter's own weights per GPU (taken from the memory where it is derived).
        drafter_attention: the drafter's attention layers and whether they are a cache spec of their own, for a
            hybrid model's page layout (:func:`specsim.hardware.hybrid_pages.hybrid_page_layout`; its drafter
            share replaces ``drafter_kv_fraction`` unless the scenario sets ``drafter.kv_fraction``); None: no
            drafter layers in the layout, ``drafter_kv_fraction`` kept as given.

    A derived capacity of a model with linear-attention layers follows vLLM's hybrid page layout
    (:mod:`specsim.hardware.hybrid_pages`): ``block_size`` is its attention block (``layout.block_tokens``
    tokens, not the scenario's), each engine block one vLLM block in every attention group of a request,
    ``state_blocks`` the state in those units, the drafter's own groups in them (``drafter_kv_fraction`` 0)
    unless the scenario sets ``drafter.kv_fraction``, and ``layout`` says so.

    Raises:
        SpecsimInputError: the profile's metadata lacks the model shape or names no known GPU (naming the
            profile), or the weights and reserve leave no room for one KV block.
    """
    c = sc.cluster
    if c.gpu_memory_utilization is None and c.kv_capacity_tokens is not None:
        kvc = KvCapacity(int(c.kv_capacity_tokens), "kv_capacity_tokens", c.block_size, drafter_kv_fraction)
        return _with_state(kvc, step_model_of(profile) if profile is not None else None, gamma)
    prof = profile or resolve_profile(sc.profile.name, sc.profile.lookup)
    sm = step_model_of(prof)
    kvc = _capacity(sc, prof, sm, gamma, drafter_kv_fraction, drafter_weights_bytes)
    layout = (hybrid_page_layout(sm.model, sm.tp, gamma, *(drafter_attention or (0, False)), c.block_size)
              if sm is not None and kvc.source == "gpu_memory_utilization" else None)
    if layout is None:
        return _with_state(kvc, sm, gamma)
    keep = drafter_attention is None or sc.drafter.kv_fraction is not None
    return _in_hybrid_pages(kvc, layout, with_drafter=not keep)


def _in_hybrid_pages(kvc: KvCapacity, layout: HybridPageLayout, with_drafter: bool) -> KvCapacity:
    """A derived capacity ``kvc`` recut into vLLM's hybrid page layout (:mod:`specsim.hardware.hybrid_pages`):
    the memory left for the pool in whole blocks of ``layout.block_bytes``, counted in engine blocks of
    ``layout.block_tokens`` tokens, each one vLLM block in every attention group of a request (the drafter's own
    groups too where ``with_drafter``; else ``kvc``'s drafter fraction, one the scenario set, is kept), and each
    request's state in those units (:meth:`~specsim.hardware.hybrid_pages.HybridPageLayout.engine_state_blocks`).

    Raises:
        SpecsimInputError: the memory left holds fewer blocks than one request of one attention block (its state
            and attention blocks; naming the profile).
    """
    free = kvc.gpu_memory_bytes * kvc.utilization - kvc.weights_bytes - kvc.activation_bytes
    blocks = int(max(free, 0.0) // layout.block_bytes)
    size, g = layout.block_tokens, layout.engine_groups(with_drafter)
    one = (layout.engine_state_blocks(with_drafter) + 1) * g     # a request of one attention block, in vLLM blocks
    if blocks // g * g < one:
        raise SpecsimInputError(kvc.profile, None, "cluster.gpu_memory_utilization",
                                f"room for one request: {free / 1e9:.2f} GB is left for the KV pool, "
                                f"{blocks} blocks of {layout.block_bytes / 1e6:.1f} MB, while a request of up to "
                                f"{layout.block_tokens} tokens takes {one} ({layout.state_blocks} of them its "
                                f"linear-attention state; {layout.describe()})", repr(kvc.utilization))
    return replace(kvc, tokens=blocks // g * size, block_size=size, engine_groups=g,
                   drafter_kv_fraction=0.0 if with_drafter else kvc.drafter_kv_fraction,
                   state_blocks=layout.engine_state_blocks(with_drafter),
                   state_bytes=float(layout.state_blocks * layout.block_bytes), layout=layout)


def _with_state(kvc: KvCapacity, sm, gamma: int) -> KvCapacity:
    """``kvc`` with the linear-attention state each request holds, where the step model ``sm`` has such layers."""
    if sm is None or not sm.model.linear_layers:
        return kvc
    blocks, nbytes = state_blocks_per_request(sm.model, sm.tp, gamma, sm.kv_bytes_per_token, kvc.block_size)
    return replace(kvc, state_blocks=blocks, state_bytes=nbytes)


def _capacity(sc: Scenario, prof: StepTimeProfile, sm, gamma: int, drafter_kv_fraction: float,
              drafter_weights_bytes: float = 0.0) -> KvCapacity:
    """:func:`kv_capacity` without the linear-attention state: the default, or derived from the memory.

    A plain table at the default capacity is still checked against its GPUs where its metadata gives the model's
    shape and a GPU of known memory (:func:`_plain_table_memory`): weights that leave no room for a KV block at
    vLLM's 0.9 are refused, and what the memory would hold is kept beside the default (``memory_tokens``)."""
    c = sc.cluster
    utilization = c.gpu_memory_utilization
    if utilization is None:
        if sm is None:                           # a plain table: the default capacity (sized for Llama-2-7B)
            return KvCapacity(DEFAULT_KV_CAPACITY_TOKENS, "default", c.block_size, drafter_kv_fraction,
                              memory_tokens=_plain_table_memory(sc, prof, gamma))
        utilization = STEP_MODEL_UTILIZATION     # a step-model profile knows its model and GPU: derive
    d = _derivation(sc, prof, sm, gamma, utilization, drafter_weights_bytes)
    if d["tokens"] < c.block_size:
        _check_reserve(sc, d)
        raise SpecsimInputError(prof.source, None, "cluster.gpu_memory_utilization",
                                f"room for at least one KV block: {_no_room(d)} (raise the profile's TP/EP, EP for DeepSeek-V4, or use "
                                "a smaller weight dtype)",
                                repr(c.gpu_memory_utilization) if c.gpu_memory_utilization is not None
                                else f"unset (vLLM's default {STEP_MODEL_UTILIZATION} assumed)")
    return KvCapacity(d["tokens"], "gpu_memory_utilization", c.block_size, drafter_kv_fraction, d["gpu"], d["mem"],
                      utilization, d["weights"], d["act"], d["t"], float(d["per_token"]), d["model"].name, d["tp"],
                      prof.source, drafter_weights_bytes=float(drafter_weights_bytes), activation_rows=d["rows"])


def _check_reserve(sc: Scenario, d: dict) -> None:
    """Where the weights fit but the activation reserve leaves no KV block, name the setting that sized the reserve
    (``cluster.max_num_seqs``, or ``prefill.chunk_tokens`` in a replica that prefills), in the scenario file and
    line that set it (a fresh user's ``max_num_seqs = 1e9`` was blamed on the profile and the KV capacity).

    Raises:
        SpecsimInputError: the reserve alone leaves no room.
    """
    if d["weights"] >= d["mem"] * d["utilization"]:
        return
    from specsim.tomlfile import key_line

    key = "prefill.chunk_tokens" if sc.prefill.mode == "colocated" else "cluster.max_num_seqs"
    section, name = key.split(".")
    where, line = key_line(sc.source, key, getattr(getattr(sc, section), name)) or (None, None)
    raise SpecsimInputError(where, line, key, "an activation reserve that leaves room for the KV cache: vLLM's "
                            f"profiling run reserves activations for {d['t']:,} tokens and logits for {d['rows']:,} "
                            f"rows, and {_no_room(d)}; lower {key}", repr(getattr(getattr(sc, section), name)))


def _no_room(d: dict) -> str:
    """The memory sum of a derivation, as error messages quote it."""
    return (f"{d['gpu']} {d['mem'] / 1e9:.1f} GB x {d['utilization']:g} - weights {d['weights'] / 1e9:.2f} GB - "
            f"activation reserve {d['act'] / 1e9:.2f} GB leaves {d['free'] / 1e9:.2f} GB")


def _derivation(sc: Scenario, prof: StepTimeProfile, sm, gamma: int, utilization: float,
                drafter_weights_bytes: float = 0.0) -> dict[str, Any]:
    """vLLM's memory rule (:class:`KvCapacity`) at ``utilization``: its inputs and ``tokens`` (floored to blocks; 0
    when nothing is left). A step-model profile gives its shape, dtypes, TP/EP and GPU datasheet; a plain table
    its metadata.

    Raises:
        SpecsimInputError: a plain table's metadata lacks the model's shape or names no GPU of known memory.
    """
    c = sc.cluster
    t = sc.prefill.chunk_tokens if sc.prefill.mode == "colocated" else c.max_num_seqs * (gamma + 1)
    if sm is not None:
        model, tp, gpu, mem = sm.model, sm.tp, sm.gpu.label, sm.gpu.memory_bytes
        weights = model.weight_bytes(sm.tp, sm.ep) + drafter_weights_bytes
        per_token = model.kv_bytes_per_token(sm.tp)
    else:
        model, dtype_bytes, tp = _model_shape(prof)
        gpu = str(prof.metadata.get("gpu", "")).lower().split("-")[0].split("_")[0].split(" ")[0]
        if gpu not in GPU_MEMORY_BYTES:
            raise SpecsimInputError(prof.source, None, "metadata.gpu",
                                    f"a GPU of known memory {sorted(GPU_MEMORY_BYTES)} to derive the KV capacity",
                                    repr(prof.metadata.get("gpu")))
        mem = GPU_MEMORY_BYTES[gpu]
        weights = _weight_params(model, tp) * dtype_bytes
        per_token = (model.num_layers * (model.kv_lora_rank + model.rope_dim) if model.kv_lora_rank
                     else 2 * model.num_layers * max(1, model.num_kv_heads // tp) * model.head_dim) * dtype_bytes
    rows = min(c.max_num_seqs, t)
    act = t * (2 * model.hidden + 2 * model.ffn / tp) * 2 + rows * model.vocab * 4
    if per_token <= 0:
        raise SpecsimInputError(prof.source, None, "cluster.gpu_memory_utilization",
                                "a model with softmax-attention layers (a KV cache) to derive the capacity from; set "
                                "cluster.kv_capacity_tokens instead", f"{model.name}: no KV bytes per token")
    free = mem * utilization - weights - act
    tokens = int(max(free, 0) // per_token) // c.block_size * c.block_size
    return {"tokens": tokens, "gpu": gpu, "mem": mem, "utilization": utilization, "weights": weights, "act": act,
            "t": t, "rows": rows, "per_token": per_token, "model": model, "tp": tp, "free": free}


def _plain_table_memory(sc: Scenario, prof: StepTimeProfile, gamma: int) -> int | None:
    """Tokens a plain table's model and GPUs would hold at vLLM's 0.9 (:func:`_derivation`), None where its
    metadata cannot say (no model shape, no GPU of known memory): the default capacity is then taken as it is.

    Raises:
        SpecsimInputError: the weights leave no room for one KV block (a 70B model in BF16 on one 80 GB GPU):
            the deployment cannot run, whatever the default capacity says (a fresh user's report: it ran at
            110,000 tokens without a word). Setting ``cluster.kv_capacity_tokens`` runs the table anyway.
    """
    try:
        d = _derivation(sc, prof, None, gamma, STEP_MODEL_UTILIZATION)
    except SpecsimInputError:
        return None
    if d["tokens"] < sc.cluster.block_size:
        _check_reserve(sc, d)
        raise SpecsimInputError(prof.source, None, "cluster.kv_capacity_tokens",
                                f"a deployment whose weights fit its GPUs: the profile's metadata says "
                                f"{d['model'].name} at TP {d['tp']}, and {_no_room(d)} for the KV cache, so no "
                                "engine could serve it (use a profile at a larger TP, or set "
                                "cluster.kv_capacity_tokens to run the table's step times anyway)",
                                f"unset (the default {DEFAULT_KV_CAPACITY_TOKENS:,} tokens)")
    return d["tokens"]
