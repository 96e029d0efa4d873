"""Calibration metrics (ECE, AUROC, reliability) and Sequential Temperature Scaling (DSpark paper §3.2.1)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

from specsim.acceptance import calibration as cal
from specsim.acceptance.steplog import write_step_log

# Raw-head distortion, logit(c) = S * logit(q) + B: position 1 fitted to DSpark paper §3.2.1's reliability
# points (0.53 -> 0.47, 0.73 -> 0.62, 0.93 -> 0.85), later conditionals milder so that the cumulative
# survival bends like the paper's positions 3 and 7 (0.52 -> 0.40 / 0.38, 0.72 -> 0.59 / 0.54).
S = np.array([1.33] + [1.15] * 6)
B = np.array([0.28] + [0.10] * 6)


def synth(n: int, seed: int, gamma: int = 7, m: float = 2.2, sd_req: float = 1.2, sd_pos: float = 1.0):
    """Overconfident synthetic drafts: true conditional q, labels drawn left to right, raw conf distorted.

    Returns (conf_raw (n, gamma), labels (n, gamma) prefix-accepted, q (n, gamma)).
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    lq = m + sd_req * rng.normal(size=(n, 1)) + sd_pos * rng.normal(size=(n, gamma))  # true logit
    accepted = rng.random((n, gamma)) < expit(lq)
    labels = np.cumprod(accepted, axis=1).astype(bool)
    return expit(S[:gamma] * lq + B[:gamma]), labels, expit(lq)


# --------------------------------------------------------------------------------------------- ECE

def test_ece_hand_computed_ten_samples():
    pred = np.array([0.02, 0.04, 0.33, 0.34, 0.36, 0.61, 0.62, 0.97, 0.98, 1.00])
    label = np.array([0, 0, 1, 0, 0, 1, 0, 1, 1, 1])
    # 20 bins of width 0.05: [0,.05): {.02,.04}, mean .03, obs 0 -> 2 * .03
    # [.30,.35): {.33,.34} mean .335 obs .5 -> 2 * .165 ; [.35,.40): {.36} obs 0 -> .36
    # [.60,.65): {.61,.62} mean .615 obs .5 -> 2 * .115 ; [.95,1]: {.97,.98,1.0} mean .98333 obs 1 -> .05
    expected = (2 * 0.03 + 2 * 0.165 + 0.36 + 2 * 0.115 + 0.05) / 10
    assert cal.ece(pred, label) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.103)
    r = cal.reliability(pred, label)
    assert r.counts.sum() == 10 and r.counts[19] == 3 and r.counts[0] == 2
    assert np.isnan(r.mean_pred[5]) and r.observed[12] == pytest.approx(0.5)


def test_ece_calibrated_sample_is_near_zero():
    rng = np.random.default_rng(1)
    p = rng.random(200_000)
    assert cal.ece(p, rng.random(p.size) < p) < 0.006


def test_ece_of_known_distortion():
    # observed = 0.8 * predicted (the paper's "observed ~ 0.75-0.9 x predicted"): inside each bin the
    # gap is 0.2 * mean pred, so ECE = 0.2 * E[p] = 0.1 for p ~ U(0, 1).
    rng = np.random.default_rng(2)
    p = rng.random(400_000)
    assert cal.ece(p, rng.random(p.size) < 0.8 * p) == pytest.approx(0.1, abs=0.003)
    # constant prediction 0.8, exactly 70% positives: one bin, ECE = 0.1 exactly
    assert cal.ece(np.full(10, 0.8), np.r_[np.ones(7), np.zeros(3)]) == pytest.approx(0.1, abs=1e-12)


# ------------------------------------------------------------------------------------------- AUROC

def test_auroc_matches_brute_force_pair_count_with_ties():
    rng = np.random.default_rng(3)
    pred = np.round(rng.random(400), 1)                          # many ties
    label = rng.random(400) < pred
    pos, neg = pred[label], pred[~label]
    diff = pos[:, None] - neg[None, :]
    brute = ((diff > 0).sum() + 0.5 * (diff == 0).sum()) / diff.size
    assert cal.auroc(pred, label) == pytest.approx(brute, abs=1e-12)
    assert cal.auroc([0.1, 0.9], [0, 1]) == 1.0 and cal.auroc([0.9, 0.1], [0, 1]) == 0.0
    assert np.isnan(cal.auroc([0.2, 0.3], [1, 1]))


