"""Fitting speculation's own overhead (issue 20): ``spec_step_s`` and ``spec_request_s`` from speculative runs.

The no-speculation fit (:mod:`specsim.hardware.profile_fit`) fixes the target's step; a speculative run then
shows what a speculative step costs beyond it. This module reads such runs and fits the two speculation terms
of :class:`~specsim.hardware.stepmodel.EngineTerms` only, every other constant held as given.

``vllm bench serve`` result with speculation (:func:`spec_observations_from_vllm_results`)
    One observation per JSON object. With speculation each request's step emits ``tau`` tokens on average
    (the acceptance length, bonus token included: vLLM's ``spec_decode_acceptance_length``), so:

    * **step time** = t x tau, t the decode time per output token: from a ``--save-detailed`` result's
      per-request ``itls`` and ``output_lens``, sum of every request's gaps / sum of (output - 1) (token-weighted:
      a request's TPOT falls with its own acceptance, so the mean TPOT, a per-request average, reads 2-7% low
      under speculation, docs/validation.md method 6); else ``mean_tpot_ms`` / 1000; else ``mean_itl_ms`` / 1000
      is the step (one streamed chunk per step); in a file without either mean (SGLang's ``bench_serving`` can
      give medians only) ``median_tpot_ms``, else ``median_itl_ms``, alike;
    * **tau** = ``spec_decode_acceptance_length``, else SGLang's ``accept_length`` (its scheduler's
      ``avg_spec_accept_length``: (accepted drafts + one bonus token) per request per verify step, the same
      measure);
    * **K**, drafts per request per step = ``spec_decode_draft_tokens / spec_decode_num_drafts`` (or given);
    * **R** = (``total_output_tokens`` - ``completed``) x TPOT / ``duration`` (Little's law over the decode
      time, as for no-speculation points), at most ``max_concurrency``;
    * **B** = R x (1 + K) (vLLM verifies every draft) + prompt tokens per step (chunked prefill);
    * **context** = prompt + output / 2 per request.

    ``acceptance_length`` given by the user replaces the file's (``profile fit`` says so where they differ);
    ``num_spec_tokens`` is for a file without draft counts, and refused where it disagrees with the file's K.
    R above 1.5 x ``max_concurrency`` is refused (times not in milliseconds), as for no-speculation points.

A speculative point's predicted step: the target's step at B (padded to the capture sizes) with R requests
reading R x context KV tokens, plus the drafter's time from its shape (:func:`specsim.hardware.drafter.
shaped_drafter_cost`, K drafts for R requests), plus ``spec_step_s + spec_request_s x R``. One point fits the
fixed part; two or more at different R fit both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from specsim.errors import SpecsimInputError, plain
from specsim.hardware.profile_fit import FIT_BOUNDS, FitReport, PointResidual, _at_bound, _far_from_default
from specsim.hardware.measured import R_OVER_CONCURRENCY
from specsim.hardware.measured import acceptance_length as acceptance_length_of
from specsim.hardware.step_points import MIN_STEP_MS, load_label

#: The speculation terms ``profile fit`` frees on speculative points.
SPEC_PARAMS = ("spec_step_s", "spec_request_s")


@dataclass(frozen=True)
class SpecObservation:
    """One speculative run's mean step: R requests, B verified tokens, K drafts each, acceptance length tau.

    Attributes (units): num_requests R; batch_tokens B (tokens); context_tokens (KV tokens per request);
    step_time_s (seconds); num_spec_tokens K (drafts per request per step); acceptance_length tau (tokens
    emitted per request per step, bonus included); source, line, label as
    :class:`specsim.hardware.step_points.StepObservation`.
    """

    num_requests: float
    batch_tokens: float
    context_tokens: float
    step_time_s: float
    num_spec_tokens: int
    acceptance_length: float
    source: str
    line: int | None
    label: str
    weight: float = 1.0
    #: the file's own acceptance length where ``--acceptance-length`` replaced it (NaN: not replaced, or none given)
    file_acceptance_length: float = math.nan

    @property
    def decode_tokens(self) -> float:
        """Tokens the step verifies for its decoding requests: R (1 + K) (vLLM verifies every draft)."""
        return self.num_requests * (1 + self.num_spec_tokens)


def _number(m: dict, name: str, src: str, k: int, expected: str, ok) -> float:
    v = m.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
        raise SpecsimInputError(src, k, name, expected, plain(v) if name in m else "no such key")
    return float(v)


#: Step-time keys of a speculative result, in the order they are read: a TPOT is per output token, an ITL per
#: step (one streamed chunk per step); the medians where the file has neither mean (SGLang's ``bench_serving``).
STEP_KEYS = ("mean_tpot_ms", "mean_itl_ms", "median_tpot_ms", "median_itl_ms")


def _per_token_s(m: dict, src: str, k: int, tau: float) -> float:
    """Seconds of decode per output token of a speculative result (:data:`STEP_KEYS`: a TPOT as it is, an ITL /
    ``tau``)."""
    names = STEP_KEYS[:2] if any(name in m for name in STEP_KEYS[:2]) else STEP_KEYS[2:]
    for name in names:
        v = m.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0:
            if v * (1.0 if name.endswith("_itl_ms") else tau) < MIN_STEP_MS:   # seconds under a _ms key
                raise SpecsimInputError(src, k, name, f"a time in milliseconds (a step takes >= {MIN_STEP_MS:g} ms; "
                                        "this reads as seconds)", plain(v))
            return float(v) / 1e3 / (tau if name.endswith("_itl_ms") else 1.0)
    raise SpecsimInputError(src, k, names[0], f"{' or '.join(names)} > 0 (a streamed run)",
                            " / ".join(plain(m.get(name)) if name in m else "no such key" for name in names))


def _acceptance_length(m: dict, src: str, k: int) -> tuple[str, float]:
    """(key, value) of the file's acceptance length: vLLM's ``spec_decode_acceptance_length``, else SGLang's ``accept_length`` (its
    ``avg_spec_accept_length``: accepted drafts plus one bonus token per verify step and request, the same
    measure) or another key of :data:`specsim.hardware.measured.SPEC_KEYS`."""
    from specsim.hardware.measured import SPEC_KEYS

    name = next((key for key in ("spec_decode_acceptance_length", *SPEC_KEYS) if m.get(key) is not None),
                "spec_decode_acceptance_length")
    return name, _number(m, name, src, k, "an acceptance length > 1 (spec_decode_acceptance_length or SGLang's "
                   "accept_length; or --acceptance-length)", lambda v: v > 1)


def spec_observations_from_vllm_results(path, acceptance_length: float | None = None,
                                        num_spec_tokens: int | None = None) -> list[SpecObservation]:
    """Speculative observations from a ``vllm bench serve --save-result`` file (module docstring).

    Raises:
        SpecsimInputError: a missing or bad field (naming object and field); an acceptance length outside
            (1, K + 1]; K < 1.
    """
    from specsim.hardware.measured import read_vllm_result

    src = str(path)
    out = []
    for k, point in enumerate(read_vllm_result(path), start=1):
        m = point.metrics
        tau_key, tau = (("--acceptance-length", acceptance_length) if acceptance_length is not None
                        else _acceptance_length(m, src, k))
        own_tau = acceptance_length_of(m) if acceptance_length is not None else None
        if "spec_decode_num_drafts" in m or "spec_decode_draft_tokens" in m or num_spec_tokens is None:
            drafts = _number(m, "spec_decode_num_drafts", src, k, "a count > 0 (or --num-spec-tokens)", lambda v: v > 0)
            kk = int(round(_number(m, "spec_decode_draft_tokens", src, k, "a count > 0", lambda v: v > 0) / drafts))
            if num_spec_tokens is not None and num_spec_tokens != kk:   # the file's K was replaced without a word
                raise SpecsimInputError(src, k, "--num-spec-tokens", f"the file's K = {kk} (spec_decode_draft_tokens / "
                                        "spec_decode_num_drafts; give --num-spec-tokens only for a file without "
                                        "them)", str(num_spec_tokens))
        else:
            kk = int(num_spec_tokens)
        if kk < 1 or not 1.0 < tau <= kk + 1:
            raise SpecsimInputError(src, k, tau_key, f"a value in (1, K + 1 = {kk + 1}]",
                                    f"{tau:g} with K = {kk}")
        duration = _number(m, "duration", src, k, "a number > 0 (seconds)", lambda v: v > 0)
        completed = _number(m, "completed", src, k, "a count >= 1", lambda v: v >= 1)
        tin = _number(m, "total_input_tokens", src, k, "a count >= 0", lambda v: v >= 0)
        tout = _number(m, "total_output_tokens", src, k, "a count > completed", lambda v: v > completed)
        for name in STEP_KEYS:          # a negative time is a broken file: refused, not skipped
            v = m.get(name)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0:
                raise SpecsimInputError(src, k, name, "a time >= 0 ms", plain(v))
        # a --save-detailed result's, where its itls agree with the summary's TPOT within 2x (else dropped by
        # measured.read_vllm_result: itls not in seconds, the summary instead)
        weighted = m.get("token_weighted_tpot_ms")
        per_token = weighted / 1e3 if weighted is not None else _per_token_s(m, src, k, tau)
        step = per_token * tau
        r = (tout - completed) * per_token / duration
        conc = m.get("max_concurrency")
        label = load_label(m) + " (speculative)"
        if isinstance(conc, (int, float)) and not isinstance(conc, bool) and conc >= 1 and r > conc:
            if r > R_OVER_CONCURRENCY * conc:       # as the plain points (R was capped at 16 in silence)
                name = "itls" if weighted is not None else "mean_tpot_ms"
                raise SpecsimInputError(src, k, name, f"a decode time per token that fits the run's {conc:g} users "
                                        f"(Little's law gives R = {r:,.4g} requests decoding at once, over "
                                        f"{R_OVER_CONCURRENCY:g}x max_concurrency): times not in milliseconds "
                                        "(itls: seconds)", f"{per_token * 1e3:.4g} ms per token")
            label += f" (R {r:.4g} clipped to {conc:g})"
            r = float(conc)
        b = r * (1 + kk) + tin * step / duration
        out.append(SpecObservation(r, b, tin / completed + tout / completed / 2.0, step, kk, float(tau), src, k,
                                   label, file_acceptance_length=math.nan if own_tau is None else own_tau))
    return out


def predict_speculative(sm, drafter, observations: Sequence[SpecObservation],
                        chunk_tokens: int | None = None) -> np.ndarray:
    """(n,) predicted seconds of each speculative observation's step: target step + drafter + speculation terms.

    Args:
        sm: the target's :class:`~specsim.hardware.stepmodel.StepModel` (with the speculation terms to use).
        drafter: a cost model with ``draft_time_s(R, K, profile, kv_tokens)`` (R rounded to the nearest int >= 1).
        chunk_tokens: as :func:`specsim.hardware.profile_fit.predict_observations`: the prompt tokens per step
            arrive in chunks of this size, the other steps verify R (1 + K) tokens in a CUDA graph (at one user
            and K = 7 the mean B of ~8.6 would otherwise pad to 16); None: the target's step at the mean B.
    """
    from specsim.hardware.profile_fit import predict_observations

    r = np.array([o.num_requests for o in observations], np.float64)
    c = np.nan_to_num(np.array([o.context_tokens for o in observations], np.float64), nan=0.0)
    target = predict_observations(sm, observations, chunk_tokens)
    draft = np.array([drafter.draft_time_s(max(1, int(round(o.num_requests))), o.num_spec_tokens, None,
                                           o.num_requests * ci) for o, ci in zip(observations, c)])
    return target + draft + sm.terms.spec_step_s + sm.terms.spec_request_s * r


def fit_speculation(base, observations: Sequence[SpecObservation], drafter: str,
                    params: Sequence[str] | None = None, holdout: Sequence[SpecObservation] = (),
                    chunk_tokens: int | None = None) -> FitReport:
    """Fit the speculation terms of ``base`` (its other constants held) to speculative observations.

    Args:
        base: the target's :class:`StepModel`, already fitted on no-speculation points (or at its defaults).
        observations: fitted speculative points; holdout: predicted only.
        drafter: the drafter's name (``dspark``, ``dflash``, ``eagle3``, ``mtp``: its cost from its shape;
            ``ngram``, ``suffix``: its CPU time, :mod:`specsim.hardware.lookup_drafter`).
        params: default ``spec_step_s`` from one point, both terms from two or more.
        chunk_tokens: prefill-sharing steps as the engine runs them (:func:`predict_speculative`).

    Raises:
        SpecsimInputError: no observations, a parameter outside :data:`SPEC_PARAMS`, more parameters than points.
    """
    from scipy.optimize import least_squares

    from specsim.hardware.drafter import DRAFTER_FAMILY_OF, drafter_cost, shaped_drafter_cost

    if not observations:
        raise SpecsimInputError(None, None, "--spec", "at least one speculative point to fit", "none")
    params = tuple(params) if params is not None else SPEC_PARAMS[:min(2, len(observations))]
    if not params or any(p not in SPEC_PARAMS for p in params) or len(params) > len(observations):
        raise SpecsimInputError(None, None, "--spec-params", f"1..{min(2, len(observations))} distinct names "
                                f"from {list(SPEC_PARAMS)}", ",".join(params) or "nothing")
    dcost = drafter_cost(drafter) if DRAFTER_FAMILY_OF.get(drafter) == "lookup" else shaped_drafter_cost(drafter, base)
    measured = np.array([o.step_time_s for o in observations], np.float64)
    hi = np.array([FIT_BOUNDS[p][1] for p in params])
    x0 = np.clip([getattr(base.terms, p) for p in params], 0.0, hi) / hi

    def at(x):
        return base.with_terms(**{p: float(v) for p, v in zip(params, x * hi)})

    fit = least_squares(lambda x: np.log(predict_speculative(at(x), dcost, observations, chunk_tokens) / measured), x0,
                        bounds=(0.0, 1.0), x_scale="jac")
    names = sorted({Path(o.source).name for o in observations})
    fitted = at(fit.x).with_terms(source=f"{base.terms.source}; speculation terms ({', '.join(params)}) fitted "
                                         f"by specsim profile fit to {', '.join(names)} ({drafter})")
    points = [PointResidual(o.label, o.source, float(o.num_requests), float(o.batch_tokens),
                            float(o.context_tokens), float(o.step_time_s), float(p), hold)
              for group, hold in ((observations, False), (holdout, True)) if len(group)
              for o, p in zip(group, predict_speculative(fitted, dcost, group, chunk_tokens))]
    return FitReport(fitted, {p: float(getattr(fitted.terms, p)) for p in params}, points,
                     [p for p in params if _at_bound(getattr(fitted.terms, p), FIT_BOUNDS[p])], names,
                     sorted({Path(o.source).name for o in holdout}), _far_from_default(fitted, params))
