"""TTFT in ``specsim profile fit`` (issue 20, "A TTFT term"): predict a benchmark point's mean TTFT from the
fitted step model the way the simulator schedules a newly arrived request, fit the one TTFT-only term (the
request overhead), and report every point's TTFT residual beside its TPOT residual.

The prediction follows a colocated engine with chunked prefill (vLLM V1's default, the engine a ``vllm bench
serve`` run measures; the simulator's colocated path, :mod:`specsim.engine.scheduler`), at a load with no
server-side queue:

    TTFT = request_overhead_s + min(R_o, 1) x t(D_o) / 2 + sum over the prompt's chunks of [t(D_o + c_i) + m + a(c_i)]

* ``request_overhead_s``: API server and tokenisation before the request reaches the scheduler
  (``engine.request_overhead_s``, docs/memory.md);
* ``min(R_o, 1) x t(D_o) / 2``: the step in flight when the request arrives, half of it on average (arrivals
  uniform within a step; a replica busy with other requests a share min(R_o, 1) of the time: our
  approximation), t(D_o) the step of the others' D_o decode tokens (D: ``decode_tokens`` where the point has
  it, else R). R_o and D_o are the other users' share: R (1 - 1/N) and D (1 - 1/N) in a closed loop of N users
  (the point's ``concurrency``), whose user sends the next request when the last one ends, so at N = 1 no
  step is in flight and none decodes beside the prompt; R and D in an open loop (``concurrency`` NaN);
* the prompt of P tokens runs in chunks c_i of ``chunk_tokens`` (the engine's ``max_num_batched_tokens``;
  one chunk of P when not given), each inside a step beside the D_o decode tokens (the mixed step, unpadded as
  the engine runs it), plus the mixed step's own cost m (``mixed_step_s``, 0 unless fitted) and the chunk's
  causal attention a(c_i) over the tokens before it; the step running the last chunk emits the first token.

The request overhead is the only term TTFT fits: it enters TTFT alone, so its least-squares value is the mean
of (measured - predicted without it), clipped at 0, over the points of the **lowest load** (smallest R) only: the
prediction assumes no server-side queue, which only the lightest load can promise, and one queued point would
otherwise set it (a fresh user's DeepSeek-R1 fit on N = 4 and 128 wrote 33.75 s). The other points are predicted
(reported as not fitted). The step terms stay fitted on TPOT (:func:`specsim.hardware.profile_fit.fit_step_model`),
so adding TTFT never moves them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from specsim.hardware.residuals import Residual, median_abs_error

#: A fitted request overhead above this (seconds) is no engine's own overhead per request (milliseconds): the lowest
#: load's TTFT then holds a server queue or a prefill the model does not see, so ``profile fit`` warns instead of
#: advising it and the validation study keeps the default.
MAX_REQUEST_OVERHEAD_S = 1.0


@dataclass(frozen=True)
class TTFTResidual(Residual):
    """One point's mean TTFT, measured and predicted (seconds), with its mean prompt (tokens) and R
    (:class:`~specsim.hardware.residuals.Residual`)."""

    label: str
    source: str
    num_requests: float
    prompt_tokens: float
    measured_s: float
    predicted_s: float
    holdout: bool


@dataclass
class TTFTFitReport:
    """The outcome of :func:`fit_ttft`: the fitted ``request_overhead_s`` (seconds) and every point's residual."""

    request_overhead_s: float
    points: list[TTFTResidual] = field(default_factory=list)

    def median_abs_error(self, holdout: bool) -> float | None:
        """Median |relative error| of the fitted (False) or holdout (True) points; None if there are none."""
        return median_abs_error(self.points, holdout)

    def provenance(self) -> dict[str, Any]:
        """Metadata for the written profile (under ``fit.ttft``)."""
        return {"request_overhead_s": self.request_overhead_s,
                "median_abs_error_fitted": self.median_abs_error(False),
                "median_abs_error_holdout": self.median_abs_error(True),
                "points": [p.row(prompt_tokens=round(p.prompt_tokens, 1)) for p in self.points]}


def _mixed_step_s(sm) -> float:
    """The step model's ``terms.mixed_step_s`` (seconds a step carrying a prefill chunk adds), 0 for a step-time
    object without engine terms."""
    return float(getattr(getattr(sm, "terms", None), "mixed_step_s", 0.0))


