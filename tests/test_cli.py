"""The command line: `specsim run` output and records, one-line errors with exit code 2, exit statuses,\nnumber formatting, and the library calls behind `counters` and `profile import-vidur`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO
from specsim import fmt
from specsim.cli import main
from specsim.errors import SpecsimInputError

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


def test_run_without_policy_runs_the_default_the_frontiers_chose(monkeypatch, capsys):
    # issue 21: the deployable policy that wins the most tiers across the three frontiers (docs/policies.md)
    from specsim.cli.run_cmd import DEFAULT_POLICY
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--num-requests", "10", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert DEFAULT_POLICY == "dspark-async" and s["policy"] == "dspark-async"
    # one of the ten exceeds Llama-2-7B's 4,096-token window: refused, the other nine served
    assert (s["completed"], s["unservable"]) == (9, 1)


def test_run_json_and_records(monkeypatch, capsys, tmp_path):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--policy", "dspark", "--num-requests",
                             "40", "--json", "--out", str(tmp_path / "o"), "--seed", "3")
    assert code == 0, err
    s = json.loads(out)
    # 6 of the 40 exceed Llama-2-7B's 4,096-token window: unservable, the 34 others completed
    assert (s["completed"], s["unservable"]) == (34, 6) and s["policy"] == "dspark" and s["seed"] == 3
    prov = json.loads((tmp_path / "o" / "summary.json").read_text())["provenance"]
    assert prov["trace_hash"] and prov["scenario_hash"] and "h100" in prov["profile_source"]
    req = pd.read_parquet(tmp_path / "o" / "requests.parquet")
    steps = pd.read_parquet(tmp_path / "o" / "steps.parquet")
    log = pd.read_parquet(tmp_path / "o" / "step_log.parquet")
    done, refused = req[req.status == "completed"], req[req.status == "unservable"]
    assert len(req) == 40 and len(refused) == 6 and refused.unservable_reason.str.contains("max_model_len 4096").all()
    assert steps.emitted_tokens.sum() + len(done) == done.output_tokens.sum()      # + each prefill's first token
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


def test_repeated_tiers_count_once():
    from specsim.cli.sweep_cmd import parse_tiers

    assert parse_tiers("100,100,50,100") == [100.0, 50.0]        # a fresh user's 100,100 printed every row twice


# ------------------------------------------------------------------ exit codes in a fresh interpreter

def _specsim(*args: str, code: str = "from specsim.cli import main; main()"):
    """Run the command line in a subprocess (the installed entry point's code); (status, stdout, stderr)."""
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                       cwd=REPO, env={**os.environ, "COLUMNS": "60"})
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args, message", [
    (["run", "--bogus"], "No such option: --bogus"),
    (["nocmd"], "No such command 'nocmd'"),
    (["run", "--policy", "dspark"], "Missing option '--trace'"),
    (["run", "--trace", PROD, "--seed", "x"], "Invalid value for '--seed'"),
    (["trace", "convert", "a", "b", "--from", "nope"], "'--from'"),
    (["trace", "synth", "--num-requests", "5", "--rate", "1", "--out", "x.jsonl", "--arrival", "gamma"], "cv"),
    (["run", "--trace", "no/such/trace.jsonl"], "no/such/trace.jsonl"),
])
def test_usage_and_input_errors_one_line_exit_2(args, message):
    code, out, err = _specsim(*args)
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("specsim: error: ") and message in err


def test_help_exits_0_and_bare_group_prints_help():
    code, out, err = _specsim("--help")
    assert code == 0 and "run" in out and "policies" in out and err == ""
    code, out, err = _specsim("profile")                     # a group without its command: help, status 2
    assert code == 2 and "import-vidur" in out and "Traceback" not in err


EXIT_APP = """
import sys, typer
from specsim.cli import app, main

@app.command("exit3")
def exit3() -> None:
    raise typer.Exit(3)

@app.command("interrupt")
def interrupt() -> None:
    raise KeyboardInterrupt

@app.command("interrupt-in-compiled")
def interrupt_in_compiled() -> None:
    # what numba raises when Ctrl-C lands while a compiled function returns (a fresh user saw its traceback)
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set")

@app.command("ok")
def ok() -> None:
    print("fine")

main()
"""


@pytest.mark.parametrize("command, status", [("exit3", 3), ("interrupt", 130), ("interrupt-in-compiled", 130),
                                             ("ok", 0)])
