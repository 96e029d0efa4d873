"""Acceptance in and out of vLLM, DeepSpec and Spec-Bench formats (issue 23).

Every input file under tests/data/exchange was written by hand from the format's public description:
vllm bench serve results (vllm/benchmarks/serve.py, spec_decode_* keys), DeepSpec's evaluator table and metrics
rows (deepspec/eval/base_evaluator.py: build_results_table, build_metrics_row), Spec-Bench answer JSONL
(evaluation/eval.py: choices[].accept_lengths).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.acceptance.exchange import (acceptance_report, deepspec_metrics, export_acceptance, load_acceptance,
                                         model_counters, read_deepspec_eval, read_specbench_answers,
                                         read_vllm_bench_result, read_vllm_synthetic, run_acceptance)
from specsim.errors import SpecsimInputError

DATA = Path(__file__).parent / "data" / "exchange"


def test_vllm_bench_result_gives_survival_and_conditional_rates():
    (name, c), = read_vllm_bench_result(DATA / "vllm_bench_result.json").items()
    assert name == "eagle3-k3"
    np.testing.assert_allclose(c.survival, [0.8, 0.6, 0.4])
    np.testing.assert_allclose(c.conditional, [0.8, 0.75, 0.4 / 0.6])      # s_k / s_(k-1)
    assert c.mean_acceptance_length == pytest.approx(2.8)                    # = the file's own figure
    assert c.reported_mean_acceptance_length == pytest.approx(2.8)
    assert c.num_drafts == 1000


def test_vllm_bench_adaptive_run_is_refused_with_the_reason():
    with pytest.raises(SpecsimInputError, match="adaptive-length"):
        read_vllm_bench_result(DATA / "vllm_bench_adaptive.json")


def test_vllm_bench_without_per_position_rates_is_refused():
    with pytest.raises(SpecsimInputError, match="spec_decode_per_position_acceptance_rates"):
        read_vllm_bench_result(DATA / "vllm_bench_no_positions.json")


def test_vllm_bench_inconsistent_accepted_tokens_is_refused(tmp_path):
    doc = json.loads((DATA / "vllm_bench_result.json").read_text())
    doc["spec_decode_accepted_tokens"] = 2500                                 # 1000 x (0.8+0.6+0.4) = 1800
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError, match="spec_decode_accepted_tokens"):
        read_vllm_bench_result(p)


def test_deepspec_tab_table_per_dataset():
    out = read_deepspec_eval(DATA / "deepspec_eval.tsv")
    assert list(out) == ["gsm8k", "mt-bench"]
    np.testing.assert_allclose(out["gsm8k"].conditional, [0.9, 0.8, 0.7, 0.55], rtol=1e-9)
    np.testing.assert_allclose(out["mt-bench"].conditional, [0.7, 0.7, 0.5, 0.5], rtol=1e-9)
    assert out["gsm8k"].reported_mean_acceptance_length == pytest.approx(3.40)


def test_deepspec_prettytable():
    (name, c), = read_deepspec_eval(DATA / "deepspec_eval_pretty.txt").items()
    assert name == "gsm8k"
    np.testing.assert_allclose(c.conditional, [0.8, 0.5, 0.5])


def test_deepspec_adaptive_proposals_are_refused():
    with pytest.raises(SpecsimInputError, match="#propose"):
        read_deepspec_eval(DATA / "deepspec_eval_adaptive.jsonl")


def test_specbench_accept_lengths_by_hand():
    out = read_specbench_answers(DATA / "specbench_answers.jsonl", num_spec_tokens=3)
    # writing: emitted 1,2,3,2,4,1,3,2 -> accepted 0,1,2,1,3,0,2,1 over 8 steps: >=1: 6, >=2: 3, >=3: 1
    np.testing.assert_allclose(out["writing"].survival, [6 / 8, 3 / 8, 1 / 8])
    np.testing.assert_allclose(out["writing"].conditional, [0.75, 0.5, 1 / 3])
    np.testing.assert_allclose(out["math"].survival, [1.0, 1.0, 1.0])


def test_specbench_needs_k_and_lengths_within_it():
    with pytest.raises(SpecsimInputError, match="num-spec-tokens"):
        read_specbench_answers(DATA / "specbench_answers.jsonl", num_spec_tokens=None)
    with pytest.raises(SpecsimInputError, match="accept_lengths"):
        read_specbench_answers(DATA / "specbench_answers.jsonl", num_spec_tokens=2)   # a 4 > K + 1


def test_export_then_import_round_trips_the_survival(tmp_path):
    alpha = {"chat": [0.8, 0.7, 0.6, 0.5], "code": [0.9, 0.85, 0.8, 0.75]}
    exported = export_acceptance(model_counters(alpha), "model")
    cfg = exported["speculative_config"]["code"]
    assert cfg["rejection_sample_method"] == "synthetic" and cfg["num_speculative_tokens"] == 4
    np.testing.assert_allclose(cfg["synthetic_acceptance_rates"], np.cumprod(alpha["code"]), atol=1e-6)
    assert exported["synthetic_acceptance_length"]["chat"] == pytest.approx(1 + np.cumprod(alpha["chat"]).sum(),
                                                                          abs=1e-5)
    p = tmp_path / "vllm.json"
    p.write_text(json.dumps(exported))
    back = read_vllm_synthetic(p)
    for dom in alpha:
        np.testing.assert_allclose(back[dom].survival, np.cumprod(alpha[dom]), atol=1e-6)
        np.testing.assert_allclose(back[dom].conditional, alpha[dom], atol=1e-5)
    # one bare --speculative-config object reads back too
    p.write_text(json.dumps(cfg))
    np.testing.assert_allclose(load_acceptance(p, "vllm-synthetic")["vllm"].survival, cfg["synthetic_acceptance_rates"])


def test_import_export_import_of_a_bench_result(tmp_path):
    first = read_vllm_bench_result(DATA / "vllm_bench_result.json")
    p = tmp_path / "x.json"
    p.write_text(json.dumps(export_acceptance(first, "bench")))
    np.testing.assert_allclose(read_vllm_synthetic(p)["eagle3-k3"].survival, [0.8, 0.6, 0.4])


def test_deepspec_names_of_a_survival():
    m = deepspec_metrics([0.8, 0.6, 0.4])
    assert m["accept_len"] == pytest.approx(2.8)
    assert m["verify_rate"] == pytest.approx(2.8 / 4)
    assert m["accept_rate@2"] == pytest.approx(0.4)


def test_run_acceptance_from_a_step_log_by_hand():
    # four request-steps of one domain, gamma 2: verify_len / num_accepted = 2/2, 2/0, 1/1, 0/0
    log = pd.DataFrame({"gamma": [2, 2, 2, 2], "verify_len": [2, 2, 1, 0], "num_accepted": [2, 0, 1, 0],
                        "domain": ["chat"] * 4})
    per = run_acceptance(log)["chat"]
    assert per["num_drafts"] == 3
    assert per["verified_per_pos"] == [3, 2] and per["accepted_per_pos"] == [2, 1]
    assert per["accept_rate_at_pos"] == pytest.approx([2 / 3, 1 / 2])
    # alpha_2 = accepted at 2 / (verified at 2 with position 1 accepted) = 1 / 1
    assert per["conditional"] == pytest.approx([2 / 3, 1.0])
    assert per["survival"] == pytest.approx([2 / 3, 2 / 3])
    steps = pd.DataFrame({"num_decode": [3], "verified_drafts": [5], "accepted_drafts": [3]})
    rep = acceptance_report(log, steps)
    assert rep["vllm"]["spec_decode_acceptance_rate"] == pytest.approx(60.0)
    assert rep["deepspec"]["accept_len"] == pytest.approx(2.0)
    assert rep["deepspec"]["verify_rate"] == pytest.approx(6 / 8)
    assert rep["deepspec"]["accept_rate@0"] == pytest.approx(2 / 3)


def test_a_run_reports_vllm_and_deepspec_names_and_exports(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    tr = synth_trace(40, rate=4.0, seed=3)
    res = simulate(tr, "static", seed=1, gamma=3, record_step_log=True)
    ex = res.summary["acceptance_exchange"]
    assert ex["deepspec"]["accept_len"] == pytest.approx(res.summary["mean_acceptance_length"])
    assert ex["vllm"]["spec_decode_acceptance_rate"] == pytest.approx(100 * res.summary["acceptance_rate"])
    rates = ex["vllm"]["spec_decode_per_position_acceptance_rates"]
    # static verification: the per-position rates are the survival, up to the steps whose verify length was cut
    # at the end of a request's output (those enter vLLM's denominator, not the conditional estimate's)
    assert rates == pytest.approx(ex["synthetic_acceptance_rates"], abs=0.02)
    assert ex["vllm"]["spec_decode_num_drafts"] == len(res.step_log)          # one draft per request-step
    assert 1 + sum(rates) == pytest.approx(ex["vllm"]["spec_decode_acceptance_length"], rel=1e-9)
    res.save(tmp_path / "run")
    _register()
    r = CliRunner().invoke(app, ["export-acceptance", "--run", str(tmp_path / "run"), "--out", str(tmp_path / "e.json")])
    assert r.exit_code == 0, r.output
    back = read_vllm_synthetic(tmp_path / "e.json")
    np.testing.assert_allclose(back["all"].survival, ex["synthetic_acceptance_rates"], atol=1e-6)


def test_cli_counters_formats_and_model_export(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    run = CliRunner().invoke
    r = run(app, ["counters", str(DATA / "vllm_bench_result.json"), "--format", "vllm-bench", "--domain", "code",
                  "--out", str(tmp_path / "t.json")])
    assert r.exit_code == 0, r.output
    table = json.loads((tmp_path / "t.json").read_text())
    assert table["alpha"]["code"] == pytest.approx([0.8, 0.75, 0.666667], abs=1e-6)
    r = run(app, ["counters", str(DATA / "specbench_answers.jsonl"), "--format", "specbench", "--num-spec-tokens",
                  "3", "--out", str(tmp_path / "s.json")])
    assert r.exit_code == 0 and set(json.loads((tmp_path / "s.json").read_text())["alpha"]) == {"writing", "math"}
    r = run(app, ["export-acceptance", "--table", str(tmp_path / "t.json"), "--out", str(tmp_path / "e.json")])
    assert r.exit_code == 0, r.output
    e = json.loads((tmp_path / "e.json").read_text())
    assert e["speculative_config"]["code"]["synthetic_acceptance_rates"] == pytest.approx([0.8, 0.6, 0.4], abs=1e-5)
    assert e["deepspec"]["code"]["accept_len"] == pytest.approx(2.8, abs=1e-5)
    r = run(app, ["export-acceptance", "--drafter", "eagle3", "--gamma", "3", "--out", str(tmp_path / "m.json")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "m.json").read_text())
    from specsim.acceptance.fitting import resolve_acceptance_model
    from specsim.scenario import load_scenario
    model = resolve_acceptance_model("eagle3", 3, **load_scenario().to_dict()["acceptance"])
    for dom, cfg in m["speculative_config"].items():
        assert cfg["synthetic_acceptance_rates"] == pytest.approx(np.cumprod(model.alpha[dom][:3]), abs=1e-6)
