"""``specsim calibrate LOGS... --out DIR``: fit Sequential Temperature Scaling on step logs.

Writes into DIR:
- ``temperatures.json``: ``{"temperatures": [T_1, ..., T_gamma], "source": [...], ...}`` (scenarios carry
  the list; policies then see sigmoid(logit(c_k) / T_k));
- ``metrics.csv`` / ``metrics.json``: per position, ECE / AUROC / Brier of the cumulative survival before
  and after STS on the held-out half of the requests;
- ``reliability.png`` and ``survival_hist.png`` (held-out half).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from specsim import fmt
from specsim.cli import app, written_to

#: Default ECE bins: DeepSpec's 20, the value of ``specsim.acceptance.calibration.N_BINS`` (kept here so that
#: ``--help`` needs no numeric library; a test checks that the two agree).
DEFAULT_BINS = 20


def _table(report, width: int | None = None) -> str:
    """The table of a :class:`specsim.acceptance.calibration.CalibrationReport`, one row per draft position, as
    text (:func:`specsim.fmt.table`)."""
    rows = [[str(r.position), fmt.number(r.temperature, 3), fmt.value(r.n_eval), fmt.number(r.accept_rate, 3),
             fmt.number(100 * r.ece_raw, 2), fmt.number(100 * r.ece_sts, 2), fmt.number(r.auroc_raw, 3),
             fmt.number(r.auroc_sts, 3)] for r in report.metrics.itertuples()]
    return fmt.table(["pos", "T", "n eval", "accept", "ECE raw %", "ECE STS %", "AUROC raw", "AUROC STS"], rows,
                     width=width, title="STS calibration (held-out half of the requests; ECE of cumulative "
                                        f"survival, {report.n_bins} bins)")


@app.command("calibrate")
def calibrate(
    logs: list[Path] = typer.Argument(..., help="step-log Parquet files (format: specsim.acceptance.steplog)"),
    out: Path = typer.Option(..., "--out", help="output folder"),
    n_bins: int = typer.Option(DEFAULT_BINS, "--bins", min=2, help="ECE bins (DeepSpec uses 20)"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="write reliability and histogram PNGs"),
) -> None:
    """Fit per-position STS temperatures on step logs; report ECE and AUROC before and after."""
    from specsim.acceptance import calibration as cal
    from specsim.acceptance.steplog import CALIBRATION_COLUMNS, read_step_logs
    from specsim.cli.outputs import check_output

    df = read_step_logs(logs, CALIBRATION_COLUMNS)
    check_output(out, "--out", folder=True)
    report = cal.calibrate_step_log(df, source=[p.name for p in logs], n_bins=n_bins, warn_to_stderr=False)
    out.mkdir(parents=True, exist_ok=True)
    (out / "temperatures.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    report.metrics.to_csv(out / "metrics.csv", index=False)
    (out / "metrics.json").write_text(report.metrics.to_json(orient="records", indent=2) + "\n")
    if plots:
        arr = cal.step_log_arrays(df)
        ev = ~cal.split_by_request(arr["request_id"])
        conf, labels, known = arr["conf_raw"][ev], arr["labels"][ev], arr["known"][ev]
        calibrated = cal.apply_temperatures(conf, report.temperatures)
        from specsim.acceptance.calibration_plots import plot_reliability, plot_survival_hist

        plot_reliability(conf, calibrated, labels, known, out / "reliability.png", n_bins)
        plot_survival_hist(conf, calibrated, known, out / "survival_hist.png", n_bins)
    print(_table(report))
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for name in ("temperatures.json", "metrics.csv", "metrics.json") + (
            ("reliability.png", "survival_hist.png") if plots else ()):
        written_to(out / name)
