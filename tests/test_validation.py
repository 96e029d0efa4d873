"""Validation against public measurements of real engines (issue 12, docs/validation.md): every prediction is
recomputed from the committed inputs and held to its target or to its documented miss."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.errors import SpecsimInputError
from specsim.studies.validation import (DATA, DOCUMENTED_MISSES, SETUPS, SPEC_SETUPS, TARGETS, alpha_for_acceptance_length,
                                fit_indices, load_rows, observation_from_row, run_all)


@pytest.fixture(scope="module")
def results():
    return run_all()


def test_every_row_names_its_source_and_date():
    rows = load_rows()
    assert rows["source_url"].str.match(r"https?://").all()
    assert rows["source_date"].astype(str).str.fullmatch(r"\d{4}-\d{2}(-\d{2})?").all()
    assert rows["accessed"].astype(str).str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    # coverage the issue asks for: two GPUs, two model sizes, >= 3 loads per series, a speculative sweep
    nospec = rows[rows["spec_method"] == "none"]
    assert nospec["gpu"].nunique() >= 2 and nospec["model"].nunique() >= 2
    assert (nospec.groupby("series")["load"].nunique() >= 3).sum() >= 4
    assert set(SPEC_SETUPS) <= set(rows["series"])


def test_a_row_without_a_source_is_refused(tmp_path):
    df = pd.read_csv(next(DATA.glob("vllm_h100_*.csv")))
    df.loc[1, "source_url"] = None
    df.to_csv(tmp_path / "x.csv", index=False)
    with pytest.raises(SpecsimInputError, match=r"x\.csv, line 3, field 'source_url'"):
        load_rows(tmp_path)


def test_fit_uses_at_most_a_third_of_a_series():
    for n in range(3, 13):
        idx = fit_indices(n)
        assert 1 <= len(idx) <= n // 3 and idx[0] == 0 and len(set(idx)) == len(idx)
    assert fit_indices(8) == [0, 7] and fit_indices(4) == [0]


def test_observation_by_hand():
    # 8 users, TPOT 10 ms, 600 tok/s out, 100 in / 300 out: R = 600 x 0.01 = 6; prompts 2 req/s x 100 = 200
    # tokens/s share the steps, 2 per step: B = 8; context = 100 + 150
    row = pd.Series({"mean_tpot_ms": 10.0, "output_throughput_tok_s": 600.0, "load": 8, "input_len": 100.0,
                     "output_len": 300.0, "file": "f.csv", "line": 2})
    o = observation_from_row(row)
    assert (o.num_requests, o.batch_tokens, o.context_tokens) == pytest.approx((6.0, 8.0, 250.0))
    assert np.isnan(o.concurrency)                              # no load kind: not known to be a closed loop
    assert observation_from_row(pd.concat([row, pd.Series({"load_kind": "concurrency"})])).concurrency == 8.0


def test_alpha_from_acceptance_length():
    a = alpha_for_acceptance_length(3.4, 7)
    assert sum(a ** i for i in range(8)) == pytest.approx(3.4, rel=1e-9)
    with pytest.raises(SpecsimInputError):
        alpha_for_acceptance_length(9.0, 7)


def _check(key, value, target):
    bound = DOCUMENTED_MISSES.get(key, (target, ""))[0]
    assert value <= max(target, bound), f"{key}: {100 * value:.1f}% (target {100 * target:.0f}%, documented bound " \
                                        f"{100 * bound:.0f}%)"


def test_no_speculation_series_meet_their_targets_or_documented_misses(results):
    base, _, _ = results
    assert set(base) == set(SETUPS)
    for name, r in base.items():
        t = r.table
        assert t["fitted"].sum() == len(fit_indices(len(t)))
        for metric in ("tpot_error", "throughput_error"):
            _check((name, metric), r.median_abs_error(metric), TARGETS[metric])
        assert all(v > 0 for v in r.params.values())


def test_dense_series_meet_the_ten_percent_target(results):
    base, _, _ = results
    for name in ("vllm_b200_qwen3.8-27b_humaneval_nospec", "vllm_b200_qwen3.8-27b_mathreasoning_nospec",
                 "vllm_h100_qwen3-8b_sharegpt_nospec"):
        assert base[name].median_abs_error("tpot_error") <= 0.10
        assert base[name].median_abs_error("throughput_error") <= 0.10


def test_speedups_meet_their_target_or_documented_miss(results):
    _, spec, _ = results
    assert set(spec) == set(SPEC_SETUPS)
    for name, t in spec.items():
        for n, err in zip(t["load"], t["speedup_error"]):
            _check((name, int(n)), abs(err), TARGETS["speedup_error"])
        # the qualitative result: the speed-up falls with concurrency, measured and predicted alike
        assert np.all(np.diff(t["speedup"].to_numpy()[2:]) < 0) and np.all(np.diff(t["pred_speedup"].to_numpy()[2:]) < 0)
    # at low concurrency every speculative prediction is within the target
    low = pd.concat([t[t["load"] <= 4] for t in spec.values()])
    assert (low["speedup_error"].abs() <= TARGETS["speedup_error"]).all()


def test_fitting_the_lowest_speculative_point_finds_an_interior_fixed_term_and_holds_its_bounds(results):
    from specsim.hardware.step_profile import SPEC_STEP_S_MAX
    from specsim.studies.validation import FITTED_SPEEDUP_BOUNDS

    _, spec, fitted = results
    for name, t in spec.items():
        # the N = 1 step read from the user's cycle (Little's law) asks for a fixed term between its bounds: read
        # from the mean TPOT it was 0 (its bound) for DSpark on MathReasoning
        assert 1e-5 < fitted[name] < SPEC_STEP_S_MAX
        assert t["fitted_speedup_error"].abs().max() <= FITTED_SPEEDUP_BOUNDS[name]


def test_the_ttft_term_is_fitted_on_the_lowest_load_as_profile_fit_fits_it(results):
    # B200: TTFT 39-44 ms at N = 1 against a modelled prefill of ~20 ms: a request overhead of tens of milliseconds;
    # SGLang H200 DeepSeek-R1: TTFT of seconds at N = 4, above the 1 s an engine's own overhead can be: the default
    from specsim.hardware.ttft_fit import MAX_REQUEST_OVERHEAD_S
    from specsim.studies.validation import DEFAULT_OVERHEAD_S

    base, _, _ = results
    for name in ("vllm_b200_qwen3.8-27b_humaneval_nospec", "vllm_b200_qwen3.8-27b_mathreasoning_nospec"):
        assert 0.005 < base[name].setup["request_overhead_s"] < 0.03
    assert base["sglang_h200_deepseek-r1_random3200-800_nospec"].setup["request_overhead_s"] == DEFAULT_OVERHEAD_S
    assert all(r.setup["request_overhead_s"] <= MAX_REQUEST_OVERHEAD_S for r in base.values())


def test_spread_lengths_keep_the_mean_within_the_cap_and_break_the_lockstep():
    from specsim.studies.validation import spread_lengths

    for mean in (263.0, 757.0):                          # MathReasoning's and HumanEval's mean outputs, max_tokens 1024
        out = spread_lengths(mean, 1024, 1000, seed=3)
        assert out.dtype == np.int64 and out.min() >= 2 and out.max() <= 1024
        assert abs(out.mean() - mean) < 0.01 * mean and np.unique(out).size > 100
    low, high = np.sort(spread_lengths(263.0, 1024, 1000)), np.sort(spread_lengths(757.0, 1024, 1000))
    # maximum entropy with a mean below the range's middle decays (most answers short), above it rises to the cap
    assert np.median(low) < 263 and np.median(high) > 757
    assert (spread_lengths(263.0, 1024, 64, seed=1) == spread_lengths(263.0, 1024, 64, seed=1)).all()
    with pytest.raises(SpecsimInputError, match="mean length"):
        spread_lengths(1024.0, 1024, 10)


def test_a_simulated_point_reads_the_closed_loops_measurement_window(monkeypatch):
    """The sources measure a steady state (GuideLLM: 90 s after a 30 s warm-up), so a point is read in the closed
    loop's window, not over the ramp-up and the tail."""
    import specsim.simulation as simulation
    from specsim.studies import validation

    class Fake:
        summary = {"mean_tpot_ms": 1.0, "output_throughput": 1.0, "median_ttft_ms": 1.0, "kv_capacity": {"blocks": 9},
                   "window": {"mean_tpot_ms": 12.0, "output_throughput": 3456.0, "median_ttft_ms": 45.0,
                              "start_s": 1.0, "end_s": 2.0}}
        # steps ending at 0.3, 0.8, 1.5, 1.9 and 2.8 s: two in the window (1, 2] s, with 3 and 5 running
        steps = pd.DataFrame({"start_s": [0.0, 0.5, 1.2, 1.6, 2.5], "duration_s": [0.3] * 5,
                              "num_running": [1, 2, 3, 5, 8]})

    monkeypatch.setattr(simulation, "simulate", lambda *a, **k: Fake())
    row = load_rows()[lambda d: d["series"] == "vllm_b200_qwen3.8-27b_mathreasoning_nospec"].iloc[1]
    got = validation.simulate_row(row, None, SETUPS["vllm_b200_qwen3.8-27b_mathreasoning_nospec"])
    assert got == {"tpot_ms": 12.0, "throughput": 3456.0, "ttft_ms": 45.0,      # the source gives median TTFT
                   "running": 4.0, "kv_blocks": 9.0}


