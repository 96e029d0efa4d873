"""Wall time of a 5-policy x 9-load sweep on the bundled trace: serial vs the local process pool.

Usage::

    python benchmarks/bench_sweep.py [--num-requests 32] [--requests-per-user 6] [--jobs N] [--scaling]

Runs ``mtp1, static, specdecpp, dspark, dspark-async`` at closed-loop concurrency 1, 2, 4, ..., 256 on
``traces/prod.jsonl`` (the first ``max(num_requests, requests_per_user x C)`` requests at C users), once
with the serial executor and once with the process pool, each into a fresh temporary directory; prints
both wall times, the speed-up, the simulated points per minute, and checks that both executors wrote
identical records (wall_time_s aside). With ``--scaling``, how the process pool scales with the core count
instead: the sweep once per core count c = 1 .. the CPUs this process may use, the whole run (driver and workers)
pinned to c cores (``os.sched_setaffinity``, inherited by the pool's forked workers) with c workers, printing
points per minute and the speed-up and efficiency against c = 1. A benchmark, not a test: no timing assertions.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from specsim.scenario import load_scenario
from specsim.sweep import SweepSpec, load_records, run_sweep
from specsim.workload import load_trace

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-requests", type=int, default=32)
    ap.add_argument("--requests-per-user", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--trace", default=str(REPO / "traces" / "prod.jsonl"))
    ap.add_argument("--scaling", action="store_true", help="the pool on 1, 2, ... cores (c workers on c cores)")
    args = ap.parse_args()
    spec = SweepSpec(policies=("mtp1", "static", "specdecpp", "dspark", "dspark-async"),
                     concurrency=tuple(2 ** i for i in range(9)), seeds=(0,), num_requests=args.num_requests,
                     requests_per_user=args.requests_per_user)
    scenario = load_scenario()
    trace = load_trace(args.trace)
    if args.scaling:
        scaling(spec, scenario, trace)
        return
    walls, recs = {}, {}
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(other work on the machine slows both executors)")
    with tempfile.TemporaryDirectory() as tmp:
        for executor in ("serial", "process"):
            out = Path(tmp) / executor
            t0 = time.perf_counter()
            res = run_sweep(spec, scenario, trace, out, executor=executor, jobs=args.jobs, progress=False)
            walls[executor] = time.perf_counter() - t0
            loaded = load_records(out)
            busy = sum(r["wall_time_s"] for r in loaded)
            recs[executor] = [{k: v for k, v in r.items() if k not in ("wall_time_s", "checksum")} for r in loaded]
            print(f"{executor:8s}: {len(res.points)} points ({len(res.failed)} failed) in {walls[executor]:7.1f} s "
                  f"({60 * len(res.points) / walls[executor]:.1f} points/min; sum of per-point times {busy:.1f} s, "
                  f"{busy / walls[executor]:.2f} points in flight on average)", flush=True)
            errors = sorted({r["error"] for r in recs[executor] if r["status"] != "ok"})
            for e in errors[:3]:
                print(f"  failed: {e}")
    print(f"process pool with {args.jobs} workers on {os.cpu_count()} CPUs: "
          f"speed-up x{walls['serial'] / walls['process']:.2f}")
    print("identical records:", recs["serial"] == recs["process"])


def scaling(spec: SweepSpec, scenario, trace) -> None:
    """The process pool with c workers pinned to c cores, for c = 1 .. the usable CPUs: points per minute, and the
    speed-up and parallel efficiency (speed-up / c) against one core; the records must agree between core counts."""
    cpus = sorted(os.sched_getaffinity(0))
    print(f"load average before the run: {os.getloadavg()[0]:.1f}; cores usable: {len(cpus)}")
    base, first = None, None
    with tempfile.TemporaryDirectory() as tmp:
        for c in range(1, len(cpus) + 1):
            os.sched_setaffinity(0, cpus[:c])
            out = Path(tmp) / f"cores{c}"
            t0 = time.perf_counter()
            res = run_sweep(spec, scenario, trace, out, executor="process", jobs=c, progress=False)
            wall = time.perf_counter() - t0
            rate = 60 * len(res.points) / wall
            base = base or rate
            recs = [{k: v for k, v in r.items() if k not in ("wall_time_s", "checksum")} for r in load_records(out)]
            first = first or recs
            print(f"{c} core(s), {c} worker(s): {len(res.points)} points in {wall:6.1f} s = {rate:6.1f} points/min; "
                  f"speed-up x{rate / base:.2f}, efficiency {rate / base / c:.0%}; records as on 1 core: "
                  f"{recs == first}", flush=True)
    os.sched_setaffinity(0, cpus)


if __name__ == "__main__":
    main()
