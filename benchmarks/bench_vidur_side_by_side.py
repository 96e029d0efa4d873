"""Side-by-side with Vidur: the same 300-request workload, the same measured A100 inputs, both simulators.

Runs ``specsim run --policy none`` on ``$SPECSIM_SHARED/anchors/vidur_run/workload.jsonl`` with the bundled
scenario ``vidur-codellama34b-a100-tp2`` (CodeLlama-34B, 2x A100, TP 2, colocated prefill in 512-token
chunks, batch cap 128) and prints, next to Vidur's results (``vidur_metrics_summary.json``):

* TTFT and E2E (mean / p50 / p90 / p99, seconds), and TPOT under Vidur's definition,
  ``decode_time_execution_plus_preemption_normalized`` = ``(e2e - ttft) / output``, against Vidur's figure;
  specsim's own TPOT, ``(e2e - ttft) / (output - 1)``, is printed without a Vidur column (Vidur does not
  report it; comparing the two definitions would mix a 0.65-8% definitional gap into the difference);
* output throughput, makespan, step counts, mean and max requests per step;
* the engine's decode-only step medians by batch size against Vidur's (``vidur_decode_step_ms_by_batch.csv``);
* wall times. Like for like only: ``--vidur-cmd 'CMD'`` runs Vidur on this machine in this run (a fresh
  process, as specsim's CLI is timed), and only then is a ratio printed. Without it Vidur's figures are the
  recorded ones of ``anchors/vidur_run/README.md``, printed labelled as recorded on another machine, date
  not recorded there, and no ratio. Every line states this machine, its load and the date.

Nothing is fitted to Vidur's outputs: the profile comes from Vidur's inputs only (docs/profiles.md).

Run: ``python benchmarks/bench_vidur_side_by_side.py [--repeat 3] [--vidur-cmd 'python -m vidur.main ...']``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace

REPO = Path(__file__).resolve().parent.parent
SCENARIO = REPO / "specsim" / "scenarios" / "vidur-codellama34b-a100-tp2.toml"
# Vidur's wall times as recorded in anchors/vidur_run/README.md ("Timing"): another machine (2 CPU cores, no
# GPU), date and load not recorded. Printed labelled as such; never divided by a figure measured here.
VIDUR_RECORDED = {"first run (trains predictors)": 27.0, "predictors cached": 7.8, "event loop": 0.7}
VIDUR_RECORDED_LABEL = "recorded in anchors/vidur_run/README.md on another 2-core machine, date not recorded"


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
    ap.add_argument("--vidur-cmd", default="", help="a command that runs Vidur's simulation of the same workload "
                    "on this machine; timed in this run as a fresh process, like specsim's CLI")
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
    vid_keys = {"ttft_s": "ttft_s", "e2e_s": "e2e_s", "tpot_s (vidur: /output)": "tpot_s"}
    for name, ser in latency_stats(r).items():
        vkey = vid_keys.get(name)                       # None: Vidur reports no figure of this definition
        for stat, q in (("mean", None), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            ours = float(ser.mean() if q is None else ser.quantile(q))
            if vkey is None:
                print(f"{name:<30} {stat:>5} {ours:>10.4f} {'n/a':>10} {'':>8}")
                continue
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

    here = (f"{platform.machine()} {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
            if hasattr(os, "getloadavg") else f"{platform.machine()} {os.cpu_count()} cores")
    print(f"wall time, this machine ({here}), {datetime.date.today().isoformat()}:")
    print(f"  specsim CLI (fresh process, imports included): {cli_wall:6.2f} s"
          f"   [in-CLI simulate {cli_summary['wall_time_s']:.2f} s]")
    print(f"  specsim simulate(), best of {len(walls)}: {min(walls):6.2f} s, event loop {min(loops):.2f} s "
          f"({len(steps) / min(loops):,.0f} steps/s)")
    if args.vidur_cmd:
        t0 = time.perf_counter()
        subprocess.run(shlex.split(args.vidur_cmd), capture_output=True, check=True)
        vidur_wall = time.perf_counter() - t0
        print(f"  Vidur (fresh process, this run): {vidur_wall:6.2f} s; specsim CLI / Vidur = "
              f"{cli_wall / vidur_wall:.2f} (same machine, same run, same definition)")
    else:
        rec = ", ".join(f"{k} {v:.1f} s" for k, v in VIDUR_RECORDED.items())
        print(f"  Vidur: {rec} ({VIDUR_RECORDED_LABEL}; not comparable with the figures above: "
              "pass --vidur-cmd to time it here)")
    if not np.isclose(cli_summary["output_throughput"], s["output_throughput"]):
        raise RuntimeError("internal error: the CLI and simulate() disagree on output throughput")


if __name__ == "__main__":
    main()
