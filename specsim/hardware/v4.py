"""DeepSeek-V4's model shape: :class:`V4Config` (its attention projections and KV cache differ from MLA's)."""

from __future__ import annotations

from dataclasses import dataclass

from specsim.errors import SpecsimInputError
from specsim.hardware.model_config import ModelConfig


@dataclass(frozen=True)
class V4Config(ModelConfig):
    """A DeepSeek-V4 shape: :class:`ModelConfig` with V4's attention projections and compressed KV cache.

    V4 attention (config.json of the V4 checkpoints as read by third parties, docs/production.md):
    q down (hidden -> q_lora_rank), q up (q_lora_rank -> heads x head_dim), one shared KV head
    (hidden -> head_dim), grouped low-rank output (``o_groups`` groups of heads x head_dim / o_groups ->
    o_lora_rank, then o_groups x o_lora_rank -> hidden).

    Attributes:
        o_lora_rank, o_groups: the grouped low-rank output projection.
        kv_bytes_per_layer_token: KV-cache bytes one decode step reads per cached context token per layer
            (V4's compressed sparse attention: indexer keys and compressed KV averaged over the layers,
            docs/production.md); 0 falls back to :meth:`ModelConfig.kv_bytes_per_token` of a plain cache.

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
        """(N, K) of the attention projections (tp must be 1: a DP-attention rank holds them whole)."""
        h = self.num_heads * self.head_dim
        return [(self.q_lora_rank, self.hidden), (h, self.q_lora_rank), (self.head_dim, self.hidden),
                (self.o_groups * self.o_lora_rank, h // self.o_groups),
                (self.hidden, self.o_groups * self.o_lora_rank)]

    def kv_bytes_per_token(self, tp: int = 1) -> float:
        """KV-cache bytes read per cached token per step, all layers: ``num_layers x kv_bytes_per_layer_token``
        when set (a DP-attention rank holds the whole cache of its requests, so ``tp`` does not divide it)."""
        if self.kv_bytes_per_layer_token > 0:
            return float(self.num_layers * self.kv_bytes_per_layer_token)
        return super().kv_bytes_per_token(tp)
