"""The one note per tier on an answer read from flagged points, and notes that differ only by tier said once.

A tier's answer rests on up to three figures at the tier: the winner's (in an exact tie, each tied curve's), the
runner-up's (the margin divides by it) and the baseline's (the gain divides by it). Where any of them is read from,
or interpolated through, a flagged point (:func:`specsim.analysis.sweep_tables.flagged_points`: thrashing,
prefill- or think-bound, cut off, overloaded), :func:`flagged_answer_notes` says so in ONE ``warning:`` per tier:
which curve, which load and flag (an overloaded point with its requests waiting against those admitted), and what
it means for the answer (the winner may change; the margin or gain is no measure of what it adds; a lead too close
to call, :func:`specsim.analysis.tiers.too_close`, names its curve the leader, not the winner). compare printed
two warnings per tier about the same points before (a fresh user's tour sweep: six paragraphs for three tiers), so
tiers whose note would read the same apart from the tier are named together in one (:func:`said_once`).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from specsim import fmt
from specsim.analysis.sweep_tables import flagged_points, frontier_loads_at
from specsim.analysis.tiers import answer_curves, answer_role


def tiers_phrase(tiers: Iterable[float]) -> str:
    """``"tier 100"``, ``"tiers 150 and 200"``, ``"tiers 50, 100 and 150"``."""
    tiers = list(tiers)
    return f"tier{'s' if len(tiers) > 1 else ''} {fmt.and_list(f'{t:g}' for t in tiers)}"


def said_once(notes: list[tuple[float, str, str]]) -> list[str]:
    """Notes given as ``(tier, head, body)`` (the line is ``head + " at tier T " + body``), those with the same head
    and body joined into one naming their tiers (:func:`tiers_phrase`), in the order of their first tier."""
    tiers: dict[tuple[str, str], list[float]] = {}
    for tier, head, body in notes:
        tiers.setdefault((head, body), []).append(tier)
    return [f"{head} at {tiers_phrase(ts)} {body}" for (head, body), ts in tiers.items()]


def _overload_figures(df: pd.DataFrame) -> dict[tuple[str, str], tuple[float, float]]:
    """``{(curve, load with :g): (requests waiting, requests admitted)}``: seed means of ``mean_waiting_requests``
    and ``mean_running_requests`` over each successful point of a results frame ``df``."""
    if df.empty or "mean_waiting_requests" not in df or "mean_running_requests" not in df:
        return {}
    ok = df[df.status == "ok"]
    g = ok.groupby(["curve", "load"])[["mean_waiting_requests", "mean_running_requests"]].mean()
    return {(c, f"{load:g}"): (float(w), float(r)) for (c, load), (w, r) in g.iterrows()}


def _point(load: float, kinds: list[str], figures: tuple[float, float] | None) -> str:
    """``"load 64 (thrashing and prefill-bound)"``; an overloaded point with its queue against its batch."""
    said = " and ".join(kinds)
    if "overloaded" in kinds and figures is not None and np.all(np.isfinite(figures)):
        said += f": {figures[0]:.1f} requests waiting to be admitted against {figures[1]:.1f} admitted, on average"
    return f"load {load:g} ({said})"


def read_how(f, tier: float, flags: dict, curve: str, figures: dict, whose: str = "its") -> tuple[str, set[str]]:
    """How frontier ``f`` of ``curve`` reads its figure at ``tier`` through flagged points (``flags``:
    :func:`specsim.analysis.sweep_tables.flagged_points`; ``figures``: :func:`_overload_figures`), ``whose`` frontier
    points they are ("its", "their"), and the kinds of flag met; ``("", set())`` where none is flagged."""
    loads = frontier_loads_at(f, tier)
    hits = [(load, kinds) for load in loads if (kinds := flags.get((curve, f"{load:g}")))]
    if not hits:
        return "", set()
    said = "; ".join(_point(load, kinds, figures.get((curve, f"{load:g}"))) for load, kinds in hits)
    kinds = {k for _, ks in hits for k in ks}
    if len(loads) == 2:
        return (f"interpolated between {whose} frontier points at loads {loads[0]:g} and {loads[1]:g}, "
                f"{'both' if len(hits) == 2 else 'one'} flagged: {said}"), kinds
    return f"read from {whose} frontier point at {said}", kinds


def _entries(row, fronts: dict, flags: dict, figures: dict, base: str | None) -> list[tuple[str, str, str]]:
    """``(role, curve, how)`` of each figure that the answer of winner row ``row`` rests on and that is read through a
    flagged point: role ``winner`` (``leader`` where its lead is too close to call:
    :func:`specsim.analysis.tiers.answer_role`; in a tie ``tied``, one per tied curve), ``runner-up``, ``baseline`` or
    ``runner-up and baseline``."""
    names = answer_curves(row)
    roles = [("tied" if len(names) > 1 else answer_role(row), c) for c in names]
    ru = row.runner_up if isinstance(row.runner_up, str) and row.runner_up not in names else ""
    if ru:
        roles.append(("runner-up and baseline" if ru == base else "runner-up", ru))
    if base and base not in names and base != ru:
        roles.append(("baseline", base))
    out = []
    for role, curve in roles:
        f = fronts.get(curve)
        how = read_how(f, row.tier, flags, curve, figures)[0] if f is not None else ""
        if how:
            out.append((role, curve, how))
    return out


def _subject(group: list[tuple[str, str]]) -> str:
    """The figures of ``group`` (``(role, curve)`` sharing one reading) named: "the winner X" (or "the leader X"),
    "the tied curves X and Y", "the runner-up R", "the baseline B"."""
    tied = [c for role, c in group if role == "tied"]
    parts = ([f"the tied curve{'s' if len(tied) > 1 else ''} {fmt.and_list(tied)}"] if tied else [])
    parts += [f"the {role} {c}" for role, c in group if role != "tied"]
    if len(parts) > 1 and any(" and " in p for p in parts):      # "the tied curves X and Y, and the baseline B"
        return ", ".join(parts[:-1]) + ", and " + parts[-1]
    return fmt.and_list(parts)


def _note_body(row, entries: list[tuple[str, str, str]], fronts: dict, flags: dict, figures: dict) -> str:
    """The words of one tier's note after ``at tier T`` (:func:`flagged_answer_notes`)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for role, curve, how in entries:
        groups.setdefault(how, []).append((role, curve))
    said = []
    for how, group in groups.items():
        if len(group) == 1:
            said.append(f"the figure of {_subject(group)} is {how}")
        else:
            plural = read_how(fronts[group[0][1]], row.tier, flags, group[0][1], figures, "their")[0]
            said.append(f"the figures of {_subject(group)} are each {plural}")
    kinds = {k for _, curve, _ in entries for k in read_how(fronts[curve], row.tier, flags, curve, figures)[1]}
    roles = {role for role, _, _ in entries}
    tie, role = len(answer_curves(row)) > 1, answer_role(row)
    means = []
    if roles & {"winner", "leader", "tied"}:
        means.append(f"{'the tie may not hold' if tie else f'the {role} may change'} once "
                     f"{'they are' if len(kinds) > 1 else 'it is'} lifted")
    ratios = (["its margin over the runner-up"] if roles & {"runner-up", "runner-up and baseline"} else []) + (
        ["its gain over the baseline"] if roles & {"baseline", "runner-up and baseline"} else [])
    if ratios:
        who = "they add" if tie else f"the {role} adds"
        ratios = [r.replace("its ", "their ") for r in ratios] if tie else ratios
        means.append(f"{fmt.and_list(ratios)} {'is' if len(ratios) == 1 else 'are'} no measure of what {who}")
    one = len(entries) == 1
    return (f"{'; '.join(said)}: {'that figure measures' if one else 'those figures measure'} the "
            f"limit{'s' if len(kinds) > 1 else ''} named above, not the polic{'y' if one else 'ies'}, so "
            f"{', and '.join(means)} (sweep again without {'them' if len(kinds) > 1 else 'it'}, or compare the "
            "curves where no point is flagged: lighter loads)")


def flagged_answer_notes(table: pd.DataFrame, fronts: dict, df: pd.DataFrame) -> list[str]:
    """One ``warning:`` per tier whose answer rests on a figure read through a flagged point (module docstring),
    tiers whose note reads the same named together (:func:`said_once`); [] where none does.

    Args:
        table: a :func:`specsim.analysis.frontier.compare` table with its winner columns (``attrs["baseline"]``).
        fronts: ``{curve: Frontier}`` of the same points.
        df: their :func:`specsim.analysis.sweep_tables.results_frame`.
    """
    flags, figures, base = flagged_points(df), _overload_figures(df), table.attrs.get("baseline")
    notes = []
    for _, row in table[table.winner.astype(bool)].sort_values("tier", kind="stable").iterrows():
        entries = _entries(row, fronts, flags, figures, base)
        if entries:
            notes.append((float(row.tier), "warning:", _note_body(row, entries, fronts, flags, figures)))
    return said_once(notes)
