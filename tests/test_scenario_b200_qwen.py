"""The bundled scenario of Qwen3.8-27B on one B200 as vLLM served it (specsim/scenarios/b200-qwen3.8-27b-vllm.toml)
reproduces the public sweep it describes: at 64 users of HumanEval-length requests (191 prompt, 761 output tokens
on average, the model's own lengths under max_tokens 1,024) the measured window throughput was 3,666 tok/s
without speculation and 4,034 tok/s with DSpark k = 7 at acceptance length 3.44 (docs/validation.md). The
scenario predicts them within the validation's own errors at that load: +2.9% without speculation and a speed-up
+2.7% high, so DSpark's throughput +5.7%."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.studies.validation import alpha_for_acceptance_length, spread_lengths
from specsim.workload import synth_trace

SCENARIO = Path(__file__).resolve().parents[1] / "specsim" / "scenarios" / "b200-qwen3.8-27b-vllm.toml"
EXACT = ["acceptance.sigma_request=0", "acceptance.sigma_step=0", "acceptance.sigma_token=0"]


def test_the_scenario_is_the_validated_vllm_setup():
    sc = load_scenario(SCENARIO)
    assert (sc.profile.name, sc.prefill.mode, sc.prefill.chunk_tokens) == ("b200-qwen3.8-27b-vllm-fitted", "colocated",
                                                                           16384)
    assert (sc.cluster.max_num_seqs, sc.cluster.gpu_memory_utilization) == (1024, 0.9)
    assert sc.engine.request_overhead_s == pytest.approx(0.02396)


@pytest.mark.parametrize("policy, extra, over, measured, tolerance", [
    ("none", {}, [], 3666.35, 0.05),
    ("static", {"gamma": 7, "drafter": "dspark"},
     [f"acceptance.constant_alpha={alpha_for_acceptance_length(3.439, 7)}", *EXACT], 4034.04, 0.07),
])
def test_it_reproduces_the_sweep_at_64_users(policy, extra, over, measured, tolerance):
    tr = synth_trace(64 * 8, 1.0, seed=0, prompt_len=191, output_len=761)
    tr = replace(tr, output_tokens=spread_lengths(761.0, 1024, len(tr)))
    res = simulate(tr, policy, load_scenario(SCENARIO, over), seed=0, concurrency=64, **extra)
    assert res.summary["window"]["output_throughput"] == pytest.approx(measured, rel=tolerance)
