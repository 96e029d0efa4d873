"""Robustness, round three (issue 24): each case of the issue with its right value.

Inputs are the issue's shared cases, copied into ``tests/data`` (README there). FLAT and CONST are the issue's
shorthands: a flat 20 ms step with no overheads and a prefill of 2^-10 s per token; constant conditional
acceptance 0.7 with no latent spread.
"""

from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import pytest

from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace

DATA = Path(__file__).parent / "data"
BUILT_IN = ["none", "mtp1", "static", "specdecpp", "dspark", "dspark-async", "dspark-global", "oracle"]
FLAT = [f"profile.name={DATA / 'flat20ms_profile.json'}", "engine.host_overhead_s=0", "engine.request_overhead_s=0",
        "drafter.base_fraction=0", "drafter.per_draft_fraction=0", "prefill.time_per_token_s=0.0009765625",
        "engine.spec_step_s=0", "engine.spec_request_s=0"]


def const(alpha: float = 0.7) -> list[str]:
    return [f"acceptance.constant_alpha={alpha}", "acceptance.sigma_request=0", "acceptance.sigma_step=0",
            "acceptance.sigma_token=0"]


# ---------------------------------------------------------------- 1. acceptance length by domain
@pytest.mark.parametrize("policy", BUILT_IN)
def test_domain_acceptance_length_is_the_top_level_one_under_preemption(policy):
    """Four 200 + 600-token requests in a 1,600-token cache: heavy preemption; the single domain's pooled
    acceptance length equals the top level's (the token a finished recompute emits is no decode step)."""
    scen = load_scenario(overrides=[*FLAT, *const(), "cluster.kv_capacity_tokens=1600"])
    res = simulate(load_trace(DATA / "preempt_conservation.jsonl"), policy, scen)
    s = res.summary
    assert s["completed"] == 4 and s["total_output_tokens"] == 2400 and s["num_preemptions"] > 0
    assert s["per_domain"]["chat"]["mean_acceptance_length"] == pytest.approx(s["mean_acceptance_length"], rel=1e-12)
    if policy == "none":
        assert s["per_domain"]["chat"]["mean_acceptance_length"] == 1.0


# ---------------------------------------------------------------- 3. the vLLM result file under a horizon
def test_vllm_result_accounts_for_every_prompt_under_a_horizon():
    """kv_boundaries.jsonl, dspark, a 4,096-token cache, horizon 0.45 s: 2 completed, 2 unservable and one still
    running at the horizon; vLLM's ``failed`` counts every prompt that did not complete."""
    from specsim.analysis.results import vllm_result
    scen = load_scenario(overrides=["cluster.kv_capacity_tokens=4096"])
    res = simulate(load_trace(DATA / "kv_boundaries.jsonl"), "dspark", scen, max_sim_s=0.45)
    s = res.summary
    assert (s["completed"], s["unservable"], s["unfinished"] + s["not_issued"]) == (2, 2, 1)
    d = vllm_result(res, detailed=True)
    assert (d["num_prompts"], d["completed"], d["failed"]) == (5, 2, 3)
    assert d["completed"] + d["failed"] == d["num_prompts"]
    assert sorted(d["errors"]) == ["", "", "unfinished", "unservable", "unservable"]


