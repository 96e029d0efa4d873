"""Fitting acceptance models from step logs (empirical replay, parametric) and the counters import."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specsim.acceptance.model import FIG2_ALPHA, load_rate_table
from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.acceptance.fitting import EmpiricalAcceptanceModel, logged_blocks, write_fit
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace
from tests.conftest import REPO

RUN = CliRunner()
_register()


def hand_log() -> pd.DataFrame:
    """Two requests, gamma 3: a rejection at 2, a full accept, a censored row (verify 1 of 3, accepted)."""
    return pd.DataFrame({
        "step": [0, 1, 2, 0], "replica": 0, "time_s": 0.0, "step_time_s": 0.01,
        "request_id": ["a", "a", "a", "b"], "domain": ["chat", "chat", "chat", "code"], "gamma": 3,
        "verify_len": [3, 3, 1, 3], "num_accepted": [1, 3, 1, 0],
        "conf_raw": [[0.9, 0.4, 0.3], [0.95, 0.9, 0.8], [0.7, 0.7, 0.7], [0.2, 0.5, 0.5]],
        "conf": [[0.9, 0.4, 0.3], [0.95, 0.9, 0.8], [0.7, 0.7, 0.7], [0.2, 0.5, 0.5]]})


def test_logged_blocks_and_replay_layout():
    b = logged_blocks(hand_log())
    assert b.num_dropped == 1                                       # the censored row
    assert b.accept.tolist() == [[True, False, False], [True, True, True], [False, False, False]]
    assert b.rates()["chat"][:2] == pytest.approx((1.0, 0.5), abs=2e-4)   # rates are kept inside (0, 1)
    m = EmpiricalAcceptanceModel(b, 3, temperatures=(1.0, 1.0, 1.0))
    d = m.draw_request(np.random.default_rng(0), "chat", 7)
    acc = m.accepted(d.logit_q, d.u)
    # block 0 (emits 2 tokens) over rows 0-1, block 1 (emits 4) over rows 2-5, then the request again
    assert acc[:, 0].all() and acc[:2, 1:].sum() == 0 and acc[2:6].all() and not acc[6, 1]
    raw, calib = m.confidences(d.logit_q, d.noise)
    np.testing.assert_allclose(raw[0], [0.9, 0.4, 0.3], rtol=1e-6)
    np.testing.assert_allclose(raw, calib)
    with pytest.raises(SpecsimInputError):
        m.check_domain("math")
    with pytest.raises(SpecsimInputError, match="gamma <= 3"):
        EmpiricalAcceptanceModel(b, 4)


#: The default scenario with a window every request of prod.jsonl fits (its longest: 9,060 tokens): 19 of the first
#: 120 exceed Llama-2's 4,096 tokens and would be refused, thinning the ~40 requests per domain these statistical
#: round trips rest on; the fit is about acceptance, not the context window.
#: Speculation's own overhead is off: these round trips are about acceptance, and their tolerances (seed noise
#: of ~45 requests per domain) were set on runs without it, whose timing decides which steps the window holds.
FITS = ["engine.max_model_len=16384", "engine.spec_step_s=0", "engine.spec_request_s=0"]


@pytest.fixture(scope="module")
def static_log(tmp_path_factory):
    trace = load_trace(REPO / "traces" / "prod.jsonl").head(120)
    res = simulate(trace, "static", load_scenario(overrides=FITS), seed=2, concurrency=24, record_step_log=True)
    return trace, res


def test_fit_round_trip(static_log, tmp_path):
    trace, res = static_log
    model = write_fit(res.step_log, tmp_path, ["sim"], max_evals=80)
    rows = res.step_log
    for dom in ("chat", "code", "math"):
        # fully labelled blocks: a whole block drafted (gamma 7; a request's last steps draft fewer) and every
        # position's label known (all verified, or a rejection inside)
        full = (rows.gamma == 7) & ((rows.verify_len == 7) | (rows.num_accepted < rows.verify_len))
        sub = rows[(rows.domain == dom) & full]
        fitted = np.asarray(model["alpha"][dom])
        # alpha_1 recovered exactly from the log's counts (accepted at 1 / blocks)
        assert fitted[0] == pytest.approx(np.mean(sub.num_accepted >= 1), abs=1e-9)
        # and near the true table: request-level difficulty (sigma_request ~ 1) clusters the ~25-50 requests of a domain
        assert np.all(np.abs(fitted - FIG2_ALPHA["dspark"][dom]) < 0.1), (dom, fitted.round(3))
    assert model["params"]["sigma_request"] > 0.3 and model["params"]["sigma_conf"] > 0.1
    scen = load_scenario(overrides=FITS)
    # like for like: the default model at the replay runs' seed, over 400 requests (seed noise between runs of
    # ~45 requests per domain reaches 0.6 in acceptance length); every completed request (static verification:
    # the acceptance length does not depend on the load, so the ramp-up and drain count as well as the window)
    more = load_trace(REPO / "traces" / "prod.jsonl").head(400)
    base = simulate(more, "static", scen, seed=9, concurrency=24).summary["per_domain"]
    for kind in ("fitted", "empirical"):
        s = scen.with_updates({"acceptance": {"model": f"{kind}:{tmp_path}"}})
        again = simulate(more, "static", s, seed=9, concurrency=24)
        for dom in ("chat", "code", "math"):
            a = again.summary["per_domain"][dom]["mean_acceptance_length"]
            b = base[dom]["mean_acceptance_length"]
            assert abs(a - b) < 0.4, (kind, dom, a, b)
    assert len(json.loads((tmp_path / "model.json").read_text())["temperatures"]) == 7
    assert load_rate_table(tmp_path / "model.json") == {d: tuple(r) for d, r in model["alpha"].items()}


def test_counters_command(shared, tmp_path):
    out = tmp_path / "table.json"
    res = RUN.invoke(app, ["counters", str(shared / "data" / "spec_acceptance" /
                                         "vllm_eagle3_mtbench_acceptance_per_pos.csv"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    table = load_rate_table(out)
    # llama3-8b-eagle3: survival 0.7296, 0.5208, 0.3545 -> conditionals s_k / s_(k-1)
    assert table["llama3-8b-eagle3"] == pytest.approx((0.7296, 0.5208 / 0.7296, 0.3545 / 0.5208), abs=1e-6)
    assert "gpt-oss-20b-eagle3-2" in table                     # the same config on a second platform


def test_counters_command_rejects_adaptive_counters(tmp_path):
    path = tmp_path / "adaptive.csv"
    path.write_text("config_id,num_spec_tokens,num_drafts,num_draft_tokens,accepted_tokens_pos1,"
                    "accepted_tokens_pos2\nx,2,100,150,80,60\n")
    res = RUN.invoke(app, ["counters", str(path), "--out", str(tmp_path / "t.json")])
    assert isinstance(res.exception, SpecsimInputError) and "adaptive" in str(res.exception)