def has_ttft(o) -> bool:
    """Whether observation ``o`` carries a mean TTFT and a mean prompt length."""
    t, p = getattr(o, "ttft_s", math.nan), getattr(o, "prompt_tokens", math.nan)
    return math.isfinite(t) and t > 0 and math.isfinite(p) and p >= 1


def predict_ttft(sm, observations: Sequence, chunk_tokens: int | None = None,
                 request_overhead_s: float = 0.0) -> np.ndarray:
    """(n,) predicted mean TTFT in seconds of each observation (module docstring formula).

    Args:
        sm: a step model: ``step_time(batch_tokens, num_requests, kv_tokens)`` -> (n,) seconds and
            ``prefill_attention_s(chunk_tokens, context_tokens)`` -> seconds, and ``terms.mixed_step_s`` where it
            has one (:class:`specsim.hardware.stepmodel.StepModel`).
        observations: points with ``num_requests``, ``prompt_tokens``, ``context_tokens`` (NaN: no KV read) and
            optionally ``decode_tokens`` and ``concurrency`` (a closed loop's N; NaN or absent: an open loop).
        chunk_tokens: the engine's prefill chunk, tokens (None: the whole prompt in one step).
        request_overhead_s: seconds added to every TTFT.
    """
    out = np.empty(len(observations), np.float64)
    for i, o in enumerate(observations):
        n = float(getattr(o, "concurrency", math.nan))
        others = 1.0 - 1.0 / n if n >= 1 else 1.0           # the other users' share of a closed loop's requests
        r = float(o.num_requests)
        d = float(getattr(o, "decode_tokens", r))
        k = r * (0.0 if math.isnan(o.context_tokens) else float(o.context_tokens))
        p = int(round(o.prompt_tokens))
        c = max(1, chunk_tokens or p)
        sizes = np.full(p // c, c, np.int64)
        if p % c:
            sizes = np.append(sizes, p % c)
        before = c * np.arange(sizes.size)                  # prompt tokens computed before each chunk
        steps = np.asarray(sm.step_time(np.ceil(d * others + sizes), np.full(sizes.size, r * others + 1.0),
                                        np.full(sizes.size, k * others)),
                           np.float64) + np.where(sizes > 1, _mixed_step_s(sm), 0.0)   # a chunk's step is mixed
        others_step = sm.step_time(np.array([max(math.ceil(d * others), 1)]), np.array([max(r * others, 1.0)]),
                                   np.array([k * others]))
        in_flight = min(r * others, 1.0) * float(np.asarray(others_step)[0]) / 2
        out[i] = request_overhead_s + in_flight + float(steps.sum()) + sm.prefill_attention_s(sizes, before)
    return out


def fit_ttft(sm, observations: Sequence, chunk_tokens: int | None = None, holdout: Sequence = ()) -> TTFTFitReport:
    """Fit ``request_overhead_s`` to the points of ``observations`` that carry a TTFT (:func:`has_ttft`) and
    report their residuals and ``holdout``'s (predicted only).

    Returns:
        A :class:`TTFTFitReport`; ``request_overhead_s`` = max(0, mean(measured - predicted without it)) over the
        lowest-load points (module docstring); the others are reported with ``holdout`` True (predicted only).

    Raises:
        ValueError: no fitting point carries a TTFT (the caller checks :func:`has_ttft` first).
    """
    carried = [o for o in observations if has_ttft(o)]
    if not carried:
        raise ValueError("no observation carries a TTFT and a prompt length")
    low = min(float(o.num_requests) for o in carried)
    fit = [o for o in carried if float(o.num_requests) <= low * (1 + 1e-9)]
    held = [o for o in carried if float(o.num_requests) > low * (1 + 1e-9)] + [o for o in holdout if has_ttft(o)]
    base = predict_ttft(sm, fit, chunk_tokens)
    overhead = max(0.0, float(np.mean(np.array([o.ttft_s for o in fit]) - base)))
    points = []
    for group, is_held in ((fit, False), (held, True)):
        if group:
            pred = predict_ttft(sm, group, chunk_tokens, overhead)
            points += [TTFTResidual(o.label, o.source, float(o.num_requests), float(o.prompt_tokens),
                                    float(o.ttft_s), float(q), is_held) for o, q in zip(group, pred)]
    return TTFTFitReport(overhead, points)