# ---------------------------------------------------------------- 5. prefix-cache hit rate
@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_prefix_hit_rate_counts_first_time_prompt_lookups_and_recomputes_apart(mode):
    """Two 32 + 40-token requests sharing a 16-token prefix block arrive together in a 96-token cache (the
    test_memory hand case): neither finds the other's block on its first prefill (0 of 64 prompt tokens), B is
    preempted after 16 tokens and its recompute (32 + 16 = 48 tokens looked up) hits A's shared block (16).
    Before issue 24 the recompute counted in the hit rate: 16 / 112."""
    from helpers import make_trace
    from specsim.hardware.profile import StepTimeProfile
    t = make_trace([0.0, 0.0], [32, 32], [40, 40])
    t = type(t)(request_id=t.request_id, arrival_s=t.arrival_s, prompt_tokens=t.prompt_tokens,
                output_tokens=t.output_tokens, domain=t.domain, prefix_group=["sys", "sys"], prefix_tokens=[16, 16])
    scen = load_scenario(overrides=["engine.host_overhead_s=0", "engine.request_overhead_s=0",
                                    "cluster.kv_capacity_tokens=96", "prefill.time_per_token_s=0.001",
                                    "prefill.num_instances=2", f"prefill.mode={mode}"])
    res = simulate(t, "none", scen, profile=StepTimeProfile.flat(0.01))
    s, req = res.summary, res.requests
    assert s["num_preemptions"] == 1
    assert req.prefix_lookup_tokens.tolist() == [32, 32] and req.prefix_hit_tokens.tolist() == [0, 0]
    assert s["prefix_cache_hit_rate"] == 0.0
    assert req.recompute_lookup_tokens.tolist() == [0, 48] and req.recompute_hit_tokens.tolist() == [0, 16]
    assert s["recompute_prefix_hit_tokens"] == 16 and s["recompute_prefix_hit_rate"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------- 16. one truth for `reserve`
def test_reserve_holds_prompt_plus_output_blocks_without_lookahead():
    """A 1000 + 600-token request under ``reserve`` with static gamma 7 holds exactly 100 blocks of 16 (a
    lookahead of gamma + 1 would make it 101); the scenario docs say the same rule as docs/memory.md."""
    from helpers import make_trace
    import specsim.scenario as scenario_module
    scen = load_scenario(overrides=[*FLAT, "cluster.kv_allocation=reserve", "cluster.kv_capacity_tokens=1600"])
    res = simulate(make_trace([0.0], [1000], [600]), "static", scen, gamma=7)
    assert res.summary["completed"] == 1
    assert (res.steps.kv_blocks_used == 100).all()
    toml = (Path(scenario_module.__file__).parent / "scenarios" / "default.toml").read_text()
    for text in (toml, scenario_module.ClusterConfig.__doc__):
        line = next(ln for ln in text.splitlines() if "reserve" in ln and "prompt + max output" in ln)
        assert "lookahead" not in line


# ---------------------------------------------------------------- 8. output paths checked before the run
def _cli(monkeypatch, capsys, *args):
    import sys
    from specsim.cli import main
    monkeypatch.setattr(sys, "argv", ["specsim", *args])
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def _never_simulate(monkeypatch):
    import specsim.simulation
    import specsim.sweep

    def boom(*a, **k):
        raise AssertionError("simulated before checking the output paths")
    monkeypatch.setattr(specsim.simulation, "simulate", boom)
    monkeypatch.setattr(specsim.sweep, "run_sweep", boom)


@pytest.mark.parametrize("case", ["out_is_file", "out_under_file", "events_under_file", "events_is_folder",
                                  "sweep_out_is_file"])
def test_bad_output_paths_exit_2_with_one_line_before_simulating(monkeypatch, capsys, tmp_path, case):
    _never_simulate(monkeypatch)
    afile = tmp_path / "a_file"
    afile.write_text("x")
    trace = str(DATA / "four_long.jsonl")
    args = {"out_is_file": ["run", "--trace", trace, "--out", str(afile)],
            "out_under_file": ["run", "--trace", trace, "--out", str(afile / "sub")],
            "events_under_file": ["run", "--trace", trace, "--trace-events", str(afile / "ev.json")],
            "events_is_folder": ["run", "--trace", trace, "--trace-events", str(tmp_path)],
            "sweep_out_is_file": ["sweep", "--trace", trace, "--out", str(afile), "--policies", "none",
                                  "--concurrency", "1"]}[case]
    code, out, err = _cli(monkeypatch, capsys, *args)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("specsim: error: --")
    assert str(afile if case != "events_is_folder" else tmp_path) in err
    assert afile.read_text() == "x"


def test_missing_output_folders_are_created_and_the_run_says_so(monkeypatch, capsys, tmp_path):
    out, events = tmp_path / "new" / "run", tmp_path / "ev" / "t.json"
    code, stdout, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "four_long.jsonl"), "--json",
                             "--policy", "none", "--out", str(out), "--trace-events", str(events))
    assert code == 0, err
    assert f"note: created folder {out} for --out" in err
    assert f"note: created folder {events.parent} for --trace-events" in err
    assert (out / "summary.json").exists() and events.exists()


# ---------------------------------------------------------------- 9. times too large to simulate
def test_far_arrival_is_refused_naming_file_line_and_field():
    from specsim.errors import SpecsimInputError
    from specsim.errors import MAX_SIM_TIME_S
    assert MAX_SIM_TIME_S == 1e9
    with pytest.raises(SpecsimInputError) as e:
        load_trace(DATA / "far_arrival.jsonl")
    assert (e.value.line, e.value.field) == (2, "arrival_s") and "far_arrival.jsonl" in str(e.value)
    assert "1e+09 s" in str(e.value) and len(str(e.value)) < 300


