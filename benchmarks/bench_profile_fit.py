"""``specsim profile fit`` on large per-step CSVs: wall time and the size of what it writes and prints.

A synthetic CSV of measured steps is written to a temporary folder for each size (default 100,000 and 500,000
rows): R uniform in 1..128 running requests (B = R, decode steps), a mean context of 200..4,000 tokens rounded to
8 tokens (so rows of one shape recur, as an engine's per-step log gives them), and step times made by the step
model of qwen3-8b on an H100 with ``kernel_s`` 4 us and ``per_request_step_s`` 20 us, times lognormal noise of
5%. ``specsim profile fit`` then runs on it in a fresh process (the same interpreter, so the tree on ``sys.path``
is the one measured) and the script prints, per size: the wall time, the written profile's size, the printed
output's size in lines and bytes, and the fitted constants (they should come out near 4e-06 and 2e-05).

Run: ``python benchmarks/bench_profile_fit.py`` (about a minute after the fix); ``--sizes 10000,100000`` picks the
sizes; ``--timeout S`` stops a fit that runs longer (reported as ``timeout``; default 900 s).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

TRUTH = {"kernel_s": 4e-6, "per_request_step_s": 2e-5}


def write_csv(path: Path, rows: int, seed: int = 0) -> None:
    """A per-step CSV of ``rows`` decode steps made by the step model (module docstring), at ``path``."""
    from specsim.hardware.profile_fit import predict_observations
    from specsim.hardware.step_observation import StepObservation
    from specsim.hardware.stepmodel import step_model

    rng = np.random.default_rng(seed)
    r = rng.integers(1, 129, rows).astype(float)
    ctx = np.round(rng.uniform(200, 4000, rows) / 8) * 8
    truth = step_model("qwen3-8b", "h100").with_terms(**TRUTH)
    shapes, inverse = np.unique(np.column_stack([r, ctx]), axis=0, return_inverse=True)
    obs = [StepObservation(a, a, c, 1.0, "synthetic", None, "step", "") for a, c in shapes]
    t_ms = predict_observations(truth, obs)[inverse.ravel()] * rng.lognormal(0.0, 0.05, rows) * 1e3
    with open(path, "w") as f:
        f.write("num_requests,context_tokens,step_time_ms\n")
        f.writelines(f"{a:g},{c:g},{t:.4f}\n" for a, c, t in zip(r, ctx, t_ms))


def run_fit(csv: Path, out: Path, timeout: float) -> dict:
    """Run ``specsim profile fit`` on ``csv`` in a fresh process: wall seconds, output sizes and constants."""
    cmd = [sys.executable, "-m", "specsim", "profile", "fit", "--model", "qwen3-8b", "--gpu", "h100", str(csv),
           "--out", str(out)]
    env = {**os.environ, "COLUMNS": "200"}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.perf_counter() - t0, "status": "timeout"}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"wall_s": wall, "status": f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"}
    params = json.loads(out.read_text())["metadata"]["fit"]["params"]
    return {"wall_s": wall, "status": "ok", "profile_bytes": out.stat().st_size,
            "stdout_lines": proc.stdout.count("\n"), "stdout_bytes": len(proc.stdout.encode()), "params": params}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100000,500000", help="rows per CSV, comma-separated")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds before a fit is stopped")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (int(s) for s in args.sizes.split(",")):
            csv = Path(tmp) / f"steps_{rows}.csv"
            write_csv(csv, rows)
            res = run_fit(csv, Path(tmp) / f"fit_{rows}.json", args.timeout)
            line = f"{rows:>9,} rows ({csv.stat().st_size / 1e6:5.1f} MB CSV): {res['status']:>7s} in {res['wall_s']:7.1f} s"
            if res["status"] == "ok":
                fitted = ", ".join(f"{k} = {v:.4g}" for k, v in res["params"].items())
                line += (f"; profile {res['profile_bytes'] / 1e6:7.3f} MB; printed {res['stdout_lines']:,} lines "
                         f"({res['stdout_bytes'] / 1e6:.3f} MB); {fitted}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
