"""The engine and cluster: closed forms, an exact two-request log, a plain-loop reference, invariants."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import homogeneous_scenario, make_trace
from specsim.acceptance.model import build_acceptance_model
from specsim.errors import SpecsimInputError
from specsim.hardware.profile import StepTimeProfile
from specsim.scenario import load_scenario
from specsim.simulation import simulate


@pytest.mark.parametrize("alpha, k", [(0.8, 3), (0.6, 5), (0.9, 7)])
def test_static_k_acceptance_length_closed_form(alpha, k):
    """Constant alpha, no heterogeneity, static k: E[tokens per step] = (1 - alpha^(k+1)) / (1 - alpha)."""
    trace = make_trace(np.zeros(32), [100] * 32, [4000] * 32)
    scen = homogeneous_scenario(alpha=alpha)
    res = simulate(trace, "static", scen, gamma=k, seed=5, profile=StepTimeProfile.flat(0.01))
    expected = (1 - alpha ** (k + 1)) / (1 - alpha)
    assert res.summary["mean_acceptance_length"] == pytest.approx(expected, rel=0.01)
    assert res.summary["acceptance_rate"] == pytest.approx((expected - 1) / k, rel=0.015)


def test_none_with_flat_profile_tpot_equals_step_time():
    # Requests join the replica together (equal prompts, 4 prefill instances) or alone (t = 9 s), so none
    # waits for a step in flight; a request joining mid-step would wait for the next step boundary.
    trace = make_trace([0.0, 0.0, 0.0, 0.0, 9.0], [50] * 5, [40, 7, 100, 2, 30])
    scen = load_scenario(overrides=["prefill.time_per_token_s=0.001", "engine.host_overhead_s=0.004",
                                    "prefill.num_instances=4"])
    res = simulate(trace, "none", scen, profile=StepTimeProfile.flat(0.02))
    tpot = res.requests.tpot_s.to_numpy()
    # `none` fits ZOS, so the host overhead is hidden; no drafter, so no draft cost
    np.testing.assert_allclose(tpot, 0.02, rtol=0, atol=1e-12)
    assert res.summary["mean_acceptance_length"] == 1.0
    assert res.summary["acceptance_rate"] is None
    assert res.summary["mean_verify_tokens_per_request"] == 1.0


def test_two_request_exact_log():
    """Constant step time 0.05 s, prefill 0.01 s/token, one prefill instance, `none`: every emission."""
    trace = make_trace([0.0, 0.05], [10, 20], [4, 3])
    scen = load_scenario(overrides=["prefill.time_per_token_s=0.01", "engine.host_overhead_s=0",
                                    "engine.request_overhead_s=0"])
    res = simulate(trace, "none", scen, profile=StepTimeProfile.flat(0.05), record_step_log=True)
    log = res.step_log
    emissions = sorted((round(t + d, 9), rid, a + 1) for t, d, rid, a in
                       zip(log.time_s, log.step_time_s, log.request_id, log.num_accepted))
    # A: prefill 0.0-0.1 (first token at 0.1), decode steps end 0.15, 0.2, 0.25 (done).
    # B: arrives 0.05, waits for the prefill instance until 0.1, prefill 0.2 s -> first token 0.3;
    #    A is done by then, so B's steps end at 0.35 and 0.4.
    assert emissions == [(0.15, "0", 1), (0.2, "0", 1), (0.25, "0", 1), (0.35, "1", 1), (0.4, "1", 1)]
    req = res.requests.set_index("request_id")
    assert req.loc["0", "first_token_s"] == pytest.approx(0.1)
    assert req.loc["1", "first_token_s"] == pytest.approx(0.3)
    assert req.loc["0", "done_s"] == pytest.approx(0.25)
    assert req.loc["1", "done_s"] == pytest.approx(0.4)
    assert req.loc["1", "ttft_s"] == pytest.approx(0.25)
    assert req.loc["1", "prefill_s"] == pytest.approx(0.2)


def _reference_static_run(trace, k, step_s, prefill_per_token, seed, alpha):
    """Plain-loop reference: one replica, disaggregated prefill (one instance), static k, flat profile.

    A step costs the flat target step plus the dspark drafter's cost for the batch's useful gamma (fits ZOS: no
    host cost): min(k, the largest remaining output - 1 in the batch), nothing when that is 0 (issue 24 item 7).
    """
    from specsim.hardware.drafter import drafter_cost
    cost = drafter_cost("dspark")
    draft_s = {g: cost.draft_time_s(1, g, StepTimeProfile.flat(step_s)) if g else 0.0 for g in range(k + 1)}
    model = build_acceptance_model("dspark", k, constant_alpha=alpha, domains=("chat",),
                                   sigma_request=0, sigma_step=0, sigma_token=0)
    n = len(trace)
    prefill_done = np.zeros(n)
    free_at = 0.0
    for i in range(n):                                     # FCFS prefill instance
        start = max(free_at, trace.arrival_s[i])
        prefill_done[i] = free_at = start + prefill_per_token * trace.prompt_tokens[i]
    # no latent spread: every draft's acceptance probability is sigmoid(beta_k); the uniform of draft k at anchor
    # p is column 2k+1+k of the request's counter-based stream (specsim.engine.draws: e, eps_1..k, noise_1..k, u_1..k)
    from scipy.special import expit

    from specsim.engine.draws import request_keys, uniforms
    keys = request_keys(seed, np.arange(n))
    p_accept = expit(model.beta("chat"))
    gen = np.ones(n, int)
    joined = np.zeros(n, bool)
    done = np.full(n, np.nan)
    now, emissions = 0.0, []
    while np.isnan(done).any():
        ready = [i for i in range(n) if not joined[i] and prefill_done[i] <= now and trace.output_tokens[i] > 1]
        for i in ready:
            joined[i] = True
        for i in range(n):
            if trace.output_tokens[i] == 1 and np.isnan(done[i]) and prefill_done[i] <= now:
                done[i] = prefill_done[i]
        running = [i for i in range(n) if joined[i] and np.isnan(done[i])]
        if not running:
            now = min(prefill_done[i] for i in range(n) if not joined[i] and np.isnan(done[i]))
            continue
        useful = max(min(k, trace.output_tokens[i] - gen[i] - 1) for i in running)
        now += step_s + draft_s[max(useful, 0)]
        for i in running:
            l = min(k, trace.output_tokens[i] - gen[i] - 1)
            acc = uniforms(keys[i: i + 1], np.array([gen[i]]), 3 * k + 1)[0, 2 * k + 1:] < p_accept
            a = 0
            while a < l and acc[a]:
                a += 1
            gen[i] += a + 1
            emissions.append((round(now, 9), str(i), a + 1))
            if gen[i] >= trace.output_tokens[i]:
                done[i] = now
    return sorted(emissions), done


def test_engine_matches_plain_loop_reference():
    rng = np.random.default_rng(0)
    n = 12
    trace = make_trace(np.sort(rng.uniform(0, 2, n)).round(3), rng.integers(5, 50, n), rng.integers(1, 60, n))
    scen = homogeneous_scenario("prefill.time_per_token_s=0.002", alpha=0.7)
    res = simulate(trace, "static", scen, gamma=3, seed=9, profile=StepTimeProfile.flat(0.03),
                   record_step_log=True)
    log = res.step_log
    got = sorted((round(t + d, 9), rid, a + 1) for t, d, rid, a in
                 zip(log.time_s, log.step_time_s, log.request_id, log.num_accepted))
    want, done = _reference_static_run(trace, 3, 0.03, 0.002, 9, 0.7)
    assert got == want
    np.testing.assert_allclose(res.requests.done_s.to_numpy(), done, atol=1e-9)


# ---------------------------------------------------------------- invariants on every run
@pytest.fixture(scope="module")
def prod_trace():
    """The bundled trace's first 300 requests, outputs capped at 160 tokens, arrivals 3x compressed. 32 of them
    exceed the default scenario's 4,096-token window (Llama-2-7B) and are unservable at arrival: the invariants
    below hold with them in the run (:func:`_beyond_window`)."""
    from conftest import REPO
    from specsim.workload import load_trace
    full = load_trace(REPO / "traces" / "prod.jsonl").head(300)
    return make_trace(full.arrival_s / 3.0, full.prompt_tokens, np.minimum(full.output_tokens, 160),
                      list(full.domain))


def _beyond_window(trace) -> np.ndarray:
    """(N,) bool: requests whose prompt + output exceed the default scenario's 4,096-token context window."""
    return np.asarray(trace.prompt_tokens) + np.asarray(trace.output_tokens) > 4096


