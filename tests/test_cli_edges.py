"""Fresh users' edge cases (two reviews of 2026-12-06): every output path checked before work, corrupt sweep
records named, knobs and counts that would change nothing refused, ``python -m specsim``, and the Python API taking
what a notebook passes (or naming what it cannot)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers import run_cli
from specsim.errors import SpecsimInputError
from specsim.workload import save_trace, synth_trace

DATA = Path(__file__).parent / "data"
STEPS = DATA / "step_points" / "steps.csv"


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("tr") / "t.jsonl"
    save_trace(synth_trace(16, rate=4.0, seed=3), p)
    return p


@pytest.mark.parametrize("args", [
    ["profile", "analytic", "--model", "qwen3-8b", "--gpu", "h100", "--out", "{f}/x.json"],
    ["profile", "fit", str(STEPS), "--model", "llama2-7b", "--gpu", "h100", "--out", "{f}/fit.json"],
    ["profile", "show", "h100-llama2-7b-tp1-vidur", "--png", "{f}/a.png"],
    ["plot", "{d}", "--out", "{f}/plots"],
    ["report", "{d}", "--out", "{f}/r.html"],
    ["counters", str(DATA / "step_points" / "vllm_metrics_phase1.prom"), "--out", "{f}/r.json"],
    ["scenario", "schema", "--out", "{f}/s.json"],
])
def test_an_output_under_a_file_is_one_line_before_any_work(args, tmp_path, capsys):
    """Each of these wrote its output at the end and died with a FileNotFoundError / NotADirectoryError
    traceback; now the path is checked first, as ``run --out`` checks it."""
    f = tmp_path / "a_file"
    f.write_text("x")
    rc = run_cli([a.format(f=f, d=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert rc == 2
    assert "not under a file" in err and str(f) in err and "Traceback" not in err


def test_a_missing_output_folder_is_created_and_said(tmp_path, capsys):
    dest = tmp_path / "new" / "deeper" / "x.json"
    assert run_cli(["profile", "analytic", "--model", "qwen3-8b", "--gpu", "h100", "--out", str(dest)]) == 0
    assert dest.is_file()
    assert f"created folder {dest.parent}" in capsys.readouterr().err


def test_compare_names_a_point_record_it_cannot_read(trace_file, tmp_path, capsys):
    """A cut-off record was skipped in silence: its load vanished from the frontier without a word."""
    out = tmp_path / "sw"
    assert run_cli(["sweep", "--trace", str(trace_file), "--out", str(out), "--policies", "mtp1", "--concurrency",
                    "1,2", "--num-requests", "8", "--executor", "serial", "--quiet"]) == 0
    bad = sorted((out / "points").glob("*.json"))[0]
    bad.write_text('{"broken": ')
    capsys.readouterr()
    assert run_cli(["compare", str(out), "--tiers", "10"]) == 0
    err = capsys.readouterr().err
    assert "1 point record cannot be read" in err and str(bad) in err


def test_mtp1_and_none_have_no_gamma_knob_to_tune():
    """``tune --policy mtp1 --knob gamma=1:3`` ran 18 points of one configuration and named a 'best gamma'."""
    from specsim.sweep.knobs import parse_knob

    for policy in ("mtp1", "none"):
        with pytest.raises(SpecsimInputError, match="gamma is fixed"):
            parse_knob("gamma=1:3", policy)
    assert parse_knob("gamma=1:3", "static").values() == (1, 2, 3)
    with pytest.raises(SpecsimInputError, match="knob-points"):
        parse_knob("threshold=0.05:0.95", "specdecpp", 0)      # was read as the default 10 values


def test_sweep_refuses_a_threshold_no_policy_takes_and_zero_jobs(trace_file, tmp_path, capsys):
    base = ["sweep", "--trace", str(trace_file), "--out", str(tmp_path / "x"), "--concurrency", "1",
            "--num-requests", "8"]
    assert run_cli([*base, "--policies", "dspark", "--threshold", "0.2,0.4"]) == 2
    assert "takes a threshold knob" in capsys.readouterr().err
    assert run_cli([*base, "--policies", "mtp1", "--jobs", "0"]) == 2
    assert not (tmp_path / "x").exists()


def test_an_empty_list_item_is_a_typo():
    from specsim.cli.sweep_cmd import parse_list, parse_tiers

    assert parse_list("1,2,4,...,16", int, "concurrency") == [1, 2, 4, 8, 16]
    with pytest.raises(SpecsimInputError, match="tiers"):
        parse_tiers("100,,200")


def test_run_says_which_scenario_knobs_its_policy_does_not_use(trace_file, capsys):
    assert run_cli(["run", "--trace", str(trace_file), "--policy", "mtp1", "--set", "policy.knobs.threshold=0.5",
                    "--num-requests", "4"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "[policy.knobs] threshold is not a knob of policy mtp1" in err


def test_a_missing_step_log_says_so(tmp_path):
    from specsim.acceptance.steplog import read_step_logs

    with pytest.raises(SpecsimInputError, match="no such file"):
        read_step_logs([tmp_path / "nonexist.parquet"])


def test_profile_fit_warns_about_one_fitted_point_it_misses_by_far(tmp_path, capsys):
    """The docs' example fit has a median error of 8.6% but misses its B = 528 point by -50%."""
    assert run_cli(["profile", "fit", str(STEPS), "--model", "llama2-7b", "--gpu", "h100", "--params",
                    "bw_eff,per_request_step_s,kernel_s", "--out", str(tmp_path / "f.json")]) == 0
    cap = capsys.readouterr()
    err = " ".join((cap.out + cap.err).split())
    assert "misses 1 of its own points by more than 20% (worst B=528, -50.3%)" in err


