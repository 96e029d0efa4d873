"""Vidur import: the bundled default profile, the sawtooth, and a hand-computed Vidur-format file."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.hardware.profile import resolve_profile
from specsim.hardware.vidur import layer_table, read_operator_csv

H100_7B = "data/profiles/vidur/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv"


def test_sawtooth_per_layer_sum(shared):
    """SOURCES.md 2a table: per-layer sum without emb, TP 1: 0.183 ms @64, 0.225 @72, 0.199 @104."""
    t = layer_table(read_operator_csv(shared / H100_7B), 1)
    at = dict(zip(t.num_tokens.tolist(), t.layer_ms.tolist()))
    assert at[64] == pytest.approx(0.183, abs=6e-4)
    assert at[72] == pytest.approx(0.225, abs=6e-4)
    assert at[104] == pytest.approx(0.199, abs=6e-4)
    assert t.num_duplicates == 2


def test_bundled_default_keeps_sawtooth():
    """The default profile: 32 layers, linear lookup, the step up at 72 and down at 104 survive."""
    p = resolve_profile("h100-llama2-7b-tp1")
    assert p.lookup == "linear" and p.metadata["num_layers"] == 32 and p.max_batch_tokens == 4096
    assert p.step_time(72) > p.step_time(64) * 1.15      # +23% per layer, diluted by attention/emb
    assert p.step_time(104) < p.step_time(96) * 0.93
    assert p.batch_tokens[:5].tolist() == [1, 2, 4, 8, 16]
    # KV bytes per token 2*32*4096*2 over 3.35 TB/s at the calibrated efficiency.
    eff = p.metadata["kv_efficiency"]
    assert p.kv_read_s_per_token == pytest.approx(524288 / (3.35e12 * eff), rel=1e-12)
    assert 0.7 < eff < 0.9
    assert np.all(np.isfinite(p.step_time(np.arange(1, 4097))))
