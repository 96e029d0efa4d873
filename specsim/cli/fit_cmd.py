"""``specsim fit LOGS... --out DIR`` and ``specsim counters FILE --out table.json``.

``fit`` builds two acceptance models from step logs (format: :mod:`specsim.acceptance.steplog`):
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
from specsim.cli import app, written_to
from specsim.errors import SpecsimInputError


@app.command("fit")
def fit(
    logs: list[Path] = typer.Argument(..., help="step-log Parquet files (format: specsim.acceptance.steplog)"),
    out: Path = typer.Option(..., "--out", help="output folder"),
    max_evals: int = typer.Option(400, "--max-evals", min=10, help="Nelder-Mead evaluations of the moment fit"),
) -> None:
    """Fit empirical and parametric acceptance models from step logs."""
    from specsim.acceptance.fitting import write_fit
    from specsim.acceptance.steplog import FIT_COLUMNS, read_step_logs
    from specsim.cli.outputs import check_output

    df = read_step_logs(logs, FIT_COLUMNS)
    check_output(out, "--out", folder=True)
    model = write_fit(df, out, [p.name for p in logs], max_evals=max_evals)
    rows = [[dom, fmt.number(model["implied_tau"][dom], 3), " ".join(fmt.number(r, 3) for r in rates)]
            for dom, rates in model["alpha"].items()]
    print(fmt.table(["domain", "tau", "alpha_1..alpha_G"], rows, notes=[
        "latent/confidence: " + ", ".join(f"{k}={fmt.number(v, 3)}" for k, v in model["params"].items()),
        "STS temperatures: " + " ".join(fmt.number(x, 3) for x in model["temperatures"]),
        f"use --set acceptance.model=fitted:{out} or empirical:{out}"],
        title=f"fitted acceptance ({model['num_blocks']} blocks, {model['num_requests']} requests, "
              f"{model['num_dropped_rows']} rows dropped as not fully labelled)"))
    print(_calibration_table(model["calibration_check"]))
    written_to(out / "model.json")
    written_to(out / "blocks.parquet")


def _calibration_table(check: dict) -> str:
    """``specsim fit``'s confidence goodness of fit (:func:`specsim.acceptance.fitting.calibration_check`) as text."""
    keys = ("ece_raw_log", "ece_raw_fit", "ece_sts_log", "ece_sts_fit", "ece_floor")
    rows = [[str(k + 1)] + [fmt.number(100 * check[key][k], 2) for key in keys] + ["yes" if check["differs"][k] else ""]
            for k in range(len(check["ece_floor"]))]
    bad = [str(k + 1) for k, d in enumerate(check["differs"]) if d]
    notes = [f"position{'s' * (len(bad) > 1)} {', '.join(bad)}: the fitted model's confidences are calibrated unlike "
             "the log's (raw or STS ECE apart by more than 1 point and twice the floor): runs on fitted:DIR see "
             "confidences of another quality than the drafter's; empirical:DIR replays the logged ones"] if bad else []
    return fmt.table(["pos", "ECE raw % log", "fitted", "ECE STS % log", "fitted", "floor %", "differs"], rows,
                     notes=notes + ["held-out half of the requests, ECE of cumulative survival; fitted: a log simulated "
                                    "from the fitted model with the log's requests; floor: a calibrated head's ECE "
                                    "from sampling alone at the log's size"],
                     title="confidence goodness of fit (the log vs the fitted model)")


