"""The schedulers real engines ship (vllm-adaptive, trtllm-confidence, vllm-dsd, trtllm-draft-len-schedule), the
scheduler's own cost table, and the capacity hook's view age: hand-computed steps."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import make_trace, make_view
from specsim.errors import SpecsimInputError
from specsim.hardware.profile import StepTimeProfile
from specsim.policies import make_policy
from specsim.policies.base import PolicyBase, policy_hooks
from specsim.policies.cost_table import (build_table, profiled_points, trtllm_verify_table, vllm_verify_table)
from specsim.policies.engines import NO_OLD_VIEW, TrtllmConfidence, VllmAdaptive, stale_survival
from specsim.policies.schedules import TrtllmDraftLenSchedule, VllmDsd, parse_dsd
from specsim.simulation import simulate

# step time 10 ms up to B = 3, 20 ms from B = 4 (SPS 100 then 50), B = 1..8
SPS = [100, 100, 100, 50, 50, 50, 50, 50]


# --------------------------------------------------------------------------------------------- cost tables
def test_vllm_table_is_monotone_staircase_then_linear_past_the_capture_limit():
    xs, ys = np.array([1, 2, 4, 8]), np.array([1.0, 1.0, 3.0, 5.0])
    # all four sizes captured: B pads up to the next profiled size (3 -> 4, 5..8 -> 8), linear past 8
    t = vllm_verify_table(xs, ys, 10, capture_limit=8)
    assert t[1:11].tolist() == [1, 1, 3, 3, 5, 5, 5, 5, 5.5, 6.0]            # slope (5 - 3) / (8 - 4) beyond
    # capture limit 2: above it, linear between the profiled points past the limit (4 and 8), no padding
    t = vllm_verify_table(xs, ys, 8, capture_limit=2)
    assert t[1:9].tolist() == [1, 1, 3, 3, 3.5, 4.0, 4.5, 5.0]
    # a dip in the profile is forced away (running maximum): 2 ms at 8 reads 3 ms
    assert vllm_verify_table(xs, np.array([1.0, 1.0, 3.0, 2.0]), 8, 8)[8] == 3.0


def test_trtllm_table_interpolates_and_clamps():
    xs, ys = np.array([1, 2, 4, 8]), np.array([1.0, 1.0, 3.0, 2.0])
    t = trtllm_verify_table(xs, ys, 10)
    assert t[3] == 2.0 and t[6] == 2.5 and t[10] == 2.0                        # no monotone forcing, flat past 8


def test_profiling_run_reads_the_profiling_context():
    prof = StepTimeProfile(np.array([1, 4, 8]), np.array([0.01, 0.02, 0.03]), kv_read_s_per_token=1e-7,
                           per_request_s=1e-4)
    xs, ys = profiled_points(prof, gamma=1, profile_context=8192)
    # B = 4 with gamma 1: 2 requests of 2 tokens, 2 x 8192 context tokens read, 2 per-request terms
    assert ys[1] == pytest.approx(0.02 + 2 * 8192 * 1e-7 + 2 * 1e-4)
    table = build_table("vllm", prof, gamma=1, profile_context=0)
    assert table.step_time(4, 1e9, 2) == pytest.approx(0.02 + 2 * 1e-4)      # the step's KV read is ignored
    assert build_table("exact", prof, 1) is None
    with pytest.raises(ValueError, match="cost_table"):
        build_table("sglang", prof, 1)


# --------------------------------------------------------------------------------------------- vllm-adaptive
def test_stale_survival_rows_follow_the_running_ids_and_new_requests_read_one():
    old = make_view([[0.9, 0.5], [0.8, 0.5]], SPS, ids=[5, 7])
    s = stale_survival(old, np.array([7, 9]), 2)
    np.testing.assert_allclose(s, [[0.8, 0.4], [1.0, 1.0]])
    assert stale_survival(None, np.array([1]), 3).tolist() == [[1.0, 1.0, 1.0]]


def test_vllm_adaptive_budget_from_the_old_view_allocation_by_live_rank():
    pol = VllmAdaptive(cost_table="exact")
    # old survivals [0.9, 0.45] and [0.5, 0.1]: sorted 0.9, 0.5, 0.45, 0.1
    old = make_view([[0.9, 0.5], [0.5, 0.2]], SPS, ids=[0, 1])
    # tau(n) = 2, 2.9, 3.4, 3.85, 3.95 over step times at B = 2..6: 10, 10, 20, 20, 20 ms
    # Theta = 200, 290, 170, 192.5, 197.5 tok/s: n* = 1 (a global argmax: no early stop, no hull)
    k = pol.capacity(old, np.array([0, 1]), 2)
    assert k == 1
    # live confidences: request 1's first draft now ranks first (0.8 > 0.2)
    out = pol(make_view([[0.2, 0.9], [0.8, 0.9]], SPS, capacity=k))
    assert out.tolist() == [0, 1]
    # no old view (the first step): vLLM's stale rows are 1.0, so tau(n) = 2 + n: 200, 300, 200, 250, 300:
    # the first maximum n = 1
    assert pol.capacity(None, np.array([0, 1]), 2) == NO_OLD_VIEW
    assert pol(make_view([[0.2, 0.9], [0.8, 0.9]], SPS, capacity=NO_OLD_VIEW)).tolist() == [0, 1]
    assert VllmAdaptive(enable_adaptive_verification=False)(make_view([[0.2, 0.9]], SPS, capacity=0)).tolist() == [2]
    hooks = policy_hooks(pol)
    assert hooks.capacity_view_age == 1 and hooks.fits_zos


# --------------------------------------------------------------------------------------------- trtllm-confidence
def test_trtllm_confidence_floor_eps_and_global_argmax():
    pol = TrtllmConfidence(min_verify_len=1, survival_eps=0.3, cost_table="exact")
    old = make_view([[0.9, 0.5, 0.444], [0.5, 0.2, 0.5]], SPS)
    # floor: both requests verify draft 1 (survivals 0.9 + 0.5); beyond it only 0.45 >= eps (0.2, 0.1, 0.05 are
    # not); the floor batch is R * 2 = 4 tokens: tau = 3.4, 3.85 at 20, 20 ms -> 170, 192.5: n* = 1
    assert pol.capacity(old, np.array([0, 1]), 2) == 1
    live = make_view([[0.9, 0.9, 0.9], [0.9, 0.2, 0.9]], SPS, capacity=1)
    # live survivals beyond the floor: 0.81, 0.729 | 0.18, 0.162 (the latter two below eps): request 0 gets it
    assert pol(live).tolist() == [2, 1]
    # without a table the planner refuses to trim: every draft is verified
    assert TrtllmConfidence(cost_table="none")(live).tolist() == [3, 3]
    with pytest.raises(ValueError, match="min_verify_len"):
        TrtllmConfidence(min_verify_len=0)


# --------------------------------------------------------------------------------------------- draft-length tables
def test_vllm_dsd_ranges_gaps_and_cap():
    pol = VllmDsd([[1, 4, 5], [9, 16, 2]])
    got = [pol.proposal_length(make_view(np.full((r, 8), 0.5), [1] * 64)) for r in (3, 6, 12, 40)]
    assert got == [5, 5, 2, 2]                 # R = 6 sits in the gap: the previous range's K; past the last: 2
    assert pol(make_view(np.full((3, 3), 0.5), [1] * 64)).tolist() == [3, 3, 3]      # capped at gamma 3
    assert parse_dsd("[[1, 2, 3]]") == ((1, 2, 3),)
    for bad in ([[2, 4, 1]], [[1, 4, 1], [3, 8, 1]], [[1, 4]], "x"):
        with pytest.raises(ValueError, match="num_speculative_tokens_per_batch_size"):
            parse_dsd(bad)


def test_trtllm_draft_len_schedule_keys_are_upper_bounds():
    pol = TrtllmDraftLenSchedule({4: 4, 8: 2, 32: 1}, gamma=4)      # TensorRT-LLM's documented example
    assert [pol.drafts(r, 4) for r in (1, 4, 5, 8, 9, 32, 33)] == [4, 4, 2, 2, 1, 1, 0]
    assert TrtllmDraftLenSchedule("16:7,64:3", gamma=7).drafts(20, 7) == 3
    assert TrtllmDraftLenSchedule(None, gamma=5).schedule == {16: 5, 64: 3, 256: 1}
    with pytest.raises(ValueError, match="max_draft_len"):
        TrtllmDraftLenSchedule({4: 4, 8: 2}, gamma=7)
    with pytest.raises(SpecsimInputError, match="trtllm-draft-len-schedule"):
        make_policy("trtllm-draft-len-schedule", gamma=7, draft_len_schedule={4: 4})


# --------------------------------------------------------------------------------------------- the capacity hook
class _AgeProbe(PolicyBase):
    """Records (this step, the old view's step) at every capacity call."""

    fits_zos = True

    def __init__(self, age: int) -> None:
        self.capacity_view_age, self.name, self.seen, self.step = age, f"probe{age}", [], 0

    def capacity(self, old_view, running_ids, num_running):
        self.seen.append(None if old_view is None else old_view.step)
        return 0

    def __call__(self, view):
        return np.zeros(view.num_requests, dtype=np.int64)


@pytest.mark.parametrize("age", [1, 2])
def test_capacity_gets_the_view_as_old_as_the_policy_declares(age):
    pol = _AgeProbe(age)
    simulate(make_trace([0.0, 0.0], [16, 16], [12, 12]), pol, seed=0)
    assert pol.seen[:age] == [None] * age
    assert pol.seen[age:] == list(range(len(pol.seen) - age))           # step t reads the view of t - age
    with pytest.raises(SpecsimInputError, match="capacity_view_age"):
        policy_hooks(_AgeProbe(3))


# --------------------------------------------------------------------------------------------- runs
def test_runs_report_the_table_error_and_the_exact_table_matches_the_paper_policy():
    trace = make_trace([0.0] * 8, [64] * 8, [40 + 5 * i for i in range(8)])
    exact = simulate(trace, "dspark", seed=3)
    assert "scheduler_cost_table" not in exact.summary                   # the paper's default: the true cost
    tabled = simulate(trace, "dspark", seed=3, cost_table="vllm")
    rep = tabled.summary["scheduler_cost_table"]
    assert rep["kind"] == "vllm" and rep["profile_context_len"] == 8192 and rep["steps"] > 0
    assert 0 < rep["mean_rel_error"] < 10
    # an engine policy given the exact cost reads no table and reports none
    res = simulate(trace, "vllm-adaptive", seed=3, cost_table="exact")
    assert res.summary["completed"] == 8 and "scheduler_cost_table" not in res.summary


def test_table_knobs_are_checked_and_name_the_policy():
    for name, knobs, field in (("vllm-adaptive", {"profile_context_len": -1}, "profile_context_len"),
                               ("dspark", {"cost_table": "sglang"}, "cost_table"),
                               ("dspark-async", {"profile_context_len": 1.5}, "profile_context_len")):
        with pytest.raises(SpecsimInputError, match=field) as e:
            make_policy(name, gamma=7, **knobs)
        assert f"policy {name}" in str(e.value)
    wrapped = make_policy("dspark-async", gamma=7, cost_table="trtllm")
    hooks = policy_hooks(wrapped)
    assert hooks.name == "dspark-async" and hooks.fits_zos and hooks.capacity is not None
    assert hooks.capacity_view_age == 2                              # the wrapped policy's, kept


def test_draft_len_schedule_is_checked_against_the_runs_gamma_from_the_scenario_too():
    """TensorRT-LLM's rule (the smallest bound's length is max_draft_len, the run's gamma) held only when gamma was
    passed to simulate: with engine.gamma a researcher's {16: 3} ran at gamma 7 verifying at most 3 drafts."""
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    trace = synth_trace(20, 10.0, seed=3)
    with pytest.raises(SpecsimInputError, match=r"draft_len_schedule\[16\] = 3 must equal max_draft_len"):
        simulate(trace, "trtllm-draft-len-schedule", draft_len_schedule={16: 3})
    assert simulate(trace, "trtllm-draft-len-schedule", draft_len_schedule={16: 7}).summary["gamma"] == 7
