"""``specsim profile fit``: fit the step model's engine-level terms to a user's measured steps (issue 12).

The fit never draws a free curve: it adjusts named :class:`~specsim.hardware.stepmodel.EngineTerms`
(efficiencies bounded to (0, 1], times to >= 0) of a :class:`~specsim.hardware.stepmodel.StepModel` whose
shapes (model, GPU, TP, EP) stay as given, by bounded least squares on the log of the step time, so every
point weighs by its relative error. Each observation (:mod:`specsim.hardware.step_points`) is a step of B
tokens from R requests reading ``R x context`` cached tokens; its prediction is the model's step time at B
padded to the CUDA-graph capture sizes (decode steps run in graphs).

Rules (tested): more parameters than fitting points is refused; observations named as holdout are never fitted
and their error is reported apart; the written profile's metadata names the fitted files, the parameters, their
values and the residual of every point (of every bin of points beyond :data:`~specsim.hardware.fit_points.
MAX_STORED_POINTS`). Rows of one step shape are fitted as one point of their summed weight and geometric mean step,
the same least squares (:func:`~specsim.hardware.fit_points.merge_shapes`), so a per-step CSV of 500,000 rows fits
as its distinct shapes.

Recommended protocol (docs/validation.md): fit on no-speculation runs (or MTP-1 where that is all there is, as
the paper had), then predict the speculative policies with the fitted profile; never fit on what is predicted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.hardware.fit_points import MAX_STORED_POINTS, merge_shapes, summarise
from specsim.hardware.residuals import Residual, median_abs_error
from specsim.hardware.step_profile import SPEC_REQUEST_S_MAX, SPEC_STEP_S_MAX
from specsim.hardware.stepmodel import StepModel

#: Parameters ``profile fit`` may free, with their bounds (efficiencies <= 1, times >= 0 and below a ceiling
#: that no real engine approaches: 10 ms per request per step, 50 ms per step, 50 us per kernel).
FIT_BOUNDS: dict[str, tuple[float, float]] = {
    "bw_eff": (0.2, 1.0), "flops_eff": (0.1, 1.0), "attn_bw_eff": (0.1, 1.0), "link_eff": (0.05, 1.0),
    "kernel_s": (0.0, 5e-5), "per_request_step_s": (0.0, 1e-2), "fixed_step_s": (0.0, 5e-2),
    "attn_request_s": (0.0, 1e-4), "spec_step_s": (0.0, SPEC_STEP_S_MAX), "spec_request_s": (0.0, SPEC_REQUEST_S_MAX),
    "eager_kernel_s": (0.0, 5e-5), "mixed_step_s": (0.0, 5e-2),
}
#: What ``profile fit`` frees unless told otherwise: the GPU-side cost per kernel (the step's floor beyond
#: streaming the weights: CUDA graphs make it far smaller than the eager calibration's 7.8 us) and the
#: per-request cost (the step's slope in R). The protocol docs/validation.md validates.
DEFAULT_PARAMS = ("kernel_s", "per_request_step_s")


#: ``per_request_step_s`` fitted only on points of fewer running requests than this is said to be extrapolated.
NARROW_R = 8.0


@dataclass(frozen=True)
class PointResidual(Residual):
    """One observation against the fitted model: seconds measured and predicted, relative error
    (:class:`~specsim.hardware.residuals.Residual`); ``rows``: the input rows it stands for (rows of one shape
    merged), ``weight`` its weight in the fit; a bin of points (:func:`~specsim.hardware.fit_points.summarise`) has
    ``points`` > 1 and its worst point's error in ``worst_rel_error``."""

    label: str
    source: str
    num_requests: float
    batch_tokens: float
    context_tokens: float
    measured_s: float
    predicted_s: float
    holdout: bool
    prompt_tokens: float = float("nan")
    rows: int = 1
    weight: float = 1.0
    points: int = 1
    worst_rel_error: float = float("nan")

    def stored(self) -> dict[str, Any]:
        """The residual as a row of ``metadata.fit.points`` (:meth:`Residual.row`; ``rows``, ``points`` and
        ``worst_rel_error`` where it stands for more than one row or point)."""
        extra = {"prompt_tokens": round(self.prompt_tokens, 1)} if self.prompt_tokens > 0 else {}
        extra.update({"rows": self.rows} if self.rows > 1 else {})
        if self.points > 1:
            extra.update(points=self.points, worst_rel_error=round(self.worst_rel_error, 4))
        return self.row(num_requests=round(self.num_requests, 3), batch_tokens=round(self.batch_tokens, 3),
                        context_tokens=round(self.context_tokens, 1), **extra)


