"""DeepSeek-V4's model shape: :class:`V4Config` (its attention projections and KV cache differ from MLA's)."""

from __future__ import annotations

from dataclasses import dataclass

from specsim.errors import SpecsimInputError
from specsim.hardware.model_config import BYTES_PER_DTYPE, ModelConfig


@dataclass(frozen=True)
class V4Config(ModelConfig):
    """A DeepSeek-V4 shape: :class:`ModelConfig` with V4's attention projections and compressed KV cache.

    V4 attention (config.json of the V4 checkpoints as read by third parties, docs/production.md):
    q down (hidden -> q_lora_rank), q up (q_lora_rank -> heads x head_dim), one shared KV head
    (hidden -> head_dim), grouped low-rank output (``o_groups`` groups of heads x head_dim / o_groups ->
    o_lora_rank, then o_groups x o_lora_rank -> hidden).

    Attributes:
        o_lora_rank, o_groups: the grouped low-rank output projection.
        kv_bytes_per_layer_token: KV-cache bytes per cached context token per layer at FP8, one byte a value,
            which a decode step reads and the pool holds (V4's compressed sparse attention: indexer keys and
            compressed KV averaged over the layers, docs/production.md); another ``kv_dtype`` scales it by its
            bytes per value; 0 falls back to :meth:`ModelConfig.kv_bytes_per_token` of a plain cache.

    Raises:
        SpecsimInputError: what :class:`ModelConfig` refuses, or a negative ``kv_bytes_per_layer_token``.
    """

    o_lora_rank: int = 1024
    o_groups: int = 8
    kv_bytes_per_layer_token: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.kv_bytes_per_layer_token >= 0:
            raise SpecsimInputError(None, None, "kv_bytes_per_layer_token", "bytes >= 0",
                                    repr(self.kv_bytes_per_layer_token))

    def attention_gemms(self, tp: int) -> list[tuple[int, int]]:
        """(N, K) of the attention projections (a DP-attention rank holds them whole).

        Raises:
            SpecsimInputError: tp other than 1 (V4 runs its attention as data-parallel ranks; its experts
                spread over the ranks by expert parallelism, ``ep``).
        """
        if tp != 1:
            raise SpecsimInputError(None, None, "tp", f"1 for {self.name} (DeepSeek-V4 runs data-parallel "
                                    "attention ranks; spread its experts with --ep)", repr(tp))
        h = self.num_heads * self.head_dim
        return [(self.q_lora_rank, self.hidden), (h, self.q_lora_rank), (self.head_dim, self.hidden),
                (self.o_groups * self.o_lora_rank, h // self.o_groups),
                (self.hidden, self.o_groups * self.o_lora_rank)]

    def kv_bytes_per_token(self, tp: int = 1) -> float:
        """KV-cache bytes per cached token, all layers: ``num_layers x kv_bytes_per_layer_token x`` the
        ``kv_dtype``'s bytes per value (FP8: 1) when set (a DP-attention rank holds the whole cache of its
        requests, so ``tp`` does not divide it)."""
        if self.kv_bytes_per_layer_token > 0:
            return float(self.num_layers * self.kv_bytes_per_layer_token * BYTES_PER_DTYPE[self.kv_dtype])
        return super().kv_bytes_per_token(tp)


#: Per-layer KV bytes per context token of V4's compressed sparse attention (FP8): indexer keys (128 dims
#: at 1/4 of the tokens) and compressed KV (512 dims at 1/4) on the half of the layers with compress ratio 4,
#: compressed KV (512 dims at 1/128) on the other half: (32 + 128 + 4) / 2 = 82 bytes per layer.
KV_BYTES_PER_LAYER_TOKEN = (128 / 4 + 512 / 4 + 512 / 128) / 2

# Shapes: V4-Flash from the DeepseekV4Config defaults of NeMo AutoModel and the V4-Flash config.json
# (43 layers, hidden 4096, 64 heads x 512, q_lora 1024, o_lora 1024 x 8 groups, 256 routed experts
# top-6 of width 2048 + 1 shared, vocab 129,280; 284B total / 13B active). V4-Pro: 384 routed experts
# top-6, hidden 7168, expert width 3072 (third-party readings); 61 layers, 128 heads and q_lora 1536 are
# our estimate from 1.6T total / 49B active, as are its o_lora 1024 x 16 groups (Flash's rank, groups scaled with
# the heads). Weights as V4 stores them: routed experts in FP4 (0.5 B/param), the rest in FP8; activations in FP8
# (DeepSeek-V3 report 3.3), so the experts run W4A8 at the GPU's FP8 rate (the H800's in the production study) as
# DeepGEMM's sm90 fp8_fp4 grouped GEMM does (StepModel.compute_dtype). docs/production.md: the 3 variants (W4A8,
# W4A16, FP8). As presets (``--model v4-flash``) on other GPUs the EP all-to-all runs over the GPU's own link
# (NVLink); the production study's ranks span nodes over InfiniBand (its ``ep_link_bytes_per_s``).
V4_FLASH = V4Config("v4-flash", 43, 4096, 64, 1, 512, 2048, 129280, num_experts=256, top_k=6,
                    expert_ffn=2048, num_shared_experts=1, first_dense_layers=0, q_lora_rank=1024,
                    o_lora_rank=1024, o_groups=8, weight_dtype="fp8", expert_dtype="fp4", kv_dtype="fp8",
                    activation_dtype="fp8", kv_bytes_per_layer_token=KV_BYTES_PER_LAYER_TOKEN)
V4_PRO = V4Config("v4-pro", 61, 7168, 128, 1, 512, 3072, 129280, num_experts=384, top_k=6,
                  expert_ffn=3072, num_shared_experts=1, first_dense_layers=0, q_lora_rank=1536,
                  o_lora_rank=1024, o_groups=16, weight_dtype="fp8", expert_dtype="fp4",
                  kv_dtype="fp8", activation_dtype="fp8",
                  kv_bytes_per_layer_token=KV_BYTES_PER_LAYER_TOKEN)

#: The V4 shapes by preset name (``specsim profile analytic --model v4-flash``; :func:`specsim.hardware.stepmodel.
#: step_model`).
V4_MODELS: dict[str, V4Config] = {"v4-flash": V4_FLASH, "v4-pro": V4_PRO}
