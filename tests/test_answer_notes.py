"""The SLA answer's warnings say each thing once and say it right (compare, report, recommend).

* A tier whose winner and runner-up (and baseline) are read from flagged points got two warnings about the same
  points, at every tier (the README tour's sweep: six paragraphs for three tiers): now one note per tier, and one
  naming the tiers where the same points are concerned at several.
* In an exact tie the notes called the curve the answer is read from "the winner": they name the tied curves.
* recommend's covered text said a heavier load "delivered less", where that load was overloaded: it names the flag.
* compare repeated "its heaviest load 64 is already thrashing and prefill-bound: lift that limit ..." on three rows of
  one tier (six lines each at 80 columns): the cells point to one note under the table.
* The built-in acceptance notes of dspark and mtp were two near-identical paragraphs: one names both drafters.
* recommend repeated a point's cautions in full at each tier it answers, and an engine's thrashing alternative at
  each engine: said in full once, then "as at tier 50 ... (see there)" / "(see vllm above)".
"""

from __future__ import annotations

import json

import pytest

from specsim import fmt
from specsim.analysis.answer_notes import said_once, tiers_phrase
from specsim.analysis.frontier import compare
from specsim.analysis.report import _decision
from specsim.sweep.recommend import recommend, recommendations_text
from test_answer_trust import OPEN2, open_record
from test_recommend import _twins, rec


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_words_joined_as_a_sentence_lists_them():
    assert [fmt.and_list(x) for x in ([], ["a"], ["a", "b"], ["a", "b", "c"])] == ["", "a", "a and b", "a, b and c"]
    assert [tiers_phrase(t) for t in ([100.0], [150.0, 200.0], [50.0, 100.0, 152.1])] == [
        "tier 100", "tiers 150 and 200", "tiers 50, 100 and 152.1"]
    assert said_once([(100.0, "warning:", "x"), (150.0, "warning:", "y"), (200.0, "warning:", "y"),
                      (250.0, "note:", "y")]) == ["warning: at tier 100 x", "warning: at tiers 150 and 200 y",
                                                  "note: at tier 250 y"]


# ------------------------------------------------------------------------ 1. one note per tier, grouped over tiers
def _tour_like() -> list[dict]:
    """The tour sweep's shape: dspark and static at 4, 16 and 64 users, both prefill-bound at 64 (2,447 of 2,512 ms
    TTFT waiting for a prefill instance); mtp1 (the baseline) thrashing at 64 (30 of 100 output tokens recomputed)."""
    out = []
    for policy, points in (("dspark", ((4, 300.0, 48.0), (16, 200.0, 192.0), (64, 120.0, 768.0))),
                           ("static", ((4, 290.0, 44.0), (16, 190.0, 176.0), (64, 110.0, 704.0))),
                           ("mtp1", ((4, 150.0, 20.0), (16, 105.0, 80.0), (64, 40.0, 200.0)))):
        for load, x, y in points:
            r = rec(policy, load, 0, x, y, **({"gamma": 1, "drafter": "mtp"} if policy == "mtp1" else {}))
            wait = 2447.0 if load == 64 and policy != "mtp1" else 1.0
            r["summary"].update(mean_prefill_wait_ms=wait, mean_ttft_ms=wait + 65.0, total_output_tokens=100,
                                recomputed_tokens=30 if load == 64 and policy == "mtp1" else 0)
            out.append(r)
    return out


