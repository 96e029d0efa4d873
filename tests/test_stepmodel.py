"""The engine-level step model (issue 12): every term by hand, the profile it writes, the drafter from its shape."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from helpers import make_trace
from specsim.errors import SpecsimInputError
from specsim.hardware.analytic import MODELS
from specsim.hardware.drafter import MARKOV_RANK, ShapedDrafterCost, shaped_drafter_cost
from specsim.hardware.gpus import gpu_spec
from specsim.hardware.profile import StepTimeProfile, load_profile, resolve_profile, save_profile
from specsim.hardware.stepmodel import (TERMS, EngineTerms, StepModel, step_model, step_model_from_spec,
                                        step_model_of, terms_table)
from specsim.scenario import load_scenario
from specsim.simulation import simulate

H100 = gpu_spec("h100")
#: No per-kernel cost and unit efficiencies: terms reduce to bytes / bandwidth and FLOPs / peak.
IDEAL = EngineTerms(flops_eff=1.0, bw_eff=1.0, attn_bw_eff=1.0, attn_request_s=0.0, kernel_s=0.0, link_eff=1.0)


def test_memory_bound_gemm_term_by_hand():
    # Llama-2-7B at B = 1: every GEMM is memory bound; bytes = weights (2 B each) + activations in and out.
    m = MODELS["llama2-7b"]
    sm = StepModel(m, H100, IDEAL)
    shapes = m.attention_gemms(1) + [(2 * m.ffn, m.hidden), (m.hidden, m.ffn)]
    by_hand = m.num_layers * sum(2 * n * k + 2 * (k + n) for n, k in shapes) / H100.hbm_bytes_per_s
    assert sm.breakdown([1])["gemm"][0] == pytest.approx(by_hand, rel=1e-12)
    # fp8 weights halve the weight bytes (activations stay bf16)
    fp8 = StepModel(replace(m, weight_dtype="fp8"), H100, IDEAL)
    by_hand8 = m.num_layers * sum(n * k + 2 * (k + n) for n, k in shapes) / H100.hbm_bytes_per_s
    assert fp8.breakdown([1])["gemm"][0] == pytest.approx(by_hand8, rel=1e-12)


def test_attention_per_request_and_kv_terms_by_hand():
    m = MODELS["qwen3-8b"]
    terms = replace(IDEAL, attn_bw_eff=0.5, attn_request_s=1e-7, per_request_step_s=2e-5, fixed_step_s=1e-3)
    sm = StepModel(m, H100, terms)
    t = sm.breakdown([64], num_requests=[16], kv_tokens=[16 * 1000])
    kv_bytes = 2 * 36 * 8 * 128 * 2                                     # K and V, 36 layers, 8 KV heads x 128
    assert t["attention"][0] == pytest.approx(16000 * kv_bytes / (3.35e12 * 0.5) + 16 * 36 * 1e-7, rel=1e-12)
    assert t["per_request"][0] == pytest.approx(16 * 2e-5)
    assert t["fixed"][0] == pytest.approx(1e-3)
    assert t["sampling"][0] == pytest.approx(3 * 64 * 151936 * 4 / 3.35e12)
    assert t["communication"][0] == 0.0 and t["kernels"][0] == 0.0
    assert sm.kv_read_s_per_token == pytest.approx(kv_bytes / (3.35e12 * 0.5))
    assert sm.per_request_s == pytest.approx(2e-5 + 36 * 1e-7)


def test_tp_all_reduce_and_ep_all_to_all_by_hand():
    m = MODELS["llama2-70b"]
    sm = StepModel(m, H100, IDEAL, tp=4)
    bw, lat = sm.gpu.link_bytes_per_s, sm.gpu.link_latency_s
    per = lat + 2 * 3 / 4 * 256 * 8192 * 2 / bw                         # ring all-reduce of B x hidden bf16
    assert sm.breakdown([256])["communication"][0] == pytest.approx((2 * 80 + 1) * per, rel=1e-12)
    ds = MODELS["deepseek-v3"]
    ep = StepModel(ds, H100, IDEAL, tp=1, ep=8, ep_link_bytes_per_s=50e9)
    size = 32 * 8 * 7168 * 2 * 7 / 8                                    # B x top_k x hidden bf16, 7/8 leave the GPU
    assert ep.breakdown([32])["communication"][0] == pytest.approx(2 * 58 * (lat + size / 50e9), rel=1e-12)
    with pytest.raises(SpecsimInputError, match="ep"):
        StepModel(m, H100, IDEAL, ep=2)                                 # a dense model has no experts to split


def test_ep_moe_sees_the_tokens_of_every_data_parallel_rank():
    # 8 experts top-2, EP 2 (attention data-parallel over 2 ranks): a rank's 4 experts see 2 x B tokens.
    from specsim.hardware.analytic import ModelConfig
    moe = ModelConfig("tiny-moe", 2, 1024, 8, 8, 128, 4096, 1000, num_experts=8, top_k=2, expert_ffn=512)
    sm = StepModel(moe, H100, IDEAL, ep=2)
    touched = 4 * (1 - (1 - 2 / 8) ** 2)                                 # B = 1: 1.75 of the 4 local experts
    per_expert = np.ceil(2 * 2 / 8 * 4 / touched)                         # 1 routed token-slot each -> 2
    g = lambda m, n, k: sm._gemm(np.array([float(m)]), n, k)[0]
    attn = sum(g(1, n, k) for n, k in moe.attention_gemms(1))
    # one grouped GEMM per projection, charged its tiles over all touched experts (1.75 x 8 tiles of 64 x 128,
    # not rounded up to a wave of SMs) over K, or the bytes
    tiles = lambda k: touched * 8 * 64 * 128 * 2 * k / 989.4e12
    up = max(tiles(1024), touched * (1024 * 1024 + per_expert * 2048) * 2 / 3.35e12)
    down = max(tiles(512), touched * (1024 * 512 + per_expert * 1536) * 2 / 3.35e12)
    router = g(1, 8, 1024)
    assert sm.breakdown([1])["gemm"][0] == pytest.approx(2 * (attn + up + down + router), rel=1e-12)


def _routed_s(sm: StepModel, b: np.ndarray) -> np.ndarray:
    """The routed experts' seconds in one MoE layer: the MoE layer less its shared experts and router."""
    m = sm.model
    shared, _ = sm._mlp(b, max(1, m.shared_ffn) // sm.tp)
    return sm._moe(b)[0] - (shared if m.num_shared_experts else 0.0) - sm._gemm(b, m.num_experts, m.hidden)


def test_routed_experts_at_tp2_ep1_cost_half_of_tp1():
    # Issue 20: EP 1 with TP 2 splits each expert's FFN over the two ranks, every rank sees all B tokens, so
    # the routed experts' time halves (exactly where both are memory bound; within a tile's rounding when
    # compute bound). It used to be b * (ep // tp) = 0 tokens, i.e. free. BF16 weights keep B <= 512 memory
    # bound on the H100 (the preset's FP8 checkpoint turns compute bound earlier).
    ds = replace(MODELS["deepseek-v3"], weight_dtype="bf16")
    b = np.array([1.0, 8.0, 64.0, 512.0, 4096.0])
    one = _routed_s(StepModel(ds, H100, IDEAL, tp=1), b)
    two = _routed_s(StepModel(ds, H100, IDEAL, tp=2), b)
    assert np.all(one > 0) and np.all(two > 0)
    np.testing.assert_allclose(two[:4] / one[:4], 0.5, rtol=0.01)          # memory bound: the bytes halve
    # compute bound (4096 tokens): the tiles halve, but a partial tile rounds up, so at most a tile's share more
    assert 0.5 <= two[4] / one[4] <= 0.55
    # and TP 8 / EP 1 grows with B as EP 8 does (the same routed bytes per GPU, the same tokens per GPU)
    tp8 = _routed_s(StepModel(ds, H100, IDEAL, tp=8), b)
    ep8 = _routed_s(StepModel(ds, H100, IDEAL, tp=8, ep=8), b)
    assert tp8[-1] > 10 * tp8[0]
    np.testing.assert_allclose(tp8, ep8, rtol=0.35)


def test_efficiencies_are_bounded():
    for bad in ({"bw_eff": 1.2}, {"flops_eff": 0.0}, {"kernel_s": -1e-6}, {"per_request_step_s": float("nan")}):
        with pytest.raises(SpecsimInputError):
            EngineTerms(**bad)


def test_profile_tables_lookup_and_round_trip(tmp_path):
    sm = step_model("qwen3-8b", "h100", terms=replace(EngineTerms(), per_request_step_s=3e-5, fixed_step_s=2e-4))
    prof = sm.profile(1024)
    b, parts = sm.table_terms(1024)
    assert prof.step_time_s == pytest.approx(sum(parts.values()))
    assert set(parts) == set(TERMS)
    # decode: CUDA-graph padding (9 runs as 16); mixed (eager): interpolated between 8 and 16, no padding
    assert prof.step_time(9) == prof.step_time(16)
    assert prof.step_time(8) < prof.mixed_step_time(9) < prof.step_time(16)
    # per-request and KV terms are added linearly
    assert prof.step_time(64, 1000.0, 10) == pytest.approx(prof.step_time(64) + 1000 * prof.kv_read_s_per_token
                                                           + 10 * prof.per_request_s)
    assert prof.prefill_attention_s(np.array([100]), np.array([50])) == pytest.approx(
        prof.prefill_attn_s_per_pair * 100 * (50 + 101 / 2))
    path = tmp_path / "p.json"
    save_profile(prof, path)
    back = load_profile(path)
    assert back.per_request_s == prof.per_request_s and back.prefill_attn_s_per_pair == prof.prefill_attn_s_per_pair
    np.testing.assert_array_equal(back.mixed_step_time_s, prof.mixed_step_time_s)
    rebuilt = step_model_of(back)
    np.testing.assert_allclose(rebuilt.step_time([1, 77, 512], [1, 70, 500], 1e5), sm.step_time([1, 77, 512],
                                                                                                 [1, 70, 500], 1e5))
    with pytest.raises(SpecsimInputError, match="step_model"):
        step_model_from_spec({"gpu": {}}, "x.json")


def test_terms_table_sums_to_total():
    df = terms_table(step_model("llama2-70b", "h100", tp=4), [1, 64, 512], [1, 64, 512], [1e3, 6.4e4, 5.12e5])
    assert df["total"].to_numpy() == pytest.approx(df[list(TERMS)].sum(axis=1).to_numpy())
    assert (df["communication"] > 0).all()


def test_per_request_term_in_the_engine_closed_form():
    # One request decoding alone (no drafter): each step costs table(1) + per_request_s x 1, so TPOT = that.
    prof = StepTimeProfile(np.array([1, 64]), np.array([0.01, 0.01]), per_request_s=0.004)
    trace = make_trace([0.0], [16], [20])
    scen = load_scenario(overrides=["prefill.time_per_token_s=0.001", "engine.host_overhead_s=0"])
    res = simulate(trace, "none", scen, profile=prof)
    assert res.requests.tpot_s.to_numpy() == pytest.approx([0.014], abs=1e-12)


def test_drafter_cost_from_its_shape():
    target = step_model("qwen3-8b", "h100")
    kv = 5000.0
    d = {n: shaped_drafter_cost(n, target) for n in ("dspark", "dflash", "eagle3", "mtp")}
    assert all(isinstance(c, ShapedDrafterCost) for c in d.values())
    sm = d["dflash"].model
    assert sm.model.num_layers == 5 and sm.terms.per_request_step_s == 0 and sm.model.hidden == 4096
    # parallel: one forward over R x gamma positions (padded: 3 x 7 = 21 -> 24) + one KV read
    par = d["dflash"].draft_time_s(3, 7, None, kv)
    assert par == pytest.approx(sm.step_time([24], [3], 0.0)[0] + sm.kv_read_s_per_token * kv, rel=1e-12)
    # semi-autoregressive: the same plus gamma Markov-head positions (bias GEMM over the vocabulary + kernels)
    head = sm._gemm(np.array([4.0]), sm.model.vocab, MARKOV_RANK)[0] + 4 * sm.terms.kernel_s
    assert d["dspark"].draft_time_s(3, 7, None, kv) == pytest.approx(par + 7 * head, rel=1e-12)
    # autoregressive: gamma forwards over R tokens (3 -> 4), each reading the drafter's KV
    ar = d["eagle3"].model
    assert d["eagle3"].draft_time_s(3, 7, None, kv) == pytest.approx(
        7 * (ar.step_time([4], [3], 0.0)[0] + ar.kv_read_s_per_token * kv), rel=1e-12)
    assert d["dflash"].draft_time_s(0, 7, None) == 0.0
    with pytest.raises(SpecsimInputError, match="layers"):
        shaped_drafter_cost("dspark", target, layers=0)


def test_simulation_picks_the_shaped_drafter_unless_fractions_are_set():
    from specsim.run_config import drafter_cost_of as _drafter_cost
    prof = step_model("qwen3-8b", "h100").profile(256)
    sc = load_scenario()
    assert isinstance(_drafter_cost(sc, "dspark", None, prof), ShapedDrafterCost)
    three = _drafter_cost(load_scenario(overrides=["drafter.layers=3"]), "dspark", None, prof)
    assert three.model.model.num_layers == 3
    zero = _drafter_cost(load_scenario(overrides=["drafter.base_fraction=0", "drafter.per_draft_fraction=0"]),
                         "dspark", None, prof)
    assert zero.draft_time_s(8, 7, prof) == 0.0                        # the explicit override, 0 allowed
    table = StepTimeProfile.flat(0.01)
    assert not isinstance(_drafter_cost(sc, "dspark", None, table), ShapedDrafterCost)   # no shape: fractions


def test_python_api_from_config_to_fit_to_run():
    # the notebook path: a config.json and a GPU name -> profile -> fit on measured steps -> a simulation
    from pathlib import Path

    from specsim.hardware.model_config import model_from_hf_config
    from specsim.hardware.profile_fit import fit_step_model
    from specsim.hardware.step_points import read_step_observations

    data = Path(__file__).parent / "data"
    sm = step_model(model_from_hf_config(data / "hf_configs" / "qwen3-8b.json"), "h100")
    obs = read_step_observations([data / "step_points" / "vllm_c16.json", data / "step_points" / "vllm_sweep_append.jsonl"])
    rep = fit_step_model(sm, obs[:2], holdout=obs[2:])
    assert set(rep.params) == {"kernel_s", "per_request_step_s"} and len(rep.points) == 3
    prof = rep.model.profile(2048, kind="fitted", provenance=rep.provenance())
    trace = make_trace([0.0, 0.0, 0.0], [64, 64, 64], [20, 20, 20])
    res = simulate(trace, "dspark", load_scenario(overrides=["prefill.time_per_token_s=0.0001"]), profile=prof)
    assert res.summary["completed"] == 3
    assert res.summary["kv_capacity"]["source"] == "gpu_memory_utilization"     # derived from the model and GPU


def test_routed_expert_gemm_time_halves_from_fp8_to_fp4_when_compute_bound():
    # DeepSeek-V3 on B200 at TP 1 / EP 8 and B = 4096: each GPU's 32 experts see the 8 x 4096 tokens of the EP
    # group, top-8 of 256, so all 32 are touched (1 - (1 - 8/256)^32768 = 1) with 32768 x 8 / 256 = 1024 tokens
    # each. Both grouped GEMMs (gate/up 4096 x 7168, down 7168 x 2048) are compute bound at FP8 and FP4:
    # FLOPs / peak > bytes / HBM, by hand below (64 x 128 tiles, not rounded up to waves of the 148 SMs).
    b200, m = gpu_spec("b200"), replace(MODELS["deepseek-v3"], weight_dtype="fp8")
    tile_m, tile_n = 64, 128
    routed = {}
    for dtype, peak, wbytes in (("fp8", 4.5e15, 1.0), ("fp4", 9.0e15, 0.5)):
        t = 0.0
        for n, k in ((2 * 2048, 7168), (7168, 2048)):
            tiles = 32 * np.ceil(1024 / tile_m) * np.ceil(n / tile_n)
            compute = tiles * tile_m * tile_n * 2.0 * k / peak
            memory = 32 * (n * k * wbytes + 1024 * (k + n) * 2) / 8e12
            assert compute > memory
            t += compute
        routed[dtype] = t
    assert routed["fp4"] == pytest.approx(routed["fp8"] / 2, rel=1e-12)
    gemm = {d: StepModel(replace(m, expert_dtype=d), b200, IDEAL, tp=1, ep=8).breakdown([4096.0])["gemm"][0]
            for d in ("fp8", "fp4")}
    moe_layers = 61 - 3
    assert gemm["fp8"] - gemm["fp4"] == pytest.approx(moe_layers * (routed["fp8"] - routed["fp4"]), rel=1e-9)
    # at B = 1 the experts are memory bound: FP4 halves their weight bytes, not their time by FLOPs
    small = {d: StepModel(replace(m, expert_dtype=d), b200, IDEAL, tp=1, ep=8).breakdown([1.0])["gemm"][0]
             for d in ("fp8", "fp4")}
    assert small["fp4"] < small["fp8"]


def test_attention_dtype_sets_the_attention_gemms():
    m = MODELS["llama2-7b"]
    base = StepModel(m, H100, IDEAL)
    fp8_attn = StepModel(replace(m, attention_dtype="fp8"), H100, IDEAL)
    # B = 1, memory bound: the attention projections read half the bytes (weights 2 -> 1 byte; activations BF16)
    saved = sum(n * k * (2 - 1) for n, k in m.attention_gemms(1)) * m.num_layers / H100.hbm_bytes_per_s
    gap = base.breakdown([1.0])["gemm"][0] - fp8_attn.breakdown([1.0])["gemm"][0]
    assert gap == pytest.approx(saved, rel=1e-9)


def test_a_dtype_without_tensor_cores_runs_weight_only_at_the_bf16_rate():
    """FP4 routed experts on H100 (no FP4 tensor cores), as DeepSeek-V4 and gpt-oss ship: the weights are read at
    0.5 byte each and the GEMM runs at the BF16 peak (vLLM's Marlin W4A16 path). Same shapes as the B200 case
    above, on H100 (132 SMs, 989 TFLOPS BF16, 1979 FP8, 3.35 TB/s): compute bound at B = 4096, the FP4 experts
    take the FP8 experts' time x the FP8 / BF16 peak ratio (about 2); memory bound at B = 1, half their weight bytes."""
    m = replace(MODELS["deepseek-v3"], weight_dtype="fp8")
    fp4 = StepModel(replace(m, expert_dtype="fp4"), H100, IDEAL, tp=1, ep=8)
    fp8 = StepModel(replace(m, expert_dtype="fp8"), H100, IDEAL, tp=1, ep=8)
    assert (fp4.compute_dtype("experts"), fp4.compute_dtype("other"), fp4.weight_only_parts()) == ("bf16", "fp8",
                                                                                                   ["experts"])
    assert fp8.weight_only_parts() == [] and H100.supports("fp8") and not H100.supports("fp4")
    tile_m, tile_n = 64, 128
    routed = {}
    for dtype, peak in (("fp8", H100.flops_per_s("fp8")), ("fp4", H100.flops_per_s("bf16"))):
        t = 0.0
        for n, k in ((2 * 2048, 7168), (7168, 2048)):
            tiles = 32 * np.ceil(1024 / tile_m) * np.ceil(n / tile_n)
            compute = tiles * tile_m * tile_n * 2.0 * k / peak
            wbytes = 1.0 if dtype == "fp8" else 0.5
            assert compute > 32 * (n * k * wbytes + 1024 * (k + n) * 2) / H100.hbm_bytes_per_s
            t += compute
        routed[dtype] = t
    ratio = H100.flops_per_s("fp8") / H100.flops_per_s("bf16")                     # 1979 / 989.4, about 2
    assert routed["fp4"] == pytest.approx(ratio * routed["fp8"], rel=1e-12) and 1.99 < ratio < 2.01
    gap = fp4.breakdown([4096.0])["gemm"][0] - fp8.breakdown([4096.0])["gemm"][0]
    assert gap == pytest.approx((61 - 3) * (routed["fp4"] - routed["fp8"]), rel=1e-9)
    # B = 1: every touched expert is memory bound, so FP4 reads half the expert weight bytes
    assert fp4.breakdown([1.0])["gemm"][0] < fp8.breakdown([1.0])["gemm"][0]
    # FP8 weights on A100 (no FP8 tensor cores) run weight-only too
    a100 = gpu_spec("a100")
    assert StepModel(replace(MODELS["llama2-7b"], weight_dtype="fp8"), a100, IDEAL).weight_only_parts() == [
        "attention", "other"]


def test_per_component_dtypes_travel_in_the_profile_and_stay_out_when_unset(tmp_path):
    mixed = replace(MODELS["deepseek-v3"], weight_dtype="fp8", expert_dtype="fp4", attention_dtype="bf16")
    sm = StepModel(mixed, gpu_spec("b200"), tp=8, ep=8)
    path = tmp_path / "p.json"
    save_profile(sm.profile(256), path)
    prof = load_profile(path)
    assert (prof.metadata["expert_dtype"], prof.metadata["attention_dtype"]) == ("fp4", "bf16")
    back = step_model_of(prof)
    assert back.model == mixed and back.breakdown([64.0])["gemm"] == pytest.approx(sm.breakdown([64.0])["gemm"])
    plain = StepModel(MODELS["deepseek-v3"], gpu_spec("b200"), tp=8, ep=8).profile(256)
    assert "expert_dtype" not in plain.metadata and "expert_dtype" not in plain.metadata["step_model"]["model"]


def _routed_time(gpu, peak: float, wbytes: float) -> float:
    """DeepSeek-V3 at TP 1 / EP 8, B = 4096: both grouped GEMMs of the 32 local experts (1024 tokens each), by
    hand (the FLOPs of their 64 x 128 tiles), asserted compute bound at ``peak``."""
    t = 0.0
    for n, k in ((2 * 2048, 7168), (7168, 2048)):
        tiles = 32 * np.ceil(1024 / 64) * np.ceil(n / 128)
        compute = tiles * 64 * 128 * 2.0 * k / peak
        assert compute > 32 * (n * k * wbytes + 1024 * (k + n) * 2) / gpu.hbm_bytes_per_s
        t += compute
    return t


def test_fp8_activations_run_fp4_experts_w4a8_at_the_fp8_rate_on_h800():
    """FP4 routed experts on the H800 (no FP4 tensor cores; FP8 1,978.9 TFLOPS, BF16 989.4): with
    activation_dtype "fp8" the compute-bound expert GEMMs cost the FP8-rate time (W4A8: DeepGEMM's sm90
    fp8_fp4 grouped GEMM), without it the BF16-rate time (weight-only W4A16); memory bound
    (B = 1) they read the same bytes either way."""
    h800 = gpu_spec("h800")
    m = replace(MODELS["deepseek-v3"], weight_dtype="fp8", expert_dtype="fp4")
    w4a16 = StepModel(m, h800, IDEAL, tp=1, ep=8)
    w4a8 = StepModel(replace(m, activation_dtype="fp8"), h800, IDEAL, tp=1, ep=8)
    fp8 = StepModel(replace(m, expert_dtype="fp8"), h800, IDEAL, tp=1, ep=8)
    assert (w4a8.compute_dtype("experts"), w4a8.gemm_kernel("experts"), w4a8.gemm_kernel("other")) == (
        "fp8", "W4A8", "W8A8")
    assert (w4a8.weight_only_parts(), w4a8.mixed_input_parts()) == ([], ["experts"])
    assert (w4a16.weight_only_parts(), w4a16.mixed_input_parts()) == (["experts"], [])
    at_fp8, at_bf16 = _routed_time(h800, 1978.9e12, 0.5), _routed_time(h800, 989.4e12, 0.5)
    gemm = {name: sm.breakdown([4096.0])["gemm"][0] for name, sm in (("w4a8", w4a8), ("w4a16", w4a16),
                                                                     ("fp8", fp8))}
    moe_layers = 61 - 3
    assert gemm["w4a16"] - gemm["w4a8"] == pytest.approx(moe_layers * (at_bf16 - at_fp8), rel=1e-9)
    assert gemm["w4a8"] == pytest.approx(gemm["fp8"], rel=1e-12)        # compute bound: the FP8 experts' time
    # 32 experts of 1 token each (gate/up, N = 4096, K = 7168): 32 x 32 = 1,024 tiles, 121.5 us at
    # BF16 (60.7 at FP8), under the 32 x (4096 x 7168 x 0.5 + 1 x 11,264 x 2) = 470,482,944 B / 3.35 TB/s =
    # 140.4 us: memory bound, the same FP4 bytes at either rate
    def one_token(sm):
        return sm._grouped_gemm(np.array([32.0]), np.array([1.0]), 4096, 7168)[0]
    assert 1024 * 64 * 128 * 2.0 * 7168 / 989.4e12 < 470_482_944 / h800.hbm_bytes_per_s
    assert one_token(w4a8) == one_token(w4a16) == pytest.approx(470_482_944 / 3.35e12, rel=1e-12)
    assert one_token(fp8) > one_token(w4a8)


def test_fp8_activations_keep_blackwell_fp4_weights_at_the_fp8_rate_and_bf16_weights_at_bf16():
    """On B200 (FP8 4.5 PFLOPS, FP4 9): FP4 weights against FP8 activations run at the FP8 rate (tcgen05
    kind::f8f6f4), not the FP4 one; BF16 weights stay BF16; on A100 (no FP8) everything falls back as without."""
    b200 = gpu_spec("b200")
    m = replace(MODELS["deepseek-v3"], weight_dtype="fp8", expert_dtype="fp4")
    w4a4 = StepModel(m, b200, IDEAL, tp=1, ep=8)
    w4a8 = StepModel(replace(m, activation_dtype="fp8"), b200, IDEAL, tp=1, ep=8)
    assert (w4a4.compute_dtype("experts"), w4a8.compute_dtype("experts")) == ("fp4", "fp8")
    at_fp8, at_fp4 = _routed_time(b200, 4.5e15, 0.5), _routed_time(b200, 9.0e15, 0.5)
    gap = w4a8.breakdown([4096.0])["gemm"][0] - w4a4.breakdown([4096.0])["gemm"][0]
    assert gap == pytest.approx((61 - 3) * (at_fp8 - at_fp4), rel=1e-9) and at_fp8 == pytest.approx(2 * at_fp4)
    bf16 = StepModel(replace(MODELS["llama2-7b"], activation_dtype="fp8"), b200, IDEAL)
    assert [bf16.compute_dtype(p) for p in ("attention", "other")] == ["bf16", "bf16"]
    assert bf16.breakdown([512.0])["gemm"][0] == StepModel(MODELS["llama2-7b"], b200, IDEAL).breakdown(
        [512.0])["gemm"][0]
    a100 = gpu_spec("a100")
    on_a100 = StepModel(replace(m, activation_dtype="fp8"), a100, IDEAL, tp=8, ep=8)
    assert on_a100.weight_only_parts() == ["attention", "experts", "other"]
    assert on_a100.breakdown([64.0])["gemm"][0] == StepModel(m, a100, IDEAL, tp=8, ep=8).breakdown([64.0])["gemm"][0]
    with pytest.raises(SpecsimInputError) as err:
        replace(m, activation_dtype="int8")
    assert err.value.field == "activation_dtype"


def test_activation_dtype_travels_in_the_profile_and_old_profiles_load_unchanged(tmp_path):
    m = replace(MODELS["deepseek-v3"], weight_dtype="fp8", expert_dtype="fp4", activation_dtype="fp8")
    sm = StepModel(m, gpu_spec("h800"), tp=8, ep=8)
    save_profile(sm.profile(256), tmp_path / "w4a8.json")
    prof = load_profile(tmp_path / "w4a8.json")
    assert prof.metadata["activation_dtype"] == "fp8" and prof.metadata["step_model"]["model"]["activation_dtype"] == "fp8"
    back = step_model_of(prof)
    assert back.model == m and back.breakdown([64.0])["gemm"] == pytest.approx(sm.breakdown([64.0])["gemm"])
    plain = StepModel(replace(m, activation_dtype=None), gpu_spec("h800"), tp=8, ep=8).profile(256)
    assert "activation_dtype" not in plain.metadata and "activation_dtype" not in plain.metadata["step_model"]["model"]
    # a bundled profile written before the field: rebuilt, its step model has no activation dtype and gives
    # its stored table back exactly
    old = resolve_profile("h200-deepseek-v3-tp8-terms")
    assert "activation_dtype" not in old.metadata["step_model"]["model"]
    rebuilt = step_model_of(old)
    assert rebuilt.model.activation_dtype is None
    assert np.array_equal(rebuilt.profile(int(old.batch_tokens.max())).step_time_s, old.step_time_s)


def test_ep_equal_to_tp_runs_no_all_to_all():
    """EP = TP (no data-parallel attention): every rank holds every token, so the experts' outputs meet in the MoE
    all-reduce and no dispatch or combine runs (vLLM uses its all-to-all kernels only with data parallelism): the
    communication term equals TP's alone (a fresh user's TP 8 + EP 8 step cost 169 ms of communication at
    B = 4096 against 36 ms). With EP > TP the MoE layers' all-reduce is replaced by dispatch and combine."""
    ds = MODELS["deepseek-v3"]
    b = np.array([1.0, 64.0, 4096.0])
    comm = lambda sm: sm.breakdown(b)["communication"]                       # noqa: E731
    np.testing.assert_allclose(comm(StepModel(ds, H100, IDEAL, tp=8, ep=8)), comm(StepModel(ds, H100, IDEAL, tp=8)),
                               rtol=1e-12)
    moe = ds.num_layers - ds.first_dense_layers
    g, e = H100, IDEAL
    ar = g.link_latency_s + 2.0 * (2 - 1) / 2 * b * ds.hidden * 2.0 / (g.link_bytes_per_s * e.link_eff)
    a2a = g.link_latency_s + b * ds.top_k * ds.hidden * 2.0 * (8 - 1) / 8 / (g.link_bytes_per_s * e.link_eff)
    want = (2 * ds.num_layers + 1 - moe) * ar + 2 * moe * a2a
    np.testing.assert_allclose(comm(StepModel(ds, H100, IDEAL, tp=2, ep=8)), want, rtol=1e-9)


def test_an_fp4_kv_cache_needs_a_gpu_with_fp4():
    """A fresh user's `profile analytic --kv-dtype fp4` on an H100 was accepted and halved the KV read; no engine
    stores an FP4 KV cache without FP4 support (NVFP4 KV is a Blackwell feature)."""
    fp4 = replace(MODELS["llama2-7b"], kv_dtype="fp4")
    with pytest.raises(SpecsimInputError, match=r"kv_dtype.*fp8 or bf16 on h100.*Blackwell"):
        step_model(fp4, "h100")
    assert step_model(fp4, "b200").kv_bytes_per_token * 4 == step_model(MODELS["llama2-7b"], "b200").kv_bytes_per_token


def test_the_lm_head_is_charged_at_bf16_whatever_the_weights_dtype():
    """docs/profiles.md: the LM head stays BF16 in FP8/FP4 checkpoints; its GEMM was charged at the weights' dtype
    (a fresh user's FP4 Llama-3.1-8B on an RTX PRO 6000: LM head 0.164 ms against 0.655 ms, the step ~9% fast)."""
    b = np.array([1.0, 64.0, 512.0])
    base = StepModel(MODELS["llama2-7b"], gpu_spec("b200"))
    for dtype in ("fp8", "fp4"):
        low = StepModel(replace(MODELS["llama2-7b"], weight_dtype=dtype), gpu_spec("b200"))
        np.testing.assert_array_equal(low.breakdown(b)["lm_head"], base.breakdown(b)["lm_head"])
        assert (low.breakdown(b)["gemm"] < base.breakdown(b)["gemm"]).all()      # the layers do run narrower
    assert replace(MODELS["llama2-7b"], weight_dtype="fp16").gemm_dtype("head") == "fp16"


def test_a_hybrid_prefill_chunk_moves_its_linear_state_per_64_tokens_not_per_token():
    # Qwen3.8-27B: 48 Gated DeltaNet layers. A decode or verify step writes the state after every token (the table,
    # R = 0: B writes); a prefill chunk of c tokens moves it 2 + ceil(c / 64) times (the chunked kernel).
    from specsim.hardware.model_config import model_from_hf_config

    data = __import__("pathlib").Path(__file__).parent / "data"
    sm = step_model(model_from_hf_config(data / "hf_configs" / "qwen3.8-27b.json"), "b200")
    state = sm.state_s_per_request
    assert state == pytest.approx(sm.model.linear_state_bytes() / (sm.gpu.hbm_bytes_per_s * sm.terms.attn_bw_eff))
    bare = replace(sm, model=replace(sm.model, linear_layers=0))       # every layer softmax attention, no state
    assert bare.breakdown([96], [0])["attention"][0] == 0.0                # R = 0, K = 0: no KV read
    assert sm.breakdown([96], [0])["attention"][0] == pytest.approx(96 * state, rel=1e-12)
    pairs = sm.prefill_attn_s_per_pair * 190 * (0 + 191 / 2)
    assert sm.prefill_attention_s([190], [0]) == pytest.approx(pairs + state * (2 + 3 - 190), rel=1e-12)
    prof = sm.profile(512)
    assert prof.linear_state_s == state
    assert prof.prefill_attention_s(190, 0) == pytest.approx(sm.prefill_attention_s([190], [0]), rel=1e-12)
    assert prof.prefill_attention_s(np.array([190, 64]), np.array([0, 0])) == pytest.approx(
        sm.prefill_attention_s([190, 64], [0, 0]), rel=1e-12)
    assert bare.profile(512).linear_state_s == 0.0
    assert bare.prefill_attention_s([190], [0]) == pytest.approx(bare.prefill_attn_s_per_pair * 190 * 191 / 2)


def test_the_engine_charges_a_prefill_chunk_its_state_moves(tmp_path):
    # flat 20 ms steps; one request, a 64-token prompt prefilled in one colocated step: the table wrote the state
    # 64 times, the chunk moves it 2 + 1 times, so its first token comes 61 state moves earlier
    prof = StepTimeProfile(np.array([1, 4096]), np.array([0.02, 0.02]), linear_state_s=1e-4,
                           metadata={"speculation_terms": "none: a closed-form profile"})
    save_profile(prof, tmp_path / "p.json")
    assert load_profile(tmp_path / "p.json").linear_state_s == 1e-4
    scen = load_scenario(overrides=["prefill.mode=colocated", "engine.host_overhead_s=0",
                                    "engine.request_overhead_s=0"])
    r = simulate(make_trace([0.0], [64], [5]), "none", scen, profile=prof, seed=0).requests
    assert r["ttft_s"][0] == pytest.approx(0.020 - 61e-4, abs=1e-12)
    assert r["e2el_s"][0] == pytest.approx(0.020 - 61e-4 + 4 * 0.020, abs=1e-12)
