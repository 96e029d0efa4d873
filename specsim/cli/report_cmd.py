"""``specsim report DIR``: one self-contained HTML page for a run or a sweep directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specsim.cli import app


@app.command()
def report(
    directory: Path = typer.Argument(..., help="A run directory (specsim run --out) or a sweep directory "
                                     "(specsim sweep --out)."),
    out: Optional[Path] = typer.Option(None, "--out", help="The HTML file (default: DIR/report.html)."),
    tiers: Optional[str] = typer.Option(None, "--tiers", help="TPS/user SLA tiers of the goodput tables (default: "
                                        "a sweep's stored tiers, else 50,100,150,200)."),
) -> None:
    """Write one HTML page (figures inline, opens offline) for a run or a sweep."""
    from specsim.cli.sweep_cmd import resolve_tiers

    tier_values = tuple(resolve_tiers(tiers, directory))        # a bad tier fails before --out is written
    from specsim.cli.outputs import check_output
    check_output(out, "--out")
    from specsim.analysis.report import write_report
    notes: tuple[str, ...] = ()
    if (directory / "points").is_dir():                 # a sweep: what its speculating points were charged
        from specsim.analysis.sweep_records import load_records
        from specsim.cli.sweep_notes import sweep_notices, warn_unreadable
        warn_unreadable(directory)
        notes = tuple(sweep_notices(load_records(directory)))
    elif (directory / "summary.json").is_file():        # a run: the warnings and notices its text printed
        notes = _run_notes(directory / "summary.json")
    rep = write_report(directory, out, tier_values, notes)
    print(f"{rep.kind} report with {len(rep.figures)} figures written to {rep.path}")


def _run_notes(path: Path) -> tuple[str, ...]:
    """The warnings and notices of a saved run (:func:`specsim.cli.run_cmd.run_notes`); none where its summary cannot
    be read (the report names the file then)."""
    import json

    from specsim.cli.run_cmd import run_notes

    try:
        summary = json.loads(path.read_text())
        return tuple(line for group in run_notes(summary) for line in group)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ()