def test_main_propagates_the_app_status(command, status):
    code, out, err = _specsim(command, code=EXIT_APP)
    assert code == status and "Traceback" not in err
    assert ("fine" in out) == (command == "ok")
    assert ("specsim: interrupted" in err) == (status == 130)


# ------------------------------------------------------------------ number formatting (specsim.fmt)

def test_fmt_rules():
    assert fmt.number(12345.678) == "12,345.7" and fmt.number(2.5, 0) == "2" and fmt.number(7, 2) == "7.00"
    assert fmt.number(np.float32(0.5), 3) == "0.500" and fmt.number(np.int64(1234), 0) == "1,234"
    for missing in (None, math.nan, math.inf, -math.inf, np.nan):
        assert fmt.number(missing) == fmt.percent(missing) == fmt.value(missing) == fmt.MISSING == "-"
    assert fmt.percent(0.1234) == "12.3%" and fmt.percent(-0.05, signed=True) == "-5.0%"
    assert fmt.percent(0.25, 0, signed=True) == "+25%" and fmt.percent(1) == "100.0%"
    assert fmt.value(0.71234) == "0.712" and fmt.value(99.9994) == "99.999" and fmt.value(100.0) == "100.0"
    assert fmt.value(-1234.56) == "-1,234.6" and fmt.value(1234) == "1,234" and fmt.value(np.int64(7)) == "7"
    assert fmt.value(True) == "True" and fmt.value("dspark") == "dspark"
    with pytest.raises((TypeError, ValueError)):
        fmt.number("12")


def test_help_constants_match_the_library():
    from specsim.acceptance.calibration import N_BINS
    from specsim.cli.calibrate_cmd import DEFAULT_BINS
    from specsim.cli.trace_cmd import DOMAINS
    from specsim.workload import LENGTH_MODELS
    assert DEFAULT_BINS == N_BINS and DOMAINS == tuple(LENGTH_MODELS)


# ------------------------------------------------------------------ counters and Vidur layout through the CLI

def test_counters_command_writes_the_rate_table(monkeypatch, capsys, tmp_path):
    csv = _write(tmp_path / "c.csv", "config_id,num_spec_tokens,frac_drafts_accepting_pos1,"
                 "frac_drafts_accepting_pos2\na,2,0.8,0.6\nb,2,0.5,0.0\na,2,0.9,0.45\n")
    out = tmp_path / "t" / "table.json"
    code, o, err = run_cli(monkeypatch, capsys, "counters", csv, "--out", str(out))
    assert code == 0, err
    t = json.loads(out.read_text())
    assert list(t["alpha"]) == ["a", "b", "a-2"] and t["source"] == "c.csv"
    assert t["alpha"]["a"] == [0.8, 0.75] and t["alpha"]["a-2"] == [0.9, 0.5]
    assert t["alpha"]["b"] == [0.5, 1e-4]                      # a zero rate is clipped to the floor
    assert t["mean_acceptance_length"]["a"] == pytest.approx(2.4)
    assert "a: 0.800 0.750  (tau 2.400)" in o
    code, _, err = run_cli(monkeypatch, capsys, "counters", csv, "--out", str(out), "--config", "zzz")
    assert code == 2 and "zzz" in err


def test_vidur_layout_names_and_errors(tmp_path):
    from specsim.hardware.vidur import import_vidur_files, vidur_profile_name
    mlp = tmp_path / "h100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"
    assert vidur_profile_name(mlp, "h100", 2) == "h100-llama2-7b-tp2"
    assert vidur_profile_name(tmp_path / "Some-Model" / "mlp.csv", "a100", 1, True) == "a100-some-model-tp1-vidur"
    with pytest.raises(SpecsimInputError, match="none found"):
        import_vidur_files(tmp_path)                             # no compute/<gpu>/<org>/<model>/mlp.csv
    with pytest.raises(SpecsimInputError, match="field 'gpu'"):
        import_vidur_files(tmp_path, [Path("mlp.csv")])          # outside the layout and no --gpu


