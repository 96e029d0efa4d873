"""CPU drafters (issue 20, "n-gram / suffix: CPU time, no GPU layers"): n-gram prompt lookup and suffix decoding."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import homogeneous_scenario, make_trace
from specsim.errors import SpecsimInputError
from specsim.hardware.drafter import drafter_cost
from specsim.hardware.lookup_drafter import (NGRAM_SCAN_S_PER_TOKEN, SUFFIX_REQUEST_S, LookupDrafterCost,
                                             scan_speedup)
from specsim.hardware.profile import StepTimeProfile
from specsim.hardware.stepmodel import step_model
from specsim.run_config import drafter_cost_of, drafter_kv_fraction, drafter_weights
from specsim.scenario import load_scenario
from specsim.simulation import simulate


def test_ngram_scan_reproduces_its_source_measurement():
    # vLLM PR 56732: 512 requests x 129,536 context tokens scanned in 70.28 ms on one thread, 9.95 ms on 8
    tokens = 512 * 129_536
    one, eight = LookupDrafterCost("ngram"), LookupDrafterCost("ngram", threads=8)
    assert one.threads == 1                                      # vLLM as shipped: one thread per TP rank
    assert one.draft_time_s(512, 5, None, tokens) == pytest.approx(70.28e-3, rel=0.002)
    assert eight.draft_time_s(512, 5, None, tokens) == pytest.approx(9.95e-3, rel=0.002)
    # fewer requests than threads: one thread per request, no more; under 8,192 context tokens one thread
    assert eight.draft_time_s(2, 5, None, 1e4) == pytest.approx(1e4 * NGRAM_SCAN_S_PER_TOKEN / scan_speedup(2))
    assert eight.draft_time_s(64, 5, None, 8000.0) == pytest.approx(8000 * NGRAM_SCAN_S_PER_TOKEN)
    assert scan_speedup(1) == 1.0 and scan_speedup(0) == 1.0
    assert scan_speedup(64) == scan_speedup(8)                 # no measurement past 8 threads: no faster
    # the scan does not depend on how many drafts it proposes; nothing drafting costs nothing
    assert eight.draft_time_s(64, 1, None, 1e5) == eight.draft_time_s(64, 7, None, 1e5)
    assert eight.draft_time_s(0, 5, None, 1e5) == 0.0 and eight.draft_time_s(8, 0, None, 1e5) == 0.0


def test_suffix_pays_per_drafting_request():
    s = LookupDrafterCost("suffix")
    assert s.draft_time_s(64, 5, None, 1e9) == pytest.approx(64 * SUFFIX_REQUEST_S) == pytest.approx(1.28e-3)
    with pytest.raises(ValueError, match="method"):
        LookupDrafterCost("eagle3")


def test_cpu_drafters_have_no_gpu_layers_kv_or_weights():
    target = step_model("qwen3-8b", "h100")
    prof = target.profile(512)
    sc = load_scenario(overrides=['drafter.name="ngram"', "drafter.cpu_threads=2"])
    cost = drafter_cost_of(sc, "ngram", None, prof)
    assert isinstance(cost, LookupDrafterCost) and cost.threads == 2
    assert drafter_kv_fraction(sc, "ngram", 5, prof) == 0.0
    assert drafter_weights(sc, "ngram", 5, prof) == 0.0
    assert drafter_cost("suffix").draft_time_s(10, 3) == pytest.approx(10 * SUFFIX_REQUEST_S)


def test_scenario_refuses_gpu_settings_on_a_cpu_drafter():
    with pytest.raises(SpecsimInputError, match="drafter.layers"):
        load_scenario(overrides=['drafter.name="ngram"', "drafter.layers=2"])
    with pytest.raises(SpecsimInputError, match="drafter.base_fraction"):
        load_scenario(overrides=['drafter.name="suffix"', "drafter.base_fraction=0.1"])
    with pytest.raises(SpecsimInputError, match="drafter.kv_fraction"):
        load_scenario(overrides=['drafter.name="ngram"', "drafter.kv_fraction=0.5"])
    for bad in (0, 257):
        with pytest.raises(SpecsimInputError, match="drafter.cpu_threads"):
            load_scenario(overrides=['drafter.name="ngram"', f"drafter.cpu_threads={bad}"])
    with pytest.raises(ValueError, match="threads"):
        LookupDrafterCost("ngram", threads=2.5)


def test_the_drafter_flag_reaches_the_cpu_drafter_settings():
    # --drafter ngram leaves drafter.name at dspark: cpu_threads still applies, a GPU drafter's setting is refused
    trace = make_trace([0.0], [100], [20])
    prof = step_model("qwen3-8b", "h100").profile(512)
    sc = homogeneous_scenario("drafter.cpu_threads=8", 'drafter.name="dspark"')
    res = simulate(trace, "static", sc, gamma=3, drafter="ngram", profile=prof)
    assert res.summary["drafter"] == "ngram"
    assert drafter_cost_of(sc, "ngram", None, prof).threads == 8
    with pytest.raises(SpecsimInputError, match="drafter.layers"):
        simulate(trace, "static", homogeneous_scenario("drafter.layers=2"), gamma=3, drafter="ngram")
    # a dspark kv_fraction never gives the CPU drafter a KV share
    assert drafter_kv_fraction(homogeneous_scenario("drafter.kv_fraction=0.5"), "ngram", 3, prof) == 0.0


def test_inline_rates_serve_a_cpu_drafter():
    trace = make_trace([0.0, 0.0], [100, 100], [40, 40], domain=["legal", "legal"])
    sc = load_scenario(overrides=['drafter.name="suffix"', "acceptance.rates.legal=[0.6,0.5,0.4]",
                                  "acceptance.sigma_request=0", "acceptance.sigma_step=0", "acceptance.sigma_token=0"])
    res = simulate(trace, "static", sc, gamma=3)
    assert res.summary["completed"] == 2
    with pytest.raises(SpecsimInputError, match="acceptance.length"):
        simulate(trace, "static", load_scenario(overrides=['drafter.name="suffix"', 'acceptance.table="fig2"']),
                 gamma=3)


def test_a_cpu_drafter_needs_its_measured_acceptance():
    trace = make_trace([0.0], [100], [20])
    sc = load_scenario(overrides=['drafter.name="ngram"'])
    with pytest.raises(SpecsimInputError, match="acceptance.length"):
        simulate(trace, "static", sc, gamma=5)


@pytest.mark.parametrize("name", ["ngram", "suffix"])
def test_each_speculative_step_pays_the_cpu_drafting_on_top_of_the_target(name):
    # prompts prefilled elsewhere, a flat 20 ms target step with no speculation terms: every decode step lasts
    # 20 ms plus exactly the drafter's CPU time for its requests and their contexts
    prompts, outputs = [3000, 2000], [30, 30]
    trace = make_trace([0.0, 0.0], prompts, outputs)
    sc = homogeneous_scenario(f'drafter.name="{name}"', "prefill.num_instances=2", "prefill.time_per_token_s=0.001")
    res = simulate(trace, "static", sc, profile=StepTimeProfile.flat(0.02, 4096), gamma=3, record_step_log=True)
    steps = res.steps[res.steps["verified_drafts"] > 0]    # a request's last token drafts nothing
    assert len(steps) > 5
    assert np.allclose(res.steps[res.steps["verified_drafts"] == 0]["duration_s"], 0.02)
    cost = LookupDrafterCost(name)
    extra = steps["duration_s"].to_numpy() - 0.02
    # the step frame shows the drafter's share (a flat table charges no speculation terms)
    np.testing.assert_allclose(steps["draft_s"], extra, rtol=1e-9, atol=1e-15)
    assert (steps["speculation_s"] == 0).all() and (res.steps["draft_s"] >= 0).all()
    if name == "suffix":
        np.testing.assert_allclose(extra, steps["num_decode"].to_numpy() * SUFFIX_REQUEST_S, rtol=1e-6)
    else:     # the scan reads every decoding request's context: at least its prompt, at most prompt + output
        R = steps["num_decode"].to_numpy()
        lo = np.where(R == 2, sum(prompts), min(prompts)) * NGRAM_SCAN_S_PER_TOKEN
        hi = np.where(R == 2, sum(prompts) + 60, max(prompts) + 30) * NGRAM_SCAN_S_PER_TOKEN
        assert np.all(extra >= lo - 1e-12) and np.all(extra <= hi + 1e-12)
        assert cost.threads == 1


def test_a_confidence_reading_policy_on_a_cpu_drafter_is_noticed():
    # the policy says whether it reads confidences (PolicyBase.reads_confidence); a plug-in that does not say does
    from specsim.policies.base import PolicyBase

    class Mine(PolicyBase):
        name = "mine"

        def __call__(self, view):
            return np.full(view.num_requests, view.gamma)

    trace = make_trace([0.0], [100], [20])
    sc = homogeneous_scenario('drafter.name="ngram"')
    prof = StepTimeProfile.flat(0.02, 4096)

    def notices(policy, **kw):
        res = simulate(trace, policy, sc, profile=prof, gamma=3, **kw)
        return [n for n in res.summary["profile_range"].get("notices", []) if "no confidence head" in n]

    assert len(notices("dspark")) == 1 and "policy dspark" in notices("dspark")[0]
    assert len(notices(Mine)) == 1
    assert notices("static") == [] and notices("oracle") == [] and notices("vllm-dsd") == []
    assert notices("dspark", drafter="eagle3") == []


def _match_run(rate, name="ngram", **kw):
    """A closed loop of 16 users on a flat 20 ms profile, static gamma 4, a constant alpha 0.6 per position."""
    from specsim.workload import synth_trace

    over = [f'drafter.name="{name}"', "acceptance.constant_alpha=0.6", "acceptance.sigma_request=0",
            "acceptance.sigma_step=0", "acceptance.sigma_token=0"] + ([f"drafter.match_rate={rate}"] if rate else [])
    trace = synth_trace(120, 5.0, seed=1, prompt_len=300, output_len=120)
    return simulate(trace, "static", load_scenario(overrides=over), gamma=4, seed=0, concurrency=16,
                    profile=StepTimeProfile.flat(0.02, 8192), **kw)


def test_a_lookup_without_a_match_verifies_no_draft():
    """drafter.match_rate m: a share m of request-steps proposes (vLLM's n-gram proposer returns no drafts for the
    rest, which emit one token), so tokens per request-step are m x tau + (1 - m), tau = (1 - 0.6^5) / 0.4 for the
    steps that propose; 1 (or unset) is the run as before, step for step."""
    tau = (1 - 0.6 ** 5) / 0.4
    base, one = _match_run(None), _match_run(1.0)
    assert base.steps.equals(one.steps)
    for m in (0.5, 0.25):
        res = _match_run(m)
        st = res.steps
        req_steps = st.num_decode.sum()
        # tokens conserved: the decode steps emit all but each request's first (the prefill instance's)
        assert res.summary["completed"] == 120 and st.emitted_tokens.sum() + 120 == res.requests.output_tokens.sum()
        assert (req_steps + st.accepted_drafts.sum()) / req_steps == pytest.approx(m * tau + 1 - m, rel=0.03)
        # verify rows: 4 per matched request-step (less the clips at outputs' ends)
        assert st.verified_drafts.sum() / req_steps == pytest.approx(4 * m, rel=0.05)
        assert st.verified_drafts.sum() / req_steps < 4 * m + 1e-9
    again = _match_run(0.5)
    assert again.steps.equals(_match_run(0.5).steps)          # one seed, the same matches


def test_a_request_without_a_match_still_pays_its_lookup():
    # suffix: 20 us per decoding request and step, matched or not (the lookup runs to find there is no match); a
    # step that drafts nothing (every request at its last token) pays none
    st = _match_run(0.3, name="suffix").steps
    drafted = st[st.draft_s > 0]
    assert len(drafted) > 0.8 * len(st[st.num_decode > 0])
    np.testing.assert_allclose(drafted.draft_s, drafted.num_decode * SUFFIX_REQUEST_S, rtol=1e-9)
    np.testing.assert_allclose(drafted.duration_s, 0.02 + drafted.draft_s + drafted.speculation_s, rtol=1e-9)
    assert (drafted.verified_drafts < 4 * drafted.num_decode).mean() > 0.9     # most steps held unmatched requests


def test_match_rate_is_for_lookup_drafters_only():
    trace = make_trace([0.0], [100], [20])
    for bad in (0, 1.5):
        with pytest.raises(SpecsimInputError, match="drafter.match_rate"):
            load_scenario(overrides=['drafter.name="ngram"', f"drafter.match_rate={bad}"])
    with pytest.raises(SpecsimInputError, match="drafter.match_rate"):
        simulate(trace, "static", homogeneous_scenario("drafter.match_rate=0.5"), gamma=3)        # dspark drafter
    sc = homogeneous_scenario('drafter.name="ngram"', "drafter.match_rate=0.5")
    with pytest.raises(SpecsimInputError, match="drafter.match_rate") as e:
        simulate(trace, "static", sc, gamma=3, drafter="eagle3")
    assert e.value.file == "--drafter"
    assert simulate(trace, "mtp1", sc).summary["completed"] == 1       # a policy's own drafter: not refused


def test_a_step_where_no_lookup_matched_runs_the_plain_path():
    # speculation's terms follow the drafts to verify: a step where no request matched pays them only as
    # spec_zero_draft_pays says (vLLM samples such a step on its plain path), its lookup paid either way
    from dataclasses import replace

    from specsim.workload import synth_trace

    prof = replace(StepTimeProfile.flat(0.02, 8192), spec_step_s=1e-3, spec_request_s=1e-4)
    trace = synth_trace(40, 5.0, seed=1, prompt_len=300, output_len=60)
    for pays in (False, True):
        sc = load_scenario(overrides=['drafter.name="suffix"', "drafter.match_rate=0.1", "acceptance.length=2",
                                      f"engine.spec_zero_draft_pays={str(pays).lower()}"])
        st = simulate(trace, "static", sc, gamma=3, seed=0, concurrency=2, profile=prof).steps
        st = st[st.draft_s > 0]
        none, some = st[st.verified_drafts == 0], st[st.verified_drafts > 0]
        assert len(none) > 50 and len(some) > 5
        np.testing.assert_allclose(some.speculation_s, 1e-3 + 1e-4 * some.num_decode, rtol=1e-9)
        charged = np.isclose(none.speculation_s, 1e-3 + 1e-4 * none.num_decode, rtol=1e-9)
        free = none.speculation_s == 0
        assert (charged | free).all()
        # (a matched request whose verify length its output left cut to 0 still had drafts: a few such steps pay)
        assert charged.mean() > 0.95 if pays else free.mean() > 0.95
        np.testing.assert_allclose(none.draft_s, none.num_decode * SUFFIX_REQUEST_S, rtol=1e-9)


def test_a_policys_own_drafter_on_the_scenarios_acceptance_is_noticed():
    # mtp1 beside an ngram drafter given acceptance.length: MTP runs on that length too (the run's setting), and the
    # run says so where a sweep repeats it (summary["acceptance_notice"]); a confidence-reading policy on ngram too
    from specsim.analysis.sweep_records import speculation_notes

    trace = make_trace([0.0, 0.0], [100, 100], [30, 30])
    sc = load_scenario(overrides=['drafter.name="ngram"', "acceptance.length=1.5"])
    mtp1 = simulate(trace, "mtp1", sc).summary
    assert "policy mtp1 runs its own drafter mtp on the scenario's acceptance.length" in mtp1["acceptance_notice"]
    assert simulate(trace, "static", sc, gamma=3).summary["acceptance_notice"] is None
    dspark = simulate(trace, "dspark", sc, gamma=3).summary
    assert "no confidence head" in dspark["acceptance_notice"]
    recs = [{"status": "ok", "config": {"knobs": {"gamma": g}}, "summary": s}
            for g, s in ((1, mtp1), (3, dspark))]
    notes = " ".join(speculation_notes(recs))
    assert "runs its own drafter mtp" in notes and "no confidence head" in notes
    # a match rate the policy's own drafter ignores is said too
    rated = load_scenario(overrides=['drafter.name="ngram"', "drafter.match_rate=0.5", "acceptance.length=1.5"])
    assert "match_rate applies to the lookup drafters only" in simulate(trace, "mtp1", rated).summary[
        "acceptance_notice"]
    # the policy's drafter named by the scenario: no notice
    own = load_scenario(overrides=['drafter.name="mtp"', "acceptance.length=1.5"])
    assert simulate(trace, "mtp1", own).summary["acceptance_notice"] is None


def test_suffix_refuses_the_ngram_scan_threads_and_its_advice_names_its_own_cost():
    # a fresh user's suffix run was told to "set cpu_threads" (the ngram drafter's), and cpu_threads = 64 passed
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(overrides=['drafter.name="suffix"', "drafter.cpu_threads=64"])
    assert e.value.field == "drafter.cpu_threads" and "suffix decoding costs one CPU lookup" in e.value.expected
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(overrides=['drafter.name="suffix"', "drafter.layers=2"])
    assert "cpu_threads" not in e.value.expected and "SUFFIX_REQUEST_S" in e.value.expected
    with pytest.raises(SpecsimInputError, match="set cpu_threads"):
        load_scenario(overrides=['drafter.name="ngram"', "drafter.layers=2"])
    assert load_scenario(overrides=['drafter.name="ngram"', "drafter.cpu_threads=8"]).drafter.cpu_threads == 8
