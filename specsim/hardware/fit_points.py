"""How ``specsim profile fit`` scales to large inputs: rows of one step shape merged before the fit, and the
residuals summarised in bins for the written profile and the printed table.

Merging (:func:`merge_shapes`) is exact. The fit minimises ``sum_i w_i (log p(x_i) - log m_i)^2`` over the rows i
(``w`` their weight, ``m`` the measured step, ``p`` the model's at the row's shape x); rows of one shape share
``p(x)``, and for them ``sum_i w_i (log p - log m_i)^2 = W (log p - mean_w log m)^2 + sum_i w_i (log m_i -
mean_w log m)^2`` with ``W = sum_i w_i``: one point at the shape, of weight W and step ``exp(mean_w log m)`` (the
rows' weighted geometric mean), gives the same least squares up to a constant, so the same constants. A per-step
CSV of 100,000 rows whose R, B and context recur fits as its distinct shapes.

A shape is (file, R, B, context, prompt length): the fields :func:`specsim.hardware.profile_fit.predict_observations`
reads (NaN context or prompt compared as equal). Nothing is rounded: rows whose context differs by one token stay
two points (merging them would change the fit).

Summaries (:func:`summarise`) are for reading, never for fitting: where a fit has more points than a bound
(:data:`MAX_STORED_POINTS` in the profile's ``metadata.fit.points``, :data:`MAX_PRINTED_POINTS` in the printed
table), points are binned on a grid of log2 R, log2 B and log2 (context + 1) of one width, the finest of
:data:`BIN_WIDTHS` that keeps the bins within the bound (holdout and fitted points apart). A bin reports its rows and
distinct points, its weighted mean R, B and context, the weighted geometric mean of its measured and predicted steps
(so its error is the mean of its points' log residuals) and its worst point's error.
"""

from __future__ import annotations

import math
from dataclasses import replace
from operator import attrgetter
from typing import Sequence

import numpy as np

from specsim.hardware.step_observation import StepObservation

#: Most points a written profile's ``metadata.fit.points`` lists; beyond, bins (:func:`summarise`).
MAX_STORED_POINTS = 2000
#: Most rows ``profile fit`` prints in a residual table; beyond, bins.
MAX_PRINTED_POINTS = 50
#: Bin widths tried by :func:`summarise`, in log2 units (1/16: a 4.4% step in R, B and context), finest first; the
#: last puts every point of a set in one bin.
BIN_WIDTHS = (1 / 64, 1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0, 2.0, 4.0, math.inf)


def _codes(values: Sequence) -> np.ndarray:
    """(n,) int64 codes of hashable values, equal for equal values (in order of first appearance)."""
    seen: dict = {}
    return np.fromiter((seen.setdefault(v, len(seen)) for v in values), np.int64, len(values))


def _column(items: Sequence, name: str) -> np.ndarray:
    """(n,) float64 of attribute ``name`` of every item."""
    return np.fromiter(map(attrgetter(name), items), np.float64, len(items))


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first row, count) of each distinct row of ``keys`` (n, k), and each row's group: one int64 code per row
    from the columns' own codes (a sort of n numbers, not of n rows), ``np.unique(axis=0)`` where they overflow."""
    code = np.zeros(len(keys), np.int64)
    radix = 1
    for col in keys.T:
        values, inverse = np.unique(col, return_inverse=True)
        radix *= len(values)
        if radix >= 2 ** 62:
            _, first, inverse, counts = np.unique(keys, axis=0, return_index=True, return_inverse=True,
                                                  return_counts=True)
            return first, counts, inverse.ravel()
        code = code * len(values) + inverse.ravel()
    _, first, inverse, counts = np.unique(code, return_index=True, return_inverse=True, return_counts=True)
    return first, counts, inverse.ravel()


def merge_shapes(observations: Sequence) -> list:
    """The observations with every set of rows of one step shape merged into one (module docstring).

    Args:
        observations: :class:`~specsim.hardware.step_observation.StepObservation` objects (others, such as
            speculative points, are returned as given).

    Returns:
        One observation per distinct shape, in order of its first row: a shape's only row as given; rows of one
        shape as one StepObservation whose ``step_time_s`` (seconds) is their weighted geometric mean, ``weight``
        their weights' sum, ``rows`` their count, ``line`` the first row's and ``label`` theirs where they share
        one (else the first's with the count of the others); TTFT and concurrency are not merged (NaN).
    """
    obs = list(observations)
    if len(obs) < 2 or not all(isinstance(o, StepObservation) for o in obs):
        return obs
    keys = np.column_stack([_codes([o.source for o in obs]).astype(np.float64),
                            *(np.nan_to_num(_column(obs, f), nan=-1.0)
                              for f in ("num_requests", "batch_tokens", "context_tokens", "prompt_tokens"))])
    first, counts, inverse = _groups(keys)
    if len(first) == len(obs):
        return obs
    w, rows = _column(obs, "weight"), _column(obs, "rows")
    sum_w = np.bincount(inverse, w)
    mean_log = np.bincount(inverse, w * np.log(_column(obs, "step_time_s"))) / sum_w
    labels = _codes([o.label for o in obs])
    lo, hi = np.full(len(first), labels.max() + 1), np.full(len(first), -1)
    np.minimum.at(lo, inverse, labels)
    np.maximum.at(hi, inverse, labels)
    n_rows = np.bincount(inverse, rows).astype(np.int64)
    out = []
    for g in np.argsort(first, kind="stable"):
        o = obs[first[g]]
        if counts[g] == 1:
            out.append(o)
            continue
        label = o.label if lo[g] == hi[g] else f"{o.label} (+{counts[g] - 1} rows of its shape)"
        out.append(replace(o, step_time_s=float(np.exp(mean_log[g])), weight=float(sum_w[g]), rows=int(n_rows[g]),
                           label=label, ttft_s=math.nan, concurrency=math.nan))
    return out


