"""Analytic generator: closed forms of the roofline and the calibration against measured H100 curves."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.hardware.analytic import (MODELS, Efficiency, TILE_M, TILE_N, _gemm_s, analytic_profile,
                                       default_efficiency, linear_step_s)
from specsim.hardware.gpus import gpu_spec

H100 = gpu_spec("h100")


def test_gemm_memory_bound_at_small_m_and_tile_step():
    eff = Efficiency(1.0, 1.0, 0.0)
    n, k = 4096, 4096
    assert _gemm_s(np.array([1.0]), n, k, H100, eff)[0] == pytest.approx((n * k + k + n) * 2 / 3.35e12)
    # compute bound at large M: one token past a multiple of TILE_M adds a row of tiles (33 / 32 at M = 2048 + 1),
    # while the tiles' count is not rounded up to whole waves of SMs (stream-K): one tile past a wave of 132 costs
    # its own FLOPs, 133 / 132
    t = _gemm_s(np.array([2048.0, 2048.0 + 1]), 128 * H100.num_sms, k, H100, eff)
    assert 2048 % TILE_M == 0 and t[1] / t[0] == pytest.approx(33 / 32)
    assert t[0] == pytest.approx(2048 * 128 * 132 * 2 * k / 989.4e12)
    wave, past = (_gemm_s(np.array([2048.0]), TILE_N * cols, k, H100, eff)[0] for cols in (132, 133))
    assert past / wave == pytest.approx(133 / 132)


def test_profiles_label_and_order():
    p = {g: analytic_profile("qwen3-8b", g) for g in ("h100", "h200", "b200")}
    assert all(x.metadata["kind"] == "analytic" for x in p.values())
    assert p["b200"].step_time(1) < p["h200"].step_time(1) < p["h100"].step_time(1)   # bandwidth order
    assert p["h100"].lookup == "padded" and p["h100"].step_time(9) == p["h100"].step_time(16)
    moe = analytic_profile("deepseek-v3", "h200")
    assert moe.step_time(256) > moe.step_time(1)
    # MLA: 61 layers x (512 + 64) x 2 bytes per token
    assert moe.kv_read_s_per_token * 4.8e12 * default_efficiency().bw_eff == pytest.approx(61 * 576 * 2)


def test_moe_expected_active_experts():
    m = MODELS["deepseek-v3"]
    e, k = m.num_experts, m.top_k
    assert e * (1 - (1 - k / e) ** 1) == pytest.approx(8)
    assert e * (1 - (1 - k / e) ** 4096) == pytest.approx(256, rel=1e-6)


def test_calibration_error_per_model(shared):
    from specsim.hardware.vidur import calibrate_on_vidur
    res = calibrate_on_vidur(shared)
    assert res.errors["llama2-7b"][0] < 0.06 and res.errors["llama2-70b"][0] < 0.04
    d = default_efficiency()
    assert res.efficiency.bw_eff == pytest.approx(d.bw_eff, rel=0.01)
    assert res.efficiency.flops_eff == pytest.approx(d.flops_eff, rel=0.01)
    # B = 1, where the eager launches dominate, is the fit's worst region: 6.71 ms against the measured 5.60 ms
    # (6.46 ms when the tiles ran in whole SM waves, before 2026-12-06)
    assert linear_step_s(MODELS["llama2-7b"], np.array([1]), H100, d)[0] == pytest.approx(6.71e-3, rel=0.02)


def test_a_gemm_of_at_most_64_tokens_runs_16_row_tiles():
    """tile_flops: up to TILE_M tokens the rows pad to 16 (fused-MoE's BLOCK_SIZE_M 16, swapped small-M GEMMs),
    beyond to TILE_M. On an H20 (148 TFLOPS BF16 against 4.0 TB/s) a one-token 4096 x 4096 GEMM is then bound by
    its weight stream (8.4 us), where a whole 64-row tile charged 14.5 us of compute."""
    from specsim.hardware.analytic import tile_flops

    n, k = 4096, 4096
    per_row = (n // TILE_N) * TILE_N * 2 * k
    got = tile_flops(np.array([1.0, 16.0, 17.0, 64.0, 65.0, 128.0]), n, k)
    np.testing.assert_allclose(got, np.array([16, 16, 32, 64, 128, 128]) * per_row, rtol=1e-12)
    h20, ideal = gpu_spec("h20"), Efficiency(1.0, 1.0, 0.0)
    one = _gemm_s(np.array([1.0]), n, k, h20, ideal)[0]
    assert one == pytest.approx((n * k + k + n) * 2 / h20.hbm_bytes_per_s)
    assert 64 * per_row / h20.bf16_flops_per_s > one > 16 * per_row / h20.bf16_flops_per_s
