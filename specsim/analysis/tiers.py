"""SLA tiers: the one default set, the tiers a sweep was made for, and the winner per tier.

* :data:`DEFAULT_TIERS` is the one default of ``compare``, ``report``, ``plot`` and ``sweep``. A sweep
  stores its tiers in its manifest (``DIR/sweep.json``, key ``tiers``; ``specsim sweep --tiers``);
  :func:`sweep_tiers` hands them to later commands run without ``--tiers``.
* Winner per tier (:func:`mark_winners`): among the deployable curves (not :data:`NOT_DEPLOYABLE`:
  ``oracle`` reads outcomes, ``dspark-global`` is the exhaustive reference), the one with the largest
  throughput per GPU at the tier; its margin over the runner-up is ``y_winner / y_runner_up - 1`` on the
  table's (seed-mean frontier) values, and whether it holds is the paired rule of
  :func:`specsim.analysis.significance.paired_margin` on the per-seed throughputs at the tier.
* Exact tie: deployable curves whose throughputs at the tier equal the best one's up to
  :data:`specsim.analysis.metrics.REL_TOL` (relative 1e-9, the tolerance of every comparison against a tier)
  tie: a plug-in twin of a policy under another name, or two knob values the policy treats alike. Each tied row
  names the others (``tied_with``) and the verdict says ``exact tie``: ``compare``, ``report`` and ``recommend``
  name them all instead of crowning the first by name order (the row marked ``winner`` is only where the tier's
  answer is read; its margin over the other is 0).
* Too close to call (:func:`too_close`): a lead under :data:`TIE_MARGIN` that no paired test over seeds upholds.
  ``compare``'s winner cell, the report's answer line and ``recommend`` all read it from this one rule, so none
  crowns a curve that another calls a tie.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.analysis.metrics import REL_TOL
from specsim.analysis.significance import paired_margin
from specsim.analysis.sweep_records import read_manifest
from specsim import fmt
from specsim.errors import SpecsimInputError

#: The default SLA tiers, TPS/user in tok/s (compare, report, plot, and what a sweep stores).
DEFAULT_TIERS: tuple[float, ...] = (50.0, 100.0, 150.0, 200.0)
#: A lead below this share is small whatever the seeds say: compare's verdict notes it, and a lead below it that no
#: paired test upholds is too close to call (:func:`too_close`).
TIE_MARGIN = 0.02
#: Policies that cannot be deployed: they read hidden outcomes or search exhaustively as a reference.
NOT_DEPLOYABLE = frozenset({"oracle", "dspark-global"})


#: The slowest SLA tier :func:`as_tiers` takes, tok/s/user: below it a tier is almost surely seconds per token.
MIN_TIER = 1.0


def as_tiers(value: Any, field: str = "tiers", source: str | None = None) -> tuple[float, ...]:
    """SLA tiers as the Python API takes them: one number (``150``), a comma-separated string (``"100,150"``, as
    ``--tiers`` takes them) or an iterable of numbers; returns a tuple of floats, TPS/user in tok/s, each once.

    Raises:
        SpecsimInputError: anything else, a tier that is not a finite number > 0, or one below :data:`MIN_TIER`
            (``0.05``: seconds per token, the error suggests ``20 tok/s/user?``), naming ``field``, and ``source``,
            e.g. ``--tiers``, as the error's file.
    """
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
        items: list[Any] = [value]
    elif isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (bytes, bytearray, dict)):
        raise SpecsimInputError(source, None, field, "SLA tiers (TPS/user, tok/s): a number, a list of numbers or "
                                "'100,150'", type(value).__name__)
    else:
        try:
            items = list(value)
        except TypeError:
            raise SpecsimInputError(source, None, field, "SLA tiers (TPS/user, tok/s): a number, a list of numbers "
                                    "or '100,150'", repr(value)) from None
    try:
        tiers = tuple(float(v) for v in items if not isinstance(v, (bool, np.bool_)))
    except (TypeError, ValueError):
        raise SpecsimInputError(source, None, field, "SLA tiers (TPS/user, tok/s): numbers", repr(value)) from None
    if len(tiers) != len(items) or not all(math.isfinite(t) and t > 0 for t in tiers):
        raise SpecsimInputError(source, None, field, "SLA tiers (TPS/user, tok/s): finite numbers > 0", repr(value))
    slow = [t for t in tiers if t < MIN_TIER]
    if slow:        # --tiers 0.05 ran a 10-round auto search up to 512 users: seconds per token, or a typo
        guess = "; ".join(f"{t:g}, which looks like seconds per token: {1 / t:.3g} tok/s/user?" for t in slow)
        raise SpecsimInputError(source, None, field, f"SLA tiers in tokens per second per user, each >= {MIN_TIER:g} "
                                "(a tier below 1 tok/s/user is almost surely seconds per token or a typo)", guess)
    return tuple(dict.fromkeys(tiers))          # a tier given twice counts once (as --tiers 100,100 does)


def deployable(curve: str) -> bool:
    """True unless the curve's policy (its label's first word) is in :data:`NOT_DEPLOYABLE`."""
    return curve.split(" ", 1)[0] not in NOT_DEPLOYABLE


def sweep_tiers(sweep_dir: str | Path) -> tuple[float, ...]:
    """The tiers stored with a sweep (``DIR/sweep.json`` key ``tiers``), else :data:`DEFAULT_TIERS`.

    A manifest written before tiers were stored, or none at all, gives the default.
    """
    tiers = read_manifest(sweep_dir).get("tiers")
    return tuple(float(t) for t in tiers) if tiers else DEFAULT_TIERS


def too_close(margin: float | None, verdict: str) -> bool:
    """Whether a tier's lead is too close to call: the one rule of ``compare``'s winner cell, the report's answer line
    and ``recommend`` (a fresh user's compare printed "WINNER +0.0% vs static, untested" where recommend, on the same
    folder, called the same lead a tie).

    The lead is too close to call where it is under :data:`TIE_MARGIN` (2%, relative) and no paired test over seeds
    upholds it (:func:`specsim.analysis.significance.paired_margin`: one seed, two seeds ``untested``, or ``within
    noise``). Why: such a lead is smaller than the seeds' own spread of a curve's throughput at a tier (a standard
    deviation of 1-7%, median 3%, over two seeds on sweeps of the Azure conversation trace), and the seeds redraw
    acceptance only, not the traffic (:data:`specsim.analysis.significance.SEEDS_SCOPE`), so nothing in the sweep
    tells the two curves apart. A lead
    under 2% that three or more seeds uphold is not too close (its verdict says ``a lead under 2%``), nor is a larger
    untested one (its verdict says ``untested`` or ``one seed``); an exact tie is a tie, not a near one.

    Args:
        margin: the winner's relative lead over the runner-up (``y_winner / y_runner_up - 1``; None or NaN: none).
        verdict: its ``margin_verdict`` (:func:`mark_winners`).
    """
    if margin is None or not math.isfinite(margin) or verdict in ("exact tie", "no runner-up", ""):
        return False
    return abs(margin) < TIE_MARGIN and not verdict.startswith("holds")


def mark_winners(table: pd.DataFrame, per_seed: dict[tuple[float, str], dict[int, float]]) -> pd.DataFrame:
    """Add the winner columns to a per-(tier, curve) table (module docstring rule).

    Args:
        table: rows with ``tier, curve, throughput_per_gpu`` (:func:`specsim.analysis.frontier.compare`).
        per_seed: ``{(tier, curve): {seed: throughput per GPU at the tier}}`` (finite values only).

    Returns:
        A copy with ``winner`` (bool), and on the winner's row ``runner_up`` (curve), ``margin`` (relative
        lead, NaN without a runner-up), ``margin_holds`` (bool) and ``margin_verdict`` (text:
        ``holds (p=.., n seeds)``, with ``; a lead under 2%`` below :data:`TIE_MARGIN`, ``within noise (..)``,
        ``one seed``, ``no runner-up``, ``exact tie``); other rows
        hold ``""``/NaN/False there. ``tied_with``: on each row of an exact tie (module docstring), the other
        tied curves (comma-separated), else ``""``.
    """
    out = table.copy()
    out["winner"], out["runner_up"], out["margin"] = False, "", float("nan")
    out["margin_holds"], out["margin_verdict"], out["tied_with"] = False, "", ""
    for tier, rows in out.groupby("tier", sort=False):
        ok = rows[rows.curve.map(deployable) & np.isfinite(rows.throughput_per_gpu.astype(float))]
        if ok.empty:
            continue
        ranked = ok.sort_values("throughput_per_gpu", ascending=False, kind="stable")
        w = ranked.index[0]
        out.loc[w, "winner"] = True
        if len(ranked) < 2:
            out.loc[w, "margin_verdict"] = "no runner-up"
            continue
        ru = ranked.index[1]
        m = paired_margin(per_seed.get((tier, out.curve[w]), {}), per_seed.get((tier, out.curve[ru]), {}))
        yw, yr = float(out.throughput_per_gpu[w]), float(out.throughput_per_gpu[ru])
        margin = yw / yr - 1 if yr > 0 else math.nan
        small = m.holds and margin < TIE_MARGIN              # consistent over the seeds, but too small to matter
        verdict, holds = m.verdict + (f"; a lead under {TIE_MARGIN:.0%}" if small else ""), m.holds
        tied = [i for i in ranked.index if abs(float(out.throughput_per_gpu[i]) - yw) <= REL_TOL * abs(yw)]
        if len(tied) > 1:                                    # an exact tie: no lead to test
            verdict, holds = "exact tie", False
            for i in tied:
                out.loc[i, "tied_with"] = ", ".join(out.curve[j] for j in tied if j != i)
        out.loc[w, ["runner_up", "margin", "margin_holds", "margin_verdict"]] = [out.curve[ru], margin, holds, verdict]
    return out


def winners(table: pd.DataFrame) -> pd.DataFrame:
    """The winner rows of a :func:`mark_winners` table, one per tier that has one, ascending tier."""
    return table[table.winner.astype(bool)].sort_values("tier", kind="stable").reset_index(drop=True)


def answer_curves(row) -> list[str]:
    """The curves the answer of a tier names, from its winner row ``row`` of a :func:`mark_winners` table: the winner
    alone, or in an exact tie every tied curve (the winner row's first, then its ``tied_with`` in order)."""
    tied = row.get("tied_with")
    return [row.curve, *(tied.split(", ") if isinstance(tied, str) and tied else [])]


def answer_role(row) -> str:
    """What a note calls the curve of winner row ``row`` (of a :func:`mark_winners` table): ``"winner"``, or
    ``"leader"`` where its lead is too close to call (:func:`too_close`: no note crowns it a winner then)."""
    margin = row.get("margin")
    close = too_close(float(margin) if margin is not None else None, str(row.get("margin_verdict") or ""))
    return "leader" if close else "winner"


def answer_subject(curves: list[str], role: str = "winner") -> str:
    """How a note names the answer of a tier (:func:`answer_curves`): ``"the winner X"`` (``role``: ``"the leader
    X"`` where its lead is too close to call, :func:`answer_role`), or in an exact tie ``"the tied curves X and Y"``
    (none wins, so none is called the winner)."""
    return f"the {role} {curves[0]}" if len(curves) == 1 else f"the tied curves {fmt.and_list(curves)}"


def goodput_notes(table: pd.DataFrame) -> list[str]:
    """Notes for the tiers of a :func:`mark_winners` table (with ``best_goodput_per_gpu`` and
    ``attainment_at_best``) where another deployable curve delivers more goodput (tok/s/GPU from the requests that
    meet the tier themselves, ``compare``'s goodput*) than the winner, by more than :data:`TIE_MARGIN`: the winner
    meets the tier by its requests' mean TPS/user, which can leave a share of its users below it, and by that count
    the other curve serves more users at the tier. In an exact tie the tied curves are named (none is the winner)
    and the goodput is compared with the most any of them delivers. [] when the two rankings agree."""
    out = []
    for tier, rows in table.groupby("tier", sort=True):
        good = rows.best_goodput_per_gpu.astype(float)
        ok = rows[rows.curve.map(deployable) & np.isfinite(good) & (good > 0)]
        win = rows[rows.winner.astype(bool)]
        if ok.empty or win.empty:
            continue
        names = answer_curves(win.iloc[0])
        ours = rows[rows.curve.isin(names)]
        w = ours.loc[ours.best_goodput_per_gpu.astype(float).fillna(0.0).idxmax()]    # the winner, or the best tied
        best = ok.loc[ok.best_goodput_per_gpu.astype(float).idxmax()]
        wg = float(w.best_goodput_per_gpu) if np.isfinite(float(w.best_goodput_per_gpu)) else 0.0
        if best.curve in names or float(best.best_goodput_per_gpu) <= (1 + TIE_MARGIN) * wg:
            continue
        if len(names) == 1:
            att = (f"{float(w.attainment_at_best):.0%} of its requests meet it at its best load"
                   if np.isfinite(float(w.attainment_at_best)) else "none of its requests meet it")
            said = (f"{answer_subject(names, answer_role(win.iloc[0]))} meets the tier by its requests' mean TPS/user "
                    f"({att})")
        else:
            shares = [f"{float(a):.0%}" if np.isfinite(float(a)) else "none" for a in ours.attainment_at_best]
            att = (f"{shares[0]} of their requests meet it at their best loads" if len(set(shares)) == 1 else
                   "at their best loads " + fmt.and_list(f"{s} of {c}'s" for s, c in zip(shares, ours.curve))
                   + " requests meet it")
            said = f"{answer_subject(names)} meet the tier by their requests' mean TPS/user ({att})"
        bg, ba = f"{float(best.best_goodput_per_gpu):,.0f}", f"{float(best.attainment_at_best):.0%}"
        more = (f"{bg} against {wg:,.0f} tok/s/GPU ({ba} of its requests meet it)" if len(names) == 1 else
                f"{bg} tok/s/GPU ({ba} of its requests meet it) against at most {wg:,.0f} for the tied curves")
        out.append(f"note: at tier {float(tier):g} {said}; counting only the requests that meet it (goodput*), "
                   f"{best.curve} serves more: {more}")
    return out


def tiers_json(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The winner per tier as JSON-ready dicts (tier, curve, throughput, runner-up, margin, verdict)."""
    rows = []
    for _, r in winners(table).iterrows():
        rows.append({"tier": float(r.tier), "curve": r.curve, "throughput_per_gpu": float(r.throughput_per_gpu),
                     "runner_up": r.runner_up or None, "tied_with": str(r.get("tied_with", "") or "") or None,
                     "margin": float(r.margin) if np.isfinite(r.margin) else None,
                     "margin_holds": bool(r.margin_holds), "margin_verdict": r.margin_verdict})
    return rows
