"""``specsim recommend``: the winner per tier, its load, and per-engine configurations with checked keys only."""

from __future__ import annotations

import json

import pytest

from specsim.sweep.engine_configs import _bounds_from_ranges, _ranges_from_bounds, engine_configs
from specsim.sweep.recommend import recommend, recommendations_text
from specsim.scenario import load_scenario

SCEN = load_scenario().to_dict()


def rec(policy, load, seed, tps, thr, gamma=7, drafter="dspark", **knobs):
    return {"record_version": 1, "id": f"{policy}-{load:g}-{seed}", "status": "ok", "error": None,
            "config": {"scenario": SCEN, "policy": policy, "knobs": {"gamma": gamma, "drafter": drafter, **knobs},
                       "load": {"mode": "closed", "value": float(load)}, "seed": seed, "num_requests": 10,
                       "trace_sha": "0" * 64},
            "summary": {"mean_tps_per_user": tps, "output_throughput_per_gpu": thr,
                        "mean_verify_tokens_per_request": 2.0, "load": {"mode": "closed"}},
            "requests": {"tps_per_user": [tps], "output_tokens": [10]}}


def records():
    out = []
    for seed, d in ((0, -5.0), (1, 0.0), (2, 5.0)):
        for load, x in ((4, 200.0), (16, 120.0), (64, 60.0)):
            out.append(rec("static", load, seed, x + d, 10 * load * (1 + d / 100)))
            out.append(rec("vllm-dsd", load, seed, x + d, 12 * load * (1 + d / 100) + (5 + seed),
                           num_speculative_tokens_per_batch_size=[[1, 8, 7], [9, 32, 3], [33, 512, 1]]))
            out.append(rec("oracle", load, seed, x + d, 40 * load))
    return out


def test_recommend_picks_the_deployable_winner_its_load_and_margin():
    recs = recommend(records(), [100.0, 150.0])
    r = recs[0]
    # at tier 100 the frontier point meeting it with the most throughput is load 16 (TPS/user 120)
    assert (r.tier, r.policy, r.mode, r.load) == (100.0, "vllm-dsd", "closed", 16.0)      # oracle is not deployable
    assert r.tps_per_user == pytest.approx(120.0) and r.runner_up == "static"
    assert r.throughput_per_gpu == pytest.approx(12 * 16 + 6)                  # seed mean of 12 * 16 + 5, 6, 7
    # per seed vllm-dsd leads static by 2*16*(1+d/100) + 5 + seed at tier 100: all positive, spread > 0
    assert r.margin_verdict.startswith("holds") and r.margin > 0
    assert recs[1].load == 4.0
    text = recommendations_text(recs)
    assert "num_speculative_tokens_per_batch_size" in text and "keys checked against" in text


def test_a_recommended_point_that_thrashes_says_so():
    recs = records()
    for r in recs:                       # the winner's load-16 points recompute half their output after preemptions
        r["summary"].update(total_output_tokens=1000, recomputed_tokens=500 if r["id"].startswith("vllm-dsd-16")
                            else 0)
    out = recommend(recs, [100.0, 150.0])
    assert out[0].load == 16.0 and out[0].recomputed_share == pytest.approx(0.5) and out[1].recomputed_share == 0
    text = " ".join(recommendations_text(out, width=200).split())
    assert text.count("caution: this point thrashes (recomputes 50% of its output tokens") == 1


def test_a_winner_an_engine_only_approximates_comes_with_the_best_curve_it_runs_exactly():
    """dspark-async wins; vLLM's nearest setting is adaptive verification, which this sweep simulated as
    vllm-adaptive and found worse than static k = 7: vLLM's exact alternative is static (its throughput at
    the tier quoted), TensorRT-LLM's too; SGLang runs static k = 7 as DSPARK's whole block."""
    out = []
    for seed, d in ((0, -1.0), (1, 0.0), (2, 1.0)):
        for load, x in ((4, 200.0), (16, 120.0), (64, 60.0)):
            out.append(rec("dspark-async", load, seed, x + d, 12 * load))
            out.append(rec("static", load, seed, x + d, 11 * load))
            out.append(rec("vllm-adaptive", load, seed, x + d, 8 * load))
    r = recommend(out, [100.0])[0]
    assert r.policy == "dspark-async"
    vllm, trt, sgl = r.engines
    assert not vllm.exact and vllm.config["enable_adaptive_verification"] is True
    # static's frontier at tier 100: between (120, 176) and (60, 704), 176 + 528 * 20 / 60 = 352 tok/s/GPU
    assert vllm.alternative["curve"] == "static" and vllm.alternative["throughput_per_gpu"] == pytest.approx(352)
    assert vllm.alternative["config"] == {"method": "dspark", "num_speculative_tokens": 7}
    assert trt.config is None and trt.alternative["config"] == {"max_draft_len": 7}
    assert sgl.config is None and sgl.alternative["config"] == ["--speculative-algorithm", "DSPARK"]
    text = " ".join(recommendations_text([r], width=200).split())
    assert "the best this engine runs exactly, as simulated: static at 352 tok/s/GPU" in text
    # the nearest setting was itself simulated (vllm-adaptive, the same configuration): quoted beside it, so the
    # first JSON is never pasted without its own figure (a fresh user's -31% unseen)
    assert vllm.runs_as == "vllm-adaptive" and vllm.simulated["curve"] == "vllm-adaptive"
    assert vllm.simulated["throughput_per_gpu"] == pytest.approx(256)      # 128 + 384 * 20 / 60
    assert ("this setting as simulated in this sweep: vllm-adaptive at 256 tok/s/GPU at the tier (-33% against "
            "dspark-async); the exact setting below delivers more") in text


