"""Side-by-side with Vidur: the same 300-request workload, the same measured A100 inputs, both simulators.

Runs ``specsim run --policy none`` on ``$SPECSIM_SHARED/anchors/vidur_run/workload.jsonl`` with the bundled
scenario ``vidur-codellama34b-a100-tp2`` (CodeLlama-34B, 2x A100, TP 2, colocated prefill in 512-token
chunks, batch cap 128) and prints, next to Vidur's results (``vidur_metrics_summary.json``):

* TTFT, TPOT and E2E (mean / p50 / p90 / p99, seconds), TPOT under both definitions (docs/vidur_side_by_side.md):
  specsim's ``(e2e - ttft) / (output - 1)`` and Vidur's ``decode_time_execution_plus_preemption_normalized``
  ``(e2e - ttft) / output``;
* output throughput, makespan, step counts, mean and max requests per step;
* the engine's decode-only step medians by batch size against Vidur's (``vidur_decode_step_ms_by_batch.csv``);
* wall times: specsim's CLI end to end (a fresh process, imports included), in-process ``simulate`` and its
  event loop, best of ``--repeat``; Vidur's as stated in the anchors README.

Nothing is fitted to Vidur's outputs: the profile comes from Vidur's inputs only (docs/profiles.md).

Run: ``python benchmarks/bench_vidur_side_by_side.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.trace import load_trace

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "specsim" / "scenarios" / "vidur-codellama34b-a100-tp2.toml"
# Vidur's wall times on the 2-core machine that produced the anchor (anchors/vidur_run/README.md, "Timing"):
VIDUR_WALL_FIRST_S = 27.0      # first run, trains the random-forest predictors
VIDUR_WALL_CACHED_S = 7.8      # predictors cached (about 3 s of it plots and CSV files)
VIDUR_EVENT_LOOP_S = 0.7       # 3,202 iterations


def shared_dir() -> Path:
    """``$SPECSIM_SHARED`` or ``../shared`` next to the repository."""
    return Path(os.environ.get("SPECSIM_SHARED", REPO.parent / "shared")).resolve()


def latency_stats(requests: pd.DataFrame) -> dict[str, pd.Series]:
    """Per-request latency series (seconds) under both simulators' names; see the module docstring."""
    decode_s = requests.e2el_s - requests.ttft_s
    return {
        "ttft_s": requests.ttft_s,
        "tpot_s (vidur: /output)": decode_s / requests.output_tokens,
        "tpot_s (specsim: /(output-1))": decode_s / (requests.output_tokens - 1),
        "e2e_s": requests.e2el_s,
    }


def decode_step_check(steps: pd.DataFrame, vidur_csv: Path) -> pd.DataFrame:
    """Median decode-only step time (ms) by number of decoding requests, specsim vs Vidur, with the ratio - 1."""
    ours = steps[steps.prefill_tokens == 0].groupby("num_decode").duration_s.median() * 1e3
    vid = pd.read_csv(vidur_csv).set_index("batch_size").median_step_ms
    both = pd.concat([ours.rename("specsim_ms"), vid.rename("vidur_ms")], axis=1).dropna()
    both["rel_err"] = both.specsim_ms / both.vidur_ms - 1
    return both


def _pct(a: float, b: float) -> str:
    return f"{100 * (a / b - 1):+6.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="in-process runs; the best wall time is reported")
    args = ap.parse_args()
    anchor = shared_dir() / "anchors" / "vidur_run"
    vidur = json.loads((anchor / "vidur_metrics_summary.json").read_text())
    scen = load_scenario(SCENARIO)
    trace = load_trace(anchor / "workload.jsonl")

    walls, loops = [], []
    for _ in range(max(1, args.repeat)):
        res = simulate(trace, "none", scen)
        walls.append(res.summary["wall_time_s"])
        loops.append(res.summary["event_loop_wall_s"])
    t0 = time.perf_counter()
    cli = subprocess.run([sys.executable, "-c", "from specsim.cli import main; main()", "run", "--policy", "none", "--json",
                          "--trace", str(anchor / "workload.jsonl"), "--scenario", str(SCENARIO)],
                         capture_output=True, text=True, check=True)
    cli_wall = time.perf_counter() - t0
    cli_summary = json.loads(cli.stdout)
    s, r, steps = res.summary, res.requests, res.steps

    print(f"{'metric':<30} {'stat':>5} {'specsim':>10} {'vidur':>10} {'diff':>8}")
    vid_keys = {"ttft_s": "ttft_s", "e2e_s": "e2e_s"}
    for name, ser in latency_stats(r).items():
        vkey = vid_keys.get(name, "tpot_s")
        for stat, q in (("mean", None), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            ours = float(ser.mean() if q is None else ser.quantile(q))
            theirs = vidur[vkey][stat]
            print(f"{name:<30} {stat:>5} {ours:>10.4f} {theirs:>10.4f} {_pct(ours, theirs):>8}")
    thr = vidur["throughput"]
    last_done = float(r.done_s.max())
    rows = [
        ("output throughput (tok/s)", s["output_throughput"], thr["output_tok_s"]),
        ("makespan (s)", s["duration_s"], thr["makespan_s"]),
        ("request throughput (req/s)", s["request_throughput"], thr["req_s"]),
        ("median TPS/user", s["median_tps_per_user"], vidur["per_user_tok_s_median"]),
        ("steps", len(steps), vidur["batches"]["n"]),
        ("decode-only steps", int((steps.prefill_tokens == 0).sum()), vidur["batches"]["decode_only"]),
        ("mean requests running/step", float(steps.num_running.mean()), vidur["batches"]["mean_batch_size"]),
        ("max requests running/step", int(steps.num_running.max()), vidur["batches"]["max_batch_size"]),
    ]
    for name, ours, theirs in rows:
        print(f"{name:<36} {ours:>10.3f} {theirs:>10.3f} {_pct(ours, theirs):>8}")
    print(f"specsim: makespan = last completion {last_done:.3f} s - first arrival "
          f"{float(r.arrival_s.min()):.3f} s (Vidur's origin is not stated in its summary)")

    check = decode_step_check(steps, anchor / "vidur_decode_step_ms_by_batch.csv")
    err = check.rel_err.abs()
    print(f"decode-only step medians, batch {check.index.min()}..{check.index.max()}: "
          f"mean |err| {100 * err.mean():.1f}%, max {100 * err.max():.1f}% (batch {int(err.idxmax())})")

    print(f"wall time  specsim CLI (fresh process, imports included): {cli_wall:6.2f} s"
          f"   [in-CLI simulate {cli_summary['wall_time_s']:.2f} s]")
    print(f"           specsim simulate(), best of {len(walls)}: {min(walls):6.2f} s, event loop {min(loops):.2f} s "
          f"({len(steps) / min(loops):,.0f} steps/s)")
    print(f"           Vidur (anchors README): first run {VIDUR_WALL_FIRST_S:.1f} s, cached {VIDUR_WALL_CACHED_S:.1f} s, "
          f"event loop {VIDUR_EVENT_LOOP_S:.1f} s ({vidur['batches']['n'] / VIDUR_EVENT_LOOP_S:,.0f} iterations/s)")
    if hasattr(os, "getloadavg"):
        print(f"           (load average here: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    if not np.isclose(cli_summary["output_throughput"], s["output_throughput"]):
        raise RuntimeError("internal error: the CLI and simulate() disagree on output throughput")


if __name__ == "__main__":
    main()
