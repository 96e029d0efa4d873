"""``specsim fit LOGS... --out DIR`` and ``specsim counters FILE --out table.json``.

``fit`` builds two acceptance models from step logs (format: :mod:`specsim.analysis.steplog`):
- ``DIR/model.json``: the parametric latent model (pooled conditional rates per domain, latent spreads,
  confidence distortion, STS temperatures); use it with ``--set acceptance.model=fitted:DIR``, or only
  its rates with ``--set acceptance.table=DIR/model.json``;
- ``DIR/blocks.parquet``: the fully labelled logged blocks, replayed by ``--set acceptance.model=empirical:DIR``.

``counters`` converts aggregate per-position counters (a counters CSV or a vLLM ``/metrics`` dump,
:mod:`specsim.acceptance.counters`) into a rate table ``{"alpha": {domain: [...]}}`` for ``acceptance.table``,
printing each configuration's acceptance length (tokens per step, bonus included) and acceptance rate
(accepted / drafted tokens); counters of adaptive-length runs are rejected (they cannot be turned into
conditional rates).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app
from specsim.errors import SpecsimInputError


@app.command("fit")
def fit(
    logs: list[Path] = typer.Argument(..., help="step-log Parquet files (format: specsim.analysis.steplog)"),
    out: Path = typer.Option(..., "--out", help="output folder"),
    max_evals: int = typer.Option(400, "--max-evals", min=10, help="Nelder-Mead evaluations of the moment fit"),
) -> None:
    """Fit empirical and parametric acceptance models from step logs."""
    from rich.console import Console
    from rich.table import Table

    from specsim.acceptance.fitting import write_fit
    from specsim.analysis.steplog import read_step_logs

    model = write_fit(read_step_logs(logs), out, [p.name for p in logs], max_evals=max_evals)
    console = Console()
    t = Table(title=f"fitted acceptance ({model['num_blocks']} blocks, {model['num_requests']} requests, "
                    f"{model['num_dropped_rows']} rows dropped as not fully labelled)")
    t.add_column("domain")
    t.add_column("alpha_1..alpha_G")
    t.add_column("tau", justify="right")
    for dom, rates in model["alpha"].items():
        t.add_row(dom, " ".join(fmt.number(r, 3) for r in rates), fmt.number(model["implied_tau"][dom], 3))
    console.print(t)
    console.print("latent/confidence: " + ", ".join(f"{k}={fmt.number(v, 3)}" for k, v in model["params"].items()))
    console.print("STS temperatures: " + " ".join(fmt.number(x, 3) for x in model["temperatures"]))
    console.print(f"wrote {out / 'model.json'} and {out / 'blocks.parquet'}; use "
                  f"--set acceptance.model=fitted:{out} or empirical:{out}")


@app.command("counters")
def counters(
    path: Path = typer.Argument(..., help="counters CSV or a vLLM Prometheus /metrics text dump"),
    out: Path = typer.Option(..., "--out", help="rate-table JSON to write"),
    domain: str = typer.Option("chat", "--domain", help="domain name for a /metrics dump (one configuration)"),
    config: Optional[list[str]] = typer.Option(None, "--config", help="CSV config_id(s) to keep (default all)"),
) -> None:
    """Convert per-position acceptance counters to a rate table {"alpha": {domain: [...]}}."""
    from specsim.acceptance.counters import load_counters, rate_table

    table = rate_table(load_counters(path, domain=domain, configs=config), source=path.name)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(table, indent=1) + "\n")
    except OSError as e:
        raise SpecsimInputError(str(out), None, "--out", "a writable file path", e.strerror or type(e).__name__) from None
    for name, rates in table["alpha"].items():
        typer.echo(f"{name}: " + " ".join(fmt.number(r, 3) for r in rates)
                   + f"  (tau {fmt.number(table['mean_acceptance_length'][name], 3)})  acceptance rate"
                   f" {fmt.number(table['acceptance_rate'][name], 3)}")
    typer.echo("tau = acceptance length (tokens per step, the bonus token included); "
               "acceptance rate = accepted / drafted tokens")
    typer.echo(f"wrote {out}; use --set acceptance.table={out}")
