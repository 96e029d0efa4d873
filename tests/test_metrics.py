"""Summary metrics: scopes (whole run vs the closed-loop window), latency percentiles, vLLM's request goodput,
the one tolerance rule, the inclusive horizon and the provenance of effective values.

Every value is hand-computed on flat profiles (tests/data/README.md): FLAT20 is a 20 ms step, FLATBIN a
15.625 ms = 2^-6 s step, both with prefill 2^-10 s per prompt token and no host, request or drafter cost.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import simpy

from conftest import REPO
from specsim.errors import SpecsimInputError
from specsim.analysis.metrics import (REL_TOL, add_goodput, at_least, at_most, good_requests, latency_stats, parse_goodput)
from specsim.scenario import load_scenario
from specsim.simulation import HORIZON_RULE, run_until, simulate
from specsim.workload import load_trace, synth_trace

DATA = REPO / "tests" / "data"


def flat(profile: str = "flat20ms_profile.json", *extra: str):
    """The FLAT20 (or FLATBIN) scenario: a flat step, prefill 2^-10 s per prompt token, no other cost."""
    return load_scenario(overrides=[f"profile.name={DATA / profile}", "engine.host_overhead_s=0",
                                    "engine.request_overhead_s=0", "drafter.base_fraction=0",
                                    "drafter.per_draft_fraction=0", "prefill.time_per_token_s=0.0009765625",
                                    *extra])


@pytest.fixture(scope="module")
def tail():
    """closed_loop_tail.jsonl, one user, FLAT20: requests of 5, 50 and 500 tokens one after another."""
    return simulate(load_trace(DATA / "closed_loop_tail.jsonl"), "none", flat(), concurrency=1, seed=0)


# --------------------------------------------------------------------------------------------- scopes
def test_closed_loop_whole_run_figures_agree(tail):
    # each request: prefill 64 x 2^-10 = 62.5 ms, then (n - 1) steps of 20 ms -> e2el 142.5, 1042.5, 10042.5 ms
    s = tail.summary
    assert s["completed"] == 3 and s["measured_requests"] == 3
    assert s["duration_s"] == pytest.approx(11.2275, abs=1e-9)
    assert s["total_output_tokens"] == 555
    assert s["output_throughput"] == pytest.approx(555 / 11.2275, rel=1e-9)
    assert round(s["output_throughput"], 2) == 49.43
    assert s["output_throughput"] == pytest.approx(s["total_output_tokens"] / s["duration_s"], rel=1e-12)
    assert s["request_throughput"] == pytest.approx(3 / 11.2275, rel=1e-9)


def test_closed_loop_window_block(tail):
    w = tail.summary["window"]
    assert w["start_s"] == pytest.approx(0.1425, abs=1e-9) and w["end_s"] == pytest.approx(1.185, abs=1e-9)
    assert w["duration_s"] == pytest.approx(1.0425, abs=1e-9)
    assert w["output_tokens"] == 50 and w["requests_issued"] == 2
    assert w["output_throughput"] == pytest.approx(50 / 1.0425, rel=1e-9)
    assert round(w["output_throughput"], 2) == 47.96
    # the per-request figures of the window cover the requests that complete inside it: mid (done at 1.185 s, the
    # window's end); long, issued at the end, runs in the drain and is not counted
    assert w["measured_requests"] == 1
    assert w["mean_e2el_ms"] == pytest.approx(1042.5, rel=1e-9)
    # the load block keeps the window's ends
    assert tail.summary["load"]["window_start_s"] == w["start_s"]


def test_the_window_tpot_is_the_steady_states_not_the_drains():
    """Without speculation each decoding request takes one token per step, so the window's mean TPOT is its mean
    decode step. Requests issued late in the window finish in the drain, where fewer users share cheaper steps;
    counted, they pulled the mean TPOT 7% below the steady state's step here (64 users of a B200 whose step
    grows with the batch, outputs spread 2..400 tokens); the window counts the requests that complete inside it."""
    trace = synth_trace(64 * 6, 1.0, seed=0, prompt_len=64, output_len="maxent:120:400")
    res = simulate(trace, "none", load_scenario(REPO / "specsim" / "scenarios" / "b200-qwen3.8-27b-vllm.toml"),
                   concurrency=64, seed=0)
    w, st = res.summary["window"], res.steps
    end = st.start_s + st.duration_s
    step_ms = 1e3 * st.duration_s[(end > w["start_s"]) & (end <= w["end_s"]) & (st.num_decode > 0)].mean()
    assert w["mean_tpot_ms"] == pytest.approx(step_ms, rel=0.03)
    assert (res.requests.done_s > w["end_s"]).sum() >= 32          # the drain's requests exist, and are not counted


def test_open_loop_has_no_window_and_agrees():
    res = simulate(load_trace(DATA / "tier_boundary.jsonl"), "none", flat(), seed=0)
    s = res.summary
    assert "window" not in s
    # q2 arrives at 200 s and ends 62.5 ms + 50 x 20 ms later: 201.0625 s, 153 tokens
    assert s["duration_s"] == pytest.approx(201.0625, abs=1e-9) and s["total_output_tokens"] == 153
    assert s["output_throughput"] == pytest.approx(153 / 201.0625, rel=1e-9)


# --------------------------------------------------------------------------------------------- percentiles
def test_latency_stats_hand_computed():
    st = latency_stats("e2el", np.array([0.1425, 1.0425, 10.0425]))
    # numpy's linear rule: p90 at index 1.8 = 1042.5 + 0.8 x 9000; p99 at 1.98; p99.9 at 1.998
    assert st["mean_e2el_ms"] == pytest.approx(11227.5 / 3)
    assert st["median_e2el_ms"] == pytest.approx(1042.5) and st["p50_e2el_ms"] == pytest.approx(1042.5)
    assert st["p90_e2el_ms"] == pytest.approx(8242.5)
    assert st["p99_e2el_ms"] == pytest.approx(9862.5)
    assert st["p99.9_e2el_ms"] == pytest.approx(10024.5)
    assert st["std_e2el_ms"] == pytest.approx(np.std([142.5, 1042.5, 10042.5]))
    assert all(v is None for v in latency_stats("ttft", np.zeros(0)).values())


def test_summary_percentiles_for_every_latency(tail):
    s = tail.summary
    for name in ("ttft", "tpot", "itl", "e2el"):
        for p in ("p50", "p90", "p99", "p99.9"):
            assert f"{p}_{name}_ms" in s and f"{p}_{name}_ms" in s["window"]
    assert s["p90_e2el_ms"] == pytest.approx(8242.5, rel=1e-9)
    assert s["p99.9_ttft_ms"] == pytest.approx(62.5, rel=1e-9)
    assert s["p99_tpot_ms"] == pytest.approx(20.0, rel=1e-9) and s["p50_itl_ms"] == pytest.approx(20.0, rel=1e-9)


# --------------------------------------------------------------------------------------------- goodput
def test_parse_goodput():
    assert parse_goodput(["ttft:200 tpot:50", "e2el:3000"]) == {"ttft": 200.0, "tpot": 50.0, "e2el": 3000.0}
    assert parse_goodput(["TTFT:1.5,tpot:2"]) == {"ttft": 1.5, "tpot": 2.0}
    assert parse_goodput([]) == {}
    for bad in (["ttft"], ["itl:5"], ["ttft:-1"], ["ttft:nan"], ["ttft:x"], ["ttft:1 ttft:2"]):
        with pytest.raises(SpecsimInputError, match="goodput"):
            parse_goodput(bad)


def test_good_requests_vllm_rule():
    # a one-token request's TPOT counts as 0 (vLLM), so it meets any TPOT limit
    rq = pd.DataFrame({"ttft_s": [0.1, 0.3, 0.1], "tpot_s": [0.02, 0.01, np.nan], "e2el_s": [1.0, 1.0, 0.1],
                       "output_tokens": [10, 10, 1]})
    assert good_requests(rq, {"ttft": 200}).tolist() == [True, False, True]
    assert good_requests(rq, {"tpot": 15}).tolist() == [False, True, True]
    assert good_requests(rq, {"ttft": 200, "tpot": 25, "e2el": 999}).tolist() == [False, False, True]
    # a latency equal to its limit up to rounding is good (the one tolerance rule)
    assert good_requests(rq, {"ttft": 100 * (1 - 1e-12)}).tolist() == [True, False, True]


def test_request_goodput_hand_computed(tail):
    s = add_goodput(dict(tail.summary, window=dict(tail.summary["window"])), tail.requests, {"e2el": 1042.5})
    # e2el 142.5, 1042.5 (exactly at the limit: good), 10042.5 ms
    assert s["good_requests"] == 2 and s["request_goodput"] == pytest.approx(2 / 11.2275, rel=1e-9)
    # the window's requests are mid and long: one good, over 1.0425 s
    assert s["window"]["good_requests"] == 1
    assert s["window"]["request_goodput"] == pytest.approx(1 / 1.0425, rel=1e-9)
    s2 = add_goodput(dict(tail.summary, window=dict(tail.summary["window"])), tail.requests,
                     {"ttft": 62.5, "tpot": 19.999})
    assert s2["good_requests"] == 0 and s2["goodput_slos_ms"] == {"ttft": 62.5, "tpot": 19.999}


# --------------------------------------------------------------------------------------------- tolerance
def test_one_tolerance_rule():
    assert at_least(49.99999999999478, 50) and not at_least(50 * (1 - 10 * REL_TOL), 50)
    assert at_most(50.00000000000522, 50) and not at_most(50 * (1 + 10 * REL_TOL), 50)
    assert at_least(np.array([49.99999999999478, 49.9, np.nan]), 50).tolist() == [True, False, False]
    assert not at_least(float("nan"), 1.0) and not at_most(float("nan"), 1.0)


# --------------------------------------------------------------------------------------------- horizon
def test_run_until_includes_the_horizon():
    env = simpy.Environment()
    seen = []

    def proc():
        yield env.timeout(0.1875)
        seen.append(env.now)
        yield env.timeout(0)                   # an event scheduled at T by an event at T
        seen.append(env.now)
        yield env.timeout(0.001)
        seen.append(env.now)

    env.process(proc())
    run_until(env, 0.1875)
    assert seen == [0.1875, 0.1875] and env.now == 0.1875


def test_request_finishing_at_the_horizon_completes():
    tr = load_trace(DATA / "horizon_edge.jsonl")
    sc = flat("flat_binary_profile.json")
    # prefill 128 x 2^-10 = 0.125 s, then 4 steps of 2^-6 s: done at exactly 0.1875 s
    s = simulate(tr, "none", sc, max_sim_s=0.1875, seed=0).summary
    assert s["completed"] == 1 and s["unfinished"] == 0
    assert s["mean_e2el_ms"] == 187.5
    assert s["provenance"]["effective"]["horizon_rule"] == HORIZON_RULE
    s = simulate(tr, "none", sc, max_sim_s=0.1875 - 2 ** -20, seed=0).summary
    assert s["completed"] == 0 and s["unfinished"] == 1


# --------------------------------------------------------------------------------------------- provenance
def test_provenance_records_effective_knobs_and_profile():
    tr = load_trace(DATA / "tier_boundary.jsonl")
    sc = flat("flat20ms_profile.json", "policy.knobs.threshold=0.3")
    pv = simulate(tr, "specdecpp", sc, seed=0, threshold=0.9).summary["provenance"]
    assert pv["effective"]["knobs"]["threshold"] == 0.9
    assert pv["scenario"]["policy"]["knobs"]["threshold"] == 0.9
    assert pv["effective"]["profile"] == {"source": str(DATA / "flat20ms_profile.json"), "lookup": "linear",
                                          "extrapolate": "error"}
    assert pv["scenario"]["profile"]["lookup"] == "linear"
    # without a knob given to the run, the scenario's value is the effective one
    pv = simulate(tr, "specdecpp", sc, seed=0).summary["provenance"]
    assert pv["effective"]["knobs"]["threshold"] == 0.3


def test_rate_scale_with_concurrency_refused():
    with pytest.raises(SpecsimInputError, match="open-loop arrivals only"):
        simulate(load_trace(DATA / "closed_loop_rate_scale.jsonl"), "none", flat(), concurrency=2, rate_scale=4.0)


def test_itl_gaps_are_packed_in_step_order_and_windowed():
    """Records packs per-step gap arrays every few thousand steps; the gaps come back in step order, and a
    window keeps exactly the steps that ended inside it."""
    from specsim.engine.records import _ITL_PACK_STEPS, Records

    rec = Records(1)
    n = 2 * _ITL_PACK_STEPS + 7
    for step in range(n):
        rec.itl(np.full(step % 3 + 1, float(step)), end_s=float(step))
    every = np.concatenate([np.full(step % 3 + 1, float(step)) for step in range(n)])
    np.testing.assert_array_equal(rec.itl_s(), every)
    window = (_ITL_PACK_STEPS - 2.0, _ITL_PACK_STEPS + 1.0)           # steps 4095, 4096, 4097 (across a pack)
    np.testing.assert_array_equal(rec.itl_s(window), every[(every > window[0]) & (every <= window[1])])
    rec.itl(np.array([9.5]), end_s=float(n))                           # more after a read
    assert rec.itl_s().size == every.size + 1 and rec.itl_s()[-1] == 9.5


def test_prefill_wait_by_hand_and_the_notice_when_prefill_limits_the_load():
    """Two 100-token prompts arrive together at one prefill instance at 1 ms per token: the second waits the
    first's 0.1 s prefill, so the mean wait is 50 ms; colocated prefill has no wait (None)."""
    from specsim.cli.run_cmd import prefill_wait_notice
    from specsim.workload.trace import Trace

    tr = Trace(request_id=["a", "b"], arrival_s=np.zeros(2), prompt_tokens=np.full(2, 100),
               output_tokens=np.full(2, 20), domain=["chat", "chat"], source="t")
    res = simulate(tr, "none", load_scenario(overrides=["prefill.time_per_token_s=0.001"]))
    assert res.requests.prefill_wait_s.tolist() == pytest.approx([0.0, 0.1])
    assert res.summary["mean_prefill_wait_ms"] == pytest.approx(50.0)
    colocated = simulate(tr, "none", load_scenario(overrides=['prefill.mode="colocated"']))
    assert colocated.summary["mean_prefill_wait_ms"] is None and prefill_wait_notice(colocated.summary) is None
    # the notice: waits over half the mean TTFT (and 10 ms or more) say the prefill pool limits the load
    assert prefill_wait_notice({"mean_prefill_wait_ms": 655.0, "mean_ttft_ms": 699.0, "prefill_gpus": 1}) == (
        "requests waited 655 ms on average for a prefill instance, 94% of their mean TTFT of 699 ms: the prefill "
        "pool (1 GPU), not decode, limits this load; prefill.num_instances sizes it")
    assert prefill_wait_notice({"mean_prefill_wait_ms": 300.0, "mean_ttft_ms": 700.0}) is None
    assert prefill_wait_notice({"mean_prefill_wait_ms": 8.0, "mean_ttft_ms": 9.0}) is None
    # a closed loop: the window decides (the whole run's start-up burst queued every user's first prompt)
    burst = {"mean_prefill_wait_ms": 271.0, "mean_ttft_ms": 300.0,
             "window": {"mean_prefill_wait_ms": 2.0, "mean_ttft_ms": 20.6}}
    assert prefill_wait_notice(burst) is None
    burst["window"] = {"mean_prefill_wait_ms": 400.0, "mean_ttft_ms": 450.0}
    assert prefill_wait_notice(burst).startswith("requests waited 400 ms on average")
