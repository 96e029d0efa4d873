"""`specsim run` from the command line: output formats, records, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import sys

import pandas as pd
import pytest

from conftest import REPO
from specsim.cli import main

PROD = str(REPO / "traces" / "prod.jsonl")


def run_cli(monkeypatch, capsys, *args):
    monkeypatch.setattr(sys, "argv", ["specsim", *args])
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_json_and_records(monkeypatch, capsys, tmp_path):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--policy", "dspark", "--num-requests",
                             "40", "--json", "--out", str(tmp_path / "o"), "--seed", "3")
    assert code == 0, err
    s = json.loads(out)
    assert s["completed"] == 40 and s["policy"] == "dspark" and s["seed"] == 3
    prov = json.loads((tmp_path / "o" / "summary.json").read_text())["provenance"]
    assert prov["trace_hash"] and prov["scenario_hash"] and "h100" in prov["profile_source"]
    req = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    steps = pd.read_parquet(tmp_path / "o" / "steps.parquet")
    log = pd.read_parquet(tmp_path / "o" / "step_log.parquet")
    assert len(req) == 40 and steps.emitted_tokens.sum() + 40 == req.output_tokens.sum()
    assert (log.num_accepted <= log.verify_len).all() and len(log) == steps.num_decode.sum()


def test_run_table_output(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--policy", "mtp1", "--num-requests",
                             "20", "--concurrency", "2")
    assert code == 0, err
    assert "mean_tps_per_user" in out and "per domain" in out and "closed loop, 2 users" in out


def _write(path, text):
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("args, message", [
    (["--policy", "nope"], "field 'policy'"),
    (["--drafter", "nope"], "drafter"),
    (["--set", "engine.gamma=-1"], "engine.gamma"),
    (["--set", "cluster.router=random"], "cluster.router"),
    (["--set", "nosection.key=1"], "nosection"),
    (["--set", "engine.gamma"], "section.key=value"),
    (["--set", "profile.name=/no/such/profile.json"], "profile"),
    (["--rate-scale", "0"], "rate_scale"),
    (["--num-requests", "0"], "--num-requests"),
    (["--gamma", "-1"], "gamma"),
    (["--max-sim-s", "0"], "max_sim_s"),
    (["--policy", "threshold", "--threshold", "1.5"], "threshold"),
    (["--policy", "specdecpp", "--threshold", "5"], "threshold"),
    (["--policy", "mine.py"], "needs ':Name'"),
])
def test_bad_options_one_line_exit_2(monkeypatch, capsys, args, message):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--num-requests", "5", *args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("content, message", [
    ('{"arrival_s": 0, "prompt_tokens": 5}\n', "line 1"),
    ('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 3}\n{"arrival_s": 0, "prompt_tokens": 5,\n',
     "line 2"),
    ("", "empty"),
])
def test_bad_trace_one_line_exit_2(monkeypatch, capsys, tmp_path, content, message):
    trace = _write(tmp_path / "t.jsonl", content)
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", trace)
    assert code == 2 and message in err.lower() and "Traceback" not in err


def test_bad_scenario_and_profile_files(monkeypatch, capsys, tmp_path):
    scen = _write(tmp_path / "s.toml", "[engine]\ngamma = \"seven\"\n")
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--scenario", scen)
    assert code == 2 and "engine.gamma" in err and str(scen) in err
    scen = _write(tmp_path / "s2.toml", "[engine\ngamma = 3\n")
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--scenario", scen)
    assert code == 2 and "line 1" in err
    prof = _write(tmp_path / "p.json", json.dumps({"batch_tokens": [1, 2, 2], "step_time_s": [1, 2, 3]}))
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--set", f"profile.name={prof}")
    assert code == 2 and "batch_tokens[2]" in err
    prof = _write(tmp_path / "p2.json", json.dumps({"batch_tokens": [1, 2], "step_time_s": [1, None]}))
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--set", f"profile.name={prof}")
    assert code == 2 and "step_time_s[1]" in err


def test_plugin_policy_by_path(monkeypatch, capsys, tmp_path):
    plug = _write(tmp_path / "mine.py", "import numpy as np\n"
                  "def half(view):\n    return np.full(view.num_requests, view.gamma // 2)\n")
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--num-requests", "10", "--json",
                             "--policy", f"{plug}:half")
    assert code == 0, err
    s = json.loads(out)
    assert s["policy"] == "half" and s["mean_verify_tokens_per_request"] <= 4.0 + 1e-9
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--policy", f"{plug}:missing")
    assert code == 2 and "missing" in err


def test_compare_rejects_non_positive_tiers(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(monkeypatch, capsys, "compare", str(tmp_path), "--tiers", "-5")
    assert code == 2 and "tiers" in err and "Traceback" not in err
