"""Lookup semantics of StepTimeProfile and the profile file format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specsim.errors import SpecsimInputError
from specsim.cli import _register, app
from specsim.hardware.profile import (PrefillAttentionProfile, StepTimeProfile, load_profile, range_report,
                                      save_profile, sps_rise_points)
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace

_register()

B = np.array([1, 8, 16, 24])
T = np.array([0.010, 0.012, 0.011, 0.020])   # non-monotone at 16


def test_linear_exact_at_grid_and_between():
    p = StepTimeProfile(B, T)
    assert np.array_equal(p.step_time(B), T)
    assert p.step_time(4) == pytest.approx(0.010 + 3 / 7 * 0.002)
    assert p.step_time(20) == pytest.approx(0.0155)
    assert p.sps(8) == pytest.approx(1 / 0.012)


def test_padded_takes_next_captured_size():
    p = StepTimeProfile(B, T, lookup="padded")
    assert p.step_time(2) == 0.012 and p.step_time(9) == 0.011 and p.step_time(16) == 0.011
    assert np.array_equal(p.step_time(np.array([1, 17, 24])), [0.010, 0.020, 0.020])


def test_kv_term_adds_linearly():
    p = StepTimeProfile(B, T, kv_read_s_per_token=1e-7)
    assert p.step_time(8, kv_tokens=1000) == pytest.approx(0.012 + 1e-4)


def test_beyond_table_is_an_error_or_explicit_extrapolation():
    with pytest.raises(SpecsimInputError, match=r"\[1, 24\]") as ei:
        StepTimeProfile(B, T).step_time(25)
    # what to do about it, in the scenario's own keys (a researcher's hint named a field no scenario sets)
    assert "cluster.max_num_seqs" in str(ei.value) and "engine.gamma" in str(ei.value)
    p = StepTimeProfile(B, T, extrapolate="linear")
    assert p.step_time(32) == pytest.approx(0.020 + 8 * (0.009 / 8))


def test_non_monotone_points_detected():
    assert sps_rise_points(StepTimeProfile(B, T)).tolist() == [16]
    assert sps_rise_points(StepTimeProfile(B, T), min_rel=0.1).tolist() == []   # 8.3% drop


@pytest.mark.parametrize("b,t,field", [
    ([1, 2, 2], [1.0, 2.0, 3.0], "batch_tokens[2]"),          # duplicate
    ([1, 4, 2], [1.0, 2.0, 3.0], "batch_tokens[2]"),          # unsorted
    ([1, 2, 4], [1.0, np.nan, 3.0], "step_time_s[1]"),        # NaN
    ([1, 2, 4], [1.0, 0.0, 3.0], "step_time_s[1]"),           # non-positive
])
def test_bad_tables_rejected(b, t, field):
    with pytest.raises(SpecsimInputError) as e:
        StepTimeProfile(np.array(b), np.array(t))
    assert e.value.field == field


def test_json_round_trip_and_null_time(tmp_path):
    p = StepTimeProfile(B, T, lookup="padded", kv_read_s_per_token=2e-8, metadata={"gpu": "x"})
    f = tmp_path / "p.json"
    save_profile(p, f)
    q = load_profile(f)
    assert type(q) is StepTimeProfile and q.lookup == "padded" and q.metadata == {"gpu": "x"}
    assert np.array_equal(q.step_time_s, T) and q.kv_read_s_per_token == 2e-8
    doc = json.loads(f.read_text())
    doc["step_time_s"][2] = None
    f.write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError, match="step_time_s\\[2\\]"):
        load_profile(f)


def test_prefill_attention_profile_bilinear_and_round_trip(tmp_path):
    grid = np.array([[1.0, 2.0], [3.0, 5.0]])          # ms per layer at chunk {64,128} x context {0,100}
    p = PrefillAttentionProfile(B, T, num_layers=10, prefill_chunk_tokens=np.array([64.0, 128.0]),
                                prefill_context_tokens=np.array([0.0, 100.0]), prefill_ms_per_layer=grid,
                                charged_ms_per_token_per_layer=0.001)
    # chunk 96, context 50: bilinear = 2.75 ms; minus 96 x 0.001 charged; x 10 layers
    assert p.prefill_attention_s([96], [50]) == pytest.approx(10 * (2.75 - 0.096) * 1e-3)
    assert p.prefill_attention_s([], []) == 0.0
    save_profile(p, tmp_path / "a.json")
    q = load_profile(tmp_path / "a.json")
    assert isinstance(q, PrefillAttentionProfile)
    assert q.prefill_attention_s([64, 128], [0, 100]) == pytest.approx(p.prefill_attention_s([64, 128], [0, 100]))
    assert StepTimeProfile(B, T).prefill_attention_s(np.array([64]), np.array([0])) == 0.0


# ------------------------------------------------------------------ the measured range in runs (issue 13 item 6)

DATA = Path(__file__).resolve().parent / "data"


def _short(tmp_path, **changes) -> str:
    """tests/data/short_profile.json (B = 1..8) with ``changes``, written to ``tmp_path``; returns the path."""
    doc = {**json.loads((DATA / "short_profile.json").read_text()), **changes}
    path = tmp_path / f"short_{len(list(tmp_path.iterdir()))}.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _run(profile_path: str, policy: str):
    scen = load_scenario(overrides=[f"profile.name={profile_path}"])
    return simulate(load_trace(DATA / "four_long.jsonl"), policy, scen, seed=0)


def test_batch_limit_and_provenance():
    p = StepTimeProfile(B, T)
    assert p.batch_limit == 24
    assert StepTimeProfile(B, T, extrapolate="linear").batch_limit is None
    prov = StepTimeProfile(B, T, extrapolate="linear", metadata={"gpu": "x"}).provenance()
    assert prov == {"gpu": "x", "lookup": "linear", "extrapolate": "linear", "measured_batch_tokens": [1, 24]}


def test_range_report_counts_padded_and_capped_steps():
    p = StepTimeProfile(np.array([4, 8]), np.array([0.01, 0.02]))
    steps = pd.DataFrame({"batch_tokens": [2, 8, 8, 8, 6], "num_decode": [2, 2, 2, 4, 2],
                          "verified_drafts": [0, 6, 6, 4, 4], "prefill_tokens": [0] * 5})
    rep = range_report(p, steps, gamma=3)
    # step 0: B = 2 < 4 padded; steps 1-2: B = 8 with 6 of 6 drafts verified (none left): not capped;
    # step 3: B = 8 with 4 of 12 drafts verified: capped
    assert rep["steps_padded_to_first"] == 1 and rep["steps_capped_at_last"] == 1
    assert len(rep["notices"]) == 3 and rep["measured_batch_tokens"] == [4, 8]     # + no speculation overhead
    assert "charges no speculation overhead" in rep["notices"][2]
    ext = range_report(StepTimeProfile(np.array([4, 8]), np.array([0.01, 0.02]), extrapolate="linear"), steps, 3)
    assert ext["steps_capped_at_last"] == 0 and ext["extrapolate"] == "linear"


def test_dspark_is_capped_by_the_range_and_says_so(tmp_path):
    """four_long.jsonl with short_profile.json (B = 1..8): every step B <= 8 and the run says the policy was
    capped (a notice and profile_range.steps_capped_at_last)."""
    res = _run(str(DATA / "short_profile.json"), "dspark")
    assert res.steps.batch_tokens.max() <= 8
    rng = res.summary["profile_range"]
    assert rng["steps_capped_at_last"] > 0 and "capped by the profile's measured range" in rng["notices"][0]
    assert res.summary["provenance"]["profile_metadata"]["extrapolate"] == "error"


def test_extrapolation_lets_dspark_score_beyond_the_table(tmp_path):
    """With "extrapolate": "linear" the run equals the one with the last segment written out to B = 64."""
    ext = _run(_short(tmp_path, extrapolate="linear"), "dspark")
    t = json.loads((DATA / "short_profile.json").read_text())["step_time_s"]
    written = _run(_short(tmp_path, batch_tokens=[1, 2, 4, 8, 64],
                          step_time_s=t + [t[-1] + 56 * (t[-1] - t[-2]) / 4]), "dspark")
    assert ext.steps.batch_tokens.max() > 8
    pd.testing.assert_frame_equal(ext.steps[["batch_tokens", "verified_drafts", "accepted_drafts"]],
                                  written.steps[["batch_tokens", "verified_drafts", "accepted_drafts"]])
    np.testing.assert_allclose(ext.steps.duration_s, written.steps.duration_s, rtol=1e-12)
    for key in ("mean_verify_tokens_per_request", "mean_acceptance_length", "steps", "completed"):
        assert ext.summary[key] == pytest.approx(written.summary[key], rel=1e-12)
    assert not any("measured range" in n for n in ext.summary["profile_range"]["notices"])   # neither capped nor padded
    assert ext.summary["provenance"]["profile_metadata"]["extrapolate"] == "linear"


def test_below_the_table_steps_are_padded_and_reported():
    """offset_profile.json (B = 128..1024), policy none: every step is costed at B = 128's time, and says so."""
    res = _run(str(DATA / "offset_profile.json"), "none")
    rng = res.summary["profile_range"]
    assert rng["steps_padded_to_first"] == len(res.steps) > 0
    assert "padded up to the first measured size" in rng["notices"][0]
    decode = res.steps[res.steps.prefill_tokens == 0]
    np.testing.assert_allclose(decode.duration_s - decode.host_overhead_s, 0.05, rtol=1e-9)
    out = CliRunner().invoke(app, ["run", "--trace", str(DATA / "four_long.jsonl"), "--policy", "none",
                                   "--set", f"profile.name={DATA / 'offset_profile.json'}"])
    assert out.exit_code == 0 and "notice:" in out.output
    assert "padded up to the first measured size" in " ".join(out.output.split())