def test_import_vidur_command(monkeypatch, capsys, tmp_path, shared):
    monkeypatch.setenv("SPECSIM_SHARED", str(shared))
    mlp = shared / "data/profiles/vidur/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv"
    code, o, err = run_cli(monkeypatch, capsys, "profile", "import-vidur", "--mlp", str(mlp), "--tp", "1",
                           "--out", str(tmp_path))
    assert code == 0, err
    prof = json.loads((tmp_path / "h100-llama2-7b-tp1.json").read_text())
    assert prof["metadata"]["num_layers"] == 32 and prof["metadata"]["tp"] == 1
    md = prof["metadata"]
    assert md["source"] == "shared/data/profiles/vidur/compute/h100/meta-llama/Llama-2-7b-hf/mlp.csv"
    assert md["allreduce_source"] is None                    # TP 1: no all-reduce
    assert "shared/anchors/vidur_run/vidur_attention_a100" in md["attention_note"]   # the layout's anchor
    code, _, err = run_cli(monkeypatch, capsys, "profile", "import-vidur", "--out", str(tmp_path))
    assert code == 2 and "--mlp" in err


# ------------------------------------------------------------------ tables at any width, scopes, conflicts, provenance
DATA = REPO / "tests" / "data"
FLAT20 = ["--set", f"profile.name={DATA / 'flat20ms_profile.json'}", "--set", "engine.host_overhead_s=0",
          "--set", "engine.request_overhead_s=0", "--set", "drafter.base_fraction=0",
          "--set", "drafter.per_draft_fraction=0", "--set", "prefill.time_per_token_s=0.0009765625"]


def _specsim_at(columns: int, *args: str):
    p = subprocess.run([sys.executable, "-c", "from specsim.cli import main; main()", *args], capture_output=True,
                       text=True, timeout=300, cwd=REPO, env={**os.environ, "COLUMNS": str(columns)})
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("columns", [40, 80, 200])
def test_run_tables_show_every_name_and_number_whole(columns):
    from specsim.cli.run_cmd import DOMAIN_COLUMNS, SUMMARY_ROWS, WINDOW_ROWS

    args = ["run", "--trace", PROD, "--policy", "dspark", "--num-requests", "24", "--concurrency", "3"]
    code, out, err = _specsim_at(columns, *args, "--json")
    assert code == 0, err
    s = json.loads(out)
    code, out, err = _specsim_at(columns, *args)
    assert code == 0, err
    tokens = set(out.split())
    for k in SUMMARY_ROWS:
        if k in s and k != "wall_time_s":
            assert k in tokens and fmt.value(s[k]) in tokens, (k, columns)
    for k in (k for k in WINDOW_ROWS if k in s["window"]):
        assert k in tokens and fmt.value(s["window"][k]) in tokens, (k, columns)
    for dom, m in s["per_domain"].items():
        assert dom in tokens
        for c in DOMAIN_COLUMNS:
            assert c in tokens and fmt.value(m[c]) in tokens, (dom, c, columns)
    assert max(len(line) for line in out.splitlines()) <= columns


@pytest.mark.parametrize("width", [40, 80, 200])
def test_fmt_table_never_cuts_a_word(width):
    cols = ["domain", "requests", "mean_ttft_ms", "mean_acceptance_length", "a_really_long_metric_name_of_38_chars"]
    rows = [["chat", "12", "123,456.789", "3.210", "1"], ["code-with-a-long-domain-name", "4", "1.5", "4.5", "-"]]
    text = fmt.table(cols, rows, title="a title that is long enough to wrap at forty columns for sure", width=width,
                     notes=["a note that says what the columns mean, in words that wrap at spaces only"])
    tokens = set(text.replace(" / ", " ").split())          # the stacked fallback heads "domain / column"
    assert set(cols) <= tokens and {c for r in rows for c in r} <= tokens
    assert max(len(line) for line in text.splitlines()) <= width
    # a table that fits is one line per row, numbers right-aligned under a rule
    assert fmt.table(["a", "b"], [["x", "1"], ["y", "22"]], width=width).splitlines() == [
        "a   b", "-----", "x   1", "y  22"]
    # too wide for one table: the value columns are split, every split repeats the key column
    split = fmt.table(["k", "v1", "v2"], [["row", "1" * 15, "2" * 15]], width=25).split("\n\n")
    assert len(split) == 2 and all(part.splitlines()[2].startswith("row") for part in split)


