"""``specsim production fit|predict``: the DSpark paper's production result, fitted and predicted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app

production_app = typer.Typer(no_args_is_help=True, help="Fit a DeepSeek-V4 decode rank's engine-level step terms "
                                                        "to MTP-1 (Fig. 7) and predict DSpark's frontier "
                                                        "(docs/production.md).")
app.add_typer(production_app, name="production")

REPO = Path(__file__).resolve().parent.parent.parent


@production_app.command("fit")
def fit_cmd(model: str = typer.Option("v4-flash", help="v4-flash or v4-pro"),
            iterations: int = typer.Option(2, help="simulate-and-correct rounds after the surrogate fit"),
            cache: Path = typer.Option(Path("runs/production-cache"), help="cache of simulated points"),
            write: bool = typer.Option(True, help="write the profile, scenario TOML and fit record"),
            out: Path = typer.Option(Path("runs/production"), "--out", help="folder for the profile, the scenario "
                                     "TOML (naming the profile beside it) and the fit record; run predict with "
                                     "--scenario OUT/<model>.toml"),
            bundled: bool = typer.Option(False, "--bundled", help="write the package's bundled files instead "
                                         "(specsim/data/profiles, specsim/scenarios: what docs/production.md "
                                         "was regenerated from), replacing them")) -> None:
    """Fit the rank's engine-level terms (flops_eff, kernel_s, the exposed all-to-all fraction; physical bounds)
    to the MTP-1 frontier points of Fig. 7 (nothing from DSpark); writes profile <model>-rank-terms into --out
    (the bundled files only with --bundled)."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out", folder=True)
    from rich.console import Console

    from specsim.progress import ProgressBar
    from specsim.studies.production import deployment, fit_mtp1, write_fit

    dep = deployment(model)
    with ProgressBar("production fit", "points") as bar:
        fit = fit_mtp1(dep, iterations=iterations, cache_dir=cache, progress=bar.update)
    console = Console()
    console.print(json.dumps({k: v for k, v in fit.to_dict().items() if k != "iterations"}, indent=1))
    if write:
        for p in write_fit(dep, fit, REPO, None if bundled else out):
            console.print(f"written to {p.relative_to(REPO) if bundled else p}")


@production_app.command("predict")
def predict_cmd(model: str = typer.Option("v4-flash", help="v4-flash or v4-pro"),
                scenario: Optional[Path] = typer.Option(None, help="default: specsim/scenarios/<model>.toml"),
                concurrency: Optional[str] = typer.Option(None, help="comma-separated users per GPU"),
                seed: int = typer.Option(0),
                cache: Path = typer.Option(Path("runs/production-cache"), help="cache of simulated points"),
                json_out: Optional[Path] = typer.Option(None, "--json", help="write the full result here")) -> None:
    """Simulate dspark-async (DSpark-5) against mtp1 on the fitted scenario; compare with the paper."""
    from specsim.hardware.profile import resolve_profile
    from specsim.progress import ProgressBar
    from specsim.studies.production import deployment, predict
    from specsim.scenario import load_scenario

    dep = deployment(model)
    sc = load_scenario(scenario or REPO / "specsim" / "scenarios" / f"{model}.toml")
    prof = resolve_profile(sc.profile.name, sc.profile.lookup or None)
    conc = tuple(int(x) for x in concurrency.split(",")) if concurrency else None
    with ProgressBar("production predict", "points") as bar:
        out = predict(dep, sc, prof, seed=seed, concurrency=conc, cache_dir=cache, progress=bar.update)
    print_prediction(out)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        from specsim.jsonfiles import jsonable
        json_out.write_text(json.dumps(jsonable(out), indent=1, default=float) + "\n")
        print(f"written to {json_out}")


def print_prediction(out: dict, console=None) -> None:
    """Print one table: SLA gain, TPS/user at matched throughput, budget per request, frontier vs the paper.

    Args:
        out: the dict :func:`specsim.studies.production.predict` returns.
        console: unused (kept for callers); the table is :func:`specsim.fmt.table` at the terminal's width.
    """
    tier = out["sla_tier"]
    t = _Rows()
    thr = out["throughput_at_sla"]
    t.add_row(f"mtp1 tok/s/GPU at {tier:g} tok/s/user", fmt.number(thr["mtp1"], 0), "(fitted)")
    vs_paper = {float(k): m for k, m in out["dspark_frontier_vs_paper"].items()}     # the tier's row once, with it
    at_tier = vs_paper.pop(float(tier), None)
    t.add_row(f"dspark tok/s/GPU at {tier:g} tok/s/user", fmt.number(thr["dspark-async"], 0),
              fmt.number(at_tier["paper"], 0) if at_tier else "")
    t.add_row(f"gain at {tier:g} tok/s/user", fmt.percent(out["gain_at_sla"], 0, signed=True),
              fmt.percent(out["paper_gain_at_sla"], 0, signed=True))
    for k, m in out["tps_at_matched_throughput"].items():
        gain = fmt.percent(m["tps_gain"], 0, signed=True)
        t.add_row(f"dspark TPS/user at mtp1's {k}-tier throughput", f"{fmt.number(m['dspark_tps'])} ({gain})", "")
    reach = out["reach_tps"]
    t.add_row("frontier reach, tok/s/user (dspark / mtp1)",
              f"{fmt.number(reach['dspark-async'], 0)} / {fmt.number(reach['mtp1'], 0)}", "")
    for n, b in out["budget"].items():
        t.add_row(f"mean verify tokens/request at {n} users", fmt.number(b["predicted"], 2), f"{b['paper']:g}")
    t.add_row("mtp1 verify tokens/request", ", ".join(f"{v:g}" for v in out["mtp1_budget_values"]), "2")
    for k, m in vs_paper.items():
        t.add_row(f"dspark tok/s/GPU at {k:g} tok/s/user", fmt.number(m["predicted"], 0), fmt.number(m["paper"], 0))
    print(fmt.table(["quantity", "predicted", "paper"], t.rows,
                    title=f"{out['deployment']}: dspark-async (DSpark-5) vs mtp1, predicted"))


class _Rows:
    """Rows collected for :func:`specsim.fmt.table` (``add_row`` as rich's Table has it)."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []

    def add_row(self, *cells: str) -> None:
        self.rows.append(list(cells))
