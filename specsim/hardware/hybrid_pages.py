"""vLLM's KV-cache page layout for a model with linear-attention layers, which decides how many of its requests
a KV pool holds.

A hybrid model (Qwen3.5 / Qwen3-Next: Gated DeltaNet layers beside softmax attention) keeps, per request, a fixed
recurrent state in each linear-attention layer and a growing KV cache in each softmax-attention layer. vLLM (V1)
keeps both in one pool of equal pages, in three steps (each a function of vLLM's source, named so that it can be
read there; the numbers in brackets are Qwen3.8-27B on one GPU):

1. **Page.** One linear-attention layer's state for one request is one page: the recurrent state (value heads x
   key dim x value dim, fp32 as the checkpoint's ``mamba_ssm_dtype``) plus the short convolution's last
   ``kernel - 1 + num_spec`` inputs in bf16 (``MambaStateShapeCalculator.gated_delta_net_state_shape``,
   vllm/model_executor/layers/mamba/mamba_utils.py: one more input per speculative token, so a verify step can
   roll back). The attention block grows until one attention layer's block is at least that page,
   ``block_tokens = 16 x ceil(state_page / (16 x attention bytes per token per layer))``, and the state page is
   padded up to it (``_align_hybrid_block_size`` in vllm/platforms/interface.py, earlier
   ``HybridAttentionMambaModelConfig``; 16 is the attention kernels' block alignment, vLLM's default block size)
   [3.35 MB of state at k = 7, 4,096 B per token per layer: 832-token blocks of 3.41 MB].
2. **Groups.** Layers of one cache spec form a bucket: the target's softmax-attention layers (an MTP layer or an
   EAGLE layer of the same shape joins them), a DSpark / DFlash drafter's attention layers (its block attention is
   non-causal, a spec of its own: vLLM PR 51705's ``non_causal_multi_token_decode``; a public vllm-ascend design
   note logs the buckets [16, 5, 48] for Qwen3.6-27B with DSpark), and the linear-attention layers. Every group
   holds ``group_size`` layers: the smallest bucket's count, or the largest's when that is under 1.5 times the
   smallest (:data:`GROUP_SIZE_SPREAD`); a bucket of L layers takes ceil(L / group_size) groups
   (``_get_kv_cache_groups_uniform_page_size``, vllm/v1/core/kv_cache_utils.py) [DSpark: [16, 5, 48] -> group size
   5, 4 + 1 + 10 groups; MTP: [17, 48] -> 17, 1 + 3; none: [16, 48] -> 16, 1 + 3].
3. **Blocks.** The pool is cut into blocks of ``group_size`` pages (``get_kv_cache_config_from_groups``:
   ``num_blocks = memory // page // group_size``, one tensor per layer slot shared by the groups). A request holds,
   in every attention group, one block per ``block_tokens`` tokens and, in every linear-attention group, 1 +
   num_speculative_tokens blocks (a state per verifiable prefix: ``MambaSpec.num_speculative_blocks``,
   ``mamba_cache_mode = "none"``) [DSpark k = 7: 80 state blocks and 5 attention blocks of 17.0 MB, 1.45 GB per
   request of up to 832 tokens, where its 384 state pages and 832 tokens of KV, unpadded, are 1.36 GB].

specsim's engine counts in blocks of ``block_tokens`` tokens, each standing for one vLLM block in every attention
group of the request, the target's and the drafter's own (:meth:`HybridPageLayout.engine_groups`: 5 for DSpark on
Qwen3.8-27B), so a request's last, partly filled attention block is charged whole in every group, as vLLM
allocates it; its state ``state_groups x (1 + gamma)`` vLLM blocks in those units, rounded up
(:meth:`HybridPageLayout.engine_state_blocks`; exact in the layouts above: 16 for DSpark, 9 for MTP, 3 without
speculation). A request of up to 832 tokens with DSpark holds 17 engine blocks, vLLM's 85. (Until 2026-12-06 the
engine counted single vLLM blocks and charged the last attention block its tokens' share: up to 3 of those 85
fewer, and with the activation reserve corrected it then ran 8% more DSpark requests than the engine's gauges
show; docs/memory.md.) Not modelled: vLLM's ``mamba_cache_mode = "align"``, which it selects when prefix caching
is on, and its cached state per block boundary; a prefix hit is counted in the engine's blocks as the attention
KV's.
"""