@dataclass
class FitReport:
    """The outcome of :func:`fit_step_model`.

    Attributes:
        model: the fitted :class:`StepModel`.
        params: {name: fitted value} of the freed parameters.
        at_bounds: the freed parameters that ended on a bound (the data asks for more than the bound allows:
            wrong units, a wrong shape or GPU, or a term the model lacks).
        points: the :class:`PointResidual` of every distinct step shape (fitted and holdout; rows of one shape
            merged, :func:`~specsim.hardware.fit_points.merge_shapes`).
        fitted_sources: files the fit used; holdout_sources: files it only predicts.
        far_from_default: {name: fitted / default} of the freed parameters that landed an order of magnitude
            (x10 or /10) or more from their :class:`EngineTerms` default (issue 20: a ``kernel_s`` fitted 10x too
            large hid MoE experts that cost nothing); parameters whose default is 0 are not compared.
        unseparated: ``mixed_step_s`` was fitted beside ``per_request_step_s`` on points whose share of
            prompt-starting steps follows their R (:func:`mixed_share` within 0.02 of a line in R): one dataset's
            loads, which cannot tell the two apart.
        no_turnover: ``mixed_step_s`` was fitted on points none of which gives prompt tokens per step with a
            prompt length (``prompt_tokens``, and B above R): nothing in them charges it.
        held: {name: why} of the asked-for parameters no point's step depends on (``eager_kernel_s`` without a
            point beyond the capture limit): held at their value, not in ``params``.
    """

    model: StepModel
    params: dict[str, float]
    points: list[PointResidual]
    at_bounds: list[str] = field(default_factory=list)
    fitted_sources: list[str] = field(default_factory=list)
    holdout_sources: list[str] = field(default_factory=list)
    far_from_default: dict[str, float] = field(default_factory=dict)
    unseparated: bool = False
    no_turnover: bool = False
    held: dict[str, str] = field(default_factory=dict)

    def warnings(self) -> list[str]:
        """One line per freed parameter that ended on a bound or an order of magnitude from its default, and one
        when ``per_request_step_s`` is fitted on points of R below :data:`NARROW_R` only."""
        out = [_bound_warning(name, self.params[name]) for name in self.at_bounds]
        out += [f"{name} = {self.params[name]:.4g} is {ratio:.3g}x its default {self.params[name] / ratio:.4g}: "
                "an order of magnitude away; the term is absorbing a cost the model's shapes miss (check the model, "
                "TP / EP, the dtype and the GPU)" for name, ratio in self.far_from_default.items()]
        if self.no_turnover:
            out.append("mixed_step_s is not fitted by these points: none gives a prompt length with prompt tokens per "
                       "step (a step CSV needs a prompt_tokens column and batch_tokens above num_requests; vLLM "
                       "results give both)")
        elif self.unseparated:
            out.append("mixed_step_s and per_request_step_s are not separated: the fitted points' share of steps that "
                       "start a prompt follows their R (one dataset's loads); fit them on points of different "
                       "turnover (two datasets, or other prompt and output lengths, on one server)")
        fitted_r = [p.num_requests for p in self.points if not p.holdout]
        if "per_request_step_s" in self.params and fitted_r and max(fitted_r) < NARROW_R:
            out.append(f"per_request_step_s, the step's slope in R, is fitted on points of R <= {max(fitted_r):.3g} "
                       f"only: at loads above that it is extrapolated unchecked (a fit on 1 and 2 users missed 128 "
                       "by +149%); add a loaded point, or give one with --holdout to see the error there")
        return out

    def shown(self, name: str, unit: str = "") -> str:
        """The fitted value of ``name`` as printed, with ``unit`` after it: 4 significant digits, or its bound and
        ``(its bound)`` where it ended on one (a term at its 0 bound was printed 3.955e-24)."""
        v = self.params[name]
        lo, hi = FIT_BOUNDS[name]
        if name in self.at_bounds:
            return f"{lo if abs(v - lo) <= abs(v - hi) else hi:g}{unit} (its bound)"
        return f"{v:.4g}{unit}"

    def median_abs_error(self, holdout: bool) -> float | None:
        """Median |relative error| of the fitted (False) or holdout (True) points (one per distinct step shape);
        None if there are none."""
        return median_abs_error(self.points, holdout)

    def rows_read(self, holdout: bool = False) -> int:
        """Input rows behind the fitted (False) or holdout (True) points."""
        return sum(p.rows for p in self.points if p.holdout == holdout)

    def provenance(self) -> dict[str, Any]:
        """Metadata for the written profile: files, parameters, residuals (at most
        :data:`~specsim.hardware.fit_points.MAX_STORED_POINTS` of them: bins beyond, said under ``points_binned``)."""
        stored, how = summarise(self.points, MAX_STORED_POINTS)
        return {
            "fit": {
                "fitted_on": self.fitted_sources, "holdout": self.holdout_sources, "params": self.params,
                **({"held": self.held} if self.held else {}),
                "at_bounds": self.at_bounds, "far_from_default": self.far_from_default,
                "median_abs_error_fitted": self.median_abs_error(False),
                "median_abs_error_holdout": self.median_abs_error(True),
                "rows_read": self.rows_read(False), "rows_read_holdout": self.rows_read(True),
                "points_fitted": sum(not p.holdout for p in self.points),
                **({"points_binned": how} if how else {}),
                "points": [p.stored() for p in stored],
            },
        }


