"""The compiled kernels compute, bit for bit, the numpy expressions they replace (specsim/engine/kernels.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.engine import kernels
from specsim.acceptance.model import build_acceptance_model
from specsim.engine.draws import LatentRows
from specsim.policies.dspark import lengths_from_top, ranked_candidates, theta_curve


def _numpy_dspark(conf: np.ndarray, step_times: np.ndarray, R: int) -> np.ndarray:
    """The reference: rank all candidates, Theta curve, first admission that does not raise Theta."""
    a_sorted, r_sorted = ranked_candidates(conf.cumprod(axis=1))
    theta = theta_curve(R, a_sorted, lambda b: 1.0 / step_times[b - R], max_batch_tokens=R + step_times.size - 1)
    no_gain = theta[1:] <= theta[:-1]
    n = int(no_gain.argmax()) if no_gain.any() else theta.size - 1
    return lengths_from_top(n, r_sorted, R)


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
    assert 0.3 < ref_acc.mean() < 0.95                   # the tails (ndtri) and the table were both exercised
    assert (np.abs(rows[:, 1]) > 2.4 * model.sigma_conf).any()


@pytest.mark.parametrize("whole", [True, False])
def test_emit_decode_equals_the_numpy_update(whole):
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
    ref = (accept & (np.arange(G)[None, :] < l[:, None])).cumprod(axis=1).sum(axis=1)
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


def test_decoding_slots():
    left = np.array([0, 5, 0, 0, 12, 0])
    prompt, generated = np.arange(10, 16), np.array([1, 0, 3, 4, 0, 9])
    decode, kv = kernels.decoding_slots(left, prompt, generated)
    np.testing.assert_array_equal(decode, [0, 2, 3, 5])
    assert kv == (10 + 1) + (12 + 3) + (13 + 4) + (15 + 9)
    none, kv0 = kernels.decoding_slots(np.zeros(0, np.int64), prompt[:0], generated[:0])
    assert none.size == 0 and kv0 == 0


def test_dspark_greedy_by_hand():
    # R = 2, survivals [0.9, 0.45] and [0.8, 0.4]; flat step time: Theta rises while tau does, so all 4
    # candidates are admitted; a step time that doubles at B = 4 stops after the two best (0.9, 0.8).
    conf = np.array([[0.9, 0.5], [0.8, 0.5]])
    np.testing.assert_array_equal(kernels.dspark_greedy(conf, np.full(5, 0.01), 2), [2, 2])
    np.testing.assert_array_equal(kernels.dspark_greedy(conf, np.array([0.01, 0.01, 0.01, 0.02, 0.02]), 2), [1, 1])
    np.testing.assert_array_equal(kernels.dspark_greedy(conf, np.array([0.01]), 2), [0, 0])   # nothing scoreable


@settings(max_examples=300, deadline=None)
@given(R=st.integers(1, 80), G=st.integers(1, 8), seed=st.integers(0, 2**32 - 1), power=st.floats(0.02, 1.0),
       ties=st.booleans(), cap=st.floats(0.0, 1.0))
def test_dspark_greedy_equals_the_numpy_policy(R, G, seed, power, ties, cap):
    rng = np.random.default_rng(seed)
    conf = rng.random((R, G)) ** power
    if ties:                                               # exact ties: saturated confidences and dead rows
        conf[rng.random((R, G)) < 0.2] = 1.0
        conf[rng.random(R) < 0.1] = 0.0
        conf = np.round(conf, 1)
    n = max(1, int(cap * R * G)) + 1                       # the profile may score fewer than all candidates
    b = np.arange(R, R + n)
    step_times = 0.01 + 2e-5 * b + 0.001 * ((b % 64) > 56)
    np.testing.assert_array_equal(kernels.dspark_greedy(conf, step_times, R), _numpy_dspark(conf, step_times, R))
