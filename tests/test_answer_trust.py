"""How far the headline answer ("which policy wins at my SLA, by how much") can be trusted: a tier met by the mean
TPS/user alone, and what the seeds' p-value tests.

The open-loop records below carry the figures of a fresh user's sweep (``runs/open2``: ``none`` and
``dspark-async`` at rate scales 1 and 4 on a session trace, 1,500 requests, 24 decode slots, 4 prefill
instances).
"""

from __future__ import annotations

from specsim.analysis.frontier import compare
from specsim.analysis.significance import SEEDS_SCOPE, TRAFFIC_TEST, with_seeds_scope
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