def test_flagged_points_behind_an_answer_get_one_note_per_tier_and_one_for_tiers_alike():
    """Tier 100: dspark and static read from their 64-user points (covered), mtp1 interpolated through its thrashing
    64; tiers 150 and 180: dspark and static interpolated between 64 and 16 (mtp1 reads 150 at its 4-user point and
    misses 180): the same points at both, so one note names both tiers."""
    tab = compare(_tour_like(), [100.0, 150.0, 180.0], baseline="mtp1")
    assert list(tab[tab.winner.astype(bool)].curve) == ["dspark"] * 3
    notes = [w for w in tab.attrs["warnings"] if w.startswith("warning: at tier")]
    assert notes == [
        "warning: at tier 100 the figures of the winner dspark and the runner-up static are each read from their "
        "frontier point at load 64 (prefill-bound); the figure of the baseline mtp1 is interpolated between its "
        "frontier points at loads 64 and 16, one flagged: load 64 (thrashing): those figures measure the limits "
        "named above, not the policies, so the winner may change once they are lifted, and its margin over the "
        "runner-up and its gain over the baseline are no measure of what the winner adds (sweep again without them, "
        "or compare the curves where no point is flagged: lighter loads)",
        "warning: at tiers 150 and 180 the figures of the winner dspark and the runner-up static are each "
        "interpolated between their frontier points at loads 64 and 16, one flagged: load 64 (prefill-bound): those "
        "figures measure the limit named above, not the policies, so the winner may change once it is lifted, and "
        "its margin over the runner-up is no measure of what the winner adds (sweep again without it, or compare "
        "the curves where no point is flagged: lighter loads)"]
    # the columns the report and recommend read are unchanged: one per figure
    won = tab[tab.winner.astype(bool)].set_index("tier")
    assert won.caution[100.0] == won.runner_up_caution[100.0] == "load 64 (prefill-bound)"
    assert (won.baseline_caution[100.0], won.baseline_caution[150.0]) == ("load 64 (thrashing)", "")
    # the report's answer line says the shared points once
    lines = {r["tier"]: r["line_end"] for r in _decision(tab)["rows"]}
    assert ("; read with care: it and the lead over static rest on their points at load 64 (prefill-bound), and the "
            "gain over mtp1 divides by mtp1's point at load 64 (thrashing), see the warnings below") in lines["100"]
    assert "; read with care: it and the lead over static rest on their points at load 64 (prefill-bound), see" \
        in lines["150"]
    # recommend: one caution where its figure (192 + 50 / 80 x 576 = 552) and the runner-up's are read from the
    # same flagged points
    got = {r.tier: r for r in recommend(_tour_like(), [150.0])}
    text = _flat(recommendations_text([got[150.0]], width=200))
    assert ("caution: the tier's figure (552 tok/s/GPU) and static's, which the margin divides by, are read from "
            "their frontier points at load 64 (prefill-bound): they measure the limit, not the policies, so the "
            "winner may change once the limit is lifted, and the margin is no measure of what this policy adds "
            "(compare's warnings)") in text
    assert text.count("(prefill-bound)") == 1 and "caution: the margin divides by" not in text


def test_a_baseline_met_at_its_edge_at_several_tiers_is_noted_once():
    """mtp1 meets 130 and 140 only at its lightest load (150 TPS/user, 20 tok/s/GPU, under half its 200 at 64
    users): one note for both, each tier's interpolated figure the gains divide by given in order."""
    tab = compare(_tour_like(), [130.0, 140.0], baseline="mtp1")
    (note,) = [w for w in tab.attrs["warnings"] if "meets each only" in w or "meets the tier only" in w]
    # 20 + (150 - t) / 45 x 60: 46.7 at 130, 33.3 at 140
    assert note.startswith("note: at tiers 130 and 140 the baseline mtp1 meets each only at its lightest load, 4 "
                           "(150.0 TPS/user, 20 tok/s/GPU); the 47 and 33 tok/s/GPU the gains divide by, "
                           "respectively, are interpolated from it towards its next load, which misses the tier: "
                           "under half the 200 tok/s/GPU it serves at load 64")


# ------------------------------------------------------------------------------------------ 2. an exact tie
def _flagged_twins() -> list[dict]:
    """aaa-twin and dspark tie exactly beside a slower static (the baseline); every 64-user point is prefill-bound,
    and the twins' requests run at 1.6 and 0.4 times their mean (half meet a tier the mean meets)."""
    recs = _twins("aaa-twin", "dspark")
    for r in recs:
        wait = 2447.0 if r["config"]["load"]["value"] == 64 else 1.0
        r["summary"].update(mean_prefill_wait_ms=wait, mean_ttft_ms=wait + 65.0)
        if r["config"]["policy"] != "static":
            x = r["summary"]["mean_tps_per_user"]
            r["requests"] = {"tps_per_user": [1.6 * x, 0.4 * x], "output_tokens": [10, 10]}
    return recs


