"""The notices a run prints about its inputs (one line each, in the summary's notices; sweeps repeat the acceptance
ones through ``summary["acceptance_notice"]``): acceptance from built-in rates, a policy's own drafter running on
the scenario's acceptance setting, a confidence-reading policy on a drafter without a confidence head, a fitted
TTFT term the run does not charge; and the scenario's seconds keys whose value no engine has, a unit slip
(:func:`unit_warnings`, printed once by ``specsim run``, ``sweep``, ``tune`` and ``scenario check``)."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from specsim import fmt
from specsim.acceptance.tables import BUILTIN_TABLES
from specsim.hardware.drafter import DRAFTER_FAMILY_OF
from specsim.hardware.profile import StepTimeProfile
from specsim.errors import SpecsimInputError
from specsim.scenario import DRAFTER_ACCEPTANCE_KEYS, Scenario


def acceptance_notices(sc: Scenario, pc, source: str | None, profile: StepTimeProfile) -> list[str]:
    """The acceptance notices of a run whose policy resolved to ``pc`` (:class:`specsim.run_config.PolicyChoice`),
    its acceptance model's ``source`` (None without one): :func:`default_acceptance_notice`,
    :func:`forced_drafter_notice`, :func:`cpu_drafter_notice`, those that apply."""
    notes = (default_acceptance_notice(sc, pc, source, profile), forced_drafter_notice(sc, pc),
             cpu_drafter_notice(pc))
    return [n for n in notes if n]


def acceptance_error(e: SpecsimInputError, sc: Scenario, drafter: str) -> SpecsimInputError:
    """The error to raise for ``e``, raised building ``drafter``'s acceptance model from ``sc``: a drafter-specific
    key (:data:`specsim.scenario.DRAFTER_ACCEPTANCE_KEYS`) named as the drafter's own entry where it has one; where
    the policy runs a drafter of its own (mtp1: mtp) on the section's key, a hint to give that drafter its own;
    where the run's drafter is the scenario's, a length beyond the run's drafts points to ``length_gamma``.
    ``e`` unchanged otherwise (a table file's own error keeps its file)."""
    key = (e.field or "").removeprefix("acceptance.")
    if key not in DRAFTER_ACCEPTANCE_KEYS:
        return e
    if drafter in sc.acceptance.drafters:
        return replace(e, field=f"acceptance.drafters.{drafter}.{key}")
    if e.file is not None or not getattr(sc.acceptance, key):
        return e
    if drafter != sc.drafter.name:                   # the policy's own drafter, run on the section's setting
        return replace(e, expected=f"{e.expected}; the section's {key} is every drafter's, {drafter}'s too: give "
                       f"{drafter} its own as acceptance.drafters.{drafter}.{key}")
    if key == "length" and sc.acceptance.length_gamma is None and sc.acceptance.length > 1:
        return replace(e, expected=f"{e.expected}; a length measured at more drafts than the run's: give their "
                       "number as acceptance.length_gamma")
    return e


def acceptance_given(sc: Scenario, drafter: str | None = None) -> list[str]:
    """The ``[acceptance]`` keys the scenario sets that give a drafter's acceptance instead of the built-in rates
    (a built-in ``table`` named explicitly among them), as a run of ``drafter`` reads them (its
    ``acceptance.drafters`` entry in place of the section's own; None: the section's own)."""
    a = sc.acceptance.for_drafter(drafter) if drafter else sc.acceptance
    return [k for k in ("length", "constant_alpha", "rates", "table", "model") if getattr(a, k)]


def default_acceptance_notice(sc: Scenario, pc, source: str | None, profile: StepTimeProfile) -> str | None:
    """One line for a drafting run of ``pc`` (:class:`specsim.run_config.PolicyChoice`) whose acceptance is a
    built-in table (no ``acceptance.constant_alpha``, ``rates``, ``model`` or rate-table file, in the section or
    the drafter's ``acceptance.drafters`` entry): those rates were measured for the paper's drafters on its targets
    (or DeepSeek-V3's MTP), not for the profile's model, and the speed-up follows them. None otherwise."""
    a = sc.acceptance.for_drafter(pc.drafter)
    if pc.gamma <= 0 or any(k != "table" or a.table not in BUILTIN_TABLES for k in acceptance_given(sc, pc.drafter)):
        return None
    model = (profile.metadata or {}).get("model")
    served = f" for {model}" if model else ""
    return (f"acceptance: the built-in rates of {source or 'the default table'}, not measured{served} with your "
            f"drafter: {_FOLLOWS}; {_GIVE}; for this drafter alone acceptance.drafters.{pc.drafter}: "
            "docs/acceptance.md)")


_FOLLOWS = "the speed-up over no speculation follows them"
_GIVE = ("give your own (acceptance.length, the acceptance length your engine reports; acceptance.constant_alpha, "
         "acceptance.rates, or a table from specsim fit / specsim counters")
#: One :func:`default_acceptance_notice`, its parts named (records keep the text only).
_DEFAULT_NOTICE = re.compile(r"acceptance: the built-in rates of (?P<source>.+), not measured(?: for (?P<model>.+?))? "
                             rf"with your drafter: {re.escape(_FOLLOWS)}; {re.escape(_GIVE)}; for this drafter alone "
                             r"acceptance\.drafters\.(?P<drafter>\S+): docs/acceptance\.md\)")


def merged_acceptance_notices(notes: list[str]) -> list[str]:
    """``notes`` with the :func:`default_acceptance_notice` lines of several drafters on one model merged into one
    naming each drafter with the source of its rates (a sweep of dspark beside mtp1 printed two near-identical
    notes, one per drafter), where the first of them stood; every other note as it is, in order."""
    found = [(i, m) for i, n in enumerate(notes) if (m := _DEFAULT_NOTICE.fullmatch(n))]
    by_model: dict[str | None, list[tuple[int, re.Match]]] = {}
    for i, m in found:
        by_model.setdefault(m["model"], []).append((i, m))
    out: dict[int, str] = dict(enumerate(notes))
    for model, group in by_model.items():
        if len(group) < 2:
            continue
        for i, _ in group[1:]:
            del out[i]
        rates = fmt.and_list(f"{m['drafter']} ({m['source']})" for _, m in group)
        keys = " or ".join(f"acceptance.drafters.{d}" for d in dict.fromkeys(m["drafter"] for _, m in group))
        served = f" for {model}" if model else ""
        out[group[0][0]] = (f"acceptance: the built-in rates of drafters {rates}, not measured{served} with your "
                            f"drafters: {_FOLLOWS}; {_GIVE}; for one drafter alone {keys}: docs/acceptance.md)")
    return list(out.values())


def forced_drafter_notice(sc: Scenario, pc) -> str | None:
    """One line where the policy runs a drafter of its own (mtp1: mtp) other than the scenario's while the scenario
    sets a drafter's measured acceptance (``acceptance.length``, ``constant_alpha``, ``rates``, ``table`` or
    ``model``): that setting is the run's, so this drafter runs on it too, not on its built-in rates (a sweep of
    mtp1 beside an ngram drafter given acceptance.length ran MTP at the n-gram's length without a word); and where
    the scenario's ``drafter.match_rate`` does not apply to it. Nothing about acceptance where the scenario gives
    this drafter its own (``acceptance.drafters.NAME``). None otherwise."""
    given = acceptance_given(sc)
    if not (pc.gamma and pc.forced_drafter and pc.drafter != sc.drafter.name):
        return None
    if pc.drafter in sc.acceptance.drafters:                      # its own measured acceptance: nothing to say
        given = []
    rate = (f"; drafter.match_rate applies to the lookup drafters only, {pc.drafter} proposes at every step"
            if sc.drafter.match_rate is not None else "")
    if not given:
        return f"acceptance: policy {pc.name} runs its own drafter {pc.drafter}{rate}" if rate else None
    return (f"acceptance: policy {pc.name} runs its own drafter {pc.drafter} on the scenario's acceptance."
            f"{given[0]} (the run's, whichever drafter runs), not on {pc.drafter}'s built-in rates; give "
            f"{pc.drafter}'s own measured acceptance as acceptance.drafters.{pc.drafter} (--set "
            f"acceptance.drafters.{pc.drafter}.length=...), or sweep it without that setting for its built-in "
            f"rates{rate}")


def cpu_drafter_notice(pc) -> str | None:
    """The run's notice where a confidence-reading policy (``reads_confidence``) drafts with a CPU drafter (ngram,
    suffix: no confidence head), else None."""
    if not (pc.reads_confidence and pc.gamma and DRAFTER_FAMILY_OF.get(pc.drafter) == "lookup"):
        return None
    return (f"drafter {pc.drafter} has no confidence head; policy {pc.name} schedules on the acceptance model's "
            f"simulated confidences (docs/acceptance.md, 'Confidence signal'), which the {pc.drafter} lookup does "
            "not give; --policy static verifies what it proposes")


#: Relative difference between the acceptance length given (``acceptance.length``, carried to the run's gamma) and
#: the simulated mean beyond which the notice says why they differ.
LENGTH_TOLERANCE = 0.01


def given_length_notice(sc: Scenario, pc, summary: dict) -> str | None:
    """:func:`acceptance_length_text` of a drafting run of ``pc`` (:class:`specsim.run_config.PolicyChoice`) whose
    scenario gives ``acceptance.length`` (its own, or the drafter's ``acceptance.drafters`` entry), against the
    run's ``summary["mean_acceptance_length"]``; None otherwise."""
    a = sc.acceptance.for_drafter(pc.drafter) if pc.drafter else sc.acceptance
    simulated = summary.get("mean_acceptance_length")
    if not pc.gamma or a.length is None or simulated is None:
        return None
    text = acceptance_length_text(a.length, a.length_gamma or pc.gamma, pc.gamma, [simulated], pc.name,
                                  (sc.acceptance.sigma_request, sc.acceptance.sigma_step, sc.acceptance.sigma_token))
    window = (summary.get("window") or {}).get("mean_acceptance_length")
    if window is None:
        return text
    return text.replace(f"simulated {simulated:.3f}", f"simulated {simulated:.3f} over the whole run ({window:.3f} in "
                        "the measurement window)", 1)


def acceptance_length_text(given: float, given_gamma: int, gamma: int, simulated: list[float], policy: str,
                           sigmas: tuple[float, float, float], label: str = "") -> str:
    """The acceptance length given beside the one simulated, and why they differ where they do by more than
    :data:`LENGTH_TOLERANCE` (an operator gave 3.43 and read 3.381 with nothing printing both).

    Args:
        given, given_gamma: ``acceptance.length`` (tokens per verify step, bonus included) and the drafts per step
            it was measured at.
        gamma: the run's drafts per step (the given per-position rate carried to it when it differs).
        simulated: the runs' mean acceptance lengths (one run, or a sweep curve's points).
        policy: the policy's name (static and none verify every draft; the others choose).
        sigmas: ``acceptance.sigma_request``, ``sigma_step``, ``sigma_token``.
        label: what ran, e.g. `` of static (gamma=7, drafter=dspark)``.
    """
    from specsim.acceptance.model import alpha_for_acceptance_length

    alpha = alpha_for_acceptance_length(float(given), int(given_gamma))
    expected = sum(alpha ** i for i in range(gamma + 1))
    lo, hi = min(simulated), max(simulated)
    sim = f"{lo:.3f}" if len(simulated) == 1 or f"{lo:.3f}" == f"{hi:.3f}" else \
        f"{lo:.3f}-{hi:.3f} over {len(simulated)} points"
    text = (f"acceptance length{label}: given {given:g} (acceptance.length at gamma {given_gamma}: alpha "
            f"{alpha:.3f} per position), simulated {sim}")
    if gamma != given_gamma:
        text += f"; at this run's gamma {gamma} that alpha gives {expected:.3f}"
    worst = max(simulated, key=lambda v: abs(v / expected - 1))
    if abs(worst / expected - 1) <= LENGTH_TOLERANCE:
        return text + f" (within {LENGTH_TOLERANCE:.0%})"
    why = []
    if any(sigmas):
        why.append("the acceptance model spreads the rate around alpha between requests, steps and positions "
                   f"(acceptance.sigma_request {sigmas[0]:g}, sigma_step {sigmas[1]:g}, sigma_token {sigmas[2]:g}: "
                   "the confidence model, docs/acceptance.md) and the length, not linear in the rate, averages "
                   f"{'below' if worst < expected else 'above'} the length at alpha (--set "
                   "acceptance.sigma_request=0 --set acceptance.sigma_step=0 --set acceptance.sigma_token=0 "
                   "removes the spread)")
    if policy not in ("static", "none"):
        why.append(f"policy {policy} verifies fewer than gamma drafts at some steps")
    why.append("a request's last step verifies only the tokens its output has left")
    return text + f"; {100 * (worst / expected - 1):+.1f}%, beyond {LENGTH_TOLERANCE:.0%}: " + "; ".join(why)


def fitted_overhead_notice(sc: Scenario, profile: StepTimeProfile) -> str | None:
    """One line when the profile carries a fitted TTFT term (``metadata.fit.ttft.request_overhead_s``, written by
    ``profile fit`` and the bundled ``*-vllm-fitted`` profiles) that the run does not charge: the scenario's
    ``engine.request_overhead_s`` differs from it by more than 1 ms. None otherwise, and for a fit above
    :data:`~specsim.hardware.ttft_fit.MAX_REQUEST_OVERHEAD_S` (no engine's own overhead)."""
    from specsim.hardware.ttft_fit import MAX_REQUEST_OVERHEAD_S

    fitted = (((profile.metadata or {}).get("fit") or {}).get("ttft") or {}).get("request_overhead_s")
    used = sc.engine.request_overhead_s
    if not isinstance(fitted, (int, float)) or not 0 <= fitted <= MAX_REQUEST_OVERHEAD_S or abs(fitted - used) <= 1e-3:
        return None
    return (f"the profile's fit gives a request overhead of {fitted * 1e3:.1f} ms (its TTFT at the lowest load); this "
            f"run charges {used * 1e3:g} ms (engine.request_overhead_s): set --set engine.request_overhead_s="
            f"{fitted:.4g} for TTFT as that engine measured it")


#: The scenario's seconds keys charged per step (or per request per step, or per prompt token), each with what it
#: charges and what engines measure. A value above the profile's whole step at one request (its smallest step, 3.7
#: to 91 ms over the bundled profiles) is a unit slip, milliseconds written as seconds, not an engine: the CPU
#: prepares a step in less time than the GPU runs it, output processing and speculation's bookkeeping are small
#: parts of a step, and a prompt token's prefill reads the weights a decode step reads once for a whole chunk
#: (docs/memory.md, "Request overheads").
PER_STEP_KEYS = {
    "engine.host_overhead_s": ("CPU scheduling per step", "vLLM-class engines measure 0.3-3 ms per step"),
    "engine.emission_overhead_s": ("output processing per emitting request per step",
                                   "detokenising a token takes microseconds, and vLLM V1 overlaps it: 0"),
    "engine.spec_step_s": ("speculation's own overhead per speculative step", "vLLM issue 49548 measured 0.775 ms"),
    "engine.spec_request_s": ("speculation's overhead per running request per step",
                              "vLLM issue 49548 measured 0.084 ms"),
    "prefill.time_per_token_s": ("prefill per prompt token", "a prompt token costs a small fraction of a decode "
                                 "step, microseconds on a GPU"),
}


def unit_warnings(sc: Scenario, profile: StepTimeProfile | None = None) -> list[str]:
    """The scenario's seconds values no engine has, one line each naming the file, line and key and asking "did you
    mean ms?": a :data:`PER_STEP_KEYS` value above ``profile``'s step at one request (B = 1, R = 1, no context;
    skipped without a profile), and an ``engine.request_overhead_s`` above
    :data:`~specsim.hardware.ttft_fit.MAX_REQUEST_OVERHEAD_S` (1 s; the API server and tokeniser take milliseconds),
    and a profile step time no served model takes (:func:`~specsim.hardware.profile.step_time_slips`).
    Warnings, not errors: the run goes on with the value as given.

    Args:
        sc: the scenario (its ``source`` file gives each key's line, where the file set the value in use).
        profile: the run's step-time profile, or None.
    """
    from specsim.hardware.profile import profile_label, step_time_slips
    from specsim.hardware.ttft_fit import MAX_REQUEST_OVERHEAD_S

    step_s = float(profile.step_time(1, num_requests=1)) if profile is not None else math.inf
    out = []
    for key, (what, typical) in PER_STEP_KEYS.items():
        v = getattr(getattr(sc, key.split(".")[0]), key.split(".")[1])
        if v is not None and v > step_s:
            out.append(_unit_slip(sc, key, v, f"{v:g} s of {what} is more than the whole GPU step at one request "
                                  f"on profile {profile_label(profile)} ({step_s * 1e3:.3g} ms); {typical}"))
    if profile is not None:
        out += step_time_slips(profile)
    v = sc.engine.request_overhead_s
    if v > MAX_REQUEST_OVERHEAD_S:
        out.append(_unit_slip(sc, "engine.request_overhead_s", v, f"{v:g} s before each request reaches the scheduler "
                              f"is above {MAX_REQUEST_OVERHEAD_S:g} s, no engine's own overhead (API server and "
                              "tokeniser take milliseconds: vLLM's TTFT floor is 16-19 ms on a 7B model)"))
    return out


def _unit_slip(sc: Scenario, key: str, value: float, why: str) -> str:
    """One :func:`unit_warnings` line: where (the scenario file and line that set ``key``, else the key alone),
    why, and the value read as milliseconds."""
    from specsim.tomlfile import key_line

    where = key_line(sc.source, key, value)
    head = f"{where[0]}, line {where[1]}, field '{key}'" if where else f"field '{key}'"
    return f"{head}: {why}: did you mean ms? ({value:g} ms is {key.split('.')[1]} = {value * 1e-3:g})"
