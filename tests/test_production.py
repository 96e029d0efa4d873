"""The production prediction (issues 5 and 12): the V4 rank's step model, the MTP-1 fit's pieces, a cheap
prediction."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.analytic import padded_tokens
from specsim.hardware.drafter import ShapedDrafterCost, shaped_drafter_cost
from specsim.hardware.profile import resolve_profile
from specsim.hardware.profile_fit import FIT_BOUNDS
from specsim.hardware.stepmodel import step_model, step_model_of
from specsim.hardware.v4 import V4_PRO
from specsim.studies.production import (BASE_TERMS, DEPLOYMENTS, H800, IB_BYTES_PER_S, PARAM_BOUNDS,
                                        TRAINING_MIX, V4_FLASH, deployment, ep_link_bytes_per_s, num_requests_for,
                                        production_trace, rank_profile, rank_step_model, surrogate_tps)
from specsim.scenario import load_scenario
from specsim.run_config import drafter_cost_of as _drafter_cost
from specsim.simulation import simulate

REPO = Path(__file__).resolve().parent.parent
FLASH_TOML = REPO / "specsim" / "scenarios" / "v4-flash.toml"


def test_training_mix_is_the_papers():
    # DSpark paper §3.3: chat 17.6%, math 39.4%, code 38.9%, instruction-following 4.1% (counted as chat)
    assert TRAINING_MIX == pytest.approx({"math": 0.394, "code": 0.389, "chat": 0.217})
    assert sum(TRAINING_MIX.values()) == pytest.approx(1.0)
    tr = production_trace(1000)
    assert (tr.domain == "math").sum() == 394 and (tr.domain == "chat").sum() == 217


def test_v4_flash_shape_weights_and_kv():
    # q down 4096x1024, q up 1024x(64x512), kv 4096x512, grouped o 8 x (4096 -> 1024), o up 8192x4096
    params = sum(n * k for n, k in V4_FLASH.attention_gemms(1))
    assert params == 4096 * 1024 + 1024 * 32768 + 4096 * 512 + 8192 * 4096 + 4096 * 8192
    # compressed KV: (indexer 128/4 + KV 512/4 + KV 512/128) / 2 = 82 FP8 bytes per layer per context token
    assert V4_FLASH.kv_bytes_per_token(1) == pytest.approx(43 * 82.0)
    assert replace(V4_FLASH, num_layers=3).kv_bytes_per_token(1) == pytest.approx(3 * 82.0)
    with pytest.raises(SpecsimInputError, match="weight_dtype"):
        replace(V4_FLASH, weight_dtype="int3")


def test_v4_shapes_are_presets_of_data_parallel_attention_ranks():
    # the production study's shapes, selectable by name (issue 20): a rank of V4-Pro on 8 B200s, EP 8
    sm = step_model("v4-pro", "b200", ep=8)
    assert sm.model == V4_PRO and (sm.tp, sm.ep) == (1, 8)
    assert step_model("v4-flash", "h800", ep=32).model.expert_dtype == "fp4"
    with pytest.raises(SpecsimInputError, match="data-parallel attention"):
        step_model("v4-flash", "b200", tp=2)                     # refused when built, not when first priced
    with pytest.raises(SpecsimInputError, match="divides the model's experts"):
        step_model("v4-flash", "b200", ep=3)                     # 256 experts do not split over 3 ranks
    # the KV cache's dtype scales V4's compressed cache (82 FP8 bytes per layer and token)
    assert replace(V4_FLASH, kv_dtype="bf16").kv_bytes_per_token() == 2 * V4_FLASH.kv_bytes_per_token() == 2 * 43 * 82


def test_v4_routed_experts_are_fp4_half_the_fp8_bytes():
    # V4 stores routed experts in FP4 (0.5 B/param) and the rest in FP8; a rank holds 256 / 32 = 8 (Flash) or
    # 384 / 48 = 8 (Pro) whole experts of 3 x hidden x width params in each of its 43 (61) MoE layers
    for dep, layers, hidden, width in (("v4-flash", 43, 4096, 2048), ("v4-pro", 61, 7168, 3072)):
        m = deployment(dep).model
        assert (m.weight_dtype, m.expert_dtype, m.kv_dtype) == ("fp8", "fp4", "fp8")
        fp8 = replace(m, expert_dtype=None)
        ep = deployment(dep).ep
        routed = layers * 8 * 3 * hidden * width
        assert fp8.weight_bytes(1, ep) - m.weight_bytes(1, ep) == routed * 1.0 - routed * 0.5
        # every other part keeps its bytes: removing the routed experts leaves the same rest
        assert m.weight_bytes(1, ep) - routed * 0.5 == pytest.approx(fp8.weight_bytes(1, ep) - routed * 1.0,
                                                                     rel=1e-15)
    # Flash per rank: 43 x 8 x 25,165,824 = 8,657,043,456 routed params, 4.33 GB in FP4 (8.66 GB in FP8)
    assert 43 * 8 * 3 * 4096 * 2048 * 0.5 == 4_328_521_728


def test_v4_expert_gemm_fp4_by_hand_on_h800():
    # V4's ranks run FP8 activations (activation_dtype "fp8"): the FP4 experts' GEMMs run W4A8 at the H800's FP8
    # peak (1,978.9 TFLOPS) and stream 0.5 B per weight; the attention stays FP8 (W8A8). Without FP8 activations
    # (the 2026-12-02 sensitivity run) the H800, which has no FP4 tensor cores, runs them weight-only at the BF16
    # peak (989.4 TFLOPS). One grouped gate/up GEMM of the rank's 8 local experts (N = 2 x 2048, K = 4096), at
    # flops_eff 1 and bw_eff 0.9232 (HBM 3.35 TB/s x 0.9232 = 3.09272e12 B/s).
    sm = rank_step_model(deployment("v4-flash"), replace(BASE_TERMS, flops_eff=1.0))
    w4a16 = replace(sm, model=replace(sm.model, activation_dtype=None))
    sm8 = replace(sm, model=replace(sm.model, expert_dtype=None))
    assert sm.model.activation_dtype == "fp8" and deployment("v4-pro").model.activation_dtype == "fp8"
    assert (sm.compute_dtype("experts"), sm.compute_dtype("attention")) == ("fp8", "fp8")
    assert (sm.gemm_kernel("experts"), sm.gemm_kernel("attention"), w4a16.gemm_kernel("experts")) == (
        "W4A8", "W8A8", "W4A16")
    assert sm.weight_only_parts() == [] and sm.mixed_input_parts() == ["experts"]
    assert w4a16.weight_only_parts() == ["experts"] and w4a16.mixed_input_parts() == []
    assert sm8.weight_only_parts() == [] == sm8.mixed_input_parts()
    hbm = 3.35e12 * 0.9232
    tile = 64 * 128 * 2 * 4096                                 # FLOPs of one 64 x 128 output tile, K = 4096

    def gemm(model, m):
        return model._grouped_gemm(np.array([8.0]), np.array([float(m)]), 2 * 2048, 4096)[0]

    # 8 tokens per expert: a small-M tile of 16 rows (tile_flops) x 32 column tiles per expert, 8 x 16 x 4096 x 2 x
    # 4096 FLOPs at FP8 = 2.17 us (BF16: 4.34 us), under the weights' 8 x (4096 x 4096 x 0.5 + 8 x 8192 x 2
    # activation bytes) = 68,157,440 B / hbm = 22.0 us: memory bound, the same bytes with either activation dtype,
    # and the FP8 shape's 135,266,304 B (43.7 us) is 1.98x it
    fp4_small = 8 * (4096 * 4096 * 0.5 + 8 * 8192 * 2) / hbm
    assert 8 * 16 * 4096 * 2 * 4096 / 989.4e12 < fp4_small
    assert gemm(sm, 8) == pytest.approx(fp4_small, rel=1e-12) == pytest.approx(22.038e-6, rel=1e-4)
    assert gemm(w4a16, 8) == gemm(sm, 8)
    assert gemm(sm8, 8) == pytest.approx(8 * (4096 * 4096 + 8 * 8192 * 2) / hbm, rel=1e-12)
    # 512 tokens per expert: 8 x 8 x 32 = 2,048 tiles: W4A8 at FP8 = 69.5 us, over the 134,217,728 B (43.4 us):
    # compute bound, the FP8 shape's time; weight-only at BF16 138.9 us, twice it
    fp4_large = 2048 * tile / 1978.9e12
    assert 8 * (4096 * 4096 * 0.5 + 512 * 8192 * 2) / hbm < fp4_large
    assert gemm(sm, 512) == pytest.approx(fp4_large, rel=1e-12) == pytest.approx(69.45e-6, rel=1e-3)
    assert gemm(sm8, 512) == pytest.approx(fp4_large, rel=1e-12)
    assert gemm(w4a16, 512) == pytest.approx(2048 * tile / 989.4e12, rel=1e-12) == pytest.approx(
        138.91e-6, rel=1e-4)
    # at the unfitted flops_eff 0.6538 the 8-token W4A16 case stays under the weight stream too: its 16-row tiles
    # take 6.6 us (64-row tiles, as charged until 2026-12-06, took 26.6 us and put it on the tile side)
    base = rank_step_model(deployment("v4-flash"))
    base16 = replace(base, model=replace(base.model, activation_dtype=None))
    assert 8 * 16 * 4096 * 2 * 4096 / (989.4e12 * 0.6538) < fp4_small < 256 * tile / (989.4e12 * 0.6538)
    assert gemm(base16, 8) == pytest.approx(fp4_small, rel=1e-12)
    assert gemm(base, 8) == pytest.approx(fp4_small, rel=1e-12)


def test_h800_is_h100_compute_and_hbm():
    assert H800.name == "h800" and H800.hbm_bytes_per_s == 3.35e12 and H800.num_sms == 132
    assert H800.bf16_flops_per_s == pytest.approx(989.4e12)


def test_ep_all_to_all_by_hand():
    # dispatch + combine per MoE layer: latency + B x top_k x hidden x 2 bytes x (ep-1)/ep over the link at
    # link_eff; the link is 50 GB/s of InfiniBand per byte DeepSeek sends (FP8 dispatch + scale, BF16 combine)
    assert IB_BYTES_PER_S == 50e9
    assert ep_link_bytes_per_s() == pytest.approx(50e9 * 4.0 / (1.0 + 1.0 / 32 + 2.0))
    dep = deployment("v4-flash")
    sm = rank_step_model(dep, a2a_exposed=0.5)
    lat = H800.link_latency_s
    b = 100.0
    size = b * 6 * 4096 * 2.0 * 31 / 32
    expected = 2 * 43 * (lat + size / (2 * ep_link_bytes_per_s() * 0.8))
    got = sm.breakdown(np.array([b]))["communication"][0]
    assert got == pytest.approx(expected, rel=1e-12)
    with pytest.raises(SpecsimInputError, match="a2a_exposed"):
        rank_step_model(dep, a2a_exposed=1.5)


def test_rank_profile_is_the_step_model():
    dep = deployment("v4-flash")
    prof = rank_profile(dep, a2a_exposed=0.4)
    sm = step_model_of(prof)                                   # rebuilt from metadata.step_model
    assert sm.ep == 32 and sm.tp == 1 and sm.gpu.name == "h800" and sm.model.num_experts == 256
    assert sm.ep_link_bytes_per_s == pytest.approx(ep_link_bytes_per_s() / 0.4)
    b = np.array([1, 104, 400, 2048])                         # on the table grid (padded lookup)
    assert prof.step_time(b) == pytest.approx(sm.step_time(b, np.zeros(4), 0.0), rel=1e-12)
    assert prof.kv_read_s_per_token == pytest.approx(43 * 82.0 / (3.35e12 * sm.terms.attn_bw_eff))
    assert prof.metadata["name"] == "v4-flash-rank-terms" and prof.lookup == "padded"


def test_fit_params_bounded_and_no_more_than_points():
    for dep in DEPLOYMENTS.values():
        assert len(dep.fit_params) <= len(dep.mtp1_points)
        assert all(PARAM_BOUNDS[p] == FIT_BOUNDS[p] for p in dep.fit_params if p != "a2a_exposed")
    with pytest.raises(SpecsimInputError, match="fit_params"):
        replace(deployment("v4-flash"), fit_params=("bw_eff", "flops_eff", "kernel_s", "fixed_step_s",
                                                    "per_request_step_s"))


def test_mtp1_surrogate_closed_form_and_simulation():
    # N users verify B = 2N tokens per step, emit 1 + alpha each; the step plus one MTP layer's draft
    dep = deployment("v4-flash")
    sm = rank_step_model(dep, a2a_exposed=0.4)
    ctx = 2000.0
    step = sm.step_time(padded_tokens(np.array([16.0]), sm.terms.cudagraph_max_tokens), np.array([8.0]), 8 * ctx)[0]
    draft = shaped_drafter_cost("mtp", sm).draft_time_s(8, 1, None, 8 * ctx)
    tps = surrogate_tps(sm, np.array([8.0]), ctx)[0]
    assert tps == pytest.approx(1.875 / (step + draft), rel=1e-12)
    # against the engine on the same profile (closed loop, disaggregated prefill that never queues)
    sc = load_scenario(None, ["prefill.mode=disaggregated", "prefill.num_instances=64",
                              "prefill.time_per_token_s=1e-6"])
    s = simulate(production_trace(64), "mtp1", sc, seed=0, concurrency=8,
                 profile=rank_profile(dep, a2a_exposed=0.4)).summary
    ctx_sim = 2275.0                                           # the training mix's mean decode context
    assert s["mean_tps_per_user"] == pytest.approx(surrogate_tps(sm, np.array([8.0]), ctx_sim)[0], rel=0.05)


@pytest.mark.skipif(not FLASH_TOML.exists(), reason="fitted scenario not written yet")
def test_fitted_scenario_profile_and_drafters():
    sc = load_scenario(FLASH_TOML)
    assert sc.engine.gamma == 5 and sc.cluster.gpus_per_replica == 1 and sc.prefill.mode == "disaggregated"
    assert sc.profile.name == "v4-flash-rank-terms" and sc.drafter.layers == 3
    prof = resolve_profile(sc.profile.name)
    assert "step_model" in prof.metadata
    fit = json.loads((REPO / "specsim" / "scenarios" / "v4-flash-fit.json").read_text())
    sm = step_model_of(prof)
    assert sm.model == V4_FLASH and sm.model.expert_dtype == "fp4"   # fitted with FP4 experts (2026-12-02)
    assert sm.model.activation_dtype == "fp8" and sm.gemm_kernel("experts") == "W4A8"    # W4A8 (2026-12-02)
    assert step_model_of(resolve_profile("v4-pro-rank-terms")).model == deployment("v4-pro").model
    for p, v in fit["params"].items():                         # inside the physical bounds, and in the profile
        lo, hi = PARAM_BOUNDS[p]
        assert lo <= v <= hi
        if p != "a2a_exposed":
            assert getattr(sm.terms, p) == pytest.approx(v)
    assert sm.ep_link_bytes_per_s == pytest.approx(ep_link_bytes_per_s() / fit.get("a2a_exposed", 1.0))
    assert set(fit["residuals"]) == {f"{t:g}" for t, _ in DEPLOYMENTS["v4-flash"].mtp1_points}
    # the drafters' costs come from their shapes: DSpark-5 = 3 layers (+ Markov head), MTP = 1 layer
    ds = _drafter_cost(sc, "dspark", None, prof)
    mtp = _drafter_cost(sc, "mtp", None, prof)
    assert isinstance(ds, ShapedDrafterCost) and ds.model.model.num_layers == 3
    assert isinstance(mtp, ShapedDrafterCost) and mtp.model.model.num_layers == 1


def test_superseded_profiles_still_load():
    for name in ("v4-flash", "v4-pro"):
        old = resolve_profile(f"{name}-rank-fitted")
        assert old.metadata["superseded_by"] == f"{name}-rank-terms"
        assert old.step_time(100) > 0


def test_unreached_tier_is_never_the_best_iteration():
    from specsim.studies.production import UNREACHED_RESIDUAL, _loss
    assert _loss({"80": 0.1, "136": float("nan")}) == pytest.approx(0.01 + UNREACHED_RESIDUAL ** 2)
    assert _loss({"80": 0.1, "136": float("nan")}) > _loss({"80": 0.3, "136": -1.0})


@pytest.mark.skipif(not FLASH_TOML.exists(), reason="fitted scenario not written yet")
def test_predict_reports_progress_and_the_cli_one_summary_line(tmp_path, capsys):
    """Progress of ``production predict`` (issue 22): every point counted towards policies x concurrencies,
    and off a terminal one summary line on stderr. The points are hand-written cache records (read as a
    cached run reads them), so nothing is simulated."""
    import re

    from specsim.cli import _register, app
    from specsim.studies.production import _key, predict

    dep, sc = deployment("v4-flash"), load_scenario(FLASH_TOML)
    prof = resolve_profile(sc.profile.name, sc.profile.lookup)
    for pol, tps in (("dspark-async", 300.0), ("mtp1", 200.0)):
        for n in (1, 2):
            nreq = num_requests_for(n)
            rec = {"policy": pol, "concurrency": n, "tps": tps / n, "thr": tps * n / 2, "verify": 3.0,
                   "acceptance_length": 2.5, "num_requests": nreq, "wall_s": 1.0}
            (tmp_path / f"{_key(sc.to_dict(), prof.to_dict(), pol, n, 0, nreq)}.json").write_text(json.dumps(rec))
    calls = []
    out = predict(dep, sc, prof, concurrency=(1, 2), cache_dir=tmp_path, progress=lambda *a: calls.append(a))
    assert calls == [(0, 4, ""), (1, 4, "dspark-async at 1 user"), (2, 4, "dspark-async at 2 users"),
                     (3, 4, "mtp1 at 1 user"), (4, 4, "mtp1 at 2 users")]
    assert out["reach_tps"] == {"dspark-async": 300.0, "mtp1": 200.0}         # the records were the points
    _register()
    app(["production", "predict", "--concurrency", "1,2", "--cache", str(tmp_path)], standalone_mode=False)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and re.fullmatch(r"production predict: 4/4 points in \d+\.\d s", err[0]), err


def test_a_fit_writes_into_its_out_folder_and_leaves_the_bundled_files_alone(tmp_path):
    """write_fit with a folder: the profile, the scenario TOML naming that profile file and the fit record go
    there, and the TOML loads and resolves that profile (a fresh user's `production fit` overwrote the package's
    bundled files by default)."""
    import json

    from specsim.hardware.profile import resolve_profile
    from specsim.scenario import load_scenario
    from specsim.studies.production import FitResult, write_fit

    rec = json.loads((REPO / "specsim" / "scenarios" / "v4-flash-fit.json").read_text())
    bundled = (REPO / "specsim" / "scenarios" / "v4-flash.toml").read_text()
    paths = write_fit(deployment("v4-flash"), FitResult(**rec), REPO, tmp_path / "fit")
    assert [p.name for p in paths] == ["v4-flash-rank-terms.json", "v4-flash.toml", "v4-flash-fit.json"]
    assert all(p.parent == tmp_path / "fit" for p in paths)
    sc = load_scenario(paths[1])
    assert Path(sc.profile.name).name == "v4-flash-rank-terms.json"
    assert resolve_profile(sc.profile.name).metadata["name"] == "v4-flash-rank-terms"
    assert (REPO / "specsim" / "scenarios" / "v4-flash.toml").read_text() == bundled


def test_json_files_specsim_writes_hold_no_nan():
    """production fit wrote "136": NaN for a tier not reached (strict JSON parsers refuse it): every writer passes
    its values through jsonable, which writes null."""
    import json

    from specsim.jsonfiles import jsonable

    fit = {"residuals": {"136": float("nan"), "50": np.float64(0.02)}, "n": np.int64(3), "inf": [float("inf")]}
    text = json.dumps(jsonable(fit), allow_nan=False)
    assert json.loads(text) == {"residuals": {"136": None, "50": 0.02}, "n": 3, "inf": [None]}


def test_the_prediction_table_shows_the_tier_row_once_with_the_papers_figure(capsys, monkeypatch):
    # the tier's dspark throughput was printed twice, once without the paper's figure (a fresh user's report)
    from specsim.cli.production_cmd import print_prediction

    monkeypatch.setenv("COLUMNS", "300")        # one line per row, whatever the terminal

    out = {"deployment": "v4-flash", "sla_tier": 80.0, "throughput_at_sla": {"dspark-async": 13748.0, "mtp1": 9000.0},
           "gain_at_sla": 0.5275, "paper_gain_at_sla": 0.6, "tps_at_matched_throughput": {},
           "reach_tps": {"dspark-async": 200.0, "mtp1": 120.0}, "budget": {}, "mtp1_budget_values": [2.0],
           "dspark_frontier_vs_paper": {"80": {"predicted": 13748.0, "paper": 16000.0},
                                        "120": {"predicted": 9000.0, "paper": 10000.0}}}
    print_prediction(out)
    text = " ".join(capsys.readouterr().out.split())
    assert text.count("dspark tok/s/GPU at 80 tok/s/user") == 1 and "13,748 16,000" in text
    assert "dspark tok/s/GPU at 120 tok/s/user 9,000 10,000" in text