@pytest.mark.parametrize("policy", ["none", "mtp1", "static", "specdecpp", "dspark", "dspark-async"])
def test_invariants_open_loop(prod_trace, policy):
    res = simulate(prod_trace, policy, seed=3)
    s, req = res.summary, res.requests
    assert s["completed"] + s["unfinished"] + s["unservable"] == s["total"] == len(prod_trace)
    beyond = _beyond_window(prod_trace)
    # every request is served except exactly those beyond the window, each refused with the window as its reason
    assert (s["completed"], s["unservable"], s["context_window"]["unservable"]) == (300 - 32, 32, 32)
    np.testing.assert_array_equal(req.status == "unservable", beyond)
    assert req.unservable_reason[beyond].str.contains("> max_model_len 4096").all()
    done = req[req.status == "completed"]
    # decode emissions + the prefill token, plus one token per recompute that finished after a preemption
    emitted = done.decode_steps + done.accepted_drafts + 1
    assert (emitted <= done.output_tokens).all()
    assert (done.output_tokens - emitted <= done.preemptions).all()
    assert (done.emitted_tokens == done.output_tokens).all()
    assert (done.ttft_s >= done.prefill_s - 1e-12).all()
    assert (done.done_s >= done.first_token_s).all() and (done.first_token_s > done.arrival_s).all()
    # Little's law from the cluster's own integral of requests in the system
    little = s["request_throughput"] * s["mean_e2el_ms"] / 1e3
    assert s["mean_requests_in_system"] == pytest.approx(little, rel=0.02)
    if policy in ("mtp1",):
        assert s["mean_verify_tokens_per_request"] == pytest.approx(2.0, abs=0.01)
    if policy == "none":
        assert s["mean_acceptance_length"] == 1.0


