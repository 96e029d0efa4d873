"""Multi-stage load (issue 23): trace synth --stages, per-stage run figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.simulation import simulate
from specsim.workload.stages import Stage, parse_stages, stage_arrivals, staged_trace
from specsim.workload import load_trace, save_trace

_register()


def test_parse_stages():
    assert parse_stages("2:60, 2->8:120,8:60") == (Stage(2, 2, 60), Stage(2, 8, 120), Stage(8, 8, 60))
    for bad in ("2", "x:5", "2:0", "-1:5", "0->0:5", "", "2:4,,8:4", "2:4,"):
        with pytest.raises(SpecsimInputError, match="stages"):
            parse_stages(bad)


def test_a_cv_is_gamma_arrivals_only_with_stages_too():
    # --cv 3 with poisson stages drew byte-identical files without a word (synth_trace refuses it without stages)
    with pytest.raises(SpecsimInputError, match="exactly 1 for poisson arrivals"):
        staged_trace(parse_stages("2:30"), arrival="poisson", cv=3.0)
    assert len(staged_trace(parse_stages("2:30"), arrival="gamma", cv=3.0, seed=1)) > 0


def test_three_stage_trace_reports_three_stages_at_the_asked_rates():
    # constant arrivals put exactly rate x duration requests in each stage (points at Lambda = 0.5, 1.5, ...)
    tr = staged_trace(parse_stages("2:30,4:30,8:15"), arrival="constant", seed=1, output_len=8, prompt_len=64)
    assert len(tr) == 60 + 120 + 120
    res = simulate(tr, "static", seed=0, gamma=2)
    stages = res.summary["stages"]
    assert [s["stage"] for s in stages] == [0, 1, 2]
    assert [s["requests"] for s in stages] == [60, 120, 120]
    assert [s["request_rate"] for s in stages] == pytest.approx([2.0, 4.0, 8.0])
    assert [(s["start_s"], s["end_s"]) for s in stages] == [(0, 30), (30, 60), (60, 75)]
    assert sum(s["completed"] for s in stages) == res.summary["completed"]
    # a stage's requests are the ones whose arrivals fall in its span
    arr = np.asarray(tr.arrival_s)
    assert ((arr >= 30) & (arr < 60)).sum() == 120


def test_a_run_cut_short_reports_its_stages_over_what_it_simulated():
    """A fresh user's staged run with --max-sim-s 30 divided stage 1's requests by its whole 30 s span (10 s of it
    simulated) and reported stage 2, all of it never issued, as a collapse to 0 tok/s; --num-requests 60 spread 9
    requests over stage 1's 30 s although the cut trace ended 5 s into it."""
    tr = staged_trace(parse_stages("2:30,4:30,8:15"), arrival="constant", seed=1, output_len=8, prompt_len=64)
    st = simulate(tr, "static", seed=0, gamma=2, max_sim_s=40.0).summary["stages"]
    assert [(s["stage"], s["start_s"], s["end_s"]) for s in st] == [(0, 0, 30), (1, 30, 40)]   # stage 2 never began
    assert "partial" not in st[0] and st[1]["partial"] and st[1]["nominal_end_s"] == 60
    assert st[1]["requests"] == 40 and st[1]["request_rate"] == pytest.approx(4.0)
    cut = simulate(tr.head(80), "static", seed=0, gamma=2).summary["stages"]        # 60 + 20 requests kept
    assert [s["requests"] for s in cut] == [60, 20]
    assert cut[1]["end_s"] == pytest.approx(35.125) and cut[1]["request_rate"] == pytest.approx(20 / 5.125)
    assert cut[1]["partial"] and cut[1]["nominal_end_s"] == 60 and "partial" not in cut[0]


def test_rate_scale_divides_the_stage_spans():
    tr = staged_trace(parse_stages("2:10,4:10"), arrival="constant", seed=1, output_len=4, prompt_len=32)
    st = simulate(tr, "static", seed=0, gamma=1, rate_scale=2.0).summary["stages"]
    assert [(s["start_s"], s["end_s"]) for s in st] == [(0, 5), (5, 10)]
    assert [s["request_rate"] for s in st] == pytest.approx([4.0, 8.0])


def test_poisson_ramp_counts_follow_the_integrated_rate():
    rng = np.random.default_rng(5)
    t, idx = stage_arrivals((Stage(2, 8, 100.0), Stage(5, 5, 100.0)), rng)
    assert np.all(np.diff(t) >= 0)
    first, second = ((t >= 0) & (t < 50)).sum(), ((t >= 50) & (t < 100)).sum()
    # rate 2 + 6 t / 100: the integral over [0, 50) is 175, over [50, 100) 325 (Poisson: sd = sqrt)
    assert abs(first - 175) < 4 * np.sqrt(175) and abs(second - 325) < 4 * np.sqrt(325)
    assert abs((idx == 1).sum() - 500) < 4 * np.sqrt(500)


def test_stage_fields_round_trip_and_are_checked(tmp_path):
    tr = staged_trace(parse_stages("1:5,3:5"), arrival="constant", seed=0, output_len=4, prompt_len=16)
    p = tmp_path / "s.jsonl"
    save_trace(tr, p)
    back = load_trace(p)
    assert back.content_hash() == tr.content_hash()
    np.testing.assert_array_equal(back.extra["stage"], tr.extra["stage"])
    assert back.head(3).extra["stage_end_s"].tolist() == [5.0, 5.0, 5.0]
    assert back.head(3).cut_s == 3.5 and back.head(len(back)).cut_s is None         # where the cut trace ends
    p.write_text('{"arrival_s": 0, "prompt_tokens": 4, "output_tokens": 2, "stage": 0, "stage_start_s": 0}\n')
    with pytest.raises(SpecsimInputError, match="stage_end_s"):
        load_trace(p)
    # a request labelled with a stage it does not arrive in (its stage figures would count it there)
    p.write_text('{"arrival_s": 0, "prompt_tokens": 4, "output_tokens": 2, "stage": 0, "stage_start_s": 0, '
                 '"stage_end_s": 1}\n{"arrival_s": 5, "prompt_tokens": 4, "output_tokens": 2, "stage": 0, '
                 '"stage_start_s": 0, "stage_end_s": 1}\n')
    with pytest.raises(SpecsimInputError, match=r"inside its stage 0's span \[0, 1\)") as e:
        load_trace(p)
    assert (e.value.line, e.value.field) == (2, "arrival_s")


def test_cli_synth_stages(tmp_path):
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(app, ["trace", "synth", "--stages", "1:4,2->4:4", "--arrival", "constant",
                                 "--out", str(out), "--output-len", "4", "--prompt-len", "16"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["stage"] for r in rows].count(0) == 4 and [r["stage"] for r in rows].count(1) == 12
    r = CliRunner().invoke(app, ["trace", "synth", "--stages", "1:4", "--rate", "2", "--out", str(out)])
    assert r.exit_code != 0
