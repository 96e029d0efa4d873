"""Shapes of decoder-only models: :class:`ModelConfig`, presets, and a reader of Hugging Face config.json files.

A :class:`ModelConfig` holds what the step-time model needs: layer count and width, attention heads (MHA, GQA
or DeepSeek's MLA), the dense MLP, the MoE experts (routed, shared, how many layers are dense), the vocabulary,
and the dtypes of weights and KV cache. Its methods give per-GPU weight bytes under tensor (TP) and expert (EP)
parallelism, KV bytes per token, the attention GEMM shapes and the parameters each token touches.

Parameter counting (every matrix is a gated MLP or a projection without bias; norms are counted, biases and
rotary tables are not; DeepSeek-V3's multi-token-prediction module is not part of the model):

* attention per layer: the (N, K) projections of :meth:`ModelConfig.attention_gemms` plus its norms;
* dense MLP layer: 3 x hidden x ffn (gate, up, down);
* MoE layer: num_experts routed experts of 3 x hidden x expert_ffn, num_shared_experts shared experts of
  3 x hidden x shared width, and a router of hidden x num_experts;
* embedding vocab x hidden, plus an LM head of the same size unless ``tie_embeddings``.

Dtypes: the transformer's GEMM weights are stored in ``weight_dtype``; embeddings, LM head, norms and routers
stay in BF16 as FP8/FP4 checkpoints keep them (DeepSeek-V3's ``quantization_config`` excludes them; NVFP4
checkpoints likewise). Two components may differ (mixed-precision checkpoints: gpt-oss ships MXFP4 routed
experts beside BF16 attention, DeepSeek-V4 FP4 routed experts beside FP8 for the rest, docs/production.md):
``expert_dtype`` for the routed experts and ``attention_dtype`` for the token mixers' projections (softmax and
linear attention), each None = ``weight_dtype``; dense MLPs and shared experts stay in ``weight_dtype``. Block scales of FP8/FP4 formats are not counted (FP8 with 128 x 128 blocks adds
< 0.01%; NVFP4 adds one FP8 scale per 16 values, +12.5% on the FP4 bytes). ``activation_dtype`` is the
engine's choice of GEMM input precision, not the checkpoint's (None: activations in each GEMM's weight dtype
where the GPU can, else BF16; ``"fp8"``: DeepSeek's FP8 activations in 1 x 128 tiles, DeepSeek-V3 report
section 3.3, against FP8 or FP4 weights); the rate it gives is :meth:`StepModel.compute_dtype`'s.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsim.errors import SpecsimInputError

#: Bytes per stored value of each dtype specsim models.
BYTES_PER_DTYPE: dict[str, float] = {"bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5}
_EMBED_BYTES = BYTES_PER_DTYPE["bf16"]   # embeddings, LM head, norms, routers (module docstring)
#: ModelConfig's dtype fields that may be None (unset: a profile written without them reads as before).
OPTIONAL_DTYPES = ("expert_dtype", "attention_dtype", "activation_dtype")


@dataclass(frozen=True)
class ModelConfig:
    """Shapes of a decoder-only model (per the model's config.json).

    Attributes:
        name: label. num_layers: transformer layers. hidden: model width. num_heads, num_kv_heads,
        head_dim: attention heads (MLA: head_dim is the non-rotary query/key head dim, qk_nope_head_dim).
        ffn: dense MLP width (gated: gate+up+down). vocab: vocabulary.
        num_experts, top_k, expert_ffn, num_shared_experts, first_dense_layers: MoE (0 = dense);
        first_dense_layers counts every layer with a dense MLP (where it sits does not change a step's cost).
        kv_lora_rank, q_lora_rank, rope_dim: MLA attention (kv_lora_rank 0 = standard GQA/MHA; q_lora_rank 0
        = a plain query projection).
        weight_dtype: dtype of the transformer's GEMM weights, a key of :data:`BYTES_PER_DTYPE`.
        expert_dtype: dtype of the routed experts' weights (None = ``weight_dtype``; module docstring).
        attention_dtype: dtype of the attention (and linear-attention) projections (None = ``weight_dtype``).
        activation_dtype: dtype the engine quantizes GEMM activations to (None = each GEMM's activations in its
            weights' dtype where the GPU has tensor cores for it, else BF16; ``"fp8"``: FP8 activations against
            FP8 or FP4 weights, W8A8 / W4A8, as DeepSeek's engine runs V3/V4; ``StepModel.compute_dtype``).
        kv_dtype: dtype of the KV cache, a key of :data:`BYTES_PER_DTYPE`.
        tie_embeddings: the LM head shares the embedding matrix.
        v_head_dim: MLA value head dim (0 = head_dim).
        shared_expert_ffn: width of one shared expert (0 = expert_ffn; Qwen2-MoE's shared expert is wider).
        linear_layers: layers whose token mixer is linear attention (Gated DeltaNet, as Qwen3-Next / Qwen3.5
            interleave it: ``layer_types`` or ``full_attention_interval`` of the config); they keep a fixed-size
            recurrent state per request instead of a KV cache. 0 = every layer has softmax attention.
        linear_key_heads, linear_value_heads, linear_key_dim, linear_value_dim: the linear-attention heads.
        linear_conv_kernel: its short convolution's width (the conv state keeps kernel - 1 tokens).
        attn_output_gate: the softmax-attention query projection also produces a gate (doubling its width).
        max_position_embeddings: the model's context length in tokens (config.json's
            ``max_position_embeddings``); 0 = unknown. Prompt + output beyond it cannot be served.

    Raises:
        SpecsimInputError: an unknown dtype, or a size that must be >= 1 (or >= 0) is not.
    """

    name: str
    num_layers: int
    hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    num_experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    num_shared_experts: int = 0
    first_dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    rope_dim: int = 0
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tie_embeddings: bool = False
    v_head_dim: int = 0
    shared_expert_ffn: int = 0
    linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv_kernel: int = 0
    attn_output_gate: bool = False
    max_position_embeddings: int = 0
    expert_dtype: str | None = None
    attention_dtype: str | None = None
    activation_dtype: str | None = None

    def __post_init__(self) -> None:
        for key in ("weight_dtype", "kv_dtype", "expert_dtype", "attention_dtype", "activation_dtype"):
            if getattr(self, key) is None and key in OPTIONAL_DTYPES:
                continue
            if getattr(self, key) not in BYTES_PER_DTYPE:
                raise SpecsimInputError(None, None, key, f"one of {list(BYTES_PER_DTYPE)}",
                                        repr(getattr(self, key)))
        for key in ("num_layers", "hidden", "num_heads", "num_kv_heads", "head_dim", "vocab"):
            if getattr(self, key) < 1:
                raise SpecsimInputError(None, None, key, "an int >= 1", repr(getattr(self, key)))
        for key in ("ffn", "num_experts", "top_k", "expert_ffn", "num_shared_experts", "first_dense_layers",
                    "kv_lora_rank", "q_lora_rank", "rope_dim", "v_head_dim", "shared_expert_ffn", "linear_layers",
                    "linear_key_heads", "linear_value_heads", "linear_key_dim", "linear_value_dim",
                    "linear_conv_kernel", "max_position_embeddings"):
            if getattr(self, key) < 0:
                raise SpecsimInputError(None, None, key, "an int >= 0", repr(getattr(self, key)))
        if self.linear_layers and (self.linear_layers > self.num_layers or not self.linear_value_heads
                                   or not self.linear_key_dim or not self.linear_value_dim):
            raise SpecsimInputError(None, None, "linear_layers", f"at most num_layers ({self.num_layers}), with "
                                    "linear-attention heads and dims set", repr(self.linear_layers))
        if not self.kv_lora_rank and self.num_heads % self.num_kv_heads:
            raise SpecsimInputError(None, None, "num_kv_heads", f"a divisor of num_heads ({self.num_heads}: grouped-"
                                    "query attention shares each KV head among whole groups)", repr(self.num_kv_heads))
        if self.num_experts and not 1 <= self.top_k <= self.num_experts:
            raise SpecsimInputError(None, None, "top_k", f"1..num_experts ({self.num_experts})", repr(self.top_k))

    def gemm_dtype(self, part: str) -> str:
        """The dtype the GEMM weights of ``part`` are stored in: ``"attention"`` (token-mixer projections),
        ``"experts"`` (routed experts), ``"other"`` (dense MLPs, shared experts, the MoE router: ``weight_dtype``)
        or ``"head"`` (the LM head: BF16, as FP8/FP4 checkpoints keep it (DeepSeek-V3's and Llama's FP8
        checkpoints leave ``lm_head`` unquantized); FP16 where the whole checkpoint is FP16).

        Raises:
            SpecsimInputError: an unknown part.
        """
        if part == "head":
            return "fp16" if self.weight_dtype == "fp16" else "bf16"
        if part not in ("attention", "experts", "other"):
            raise SpecsimInputError(None, None, "part", "attention, experts, other or head", repr(part))
        own = {"attention": self.attention_dtype, "experts": self.expert_dtype}.get(part)
        return own or self.weight_dtype

    # ---- shapes --------------------------------------------------------------------------------------------

    def attention_gemms(self, tp: int) -> list[tuple[int, int]]:
        """(N, K) of the attention projections per TP shard, in order (MLA: replicated latent projections whole).

        GQA/MHA: fused QKV (q + 2 kv, hidden) and output (hidden, q); KV heads are replicated when fewer than tp.
        MLA (DeepSeek-V2/V3): q down (q_lora_rank, hidden) and q up (heads x (head_dim + rope), q_lora_rank), or
        one q projection when q_lora_rank is 0; kv down (kv_lora_rank + rope, hidden); kv up
        (heads x (head_dim + v_head_dim), kv_lora_rank); output (hidden, heads x v_head_dim).
        """
        if self.kv_lora_rank:
            h = self.num_heads // tp
            v = self.v_head_dim or self.head_dim
            q_dim = h * (self.head_dim + self.rope_dim)
            q = ([(self.q_lora_rank, self.hidden), (q_dim, self.q_lora_rank)] if self.q_lora_rank
                 else [(q_dim, self.hidden)])
            return [*q, (self.kv_lora_rank + self.rope_dim, self.hidden),
                    (h * (self.head_dim + v), self.kv_lora_rank), (self.hidden, h * v)]
        q = self.num_heads * self.head_dim // tp
        kv = max(1, self.num_kv_heads // tp) * self.head_dim
        gate = q if self.attn_output_gate else 0
        return [(q + gate + 2 * kv, self.hidden), (self.hidden, q)]

    @property
    def attention_layers(self) -> int:
        """Layers with softmax attention (and a KV cache)."""
        return self.num_layers - self.linear_layers

    def linear_attention_gemms(self, tp: int) -> list[tuple[int, int]]:
        """(N, K) of one linear-attention (Gated DeltaNet) layer's projections per TP shard: q, k, v and the
        output gate z from the hidden state, the per-head beta and decay, the output; [] without such layers."""
        if not self.linear_layers:
            return []
        k = self.linear_key_heads * self.linear_key_dim
        v = self.linear_value_heads * self.linear_value_dim
        return [((2 * k + 2 * v) // tp, self.hidden), (2 * self.linear_value_heads // tp, self.hidden),
                (self.hidden, v // tp)]

    def linear_state_bytes(self, tp: int = 1) -> float:
        """Recurrent-state bytes one request keeps per TP shard over all linear-attention layers: the fp32
        key x value state of every value head (read and written at each step) and the convolution's last
        kernel - 1 inputs in bf16."""
        if not self.linear_layers:
            return 0.0
        state = self.linear_value_heads * self.linear_key_dim * self.linear_value_dim * 4
        conv_ch = 2 * self.linear_key_heads * self.linear_key_dim + self.linear_value_heads * self.linear_value_dim
        conv = conv_ch * max(0, self.linear_conv_kernel - 1) * 2
        return self.linear_layers * (state + conv) / tp

    def kv_bytes_per_token(self, tp: int = 1) -> float:
        """KV-cache bytes per token per TP shard, all layers, in ``kv_dtype``.

        GQA/MHA: 2 (K and V) x layers x max(1, kv_heads / tp) x head_dim x bytes. MLA caches one latent of
        kv_lora_rank + rope values per token per layer, the same on every TP rank (not split).
        """
        nbytes = BYTES_PER_DTYPE[self.kv_dtype]
        if self.kv_lora_rank:
            return self.attention_layers * (self.kv_lora_rank + self.rope_dim) * nbytes
        return 2.0 * self.attention_layers * max(1, self.num_kv_heads // tp) * self.head_dim * nbytes

    @property
    def num_dense_layers(self) -> int:
        """Layers with a dense MLP (all layers for a dense model)."""
        return self.num_layers if not self.num_experts else self.first_dense_layers

    @property
    def shared_ffn(self) -> int:
        """Total width of the shared experts of one MoE layer (num_shared_experts x one expert's width)."""
        return self.num_shared_experts * (self.shared_expert_ffn or self.expert_ffn)

    # ---- parameters and bytes ------------------------------------------------------------------------------

    def _norm_params(self) -> int:
        """Norm weights of the whole model: two per layer, the final norm, MLA's latent norms."""
        mla = (self.kv_lora_rank + self.q_lora_rank) if self.kv_lora_rank else 0
        return self.num_layers * (2 * self.hidden + mla) + self.hidden

    def _mixer_params(self, tp: int) -> int:
        """Token-mixer projection parameters per TP shard: softmax-attention and linear-attention layers."""
        return (self.attention_layers * sum(n * k for n, k in self.attention_gemms(tp))
                + self.linear_layers * sum(n * k for n, k in self.linear_attention_gemms(tp)))

    def _embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tie_embeddings else 2)

    def total_params(self) -> float:
        """All parameters of the model (module docstring's counting), embeddings and LM head included."""
        n_moe = self.num_layers - self.num_dense_layers
        attn = self._mixer_params(1)
        dense = self.num_dense_layers * 3 * self.hidden * self.ffn
        moe = n_moe * (3 * self.hidden * (self.num_experts * self.expert_ffn + self.shared_ffn)
                       + self.hidden * self.num_experts)
        return float(attn + dense + moe + self._embedding_params() + self._norm_params())

    def active_params_per_token(self) -> float:
        """Parameters one token runs through: all but the routed experts it is not sent to.

        As Mistral counts Mixtral's 12.9B active and Qwen counts Qwen3-30B-A3B's 3.3B: attention, dense MLPs,
        top_k routed and all shared experts, routers, norms, embedding and LM head. (DeepSeek's "37B
        activated" for V3 leaves out the input embedding, 0.93B.)
        """
        unused = (self.num_layers - self.num_dense_layers) * (self.num_experts - self.top_k) \
            * 3 * self.hidden * self.expert_ffn
        return self.total_params() - unused

    def weight_bytes(self, tp: int = 1, ep: int = 1) -> float:
        """Parameter bytes held by one GPU under tensor parallelism ``tp`` and expert parallelism ``ep``.

        Attention projections per :meth:`attention_gemms` (head-sharded over tp; MLA latent projections and
        KV heads fewer than tp replicated), dense MLPs and shared experts split over tp, routed experts
        either split over tp (``ep == 1``: every GPU holds 1/tp of every expert) or placed whole,
        ceil(num_experts / ep) per GPU (``ep > 1``: vLLM's expert parallelism, where ep = tp x dp), embedding
        and LM head split over tp (vocabulary-parallel), routers and norms replicated. Token mixers in
        ``gemm_dtype("attention")``, routed experts in ``gemm_dtype("experts")``, dense MLPs and shared experts in
        ``weight_dtype``, the rest in BF16.

        Args:
            tp: tensor-parallel degree (int >= 1).
            ep: expert-parallel degree (int >= 1, at most num_experts).
        Returns:
            bytes per GPU.
        Raises:
            SpecsimInputError: tp or ep out of range.
        """
        _check_degree("tp", tp, self.num_heads)
        _check_degree("ep", ep, max(1, self.num_experts))
        w, a, x = (BYTES_PER_DTYPE[self.gemm_dtype(p)] for p in ("other", "attention", "experts"))
        n_moe = self.num_layers - self.num_dense_layers
        attn = self._mixer_params(tp)
        dense = self.num_dense_layers * 3 * self.hidden * self.ffn / tp
        routed_experts = math.ceil(self.num_experts / ep) if ep > 1 else self.num_experts / tp
        replicated = n_moe * self.hidden * self.num_experts + self._norm_params()
        rest = (self._embedding_params() / tp + replicated) * _EMBED_BYTES
        if a == w == x:                                     # one dtype: the same sum, bit for bit, as before
            moe = n_moe * 3 * self.hidden * (routed_experts * self.expert_ffn + self.shared_ffn / tp)
            return (attn + dense + moe) * w + rest
        routed = n_moe * 3 * self.hidden * routed_experts * self.expert_ffn
        shared = n_moe * 3 * self.hidden * self.shared_ffn / tp
        return attn * a + routed * x + (dense + shared) * w + rest


def _check_degree(key: str, value: int, most: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise SpecsimInputError(None, None, key, f"an int in 1..{most}", repr(value))


#: Presets. Llama-2 shapes from meta-llama config.json; Qwen3-8B from Qwen/Qwen3-8B config.json;
#: deepseek-v3 from deepseek-ai/DeepSeek-V3 config.json (61 layers, 3 dense, 256 experts top-8, 1 shared), its
#: weights in FP8 as the checkpoint ships them (its quantization_config; the config file gives the same).
#: Context lengths: each config.json's max_position_embeddings (:data:`CONTEXT_LENGTHS`).
MODELS: dict[str, ModelConfig] = {
    "llama2-7b": ModelConfig("llama2-7b", 32, 4096, 32, 32, 128, 11008, 32000, max_position_embeddings=4096),
    "llama2-70b": ModelConfig("llama2-70b", 80, 8192, 64, 8, 128, 28672, 32000, max_position_embeddings=4096),
    "qwen3-8b": ModelConfig("qwen3-8b", 36, 4096, 32, 8, 128, 12288, 151936, max_position_embeddings=40960),
    "deepseek-v3": ModelConfig("deepseek-v3", 61, 7168, 128, 128, 128, 18432, 129280, num_experts=256,
                               top_k=8, expert_ffn=2048, num_shared_experts=1, first_dense_layers=3,
                               kv_lora_rank=512, q_lora_rank=1536, rope_dim=64, max_position_embeddings=163840,
                               weight_dtype="fp8"),
}

#: Context lengths (tokens) of the models the bundled profiles name in ``metadata.model`` (lower case), from
#: each Hugging Face config.json's ``max_position_embeddings``: meta-llama/Llama-2-{7,70}b-hf 4,096,
#: meta-llama/Meta-Llama-3-8B 8,192, codellama/CodeLlama-34b-Instruct-hf 16,384, Qwen/Qwen3-8B 40,960,
#: deepseek-ai/DeepSeek-V3 163,840 (splitwise-sim's ``llama2-70b`` is Llama-2-70B).
CONTEXT_LENGTHS: dict[str, int] = {
    "llama-2-7b-hf": 4096, "llama-2-70b-hf": 4096, "llama2-7b": 4096, "llama2-70b": 4096,
    "meta-llama-3-8b": 8192, "codellama-34b-instruct-hf": 16384, "qwen3-8b": 40960, "deepseek-v3": 163840,
}


# ---- Hugging Face config.json ------------------------------------------------------------------------------

#: model_type values that are not decoder-only causal LMs.
_NOT_DECODER = {"bert", "roberta", "xlm-roberta", "distilbert", "albert", "electra", "deberta", "deberta-v2",
                "t5", "mt5", "umt5", "bart", "mbart", "pegasus", "marian", "whisper", "encoder-decoder", "vit",
                "clip", "siglip", "wav2vec2", "modernbert"}
_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp16", "float": "fp16"}


class _Reader:
    """Typed access to one config dict, raising SpecsimInputError that names the file and the key."""

    def __init__(self, cfg: dict, src: str):
        self.cfg, self.src = cfg, src

    def int(self, key: str, default: int | None = None, least: int = 1) -> int:
        value = self.cfg.get(key)
        if value is None:
            if default is None:
                raise SpecsimInputError(self.src, None, key, f"an int >= {least} (a required config.json key)",
                                        "nothing (missing)")
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise SpecsimInputError(self.src, None, key, f"an int >= {least}", repr(value))
        return value


def _load(path_or_dict: str | Path | dict) -> tuple[dict, str]:
    if isinstance(path_or_dict, dict):
        return path_or_dict, "<config dict>"
    path = Path(path_or_dict)
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecsimInputError(str(path), None, None, "a readable Hugging Face config.json", str(e)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SpecsimInputError(str(path), getattr(e, "lineno", None), None, "a JSON object",
                                f"invalid JSON ({e})") from None
    if not isinstance(data, dict):
        raise SpecsimInputError(str(path), None, None, "a JSON object (config.json)", type(data).__name__)
    return data, str(path)


def _weight_dtype(cfg: dict, src: str) -> str:
    """bf16/fp16/fp8/fp4 from ``quantization_config`` or ``torch_dtype`` (FP32 checkpoints serve as FP16)."""
    qc = cfg.get("quantization_config")
    if isinstance(qc, dict):
        text = " ".join(str(qc.get(k, "")) for k in ("quant_method", "quant_algo", "fmt", "format")).lower()
        if "fp4" in text:
            return "fp4"
        if "fp8" in text or "e4m3" in text:
            return "fp8"
        raise SpecsimInputError(src, None, "quantization_config.quant_method",
                                "an FP8 or FP4 quantization (or pass weight_dtype explicitly)",
                                repr(qc.get("quant_method")))
    torch_dtype = cfg.get("torch_dtype", cfg.get("dtype"))
    if torch_dtype is None:
        return "bf16"
    if str(torch_dtype).lower() not in _TORCH_DTYPES:
        raise SpecsimInputError(src, None, "torch_dtype", f"one of {sorted(_TORCH_DTYPES)}", repr(torch_dtype))
    return _TORCH_DTYPES[str(torch_dtype).lower()]


#: quantization_config keys listing the modules a quantized checkpoint keeps unquantized: Transformers'
#: ``modules_to_not_convert`` (gpt-oss MXFP4), compressed-tensors' ``ignore``, NVIDIA ModelOpt's
#: ``exclude_modules``, vLLM FP8's ``ignored_layers``.
_EXCLUDE_KEYS = ("modules_to_not_convert", "ignore", "exclude_modules", "ignored_layers")


def _unquantized_parts(qc: dict) -> set[str]:
    """Components (``attention``, ``experts``) a quantization_config keeps unquantized in every layer.

    A pattern counts when it names attention (``attn``) or the routed experts (``experts``, not
    ``shared_expert``) and covers every layer: it has a wildcard or is a regex (``*``, ``+``, ``re:``) or names
    no layer index (gpt-oss: ``model.layers.*.self_attn``; compressed-tensors: ``re:.*self_attn.*``). Patterns
    naming single layers (``model.layers.0.self_attn``) leave the component at the quantized dtype.
    """
    parts: set[str] = set()
    for key in _EXCLUDE_KEYS:
        patterns = qc.get(key)
        for pat in patterns if isinstance(patterns, list) else []:
            low = str(pat).lower()
            if not ("*" in low or "+" in low or low.startswith("re:") or not any(c.isdigit() for c in low)):
                continue
            if "attn" in low:
                parts.add("attention")
            if "experts" in low and "shared_expert" not in low:
                parts.add("experts")
    return parts


def _dtype_arg(key: str, value: str | None, default: str | None) -> str | None:
    if value is None:
        return default
    if value not in BYTES_PER_DTYPE:
        raise SpecsimInputError(None, None, key, f"one of {list(BYTES_PER_DTYPE)}", repr(value))
    return value


def _linear_attention_fields(r: _Reader, num_layers: int) -> dict[str, Any]:
    """Hybrid linear-attention fields (Qwen3-Next / Qwen3.5: ``layer_types`` or ``full_attention_interval``,
    ``linear_num_key_heads``, ``linear_num_value_heads``, ``linear_key_head_dim``, ``linear_value_head_dim``,
    ``linear_conv_kernel_dim``, ``attn_output_gate``); empty for models without linear attention."""
    cfg = r.cfg
    types = cfg.get("layer_types")
    if isinstance(types, list) and "linear_attention" in types:
        linear = sum(1 for t in types if t == "linear_attention")
    elif "linear_num_value_heads" in cfg and cfg.get("full_attention_interval"):
        interval = r.int("full_attention_interval")
        linear = num_layers - num_layers // interval
    else:
        return {"attn_output_gate": bool(cfg.get("attn_output_gate", False))} if cfg.get("attn_output_gate") else {}
    return dict(linear_layers=linear, linear_key_heads=r.int("linear_num_key_heads"),
                linear_value_heads=r.int("linear_num_value_heads"), linear_key_dim=r.int("linear_key_head_dim"),
                linear_value_dim=r.int("linear_value_head_dim"),
                linear_conv_kernel=r.int("linear_conv_kernel_dim", 4), attn_output_gate=bool(cfg.get("attn_output_gate", False)))


def _moe_fields(r: _Reader, model_type: str, num_layers: int, ffn: int) -> dict[str, int]:
    """MoE fields of ModelConfig from a Mixtral, Qwen2/3-MoE or DeepSeek-V2/V3 config (empty for dense)."""
    cfg = r.cfg
    if "n_routed_experts" in cfg and cfg["n_routed_experts"]:            # DeepSeek-V2/V3
        first = r.int("first_k_dense_replace", 0, least=0)
        freq = r.int("moe_layer_freq", 1)
        n_dense = sum(1 for i in range(num_layers) if not (i >= first and i % freq == 0))
        return dict(num_experts=r.int("n_routed_experts"), top_k=r.int("num_experts_per_tok"),
                    expert_ffn=r.int("moe_intermediate_size"), num_shared_experts=r.int("n_shared_experts", 0, 0),
                    first_dense_layers=n_dense)
    if "num_local_experts" in cfg:                                       # Mixtral: experts are intermediate_size
        return dict(num_experts=r.int("num_local_experts"), top_k=r.int("num_experts_per_tok"), expert_ffn=ffn)
    if cfg.get("num_experts") and ("moe_intermediate_size" in cfg or model_type.endswith("_moe")):  # Qwen-MoE
        step = r.int("decoder_sparse_step", 1)
        only = cfg.get("mlp_only_layers") or []
        if not isinstance(only, list) or not all(isinstance(i, int) for i in only):
            raise SpecsimInputError(r.src, None, "mlp_only_layers", "a list of layer indices", repr(only))
        n_dense = sum(1 for i in range(num_layers) if i in only or (i + 1) % step != 0)
        shared = r.int("shared_expert_intermediate_size", 0, least=0)
        return dict(num_experts=r.int("num_experts"), top_k=r.int("num_experts_per_tok"),
                    expert_ffn=r.int("moe_intermediate_size"), num_shared_experts=1 if shared else 0,
                    shared_expert_ffn=shared, first_dense_layers=n_dense)
    return {}


def model_from_hf_config(path_or_dict: str | Path | dict, name: str | None = None,
                         weight_dtype: str | None = None, kv_dtype: str | None = None,
                         expert_dtype: str | None = None, attention_dtype: str | None = None) -> ModelConfig:
    """A :class:`ModelConfig` from a Hugging Face ``config.json`` of a decoder-only model.

    Reads Llama / Mistral / Qwen2 / Qwen3 (dense; GQA from ``num_key_value_heads``, ``head_dim`` or
    hidden / heads), Mixtral (``num_local_experts`` experts of ``intermediate_size``), Qwen2-MoE / Qwen3-MoE
    (``num_experts`` of ``moe_intermediate_size``, a shared expert of ``shared_expert_intermediate_size``,
    dense layers from ``decoder_sparse_step`` and ``mlp_only_layers``) and DeepSeek-V2/V3 (MLA from
    ``kv_lora_rank``, ``q_lora_rank`` (null: a plain query projection), ``qk_rope_head_dim``,
    ``qk_nope_head_dim``, ``v_head_dim``; ``n_routed_experts``, ``n_shared_experts``,
    ``first_k_dense_replace``, ``moe_layer_freq``; the MTP layers of ``num_nextn_predict_layers`` are not
    included). Other model types are read with the Llama keys. A multimodal config's ``text_config`` is used
    when the top level has no ``hidden_size``.

    Args:
        path_or_dict: a config.json path, a model folder holding one, or the parsed dict.
        name: label (default: ``_name_or_path``, else the folder or file name).
        weight_dtype: override; default from ``quantization_config`` (FP8 / FP4 methods) or ``torch_dtype``
            (``float32`` checkpoints are served as FP16, as vLLM's ``dtype=auto`` does).
        kv_dtype: override; default the activation dtype (FP16 for FP16/FP32 checkpoints, else BF16).
        expert_dtype, attention_dtype: overrides of the routed experts' and the attention projections' dtype;
            default the unquantized dtype (``torch_dtype``'s) where ``quantization_config`` keeps that component
            out of the quantization in every layer (:func:`_unquantized_parts`), else None (= the weights').
    Returns:
        the model's shape.
    Raises:
        SpecsimInputError: unreadable file, a non-decoder config (``model_type`` bert, t5, ...; or
            ``is_encoder_decoder``), a missing or malformed required key, an unsupported quantization or
            dtype; each names the file and the key.
    """
    cfg, src = _load(path_or_dict)
    if "hidden_size" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "quantization_config": cfg.get("quantization_config"),
               "torch_dtype": cfg.get("torch_dtype", cfg["text_config"].get("torch_dtype"))}
        cfg = {k: v for k, v in cfg.items() if v is not None}
    model_type = str(cfg.get("model_type", "")).lower()
    if model_type in _NOT_DECODER or cfg.get("is_encoder_decoder"):
        raise SpecsimInputError(src, None, "model_type", "a decoder-only causal LM config (llama, mistral, qwen2, "
                                "qwen3, mixtral, qwen2_moe, qwen3_moe, deepseek_v2, deepseek_v3, ...)",
                                repr(cfg.get("model_type")))
    r = _Reader(cfg, src)
    num_layers, hidden, heads = r.int("num_hidden_layers"), r.int("hidden_size"), r.int("num_attention_heads")
    ffn = r.int("intermediate_size")
    fields: dict[str, Any] = _moe_fields(r, model_type, num_layers, ffn)
    if cfg.get("kv_lora_rank"):                                          # MLA
        fields.update(kv_lora_rank=r.int("kv_lora_rank"), q_lora_rank=r.int("q_lora_rank", 0, least=0),
                      rope_dim=r.int("qk_rope_head_dim"), v_head_dim=r.int("v_head_dim"))
        head_dim = r.int("qk_nope_head_dim")
    else:
        head_dim = r.int("head_dim", 0, least=0)
        if not head_dim:
            if hidden % heads:
                raise SpecsimInputError(r.src, None, "hidden_size", f"a multiple of num_attention_heads ({heads}) "
                                        "when the config gives no head_dim", str(hidden))
            head_dim = hidden // heads
    fields.update(_linear_attention_fields(r, num_layers))
    if not isinstance(cfg.get("tie_word_embeddings", False), bool):
        raise SpecsimInputError(src, None, "tie_word_embeddings", "true or false", repr(cfg["tie_word_embeddings"]))
    auto = _weight_dtype(cfg, src)
    weight = _dtype_arg("weight_dtype", weight_dtype, auto)
    kv = _dtype_arg("kv_dtype", kv_dtype, "fp16" if auto == "fp16" else "bf16")
    qc = cfg.get("quantization_config")
    kept = _unquantized_parts(qc) if isinstance(qc, dict) else set()
    plain = _weight_dtype({k: v for k, v in cfg.items() if k != "quantization_config"}, src)
    parts = {p: _dtype_arg(f"{p.rstrip('s')}_dtype", arg, plain if p in kept else None)
             for p, arg in (("experts", expert_dtype), ("attention", attention_dtype))}
    if name is None:
        stem = ""
        if not isinstance(path_or_dict, dict):
            path = Path(src)
            stem = path.parent.name if path.name == "config.json" else path.stem
        name = str(cfg.get("_name_or_path") or stem or model_type or "model")
    return ModelConfig(name=name, num_layers=num_layers, hidden=hidden, num_heads=heads,
                       num_kv_heads=r.int("num_key_value_heads", heads), head_dim=head_dim, ffn=ffn,
                       vocab=r.int("vocab_size"), weight_dtype=weight, kv_dtype=kv,
                       tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                       max_position_embeddings=r.int("max_position_embeddings", 0, least=0),
                       expert_dtype=parts["experts"], attention_dtype=parts["attention"], **fields)