@pytest.mark.parametrize("args, flag", [(["--rate-scale", "1e-14"], "--rate-scale"),
                                        (["--rate-scale", "1e-300"], "--rate-scale"),
                                        (["--max-sim-s", "2e9"], "max_sim_s")])
def test_time_bound_flags_exit_2_with_one_line(monkeypatch, capsys, args, flag):
    """tier_boundary.jsonl's arrivals (0, 100, 200 s) divided by 1e-14 reach 2e16 s: refused before the run."""
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "tier_boundary.jsonl"), *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and flag in err, err
    assert "1e+09" in err and "Traceback" not in err


def test_an_arrival_at_the_bound_still_simulates():
    from helpers import make_trace
    res = simulate(make_trace([0.0, 1e9], [64, 64], [20, 20]), "dspark", load_scenario(overrides=FLAT))
    assert res.summary["completed"] == 2
    assert (res.requests.ttft_s >= res.requests.prefill_s).all()


# ---------------------------------------------------------------- 11. TOML key errors name the line; short messages
@pytest.mark.parametrize("text, line, field, words", [
    ("# a scenario\n[cluster]\nnum_replicas = 2\nkv_capcity_tokens = 4096\n", 4, "cluster.kv_capcity_tokens",
     "closest valid: 'kv_capacity_tokens'"),
    ("[cluster]\nnum_replicas = 2\n\n[engine]\ngamma = -3\n", 5, "engine.gamma", "got -3"),
    ("[clustr]\nnum_replicas = 2\n", 1, "clustr", "closest valid: 'cluster'"),
    ("cluster.num_replicas = 0\n", 1, "cluster.num_replicas", "got 0"),
    ("[policy]\nthreshold = 0.5\n", 2, "policy.threshold", "policy knobs go in [policy.knobs]"),
])
def test_scenario_key_errors_name_the_line(tmp_path, text, line, field, words):
    from specsim.errors import SpecsimInputError
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(path)
    assert (e.value.file, e.value.line, e.value.field) == (str(path), line, field)
    assert words in str(e.value)


def test_error_messages_stay_under_a_few_hundred_characters(monkeypatch, capsys):
    """A missing profile printed a 1,153-character line (every bundled name); now the closest names."""
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "four_long.jsonl"),
                          "--set", "profile.name=h100-llama2-7b-tp")
    assert code == 2 and len(err.strip().splitlines()) == 1 and len(err) < 300, err
    assert "closest: h100-llama2-7b-tp" in err
    from specsim.errors import SpecsimInputError
    assert len(str(SpecsimInputError("f.toml", 3, "a.b", "x" * 500, "y" * 5000))) <= SpecsimInputError.MAX_CHARS


# ---------------------------------------------------------------- 12. import-splitwise names and --force
def test_import_splitwise_names_every_hardware_apart_and_never_overwrites(monkeypatch, capsys, tmp_path):
    """A hand-written perf_model.csv with h100-80gb and h100-80gb-pcap rows (the two collided on
    ``h100-llama270b-tp2-splitwise.json``; the second import overwrote the first)."""
    import json
    from specsim.hardware.splitwise import profile_name
    rows = ["model,hardware,prompt_size,batch_size,token_size,token_time,tensor_parallel"]
    for hw, ms in (("h100-80gb", 20.0), ("h100-80gb-pcap", 30.0)):
        rows += [f"llama2-70b,{hw},128,1,128,{ms},2", f"llama2-70b,{hw},1024,1,128,{ms + 1},2",
                 f"llama2-70b,{hw},512,1,128,{ms},2", f"llama2-70b,{hw},512,2,128,{ms + 2},2"]
    csv = tmp_path / "perf_model.csv"
    csv.write_text("\n".join(rows) + "\n")
    assert profile_name("llama2-70b", "h100-80gb", 2) == "h100-llama270b-tp2-splitwise"
    assert profile_name("llama2-70b", "h100-80gb-pcap", 2) == "h100-pcap-llama270b-tp2-splitwise"
    out = tmp_path / "profiles"
    for hw in ("h100-80gb", "h100-80gb-pcap"):
        code, _, err = _cli(monkeypatch, capsys, "profile", "import-splitwise", "--csv", str(csv), "--hardware", hw,
                            "--out", str(out))
        assert code == 0, err
    a, b = out / "h100-llama270b-tp2-splitwise.json", out / "h100-pcap-llama270b-tp2-splitwise.json"
    assert json.loads(a.read_text())["metadata"]["gpu"] == "h100-80gb"
    assert json.loads(b.read_text())["metadata"]["gpu"] == "h100-80gb-pcap"
    before = a.read_text()
    a.write_text(before + " ")
    code, _, err = _cli(monkeypatch, capsys, "profile", "import-splitwise", "--csv", str(csv), "--out", str(out))
    assert code == 2 and "--force" in err and len(err.strip().splitlines()) == 1
    assert a.read_text() == before + " "
    code, _, err = _cli(monkeypatch, capsys, "profile", "import-splitwise", "--csv", str(csv), "--out", str(out),
                        "--force")
    assert code == 0 and a.read_text() == before


