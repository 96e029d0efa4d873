"""The engine-variant schedulers' compiled pieces (issue 25): each twin equals its numpy form bit for bit, and the
budget and allocation equal the readable formulas they replace (a sort of every candidate, a global argmax, the
top-k by stable rank).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim import twins
from specsim.policies.dspark import lengths_from_top, ranked_candidates, top_lengths
from specsim.policies.engine_kernels import (best_prefix, candidate_stats, every_gain, live_beyond_floor, match_rows,
                                             stale_rows)


def forms(fn):
    """The numpy form of a twin, and its compiled form when numba runs."""
    return [fn.numpy_form] + ([twins.compiled_twin(fn)] if twins.compiled() else [])


def test_match_rows_by_hand():
    old = np.array([5, 7, 9, 7], dtype=np.int64)            # id 7 twice: its last row (3) counts, as a dict's
    ids = np.array([7, 4, 9, 5, -2], dtype=np.int64)
    for fn in forms(match_rows):
        assert fn(old, ids).tolist() == [3, -1, 2, 0, -1]
        assert fn(old[:0], ids).tolist() == [-1] * 5
        assert fn(old, ids[:0]).tolist() == []


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_old=st.integers(0, 300), n=st.integers(0, 300), big=st.booleans())
def test_match_rows_twins_agree(seed, n_old, n, big):
    rng = np.random.default_rng(seed)
    scale = 2**40 if big else 1                             # ids far apart: the hash still finds them
    old = rng.integers(-50, 400, n_old).astype(np.int64) * scale
    ids = rng.integers(-60, 420, n).astype(np.int64) * scale
    want = np.array([max((i for i, x in enumerate(old) if x == rid), default=-1) for rid in ids], dtype=np.int64)
    for fn in forms(match_rows):
        np.testing.assert_array_equal(fn(old, ids), want)


def test_stale_rows_by_hand():
    conf = np.array([[0.9, 0.5, 0.4], [0.8, 0.5, 1.0]])
    rows = np.array([1, -1, 0], dtype=np.int64)
    for fn in forms(stale_rows):
        np.testing.assert_array_equal(fn(conf, rows, 3), [[0.8, 0.4, 0.4], [1, 1, 1], [0.9, 0.45, 0.9 * 0.5 * 0.4]])
        np.testing.assert_array_equal(fn(conf, rows, 4)[:, 3], [0.0, 1.0, 0.0])     # a draft the old step lacked
        np.testing.assert_array_equal(fn(conf, rows, 2), [[0.8, 0.4], [1, 1], [0.9, 0.45]])


def test_best_prefix_is_the_first_global_maximum():
    a_asc = np.array([0.1, 0.45, 0.5, 0.9])
    # tau = 2, 2.9, 3.4, 3.85, 3.95 over costs 10, 10, 20, 20, 20 ms: Theta 200, 290, 170, 192.5, 197.5 -> n = 1
    table = np.array([0.0, 0.0, 0.01, 0.01, 0.02, 0.02, 0.02])
    for fn in forms(best_prefix):
        assert fn(a_asc, 4, 2.0, table, 2, 0.0) == 1
        assert fn(a_asc, 4, 2.0, table[2:], 0, 0.0) == 1            # the costs themselves
        assert fn(a_asc, 4, 2.0, table, 2, 1.0) == 4                # a large constant: every token pays
        assert fn(a_asc, 0, 2.0, table, 2, 0.0) == 0
        assert fn(np.array([1.0, 1.0]), 2, 0.0, np.full(9, 0.5), 5, 0.0) == 2   # the table's last entry beyond it


def test_every_gain_proves_a_rising_search_with_room_for_the_float_error():
    # candidates 0.5, 0.4 (and -1: not one) from tau = 2 on costs rising by at most 10%: admitting a after S
    # raises Theta iff a > (2 + S) * rise; (2 + 0.9) * 0.1 = 0.29 < 0.4: proven, and the search's argmax is the last
    values = np.array([[0.5, -1.0], [0.4, -1.0]])
    cost = np.array([1.0, 1.1, 1.2])
    for fn in forms(every_gain):
        assert fn(values, 2.0, 0.1) and not fn(values, 2.0, 0.2) and not fn(values, 2.0, np.inf)
        assert fn(values[:, 1:], 2.0, 5.0)                          # no candidate: nothing to disprove
    assert best_prefix(np.array([-1.0, -1.0, 0.4, 0.5]), 2, 2.0, cost, 0, 0.0) == 2


def test_the_proof_piece_by_piece_holds_on_a_steep_line_where_the_single_bound_fails():
    """512 requests, 15 candidates each in [0.6, 1): tau from 1,000, a cost line 20 ms + 4 us per token from B =
    1,024. The single bound (the largest relative rise, at the smallest cost, times the whole sum) cannot prove
    that Theta rises; piece by piece (a piece's own rise, the sum of at most its last n candidates) it can, and
    the global search agrees: every candidate pays."""
    from specsim.policies.dspark import rise_bound
    from specsim.policies.engine_kernels import candidate_stats, every_gain_by_range, piece_factors, range_stats

    rng = np.random.default_rng(0)
    values = rng.uniform(0.6, 1.0, (512, 15))
    count, first, offset = values.size, 1024, 1000.0
    table = 0.02 + 4e-6 * np.arange(first + count + 1)
    seg = table[first:]
    stats = candidate_stats(values)
    assert stats == (values.min(), values.max(), pytest.approx(values.sum(), rel=1e-12))
    assert not every_gain(values, offset, rise_bound((float(np.diff(seg).max()), seg.min(), seg.max()), 0.0))
    pieces = range_stats(seg)
    assert every_gain_by_range(stats, offset, pieces[0], piece_factors(pieces, 0.0))
    assert best_prefix(np.sort(values, axis=None), count, offset, table, first, 0.0) == count
    flat_then_cliff = seg.copy()
    flat_then_cliff[count // 2:] += 0.05                         # a cliff: Theta falls there, no proof may pass
    cliff = range_stats(flat_then_cliff)
    assert not every_gain_by_range(stats, offset, cliff[0], piece_factors(cliff, 0.0))


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), R=st.integers(1, 40), G=st.integers(1, 8), steep=st.floats(0.0, 0.05),
       offset=st.floats(0.0, 200.0), pieces=st.integers(1, 20))
def test_the_proof_piece_by_piece_never_claims_a_budget_the_search_does_not_give(seed, R, G, steep, offset, pieces):
    """Property: whenever the proof piece by piece holds, the global search's first maximum is every candidate
    (random candidates, costs rising by random steps, any number of pieces)."""
    from specsim.policies.engine_kernels import candidate_stats, every_gain_by_range, piece_factors, range_stats

    rng = np.random.default_rng(seed)
    values = np.where(rng.random((R, G)) < 0.9, rng.random((R, G)), -1.0)
    count = int((values >= 0).sum())
    cost = 0.01 + np.concatenate([[0.0], np.cumsum(rng.random(count) * steep * 1e-3)])
    got = range_stats(cost, pieces)
    if every_gain_by_range(candidate_stats(values), offset, got[0], piece_factors(got, 0.0)):
        assert best_prefix(np.sort(values, axis=None), count, offset, cost, 0, 0.0) == count
    for fn in forms(candidate_stats):
        assert fn(values) == candidate_stats.numpy_form(values)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), R=st.integers(1, 60), G=st.integers(1, 10), floor=st.integers(0, 3),
       eps=st.sampled_from([0.0, 0.3]), ties=st.booleans())
def test_budget_and_allocation_equal_the_formulas(seed, R, G, floor, eps, ties):
    rng = np.random.default_rng(seed)
    conf = rng.random((R, G))
    if ties:
        conf = np.round(conf, 1)
    survival = conf.cumprod(axis=1)
    floor = min(floor, G)
    outs = [fn(survival, floor, eps) for fn in forms(live_beyond_floor)]
    want_live = np.where(survival[:, floor:] >= eps, survival[:, floor:], -1.0)
    for live, count in outs:
        np.testing.assert_array_equal(live, want_live)
        assert count == (want_live >= 0).sum()
    for ratio in (0.0, 1e-4, 1e-2):
        assert len({fn(want_live, float(R), ratio) for fn in forms(every_gain)}) == 1
    scores = np.sort(survival.ravel())[::-1]                        # the budget as the schedulers read it
    cost = 0.01 + 0.002 * rng.random(R * G + 1).cumsum() * rng.integers(0, 2)
    want = int(np.argmax((R + np.concatenate([[0.0], np.cumsum(scores)])) / cost))
    for fn in forms(best_prefix):
        assert fn(np.sort(survival, axis=None), R * G, float(R), cost, 0, 0.0) == want
    r_sorted = ranked_candidates(survival)[1]
    for k in {0, 1, R * G // 2, R * G - 1, R * G}:
        np.testing.assert_array_equal(top_lengths(survival, k), lengths_from_top(k, r_sorted, R))


@pytest.mark.parametrize("name", ["vllm-adaptive", "trtllm-confidence"])
def test_r512_gamma16_decisions_admit_by_live_rank(name):
    # the benchmark's size (benchmarks/side_by_side_driver.py): the allocation is the stable top-k of the live
    # survivals beyond the floor
    from helpers import make_view
    from specsim.policies import make_policy

    R, G = 512, 16
    conf = np.random.default_rng(3).uniform(0.9, 1.0, (R, G)).round(3)
    view = make_view(conf, 1.0 / (0.02 + 1e-7 * np.arange(1, R * (G + 1) + 2)))
    policy = make_policy(name, cost_table="exact")
    k = policy.capacity(view, view.request_ids, R)
    assert 0 < k <= R * G
    got = policy(make_view(conf, 1.0 / view.profile.step_time_s, capacity=k))
    floor = 1 if name == "trtllm-confidence" else 0
    want = floor + lengths_from_top(k, ranked_candidates(conf.cumprod(axis=1)[:, floor:])[1], R)
    np.testing.assert_array_equal(got, want)