def test_the_pasted_configuration_carries_the_scenarios_policy_knobs():
    """A sweep run with --set policy.knobs.num_speculative_tokens_per_batch_size=... was recommended with the default
    schedule: the scenario's [policy.knobs] were never read, only the point's own knobs."""
    scen = {**SCEN, "policy": {"knobs": {"num_speculative_tokens_per_batch_size": "[[1,1024,2]]"}}}
    out = []
    for seed in (0, 1):
        for load, x in ((4, 200.0), (16, 120.0)):
            r = rec("vllm-dsd", load, seed, x, 10 * load)
            r["config"]["scenario"] = scen
            out.append(r)
    got = recommend(out, [150.0])[0]
    assert got.knobs["num_speculative_tokens_per_batch_size"] == "[[1,1024,2]]"
    vllm, trt, _ = got.engines
    assert vllm.config["num_speculative_tokens_per_batch_size"] == [[1, 1024, 2]]
    assert trt.config["max_draft_len"] == 2


def test_an_exact_alternative_names_its_load_and_says_when_that_point_thrashes():
    """As above, with static's load-16 points (its point meeting tier 100: TPS/user 120) recomputing 40% of
    their output after preemptions: each engine's alternative names closed load 16 and carries the caution, in full
    once, then pointing to it."""
    out = []
    for seed, d in ((0, -1.0), (1, 0.0), (2, 1.0)):
        for load, x in ((4, 200.0), (16, 120.0), (64, 60.0)):
            out += [rec("dspark-async", load, seed, x + d, 12 * load), rec("static", load, seed, x + d, 11 * load)]
    for r in out:
        r["summary"].update(total_output_tokens=1000, recomputed_tokens=400 if r["id"].startswith("static-16")
                            else 0)
    r = recommend(out, [100.0])[0]
    assert r.recomputed_share == 0
    for e in r.engines:
        assert (e.alternative["curve"], e.alternative["mode"], e.alternative["load"]) == ("static", "closed", 16.0)
        assert e.alternative["recomputed_share"] == pytest.approx(0.4)
    text = " ".join(recommendations_text([r], width=200).split())
    assert text.count("at the tier, closed load 16 (") == 3
    assert text.count("caution: that point thrashes (recomputes 40% of its output tokens") == 1
    assert text.count("caution: that point thrashes (see vllm above)") == 2
    assert "caution: this point thrashes" not in text


def test_engine_configs_static_schedules_and_what_cannot_be_expressed():
    vllm, trt, sgl = engine_configs("static", {"gamma": 3, "drafter": "eagle3"})
    assert vllm.config == {"method": "eagle3", "num_speculative_tokens": 3}
    assert trt.config == {"max_draft_len": 3}
    assert sgl.config == ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    vllm, trt, sgl = engine_configs("trtllm-draft-len-schedule", {"gamma": 4, "drafter": "mtp",
                                                                  "draft_len_schedule": {4: 4, 8: 2, 32: 1}})
    assert trt.config == {"max_draft_len": 4, "draft_len_schedule": {"4": 4, "8": 2, "32": 1}}
    assert vllm.config["num_speculative_tokens_per_batch_size"] == [[1, 4, 4], [5, 8, 2], [9, 32, 1], [33, 1 << 20, 0]]
    assert sgl.config is None and sgl.note.startswith("cannot express")
    vllm, trt, sgl = engine_configs("vllm-adaptive", {"gamma": 7, "drafter": "dspark"})
    assert vllm.config["enable_adaptive_verification"] is True and trt.config is None and sgl.config is None
    assert engine_configs("vllm-adaptive", {"gamma": 7, "drafter": "eagle3"})[0].config is None   # no confidence head
    assert engine_configs("specdecpp", {"gamma": 7, "drafter": "dspark", "threshold": 0.3})[0].config is None
    assert engine_configs("mtp1", {"gamma": 1, "drafter": "mtp"})[0].config == {"method": "mtp",
                                                                                "num_speculative_tokens": 1}
    assert engine_configs("none", {"gamma": 0, "drafter": "none"})[0].config == {}


def test_schedule_conversions_keep_the_engines_rules():
    # vLLM: a gap takes the previous K, the last K runs on -> TRT-LLM bounds end at 2**20
    assert _bounds_from_ranges([[1, 4, 5], [9, 16, 2]]) == {8: 5, 1 << 20: 2}
    assert _ranges_from_bounds({4: 4, 8: 2}) == [[1, 4, 4], [5, 8, 2], [9, 1 << 20, 0]]