def test_a_fixed_prompt_count_source_is_simulated_with_its_prompts_and_read_over_the_whole_run(monkeypatch):
    """vllm bench serve and SGLang's bench_serving run --num-prompts requests and count every one (ramp-up and
    drain included); GuideLLM reads a window. The H100 ShareGPT point at 8 users: its 100 prompts, whole run."""
    import specsim.simulation as simulation
    from specsim.studies import validation

    seen = {}

    class Fake:
        summary = {"mean_tpot_ms": 7.5, "output_throughput": 880.0, "mean_ttft_ms": 65.0, "kv_capacity": {"blocks": 9},
                   "window": {"mean_tpot_ms": 1.0, "output_throughput": 1.0, "mean_ttft_ms": 1.0}}
        steps = pd.DataFrame({"start_s": [0.0, 1.0], "duration_s": [0.5, 0.5], "num_running": [2, 4]})

    def fake(trace, *a, **k):
        seen["requests"], seen["outputs"] = len(trace), np.asarray(trace.output_tokens)
        return Fake()

    monkeypatch.setattr(simulation, "simulate", fake)
    name = "vllm_h100_qwen3-8b_sharegpt_nospec"
    row = load_rows()[lambda d: d["series"] == name].iloc[3]
    assert (int(row["load"]), int(row["num_prompts"])) == (8, 100)
    got = validation.simulate_row(row, None, SETUPS[name])
    assert got == {"tpot_ms": 7.5, "throughput": 880.0, "ttft_ms": 65.0,     # the source gives mean TTFT
                   "running": 3.0, "kv_blocks": 9.0}                          # every step of the run
    assert seen["requests"] == 100 and seen["outputs"].max() <= 1815 and seen["outputs"].std() > 50
    assert abs(seen["outputs"].mean() - 220.6) < 25                          # ShareGPT's own lengths, their mean