def test_same_seed_same_numbers(prod_trace):
    def run(seed):
        s = simulate(prod_trace.head(80), "dspark", seed=seed).summary
        for timing in ("wall_time_s", "event_loop_wall_s", "event_loop_cpu_s"):
            s.pop(timing)
        return json.dumps(s, sort_keys=True, default=float)
    assert run(4) == run(4)
    assert run(4) != run(5)


def test_common_random_numbers_across_policies(prod_trace):
    """Every policy faces the same draws: static with gamma 7 and dspark verify different lengths but a
    request's first-step outcome under full verification equals the hidden realisation."""
    log = simulate(prod_trace.head(40), "static", seed=2, record_step_log=True).step_log
    other = simulate(prod_trace.head(40), "dspark", seed=2, record_step_log=True).step_log
    # the first decode step of each request is anchored at output position 1 under both policies: the
    # hidden outcomes are identical, so dspark's accepted count equals static's truncated to its length
    first_s = log.groupby("request_id").head(1).set_index("request_id")
    first_d = other.groupby("request_id").head(1).set_index("request_id")
    for rid in first_s.index:
        a_full, l_d, a_d = first_s.num_accepted[rid], first_d.verify_len[rid], first_d.num_accepted[rid]
        assert a_d == min(a_full, l_d)


def test_closed_loop_window_and_throughput(prod_trace):
    res = simulate(prod_trace.head(120), "dspark", concurrency=8, seed=1)
    s = res.summary
    assert s["load"]["mode"] == "closed"
    w0, w1 = s["load"]["window_start_s"], s["load"]["window_end_s"]
    assert 0 < w0 < w1
    req = res.requests
    # every request was issued: a user whose request is refused (beyond the 4,096-token window) takes its next
    assert (req.status != "not_issued").all() and s["unservable"] == _beyond_window(prod_trace.head(120)).sum() == 14
    # per-request metrics cover the requests that complete inside the window (w0, w1]: not the first wave (all done
    # by w0) and not those still running at w1, when the last request is issued and the drain begins
    inside = req[(req.arrival_s >= w0) & (req.arrival_s <= w1)]
    served = inside[inside.status != "unservable"]
    assert (served.status == "completed").all()
    measured = req[(req.done_s > w0) & (req.done_s <= w1)]
    assert s["window"]["measured_requests"] == len(measured) > 0 and (measured.arrival_s > 0).all()
    assert (served.done_s > w1).any() and len(measured[measured.arrival_s < w0]) > 0
    assert s["window"]["requests_issued"] == len(inside) > len(served)
    # never more than N requests in the system at once: each user has one outstanding request
    served = req[req.status == "completed"]
    starts = np.sort(served.arrival_s.to_numpy())
    ends = np.sort(served.done_s.to_numpy())
    in_sys = np.searchsorted(starts, starts, side="right") - np.searchsorted(ends, starts, side="right")
    assert in_sys.max() <= 8


def test_unservable_requests_never_block_others():
    trace = make_trace([0.0, 0.0, 0.1], [100, 5000, 100], [50, 50, 50])
    # a window that fits: this is about KV capacity, not Llama-2's 4,096-token window (which would refuse it first)
    scen = load_scenario(overrides=["cluster.kv_capacity_tokens=1000", "engine.max_model_len=8192"])
    res = simulate(trace, "dspark", scen, seed=0)
    assert res.summary["unservable"] == 1 and res.summary["completed"] == 2
    reason = res.requests.unservable_reason[1]
    assert "5050 tokens" in reason and "316 KV blocks" in reason and "62 blocks" in reason and "KV capacity (1,000 tokens)" in reason


def test_horizon_leaves_unfinished_requests(prod_trace):
    res = simulate(prod_trace, "dspark", max_sim_s=10.0, seed=0)
    s = res.summary
    assert s["unfinished"] > 0
    assert s["completed"] + s["unfinished"] + s["unservable"] + (res.requests.status == "not_issued").sum() \
        == s["total"]