def test_python_m_specsim_runs_the_cli():
    r = subprocess.run([sys.executable, "-m", "specsim", "policies"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "dspark" in r.stdout


# ------------------------------------------------------------------------------ the Python API (second review)
def test_sweep_spec_takes_one_value_or_comma_text_as_a_notebook_writes_it():
    """policies="mtp1" was iterated letter by letter, concurrency=2 raised a TypeError, seeds=0 read as no seed."""
    from specsim.sweep import SweepSpec

    spec = SweepSpec(policies="dspark, mtp1", concurrency=2, seeds=0)
    assert (spec.policies, spec.concurrency, spec.seeds) == (("dspark", "mtp1"), (2,), (0,))
    assert SweepSpec(policies=("mtp1",), concurrency=(1, 2), gammas=3).gammas == (3,)
    with pytest.raises(SpecsimInputError, match="concurrency.*ints"):
        SweepSpec(policies=("mtp1",), concurrency=(2.5,))


def test_run_sweep_and_tune_take_a_scenario_path_or_none_and_a_trace_path(trace_file, tmp_path):
    """As simulate does: run_sweep(spec, None, "t.jsonl", dir) failed with AttributeError deep in the sweep."""
    from specsim.sweep import SweepSpec, run_sweep

    out = run_sweep(SweepSpec(policies="mtp1", concurrency=1, num_requests=6), None, str(trace_file), tmp_path / "s",
                    executor="serial")
    assert out.computed == 1 and not out.failed
    with pytest.raises(SpecsimInputError, match="scenario"):
        run_sweep(SweepSpec(policies="mtp1", concurrency=1), 3, trace_file, tmp_path / "s2", executor="serial")
    with pytest.raises(SpecsimInputError, match="trace"):
        run_sweep(SweepSpec(policies="mtp1", concurrency=1), None, 3, tmp_path / "s3", executor="serial")


def test_compare_checks_its_latency_limits():
    from specsim.analysis.metrics import check_slos

    assert check_slos(None) == {} and check_slos({"ttft": 200, "tpot": 50.5}) == {"ttft": 200.0, "tpot": 50.5}
    for bad in ({"tfft": 200}, {"ttft_ms": 200}, {"ttft": -1}, {"e2el": float("nan")}, [("ttft", 1)]):
        with pytest.raises(SpecsimInputError, match="slos_ms"):
            check_slos(bad)


def test_api_arguments_of_the_wrong_type_are_named():
    from specsim.simulation import simulate

    for kw in (dict(rate="5"), dict(num_requests=10.5)):
        with pytest.raises(SpecsimInputError, match=next(iter(kw))):
            synth_trace(**{"num_requests": 10, "rate": 5.0, **kw})
    with pytest.raises(SpecsimInputError, match="progress"):
        simulate(synth_trace(4, 1.0), "mtp1", progress=3)


def test_a_horizon_that_leaves_most_requests_running_is_warned():
    from specsim.analysis.metrics import horizon_warning

    assert horizon_warning({"completed": 13, "unfinished": 157}).startswith(
        "warning: 157 of the 170 issued requests (92%) were still running at the horizon")
    assert horizon_warning({"completed": 95, "unfinished": 5}) is None and horizon_warning({}) is None


def test_a_sweep_reader_given_a_file_says_so(trace_file):
    from specsim.analysis.sweep_records import load_records

    with pytest.raises(SpecsimInputError, match="got a file"):
        load_records(trace_file)


def test_recommend_names_a_tier_no_policy_meets_beside_those_it_answers(trace_file, tmp_path, capsys):
    """recommend --tiers 600,560 printed the 560 answer and dropped 600 without a word."""
    out = tmp_path / "sw"
    assert run_cli(["sweep", "--trace", str(trace_file), "--out", str(out), "--policies", "mtp1", "--concurrency",
                    "1,2", "--num-requests", "8", "--executor", "serial", "--quiet"]) == 0
    capsys.readouterr()
    assert run_cli(["recommend", str(out), "--tiers", "100000,1"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "tier 1 tok/s/user: mtp1" in text
    assert "tier 100000 tok/s/user: no deployable policy meets it: the sweep's fastest point runs" in text


def test_a_sweep_point_a_horizon_cut_off_is_named_like_the_run_names_it(trace_file, tmp_path, capsys):
    """A run warned of 92% unfinished requests; the same point in a sweep went into the frontier unremarked."""
    out = tmp_path / "sw"
    assert run_cli(["sweep", "--trace", str(trace_file), "--out", str(out), "--policies", "none", "--rate-scales",
                    "50", "--max-sim-s", "0.3", "--executor", "serial", "--quiet"]) == 0
    capsys.readouterr()
    run_cli(["compare", str(out), "--tiers", "1"])
    cap = capsys.readouterr()
    err = " ".join((cap.out + cap.err).split())
    assert "warning: cut off at 1 point (none at 50): the horizon (--max-sim-s) left more than 10%" in err
