"""``specsim compare``'s table as text: one row per (tier, curve), the winner cell, and the notes that explain the
columns (:func:`compare_text`). Top-level imports stay light, as the CLI's."""

from __future__ import annotations

import math

from specsim import fmt

_fmt = fmt.number


def _compare_row(r, has_oracle: bool, multi_seed: bool = True) -> list[str]:
    """One row of the comparison table, formatted (``-`` where a value is not defined; the seed spread only
    when ``multi_seed``)."""
    thr = _fmt(r.throughput_per_gpu, 0) if math.isfinite(r.throughput_per_gpu) else r.status
    thr += " (covered)" if r.status == "covered" else ""
    gain = f"{r.gain_vs_baseline:+.1%}" if math.isfinite(r.gain_vs_baseline) else "-"
    mg = f"{r.tps_gain_at_matched:+.1%}" if math.isfinite(r.tps_gain_at_matched) else "-"
    row = [f"{r.tier:g}", r.curve, thr] + ([_fmt(r.throughput_std, 0)] if multi_seed else [])
    row += [gain, _fmt(r.tps_at_matched_throughput), mg]
    if has_oracle:
        row.append(f"{r.oracle_fraction:.1%}" if math.isfinite(r.oracle_fraction) else "-")
    win, tied = "", r.get("tied_with")
    if isinstance(tied, str) and tied:                 # an exact tie names the others, on every tied row
        win = f"TIE with {tied} (equal throughput at the tier)"
    elif not isinstance(r.get("winner"), float) and bool(r.get("winner")):      # tuned rows hold NaN there
        from specsim.analysis.tiers import too_close

        head = "TOO CLOSE TO CALL:" if too_close(r.margin, r.margin_verdict) else "WINNER"     # recommend's tie
        win = head + (f" {r.margin:+.1%} vs {r.runner_up}, {r.margin_verdict}" if r.runner_up else "")
    load = r.best_goodput_load       # users, or a fractional rate scale (0.5): shown as given, never rounded
    if not r.best_goodput_per_gpu > 0:          # no request met the tier at any load: no load is the best one
        load = math.nan
    return row + [_fmt(r.best_goodput_per_gpu, 0), f"{load:g}" if math.isfinite(load) else fmt.MISSING,
                  f"{r.attainment_at_best:.0%}" if math.isfinite(r.attainment_at_best) else "-",
                  win, r.get("advice") if isinstance(r.get("advice"), str) else ""]


#: An advice cell at least this long that repeats on several rows is said once, in a note under the table
#: (:func:`_advice_once`); a short one ("add loads between 16 and 64") stays in its cells.
ONCE_CHARS = 40


def _advice_once(rows: list[list[str]]) -> list[str]:
    """Each long advice (:data:`ONCE_CHARS`) that repeats in ``rows`` (formatted, tier and curve first, advice last)
    replaced in its cells by a mark ("see (a) below"), in place; returns the notes that say each once, naming its
    curves and tiers (the README tour's sweep repeated "its heaviest load 64 is already thrashing and
    prefill-bound: lift that limit ..." on three rows of one tier, six lines each at 80 columns)."""
    where: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        if len(r[-1]) >= ONCE_CHARS:
            where.setdefault(r[-1], {}).setdefault(r[0], []).append(r[1])
    notes = []
    for text, tiers in where.items():
        if sum(map(len, tiers.values())) < 2:
            continue
        mark = f"({'abcdefghijklmnopqrstuvwxyz'[len(notes)] if len(notes) < 26 else len(notes) + 1})"
        for r in rows:
            if r[-1] == text:
                r[-1] = f"see {mark} below"
        alike: dict[tuple[str, ...], list[str]] = {}            # tiers with the same curves named together
        for tier, curves in tiers.items():
            alike.setdefault(tuple(curves), []).append(tier)
        who = "; ".join(f"{fmt.and_list(c)} at tier{'s' if len(t) > 1 else ''} {fmt.and_list(t)}"
                        for c, t in alike.items())
        notes.append(f"{mark} advice for {who}, each: {text}")
    return notes


