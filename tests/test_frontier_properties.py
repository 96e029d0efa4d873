"""Frontier properties of the adaptive schedulers on a large MoE target (issue 21's golden property test, the part
that holds without a CUDA-graph capture limit): properties, not recorded outputs.

V4-Flash scenario (specsim/scenarios/v4-flash.toml) at gamma 7 (the scenario's own is 5), closed loop at 1, 16, 64 and 256 users, 6 requests per user,
KV capacity 1e8 tokens, seed 0. The adaptive policies (vLLM's and TensorRT-LLM's schedulers given the exact cost,
and dspark-async):
* never below `none` at any load;
* within 3% of the best fixed k (3, 5 or 7) at one user, and above it at 256 users (past the fixed blocks' peak);
* their mean acceptance length falls as load rises from 16 to 256 users (they verify shorter prefixes).
The capture-limit half (fixed k = 7 against `none` inside and past the CUDA-graph captured range, with the limit
and with it raised) is tests/test_frontier_capture_limit.py, on h200-deepseek-v3-tp8-graphs256-terms.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace

REPO = Path(__file__).resolve().parent.parent
LOADS = (1, 16, 64, 256)
ADAPTIVE = {"vllm-adaptive": {"cost_table": "exact"}, "trtllm-confidence": {"cost_table": "exact"},
            "dspark-async": {}}


@pytest.fixture(scope="module")
def runs():
    trace = load_trace(REPO / "traces" / "prod.jsonl")
    scen = load_scenario(REPO / "specsim" / "scenarios" / "v4-flash.toml", ["cluster.kv_capacity_tokens=100000000"])

    def run(policy, users, **kn):
        w = simulate(trace.head(max(64, 6 * users)), policy, scen, seed=0, concurrency=users, **kn).summary["window"]
        return w["output_throughput_per_gpu"], w["mean_acceptance_length"]

    out = {(p, c): run(p, c, gamma=7, **kn) for p, kn in ADAPTIVE.items() for c in LOADS}
    out.update({("none", c): run("none", c) for c in LOADS})
    out.update({(f"static{k}", c): run("static", c, gamma=k) for k in (3, 5, 7) for c in (1, 256)})
    return out


@pytest.mark.parametrize("policy", sorted(ADAPTIVE))
def test_adaptive_policies_hold_the_frontier_properties(runs, policy):
    for c in LOADS:
        assert runs[(policy, c)][0] >= runs[("none", c)][0], f"{policy} below none at {c} users"
    best_fixed = {c: max(runs[(f"static{k}", c)][0] for k in (3, 5, 7)) for c in (1, 256)}
    assert runs[(policy, 1)][0] >= 0.97 * best_fixed[1]
    assert runs[(policy, 256)][0] > best_fixed[256]
    assert runs[(policy, 256)][1] < runs[(policy, 64)][1] < runs[(policy, 16)][1]
