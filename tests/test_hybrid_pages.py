"""vLLM's hybrid page layout (specsim.hardware.hybrid_pages) checked by hand on Qwen3.8-27B (16 softmax-attention
layers of 4 KV heads x 256, 48 Gated DeltaNet layers of 48 value heads x 128 x 128), and its group-size rule
on the bucket counts a public vLLM design note logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsim.hardware.hybrid_pages import group_size, hybrid_page_layout, state_page_bytes
from specsim.hardware.model_config import MODELS, model_from_hf_config

QWEN = model_from_hf_config(Path(__file__).parent / "data" / "hf_configs" / "qwen3.8-27b.json")


@pytest.mark.parametrize("buckets, size, groups", [
    ([16, 5, 48], 5, 15),     # Qwen3.6-27B with DSpark (the note's log): 4 + 1 + 10 groups
    ([17, 48], 17, 4),        # with MTP: the MTP layer joins the attention bucket, 1 + 3
    ([16, 48], 16, 4),        # no speculation
    ([12, 13], 13, 2),        # within 1.5x of each other: the largest count
    ([10, 20], 10, 3),        # 20 = 2 x 10: the smallest
])
def test_vllm_group_size_rule(buckets, size, groups):
    assert group_size(buckets) == size
    assert sum(-(-b // size) for b in buckets) == groups


def test_state_page_by_hand_keeps_one_conv_input_per_speculative_token():
    state = 48 * 128 * 128 * 4                                    # fp32 recurrent state, 3,145,728 B
    channels = 2 * 16 * 128 + 48 * 128                            # q, k and v convolution channels: 10,240
    assert state_page_bytes(QWEN, 1, 0) == state + channels * 3 * 2 == 3_207_168
    assert state_page_bytes(QWEN, 1, 7) == state + channels * 10 * 2 == 3_350_528
    assert state_page_bytes(QWEN, 2, 7) == state // 2 + channels // 2 * 10 * 2     # TP 2 splits heads
    assert state_page_bytes(MODELS["llama2-7b"], 1, 7) == 0


def test_dspark_layout_on_qwen_by_hand():
    lay = hybrid_page_layout(QWEN, 1, 7, 5, True)
    # attention block: 16 x ceil(3,350,528 / (16 x 4,096)) = 16 x 52 = 832 tokens; the page 832 x 4,096 B
    assert (lay.block_tokens, lay.page_bytes, lay.state_page_bytes) == (832, 3_407_872, 3_350_528)
    assert (lay.buckets, lay.group_size) == ((16, 5, 48), 5)
    assert (lay.target_groups, lay.drafter_groups, lay.state_groups, lay.state_copies) == (4, 1, 10, 8)
    assert lay.block_bytes == 5 * 3_407_872 and lay.state_blocks == 80
    # engine units: an 832-token attention block in each of the 4 target and 1 drafter groups, whole (vLLM gives
    # a request whole blocks in every group); the state's 80 blocks are 16 such units
    assert (lay.engine_groups(), lay.engine_groups(with_drafter=False), lay.engine_state_blocks()) == (5, 4, 16)
    assert lay.engine_state_blocks(with_drafter=False) == 20
    # a request of 832 tokens holds 4 + 1 attention blocks and 80 state blocks in vLLM: 85 x 17.0 MB = 1.45 GB,
    # where its state and KV, unpadded, are 8 x 48 x 3,350,528 + 832 x 21 x 4,096 B = 1.36 GB
    assert (80 + 4 + 1) * lay.block_bytes == pytest.approx(1.448e9, rel=1e-3)


def test_mtp_and_no_speculation_layouts_on_qwen():
    mtp = hybrid_page_layout(QWEN, 1, 2, 1, False)
    assert (mtp.buckets, mtp.group_size, mtp.block_tokens) == ((17, 0, 48), 17, 800)
    assert (mtp.target_groups, mtp.state_groups, mtp.state_blocks, mtp.engine_groups()) == (1, 3, 9, 1)
    none = hybrid_page_layout(QWEN, 1, 0)
    assert (none.buckets, none.group_size, none.block_tokens, none.state_blocks) == ((16, 0, 48), 16, 784, 3)
    assert none.engine_groups() == 1 and none.page_bytes == 784 * 4096 >= 3_207_168
    assert hybrid_page_layout(MODELS["llama2-7b"], 1, 7) is None          # no linear attention: no layout


def test_the_engine_charges_what_vllm_allocates():
    """A request of T tokens holds, in vLLM, ceil(T / block_tokens) blocks in each of its 5 attention groups and
    80 state blocks; the engine's blocks (one per block_tokens tokens, each 5 of the pool's) come to the same bytes,
    the last partly filled attention block whole."""
    from specsim.engine.kv import blocks_for
    lay = hybrid_page_layout(QWEN, 1, 7, 5, True)
    for tokens in (1, 400, 832, 833, 1215, 5000):
        vllm = ((lay.target_groups + lay.drafter_groups) * -(-tokens // lay.block_tokens) + lay.state_blocks)
        engine = (int(blocks_for(tokens, lay.block_tokens)) + lay.engine_state_blocks()) * lay.engine_groups()
        assert engine == vllm, tokens


def _qwen_on_b200():
    from specsim.hardware.stepmodel import step_model
    sm = step_model(QWEN, "b200")
    return sm, sm.profile(max_batch_tokens=17_000)


def test_what_the_scenario_sets_is_kept_in_the_layout():
    """A larger cluster.block_size is kept (vLLM keeps a --block-size that holds a state page); a set
    drafter.kv_fraction replaces the layout's drafter share but not the drafter's own bucket; called without the
    drafter's layers, kv_capacity keeps the caller's fraction."""
    from specsim.hardware.kv_capacity import kv_capacity
    from specsim.scenario import load_scenario

    sm, prof = _qwen_on_b200()
    base = ['prefill.mode="colocated"', "cluster.gpu_memory_utilization=0.9"]
    big = kv_capacity(load_scenario(overrides=[*base, "cluster.block_size=2048"]), prof, 7, 0.3, 0.0, (5, True))
    assert (big.layout.block_tokens, big.block_size, big.layout.page_bytes) == (2048, 2048, 2048 * 4096)
    assert (big.engine_groups, big.drafter_kv_fraction) == (5, 0.0)         # the drafter's group in each block
    own = kv_capacity(load_scenario(overrides=[*base, "drafter.kv_fraction=0.5"]), prof, 7, 0.5, 0.0, (5, True))
    assert own.layout.buckets == (16, 5, 48) and own.drafter_kv_fraction == 0.5 and own.engine_groups == 4
    # the header counts the set share's block too: 80 / 4 = 20 state blocks + 1 attention block + 1 drafter block
    text = " ".join(own.describe().split())
    assert "(22 blocks each, the drafter's KV 0.5 of the target's (drafter.kv_fraction))" in text
    assert "20 blocks of linear-attention state (80 of the pool's: 10 groups x 8 copies" in text
    bare = kv_capacity(load_scenario(overrides=base), prof, 7, 0.3)
    assert bare.layout.buckets == (16, 0, 48) and bare.drafter_kv_fraction == 0.3


def test_impossible_hybrid_pools_are_named():
    from dataclasses import replace

    from specsim.errors import SpecsimInputError
    from specsim.hardware.kv_capacity import kv_capacity
    from specsim.hardware.stepmodel import step_model
    from specsim.scenario import load_scenario

    with pytest.raises(SpecsimInputError, match="divides the linear-attention heads"):
        state_page_bytes(QWEN, 5, 0)                      # 48 value heads over 5 ranks
    sc = load_scenario(overrides=['prefill.mode="colocated"', "cluster.gpu_memory_utilization=0.9"])
    all_linear = step_model(replace(QWEN, linear_layers=QWEN.num_layers), "b200")
    with pytest.raises(SpecsimInputError, match="softmax-attention layers"):
        kv_capacity(sc, all_linear.profile(max_batch_tokens=17_000), 0)
    _, prof = _qwen_on_b200()
    tight = load_scenario(overrides=['prefill.mode="colocated"', "cluster.gpu_memory_utilization=0.28881"])
    with pytest.raises(SpecsimInputError, match="room for one request") as e:
        kv_capacity(tight, prof, 7, 0.3, 0.0, (5, True))   # 84 blocks left, a request of one block takes 85
    assert "takes 85" in str(e.value)