from __future__ import annotations

from dataclasses import dataclass

from specsim.errors import SpecsimInputError

#: The attention kernels' block alignment vLLM rounds the hybrid attention block to (its default block size, the
#: smallest kernel block of FlashAttention and FlashInfer; ``kernel_block_alignment_size``). vLLM PR 27994 made it
#: 32 for head size 256 on Blackwell (FlashInfer issue 1993); PR 36987 reverted that before the versions modelled.
KERNEL_BLOCK_ALIGNMENT = 16
#: vLLM makes the group size the largest bucket's count when that is under this multiple of the smallest.
GROUP_SIZE_SPREAD = 1.5
#: Drafters whose attention layers are a cache spec of their own (module docstring, step 2): DSpark's and DFlash's
#: block attention decodes a block of positions at once, without a causal mask.
OWN_SPEC_DRAFTERS = frozenset({"dspark", "dflash"})


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class HybridPageLayout:
    """The page layout vLLM gives a hybrid model's KV pool (module docstring, steps 1-3), per GPU shard.

    Attributes:
        page_bytes: one layer's page, bytes (the attention block's, the state padded to it).
        state_page_bytes: one linear-attention layer's state for one request before padding, bytes.
        block_tokens: tokens per attention block.
        buckets: layers per cache spec, (target attention, drafter attention, linear attention); the drafter's 0
            where it has no layers of its own spec.
        group_size: layers per group.
        target_groups, drafter_groups, state_groups: groups of each bucket.
        state_copies: state blocks a request holds per linear-attention group, 1 + gamma.
    """

    page_bytes: int
    state_page_bytes: int
    block_tokens: int
    buckets: tuple[int, int, int]
    group_size: int
    target_groups: int
    drafter_groups: int
    state_groups: int
    state_copies: int

    @property
    def block_bytes(self) -> int:
        """One block of the pool, bytes: ``group_size`` pages."""
        return self.group_size * self.page_bytes

    def engine_groups(self, with_drafter: bool = True) -> int:
        """vLLM blocks one engine block stands for: a ``block_tokens``-token attention block in each target
        attention group and, ``with_drafter``, in each of the drafter's own groups (vLLM gives a request whole
        blocks in every group, its last one partly filled)."""
        return self.target_groups + (self.drafter_groups if with_drafter else 0)

    def engine_state_blocks(self, with_drafter: bool = True) -> int:
        """A running request's linear-attention state in engine blocks: its ``state_blocks`` vLLM blocks over
        :meth:`engine_groups`, rounded up (exact where they divide: DSpark k = 7 on Qwen3.8-27B, 80 / 5 = 16)."""
        return _cdiv(self.state_blocks, self.engine_groups(with_drafter))

    @property
    def state_blocks(self) -> int:
        """Blocks of linear-attention state one running request holds: ``state_groups x state_copies``."""
        return self.state_groups * self.state_copies

    def describe(self) -> str:
        """One clause for a run header: the page, the buckets and their groups."""
        t, d, m = self.buckets
        groups = f"{self.target_groups} target attention + " + (
            f"{self.drafter_groups} drafter attention + " if d else "") + f"{self.state_groups} linear-attention"
        pad = self.page_bytes / self.state_page_bytes - 1
        return (f"vLLM's hybrid page layout: {self.block_tokens}-token attention blocks, so that one layer's block "
                f"holds one request's linear-attention state (a page of {self.page_bytes / 1e6:.2f} MB, the state "
                f"padded by {pad:.1%}); layers {[b for b in (t, d, m) if b]} in groups of {self.group_size}, a block "
                f"being one page per layer of a group: {groups} groups")


