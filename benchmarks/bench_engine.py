"""Engine speed against the design floor: steps per CPU-second of the engine / of a bare SimPy + numpy loop.

For each policy (``dspark`` at the scenario's gamma, ``none``) and each target mean number of running
requests R (32 and 256), the benchmark:

1. finds a closed-loop concurrency whose run has a measured mean R within 10% of the target. The load is a
   synthetic trace with the bundled trace's domain mix (``chat=0.2,code=0.4,math=0.4``, ``users x
   requests-per-user`` requests, seed 0); mean R is the mean over all steps of the steps frame's number of
   running requests, ramp-up and drain included, so the concurrency is above R. Start at
   ``R / 0.7`` users and rescale by ``target / measured`` until within 3% (at most 6 runs); the run is
   deterministic for a seed, so the chosen load gives the same R on every repeat. Outside the 10% band after
   the search, the benchmark stops with exit status 2;
2. times the run ``--repeat`` times (default 3, the search's last run is the first) and keeps the fastest in CPU
   seconds of the event loop (``summary["event_loop_cpu_s"]``: model building and imports excluded);
3. runs the design floor ``floor_bench.py`` (``bench/`` of the shared folder: ``$SPECSIM_SHARED``, default
   ``../shared`` beside the repository) in this same process at R = round(measured mean R), gamma 7,
   fastest of ``--repeat`` as well, and prints engine / floor.

Per-step and per-request records are on (the engine always keeps them); the per-(step, request) step log is
off. The scenario is the default one with the KV capacity and ``max_num_seqs`` raised (only where the
scenario has those fields) so that 256 running requests fit, and four disaggregated prefill instances instead
of one: the point is engine speed, not memory or prefill. (Since the hull early stop, issue 21, ``dspark``
finishes requests so fast that one instance's prefill throughput caps its mean R near 140, on the synthetic
trace and on the main job alike, whatever the number of users.) The synthetic workload also lifts the context
window (``engine.max_model_len`` 1,000,000): its lognormal lengths pass Llama-2's 4,096 tokens for 15% of the
requests, which would otherwise be refused at arrival.

Targets (issue 11): dspark >= 2/3 of the floor at R = 32 and R = 256; none >= the floor. Without the shared
folder the floor part is skipped (said so in the output) and only engine speeds are printed.

``--workload main-job`` (issue 19) measures ``dspark`` on the README's main-job workload instead: the bundled
``traces/prod.jsonl`` (3,000 requests, its own prompt and output lengths and domains) replayed closed loop,
prefill and admission on, records on, the same raised KV capacity; targets >= 0.5 of the floor at R ~ 30 and
>= 0.67 at R ~ 250 (``--r-targets 30,250`` is its default). Where the concurrency needs more requests than the
trace holds (about 30 per user, so that ramp-up and drain stay a small part of the run), the trace is repeated
whole (same lengths and domains, request ids suffixed ``#k``, later copies' arrivals shifted after the first).
The main job keeps the 4,096-token window: 407 of every 3,000 requests are refused at arrival, as in
``specsim run``.

Run: ``python benchmarks/bench_engine.py`` (about a minute); ``--quick`` for a smoke run (fewer requests, one
timing run, a shorter floor); ``--check`` to exit 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import os
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np

from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import Trace, load_trace, synth_trace

REPO = Path(__file__).resolve().parent.parent
MIX = "chat=0.2,code=0.4,math=0.4"           # the bundled traces/prod.jsonl's domain shares, rounded
BAND = 0.10                                   # measured mean R must be within 10% of the target
SEARCH_TOL = 0.03                             # the search stops once within 3%
FLOOR_GAMMA = 7
TARGETS = {"dspark": 2 / 3, "none": 1.0}      # engine / floor, per CPU-second
MAIN_JOB_TRACE = REPO / "traces" / "prod.jsonl"
MAIN_JOB_PER_USER = 30                          # requests per closed-loop user on the main-job workload
MAIN_JOB_TARGETS = {30: 0.5, 250: 2 / 3}        # issue 19: mean R -> engine / floor on the main-job workload


def shared_dir() -> Path:
    """The shared folder: ``$SPECSIM_SHARED`` or ``../shared`` beside the repository root."""
    return Path(os.environ.get("SPECSIM_SHARED", REPO.parent / "shared")).resolve()


def load_floor() -> ModuleType | None:
    """Import ``bench/floor_bench.py`` of the shared folder; None when it is absent."""
    path = shared_dir() / "bench" / "floor_bench.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location("floor_bench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_scenario(main_job: bool = False):
    """The default scenario with room for 256+ running requests and four prefill instances, and for the
    synthetic workload a context window every request fits (module docstring; fields the scenario lacks, in an
    older tree, are left out)."""
    base = load_scenario()
    names = {f"{sec}.{f.name}" for sec in ("cluster", "engine", "prefill")
             for f in dataclasses.fields(getattr(base, sec))}
    wanted = {"cluster.kv_capacity_tokens": 8_000_000, "cluster.kv_capacity_blocks": 500_000,
              "cluster.max_num_seqs": 4096, "prefill.num_instances": 4}
    if not main_job:
        wanted["engine.max_model_len"] = 1_000_000
    return load_scenario(overrides=[f"{k}={v}" for k, v in wanted.items() if k in names])


def mean_running(steps) -> float:
    """Mean number of running requests per step from a steps frame (``num_running``, else ``num_decode``)."""
    for col in ("num_running", "num_decode"):
        if col in steps.columns and len(steps) and steps[col].mean() > 0:
            return float(steps[col].mean())
    raise SystemExit(f"bench_engine: no positive mean of a running-request column in the steps frame "
                     f"({len(steps)} rows, columns {list(steps.columns)})")


def main_job_trace(users: int):
    """``traces/prod.jsonl``, repeated whole until it holds about 30 requests per user."""
    base = load_trace(MAIN_JOB_TRACE)
    copies = max(1, -(-users * MAIN_JOB_PER_USER // len(base.request_id)))
    if copies == 1:
        return base
    span = float(base.arrival_s[-1]) + 1.0
    return Trace(request_id=np.concatenate([[f"{r}#{k}" for r in base.request_id] for k in range(copies)]),
                 arrival_s=np.concatenate([base.arrival_s + k * span for k in range(copies)]),
                 prompt_tokens=np.tile(base.prompt_tokens, copies), output_tokens=np.tile(base.output_tokens, copies),
                 domain=np.tile(base.domain, copies), source=f"{MAIN_JOB_TRACE.name} x {copies}")


def timed_run(policy: str, users: int, per_user: int, scenario) -> tuple[object, float]:
    """One closed-loop run; returns (result, event-loop CPU seconds). ``per_user`` 0 = the main-job trace."""
    trace = main_job_trace(users) if per_user == 0 else synth_trace(users * per_user, 1.0, mix=MIX, seed=0)
    kwargs = {"record_step_log": False} if "record_step_log" in inspect.signature(simulate).parameters else {}
    cpu0 = time.process_time()
    res = simulate(trace, policy, scenario, concurrency=users, seed=0, **kwargs)
    cpu = time.process_time() - cpu0
    return res, float(res.summary.get("event_loop_cpu_s", cpu))


def find_load(policy: str, target: float, per_user: int, scenario) -> tuple[int, list]:
    """Search the concurrency whose mean R is within SEARCH_TOL of ``target``; returns (users, [(res, cpu)])."""
    users, tried = max(1, round(target / 0.7)), {}
    for _ in range(6):
        res, cpu = timed_run(policy, users, per_user, scenario)
        r = mean_running(res.steps)
        tried[users] = (abs(r / target - 1), [(res, cpu)])
        nxt = max(1, round(users * target / r))
        if abs(r / target - 1) <= SEARCH_TOL or nxt in tried:
            break
        users = nxt
    users = min(tried, key=lambda u: tried[u][0])
    return users, tried[users][1]


def goal_of(policy: str, target: int, main_job: bool) -> float:
    """The engine / floor target of one row: issue 11's per policy, or issue 19's per R on the main job
    (the nearer of R ~ 30 and R ~ 250 for another ``--r-targets``)."""
    if not main_job:
        return TARGETS[policy]
    return MAIN_JOB_TARGETS[min(MAIN_JOB_TARGETS, key=lambda r: abs(r - target))]


def floor_speed(floor: ModuleType, r: int, steps: int, repeat: int) -> float:
    """Fastest of ``repeat`` floor runs, steps per CPU-second."""
    return max(floor.floor_steps_per_cpu_s(num_requests=r, gamma=FLOOR_GAMMA, steps=steps, seed=0)
               for _ in range(repeat))


def print_profile(policy: str, target: int, users: int, per_user: int, scenario, top: int) -> None:
    """cProfile one run and print its ``top`` functions by own time: share of the profiled run, microseconds per
    step (cProfile's own overhead inflates every figure by about the same factor: read the shares)."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    res, _ = timed_run(policy, users, per_user, scenario)
    prof.disable()
    stats = pstats.Stats(prof).stats                       # (file, line, name) -> (cc, nc, tottime, cumtime, _)
    total, nsteps = sum(v[2] for v in stats.values()), len(res.steps)
    print(f"\nprofile {policy} R={target} ({users} users, {nsteps} steps, {total:.2f} s profiled): own time")
    print(f"{'share':>6} {'us/step':>8} {'calls/step':>10}  function")
    for (path, line, name), (_, nc, tt, _, _) in sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]:
        where = f"{Path(path).name}:{line}" if line else path
        print(f"{tt / total:6.1%} {1e6 * tt / nsteps:8.1f} {nc / nsteps:10.2f}  {name} ({where})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: fewer requests, 1 timing run, short floor")
    ap.add_argument("--repeat", type=int, default=None, help="timing runs per point, fastest kept (default 3)")
    ap.add_argument("--r-targets", default=None,
                    help="target mean running requests, comma-separated (default 32,256; main-job 30,250)")
    ap.add_argument("--workload", choices=("synthetic", "main-job"), default="synthetic",
                    help="synthetic (issue 11) or the README's main job, dspark on traces/prod.jsonl (issue 19)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a ratio target is missed")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the table, profile one run per row (cProfile) and print its N costliest functions")
    args = ap.parse_args(argv)
    repeat = max(1, args.repeat or (1 if args.quick else 3))
    main_job = args.workload == "main-job"
    per_user = 0 if main_job else (8 if args.quick else 12)
    floor_steps = 500 if args.quick else 4000
    r_targets = [int(x) for x in (args.r_targets or ("30,250" if main_job else "32,256")).split(",") if x.strip()]
    policies = ("dspark",) if main_job else ("dspark", "none")
    scenario = bench_scenario(main_job)
    floor = load_floor()
    if floor is None:
        print(f"shared folder {shared_dir()} has no bench/floor_bench.py (set SPECSIM_SHARED): floor part skipped")

    rows, out_of_band = [], []
    for policy in policies:
        for target in r_targets:
            users, runs = find_load(policy, target, per_user, scenario)
            runs += [timed_run(policy, users, per_user, scenario) for _ in range(repeat - len(runs))]
            res, cpu = min(runs, key=lambda rc: rc[1])
            r = mean_running(res.steps)
            if abs(r / target - 1) > BAND:
                out_of_band.append(f"{policy} at R={target}: measured mean R {r:.1f} with {users} users")
            nsteps = len(res.steps)
            eng = nsteps / cpu
            flo = floor_speed(floor, max(1, round(r)), floor_steps, repeat) if floor else None
            rows.append((policy, target, users, r, nsteps, cpu, eng, flo))

    print(f"{'policy':<7} {'target':>6} {'users':>5} {'mean R':>7} {'steps':>6} {'loop cpu s':>10} "
          f"{'engine st/cpu-s':>15} {'floor st/cpu-s':>14} {'ratio':>6} {'goal':>6}")
    for policy, target, users, r, nsteps, cpu, eng, flo in rows:
        ratio = f"{eng / flo:6.2f}" if flo else f"{'-':>6}"
        floor_s = f"{flo:,.0f}" if flo else "-"
        goal = f">={goal_of(policy, target, main_job):.2f}"
        print(f"{policy:<7} {'R=' + str(target):>6} {users:>5} {r:>7.1f} {nsteps:>6} {cpu:>10.3f} "
              f"{eng:>15,.0f} {floor_s:>14} {ratio} {goal:>6}")
    missed = 0
    for policy, target, _, r, _, _, eng, flo in rows:
        if flo is None:
            print(f"verdict {policy} R={target}: no floor (shared folder absent), not judged")
            continue
        goal = goal_of(policy, target, main_job)
        ok = eng / flo >= goal
        missed += not ok
        where = " (main job)" if main_job else ""
        print(f"verdict {policy} R={target}{where}: engine/floor {eng / flo:.2f} at mean R {r:.1f}, target >= "
              f"{goal:.2f}: {'MET' if ok else 'MISSED'}")
    for policy, target, users, r, nsteps, *_ in rows[:len(rows) if args.profile else 0]:
        print_profile(policy, target, users, per_user, scenario, args.profile)
    if out_of_band:
        print("ERROR: mean R outside the 10% band of its target: " + "; ".join(out_of_band), file=sys.stderr)
        return 2
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