# --------------------------------------------------------------------------------------------- STS

def test_synthetic_raw_head_is_shaped_like_the_paper():
    conf, labels, _ = synth(50_000, seed=11)
    a1 = conf[:, 0]
    for pred, observed in ((0.53, 0.47), (0.73, 0.62), (0.93, 0.85)):
        near = np.abs(a1 - pred) < 0.025
        assert labels[near, 0].mean() == pytest.approx(observed, abs=0.03)
    raw = cal.position_metrics(conf, labels, np.ones_like(labels))
    assert np.all((raw["ece"] > 0.03) & (raw["ece"] < 0.09))     # the paper's raw range is 3-8%
    assert np.all((raw["auroc"] > 0.8) & (raw["auroc"] < 0.92))


def test_sts_brings_held_out_ece_to_two_percent_on_every_position():
    conf_fit, lab_fit, _ = synth(50_000, seed=20)
    conf_ev, lab_ev, _ = synth(50_000, seed=21)
    temps = cal.fit_sts(conf_fit, lab_fit)
    assert np.all(temps > 1.0)                                    # overconfident -> softened
    known = np.ones_like(lab_ev)
    raw = cal.position_metrics(conf_ev, lab_ev, known)["ece"].to_numpy()
    sts = cal.position_metrics(cal.apply_temperatures(conf_ev, temps), lab_ev, known)["ece"].to_numpy()
    assert np.all(sts < raw)
    assert np.all(sts <= 0.02), sts
    # position 1's conditional distortion is close to a temperature of S[0] (the bias B shifts it up)
    assert 1.3 < temps[0] < 1.7


def test_sts_temperatures_are_fixed_left_to_right():
    conf, labels, _ = synth(8_000, seed=30, gamma=4)
    t1 = cal.fit_sts(conf, labels)
    conf2, labels2 = conf.copy(), labels.copy()
    rng = np.random.default_rng(31)
    conf2[:, 2] = rng.random(conf.shape[0])                      # position 3's data replaced
    labels2[:, 2] = labels2[:, 1] & (rng.random(conf.shape[0]) < 0.3)
    labels2[:, 3] &= labels2[:, 2]
    t2 = cal.fit_sts(conf2, labels2)
    assert t2[0] == t1[0] and t2[1] == t1[1]
    assert t2[2] != t1[2]


def test_sts_excludes_unknown_labels():
    conf, labels, _ = synth(6_000, seed=40, gamma=3)
    known = np.ones_like(labels)
    known[::2, 2] = False
    garbage = labels.copy()
    garbage[::2, 2] = ~garbage[::2, 2]                          # flipped where unknown: must not matter
    t_known = cal.fit_sts(conf, garbage, known)
    t_sub = cal.fit_sts(conf, labels, known)
    assert np.array_equal(t_known, t_sub)
    assert np.array_equal(t_known[:2], cal.fit_sts(conf, labels)[:2])   # positions 1-2 fully known


def test_apply_temperatures_is_monotone_and_identity_at_one():
    c = np.array([[0.1, 0.5, 0.9], [0.2, 0.6, 0.95]])
    assert np.allclose(cal.apply_temperatures(c, [1, 1, 1]), c)
    out = cal.apply_temperatures(c, [2.0, 2.0, 0.5])
    assert out[0, 1] == pytest.approx(0.5)
    assert out[0, 2] == pytest.approx(expit(logit(0.9) / 0.5))
    assert np.all(np.diff(cal.apply_temperatures(np.linspace(0.01, 0.99, 50)[:, None], [1.7]), axis=0) > 0)
    with pytest.raises(ValueError):
        cal.apply_temperatures(c, [1.0, 0.0, 1.0])


# ------------------------------------------------------------------------------- step logs and CLI

