"""DeepSeek-V4's model shape: :class:`V4Config` (its attention projections differ from MLA's)."""

from __future__ import annotations

from dataclasses import dataclass

from specsim.hardware.analytic import ModelConfig


@dataclass(frozen=True)
class V4Config(ModelConfig):
    """A DeepSeek-V4 shape: :class:`ModelConfig` with V4's attention projections.

    V4 attention (config.json of the V4 checkpoints as read by third parties, docs/production.md):
    q down (hidden -> q_lora_rank), q up (q_lora_rank -> heads x head_dim), one shared KV head
    (hidden -> head_dim), grouped low-rank output (``o_groups`` groups of heads x head_dim / o_groups ->
    o_lora_rank, then o_groups x o_lora_rank -> hidden).
    """

    o_lora_rank: int = 1024
    o_groups: int = 8

    def attention_gemms(self, tp: int) -> list[tuple[int, int]]:
        """(N, K) of the attention projections (tp must be 1: a DP-attention rank holds them whole)."""
        h = self.num_heads * self.head_dim
        return [(self.q_lora_rank, self.hidden), (h, self.q_lora_rank), (self.head_dim, self.hidden),
                (self.o_groups * self.o_lora_rank, h // self.o_groups),
                (self.hidden, self.o_groups * self.o_lora_rank)]
