"""KV memory: paged blocks, preemption by recompute, the reserve rule, the drafter's share, prefix caching,
the prefix-aware router and request overheads (hand-computed cases and invariants)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import make_trace
from specsim.hardware.profile import StepTimeProfile
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace

DATA = Path(__file__).parent / "data"
ALL_POLICIES = ["none", "mtp1", "static", "specdecpp", "dspark", "dspark-async", "dspark-global", "oracle"]
NO_OVERHEAD = ["engine.host_overhead_s=0", "engine.request_overhead_s=0"]


def _scenario(*extra: str):
    return load_scenario(overrides=[*NO_OVERHEAD, *extra])


# ---------------------------------------------------------------- preemption by hand
@pytest.mark.parametrize("rule, preemptions, recomputed, makespan", [
    # paged: both admitted at 0.032 with 3 blocks each (34 tokens); after 15 steps (t = 0.182) both need a
    # 4th block (49 tokens) and only 6 exist: B (newest) is preempted; A finishes its 24 remaining steps at
    # 0.422; B re-admitted with prompt + 16 generated = 48 tokens to recompute: one step (0.432) emits its
    # 17th token, 23 more steps end at 0.662.
    ("paged", 1, 48, 0.662),
    # reserve: prompt + output = 72 tokens = 5 blocks each: B waits for A (done 0.032 + 39 x 0.01 = 0.422),
    # then runs its 39 steps: 0.812.
    ("reserve", 0, 0, 0.812),
])
def test_two_requests_preemption_by_hand(rule, preemptions, recomputed, makespan):
    trace = make_trace([0.0, 0.0], [32, 32], [40, 40])
    scen = _scenario("cluster.kv_capacity_tokens=96", f"cluster.kv_allocation={rule}",
                     "prefill.time_per_token_s=0.001", "prefill.num_instances=2")
    res = simulate(trace, "none", scen, profile=StepTimeProfile.flat(0.01))
    req = res.requests
    assert res.summary["num_preemptions"] == preemptions
    assert req.preemptions.tolist() == [0, preemptions]
    assert res.summary["recomputed_tokens"] == recomputed == req.recomputed_tokens[1]
    assert req.done_s.max() == pytest.approx(makespan, abs=1e-9)
    assert req.done_s[0] == pytest.approx(0.422, abs=1e-9)
    assert (req.emitted_tokens == 40).all()


@pytest.mark.parametrize("policy", ALL_POLICIES)
@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_heavy_preemption_conserves_tokens(policy, mode):
    """A cache of ~4 average requests under a burst: many preemptions, no request lost, tokens conserved."""
    rng = np.random.default_rng(4)
    n = 60
    trace = make_trace(np.sort(rng.uniform(0, 0.5, n)), rng.integers(50, 900, n), rng.integers(2, 300, n))
    scen = _scenario("cluster.kv_capacity_tokens=4096", f"prefill.mode={mode}")
    res = simulate(trace, policy, scen, seed=2)
    s, req = res.summary, res.requests
    assert s["completed"] == n and s["unservable"] == 0
    assert s["num_preemptions"] > 5
    assert (req.emitted_tokens == req.output_tokens).all()
    counted = req.decode_steps + req.accepted_drafts + 1
    assert ((req.output_tokens - counted) <= req.preemptions).all() and (counted <= req.output_tokens).all()
    assert (req.done_s >= req.first_token_s).all()
    assert (res.steps.kv_blocks_used <= 4096 // 16).all()


def test_lazy_accounting_decides_as_exact_accounting(monkeypatch):
    """The lazy KV path (skipped block arithmetic while memory is ample) changes no decision."""
    from specsim.engine.kv_manager import KVManager
    rng = np.random.default_rng(7)
    n = 80
    trace = make_trace(np.sort(rng.uniform(0, 3, n)), rng.integers(50, 1500, n), rng.integers(2, 400, n))
    scen = _scenario("cluster.kv_capacity_tokens=20000")
    lazy = simulate(trace, "dspark", scen, seed=1)
    monkeypatch.setattr(KVManager, "_growth_bound", lambda self: 10 ** 9)   # never lazy
    exact = simulate(trace, "dspark", scen, seed=1)
    assert lazy.summary["num_preemptions"] > 0
    cols = ["done_s", "first_token_s", "preemptions", "recomputed_tokens", "verified_drafts", "accepted_drafts"]
    assert lazy.requests[cols].equals(exact.requests[cols])


# ---------------------------------------------------------------- servability
@pytest.mark.parametrize("rule", ["paged", "reserve"])
@pytest.mark.parametrize("policy, gamma", [("none", None), ("static", 7), ("dspark", None)])
def test_kv_boundaries(rule, policy, gamma):
    trace = load_trace(DATA / "kv_boundaries.jsonl")
    scen = _scenario("cluster.kv_capacity_tokens=4096", f"cluster.kv_allocation={rule}")
    res = simulate(trace, policy, scen, gamma=gamma, record_step_log=True)
    s = res.summary
    assert s["completed"] == 3 and s["unservable"] == 2
    done = set(res.requests.request_id[res.requests.status == "completed"])
    assert done == {"fits_a", "fits_b", "exact_fit"}
    assert set(s["unservable_requests"]) == {"prompt_too_long", "total_too_long"}
    assert "5100 tokens" in s["unservable_requests"]["prompt_too_long"]
    json.dumps(s["unservable_requests"])
    # near its end exact_fit never verifies past the capacity: prompt + generated + l + 1 <= 4096
    log = res.step_log[res.step_log.request_id == "exact_fit"]
    generated = 1 + np.concatenate([[0], np.cumsum(log.num_accepted + 1)[:-1]])
    assert (4000 + generated + log.verify_len + 1 <= 4096).all()


def test_undersized_cache_stops_with_every_request_unservable():
    trace = make_trace([0.0, 0.1, 0.2], [100, 200, 300], [10, 10, 10])
    res = simulate(trace, "dspark", _scenario("cluster.kv_capacity_tokens=64"))
    assert res.summary["unservable"] == 3 and res.summary["completed"] == 0
    assert all("KV blocks" in why for why in res.summary["unservable_requests"].values())


def test_drafter_share_that_does_not_fit_runs_without_drafts():
    """Alone in a cache its target KV fits exactly, so the drafter's share (as large as the target's) never
    fits: the request completes without verifying any draft instead of becoming unservable."""
    trace = make_trace([0.0], [200], [56])                # 256 tokens = 16 blocks
    scen = _scenario("cluster.kv_capacity_tokens=256", "drafter.kv_fraction=1.0")
    res = simulate(trace, "static", scen, gamma=4, seed=0)
    assert res.summary["completed"] == 1
    assert res.requests.verified_drafts[0] == 0
    roomy = simulate(trace, "static", _scenario("cluster.kv_capacity_tokens=8192", "drafter.kv_fraction=1.0"),
                     gamma=4, seed=0)
    assert roomy.requests.verified_drafts[0] > 0


def test_drafter_share_costs_admissions():
    """With a 5/36 drafter share, fewer dspark requests fit at once than without it."""
    rng = np.random.default_rng(1)
    n = 40
    trace = make_trace(np.zeros(n), rng.integers(500, 1000, n), rng.integers(100, 200, n))
    peak = {}
    for frac in ("0.0", "0.5"):
        res = simulate(trace, "static", _scenario("cluster.kv_capacity_tokens=16000", f"drafter.kv_fraction={frac}"),
                       gamma=3)
        peak[frac] = int(res.steps.num_running.max())
    assert peak["0.5"] < peak["0.0"]


# ---------------------------------------------------------------- prefix caching
@pytest.mark.parametrize("mode", ["disaggregated", "colocated"])
def test_shared_prefix_hit_rate_by_hand(mode):
    """tests/data/README.md: 6,304 of 12,924 prompt tokens hit (one replica, no eviction)."""
    trace = load_trace(DATA / "shared_prefix.jsonl")
    res = simulate(trace, "none", _scenario(f"prefill.mode={mode}"))
    s = res.summary
    assert int(res.requests.prefix_hit_tokens.sum()) == 6304
    assert int(res.requests.prefix_lookup_tokens.sum()) == 12924
    assert s["prefix_cache_hit_rate"] == pytest.approx(6304 / 12924)
    assert list(s["prefix_cache"]) == (["prefill0"] if mode == "disaggregated" else ["replica0"])
    off = simulate(trace, "none", _scenario(f"prefill.mode={mode}", "cluster.prefix_caching=false"))
    assert off.summary["prefix_cache_hit_rate"] == 0.0
    assert off.requests.ttft_s.sum() > res.requests.ttft_s.sum()


def test_cached_prompt_skips_prefill_compute():
    """Fixed 1 ms per computed prompt token: the second request of a 512-token prefix pays for 100 tokens."""
    trace = make_trace([0.0, 1.0], [612, 612], [2, 2])
    trace = type(trace)(request_id=trace.request_id, arrival_s=trace.arrival_s, prompt_tokens=trace.prompt_tokens,
                        output_tokens=trace.output_tokens, domain=trace.domain, prefix_group=["sys", "sys"],
                        prefix_tokens=[512, 512])
    res = simulate(trace, "none", _scenario("prefill.time_per_token_s=0.001"), profile=StepTimeProfile.flat(0.01))
    np.testing.assert_allclose(res.requests.prefill_s, [0.612, 0.100], atol=1e-12)


def test_mooncake_hit_rate_matches_hash_ids(shared):
    """One replica, no eviction: the simulated token hit rate equals the rate computed from the hash_ids."""
    from specsim.workload import convert_mooncake
    path = shared / "data" / "traces" / "mooncake_fast25" / "conversation_trace.jsonl"
    if not path.exists():
        pytest.skip("the Mooncake trace is not in the shared folder")
    trace = convert_mooncake(path).head(1500)
    seen: set[tuple[int, ...]] = set()
    hit = total = 0
    for ids, prompt in zip(trace.hash_ids, trace.prompt_tokens):
        full = int(prompt) // 512                                      # a trailing partial block never hits
        chains = [tuple(ids[: i + 1]) for i in range(full)]
        n = next((i for i, c in enumerate(chains) if c not in seen), full)
        hit += min(n * 512, (int(prompt) - 1) // 16 * 16)
        total += int(prompt)
        seen.update(chains)
    scen = _scenario("cluster.kv_capacity_tokens=2000000000", "prefill.time_per_token_s=0.000001")
    res = simulate(trace, "none", scen, profile=StepTimeProfile.flat(0.001))
    assert res.summary["prefix_cache_hit_rate"] == pytest.approx(hit / total, abs=1e-12)
    assert hit / total > 0.2                 # 0.27 over the first 1500 conversation requests


def test_prefix_aware_router_keeps_groups_together():
    rng = np.random.default_rng(3)
    n = 40
    groups = rng.choice(["a", "b", "c", "d"], n)
    base = make_trace(np.arange(n) * 0.2, np.full(n, 1200), np.full(n, 20))
    trace = type(base)(request_id=base.request_id, arrival_s=base.arrival_s, prompt_tokens=base.prompt_tokens,
                       output_tokens=base.output_tokens, domain=base.domain, prefix_group=list(groups),
                       prefix_tokens=np.full(n, 1024))
    common = ["prefill.mode=colocated", "cluster.num_replicas=4"]
    aware = simulate(trace, "none", _scenario(*common, "cluster.router=prefix-aware"))
    rr = simulate(trace, "none", _scenario(*common, "cluster.router=round-robin"))
    req = aware.requests
    for g in "abcd":
        sel = req.replica[groups == g].to_numpy()
        assert (sel[1:] == sel[0]).all() if sel.size else True
    # every request after its group's first hits the whole 1024-token prefix
    first = {g: int(np.flatnonzero(groups == g)[0]) for g in "abcd" if (groups == g).any()}
    expected = 1024 * (n - len(first)) / (1200 * n)
    assert aware.summary["prefix_cache_hit_rate"] == pytest.approx(expected)
    assert rr.summary["prefix_cache_hit_rate"] < aware.summary["prefix_cache_hit_rate"]


def test_prefix_aware_router_picks_the_prefill_instance():
    n = 12
    groups = ["a", "b"] * (n // 2)
    base = make_trace(np.arange(n) * 1.0, np.full(n, 800), np.full(n, 5))
    trace = type(base)(request_id=base.request_id, arrival_s=base.arrival_s, prompt_tokens=base.prompt_tokens,
                       output_tokens=base.output_tokens, domain=base.domain, prefix_group=groups,
                       prefix_tokens=np.full(n, 512))
    res = simulate(trace, "none", _scenario("prefill.num_instances=2", "cluster.router=prefix-aware"))
    # the first of each group misses; every later one hits its 512 tokens on the instance holding them
    assert res.summary["prefix_cache_hit_rate"] == pytest.approx(512 * (n - 2) / (800 * n))


# ---------------------------------------------------------------- request overheads
def test_request_overhead_counts_in_ttft():
    trace = make_trace([0.0, 5.0], [100, 100], [10, 10])
    common = ["engine.host_overhead_s=0", "prefill.time_per_token_s=0.001"]
    prof = StepTimeProfile.flat(0.01)
    base = simulate(trace, "none", load_scenario(overrides=[*common, "engine.request_overhead_s=0"]), profile=prof)
    slow = simulate(trace, "none", load_scenario(overrides=[*common, "engine.request_overhead_s=0.015"]),
                    profile=prof)
    np.testing.assert_allclose(slow.requests.ttft_s - base.requests.ttft_s, 0.015, atol=1e-12)
    np.testing.assert_allclose(slow.requests.tpot_s, base.requests.tpot_s, atol=1e-12)


def test_emission_overhead_adds_per_emitting_request():
    trace = make_trace([0.0, 0.0], [10, 10], [21, 21])
    common = ["engine.host_overhead_s=0", "engine.request_overhead_s=0", "prefill.time_per_token_s=0.001",
              "prefill.num_instances=2"]
    prof = StepTimeProfile.flat(0.01)
    res = simulate(trace, "none", load_scenario(overrides=[*common, "engine.emission_overhead_s=0.001"]),
                   profile=prof)
    np.testing.assert_allclose(res.requests.tpot_s, 0.012, atol=1e-12)      # 10 ms step + 2 x 1 ms


# ---------------------------------------------------------------- fixes from a fresh-user trial
def test_reserve_never_preempts_and_keeps_its_reservation():
    """Four requests of 1000 + 600 tokens (100 blocks each) in 200 blocks: two at a time, each holding 100."""
    trace = make_trace([0.0] * 4, [1000] * 4, [600] * 4)
    scen = _scenario("cluster.kv_capacity_tokens=3200", "cluster.kv_allocation=reserve", "prefill.num_instances=4")
    res = simulate(trace, "dspark", scen, seed=0)
    assert res.summary["num_preemptions"] == 0 and res.steps.num_preempted.sum() == 0
    assert (res.steps.kv_blocks_used[res.steps.num_running == 2] == 200).all()


def test_preemptions_agree_between_steps_and_requests():
    rng = np.random.default_rng(5)
    n = 60
    trace = make_trace(np.sort(rng.uniform(0, 0.5, n)), rng.integers(50, 900, n), rng.integers(2, 300, n))
    res = simulate(trace, "dspark", _scenario("cluster.kv_capacity_tokens=6000"), seed=1)
    assert res.summary["num_preemptions"] == res.steps.num_preempted.sum() == res.requests.preemptions.sum() > 0


def test_itl_covers_the_wait_for_a_decode_slot():
    """Disaggregated: the gap from the first token to the first decode emission (waiting for a slot) is an ITL."""
    trace = make_trace([0.0, 0.0], [10, 10], [3, 3])
    scen = _scenario("cluster.max_num_seqs=1", "prefill.time_per_token_s=0.001", "prefill.num_instances=2")
    res = simulate(trace, "none", scen, profile=StepTimeProfile.flat(0.01))
    req = res.requests
    itl_total = res.summary["mean_itl_ms"] / 1e3 * 4                        # 2 decode emissions each
    assert itl_total == pytest.approx(float((req.done_s - req.first_token_s).sum()))


@pytest.mark.parametrize("block, expected", [(16, 512), (48, 480), (100, 500)])
def test_a_block_straddling_the_shared_prefix_is_no_hit(block, expected):
    """Two requests share only their first 512-token hash block: the hit is the whole KV blocks inside it."""
    base = make_trace([0.0, 1.0], [1300, 1300], [2, 2])
    trace = type(base)(request_id=base.request_id, arrival_s=base.arrival_s, prompt_tokens=base.prompt_tokens,
                       output_tokens=base.output_tokens, domain=base.domain, hash_ids=[(1, 2, 3), (1, 5, 6)],
                       hash_block_tokens=[512, 512])
    res = simulate(trace, "none", _scenario(f"cluster.block_size={block}"))
    assert res.requests.prefix_hit_tokens.tolist() == [0, expected]


def test_prefix_aware_router_spreads_a_common_first_block():
    """Every request shares one first block (as in Mooncake): the load guard still uses every replica."""
    n = 200
    base = make_trace(np.arange(n) * 0.01, np.full(n, 600), np.full(n, 200))
    trace = type(base)(request_id=base.request_id, arrival_s=base.arrival_s, prompt_tokens=base.prompt_tokens,
                       output_tokens=base.output_tokens, domain=base.domain, prefix_group=["all"] * n,
                       prefix_tokens=np.full(n, 512))
    res = simulate(trace, "none", _scenario("prefill.mode=colocated", "cluster.num_replicas=4",
                                            "cluster.router=prefix-aware"))
    counts = res.requests.replica.value_counts()
    assert len(counts) == 4 and counts.min() >= n // 8


def test_not_issued_requests_are_counted_under_a_horizon():
    trace = make_trace(np.arange(20) * 1.0, [100] * 20, [10] * 20)
    s = simulate(trace, "none", _scenario(), max_sim_s=5.0).summary
    assert s["completed"] + s["unfinished"] + s["unservable"] + s["not_issued"] == s["total"] == 20
    assert s["not_issued"] == 14
