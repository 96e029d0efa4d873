"""The carry of the engine-variant schedulers (issue 25, specsim/policies/carry.py): the budget ``capacity`` sizes
from last step's sorted survivals equals the from-scratch budget bit for bit over runs of steps in which requests
finish and join, and its merge kernel equals a sort of the same values.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import random_confidences
from specsim import twins
from specsim.hardware.profile import StepTimeProfile
from specsim.policies import make_policy
from specsim.policies.base import SchedulingView
from specsim.policies.dspark import top_lengths
from specsim.policies.engine_kernels import (drop_and_join, every_gain, every_gain_sorted, gather_rows,
                                             lengths_at_sorted, live_beyond_floor, stale_rows, survival_live)
from specsim.policies.engines import stale_survival


def forms(fn):
    """The numpy form of a twin, and its compiled form when numba runs."""
    return [fn.numpy_form] + ([twins.compiled_twin(fn)] if twins.compiled() else [])


def test_drop_and_join_by_hand():
    a_asc = np.array([-1.0, 0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 2.0])
    for fn in forms(drop_and_join):
        out, ok = fn(a_asc, np.array([0.5, -1.0, 2.0]), 2)         # one of the two 0.5s goes; two ones join
        assert ok and out.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
        out, ok = fn(a_asc, np.array([0.5, 0.5, 0.5]), 0)           # a third 0.5 is not there
        assert not ok and out.size == 0
        out, ok = fn(a_asc, np.array([0.3]), 1)
        assert not ok and out.size == 0
        out, ok = fn(a_asc[:0], np.empty(0), 3)                     # nothing kept: only the joining ones
        assert ok and out.tolist() == [1.0, 1.0, 1.0]
        out, ok = fn(a_asc, a_asc[::-1].copy(), 0)                  # everything goes
        assert ok and out.size == 0


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), M=st.integers(0, 200), K=st.integers(0, 50), ones=st.integers(0, 20),
       ties=st.booleans(), absent=st.booleans())
def test_drop_and_join_is_the_sort_of_what_is_left(seed, M, K, ones, ties, absent):
    rng = np.random.default_rng(seed)
    values = rng.uniform(-1.0, 1.5, M)
    if ties:
        values = np.round(values, 1)
    take = rng.permutation(M)[: min(K, M)]
    gone = values[take]
    keep = np.delete(values, take)
    if absent and M:
        gone = np.append(gone, 7.0)                                # a value that is not there
    outs = [fn(np.sort(values), gone, ones) for fn in forms(drop_and_join)]
    for out, ok in outs:
        assert ok == (not (absent and M))
        if ok:
            np.testing.assert_array_equal(out, np.sort(np.concatenate([keep, np.ones(ones)])))
    np.testing.assert_array_equal(outs[0][0], outs[-1][0])


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), R=st.integers(0, 40), G=st.integers(1, 8), floor=st.integers(0, 3),
       eps=st.sampled_from([0.0, 0.3]), ties=st.booleans())
def test_sorted_pieces_equal_the_matrix_ones(seed, R, G, floor, eps, ties):
    rng = np.random.default_rng(seed)
    conf = random_confidences(rng, R, G, 2.0, ties)
    floor = min(floor, G)
    survival = conf.cumprod(axis=1)
    live, count = live_beyond_floor.numpy_form(survival, floor, eps)
    for fn in forms(survival_live):
        s, lv, c = fn(conf, floor, eps)
        np.testing.assert_array_equal(s, survival)
        np.testing.assert_array_equal(lv, live)
        assert c == count
    a_asc = np.sort(live, axis=None)
    for ratio in (0.0, 1e-4, 1e-2, 1.0, np.inf):
        for offset in (0.0, float(R), 10.0 * R):
            assert every_gain_sorted(a_asc, offset, ratio) == every_gain(live, offset, ratio)
    for n in {0, 1, count // 2, count}:
        np.testing.assert_array_equal(lengths_at_sorted(live, a_asc, n), top_lengths(live, n))


def test_gathered_rows_are_the_stale_rows():
    rng = np.random.default_rng(2)
    conf = rng.random((6, 4))
    rows = np.array([5, -1, 0, 0, 3, -1, 2], dtype=np.int64)
    for fn in forms(gather_rows):
        np.testing.assert_array_equal(fn(conf.cumprod(axis=1), rows), stale_rows(conf, rows, 4))
        assert fn(conf[:0], rows[:0]).shape == (0, 4)


def _view(conf: np.ndarray, ids: np.ndarray, profile, capacity=None) -> SchedulingView:
    R = ids.size
    z = np.zeros(R, np.int64)
    return SchedulingView(step=0, now_s=0.0, gamma=conf.shape[1], request_ids=ids,
                          domains=np.array(["chat"] * R, dtype=object), conf_raw=conf, conf=conf,
                          num_generated=z + 1, prompt_tokens=z + 10, kv_tokens=float(100 * R),
                          hist_drafts_verified=z, hist_drafts_accepted=z, last_verify_len=z - 1,
                          last_accepted=z - 1, profile=profile, capacity=capacity)


POLICIES = [("vllm-adaptive", {}), ("vllm-adaptive", {"cost_table": "exact"}), ("trtllm-confidence", {}),
            ("trtllm-confidence", {"cost_table": "exact", "min_verify_len": 2, "survival_eps": 0.3}),
            ("trtllm-confidence", {"survival_eps": 0.05})]
#: Step-time lines (seconds at B = 1 and per token): nearly flat (most drafts pay), steep (few do), between.
SLOPES = (1e-7, 4e-5, 1e-3)


@pytest.mark.parametrize("name,knobs", POLICIES)
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), slope=st.sampled_from(SLOPES), ties=st.booleans(), G=st.integers(1, 6))
def test_the_carried_budget_is_the_from_scratch_budget(name, knobs, seed, slope, ties, G):
    # a run of steps as the engine asks (capacity with the view __call__ saw one step earlier), requests
    # finishing (any of them) and joining (at the end, as admission appends them); the policy that carries
    # and one that never does (its carry dropped after every call) answer the same at every step
    rng = np.random.default_rng(seed)
    profile = StepTimeProfile(np.array([1.0, 4096.0]), np.array([0.02, 0.02 + 4095 * slope]), "linear")
    carrying, scratch = make_policy(name, gamma=G, **knobs), make_policy(name, gamma=G, **knobs)
    ids, next_id, old = np.arange(int(rng.integers(0, 30)), dtype=np.int64), 1000, None
    for _ in range(12):
        stay = rng.random(ids.size) >= rng.choice([0.0, 0.1, 0.5])             # finishes
        joins = int(rng.choice([0, 0, 1, 3]))
        ids = np.concatenate([ids[stay], np.arange(next_id, next_id + joins, dtype=np.int64)])
        next_id += joins
        if ids.size == 0:
            old = None                                     # the engine asks nothing and keeps no view
            continue
        conf = random_confidences(rng, ids.size, G, float(rng.choice([0.3, 1.0, 3.0])), ties)
        if old is not None:
            carry = carrying._carry.stale(old, ids)
            same = np.array_equal(ids, old.request_ids)
            assert carry is not None or (carrying._carry.a_asc is None and not same)   # else it is carried
            if carry is not None:
                np.testing.assert_array_equal(carry[0], stale_survival(old, ids, G))
                if carry[1] is not None:
                    np.testing.assert_array_equal(carry[1], np.sort(carrying._carry.candidates(carry[0]), axis=None))
        k = carrying.capacity(old, ids, ids.size)
        assert k == scratch.capacity(old, ids, ids.size)
        view = _view(conf, ids, profile, capacity=k)
        np.testing.assert_array_equal(carrying(view), scratch(view))
        scratch._carry.conf = None                         # never carries
        old = dataclasses.replace(view, capacity=None) if rng.random() < 0.5 else view


def test_another_view_with_the_same_values_is_not_carried():
    profile = StepTimeProfile(np.array([1.0, 4096.0]), np.array([0.02, 0.06]), "linear")
    policy = make_policy("vllm-adaptive", gamma=3)
    conf, ids = np.full((4, 3), 0.5), np.arange(4, dtype=np.int64)
    view = _view(conf, ids, profile, capacity=5)
    policy(view)
    assert policy._carry.stale(view, ids) is not None
    assert policy._carry.stale(dataclasses.replace(view, step=1), ids) is not None    # the same arrays
    assert policy._carry.stale(_view(conf.copy(), ids, profile), ids) is None         # equal, not the same
    assert policy._carry.stale(_view(conf, ids.copy(), profile), ids) is None
    assert policy._carry.stale(view, np.array([0, 0, 1, 2], dtype=np.int64)) is None   # a row for two requests
    assert policy._carry.stale(view, np.array([0, 1, 2], dtype=np.int64)) is not None  # one finished: merged


@pytest.mark.parametrize("name", ["vllm-adaptive", "trtllm-confidence"])
def test_a_finish_and_a_join_are_merged_into_the_sorted_candidates(name):
    profile = StepTimeProfile(np.array([1.0, 4096.0]), np.array([0.02, 0.06]), "linear")
    policy = make_policy(name, gamma=3, cost_table="exact")
    conf = np.array([[0.9, 0.8, 0.5], [0.7, 0.7, 0.2], [0.95, 0.3, 0.3], [0.6, 0.6, 0.6]])
    view = _view(conf, np.array([10, 11, 12, 13], dtype=np.int64), profile, capacity=3)
    policy(view)                                                    # 3 of the candidates: one sort
    assert policy._carry.a_asc is not None
    ids = np.array([10, 12, 13, 14], dtype=np.int64)                # request 11 finished, 14 joined
    stale, a_asc = policy._carry.stale(view, ids)
    want = stale_survival(view, ids, 3)
    np.testing.assert_array_equal(stale, want)
    np.testing.assert_array_equal(a_asc, np.sort(policy._carry.candidates(want), axis=None))
    assert (a_asc == 1.0).sum() == (3 if name == "vllm-adaptive" else 2)    # the joining row's ones (floor 1)
    assert policy.capacity(view, ids, 4) == make_policy(name, gamma=3, cost_table="exact").capacity(view, ids, 4)


@pytest.mark.parametrize("name", ["vllm-adaptive", "trtllm-confidence"])
def test_the_table_error_read_later_is_the_per_step_sum(name):
    # the record keeps (B, KV read, R) per step and the table, profile and drafter once per change; read, it is
    # the sum the per-step record made: |table(B) - charged(B)| / charged(B) in step order
    from specsim.hardware.drafter import DrafterCost

    rng = np.random.default_rng(5)
    profiles = [StepTimeProfile(np.array([1.0, 4096.0]), np.array([0.02, 0.02 + 4095 * s]), "linear")
                for s in (1e-5, 3e-5)]
    drafter = DrafterCost("parallel", 0.14, 0.002)                  # vLLM's table adds the drafter's seconds
    policy = make_policy(name, gamma=4)
    want_sum, want_n = 0.0, 0
    for step in range(30):
        profile = profiles[(step // 7) % 2]                          # the context changes every 7 steps
        R = int(rng.integers(1, 20))
        view = dataclasses.replace(_view(random_confidences(rng, R, 4, 1.0, False),
                                         np.arange(R, dtype=np.int64), profile, capacity=int(rng.integers(0, 4 * R))),
                                   drafter_cost=drafter)
        lengths = policy(view)
        table = policy._table(view)
        b = int(R + lengths.sum())
        exact = profile.step_time(b, view.kv_tokens, R)
        if table.draft_s_per_request is not None:
            exact += view.draft_time_s(view.gamma)
        want_sum += abs(table.step_time(b, 0.0, R) - exact) / exact
        want_n += 1
        if step in (9, 29):                                           # read midway and at the end
            assert policy.table_error.num_steps == want_n and policy.table_error.sum_rel == want_sum
