"""Side-by-side with Vidur (issue 3): same workload, same measured A100 inputs, no speculation.

specsim runs ``--policy none`` on anchors/vidur_run/workload.jsonl with the bundled scenario
``vidur-codellama34b-a100-tp2`` (profile built only from Vidur's inputs, nothing fitted to its outputs) and
must give TPOT p50 and output throughput within 10% of Vidur's ``vidur_metrics_summary.json``.
TPOT is compared under both definitions (docs/vidur_side_by_side.md): specsim's (e2e - ttft) / (output - 1)
and Vidur's per-request ``decode_time_execution_plus_preemption_normalized``, (e2e - ttft) / output.
One simulation (about 2 s) is shared by the tests of this module.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCENARIO = Path(__file__).resolve().parent.parent / "specsim" / "scenarios" / "vidur-codellama34b-a100-tp2.toml"


@pytest.fixture(scope="module")
def side_by_side(shared):
    """(specsim SimulationResult, Vidur's summary dict, anchor folder)."""
    from specsim.scenario import load_scenario
    from specsim.simulation import simulate
    from specsim.workload import load_trace

    anchor = shared / "anchors" / "vidur_run"
    vidur = json.loads((anchor / "vidur_metrics_summary.json").read_text())
    res = simulate(load_trace(anchor / "workload.jsonl"), "none", load_scenario(SCENARIO))
    return res, vidur, anchor


def _rel(ours: float, theirs: float) -> float:
    return abs(ours / theirs - 1)


def test_tpot_p50_and_output_throughput_within_10pct_of_vidur(side_by_side):
    res, vidur, _ = side_by_side
    s, r = res.summary, res.requests
    assert s["completed"] == 300 and s["unservable"] == 0
    # request ids come from the workload's `id` field
    assert list(r.request_id[:3]) == ["0", "1", "2"]
    tpot_specsim = s["median_tpot_ms"] * 1e-3                                   # (e2e - ttft) / (output - 1)
    tpot_vidur_def = float(((r.e2el_s - r.ttft_s) / r.output_tokens).median())  # (e2e - ttft) / output
    assert _rel(tpot_specsim, vidur["tpot_s"]["p50"]) < 0.10
    assert _rel(tpot_vidur_def, vidur["tpot_s"]["p50"]) < 0.10
    assert tpot_vidur_def < tpot_specsim                                         # output >= 2: /output is smaller
    assert _rel(s["output_throughput"], vidur["throughput"]["output_tok_s"]) < 0.10
    # the per-GPU figure divides by the replica's 2 GPUs
    assert s["output_throughput_per_gpu"] == pytest.approx(s["output_throughput"] / 2)


def test_ttft_e2e_and_batches_close_to_vidur(side_by_side):
    """Not demanded by the issue, but the same run matches these within 10% too (measured: <= 3.1%)."""
    res, vidur, _ = side_by_side
    s, r, steps = res.summary, res.requests, res.steps
    assert _rel(s["mean_ttft_ms"] * 1e-3, vidur["ttft_s"]["mean"]) < 0.10
    assert _rel(s["median_ttft_ms"] * 1e-3, vidur["ttft_s"]["p50"]) < 0.10
    assert _rel(float(r.e2el_s.mean()), vidur["e2e_s"]["mean"]) < 0.10
    assert _rel(float(r.e2el_s.median()), vidur["e2e_s"]["p50"]) < 0.10
    assert _rel(len(steps), vidur["batches"]["n"]) < 0.10
    assert _rel(int((steps.prefill_tokens == 0).sum()), vidur["batches"]["decode_only"]) < 0.10
    # Sarathi budget: decode tokens first, prefill chunks fill the rest of the 512-token step
    assert steps.batch_tokens.max() <= 512
    mixed = steps[steps.prefill_tokens > 0]
    assert np.all(mixed.batch_tokens == mixed.num_decode + mixed.prefill_tokens)


def test_engine_decode_steps_match_vidur_by_batch(side_by_side):
    """The engine's decode-only step medians (real KV lengths of the run) against Vidur's, batch 1..33."""
    res, _, anchor = side_by_side
    steps = res.steps
    ours = steps[steps.prefill_tokens == 0].groupby("num_decode").duration_s.median() * 1e3
    vid = pd.read_csv(anchor / "vidur_decode_step_ms_by_batch.csv").set_index("batch_size").median_step_ms
    both = pd.concat([ours.rename("ours"), vid.rename("vidur")], axis=1).dropna()
    assert len(both) >= 30
    err = (both.ours / both.vidur - 1).abs()
    assert err.mean() < 0.03 and err.max() < 0.07


def test_kv_capacity_is_vidurs_memory_plan():
    """kv_capacity_tokens = Vidur's memory planner by hand (scenario comment): 109 requests x 4096 tokens."""
    from specsim.hardware.profile import resolve_profile
    from specsim.scenario import load_scenario

    scen = load_scenario(SCENARIO)
    m = resolve_profile(scen.profile.name).metadata
    L, d, tp, ffn = m["num_layers"], m["n_embd"], m["tp"], m["n_expanded_embd"]
    head_dim, q_heads, kv_heads = d // m["n_head"], m["n_head"] // tp, m["n_kv_head"] // tp
    params_per_gpu = L * (d * head_dim * (q_heads + 2 * kv_heads) + d * head_dim * q_heads + 3 * d * ffn // tp)
    kv_bytes = 80 * 1024**3 * 0.9 - 2 * params_per_gpu                  # A100 80 GiB, 10% margin, fp16
    per_request = 2 * 2 * head_dim * kv_heads * L * 4096                # K and V, fp16, 4096-token requests
    assert params_per_gpu == 16_609_443_840
    assert scen.cluster.kv_capacity_tokens == int(kv_bytes // per_request) * 4096 == 446_464
    assert scen.cluster.max_num_seqs == 128 and scen.prefill.chunk_tokens == 512
    assert scen.prefill.mode == "colocated" and scen.cluster.gpus_per_replica == 2


def test_benchmark_compares_like_with_like(shared, monkeypatch, capsys):
    """Issue 13 item 14: TPOT is set beside Vidur's only under Vidur's definition; a wall-time ratio is printed
    only when Vidur ran in the same run on this machine (--vidur-cmd), else the recorded figures are labelled."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_vidur_side_by_side.py"
    spec = importlib.util.spec_from_file_location("bench_vidur_side_by_side", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv("SPECSIM_SHARED", str(shared))
    monkeypatch.setattr(sys, "argv", ["bench", "--repeat", "1"])
    bench.main()
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()]
    specsim_def = [r for r in rows if r[:2] == ["tpot_s", "(specsim:"]]
    assert len(specsim_def) == 4 and all(r[-1] == "n/a" for r in specsim_def)      # no Vidur figure beside it
    vidur_def = [r for r in rows if r[:2] == ["tpot_s", "(vidur:"]]
    assert len(vidur_def) == 4 and all(r[-1].endswith("%") for r in vidur_def)
    assert "date not recorded" in out and "not comparable" in out and "specsim CLI / Vidur" not in out
    cmd = f"{sys.executable} -c pass"
    monkeypatch.setattr(sys, "argv", ["bench", "--repeat", "1", "--vidur-cmd", cmd])
    bench.main()
    out = capsys.readouterr().out
    assert "specsim CLI / Vidur = " in out and "same machine, same run" in out
