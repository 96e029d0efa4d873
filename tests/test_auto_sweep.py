"""sweep --concurrency auto / --rate-scales auto (issue 23): the load range is found per policy so that every
requested tier is bracketed, resumably."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.scenario import load_scenario
from specsim.sweep import SweepSpec, load_records, results_frame, seed_spread
from specsim.sweep.auto import auto_sweep, bracket_status
from specsim.workload import synth_trace

_register()
BUNDLED = Path(__file__).resolve().parents[1] / "traces" / "prod.jsonl"


def test_bracket_status():
    assert bracket_status(np.array([300.0, 120.0, 40.0]), 80) == "bracketed"
    assert bracket_status(np.array([300.0, 120.0]), 80) == "unbracketed"
    assert bracket_status(np.array([70.0, 30.0]), 80) == "infeasible"
    assert bracket_status(np.array([80.0]), 80) == "bracketed"          # equal counts on both sides


def _tps_by_load(out: Path, policy: str) -> np.ndarray:
    df = results_frame(load_records(out))
    spread = seed_spread(df[df.policy == policy])
    return spread.sort_values("load").mean_tps_per_user_mean.to_numpy()


def test_auto_concurrency_brackets_every_tier_for_every_policy_on_the_bundled_trace(tmp_path):
    out, tiers = tmp_path / "auto", [80.0, 150.0]
    args = ["sweep", "--trace", str(BUNDLED), "--out", str(out), "--policies", "mtp1,dspark", "--concurrency",
            "auto", "--tiers", "80,150", "--num-requests", "32", "--requests-per-user", "8", "--executor", "serial",
            "--quiet"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    auto = json.loads((out / "auto.json").read_text())
    n_points = len(list((out / "points").glob("*.json")))
    assert auto["runs"] == n_points and f"{n_points} runs ({n_points} computed, 0 already done)" in r.output
    for policy in ("mtp1", "dspark"):
        tps = _tps_by_load(out, policy)                            # checked from the stored records themselves
        for tier in tiers:
            assert tps.max() >= tier >= tps.min(), (policy, tier, tps)
            assert auto["brackets"][policy][f"{tier:g}"] == "bracketed"
        assert auto["loads"][policy][0] == 1.0                      # concurrency 1, the lightest load
    # resumable: the same command replays the search from the records and computes nothing
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert f"{n_points} runs (0 computed, {n_points} already done)" in again.output
    assert json.loads((out / "auto.json").read_text())["loads"] == auto["loads"]


def test_auto_rate_scales_go_down_for_a_tier_the_trace_rate_is_too_slow_for(tmp_path):
    tr = synth_trace(60, rate=40.0, seed=1, output_len=128, prompt_len=256)
    events = []
    res = auto_sweep(SweepSpec(policies=("static",), rate_scales=(1.0,)), "open", [400.0], load_scenario(), tr,
                     tmp_path / "o", executor="serial", progress=events.append)
    assert res.brackets["static"][400.0] == "bracketed"
    # the progress counts the whole search, not its last run: it never goes back and ends at every run done
    done = [ev.done for ev in events]
    assert done == sorted(done) and events[-1].done == events[-1].total == res.runs > 1
    assert min(res.loads["static"]) < 1.0                            # halved: scale 1 was too slow for the tier
    assert res.runs == len(res.ids) == len(res.loads["static"])


def test_auto_needs_one_load_axis(tmp_path):
    r = CliRunner().invoke(app, ["sweep", "--trace", str(BUNDLED), "--out", str(tmp_path), "--concurrency", "auto",
                                 "--rate-scales", "1,2"])
    assert r.exit_code != 0 and "auto for one load axis" in str(r.exception)


def test_auto_concurrency_stops_where_the_trace_allows_no_closed_loop_window(tmp_path):
    """A fresh user's 512-line trace: the search spent a round on 256 users, where a closed-loop window needs more
    than 512 requests, and stopped on "a point failed". With 40 requests it stops at 16 users (at most 19), for
    the trace's reason, and nothing fails."""
    tr = synth_trace(40, rate=1.0, seed=2, output_len=64, prompt_len=128)
    res = auto_sweep(SweepSpec(policies=("none",), concurrency=(1,), requests_per_user=8), "closed", [1.0],
                     load_scenario(), tr, tmp_path / "c", executor="serial")
    assert max(res.loads["none"]) == 16.0 and res.failed == []
    assert res.stopped["none"] == ["the trace's 40 requests (a closed-loop window needs more than twice the users: "
                                   "at most 19 users)"]