def test_cli_recommend_json(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    from specsim.sweep.store import write_record

    for r in records():
        write_record(tmp_path, r)
    _register()
    out = CliRunner().invoke(app, ["recommend", str(tmp_path), "--tiers", "100", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)            # notes go to stderr
    assert data["tiers"] == [100.0] and data["recommendations"][0]["policy"] == "vllm-dsd"
    assert {e["engine"] for e in data["recommendations"][0]["engines"]} == {"vllm", "trtllm", "sglang"}


def _words(text: str) -> list[str]:
    """The words of a recommendation text, whatever its width: shell continuations and the spaces a narrow
    terminal puts around a knob's ``=`` removed."""
    return " ".join(text.replace(" \\\n", " ").split()).replace(" = ", "=").split()


def _configs(text: str) -> list:
    """Every JSON configuration printed in ``text``, decoded across its line breaks (each starts a line)."""
    import re

    dec, out, pos = json.JSONDecoder(), [], 0
    while (m := re.compile(r"^\s*\{\"", re.M).search(text, pos)) is not None:
        obj, pos = dec.raw_decode(text, m.end() - 2)
        out.append(obj)
    return out


@pytest.mark.parametrize("width", [40, 80, 200])
def test_cli_recommend_fits_the_terminal_and_cuts_no_word(width, tmp_path, monkeypatch, capsys):
    from specsim.cli import _register, app
    from specsim.sweep.store import write_record

    for r in records():
        write_record(tmp_path, r)
    _register()
    monkeypatch.setenv("COLUMNS", str(width))
    app(["recommend", str(tmp_path), "--tiers", "100,150"], standalone_mode=False)
    text = capsys.readouterr().out.rstrip("\n")
    assert max(map(len, text.splitlines())) <= width
    recs = recommend(records(), [100.0, 150.0])
    assert _words(text) == _words(recommendations_text(recs, width=10_000))
    # the pasteable JSON blocks stay valid and whole: vLLM then TensorRT-LLM per tier
    want = [c for r in recs for e in r.engines
            for c in (e.config, (e.alternative or {}).get("config")) if isinstance(c, dict)]
    assert _configs(text) == want
    assert any("num_speculative_tokens_per_batch_size" in c for c in _configs(text))


def test_sglang_flags_wrap_with_shell_continuations():
    import shlex
    from dataclasses import replace

    r = recommend(records(), [100.0])[0]
    sgl = engine_configs("static", {"gamma": 3, "drafter": "eagle3"})[2]
    text = recommendations_text([replace(r, engines=[sgl])], width=40)
    block = [ln for ln in text.splitlines() if ln.lstrip().startswith("--speculative")]
    assert len(block) == 4 and all(ln.endswith(" \\") for ln in block[:-1]) and max(map(len, block)) <= 40
    # pasted into a shell, which drops each backslash-newline: the same arguments
    assert shlex.split("\n".join(block).replace("\\\n", "")) == sgl.config
    assert all(ln.split()[0].startswith("--") for ln in block)  # a flag never parted from its value


def test_a_covered_tier_says_so_with_compares_advice():
    """Tier 50 lies below every point of both curves (their slowest is 55 TPS/user at load 64): the answer is the
    heaviest load, said as 'covered'; throughput still rises from 16 to 64 users by far more than 2%, so
    compare's advice to add heavier loads comes with it."""
    r = recommend(records(), [50.0])[0]
    assert (r.status, r.load, r.advice) == ("covered", 64.0, "add heavier loads")
    text = " ".join(recommendations_text([r], width=200).split())
    assert "covered: every frontier point of this curve runs faster than the tier" in text
    assert "advice: add heavier loads" in text


def test_a_wide_gap_to_the_interpolated_frontier_says_where_to_add_loads():
    """Tier 100 on records(): vllm-dsd's point meeting it is load 16 (120 TPS/user, 198 tok/s/GPU), while its
    frontier at 100 interpolates to 198 + (12 * 64 + 6 - 198) * 20 / 60 = 390: 97% more, between 16 and 64."""
    r = recommend(records(), [100.0])[0]
    assert r.tier_throughput_per_gpu == pytest.approx(390.0)
    text = " ".join(recommendations_text([r], width=200).split())
    assert ("the frontier reaches the tier at 390 tok/s/GPU between this load and the next simulated one "
            "(97% more") in text
    assert "sweep loads above 16" in text


def test_a_thrashing_covered_point_is_not_told_to_add_heavier_loads():
    """A fresh user's report: recommend said "advice: add heavier loads" right beside "caution: this point
    thrashes ... fewer users per replica". A thrashing point keeps the caution and drops the heavier-load advice;
    a point that does not thrash keeps it."""
    from specsim.sweep.recommend import Recommendation, recommendations_text
    rec = Recommendation(tier=100.0, curve="dspark", policy="dspark", knobs={"gamma": 7}, mode="closed", load=64.0,
                         tps_per_user=114.1, throughput_per_gpu=6984.0, tier_throughput_per_gpu=6984.0,
                         runner_up="static", margin=0.01, margin_verdict="within noise", recomputed_share=0.73,
                         status="covered", advice="add heavier loads")
    text = " ".join(recommendations_text([rec], width=100).split())
    assert "heaviest load on the frontier is the answer" in text and "this point thrashes" in text
    assert "add heavier loads" not in text
    calm = " ".join(recommendations_text([Recommendation(**{**rec.to_dict(), "recomputed_share": 0.0})],
                                         width=100).split())
    assert "advice: add heavier loads" in calm and "thrashes" not in calm


@pytest.mark.parametrize("margin, verdict, tie", [(0.002, "one seed", True),
                                                  (0.0, "within noise (p=0.47, 2 seeds)", True),
                                                  (0.015, "holds (p=0.01, 3 seeds)", False),
                                                  (0.012, "untested (p=0.042, 2 seeds; a test needs 3)", True),
                                                  (0.08, "one seed", False)])
def test_a_lead_no_test_upholds_below_two_percent_is_called_a_tie(margin, verdict, tie):
    """A fresh user's report: recommend named a winner at +0.2% over static on one seed, at a point that thrashes,
    and a vllm-adaptive winner at +0.0% (p = 0.47) that no engine runs. Such a lead is called a tie, naming the
    runner-up and what one more seed would settle; a lead a paired test upholds, or a large one, is not."""
    from specsim.sweep.recommend import Recommendation, recommendations_text
    rec = Recommendation(tier=100.0, curve="dspark-async", policy="dspark-async", knobs={"gamma": 7}, mode="closed",
                         load=64.0, tps_per_user=123.2, throughput_per_gpu=7246.0, tier_throughput_per_gpu=7246.0,
                         runner_up="static", margin=margin, margin_verdict=verdict, recomputed_share=0.41,
                         status="covered")
    text = " ".join(recommendations_text([rec], width=100).split())
    assert ("a tie as far as this sweep can tell: static delivers within" in text) == tie
    assert ("sweep --seeds 3" in text) == (tie and (verdict == "one seed" or verdict.startswith("untested")))
    assert "this point thrashes" in text


def test_per_all_gpus_factor_is_stated_where_prefill_gpus_run_beside_decode_ones():
    """A fresh user costing per GPU read the decode-only tok/s/GPU of the default (1 decode + 1 prefill GPU)
    scenario as the fleet's: compare and recommend state the factor."""
    from specsim.analysis.sweep_tables import gpu_split, per_all_gpus_note

    recs = [{"status": "failed", "summary": {}},
            {"status": "ok", "summary": {"decode_gpus": 4, "prefill_gpus": 2}}]
    assert gpu_split(recs) == (4, 2) and gpu_split([]) is None
    assert per_all_gpus_note((4, 2)) == ("This sweep's scenario runs 2 prefill GPUs beside 4 decode GPUs: per GPU of "
                                         "both, every tok/s/GPU here is x0.67.")
    assert per_all_gpus_note((1, 0)) == "" and per_all_gpus_note(None) == ""


def test_a_larger_lead_within_noise_is_called_not_settled():
    """compare called a +5.3% lead (p = 0.073) within noise while recommend said nothing of it."""
    from specsim.sweep.recommend import Recommendation, recommendations_text
    rec = Recommendation(tier=200.0, curve="dspark", policy="dspark", knobs={"gamma": 7}, mode="closed", load=16.0,
                         tps_per_user=210.0, throughput_per_gpu=3000.0, tier_throughput_per_gpu=3000.0,
                         runner_up="static", margin=0.053, margin_verdict="within noise (p=0.073, 2 seeds)")
    text = " ".join(recommendations_text([rec], width=100).split())
    assert "not settled: the +5.3% lead over static is within the seeds' noise" in text and "a tie" not in text


def test_a_tie_names_a_reason_to_prefer_the_runner_up_only_where_one_exists():
    """A tie won by static (every engine runs it, its point does not thrash) said "where your engine cannot run
    static exactly": the clause now appears only where an engine cannot, or the point thrashes."""
    from specsim.sweep.recommend import Recommendation, engine_configs, recommendations_text
    rec = Recommendation(tier=150.0, curve="static", policy="static", knobs={"gamma": 7, "drafter": "dspark"},
                         mode="closed", load=16.0, tps_per_user=334.9, throughput_per_gpu=4810.0,
                         tier_throughput_per_gpu=6956.0, runner_up="dspark-async", margin=0.003,
                         margin_verdict="one seed", engines=engine_configs("static", {"gamma": 7, "drafter": "dspark"}))
    text = " ".join(recommendations_text([rec], width=100).split())
    assert "within 0.3% at this tier (one seed: sweep --seeds 3 to judge it); either serves" in text
    asyn = Recommendation(**{**rec.to_dict(), "curve": "dspark-async", "policy": "dspark-async", "runner_up": "static",
                             "engines": engine_configs("dspark-async", {"gamma": 7, "drafter": "dspark"})})
    text = " ".join(recommendations_text([asyn], width=100).split())
    assert "where your engine cannot run dspark-async exactly, the runner-up gives up nothing measurable" in text


def test_prefill_bound_points_are_named_wherever_the_answer_is_read():
    """A fresh user's Qwen3-8B sweep met tier 200 at 64 users only because its requests queued 2.5 s for the single
    prefill GPU (TTFT 2,512 ms): specsim run said so, sweep, compare, recommend and the report did not."""
    from specsim.analysis.metrics import prefill_bound
    from specsim.analysis.sweep_tables import prefill_bound_points, results_frame
    from specsim.cli.sweep_cmd import caution_notes

    assert prefill_bound(600.0, 1000.0) and not prefill_bound(400.0, 1000.0)
    assert not prefill_bound(6.0, 7.0) and not prefill_bound(None, 100.0)      # 10 ms floor; colocated: no wait
    out = []
    for seed in (0, 1):
        for load, x, wait in ((4, 300.0, 1.0), (16, 250.0, 2447.0)):
            r = rec("static", load, seed, x, 10 * load)
            r["summary"].update(mean_prefill_wait_ms=wait, mean_ttft_ms=wait + 65.0)
            out.append(r)
    assert prefill_bound_points(results_frame(out)) == ["static at 16", "static at 16"]
    assert "prefill-bound at 1 point in 2 seed runs (static at 16)" in caution_notes(results_frame(out))[0]
    got = recommend(out, [200.0])[0]
    assert got.load == 16 and got.prefill_wait_ms == pytest.approx(2447.0)
    text = " ".join(recommendations_text([got], width=200).split())
    assert "caution: this point is prefill-bound (its requests waited 2,447 ms of their 2,512 ms TTFT" in text


def test_a_covered_tier_whose_heavier_load_failed_names_that_load():
    """A fresh user's `none` failed at 64 users (its trace too short for the window) while the other policies ran:
    compare read its 16-user point as the covered answer and said 'heavier loads only lose throughput', inflating
    the gain of speculation over it."""
    from specsim.analysis.frontier import compare

    out = []
    for seed in (0, 1):
        for load, x in ((4, 300.0), (16, 250.0), (64, 180.0)):
            r = rec("none", load, seed, x, 10 * load)
            if load == 64:
                r.update(status="error", error="trace too short for a closed-loop window", summary={})
            out.append(r)
    row = compare(out, [100.0]).iloc[0]
    assert row.status == "covered" and row.advice.startswith("heavier load 64 failed for want of requests (the "
                                                             "trace is too short for a closed-loop window there)")
    assert "rerun" not in row.advice                   # a rerun of the same trace fails the same way
    text = " ".join(recommendations_text(recommend(out, [100.0]), width=200).split())
    assert "(but a heavier load failed); advice: heavier load 64 failed" in text
    # another error (a worker out of memory): a rerun may finish it
    for r in out:
        if r["status"] == "error":
            r["error"] = "the worker was killed (out of memory)"
    assert compare(out, [100.0]).iloc[0].advice == ("heavier load 64 failed: the answer may lie there (rerun it; "
                                                    "compare lists the error)")
    # a curve whose throughput already fell from 4 to 16 users is not sent to a heavier load
    for r in out:
        if r["status"] == "ok" and r["config"]["load"]["value"] == 16:
            r["summary"]["output_throughput_per_gpu"] = 30.0
    assert compare(out, [100.0]).iloc[0].advice == ""


def test_the_per_all_gpus_factor_of_a_fleet_sized_prefill_pool_is_not_zero():
    """v4-flash.toml's 2,048 prefill GPUs beside 1 decode GPU read 'x0.00'."""
    from specsim.analysis.sweep_tables import per_all_gpus_note
    from specsim.fmt import factor

    assert (factor(0.5), factor(1 / 2049), factor(0.0)) == ("0.50", "0.00049", "0.00")
    note = per_all_gpus_note((1, 2048))
    assert "x0.00049" in note and "sized for a whole fleet" in note
    assert "sized for a whole fleet" not in per_all_gpus_note((1, 1))


def test_a_tier_met_by_the_mean_alone_says_what_share_of_requests_meets_it():
    """A fresh user's report: recommend named a point at 133.9 TPS/user for tier 100 where only 67-72% of the
    requests ran at >= 100 TPS/user, and never said so. Attainment is the share of the point's requests at or
    above the tier (seed mean); below 90% the text names the load where nine in ten meet it."""
    recs = []
    for seed in (0, 1):
        for load, tps, thr in ((4, [210.0, 190.0, 180.0, 170.0], 40.0), (16, [150.0, 140.0, 60.0, 50.0], 160.0)):
            r = rec("static", load, seed, sum(tps) / 4, thr)
            r["requests"] = {"tps_per_user": tps, "output_tokens": [10] * 4}
            recs.append(r)
    (r,) = recommend(recs, [100.0])
    assert (r.load, r.attainment) == (16.0, 0.5)                  # mean 100 TPS/user meets the tier; half its users
    assert (r.attained_load, r.attained_throughput_per_gpu, r.attained_share) == (4.0, 40.0, 1.0)
    text = " ".join(recommendations_text([r], width=100).split())
    assert ("caution: the tier is met by the mean: 50% of the requests of this point run at >= 100 TPS/user; for 90% of "
            "them, static at closed load 4 delivers 40 tok/s/GPU (100% meet it") in text
    assert json.loads(json.dumps(r.to_dict()))["attainment"] == 0.5
    full = recommend(recs, [40.0])[0]                                        # every request meets 40
    assert full.attainment == 1.0 and full.attained_load is None
    assert "met by the mean" not in recommendations_text([full], width=100)


def test_think_bound_points_are_named_wherever_the_answer_is_read():
    """A fresh user's multi-turn closed loop: 8 users of a session trace kept 0.5 requests in the system on average
    (the rest thinking between turns), every curve read 'covered' and dspark-async +16% over none, with no word
    that the server was idle. Little's law gives the requests in the system: request throughput x mean E2EL."""
    from specsim.analysis.metrics import think_bound, think_bound_warning, users_in_system
    from specsim.analysis.sweep_tables import results_frame, think_bound_points
    from specsim.cli.sweep_cmd import caution_notes

    assert users_in_system(2.0, 1500.0) == 3.0 and think_bound(8, 2.0, 1500.0) and not think_bound(4, 2.0, 1500.0)
    assert not think_bound(8, None, 1500.0) and not think_bound(None, 2.0, 1500.0)
    out = []
    for seed in (0, 1):
        for load, x, busy in ((2, 300.0, 1.9), (8, 290.0, 0.5)):
            r = rec("static", load, seed, x, 10 * load)
            r["summary"].update(request_throughput=1.0, mean_e2el_ms=1000.0 * busy)
            out.append(r)
    df = results_frame(out)
    assert think_bound_points(df) == ["static at 8", "static at 8"]
    assert any("think-bound at 1 point in 2 seed runs (static at 8)" in n for n in caution_notes(df))
    got = recommend(out, [200.0])[0]
    assert got.load == 8 and got.users_in_system == pytest.approx(0.5)
    text = " ".join(recommendations_text([got], width=200).split())
    assert "caution: this point is think-bound (0.5 of its 8 users had a request in the system on average" in text
    s = {"load": {"mode": "closed", "concurrency": 8}, "window": {"request_throughput": 1.0, "mean_e2el_ms": 500.0}}
    assert think_bound_warning(s).startswith("warning: think-bound: 0.5 of the 8 users")
    assert think_bound_warning({**s, "load": {"mode": "open"}}) is None


def test_points_where_requests_queue_are_named_wherever_the_answer_is_read():
    """A fresh user's DSpark sweep on a hybrid model: at 96 users about 62 ran and 35 waited to be admitted (the
    KV pool full), the median TTFT was 1.7 s, and recommend named that point for a TPS/user tier without a word."""
    from specsim.analysis.metrics import queued
    from specsim.analysis.sweep_tables import queued_points, results_frame
    from specsim.cli.sweep_cmd import caution_notes

    assert queued(35.0, 96) and not queued(5.0, 96) and not queued(0.5, 4) and not queued(None, 96)
    out = []
    for seed in (0, 1):
        for load, x, waiting in ((64, 300.0, 0.2), (96, 300.0, 35.0)):
            r = rec("static", load, seed, x, 10 * load + seed)
            r["summary"].update(mean_waiting_requests=waiting, mean_running_requests=load - waiting,
                                p99_ttft_ms=4000.0 if waiting > 1 else 80.0)
            out.append(r)
    df = results_frame(out)
    assert queued_points(df) == ["static at 96", "static at 96"]
    assert any("requests queue at 1 point in 2 seed runs (static at 96)" in n for n in caution_notes(df))
    got = recommend(out, [200.0])[0]
    assert got.load == 96 and got.waiting == pytest.approx(35.0) and got.p99_ttft_ms == pytest.approx(4000.0)
    text = " ".join(recommendations_text([got], width=200).split())
    assert "caution: requests queue at this point (35.0 of its 96 users waited on average to be admitted" in text
    lighter = recommend([r for r in out if r["config"]["load"]["value"] == 64], [200.0])[0]
    assert "requests queue" not in recommendations_text([lighter], width=200)


def test_a_short_window_does_not_read_busy_users_as_thinking():
    """A fresh user's 96-user run of 500 requests: Little's law over the window's 37 completed requests read 45.4
    users in the system while the replica ran 95.8, and the run warned 'think-bound'. The steps' own count wins
    where it is larger; a run whose requests queue says so instead."""
    from specsim.analysis.metrics import queued_warning, think_bound_warning, users_in_system

    assert users_in_system(0.5, 1000.0, 7.9) == pytest.approx(7.9) and users_in_system(8.0, 1000.0, 2.0) == 8.0
    assert users_in_system(0.5, 1000.0) == 0.5
    busy = {"load": {"mode": "closed", "concurrency": 96},
            "window": {"request_throughput": 1.0, "mean_e2el_ms": 45_400.0, "mean_running_requests": 95.8,
                       "mean_waiting_requests": 0.2}}
    assert think_bound_warning(busy) is None and queued_warning(busy) is None
    queued = {"load": {"mode": "closed", "concurrency": 96},
              "window": {"request_throughput": 1.0, "mean_e2el_ms": 96_000.0, "mean_running_requests": 54.1,
                         "mean_waiting_requests": 41.9}}
    assert queued_warning(queued).startswith("warning: requests queue: 41.9 of the 96 users waited to be admitted")
    thinking = {**busy, "window": {"request_throughput": 1.0, "mean_e2el_ms": 2_000.0, "mean_running_requests": 1.5,
                                   "mean_waiting_requests": 0.0}}
    assert think_bound_warning(thinking).startswith("warning: think-bound: 2.0 of the 96 users")


def _dspark_prefill_bound_at_64() -> list[dict]:
    """dspark and static at 4, 16 and 64 users; dspark leads at every load and its 64-user point is prefill-bound
    (its requests waited 2,447 of 2,512 ms TTFT for a prefill instance)."""
    out = []
    for load, x, wait in ((4, 300.0, 1.0), (16, 200.0, 2.0), (64, 120.0, 2447.0)):
        r = rec("dspark", load, 0, x, 12 * load)
        r["summary"].update(mean_prefill_wait_ms=wait, mean_ttft_ms=wait + 65.0)
        out.append(r)
        out.append(rec("static", load, 0, x - 10.0, 11 * load))
    return out


def test_a_winner_read_from_a_flagged_point_says_so_in_compare_and_the_report():
    """A fresh user's report headline named dspark-async the winner at 100 tok/s/user from its 64-user point, which
    the same page called prefill-bound (its figures measure the prefill queue, not the policy): the winner's row now
    carries a caution, compare warns, the headline says to read it with care and the frontier plot crosses it."""
    from specsim.analysis.frontier import Frontier, compare
    from specsim.analysis.report import decision_rows
    from specsim.analysis.sweep_tables import frontier_loads_at

    out = _dspark_prefill_bound_at_64()
    tab = compare(out, [100.0, 160.0, 250.0])
    won = tab[tab.winner.astype(bool)].set_index("tier")
    assert list(won.curve) == ["dspark"] * 3
    # tier 100: covered, read at 64 (flagged); 160: between 64 and 16 (flagged); 250: between 16 and 4 (clean)
    assert won.caution[100.0] == won.caution[160.0] == "load 64 (prefill-bound)" and won.caution[250.0] == ""
    warned = [w for w in tab.attrs["warnings"] if "the winner dspark is" in w]
    assert len(warned) == 2 and "is read from its frontier point at load 64 (prefill-bound)" in warned[0]
    assert "is interpolated between its frontier points at loads 64 and 16, one flagged: load 64" in warned[1]
    rows = {r["tier"]: r for r in decision_rows(tab)}
    assert rows[100.0]["caution"] == "load 64 (prefill-bound)" and rows[250.0]["caution"] == ""
    from specsim.analysis.report import _decision
    lines = {r["tier"]: r["line_end"] for r in _decision(tab)["rows"]}
    assert lines["100"].endswith("; read with care: it comes from its point at load 64 (prefill-bound), see the "
                                 "warnings below") and "read with care" not in lines["250"]
    f = Frontier.from_points("c", [120.0, 200.0, 300.0], [768.0, 192.0, 48.0], [64.0, 16.0, 4.0])
    assert frontier_loads_at(f, 100.0) == (64.0,) and frontier_loads_at(f, 200.0) == (16.0,)
    assert frontier_loads_at(f, 250.0) == (16.0, 4.0) and frontier_loads_at(f, 400.0) == ()
    from specsim.analysis.plots import frontier_figure

    fig = frontier_figure([("sweep", out)], [100.0])
    ax = fig.axes[0]
    assert "flagged point (warnings)" in [t.get_text() for t in ax.get_legend().get_texts()]
    crosses = [ln for ln in ax.lines if ln.get_marker() == "x" and len(ln.get_xdata())]
    assert len(crosses) == 1 and list(crosses[0].get_xdata()) == [120.0]      # dspark's 64-user point


def test_recommend_cautions_a_tier_read_through_a_flagged_point_and_keeps_each_policys_own_knobs():
    """A fresh user's recommend at tier 150 gave no caution although its figure was interpolated with a thrashing
    point compare warned about; and labelled trtllm-draft-len-schedule with vllm-dsd's schedule from the shared
    [policy.knobs] table (the configs printed below it were right)."""
    out = _dspark_prefill_bound_at_64()
    for r in out:
        r["config"]["scenario"] = {**SCEN, "policy": {"knobs": {"num_speculative_tokens_per_batch_size": [[1, 8, 5]]}}}
    got = {r.tier: r for r in recommend(out, [160.0, 250.0])}
    assert got[160.0].load == 16 and got[160.0].caution == "load 64 (prefill-bound)" and got[250.0].caution == ""
    text = " ".join(recommendations_text(list(got.values()), width=200).split())
    assert "the tier's figure (" in text and "is read from the frontier point at load 64 (prefill-bound)" in text
    assert "num_speculative_tokens_per_batch_size" not in got[160.0].knobs          # vllm-dsd's knob, not dspark's


def test_a_queue_behind_a_disaggregated_prefill_is_said_to_show_in_tpot():
    """Disaggregated prefill stamps the first token before admission: the wait lengthens TPOT, not TTFT, and the
    warning said the opposite of the run's own notice."""
    from specsim.analysis.metrics import queued_warning

    s = {"load": {"mode": "closed", "concurrency": 32}, "window": {"mean_waiting_requests": 15.5,
                                                                    "mean_running_requests": 4.0}}
    assert "TTFT holds that queue" in queued_warning(s)
    s["admission_wait_in_tpot"] = True
    assert "TPOT and TPS/user hold that queue" in queued_warning(s) and "TTFT holds" not in queued_warning(s)


def test_tune_warns_of_a_pick_read_from_a_flagged_point():
    """A fresh user's tune picked threshold 0.725 at a prefill-bound load without a word (recommend warned)."""
    from types import SimpleNamespace

    from specsim.analysis.tuned import pick_cautions

    out = []
    for load, x, wait in ((4, 300.0, 1.0), (16, 200.0, 2.0), (64, 120.0, 2447.0)):
        r = rec("specdecpp", load, 0, x, 12 * load, threshold=0.725)
        r["summary"].update(mean_prefill_wait_ms=wait, mean_ttft_ms=wait + 65.0)
        out.append(r)
    frontier = {"tps_per_user": [120.0, 200.0, 300.0], "throughput_per_gpu": [768.0, 192.0, 48.0],
                "loads": [64.0, 16.0, 4.0]}
    res = SimpleNamespace(spec=SimpleNamespace(policy="specdecpp", knob=SimpleNamespace(name="threshold")),
                          tiers=[SimpleNamespace(tier=t, value=0.725, frontier=frontier) for t in (100.0, 250.0)])
    lines = pick_cautions(res, out)
    assert len(lines) == 1 and lines[0].startswith("warning: at tier 100 the pick threshold=0.725 is read from its "
                                                   "point at load 64 (prefill-bound)")


def test_a_tie_with_a_runner_up_whose_users_queue_is_not_either_serves():
    """A fresh user's B200 sweep: "a tie ...: dspark-async delivers within 0.6% at this tier; either serves" where
    dspark-async's figure came from its 128-user point with 51.6 users waiting for admission (mean TTFT 7.1 s) and
    the winner's point admitted every user. The tie now says the runner-up's users queue, from the records."""
    from specsim.sweep.recommend import recommendations_text

    out = []
    for seed in (0,):
        for load, x in ((16, 200.0), (128, 120.0)):
            a = rec("mtp1", load, seed, x, 10 * load, gamma=1, drafter="mtp")
            b = rec("dspark-async", load, seed, x + 0.5, 10 * load * 0.996)
            for r, waiting, ttft in ((a, 0.0, 100.0), (b, 51.6 if load == 128 else 0.0, 7100.0 if load == 128
                                                         else 90.0)):
                r["summary"].update(mean_waiting_requests=waiting, mean_ttft_ms=ttft, p99_ttft_ms=ttft)
            out += [a, b]
    (r,) = recommend(out, [100.0])
    assert (r.curve, r.runner_up, r.load) == ("mtp1", "dspark-async", 128.0)
    assert r.runner_up_queue == ("point at load 128 has 51.6 of its users queued for admission (mean TTFT "
                                 "7,100 ms)")
    text = " ".join(recommendations_text([r], width=300).split())
    assert "a tie as far as this sweep can tell: dspark-async delivers within 0.4% at this tier" in text
    assert ("but not for its users: dspark-async's point at load 128 has 51.6 of its users queued for admission "
            "(mean TTFT 7,100 ms), where this one's admits them at once") in text and "either serves" not in text


def test_a_point_measured_over_few_requests_is_cautioned_in_recommend():
    """sweep and compare flagged a point whose window counted fewer completions than twice its users; recommend,
    naming that very point, said nothing."""
    from specsim.sweep.recommend import recommendations_text

    out = [rec("static", load, 0, x, 10 * load) for load, x in ((4, 200.0), (16, 120.0))]
    for r, m in zip(out, (40, 13)):
        r["summary"]["measured_requests"] = m
    (r,) = recommend(out, [100.0])
    assert (r.load, r.measured_requests) == (16.0, 13.0)
    text = " ".join(recommendations_text([r], width=200).split())
    assert "caution: few requests measured at this point (13 completions in its window for 16 users)" in text
    (r4,) = recommend(out, [150.0])
    assert r4.load == 4.0 and "few requests" not in " ".join(recommendations_text([r4], width=200).split())


def _twins(*policies):
    """Records of ``policies`` with the same figures at every point (one rule under several names), beside a
    slower static."""
    out = []
    for seed, d in ((0, -5.0), (1, 0.0), (2, 5.0)):
        for load, x in ((4, 200.0), (16, 120.0), (64, 60.0)):
            out += [rec(p, load, seed, x + d, 12 * load * (1 + d / 100)) for p in policies]
            out.append(rec("static", load, seed, x + d, 10 * load * (1 + d / 100)))
    return out


def test_an_exact_tie_is_said_naming_both_and_no_winner_is_crowned_by_name(tmp_path):
    """A plug-in twin of dspark registered as aaa-twin tied it exactly and recommend printed aaa-twin as the
    winner (+0.0%, name order) and that the runner-up "gives up nothing measurable". Now the tie is said, naming
    both, as compare's TIE; the load and configurations are dspark's (vLLM expresses it, as its nearest setting;
    the twin no engine knows); the text carries no winner's margin and no "a tie as far as this sweep can tell"."""
    (r,) = recommend(_twins("aaa-twin", "dspark"), [100.0])
    assert (r.curve, r.tied_with, r.runner_up, r.margin_verdict) == ("dspark", ["aaa-twin"], "aaa-twin", "exact tie")
    assert r.load == 16.0 and r.tier_throughput_per_gpu == pytest.approx(384.0)
    assert r.engines[0].config == {"method": "dspark", "num_speculative_tokens": 7, "enable_adaptive_verification": True}
    assert r.to_dict()["tied_with"] == ["aaa-twin"]
    text = " ".join(recommendations_text([r], width=200).split())
    assert text.startswith("tier 100 tok/s/user: a tie: dspark (gamma=7, drafter=dspark) and aaa-twin deliver the "
                           "same throughput at the tier (384 tok/s/GPU, equal within 1e-9), so none wins; the load "
                           "and configurations below are dspark's")
    assert "(frontier at the tier 384); an exact tie with aaa-twin" in text
    assert "a tie as far as this sweep can tell" not in text and "+0.0%" not in text
    # where no engine tells the tied curves apart, the first by name is shown, and both are still named
    (r,) = recommend(_twins("zzz-twin", "aaa-twin"), [100.0])
    assert (r.curve, r.tied_with) == ("aaa-twin", ["zzz-twin"])
    assert "a tie: aaa-twin (gamma=7, drafter=dspark) and zzz-twin deliver" in " ".join(
        recommendations_text([r], width=200).split())
    # three tied curves: all named
    (r,) = recommend(_twins("aaa-twin", "dspark", "bbb-twin"), [100.0])
    assert (r.curve, r.tied_with) == ("dspark", ["aaa-twin", "bbb-twin"])
    assert "dspark (gamma=7, drafter=dspark), aaa-twin and bbb-twin deliver" in " ".join(
        recommendations_text([r], width=200).split())


def test_compare_recommend_and_the_report_say_the_same_exact_tie(tmp_path):
    """One tie rule (tiers.mark_winners) read by the three: compare's TIE cells name each other, recommend names
    both, the report's answer line names both with their common throughput."""
    from typer.testing import CliRunner

    from specsim.analysis.frontier import compare
    from specsim.analysis.report import _decision
    from specsim.cli import _register, app
    from specsim.sweep.store import write_record

    recs = _twins("aaa-twin", "dspark")
    (row,) = _decision(compare(recs, [100.0]))["rows"]
    assert (row["curve"], row["line_end"]) == ("aaa-twin and dspark",
                                               " tie at 384 tok/s/GPU each (equal throughput at the tier)")
    for r in recs:
        write_record(tmp_path, r)
    _register()
    out = CliRunner().invoke(app, ["compare", str(tmp_path), "--tiers", "100"], env={"COLUMNS": "250"})
    text = " ".join(out.stdout.split())
    assert out.exit_code == 0 and "TIE with dspark (equal throughput at the tier)" in text
    assert "TIE with aaa-twin (equal throughput at the tier)" in text and "WINNER" not in text
    out = CliRunner().invoke(app, ["recommend", str(tmp_path), "--tiers", "100"], env={"COLUMNS": "250"})
    text = " ".join(out.stdout.split())
    assert out.exit_code == 0 and "tier 100 tok/s/user: a tie: dspark (gamma=7, drafter=dspark) and aaa-twin" in text
