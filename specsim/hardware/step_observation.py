"""One measured step of a real engine, the point ``specsim profile fit`` fits (:class:`StepObservation`), shared by
the readers of :mod:`specsim.hardware.step_points` (vLLM results, CSV) and :mod:`specsim.hardware.step_prometheus`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NO_SPEC = "a run without speculative decoding (fit on no-speculation runs only)"


@dataclass(frozen=True)
class StepObservation:
    """One measured (or measurement-derived) target step time.

    Attributes:
        num_requests: R, requests in the decode batch (a mean for derived points).
        batch_tokens: B, tokens in the step (= R without speculation and without prefill in the step).
        context_tokens: mean KV tokens per request read by attention in the step (NaN: not known).
        step_time_s: the step time, seconds.
        source: the file it came from, as given.
        line: 1-based line (CSV row, Prometheus sample) or object index (vLLM JSON) in the file, or None.
        kind: ``"tpot"`` (derived from a benchmark's mean ITL/TPOT), ``"step"`` (a direct step-time row) or
            ``"histogram"`` (from Prometheus histograms).
        label: the point in words (``"concurrency=16"``, ``"rate=4"``, ``"model_name=m engine=0"``).
        weight: relative weight for a fit (> 0).
        ttft_s: the point's mean TTFT, seconds (NaN: not given; vLLM results: ``mean_ttft_ms``, else
            ``median_ttft_ms``); prompt_tokens: mean prompt tokens per request (NaN: not known); concurrency: the
            closed loop's N users (vLLM results: ``max_concurrency``; NaN: an open loop or not known). Used by the
            TTFT part of the fit (:mod:`specsim.hardware.ttft_fit`).
        rows: the input rows this observation stands for: 1 for one row (or result, or dump); more for rows of one
            step shape that ``profile fit`` merged (:func:`specsim.hardware.fit_points.merge_shapes`: its step
            time their weighted geometric mean, its weight their weights' sum).
    """

    num_requests: float
    batch_tokens: float
    context_tokens: float
    step_time_s: float
    source: str
    line: int | None
    kind: str
    label: str
    weight: float = 1.0
    ttft_s: float = math.nan
    prompt_tokens: float = math.nan
    concurrency: float = math.nan
    rows: int = 1


#: A step time more than this factor above or below the median of the other points' is refused as an outlier
#: before a fit: the bundled profiles' steps lie within 49x of their own median (b200-qwen3.8-27b-vllm-fitted,
#: 1 to 17,408 tokens; most within 20x), while a digit slip or a wrong unit puts a row 100x to 10^9x off.
OUTLIER_FACTOR = 100.0

#: Points beyond which the median of the others is the median of all (one point hardly moves it).
_EXACT_MEDIAN_POINTS = 1000


def check_outliers(observations) -> None:
    """Refuse the points no engine measures beside the others, before a fit blames the model for them.

    A point is an outlier where its step time is above :data:`~specsim.hardware.profile.STEP_SLIP_FACTOR` x the
    slowest step a served model takes at its B (:func:`~specsim.hardware.profile.slowest_plausible_step_s`) while
    another point is not, or, among three or more points, more than :data:`OUTLIER_FACTOR` x above or below the
    median step time of the other points. Points all above that bound are no outliers but a file in other units:
    the fit's own check says so (:func:`specsim.cli.profile_fit_report.check_fit_quality`).

    Args:
        observations: the :class:`StepObservation` points of a fit (fitted and held out).

    Raises:
        SpecsimInputError: naming the first outlier's file and line, its step time and how far it is from the
            others, and counting (with the lines of up to three) the other outliers.
    """
    import numpy as np

    from specsim.errors import SpecsimInputError
    from specsim.hardware.profile import STEP_SLIP_FACTOR, slowest_plausible_step_s

    obs = list(observations)
    if not obs:
        return
    t = np.array([o.step_time_s for o in obs], dtype=float)
    bound = STEP_SLIP_FACTOR * slowest_plausible_step_s([max(o.batch_tokens, 1.0) for o in obs])
    med = np.full(len(t), np.median(t))
    far = (t > OUTLIER_FACTOR * med) | (t < med / OUTLIER_FACTOR) if len(t) >= 3 else np.zeros(len(t), bool)
    if len(t) <= _EXACT_MEDIAN_POINTS:
        for i in np.flatnonzero(far):
            med[i] = np.median(np.delete(t, i))
    ratio = np.maximum(t / med, med / t)
    slow = (t > bound) & ~(t > bound).all()
    bad = np.flatnonzero(slow | ((ratio > OUTLIER_FACTOR) & (len(t) >= 3)))
    if not bad.size:
        return
    i = int(bad[0])
    o = obs[i]
    parts = [f"{t[i] * 1e3:.4g} ms"]
    if len(t) >= 3 and ratio[i] > OUTLIER_FACTOR:
        parts.append((f"{_factor(t[i] / med[i])}x" if t[i] >= med[i] else f"1/{_factor(med[i] / t[i])} of") +
                     f" the median of the {len(t) - 1} other points ({med[i] * 1e3:.4g} ms)")
    if slow[i]:
        parts.append(f"{_factor(t[i] / bound[i] * STEP_SLIP_FACTOR)}x the slowest step at {o.batch_tokens:.4g} "
                     f"tokens ({bound[i] / STEP_SLIP_FACTOR:.3g} s)")
    more = "" if bad.size == 1 else f"; {bad.size - 1} more outlier{'s' * (bad.size > 2)} (" + ", ".join(
        (f"line {obs[j].line}" if obs[j].source == o.source else f"{obs[j].source} line {obs[j].line}")
        for j in bad[1:4]) + (", ..." if bad.size > 4 else "") + ")"
    raise SpecsimInputError(o.source, o.line, "step time", f"a step within {OUTLIER_FACTOR:g}x of the others' and "
                            f"under {STEP_SLIP_FACTOR:g}x the slowest a served model takes: fix or drop this point "
                            f"({o.label}) before fitting",
                            ", ".join(parts) + more)


def _factor(x: float) -> str:
    """A ratio for a message: three digits below 100 (45.3), whole with commas below a million (1,000), else
    scientific (4.6e+08)."""
    return f"{x:.3g}" if x < 100 else f"{x:,.0f}" if x < 1e6 else f"{x:.3g}"