def state_page_bytes(model, tp: int, num_spec: int) -> int:
    """One linear-attention layer's state for one request on one TP shard, bytes: the fp32 recurrent state
    (value heads / tp x key dim x value dim x 4) and ``kernel - 1 + num_spec`` convolution inputs of
    (2 key heads x key dim + value heads x value dim) / tp channels in bf16 (vLLM's
    ``gated_delta_net_state_shape``). 0 for a model without linear attention.

    Raises:
        SpecsimInputError: ``tp`` does not divide the linear-attention heads (vLLM's ``divide`` asserts it).
    """
    if not model.linear_layers:
        return 0
    if model.linear_value_heads % tp or model.linear_key_heads % tp:
        raise SpecsimInputError(None, None, "tp", f"a TP degree that divides the linear-attention heads "
                                f"({model.linear_key_heads} key, {model.linear_value_heads} value heads of "
                                f"{model.name}), as vLLM requires", str(tp))
    state = model.linear_value_heads // tp * model.linear_key_dim * model.linear_value_dim * 4
    channels = (2 * model.linear_key_heads * model.linear_key_dim + model.linear_value_heads * model.linear_value_dim)
    conv = channels // tp * max(0, model.linear_conv_kernel - 1 + max(int(num_spec), 0)) * 2
    return int(state + conv)


def group_size(buckets: list[int]) -> int:
    """vLLM's layers per group for buckets of these layer counts (zeros ignored): the smallest count, or the
    largest where it is under :data:`GROUP_SIZE_SPREAD` times the smallest."""
    counts = [b for b in buckets if b > 0]
    lo, hi = min(counts), max(counts)
    return hi if hi < GROUP_SIZE_SPREAD * lo else lo


def hybrid_page_layout(model, tp: int, gamma: int, drafter_layers: int = 0, drafter_own_spec: bool = False,
                       block_size: int = KERNEL_BLOCK_ALIGNMENT) -> HybridPageLayout | None:
    """vLLM's page layout for ``model`` (a :class:`~specsim.hardware.model_config.ModelConfig`) at TP ``tp``,
    verifying ``gamma`` drafts beside a drafter with ``drafter_layers`` attention layers, a bucket of their own
    where ``drafter_own_spec`` (DSpark / DFlash: :data:`OWN_SPEC_DRAFTERS`), else in the target's attention bucket
    (MTP, EAGLE); None for a model without linear attention or without softmax attention. A ``block_size``
    (the scenario's ``cluster.block_size``) larger than the aligned minimum is kept, as vLLM keeps a user's
    ``--block-size`` that already holds a state page.

    The drafter's layers are taken to have the target's attention bytes per token per layer (the drafter shapes of
    :func:`specsim.hardware.drafter.drafter_shape`; the public DSpark drafter's 8 KV heads of 128 hold the same
    bytes as the target's 4 of 256), so its page equals the target's.

    Raises:
        SpecsimInputError: ``tp`` does not divide the linear-attention heads (:func:`state_page_bytes`).
    """
    if not model.linear_layers or model.attention_layers <= 0:
        return None
    per_token_layer = model.kv_bytes_per_token(tp) / model.attention_layers
    state = state_page_bytes(model, tp, gamma)
    align = KERNEL_BLOCK_ALIGNMENT
    tokens = max(align * _cdiv(state, int(align * per_token_layer)), int(block_size))
    page = int(tokens * per_token_layer)
    extra = max(int(drafter_layers), 0)
    buckets = (int(model.attention_layers) + (0 if drafter_own_spec else extra), extra if drafter_own_spec else 0,
               int(model.linear_layers))
    size = group_size(list(buckets))
    t, d, m = (_cdiv(b, size) for b in buckets)
    return HybridPageLayout(page, state, tokens, buckets, size, t, d, m, 1 + max(int(gamma), 0))