@app.command("counters")
def counters(
    path: Path = typer.Argument(..., help="counters CSV, a vLLM Prometheus /metrics text dump, or (with --format) "
                                "a vllm bench serve result, DeepSpec evaluator output, Spec-Bench answers or a "
                                "vLLM synthetic-acceptance config"),
    out: Path = typer.Option(..., "--out", help="rate-table JSON to write"),
    domain: str = typer.Option("chat", "--domain", help="domain name for a /metrics dump (one configuration)"),
    config: Optional[list[str]] = typer.Option(None, "--config", help="CSV config_id(s) to keep (default all)"),
    format_: str = typer.Option("counters", "--format", help="counters (CSV or /metrics), vllm-bench, deepspec, "
                                "specbench or vllm-synthetic"),
    num_spec_tokens: Optional[int] = typer.Option(None, "--num-spec-tokens", help="K, positions every step "
                                                  "verified (required by --format specbench)"),
) -> None:
    """Convert per-position acceptance (counters, bench results, evaluator output) to a rate table."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out")
    from specsim.acceptance.counters import load_counters, rate_table

    if format_ == "counters":
        found = load_counters(path, domain=domain, configs=config)
    else:
        from specsim.acceptance.exchange import load_acceptance
        found = load_acceptance(path, format_, num_spec_tokens=num_spec_tokens,
                                name=domain if format_ == "vllm-bench" else None)
    table = rate_table(found, source=path.name)
    _write_json(out, table)
    for name, rates in table["alpha"].items():
        typer.echo(f"{name}: " + " ".join(fmt.number(r, 3) for r in rates)
                   + f"  (tau {fmt.number(table['mean_acceptance_length'][name], 3)})  acceptance rate"
                   f" {fmt.number(table['acceptance_rate'][name], 3)}")
    typer.echo("tau = acceptance length (tokens per step, the bonus token included); "
               "acceptance rate = accepted / drafted tokens")
    typer.echo(f"use --set acceptance.table={out}")
    written_to(out)


def _write_json(out: Path, obj: dict) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(obj, indent=1) + "\n")
    except OSError as e:
        raise SpecsimInputError(str(out), None, "--out", "a writable file path", e.strerror or type(e).__name__) from None


@app.command("export-acceptance")
def export_acceptance_cmd(
    out: Path = typer.Option(..., "--out", help="JSON to write (vLLM synthetic settings + DeepSpec names)"),
    table: Optional[Path] = typer.Option(None, "--table", help="a rate table ({'alpha': {domain: [...]}}, e.g. "
                                         "from specsim counters or specsim fit's model.json)"),
    run_dir: Optional[Path] = typer.Option(None, "--run", help="a specsim run --out folder (its step_log.parquet)"),
    drafter: Optional[str] = typer.Option(None, "--drafter", help="the scenario's acceptance model of this drafter"),
    gamma: Optional[int] = typer.Option(None, "--gamma", help="positions to export (default: all / the scenario's)"),
    scenario: Optional[Path] = typer.Option(None, "--scenario", help="scenario TOML for --drafter"),
) -> None:
    """Export per-position acceptance as vLLM's synthetic_acceptance_rates (and DeepSpec's metric names)."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out")
    from specsim.acceptance.counters import from_survival
    from specsim.acceptance.exchange import VLLM_CHECKED, export_acceptance, model_counters, run_acceptance

    given = [x for x in (table, run_dir, drafter) if x is not None]
    if len(given) != 1:
        raise SpecsimInputError("export-acceptance", None, "--table/--run/--drafter", "exactly one source",
                                f"{len(given)} given")
    if table is not None:
        from specsim.acceptance.tables import load_rate_table

        alpha = {d: list(r) for d, r in load_rate_table(table).items()}
        found, source = model_counters(alpha, gamma, table.name), table.name
    elif run_dir is not None:
        import numpy as np

        from specsim.acceptance.steplog import read_step_log
        per = run_acceptance(read_step_log(run_dir / "step_log.parquet"))
        found = {d: from_survival(np.nan_to_num(np.array(v["survival"], float)), d) for d, v in per.items()}
        source = f"run {run_dir.name}"
    else:
        from specsim.acceptance.fitting import resolve_acceptance_model
        from specsim.scenario import load_scenario
        sc = load_scenario(scenario, [])
        g = gamma or sc.engine.gamma
        model = resolve_acceptance_model(drafter, g, **sc.acceptance.model_args(drafter))
        found, source = model_counters(model.alpha, g, f"{drafter} acceptance model"), model.source or drafter
    doc = export_acceptance(found, str(source))
    _write_json(out, doc)
    for dom, cfg in doc["speculative_config"].items():
        typer.echo(f"{dom}: synthetic_acceptance_rates " + " ".join(fmt.number(r, 3) for r in
                   cfg["synthetic_acceptance_rates"]) + f"  (synthetic_acceptance_length "
                   f"{fmt.number(doc['synthetic_acceptance_length'][dom], 3)})")
    typer.echo(f"checked against {VLLM_CHECKED['synthetic_keys']}")
    typer.echo(f"wrote {out}; pass one domain's object in vllm serve --speculative-config (with method and model)")
