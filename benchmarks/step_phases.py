"""Where an event loop's time goes: microseconds per step in each phase of the engine's step, measured by wrapping
the engine's methods with a wall clock (no profiler: each wrapper adds about 0.3 us, counted in its phase).

Jobs (the same as ``bench_side_by_side.py``'s):

* ``main``: the README's main job, ``dspark`` on ``traces/prod.jsonl`` with the default scenario.
* ``vidur TRACE SCENARIO``: policy ``none`` on a Vidur workload (``bench_side_by_side.py`` writes the 3,000-request
  trace it times).
* ``POLICY``: any other policy on ``traces/prod.jsonl`` with the default scenario.

Phases are nested (``schedule`` holds ``admit`` and ``plan``, ``plan`` holds ``draft``, ``decide`` ...); each row
gives its own time with its nested rows included, and ``the rest`` is the loop time outside every top-level phase
(SimPy's event machinery, the replica's loop, arrivals and prefill instances, releases after a stretch). With
``--whole``, a fresh process's wall time from start to exit instead (interpreter, imports, the kernels' first
load, the loop, the rest of the run, the exit). Run:
``python benchmarks/step_phases.py [main | vidur TRACE SCENARIO | POLICY] [--requests N] [--whole]``; a benchmark,
not a test.
"""

from __future__ import annotations

import time

START = time.time()             # the interpreter is up (for --whole)

import argparse  # noqa: E402
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: (class path, method, phase name, depth): the phases timed, in the order they are printed.
PHASES = (
    ("specsim.engine.scheduler:Scheduler", "schedule", "schedule (admit + plan)", 0),
    ("specsim.engine.scheduler:Scheduler", "_admit", "admit", 1),
    ("specsim.engine.scheduler:Scheduler", "_plan", "plan", 1),
    ("specsim.engine.policy_calls:PolicyCalls", "proposal", "policy proposal", 2),
    ("specsim.engine.scheduler:Scheduler", "_useful_drafts", "useful drafts", 2),
    ("specsim.engine.scheduler:Scheduler", "_draft", "draft draws", 2),
    ("specsim.engine.policy_calls:PolicyCalls", "decide", "policy decide", 2),
    ("specsim.engine.policy_calls:PolicyCalls", "_view", "view", 3),
    ("specsim.engine.scheduler:Scheduler", "_limit_verify_lengths", "limit verify lengths", 2),
    ("specsim.engine.kv_manager:KVManager", "exact_blocks_used", "KV blocks used", 2),
    ("specsim.engine.step_runner:StepRunner", "step_time_s", "step time", 0),
    ("specsim.engine.step_runner:StepRunner", "finish", "finish (emit, record)", 0),
    ("specsim.engine.step_runner:StepRunner", "_emit_decode", "emit decode", 1),
    ("specsim.engine.scheduler:Scheduler", "postprocess", "postprocess (release)", 0),
    ("specsim.engine.replica:Replica", "_plain_steps", "plain stretches", 0),
)


def _wrap(cls, method: str, totals: dict, name: str) -> None:
    fn = getattr(cls, method)

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            totals[name][0] += time.perf_counter() - t0
            totals[name][1] += 1

    setattr(cls, method, timed)


def install() -> dict:
    """Wrap every phase's method; returns ``{phase: [seconds, calls]}``, filled as the run goes."""
    import importlib

    totals: dict = defaultdict(lambda: [0.0, 0])
    for path, method, name, _ in PHASES:
        module, cls = path.split(":")
        owner = getattr(importlib.import_module(module), cls)
        if hasattr(owner, method):
            _wrap(owner, method, totals, name)
    return totals


