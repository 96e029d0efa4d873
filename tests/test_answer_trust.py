"""How far the headline answer ("which policy wins at my SLA, by how much") can be trusted: an overloaded open-loop
point, a tier met by the mean TPS/user alone, what the seeds' p-value tests, and a baseline met only at its edge.

The open-loop records below carry the figures of a fresh user's sweep (``runs/open2``: ``none`` and
``dspark-async`` at rate scales 1 and 4 on a session trace, 1,500 requests, 24 decode slots, 4 prefill
instances): at x4 ``none`` had 364.1 requests waiting for a decode slot against 22.8 running (mean E2EL 54 s), and
compare crowned "WINNER +159.1% vs none" over it without a word.
"""

from __future__ import annotations

import json

import pytest

from specsim.analysis.frontier import compare
from specsim.analysis.overload import overload_warning, overloaded
from specsim.analysis.significance import SEEDS_SCOPE, TRAFFIC_TEST, with_seeds_scope
from specsim.analysis.sweep_tables import cautions, flagged_points, results_frame
from specsim.analysis.tier_notes import TierAttainment, attainment_caution
from specsim.scenario import load_scenario

SCEN = load_scenario().to_dict()

#: (policy, rate scale): mean TPS/user, tok/s/GPU, mean waiting, mean running (runs/open2's summaries).
OPEN2 = {("none", 1): (109.07, 1204.6, 0.087, 11.38), ("none", 4): (15.66, 1947.4, 364.14, 22.79),
         ("dspark-async", 1): (389.68, 1214.2, 0.0, 3.46), ("dspark-async", 4): (100.72, 4338.4, 33.87, 20.89)}


def open_record(policy: str, scale: float, seed: int = 0, req_tps=None) -> dict:
    """An open-loop sweep record with runs/open2's figures (per-request TPS/user ``req_tps``: the mean's, four
    requests, unless given)."""
    tps, thr, waiting, running = OPEN2[(policy, scale)]
    req = list(req_tps) if req_tps is not None else [tps] * 4
    knobs = {"gamma": 7, "drafter": "dspark"} if policy != "none" else {"gamma": 0, "drafter": "none"}
    return {"record_version": 1, "id": f"{policy}-{scale:g}-{seed}", "status": "ok", "error": None,
            "config": {"scenario": SCEN, "policy": policy, "knobs": knobs,
                       "load": {"mode": "open", "value": float(scale)}, "seed": seed, "num_requests": 1500,
                       "trace_sha": "0" * 64},
            "summary": {"mean_tps_per_user": tps, "output_throughput_per_gpu": thr,
                        "mean_verify_tokens_per_request": 2.0,
                        "mean_waiting_requests": waiting, "mean_running_requests": running,
                        "load": {"mode": "open", "rate_scale": float(scale)}},
            "requests": {"tps_per_user": req, "output_tokens": [10] * len(req)}}


def open2_records() -> list[dict]:
    # dspark-async at x4: 3 of its 4 requests at >= 50 TPS/user (75%), 1 of 4 at >= 100 (mean 100.72)
    return [open_record("none", 1), open_record("none", 4, req_tps=[30.0, 20.0, 8.0, 4.64]),
            open_record("dspark-async", 1, req_tps=[400.0, 380.0, 390.0, 388.72]),
            open_record("dspark-async", 4, req_tps=[250.0, 60.0, 52.88, 40.0])]


# ------------------------------------------------------------------------------------ 1. overloaded open loops
def test_the_overload_rule_is_the_queue_against_the_running_batch():
    """By Little's law waiting / running is the mean wait over the mean time admitted: at one or more, queueing is
    half of a request's time in the system or more."""
    assert overloaded(364.14, 22.79) and overloaded(33.87, 20.89)           # open2 at x4: both
    assert not overloaded(0.087, 11.38) and not overloaded(0.0, 3.46)       # open2 at x1
    assert not overloaded(20.96, 45.22)                  # a queue that never outgrew the running batch
    assert not overloaded(0.9, 0.5)                      # less than one request waiting is no queue
    assert not overloaded(None, 3.0) and not overloaded(float("nan"), 3.0)  # records without the figures


def test_overloaded_open_loop_points_are_named_and_flagged():
    df = results_frame(open2_records())
    found = dict(cautions(df))
    assert found["overloaded"].startswith("overloaded at 2 points (dspark-async at 4, none at 4): at least as many "
                                          "requests waited to be admitted as were admitted, on average")
    assert "queued" not in found                          # the closed-loop rule reads users, which an open loop has not
    assert flagged_points(df) == {("dspark-async", "4"): ["overloaded"], ("none", "4"): ["overloaded"]}
    closed = [dict(r, config=dict(r["config"], load={"mode": "closed", "value": 4.0})) for r in open2_records()]
    assert "overloaded" not in dict(cautions(results_frame(closed)))    # a closed loop's queue is bounded by its users