#: compare's note where tuned rows are shown (a fresh user read a tuned row above the winner as a mistake).
TUNED_NOTE = (" A tuned row (specsim tune) is not a curve but a pick per tier from the tune's own runs: never named "
              "winner, even where its figure is higher (tune's warnings say when a pick is read from a thrashing or "
              "prefill-bound point; docs/tuning.md).")


def compare_text(tab, sweep_dir, width: int | None = None, gpus: tuple[int, int] | None = None) -> str:
    """:func:`specsim.analysis.frontier.compare`'s table and the notes that explain its columns, as text.

    Every curve name, tier and number is shown whole at any ``width`` (None: the terminal's): the table
    is stacked per (tier, curve) when its columns do not fit (:func:`specsim.fmt.table`). ``gpus``: the
    sweep's (decode, prefill) GPUs (:func:`gpu_split`), for the per-all-GPUs factor.
    """
    from specsim.analysis.significance import SEEDS_SCOPE, TRAFFIC_TEST
    from specsim.analysis.sweep_tables import per_all_gpus_note
    from specsim.analysis.tiers import TIE_MARGIN

    has_oracle = tab.oracle_fraction.notna().any()
    multi = bool((tab.num_seeds > 1).any())            # a seed spread exists only with two or more seeds
    cols = ["tier", "curve", "tok/s/GPU"] + (["+-std"] if multi else []) + ["gain", "TPS@match", "gain@match"]
    cols += ["of oracle"] if has_oracle else []
    cols += ["goodput*", "load*", "attain*", "winner", "advice"]
    rows = [_compare_row(r, has_oracle, multi) for _, r in tab.iterrows()]
    notes = ["tok/s/GPU: per decode GPU (disaggregated prefill GPUs are not counted). " + per_all_gpus_note(gpus)
             + (" " if gpus and gpus[1] else "") + "TPS/user (the tier's "
             "unit): the mean over measured requests of each one's tokens/s after its first token, higher than "
             "1000 / mean TPOT (a vllm bench summary's figure) where TPOTs spread. TPS@match: TPS/user at "
             "the baseline's throughput at the tier, gain@match over the baseline's own ('-' where that throughput "
             "lies outside the curve's frontier, or for a tuned row); goodput*: the largest goodput "
             "(tok/s/GPU from requests meeting the tier" + "".join(
                 f" and {k.upper()} <= {v:g} ms" for k, v in (tab.attrs.get("slos_ms") or {}).items())
             + ") over the load points, at load*, with SLA "
             "attainment attain*." + (" +-std: the standard deviation of the tier's throughput over the seeds."
                                      if multi else ""),
             "infeasible: the frontier never reaches the tier; (covered): every point of the curve's Pareto "
             "frontier beats the tier; the best point meeting it, its heaviest frontier load, is shown (advice says "
             "where a heavier load may still deliver more, or failed). "
             "Interpolation: linear in TPS/user between frontier points.",
             "winner: the deployable curve (not oracle, dspark-global) with the most throughput at the tier, its "
             "lead over the runner-up and whether it holds by a one-sided paired t-test over seeds (p < 0.05; 3 seeds "
             f"or more, untested on two; {SEEDS_SCOPE}: {TRAFFIC_TEST}). TIE: curves whose throughputs at the tier "
             "are equal (relative 1e-9; e.g. one policy under two names): none wins. TOO CLOSE TO CALL: a lead "
             f"under {TIE_MARGIN:.0%} that no paired test upholds (one seed, two, or within noise): the sweep cannot "
             "tell the two curves apart (recommend calls it a tie; docs/sweeps.md)."
             + (TUNED_NOTE if tab.attrs.get("tuned") else ""),
             "advice: add heavier loads (tier covered and the heaviest load still raises throughput by > 2%, or "
             "the curve has one load), lighter loads (the lightest load is below the tier) or loads between two "
             "(the tier's throughput, interpolated between them, is > 5% above the lighter one's)."]
    notes = _advice_once(rows) + notes                   # the long advice said once, right under the table
    return fmt.table(cols, rows, keys=2, width=width, notes=notes,
                     title=f"{sweep_dir}: throughput per GPU at SLA tiers "
                     + (f"(baseline {tab.attrs['baseline']})" if tab.attrs.get("baseline") else "(no baseline)"))