def _range(lo: float, hi: float, digits: int = 3) -> str:
    """``lo..hi``, or one value where they are equal (``digits`` significant digits, thousands separated)."""
    def text(v: float) -> str:
        return f"{float(f'{v:.{digits}g}'):,g}"
    return text(lo) if text(lo) == text(hi) else f"{text(lo)}..{text(hi)}"


def _grid(r: np.ndarray, b: np.ndarray, c: np.ndarray, held: np.ndarray, max_points: int):
    """(bin of each point, bin count, width): the finest :data:`BIN_WIDTHS` grid with at most ``max_points`` bins."""
    logs = [np.log2(r), np.log2(b), np.log2(c + 1.0)]
    for width in BIN_WIDTHS:
        cells = [np.zeros(len(r), np.int64) if math.isinf(width) else np.floor(x / width).astype(np.int64)
                 for x in logs]
        first, _, inverse = _groups(np.column_stack([held, *cells]))
        if len(first) <= max_points or math.isinf(width):
            return inverse, len(first), width
    raise AssertionError("unreachable: the last width makes one bin per set")


def summarise(points: Sequence, max_points: int) -> tuple[list, str | None]:
    """At most ``max_points`` residuals standing for ``points`` (module docstring), and how they were binned.

    Args:
        points: :class:`~specsim.hardware.profile_fit.PointResidual` objects (R, B, context, measured and predicted
            seconds, weight, rows, holdout).
        max_points: the bound (>= 2: fitted and holdout points are never binned together).

    Returns:
        ``(points, None)`` where they are within the bound; else one residual per bin (labelled with its ranges of
        R, B where it differs from R, and context; ``rows``: the rows merged into it; ``points``: its distinct
        points; ``worst_rel_error``: its worst point's; fitted bins first, each set by R, B and context) and the
        binning in words.
    """
    points = list(points)
    if len(points) <= max_points:
        return points, None
    r, b = _column(points, "num_requests"), _column(points, "batch_tokens")
    c = np.nan_to_num(_column(points, "context_tokens"), nan=0.0)
    held = np.fromiter((p.holdout for p in points), np.int64, len(points))
    inverse, n, width = _grid(r, b, c, held, max_points)
    w = _column(points, "weight")
    sum_w = np.bincount(inverse, w, n)
    measured, predicted = _column(points, "measured_s"), _column(points, "predicted_s")
    err = predicted / measured - 1.0
    order = np.lexsort((-np.abs(err), inverse))             # each bin's worst point first
    starts = np.searchsorted(inverse[order], np.arange(n))
    worst = err[order][starts]
    first = order[starts]

    def mean(x: np.ndarray) -> np.ndarray:
        return np.bincount(inverse, w * x, n) / sum_w

    def extreme(x: np.ndarray, ufunc, fill: float) -> np.ndarray:
        out = np.full(n, fill)
        ufunc.at(out, inverse, x)
        return out

    lo = [extreme(x, np.minimum, np.inf) for x in (r, b, c)]
    hi = [extreme(x, np.maximum, -np.inf) for x in (r, b, c)]
    same_b = extreme(np.abs(b - r), np.maximum, 0.0) == 0.0
    sources = _codes([p.source for p in points])
    one_file = extreme(sources, np.minimum, np.inf) == extreme(sources, np.maximum, -np.inf)
    prompt = _column(points, "prompt_tokens")
    given = np.isfinite(prompt) & (prompt > 0)
    w_prompt = np.bincount(inverse, np.where(given, w, 0.0), n)
    mean_prompt = np.bincount(inverse, np.where(given, w * prompt, 0.0), n) / np.maximum(w_prompt, 1e-300)
    rows = np.bincount(inverse, _column(points, "rows"), n).astype(np.int64)
    count = np.bincount(inverse, minlength=n)
    m_log, p_log = mean(np.log(measured)), mean(np.log(predicted))
    mean_r, mean_b, mean_c = mean(r), mean(b), mean(c)
    out = []
    for k in np.lexsort((mean_c, mean_b, mean_r, held[first])):     # fitted bins first, then by R, B, context
        if count[k] == 1:                                   # a bin of one point: the point as it is
            out.append(points[first[k]])
            continue
        label = f"R {_range(lo[0][k], hi[0][k])}" + ("" if same_b[k] else f" B {_range(lo[1][k], hi[1][k])}")
        label += f" ctx {_range(lo[2][k], hi[2][k])}" if hi[2][k] > 0 else ""
        p = points[first[k]]
        out.append(replace(p, label=label, source=p.source if one_file[k] else "several files",
                           num_requests=float(mean_r[k]), batch_tokens=float(mean_b[k]),
                           context_tokens=float(mean_c[k]), measured_s=float(np.exp(m_log[k])),
                           predicted_s=float(np.exp(p_log[k])), weight=float(sum_w[k]), rows=int(rows[k]),
                           points=int(count[k]), worst_rel_error=float(worst[k]),
                           prompt_tokens=float(mean_prompt[k]) if w_prompt[k] > 0 else math.nan))
    how = (f"{len(points):,} points in {n:,} bins (each spans a factor {2 ** width:.3g} of R, of B and of context + 1)"
           if math.isfinite(width) else f"{len(points):,} points in {n:,} bins (fitted, holdout)")
    return out, how