def test_a_gain_over_an_overloaded_baseline_says_so_in_compare():
    tab = compare(open2_records(), [50.0, 100.0], baseline="none")
    win = tab[tab.winner.astype(bool)].set_index("tier")
    # none at 50 TPS/user: between (109.07, 1204.6) and (15.66, 1947.4): 1204.6 + 59.07 / 93.41 x 742.8 = 1674.3
    assert win.loc[50.0, "gain_vs_baseline"] == pytest.approx(4338.4 / (1204.6 + 59.07 / 93.41 * 742.8) - 1)
    assert (win.loc[50.0, "baseline_caution"], win.loc[50.0, "runner_up_caution"]) == ("load 4 (overloaded)",) * 2
    assert win.loc[50.0, "caution"] == "load 4 (overloaded)"                # the winner's own point too
    lines = tab.attrs["warnings"]
    # one note for both tiers (the same points at each): the winner's own figure and the figure its margin and gain
    # divide by, each point with its queue against its batch (runs/open2's 33.87 against 20.89, 364.14 against 22.79)
    (note,) = [line for line in lines if line.startswith("warning: at tier")]
    assert note == ("warning: at tiers 50 and 100 the figure of the winner dspark-async is read from its frontier "
                    "point at load 4 (overloaded: 33.9 requests waiting to be admitted against 20.9 admitted, on "
                    "average); the figure of the runner-up and baseline none is interpolated between its frontier "
                    "points at loads 4 and 1, one flagged: load 4 (overloaded: 364.1 requests waiting to be admitted "
                    "against 22.8 admitted, on average): those figures measure the limit named above, not the "
                    "policies, so the winner may change once it is lifted, and its margin over the runner-up and its "
                    "gain over the baseline are no measure of what the winner adds (sweep again without it, or "
                    "compare the curves where no point is flagged: lighter loads)")
    assert win.loc[50.0, "advice"] == ("its heaviest load 4 is already overloaded: a heavier rate only lengthens its "
                                       "queue; sweep rates below it")
    assert sum(line.startswith("warning: overloaded at 2 points") for line in lines) == 1


def test_the_report_and_recommend_say_the_lead_divides_by_an_overloaded_point():
    from specsim.analysis.report import _decision
    from specsim.sweep.recommend import recommend, recommendations_text

    rows = _decision(compare(open2_records(), [50.0], baseline="none"))["rows"]
    assert ("; read with care: it and the lead over none rest on their points at load 4 (overloaded), see the "
            "warnings below") in rows[0]["line_end"]
    (r,) = recommend(open2_records(), [50.0])
    assert r.overload == pytest.approx((33.87, 20.89)) and r.runner_up_caution == "load 4 (overloaded)"
    text = " ".join(recommendations_text([r], width=120).split())
    assert "caution: this point is overloaded (33.9 requests waited to be admitted on average against 20.9 admitted)" \
        in text
    assert ("caution: the margin divides by none's figure at the tier, which comes from its frontier point at load 4 "
            "(overloaded)") in text
    assert json.loads(json.dumps(r.to_dict()))["overload"] == pytest.approx([33.87, 20.89])


def test_specsim_run_warns_of_an_overloaded_open_loop():
    s = {"load": {"mode": "open", "rate_scale": 4.0}, "mean_waiting_requests": 364.14, "mean_running_requests": 22.79}
    w = overload_warning(s)
    assert w.startswith("warning: overloaded: 364.1 requests waited to be admitted on average against 22.8 admitted "
                        "(by Little's law, 94% of a request's time in the system was spent queued): the offered rate")
    assert overload_warning(dict(s, load={"mode": "closed", "concurrency": 64})) is None
    assert overload_warning(dict(s, mean_waiting_requests=0.5)) is None