@dataclass(frozen=True)
class StepColumns:
    """Observations' fields as (n,) float64 arrays, read once for the many predictions of a fit: R, B, context
    (NaN: not known), D decode tokens per step (``decode_tokens`` where the observation has it, else R) and prompt
    length L (``prompt_tokens``; 0 where not given); tokens throughout."""

    num_requests: np.ndarray
    batch_tokens: np.ndarray
    context_tokens: np.ndarray
    decode_tokens: np.ndarray
    prompt_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.num_requests)


def step_columns(observations: Sequence | StepColumns) -> StepColumns:
    """The :class:`StepColumns` of observations (objects with ``num_requests``, ``batch_tokens``,
    ``context_tokens``, optional ``decode_tokens`` and ``prompt_tokens``); columns are returned as given."""
    if isinstance(observations, StepColumns):
        return observations
    n = len(observations)

    def col(name: str, default: str | float) -> np.ndarray:
        return np.fromiter((getattr(o, name, getattr(o, default) if isinstance(default, str) else default)
                            for o in observations), np.float64, n)

    return StepColumns(col("num_requests", math.nan), col("batch_tokens", math.nan), col("context_tokens", math.nan),
                       col("decode_tokens", "num_requests"), np.nan_to_num(col("prompt_tokens", math.nan)))


def predict_observations(sm: StepModel, observations: Sequence | StepColumns,
                         chunk_tokens: int | None = None) -> np.ndarray:
    """(n,) predicted seconds of each observation's mean step, as the simulator runs it (K = R x context; an
    unknown context, NaN, reads no KV: give ``context_tokens`` where the input lacks it).

    The P = B - D prompt tokens per step (D the decode tokens: ``decode_tokens`` where the observation has it, as
    speculative ones do, R (1 + K); else R) ride on a share f of the steps, each carrying D + P / f tokens
    (unpadded, as the engine runs mixed steps, plus ``mixed_step_s``) while the rest verify D tokens in a CUDA
    graph: the mean step is ``(1 - f) t(D) + f (t(D + P / f) + mixed_step_s)`` (issue 20). Prompts of
    ``prompt_tokens`` L that fit the chunk (``chunk_tokens``; None: any length) arrive whole and at random,
    P / L per step, so f = 1 - exp(-P / L) (:func:`mixed_share`) and each mixed step holds P / (f L) prompts;
    longer prompts, or an unknown L with ``chunk_tokens`` given, arrive as chunks of ``chunk_tokens``:
    f = min(1, P / chunk). It matters wherever the step is not linear in B: the MoE step is concave (the touched
    experts saturate), and a dense GEMM convex where it turns compute bound between D and D + P / f (B200 at
    128 -> 270 tokens); the step at the mean B, which the fit took before, misses both, and then the simulation
    misses the fit's own points (docs/validation.md, "The measurement window, as GuideLLM counts it"). Only where
    neither L nor ``chunk_tokens`` is known is the step the model's at the mean B. Hybrid models' prefill chunks
    move their linear-attention state as the chunked kernel does (:meth:`StepModel.prefill_state_s`, per prompt
    or per chunk). ``observations`` may be given as :func:`step_columns` (a fit reads them once).
    """
    cols = step_columns(observations)
    r, b = cols.num_requests, cols.batch_tokens
    c = np.nan_to_num(cols.context_tokens, nan=0.0)
    d, p, prompt = _prompt_tokens(cols)
    f, whole, chunked = _mixed(p, prompt, chunk_tokens)
    known = whole | chunked
    at_mean = (0.0 if known.all() else                                                  # neither L nor a chunk
               np.asarray(sm.step_time(sm.graph_tokens(b), r, r * c), np.float64))
    decode = np.asarray(sm.step_time(sm.graph_tokens(np.maximum(d, 1.0)), r, r * c), np.float64)
    tokens = p / np.maximum(f, 1e-12)                   # prompt tokens in a step that carries some
    state = np.where(whole, tokens / np.maximum(prompt, 1.0) * sm.prefill_state_s(prompt),
                     sm.prefill_state_s(tokens))
    mixed = np.asarray(sm.step_time(np.ceil(d + tokens), r, r * c), np.float64) + state + sm.terms.mixed_step_s
    return np.where(f > 0, (1.0 - f) * decode + f * mixed, np.where(known, decode, at_mean))


