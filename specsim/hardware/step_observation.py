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
