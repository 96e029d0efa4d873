"""Acceptance models: rate tables by source, pooled rates over sampled steps, confidence signal (PAPER.md 4, 8)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.special import expit, logit

from specsim import calibration as cal
from specsim.acceptance import (DATASET_DOMAIN, FIG2_ALPHA, FIG4_TAU, PRODUCTION_DOMAIN_MIX, TABLE1_DATASETS,
                                TABLE1_TAU, build_acceptance_model, builtin_table, implied_tau)
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario


def default_model(drafter: str = "dspark", gamma: int = 7, **kw):
    return build_acceptance_model(drafter, gamma, **{**load_scenario().to_dict()["acceptance"], **kw})


def sample_steps(model, domain: str, num_requests: int, positions: int, seed: int):
    """(N, gamma) outcomes and confidences through the engine's path (draw_request, accepted, confidences)."""
    acc, raw, calib = [], [], []
    for r in range(num_requests):
        d = model.draw_request(np.random.default_rng(np.random.SeedSequence([seed, r])), domain, positions)
        acc.append(model.accepted(d.logit_q, d.u))
        c_raw, c_cal = model.confidences(d.logit_q, d.noise)
        raw.append(c_raw)
        calib.append(c_cal)
    return np.concatenate(acc), np.concatenate(raw), np.concatenate(calib)


def pooled_conditional(acc: np.ndarray) -> np.ndarray:
    """Accepted at k / reached k, pooled over rows (the paper's Fig. 2 definition)."""
    lab = np.cumprod(acc, axis=1)
    reached = np.concatenate([np.ones((lab.shape[0], 1)), lab[:, :-1]], axis=1)
    return lab.sum(axis=0) / reached.sum(axis=0)


# ----------------------------------------------------------------------------------------------- tables

def test_table1_datasets_hit_their_cells_with_one_factor():
    for drafter, taus in TABLE1_TAU.items():
        rows, source = builtin_table(drafter, "fig2", 7)
        assert "Table 1" in source
        for ds, tau in zip(TABLE1_DATASETS, taus):
            assert implied_tau(rows[ds]) == pytest.approx(tau, abs=1e-9)
            ratio = np.asarray(rows[ds]) / np.asarray(FIG2_ALPHA[drafter][DATASET_DOMAIN[ds]])
            assert np.ptp(ratio) < 1e-12                       # one factor for the whole row


def test_fig2_domain_rows_match_table1_domain_means():
    rows, _ = builtin_table("dspark", "fig2", 7)
    for dom, tau, tol in (("math", 5.57, 0.05), ("code", 5.12, 0.08), ("chat", 3.49, 0.05)):
        assert rows[dom] == FIG2_ALPHA["dspark"][dom]
        assert abs(implied_tau(rows[dom]) - tau) <= tol


@pytest.mark.parametrize("drafter", ["dspark", "dflash"])
def test_fig4_lengths(drafter):
    for dom, taus in FIG4_TAU[drafter].items():
        short, _ = builtin_table(drafter, "fig4", 3)
        assert implied_tau(short[dom]) == pytest.approx(taus[0], abs=1e-9)
        for gamma, tau in ((11, taus[2]), (15, taus[3])):
            rows, source = builtin_table(drafter, "fig2", gamma)
            assert f"draft length {gamma + 1}" in source and len(rows[dom]) == gamma
            assert rows[dom][:7] == FIG2_ALPHA[drafter][dom]
            assert implied_tau(rows[dom]) == pytest.approx(tau, abs=1e-9)
        # within 0.05 of Fig. 4's draft length 8 (the digitised figures agree to that)
        assert abs(implied_tau(FIG2_ALPHA[drafter][dom]) - taus[1]) <= 0.05
    with pytest.raises(SpecsimInputError, match="gamma <= 7"):
        build_acceptance_model("eagle3", 8)


