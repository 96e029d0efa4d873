"""Throughput per GPU divides by the GPUs a replica of the profile runs on (its TP x PP), unless the scenario sets
``cluster.gpus_per_replica``; a set value other than the profile's is kept with a notice (a fresh user's report:
the TP 8 DeepSeek-V3 profile's whole-node throughput was shown as per GPU)."""

from __future__ import annotations

import pytest
from helpers import make_trace

from specsim.hardware.profile import resolve_profile
from specsim.run_config import profile_gpus, replica_gpus
from specsim.scenario import load_scenario
from specsim.simulation import simulate


def _trace():
    return make_trace([0.0, 0.01, 0.02, 0.5], [200, 300, 100, 50], [40, 30, 60, 20])


@pytest.mark.parametrize("profile, gpus", [("h100-llama2-7b-tp1", 1), ("h100-llama2-7b-tp2", 2),
                                           ("h200-deepseek-v3-tp8-terms", 8), ("v4-flash-rank-terms", 1)])
def test_a_replica_runs_on_the_profiles_tp(profile, gpus):
    assert profile_gpus(resolve_profile(profile)) == gpus
    res = simulate(_trace(), "dspark", load_scenario(overrides=[f"profile.name={profile}"]), seed=0)
    s = res.summary
    assert s["decode_gpus"] == gpus
    assert s["output_throughput_per_gpu"] == pytest.approx(s["output_throughput"] / gpus, rel=1e-12)
    assert not any("gpus_per_replica" in n for n in s["profile_range"]["notices"])


def test_a_set_value_is_kept_with_a_notice():
    sc = load_scenario(overrides=["cluster.gpus_per_replica=2"])          # the default profile runs at TP 1
    assert replica_gpus(sc, resolve_profile(sc.profile.name))[0] == 2
    s = simulate(_trace(), "dspark", sc, seed=0).summary
    assert s["decode_gpus"] == 2
    assert s["output_throughput_per_gpu"] == pytest.approx(s["output_throughput"] / 2, rel=1e-12)
    notice = next(n for n in s["profile_range"]["notices"] if "gpus_per_replica" in n)
    assert "h100-llama2-7b-tp1 describes a replica of 1 GPU" in notice
    same = load_scenario(overrides=["cluster.gpus_per_replica=2", "profile.name=h100-llama2-7b-tp2"])
    assert replica_gpus(same, resolve_profile(same.profile.name)) == (2, None)


def test_gpus_per_replica_must_be_positive():
    from specsim.errors import SpecsimInputError

    with pytest.raises(SpecsimInputError, match="gpus_per_replica"):
        load_scenario(overrides=["cluster.gpus_per_replica=0"])


def test_throughput_per_all_gpus_counts_the_prefill_pool():
    """Disaggregated (the default: one prefill instance of one GPU beside one decode GPU): per GPU divides by
    the decode GPU, per all GPUs by both; colocated they are one figure (a fresh user's report: per GPU alone
    made a colocated and a disaggregated deployment look alike)."""
    s = simulate(_trace(), "dspark", load_scenario(), seed=0).summary
    assert (s["decode_gpus"], s["prefill_gpus"]) == (1, 1)
    assert s["output_throughput_per_all_gpus"] == pytest.approx(s["output_throughput"] / 2, rel=1e-12)
    c = simulate(_trace(), "dspark", load_scenario(overrides=["prefill.mode=colocated"]), seed=0).summary
    assert c["prefill_gpus"] == 0 and c["output_throughput_per_all_gpus"] == c["output_throughput_per_gpu"]