def test_closed_loop_json_scopes(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", str(DATA / "closed_loop_tail.jsonl"), "--policy",
                             "none", "--concurrency", "1", *FLAT20, "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["completed"] == 3 and s["total_output_tokens"] == 555
    assert s["duration_s"] == pytest.approx(11.2275) and round(s["output_throughput"], 2) == 49.43
    w = s["window"]
    assert (w["start_s"], w["end_s"]) == (pytest.approx(0.1425), pytest.approx(1.185))
    assert w["output_tokens"] == 50 and w["requests_issued"] == 2 and round(w["output_throughput"], 2) == 47.96


def test_goodput_in_vllms_form_is_the_repeated_option():
    from specsim.cli import vllm_goodput_args

    assert vllm_goodput_args(["run", "--goodput", "ttft:500", "tpot:10", "--json"]) == [
        "run", "--goodput", "ttft:500", "--goodput", "tpot:10", "--json"]
    # the quoted form and the repeated option are left as they are; a KEY:VALUE word elsewhere too
    assert vllm_goodput_args(["--goodput", "ttft:500 tpot:10"]) == ["--goodput", "ttft:500 tpot:10"]
    assert vllm_goodput_args(["--goodput", "--goodput", "ttft:1"]) == ["--goodput", "--goodput", "ttft:1"]
    assert vllm_goodput_args(["--trace", "ttft:1", "tpot:2"]) == ["--trace", "ttft:1", "tpot:2"]
    assert vllm_goodput_args(["--goodput=ttft:5", "e2el:9", "x.jsonl"]) == [
        "--goodput=ttft:5", "--goodput", "e2el:9", "x.jsonl"]


def test_help_lists_the_everyday_commands_first_and_flags_as_flags(monkeypatch, capsys):
    from specsim.cli import FIRST_COMMANDS

    import typer.main

    from specsim.cli import _register, app

    _register()
    group = typer.main.get_command(app)
    names = group.list_commands(None)
    first = [c for c in FIRST_COMMANDS if c in names]
    assert names[:len(first)] == first and names[len(first):] == sorted(names[len(first):])
    assert {"run", "sweep", "compare", "plot", "report"} <= set(first)
    code, out, _ = run_cli(monkeypatch, capsys, "--help")
    assert code == 0 and out.index(" run ") < out.index(" calibrate ")
    code, out, _ = run_cli(monkeypatch, capsys, "compare", "--help")
    json_line = next(line for line in out.splitlines() if "--json" in line)
    assert "<bool>" not in json_line and "bool" not in json_line.lower().split("print")[0]


def test_run_goodput_option(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", str(DATA / "closed_loop_tail.jsonl"), "--policy",
                             "none", "--concurrency", "1", *FLAT20, "--goodput", "e2el:1042.5", "--goodput", "ttft:100",
                             "--json")
    assert code == 0, err
    s = json.loads(out)
    # e2el 142.5, 1042.5, 10042.5 ms; every ttft 62.5 ms
    assert s["good_requests"] == 2 and s["request_goodput"] == pytest.approx(2 / 11.2275)
    assert s["window"]["good_requests"] == 1 and s["window"]["request_goodput"] == pytest.approx(1 / 1.0425)
    assert s["goodput_slos_ms"] == {"e2el": 1042.5, "ttft": 100.0}
    # vLLM's form: one --goodput, the pairs as separate words
    code, out2, err = run_cli(monkeypatch, capsys, "run", "--trace", str(DATA / "closed_loop_tail.jsonl"), "--policy",
                              "none", "--concurrency", "1", *FLAT20, "--goodput", "e2el:1042.5", "ttft:100", "--json")
    assert code == 0, err
    assert json.loads(out2)["good_requests"] == 2 and json.loads(out2)["goodput_slos_ms"] == s["goodput_slos_ms"]
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--goodput", "itl:5")
    assert code == 2 and "goodput" in err and len(err.strip().splitlines()) == 1


def test_horizon_includes_t_and_help_says_so(monkeypatch, capsys):
    flatbin = [a.replace("flat20ms_profile", "flat_binary_profile") for a in FLAT20]
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", str(DATA / "horizon_edge.jsonl"), "--policy",
                             "none", *flatbin, "--max-sim-s", "0.1875", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["completed"] == 1 and s["unfinished"] == 0
    code, out, _ = _specsim_at(400, "run", "--help")
    assert code == 0 and "The horizon includes T" in out and "finishes exactly at T is completed" in out


@pytest.mark.parametrize("args, message", [
    (["run", "--trace", str(DATA / "closed_loop_rate_scale.jsonl"), "--policy", "none", "--concurrency", "2",
      "--rate-scale", "4"], "--rate-scale in open loop only"),
    (["run", "--trace", PROD, "--policy", "none", "--gamma", "3"], "--policy none"),
    (["run", "--trace", PROD, "--policy", "mtp1", "--drafter", "dspark"], "--policy mtp1"),
    (["sweep", "--trace", PROD, "--out", "unused", "--rate-scales", "1", "--requests-per-user", "3"],
     "--requests-per-user with --concurrency"),
    (["run", "--trace", PROD, "--set", "engine.gamma=3", "--gamma", "5"], "--gamma 5 and --set engine.gamma=3"),
    (["run", "--trace", PROD, "--policy", "dspark-async", "--drafter", "none"], "drafter none drafts nothing"),
    (["run", "--trace", PROD, "--policy", "static", "--set", "drafter.name=none"], "field 'drafter.name'"),
    (["run", "--trace", PROD, "--set", "drafter.name = eagle3", "--drafter", "mtp"], "--drafter mtp and --set"),
    (["run", "--trace", PROD, "--max-model-len", "4096", "--set", "engine.max_model_len=8192"],
     "--max-model-len 4096 and --set engine.max_model_len=8192"),
])
def test_conflicting_options_exit_2_one_line(monkeypatch, capsys, args, message):
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_set_that_agrees_with_its_flag_runs(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--num-requests", "4", "--json",
                             "--set", "engine.gamma=+5", "--gamma", "5", "--set", "drafter.name='dspark'",
                             "--drafter", "dspark")
    assert code == 0, err
    assert json.loads(out)["gamma"] == 5


def test_sweep_concurrency_with_rate_scales_stays_allowed(monkeypatch, capsys, tmp_path):
    code, out, err = run_cli(monkeypatch, capsys, "sweep", "--trace", str(DATA / "closed_loop_rate_scale.jsonl"),
                             "--out", str(tmp_path / "s"), "--policies", "none", "--concurrency", "2",
                             "--rate-scales", "1", "--requests-per-user", "4", "--executor", "serial", *FLAT20,
                             "--goodput", "e2el:100000")
    assert code == 0, err
    assert "2 points: 2 computed" in " ".join(out.split())
    # the goodput table: every request of both points is good (e2el far below 100 s)
    tokens = set(out.split())
    assert {"request_goodput", "100.0%", "e2el<=100000ms;"} <= tokens


def test_provenance_records_the_effective_threshold(monkeypatch, capsys, tmp_path):
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--num-requests", "10", "--policy",
                             "specdecpp", "--threshold", "0.9", "--set", "policy.knobs.threshold=0.3", "--json",
                             "--out", str(tmp_path / "o"))
    assert code == 0, err
    for s in (json.loads(out), json.loads((tmp_path / "o" / "summary.json").read_text())):
        pv = s["provenance"]
        assert pv["effective"]["knobs"]["threshold"] == 0.9
        assert pv["scenario"]["policy"]["knobs"]["threshold"] == 0.9
        assert pv["command"]["options"]["threshold"] == 0.9
        assert pv["command"]["options"]["set"] == ["policy.knobs.threshold=0.3"]
        assert pv["effective"]["profile"]["lookup"] in ("linear", "padded")
        assert "extrapolate" in pv["effective"]["profile"]


