"""Numpy definitions and their compiled twins (specsim/twins.py chooses): equal bit for bit, and each right.

The equality tests need numba (skipped under ``SPECSIM_NO_NUMBA=1``); the checks of the definitions run
either way.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit, ndtri

from specsim.acceptance.model import build_acceptance_model, logistic
from helpers import random_confidences
from specsim import twins
from specsim.engine import draws, kernels
from specsim.engine.draws import LatentRows, normal_quantile
from specsim.policies.dspark import greedy_lengths, lower_convex_minorant
from specsim.policies.sorting import sort_values

needs_numba = pytest.mark.skipif(not twins.compiled(), reason="numba unavailable or SPECSIM_NO_NUMBA=1")


def both(fn, *args):
    """(numpy form's result, compiled twin's result) of a twin ``fn`` on copies of the same inputs."""
    copy = lambda a: a.copy() if isinstance(a, np.ndarray) else a  # noqa: E731
    return fn.numpy_form(*map(copy, args)), twins.compiled_twin(fn)(*map(copy, args))


def assert_same(a, b):
    assert type(a) is type(b) or not isinstance(a, tuple)
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    else:
        np.testing.assert_array_equal(a, b)
        assert np.asarray(a).dtype.kind == np.asarray(b).dtype.kind


# --------------------------------------------------------------------------- the shared scalar formulas

def test_as241_is_the_exact_normal_quantile():
    p = np.concatenate([np.linspace(1e-300, 1e-10, 50), np.linspace(1e-6, 1 - 1e-6, 20_001),
                        [2.0 ** -33, 1 - 2.0 ** -33, 0.5, 0.075, 0.925]])
    z = np.array([normal_quantile(x) for x in p])
    np.testing.assert_allclose(z, ndtri(p), rtol=1e-14, atol=1e-15)
    assert normal_quantile(0.5) == 0.0 and normal_quantile(0.975) == pytest.approx(1.959963984540054, abs=1e-15)


def test_logistic_is_scipys_expit_bit_for_bit():
    x = np.random.default_rng(0).normal(0.0, 6.0, 200_000)
    np.testing.assert_array_equal(expit(x), [logistic(v) for v in x])
    assert logistic(0.0) == 0.5


def test_std_normal_table_and_tails_use_as241():
    u = np.array([0.3, 0.5 + 1e-9, 1e-4, 1 - 1e-4])
    z = draws.std_normal(u)
    assert z[2] == normal_quantile(1e-4) and z[3] == normal_quantile(1 - 1e-4)      # the tails, exact
    assert abs(z[0] - ndtri(0.3)) < 3e-6 and z[0] != ndtri(0.3)                       # the table, interpolated


# ------------------------------------------------------------------------------ draws and confidences

@pytest.mark.parametrize("gamma,domain,low_ratio", [(7, "code", None), (5, "chat", 1.0), (3, "math", None)])
def test_latent_outcomes_equal_rows_then_confidences(gamma, domain, low_ratio):
    model = build_acceptance_model("dspark", gamma, domains=(domain,))
    if low_ratio is not None:
        object.__setattr__(model, "conf_low_ratio", low_ratio)
    n = 3000
    src = LatentRows(model, 11, n)
    keys, base = map(np.array, zip(*[src.request_state(i, domain) for i in range(n)]))
    anchors = (np.arange(n) * 7) % 400
    rows = src.rows(keys, anchors, base)
    ref_raw, ref_conf = model.confidences(rows[:, 0], rows[:, 1])
    ref_acc = model.accepted(rows[:, 0], rows[:, 2])
    for g in (gamma, 1):                                   # all drafts, and a shorter proposal
        conf_raw, conf, accept = src.outcomes(keys, anchors, base, g)
        np.testing.assert_array_equal(conf_raw, ref_raw[:, :g])
        np.testing.assert_array_equal(conf, ref_conf[:, :g])
        np.testing.assert_array_equal(accept, ref_acc[:, :g])
        if twins.compiled():
            assert_same(*both(draws.latent_outcomes, keys, anchors.astype(np.int64), base, src._terms, g))
    assert 0.3 < ref_acc.mean() < 0.95                   # the tails (AS 241) and the table were both exercised
    assert (np.abs(rows[:, 1]) > 2.4 * model.sigma_conf).any()


# --------------------------------------------------------------------------------- the step's passes

@pytest.mark.parametrize("whole", [True, False])
def test_emit_decode_by_its_definition(whole):
    rng = np.random.default_rng(0)
    S, G = 60, 7
    decode = np.arange(S) if whole else np.sort(rng.choice(S, 25, replace=False))
    R = decode.size
    accept = rng.random((R, G)) < 0.8
    l = rng.integers(0, G + 1, R)
    counters = [rng.integers(0, 500, S) for _ in range(4)]
    frozen = [c.copy() for c in counters]
    last_emit = rng.random(S)
    before = last_emit.copy()
    output = rng.integers(1, 520, S)
    accepted, gaps, gen, steps, ver, acc, total, finished = kernels.emit_decode(decode, l, accept, 2.5, last_emit,
                                                                                *counters, output)
    ref = np.array([next((j for j in range(l[i]) if not accept[i, j]), l[i]) for i in range(R)])
    np.testing.assert_array_equal(accepted, ref)
    assert total == ref.sum()
    np.testing.assert_array_equal(gaps, 2.5 - before[decode])
    np.testing.assert_array_equal(last_emit[decode], 2.5)
    untouched = np.setdiff1d(np.arange(S), decode)
    np.testing.assert_array_equal(last_emit[untouched], before[untouched])
    for new, old, add in zip((gen, steps, ver, acc), frozen, (ref + 1, 1, l, ref)):
        want = old.copy()
        want[decode] += add
        np.testing.assert_array_equal(new, want)
    assert finished == (gen[decode] >= output[decode]).sum() > 0
    for c, f in zip(counters, frozen):                     # the inputs (which views may hold) are not written
        np.testing.assert_array_equal(c, f)
    one = kernels.emit_decode(np.array([0]), np.array([4]), np.array([[True, True, False, True]]), 1.0,
                              np.zeros(1), *[np.zeros(1, np.int64)] * 4, np.array([3]))
    assert one[0][0] == 2 and one[2][0] == 3 and one[7] == 1   # 2 accepted drafts + the target's own token
    if twins.compiled():
        assert_same(*both(kernels.emit_decode, decode, l, accept, 2.5, before.copy(), *frozen, output))


def test_clip_to_output():
    rng = np.random.default_rng(1)
    S = 40
    decode = np.sort(rng.choice(S, 30, replace=False))
    output, generated = rng.integers(2, 30, S), rng.integers(0, 10, S)
    generated = np.minimum(generated, output - 1)
    l = rng.integers(0, 8, decode.size)
    clipped, total, n, low, high = kernels.clip_to_output(l, decode, output, generated)
    lmax = output[decode] - generated[decode] - 1
    np.testing.assert_array_equal(clipped, np.minimum(l, lmax))
    assert n == (l > lmax).sum() > 0 and (low, high) == (l.min(), l.max()) and total == clipped.sum()
    assert kernels.clip_to_output(np.zeros(0, np.int64), decode[:0], output, generated)[1:] == (0, 0, 0, 0)
    if twins.compiled():
        assert_same(*both(kernels.clip_to_output, l, decode, output, generated))


def test_decoding_slots():
    left = np.array([0, 5, 0, 0, 12, 0])
    prompt, generated = np.arange(10, 16), np.array([1, 0, 3, 4, 0, 9])
    output = np.array([5, 100, 20, 6, 100, 10])         # left: 4, (prefilling), 17, 2, (prefilling), 1
    decode, kv, most_left = kernels.decoding_slots(left, prompt, generated, output)
    np.testing.assert_array_equal(decode, [0, 2, 3, 5])
    assert kv == (10 + 1) + (12 + 3) + (13 + 4) + (15 + 9)
    assert most_left == 17                                # the prefilling slots' 100-token outputs do not count
    none, kv0, left0 = kernels.decoding_slots(np.zeros(0, np.int64), prompt[:0], generated[:0], output[:0])
    assert none.size == 0 and kv0 == 0 and left0 == 0
    if twins.compiled():
        assert_same(*both(kernels.decoding_slots, left, prompt, generated, output))
        rng = np.random.default_rng(3)
        for _ in range(20):                               # random slots, some prefilling, some at their last token
            n = int(rng.integers(1, 40))
            gen = rng.integers(0, 50, n)
            args = (rng.integers(0, 3, n) * rng.integers(0, 2, n), rng.integers(1, 900, n), gen,
                    gen + rng.integers(0, 30, n))
            assert_same(*both(kernels.decoding_slots, *args))


def test_lazy_growth_blocks_by_hand_and_twin():
    # two decoding slots of a 16-token block: prompt 30 + generated 5 + 1 + l 3 = 39 tokens -> 3 blocks (held 2),
    # 16 + 0 + 1 + 0 = 17 -> 2 (held 3: last step's lookahead returns one); drafter share 0.5 at gamma 4:
    # ceil(39 * 0.5) = 20 tokens -> 2 blocks (held 1: +1), ceil(20 * 0.5) = 10 -> 1 block (held 4: nothing)
    decode, l = np.array([0, 2]), np.array([3, 0])
    prompt, gen = np.array([30, 99, 16]), np.array([5, 0, 0])
    kv, dkv = np.array([2, 7, 3]), np.array([1, 0, 4])
    assert kernels.lazy_growth_blocks(decode, l, prompt, gen, kv, dkv, 16, 4, 0.5) == (3 - 2) + (2 - 3) + 1 + 0
    assert kernels.lazy_growth_blocks(decode, l, prompt, gen, kv, dkv, 16, 4, 0.0) == 0
    if twins.compiled():
        rng = np.random.default_rng(3)
        S = 60
        decode = np.sort(rng.choice(S, 45, replace=False))
        args = (decode, rng.integers(0, 8, decode.size), rng.integers(1, 5000, S), rng.integers(0, 900, S),
                rng.integers(0, 400, S), rng.integers(0, 200, S))
        for gamma, fraction in ((7, 0.3), (7, 0.0), (0, 0.3), (4, 1.0)):
            assert_same(*both(kernels.lazy_growth_blocks, *args, 16, gamma, fraction))


# ------------------------------------------------------------------------------- DSpark's scan and hull

def test_greedy_lengths_by_hand():
    # R = 2, survivals [0.9, 0.45] and [0.8, 0.4]; flat step time: Theta rises while tau does, so all 4
    # candidates are admitted; a step time that doubles at B = 4 stops after the two best (0.9, 0.8).
    conf = np.array([[0.9, 0.5], [0.8, 0.5]])
    np.testing.assert_array_equal(greedy_lengths(conf, np.full(5, 0.01), 2), [2, 2])
    np.testing.assert_array_equal(greedy_lengths(conf, np.array([0.01, 0.01, 0.01, 0.02, 0.02]), 2), [1, 1])
    np.testing.assert_array_equal(greedy_lengths(conf, np.array([0.01]), 2), [0, 0])   # nothing scoreable


def test_lower_convex_minorant_by_hand():
    y = np.array([1.0, 3.0, 2.0, 2.8, 6.0, 4.0])
    # vertices (0, 1), (2, 2), (5, 4): the chords 1 -> 2 over two steps and 2 -> 4 over three
    np.testing.assert_allclose(lower_convex_minorant(y), [1.0, 1.5, 2.0, 2.0 + 2 / 3, 2.0 + 4 / 3, 4.0])
    np.testing.assert_array_equal(lower_convex_minorant(np.array([5.0])), [5.0])
    convex = np.array([1.0, 1.5, 2.5, 4.0])
    np.testing.assert_array_equal(lower_convex_minorant(convex), convex)


@needs_numba
@settings(max_examples=300, deadline=None)
@given(R=st.integers(1, 80), G=st.integers(1, 8), seed=st.integers(0, 2**32 - 1), power=st.floats(0.02, 1.0),
       ties=st.booleans(), cap=st.floats(0.0, 1.0), hull=st.booleans())
def test_dspark_scan_and_hull_equal_their_twins(R, G, seed, power, ties, cap, hull):
    rng = np.random.default_rng(seed)
    conf = random_confidences(rng, R, G, power, ties)
    n = max(1, int(cap * R * G)) + 1                       # the profile may score fewer than all candidates
    b = np.arange(R, R + n)
    step_times = 0.01 + 2e-5 * b + 0.001 * ((b % 64) > 56) + (1e-4 * rng.random(n) if ties else 0.0)
    if hull:
        h, h_twin = both(lower_convex_minorant, step_times)
        assert_same(h, h_twin)
        assert (h <= step_times).all() and (np.diff(h, 2) >= -1e-15).all()
        step_times = h
    assert_same(*both(greedy_lengths, conf, step_times, R))


@needs_numba
@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 3000), seed=st.integers(0, 2**32 - 1),
       kind=st.sampled_from(["survival", "ties", "cluster", "signed", "piled"]))
def test_sort_values_equals_np_sort(n, seed, kind):
    """The bucket sort of the scans' survival values is np.sort: on survivals, runs of ties, a tight cluster
    beside an outlier (one bucket of most values: sorted by quicksort, not by insertion), signed values, and
    trtllm-confidence's candidates, -1.0 below its survival_eps (one bucket of one value repeated, left as it is)."""
    rng = np.random.default_rng(seed)
    survival = np.cumprod(rng.uniform(0.5, 1.0, (max(n, 1), 7)), axis=1)[: n // 7 + 1]
    values = {"survival": lambda: survival,
              "ties": lambda: rng.integers(0, 5, n) / 4.0,
              "cluster": lambda: np.concatenate([1.0 + 1e-12 * rng.random(n), [1e6]]),
              "signed": lambda: rng.normal(0.0, 1e3, n),
              "piled": lambda: np.where(survival >= rng.uniform(0.0, 0.9), survival, -1.0)}[kind]()
    assert_same(*both(sort_values, values))


@needs_numba
def test_sort_values_edges():
    for values in (np.zeros(0), np.full(9, 0.3), np.array([2.0, np.inf, -1.0, np.nan, 0.5]),
                   np.array([[0.5, 0.25], [1.0, 0.0]]), np.r_[np.full(100, -1.0), 0.5, 1.0]):
        assert_same(*both(sort_values, values))


@pytest.mark.parametrize("seed", range(6))
def test_pack_prefill_is_fcfs_within_the_budget(seed):
    """Chunks go to the slots with prefill left in slot order, each up to what the budget leaves after the
    prompts before it; the compiled twin gives the same arrays."""
    rng = np.random.default_rng(seed)
    left = np.where(rng.uniform(size=12) < 0.5, rng.integers(1, 700, 12), 0).astype(np.int64)
    budget = int(rng.integers(1, 1500))
    slots, tokens = kernels.pack_prefill.numpy_form(left, budget)
    before, want = 0, []
    for s in np.flatnonzero(left):
        take = min(int(left[s]), max(0, budget - before))
        before += int(left[s])
        if take:
            want.append((s, take))
    assert list(zip(slots.tolist(), tokens.tolist())) == want and tokens.sum() <= budget
    if twins.compiled():
        assert_same((slots, tokens), twins.compiled_twin(kernels.pack_prefill)(left, budget))
