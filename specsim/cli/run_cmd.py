"""``specsim run``: one simulation on a trace, a metrics summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app
from specsim.errors import SpecsimInputError


def print_summary(s: dict, console) -> None:
    """A readable summary table plus the per-domain breakdown.

    Args:
        s: a run summary (``SimulationResult.summary``: vllm-bench metric names, ``load``, ``per_domain``).
        console: a ``rich.console.Console`` to print on.
    """
    from rich.table import Table

    load = s["load"]
    where = (f"closed loop, {load['concurrency']} users, window {load['window_start_s']:.1f}-"
             f"{load['window_end_s']:.1f} s" if load["mode"] == "closed" else f"open loop x{load['rate_scale']}")
    t = Table(title=f"specsim run: policy {s['policy']} (drafter {s['drafter']}, gamma {s['gamma']}), "
                    f"seed {s['seed']}, {where}", show_header=True)
    t.add_column("metric")
    t.add_column("value", justify="right")
    keys = ["completed", "unfinished", "unservable", "total", "duration_s", "request_throughput",
            "output_throughput", "output_throughput_per_gpu", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
            "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms", "mean_e2el_ms",
            "mean_tps_per_user", "median_tps_per_user", "mean_acceptance_length", "acceptance_rate",
            "mean_verify_tokens_per_request", "clipped_verify_lengths", "steps", "wall_time_s"]
    for k in keys:
        t.add_row(k, fmt.value(s.get(k)))
    console.print(t)
    d = Table(title=f"per domain ({s['measured_requests']} measured requests"
                    + (", issued inside the closed-loop window)" if load["mode"] == "closed" else ")"),
              show_header=True)
    cols = ["requests", "mean_ttft_ms", "mean_tpot_ms", "mean_tps_per_user", "mean_acceptance_length",
            "acceptance_rate"]
    d.add_column("domain")
    for c in cols:
        d.add_column(c, justify="right")
    for dom, m in s["per_domain"].items():
        d.add_row(dom, *[fmt.value(m[c]) for c in cols])
    console.print(d)
    for note in s.get("profile_range", {}).get("notices", []):
        console.print(f"[yellow]notice:[/] {note}", soft_wrap=True)
    if s["unservable"]:
        console.print(f"[yellow]warning:[/] {s['unservable']} of {s['total']} requests are unservable: they can "
                      "never fit the KV capacity (see unservable_reason in requests.parquet with --out)")


@app.command()
def run(
    trace: Path = typer.Option(..., "--trace", help="Request trace (canonical JSONL)."),
    policy: str = typer.Option("dspark", "--policy", help="Policy name (list: specsim policies) or "
                               "path/to/file.py:Name."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario TOML (default: bundled)."),
    set_: list[str] = typer.Option([], "--set", help="Override: section.key=value (repeatable)."),
    seed: int = typer.Option(0, "--seed", help="The one seed of every random draw."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Closed loop with N users."),
    rate_scale: float = typer.Option(1.0, "--rate-scale", help="Open loop: divide arrival times by x."),
    gamma: Optional[int] = typer.Option(None, "--gamma", help="Draft block length (overrides engine.gamma)."),
    drafter: Optional[str] = typer.Option(None, "--drafter", help="dspark, dflash, eagle3 or mtp."),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="specdecpp threshold h."),
    num_requests: Optional[int] = typer.Option(None, "--num-requests", help="Use the first N requests."),
    max_sim_s: Optional[float] = typer.Option(None, "--max-sim-s", help="Stop at this simulated time."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write summary.json and Parquet records here."),
) -> None:
    """Simulate a speculative-decoding serving cluster on a trace and print its metrics."""
    from rich.console import Console

    from specsim.scenario import load_scenario
    from specsim.simulation import simulate
    from specsim.trace import load_trace

    if num_requests is not None and num_requests < 1:
        raise SpecsimInputError("--num-requests", None, "num_requests", "an int >= 1", str(num_requests))
    scen = load_scenario(scenario, set_)
    tr = load_trace(trace)
    if num_requests is not None:
        tr = tr.head(num_requests)
    knobs = {} if threshold is None else {"threshold": threshold}
    res = simulate(tr, policy, scen, seed=seed, concurrency=concurrency, rate_scale=rate_scale,
                   max_sim_s=max_sim_s, gamma=gamma, drafter=drafter, record_step_log=out is not None, **knobs)
    if out is not None:
        res.save(out)
    if as_json:
        print(json.dumps(res.summary, default=float))
    else:
        console = Console()
        print_summary(res.summary, console)
        if out is not None:
            console.print(f"records written to {out}")