def test_an_exact_tie_names_the_tied_curves_in_every_warning_and_line():
    tab = compare(_flagged_twins(), [50.0], baseline="static")
    assert set(tab.tied_with) == {"aaa-twin", "dspark", ""}
    said = tab.attrs["warnings"]
    assert not any("the winner" in w for w in said)
    assert ("warning: at tier 50 the figures of the tied curves aaa-twin and dspark, and the baseline static are each "
            "read from their frontier point at load 64 (prefill-bound): those figures measure the limit named above, "
            "not the policies, so the tie may not hold once it is lifted, and their gain over the baseline is no "
            "measure of what they add") in said[1]
    # goodput: static's requests all meet 50 TPS/user (640 tok/s/GPU at 64 users), half the twins' do (384)
    assert ("note: at tier 50 the tied curves aaa-twin and dspark meet the tier by their requests' mean TPS/user "
            "(50% of their requests meet it at their best loads); counting only the requests that meet it "
            "(goodput*), static serves more: 640 tok/s/GPU (100% of its requests meet it) against at most 384 for "
            "the tied curves") in said
    # each tied row carries its own caution; the report's line names both tied curves, no lead over either
    assert list(tab[tab.tied_with != ""].caution) == ["load 64 (prefill-bound)"] * 2
    (row,) = _decision(tab)["rows"]
    assert ("; read with care: aaa-twin's and dspark's figures and the gain over static rest on their points at "
            "load 64 (prefill-bound), see the warnings below") in row["line_end"]
    assert "the lead over" not in row["line_end"]


def test_recommend_says_the_tie_not_the_winner_where_a_tied_figure_is_flagged():
    """Tier 50 is read from dspark's own 64-user point (its prefill-bound caution says so) and from aaa-twin's; tier
    100 through both curves' 64-user points, while dspark's answer is its 16-user point: one caution each, no
    margin, no winner."""
    got = {r.tier: r for r in recommend(_flagged_twins(), [50.0, 100.0])}
    assert (got[50.0].curve, got[50.0].runner_up, got[50.0].runner_up_caution) == (
        "dspark", "aaa-twin", "load 64 (prefill-bound)")
    text = _flat(recommendations_text([got[50.0]], width=200))
    assert ("caution: the tied curve aaa-twin's equal figure at the tier comes from its frontier point at load 64 "
            "(prefill-bound): that point measures the limit, not aaa-twin's policy, so the tie may not hold once the "
            "limit is lifted (compare's warnings)") in text
    text = _flat(recommendations_text([got[100.0]], width=200))
    assert ("caution: the tier's figure (384 tok/s/GPU) and the tied curve aaa-twin's equal figure are read from "
            "their frontier points at load 64 (prefill-bound): they measure the limit, not the policies, so the tie "
            "may not hold once the limit is lifted (compare's warnings)") in text
    for t in (50.0, 100.0):
        said = _flat(recommendations_text([got[t]], width=200))
        assert "the winner may change" not in said and "the margin" not in said


# ----------------------------------------------------------------------------- 3. what a heavier load delivered
def test_a_covered_tier_names_the_flag_of_the_heavier_load_that_delivered_less():
    """dspark-async at rate x1 (389.7 TPS/user), x2 (200, 3,000 tok/s/GPU) and x4, overloaded (33.9 waiting against
    20.9 admitted) at 2,900: x4 delivered less than x2 because its queue ran away, not because of the policy."""
    saved = dict(OPEN2)
    OPEN2[("dspark-async", 2)] = (200.0, 3000.0, 0.5, 12.0)
    OPEN2[("dspark-async", 4)] = (100.72, 2900.0, 33.87, 20.89)
    try:
        recs = [open_record("dspark-async", s) for s in (1, 2, 4)]
    finally:
        OPEN2.clear()
        OPEN2.update(saved)
    (r,) = recommend(recs, [150.0])
    assert (r.status, r.load, r.heavier) == ("covered", 2.0, [(4.0, 2900.0, ["overloaded"])])
    text = _flat(recommendations_text([r], width=200))
    assert ("so its heaviest load on the frontier is the answer (the heavier simulated load 4 delivered less "
            "throughput because it is overloaded: a limit that its figure measures, not the policy; see compare's "
            "warnings)") in text
    assert json.loads(json.dumps(r.to_dict()))["heavier"] == [[4.0, 2900.0, ["overloaded"]]]