def test_one_servers_series_are_fitted_together_with_the_mixed_step_term(results):
    # HumanEval and MathReasoning on the same B200 server: one fit over both series' N = 1 and 128 points; their
    # turnover differs (a new request every ~6 and ~2 steps at 128 users), which separates mixed_step_s
    base, _, _ = results
    he, mr = (base[f"vllm_b200_qwen3.8-27b_{d}_nospec"] for d in ("humaneval", "mathreasoning"))
    assert he.params == mr.params and set(he.params) == {"kernel_s", "per_request_step_s", "mixed_step_s"}
    assert 1e-3 < he.params["mixed_step_s"] < 2e-2
    assert list(he.table.loc[he.table["fitted"], "load"]) == [1, 128]
    # the other series fit alone
    assert "mixed_step_s" not in base["vllm_h100_qwen3-8b_sharegpt_nospec"].params


def test_speculative_observation_reads_the_step_from_the_users_cycle():
    # N = 1, 301 tokens out at 300 tok/s: a cycle of 1.00333 s, of which 3.33 ms TTFT: 1 s of decoding over
    # 300 tokens after the first, 3.333 ms per token, whatever the mean of the requests' TPOT says (2.9 ms here)
    from specsim.studies.validation import spec_observation_from_row

    row = pd.Series({"mean_tpot_ms": 2.9, "output_throughput_tok_s": 300.0, "load": 1, "input_len": 100.0,
                     "output_len": 301.0, "acceptance_length": 4.0, "num_spec_tokens": 7,
                     "mean_ttft_ms": 1000 * (301 / 300 - 1.0), "file": "f.csv", "line": 2})
    o = spec_observation_from_row(row)
    assert o.step_time_s == pytest.approx(4.0 / 300, rel=1e-9)
    assert o.num_requests == pytest.approx(1.0)


def test_the_simulation_reproduces_the_ttft_the_request_overhead_was_fitted_on(results):
    """The TTFT term is fitted on each series' lowest load, a closed loop of one user (no step in flight when its
    next request arrives): the simulated point gives that TTFT back (it was 5.5 ms short on B200, -12.6%, while
    the fit charged half a step in flight). Every point, speculative ones included, reports its TTFT error."""
    base, spec, _ = results
    for name in ("vllm_b200_qwen3.8-27b_humaneval_nospec", "vllm_b200_qwen3.8-27b_mathreasoning_nospec",
                 "vllm_h100_qwen3-8b_sharegpt_nospec"):
        t = base[name].table
        assert t.loc[0, "load"] == 1 and abs(t.loc[0, "ttft_error"]) < 0.02, name
    for name, t in spec.items():
        assert t["ttft_error"].notna().all(), name


