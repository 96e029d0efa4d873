"""--metric-percentiles and CSV files for run, sweep and compare (issue 23)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specsim.analysis.metrics import latency_stats, parse_percentiles
from specsim.analysis.tables_out import summary_row
from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.simulation import simulate
from specsim.workload import save_trace, synth_trace

_register()


def test_parse_percentiles_like_vllm():
    assert parse_percentiles("99,50,90") == (50.0, 90.0, 99.0)
    assert parse_percentiles("99.9") == (99.9,)
    for bad in ("0", "101", "x"):
        with pytest.raises(SpecsimInputError, match="metric-percentiles"):
            parse_percentiles(bad)


def test_latency_stats_chosen_percentiles_by_hand():
    out = latency_stats("ttft", np.array([1.0, 2.0, 3.0, 4.0]), (50.0, 90.0))
    # linear interpolation: p50 of 1,2,3,4 = 2.5; p90 = 1 + 0.9 * 3 = 3.7 (seconds -> ms)
    assert out["p50_ttft_ms"] == pytest.approx(2500.0)
    assert out["p90_ttft_ms"] == pytest.approx(3700.0)
    assert "p99_ttft_ms" not in out


def test_simulate_adds_chosen_percentiles_and_keeps_the_defaults():
    res = simulate(synth_trace(30, rate=5.0, seed=2), "static", seed=0, gamma=2, metric_percentiles=(95.0, 75.0))
    s, rq = res.summary, res.requests
    done = rq[rq.status == "completed"]
    assert s["p95_ttft_ms"] == pytest.approx(np.percentile(done.ttft_s, 95) * 1e3)
    assert s["p75_e2el_ms"] == pytest.approx(np.percentile(done.e2el_s, 75) * 1e3)
    assert s["p99_ttft_ms"] == pytest.approx(np.percentile(done.ttft_s, 99) * 1e3)


def test_summary_row_flattens_scalars():
    row = summary_row({"a": 1, "b": {"c": 2.5, "d": [1, 2]}, "e": None})
    assert row == {"a": 1, "b.c": 2.5, "e": None}


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory):
    p = tmp_path_factory.mktemp("tr") / "t.jsonl"
    save_trace(synth_trace(40, rate=6.0, seed=4), p)
    return p


def test_run_csv_and_percentiles(tmp_path, small_trace):
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["run", "--trace", str(small_trace), "--policy", "static", "--gamma", "2",
                                 "--out", str(out), "--csv", "--metric-percentiles", "50,95", "--json"])
    assert r.exit_code == 0, r.output
    summary = json.loads((out / "summary.json").read_text())
    row = pd.read_csv(out / "summary.csv").iloc[0]
    assert row["p95_ttft_ms"] == pytest.approx(summary["p95_ttft_ms"])
    assert row["output_throughput"] == pytest.approx(summary["output_throughput"])
    assert len(pd.read_csv(out / "requests.csv")) == 40
    assert len(pd.read_csv(out / "steps.csv")) == summary["steps"]


def test_run_csv_needs_out(small_trace):
    r = CliRunner().invoke(app, ["run", "--trace", str(small_trace), "--csv"])
    assert r.exit_code != 0


def test_sweep_and_compare_csv(tmp_path, small_trace):
    out = tmp_path / "sw"
    r = CliRunner().invoke(app, ["sweep", "--trace", str(small_trace), "--out", str(out), "--policies", "static",
                                 "--rate-scales", "1,2", "--executor", "serial", "--quiet", "--csv",
                                 "--metric-percentiles", "50,95,99"])
    assert r.exit_code == 0, r.output
    res = pd.read_csv(out / "results.csv")
    assert len(res) == 2
    assert "p99_ttft_ms" in res.columns and not [c for c in res.columns if c.endswith(("_x", "_y"))]
    for _, row in res.iterrows():
        rec = json.loads((out / "points" / f"{row['id']}.json").read_text())
        assert row["p95_ttft_ms"] == pytest.approx(np.percentile(rec["latencies"]["ttft_ms"], 95))
        assert row["p50_e2el_ms"] == pytest.approx(np.percentile(rec["latencies"]["e2el_ms"], 50))
    loads = pd.read_csv(out / "load_percentiles.csv")
    assert sorted(loads["load"]) == [1.0, 2.0]
    r = CliRunner().invoke(app, ["compare", str(out), "--tiers", "20,40", "--csv", str(tmp_path / "cmp.csv"),
                                 "--metric-percentiles", "90", "--json"])
    assert r.exit_code == 0, r.output
    js = json.loads(r.stdout)
    assert {x["load"] for x in js["latency_percentiles"]} == {1.0, 2.0}
    tab = pd.read_csv(tmp_path / "cmp.csv")
    assert set(tab.tier) == {20.0, 40.0} and set(tab.curve) == {"static"}
    assert "p90_ttft_ms" in pd.read_csv(tmp_path / "cmp_percentiles.csv").columns
