"""Frontiers: Pareto sets, the interpolation rule, SLA-tier comparison, a hand-computed point, golden metrics."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.analysis.frontier import Frontier, budget_curve, compare, comparison_json, pareto_mask, sla_table
from specsim.hardware.drafter import drafter_cost
from specsim.hardware.profile import StepTimeProfile, save_profile
from specsim.scenario import load_scenario
from specsim.sweep import SweepSpec, load_records, results_frame, run_sweep
from specsim.workload import Trace, load_trace

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden" / "regression_frontier.json"


# --------------------------------------------------------------------------------------------- rules
def test_pareto_mask_hand_case():
    x = np.array([50, 100, 150, 80, 100, 40, np.nan])
    y = np.array([1000, 600, 200, 500, 600, 900, 5000])
    # (80, 500) is dominated by (100, 600); (40, 900) by (50, 1000); the second (100, 600) is a duplicate
    assert pareto_mask(x, y).tolist() == [True, True, True, False, False, False, False]


def test_frontier_interpolation_rule():
    f = Frontier.from_points("a", np.array([150.0, 50.0, 80.0, 100.0]), np.array([200.0, 1000.0, 500.0, 600.0]),
                             np.array([1.0, 64.0, 32.0, 16.0]))
    assert f.tps_per_user.tolist() == [50, 100, 150] and f.loads.tolist() == [64, 16, 1]
    assert f.throughput_at(75) == pytest.approx(800.0)             # linear in TPS/user between neighbours
    assert f.throughput_at(150) == pytest.approx(200.0) and f.throughput_at(50) == pytest.approx(1000.0)
    assert f.status_at(160) == "infeasible" and math.isnan(f.throughput_at(160))
    # below the frontier every point meets the tier: the best of them (the heaviest load's), never NaN
    assert f.status_at(40) == "covered" and f.throughput_at(40) == pytest.approx(1000.0)
    assert f.tps_at_throughput(800) == pytest.approx(75.0)          # the inverse of the same segments
    assert f.tps_at_throughput(400) == pytest.approx(125.0)
    assert f.throughput_status(1100) == "infeasible" and math.isnan(f.tps_at_throughput(1100))
    assert f.throughput_status(100) == "uncovered" and math.isnan(f.tps_at_throughput(100))


SCEN = load_scenario().to_dict()


def fake_record(policy: str, load: float, seed: int, tps: float, thr: float, req_tps, req_out,
                verify: float = 2.0) -> dict:
    """A sweep record with a given summary point and per-request data (the fields frontier reads)."""
    return {
        "record_version": 1, "id": f"{policy}-{load:g}-{seed}", "status": "ok", "error": None,
        "config": {"scenario": SCEN, "policy": policy, "knobs": {"gamma": 1, "drafter": "mtp"},
                   "load": {"mode": "closed", "value": float(load)}, "seed": seed, "num_requests": 10,
                   "trace_sha": "0" * 64},
        "summary": {"mean_tps_per_user": tps, "output_throughput_per_gpu": thr,
                    "mean_verify_tokens_per_request": verify, "load": {"mode": "closed"}},
        "requests": {"tps_per_user": list(req_tps), "output_tokens": list(req_out)},
    }


def synthetic_records() -> list[dict]:
    recs = []
    # baseline B: (60, 900) (100, 500) (140, 100); policy A: (80, 1500) (120, 1100) (200, 300); oracle: 2x A
    for load, (xb, yb), (xa, ya) in zip([16, 4, 1], [(60, 900), (100, 500), (140, 100)],
                                        [(80, 1500), (120, 1100), (200, 300)]):
        for seed, d in ((0, -1.0), (1, 1.0)):   # seeds symmetric around the mean: the means are the values above
            recs.append(fake_record("B", load, seed, xb + d, yb + 10 * d, [50, 90, 130], [100, 100, 200]))
            recs.append(fake_record("A", load, seed, xa + d, ya + 10 * d, [70, 110, 150], [100, 300, 100]))
            recs.append(fake_record("oracle", load, seed, xa + d, 2 * ya + 10 * d, [70, 110, 150], [1, 1, 1]))
    return recs


def test_gain_at_matched_throughput_is_against_the_baseline_where_the_baseline_covers_the_tier():
    """Tier 50 lies below B's lightest point (60 TPS/user, 900 tok/s/GPU): B covers it at 900, its own TPS/user
    there is 60, so B's gain at matched throughput is 0 and A's is read against 60, not against the tier."""
    tab = compare(synthetic_records(), [50], baseline="B").set_index(["tier", "curve"])
    assert tab.loc[(50, "B"), "status"] == "covered"
    assert tab.loc[(50, "B"), "throughput_per_gpu"] == pytest.approx(900)
    assert tab.loc[(50, "B"), "tps_gain_at_matched"] == 0.0
    # A at 900 tok/s/GPU: between (120, 1100) and (200, 300): 120 + 80 * 200 / 800 = 140
    assert tab.loc[(50, "A"), "tps_at_matched_throughput"] == pytest.approx(140)
    assert tab.loc[(50, "A"), "tps_gain_at_matched"] == pytest.approx(140 / 60 - 1)


def test_compare_gains_matched_throughput_oracle_fraction_and_goodput():
    tab = compare(synthetic_records(), [80, 100, 150], baseline="B").set_index(["tier", "curve"])
    # at 80: B interpolates between (60, 900) and (100, 500) -> 700; A sits on its point (80, 1500)
    assert tab.loc[(80, "B"), "throughput_per_gpu"] == pytest.approx(700)
    assert tab.loc[(80, "A"), "throughput_per_gpu"] == pytest.approx(1500)
    assert tab.loc[(80, "A"), "gain_vs_baseline"] == pytest.approx(1500 / 700 - 1)
    # TPS/user of A at B's throughput 700: A between (120, 1100) and (200, 300): 120 + 80 * 400/800 = 160
    assert tab.loc[(80, "A"), "tps_at_matched_throughput"] == pytest.approx(160)
    assert tab.loc[(80, "A"), "tps_gain_at_matched"] == pytest.approx(160 / 80 - 1)
    assert tab.loc[(80, "A"), "oracle_fraction"] == pytest.approx(0.5)
    # per-seed frontiers: seed 0 of A has (79, 1490), (119, 1090) -> 1480 at 80; seed 1 starts at 81 > 80,
    # so the tier is covered there and reads its heaviest point, 1510
    assert tab.loc[(80, "A"), "num_seeds"] == 2
    assert tab.loc[(80, "A"), "throughput_std"] == pytest.approx(np.std([1480.0, 1510.0], ddof=1))
    # B at 100: seed 0 (59, 890), (99, 490), (139, 90) -> 480; seed 1 (61, 910), (101, 510) -> 520
    assert tab.loc[(100, "B"), "num_seeds"] == 2
    assert tab.loc[(100, "B"), "throughput_std"] == pytest.approx(np.std([480.0, 520.0], ddof=1))
    # 150 is past B's last point (140): infeasible, and no gain
    assert tab.loc[(150, "B"), "status"] == "infeasible" and math.isnan(tab.loc[(150, "A"), "gain_vs_baseline"])
    assert tab.loc[(150, "A"), "throughput_per_gpu"] == pytest.approx(1100 - 30 * 800 / 80)
    # goodput at 100 for A: requests at 110 and 150 meet it, carrying 400 of 500 tokens; best at load 16
    assert tab.loc[(100, "A"), "best_goodput_per_gpu"] == pytest.approx(1500 * 400 / 500)
    assert tab.loc[(100, "A"), "best_goodput_load"] == 16
    assert tab.loc[(100, "A"), "attainment_at_best"] == pytest.approx(2 / 3)


def test_sla_table_attainment_and_budget_curve():
    sla = sla_table(synthetic_records(), [100]).set_index(["curve", "load"])
    assert sla.loc[("B", 4.0), "attainment"] == pytest.approx(1 / 3)           # only 130 >= 100
    assert sla.loc[("B", 4.0), "goodput_per_gpu"] == pytest.approx(500 * 200 / 400)
    bc = budget_curve(synthetic_records())
    assert set(bc.curve) == {"A", "B", "oracle"} and (bc.mean_verify_tokens_per_request_mean == 2.0).all()


def test_goodput_at_a_tier_also_honours_the_latency_limits_given():
    """compare --goodput ttft:1000: a request counts in goodput* only if it meets the tier and the TTFT limit (a
    fleet operator's DSpark at 128 users read 100% attainment with every TTFT over 5 s). A's load-16 requests at
    110 and 150 TPS/user meet tier 100; with the 150 one's TTFT over the limit only the 110 one (300 of 500 tokens)
    counts; its one-token request (TPOT 0) is in the latencies, not in the tier's requests."""
    recs = synthetic_records()
    for r in recs:
        r["latencies"] = {"ttft_ms": [5.0, 20.0, 2000.0, 7.0], "tpot_ms": [10.0, 9.0, 8.0, 0.0],
                          "e2el_ms": [100.0, 200.0, 2100.0, 7.0]}
    tab = compare(recs, [100], baseline="B", slos_ms={"ttft": 1000}).set_index(["tier", "curve"])
    assert tab.loc[(100, "A"), "best_goodput_per_gpu"] == pytest.approx(1500 * 300 / 500)
    assert tab.loc[(100, "A"), "attainment_at_best"] == pytest.approx(1 / 3)
    plain = compare(recs, [100], baseline="B").set_index(["tier", "curve"])
    assert plain.loc[(100, "A"), "best_goodput_per_gpu"] == pytest.approx(1500 * 400 / 500)
    recs[0]["latencies"]["ttft_ms"].pop()                   # a record whose two lists disagree is named
    recs[0]["latencies"]["tpot_ms"][0] = 0.0
    with pytest.raises(SpecsimInputError, match="latencies"):
        compare(recs, [100], slos_ms={"ttft": 1000})


def test_compare_rejects_unknown_baseline_and_mixed_scenarios():
    recs = synthetic_records()
    with pytest.raises(SpecsimInputError, match="baseline") as e:
        compare(recs, [80], baseline="nope")
    assert e.value.expected == "one of the sweep's curves ['A', 'B', 'oracle']" and e.value.got == "'nope'"
    with pytest.raises(SpecsimInputError) as e:              # a typo gets the closest curve, as other errors do
        compare(recs, [80], baseline="orcale")
    assert e.value.expected == "one of the sweep's curves ['A', 'B', 'oracle'] (closest valid: 'oracle')"
    odd = fake_record("C", 1, 0, 10, 10, [10], [5])
    odd["config"]["scenario"] = dict(SCEN, engine={"gamma": 3, "host_overhead_s": 0.0})
    with pytest.raises(SpecsimInputError, match="scenario"):
        compare(recs + [odd], [80], baseline="B")


# --------------------------------------------------------------------------------------------- by hand
def test_frontier_point_by_hand(tmp_path):
    """Flat profile, no prefill time or host overhead, constant alpha, static k, long outputs, N users.

    Each step of the one replica verifies k drafts per request and emits E = (1 - a^(k+1)) / (1 - a)
    tokens per request on average; it lasts the target step T plus the DSpark drafter's draft time
    T (base + per_draft k) (specsim.hardware.drafter, flat profile). So throughput per GPU is
    N E / step / GPUs and every request decodes at E / step tokens per second.
    """
    T, alpha, k, gpus = 0.02, 0.8, 3, 2
    prof = tmp_path / "flat.json"
    save_profile(StepTimeProfile.flat(T, 4096), prof)
    scen = load_scenario(None, [f"profile.name={json.dumps(str(prof))}", "prefill.time_per_token_s=1e-9",
                                "engine.host_overhead_s=0", "acceptance.sigma_request=0",
                                "acceptance.sigma_step=0", "acceptance.sigma_token=0",
                                f"acceptance.constant_alpha={alpha}", f"cluster.gpus_per_replica={gpus}",
                                f"engine.gamma={k}", "drafter.name=dspark"])
    n = 40
    trace = Trace([f"r{i}" for i in range(n)], np.zeros(n), np.full(n, 64), np.full(n, 1000), ["code"] * n)
    spec = SweepSpec(policies=("static",), concurrency=(2, 8), num_requests=n, requests_per_user=4)
    run_sweep(spec, scen, trace, tmp_path / "sweep", executor="serial", progress=False)
    recs = load_records(tmp_path / "sweep")
    cost = drafter_cost("dspark")
    step_s = T * (1 + cost.base_fraction + cost.per_draft_fraction * k)
    E = (1 - alpha ** (k + 1)) / (1 - alpha)
    df = results_frame(recs)
    assert (df.status == "ok").all() and (df.gamma == k).all()
    for _, r in df.iterrows():
        assert r.output_throughput_per_gpu == pytest.approx(r.load * E / step_s / gpus, rel=0.02)
        assert r.mean_tps_per_user == pytest.approx(E / step_s, rel=0.02)
    # the frontier point at N = 8 carries the hand value; at its own TPS/user the frontier returns it
    table = compare(recs, [float(df[df.load == 8].mean_tps_per_user.iloc[0])])
    row = table[table.curve == "static"].iloc[0]
    assert row.status == "ok"
    assert row.throughput_per_gpu == pytest.approx(8 * E / step_s / gpus, rel=0.02)


# --------------------------------------------------------------------------------------------- golden
REGRESSION_SPEC = SweepSpec(policies=("mtp1", "static", "specdecpp", "dspark", "dspark-async"),
                            concurrency=(1, 4, 16, 64), seeds=(0,), num_requests=16, requests_per_user=8)
REGRESSION_TIERS = (100.0, 150.0, 200.0)
RTOL = 1e-3


@pytest.fixture(scope="module")
def regression_dir(tmp_path_factory):
    """The regression sweep (tests/data/regression.toml on tests/data/regression.jsonl), 20 points."""
    out = tmp_path_factory.mktemp("regression")
    res = run_sweep(REGRESSION_SPEC, load_scenario(TESTS / "data" / "regression.toml"),
                    load_trace(TESTS / "data" / "regression.jsonl"), out, executor="process", jobs=2,
                    progress=False)
    assert res.failed == [], res.failed
    return out


def golden_metrics(records: list[dict]) -> dict:
    """The metrics the golden file pins: throughput at the tiers, gains, matched TPS/user, budget curve."""
    cj = comparison_json(records, REGRESSION_TIERS, "mtp1")
    out: dict = {"tiers": list(REGRESSION_TIERS), "baseline": "mtp1", "throughput_at_tier": {}, "gain": {},
                 "tps_gain_at_matched": {}, "frontier_points": {}, "budget_curve": {}}
    for row in cj["table"]:
        c, t = row["curve"], f"{row['tier']:g}"
        out["throughput_at_tier"].setdefault(c, {})[t] = row["throughput_per_gpu"]
        out["gain"].setdefault(c, {})[t] = row["gain_vs_baseline"]
        out["tps_gain_at_matched"].setdefault(c, {})[t] = row["tps_gain_at_matched"]
    for c, f in cj["frontiers"].items():
        out["frontier_points"][c] = [[x, y] for x, y in zip(f["tps_per_user"], f["throughput_per_gpu"])]
    for row in cj["budget_curve"]:
        out["budget_curve"].setdefault(row["curve"], {})[f"{row['load']:g}"] = \
            row["mean_verify_tokens_per_request_mean"]
    return out


def _assert_close(got, want, path="golden"):
    if isinstance(want, dict):
        assert set(got) == set(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            _assert_close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), f"{path}: {len(got)} entries, golden has {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, f"{path}[{i}]")
    elif want is None or got is None:
        assert got is want, f"{path}: got {got}, golden {want}"
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=RTOL, abs=1e-9), f"{path}: got {got}, golden {want}"
    else:
        assert got == want, f"{path}: got {got}, golden {want}"