def test_thrashing_warning_names_the_share_and_the_limit():
    from specsim.analysis.metrics import THRASHING_SHARE, thrashing_warning

    # the 64-user tour run: 217k tokens recomputed against 162k output tokens, 121 preemptions
    s = {"recomputed_tokens": 217_000, "total_output_tokens": 162_000, "num_preemptions": 121}
    w = thrashing_warning(s)
    assert w.startswith("warning: thrashing") and "217,000" in w and "162,000" in w and "134%" in w
    assert thrashing_warning({**s, "recomputed_tokens": int(THRASHING_SHARE * 162_000)}) is None   # at the limit
    assert thrashing_warning({**s, "recomputed_tokens": 0}) is None
    assert thrashing_warning({"total_output_tokens": 0, "recomputed_tokens": 5}) is None
    assert THRASHING_SHARE == 0.25


def test_trace_synth_span_says_the_rate_changed(monkeypatch, capsys, tmp_path):
    out = tmp_path / "t.jsonl"
    code, so, se = run_cli(monkeypatch, capsys, "trace", "synth", "--rate", "4", "--num-requests", "41", "--span",
                           "60", "--out", str(out))
    assert code == 0, se
    # 41 arrivals rescaled so the last is at 60 s: (41 - 1) / 60 req/s, not 4
    assert "warning: --span 60 rescaled" in se and f"{40 / 60:.3f} req/s" in se and "--rate 4" in se
    code, so, se = run_cli(monkeypatch, capsys, "trace", "synth", "--rate", "4", "--num-requests", "41", "--out",
                           str(out))
    assert code == 0 and "warning" not in se


