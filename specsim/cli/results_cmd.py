"""``specsim import-results`` and ``specsim run --result-format``: results in vLLM's and guidellm's words."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app, written_to
from specsim.errors import SpecsimInputError

#: ``--result-format`` values of ``specsim run`` and the file each writes into ``--out``.
RESULT_FORMATS = {"vllm": "vllm_result.json"}


def check_result_format(result_format: Optional[str], out: Optional[Path]) -> None:
    """Fail before a run when ``--result-format`` is unknown or has no ``--out`` folder to write into.

    Raises:
        SpecsimInputError: naming ``--result-format``.
    """
    if result_format is None:
        return
    if result_format not in RESULT_FORMATS:
        raise SpecsimInputError("--result-format", None, "result_format", f"one of {sorted(RESULT_FORMATS)}",
                                repr(result_format))
    if out is None:
        raise SpecsimInputError("--result-format", None, "out", "--out DIR to write the result file into",
                                "no --out")


def write_result_format(res, result_format: Optional[str], out: Optional[Path]) -> Optional[Path]:
    """Write ``res`` (a SimulationResult) in ``result_format`` into ``out``; returns the file or None.

    ``vllm`` writes ``out/vllm_result.json`` with the keys of ``vllm bench serve --save-result``
    (:func:`specsim.analysis.results.vllm_result`).
    """
    check_result_format(result_format, out)
    if result_format is None:
        return None
    from specsim.analysis.results import write_vllm_result

    return write_vllm_result(res, Path(out) / RESULT_FORMATS[result_format])


@app.command("import-results")
def import_results(
    files: list[Path] = typer.Argument(..., help="vllm bench serve --save-result JSON files and/or guidellm "
                                       "JSON reports."),
    out: Path = typer.Option(..., "--out", help="Measured-points JSON to write; name it <sweep dir>/measured.json "
                             "(or give the sweep folder itself) and specsim plot draws it with that sweep."),
    gpus: int = typer.Option(1, "--gpus", help="GPUs of the measured deployment (throughput per GPU)."),
    label: Optional[str] = typer.Option(None, "--label", help="Legend text for every point (default: from the file)."),
) -> None:
    """Turn real vllm bench serve / guidellm results into measured points for specsim plot's frontier (a note
    says so when they measured another model than the sweep in the --out folder simulates)."""
    import sys

    from specsim.analysis.results import other_model_note, read_results, save_measured
    from specsim.cli.outputs import output_file

    if out.is_dir():                     # a sweep folder: its measured.json, where specsim plot looks
        out = out / "measured.json"
    note = output_file(out, "--out")
    if note:
        print(f"note: {note}", file=sys.stderr)
    points = read_results(files, gpus=gpus, label=label)
    save_measured(points, out)
    rows = [[Path(p.source).name, p.tool, p.load, fmt.number(p.tps_per_user, 1), fmt.number(p.throughput_per_gpu, 1),
             p.tps_per_user_basis] for p in points]
    print(fmt.table(["file", "tool", "load", "TPS/user", "tok/s per GPU", "TPS/user from"], rows, keys=3,
                    title=f"{len(points)} measured points"))
    written_to(out, "measured points")
    other = other_model_note(points, out.parent)
    if other:
        typer.echo(fmt.wrapped(f"note: {other}"))
    missing = [p.label for p in points if p.tps_per_user is None or p.throughput_per_gpu is None]
    if missing:
        typer.echo(f"warning: {len(missing)} points lack TPOT or throughput and are not plotted: {missing}")
