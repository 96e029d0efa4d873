"""``specsim replay``: serve a trace with real models, predict it with the simulator, print the errors.

torch is imported inside the command (through :mod:`specsim.backends.torch.replay`'s lazy imports), so
this module and ``specsim --help`` work without it.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app
from specsim.errors import torch_missing


class Backend(str, Enum):
    torch = "torch"


@app.command("replay")
def replay(
    trace: Path = typer.Option(..., "--trace", help="canonical JSONL trace (domains chat, code, math)"),
    policy: str = typer.Option(..., "--policy", help="policy name or path/to/file.py:Name"),
    out: Path = typer.Option(..., "--out", help="output folder"),
    backend: Backend = typer.Option(Backend.torch, "--backend", help="real-model backend"),
    target: str = typer.Option("tiny", "--target", help="'tiny', 'smollm2' or a local model folder"),
    drafter_ckpt: Optional[Path] = typer.Option(None, "--drafter-ckpt",
                                                help="drafter checkpoint (default for tiny: bundled dspark.pt)"),
    fit_logs: Optional[Path] = typer.Option(None, "--fit-logs", help="step log of ANOTHER run to fit acceptance"),
    fit_seed: Optional[int] = typer.Option(None, "--fit-seed", help="or: rerun the trace with this seed to fit"),
    fit_policy: str = typer.Option("static", "--fit-policy", help="policy of the --fit-seed run"),
    seed: int = typer.Option(0, "--seed", help="seed of the replayed run"),
    gamma: int = typer.Option(7, "--gamma", min=1, help="draft block length"),
    greedy: bool = typer.Option(False, "--greedy", help="greedy acceptance instead of sampling"),
    temperature: float = typer.Option(1.0, "--temperature", help="sampling temperature"),
    max_batch: int = typer.Option(16, "--max-batch", min=1, help="most running requests"),
    profile: Optional[Path] = typer.Option(None, "--profile", help="measured profile JSON (default: measure now)"),
    acceptance: str = typer.Option("empirical", "--acceptance", help="'empirical' or 'fitted' acceptance model"),
    threads: int = typer.Option(1, "--threads", min=1, help="torch CPU threads"),
) -> None:
    """Replay a trace with real models and compare the simulator's prediction with it."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out", folder=True)
    from rich.console import Console

    from specsim.workload import load_trace
    try:
        from specsim.backends.torch.replay import run_replay
        import torch  # noqa: F401
    except ImportError:
        raise torch_missing("specsim replay") from None
    from specsim.progress import ProgressBar

    console = Console()
    with ProgressBar("replay", "requests served") as bar:
        def status(line: str) -> None:
            console.print(f"[dim]{line}[/dim]")
            bar.update(bar.done, None, line)
        rep = run_replay(load_trace(trace), policy, out, target_spec=target, drafter_ckpt=drafter_ckpt,
                         fit_logs=fit_logs, fit_seed=fit_seed, fit_policy=fit_policy, seed=seed, gamma=gamma,
                         greedy=greedy, temperature=temperature, max_batch=max_batch, profile_path=profile,
                         acceptance=acceptance, threads=threads, progress=status, served=bar.update)
    rows = rep["comparison"]
    cal = "predicted_calibrated" in rows[0]
    cols = ["metric", "measured", "predicted", "rel. error"] + (["predicted (cal.)", "rel. error (cal.)"]
                                                                if cal else [])
    cells = []
    for r in rows:
        cells.append([r["label"], fmt.number(r["measured"], 3), fmt.number(r["predicted"], 3),
                      fmt.percent(r["rel_error"], signed=True)])
        if cal:
            cells[-1] += [fmt.number(r["predicted_calibrated"], 3),
                          fmt.percent(r["rel_error_calibrated"], signed=True)]
    print(fmt.table(cols, cells, title=f"replay {policy} on {target} vs simulation (acceptance fitted from "
                                       f"{rep['fit_source']})",
                    notes=["predicted: measured target profile + drafter cost; cal.: step cost calibrated on the "
                           f"fitting run. Files written under {out}"]))
