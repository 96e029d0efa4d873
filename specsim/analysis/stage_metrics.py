"""Per-stage figures of a run on a multi-stage trace (:mod:`specsim.workload.stages`), beside the whole-run ones.

Stage i's span is its nominal [stage_start_s, stage_end_s) divided by the run's ``rate_scale`` (open loop; a
closed loop ignores arrival times, so it has no stages), ended early where the run was: at a horizon
(``max_sim_s``) inside it, or where ``--num-requests`` cut the trace (:attr:`specsim.workload.trace.Trace.cut_s`,
the arrival of the first request dropped, divided by the rate scale). Such a stage is marked ``partial``, its
nominal end kept as ``nominal_end_s``; a stage that starts at or after that end is left out. Per stage:

* ``requests``: trace requests of the stage arriving inside its span; ``request_rate`` = requests / span (the
  offered load, requests/s; a ramp's mean rate (r0 + r1) / 2 in expectation);
* ``completed`` (of those requests), ``request_throughput`` = completions inside the span / span;
* ``output_throughput`` = tokens emitted inside the span / span (steps ending inside it, plus first tokens);
* the stage's requests' latency statistics (``mean_``, ``median_``, ``p<P>_`` of ttft, tpot, e2el, ms), mean
  TPS/user and acceptance length (tokens per request-step, bonus included), as :mod:`specsim.analysis.metrics`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from specsim.analysis.metrics import PERCENTILES, latency_stats


def stage_breakdown(requests: pd.DataFrame, steps: pd.DataFrame, trace, rate_scale: float = 1.0,
                    percentiles=PERCENTILES, horizon_s: float | None = None) -> list[dict[str, Any]]:
    """Per-stage figures (module docstring), one dict per stage in stage order; [] without stage columns.

    Args:
        requests: :func:`specsim.analysis.metrics.request_frame` of the run (trace order).
        steps: the run's step frame (``start_s``, ``duration_s``, ``emitted_tokens``).
        trace: the run's trace (its ``extra`` stage columns).
        rate_scale: the open-loop rate scale (arrival times and spans are divided by it).
        percentiles: latency percentiles to report.
        horizon_s: the run's horizon (``max_sim_s``, simulated seconds), None when it ran to completion.
    """
    extra = getattr(trace, "extra", {}) or {}
    if "stage" not in extra:
        return []
    stage = extra["stage"]
    cut = None if getattr(trace, "cut_s", None) is None else trace.cut_s / rate_scale
    step_end = (steps.start_s + steps.duration_s).to_numpy() if len(steps) else np.zeros(0)
    out = []
    for s in np.unique(stage[stage >= 0]).tolist():
        mask = stage == s
        first = int(np.flatnonzero(mask)[0])
        start, nominal = extra["stage_start_s"][first] / rate_scale, extra["stage_end_s"][first] / rate_scale
        end = min([nominal, *(e for e in (horizon_s, cut) if e is not None)])
        if end <= start:                                    # the run ended before the stage began
            continue
        span = float(end - start)
        mask = mask & (requests.arrival_s.to_numpy() < end)
        sub = requests[mask]
        done = sub[sub.status == "completed"]
        multi = done[done.output_tokens > 1]
        in_span = (step_end >= start) & (step_end < end)
        first_in = int(((requests.first_token_s >= start) & (requests.first_token_s < end)).sum())
        tokens = int(steps.emitted_tokens.to_numpy()[in_span].sum()) + first_in if len(steps) else first_in
        done_in = int(((requests.done_s >= start) & (requests.done_s < end)).sum())
        row: dict[str, Any] = {"stage": int(s), "start_s": float(start), "end_s": float(end), "duration_s": span,
                               "requests": int(mask.sum()), "request_rate": float(mask.sum() / span),
                               "completed": int(len(done)), "request_throughput": done_in / span,
                               "output_throughput": tokens / span}
        if end < nominal:
            row.update(partial=True, nominal_end_s=float(nominal))
        for name, values in (("ttft", done.ttft_s), ("tpot", multi.tpot_s), ("e2el", done.e2el_s)):
            row.update(latency_stats(name, values.to_numpy(), percentiles))
        row["mean_tps_per_user"] = float(multi.tps_per_user.mean()) if len(multi) else None
        dec = float(done.decode_steps.sum())
        row["mean_acceptance_length"] = float((done.output_tokens.sum() - len(done)) / dec) if dec else None
        out.append(row)
    return out