def test_run_says_where_every_file_went(monkeypatch, capsys, tmp_path):
    ev, out = tmp_path / "ev.json", tmp_path / "run"
    code, so, se = run_cli(monkeypatch, capsys, "run", "--trace", str(DATA / "closed_loop_tail.jsonl"), "--policy",
                           "none", "--concurrency", "1", *FLAT20, "--out", str(out), "--trace-events", str(ev),
                           "--result-format", "vllm", "--json")
    assert code == 0, se
    json.loads(so)                                      # stdout stays one JSON object
    written = {line.rsplit("written to ", 1)[1] for line in se.splitlines() if "written to " in line}
    on_disk = {str(p) for p in out.iterdir()} | {str(ev)}
    assert written == on_disk


def test_a_misspelt_policy_knob_exits_2_naming_the_closest_knob(monkeypatch, capsys):
    """Issue 24 item 10: a typo in ``--set policy.knobs.*`` is refused before the run."""
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--policy", "specdecpp", "--num-requests",
                             "4", "--set", "policy.knobs.threshhold=0.9")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "policy.knobs.threshhold" in err and "closest valid: 'threshold'" in err


def test_a_misspelt_trace_field_exits_2_naming_file_line_key_and_closest_field(monkeypatch, capsys):
    """Issue 24 item 10: ``domian`` no longer runs silently as ``chat``."""
    src = str(REPO / "tests" / "data" / "field_typo_domain.jsonl")
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", src, "--policy", "none")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert src in err and "line 1" in err and "'domian'" in err and "closest valid: 'domain'" in err


def test_more_requests_than_the_trace_holds_is_noted_by_run_and_sweep(monkeypatch, capsys, tmp_path):
    """--num-requests above the trace's size runs all of them and says so, in run and in sweep alike (a fresh
    user's sweep ran the whole trace silently)."""
    trace = DATA / "closed_loop_rate_scale.jsonl"
    size = sum(1 for line in trace.read_text().splitlines() if line.strip())
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", str(trace), "--policy", "none",
                           "--num-requests", "999", "--json")
    text = " ".join(err.split())
    assert code == 0 and f"--num-requests 999 but {trace} holds {size} requests: all of them run" in text
    code, _, err = run_cli(monkeypatch, capsys, "sweep", "--trace", str(trace), "--out", str(tmp_path / "s"),
                           "--policies", "none", "--rate-scales", "1", "--num-requests", "999", "--executor",
                           "serial", "--quiet")
    assert code == 0 and f"holds {size} requests: all of them run" in " ".join(err.split())


def test_a_run_without_a_closed_loop_window_keeps_its_records_in_out(monkeypatch, capsys, tmp_path):
    """--max-sim-s before the window closes: exit 2 with the one-line error, and --out holds the whole run's
    records and summary (a fresh user's report: a finished simulation was thrown away, --out left empty)."""
    out = tmp_path / "run"
    code, _, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--concurrency", "8", "--num-requests", "80",
                           "--max-sim-s", "2", "--out", str(out))
    assert code == 2 and "raise --max-sim-s" in " ".join(err.split())
    assert f"whole-run summary (no window metrics, load.window_start_s null) are in {out}" in " ".join(err.split())
    s = json.loads((out / "summary.json").read_text())
    assert s["load"]["window_start_s"] is None and s["total"] == 80
    assert (out / "requests.parquet").is_file() and (out / "steps.parquet").is_file()



def test_a_closed_loop_window_with_few_requests_is_noted(monkeypatch, capsys):
    """A window that measured fewer than two requests per user is said to (its figures rest on few requests, and
    each policy's window holds other requests: a fresh user's report); a wide one is not."""
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--policy", "none", "--concurrency", "32",
                             "--num-requests", "128", "--json")
    s = json.loads(out)
    assert code == 0 and s["window"]["measured_requests"] < 64
    assert f"the closed-loop window measured {s['window']['measured_requests']} requests for 32 users" in \
        " ".join(err.split())
    code, out, err = run_cli(monkeypatch, capsys, "run", "--trace", PROD, "--policy", "none", "--concurrency", "4",
                             "--num-requests", "200", "--json")
    assert code == 0 and "closed-loop window measured" not in err
