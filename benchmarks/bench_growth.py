"""Memory and growth: wall time per request and peak RSS of open-loop runs of 10k, 30k and 100k requests.

The load is what ``specsim trace synth --num-requests N --rate RATE`` writes (``synth_trace(N, RATE)``:
Poisson arrivals, the default ``chat=1`` mix, seed 0), served by the default scenario under its default
policy ``dspark``, open loop, step log off.

RATE is 70% of the default scenario's saturation rate, measured first: a closed-loop run of the same synthetic
load at 2 x ``max_num_seqs`` users (512 for the default scenario; always more users than can run, so the
replica is never idle) with 8 requests per user, whose ``summary["request_throughput"]`` (completed requests per
second inside the closed-loop measurement window, ramp-up and drain excluded) is the saturation rate in
requests/s, counted as arrivals: divided by the share of the load that is servable, since the requests beyond
the default scenario's 4,096-token context window (Llama-2-7B; about 3% of the synthetic chat load) are refused
at arrival and cost the replica nothing (issue 24 item 6). ``--rate`` skips the measurement.

Each size runs in a fresh subprocess (this script with ``--child``), so the sizes do not share memory: its peak
RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` (``psutil``'s peak working set where ``resource`` is
missing) at the end of the run, imports included. Wall time per request is the wall time of the whole
``simulate()`` call (build, event loop, metrics) / N; CPU time per request is printed beside it (steadier on
a shared machine), and the event loop's own wall time per request (``summary["event_loop_wall_s"]``, where the
summary has it: the part without the fixed costs of building and summarising).

Targets (issue 11): wall time per request at the largest size within 15% of that at the smallest (the 100k/10k
ratio); peak RSS under 2 GB at every size.

Run: ``python benchmarks/bench_growth.py`` (a few minutes); ``--quick`` runs 1k / 3k / 10k; ``--sizes`` sets
the sizes; ``--check`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

RSS_LIMIT_BYTES = 2 * 1024**3
GROWTH_LIMIT = 0.15
LOAD_FRACTION = 0.70


def peak_rss_bytes() -> int | None:
    """Peak resident set size of this process in bytes (None when neither resource nor psutil is available)."""
    try:
        import resource
    except ImportError:
        try:
            import psutil
        except ImportError:
            return None
        return int(getattr(psutil.Process().memory_info(), "peak_wset", 0)) or None
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)   # bytes on macOS, KiB on Linux


def saturation_rate(quick: bool) -> float:
    """The arrival rate (req/s) that saturates the default scenario: closed-loop completed requests/s at
    2 x max_num_seqs users, divided by the servable share of the load (see the module doc)."""
    from specsim.scenario import load_scenario
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    scenario = load_scenario()
    users = 2 * int(getattr(scenario.cluster, "max_num_seqs", 256))
    res = simulate(synth_trace(users * (4 if quick else 8), 1.0, seed=0), scenario=scenario,
                   concurrency=users, seed=0)
    s = res.summary
    rate = (s.get("window") or s).get("request_throughput")   # the window's figure
    if not rate:
        raise SystemExit(f"bench_growth: no request_throughput in the closed-loop summary ({rate!r})")
    return float(rate) * s["total"] / (s["total"] - s["unservable"])


def child(num_requests: int, rate: float) -> None:
    """Run one size in this process and print one JSON line of its figures."""
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    trace = synth_trace(num_requests, rate, seed=0)
    wall0, cpu0 = time.perf_counter(), time.process_time()
    res = simulate(trace, seed=0)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    s = res.summary
    steps = res.steps
    col = "num_running" if "num_running" in steps.columns else "num_decode"
    print(json.dumps({
        "num_requests": num_requests, "wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": peak_rss_bytes(),
        "completed": int(s.get("completed", -1)), "unservable": int(s.get("unservable", 0)), "steps": len(steps),
        "mean_running": float(steps[col].mean()) if col in steps.columns else None,
        "duration_s": s.get("duration_s"), "loop_wall_s": s.get("event_loop_wall_s"),
    }))


def run_size(num_requests: int, rate: float) -> dict:
    """Run one size in a fresh subprocess; its JSON figures."""
    cmd = [sys.executable, __file__, "--child", str(num_requests), "--rate", repr(rate)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench_growth: the {num_requests}-request run failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mb(b: int | None) -> str:
    return "-" if b is None else f"{b / 1024**2:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 1k / 3k / 10k requests")
    ap.add_argument("--sizes", default=None, help="request counts, comma-separated (default 10000,30000,100000)")
    ap.add_argument("--rate", type=float, default=None, help="arrival rate, req/s (default: 70%% of saturation)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        child(args.child, args.rate)
        return 0
    sizes = [int(x) for x in (args.sizes or ("1000,3000,10000" if args.quick else "10000,30000,100000")).split(",")]
    if args.rate is None:
        sat = saturation_rate(args.quick)
        rate = LOAD_FRACTION * sat
        print(f"saturation: {sat:.2f} req/s (closed loop, default scenario); load: {rate:.2f} req/s "
              f"({LOAD_FRACTION:.0%} of saturation)")
    else:
        rate = args.rate
        print(f"load: {rate:.2f} req/s (given)")

    rows = [run_size(n, rate) for n in sizes]
    print(f"{'requests':>9} {'completed':>9} {'unservable':>10} {'steps':>8} {'mean R':>7} {'wall s':>8} {'wall ms/req':>11} "
          f"{'cpu ms/req':>10} {'loop ms/req':>11} {'peak RSS MB':>11}")
    for r in rows:
        n = r["num_requests"]
        mean_r = "-" if r["mean_running"] is None else f"{r['mean_running']:.1f}"
        loop = "-" if r["loop_wall_s"] is None else f"{1e3 * r['loop_wall_s'] / n:.3f}"
        print(f"{n:>9} {r['completed']:>9} {r['unservable']:>10} {r['steps']:>8} {mean_r:>7} {r['wall_s']:>8.2f} "
              f"{1e3 * r['wall_s'] / n:>11.3f} {1e3 * r['cpu_s'] / n:>10.3f} {loop:>11} {_mb(r['peak_rss_bytes']):>11}")

    first, last = rows[0], rows[-1]
    growth = (last["wall_s"] / last["num_requests"]) / (first["wall_s"] / first["num_requests"])
    growth_cpu = (last["cpu_s"] / last["num_requests"]) / (first["cpu_s"] / first["num_requests"])
    ok_growth = growth <= 1 + GROWTH_LIMIT
    peak = max((r["peak_rss_bytes"] or 0) for r in rows) or None
    ok_rss = peak is not None and peak < RSS_LIMIT_BYTES
    label = f"{last['num_requests']}/{first['num_requests']}"
    print(f"verdict growth: wall time per request {label} = {growth:.2f} (cpu {growth_cpu:.2f}), target <= "
          f"{1 + GROWTH_LIMIT:.2f}: {'MET' if ok_growth else 'MISSED'}")
    print(f"verdict memory: largest peak RSS {_mb(peak)} MB (any size), target < {RSS_LIMIT_BYTES / 1024**2:,.0f} MB: "
          f"{'MET' if ok_rss else ('MISSED' if peak else 'not measured')}")
    return 1 if (args.check and not (ok_growth and ok_rss)) else 0


if __name__ == "__main__":
    sys.exit(main())