# ---------------------------------------------------------------- 13. drafter.block
@pytest.mark.parametrize("policy, drafter, gamma, sets, ok", [
    ("static", "dspark", 8, [], False),            # beyond the paper's block of 7
    ("dspark", "dflash", 9, [], False),
    ("static", "dspark", 7, [], True),             # the whole block
    ("static", "dspark", 4, [], True),             # 4 of the block
    ("static", "dspark", 8, ["drafter.block=12"], True),   # a longer-block checkpoint (Fig. 4)
    ("static", "dspark", 5, ["drafter.block=4"], False),
    ("static", "eagle3", 7, ["drafter.block=5"], True),   # the block is the scenario drafter's (dspark)
])
def test_gamma_above_the_drafters_block_is_refused(policy, drafter, gamma, sets, ok):
    from helpers import make_trace
    from specsim.errors import SpecsimInputError
    scen = load_scenario(overrides=[*FLAT, *sets])
    trace = make_trace([0.0], [64], [40])
    if ok:
        res = simulate(trace, policy, scen, gamma=gamma, drafter=drafter)
        assert res.summary["gamma"] == gamma and res.summary["completed"] == 1
        assert res.steps.verified_drafts.max() <= gamma
        if policy == "static":
            assert res.steps.verified_drafts.iloc[0] == gamma     # static verifies gamma of the block
    else:
        with pytest.raises(SpecsimInputError, match="draft block") as e:
            simulate(trace, policy, scen, gamma=gamma, drafter=drafter)
        assert e.value.file == "--gamma" and len(str(e.value)) < 300


def test_dspark_gamma_8_exits_2(monkeypatch, capsys):
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "four_long.jsonl"), "--drafter",
                          "dspark", "--gamma", "8", "--policy", "static")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "gamma <= 7" in err, err


