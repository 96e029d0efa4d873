"""``specsim recommend SWEEP_DIR``: per SLA tier, the deployable policy to run and the configuration to paste."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app


@app.command()
def recommend(
    sweep_dir: Path = typer.Argument(..., help="A directory written by specsim sweep --out."),
    tiers: Optional[str] = typer.Option(None, "--tiers", help="SLA tiers, TPS/user (tok/s); default: the tiers "
                                        "stored with the sweep, else 50,100,150,200."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of text."),
) -> None:
    """Per tier: the winning deployable policy (not oracle or dspark-global), its knobs and load, its margin over
    the runner-up (paired t-test over seeds), and its vLLM, TensorRT-LLM and SGLang configuration."""
    from specsim.analysis.tuned import read_tuned
    from specsim.analysis.sweep_tables import gpu_split, per_all_gpus_note
    from specsim.cli.sweep_cmd import resolve_tiers
    from specsim.cli.sweep_notes import folder_records
    from specsim.sweep.recommend import recommend as recommend_tiers, recommendations_text

    tier_list = resolve_tiers(tiers, sweep_dir)
    records, tuned = read_tuned(sweep_dir, folder_records(sweep_dir))   # a tune's probes are not curves (compare's)
    recs = recommend_tiers(records, tier_list)
    if as_json:
        print(json.dumps({"tiers": tier_list, "recommendations": [r.to_dict() for r in recs], "tuned": tuned}))
        return
    print(recommendations_text(recs) + ("" if recs else _fastest(records)))
    missing = [t for t in tier_list if t not in {r.tier for r in recs}]
    if recs and missing:                # a tier no deployable curve reaches was dropped in silence
        print(fmt.wrapped(f"tier{'s' if len(missing) > 1 else ''} {', '.join(f'{t:g}' for t in missing)} "
                          f"tok/s/user: no deployable policy meets {'them' if len(missing) > 1 else 'it'}"
                          + _fastest(records)))
    for t in tuned:
        print(fmt.wrapped(_tuned_line(t)))
    note = per_all_gpus_note(gpu_split(records))
    if recs and note:
        print(fmt.wrapped(f"tok/s/GPU: per decode GPU. {note}"))


def _tuned_line(t: dict) -> str:
    """What ``specsim tune`` found in this folder, per tier (its result file, ``tuned/*.json``): recommend reads
    the swept curves only, as compare does, so the tuned values are named beside the answer, with how to sweep
    them."""
    spec = t.get("spec") or {}
    policy, knob = spec.get("policy", "?"), (spec.get("knob") or {}).get("name", "knob")
    picks = "; ".join(f"tier {r['tier']:g}: {knob}={r['value']:g}, {r['throughput_per_gpu']:,.0f} tok/s/GPU"
                      for r in t.get("tiers", []) if r.get("value") is not None)
    return (f"tuned ({policy}, specsim tune): {picks or 'no tier reached'}. A tune's points sample the knob "
            f"sparsely and are not a swept curve: sweep the value you pick (specsim sweep --policies {policy} with "
            f"that {knob}) to compare it here, as compare does.")


def _fastest(records: list[dict]) -> str:
    """Where no tier is met: the sweep's fastest deployable point (its TPS/user, curve and load), so the reader
    sees how far the tiers are."""
    from specsim.analysis.frontier import X
    from specsim.analysis.tiers import deployable
    from specsim.sweep import results_frame, seed_spread

    df = results_frame(records)
    df = df[(df.status == "ok") & df.curve.map(deployable)]
    if df.empty:
        return ""
    points = seed_spread(df)                   # seed means, as the tables and tiers read them (not one seed's)
    best = points.loc[points[f"{X}_mean"].idxmax()]
    return (f": the sweep's fastest point runs {best[f'{X}_mean']:.1f} TPS/user ({best.curve} at {best['mode']} "
            f"load {best.load:g}, mean over its seeds); lower the tiers or sweep lighter loads")