def test_clipping_counts_and_never_overshoots():
    # a 3-token request batched with a long one: the batch drafts 7 (the long one can use them), the short one's
    # verify length is clipped to its remaining output - 1
    trace = make_trace([0.0, 0.0], [10, 10], [3, 100])
    scen = homogeneous_scenario("prefill.num_instances=2", alpha=0.99)
    res = simulate(trace, "static", scen, gamma=7, seed=0, profile=StepTimeProfile.flat(0.01))
    assert res.summary["clipped_verify_lengths"] >= 1
    assert res.requests.output_tokens[0] == 3 and res.summary["completed"] == 2
    assert (res.requests.emitted_tokens == res.requests.output_tokens).all()
    # alone, it drafts only what it can use (issue 24 item 7): nothing to clip
    alone = simulate(trace.head(1), "static", homogeneous_scenario(alpha=0.99), gamma=7, seed=0,
                     profile=StepTimeProfile.flat(0.01), record_step_log=True)
    assert alone.summary["clipped_verify_lengths"] == 0 and alone.step_log.gamma.max() == 1


def test_colocated_prefill_runs_and_ttft_covers_prefill(prod_trace):
    scen = load_scenario(overrides=["prefill.mode=colocated", "prefill.chunk_tokens=2048"])
    res = simulate(prod_trace.head(80), "dspark", scen, seed=0)
    req = res.requests
    served = req[~_beyond_window(prod_trace.head(80))]        # 8 of 80 exceed the 4,096-token window: refused
    assert res.summary["completed"] == len(served) == 72 and (served.status == "completed").all()
    assert (served.ttft_s >= served.prefill_s - 1e-12).all()
    assert res.steps.prefill_tokens.sum() == served.prompt_tokens.sum()


def test_least_outstanding_router_balances(prod_trace):
    scen = load_scenario(overrides=["cluster.num_replicas=3", "cluster.router=least-outstanding"])
    res = simulate(prod_trace.head(150), "dspark", scen, seed=0)
    req = res.requests
    counts = np.bincount(req.replica[req.status == "completed"], minlength=3)   # unservable: never routed
    assert counts.min() > 30
    assert res.summary["decode_gpus"] == 3


def test_bad_policy_output_is_named():
    trace = make_trace([0.0], [10], [20])

    def bad(view):
        return np.full(view.num_requests, 99)

    with pytest.raises(SpecsimInputError, match=r"policy bad.*\[0, 7\]"):
        simulate(trace, bad, seed=0)

    def floats(view):
        return np.zeros(view.num_requests, dtype=float)

    with pytest.raises(SpecsimInputError, match="integer array"):
        simulate(trace, floats, seed=0)


def test_unknown_domain_names_line():
    trace = make_trace([0.0, 1.0], [10, 10], [20, 20], domain=["chat", "poetry"])
    with pytest.raises(SpecsimInputError, match="line 2.*domain"):
        simulate(trace, "dspark", seed=0)
    # the first line with an unknown domain, not the first unknown domain in sorted order (a fresh user's
    # converted trace: line 1 held '/v1/completions' and the error named line 4's '/v1/chat/completions')
    trace = make_trace([0.0, 1.0, 2.0], [10] * 3, [20] * 3, domain=["/v1/completions", "chat", "/v1/chat"])
    with pytest.raises(SpecsimInputError, match="line 1.*'/v1/completions'"):
        simulate(trace, "dspark", seed=0)
    # a trace cut to its first requests (--num-requests) names its file, not 'file.jsonl[:2]'
    from dataclasses import replace
    cut = replace(make_trace([0.0, 1.0, 2.0], [10] * 3, [20] * 3, domain=["chat", "poetry", "chat"]),
                  source="prod.jsonl").head(2)
    assert (cut.source, cut.file) == ("prod.jsonl[:2]", "prod.jsonl")
    with pytest.raises(SpecsimInputError) as e:
        simulate(cut, "dspark", seed=0)
    assert (e.value.file, e.value.line) == ("prod.jsonl", 2)


def test_gamma_beyond_table_is_named():
    trace = make_trace([0.0], [10], [20])
    with pytest.raises(SpecsimInputError, match="'dspark' acceptance table"):
        simulate(trace, "dspark", load_scenario(overrides=["drafter.block=64"]), gamma=40, seed=0)


class _Propose:
    """Proposes ``k`` drafts before drafting and verifies all of them."""

    name = "propose"
    fits_zos = True

    def __init__(self, k):
        self.k = k

    def proposal_length(self, view):
        assert view.conf.shape == (view.num_requests, 0)          # no confidences before drafting
        return self.k

    def __call__(self, view):
        # the engine drafts at most the batch's largest useful length (issue 24 item 7): k, or fewer near the end
        assert view.gamma <= self.k and view.conf.shape[1] == view.gamma
        return np.full(view.num_requests, view.gamma)


