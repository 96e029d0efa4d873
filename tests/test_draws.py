"""Counter-based draws (specsim.engine.draws): exact quantiles, common random numbers, the latent model's distribution."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, ndtri

from specsim.acceptance.model import build_acceptance_model
from specsim.engine.draws import LatentRows, request_keys, std_normal, uniforms


def test_std_normal_matches_the_exact_quantile_everywhere():
    u = np.concatenate([np.linspace(1e-12, 1 - 1e-12, 200_001), [2.0 ** -33, 1 - 2.0 ** -33]])
    assert np.max(np.abs(std_normal(u) - ndtri(u))) < 3e-6


def test_uniforms_are_uniform_and_independent_across_columns():
    keys = request_keys(7, np.arange(4000))
    u = uniforms(keys, np.arange(4000) % 97, 9)
    assert ((u > 0) & (u < 1)).all()
    for c in range(9):
        assert stats.kstest(u[:, c], "uniform").pvalue > 1e-3
    assert abs(np.corrcoef(u[:, 0], u[:, 1])[0, 1]) < 0.05


def test_rows_depend_only_on_seed_request_and_anchor():
    """Common random numbers: a request's row at an anchor is the same in any batch; seeds differ."""
    model = build_acceptance_model("dspark", 7, domains=("chat",))
    a, b = LatentRows(model, 3, 50), LatentRows(model, 3, 50)
    ka, base_a = zip(*[a.request_state(i, "chat") for i in (4, 9, 17)])
    kb, base_b = zip(*[b.request_state(i, "chat") for i in (17, 4)])
    rows_a = a.rows(np.array(ka), np.array([5, 0, 12]), np.array(base_a))
    rows_b = b.rows(np.array(kb), np.array([12, 5]), np.array(base_b))
    np.testing.assert_array_equal(rows_a[0], rows_b[1])
    np.testing.assert_array_equal(rows_a[2], rows_b[0])
    other = LatentRows(model, 4, 50)
    k, base = other.request_state(4, "chat")
    assert not np.array_equal(other.rows(np.array([k]), np.array([5]), base[None])[0], rows_a[0])


def test_latent_rows_follow_the_models_distribution():
    """Acceptance probability per position and the confidence noise's spread match draw_request's."""
    model = build_acceptance_model("dspark", 7, domains=("code",))
    n = 20_000
    src = LatentRows(model, 1, n)
    keys, base = zip(*[src.request_state(i, "code") for i in range(n)])
    rows = src.rows(np.array(keys), np.arange(n) % 50, np.array(base))
    rng = np.random.default_rng(0)
    ref = [model.draw_request(rng, "code", 1) for _ in range(n)]
    ref_q = np.concatenate([d.logit_q for d in ref])
    np.testing.assert_allclose(expit(rows[:, 0]).mean(axis=0), expit(ref_q).mean(axis=0), atol=0.01)
    assert rows[:, 1].std() == pytest.approx(model.sigma_conf, rel=0.03)
    assert rows[:, 0].std(axis=0) == pytest.approx(ref_q.std(axis=0), rel=0.03)
