"""specsim speedup: per-load ratios over the folder's baseline, the interpolated crossover, labels, flags, JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from specsim.analysis.speedup import (BELOW_AT_LIGHTEST, COLUMNS, CROSSES, NEVER_BELOW, crossovers,
                                      speedup_json, speedup_table)
from specsim.analysis.sweep_tables import curve_title
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario

SCEN = load_scenario().to_dict()
LOADS = (1, 16, 64, 128)
# none: throughput and TPS/user per load; static: the same at the ratios 2, 1.5, 1.1, 0.9 (throughput) and
# 1.6, 1.5, 1.1, 0.9 (TPS/user); the throughput crossover lies between 64 and 128 at 64 + 64 * 0.1 / 0.2 = 96
NONE = {1: (50.0, 100.0), 16: (40.0, 1000.0), 64: (30.0, 3000.0), 128: (20.0, 4000.0)}
STATIC = {1: (80.0, 200.0), 16: (60.0, 1500.0), 64: (33.0, 3300.0), 128: (18.0, 3600.0)}


def rec(policy: str, load: float, seed: int, tps: float, thr: float, drafter: str = "dspark", gamma: int = 7,
        thrashing: bool = False, mode: str = "closed", waiting: float = 0.0, running: float | None = None) -> dict:
    """A sweep record with the summary fields speedup reads."""
    return {
        "record_version": 1, "id": f"{policy}-{load:g}-{seed}", "status": "ok", "error": None,
        "config": {"scenario": SCEN, "policy": policy, "knobs": {"gamma": gamma, "drafter": drafter},
                   "load": {"mode": mode, "value": float(load)}, "seed": seed, "num_requests": 10 * load,
                   "trace_sha": "0" * 64},
        "summary": {"mean_tps_per_user": tps, "output_throughput_per_gpu": thr, "load": {"mode": mode},
                    "total_output_tokens": 1000, "recomputed_tokens": 500 if thrashing else 0,
                    "mean_waiting_requests": waiting, "mean_running_requests": load if running is None else running},
    }


def records(seeds=(0,), static=STATIC, drafter="dspark", gamma=7, thrash_at=()) -> list[dict]:
    out = []
    for seed in seeds:
        d = 0.0 if len(seeds) == 1 else (-1.0 if seed == seeds[0] else 1.0)    # symmetric: means are the values
        for load in LOADS:
            out.append(rec("none", load, seed, NONE[load][0], NONE[load][1] - 10 * d, drafter, gamma,
                           thrashing=load in thrash_at))
            out.append(rec("static", load, seed, static[load][0], static[load][1] + 10 * d, drafter, gamma,
                           thrashing=load in thrash_at))
    return out


def test_ratios_and_the_interpolated_crossover_in_closed_form():
    tab = speedup_table(records(), "none")
    assert list(tab.columns) == list(COLUMNS) and len(tab) == 4 and set(tab.curve) == {"static"}
    t = tab.set_index("load")
    for load in LOADS:
        assert t.loc[load, "throughput_speedup"] == pytest.approx(STATIC[load][1] / NONE[load][1])
        assert t.loc[load, "tps_speedup"] == pytest.approx(STATIC[load][0] / NONE[load][0])
        assert t.loc[load, "baseline_throughput_per_gpu"] == NONE[load][1]
    assert t.loc[1, "num_seeds"] == 1 and t.loc[1, "throughput_verdict"] == "one seed"
    c = tab.attrs["crossovers"].iloc[0]
    assert c.status == CROSSES and c.crossover_load == pytest.approx(96.0) and c["between"] == [64.0, 128.0]
    assert c.flagged == []


def test_crossover_statuses_and_the_rule_on_its_own():
    never = {k: (v[0], 2 * NONE[k][1]) for k, v in STATIC.items()}
    below = {k: (v[0], 0.5 * NONE[k][1]) for k, v in STATIC.items()}
    c = crossovers(speedup_table(records(static=never))).iloc[0]
    assert c.status == NEVER_BELOW and c.edge_load == 128 and c.edge_speedup == pytest.approx(2.0)
    c = crossovers(speedup_table(records(static=below))).iloc[0]
    assert c.status == BELOW_AT_LIGHTEST and math.isnan(c.crossover_load) and c["between"] == []
    assert c.edge_load == 1 and c.edge_speedup == pytest.approx(0.5)
    from specsim.cli.speedup_cmd import speedup_text
    assert "below 1 already at the lightest load (0.50x at 1 user)" in speedup_text(
        speedup_table(records(static=below)), width=250)
    # exactly 1 at a load and below after it: the crossover is that load
    at_one = {**STATIC, 64: (33.0, 3000.0)}
    assert speedup_table(records(static=at_one)).attrs["crossovers"].crossover_load.iloc[0] == pytest.approx(64.0)


def test_seed_means_spread_and_paired_verdict():
    tab = speedup_table(records(seeds=(0, 1, 2)), "none").set_index("load")
    # seeds 0 (d=-1), 1 and 2 (d=+1): the means are no longer the table values; the ratio is mean over mean
    for load in LOADS:
        a = np.array([STATIC[load][1] - 10, STATIC[load][1] + 10, STATIC[load][1] + 10])
        b = np.array([NONE[load][1] + 10, NONE[load][1] - 10, NONE[load][1] - 10])
        assert tab.loc[load, "throughput_speedup"] == pytest.approx(a.mean() / b.mean())
        assert tab.loc[load, "throughput_speedup_std"] == pytest.approx(np.std(a / b, ddof=1))
        assert tab.loc[load, "num_seeds"] == 3
    verdict = tab.loc[1, "throughput_verdict"]
    assert verdict.startswith("above 1: holds (") and "3 seeds" in verdict
    # a slow-down is tested on its side of 1: at 128, none leads in every seed by 400 +- 20 tok/s/GPU
    assert tab.loc[128, "throughput_verdict"].startswith("below 1: holds (")


def test_labels_name_drafter_and_gamma_and_folders_sit_in_one_table():
    mtp = records(drafter="mtp", gamma=2, static={k: (v[0] * 0.9, NONE[k][1] * s) for (k, v), s in
                                                  zip(STATIC.items(), (1.4, 1.2, 1.0, 0.8))})
    tab = speedup_table([records(), mtp], "none", names=["dspark", "mtp"])
    assert tab.label.tolist() == ["static (gamma=7, drafter=dspark)"] * 4 + ["static (gamma=2, drafter=mtp)"] * 4
    assert tab.folder.tolist() == ["dspark"] * 4 + ["mtp"] * 4
    cross = tab.attrs["crossovers"].set_index("folder")
    assert cross.loc["dspark", "crossover_load"] == pytest.approx(96.0)
    # mtp: 1.0 at 64, 0.8 at 128: exactly 64
    assert cross.loc["mtp", "crossover_load"] == pytest.approx(64.0)
    assert curve_title("static gamma=2", "static", 2, "mtp", always=True) == "static gamma=2 (drafter=mtp)"
    assert curve_title("static", "static", 2.0, "mtp", always=True) == "static (gamma=2, drafter=mtp)"
    assert curve_title("static", "static", 7, "dspark", always=True) == "static (gamma=7, drafter=dspark)"
    assert curve_title("static", "static", 7, "dspark") == "static"


def test_flagged_points_are_marked_and_a_ratio_of_two_flagged_points_says_so():
    tab = speedup_table(records(thrash_at=(128,)), "none").set_index("load")
    assert tab.loc[128, "curve_flags"] == ["thrashing"] and tab.loc[128, "baseline_flags"] == ["thrashing"]
    assert tab.loc[128, "both_flagged"] and not tab.loc[64, "both_flagged"] and tab.loc[64, "curve_flags"] == []
    c = crossovers(speedup_table(records(thrash_at=(128,)))).iloc[0]
    assert c.flagged == ["thrashing"]
    from specsim.cli.speedup_cmd import speedup_text
    text = speedup_text(speedup_table(records(thrash_at=(128,))), width=250)
    assert "0.90x**" in text and "a ratio of two flagged points" in text and "1.10x " in text
    assert "read through flagged points (thrashing)" in text


def test_open_loop_overload_flag_on_the_baseline_only():
    recs = [rec("none", x, 0, 50.0 / x, 1000.0 * x, mode="open", waiting=20.0 if x == 4 else 0.0,
                running=10.0) for x in (1, 2, 4)]
    recs += [rec("static", x, 0, 60.0 / x, 1200.0 * x * (1.5 - 0.25 * x), mode="open") for x in (1, 2, 4)]
    tab = speedup_table(recs).set_index("load")
    assert tab.loc[4.0, "baseline_flags"] == ["overloaded"] and not tab.loc[4.0, "both_flagged"]
    # ratios 1.5 * 1.2 - 0.3 ... : 1.2 * (1.25, 1.0, 0.5) = 1.5, 1.2, 0.6: between 2 and 4 at 2 + 2 * 0.2 / 0.6
    c = tab.attrs["crossovers"].iloc[0]
    assert c["mode"] == "open" and c.crossover_load == pytest.approx(2 + 2 * 0.2 / 0.6)


def test_bad_baseline_and_json_schema():
    with pytest.raises(SpecsimInputError, match="mtp1"):
        speedup_table(records(), "mtp1")
    js = json.loads(json.dumps(speedup_json(speedup_table(records(thrash_at=(128,))))))
    assert set(js) == {"baseline", "table", "crossovers"} and js["baseline"] == "none"
    assert set(js["table"][0]) == set(COLUMNS) and js["table"][0]["throughput_speedup_std"] is None
    assert js["table"][3]["both_flagged"] is True and js["table"][3]["curve_flags"] == ["thrashing"]
    assert js["crossovers"] == [{"folder": "records 1", "curve": "static", "label": "static (gamma=7, drafter=dspark)",
                                 "mode": "closed", "status": CROSSES, "crossover_load": pytest.approx(96.0),
                                 "between": [64.0, 128.0], "flagged": ["thrashing"], "edge_load": None,
                                 "edge_speedup": None}]


def test_cli_reads_two_folders_into_one_table(tmp_path):
    from specsim.cli import _register, app
    from specsim.sweep.store import write_record

    _register()
    dirs = []
    for name, recs in (("dspark", records()), ("mtp", records(drafter="mtp", gamma=2))):
        for r in recs:
            write_record(tmp_path / name, r)
        dirs.append(str(tmp_path / name))
    res = CliRunner().invoke(app, ["speedup", *dirs], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "static (gamma=7, drafter=dspark)" in res.output and "static (gamma=2, drafter=mtp)" in res.output
    assert "falls below 1 at 96 users (interpolated between 64 and 128)" in res.output
    res = CliRunner().invoke(app, ["speedup", *dirs, "--json"], env={"COLUMNS": "250"})
    js = json.loads(res.stdout)
    assert [c["folder"] for c in js["crossovers"]] == ["dspark", "mtp"] and len(js["table"]) == 8


def test_queued_and_short_window_points_are_noted_not_flagged():
    recs = records()
    for r in recs:
        if r["config"]["policy"] == "static" and r["config"]["load"]["value"] == 128:
            r["summary"]["mean_waiting_requests"] = 51.0          # 40% of 128 users waited for admission
    t = speedup_table(recs).set_index("load")
    assert t.loc[128, "curve_notes"] == ["queued"] and t.loc[128, "curve_flags"] == []
    assert t.loc[64, "curve_notes"] == []
    from specsim.cli.speedup_cmd import speedup_text
    text = speedup_text(speedup_table(recs), width=250)
    assert "0.90x " in text and "requests queue: static" in text


def test_a_load_the_baseline_did_not_run_has_no_ratio_and_the_crossover_skips_it():
    recs = [r for r in records() if not (r["config"]["policy"] == "none" and r["config"]["load"]["value"] == 64)]
    t = speedup_table(recs).set_index("load")
    assert math.isnan(t.loc[64, "throughput_speedup"]) and t.loc[64, "num_seeds"] == 0
    assert t.loc[64, "throughput_verdict"] == "baseline not swept at this load"
    c = t.attrs["crossovers"].iloc[0]          # between 16 (1.5) and 128 (0.9): 16 + 112 * 0.5 / 0.6
    assert c["between"] == [16.0, 128.0] and c.crossover_load == pytest.approx(16 + 112 * 0.5 / 0.6)


def test_cli_names_a_missing_baseline_and_exits_2(tmp_path, monkeypatch, capsys):
    from helpers import run_cli
    from specsim.sweep.store import write_record

    for r in records():
        write_record(tmp_path / "d", r)
    code = run_cli(["speedup", str(tmp_path / "d"), "--baseline", "mtp1"])
    err = capsys.readouterr().err
    assert code == 2 and "mtp1" in err and "static" in err