def test_proposal_length_zero_skips_the_drafter():
    trace = make_trace([0.0] * 3, [50] * 3, [30, 40, 50])
    scen = load_scenario(overrides=["prefill.time_per_token_s=0.001", "prefill.num_instances=3"])
    flat = StepTimeProfile.flat(0.02)
    zero = simulate(trace, _Propose(0), scen, profile=flat)
    none = simulate(trace, "none", scen, profile=flat)
    np.testing.assert_allclose(zero.requests.tpot_s, none.requests.tpot_s, rtol=0, atol=1e-12)
    two = simulate(trace, _Propose(2), scen, profile=flat, record_step_log=True)
    log = two.step_log
    assert (log.gamma <= 2).all() and (log.verify_len <= 2).all() and (log.gamma == 2).mean() > 0.9
    assert two.summary["mean_verify_tokens_per_request"] > 2.5


def test_bad_proposal_length_is_named():
    trace = make_trace([0.0], [10], [20])
    with pytest.raises(SpecsimInputError, match="proposal_length"):
        simulate(trace, _Propose(99), seed=0)


def test_scenario_drafter_cost_override():
    """[drafter] base_fraction / per_draft_fraction replace the family default: static k on a flat profile
    then costs step * (1 + base + per_draft * gamma) per step, exactly, where gamma is what the step drafts: 4,
    or the request's remaining output - 1 in its last steps (issue 24 item 7)."""
    trace = make_trace([0.0], [10], [200])
    scen = homogeneous_scenario("drafter.base_fraction=0.1", "drafter.per_draft_fraction=0.02", alpha=0.5)
    res = simulate(trace, "static", scen, gamma=4, profile=StepTimeProfile.flat(0.01), seed=0,
                   record_step_log=True)
    gamma = res.step_log.gamma.to_numpy()
    assert (gamma == 4).sum() >= len(gamma) - 3 and gamma.min() >= 1
    np.testing.assert_allclose(res.steps.duration_s, 0.01 * (1 + 0.1 + 0.02 * gamma), rtol=1e-12)


@pytest.mark.parametrize("bad", [None, -5, 2.5])
def test_bad_capacity_is_named(bad):
    class BadCapacity:
        name = "badcap"
        fits_zos = True

        def capacity(self, old_view, running_ids, num_running):
            return bad

        def __call__(self, view):
            return np.zeros(view.num_requests, np.int64)

    with pytest.raises(SpecsimInputError, match="badcap, capacity"):
        simulate(make_trace([0.0], [10], [20]), BadCapacity(), seed=0)


def test_closed_loop_itl_covers_the_window_only(prod_trace):
    res = simulate(prod_trace.head(120), "none", concurrency=8, seed=1, profile=StepTimeProfile.flat(0.01))
    # `none` on a flat profile: every gap inside the window is one step (or a join wait), never the long
    # gaps of the run's tail where few users remain
    assert res.summary["window"]["mean_itl_ms"] == pytest.approx(10.0, rel=0.05)


def test_capacity_hook_gets_its_own_writable_copy_of_the_running_ids():
    """A capacity hook may work on running_ids in place (e.g. sort it); the engine's slots are untouched, so the
    run is the same as without the in-place work (regression: the engine once passed its own array)."""
    from specsim.policies.dspark import DSparkAsync

    calls = []

    class SortingAsync(DSparkAsync):
        name = "sorting-async"

        def capacity(self, old_view, running_ids, num_running):
            calls.append(running_ids.flags.writeable)
            running_ids[:] = running_ids[::-1].copy()
            return super().capacity(old_view, np.sort(running_ids), num_running)

    trace = make_trace([0.0] * 12, [64] * 12, [60 + 7 * i for i in range(12)])
    ref = simulate(trace, DSparkAsync(), seed=1)
    res = simulate(trace, SortingAsync(), seed=1)
    assert calls and all(calls)
    np.testing.assert_array_equal(res.requests.done_s, ref.requests.done_s)


def test_prefill_time_prices_each_chunk_on_the_mixed_table_or_beyond_it():
    """Disaggregated prefill in chunks of 512 on a profile measured to B = 256 that extrapolates: the chunk of 512
    is beyond the eager (mixed) table, so it is the decode table's extrapolation plus the mixed table's offset at
    its last size (0.024 + 0.004 s: a mixed step keeps its own cost beyond the table), and the chunk of 188 is
    read on the mixed table (0.014 + 60 / 128 x 0.006 s), in the scalar and the array lookup alike."""
    from types import SimpleNamespace

    from specsim.engine.cluster import Cluster

    prof = StepTimeProfile(np.array([1, 128, 256]), np.array([0.010, 0.012, 0.016]), extrapolate="linear",
                           lookup="linear", mixed_step_time_s=np.array([0.011, 0.014, 0.020]))
    fake = SimpleNamespace(config=SimpleNamespace(prefill_time_per_token_s=0.0, prefill_chunk_tokens=512),
                           profile=prof)
    assert Cluster.prefill_time_s(fake, 700) == pytest.approx(0.024 + 0.004 + 0.014 + 60 / 128 * 0.006, abs=1e-15)
    assert prof.mixed_step_time(512) == pytest.approx(0.028, abs=1e-15)
    assert Cluster.prefill_time_s(fake, 700) == float(np.sum(prof.mixed_step_time(np.array([512, 188]))))
    assert Cluster.prefill_time_s(fake, 200) == pytest.approx(0.014 + 72 / 128 * 0.006, abs=1e-15)   # eager table


