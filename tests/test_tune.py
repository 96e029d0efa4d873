"""Knob tuning per SLA tier: the search's pick against the brute-force grid, its cost, resumability, plug-ins."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.analysis.tuned import read_tuned, tuned_rows
from specsim.scenario import load_scenario
from specsim.sweep import SweepSpec, load_records, run_sweep
from specsim.workload import Trace, save_trace
from specsim.sweep.tune import KnobRange, TuneSpec, parse_knob, tune, tuned_path

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = f"{REPO / 'policies' / 'template.py'}:SurvivalCutoff"
LOADS = (8, 16, 24, 32)
SEEDS = (0, 1)
TIERS = (440.0, 465.0)    # the default scenario's TPS/user band on this trace (with speculation's own overhead)


def small_trace(n: int = 160, seed: int = 7) -> Trace:
    """160 mixed-domain requests (outputs 40-160 tokens): 5 requests per user up to 32 users (about 0.1 s a run;
    with 3 per user, a closed-loop window at 32 users can close before every user has completed a request)."""
    rng = np.random.default_rng(seed)
    return Trace(request_id=[f"r{i}" for i in range(n)], arrival_s=np.arange(n) * 0.05,
                 prompt_tokens=rng.integers(32, 256, n), output_tokens=rng.integers(40, 160, n),
                 domain=np.array(["chat", "code", "math"])[np.arange(n) % 3], source="small")


def spec(policy: str = "specdecpp", tiers=TIERS) -> TuneSpec:
    return TuneSpec(policy, parse_knob("threshold=0.05:0.95:0.15", policy), tuple(tiers), LOADS, SEEDS,
                    requests_per_user=5)


@pytest.fixture(scope="module")
def searched_then_grid(tmp_path_factory):
    """The search into a fresh directory, then the brute-force grid into the same one (reusing its points)."""
    out = tmp_path_factory.mktemp("tune")
    scen, tr = load_scenario(), small_trace()
    search = tune(spec(), scen, tr, out, executor="serial")
    grid = tune(spec(), scen, tr, out, method="grid", executor="serial")
    return out, search, grid


# --------------------------------------------------------------------------------------------- the knob
def test_parse_knob_grids_and_errors():
    k = parse_knob("threshold=0.05:0.95", "specdecpp")
    assert k.values() == (0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95)   # 10 values by default
    assert parse_knob("threshold=0.05:0.95:0.15", "specdecpp").values() == (0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95)
    assert parse_knob("threshold=0.1:0.9", "specdecpp", 5).values() == (0.1, 0.3, 0.5, 0.7, 0.9)
    g = parse_knob("gamma=1:5", "static")
    assert g.integer and g.values() == (1, 2, 3, 4, 5)
    with pytest.raises(SpecsimInputError, match="threshold, gamma"):
        parse_knob("thr=0.1:0.9", "specdecpp")
    for bad in ("threshold", "threshold=0.1", "threshold=a:b", "threshold=0.1:0.9:-1"):
        with pytest.raises(SpecsimInputError, match="--knob"):
            parse_knob(bad, "specdecpp")
    # a range the policy rejects fails before any point runs, naming --knob and the constructor's words
    with pytest.raises(SpecsimInputError, match=r"--knob.*at 1.5: threshold: expected a float in \[0, 1\]"):
        parse_knob("threshold=0.1:1.5", "specdecpp")
    with pytest.raises(SpecsimInputError, match="LO <= HI"):
        KnobRange("threshold", 0.9, 0.1, 5)
    with pytest.raises(SpecsimInputError, match="--tiers"):
        TuneSpec("specdecpp", k, (0.0,), LOADS)
    with pytest.raises(SpecsimInputError, match="two load points"):
        TuneSpec("specdecpp", k, (100.0,), (8,))
    with pytest.raises(SpecsimInputError, match="--method"):
        tune(spec(), load_scenario(), small_trace(), None, method="random")


# --------------------------------------------------------------------------------------------- search vs grid
def test_search_pick_is_within_the_seed_spread_of_the_grid_best(searched_then_grid):
    _, search, grid = searched_then_grid
    assert grid.num_runs == grid.grid_runs == 7 * len(LOADS) * len(SEEDS)
    for s, g in zip(search.tiers, grid.tiers):
        assert s.tier == g.tier and g.status == "ok" and s.status == "ok"
        # brute force: the best knob value over every grid value, each read off its full frontier
        assert g.value == max(g.scores, key=lambda v: g.scores[v])
        assert g.throughput_per_gpu == pytest.approx(max(v for v in g.scores.values() if np.isfinite(v)))
        # the search's pick, scored on the full grid, is within one seed std of the grid's best
        assert g.scores[s.value] >= g.throughput_per_gpu - g.throughput_std
        assert np.isfinite(g.throughput_std) and g.throughput_std > 0
        # at the pick the search reads the same frontier value as the grid (its bracket holds the frontier's)
        assert s.throughput_per_gpu == pytest.approx(g.scores[s.value])


def test_search_costs_less_than_the_grid(searched_then_grid):
    out, search, grid = searched_then_grid
    # two seeds never make a margin hold between two feasible values here (one degree of freedom), so after
    # its first such comparison the search simulates the rest of its bracket; its saving is then the
    # infeasible side it dropped and the load bracketing (at most three of the four loads per knob value)
    probed = {v for t in search.tiers for v, y in t.scores.items()}
    assert len(probed) <= 5 and search.num_runs <= len(probed) * 3 * len(SEEDS) < grid.grid_runs
    assert search.computed == search.num_runs and search.reused == 0
    # the grid reused every point of the search from disk: one record per point, shared ids
    assert grid.reused == search.num_runs and grid.computed == grid.grid_runs - search.num_runs
    assert set(search.probe_ids) <= set(grid.probe_ids)
    assert len(load_records(out)) == grid.grid_runs


def test_confidence_fields_are_consistent(searched_then_grid):
    _, search, grid = searched_then_grid
    for r in search.tiers + grid.tiers:
        assert r.runner_up is not None and r.runner_up != r.value
        assert r.runner_up_throughput <= r.throughput_per_gpu
        assert 0 <= r.seed_wins <= len(SEEDS) and 0 <= r.num_seeds <= len(SEEDS)
        if r.significant:
            assert r.seed_wins == r.num_seeds == len(SEEDS)


def test_rerun_resumes_from_records_and_rebuilds_a_lost_point(searched_then_grid, tmp_path):
    out, search, _ = searched_then_grid
    again = tune(spec(), load_scenario(), small_trace(), out, executor="serial")
    assert again.computed == 0 and again.reused == search.num_runs
    assert [(t.value, t.throughput_per_gpu) for t in again.tiers] == [(t.value, t.throughput_per_gpu)
                                                                       for t in search.tiers]
    # a copy of the search's records with one deleted: only that point is simulated again
    (tmp_path / "points").mkdir()
    for pid in search.probe_ids[1:]:
        (tmp_path / "points" / f"{pid}.json").write_bytes((out / "points" / f"{pid}.json").read_bytes())
    rebuilt = tune(spec(), load_scenario(), small_trace(), tmp_path, executor="serial")
    assert rebuilt.computed == 1 and rebuilt.reused == search.num_runs - 1
    assert [t.value for t in rebuilt.tiers] == [t.value for t in search.tiers]


def test_sweep_points_are_the_tune_points(searched_then_grid):
    out, search, _ = searched_then_grid
    best = search.tiers[0].value
    res = run_sweep(SweepSpec(policies=("specdecpp",), concurrency=LOADS, seeds=SEEDS, thresholds=(best,),
                              requests_per_user=5), load_scenario(), small_trace(), out, executor="serial",
                    progress=False)
    assert res.computed == 0 and res.skipped == len(LOADS) * len(SEEDS)


# --------------------------------------------------------------------------------------------- plug-ins
def test_plugin_template_tunes_like_a_builtin(tmp_path):
    res = tune(spec(TEMPLATE, tiers=(465.0,)), load_scenario(), small_trace(), tmp_path, executor="serial")
    r = res.tiers[0]
    assert r.status == "ok" and r.value in res.spec.knob.values() and res.num_runs <= res.grid_runs // 2
    recs = load_records(tmp_path)
    assert {rec["config"]["policy"] for rec in recs} == {TEMPLATE}
    assert {rec["config"]["knobs"]["threshold"] for rec in recs} <= set(res.spec.knob.values())


PLUGIN = '''
import numpy as np

class VerifyN:
    """Verify min(n, gamma) drafts of every request: B = R * (1 + n), so verify tokens per request = 1 + n."""
    name = "verify-n"
    fits_zos = True
    knobs = {"n": 1}

    def __init__(self, n: int = 1) -> None:
        self.n = int(n)

    def __call__(self, view):
        return np.full(len(view.request_ids), min(self.n, view.gamma), dtype=np.int64)
'''


def test_plugin_with_its_own_int_knob_reaches_every_run(tmp_path):
    f = tmp_path / "verify_n.py"
    f.write_text(PLUGIN)
    pol = f"{f}:VerifyN"
    k = parse_knob("n=0:3", pol)
    assert k.integer and k.values() == (0, 1, 2, 3)
    sp = TuneSpec(pol, k, (450.0,), LOADS, (0,), requests_per_user=3)
    res = tune(sp, load_scenario(), small_trace(), tmp_path / "out", method="grid", executor="serial")
    recs = load_records(tmp_path / "out")
    assert len(recs) == 4 * len(LOADS) and len({r["id"] for r in recs}) == len(recs)
    for rec in recs:
        n = rec["config"]["knobs"]["n"]
        # closed form: every request verifies n drafts each step plus its anchor token; the engine clips a
        # request's last steps to the tokens it has left, so up to 1 + n, never more, and exactly 1 at n = 0
        v = rec["summary"]["mean_verify_tokens_per_request"]
        assert 1 + n - 0.05 * n <= v <= 1 + n + 1e-9
    assert set(res.tiers[0].scores) == {0, 1, 2, 3}


# --------------------------------------------------------------------------------------------- compare, plot, CLI
def test_result_file_and_compare_rows(searched_then_grid, tmp_path):
    out, search, _ = searched_then_grid
    d = json.loads(tuned_path(out, "specdecpp", "threshold").read_text())
    assert d["curve"] == "specdecpp tuned threshold" and d["method"] in ("search", "grid")   # the latest tune
    # an untuned sweep beside the tune, one of its threshold values a probe of the tune: compare shows the
    # swept curves and the tuned row, never the other probes as curves of their own
    run_sweep(SweepSpec(policies=("mtp1", "specdecpp"), concurrency=LOADS, seeds=SEEDS, thresholds=(0.8,),
                        requests_per_user=5), load_scenario(), small_trace(), out, executor="serial", progress=False)
    recs, tuned = read_tuned(out, load_records(out))
    assert {r["config"]["policy"] for r in recs} == {"mtp1", "specdecpp"} and len(tuned) == 1
    assert {r["config"]["knobs"].get("threshold") for r in recs if r["config"]["policy"] == "specdecpp"} == {0.8}
    assert len(recs) == 2 * len(LOADS) * len(SEEDS)
    from specsim.analysis.frontier import compare

    table = tuned_rows(compare(recs, [TIERS[0]], "specdecpp"), tuned)
    label = f"specdecpp tuned threshold (threshold={d['tiers'][0]['value']:g})"
    assert set(table.curve) == {"mtp1", "specdecpp", label}
    row = table[table.curve.str.startswith("specdecpp tuned")].iloc[0]
    assert row.throughput_per_gpu == pytest.approx(d["tiers"][0]["throughput_per_gpu"])
    base = table[table.curve == "specdecpp"].throughput_per_gpu.iloc[0]
    assert np.isfinite(base) and row.gain_vs_baseline == pytest.approx(row.throughput_per_gpu / base - 1)
    # compare's notes say a tuned row is never named winner (a fresh user read one above the winner as a mistake)
    from specsim.cli.compare_table import compare_text

    assert table.attrs["tuned"] and "never named winner" in " ".join(compare_text(table, out, width=400).split())
    assert "never named winner" not in " ".join(compare_text(compare(recs, [TIERS[0]], "specdecpp"), out,
                                                             width=400).split())


def test_cli_tune_compare_plot(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    trace = tmp_path / "t.jsonl"
    save_trace(small_trace(), trace)
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["tune", "--policy", "specdecpp", "--knob", "threshold=0.35:0.95:0.3",
                                 "--tiers", "490", "--trace", str(trace), "--out", str(out), "--concurrency",
                                 "8,16,24,32", "--seeds", "1", "--requests-per-user", "3", "--executor", "serial",
                                 "--untuned", "mtp1"])
    assert r.exit_code == 0, r.output
    assert "best threshold per SLA tier" in r.output
    assert "of the 12-point knob x load grid" in " ".join(r.output.split())
    d = json.loads((out / "tuned" / "specdecpp-threshold.json").read_text())
    assert len(d["untuned_ids"]) == 4
    r = CliRunner().invoke(app, ["compare", str(out), "--tiers", "490", "--json"])
    assert r.exit_code == 0, r.output
    js = json.loads(r.stdout)
    assert set(js["frontiers"]) == {"mtp1"} and js["tuned"][0]["curve"] == "specdecpp tuned threshold"
    r = CliRunner().invoke(app, ["plot", str(out), "--tiers", "490"])
    assert r.exit_code == 0, r.output
    png = out / "plots" / "tuned.png"
    assert png.is_file() and png.stat().st_size > 10_000
    # recommend and the report read the same curves as compare (a fresh user's tune folder got a different winner
    # from each: they took the tune's sparse probes for curves), and recommend names the tuned values beside them
    r = CliRunner().invoke(app, ["recommend", str(out), "--tiers", "490", "--json"])
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert {x["curve"] for x in rec["recommendations"]} <= {"mtp1"} and rec["tuned"][0]["curve"] == d["curve"]
    r = CliRunner().invoke(app, ["recommend", str(out), "--tiers", "490"])
    assert "tuned (specdecpp, specsim tune)" in " ".join(r.stdout.split())
    from specsim.analysis.report import _sweep_page

    page = _sweep_page(out, (490.0,))
    points = next(t for sec in page["sections"] for t in sec["tables"] if t["id"] == "points")
    assert {row[0]["text"] for row in points["rows"]} == {"mtp1"}
    # and the page shows the tune's picks and the per-GPU factor, as compare and recommend do
    tuned = next(t for sec in page["sections"] for t in sec["tables"] if t["id"] == "tuned")
    assert tuned["rows"][0][0]["text"] == "specdecpp" and tuned["rows"][0][1]["text"] == "490"
    notes = next(sec["text"] for sec in page["sections"] if sec["title"] == "Notes")
    assert "1 prefill GPU beside 1 decode GPU: per GPU of both, every tok/s/GPU here is x0.50" in notes


def test_tune_help_loads_no_numeric_library():
    code = ("import sys\nfrom specsim.cli import main\nsys.argv = ['specsim', 'tune', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "heavy = {'numpy', 'pandas', 'scipy', 'matplotlib', 'simpy'}\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_failed_points_are_counted_and_named_in_the_table():
    """40 requests cannot open a closed-loop window at 16 or 32 users: those points fail, the result counts them
    and the table warns that the answer lacks those loads (a new user's tour run read 'covered' without a word)."""
    from specsim.cli.tune_cmd import result_text

    sp = TuneSpec("specdecpp", parse_knob("threshold=0.2:0.8:0.3", "specdecpp"), (300.0,), (4, 16, 32), (0,))
    res = tune(sp, load_scenario(), small_trace(40), None, method="grid", executor="serial")
    assert res.num_runs == 9 and res.failed == 6                  # 3 threshold values x the loads 16 and 32
    text = " ".join(result_text(res, Path("tuned.json"), 0).split())
    assert "warning: 6 of the 9 points failed" in text
    picked = res.tiers[0].value
    edge = picked in (0.2, 0.8)
    assert ("the pick sits at the edge of the range 0.2:0.8" in text) == edge        # said only at an edge
    assert "with one seed no margin can be tested" in text                           # one seed here


def test_tune_from_python_carries_the_cautions_and_notes_the_cli_prints(tmp_path):
    """A fresh user's tune() from Python (docs/tuning.md) returned none of the lines specsim tune prints: the
    failed points, a pick read from a prefill-bound point, a pick at the edge of the range. The library builds
    them (TuneResult.cautions, .notes); the CLI prints those very lines, and the result file keeps them.
    Slow prefill (2 ms a prompt token, one instance) makes 8 users prefill-bound; 64 requests open no closed-loop
    window at 32 users; the grid 0.5, 0.8 puts the pick at an end."""
    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    trace = tmp_path / "t.jsonl"
    save_trace(small_trace(64), trace)
    sp = TuneSpec("specdecpp", parse_knob("threshold=0.5:0.8:0.3", "specdecpp"), (150.0,), (2, 8, 32), (0,))
    res = tune(sp, load_scenario(None, ["prefill.time_per_token_s=2e-3"]), small_trace(64), None, method="grid")
    assert res.failed == 2 and len(res.cautions) == 2 and len(res.notes) == 1
    assert res.cautions[0].startswith("warning: 2 of the 6 points failed")
    assert res.cautions[1].startswith(f"warning: at tier 150 the pick threshold={res.tiers[0].value:g} is read "
                                      "from its point at load 8 (prefill-bound)")
    assert res.notes[0].startswith(f"note: the pick sits at the edge of the range 0.5:0.8 at tier 150 "
                                   f"({res.tiers[0].value:g})")
    r = CliRunner().invoke(app, ["tune", "--policy", "specdecpp", "--knob", "threshold=0.5:0.8:0.3", "--tiers", "150",
                                 "--trace", str(trace), "--out", str(tmp_path / "out"), "--concurrency", "2,8,32",
                                 "--seeds", "1", "--method", "grid", "--executor", "serial", "--untuned", "",
                                 "--set", "prefill.time_per_token_s=2e-3"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    printed = " ".join(r.output.split())
    for line in res.cautions + res.notes:
        assert " ".join(line.split()) in printed, line
    saved = json.loads((tmp_path / "out" / "tuned" / "specdecpp-threshold.json").read_text())
    assert saved["cautions"] == res.cautions and saved["notes"] == res.notes


def test_a_pick_at_the_edge_of_the_range_says_so_and_many_seeds_drop_the_one_seed_legend():
    """A grid of one value per end (threshold 0.2 and 0.8): the pick is an edge by construction."""
    from specsim.cli.tune_cmd import result_text

    sp = TuneSpec("specdecpp", parse_knob("threshold=0.2:0.8:0.6", "specdecpp"), (100.0,), (2, 4), (0, 1))
    res = tune(sp, load_scenario(), small_trace(48), None, method="grid", executor="serial")
    text = " ".join(result_text(res, Path("tuned.json"), 0).split())
    assert res.tiers[0].value in (0.2, 0.8)
    assert f"the pick sits at the edge of the range 0.2:0.8 at tier 100 ({res.tiers[0].value:g})" in text
    assert "with one seed" not in text


def test_a_gamma_range_beyond_the_drafters_block_is_refused_and_its_end_is_never_to_widen():
    """gamma=1:9 with the dspark drafter (block 7) fails before any point, naming --knob (a fresh user's report:
    '--gamma' after the first points); a pick at 7, the largest gamma it drafts, gets no advice to widen."""
    from specsim.errors import SpecsimInputError
    from specsim.scenario import load_scenario
    from specsim.sweep.knobs import check_gamma_range, fixed_ends as _fixed_ends, parse_knob

    scen = load_scenario()
    with pytest.raises(SpecsimInputError) as e:
        check_gamma_range("static", parse_knob("gamma=1:9", "static"), scen)
    assert e.value.file == "--knob" and "at 9: a gamma <= 7" in str(e.value)
    check_gamma_range("static", parse_knob("gamma=5:7", "static"), scen)          # both ends allowed
    assert _fixed_ends(parse_knob("gamma=5:7", "static"), "static", scen, None) == (7.0,)
    assert _fixed_ends(parse_knob("gamma=1:6", "static"), "static", scen, None) == ()
    assert _fixed_ends(parse_knob("gamma=1:6", "static"), "static", scen, "eagle3") == ()    # no block: 64 max
    # a real knob: 0.95 of specdecpp's [0, 1] threshold can still be widened although 1.05 is refused (a fresh
    # user's tune picked 0.95 without the note)
    assert _fixed_ends(parse_knob("threshold=0.05:0.95", "specdecpp"), "specdecpp", scen, None) == ()
    assert _fixed_ends(parse_knob("threshold=0:1", "specdecpp"), "specdecpp", scen, None) == (0.0, 1.0)


def test_tune_reads_the_window_figures_compare_reads(searched_then_grid):
    """tune scored knob values on the whole run's figures while compare, recommend and report read a closed-loop
    point's measurement window (a fresh user's tune printed 5,245 where the window's figure was 5,855): the
    picked value's throughput at the tier is compare's frontier throughput of the same curve."""
    from specsim.analysis.frontier import compare
    from specsim.analysis.sweep_records import load_records

    out, search, _ = searched_then_grid
    pick = search.tiers[0]
    recs = [r for r in load_records(out, latest=False)
            if r["config"]["policy"] == "specdecpp" and r["config"]["knobs"].get("threshold") == pick.value]
    assert {r["config"]["load"]["value"] for r in recs} == set(LOADS)
    row = compare(recs, [pick.tier]).iloc[0]
    assert row.throughput_per_gpu == pytest.approx(pick.throughput_per_gpu, rel=1e-12)
