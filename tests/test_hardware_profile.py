"""Lookup semantics of StepTimeProfile and the profile file format."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.profile import (PrefillAttentionProfile, StepTimeProfile, load_profile, save_profile,
                                      sps_rise_points)

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
    with pytest.raises(SpecsimInputError, match=r"\[1, 24\]"):
        StepTimeProfile(B, T).step_time(25)
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