def test_a_fixed_prompt_count_row_without_its_prompt_count_is_named():
    from specsim.studies import validation

    name = "vllm_h100_qwen3-8b_sharegpt_nospec"
    row = load_rows()[lambda d: d["series"] == name].iloc[1].copy()
    row["num_prompts"] = float("nan")
    with pytest.raises(SpecsimInputError, match="num_prompts"):
        validation.simulate_row(row, None, SETUPS[name])


def test_the_docs_tables_are_the_studys_numbers(results):
    """docs/validation.md's summary tables hold what the study computes now (the speed-up rows had kept figures
    from before a change that moved them by up to 1.2 points)."""
    base, spec, _ = results
    doc = (Path(__file__).resolve().parents[1] / "docs" / "validation.md").read_text()
    pct = lambda v: f"{100 * v:+.1f}%"                                        # noqa: E731
    for name, t in spec.items():
        for label, col in (("defaults", "speedup_error"), ("+ N = 1 fitted", "fitted_speedup_error")):
            want = f"| `{name}` {label} | " + " | ".join(pct(v) for v in t[col]) + " |"
            assert want in doc, want
    for name, r in base.items():
        row = next(line for line in doc.splitlines() if line.startswith(f"| `{name}` | ") and "median" not in line
                   and ("kernel_s" in line or "the same fit" in line))
        cells = [c.strip() for c in row.split("|")]
        assert cells[3:5] == [f"{100 * r.median_abs_error(c):.1f}%" for c in ("tpot_error", "throughput_error")], name


#: The public sweep's own diagnostic of its DSpark server (vllm-project/speculators,
#: examples/evaluate/results/qwen3_8_27b_dspark/diagnostic_pinned_limits: the same server with --max-num-seqs 256
#: --max-num-batched-tokens 16384, vLLM's gauges sampled every 2 s): every kv_cache_usage_perc sample is a whole
#: number of 1/6,344 (0.9914880201765448 = 1 - 54/6,344), so the pool held 6,344 blocks; num_requests_running
#: averaged 72.3 (69-74) at 128 HumanEval users. docs/memory.md, "The activation reserve".
ENGINE_POOL_BLOCKS, ENGINE_RUNNING = 6344, 72.3


def test_the_dspark_pool_and_running_requests_match_the_engines_gauges(results):
    """At the diagnostic's settings the derived pool is within 5% of the engine's (6,638 blocks: +4.6%) and the
    simulated closed loop of 128 HumanEval users runs within 10% of the engine's mean running count (77: +6%;
    docs/memory.md). Before the activation reserve was taken as vLLM's profiling run computes it: 5,568 blocks
    (-12%), about 65 running."""
    from specsim.studies.validation import simulate_row

    base = results[0]["vllm_b200_qwen3.8-27b_humaneval_nospec"]
    rows = load_rows()
    row = rows[(rows["series"] == "vllm_b200_qwen3.8-27b_humaneval_dspark7") & (rows["load"] == 128)].iloc[0]
    alpha = alpha_for_acceptance_length(float(row["acceptance_length"]), 7)
    got = simulate_row(row, base.profile, {**base.setup, "max_num_seqs": 256}, policy="static", gamma=7,
                       drafter="dspark", alpha=alpha)
    assert got["kv_blocks"] == pytest.approx(ENGINE_POOL_BLOCKS, rel=0.05)
    assert got["running"] == pytest.approx(ENGINE_RUNNING, rel=0.10)


def test_the_speedup_counts_the_docs_state_are_the_per_point_tables():
    """docs/validation.md's "Before and after issue 20" bullet and README.md state how many speed-ups are within 10%
    with the sourced defaults as the per-point tables give it (the bullet had stopped at an earlier regeneration's 30
    while the later section and README.md said 31); test_the_docs_tables_are_the_studys_numbers ties the tables to
    the study."""
    root = Path(__file__).resolve().parents[1]
    doc, readme = (root / "docs" / "validation.md").read_text(), (root / "README.md").read_text()
    errors = [float(c.strip().rstrip("%")) for line in doc.splitlines() if re.match(r"\| `[^`]+` defaults \|", line)
              for c in line.split("|")[2:-1]]
    within = sum(abs(e) <= 10.0 for e in errors)
    assert (len(errors), within) == (32, 31)
    assert f"after the GEMM tiles without whole waves (2026-12-06, below; the current tables), {within}, " in doc
    assert f"speed-ups within 10% at {within} of {len(errors)} points" in readme
