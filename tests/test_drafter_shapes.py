"""Each drafter family's cost and KV share from its own shape (issue 20)."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.hardware.drafter import (EAGLE3_DRAFT_VOCAB, drafter_kv_fraction, drafter_shape,
                                      shaped_drafter_cost)
from specsim.hardware.model_config import MODELS
from specsim.hardware.stepmodel import step_model
from specsim.scenario import load_scenario
from specsim.run_config import drafter_kv_fraction as run_kv_fraction


def test_eagle3_on_a_moe_target_is_one_dense_layer_with_the_draft_vocabulary():
    ds = MODELS["deepseek-v3"]
    e3 = drafter_shape("eagle3", ds, 1)
    assert (e3.num_layers, e3.num_experts, e3.num_dense_layers) == (1, 0, 1)
    assert e3.ffn == ds.ffn and e3.hidden == ds.hidden and e3.vocab == EAGLE3_DRAFT_VOCAB == 32000
    # MTP: one target-shaped (MoE) layer with the target's own head; DSpark: the target's layer config
    mtp = drafter_shape("mtp", ds, 1)
    assert (mtp.num_experts, mtp.num_dense_layers, mtp.vocab) == (256, 0, ds.vocab)
    assert drafter_shape("dspark", ds, 5).num_layers == 5


def test_eagle3_draft_step_costs_its_dense_layer_and_reduced_head_per_draft():
    target = step_model("deepseek-v3", "h200", tp=8)
    d = shaped_drafter_cost("eagle3", target)
    sm = d.model
    # one pass per draft, each one dense layer over R tokens (padded 3 -> 4) and a 32,000-token head
    one = sm.step_time([4], [3], 0.0)[0]
    assert d.draft_time_s(3, 5, None) == pytest.approx(5 * one, rel=1e-12)
    h, g = sm.model.hidden, sm.gpu
    # the head's weights are BF16 (gemm_dtype 'head'), whatever the layers' dtype (FP8 here)
    head = sm._gemm(np.array([4.0]), 32000 // 8, h, "head")[0] + 4 * h * 2 / (g.hbm_bytes_per_s * sm.terms.bw_eff)
    assert sm.breakdown([4], [3])["lm_head"][0] == pytest.approx(head, rel=1e-12)
    # far cheaper than the MTP layer (a MoE layer with the full head)
    assert d.draft_time_s(16, 3, None) < shaped_drafter_cost("mtp", target).draft_time_s(16, 3, None)


def test_drafter_kv_share_follows_the_shapes():
    qwen = step_model("qwen3-8b", "h100")                                 # 36 softmax-attention layers
    assert drafter_kv_fraction("dspark", qwen) == pytest.approx(5 / 36)
    assert drafter_kv_fraction("eagle3", qwen) == pytest.approx(1 / 36)
    assert drafter_kv_fraction("dspark", qwen, layers=2) == pytest.approx(2 / 36)
    ds = step_model("deepseek-v3", "h200", tp=8)                          # 61 MLA layers
    assert drafter_kv_fraction("mtp", ds) == pytest.approx(1 / 61)
    # the run uses it where the profile has a step model; a plain table keeps the family constant
    prof = qwen.profile(512)
    sc = load_scenario(overrides=['drafter.name="dspark"', "drafter.layers=3"])
    assert run_kv_fraction(sc, "dspark", 7, prof) == pytest.approx(3 / 36)
    assert run_kv_fraction(sc, "dspark", 0, prof) == 0.0                  # nothing drafts: no share
    assert np.isfinite(drafter_kv_fraction("mtp", qwen))
