"""Engine speed: steps per wall-second and simulated output tokens per wall-second.

Closed-loop load on the bundled trace with ``dspark`` (gamma 7) and ``none``, at about 32 and about 256
running requests per replica. The KV capacity is raised so that 256 requests fit (the point is engine
speed, not memory). Floors from the `specsim run` issue: 5,000 steps/s at R = 32 and 2,000 at R = 256,
one core. Only the event loop is timed (model building and imports excluded), both in wall-clock seconds and in
CPU seconds of this process (the fair figure on a machine shared with other work).

Run: ``python benchmarks/bench_engine.py`` (add ``--quick`` for fewer requests).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.trace import load_trace

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests per point")
    ap.add_argument("--repeat", type=int, default=3, help="runs per point; the fastest is reported (the "
                    "machine's speed varies with other work: the best run is the least disturbed)")
    args = ap.parse_args()
    trace = load_trace(REPO / "traces" / "prod.jsonl")
    scen = load_scenario(overrides=["cluster.kv_capacity_tokens=4000000", "cluster.max_num_seqs=256"])
    print(f"{'policy':<8} {'users':>5} {'mean R':>7} {'steps':>7} {'wall s':>7} {'cpu s':>7} "
          f"{'steps/s':>8} {'steps/cpu-s':>11} {'tok/cpu-s':>10}")
    for policy in ("dspark", "none"):
        for users in (32, 256):
            n = users * (6 if args.quick else 12)
            runs = [simulate(trace.head(min(n, len(trace))), policy, scen, concurrency=users, seed=0)
                    for _ in range(max(1, args.repeat))]
            res = min(runs, key=lambda r: r.summary["event_loop_cpu_s"])
            s = res.summary
            loop, cpu = s["event_loop_wall_s"], s["event_loop_cpu_s"]
            tokens = int(res.requests.output_tokens.sum())
            print(f"{policy:<8} {users:>5} {res.steps.num_decode.mean():>7.1f} {s['steps']:>7} {loop:>7.2f} "
                  f"{cpu:>7.2f} {s['steps'] / loop:>8.0f} {s['steps'] / cpu:>11.0f} {tokens / cpu:>10.0f}")


if __name__ == "__main__":
    main()
