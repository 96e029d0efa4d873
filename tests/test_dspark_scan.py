"""DSpark's fast scan (issue 25): the head pass, the sorted pass and the threshold lengths give the definition's
verify lengths bit for bit (``greedy_lengths``' numpy form), compiled and in numpy, on short and long scans,
with exact ties at the admission threshold.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import random_confidences
from specsim import twins
from specsim.policies import dspark
from specsim.policies.dspark import (HEAD, head_scan, lengths_from_top, lower_convex_minorant, ranked_candidates,
                                     rise_bound, scan_lengths, sorted_scan, threshold_lengths)

needs_numba = pytest.mark.skipif(not twins.compiled(), reason="numba unavailable or SPECSIM_NO_NUMBA=1")


def definition(conf, base, constant, R):
    """The scan's definition on T = base + constant."""
    return dspark._greedy_lengths_numpy(conf, base + constant, R)


def ratio_of(base, constant):
    """:func:`rise_bound` of the table ``base`` (valid for any table: its largest rise over its smallest entry)."""
    rise = float(np.diff(base).max()) if base.size > 1 else 0.0
    return rise_bound((rise, float(base.min()), float(base.max())), constant)


def forms(fn):
    """The numpy form of a twin, and its compiled form when numba runs."""
    return [fn.numpy_form] + ([twins.compiled_twin(fn)] if twins.compiled() else [])


def test_threshold_lengths_by_hand():
    # survivals (R = 3, gamma = 2): rank order 0.9 (r0 j0), 0.5 (r1 j0), 0.5 (r2 j0), 0.5 (r0 j1), 0.2 (r1 j1) ...
    s = np.array([[0.9, 0.5], [0.5, 0.2], [0.5, 0.1]])
    for fn in forms(threshold_lengths):
        assert fn(s, 0, np.inf).tolist() == [0, 0, 0]
        assert fn(s, 1, 0.9).tolist() == [1, 0, 0]
        assert fn(s, 2, 0.5).tolist() == [1, 1, 0]          # a tie at 0.5: position 0 first, then request order
        assert fn(s, 3, 0.5).tolist() == [1, 1, 1]
        assert fn(s, 4, 0.5).tolist() == [2, 1, 1]          # the tie at position 1 comes last
        assert fn(s, 6, 0.1).tolist() == [2, 2, 2]
    ranks = ranked_candidates(s)[1]
    assert [lengths_from_top(n, ranks, 3).tolist() for n in (2, 4)] == [[1, 1, 0], [2, 1, 1]]


def test_head_ends_short_scans_and_hands_long_ones_to_the_sort():
    R, G = 40, 8
    conf = np.full((R, G), 0.9)
    conf[:, 0] = np.linspace(0.5, 0.99, R)
    steep = 0.01 * (1 + np.arange(R * G + 1) / 45.0)         # each token costs 2.2%: only the best 8 pay
    flat = np.full(R * G + 1, 0.01)                           # free tokens: every candidate pays
    for fn in forms(head_scan):
        lengths, survival = fn(conf, steep, 0.0, R, ratio_of(steep, 0.0))
        assert survival.size == 0 and lengths.sum() == 8
        np.testing.assert_array_equal(lengths, definition(conf, steep, 0.0, R))
        lengths, survival = fn(conf, flat, 0.0, R, np.inf)          # no bound known: the sort decides
        assert lengths.sum() == 0 and survival.shape == (R, G)
        np.testing.assert_array_equal(survival, conf.cumprod(axis=1))
        lengths, survival = fn(conf, flat, 0.0, R, ratio_of(flat, 0.0))   # flat: every draft provably pays
        assert survival.size == 0 and (lengths == G).all()
    np.testing.assert_array_equal(scan_lengths(conf, flat, 0.0, R), np.full(R, G))


def test_every_draft_pays_only_with_room_for_the_float_error():
    # R = 20 requests of one draft of survival a each on T_n = 1 + r * n: admitting the (n+1)-th raises Theta iff
    # a > (20 + n a) r / (1 + r n); the first pass takes all 20 without the sort only when a clears
    # (20 + 20 a) * (r * (1 + 1e-6) + 1e-9) (the rise bound of the line is r)
    for a, r, proven in ((0.5, 0.01, True), (0.5, 0.02, False), (1e-10, 0.0, False), (0.2, 0.0, True)):
        conf, base = np.full((20, 1), a), 1.0 + r * np.arange(21)
        for fn in forms(head_scan):
            lengths, survival = fn(conf, base, 0.0, 20, r)
            assert (survival.size == 0) == proven and lengths.sum() == (20 if proven else 0)
        assert (scan_lengths(conf, base, 0.0, 20, r) == 1).all() and (definition(conf, base, 0.0, 20) == 1).all()