def test_auto_concurrency_tries_a_load_between_its_last_success_and_a_window_failure(tmp_path):
    """A fresh user's 300-request trace: mtp1 ran 32 users and found no closed-loop window at 64; the search
    stopped on "a point failed" without trying between. It now tries their geometric midpoint (45) and says the
    failure was the trace's window."""
    from specsim.workload import load_trace

    tr = load_trace(BUNDLED, max_requests=300)
    res = auto_sweep(SweepSpec(policies=("mtp1",), concurrency=(1,), requests_per_user=8), "closed", [50.0, 100.0],
                     load_scenario(), tr, tmp_path / "w", executor="serial")
    loads = res.loads["mtp1"]
    assert 45.0 in loads and max(loads) == 64.0 and len(res.failed) == 1
    assert res.stopped["mtp1"] == ["a point failed at load 64 (the trace too short for its closed-loop window)"]


def test_a_saturated_search_says_whether_throughput_fell_or_stayed_flat():
    """A fresh user's search stopped with "saturated at load 512 (throughput +<2% over two doublings)" where
    throughput fell from 3,291 to 2,952 tok/s/GPU: the reason now says what happened, with the figures."""
    import pandas as pd

    from specsim.sweep.auto import _saturation_text

    fell = pd.DataFrame({"load": [64.0, 128.0, 256.0, 512.0],
                         "output_throughput_per_gpu_mean": [3090.0, 3291.5, 3228.6, 2951.9]})
    assert _saturation_text({"none": fell}, 512.0, "closed") == (
        "saturated at load 512: throughput fell over the last two doublings, 3,292 -> 3,229 -> 2,952 tok/s/GPU at "
        "128, 256, 512 users (more load only queues)")
    flat = pd.DataFrame({"load": [2.0, 4.0, 8.0], "output_throughput_per_gpu_mean": [1000.0, 1010.0, 1015.0]})
    down = pd.DataFrame({"load": [2.0, 4.0, 8.0], "output_throughput_per_gpu_mean": [1000.0, 1015.0, 990.0]})
    assert _saturation_text({"static gamma=3": flat, "static gamma=5": down}, 8.0, "open") == (
        "saturated at load 8: static gamma=3: throughput stayed flat (under +2% a doubling) over the last two "
        "doublings, 1,000 -> 1,010 -> 1,015 tok/s/GPU at 2, 4, 8 x the trace's rate; static gamma=5: throughput "
        "fell over the last two doublings, 1,000 -> 1,015 -> 990 tok/s/GPU at 2, 4, 8 x the trace's rate (more "
        "load only queues)")


def test_a_tier_bracketed_by_a_thrashing_point_says_so(tmp_path):
    """A fresh user's search chose 91 users for dspark-async, a point that thrashed, and said only "tier 100
    bracketed": the printout names the loads that bracket each tier and warns where one of them thrashes."""
    from specsim.sweep.auto import bracket_loads
    from specsim.workload import save_trace

    assert bracket_loads(np.array([1.0, 2.0, 4.0]), np.array([300.0, 120.0, 40.0]), 80.0) == (2.0, 4.0)
    assert bracket_loads(np.array([1.0, 2.0, 4.0]), np.array([300.0, 120.0, 40.0]), 120.0) == (2.0,)
    assert bracket_loads(np.array([1.0, 2.0]), np.array([300.0, 120.0]), 80.0) == ()
    trace = tmp_path / "t.jsonl"
    save_trace(synth_trace(400, rate=1.0, seed=2, output_len=256, prompt_len=512), trace)
    out = tmp_path / "kv"                                # a KV cache of 12,000 tokens: 23 users and more thrash
    r = CliRunner().invoke(app, ["sweep", "--trace", str(trace), "--out", str(out), "--policies", "none",
                                 "--concurrency", "auto", "--tiers", "40,100", "--requests-per-user", "6",
                                 "--set", "cluster.kv_capacity_tokens=12000", "--executor", "serial", "--quiet"],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "none: tier 40 bracketed by loads 45 and 64 (saturated above it" in text
    assert "tier 100 bracketed by loads 16 and 23" in text
    assert ("warning: tier 100 is bracketed by load 23 (thrashing and prefill-bound): the KV cache and the prefill "
            "pool limit it there, so its figures measure those limits, not the policy, and the tier's answer may "
            "change once they are lifted") in text
    df = results_frame(load_records(out))
    at = df.set_index("load")
    assert at.loc[23.0, "recomputed_tokens"] > 0.25 * at.loc[23.0, "total_output_tokens"]      # it does thrash
    assert at.loc[16.0, "recomputed_tokens"] < 0.25 * at.loc[16.0, "total_output_tokens"]
    assert json.loads((out / "auto.json").read_text())["flagged"]["none"]["100"] == {
        "23": ["thrashing", "prefill-bound"]}
