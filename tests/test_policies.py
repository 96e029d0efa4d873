"""Policies on hand-built views: the paper's Appendix-A case, dspark-async's top-K and capacity search,
SpecDec++'s rule, and causality (decisions never depend on hidden outcomes)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from helpers import make_view
from specsim.errors import SpecsimInputError
from specsim.policies import DSpark, DSparkAsync, SpecDecPP, StaticK, make_policy
from specsim.policies.dspark import ranked_candidates


# ---------------------------------------------------------------- the paper's Appendix A
@pytest.mark.parametrize("c2", [0.0, 0.3, 0.9, 1.0])
def test_appendix_a_dspark_early_stop_returns_zero_whatever_c2(c2):
    view = make_view([[0.8, c2]], sps_values=[1.0, 0.5, 0.45])
    assert DSpark()(view).tolist() == [0]


def _global_search(view):
    """Plain-loop reference: evaluate every prefix allocation and keep the best Theta."""
    R, g = view.conf.shape
    surv = np.cumprod(view.conf, axis=1)
    best, best_l = -1.0, None
    for ls in itertools.product(range(g + 1), repeat=R):
        tau = R + sum(surv[r, :l].sum() for r, l in enumerate(ls))
        theta = tau * view.sps(R + sum(ls))
        if theta > best + 1e-12:
            best, best_l = theta, ls
    return list(best_l), best


def _random_sawtooth_view(rng):
    """A small random view (R, gamma <= 3) on a decreasing SPS curve with one sawtooth tooth."""
    R, g = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    conf = rng.uniform(0.05, 0.99, (R, g))
    sps = 1.0 / np.cumsum(rng.uniform(0.05, 1.0, R * (g + 1)))
    sps[rng.integers(0, sps.size)] *= 1.3                                  # a sawtooth tooth
    return R, g, conf, make_view(conf, sps)


@pytest.mark.parametrize("c2, expected", [(0.9, [2]), (0.0, [0])])
def test_appendix_a_global_search(c2, expected):
    from specsim.policies.reference import DSparkGlobal
    view = make_view([[0.8, c2]], sps_values=[1.0, 0.5, 0.45])
    assert _global_search(view)[0] == expected
    assert DSparkGlobal()(view).tolist() == expected


def test_dspark_global_equals_brute_force_on_random_views():
    from specsim.policies.reference import DSparkGlobal
    rng = np.random.default_rng(21)
    for _ in range(60):
        R, g, conf, view = _random_sawtooth_view(rng)
        lens = DSparkGlobal()(view)
        surv = np.cumprod(conf, axis=1)
        theta = (R + sum(surv[r, :l].sum() for r, l in enumerate(lens))) * view.sps(R + int(lens.sum()))
        assert theta == pytest.approx(_global_search(view)[1], rel=1e-12)


def test_dspark_theta_rises_at_every_admission_and_stops_at_first_drop():
    rng = np.random.default_rng(3)
    for _ in range(50):
        R, g = rng.integers(1, 6), rng.integers(1, 5)
        conf = rng.uniform(0.05, 0.99, (R, g))
        sps = 1.0 / np.cumsum(rng.uniform(0.01, 1.0, R * (g + 1)))     # decreasing SPS, any shape
        view = make_view(conf, sps)
        lens = DSpark()(view)
        surv = np.cumprod(conf, axis=1)
        a_sorted, _ = ranked_candidates(surv)
        n = int(lens.sum())
        tau = R + np.concatenate([[0.0], np.cumsum(a_sorted)])
        theta = tau * view.sps(R + np.arange(a_sorted.size + 1))
        assert np.all(np.diff(theta[: n + 1]) > 0)
        assert n == a_sorted.size or theta[n + 1] <= theta[n]
        # the admitted set is prefix-closed and made of the top-n survivals
        admitted = np.concatenate([surv[r, :l] for r, l in enumerate(lens)])
        np.testing.assert_allclose(np.sort(admitted)[::-1], a_sorted[:n])


# ---------------------------------------------------------------- dspark-async
def test_async_allocation_is_top_k_survivals():
    rng = np.random.default_rng(7)
    pol = DSparkAsync()
    for _ in range(100):
        R, g = rng.integers(1, 8), rng.integers(1, 6)
        conf = rng.uniform(0.01, 0.999, (R, g))
        k = int(rng.integers(0, R * g + 3))
        view = make_view(conf, np.linspace(1.0, 0.2, R * (g + 1)), capacity=k)
        lens = pol(view)
        surv = np.cumprod(conf, axis=1)
        assert lens.sum() == min(k, R * g)
        chosen = np.concatenate([surv[r, :l] for r, l in enumerate(lens)])
        top = np.sort(surv.ravel())[::-1][: min(k, R * g)]
        np.testing.assert_allclose(np.sort(chosen)[::-1], top)


def test_async_capacity_equals_brute_force_search():
    rng = np.random.default_rng(11)
    pol = DSparkAsync()
    for _ in range(60):
        R, g, conf, old = _random_sawtooth_view(rng)
        k = pol.capacity(old, np.arange(R), R)
        best_l, best_theta = _global_search(old)
        surv = np.cumprod(conf, axis=1)
        a = np.sort(surv.ravel())[::-1]
        theta_k = (R + a[:k].sum()) * old.sps(R + k)
        assert theta_k == pytest.approx(best_theta, rel=1e-12)


def test_async_capacity_only_counts_requests_still_running():
    pol = DSparkAsync()
    old = make_view([[0.99, 0.99], [0.99, 0.99]], [1.0, 0.99, 0.98, 0.97, 0.96], ids=[10, 20])
    # only request 20 still runs (R_t = 1): at most its 2 candidates count
    assert pol.capacity(old, np.array([20]), 1) == 2
    assert pol.capacity(None, np.array([20]), 1) == 0


# ---------------------------------------------------------------- simple policies
def test_specdecpp_threshold_rule():
    view = make_view([[0.9, 0.9, 0.5], [0.6, 0.9, 0.9]], np.ones(8))
    # survival row 0: .9 .81 .405 -> 1 - s: .1 .19 .595 ; row 1: .6 .54 .486 -> .4 .46 .514
    assert SpecDecPP(0.2)(view).tolist() == [2, 0]
    assert SpecDecPP(0.45)(view).tolist() == [2, 1]
    assert SpecDecPP(1.0)(view).tolist() == [3, 3]


def test_static_k_and_registry():
    view = make_view(np.full((3, 4), 0.5), np.ones(16))
    assert StaticK()(view).tolist() == [4, 4, 4]
    assert make_policy("static", gamma=2)(view).tolist() == [2, 2, 2]
    with pytest.raises(SpecsimInputError, match="policy"):
        make_policy("no-such-policy")


def test_views_are_read_only():
    view = make_view([[0.5, 0.5]], np.ones(4))
    with pytest.raises(ValueError):
        view.conf[0, 0] = 1.0
    assert not hasattr(view, "accept")