def test_dspark5_mtp_and_user_tables(tmp_path):
    m = default_model(gamma=5, table="dspark5")
    assert m.alpha["instruction-following"] == m.alpha["chat"] == FIG2_ALPHA["dspark"]["chat"][:5]
    assert m.domain_weights == PRODUCTION_DOMAIN_MIX and "DSpark-5" in m.source
    with pytest.raises(SpecsimInputError):
        default_model(gamma=6, table="dspark5")
    mtp = default_model("mtp", 1)
    assert mtp.alpha["gsm8k"] == (0.875,) and mtp.implied_tau("chat") == pytest.approx(1.875)
    with pytest.raises(SpecsimInputError, match="gamma <= 1"):
        default_model("mtp", 2)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"alpha": {"chat": [0.5, 0.6], "legal": [0.4, 0.3]}}))
    user = default_model(gamma=2, table=str(path), rates={"legal": [0.45, 0.35]})
    assert user.alpha == {"chat": (0.5, 0.6), "legal": (0.45, 0.35)}
    path.write_text(json.dumps({"alpha": {"chat": [0.5, 1.2]}}))
    with pytest.raises(SpecsimInputError, match="alpha.chat"):
        default_model(gamma=2, table=str(path))
    with pytest.raises(SpecsimInputError):
        load_scenario(overrides=["acceptance.rates={chat=[0.5,1.0]}"])


def test_constant_alpha_closed_form():
    m = default_model(gamma=4, constant_alpha=0.8, domains=("legal",))
    assert m.implied_tau("legal") == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)


# ------------------------------------------------------------------------------------- sampled steps

@pytest.mark.parametrize("domain,tau,tol", [("math", 5.57, 0.05), ("code", 5.12, 0.08), ("chat", 3.49, 0.05)])
def test_100k_steps_reproduce_the_table(domain, tau, tol):
    m = default_model()
    acc, _, _ = sample_steps(m, domain, num_requests=2000, positions=50, seed=7)     # 100k steps
    assert acc.shape == (100_000, 7)
    assert np.max(np.abs(pooled_conditional(acc) - FIG2_ALPHA["dspark"][domain])) < 0.01
    emitted = np.cumprod(acc, axis=1).sum(axis=1) + 1                                   # full block
    assert abs(emitted.mean() - tau) <= tol


def test_heterogeneity_spreads_requests():
    """Per-request acceptance differs through z_r: the spread of per-request rates exceeds binomial noise."""
    m = default_model()
    rates = []
    for r in range(300):
        acc, _, _ = sample_steps(m, "code", 1, 200, seed=1000 + r)
        rates.append(acc[:, 0].mean())
    binomial_sd = np.sqrt(0.886 * 0.114 / 200)
    assert np.std(rates) > 3 * binomial_sd


# ------------------------------------------------------------------------------------ confidence

def paper_metrics(model, domain: str, n: int, seed: int):
    acc, raw, calib = model.sample_blocks(domain, n, np.random.default_rng(seed))
    labels = np.cumprod(acc, axis=1).astype(bool)
    known = np.ones_like(labels)
    return (cal.position_metrics(raw, labels, known), cal.position_metrics(calib, labels, known),
            raw, labels)


def test_raw_confidence_ranks_like_the_paper_head_and_is_overconfident():
    """Alpaca (the paper's Fig. 6 dataset): AUROC 0.81-0.91, raw ECE 3-8.5%, observed below predicted."""
    raw_m, _, raw, labels = paper_metrics(default_model(), "alpaca", 60_000, seed=3)
    assert raw_m.auroc.between(0.81, 0.91).all(), raw_m.auroc.round(3).tolist()
    assert raw_m.ece.between(0.03, 0.085).all(), raw_m.ece.round(3).tolist()
    surv = np.cumprod(raw, axis=1)
    paper = {0: ((10, 0.47), (14, 0.62), (18, 0.85)), 2: ((10, 0.40), (14, 0.59)), 6: ((10, 0.38), (14, 0.54))}
    for k, points in paper.items():
        r = cal.reliability(surv[:, k], labels[:, k])
        for b, observed in points:
            assert r.observed[b] < r.mean_pred[b]                     # overconfident
            assert abs(r.observed[b] - observed) < 0.08, (k + 1, b, r.observed[b])


