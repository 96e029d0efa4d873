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


def _write_vidur_csv(path, rows):
    """A hand-made Vidur-format mlp.csv: rows of (num_tokens, tp, per-op median ms, emb ms)."""
    from specsim.hardware.vidur import OPERATORS, SHAPE_COLUMNS
    ops = ("emb",) + OPERATORS
    head = [f"time_stats.{o}.median" for o in ops] + list(SHAPE_COLUMNS) + [
        "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers"]
    lines = [",".join(head)]
    for n, tp, op_ms, emb_ms in rows:
        lines.append(",".join([str(emb_ms)] + [str(op_ms)] * len(OPERATORS)
                              + ["32", "32", "4096", "11008", "32768", "True", str(n), str(tp)]))
    path.write_text("\n".join(lines) + "\n")


def test_hand_made_vidur_file(tmp_path):
    """9 operators x op_ms per layer x 3 layers + emb; duplicate rows -> median (mean of two)."""
    from specsim.hardware.vidur import build_vidur_profile
    f = tmp_path / "mlp.csv"
    _write_vidur_csv(f, [(1, 1, 0.01, 0.002), (2, 1, 0.02, 0.002), (2, 1, 0.04, 0.004),
                         (4, 1, 0.05, 0.003), (1, 2, 0.005, 0.001)])
    p = build_vidur_profile(f, 1, "h100", model="hand", num_layers=3)
    assert p.batch_tokens.tolist() == [1, 2, 4]
    want_ms = [3 * 9 * 0.01 + 0.002, 3 * 9 * 0.03 + 0.003, 3 * 9 * 0.05 + 0.003]
    assert np.allclose(p.step_time_s * 1e3, want_ms)
    assert p.step_time(3) == pytest.approx((want_ms[1] + want_ms[2]) / 2 * 1e-3)
    assert p.kv_read_s_per_token == pytest.approx(2 * 3 * 32 * 128 * 2 / 3.35e12)


def test_missing_tp_lists_available(tmp_path):
    from specsim.errors import SpecsimInputError
    from specsim.hardware.vidur import build_vidur_profile
    f = tmp_path / "mlp.csv"
    _write_vidur_csv(f, [(1, 1, 0.01, 0.002), (1, 2, 0.01, 0.002)])
    with pytest.raises(SpecsimInputError, match=r"\[1, 2\]"):
        build_vidur_profile(f, 4, "h100", model="hand", num_layers=3)


def test_nan_row_names_the_line(tmp_path):
    from specsim.errors import SpecsimInputError
    f = tmp_path / "mlp.csv"
    _write_vidur_csv(f, [(1, 1, 0.01, 0.002), (2, 1, "nan", 0.002)])
    with pytest.raises(SpecsimInputError) as e:
        read_operator_csv(f)
    assert e.value.line == 3 and e.value.field.startswith("time_stats.")


def test_codellama_decode_steps_match_vidur(shared):
    """The bundled side-by-side profile (built only from anchors/vidur_run inputs) predicts Vidur's
    decode-only step medians within 5% at every batch 1..33 (mean context: prompt + output / 2)."""
    import pandas as pd
    a = shared / "anchors/vidur_run"
    vid = pd.read_csv(a / "vidur_decode_step_ms_by_batch.csv")
    w = pd.read_json(a / "workload.jsonl", lines=True)
    kv = float((w.prompt_tokens + w.output_tokens / 2).mean())
    p = resolve_profile("a100-codellama34b-tp2-vidur")
    pred = np.array([p.step_time(b, b * kv) for b in vid.batch_size]) * 1e3
    err = np.abs(pred / vid.median_step_ms.to_numpy() - 1)
    assert err.max() < 0.05 and err.mean() < 0.025
    assert 0.004 < p.prefill_attention_s([512], [1024]) < 0.009  # 48 layers x ~0.15 ms x 1.1


def test_allreduce_interpolates_and_lists_sizes(shared):
    from specsim.errors import SpecsimInputError
    from specsim.hardware.vidur import allreduce_ms, read_allreduce_csv
    ar = read_allreduce_csv(shared / "data/profiles/vidur/network/h100_dgx/all_reduce.csv")
    t = allreduce_ms(ar, 2, np.array([8192.0, 8192 * 64]))
    assert np.all(t > 0) and t[1] > t[0]
    with pytest.raises(SpecsimInputError, match=r"\[2, 4, 8\]"):
        allreduce_ms(ar, 3, np.array([8192.0]))