def test_sweep_compare_and_report_name_an_overloaded_point_of_a_real_sweep(tmp_path):
    """A real open-loop sweep: 300 requests of traces/prod.jsonl (arrivals over 74.7 s at x1), 8 decode slots. At
    x1 ``none`` kept 30.8 requests waiting against 7.2 running and finished at 115.5 s: its queue ran away; dspark
    kept up (0.05 waiting against 2.7 running, done at 79.3 s), as did none at x0.25 (0.02 against 2.3)."""
    from typer.testing import CliRunner

    from specsim.analysis.report import write_report
    from specsim.cli import _register, app

    _register()
    out = tmp_path / "open"
    args = ["sweep", "--trace", "traces/prod.jsonl", "--out", str(out), "--policies", "none,dspark",
            "--rate-scales", "0.25,1", "--num-requests", "300", "--set", "cluster.max_num_seqs=8",
            "--executor", "serial", "--tiers", "50"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    df = results_frame(str(out))
    row = df[(df.policy == "none") & (df.load == 1.0)].iloc[0]
    assert row.mean_waiting_requests == pytest.approx(30.80, abs=0.01) and row.mean_running_requests == pytest.approx(
        7.25, abs=0.01)
    said = " ".join(res.stdout.split())
    assert "warning: overloaded at 1 point (none at 1): " in said
    assert row.duration_s == pytest.approx(115.45, abs=0.01)
    cmp = CliRunner().invoke(app, ["compare", str(out), "--baseline", "none"], env={"COLUMNS": "200"})
    assert cmp.exit_code == 0 and "warning: overloaded at " in " ".join(cmp.stdout.split())
    page = write_report(out, tmp_path / "page.html", (50.0,)).path.read_text()
    assert "Warning: overloaded open-loop points" in page and 'id="overloaded"' in page


# -------------------------------------------------------------------------- 2. a tier met by the mean alone
def test_the_report_and_compare_carry_recommends_attainment_caution():
    """recommend, compare and the report read one rule (tier_notes.tier_attainment) and print one sentence
    (tier_notes.attainment_caution): dspark-async's point at x4 meets tier 100 by its mean (100.72) while 1 of its 4
    requests runs at >= 100 TPS/user; x1 (all four) is the load where nine in ten do."""
    from specsim.analysis.report import _decision, decision_rows
    from specsim.sweep.recommend import recommend, recommendations_text

    tab = compare(open2_records(), [100.0])
    a = tab.attrs["attainment"][100.0]
    assert a == TierAttainment("dspark-async", 100.0, "open", 4.0, 0.25, 1.0, 1.0, 1214.2)
    sentence = ("the tier is met by the mean: 25% of the requests of dspark-async's point at open load 4 run at >= "
                "100 TPS/user; for 90% of them, dspark-async at open load 1 delivers 1,214 tok/s/GPU (100% meet it; ")
    assert attainment_caution(a).startswith(sentence)
    assert f"caution: at tier 100, {attainment_caution(a)}" in tab.attrs["warnings"]          # compare's note
    assert decision_rows(tab)[0]["attainment"].startswith(sentence)
    assert f"; caution: {sentence}" in _decision(tab)["rows"][0]["line_end"]                  # the report's line
    (r,) = recommend(open2_records(), [100.0])
    assert (r.attainment, r.attained_load, r.attained_throughput_per_gpu) == (0.25, 1.0, 1214.2)
    assert "caution: " + attainment_caution(a, "this point") in " ".join(recommendations_text([r], width=300).split())
    assert "met by the mean" not in " ".join(compare(open2_records(), [40.0]).attrs["warnings"])   # all meet 40


# ----------------------------------------------------------------------- 3. what the seeds' p-value tests
def _three_seeds() -> list[dict]:
    from test_recommend import rec

    return [rec(p, load, seed, x + d, k * load * (1 + d / 100) + (5 + seed if p == "dspark" else 0))
            for seed, d in ((0, -5.0), (1, 0.0), (2, 5.0)) for load, x in ((4, 200.0), (16, 120.0))
            for p, k in (("static", 10), ("dspark", 12))]


def test_recommend_and_the_report_say_what_the_seeds_redraw_where_they_quote_a_p_value():
    from specsim.analysis.report import _decision
    from specsim.sweep.recommend import recommend, recommendations_text

    assert SEEDS_SCOPE == "seeds redraw acceptance on the same trace requests, not the traffic"
    assert with_seeds_scope("one seed") == "one seed" and with_seeds_scope("exact tie") == "exact tie"
    assert with_seeds_scope("holds (p=0.01, 3 seeds)", test=False) == f"holds (p=0.01, 3 seeds); {SEEDS_SCOPE}"
    (r,) = recommend(_three_seeds(), [100.0])
    assert r.margin_verdict.startswith("holds (p=")
    text = " ".join(recommendations_text([r], width=300).split())
    assert f"({r.margin_verdict}; {SEEDS_SCOPE}: {TRAFFIC_TEST})" in text
    page = _decision(compare(_three_seeds(), [100.0]))
    assert f"({r.margin_verdict}; {SEEDS_SCOPE})" in page["rows"][0]["line_end"]
    assert f"({SEEDS_SCOPE}: {TRAFFIC_TEST})" in page["note"]


def test_compares_footnote_words_the_seeds_scope_the_same(tmp_path):
    from specsim.cli.compare_table import compare_text

    text = " ".join(compare_text(compare(_three_seeds(), [100.0]), tmp_path, width=200).split())
    assert f"{SEEDS_SCOPE}: {TRAFFIC_TEST}" in text


# ------------------------------------------------- the second overload rule: the run did not keep up with arrivals
def test_the_keep_up_rule_flags_a_run_that_outlasts_its_arrivals_with_a_queue():
    from specsim.analysis.overload import KEEP_UP_FACTOR, overload_reason

    # 124 waiting against 341 running: the first rule says no; 130 s of completions over 77 s of arrivals > 1.5x
    assert not overloaded(124.0, 341.0) and overloaded(124.0, 341.0, 130.0, 77.0)
    assert KEEP_UP_FACTOR == 1.5
    assert overloaded(1.0, 341.0, 1.5 * 77.0 + 1e-9, 77.0) and not overloaded(1.0, 341.0, 1.5 * 77.0, 77.0)
    assert not overloaded(0.99, 341.0, 1000.0, 77.0)      # no queue: the drain is the requests' own service
    assert not overloaded(124.0, 341.0, 130.0, None)      # records without arrival_span_s: the first rule only
    assert not overloaded(124.0, 341.0, 130.0, 0.0)       # one arrival spans nothing
    assert overload_reason(124.0, 341.0, 130.0, 77.0) == (
        "it did not keep up with its arrivals: the last request completed 130.0 s after the first arrival, 1.69x the "
        "77.0 s the arrivals spanned (over 1.5x), while 124.0 requests waited to be admitted on average against "
        "341.0 admitted")
    s = {"load": {"mode": "open", "rate_scale": 4.0}, "mean_waiting_requests": 124.0, "mean_running_requests": 341.0,
         "duration_s": 130.0, "arrival_span_s": 77.0}
    assert overload_warning(s).startswith("warning: overloaded: it did not keep up with its arrivals: ")
    assert overload_warning({k: v for k, v in s.items() if k != "arrival_span_s"}) is None


def test_the_keep_up_rule_in_sweep_tables_and_recommend():
    from specsim.sweep.recommend import recommend, recommendations_text

    def with_drain(duration_s: float) -> list[dict]:
        recs = open2_records()       # dspark-async at 4 (the tier-50 winner): 2 waiting against 20.9, a long drain
        for r in recs:
            r["summary"].update(arrival_span_s=100.0, duration_s=101.0)
            if (r["config"]["policy"], r["config"]["load"]["value"]) == ("dspark-async", 4.0):
                r["summary"].update(mean_waiting_requests=2.0, duration_s=duration_s)
        return recs

    assert flagged_points(results_frame(with_drain(160.0)))[("dspark-async", "4")] == ["overloaded"]   # 1.6x
    assert ("dspark-async", "4") not in flagged_points(results_frame(with_drain(140.0)))               # 1.4x
    (r,) = recommend(with_drain(160.0), [50.0])
    assert r.overload == pytest.approx((2.0, 20.89)) and r.overload_spans == pytest.approx((160.0, 100.0))
    text = " ".join(recommendations_text([r], width=120).split())
    assert ("caution: this point is overloaded (it did not keep up with its arrivals: the last request completed "
            "160.0 s after the first arrival, 1.60x the 100.0 s the arrivals spanned (over 1.5x)") in text
    (r,) = recommend(with_drain(140.0), [50.0])
    assert r.overload is None


def test_a_real_short_run_flagged_by_the_keep_up_rule_only():
    """200 requests of traces/prod.jsonl at x8 under ``none`` (default scenario): 21.0 waiting against 45.2 running,
    so the first rule says no, but the last completion came 32.9 s after the first arrival of arrivals spanning
    6.29 s (5.2x). 100 requests at x8 finish 22.7 s after 3.92 s of arrivals with 0.65 waiting: no queue, no flag."""
    from specsim.simulation import simulate
    from specsim.workload import load_trace

    t = load_trace("traces/prod.jsonl")
    s = simulate(t.head(200), "none", rate_scale=8.0).summary
    assert s["mean_waiting_requests"] == pytest.approx(20.96, abs=0.01)
    assert s["mean_running_requests"] == pytest.approx(45.22, abs=0.01)
    assert (s["duration_s"], s["arrival_span_s"]) == pytest.approx((32.88, 6.287), abs=0.01)
    assert not overloaded(s["mean_waiting_requests"], s["mean_running_requests"])
    assert overload_warning(s).startswith("warning: overloaded: it did not keep up with its arrivals: the last "
                                          "request completed 32.9 s after the first arrival, 5.23x the 6.3 s")
    short = simulate(t.head(100), "none", rate_scale=8.0).summary
    assert short["duration_s"] > 5 * short["arrival_span_s"] and short["mean_waiting_requests"] < 1
    assert overload_warning(short) is None
