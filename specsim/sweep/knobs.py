"""The knob a tune varies: its grid over a range (``--knob NAME=LO:HI[:STEP]``), parsed and checked against the
policy (and, for gamma, the drafter) before any point runs (:mod:`specsim.sweep.tune` searches it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from specsim.errors import SpecsimInputError, did_you_mean

#: Knob values on a float grid are rounded to this many significant digits (stable point ids).
KNOB_DIGITS = 6


@dataclass(frozen=True)
class KnobRange:
    """The grid of one knob: ``num`` values evenly spaced over [lo, hi] (ints: every step-th int).

    Attributes:
        name: the knob (one the policy declares, or ``gamma``).
        lo, hi: the range, inclusive (lo <= hi).
        num: number of grid values (>= 1; 1 only when lo == hi).
        integer: integer values (gamma, or a knob whose declared default is an int).
    """

    name: str
    lo: float
    hi: float
    num: int
    integer: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo <= self.hi):
            raise SpecsimInputError("--knob", None, self.name, "a range LO:HI with finite LO <= HI",
                                    f"{self.lo:g}:{self.hi:g}")
        if self.num < 1 or (self.num == 1 and self.lo != self.hi):
            raise SpecsimInputError("--knob-points", None, self.name, "an int >= 2 for a range", repr(self.num))

    def values(self) -> tuple[float, ...]:
        """The grid, ascending (ints when ``integer``; floats rounded to KNOB_DIGITS significant digits)."""
        raw = np.linspace(self.lo, self.hi, self.num)
        if self.integer:
            return tuple(sorted({int(round(v)) for v in raw}))
        return tuple(float(f"{v:.{KNOB_DIGITS}g}") for v in raw)


def parse_knob(text: str, policy: str, num_points: int | None = None) -> KnobRange:
    """Parse ``--knob NAME=LO:HI`` or ``NAME=LO:HI:STEP`` for ``policy``.

    Args:
        text: the flag's value.
        policy: the policy tuned (its declared knobs: :func:`specsim.policies.policy_knobs`).
        num_points: grid values when no STEP is given (default: 10 for floats; every int for ints).

    Raises:
        SpecsimInputError: bad syntax, a knob the policy does not declare, or a bad range.
    """
    from specsim.policies import policy_knobs

    m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*=\s*([^:]+):([^:]+)(?::([^:]+))?\s*", text)
    if not m:
        raise SpecsimInputError("--knob", None, "knob", "NAME=LO:HI or NAME=LO:HI:STEP (e.g. threshold=0.05:0.95)",
                                repr(text))
    from specsim.simulation import FIXED_DRAFTING

    if num_points is not None and num_points < 1:
        raise SpecsimInputError("--knob-points", None, None, "an int >= 2 for a range", repr(num_points))
    name = m.group(1)
    declared = policy_knobs(policy)
    tunable = sorted(declared) + ([] if policy in FIXED_DRAFTING else ["gamma"])    # none / mtp1: gamma is fixed
    if name not in tunable:
        fixed = (f" (its gamma is fixed at {FIXED_DRAFTING[policy][0]}: use 'static' to tune gamma)"
                 if policy in FIXED_DRAFTING and name == "gamma" else "")
        raise SpecsimInputError("--knob", None, name, f"a knob policy {policy} declares: "
                                f"{', '.join(tunable) or 'none'}{fixed}{did_you_mean(name, tunable)}",
                                repr(name))
    integer = name == "gamma" or (isinstance(declared.get(name), int) and not isinstance(declared.get(name), bool))
    try:
        lo, hi = float(m.group(2)), float(m.group(3))
        step = float(m.group(4)) if m.group(4) else None
    except ValueError:
        raise SpecsimInputError("--knob", None, name, "numbers LO:HI[:STEP]", repr(text)) from None
    if step is not None:
        if not (step > 0 and math.isfinite(step)):
            raise SpecsimInputError("--knob", None, name, "a STEP > 0", repr(m.group(4)))
        num = int(math.floor((hi - lo) / step + 1e-9)) + 1
        hi = lo + (num - 1) * step
    elif integer:
        num = num_points if num_points is not None else int(hi - lo) + 1
    else:
        num = num_points if num_points is not None else (1 if lo == hi else 10)
    if name != "gamma":
        _check_ends(policy, name, (lo, hi), integer, text)
    return KnobRange(name, lo, hi, max(1, num), integer)


def _check_ends(policy: str, name: str, ends: tuple[float, float], integer: bool, text: str) -> None:
    """Build the policy at both ends of the range before any point runs, so that a range it rejects fails at
    once, naming ``--knob`` (not after the grid's first points).

    Raises:
        SpecsimInputError: the policy's constructor rejects an end of the range.
    """
    from specsim.policies import make_policy

    for value in ends:
        try:
            make_policy(policy, **{name: int(value) if integer else value})
        except SpecsimInputError as e:
            raise SpecsimInputError("--knob", None, name, f"a range policy {policy} accepts at both ends (at "
                                    f"{value:g}: {_own_words(e)})", repr(text)) from None


def _own_words(e: SpecsimInputError) -> str:
    """What a policy's constructor (or the drafter check) said, without the registry's wrapping."""
    said = str(e.expected)
    return said.split("it said: ", 1)[1].removesuffix(")") if "it said: " in said else said


def knob_rejection(policy: str, knob: KnobRange, value: float, scenario, drafter: str | None = None) -> str | None:
    """Why ``policy`` cannot run with ``knob`` at ``value`` under ``scenario`` (its drafter, or ``drafter``),
    in the policy's or the scenario's own words; None when it can. ``gamma`` is checked against the drafter (a
    checkpoint drafts at most its draft block), any other knob by building the policy."""
    from specsim.policies import make_policy
    from specsim.run_config import resolve_policy

    v = int(round(value)) if knob.integer else value
    try:
        if knob.name == "gamma":
            resolve_policy(policy, scenario, v, drafter)
        else:
            make_policy(policy, **{knob.name: v})
    except SpecsimInputError as e:
        return _own_words(e)
    return None


def check_gamma_range(policy: str, knob: KnobRange, scenario, drafter: str | None = None) -> None:
    """A gamma range both of whose ends the drafter allows, checked before any point runs (the other knobs are
    checked by :func:`parse_knob`), so that a rejected end names ``--knob`` (a fresh user's report: the error
    named ``--gamma`` after the first points).

    Raises:
        SpecsimInputError: an end of the range the drafter or policy rejects.
    """
    if knob.name != "gamma":
        return
    for value in (knob.lo, knob.hi):
        why = knob_rejection(policy, knob, value, scenario, drafter)
        if why is not None:
            raise SpecsimInputError("--knob", None, "gamma", f"a range policy {policy} accepts at both ends (at "
                                    f"{value:g}: {why})", f"gamma={knob.lo:g}:{knob.hi:g}")


def fixed_ends(knob: KnobRange, policy: str, scenario, drafter: str | None = None) -> tuple[float, ...]:
    """The ends of ``knob``'s range that cannot be widened: the policy (or, for gamma, the drafter) rejects every
    value beyond them (:func:`knob_rejection`): the next integer, or for a real knob a value just beyond the end
    (threshold 0.95 of a [0, 1] knob can still be widened although 1.05 is refused). A tune's pick at such an end
    gets no advice to widen the range (:func:`specsim.analysis.tuned.edge_note`)."""
    if knob.hi <= knob.lo:
        return ()
    out = []
    for end, sign in ((knob.lo, -1.0), (knob.hi, 1.0)):
        step = 1.0 if knob.integer else 1e-6 * max(1.0, abs(end))
        if knob_rejection(policy, knob, end + sign * step, scenario, drafter) is not None:
            out.append(end)
    return tuple(out)