@pytest.mark.parametrize("profile, gpus", [("h100-llama2-7b-tp2", 2), ("h200-deepseek-v3-tp8-terms", 8)])
def test_a_prefill_instance_runs_on_the_profiles_tp(profile, gpus):
    """A disaggregated prefill instance prefills at the profile's step times, so it counts the profile's TP x PP
    GPUs unless the scenario sets ``prefill.gpus_per_instance`` (a fresh user's report: a 70B model at TP 4
    counted one prefill GPU, inflating throughput per all GPUs); a set value that differs gets a notice."""
    from specsim.run_config import prefill_instance_gpus

    sc = load_scenario(overrides=[f"profile.name={profile}", "prefill.num_instances=2"])
    assert prefill_instance_gpus(sc, resolve_profile(profile)) == (gpus, None)
    s = simulate(_trace(), "dspark", sc, seed=0).summary
    assert (s["decode_gpus"], s["prefill_gpus"]) == (gpus, 2 * gpus)
    assert s["output_throughput_per_all_gpus"] == pytest.approx(s["output_throughput"] / (3 * gpus), rel=1e-12)
    one = load_scenario(overrides=[f"profile.name={profile}", "prefill.gpus_per_instance=1"])
    s1 = simulate(_trace(), "dspark", one, seed=0).summary
    assert s1["prefill_gpus"] == 1
    assert any("prefill.gpus_per_instance = 1" in n and f"of {gpus} GPUs" in n for n in s1["profile_range"]["notices"])
    fixed = load_scenario(overrides=[f"profile.name={profile}", "prefill.gpus_per_instance=1",
                                     "prefill.time_per_token_s=1e-5"])     # its own prefill speed: no notice
    assert prefill_instance_gpus(fixed, resolve_profile(profile)) == (1, None)


def test_a_run_says_when_its_profile_charges_no_speculation_overhead_or_is_superseded():
    """A speculating run on a plain measured table that states no speculation terms (the default profile) is
    charged the sourced defaults and told so; set to 0 in the scenario, it is told its speed-up at load comes out
    high; a step-model profile's own terms are named as such; one term set names where each came from; a run
    without drafts says nothing of speculation; a superseded profile says so (fresh-user reports)."""
    notices = lambda s: " ".join(s["profile_range"]["notices"])          # noqa: E731
    s = simulate(_trace(), "dspark", load_scenario(), seed=0).summary
    assert "0.775 ms per speculative step + 0.084 ms per running request, vLLM issue 49548" in notices(s)
    zero = load_scenario(overrides=["engine.spec_step_s=0", "engine.spec_request_s=0"])
    assert "charges no speculation overhead" in notices(simulate(_trace(), "dspark", zero, seed=0).summary)
    assert "speculation" not in notices(simulate(_trace(), "none", load_scenario(), seed=0).summary)
    terms = load_scenario(overrides=["profile.name=h200-deepseek-v3-tp8-terms"])
    assert resolve_profile("h200-deepseek-v3-tp8-terms").spec_step_s > 0
    own = simulate(_trace(), "dspark", terms, seed=0).summary
    # a step model built with the sourced defaults says so (a fresh user read "the profile's own" as measured on it)
    assert ("0.775 ms per speculative step + 0.084 ms per running request, the profile's step model at vLLM issue "
            "49548's sourced defaults") in notices(own) and "not fitted to this model" in notices(own)
    assert own["speculation_overhead"]["spec_step_s"] == 7.75e-4
    # one term set: the other keeps its source, and the notice names both
    half = load_scenario(overrides=["engine.spec_step_s=0"])
    s = simulate(_trace(), "dspark", half, seed=0).summary
    assert "0 ms per speculative step + 0.084 ms per running request, spec_step_s from the scenario, " \
        "spec_request_s from vLLM issue 49548's sourced defaults" in notices(s)
    old = load_scenario(overrides=["profile.name=h100-deepseek-v3-tp1-analytic",      # weights beyond one GPU:
                                   "cluster.kv_capacity_tokens=110000"])           # runs only with a set capacity
    assert "superseded by h200-deepseek-v3-tp8-terms" in notices(simulate(_trace(), "none", old, seed=0).summary)