def test_empirical_acceptance_with_a_proposal_shorter_than_gamma(tmp_path):
    """The replayed model calibrates per position: a proposal of k < gamma drafts shows k columns and runs
    (regression: its confidences were once computed on k columns against gamma temperatures)."""
    import pandas as pd

    rng = np.random.default_rng(0)
    G, n = 7, 400
    req = np.repeat(np.arange(40), 10).astype(str)
    pd.DataFrame({"request_id": req, "domain": np.array(["chat", "code", "math", "chat"] * 100),
                  "accept": list(rng.random((n, G)) < 0.7),
                  "conf_raw": list(np.clip(rng.random((n, G)), 0.05, 0.95))}).to_parquet(tmp_path / "blocks.parquet")
    (tmp_path / "model.json").write_text(json.dumps({"temperatures": [1.3] * G}))
    scen = load_scenario(overrides=[f'acceptance.model="empirical:{tmp_path}"'])
    trace = make_trace([0.0] * 6, [32] * 6, [40] * 6, ["chat", "code", "math"] * 2)
    full = simulate(trace, _Propose(7), scen, seed=1, record_step_log=True).step_log
    three = simulate(trace, _Propose(3), scen, seed=1, record_step_log=True).step_log
    widths = three.conf.map(len)
    assert widths.max() == 3 and (widths == 3).mean() > 0.8      # fewer only in a request's last steps
    first = three.conf.iloc[0]
    np.testing.assert_array_equal(first, full.conf.iloc[0][:3])     # same request, same anchor: same numbers


def test_engine_views_show_the_step_as_an_eager_view_would():
    """The engine's views make their per-request arrays on first read (issue 25). A policy that keeps every view
    and reads it only after the run (as ``capacity`` reads a view one or two steps old) sees, for each step, what an
    eager view built at that step held: the arrays the policy read during the step equal those it reads later,
    every array is read-only, a view nobody read keeps them unmade, and an unknown attribute is an AttributeError."""
    import dataclasses

    from specsim.policies.base import LAZY_ARRAYS, SchedulingView
    from specsim.policies.dspark import DSpark

    kept, seen = [], []

    class Keeping(DSpark):
        name = "keeping"

        def __call__(self, view):
            if view.step % 2:                               # odd steps: read now, compare after the run
                seen.append({n: np.array(getattr(view, n)) for n in sorted(LAZY_ARRAYS)})
                kept.append(view)
            else:
                kept.append(None)
                assert not LAZY_ARRAYS & set(view.__dict__)     # nothing made before anyone reads
            return super().__call__(view)

    # colocated prefill in 48-token chunks: some steps decode only part of the slots (the views index them)
    scen = load_scenario(overrides=["prefill.mode=colocated", "prefill.chunk_tokens=48"])
    trace = make_trace([0.0, 0.0, 0.01, 0.02, 0.3], [64, 40, 30, 200, 16], [50, 90, 20, 70, 40])
    res = simulate(trace, Keeping(), scen, seed=2)
    ref = simulate(trace, DSpark(), scen, seed=2)
    np.testing.assert_array_equal(res.requests.done_s, ref.requests.done_s)   # reading changes nothing
    views = [v for v in kept if v is not None]
    assert len(views) == len(seen) > 10
    running = dict(zip(res.steps.step, res.steps.num_running))
    assert any(v.num_requests < running[v.step] for v in views)           # some steps had slots prefilling
    for view, then in zip(views, seen):
        eager = SchedulingView(**{f.name: getattr(view, f.name) for f in dataclasses.fields(SchedulingView)})
        for name in sorted(LAZY_ARRAYS):
            np.testing.assert_array_equal(getattr(view, name), then[name])
            np.testing.assert_array_equal(getattr(eager, name), then[name])
            assert not getattr(view, name).flags.writeable
        assert view.num_requests == then["request_ids"].size == view.conf.shape[0]
        assert not view.conf.flags.writeable and not view.conf_raw.flags.writeable
    with pytest.raises(AttributeError, match="no attribute 'not_a_field'"):
        views[0].not_a_field


