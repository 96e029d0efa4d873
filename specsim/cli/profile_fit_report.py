"""What ``specsim profile fit`` prints about a fit (specsim.cli.profile_cmd runs it): each point's residual,
the TTFT term fitted beside the step terms, speculation's own terms, and a result file that names another model
than the one fitted."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from specsim import fmt
from specsim.errors import SpecsimInputError


def say(text: str) -> None:
    """Print a note or warning wrapped to the terminal's width (later lines indented); ``profile`` commands'
    notes all go through it."""
    typer.echo(fmt.wrapped(text))


def _model_key(name: str) -> str:
    """A model name reduced for comparison: the part after the last ``/``, lower case, letters and digits only,
    without a trailing ``hf``, ``instruct``, ``chat`` or ``it`` (``meta-llama/Llama-2-7b-hf`` and the preset
    ``llama2-7b`` both give ``llama27b``)."""
    key = str(name).rsplit("/", 1)[-1].lower()
    for suffix in ("-hf", "-instruct", "-chat", "-it"):
        key = key.removesuffix(suffix)
    return "".join(ch for ch in key if ch.isalnum())


def echo_other_model(paths: list[Path], model: str) -> None:
    """Warn for each ``vllm bench serve`` result among ``paths`` whose ``model_id`` names another model than
    ``model`` (the shape being fitted): its steps would fit another model's constants. Files that are not JSON
    or give no ``model_id`` (CSVs, /metrics dumps) are passed over."""
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        named = doc.get("model_id") if isinstance(doc, dict) else None
        if named and _model_key(named) != _model_key(model):
            say(f"warning: {path} measured {named}, the shape fitted is {model} (--model/--config): "
                "check they are the same model, or its terms describe another one")


def echo_residuals(rep, tokens: tuple[str, str], columns: tuple[str, str], what: str,
                    other: str = "holdout") -> None:
    """Print a fit report's residual table (one row per point: R, ``tokens`` = (column, attribute), measured and
    model milliseconds under ``columns``, relative error, the input rows merged into it where any point has more
    than one, fitted or ``other``: the holdout points, or for TTFT every point it predicts) and its median
    |``what``| per set (over its points). Beyond :data:`~specsim.hardware.fit_points.MAX_PRINTED_POINTS` points
    the table shows bins of them (:func:`~specsim.hardware.fit_points.summarise`), said above it."""
    from specsim.hardware.fit_points import MAX_PRINTED_POINTS, summarise
    from specsim.hardware.profile_fit import PointResidual

    shown, how = (summarise(rep.points, MAX_PRINTED_POINTS) if all(isinstance(p, PointResidual) for p in rep.points)
                  else (rep.points, None))
    if how:
        say(f"residuals of {how}, each bin's error that of its points' geometric mean (worst: its worst point's; "
            "the written profile keeps finer bins, or every point)")
    merged = any(getattr(p, "rows", 1) > 1 for p in shown)
    typer.echo(fmt.table(["point", "R", tokens[0], *columns, "error", *(["worst"] if how else []),
                          *(["rows"] if merged else []), "set"],
                         [[p.label, fmt.number(p.num_requests, 1), fmt.number(getattr(p, tokens[1]), 0),
                           fmt.number(p.measured_s * 1e3, 3), fmt.number(p.predicted_s * 1e3, 3),
                           fmt.percent(p.rel_error, signed=True),
                           *([fmt.percent(p.worst_rel_error if p.points > 1 else p.rel_error, signed=True)]
                             if how else []),
                           *([fmt.value(getattr(p, "rows", 1))] if merged else []), other if p.holdout else "fitted"]
                          for p in shown]))
    for which, flag in (("fitted", False), (other, True)):
        m = rep.median_abs_error(flag)
        if m is not None:
            typer.echo(f"median |{what}| on {which} points: {100 * m:.1f}%")


#: A fit whose median |error| on its own points exceeds this is refused, nothing written: its inputs and model
#: disagree beyond what the fitted constants can absorb (units, model or GPU). A model slower than its points even
#: at its efficiency bounds (<= 1) is impossible, so 2x too slow is refused ...
FIT_REFUSE_ERROR = 1.0
#: ... and so is one whose median predicted / measured is below this (10x too fast): a signed error never passes
#: -100%, so steps in ms under step_time_s (-99.6%) were written. This side is wider: with few --params the
#: held constants can leave a real engine's steps several-fold above the model.
FIT_REFUSE_TOO_FAST = 0.1

#: A TTFT residual beyond this relative error (any point, fitted or held out) gets a warning.
TTFT_WARN_ERROR = 0.2


def check_fit_quality(rep, what: str = "", units: str = "ms in a vllm bench result, itls in seconds",
                      check: str = "the drafter, K and the acceptance length", causes: str = "") -> None:
    """Refuse a fit that misses its own (``what``) points beyond :data:`FIT_REFUSE_ERROR` or
    :data:`FIT_REFUSE_TOO_FAST`, nothing written; else warn where it misses them by more than 20% in the median or
    at any one point (a median within 20% can hide one point the model cannot meet). ``units``, ``check`` and
    ``causes`` word the advice for the input at hand (the plain and the speculative fit share the rule: speculative
    points once got none of it, and a profile was written from steps of 10,500 ms)."""
    from specsim.hardware.residuals import median_ratio

    miss, ratio = rep.median_abs_error(False) or 0.0, median_ratio(rep.points, False) or 1.0
    if miss > FIT_REFUSE_ERROR or ratio < FIT_REFUSE_TOO_FAST:
        raise SpecsimInputError(None, None, f"the {what}fit", f"a model that meets its own {what}points within "
                                f"{FIT_REFUSE_ERROR:.0%} over and {1 / FIT_REFUSE_TOO_FAST:g}x under (check the units: "
                                f"{units}; {check}); no profile written", f"a median |error| of {miss:.1%} on the "
                                f"fitted points (the model's step {ratio:.3g}x the measured one)")
    far = [p for p in rep.points if not p.holdout and abs(p.rel_error) > 0.2]
    if miss > 0.2:
        say(f"warning: the {what}fit misses its own points by more than 20% (median {miss:.0%}): check the units, "
            f"{check} before using the profile")
    elif far:
        worst = max(far, key=lambda p: abs(p.rel_error))
        say(f"warning: the {what}fit misses {len(far)} of its own points by more than 20% (worst {worst.label}, "
            f"{worst.rel_error:+.1%}): the model does not explain {'it' if len(far) == 1 else 'them'}{causes}; check "
            "before using the profile")


def fit_ttft_term(sm, obs, held, chunk_tokens: int | None, prov: dict) -> None:
    """Where the inputs give TTFT: fit the request overhead to it, print every point's TTFT residual (the TPOT
    residuals are printed above) and add them to ``prov`` under ``fit.ttft``; else say TTFT was not fitted."""
    from specsim.hardware.ttft_fit import MAX_REQUEST_OVERHEAD_S, fit_ttft, has_ttft

    if not any(has_ttft(o) for o in obs):
        say("TTFT: not fitted (the inputs give no mean TTFT and prompt length)")
        return
    trep = fit_ttft(sm, obs, chunk_tokens, held)
    fitted, odd = sum(not p.holdout for p in trep.points), trep.request_overhead_s > MAX_REQUEST_OVERHEAD_S
    say(f"TTFT: fitted request_overhead_s = {trep.request_overhead_s:.4g} s on the lowest load ({fitted} point"
        f"{'s' if fitted > 1 else ''}), the others predicted" + ("" if odd else " (set engine.request_overhead_s;"
                                                               " the step terms stay fitted on TPOT)"))
    if odd:
        say(f"warning: request_overhead_s above {MAX_REQUEST_OVERHEAD_S:g} s is no engine's own overhead per "
            "request (milliseconds): the lowest load's TTFT holds a server queue or a prefill the profile does "
            "not see; do not set engine.request_overhead_s to it")
    echo_residuals(trep, ("prompt", "prompt_tokens"), ("ttft_ms", "model_ms"), "TTFT error", "predicted")
    worst = max(trep.points, key=lambda p: abs(p.rel_error), default=None)
    if worst is not None and abs(worst.rel_error) > TTFT_WARN_ERROR:
        labels = [p.label for p in trep.points]

        def name(p) -> str:                                         # the file too where two points share a label
            return p.label if labels.count(p.label) == 1 else f"{p.label} ({Path(p.source).name})"
        text = f"warning: the TTFT model misses {name(worst)} by {worst.rel_error:+.0%}"
        queued = min(trep.points, key=lambda p: p.rel_error)       # measured furthest above the model
        high = max(trep.points, key=lambda p: p.rel_error)
        pulled = queued.rel_error < 0 < high.rel_error and not queued.holdout
        if pulled:
            # the queued point is the cause, the over-predicted one the consequence (a fresh user's warning blamed
            # the one point with no queue)
            text += (f"; {name(queued)} measured {1 / (1 + queued.rel_error) - 1:.0%} above the model (its requests "
                     "waited in the server's queue) pulls the one fitted request_overhead_s up, so "
                     f"{name(high)} comes out {high.rel_error:+.0%}")
        if pulled or worst.rel_error < 0:       # a queue only raises the measured TTFT: the model under-predicts
            say(text + ": the TTFT model assumes no queue in the server (a load below max_num_seqs and the KV "
                "capacity, docs/profiles.md); fit TTFT on low-load points (give the loaded ones with --holdout) "
                "and read TTFT at load from a simulation")
        else:                                   # measured below the model: no queue explains it
            say(text + f" (measured {name(worst)} {worst.measured_s * 1e3:.4g} ms, below the model's "
                f"{worst.predicted_s * 1e3:.4g} ms, which no server queue explains): check mean_ttft_ms is in "
                "milliseconds and the prompt lengths (total_input_tokens), --chunk-tokens and the GPU")
    prov["fit"]["ttft"] = trep.provenance()


def check_spec_options(spec: list[Path], drafter: str | None, tau: float | None, k: int | None) -> None:
    """Refuse, before anything is read or fitted, ``--spec`` without ``--drafter``, a drafter ``profile fit`` cannot
    charge, and ``--drafter``, ``--acceptance-length`` or ``--num-spec-tokens`` without ``--spec`` (ignored in
    silence before; the other errors came after the whole plain fit had printed)."""
    from specsim.hardware.drafter import DRAFTER_FAMILY_OF

    names = sorted(n for n in DRAFTER_FAMILY_OF if n != "none")
    if spec and drafter is None:  # a fresh user's DSpark runs were fitted as EAGLE-3's in silence (the old default)
        raise SpecsimInputError(None, None, "--drafter", "the speculative runs' drafter with --spec "
                                f"({', '.join(names)}): its cost is charged beside the terms fitted", "none given")
    if drafter is not None and drafter not in names:
        raise SpecsimInputError(None, None, "--drafter", f"one of {', '.join(names)}", repr(drafter))
    if k is not None and k < 1:     # -2 was refused later as "spec_decode_acceptance_length in (1, K + 1 = -1]"
        raise SpecsimInputError(None, None, "--num-spec-tokens", "an int >= 1 (drafts per request per step)", str(k))
    if tau is not None and not tau > 1:
        raise SpecsimInputError(None, None, "--acceptance-length", "a number > 1 (tokens per request per step, the "
                                "bonus token included)", f"{tau:g}")
    given = [o for o, v in (("--drafter", drafter), ("--acceptance-length", tau), ("--num-spec-tokens", k))
             if v is not None]
    if given and not spec:
        raise SpecsimInputError(None, None, given[0], "speculative results to go with it (--spec FILE): it applies "
                                "to those only", "no --spec")


def read_spec_points(spec: list[Path], tau: float | None, k: int | None) -> list:
    """The speculative observations of the ``--spec`` files (:func:`specsim.hardware.spec_fit.
    spec_observations_from_vllm_results`, with ``--acceptance-length`` ``tau`` and ``--num-spec-tokens`` ``k``),
    read before the plain fit prints anything, so a bad file is refused first (its error came after the plain
    fit's whole table).

    Raises:
        SpecsimInputError: as the reader does, naming the file, the object and the field.
    """
    from specsim.hardware.spec_fit import spec_observations_from_vllm_results

    return [o for path in spec for o in spec_observations_from_vllm_results(path, tau, k)]


def fit_speculation_terms(rep, obs: list, drafter: str, tau: float | None, chunk_tokens: int | None = None):
    """(model, provenance): ``rep``'s model with speculation's terms fitted to the speculative observations ``obs``
    (:func:`read_spec_points`; none: at their sourced defaults, said so), printing the fit and the split of
    per-request and per-token cost."""
    from specsim.hardware.spec_fit import fit_speculation

    sm, prov = rep.model, rep.provenance()
    if not obs:
        say("note: without speculation every request verifies one token per step, so per_request_step_s holds the "
            "per-request and the per-verified-token cost together, and a speculative step (1 + K tokens per "
            "request) is charged it once per request; spec_request_s takes up the rest, fitted on speculative "
            "points (--spec; per_request_step_s is held there), else at its default")
        say(f"speculation terms: the defaults spec_step_s = {sm.terms.spec_step_s:.4g} s, spec_request_s = "
            f"{sm.terms.spec_request_s:.4g} s (vLLM issue 49548, docs/profiles.md): no speculative points "
            "given (--spec FILE to fit them)")
        return sm, prov
    for o in obs:
        if o.file_acceptance_length == o.file_acceptance_length and abs(o.file_acceptance_length - tau) > 1e-9:
            say(f"note: {Path(o.source).name} ({o.label}) measured acceptance length {o.file_acceptance_length:g}; "
                f"--acceptance-length {tau:g} is used instead")
    srep = fit_speculation(sm, obs, drafter, chunk_tokens=chunk_tokens)
    held = [f"{n} = {getattr(sm.terms, n):.4g} s (held)" for n in ("spec_step_s", "spec_request_s")
            if n not in srep.params]
    typer.echo(f"fitted speculation terms ({drafter} drafter): "
               + ", ".join([f"{n} = {srep.shown(n, ' s')}" for n in srep.params] + held))
    for line in srep.warnings():
        say(f"warning: {line}")
    echo_residuals(srep, ("B", "batch_tokens"), ("measured_ms", "model_ms"), "speculative error")  # had no header
    check_fit_quality(srep, "speculative ")
    prov["fit"]["speculation"] = dict(srep.provenance()["fit"], drafter=drafter)
    return srep.model, prov
