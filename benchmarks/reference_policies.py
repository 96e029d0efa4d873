"""Early stop vs global search on a jagged and a smooth profile; what dspark-async's lag and ZOS change.

Run: ``python benchmarks/reference_policies.py`` (about a minute on one core). Prints one table; the
numbers in docs/production.md ("Reference policies") come from it.

Setup: the default scenario (dspark drafter, gamma 7, host overhead 0.5 ms, Fig. 2 DSpark rates), a
400-request training-mix trace (outputs capped at 512 tokens), closed loop at 16 / 64 / 128 users, seed 0.
``dspark`` runs with its default early stop on the hull of the step-time curve and with the printed rule
(``early_stop="paper"``). Profiles: the bundled H100 Llama-2-7B table (jagged: CUDA-graph padding and tile cliffs) and a straight
line least-squares fitted to it over B <= 1024 (smooth). Decomposition of dspark-async's advantage:
``dspark-global`` with the host overhead (same charge as ``dspark``), ``dspark-global`` with host overhead
0 (what ZOS would hide), ``dspark-async`` (hidden host overhead, capacity lagged two steps).
"""

from __future__ import annotations

import numpy as np

from specsim.hardware.profile import StepTimeProfile, resolve_profile
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import synth_trace


def linear_fit(profile: StepTimeProfile, max_b: int = 1024) -> StepTimeProfile:
    """A straight line least-squares fitted to ``profile`` over B <= max_b (same KV term)."""
    b, t = profile.batch_tokens, profile.step_time_s
    slope, icpt = np.polyfit(b[b <= max_b], t[b <= max_b], 1)
    return StepTimeProfile(np.array([1, profile.max_batch_tokens]),
                           icpt + slope * np.array([1.0, profile.max_batch_tokens]),
                           kv_read_s_per_token=profile.kv_read_s_per_token,
                           metadata={"kind": "synthetic", "source": f"linear fit to {profile.source}"})


def main() -> None:
    sc = load_scenario(None, ["prefill.num_instances=64"])
    sc0 = sc.with_updates({"engine": {"host_overhead_s": 0.0}})
    trace = synth_trace(400, 10.0, mix="math=0.394,code=0.389,chat=0.217", seed=1, max_output_tokens=512)
    jagged = resolve_profile("h100-llama2-7b-tp1")
    runs = [("dspark (hull)", sc, "dspark", {}), ("dspark (paper)", sc, "dspark", {"early_stop": "paper"}),
            ("dspark-global", sc, "dspark-global", {}), ("dspark-global host 0", sc0, "dspark-global", {}),
            ("dspark-async", sc, "dspark-async", {}), ("oracle", sc, "oracle", {}), ("mtp1", sc, "mtp1", {})]
    print(f"{'profile':8} {'users':>5} {'policy':22} {'tok/s/GPU':>10} {'tok/s/user':>10} {'verify/req':>10}")
    for pname, prof in (("jagged", jagged), ("linear", linear_fit(jagged))):
        for n in (16, 64, 128):
            for label, scen, pol, knobs in runs:
                s = simulate(trace, pol, scen, seed=0, concurrency=n, profile=prof, **knobs).summary
                print(f"{pname:8} {n:5d} {label:22} {s['output_throughput_per_gpu']:10.0f} "
                      f"{s['mean_tps_per_user']:10.1f} {s['mean_verify_tokens_per_request']:10.2f}")


if __name__ == "__main__":
    main()