def test_a_fixed_length_plugin_survives_the_steps_that_draft_fewer(tmp_path):
    """A policy that always verifies 2 drafts (a fresh user's plug-in) while a step drafts only 1 because no
    request has more than 2 tokens left: its lengths are clipped to the output left and counted, not refused;
    the run equals static's at gamma 2 (which verifies the step's drafts, all of them)."""
    class Two:
        name, fits_zos = "two", True          # as static: B fixed before the confidences (no host overhead)

        def __call__(self, view):
            return np.full(view.num_requests, 2, np.int64)

    # output 4, (almost) no draft accepted: one token a step, so the step with 2 tokens left drafts 1
    trace, scen = make_trace([0.0], [50], [4]), load_scenario(overrides=["acceptance.constant_alpha=1e-9"])
    res = simulate(trace, Two(), scen, gamma=2, seed=0)
    ref = simulate(trace, "static", scen, gamma=2, seed=0)
    np.testing.assert_array_equal(res.requests.done_s, ref.requests.done_s)
    pd.testing.assert_frame_equal(res.steps, ref.steps)
    assert res.summary["clipped_verify_lengths"] == ref.summary["clipped_verify_lengths"] + 1   # the 1-draft step


@pytest.mark.parametrize("horizon_s, opened", [(0.05, False), (3.0, True)])
def test_a_closed_loop_horizon_before_the_window_closes_is_named(prod_trace, horizon_s, opened):
    """A horizon that ends before the closed loop issues its last request: the error names --max-sim-s and says
    to raise it, and whether the window had opened (a fresh user got 'use more requests', which cannot help)."""
    with pytest.raises(SpecsimInputError) as e:
        simulate(prod_trace.head(16), "static", concurrency=1 if opened else 4, max_sim_s=horizon_s, seed=0)
    msg = str(e.value)
    assert e.value.field == "max_sim_s" and "raise --max-sim-s" in msg and f"got {horizon_s:g} s" in msg
    assert ("it opened at" in msg) == opened
    # nothing computed is lost: the error carries the whole run (a fresh user's report: --out was left empty)
    whole = e.value.result
    assert whole.summary["load"] == {"mode": "closed", "concurrency": 1 if opened else 4, "window_start_s": None,
                                     "window_end_s": None}
    assert "window" not in whole.summary and len(whole.requests) == 16
    assert whole.summary["completed"] + whole.summary["unfinished"] + whole.summary["not_issued"] \
        + whole.summary["unservable"] == 16


def test_a_closed_loop_window_that_cannot_open_is_refused_before_the_run(prod_trace, monkeypatch):
    """n <= 2N requests for N users: the last request is issued no later than the window opens, so the run is
    refused before any step (a fresh user's report: the whole run was computed, then thrown away). Just above
    the bound the run goes ahead and its window opens."""
    import specsim.simulation as simulation

    def no_run(*args, **kwargs):
        raise AssertionError("the event loop ran")

    # the valid run first: a fresh process's first simulation also warms the engine's kernels through run_until
    res = simulate(prod_trace.head(40), "static", concurrency=4, seed=0)
    assert res.summary["load"]["window_end_s"] > res.summary["load"]["window_start_s"]
    with monkeypatch.context() as m:
        m.setattr(simulation, "run_until", no_run)
        with pytest.raises(SpecsimInputError) as e:
            simulate(prod_trace.head(8), "static", concurrency=4, seed=0)
    assert e.value.field == "concurrency" and "more than 8 requests" in str(e.value) and "got 8 requests" in str(e.value)


def test_the_api_takes_paths_and_names_wrong_argument_types(tmp_path):
    """A notebook user's mistakes get one input error each, and paths are taken where a trace or scenario is
    expected (a fresh user's report: AttributeError from inside the run)."""
    from specsim.analysis.frontier import compare, frontiers
    from specsim.analysis.sweep_records import load_records
    from specsim.workload import save_trace

    path = tmp_path / "t.jsonl"
    save_trace(make_trace([0.0, 0.1], [30, 40], [10, 12]), path)
    toml = tmp_path / "s.toml"
    toml.write_text("[engine]\ngamma = 3\n")
    res = simulate(str(path), "dspark", str(toml), seed=0)
    assert res.summary["completed"] == 2 and res.summary["gamma"] == 3
    assert load_scenario(None, "engine.gamma=4").engine.gamma == 4               # one override as a string
    for kw, field in [({"concurrency": 2.5}, "concurrency"), ({"gamma": 2.0}, "gamma"),
                      ({"scenario": 42}, "scenario"), ({"concurrency": True}, "concurrency"),
                      ({"seed": True}, "seed"), ({"metric_percentiles": (150,)}, "metric_percentiles"),
                      ({"profile": 3}, "profile")]:        # a researcher's: accepted, late numpy, AttributeError
        with pytest.raises(SpecsimInputError) as e:
            simulate(str(path), "dspark", **kw)
        assert e.value.field == field
    with pytest.raises(SpecsimInputError, match="a Trace"):
        simulate(123, "dspark")
    named = simulate(str(path), "static", profile="h100-llama2-7b-tp2", seed=0)          # a bundled name
    assert named.summary["provenance"]["profile_metadata"]["tp"] == 2
    with pytest.raises(SpecsimInputError, match="results folder"):
        load_records(tmp_path / "typo")
    with pytest.raises(SpecsimInputError, match="at least one SLA tier"):
        compare([], [])
    with pytest.raises(SpecsimInputError, match="seed_spread frame"):
        frontiers(pd.DataFrame({"curve": ["a"], "load": [1]}))


