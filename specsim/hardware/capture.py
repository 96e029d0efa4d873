"""The CUDA-graph capture limit at run time: a scenario's ``engine.cudagraph_max_tokens`` applied to a step-model
profile (:func:`recapture`), and the steps a run ran eager, beyond the limit (:func:`eager_steps`,
:func:`eager_report`: the summary's ``profile_range.eager_steps`` and ``eager_share``, and a run notice)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.hardware.analytic import graph_limit
from specsim.hardware.profile import StepTimeProfile, profile_label
from specsim.hardware.stepmodel import step_model_of


def recapture(profile: StepTimeProfile, cudagraph_max_tokens: int | None,
              field: str = "engine.cudagraph_max_tokens") -> StepTimeProfile:
    """``profile`` with its engine's CUDA-graph capture limit set to ``cudagraph_max_tokens`` (tokens; 0: no graphs,
    every step eager): its step model rebuilt with that term and its tables priced again (padded decode sizes, the
    eager term beyond the limit), its name, source, lookup, extrapolation and other metadata kept. None, or the
    limit it already has, returns ``profile`` itself (no number changes).

    Raises:
        SpecsimInputError: ``profile`` is a plain table (no ``metadata.step_model``: its step times were measured
            or given with whatever limit its engine had, which it cannot re-price), naming ``field``.
    """
    if cudagraph_max_tokens is None:
        return profile
    sm = step_model_of(profile)
    if sm is None:
        raise SpecsimInputError(None, None, field, "unset for a plain table profile (its step times hold the "
                                "capture limit its engine measured them with; only a step-model profile, which "
                                "prices each step from its terms, can take another: specsim profile analytic "
                                "--cudagraph-max-tokens builds one)", f"{cudagraph_max_tokens} on profile "
                                f"{profile_label(profile)} (a table)")
    if sm.terms.cudagraph_max_tokens == cudagraph_max_tokens:
        return profile
    md = profile.metadata
    new = sm.with_terms(cudagraph_max_tokens=cudagraph_max_tokens).profile(
        profile.max_batch_tokens, name=md.get("name"), kind=md.get("kind", "analytic"), date=md.get("date"))
    keep = {k: v for k, v in md.items() if k not in ("engine", "cudagraph_max_tokens", "step_model")}
    return replace(new, metadata={**new.metadata, **keep}, source=profile.source, lookup=profile.lookup,
                   extrapolate=profile.extrapolate, spec_step_s=profile.spec_step_s,
                   spec_request_s=profile.spec_request_s, spec_zero_draft_pays=profile.spec_zero_draft_pays)


def _capture_limit(profile: StepTimeProfile) -> int | None:
    """The profile's CUDA-graph capture limit in tokens (``metadata.cudagraph_max_tokens``, else its step model's
    term), or None where it names none (a plain table that says nothing of its engine's graphs)."""
    md = profile.metadata or {}
    if md.get("cudagraph_max_tokens") is not None:
        return int(md["cudagraph_max_tokens"])
    if "step_model" not in md:
        return None
    return int(step_model_of(profile).terms.cudagraph_max_tokens)


def eager_steps(profile: StepTimeProfile, batch_tokens: np.ndarray) -> int | None:
    """How many steps of ``batch_tokens`` tokens each ran eager: more tokens than the last captured CUDA-graph size
    under the profile's capture limit (:func:`specsim.hardware.analytic.graph_limit`; every step with tokens when
    the limit is 0). None where the profile names no limit."""
    cap = _capture_limit(profile)
    if cap is None:
        return None
    return int(np.count_nonzero(np.asarray(batch_tokens) > graph_limit(cap)))


def eager_notice(eager: int, steps: int, profile: StepTimeProfile) -> str:
    """The run's notice that ``eager`` of its ``steps`` steps ran beyond the CUDA-graph capture limit."""
    cap = _capture_limit(profile)
    limit = (f"the CUDA-graph capture limit (cudagraph_max_tokens {cap}, largest captured size {graph_limit(cap)} "
             "tokens)" if cap else "no CUDA graphs (cudagraph_max_tokens 0)")
    return (f"{eager:,} of {steps:,} steps ({eager / steps:.1%}) ran eager, their batch beyond {limit}: every kernel "
            "launched from the host (engine.cudagraph_max_tokens sets a step-model profile's limit)")


def eager_report(report: dict[str, Any], profile: StepTimeProfile, steps) -> dict[str, Any]:
    """A run's ``profile_range`` (:func:`specsim.hardware.profile.range_report`) with ``eager_steps`` (steps of its
    ``steps`` frame beyond the capture limit, :func:`eager_steps`; None for a profile naming no limit),
    ``eager_share`` (of all steps) and, where any ran eager, a notice (:func:`eager_notice`)."""
    b = np.asarray(steps["batch_tokens"], dtype=np.int64)
    eager = eager_steps(profile, b)
    if eager:
        report["notices"].append(eager_notice(eager, b.size, profile))
    return {**report, "eager_steps": eager, "eager_share": eager / b.size if eager is not None and b.size else None}
