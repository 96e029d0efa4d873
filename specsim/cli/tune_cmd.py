"""``specsim tune``: the best knob value of a policy per SLA tier (specsim.sweep.tune), beside untuned policies.

Top-level imports stay light (typer and the standard library): the library is imported inside the
command, so ``specsim tune --help`` loads no numeric library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app


@app.command()
def tune(
    policy: str = typer.Option(..., "--policy", help="Policy to tune: a registry name or path/file.py:Name."),
    knob: str = typer.Option(..., "--knob", help="Knob and range: NAME=LO:HI or NAME=LO:HI:STEP."),
    tiers: str = typer.Option(..., "--tiers", help="SLA tiers, TPS/user (tok/s), e.g. 100,150,200."),
    trace: Path = typer.Option(..., "--trace", help="Request trace (canonical JSONL)."),
    out: Path = typer.Option(..., "--out", help="Results directory (points/ shared with sweeps, tuned/*.json)."),
    concurrency: str = typer.Option("1,2,4,...,256", "--concurrency", help="Closed-loop load points."),
    knob_points: Optional[int] = typer.Option(None, "--knob-points",
                                              help="Grid values without a STEP (default 10; ints: every int)."),
    seeds: int = typer.Option(3, "--seeds", help="Seeds per simulated point (base-seed .. base-seed+N-1)."),
    base_seed: int = typer.Option(0, "--base-seed", help="First seed."),
    untuned: Optional[str] = typer.Option(
        None, "--untuned", help="Policies swept over every load for comparison (default: the tuned policy at its "
        "default knobs; '' for none)."),
    method: str = typer.Option("search", "--method", help="search (few points) or grid (brute force)."),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="Scenario TOML (default: bundled)."),
    set_: list[str] = typer.Option([], "--set", help="Override: section.key=value (repeatable)."),
    drafter: Optional[str] = typer.Option(None, "--drafter", help="Override the scenario's drafter."),
    num_requests: Optional[int] = typer.Option(None, "--num-requests", help="Each point runs the trace's first N "
                                               "requests (default: all; see --requests-per-user)."),
    requests_per_user: Optional[int] = typer.Option(
        None, "--requests-per-user", help="A point at C users runs the trace's first K x C requests (with "
        "--num-requests N: max(N, K x C); never more than the trace), so that a closed-loop window opens."),
    executor: str = typer.Option("process", "--executor", help="serial, process, ray or dask."),
    jobs: Optional[int] = typer.Option(None, "--jobs", min=1, help="Parallel workers (default: CPU count)."),
    quiet: bool = typer.Option(False, "--quiet", help="Print only the result file's path."),
) -> None:
    """For each SLA tier, the knob value with the most throughput per GPU, from as few simulated points as it can."""
    from specsim.cli.outputs import check_output
    from specsim.cli.sweep_cmd import parse_list, parse_tiers, resumable
    from specsim.cli.sweep_notes import (check_closed_points, note_closed_loads, note_more_requests_than_trace,
                                         note_point_requests, note_unit_warnings, note_whole_trace_folder,
                                         print_speculation_notes)
    from specsim.scenario import load_scenario
    from specsim.sweep import SweepSpec, run_sweep
    from specsim.workload import load_trace
    from specsim.sweep.knobs import check_gamma_range, parse_knob
    from specsim.sweep.tune import TuneSpec, tune as run_tune, write_tuned

    spec = TuneSpec(policy=policy, knob=parse_knob(knob, policy, knob_points),
                    tiers=tuple(parse_tiers(tiers)),
                    concurrency=tuple(parse_list(concurrency, int, "concurrency")),
                    seeds=tuple(range(base_seed, base_seed + max(seeds, 1))), num_requests=num_requests,
                    requests_per_user=requests_per_user, drafter=drafter)
    scen = load_scenario(scenario, set_)
    note_unit_warnings(scen)
    check_gamma_range(policy, spec.knob, scen, drafter)
    check_output(out, "--out", folder=True)
    tr = load_trace(trace)
    check_closed_points(num_requests, requests_per_user, spec.loads, (), trace, tr)
    note_more_requests_than_trace(num_requests, trace, len(tr))
    note_point_requests(num_requests, requests_per_user, spec.loads, (), trace, len(tr))
    note_whole_trace_folder(out, requests_per_user, num_requests, tr)
    note_closed_loads(tr, trace, spec.loads, scen, num_requests, requests_per_user)
    from specsim.progress import ProgressBar
    # the search stops once each tier's pick is bracketed: the full grid is an upper bound (so is the ETA)
    with resumable(Path(out), "tune"), ProgressBar(
            "tune", "points", enabled=not quiet,
            total_note="at most; the search stops early" if method == "search" else "") as bar:
        bar.update(0, spec.grid_runs)
        res = run_tune(spec, scen, tr, out, method=method, executor=executor, jobs=jobs,
                       progress=lambda n: bar.update(n))
    names = tuple(p.strip() for p in (policy if untuned is None else untuned).split(",") if p.strip())
    untuned_ids: list[str] = []
    if names:
        with resumable(Path(out), "tune"), ProgressBar("untuned", "points", enabled=not quiet) as bar:
            sw = run_sweep(SweepSpec(policies=names, concurrency=spec.loads, seeds=spec.seeds,
                                     num_requests=num_requests, requests_per_user=requests_per_user, drafter=drafter),
                           scen, tr, out, executor=executor, jobs=jobs, progress=bar, tiers=spec.tiers)
        untuned_ids = [p.id for p in sw.points]
    path = write_tuned(out, res, untuned_ids)
    if quiet:
        print(path)
        return
    print(result_text(res, path, len(untuned_ids)))
    from specsim.analysis.sweep_records import load_records
    print_speculation_notes(load_records(out))


def result_text(res, path: Path, num_untuned: int, width: int | None = None) -> str:
    """The per-tier picks, the runs used against the full grid, and where the result is, as text
    (:func:`specsim.fmt.table`; ``width``: characters to fit, None: the terminal's), with the result's own
    ``notes`` in the table's notes and its ``cautions`` under the table (:class:`specsim.sweep.tune.TuneResult`:
    built by the library, so a Python caller reads the same lines)."""
    k = res.spec.knob.name
    multi = len(res.spec.seeds) > 1
    cols = ["tier", "status", k, "tok/s/GPU"] + (["+-std", "seeds"] if multi else []) + ["2nd", "2nd tok/s"]
    cols += ["wins", "signif."] if multi else []
    rows = []
    for r in res.tiers:
        row = [f"{r.tier:g}", r.status, "-" if r.value is None else f"{r.value:g}", fmt.number(r.throughput_per_gpu, 0)]
        row += [fmt.number(r.throughput_std, 0), str(r.num_seeds)] if multi else []
        row += ["-" if r.runner_up is None else f"{r.runner_up:g}", fmt.number(r.runner_up_throughput, 0)]
        row += [f"{r.seed_wins}/{len(res.spec.seeds)}", "yes" if r.significant else "no"] if multi else []
        rows.append(row)
    notes = [f"{res.num_runs} simulated points of the {res.grid_runs}-point knob x load grid "
             f"({res.num_runs / res.grid_runs:.0%}; {res.computed} computed now, {res.reused} reused)"
             + (f", plus {num_untuned} untuned points" if num_untuned else "") + f"; result written to {path}",
             "2nd: the runner-up value; covered: even the heaviest load beats the tier (its throughput is shown)"
             + ("." if multi else "; with one seed no margin can be tested.")]
    notes += res.notes
    if multi:
        notes.append("+-std, seeds: standard deviation over the seeds whose own frontier reaches the tier; wins: "
                     "seeds where the pick beats the runner-up; signif.: the lead holds by a one-sided paired t-test "
                     "over seeds (p < 0.05 on 3 seeds or more; the rule compare uses).")
    text = fmt.table(cols, rows, keys=1, width=width, notes=notes,
                     title=f"{res.spec.policy}: best {k} per SLA tier ({res.method})")
    return "\n".join([text] + [fmt.wrapped(line, width) for line in res.cautions])