@pytest.mark.parametrize("policy", ["dspark", "specdecpp", "static"])
def test_gamma_zero_under_a_speculative_policy_is_the_run_of_none(policy):
    """gamma 0: nothing is drafted and no policy is asked, so every batch is known before any confidence exists
    and zero-overhead scheduling fits whatever the policy (a researcher found dspark at gamma 0 charged 0.79 s of
    host overhead that ``none`` does not); the same steps and requests as ``none``, and a notice saying so."""
    from specsim.workload import synth_trace

    trace = synth_trace(80, 8.0, seed=4, max_prompt_tokens=1024, max_output_tokens=256)
    scen = load_scenario(None, ["engine.gamma=0"])
    got = simulate(trace, policy, scen, seed=0)
    ref = simulate(trace, "none", scen, seed=0)
    assert got.steps.equals(ref.steps) and got.requests.equals(ref.requests)
    assert got.steps.host_overhead_s.sum() == 0.0
    assert any("runs as no speculation" in n for n in got.summary["profile_range"]["notices"])
    assert "notices" not in ref.summary["profile_range"] or not any(
        "runs as no speculation" in n for n in ref.summary["profile_range"]["notices"])


def test_verifying_more_than_proposal_length_proposed_says_why():
    """A researcher's policy proposed 2 drafts and verified 7: the error said only "verify lengths in [0, 2]"."""
    class Over(_Propose):
        def __call__(self, view):
            return np.full(view.num_requests, 7)

    with pytest.raises(SpecsimInputError, match="its proposal_length proposed 2 drafts this step"):
        simulate(make_trace([0.0], [10], [200]), Over(2), seed=0)


def test_a_gamma_a_policy_overrides_is_said_to_be_unused():
    """simulate(trace, "mtp1", gamma=7) ran gamma 1 without a word (a researcher's report)."""
    from specsim.workload import synth_trace

    from specsim.run_config import RunConfig
    from specsim.scenario import load_scenario
    from specsim.simulation import run

    trace = synth_trace(20, 10.0, seed=3)
    # simulate refuses it as `specsim run --gamma 7 --policy mtp1` does (a fresh user's report: gamma 5 and
    # drafter eagle3 ran as gamma 1 with MTP); a RunConfig run says so in its notices
    for kw in ({"gamma": 7}, {"drafter": "eagle3"}):
        with pytest.raises(SpecsimInputError, match="with policy 'mtp1' .it is the mtp drafter at gamma 1"):
            simulate(trace, "mtp1", **kw)
    with pytest.raises(SpecsimInputError, match="no gamma other than 0 with policy 'none'"):
        simulate(trace, "none", gamma=3)
    assert simulate(trace, "mtp1", gamma=1, drafter="mtp").summary["gamma"] == 1
    fixed = run(trace, RunConfig(policy="mtp1", scenario=load_scenario(), gamma=7))
    assert fixed.summary["gamma"] == 1
    assert "policy mtp1 fixes gamma 1 (its drafter's); the gamma 7 given is not used" in \
        fixed.summary["profile_range"]["notices"]
    assert not any("is not used" in n for n in simulate(trace, "static", gamma=3).summary["profile_range"]["notices"])


def test_a_closed_loop_of_fixed_length_requests_is_said_to_run_in_lockstep():
    """A fresh user's fixed-length synthetic trace put a closed loop in lockstep (every user re-arrives at once), so
    TTFT without speculation read 163 ms against 31 ms with spread lengths; the run now says so."""
    fixed = make_trace([0.0] * 12, [190] * 12, [60] * 12)
    spread = make_trace([0.0] * 12, [150 + 7 * i for i in range(12)], [60] * 12)

    def said(trace, **kw) -> bool:
        notes = simulate(trace, "none", seed=0, **kw).summary["profile_range"].get("notices", [])
        return any("in lockstep" in n for n in notes)
    assert said(fixed, concurrency=4) and not said(spread, concurrency=4)
    assert not said(fixed) and not said(fixed, concurrency=1)        # open loop, or one user: no lockstep