@settings(max_examples=300, deadline=None)
@given(R=st.integers(1, 70), G=st.integers(1, 12), seed=st.integers(0, 2**32 - 1), power=st.floats(0.02, 1.0),
       ties=st.booleans(), cap=st.floats(0.0, 1.0), slope=st.sampled_from([0.0, 1e-7, 2e-5]), hull=st.booleans(),
       constant=st.sampled_from([0.0, 3.7e-4]))
def test_every_form_of_the_fast_scan_is_the_definition(R, G, seed, power, ties, cap, slope, hull, constant):
    rng = np.random.default_rng(seed)
    conf = random_confidences(rng, R, G, power, ties)
    n = max(1, int(cap * R * G)) + 1                       # the profile may score fewer than all candidates
    b = np.arange(R, R + n)
    base = 0.01 + slope * b + 0.001 * ((b % 64) > 56) + (1e-4 * rng.random(n) if ties else 0.0)
    if hull:
        base = lower_convex_minorant(base)
    want = definition(conf, base, constant, R)
    np.testing.assert_array_equal(scan_lengths(conf, base, constant, R), want)
    ratio = ratio_of(base + constant, 0.0) if rng.random() < 0.7 else np.inf
    np.testing.assert_array_equal(scan_lengths(conf, base, constant, R, ratio), want)
    heads = [fn(conf, base, constant, R, ratio) for fn in forms(head_scan)]
    for lengths, survival in heads:
        np.testing.assert_array_equal(lengths, heads[0][0])
        np.testing.assert_array_equal(survival, heads[0][1])
    lengths, survival = heads[0]
    if survival.size == 0:
        np.testing.assert_array_equal(lengths, want)
    else:
        for fn in forms(sorted_scan):
            np.testing.assert_array_equal(fn(survival, np.sort(survival, axis=None), base, constant, R), want)
    if twins.compiled():
        np.testing.assert_array_equal(twins.compiled_twin(dspark.greedy_lengths)(conf, base + constant, R), want)


@pytest.mark.parametrize("low,high", [(0.0, 1.0), (0.97, 1.0), (0.99999, 0.99999)])
def test_r512_gamma16_on_a_smooth_line(low, high):
    # the benchmark's regimes (benchmarks/side_by_side_driver.py): thousands of admissions, long runs of ties
    R, G = 512, 16
    conf = np.random.default_rng(0).uniform(low, high, (R, G))
    base = 0.02 + 1e-7 * np.arange(R, R + R * G + 1)
    want = definition(conf, base, 0.0, R)
    assert want.sum() > HEAD
    np.testing.assert_array_equal(scan_lengths(conf, base, 0.0, R), want)
    np.testing.assert_array_equal(scan_lengths(conf, base, 0.0, R, ratio_of(base, 0.0)), want)
    np.testing.assert_array_equal(scan_lengths(conf, base[:1000], 0.0, R), definition(conf, base[:1000], 0.0, R))


def test_the_first_test_reads_the_first_drafts_only_for_confidences_in_0_1():
    # R = 1 on T = 1, 2, 4: a candidate a opens the scan iff (1 + a) / 2 > 1, i.e. a > 1
    base = np.array([1.0, 2.0, 4.0])
    inside = np.array([[0.9, 0.5]])                        # best survival 0.9 (the first draft): no draft pays
    outside = np.array([[0.5, 3.0]])                       # survivals 0.5, 1.5: the second ranks first and pays
    for fn in forms(head_scan):
        lengths, survival = fn(inside, base, 0.0, 1, np.inf)
        assert lengths.tolist() == [0] and survival.size == 0
        np.testing.assert_array_equal(fn(outside, base, 0.0, 1, np.inf)[0], definition(outside, base, 0.0, 1))
    assert definition(outside, base, 0.0, 1).tolist() == [1]