# ---------------------------------------------------------------- 14. SmartSpec's acceptance estimate
def test_smartspec_estimates_hold_constant_acceptance_after_200_steps():
    """knee_profile.json, constant acceptance 0.8, gamma 7, closed loop with 8 users: after 200 steps at least
    90% of request-step estimates lie within 0.8 +- 0.05 (about half did with the earlier moving averages)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("smartspec_plugin", Path(__file__).parents[1] / "policies"
                                                  / "smartspec.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    class Recording(mod.SmartSpec):
        def __init__(self):
            super().__init__()
            self.estimates: list[np.ndarray] = []

        def proposal_length(self, view):
            if view.num_requests:
                self.estimates.append(self.alpha_estimate(view.request_ids).copy())
            return super().proposal_length(view)

    from helpers import make_trace
    knee = [f"profile.name={DATA / 'knee_profile.json'}", *FLAT[1:]]
    pol = Recording()
    res = simulate(make_trace([0.0] * 40, [128] * 40, [300] * 40), pol, load_scenario(overrides=[*knee, *const(0.8)]),
                   gamma=7, concurrency=8)
    assert res.summary["completed"] == 40 and len(pol.estimates) > 400
    later = np.concatenate(pol.estimates[200:])
    assert np.mean(np.abs(later - 0.8) <= 0.05) >= 0.9
    assert abs(later.mean() - 0.8) < 0.02


# ---------------------------------------------------------------- 15. duplicate frontier points
def test_duplicate_frontier_points_keep_both_loads_marked_and_draw_one():
    """Loads 16 and 32 give the same (100, 600) point (a saturated cluster): the frontier draws it once, at
    load 16, and its table keeps load 32 marked as its duplicate."""
    from specsim.analysis.frontier import Frontier
    f = Frontier.from_points("a", np.array([150.0, 50.0, 100.0, 100.0, 80.0]),
                             np.array([200.0, 1000.0, 600.0, 600.0, 500.0]), np.array([1.0, 64.0, 16.0, 32.0, 8.0]))
    assert f.tps_per_user.tolist() == [50, 100, 150] and f.loads.tolist() == [64, 16, 1]      # drawn once
    assert f.duplicate_loads == ((), (32.0,), ())
    rows = f.points_table()
    assert [(r["load"], r["duplicate_of"]) for r in rows] == [(64, None), (16, None), (32, 16), (1, None)]
    assert rows[2]["tps_per_user"] == 100 and rows[2]["throughput_per_gpu"] == 600


def test_comparison_json_lists_the_duplicate_load():
    from test_frontier import fake_record
    from specsim.analysis.frontier import comparison_json
    recs = [fake_record("A", load, 0, x, y, [x], [10]) for load, (x, y) in
            zip([1, 4, 16, 32], [(140, 100), (100, 500), (60, 900), (60, 900)])]
    fr = comparison_json(recs, [80.0], None)["frontiers"]["A"]
    assert fr["loads"] == [16, 4, 1] and fr["duplicate_loads"] == [[32.0], [], []]
    assert [p["duplicate_of"] for p in fr["points"]] == [None, 16.0, None, None]


# ---------------------------------------------------------------- 6. the context window
def test_beyond_context_is_refused_on_the_default_scenario_and_served_with_a_larger_max_model_len(monkeypatch,
                                                                                                      capsys):
    """beyond_context.jsonl on the default scenario (Llama-2-7B, 4,096 tokens from its config.json): the 6,000 +
    200-token request exceeds the window and is unservable with the window as its reason, as a vLLM server of
    that model refuses it; the 3,000 + 200-token one completes. --max-model-len 8192 (vLLM's flag) serves both;
    truncating cannot save a 6,000-token prompt (4,096 - 6,000 < 1 token of room), so it stays unservable."""
    trace = load_trace(DATA / "beyond_context.jsonl")
    s = simulate(trace, "none", load_scenario()).summary
    cw = s["context_window"]
    assert (cw["max_model_len"], cw["over_context"], cw["unservable"]) == (4096, 1, 1)
    assert (s["completed"], s["unservable"]) == (1, 1) and "Llama-2-7b-hf" in cw["source"]
    why = s["unservable_requests"]["beyond_4k_context"]
    assert "prompt + output = 6200 tokens > max_model_len 4096" in why and "Llama-2-7b-hf" in why
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "beyond_context.jsonl"), "--policy",
                          "none")
    line = " ".join(out.split())
    assert code == 0 and "1 of 2 requests are unservable for the context window of 4096 tokens" in line
    assert "--max-model-len N" in line and "engine.context_overflow=truncate" in line
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "beyond_context.jsonl"), "--policy",
                          "none", "--json")                  # --json: the JSON on stdout, the warning on stderr
    assert code == 0 and json.loads(out)["unservable"] == 1
    assert "1 of 2 requests are unservable for the context window" in " ".join(err.split())
    s = simulate(trace, "none", load_scenario(overrides=["engine.max_model_len=8192"])).summary
    assert (s["completed"], s["unservable"], s["context_window"]["over_context"]) == (2, 0, 0)
    # a window above the model's own is served, and said to be one vLLM refuses without its override
    assert s["context_window"]["model_window"][0] == 4096
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "beyond_context.jsonl"), "--policy",
                          "none", "--max-model-len", "8192")
    line = " ".join(out.split())
    assert code == 0 and "--max-model-len 8192 is above the model's own window of 4096 tokens" in line
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in line
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(DATA / "beyond_context.jsonl"), "--policy",
                          "none", "--max-model-len", "8192", "--json")   # --json: the notice on stderr too
    assert code == 0 and json.loads(out)["completed"] == 2
    assert "--max-model-len 8192 is above the model's own window of 4096 tokens" in " ".join(err.split())
    assert simulate(trace, "none", load_scenario(overrides=["engine.max_model_len=4096"])
                    ).summary["context_window"]["model_window"] is None
    s = simulate(trace, "none", load_scenario(overrides=["engine.context_overflow=truncate"])).summary
    cw = s["context_window"]
    assert (s["completed"], s["unservable"], cw["truncated_requests"], cw["unservable"]) == (1, 1, 0, 1)


def test_truncate_cuts_outputs_to_the_window():
    """max_model_len 4096, truncate: 4000 + 200 -> 96 output tokens (completed with 96), 6000 + 200 stays
    unservable (its prompt alone fills the window), 3000 + 200 is untouched."""
    from helpers import make_trace
    trace = make_trace([0.0, 0.0, 0.0], [4000, 6000, 3000], [200, 200, 200])
    scen = load_scenario(overrides=[*FLAT, "engine.max_model_len=4096", "engine.context_overflow=truncate"])
    res = simulate(trace, "dspark", scen)
    req, cw = res.requests, res.summary["context_window"]
    assert req.status.tolist() == ["completed", "unservable", "completed"]
    assert req.output_tokens.tolist() == [96, 200, 200] and req.emitted_tokens.tolist()[0] == 96
    assert (cw["over_context"], cw["truncated_requests"], cw["truncated_output_tokens"], cw["unservable"]) == \
        (2, 1, 104, 1)


def test_context_refusals_count_the_requests_that_arrived_and_the_cli_says_so_once(monkeypatch, capsys):
    """Under a horizon the window's ``unservable`` counts the refused requests that arrived (the summary's
    own ``unservable``), ``over_context`` the whole trace; a KV-unservable request gets its own warning line,
    and the context refusals are reported once (a warning, not also a notice)."""
    from helpers import make_trace
    from specsim.cli.run_cmd import summary_text
    trace = make_trace([0.0, 0.0, 0.0, 100.0], [5000, 100, 3000, 5000], [50, 50, 50, 50])
    scen = load_scenario(overrides=["cluster.kv_capacity_tokens=2000"])
    s = simulate(trace, "none", scen, max_sim_s=10.0).summary
    cw = s["context_window"]
    assert (cw["over_context"], cw["unservable"], s["unservable"], s["not_issued"]) == (2, 1, 2, 1)
    assert "3050 tokens" in s["unservable_requests"]["2"] and "max_model_len" in s["unservable_requests"]["0"]
    text = " ".join(summary_text(s, width=200).split())
    assert "warning: 1 of 4 requests are unservable for the context window of 4096 tokens" in text
    assert "warning: 1 of 4 requests are unservable: they need more KV blocks than a replica has" in text
    assert text.count("context window of 4096") == 1


def test_step_models_and_profiles_carry_the_context_length():
    """config.json's max_position_embeddings reaches the step model and enforces the window; a profile's
    metadata max_model_len does too; engine.max_model_len overrides both."""
    from dataclasses import replace
    from specsim.hardware.context import context_window
    from specsim.hardware.model_config import MODELS, model_from_hf_config
    from specsim.hardware.profile import StepTimeProfile
    from specsim.hardware.stepmodel import step_model
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
           "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048}
    assert model_from_hf_config(cfg).max_position_embeddings == 2048
    assert MODELS["llama2-7b"].max_position_embeddings == 4096
    sm = step_model(replace(MODELS["qwen3-8b"], max_position_embeddings=2048), "h100")
    prof = StepTimeProfile(np.array([1, 8]), np.array([0.01, 0.012]), metadata={"step_model": sm.spec()})
    cw = context_window(prof)
    assert cw.max_model_len == 2048 and "max_position_embeddings" in cw.source
    meta = StepTimeProfile(np.array([1, 8]), np.array([0.01, 0.012]), metadata={"max_model_len": 1000})
    assert context_window(meta).max_model_len == 1000
    assert context_window(meta, override=512).max_model_len == 512
    assert context_window(StepTimeProfile(np.array([1]), np.array([0.01]))).max_model_len is None


# ---------------------------------------------------------------- 17. Table 1 as the paper measures it
def test_table1_chat_gap_is_the_spread_of_request_difficulty():
    """docs/acceptance.md: the 185 chat requests among prod.jsonl's first 800 (static gamma 7), pooled like
    Table 1, average 3.51 over seeds 0-11 (Table 1's Qwen3-4B DSpark chat mean: 3.49, DSpark paper Table 1) with a
    run-to-run sd of ~0.14: the 10% gap of the 800-request run's seed 0 is a low draw of request difficulty,
    not a bias."""
    from specsim.workload.trace import Trace
    # an unbounded cache and a window every request fits (3 of the 185 pass Llama-2's 4,096 tokens)
    big = load_scenario(overrides=["cluster.kv_capacity_tokens=100000000", "cluster.max_num_seqs=256",
                                   "engine.max_model_len=16384"])
    tr = load_trace(Path(__file__).parents[1] / "traces" / "prod.jsonl").head(800)
    chat = tr.domain == "chat"
    n = int(chat.sum())
    t = Trace(request_id=tr.request_id[chat], arrival_s=np.zeros(n), prompt_tokens=tr.prompt_tokens[chat],
              output_tokens=tr.output_tokens[chat], domain=tr.domain[chat])
    vals = np.array([simulate(t, "static", big, seed=s, gamma=7).summary["per_domain"]["chat"]
                     ["mean_acceptance_length"] for s in range(12)])
    assert n == 185
    assert vals.mean() == pytest.approx(3.49, rel=0.02)
    assert 0.08 < vals.std(ddof=1) < 0.25


# ---------------------------------------------------------------- 2. reported KV occupancy
def test_reported_kv_occupancy_is_exact_under_lazy_accounting(monkeypatch):
    """chunked_prefill_lookahead.jsonl, static gamma 7, colocated, no drafter KV, FLAT: every step's
    kv_blocks_used equals what exact accounting holds (lazy accounting used to report the admission's 7 blocks
    while the decoding request grew, and 133 after the long prompt's admission)."""
    from specsim.engine.kv_manager import KVManager
    scen = load_scenario(overrides=[*FLAT, "prefill.mode=colocated", "drafter.kv_fraction=0"])
    trace = load_trace(DATA / "chunked_prefill_lookahead.jsonl")
    lazy = simulate(trace, "static", scen, gamma=7, record_step_log=True)
    monkeypatch.setattr(KVManager, "_growth_bound", lambda self: 10 ** 9)     # never lazy
    exact = simulate(trace, "static", scen, gamma=7)
    assert lazy.steps.kv_blocks_used.tolist() == exact.steps.kv_blocks_used.tolist()
    st = lazy.steps
    # by hand while only the 100-token request runs: it holds ceil((100 + generated + 1 + l) / 16) blocks
    log = lazy.step_log[lazy.step_log.request_id == "running"]
    generated = 1 + np.concatenate([[0], np.cumsum(log.num_accepted + 1)[:-1]])
    alone = (st.num_running == 1).to_numpy()[1:len(log) + 1]
    want = -(-(100 + generated + 1 + log.verify_len.to_numpy()) // 16)
    assert st.kv_blocks_used.to_numpy()[1:len(log) + 1][alone].tolist() == want[alone].tolist()
    assert st.kv_blocks_used.iloc[1] == 7 and st.kv_blocks_used[st.num_running == 1].max() > 7
    assert st.kv_blocks_used[st.num_running == 2].min() > 133


# ---------------------------------------------------------------- 4. drafts lost to the drafter's KV share
def test_request_steps_that_lost_drafts_to_the_drafters_share_are_counted():
    """A 200 + 56-token request alone in a 256-token cache with a drafter share as large as the target's
    (tests/test_memory.py): the share never fits, so each of its first 54 decode steps drafts nothing and is counted;
    with a roomy cache none is."""
    from helpers import make_trace
    trace = make_trace([0.0], [200], [56])
    scen = load_scenario(overrides=[*FLAT, "cluster.kv_capacity_tokens=256", "drafter.kv_fraction=1.0"])
    res = simulate(trace, "static", scen, gamma=4)
    assert res.requests.verified_drafts[0] == 0 and res.requests.decode_steps[0] == 55
    # its last step (one token left) has nothing useful to draft: counted as undrafted, not as a KV loss
    assert res.summary["drafter_kv_lost_drafts"] == 54 and res.summary["undrafted_steps"] == 1
    roomy = simulate(trace, "static", scen.with_updates({"cluster": {"kv_capacity_tokens": 8192}}), gamma=4)
    assert roomy.summary["drafter_kv_lost_drafts"] == 0 and roomy.requests.verified_drafts[0] > 0


# ---------------------------------------------------------------- 7. drafting with nothing to verify
@pytest.mark.parametrize("policy, gamma", [("static", 7), ("dspark", None), ("specdecpp", None)])
def test_steps_with_nothing_to_verify_draft_nothing(policy, gamma):
    """Eight 64 + 2-token requests arriving together, flat 20 ms profile, host overhead 0, the drafter's default
    cost: every decode step is a request's last token, so it drafts nothing and costs none's 20 ms (it cost
    23.2 ms with the whole drafter); each such step is counted."""
    from helpers import make_trace
    scen = load_scenario(overrides=[f"profile.name={DATA / 'flat20ms_profile.json'}", "engine.host_overhead_s=0",
                                    "engine.request_overhead_s=0", "prefill.time_per_token_s=0.0009765625"])
    trace = make_trace([0.0] * 8, [64] * 8, [2] * 8)
    none = simulate(trace, "none", scen)
    res = simulate(trace, policy, scen, gamma=gamma)
    assert res.steps.duration_s.to_numpy() == pytest.approx(none.steps.duration_s.to_numpy(), abs=1e-12)
    assert res.steps.duration_s.to_numpy() == pytest.approx(0.020, abs=1e-12)
    assert res.summary["undrafted_steps"] == res.summary["steps"] == len(res.steps) > 0
    assert none.summary["undrafted_steps"] == 0


def test_steps_whose_policy_proposes_no_drafts_are_counted_as_undrafted():
    """A fresh user's vllm-dsd with a zero row ([[1, 1024, 0]]) never drafted, ran at none's speed, and reported
    undrafted_steps 0: a step whose policy proposes none (proposal_length 0) drafts nothing and is counted too."""
    from helpers import make_trace
    trace = make_trace([0.0] * 4, [64] * 4, [6] * 4)
    scen = load_scenario(overrides=FLAT)
    res = simulate(trace, "vllm-dsd", scen, num_speculative_tokens_per_batch_size=[[1, 1024, 0]])
    none = simulate(trace, "none", scen)
    assert res.summary["undrafted_steps"] == res.summary["steps"] == len(res.steps) > 0
    assert res.steps.duration_s.to_numpy() == pytest.approx(none.steps.duration_s.to_numpy(), abs=1e-12)
    assert none.summary["undrafted_steps"] == 0


def test_the_drafter_drafts_the_largest_useful_length():
    """One request of 64 + 5 tokens, static gamma 7, CONST 0.7 with per-draft cost 0.01 of a step: its first decode
    step can use 3 drafts (4 tokens left), so it drafts 3 and pays 20 ms x (1 + 0.01 x 3)."""
    from helpers import make_trace
    scen = load_scenario(overrides=[*FLAT, *const(), "drafter.per_draft_fraction=0.01"])
    res = simulate(make_trace([0.0], [64], [5]), "static", scen, gamma=7, record_step_log=True)
    first = res.step_log.iloc[0]
    assert first.gamma == 3 and first.verify_len == 3
    assert res.steps.duration_s[res.steps.num_decode == 1].iloc[0] == pytest.approx(0.020 * 1.03, rel=1e-12)


def test_a_run_where_no_request_can_be_served_exits_2_with_one_line(monkeypatch, capsys, tmp_path):
    """One 5,000 + 10-token request on the default scenario (Llama-2-7B, 4,096 tokens): nothing to measure, so
    the run stops with the reason instead of printing empty tables."""
    from helpers import make_trace
    from specsim.workload import save_trace
    path = save_trace(make_trace([0.0], [5000], [10]), tmp_path / "all_long.jsonl") or tmp_path / "all_long.jsonl"
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(path), "--policy", "none")
    assert code == 2 and len(err.strip().splitlines()) == 1 and out == "", err
    assert "all 1 unservable" in err and "max_model_len 4096" in err
    # a closed loop says the same, not that its measurement window never opened (a fleet operator's --concurrency 2)
    path = save_trace(make_trace([0.0] * 8, [5000] * 8, [10] * 8), tmp_path / "all_long8.jsonl") or (
        tmp_path / "all_long8.jsonl")
    code, out, err = _cli(monkeypatch, capsys, "run", "--trace", str(path), "--policy", "none", "--concurrency", "2")
    assert code == 2 and "all 8 unservable" in err and "closed-loop window" not in err, err


def test_a_run_into_an_earlier_runs_out_leaves_none_of_its_files(monkeypatch, capsys, tmp_path):
    """A dspark run with --result-format vllm, then an mtp1 run into the same --out: the old vllm_result.json
    (labelled dspark) must not stay beside mtp1's summary; the run says it replaced the earlier files."""
    out, trace = tmp_path / "run", str(DATA / "four_long.jsonl")
    assert _cli(monkeypatch, capsys, "run", "--trace", trace, "--policy", "dspark", "--out", str(out),
                "--result-format", "vllm")[0] == 0
    assert (out / "vllm_result.json").is_file()
    (out / "notes.txt").write_text("mine")
    code, _, err = _cli(monkeypatch, capsys, "run", "--trace", trace, "--policy", "mtp1", "--out", str(out))
    assert code == 0 and "held an earlier run" in err
    assert not (out / "vllm_result.json").exists() and (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / "summary.json").read_text())["policy"] == "mtp1"


@pytest.mark.parametrize("seed", [-1, 2 ** 63, 1.5])
def test_a_seed_outside_the_int_range_is_refused(seed):
    from specsim.errors import SpecsimInputError
    from specsim.workload import synth_trace

    with pytest.raises(SpecsimInputError) as e:
        simulate(synth_trace(4, 1.0, seed=0), "none", seed=seed)
    assert e.value.field == "seed" and "[0, 2**63)" in str(e.value)