@pytest.mark.parametrize("loads, said", [
    ((16, 64, 128), "(the heavier simulated load 128 delivered less throughput)"),
    ((16, 64), "(no heavier load was simulated)")])
def test_a_covered_tier_says_what_its_heavier_loads_delivered(loads, said):
    """static at 16 (120 TPS/user), 64 (60, 640 tok/s/GPU) and 128 users (50, 600: dominated, not flagged)."""
    pts = {16: (120.0, 160.0), 64: (60.0, 640.0), 128: (50.0, 600.0)}
    (r,) = recommend([rec("static", n, 0, *pts[n]) for n in loads], [50.0])
    assert (r.status, r.load) == ("covered", 64.0)
    assert said in _flat(recommendations_text([r], width=200))


# ------------------------------------------------------------------ 4. a long advice shared by rows, said once
def _cli(tmp_path, command: str, recs: list[dict], *args: str) -> str:
    """``specsim COMMAND`` on a sweep folder of ``recs`` at 200 columns: its stdout, whitespace flattened."""
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    from specsim.sweep.store import write_record

    for r in recs:
        write_record(tmp_path, r)
    _register()
    out = CliRunner().invoke(app, [command, str(tmp_path), *args], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    return _flat(out.stdout)


def test_compare_says_a_long_advice_that_rows_share_once_under_its_table(tmp_path):
    """The tour's shape: dspark and static are covered at tier 100 by their prefill-bound 64-user points, so both
    rows were advised "its heaviest load 64 is already prefill-bound: lift that limit ..." in full; now their cells
    point to one note naming both. A short advice stays in its cells."""
    text = _cli(tmp_path, "compare", _tour_like(), "--tiers", "100,150", "--baseline", "mtp1")
    assert text.count("see (a) below") == 2 and "(b)" not in text
    assert ("(a) advice for dspark and static at tier 100, each: its heaviest load 64 is already prefill-bound: lift "
            "that limit (KV capacity, prefill.num_instances) before adding load tok/s/GPU: per decode GPU") in text
    assert text.count("lift that limit") == 1
    assert "add loads between 16 and 64" in text


def test_advice_said_once_names_each_tier_with_its_curves():
    from specsim.cli.compare_table import _advice_once

    long = "heavier load 128 failed: the answer may lie there (rerun it; compare lists the error)"
    rows = [["50", "dspark", long], ["50", "static", long], ["100", "dspark", long], ["100", "static", long],
            ["150", "dspark", long], ["150", "mtp1", "add loads between 4 and 16"],
            ["150", "static", "add loads between 4 and 16"], ["200", "static", "another long advice said only once"]]
    assert _advice_once(rows) == [f"(a) advice for dspark and static at tiers 50 and 100; dspark at tier 150, each: "
                                  f"{long}"]
    assert [r[-1] for r in rows] == ["see (a) below"] * 5 + ["add loads between 4 and 16"] * 2 + [
        "another long advice said only once"]


# ---------------------------------------------------------- 5. one acceptance note naming the drafters, not one each
def _builtin_notice(drafter: str, source: str) -> str:
    """The notice a run of ``drafter`` on built-in rates from ``source`` records (run_notices)."""
    from types import SimpleNamespace

    from specsim.run_notices import default_acceptance_notice
    from specsim.scenario import load_scenario

    return default_acceptance_notice(load_scenario(), SimpleNamespace(gamma=7, drafter=drafter), source,
                                     SimpleNamespace(metadata={"model": "Llama-2-7b-hf"}))


MTP_SOURCE = "DeepSeek-V3 report: MTP second-token acceptance 85-90% (0.875)"
DSPARK_SOURCE = "DSpark paper Fig. 2 + Table 1 datasets"
MERGED = ("acceptance: the built-in rates of drafters dspark (DSpark paper Fig. 2 + Table 1 datasets) and mtp "
          "(DeepSeek-V3 report: MTP second-token acceptance 85-90% (0.875)), not measured for Llama-2-7b-hf with your "
          "drafters: the speed-up over no speculation follows them; give your own (acceptance.length, the acceptance "
          "length your engine reports; acceptance.constant_alpha, acceptance.rates, or a table from specsim fit / "
          "specsim counters; for one drafter alone acceptance.drafters.dspark or acceptance.drafters.mtp: "
          "docs/acceptance.md)")


def test_the_built_in_acceptance_notes_of_two_drafters_are_one_note_naming_both():
    from specsim.run_notices import merged_acceptance_notices

    dspark, mtp = _builtin_notice("dspark", DSPARK_SOURCE), _builtin_notice("mtp", MTP_SOURCE)
    assert dspark.startswith("acceptance: the built-in rates of DSpark paper Fig. 2 + Table 1 datasets, not measured "
                             "for Llama-2-7b-hf with your drafter: ")
    assert merged_acceptance_notices(["a", dspark, "b", mtp]) == ["a", MERGED, "b"]
    # one drafter, another model's notice, or a notice joined with another: as they are
    other = dspark.replace("Llama-2-7b-hf", "qwen3.8-27b")
    joined = f"{mtp}; acceptance: policy mtp1 runs its own drafter mtp"
    assert merged_acceptance_notices([dspark, other, joined]) == [dspark, other, joined]


def test_compare_and_the_report_print_one_acceptance_note_for_the_sweeps_drafters(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    from specsim.cli.sweep_notes import sweep_notices
    from specsim.sweep.store import write_record

    recs = _tour_like()
    for r in recs:
        r["summary"]["acceptance_notice"] = _builtin_notice(r["config"]["knobs"]["drafter"],
                                                            MTP_SOURCE if r["config"]["policy"] == "mtp1"
                                                            else DSPARK_SOURCE)
        write_record(tmp_path, r)
    assert MERGED in sweep_notices(recs) and not any("for this drafter alone" in n for n in sweep_notices(recs))
    _register()
    out = CliRunner().invoke(app, ["compare", str(tmp_path), "--tiers", "100"], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    said = _flat(out.stderr)
    assert said.count("note: acceptance:") == 1 and f"note: {MERGED}" in said


# -------------------------------------------------- 6. recommend: a point's cautions said once over the tiers it answers
def _noisy_tail() -> list[dict]:
    """dspark 10% above static at 4, 16 and 64 users (200, 150 and 90 TPS/user); every 64-user point prefill-bound
    (620 of 649 ms TTFT) and measured on 38 completions (under twice its 64 users): tiers 50 and 80 are both answered
    with dspark's 64-user point, and the margin at both divides by static's 64-user point."""
    out = []
    for load, x, y in ((4, 200.0, 40.0), (16, 150.0, 160.0), (64, 90.0, 640.0)):
        for policy, scale in (("dspark", 1.1), ("static", 1.0)):
            r = rec(policy, load, 0, x, y * scale)
            r["summary"].update(mean_prefill_wait_ms=620.0 if load == 64 else 1.0,
                                mean_ttft_ms=649.0 if load == 64 else 66.0, measured_requests=38 if load == 64 else 99)
            out.append(r)
    return out


def test_recommend_says_a_points_cautions_in_full_at_the_first_tier_it_answers_only(tmp_path):
    text = _cli(tmp_path, "recommend", _noisy_tail(), "--tiers", "50,80")
    first, second = text.split("tier 80 tok/s/user:")
    assert ("caution: few requests measured at this point (38 completions in its window for 64 users): its figures "
            "are noisy; more requests per user widen the window") in first
    assert ("caution: this point is prefill-bound (its requests waited 620 ms of their 649 ms TTFT for a prefill "
            "instance)") in first
    assert ("caution: the margin divides by static's figure at the tier, which comes from its frontier point at load "
            "64 (prefill-bound): that point measures the limit") in first
    assert second.startswith(" dspark (gamma=7, drafter=dspark) run at closed load 64: 90.0 TPS/user, 704 tok/s/GPU")
    assert ("caution: as at tier 50, this point rests on few requests and is prefill-bound (see there) caution: as at "
            "tier 50, the margin divides by static's figure at the tier, which comes from its frontier point at load 64 "
            "(prefill-bound) (see there) vllm: ") in second
    assert "few requests measured" not in second and "620 ms" not in second and "that point measures" not in second