def test_golden_frontier_metrics(regression_dir):
    """The regression sweep's frontier metrics match tests/golden/regression_frontier.json (rel 1e-3).

    The simulation is deterministic, so any change of the engine, policies, acceptance model, profile
    or metrics that moves a number shows here. Regenerate on purpose with
    ``SPECSIM_UPDATE_GOLDEN=1 pytest tests/test_frontier.py -k golden`` (docs/sweeps.md).
    """
    got = golden_metrics(load_records(regression_dir))
    if os.environ.get("SPECSIM_UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(dict(got, regenerate="SPECSIM_UPDATE_GOLDEN=1 pytest tests/test_frontier.py "
                                               "-k golden"), indent=1) + "\n")
        pytest.skip(f"golden metrics regenerated into {GOLDEN.name}")
    want = json.loads(GOLDEN.read_text())
    want.pop("regenerate", None)
    _assert_close(got, want)


def test_regression_sweep_sanity(regression_dir):
    """Invariants of the regression frontiers that hold whatever the golden numbers are."""
    recs = load_records(regression_dir)
    bc = budget_curve(recs).set_index(["curve", "load"])
    # MTP-1 verifies exactly one draft per request-step (budget 2, flat); static gamma + 1 = 6 while the KV
    # cache has room; at 64 users (~150k tokens wanted, 110k held) paged KV leaves some requests without
    # room for the drafter's share or the lookahead, so static verifies fewer there (docs/memory.md)
    assert np.allclose(bc.xs("mtp1").mean_verify_tokens_per_request_mean, 2.0, atol=0.01)
    static = bc.xs("static").mean_verify_tokens_per_request_mean
    assert (static.loc[[1.0, 4.0, 16.0]] > 5.8).all() and 5.0 < static.loc[64.0] <= 6.0
    # DSpark's budget shrinks as load grows (the paper's Fig. 8 trend)
    dsp = bc.xs("dspark").mean_verify_tokens_per_request_mean.sort_index()
    assert dsp.iloc[0] > dsp.iloc[-1]
    # throughput per GPU grows with load and TPS/user falls, for every curve
    df = results_frame(recs)
    for _, sub in df.groupby("curve"):
        sub = sub.sort_values("load")
        assert (np.diff(sub.output_throughput_per_gpu) > 0).all()
        assert (np.diff(sub.mean_tps_per_user) < 0).all()


