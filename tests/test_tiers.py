"""The answer per SLA tier: the paired rule, the winner per tier, load advice, and the tiers stored with a sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specsim.errors import SpecsimInputError
from specsim.analysis.frontier import X, Y, load_advice
from specsim.analysis.significance import paired_margin
from specsim.analysis.tiers import (DEFAULT_TIERS, deployable, goodput_notes, mark_winners, sweep_tiers, tiers_json,
                                   winners)

DATA = Path(__file__).resolve().parent / "data"


# --------------------------------------------------------------------------------------------- the paired rule
def test_paired_margin_three_seeds_hand_computed():
    # differences 10, 20, 30: mean 20, sd 10, t = 20 / (10 / sqrt 3) = 2 sqrt 3 on 2 degrees of freedom;
    # Student's t with 2 df has sf(t) = (1 - t / sqrt(t^2 + 2)) / 2 = (1 - sqrt(12 / 14)) / 2
    m = paired_margin(np.array([110.0, 120.0, 130.0]), np.array([100.0, 100.0, 100.0]))
    assert m.p_value == pytest.approx((1 - math.sqrt(12 / 14)) / 2, rel=1e-9)
    assert m.holds and m.num_seeds == 3 and m.seed_wins == 3 and m.mean_diff == pytest.approx(20.0)
    assert m.margin == pytest.approx(120 / 100 - 1)
    assert m.verdict.startswith("holds (p=0.037, 3 seeds)")


def test_paired_margin_p_value_is_scipy_stats_ttest_rel_bit_for_bit():
    """The p-value is computed without importing scipy.stats (~1 s of compare's start): the same number as
    scipy.stats.ttest_rel(a, b, alternative="greater"), to the last bit, over seeds counts, scales and spreads."""
    import warnings

    from scipy import stats

    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(2, 12))
        scale = 10.0 ** rng.integers(-3, 7)
        b = rng.uniform(0.5, 2.0, n) * scale
        a = b * (1 + rng.normal(rng.choice([0.0, 0.01, 0.2]), rng.choice([1e-6, 1e-3, 0.05]), n))
        if np.ptp(a - b) == 0:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = float(stats.ttest_rel(a, b, alternative="greater").pvalue)
        got = paired_margin(a, b).p_value
        assert got == want or (math.isnan(got) and math.isnan(want)), (a, b)


def test_paired_margin_two_seeds_and_one_seed():
    # differences 1, 3: t = 2 / (sqrt 2 / sqrt 2) = 2 on 1 df, sf = 1/2 - atan(2) / pi = 0.1476 (shown; untested)
    m = paired_margin({0: 11.0, 1: 13.0}, {0: 10.0, 1: 10.0})
    assert m.p_value == pytest.approx(0.5 - math.atan(2.0) / math.pi, rel=1e-9) and not m.holds
    assert m.verdict == "untested (p=0.15, 2 seeds; a test needs 3)"
    # seeds pair by key; a seed missing on one side or NaN drops out; one seed left: no test
    one = paired_margin({0: 11.0, 1: float("nan"), 2: 5.0}, {0: 10.0, 1: 10.0})
    assert one.num_seeds == 1 and not one.holds and one.verdict == "one seed" and math.isnan(one.p_value)
    # equal differences: no spread, the margin holds when they are positive
    flat = paired_margin(np.array([2.0, 3.0, 4.0]), np.array([1.0, 2.0, 3.0]))
    assert flat.holds and flat.verdict == "holds (no spread, 3 seeds)"
    # two seeds: the p-value is shown, the lead is untested (a fresh user read p = 0.042 on 2 seeds as settled)
    two = paired_margin({0: 110.0, 1: 120.1}, {0: 100.0, 1: 110.0})
    assert two.p_value < 0.05 and not two.holds
    assert two.verdict == f"untested (p={two.p_value:.2g}, 2 seeds; a test needs 3)"
    assert not paired_margin(np.array([2.0, 3.0]), np.array([1.0, 2.0])).holds      # no spread, two seeds
    assert paired_margin({}, {}).verdict == "no common seed"
    with pytest.raises(ValueError, match="equal lengths"):
        paired_margin(np.ones(2), np.ones(3))


# --------------------------------------------------------------------------------------------- winners
def _table():
    rows = [(100.0, "oracle", 900.0), (100.0, "static", 600.0), (100.0, "dspark-async", 650.0),
            (100.0, "mtp1", 400.0), (200.0, "static", float("nan")), (200.0, "mtp1", 300.0),
            (300.0, "mtp1", float("nan"))]
    return pd.DataFrame(rows, columns=["tier", "curve", "throughput_per_gpu"])


def test_mark_winners_deployable_margin_and_verdict():
    per_seed = {(100.0, "dspark-async"): {0: 660.0, 1: 650.0, 2: 640.0},
                (100.0, "static"): {0: 600.0, 1: 605.0, 2: 595.0}, (200.0, "mtp1"): {0: 300.0}}
    tab = mark_winners(_table(), per_seed)
    w = winners(tab)
    assert w.tier.tolist() == [100.0, 200.0]                      # tier 300: nobody reaches it
    assert not deployable("oracle") and not deployable("dspark-global gamma=3") and deployable("dspark")
    top = w.iloc[0]
    assert top.curve == "dspark-async" and top.runner_up == "static"     # oracle (900) is not deployable
    assert top.margin == pytest.approx(650 / 600 - 1)
    # differences 60, 45, 45: mean 50, sd 8.66, t = 10 on 2 df: holds
    assert top.margin_holds and top.margin_verdict.startswith("holds")
    assert w.iloc[1].curve == "mtp1" and w.iloc[1].margin_verdict == "no runner-up"
    js = tiers_json(tab)
    assert js[0]["curve"] == "dspark-async" and js[0]["margin_holds"] is True and js[1]["margin"] is None


def test_a_consistent_lead_under_two_percent_is_called_small():
    """A fresh user's 0.3% lead over 2 seeds read 'holds (p=0.021)' and was within noise with 4 seeds: a lead that
    the seeds uphold but under TIE_MARGIN says so."""
    rows = pd.DataFrame([(100.0, "dspark-async", 603.0), (100.0, "static", 601.2)],
                        columns=["tier", "curve", "throughput_per_gpu"])
    per_seed = {(100.0, "dspark-async"): {0: 602.0, 1: 604.0, 2: 603.0},
                (100.0, "static"): {0: 600.2, 1: 602.2, 2: 601.3}}
    top = winners(mark_winners(rows, per_seed)).iloc[0]
    assert top.margin_holds and top.margin_verdict.startswith("holds") and top.margin_verdict.endswith("a lead under 2%")


def test_a_winner_by_the_mean_that_serves_less_goodput_is_named():
    """The winner meets tier 100 by its requests' mean TPS/user with 55% of them meeting it; the runner-up's best
    load serves 700 tok/s/GPU from requests that meet it against the winner's 500: a note says so. A curve not
    deployable (oracle) or ahead by under 2% is not named."""
    rows = pd.DataFrame([(100.0, "dspark", 800.0, 500.0, 0.55), (100.0, "mtp1", 750.0, 700.0, 0.95),
                         (100.0, "oracle", 900.0, 990.0, 1.0), (200.0, "dspark", 300.0, 300.0, 0.9),
                         (200.0, "mtp1", 200.0, 305.0, 0.92)],
                        columns=["tier", "curve", "throughput_per_gpu", "best_goodput_per_gpu", "attainment_at_best"])
    notes = goodput_notes(mark_winners(rows, {}))
    assert len(notes) == 1 and notes[0].startswith("note: at tier 100 the winner dspark meets the tier by its")
    assert "(55% of its requests meet it at its best load)" in notes[0]
    assert "mtp1 serves more: 700 against 500" in notes[0]
    assert goodput_notes(mark_winners(rows[rows.curve != "mtp1"], {})) == []


# --------------------------------------------------------------------------------------------- load advice
def _points(loads, x, y, mode="closed"):
    return pd.DataFrame({"load": loads, "mode": mode, f"{X}_mean": x, f"{Y}_mean": y})


def test_load_advice_only_where_more_loads_can_help():
    rising = _points([1, 2, 4], [200.0, 150.0, 120.0], [100.0, 190.0, 200.0])   # +5.3% at the heaviest load
    flat = _points([1, 2, 4], [200.0, 150.0, 120.0], [100.0, 195.0, 198.0])     # +1.5%: saturated
    assert load_advice(rising, 100.0) == "add heavier loads"
    assert load_advice(flat, 100.0) == ""                 # covered, but heavier loads cannot help
    assert load_advice(rising, 130.0) == ""               # inside the frontier
    assert load_advice(rising, 250.0) == ""               # one user is already below the tier: infeasible
    assert load_advice(_points([2, 4], [150.0, 120.0], [190.0, 200.0]), 160.0) == "add lighter loads"
    assert load_advice(_points([0.5, 1.0], [150.0, 120.0], [190.0, 200.0], "open"), 160.0) == "add lighter loads"
    # the tour's dspark at tier 200: 369.9 TPS/user and 5,254 tok/s/GPU at 16 users, 147.2 and 8,431 at 64:
    # interpolated 8,431 - (200 - 147.2) / 222.7 x 3,177 = 7,678, 46% above 16 users' 5,254
    tour = _points([4, 16, 64], [537.1, 369.9, 147.2], [2040.0, 5254.0, 8431.0])
    assert load_advice(tour, 200.0) == "add loads between 16 and 64"
    assert load_advice(rising, 130.0) == ""               # 196.7 interpolated, 3.5% above load 2's 190
    # one load that covers the tier: nothing shows heavier loads lose throughput (a fresh user's compare read
    # "covered" and a +111% WINNER off one point with no advice)
    assert load_advice(_points([8], [150.0], [3259.0]), 100.0) == "add heavier loads"
    assert load_advice(_points([8], [150.0], [3259.0]), 200.0) == "add lighter loads"    # below the tier


# --------------------------------------------------------------------------------------------- stored tiers
def test_tiers_stored_with_the_sweep_are_reused(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    from specsim.scenario import load_scenario
    from specsim.sweep import SweepSpec, run_sweep
    from specsim.workload import load_trace

    assert sweep_tiers(tmp_path) == DEFAULT_TIERS                   # no manifest: the one default
    scen = load_scenario(None, [f"profile.name={json.dumps(str(DATA / 'flat20ms_profile.json'))}"])
    run_sweep(SweepSpec(policies=("none",), rate_scales=(1.0,)), scen, load_trace(DATA / "tier_boundary.jsonl"),
              tmp_path, executor="serial", progress=False, tiers=(30.0, 45.0))
    assert sweep_tiers(tmp_path) == (30.0, 45.0)
    _register()
    r = CliRunner().invoke(app, ["compare", str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert data["tiers"] == [30.0, 45.0] and [w["tier"] for w in data["winners"]] == [30.0, 45.0]
    assert data["winners"][0]["curve"] == "none" and data["winners"][0]["margin_verdict"] == "no runner-up"
    r = CliRunner().invoke(app, ["compare", str(tmp_path), "--tiers", "0"])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.file == "--tiers"


def test_compare_shows_a_fractional_rate_scale_as_given():
    """load* of an open-loop point at rate scale 0.5 reads 0.5, not 0 (a fresh user's report)."""
    from specsim.cli.compare_table import _compare_row

    r = pd.Series({"tier": 100.0, "curve": "mtp1", "throughput_per_gpu": 1234.0, "status": "ok",
                   "gain_vs_baseline": float("nan"), "tps_gain_at_matched": float("nan"), "throughput_std": 0.0,
                   "tps_at_matched_throughput": float("nan"), "oracle_fraction": float("nan"), "winner": False,
                   "best_goodput_per_gpu": 1000.0, "best_goodput_load": 0.5, "attainment_at_best": 0.9,
                   "advice": ""})
    row = _compare_row(r, has_oracle=False, multi_seed=False)
    assert row[-4] == "0.5" and row[-5] == "1,000"
    assert _compare_row(r.copy().replace({0.5: 16.0}), False, False)[-4] == "16"


def test_an_exact_tie_names_every_tied_curve_and_crowns_none():
    """A plug-in twin of dspark under another name was crowned WINNER +0.0% by name order. Throughputs at a tier
    equal up to relative 1e-9 (the frontier's tolerance) are an exact tie: each tied row names the others, the
    verdict says so (no paired test upholds a lead that is not there, even where the differences have no spread),
    and compare's winner cell reads TIE on each; a lead of relative 1e-6 is no exact tie: on one seed it is too close
    to call (tiers.too_close), not a WINNER."""
    from specsim.cli.compare_table import _compare_row

    rows = pd.DataFrame([(100.0, "aaa-twin", 384.0), (100.0, "dspark", 384.0 * (1 + 1e-12)),
                         (100.0, "static", 320.0), (200.0, "mtp1", 300.0 * (1 + 1e-6)), (200.0, "static", 300.0)],
                        columns=["tier", "curve", "throughput_per_gpu"])
    per_seed = {(100.0, "aaa-twin"): {0: 380.0, 1: 384.0, 2: 388.0},
                (100.0, "dspark"): {0: 380.0 + 1e-10, 1: 384.0 + 1e-10, 2: 388.0 + 1e-10},     # no spread
                (200.0, "mtp1"): {0: 300.0003}, (200.0, "static"): {0: 300.0}}
    tab = mark_winners(rows, per_seed)
    assert tab.tied_with.tolist() == ["dspark", "aaa-twin", "", "", ""]
    w = winners(tab)
    assert (w.iloc[0].curve, w.iloc[0].runner_up, w.iloc[0].margin_verdict) == ("dspark", "aaa-twin", "exact tie")
    assert not w.iloc[0].margin_holds and w.iloc[0].margin == pytest.approx(0.0, abs=1e-9)
    assert (w.iloc[1].curve, w.iloc[1].margin_verdict) == ("mtp1", "one seed")
    assert tiers_json(tab)[0]["tied_with"] == "aaa-twin" and tiers_json(tab)[1]["tied_with"] is None
    base = {"status": "ok", "gain_vs_baseline": math.nan, "tps_gain_at_matched": math.nan, "throughput_std": 0.0,
            "tps_at_matched_throughput": math.nan, "oracle_fraction": math.nan, "best_goodput_per_gpu": 300.0,
            "best_goodput_load": 16.0, "attainment_at_best": 1.0, "advice": ""}
    cells = [_compare_row(pd.Series({**base, **r}), False, False)[-2] for r in tab.to_dict(orient="records")]
    assert cells[:3] == ["TIE with dspark (equal throughput at the tier)",
                         "TIE with aaa-twin (equal throughput at the tier)", ""]
    assert cells[3] == "TOO CLOSE TO CALL: +0.0% vs static, one seed"
