"""``specsim speedup``: each curve's gain over its folder's baseline at every swept load, and where it ends.

A command of its own rather than a ``compare`` option: ``compare`` reads one folder and answers per SLA tier (its
``--tiers``, ``--goodput``, ``--csv`` and ``--json`` schema are all per tier), while this view reads several folders
(MTP and DSpark cannot share one) and answers per load. Top-level imports stay light, as the CLI's.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specsim import fmt
from specsim.cli import app

#: :func:`specsim.analysis.speedup.crossovers`' statuses (copied: this module imports no pandas at start-up).
NEVER_BELOW, BELOW_AT_LIGHTEST = "none within the swept loads", "below 1 already at the lightest load"


def _ratio_cell(ratio: float, mine: list, theirs: list) -> str:
    """``1.32x``, with ``*`` where one of its two points is flagged and ``**`` where both are; ``-`` for NaN."""
    if not ratio == ratio:
        return fmt.MISSING
    return f"{ratio:.2f}x" + ("**" if mine and theirs else "*" if mine or theirs else "")


def _flag_cell(r, base: str) -> str:
    """What the flags of a row's two points say: ``static: thrashing; none: overloaded (a ratio of two flagged
    points)``; "" when neither is flagged."""
    said = [f"{who}: {' and '.join(kinds)}" for who, kinds in ((r.curve, r.curve_flags), (base, r.baseline_flags))
            if kinds]
    text = "; ".join(said) + (" (a ratio of two flagged points)" if r.both_flagged else "")
    for kind, words in (("queued", "requests queue"), ("short-window", "few requests measured")):
        who = [w for w, notes in ((r.curve, r.curve_notes), (base, r.baseline_notes)) if kind in notes]
        text += (f"{'; ' if text else ''}{words}: {fmt.and_list(who)}") if who else ""
    return text


def _load_text(load: float, mode: str, modes: set) -> str:
    return f"{load:g}" if len(modes) == 1 else f"{load:g} users" if mode == "closed" else f"x{load:g}"


def _crossover_line(c, modes: set) -> str:
    """One crossover note: ``static (gamma=7, drafter=dspark) [runs/d]: throughput speed-up falls below 1 at 83.2 users
    (between 64 and 128)``, or its status."""
    def at(load: float) -> str:
        return fmt.users(load) if c["mode"] == "closed" else f"x{load:g} the trace's rate"

    if c["status"] == "crosses":
        a, b = c["between"]
        text = f"falls below 1 at {at(round(c['crossover_load'], 1))} (interpolated between {a:g} and {b:g})"
        if c["flagged"]:
            text += f"; read through flagged points ({' and '.join(c['flagged'])})"
    elif c["status"] in (NEVER_BELOW, BELOW_AT_LIGHTEST):
        text = f"{c['status']} ({c['edge_speedup']:.2f}x at {at(c['edge_load'])})"
    else:
        text = c["status"]
    return f"{c['label']} [{c['folder']}{'' if len(modes) == 1 else ', ' + c['mode']}]: {text}"


def speedup_text(tab, width: int | None = None) -> str:
    """:func:`specsim.analysis.speedup.speedup_table`'s rows and crossovers as text (every name and number whole)."""
    base = tab.attrs.get("baseline", "none")
    modes, multi = set(tab["mode"]), bool((tab.num_seeds > 1).any())
    head = "users" if modes == {"closed"} else "rate x" if modes == {"open"} else "load"
    cols = ["folder", "curve", head, "seeds", "tok/s/GPU", f"{base} tok/s/GPU", "speed-up"]
    cols += (["+-std", "verdict"] if multi else []) + ["TPS/user", f"{base} TPS/user", "TPS ratio", "cautions"]
    rows = []
    for _, r in tab.iterrows():
        row = [r.folder, r.label, _load_text(r.load, r["mode"], modes), str(r.num_seeds),
               fmt.number(r.throughput_per_gpu, 0), fmt.number(r.baseline_throughput_per_gpu, 0),
               _ratio_cell(r.throughput_speedup, r.curve_flags, r.baseline_flags)]
        if multi:
            row += [fmt.number(r.throughput_speedup_std, 3) if r.num_seeds > 1 else fmt.MISSING,
                    r.throughput_verdict if r.num_seeds > 1 else fmt.MISSING]
        row += [fmt.number(r.tps_per_user), fmt.number(r.baseline_tps_per_user),
                _ratio_cell(r.tps_speedup, r.curve_flags, r.baseline_flags), _flag_cell(r, base)]
        rows.append(row)
    notes = [f"crossover {_crossover_line(c, modes)}" for c in tab.attrs["crossovers"].to_dict(orient="records")]
    notes += [f"speed-up: tok/s/GPU (per decode GPU) over {base}'s in the same folder at the same load; TPS ratio: "
              f"TPS/user over {base}'s; both of seed means over the seeds both ran. Crossover: the load where the "
              "throughput speed-up falls below 1, linear in the load between the two swept loads that bracket it."
              + (" +-std: the standard deviation of the per-seed ratios; verdict: the paired t-test of compare on "
                 "the side of 1 the ratio lies (above 1: holds: the speed-up holds over the seeds; 3 seeds or more)."
                 if multi else ""),
              "* one of the two points is flagged, ** both are (a ratio of two flagged points): thrashing, "
              "prefill-bound, think-bound, cut off or overloaded points measure something other than the policy "
              "(the warnings of specsim sweep and compare). Not flags, said in the last column: requests queue (closed "
              "loop: users waited for admission, the load's real answer where drafts fill the KV pool sooner; TTFT "
              "holds that wait, TPS/user counts decode speed only) and few requests measured (noisy figures)."]
    return fmt.table(cols, rows, keys=3, width=width, notes=notes,
                     title=f"speed-up over {base} per load (closed loop: users; open loop: x the trace's rate)")


@app.command()
def speedup(
    sweep_dirs: list[Path] = typer.Argument(..., help="One or more directories written by specsim sweep --out "
                                            "(e.g. one swept with --drafter mtp, one with --drafter dspark)."),
    baseline: str = typer.Option("none", "--baseline", help="The curve each folder's ratios divide by (its own, "
                                 "at the same load)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Per load: each curve's throughput per GPU and TPS/user over its folder's baseline, and the load where the
    throughput speed-up falls below 1."""
    from specsim.analysis.speedup import speedup_json, speedup_table
    from specsim.cli.sweep_notes import folder_records
    from specsim.fmt import folder_titles

    recs = [folder_records(d) for d in sweep_dirs]
    tab = speedup_table(recs, baseline, names=folder_titles(sweep_dirs))
    if as_json:
        print(json.dumps(speedup_json(tab)))
        return
    print(speedup_text(tab))