def test_cli_compare_and_plot(regression_dir, tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(regression_dir), "--tiers", "100,150,200", "--baseline", "mtp1",
                            "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["baseline"] == "mtp1" and len(data["table"]) == 15
    base = [row for row in data["table"] if row["curve"] == "mtp1"]
    assert all(row["gain_vs_baseline"] == pytest.approx(0.0) for row in base if row["status"] == "ok")
    r = runner.invoke(app, ["compare", str(regression_dir), "--tiers", "100,150"], env={"COLUMNS": "160"})
    assert r.exit_code == 0 and "dspark-async" in r.output
    r = runner.invoke(app, ["plot", str(regression_dir), "--out", str(tmp_path), "--tiers", "100,150"])
    assert r.exit_code == 0, r.output
    for name in ("frontiers.png", "budget.png", "throughput.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000



def test_cli_plot_two_folders_of_one_name_write_a_file_each(regression_dir, tmp_path):
    """Two sweep folders named alike (x/sweep, y/sweep) get a budget and throughput figure each, named by the
    parts that tell them apart, not one file written twice."""
    import shutil

    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    for parent in ("x", "y"):
        shutil.copytree(regression_dir, tmp_path / parent / "sweep")
    r = CliRunner().invoke(app, ["plot", str(tmp_path / "x" / "sweep"), str(tmp_path / "y" / "sweep"),
                                 "--out", str(tmp_path / "plots"), "--tiers", "100"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == ["budget-x-sweep.png", "budget-y-sweep.png", "frontiers.png",
                     "throughput-x-sweep.png", "throughput-y-sweep.png"]

# --------------------------------------------------------------------------------------------- tolerance, goodput
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def tier_boundary_dir(tmp_path_factory):
    """tier_boundary.jsonl swept with `none` at rate scale 1 on FLAT20 (tests/data/README.md)."""
    scen = load_scenario(None, [f"profile.name={json.dumps(str(DATA / 'flat20ms_profile.json'))}",
                                "engine.host_overhead_s=0", "engine.request_overhead_s=0",
                                "drafter.base_fraction=0", "drafter.per_draft_fraction=0",
                                "prefill.time_per_token_s=0.0009765625"])
    out = tmp_path_factory.mktemp("tier_boundary")
    run_sweep(SweepSpec(policies=("none",), rate_scales=(1.0,)), scen, load_trace(DATA / "tier_boundary.jsonl"),
              out, executor="serial", progress=False)
    return out


def test_tier_exactly_at_a_points_tps_per_user_is_met(tier_boundary_dir):
    recs = load_records(tier_boundary_dir)
    df = results_frame(recs)
    assert df.mean_tps_per_user.iloc[0] == pytest.approx(50.0, rel=1e-12)     # 49.99999999999478: rounding
    row = compare(recs, [50.0]).iloc[0]
    # frontier and attainment read the same rule: ok at 153 tokens / 201.0625 s, attainment 1.0
    assert row.status == "ok"
    assert row.throughput_per_gpu == pytest.approx(153 / 201.0625, rel=1e-9)
    assert round(row.throughput_per_gpu, 4) == 0.7610
    assert row.attainment_at_best == 1.0
    assert sla_table(recs, [50.0]).attainment.iloc[0] == 1.0
    cj = comparison_json(recs, [50.0], None)
    assert cj["table"][0]["status"] == "ok" and cj["table"][0]["throughput_per_gpu"] is not None
    # a tier clearly above the point stays infeasible
    assert compare(recs, [50.001]).iloc[0].status == "infeasible"


def test_frontier_ends_within_tolerance():
    f = Frontier.from_points("c", np.array([10.0, 20.0]), np.array([5.0, 1.0]), np.array([1.0, 2.0]))
    assert f.status_at(20.0 * (1 + 1e-12)) == "ok" and f.throughput_at(20.0 * (1 + 1e-12)) == 1.0
    assert f.status_at(10.0 * (1 - 1e-12)) == "ok" and f.throughput_at(10.0 * (1 - 1e-12)) == 5.0
    assert f.status_at(20.001) == "infeasible" and f.status_at(9.999) == "covered"
    assert f.tps_at_throughput(5.0 * (1 + 1e-12)) == 10.0 and f.throughput_status(5.001) == "infeasible"


def test_request_goodput_table_hand_computed(tier_boundary_dir):
    from specsim.analysis.frontier import request_goodput_table

    recs = load_records(tier_boundary_dir)
    # each request: ttft 62.5 ms, tpot 20 ms, e2el 62.5 + 50 x 20 = 1062.5 ms; duration 201.0625 s
    tab = request_goodput_table(recs, {"e2el": 1062.5, "ttft": 62.5})
    assert tab.request_goodput.iloc[0] == pytest.approx(3 / 201.0625, rel=1e-9) and tab.good_share.iloc[0] == 1.0
    tab = request_goodput_table(recs, {"tpot": 19.9})
    assert tab.request_goodput.iloc[0] == 0.0 and tab.good_share.iloc[0] == 0.0
    cj = comparison_json(recs, [50.0], None, {"tpot": 20})
    assert cj["goodput_slos_ms"] == {"tpot": 20} and cj["request_goodput"][0]["good_share"] == 1.0
    old = [dict(r) for r in recs]
    old[0].pop("latencies")
    with pytest.raises(SpecsimInputError, match="--force"):
        request_goodput_table(old, {"tpot": 20})


@pytest.mark.parametrize("width", [40, 80, 200])
def test_compare_table_shows_every_name_and_number_whole(regression_dir, width):
    from specsim.cli.compare_table import _compare_row, compare_text

    recs = load_records(regression_dir)
    tab = compare(recs, [100.0, 150.0, 200.0], baseline="mtp1")
    text = compare_text(tab, regression_dir, width=width)
    tokens = set(text.split())
    has_oracle = tab.oracle_fraction.notna().any()
    for _, r in tab.iterrows():
        for cell in _compare_row(r, has_oracle, bool((tab.num_seeds > 1).any())):
            for tok in cell.split():
                assert tok in tokens, f"{tok!r} cut at width {width}"
    for name in ("tok/s/GPU", "TPS@match", "gain@match", "goodput*", "attain*", "infeasible:", "(covered):", "winner", "advice"):
        assert name in tokens
    # no line is wider than the width (the sweep's tmp path in the title is a word rich folds)
    assert max(len(line) for line in text.splitlines()) <= width


def test_cli_compare_goodput(tier_boundary_dir):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    runner = CliRunner()
    r = runner.invoke(app, ["compare", str(tier_boundary_dir), "--tiers", "50", "--goodput", "e2el:1062.5", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["table"][0]["status"] == "ok"
    assert data["request_goodput"][0]["request_goodput"] == pytest.approx(3 / 201.0625, rel=1e-9)
    for width in ("40", "80"):
        r = runner.invoke(app, ["compare", str(tier_boundary_dir), "--tiers", "50", "--goodput", "tpot:19.9"],
                          env={"COLUMNS": width})
        assert r.exit_code == 0, r.output
        tokens = set(r.output.split())
        assert {"request_goodput", "0.000", "0.0%", "none", "1"} <= tokens and "tpot<=19.9ms;" in tokens


def test_closed_loop_records_use_the_window_block():
    # a record with whole-run figures at the top level and the window's in its block: frontier, attainment and
    # goodput read the window (older records without the block keep their top-level figures)
    rec = fake_record("B", 4, 0, 999.0, 9999.0, [50, 90, 130], [100, 100, 200])
    rec["summary"]["window"] = {"mean_tps_per_user": 100.0, "output_throughput_per_gpu": 500.0,
                                "mean_verify_tokens_per_request": 2.0, "duration_s": 10.0}
    old = fake_record("B", 4, 1, 100.0, 500.0, [50, 90, 130], [100, 100, 200])
    for r in (rec, old):
        df = results_frame([r])
        assert df.mean_tps_per_user.iloc[0] == 100.0 and df.output_throughput_per_gpu.iloc[0] == 500.0
        sla = sla_table([r], [100]).iloc[0]
        assert sla.attainment == pytest.approx(1 / 3) and sla.goodput_per_gpu == pytest.approx(500 * 200 / 400)


def test_a_tier_no_request_meets_shows_no_best_goodput_load(regression_dir):
    """compare --tiers 10000 showed "goodput* 0, load* 4": no load is the best where no request met the tier."""
    from specsim.cli.compare_table import _compare_row

    tab = compare(load_records(regression_dir), [1e6], baseline="mtp1")
    cols = ["goodput*", "load*", "attain*", "winner", "advice"]
    for _, r in tab.iterrows():
        cells = dict(zip(cols, _compare_row(r, False, False)[-5:]))
        assert cells["goodput*"] == "0" and cells["load*"] == "-"


def test_a_tier_the_baseline_meets_only_at_its_lightest_load_is_noted():
    """A fresh user's report: +3,666% over ``none`` at tier 150, where none met the tier only at one user (152.1
    TPS/user). compare notes such tiers (text and --json warnings), naming the baseline's lightest point."""
    from specsim.analysis.frontier import baseline_edge_notes

    recs = [fake_record("none", 1, 0, 152.1, 149.0, [152.1], [10]),
            fake_record("none", 4, 0, 130.9, 515.0, [130.9], [10]),
            fake_record("dspark", 1, 0, 600.0, 500.0, [600.0], [10]),
            fake_record("dspark", 16, 0, 200.0, 6000.0, [200.0], [10])]
    for r in recs[2:]:
        r["config"]["knobs"] = {"gamma": 7, "drafter": "dspark"}
    tab = compare(recs, [100.0, 140.0, 150.0, 152.1, 160.0], baseline="none")
    # 100: met at load 4 too; 140: its 358 tok/s/GPU (149 + 12.1 / 21.2 x 366) is over half the 515 it serves at
    # load 4, no edge; 160: not met at all
    assert sorted(tab.attrs["baseline_edge"]) == [150.0, 152.1]
    (note,) = baseline_edge_notes(tab)           # one note for both tiers: the same edge point
    # the gains at 150 divide by the baseline interpolated towards load 4 (149 + 2.1 / 21.2 x 366 = 185), and the
    # note quotes that figure beside the point's own (a fresh user read 149 in the note and 187 in the table); at
    # 152.1, the point itself, the gains divide by its own 149
    assert note.startswith("note: at tiers 150 and 152.1 the baseline none meets each only at its lightest load, 1 "
                           "(152.1 TPS/user, 149 tok/s/GPU); the 185 tok/s/GPU the gains divide by at tier 150 is "
                           "interpolated from it towards its next load, which misses the tier: under half the 515 "
                           "tok/s/GPU it serves at load 4, ")
    assert note.endswith("so the gains at those tiers are large by construction; read the throughputs themselves")
    (at_point,) = baseline_edge_notes(compare(recs, [152.1], baseline="none"))
    assert "(152.1 TPS/user, 149 tok/s/GPU): under half the 515" in at_point      # at the point itself: one figure
    assert baseline_edge_notes(compare(recs, [150.0])) == []                   # no baseline, no note
    assert tab.attrs["warnings"] == baseline_edge_notes(tab)        # what compare prints, for the Python API too


def test_a_baseline_read_near_its_heavy_load_is_no_edge_on_a_sparse_grid():
    """A fresh user's sweep at 16, 64 and 256 users: none met tier 50 only at 16 users (102.8 TPS/user), but its
    3,054 tok/s/GPU there is interpolated almost to its 64-user point (48.9 TPS/user, 3,084), 91% of the 3,348 it
    serves at 256: the "near its speed ceiling, large by construction" note does not apply. At tier 101 it reads
    1,652, under half of 3,348: the note stays."""
    from specsim.analysis.tier_notes import EDGE_SHARE, baseline_edge_notes

    recs = [fake_record("none", n, 0, x, y, [x], [10])
            for n, x, y in ((16, 102.8, 1603.0), (64, 48.9, 3084.0), (256, 11.3, 3348.0))]
    recs += [fake_record("static", n, 0, x, y, [x], [10]) for n, x, y in ((16, 285.7, 4003.0), (64, 115.7, 6446.0))]
    tab = compare(recs, [50.0, 101.0], baseline="none")
    base = tab[(tab.curve == "none")].set_index("tier").throughput_per_gpu
    assert base[50.0] == pytest.approx(1603 + (102.8 - 50) / (102.8 - 48.9) * (3084 - 1603))     # 3,054
    assert base[50.0] > EDGE_SHARE * 3348 > base[101.0]
    assert list(tab.attrs["baseline_edge"]) == [101.0]
    (note,) = baseline_edge_notes(tab)
    assert note.startswith("note: at tier 101 the baseline none meets the tier only at its lightest load, 16 (102.8 "
                           "TPS/user, 1,603 tok/s/GPU); the 1,652 tok/s/GPU the gains divide by is interpolated ")
    assert "under half the 3,348 tok/s/GPU it serves at load 256" in note


def test_a_figure_title_names_the_loads_that_finished():
    """A fresh user's plot title read "1-256 users" where every 256-user point had failed (none drawn)."""
    from specsim.analysis.plots import swept_title

    recs = [fake_record("A", load, 0, 100.0, 10.0 * load, [100.0], [10]) for load in (1, 16, 256)]
    recs[-1].update(status="error", error="trace too short for a closed-loop window", summary={})
    assert swept_title("runs/x", recs) == "runs/x: A; closed loop 1-16 users; 1 seed"
