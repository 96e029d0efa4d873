"""Multi-stage load: arrival rate and duration per stage, constant or a linear ramp (``trace synth --stages``).

The load shapes of inference-perf's ``load.stages`` (a rate and a duration per stage) and of ``vllm bench
serve``'s linear ramp-up (``--ramp-up-strategy linear``) in one trace. Stage i runs for ``duration_s`` seconds with
rate r(t) = r0 + (r1 - r0) t / T (requests/s; r0 = r1 for a constant stage). Arrivals are a renewal process in
the stage's cumulative intensity Lambda(t) = r0 t + (r1 - r0) t^2 / (2 T) (the time change of a non-homogeneous
Poisson process, Cinlar 1975): unit-mean gaps (exponential for ``poisson``, Gamma with CV ``cv`` for ``gamma``,
exactly 1 for ``constant``, whose points sit at Lambda = 0.5, 1.5, ... so a stage of integer r T has exactly
r T requests) mapped back through t = Lambda^-1(u) = 2u / (r0 + sqrt(r0^2 + 2 (r1 - r0) u / T)). Each stage draws
its own gaps; the expected count of stage i is (r0 + r1) T / 2.

Every request carries its stage's index and nominal span (:mod:`specsim.workload.extra`), so a run reports
per-stage figures (:func:`specsim.analysis.stage_metrics.stage_breakdown`) beside the whole-run ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.workload.synth import MAX_SYNTH_REQUESTS, synth_trace
from specsim.workload.trace import Trace


@dataclass(frozen=True)
class Stage:
    """One load stage: rate ``rate_start`` -> ``rate_end`` (requests/s, linear) over ``duration_s`` seconds."""

    rate_start: float
    rate_end: float
    duration_s: float

    @property
    def expected_requests(self) -> float:
        """(r0 + r1) T / 2, the integral of the rate over the stage."""
        return 0.5 * (self.rate_start + self.rate_end) * self.duration_s


_STAGE = re.compile(r"^\s*([0-9.eE+-]+)\s*(?:->\s*([0-9.eE+-]+))?\s*:\s*([0-9.eE+-]+)\s*$")


def parse_stages(text: str) -> tuple[Stage, ...]:
    """``"2:60,2->8:120,8:60"``: ``RATE:SECONDS`` (constant) or ``RATE->RATE:SECONDS`` (linear ramp), comma-separated.

    Raises:
        SpecsimInputError: a part that does not parse or is empty (``2:4,,8:4``: a stage left out by mistake),
            a rate < 0, both rates 0, a duration <= 0, or more than :data:`MAX_SYNTH_REQUESTS` requests expected.
    """
    out = []
    for part in str(text).split(","):
        m = _STAGE.match(part)
        try:
            r0, r1, d = (float(m.group(1)), float(m.group(2) or m.group(1)), float(m.group(3))) if m else (-1, -1, -1)
        except ValueError:
            r0 = r1 = d = -1.0
        if not (np.isfinite([r0, r1, d]).all() and r0 >= 0 and r1 >= 0 and r0 + r1 > 0 and d > 0):
            raise SpecsimInputError("--stages", None, "stages", "RATE:SECONDS or RATE->RATE:SECONDS stages, comma-"
                                    "separated (rates >= 0 requests/s, not both 0; seconds > 0), e.g. "
                                    "'2:60,2->8:120,8:60'", repr(part))
        out.append(Stage(r0, r1, d))
    if not out:
        raise SpecsimInputError("--stages", None, "stages", "at least one stage", repr(text))
    expected = sum(st.expected_requests for st in out)
    if expected > MAX_SYNTH_REQUESTS:          # refused before any draw (a typo filled the memory first)
        raise SpecsimInputError("--stages", None, "stages", f"stages expecting at most {MAX_SYNTH_REQUESTS:,} "
                                "requests (MAX_SYNTH_REQUESTS; lower a rate or a duration)", f"{expected:.3g} requests")
    return tuple(out)


def _unit_points(rng: np.random.Generator, total: float, arrival: str, cv: float) -> np.ndarray:
    """Points of a unit-mean renewal process in [0, total) (module docstring)."""
    if arrival == "constant":
        return np.arange(0.5, total, 1.0)
    pts, last = [], 0.0
    chunk = int(total * 1.25) + 16
    while last < total:
        gaps = rng.exponential(1.0, chunk) if arrival == "poisson" else rng.gamma(1.0 / cv**2, cv**2, chunk)
        cum = last + np.cumsum(gaps)
        pts.append(cum)
        last = float(cum[-1])
    u = np.concatenate(pts)
    return u[u < total]


def stage_arrivals(stages: tuple[Stage, ...], rng: np.random.Generator, arrival: str = "poisson",
                   cv: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """(N,) arrival times (s, from 0) and (N,) stage indices of a staged load (module docstring)."""
    times, index, start = [], [], 0.0
    for i, st in enumerate(stages):
        r0, r1, big_t = st.rate_start, st.rate_end, st.duration_s
        u = _unit_points(rng, st.expected_requests, arrival, cv)            # (n_i,) in cumulative intensity
        t = 2.0 * u / (r0 + np.sqrt(r0 * r0 + 2.0 * (r1 - r0) * u / big_t))   # Lambda^-1(u), stable at r0 = r1
        times.append(start + np.minimum(t, big_t))
        index.append(np.full(t.size, i, np.int64))
        start += big_t
    return np.concatenate(times), np.concatenate(index)


def staged_trace(stages: tuple[Stage, ...], *, arrival: str = "poisson", cv: float = 1.0, seed: int = 0,
                 **lengths) -> Trace:
    """A synthetic trace with staged arrivals; lengths and domains as :func:`specsim.workload.trace.synth_trace`
    draws them (``lengths``: its mix, max_*_tokens, output_len, prompt_len, lengths keywords).

    Arrivals are rounded to microseconds, as ``synth_trace`` rounds them. Request ids are ``0..N-1``.

    Raises:
        SpecsimInputError: a stage list that draws no request at all; a ``cv`` <= 0 with ``gamma`` arrivals, or
            other than 1 with the others.
    """
    if arrival == "gamma" and not (np.isfinite(cv) and cv > 0):
        raise SpecsimInputError("--cv", None, "cv", "a coefficient of variation > 0 with gamma arrivals", str(cv))
    if arrival != "gamma" and cv != 1.0:          # as synth_trace: poisson and constant have no cv to set
        raise SpecsimInputError("--cv", None, "cv", f"exactly 1 for {arrival} arrivals (a cv is --arrival gamma's)",
                                str(cv))
    arrival_rng, length_seed = np.random.default_rng(np.random.SeedSequence([seed, 23])), seed
    t, idx = stage_arrivals(stages, arrival_rng, arrival, cv)
    if t.size == 0:
        raise SpecsimInputError("--stages", None, "stages", "stages drawing at least one request", "none drawn")
    base = synth_trace(int(t.size), rate=1.0, seed=length_seed, **lengths)
    starts = np.concatenate(([0.0], np.cumsum([s.duration_s for s in stages])))   # (S + 1,) stage edges
    extra = {"stage": idx, "stage_start_s": starts[idx], "stage_end_s": starts[idx + 1]}
    return Trace(base.request_id, np.round(t, 6), base.prompt_tokens, base.output_tokens, base.domain,
                 source=f"stages {','.join(_stage_text(s) for s in stages)}", extra=extra)


def _stage_text(s: Stage) -> str:
    rate = f"{s.rate_start:g}" if s.rate_start == s.rate_end else f"{s.rate_start:g}->{s.rate_end:g}"
    return f"{rate}:{s.duration_s:g}"