def test_grid_bilinear_is_scipys_linear_grid_interpolator_bit_for_bit():
    """The prefill-attention lookup by direct cell index equals RegularGridInterpolator exactly (issue 25):
    random points, integer points and every grid node and edge."""
    from scipy.interpolate import RegularGridInterpolator

    from specsim.hardware.profile import grid_bilinear

    rng = np.random.default_rng(7)
    xs = np.array([16.0, 32, 64, 128, 256, 512, 1024, 2048, 4096])
    ys = np.array([0.0, 128, 256, 512, 1024, 2048, 4096, 8192])
    vals = rng.random((xs.size, ys.size)) * 3 + 0.01
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    x = np.concatenate([rng.uniform(16, 4096, 3000), rng.integers(16, 4097, 1000).astype(float), gx.ravel()])
    y = np.concatenate([rng.uniform(0, 8192, 3000), rng.integers(0, 8193, 1000).astype(float), gy.ravel()])
    want = RegularGridInterpolator((xs, ys), vals)(np.stack([x, y], -1))
    np.testing.assert_array_equal(grid_bilinear(xs, ys, vals, x, y), want)


def test_one_or_two_chunks_take_the_scalar_path_with_the_same_numbers():
    """prefill_attention_s of one or two chunks (plain floats) equals the vectorised lookup bit for bit, inside
    the grid, on its nodes and clipped outside it (issue 25)."""
    from specsim.hardware.profile import grid_bilinear

    rng = np.random.default_rng(11)
    chunks = np.array([16.0, 64.0, 128.0, 512.0, 2048.0])
    ctx = np.array([0.0, 256.0, 1024.0, 4096.0])
    p = PrefillAttentionProfile(B, T, num_layers=48, prefill_chunk_tokens=chunks, prefill_context_tokens=ctx,
                                prefill_ms_per_layer=rng.random((5, 4)) + 0.05, charged_ms_per_token_per_layer=1e-4)
    for n in (1, 2):
        for _ in range(500):
            c = np.array([rng.choice([rng.uniform(1, 3000), rng.choice(chunks), rng.integers(1, 4000)])
                          for _ in range(n)], dtype=float)
            k = np.array([rng.choice([rng.uniform(0, 6000), rng.choice(ctx), rng.integers(0, 6000)])
                          for _ in range(n)], dtype=float)
            per_layer = grid_bilinear(chunks, ctx, p.prefill_ms_per_layer, np.clip(c, chunks[0], chunks[-1]),
                                      np.clip(k, ctx[0], ctx[-1])) - p.charged_ms_per_token_per_layer * c
            vectorised = float(p.num_layers * np.maximum(per_layer, 0.0).sum() * 1e-3)
            assert p.prefill_attention_s(c, k) == vectorised
            ci, ki = np.round(c).astype(np.int64), np.round(k).astype(np.int64)        # the engine's int arrays
            assert p.prefill_attention_s(ci, ki) == p.prefill_attention_s(ci.astype(float), ki.astype(float))