def test_a_drafting_run_on_built_in_acceptance_rates_says_whose_they_are():
    """A fleet operator ran DSpark on a Qwen3.8-27B profile with the paper's Fig. 2 rates and read a 3.98x speed-up
    where the model's own measured acceptance gives 2.6x: the run names the rates it used and how to give yours."""
    notices = lambda s: " ".join(s["profile_range"].get("notices", []))          # noqa: E731
    qwen = "profile.name=b200-qwen3.8-27b-vllm-fitted"
    s = simulate(_trace(), "dspark", load_scenario(overrides=[qwen]), seed=0).summary
    assert "acceptance: the built-in rates of DSpark paper Fig. 2" in notices(s)
    assert "not measured for qwen3.8-27b with your drafter" in notices(s)
    mtp = simulate(_trace(), "mtp1", load_scenario(overrides=[qwen]), seed=0).summary
    assert "acceptance: the built-in rates of DeepSeek-V3" in notices(mtp)
    own = load_scenario(overrides=[qwen, "acceptance.constant_alpha=0.73"])
    assert "acceptance:" not in notices(simulate(_trace(), "dspark", own, seed=0).summary)
    assert "acceptance:" not in notices(simulate(_trace(), "none", load_scenario(overrides=[qwen]), seed=0).summary)


def test_a_fitted_ttft_term_the_run_does_not_charge_is_named():
    """The bundled Qwen3.8-27B profile's fit gives a 23.7 ms request overhead (TTFT at one user); a run at the
    scenario's 5 ms says so, and says nothing once it is set."""
    notices = lambda s: " ".join(s["profile_range"].get("notices", []))          # noqa: E731
    qwen = "profile.name=b200-qwen3.8-27b-vllm-fitted"
    fitted = resolve_profile("b200-qwen3.8-27b-vllm-fitted").metadata["fit"]["ttft"]["request_overhead_s"]
    assert 0.005 < fitted < 0.03
    s = simulate(_trace(), "none", load_scenario(overrides=[qwen]), seed=0).summary
    assert f"the profile's fit gives a request overhead of {fitted * 1e3:.1f} ms" in notices(s)
    assert "this run charges 5 ms" in notices(s)
    same = load_scenario(overrides=[qwen, f"engine.request_overhead_s={fitted}"])
    assert "request overhead" not in notices(simulate(_trace(), "none", same, seed=0).summary)


def test_a_decode_queue_hidden_from_ttft_is_named():
    """DSpark on Qwen3.8-27B at 128 users: the linear-attention state copies cap the running requests, so prefilled
    requests queue for a decode slot; with the first token stamped at the end of prefill (the default rule) that
    wait lengthens TPOT, not TTFT, and the run says so (a fleet operator read 21 ms TTFT with ~40 requests queued)."""
    from specsim.workload import synth_trace

    notices = lambda s: " ".join(s["profile_range"].get("notices", []))          # noqa: E731
    tr = synth_trace(768, 1.0, seed=0, prompt_len=200, output_len=300)
    qwen = ["profile.name=b200-qwen3.8-27b-vllm-fitted", "acceptance.constant_alpha=0.73"]
    s = simulate(tr, "dspark", load_scenario(overrides=qwen), seed=0, concurrency=128).summary
    assert s["window"]["mean_waiting_requests"] >= 1.0
    assert "prefilled requests waited for a decode slot on average" in notices(s)
    step = simulate(tr, "dspark", load_scenario(overrides=qwen + ['prefill.first_token="decode-step"']), seed=0,
                    concurrency=128).summary
    assert "waited for a decode slot" not in notices(step)
    assert step["window"]["mean_ttft_ms"] > s["window"]["mean_ttft_ms"] + 100      # the wait is TTFT's there
    none = simulate(tr, "none", load_scenario(overrides=qwen), seed=0, concurrency=128).summary
    assert none["window"]["mean_waiting_requests"] < 1.0 and "waited for a decode slot" not in notices(none)