def test_sts_temperatures_fitted_at_build_time_calibrate_held_out_traffic():
    """The default model's temperatures (fitted at build time on the production mix) on fresh held-out data."""
    m = default_model()
    rng = np.random.default_rng(11)
    parts = [m.sample_blocks(d, int(60_000 * w), rng) for d, w in PRODUCTION_DOMAIN_MIX.items()]
    acc, raw, calib = (np.concatenate(x) for x in zip(*parts))
    labels = np.cumprod(acc, axis=1).astype(bool)
    known = np.ones_like(labels)
    raw_ece = cal.position_metrics(raw, labels, known).ece.to_numpy()
    sts_ece = cal.position_metrics(calib, labels, known).ece.to_numpy()
    assert np.all(raw_ece > 0.03) and np.all(sts_ece <= 0.02), (raw_ece.round(4), sts_ece.round(4))
    for d, (acc_d, raw_d, cal_d) in zip(PRODUCTION_DOMAIN_MIX, parts):       # and per domain it still helps
        lab_d = np.cumprod(acc_d, axis=1).astype(bool)
        k_d = np.ones_like(lab_d)
        assert np.all(cal.position_metrics(cal_d, lab_d, k_d).ece < cal.position_metrics(raw_d, lab_d, k_d).ece), d


def test_sts_on_one_dataset_as_the_paper_did():
    """PAPER.md 4's protocol: STS fitted on Alpaca rollouts, evaluated on held-out Alpaca.

    Documented deviation (docs/acceptance.md): the paper reaches 2.0 / 1.7 / 0.8 / 0.4% at positions 1/3/5/7;
    our chat-like head keeps 2-3% at positions 1-4 because its shift and low-end compression are not
    temperature-shaped (a temperature cannot move c = 0.5), and <= 2% from position 5 on.
    """
    m = default_model()
    acc, raw, _ = m.sample_blocks("alpaca", 40_000, np.random.default_rng(21))
    temps = cal.fit_sts(raw, np.cumprod(acc, axis=1).astype(bool))
    acc, raw, _ = m.sample_blocks("alpaca", 40_000, np.random.default_rng(22))
    labels = np.cumprod(acc, axis=1).astype(bool)
    known = np.ones_like(labels)
    raw_ece = cal.position_metrics(raw, labels, known).ece.to_numpy()
    sts_ece = cal.position_metrics(cal.apply_temperatures(raw, temps), labels, known).ece.to_numpy()
    assert np.all(sts_ece < 0.6 * raw_ece) and np.all(sts_ece <= 0.035), sts_ece.round(4)
    assert np.all(sts_ece[4:] <= 0.02), sts_ece.round(4)


def test_confidences_are_sts_of_raw_and_vectorised():
    m = default_model()
    d = m.draw_request(np.random.default_rng(0), "chat", 50)
    raw, calib = m.confidences(d.logit_q, d.noise)
    assert raw.shape == calib.shape == (50, 7) and raw.dtype == np.float64
    T = m.sts_temperatures
    np.testing.assert_allclose(calib, expit(logit(raw) / T[None, :]), rtol=1e-9)
    np.testing.assert_allclose(m.calibrate(raw), calib, rtol=1e-9)
    assert np.all(T[:4] > 1.0)                                 # an overconfident head is cooled
    for k in range(7):                                         # monotone per position
        order = np.argsort(raw[:, k])
        assert np.all(np.diff(calib[order, k]) >= 0)


def test_temperatures_from_a_calibrate_file(tmp_path):
    path = tmp_path / "temperatures.json"
    path.write_text(json.dumps({"temperatures": [1.5, 1.4, 1.3, 1.2, 1.1, 1.0, 0.9]}))
    m = default_model(temperatures=str(path))
    np.testing.assert_allclose(m.sts_temperatures, [1.5, 1.4, 1.3, 1.2, 1.1, 1.0, 0.9])
    raw_only = default_model(calibration="none")
    d = raw_only.draw_request(np.random.default_rng(0), "math", 20)
    raw, calib = raw_only.confidences(d.logit_q, d.noise)
    np.testing.assert_array_equal(raw, calib)
