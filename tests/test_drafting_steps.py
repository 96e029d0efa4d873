"""A replica with drafts finishes the steps that end before any other event without a SimPy event each
(``Replica._serve_drafting``, issue 25): every number is that of one event per step (``Replica._ahead`` forced
False), in named scenarios and on random ones."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
from helpers import assert_same_run, make_trace
from hypothesis import HealthCheck, given, settings

from specsim.engine import replica
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.simulation import simulate


def _trace(n: int = 120, seed: int = 7, span_s: float = 3.0):
    rng = np.random.default_rng(seed)
    return make_trace(np.sort(rng.uniform(0, span_s, n)), rng.integers(20, 1500, n), rng.integers(1, 260, n))


def _run_both(trace, policy, scen, **kw):
    """(the run as it is, the run with one SimPy event per step, steps finished ahead of SimPy's clock)."""
    ahead: list[bool] = []
    real = replica.Replica._ahead

    def spy(self, end_s):
        ahead.append(real(self, end_s))
        return ahead[-1]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(replica.Replica, "_ahead", spy)
        fast = simulate(trace, policy, scen, seed=3, **kw)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(replica.Replica, "_ahead", lambda self, end_s: False)
        one_by_one = simulate(trace, policy, scen, seed=3, **kw)
    return fast, one_by_one, sum(ahead)


#: (case, policy, scenario overrides, simulate's keywords, least share of the steps finished ahead)
CASES = [
    ("default scenario, dspark", "dspark", [], {}, 0.3),
    ("static k, colocated prefill", "static", ["prefill.mode=colocated", "prefill.chunk_tokens=512"], {}, 0.2),
    # each replica's next step end is the other's next event: few steps end before it
    ("dspark-async, two replicas", "dspark-async", ["cluster.num_replicas=2"], {}, 0.0),
    ("vllm-adaptive, closed loop", "vllm-adaptive", [], {"concurrency": 8}, 0.2),
    ("specdecpp, tight KV with preemptions", "specdecpp", ["cluster.kv_capacity_tokens=9000"], {}, 0.2),
    ("dspark, a horizon mid-run", "dspark", [], {"max_sim_s": 1.7}, 0.2),
    ("mtp1, first token on the decode replica", "mtp1", ["prefill.first_token=decode-step"], {}, 0.2),
]


@pytest.mark.parametrize("name, policy, sets, kw, least", CASES, ids=[c[0] for c in CASES])
def test_steps_ahead_change_no_number(name, policy, sets, kw, least):
    fast, one_by_one, ahead = _run_both(_trace(), policy, load_scenario(overrides=sets), **kw)
    assert_same_run(fast, one_by_one)
    assert ahead >= least * len(one_by_one.steps), f"only {ahead} of {len(one_by_one.steps)} steps ran ahead"


@settings(derandomize=True, database=None, deadline=None, max_examples=20,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_steps_ahead_change_no_number_anywhere(data):
    """Property: random small traces, policies and scenarios (prefill mode, replicas, KV room, slots, host
    overhead, open or closed loop, a horizon) give every number of one event per step."""
    n = data.draw(st.integers(1, 30), "requests")
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 16), "seed"))
    trace = make_trace(np.sort(rng.uniform(0, data.draw(st.sampled_from([0.05, 1.0, 3.0]), "span"), n)),
                       rng.integers(1, 2000, n), rng.integers(1, 200, n))
    policy = data.draw(st.sampled_from(["dspark", "static", "dspark-async", "specdecpp", "trtllm-confidence"]))
    sets = [f"prefill.mode={data.draw(st.sampled_from(['colocated', 'disaggregated']), 'mode')}",
            f"cluster.num_replicas={data.draw(st.sampled_from([1, 2]), 'replicas')}",
            f"cluster.kv_capacity_tokens={data.draw(st.sampled_from([6000, 400000]), 'kv')}",
            f"cluster.max_num_seqs={data.draw(st.sampled_from([2, 64]), 'seqs')}",
            f"engine.host_overhead_s={data.draw(st.sampled_from([0.0, 0.0005]), 'host')}",
            "engine.context_overflow=truncate"]
    kw = {}
    if data.draw(st.booleans(), "closed loop") and n >= 4:
        kw["concurrency"] = 3
    elif data.draw(st.booleans(), "horizon"):
        kw["max_sim_s"] = data.draw(st.sampled_from([0.3, 1.0, 4.0]), "horizon_s")
    scen = load_scenario(overrides=sets)
    try:
        fast, one_by_one, _ = _run_both(trace, policy, scen, **kw)
    except SpecsimInputError:               # e.g. a closed-loop window too short: refused alike (checked below)
        with pytest.raises(SpecsimInputError):
            simulate(trace, policy, scen, seed=3, **kw)
        return
    assert_same_run(fast, one_by_one)