def _prompt_tokens(observations: Sequence | StepColumns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(D, P, L), (n,) each: the decode tokens per step (``decode_tokens``, else R), the prompt tokens per step
    P = max(B - D, 0) and the prompt length L (``prompt_tokens``; 0 where not given)."""
    cols = step_columns(observations)
    return cols.decode_tokens, np.maximum(cols.batch_tokens - cols.decode_tokens, 0.0), cols.prompt_tokens


def mixed_share(observations: Sequence | StepColumns, chunk_tokens: int | None = None) -> np.ndarray:
    """(n,) share of each observation's steps that carry prompt tokens, as :func:`predict_observations` charges
    ``mixed_step_s`` on them: P = B - D prompt tokens per step; prompts of L tokens (``prompt_tokens``) that fit
    the chunk arrive whole and at random, P / L per step, so ``1 - exp(-P / L)`` of the steps carry at least one;
    longer prompts, or an unknown L with ``chunk_tokens`` given, ride as chunks on ``min(1, P / chunk)`` of them;
    0 where neither L nor ``chunk_tokens`` is given."""
    _, p, prompt = _prompt_tokens(observations)
    return _mixed(p, prompt, chunk_tokens)[0]


def _mixed(p: np.ndarray, prompt: np.ndarray, chunk_tokens: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(share, whole, chunked), (n,) each, of P prompt tokens per step and prompts of ``prompt`` tokens (0: not
    given): :func:`mixed_share` and which observations' prompts arrive whole or as chunks of ``chunk_tokens``."""
    whole = (prompt > 0) & (prompt <= (chunk_tokens or np.inf))
    chunked = ~whole & bool(chunk_tokens)
    f = np.where(whole, _share(p, prompt), np.where(chunked, np.minimum(1.0, p / (chunk_tokens or 1)), 0.0))
    return f, whole, chunked


def _share(p: np.ndarray, prompt: np.ndarray) -> np.ndarray:
    """``1 - exp(-P / L)`` of P prompt tokens per step and prompts of ``prompt`` tokens L (0: not given), (n,)."""
    return np.where(prompt > 0, -np.expm1(-p / np.maximum(prompt, 1.0)), 0.0)


def _no_turnover(observations: Sequence, params: Sequence[str], chunk_tokens: int | None) -> bool:
    """Whether ``mixed_step_s`` is freed on points that charge it nowhere (no :func:`mixed_share`)."""
    return "mixed_step_s" in params and not mixed_share(observations, chunk_tokens).any()


def _unseparated(observations: Sequence, params: Sequence[str], chunk_tokens: int | None) -> bool:
    """Whether ``mixed_step_s`` and ``per_request_step_s`` are both freed on points whose :func:`mixed_share`
    lies within 0.02 of a straight line in R (least squares): then the two terms trade off freely."""
    if not {"mixed_step_s", "per_request_step_s"} <= set(params):
        return False
    r = step_columns(observations).num_requests
    share = mixed_share(observations, chunk_tokens)
    a = np.column_stack([np.ones_like(r), r])
    resid = share - a @ np.linalg.lstsq(a, share, rcond=None)[0]
    return bool(np.max(np.abs(resid)) < 0.02)


def fit_step_model(base: StepModel, observations: Sequence, params: Sequence[str] = DEFAULT_PARAMS,
                   holdout: Sequence = (), chunk_tokens: int | None = None) -> FitReport:
    """Fit ``params`` of ``base``'s :class:`EngineTerms` to ``observations``; report ``holdout`` apart.

    Args:
        base: the shapes and the starting constants.
        observations: fitted points (objects with ``num_requests``, ``batch_tokens``, ``context_tokens``,
            ``step_time_s`` in seconds, ``label``, ``source``; :class:`specsim.hardware.step_points.StepObservation`,
            whose rows of one step shape are fitted as one point, :func:`~specsim.hardware.fit_points.merge_shapes`:
            the same least squares on log step time).
        params: names in :data:`FIT_BOUNDS`.
        holdout: points predicted only (merged alike).
        chunk_tokens: the engine's prefill chunk (vLLM ``max_num_batched_tokens``): a longer prompt is predicted
            as chunks of it, a shorter one whole (:func:`predict_observations`); None: every prompt whole, and the
            step at the mean B where an observation gives no prompt length.

    Raises:
        SpecsimInputError: an unknown parameter, no observations, or more parameters than fitting points
            (distinct step shapes).
    """
    from scipy.optimize import least_squares

    names = sorted(p for p in FIT_BOUNDS if not p.startswith("spec_"))    # spec terms: spec_fit, on --spec points
    unknown = [p for p in params if p not in names]
    if unknown or not params or len(set(params)) != len(params):
        why = ("; spec_step_s and spec_request_s are not step terms: they are fitted on speculative results given "
               "with --spec (and --drafter)" if any(p.startswith("spec_") for p in unknown) else "")
        raise SpecsimInputError(None, None, "--params", f"distinct names from {names}{why}",
                                ",".join(params) or "nothing")
    rows = len(observations)
    observations, holdout = merge_shapes(observations), merge_shapes(holdout)
    if len(observations) < len(params):
        shapes = f" distinct step shape(s) of {rows} row(s)" if rows > len(observations) else " point(s)"
        raise SpecsimInputError(None, None, "--params",
                                f"at most {len(observations)} parameter(s): one per fitting point at most "
                                f"({len(observations)}{shapes} to fit)", f"{len(params)}: {','.join(params)}")
    cols = step_columns(observations)
    held = _unconstrained(base, cols, params, chunk_tokens)
    params = [p for p in params if p not in held]
    measured = np.fromiter((o.step_time_s for o in observations), np.float64, len(observations))
    weight = np.sqrt(np.fromiter((getattr(o, "weight", 1.0) for o in observations), np.float64, len(observations)))
    lo = np.array([FIT_BOUNDS[p][0] for p in params])
    hi = np.array([FIT_BOUNDS[p][1] for p in params])
    scale = hi                                               # every parameter in units of its ceiling
    x0 = np.clip([getattr(base.terms, p) for p in params], lo, hi)

    def model_at(x: np.ndarray) -> StepModel:
        return base.with_terms(**{p: float(v) for p, v in zip(params, x * scale)})

    def residuals(x: np.ndarray) -> np.ndarray:
        return weight * np.log(predict_observations(model_at(x), cols, chunk_tokens) / measured)

    fitted = model_at(snap_to_bounds(least_squares(residuals, x0=x0 / scale, bounds=(lo / scale, hi / scale),
                                                   x_scale="jac").x, lo / scale, hi / scale) if params else x0)
    files = _file_names(observations)
    fitted = fitted.with_terms(source=f"fitted by specsim profile fit ({', '.join(params)}) to " + ", ".join(files))
    points = _residuals(fitted, observations, False, chunk_tokens) + _residuals(fitted, holdout, True, chunk_tokens)
    return FitReport(fitted, {p: float(getattr(fitted.terms, p)) for p in params}, points,
                     [p for p in params if _at_bound(getattr(fitted.terms, p), FIT_BOUNDS[p])],
                     files, _file_names(holdout), _far_from_default(fitted, params),
                     _unseparated(cols, params, chunk_tokens), _no_turnover(cols, params, chunk_tokens), held)


def _file_names(observations: Sequence) -> list[str]:
    """The sorted names (no folder) of the files the observations came from."""
    return sorted({Path(s).name for s in {o.source for o in observations}})


def _unconstrained(base: StepModel, observations: Sequence, params: Sequence[str],
                   chunk_tokens: int | None) -> dict[str, str]:
    """{name: why} of the ``params`` held at their value, not fitted: ``eager_kernel_s`` where no observation's
    predicted step depends on it (the same at both ends of its bounds: no point runs beyond the capture limit).
    (``mixed_step_s`` without turnover keeps its own warning, :attr:`FitReport.no_turnover`.)"""
    if "eager_kernel_s" not in params:
        return {}
    ends = [predict_observations(base.with_terms(eager_kernel_s=v), observations, chunk_tokens)
            for v in FIT_BOUNDS["eager_kernel_s"]]
    return {"eager_kernel_s": "no point beyond the capture limit"} if np.allclose(ends[0], ends[1], rtol=1e-12,
                                                                                     atol=0.0) else {}


#: How far (a factor either way) a fitted constant may land from its default before ``profile fit`` warns.
FAR_FACTOR = 10.0


def _far_from_default(sm: StepModel, params: Sequence[str]) -> dict[str, float]:
    """{name: fitted / default} of the parameters at least :data:`FAR_FACTOR` away from their
    :class:`EngineTerms` default (defaults of 0 are skipped: nothing to compare against; so are values on a bound,
    which get the at-bound warning instead)."""
    from specsim.hardware.stepmodel import EngineTerms

    default = EngineTerms()
    out = {}
    for p in params:
        d, v = getattr(default, p), getattr(sm.terms, p)
        if _at_bound(v, FIT_BOUNDS[p]):
            continue                                        # said by its own at-bound warning
        if d > 0 and (v >= FAR_FACTOR * d or v <= d / FAR_FACTOR):
            out[p] = float(v / d)
    return out


def _bound_warning(name: str, value: float) -> str:
    """The warning for a freed parameter that ended on a bound: a speculation term (fitted on --spec points, never
    in --params) at 0 means the points show no such cost; any other at a bound that the fit would push it further."""
    lo, hi = FIT_BOUNDS[name]
    if name.startswith("spec_") and abs(value - lo) <= abs(value - hi):
        return (f"{name} ended on its bound {lo:g}: the speculative points show no such cost beyond the target's "
                "step and the drafter's (check --drafter, --acceptance-length and --num-spec-tokens if that is "
                "unexpected)")
    if name.startswith("spec_"):
        return (f"{name} ended on its bound {hi:g}: the fit would push it further (check the units, --drafter, "
                "--acceptance-length and --num-spec-tokens)")
    return (f"{name} ended on its bound {FIT_BOUNDS[name]}: the fit would push it further (check the units, the "
            "model, the GPU and TP, or leave it out of --params)")


def snap_to_bounds(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``x`` with each value within :func:`_at_bound`'s tolerance of its bound set to the bound itself (a term
    the fit drove to 0 was saved as 7e-24 s and shown as "2.4e-13 ms per running request")."""
    tol = 1e-6 * (hi - lo)
    return np.where(x <= lo + tol, lo, np.where(x >= hi - tol, hi, x))


def _at_bound(value: float, bounds: tuple[float, float]) -> bool:
    lo, hi = bounds
    return bool(value <= lo + 1e-6 * (hi - lo) or value >= hi - 1e-6 * (hi - lo))


def _residuals(sm: StepModel, observations: Sequence, holdout: bool,
               chunk_tokens: int | None = None) -> list[PointResidual]:
    if not len(observations):
        return []
    pred = predict_observations(sm, observations, chunk_tokens)
    return [PointResidual(o.label, o.source, float(o.num_requests), float(o.batch_tokens), float(o.context_tokens),
                          float(o.step_time_s), float(p), holdout, float(getattr(o, "prompt_tokens", float("nan"))),
                          int(getattr(o, "rows", 1)), float(getattr(o, "weight", 1.0)))
            for o, p in zip(observations, pred)]