def step_log(n_req: int, steps: int, seed: int, adaptive: bool = False, gamma: int = 5) -> pd.DataFrame:
    """A step log from :func:`synth`: static full-gamma verification, or a 0.6-threshold adaptive one."""
    conf, labels, _ = synth(n_req * steps, seed=seed, gamma=gamma)
    num_acc_full = labels.sum(axis=1)                             # accepted length if all verified
    if adaptive:
        verify = np.argmin(np.c_[conf, np.zeros(len(conf))] >= 0.6, axis=1)   # first c_k < 0.6
    else:
        verify = np.full(len(conf), gamma)
    return pd.DataFrame({
        "step": np.tile(np.arange(steps), n_req), "replica": 0, "time_s": 0.0, "step_time_s": 0.02,
        "request_id": np.repeat([f"r{i}" for i in range(n_req)], steps), "domain": "chat",
        "gamma": gamma, "verify_len": verify, "num_accepted": np.minimum(num_acc_full, verify),
        "conf_raw": list(conf), "conf": list(conf)})


def test_calibrate_step_log_static_run():
    report = cal.calibrate_step_log(step_log(400, 60, seed=50), source=["x.parquet"], warn_to_stderr=False)
    m = report.metrics
    assert report.warnings == [] and report.censored_fraction == 0.0
    assert list(m["position"]) == [1, 2, 3, 4, 5]
    assert (m["n_fit"] + m["n_eval"] == 24_000).all() and 0.35 < m["n_eval"].iloc[0] / 24_000 < 0.65
    assert (m["ece_sts"] < m["ece_raw"]).all() and (m["ece_sts"] <= 0.025).all()
    assert report.to_json()["temperatures"] == [round(float(t), 6) for t in report.temperatures]


def test_calibrate_warns_on_adaptive_logs(capsys):
    report = cal.calibrate_step_log(step_log(100, 40, seed=60, adaptive=True))
    assert report.censored_fraction > 0.1
    assert any("adaptive" in w for w in report.warnings)
    assert "adaptive" in capsys.readouterr().err


def test_split_keeps_requests_together():
    ids = np.repeat([f"q{i}" for i in range(50)], 7)
    fit = cal.split_by_request(ids)
    assert 10 < fit.reshape(50, 7)[:, 0].sum() < 40
    assert np.all(fit.reshape(50, 7) == fit.reshape(50, 7)[:, :1])


def test_calibrate_cli_writes_outputs(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    logs = []
    for i in range(2):
        path = tmp_path / f"log{i}.parquet"
        write_step_log(step_log(150, 40, seed=70 + i, gamma=4), path)
        logs.append(str(path))
    res = CliRunner().invoke(app, ["calibrate", *logs, "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    temps = json.loads((tmp_path / "out" / "temperatures.json").read_text())
    assert len(temps["temperatures"]) == 4 and temps["source"] == ["log0.parquet", "log1.parquet"]
    metrics = pd.read_csv(tmp_path / "out" / "metrics.csv")
    assert {"ece_raw", "ece_sts", "auroc_raw", "auroc_sts"} <= set(metrics.columns)
    assert (metrics["ece_sts"] < metrics["ece_raw"]).all()
    for png in ("reliability.png", "survival_hist.png"):
        assert (tmp_path / "out" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ECE" in res.output


def test_load_temperatures(tmp_path):
    from specsim.errors import SpecsimInputError
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"temperatures": [1.4, 1.2], "source": ["a"]}))
    assert np.array_equal(cal.load_temperatures(p), [1.4, 1.2])
    p.write_text(json.dumps({"temperatures": [1.4, -1]}))
    with pytest.raises(SpecsimInputError, match="positive"):
        cal.load_temperatures(p)
    p.write_text("{}")
    with pytest.raises(SpecsimInputError, match="temperatures"):
        cal.load_temperatures(p)


def test_a_static_runs_clipped_last_steps_are_not_called_adaptive(capsys):
    """specsim's own static run made calibrate warn "looks like an adaptive-length run" (1.3% of rows censored,
    every one a request's last step, clipped to its remaining output): those steps are not counted."""
    log = step_log(100, 40, seed=61)
    last = log.step == log.step.max()
    log.loc[last, "verify_len"] = 1
    log.loc[last, "num_accepted"] = 1                    # verified 1 of 5, accepted it: censored, as at a request's end
    report = cal.calibrate_step_log(log)
    assert report.warnings == [] and report.censored_fraction == 0.0
    assert "adaptive" not in capsys.readouterr().err
    assert cal.calibrate_step_log(step_log(100, 40, seed=60, adaptive=True)).censored_fraction > 0.1
