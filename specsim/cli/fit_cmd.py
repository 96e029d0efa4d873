"""``specsim fit LOGS... --out DIR`` and ``specsim counters FILE --out table.json``.

``fit`` builds two acceptance models from step logs (format: :mod:`specsim.steplog`):
- ``DIR/model.json``: the parametric latent model (pooled conditional rates per domain, latent spreads,
  confidence distortion, STS temperatures); use it with ``--set acceptance.model=fitted:DIR``, or only
  its rates with ``--set acceptance.table=DIR/model.json``;
- ``DIR/blocks.parquet``: the fully labelled logged blocks, replayed by ``--set acceptance.model=empirical:DIR``.

``counters`` converts aggregate per-position counters (a counters CSV or a vLLM ``/metrics`` dump,
:mod:`specsim.counters`) into a rate table ``{"alpha": {domain: [...]}}`` for ``acceptance.table``;
counters of adaptive-length runs are rejected (they cannot be turned into conditional rates).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from specsim.cli import app


@app.command("fit")
def fit(
    logs: list[Path] = typer.Argument(..., help="step-log Parquet files (format: specsim.steplog)"),
    out: Path = typer.Option(..., "--out", help="output folder"),
    max_evals: int = typer.Option(400, "--max-evals", min=10, help="Nelder-Mead evaluations of the moment fit"),
) -> None:
    """Fit empirical and parametric acceptance models from step logs."""
    import pandas as pd

    from specsim.fitting import write_fit
    from specsim.steplog import read_step_log

    frames = []
    for i, path in enumerate(logs):
        df = read_step_log(path)
        frames.append(df.assign(request_id=f"{i}:" + df["request_id"].astype(str)))
    model = write_fit(pd.concat(frames, ignore_index=True), out, [p.name for p in logs], max_evals=max_evals)
    console = Console()
    t = Table(title=f"fitted acceptance ({model['num_blocks']} blocks, {model['num_requests']} requests, "
                    f"{model['num_dropped_rows']} rows dropped as not fully labelled)")
    t.add_column("domain")
    t.add_column("alpha_1..alpha_G")
    t.add_column("tau", justify="right")
    for dom, rates in model["alpha"].items():
        t.add_row(dom, " ".join(f"{r:.3f}" for r in rates), f"{model['implied_tau'][dom]:.3f}")
    console.print(t)
    console.print("latent/confidence: " + ", ".join(f"{k}={v:.3f}" for k, v in model["params"].items()))
    console.print("STS temperatures: " + " ".join(f"{x:.3f}" for x in model["temperatures"]))
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
    from specsim.counters import parse_vllm_metrics, read_counters_csv
    from specsim.errors import SpecsimInputError

    if path.suffix.lower() == ".csv":
        rows = read_counters_csv(path)
        if config:
            rows = [c for c in rows if c.name in config]
        alpha = {}
        for c in rows:                                  # a config measured twice (e.g. two platforms) keeps both
            name, i = c.name, 2
            while name in alpha:
                name, i = f"{c.name}-{i}", i + 1
            alpha[name] = c
    else:
        try:
            text = path.read_text()
        except OSError as e:
            raise SpecsimInputError(str(path), None, None, "a readable /metrics dump", str(e)[:60]) from None
        alpha = {domain: parse_vllm_metrics(text, source=str(path))}
    if not alpha:
        raise SpecsimInputError(str(path), None, "config", "at least one configuration", "none selected")
    table = {}
    for name, c in alpha.items():
        cond = np.asarray(c.conditional, dtype=float)
        if not np.all(np.isfinite(cond) & (cond > 0) & (cond < 1)):
            # a zero survival leaves later positions undefined; 0 and 1 are not usable latent-model rates
            cond = np.clip(np.nan_to_num(cond, nan=1e-4), 1e-4, 1 - 1e-4)
        table[name] = [round(float(x), 6) for x in cond]
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"alpha": table, "source": str(path.name),
               "method": "conditional rates alpha_k = s_k / s_(k-1) from survival counters (specsim.counters)",
               "mean_acceptance_length": {n: c.mean_acceptance_length for n, c in alpha.items()}}
    out.write_text(json.dumps(payload, indent=1) + "\n")
    console = Console()
    for name, rates in table.items():
        console.print(f"{name}: " + " ".join(f"{r:.3f}" for r in rates)
                      + f"  (tau {alpha[name].mean_acceptance_length:.3f})")
    console.print(f"wrote {out}; use --set acceptance.table={out}")
