"""The production prediction (issue 5): V4 rank profiles, the MTP-1 fit's pieces, a cheap prediction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specsim.hardware.analytic import analytic_profile
from specsim.hardware.profile import resolve_profile
from specsim.production import (DEPLOYMENTS, TRAINING_MIX, V4_FLASH, deployment, num_requests_for,
                                production_trace, rank_profile, surrogate_tps)
from specsim.scenario import load_scenario
from specsim.simulation import simulate

REPO = Path(__file__).resolve().parent.parent
FLASH_TOML = REPO / "specsim" / "scenarios" / "v4-flash.toml"


def test_training_mix_is_the_papers():
    # PAPER.md 6: chat 17.6%, math 39.4%, code 38.9%, instruction-following 4.1% (counted as chat)
    assert TRAINING_MIX == pytest.approx({"math": 0.394, "code": 0.389, "chat": 0.217})
    assert sum(TRAINING_MIX.values()) == pytest.approx(1.0)
    tr = production_trace(1000)
    assert (tr.domain == "math").sum() == 394 and (tr.domain == "chat").sum() == 217


def test_v4_flash_attention_weights_per_layer():
    # q down 4096x1024, q up 1024x(64x512), kv 4096x512, grouped o 8 x (4096 -> 1024), o up 8192x4096
    params = sum(n * k for n, k in V4_FLASH.attention_gemms(1))
    assert params == 4096 * 1024 + 1024 * 32768 + 4096 * 512 + 8192 * 4096 + 4096 * 8192


def test_rank_profile_is_scaled_roofline_plus_comm():
    dep = deployment("v4-flash")
    base = analytic_profile(dep.rank_model(), dep.gpu, max_batch_tokens=2048)
    assert dep.rank_model().num_experts == 256 // 32
    prof = rank_profile(dep, 0.5, 0.010, 0.5)
    b = np.array([1, 104, 400, 2048])                       # on the table grid (padded lookup)
    expected = 0.5 * base.step_time(b) + 0.010 * (b / 100.0) ** 0.5
    assert prof.step_time(b) == pytest.approx(expected, rel=1e-12)
    assert prof.lookup == "padded" and prof.kv_read_s_per_token > 0


def test_mtp1_surrogate_tracks_simulation():
    # A flat profile, no KV term: every step lasts t + the MTP draft (0.016 t), emits 1 + alpha per request.
    from specsim.hardware.profile import StepTimeProfile
    flat = StepTimeProfile.flat(0.02, 4096)
    tps = surrogate_tps(flat, np.array([8.0]), 2000.0)[0]
    assert tps == pytest.approx(1.875 / (0.02 * 1.016))
    sc = load_scenario(None, ["prefill.num_instances=64", "prefill.time_per_token_s=1e-6"])
    s = simulate(production_trace(64), "mtp1", sc, seed=0, concurrency=8, profile=flat).summary
    assert s["mean_tps_per_user"] == pytest.approx(tps, rel=0.05)


@pytest.mark.skipif(not FLASH_TOML.exists(), reason="fitted scenario not written yet")
def test_fitted_scenario_loads_and_records_its_fit():
    sc = load_scenario(FLASH_TOML)
    assert sc.engine.gamma == 5 and sc.cluster.gpus_per_replica == 1 and sc.prefill.mode == "disaggregated"
    prof = resolve_profile(sc.profile.name)
    fit = json.loads((REPO / "specsim" / "scenarios" / "v4-flash-fit.json").read_text())
    assert prof.metadata["scale"] == pytest.approx(fit["scale"])
    # the fit's residuals are recorded for every MTP-1 tier of Fig. 7
    assert set(fit["residuals"]) == {f"{t:g}" for t, _ in DEPLOYMENTS["v4-flash"].mtp1_points}


@pytest.mark.skipif(not FLASH_TOML.exists(), reason="fitted scenario not written yet")
def test_cheap_prediction_at_100_users():
    # One concurrency of the full prediction (docs/production.md): DSpark-5's verify budget at 100 users
    # per GPU and the sign of the gain; MTP-1 verifies 2 tokens per request (1 draft + the anchor).
    sc = load_scenario(FLASH_TOML)
    prof = resolve_profile(sc.profile.name)
    trace = production_trace(num_requests_for(100), seed=0)      # the sweep's own point
    ds = simulate(trace, "dspark-async", sc, seed=0, concurrency=100, profile=prof).summary
    mt = simulate(trace, "mtp1", sc, seed=0, concurrency=100, profile=prof).summary
    assert mt["mean_verify_tokens_per_request"] == pytest.approx(2.0, abs=0.01)
    assert ds["mean_verify_tokens_per_request"] == pytest.approx(BUDGET_AT_100, abs=0.3)
    assert ds["output_throughput_per_gpu"] > 1.2 * mt["output_throughput_per_gpu"]
    assert ds["mean_tps_per_user"] > 1.2 * mt["mean_tps_per_user"]


#: Predicted mean verify tokens per request of dspark-async at 100 users per GPU (paper: 4.1), from
#: `specsim production predict --model v4-flash` (docs/production.md); regenerate it with that command.
BUDGET_AT_100 = 5.15