def run(job: list[str], requests: int | None, stamps: dict | None = None) -> tuple[dict, float, int]:
    """Run ``job`` with the phases wrapped: (totals, loop seconds, steps). ``stamps`` gets wall-clock times
    (``time.time()``) after the imports, after the warm-up run and after the run (then no phase is wrapped)."""
    totals = install() if stamps is None else defaultdict(lambda: [0.0, 0])
    from specsim.scenario import load_scenario
    from specsim.simulation import simulate
    from specsim.workload.jsonl import load_trace

    if stamps is not None:
        stamps["imported"] = time.time()

    if job[0] == "vidur":
        trace, scenario, policy = load_trace(job[1]), load_scenario(job[2]), "none"
    else:
        trace, scenario = load_trace(str(REPO / "traces" / "prod.jsonl")), load_scenario()
        policy = "dspark" if job[0] == "main" else job[0]
    if requests:
        trace = trace.head(requests)
    simulate(trace.head(8), policy, scenario, seed=0)      # loads the kernels (and the run's own warm-up) untimed
    totals.clear()
    if stamps is not None:
        stamps["warmed"] = time.time()
    res = simulate(trace, policy, scenario, seed=0)
    if stamps is not None:
        stamps["ran"] = time.time()
        stamps["loop_s"] = float(res.summary["event_loop_wall_s"])
    return totals, float(res.summary["event_loop_wall_s"]), len(res.steps)


def whole_process(job: list[str]) -> None:
    """Print where a fresh process's wall time goes: interpreter start, imports (the phase wrappers' too),
    loading the inputs and the kernels (a run of the first 8 requests), the run's loop, the rest of the run
    (building, summarising) and the interpreter's exit. Runs this script in a child process, no phase wrapped."""
    import json
    import subprocess
    import sys

    t0 = time.time()
    out = subprocess.run([sys.executable, __file__, *job, "--stamps"], capture_output=True, text=True, check=True)
    t1 = time.time()
    st = json.loads(out.stdout.strip().splitlines()[-1])
    parts = {"interpreter start": st["start"] - t0, "imports": st["imported"] - st["start"],
             "inputs, kernels' first load (8 requests)": st["warmed"] - st["imported"], "event loop": st["loop_s"],
             "rest of the run (build, summary)": st["ran"] - st["warmed"] - st["loop_s"],
             "exit (interpreter teardown)": t1 - st["ran"]}
    print(f"whole process ({' '.join(job)}): {t1 - t0:.2f} s")
    for name, secs in parts.items():
        print(f"  {name:<42s} {secs:6.2f} s")


def report(totals: dict, loop_s: float, steps: int, label: str = "") -> None:
    """Print microseconds per step and the share of the loop of each phase."""
    print(f"where the time goes{' (' + label + ')' if label else ''}: loop {loop_s:.2f} s, {steps} steps, "
          f"{1e6 * loop_s / max(steps, 1):.1f} us per step")
    top = 0.0
    for _, _, name, depth in PHASES:
        if name not in totals:
            continue
        secs, calls = totals[name]
        top += secs if depth == 0 else 0.0
        print(f"  {'  ' * depth}{name:<{30 - 2 * depth}s} {1e6 * secs / max(steps, 1):7.1f} us/step  "
              f"{100 * secs / loop_s:5.1f}%  ({calls} calls)")
    rest = loop_s - top
    print(f"  {'the rest (SimPy, loop, arrivals)':<30s} {1e6 * rest / max(steps, 1):7.1f} us/step  "
          f"{100 * rest / loop_s:5.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("job", nargs="+", help="main | vidur TRACE SCENARIO | POLICY")
    ap.add_argument("--requests", type=int, default=None, help="the trace's first N requests only")
    ap.add_argument("--whole", action="store_true", help="where a fresh process's time goes, start to exit")
    ap.add_argument("--stamps", action="store_true", help=argparse.SUPPRESS)     # the child of --whole
    args = ap.parse_args()
    if args.whole:
        whole_process(args.job)
        return
    stamps = {"start": START} if args.stamps else None
    totals, loop_s, steps = run(args.job, args.requests, stamps)
    if stamps is not None:
        import json

        print(json.dumps(stamps))
        return
    report(totals, loop_s, steps, " ".join(args.job))


if __name__ == "__main__":
    main()
