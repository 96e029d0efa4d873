"""A run's configuration, resolved once: scenario file + ``--set`` overrides + CLI / API arguments.

:class:`RunConfig` holds what the caller gave (the loaded scenario, already merged with ``--set``, and the
run's own arguments). :func:`resolve_run` turns it into a :class:`ResolvedRun`, the one object every later
stage reads: the cluster (:meth:`ResolvedRun.cluster_runtime`), the engine's replicas, the summary's KV line
and the provenance. Sweeps and tuning resolve their points' policy settings through the same
:func:`resolve_policy` (without loading a profile), and every knob goes through the one knob resolver,
:func:`specsim.policies.registry.run_knobs`.

Each value is decided in one place:

* policy knobs: :func:`~specsim.policies.registry.run_knobs` (declared defaults < ``[policy.knobs]`` < the
  run's own);
* drafter and gamma: :func:`resolve_policy` (``mtp1`` forces the MTP drafter and gamma 1, ``none`` no drafter);
* the drafter's KV share: the scenario's ``drafter.kv_fraction``, else from the drafter's and target's shapes
  (step-model profiles), else its family's default (:data:`specsim.engine.kv.DRAFTER_KV_FRACTION`), 0 without
  speculation;
* KV capacity: :func:`specsim.hardware.kv_capacity.kv_capacity`, computed once per run;
* the drafter's cost model: :func:`drafter_cost_of`.
* the requests the context window refuses: :func:`refused_by_window` (the run applies it; a sweep's notes count
  them up front through :func:`context_refusals`).
"""

from __future__ import annotations

import copy
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from specsim.engine.cluster import ClusterRuntime
from specsim.engine.kv import DRAFTER_KV_FRACTION
from specsim.engine.replica import ReplicaConfig
from specsim.errors import MAX_SIM_TIME_S, SpecsimInputError
from specsim.hardware.drafter import (DRAFTER_BLOCK, DRAFTER_FAMILY_OF, DRAFTER_LAYERS, DrafterCost, ShapedDrafterCost,
                                      shaped_drafter_cost)
from specsim.hardware.drafter import drafter_kv_fraction as shape_kv_fraction
from specsim.hardware.drafter import drafter_layers, drafter_weight_bytes
from specsim.hardware.drafter import drafter_cost as default_drafter_cost
from specsim.hardware.context import ContextWindow, context_window
from specsim.hardware.hybrid_pages import OWN_SPEC_DRAFTERS
from specsim.hardware.kv_capacity import KvCapacity, kv_capacity
from specsim.hardware.profile import (SOURCED_SPECULATION, StepTimeProfile, bundled_profiles_dir, profile_label,
                                     resolve_profile)
from specsim.hardware.capture import recapture
from specsim.hardware.stepmodel import EngineTerms, step_model_of
from specsim.policies import make_policy
from specsim.policies.base import as_policy
from specsim.policies.cost_table import COST_AWARE
from specsim.policies.plugins import instantiate
from specsim.policies.registry import run_knobs
from specsim.scenario import ProfileConfig, Scenario, load_scenario


@dataclass(frozen=True)
class RunConfig:
    """One run's configuration as given, validated on construction (every problem raises SpecsimInputError).

    Attributes:
        policy: a registered name, ``path/file.py:Name``, or a policy object / function.
        scenario: the loaded scenario (defaults, file and ``--set`` overrides merged: :func:`load_scenario`).
        seed: the one seed of every random draw (request r's draws: SeedSequence([seed, r])).
        concurrency: closed loop with this many users; None = open loop at the trace's arrivals.
        rate_scale: open loop only: arrival times are divided by it (2.0 = twice the rate).
        max_sim_s: explicit horizon T in simulated seconds, or None (run until every request leaves); T is
            included (:data:`specsim.simulation.HORIZON_RULE`).
        gamma, drafter: override the scenario's (see :func:`resolve_policy`).
        knobs: policy knobs, over the scenario's ``[policy.knobs]``.
        record_step_log: keep per (step, request) rows.
        metric_percentiles: extra latency percentiles to report (vLLM's ``--metric-percentiles``), kept beside
            :data:`specsim.analysis.metrics.PERCENTILES` (other tools read those keys).
    """

    policy: Any = "dspark"
    scenario: Scenario = field(default_factory=load_scenario)
    seed: int = 0
    concurrency: int | None = None
    rate_scale: float = 1.0
    max_sim_s: float | None = None
    gamma: int | None = None
    drafter: str | None = None
    knobs: dict = field(default_factory=dict)
    record_step_log: bool = False
    metric_percentiles: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        def bad(name: str, want: str, got: Any) -> None:
            raise SpecsimInputError(None, None, name, want, repr(got))
        if not (isinstance(self.rate_scale, (int, float)) and np.isfinite(self.rate_scale) and self.rate_scale > 0):
            bad("rate_scale", "a finite value > 0", self.rate_scale)
        is_int = lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))  # noqa: E731
        if not (is_int(self.seed) and 0 <= self.seed < 2 ** 63):
            bad("seed", "an int in [0, 2**63) (the one seed of every random draw)", self.seed)
        pcts = self.metric_percentiles
        if not all(isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, (bool, np.bool_))
                   and 0 < p <= 100 for p in pcts):
            bad("metric_percentiles", "percentiles in (0, 100], e.g. (50, 90, 99.9)", pcts)
        horizon_ok = self.max_sim_s is None or (np.isfinite(self.max_sim_s) and 0 < self.max_sim_s <= MAX_SIM_TIME_S)
        if not horizon_ok:
            bad("max_sim_s", f"a time in (0, {MAX_SIM_TIME_S:g}] s (specsim's bound on simulated time)",
                self.max_sim_s)
        if self.concurrency is not None and not (is_int(self.concurrency) and self.concurrency >= 1):
            bad("concurrency", "an int >= 1 (closed-loop users)", self.concurrency)
        if self.gamma is not None and not (is_int(self.gamma) and 0 <= self.gamma <= 64):
            bad("gamma", "an int in [0, 64]", self.gamma)
        if not isinstance(self.scenario, Scenario):
            bad("scenario", "a Scenario (specsim.scenario.load_scenario(path), or None for the default)",
                self.scenario)
        if not isinstance(self.record_step_log, (bool, np.bool_)):      # 'no' would have recorded one
            bad("record_step_log", "True or False", self.record_step_log)
        if self.concurrency is not None and self.rate_scale != 1.0:
            raise SpecsimInputError(None, None, "rate_scale", "rate_scale 1 with a concurrency (it scales "
                                    "open-loop arrivals only)", f"rate_scale {self.rate_scale:g} with concurrency "
                                    f"{self.concurrency}")


#: The field an input error raised without a file names -> the scenario key its value came from.
_SCENARIO_KEYS = {"profile": "profile.name", "gamma": "engine.gamma", "engine.gamma": "engine.gamma"}


@contextmanager
def in_scenario_file(scenario: Scenario, gamma_given: bool = False):
    """Re-raise an input error about a value the scenario file set (its profile name, its gamma, an acceptance key
    a drafter's model refuses) naming that file and the key's line, as every other scenario error does; unchanged
    when the value came from elsewhere (the defaults, a ``--set``, ``--gamma``: ``gamma_given``)."""
    try:
        yield
    except SpecsimInputError as e:
        key = _SCENARIO_KEYS.get(str(e.field), str(e.field) if str(e.field).startswith("acceptance.") else None) \
            if e.file is None else None
        if key == "engine.gamma" and gamma_given:
            raise
        where = _key_line(scenario, key) if key else None
        if where is None:
            raise
        got = e.got
        if key == "profile.name" and str(scenario.profile.name).endswith(".json"):    # where a relative path was sought
            got = (f"{e.got}: no such file beside the scenario ({Path(where[0]).parent / scenario.profile.name}) "
                   f"nor in the working folder ({Path.cwd() / scenario.profile.name})")
        raise SpecsimInputError(where[0], where[1], key, e.expected, got) from None


@contextmanager
def knobs_in_scenario_file(scenario: Scenario, given: set[str]):
    """Re-raise a knob's input error naming the scenario file and the line of the ``[policy.knobs]`` entry it is
    about: an unknown key, a value of the wrong type (field ``policy NAME, knob K``) or one the constructor
    refuses (field ``policy NAME``: the first knob the file sets that the caller did not give, ``given``)."""
    try:
        yield
    except SpecsimInputError as e:
        field = str(e.field)
        typed = re.match(r"policy .+, knob (\w+)$", field)
        if field.startswith("policy.knobs."):                 # an unknown key
            keys = [field]
        elif typed:                                           # a value of the wrong type
            keys = [f"policy.knobs.{typed.group(1)}"]
        elif field.startswith("policy "):                     # a value the constructor refused
            keys = [f"policy.knobs.{k}" for k in scenario.policy.knobs if k not in given]
        else:
            keys = []
        lines = [_key_line(scenario, k) for k in keys] if e.file is None else []
        where = next((w for w in lines if w), None)
        if where is None:
            raise
        raise SpecsimInputError(where[0], where[1], e.field, e.expected, e.got) from None


def _key_line(scenario: Scenario, field: str) -> tuple[str, int] | None:
    """(file, line) of a dotted key in the scenario's own file, None when the file does not set it or the
    scenario holds another value there (a ``--set`` replaced it; a profile name the file's folder resolved is
    compared as loading resolved it)."""
    from specsim.tomlfile import json_beside, key_line

    held: Any = scenario.to_dict()
    for part in field.split("."):
        held = held.get(part) if isinstance(held, dict) else None
    beside = (lambda name: json_beside(name, Path(scenario.source))) if field == "profile.name" else (lambda v: v)
    return key_line(scenario.source, field, held, beside)


@dataclass(frozen=True)
class PolicyChoice:
    """The policy side of a run, resolved: what to build, with which drafter, gamma and knob values.

    Attributes:
        make: zero-argument factory of the policy object of one replica (one object per replica: a user's object
            serves the first, deep copies of it the others; :func:`_one_per_replica`).
        name: the policy's name.
        drafter: the drafter's name (``none`` without speculation).
        gamma: the run's draft block length (0 without a drafter).
        knobs: every knob the policy declares with the value it runs with.
        reads_confidence: the policy's ``reads_confidence`` (:class:`~specsim.policies.base.PolicyBase`; True where
            it does not say).
        forced_drafter: the policy fixes its own drafter (mtp1, none), whatever the scenario's.
    """

    make: Callable[[], Any]
    name: str
    drafter: str
    gamma: int
    knobs: dict[str, Any]
    reads_confidence: bool = True
    forced_drafter: bool = False


def resolve_policy(policy: str | Any, scenario: Scenario, gamma: int | None, drafter: str | None,
                   knobs: dict[str, Any] | None = None, shared: tuple[str, ...] = ()) -> PolicyChoice:
    """Resolve a run's policy, knob values, drafter and gamma (no profile is loaded).

    ``mtp1`` uses the MTP drafter with gamma forced to 1; ``none`` no drafter (gamma 0); every other policy
    the scenario's drafter unless ``drafter`` overrides it, and gamma ``gamma`` else ``engine.gamma``.

    Args:
        policy: a registered name, ``path/file.py:Name``, or a policy object / function.
        scenario: the loaded scenario.
        gamma, drafter: the run's overrides, or None.
        knobs: the run's own knobs (each must be declared by the policy).
        shared: knob names declared by the other policies of a sweep (see
            :func:`specsim.policies.registry.run_knobs`).

    Raises:
        SpecsimInputError: unknown policy, unknown or mistyped knob (naming the closest valid one).
    """
    with knobs_in_scenario_file(scenario, set(knobs or {})):
        values = run_knobs(policy, scenario.policy.knobs, dict(knobs or {}), shared)
    if isinstance(policy, str):
        with knobs_in_scenario_file(scenario, set(knobs or {})):
            probe = make_policy(policy, gamma=gamma, **values)
        factory = lambda: make_policy(policy, gamma=gamma, **values)  # noqa: E731
    elif isinstance(policy, type):          # a class: built per replica with the knobs, as a plug-in's class is
        probe = instantiate(policy, gamma, None, **values)
        factory = _one_per_replica(probe, lambda: instantiate(policy, gamma, None, **values))
    else:
        try:
            probe = as_policy(policy)
        except TypeError as e:
            raise SpecsimInputError(None, None, "policy", "a policy: a registered name, path/file.py:Name, a "
                                    "function view -> verify lengths, or a policy class or object", str(e)) from None
        given = sorted(set(knobs or {}) | (set(scenario.policy.knobs) & set(values)))
        if given:                           # an object's knobs are its own: checked, then silently ignored before
            raise SpecsimInputError(None, None, f"policy {probe.name}, knobs", "knobs for a policy class (simulate("
                                    "trace, TheClass, knob=value) builds it with them), not for an object, whose "
                                    "knobs are its own", ", ".join(given))
        factory = _one_per_replica(probe)
    forced_drafter = getattr(probe, "drafter", None)
    dname = forced_drafter or drafter or scenario.drafter.name
    if dname == "none" and probe.name != "none":      # it would verify nothing under a speculative policy's name
        raise SpecsimInputError("--drafter" if drafter else None, None, None if drafter else "drafter.name",
                                f"a drafter for policy {probe.name} (drafter none drafts nothing: the run would be "
                                "no speculation under that policy's name; use --policy none for that)", "none")
    if dname == "none":
        g = 0
    elif getattr(probe, "gamma", None) is not None and forced_drafter:
        g = int(probe.gamma)
    else:
        g = scenario.engine.gamma if gamma is None else int(gamma)
    _check_block(scenario, dname, g, gamma is not None)
    _check_cpu_drafter(scenario, dname, bool(forced_drafter))
    if isinstance(policy, str) and gamma is None and g and policy not in COST_AWARE:
        # the policy runs with the step's gamma; built once with the run's, it checks what an explicit --gamma
        # would (TensorRT-LLM's draft_len_schedule must start at it: a researcher's {16: 3} ran at gamma 7)
        with in_scenario_file(scenario), knobs_in_scenario_file(scenario, set(knobs or {})):
            make_policy(policy, gamma=g, **values)
    return PolicyChoice(factory, probe.name, dname, g, values, bool(getattr(probe, "reads_confidence", True)),
                        bool(forced_drafter))


def _one_per_replica(probe: Any, build: Callable[[], Any] | None = None) -> Callable[[], Any]:
    """The factory of a user's policy (a class, an object or a function): one policy object per replica, so
    that replicas never share a policy's state (a policy keeps state built from its own views only; a fresh
    user's counter shared by three replicas saw ``view.step`` go backwards). A class is built for each replica
    (``build``, with the run's knobs; ``probe`` is the first); an object (``probe``) serves the first replica
    itself (its state is the caller's to read after a one-replica run) and a deep copy of it, as it was given,
    each further one.

    Raises (from the factory, at the second replica):
        SpecsimInputError: the object cannot be deep-copied (pass its class, or run one replica).
    """
    if build is not None:                    # a class: ``probe`` serves the first replica, ``build()`` the others
        first = [probe]
        return lambda: first.pop() if first else build()
    made = []

    def make() -> Any:                       # every replica is made before any runs: each copy is of the object
        if not made:                         # as given (a deep copy costs nothing to a one-replica run)
            made.append(probe)
            return probe
        try:
            return copy.deepcopy(probe)
        except Exception as e:
            raise SpecsimInputError(None, None, f"policy {probe.name}", "a policy object that copy.deepcopy can "
                                    "copy (each replica runs its own copy), or its class", f"{type(e).__name__}: {e}")
    return make


def _check_block(scenario: Scenario, dname: str, gamma: int, from_flag: bool) -> None:
    """Refuse a gamma above the drafter's block (``drafter.block`` when it is the scenario's drafter, else the
    family's :data:`~specsim.hardware.drafter.DRAFTER_BLOCK`); gamma at or below it drafts part of the block
    (issue 24 item 13).

    Raises:
        SpecsimInputError: naming ``--gamma`` (when the run set it) or ``engine.gamma``.
    """
    block = scenario.drafter.block if dname == scenario.drafter.name else None
    block = block if block is not None else DRAFTER_BLOCK.get(dname)
    if block is not None and gamma > block:
        raise SpecsimInputError("--gamma" if from_flag else None, None, None if from_flag else "engine.gamma",
                                f"a gamma <= {block}, the {dname} checkpoint's draft block (drafter.block; set it "
                                "for a longer-block drafter, with acceptance rates that long: acceptance.rates, "
                                "acceptance.constant_alpha or acceptance.length)", str(gamma))


def _check_cpu_drafter(scenario: Scenario, dname: str, forced: bool = False) -> None:
    """Refuse a CPU drafter's run (ngram, suffix; ``--drafter ngram`` too, whatever ``drafter.name`` says) where
    the scenario sets what only a model drafter has: the [drafter] section's own check, for the run's drafter.

    A ``drafter.match_rate`` is refused for a model drafter the scenario or ``--drafter`` names (not for one a policy
    forces, as mtp1 does in a sweep beside lookup-drafter runs: it proposes at every step).

    Raises:
        SpecsimInputError: naming the setting (``drafter.layers``, ``block``, the fractions, ``kv_fraction``,
            ``match_rate``).
    """
    if DRAFTER_FAMILY_OF.get(dname) == "lookup" and dname != scenario.drafter.name:
        replace(scenario.drafter, name=dname)          # DrafterConfig's validation runs on the copy
    model_drafter = DRAFTER_FAMILY_OF.get(dname) not in (None, "lookup", "none")
    if scenario.drafter.match_rate is not None and model_drafter and not forced:
        raise SpecsimInputError("--drafter" if dname != scenario.drafter.name else None, None, "drafter.match_rate",
                                f"no match_rate with drafter {dname} (a model drafter proposes at every step; the "
                                "share applies to the lookup drafters ngram and suffix)",
                                repr(scenario.drafter.match_rate))


def lookup_match_rate(sc: Scenario, pc: PolicyChoice) -> float:
    """The share of request-steps the run's drafter proposes in: ``drafter.match_rate`` for a lookup drafter (1 where
    unset), 1 for a model drafter (which always proposes; :func:`resolve_policy` refuses the key for one)."""
    rate = sc.drafter.match_rate
    return float(rate) if rate is not None and DRAFTER_FAMILY_OF.get(pc.drafter) == "lookup" else 1.0


def drafter_cost_of(sc: Scenario, dname: str, measured: DrafterCost | None,
                    profile: StepTimeProfile) -> DrafterCost | ShapedDrafterCost:
    """The drafter's cost model, first that applies: a CPU drafter's (ngram, suffix:
    :class:`~specsim.hardware.lookup_drafter.LookupDrafterCost`, unless a replay measured it), the scenario's
    explicit fractions (0 allowed), the measured one (replay), the drafter's shape through the profile's step
    model (profiles built by :mod:`specsim.hardware.stepmodel`), else the family's default fractions (plain
    tables)."""
    dc = sc.drafter
    if DRAFTER_FAMILY_OF.get(dname) == "lookup" and measured is None:
        return default_drafter_cost(dname, dc.cpu_threads)
    overrides = {k: getattr(dc, k) for k in ("base_fraction", "per_draft_fraction") if getattr(dc, k) is not None}
    if dname == dc.name and overrides:
        return replace(default_drafter_cost(dname), **overrides)
    if measured is not None:
        return measured
    target = step_model_of(profile)
    if target is not None and dname in DRAFTER_LAYERS:
        return shaped_drafter_cost(dname, target, dc.layers if dname == dc.name else None)
    return default_drafter_cost(dname)


def drafter_kv_fraction(sc: Scenario, drafter: str, gamma: int, profile: StepTimeProfile | None = None) -> float:
    """The drafter's KV tokens per target KV token: ``drafter.kv_fraction``; else, from the two shapes where the
    profile has a step model (issue 20, :func:`specsim.hardware.drafter.drafter_kv_fraction`); else the family's
    constant (:data:`specsim.engine.kv.DRAFTER_KV_FRACTION`, plain tables); 0 when nothing drafts and for the CPU
    drafters (ngram, suffix)."""
    if DRAFTER_FAMILY_OF.get(drafter) == "lookup":          # a CPU drafter holds no KV
        return 0.0
    frac = sc.drafter.kv_fraction
    if frac is not None:
        return float(frac)
    if gamma <= 0:
        return 0.0
    target = step_model_of(profile) if profile is not None else None
    if target is not None and drafter in DRAFTER_LAYERS:
        return float(shape_kv_fraction(drafter, target, _layers_set(sc, drafter)))
    return float(DRAFTER_KV_FRACTION[DRAFTER_FAMILY_OF[drafter]])


def _layers_set(sc: Scenario, drafter: str) -> int | None:
    """The scenario's ``drafter.layers`` where it describes ``drafter`` (None: the drafter's default)."""
    return sc.drafter.layers if drafter == sc.drafter.name else None


def drafter_attention(sc: Scenario, drafter: str, gamma: int) -> tuple[int, bool]:
    """The drafter's attention layers and whether they are a KV-cache spec of their own, for a hybrid target's
    page layout (:func:`specsim.hardware.hybrid_pages.hybrid_page_layout`): its layer count (``drafter.layers``,
    else :data:`specsim.hardware.drafter.DRAFTER_LAYERS`) for a drafter that is a model, (0, False) for none or
    one without layers (a ``drafter.kv_fraction`` the scenario sets still replaces the layout's share)."""
    if gamma <= 0 or drafter not in DRAFTER_LAYERS:
        return 0, False
    return drafter_layers(drafter, _layers_set(sc, drafter)), drafter in OWN_SPEC_DRAFTERS


def drafter_weights(sc: Scenario, drafter: str, gamma: int, profile: StepTimeProfile) -> float:
    """The drafter's own weights per GPU, bytes, that the KV capacity's memory must also hold: from the drafter's
    shape where the profile has a step model and the drafter is a model
    (:func:`specsim.hardware.drafter.drafter_weight_bytes`, also where ``drafter.base_fraction`` sets its cost: the
    weights are loaded whatever prices the drafting); 0 when nothing drafts and for a plain table (no model shape
    to size the drafter from)."""
    target = step_model_of(profile)
    if gamma <= 0 or target is None or drafter not in DRAFTER_LAYERS:
        return 0.0
    return drafter_weight_bytes(drafter, target, _layers_set(sc, drafter))


def check_prefill_chunk(sc: Scenario, prof: StepTimeProfile, given: bool = False) -> None:
    """Colocated prefill shares the decode steps, so mixed steps reach the scenario's prefill chunk: a profile
    that stops short of it fails here, when the run is resolved, not mid-run (issue 20). ``given``: the run was
    handed ``prof`` in place of the scenario's.

    Raises:
        SpecsimInputError: the profile's last batch size is below ``prefill.chunk_tokens``, naming the scenario
            file (the key's line where it sets it) and the profile, and where that profile came from.
    """
    chunk, last = sc.prefill.chunk_tokens, prof.max_batch_tokens
    if sc.prefill.mode != "colocated" or prof.batch_limit is None or last >= chunk:
        return
    named = given or sc.profile.name != ProfileConfig.name or _key_line(sc, "profile.name")
    tool = "profile fit" if (prof.metadata or {}).get("kind") == "fitted" else "profile analytic"
    how = (f"build it with {tool} --max-batch-tokens {chunk} or more" if Path(prof.source).parent !=
           bundled_profiles_dir() else "name a profile measured that far (specsim profile list)")
    where = _key_line(sc, "prefill.chunk_tokens") or (sc.source if Path(sc.source).is_file() else None, None)
    raise SpecsimInputError(*where, "prefill.chunk_tokens", f"a profile reaching the scenario's prefill chunk of "
                            f"{chunk} tokens (colocated prefill runs it inside a decode step): a chunk of {last} "
                            f"tokens or less, or {how}", f"profile {profile_label(prof)} ({prof.source}"
                            f"{'' if named else ', the default: the scenario names none'}), ending at {last} tokens")


def speculation_terms(scenario: Scenario, profile: StepTimeProfile) -> StepTimeProfile:
    """``profile`` with the speculation overhead the run charges (issue 20; ``engine.spec_step_s`` and
    ``engine.spec_request_s``, docs/profiles.md "Speculation's own overhead"), and ``engine.spec_zero_draft_pays``
    where the scenario sets it (else the profile's own).

    Each term resolves on its own: a value set in the scenario overrides the profile's; left unset, a profile that
    states its terms (nonzero terms; a step model, which always carries them: sourced defaults, fitted or set; a
    file with the keys, even 0; or ``metadata["speculation_terms"]``, as :meth:`StepTimeProfile.flat` says none)
    keeps its own, and one that states none (a measured table of plain forward passes, like the bundled
    Vidur-derived ones) gets :class:`~specsim.hardware.stepmodel.EngineTerms`' sourced defaults (vLLM issue 49548:
    7.75e-4 s per speculative step, 8.4e-5 s per running request). Where the values came from is kept in
    ``metadata["speculation_terms"]`` for the run's notice (:func:`specsim.hardware.profile.speculation_notice`);
    a profile that keeps its own terms is returned as it is.
    """
    e, md = scenario.engine, profile.metadata or {}
    if e.spec_zero_draft_pays is not None:
        profile = replace(profile, spec_zero_draft_pays=bool(e.spec_zero_draft_pays))
    stated = bool(profile.spec_step_s or profile.spec_request_s or "step_model" in md or "speculation_terms" in md)
    if stated and e.spec_step_s is None and e.spec_request_s is None:
        return profile
    d = EngineTerms()
    own = "the profile's own" if stated else SOURCED_SPECULATION
    step, step_from = ((e.spec_step_s, "the scenario") if e.spec_step_s is not None
                       else (profile.spec_step_s if stated else d.spec_step_s, own))
    req, req_from = ((e.spec_request_s, "the scenario") if e.spec_request_s is not None
                     else (profile.spec_request_s if stated else d.spec_request_s, own))
    why = step_from if step_from == req_from else f"spec_step_s from {step_from}, spec_request_s from {req_from}"
    return replace(profile, spec_step_s=float(step), spec_request_s=float(req),
                   metadata={**md, "speculation_terms": why})


def profile_gpus(profile: StepTimeProfile) -> int:
    """GPUs one replica of ``profile`` runs on: its metadata's ``tp`` x ``pp`` (1 for each it does not give)."""
    md = getattr(profile, "metadata", None) or {}
    return int(md.get("tp") or 1) * int(md.get("pp") or 1)


def replica_gpus(scenario: Scenario, profile: StepTimeProfile) -> tuple[int, str | None]:
    """(GPUs per decode replica, a notice or None): ``cluster.gpus_per_replica`` where the scenario sets it,
    else the profile's (:func:`profile_gpus`). The notice says when a set value differs from the profile's:
    throughput per GPU then divides by the set value while the step times stay the profile's."""
    own, set_to = profile_gpus(profile), scenario.cluster.gpus_per_replica
    if set_to is None or set_to == own:
        return own, None
    return set_to, (f"cluster.gpus_per_replica = {set_to}, but the profile {profile_label(profile)} describes a "
                    f"replica of {own} GPU{'s' if own != 1 else ''} (TP x PP in its metadata): throughput per GPU "
                    f"divides by {set_to} while the step times stay those of {own}; leave the key out to take the "
                    f"profile's")


def prefill_instance_gpus(scenario: Scenario, profile: StepTimeProfile) -> tuple[int, str | None]:
    """(GPUs per disaggregated prefill instance, a notice or None): ``prefill.gpus_per_instance`` where the
    scenario sets it, else the profile's (:func:`profile_gpus`: a prefill instance runs the decode replica's
    model at the profile's step times). The notice says when a set value differs from the profile's while the
    prefill time comes from the profile (no ``prefill.time_per_token_s``)."""
    own, set_to = profile_gpus(profile), scenario.prefill.gpus_per_instance
    if set_to is None or set_to == own or scenario.prefill.time_per_token_s is not None:
        return own if set_to is None else set_to, None
    return set_to, (f"prefill.gpus_per_instance = {set_to}, but the prefill time comes from the profile "
                    f"{profile_label(profile)}, "
                    f"a replica of {own} GPU{'s' if own != 1 else ''} (TP x PP in its metadata): the GPUs counted "
                    f"per prefill instance are {set_to} while its speed is that of {own}; leave the key out to "
                    "take the profile's")


@dataclass(frozen=True)
class ResolvedRun:
    """A run with every setting decided: the one object the cluster, summary and provenance read.

    Attributes:
        config: the run as given.
        policy: the resolved policy side (:class:`PolicyChoice`).
        profile: the replicas' step-time profile.
        drafter_cost: the drafter's cost model (:func:`drafter_cost_of`).
        kv_fraction: the drafter's KV per target KV token from the shapes (:func:`drafter_kv_fraction`); the
            engine charges ``kv.drafter_kv_fraction``, which a hybrid pool's page layout sets in its own blocks.
        kv: a replica's KV capacity (computed once, :func:`specsim.hardware.kv_capacity.kv_capacity`).
        gpus_per_replica: GPUs per decode replica, and the notice of :func:`replica_gpus` (None: none).
        prefill_gpus_per_instance: GPUs per disaggregated prefill instance, and the notice of
            :func:`prefill_instance_gpus` (None: none).
    """

    config: RunConfig
    policy: PolicyChoice
    profile: StepTimeProfile
    drafter_cost: Any
    kv_fraction: float
    kv: KvCapacity
    gpus_per_replica: int = 1
    gpus_notice: str | None = None
    prefill_gpus_per_instance: int = 1
    prefill_gpus_notice: str | None = None

    @property
    def scenario(self) -> Scenario:
        """The loaded scenario."""
        return self.config.scenario

    def cluster_runtime(self) -> ClusterRuntime:
        """The cluster's and replicas' runtime settings (:class:`specsim.engine.cluster.ClusterRuntime`)."""
        sc, g = self.scenario, self.policy.gamma
        c, e, colocated = sc.cluster, sc.engine, sc.prefill.mode == "colocated"
        decode_first = sc.prefill.first_token == "decode-step"
        replicas = tuple(ReplicaConfig(
            index=i, gamma=g, colocated=colocated, max_num_seqs=c.max_num_seqs,
            kv_allocation=c.kv_allocation, num_blocks=self.kv.tokens // self.kv.block_size,
            block_size=self.kv.block_size, prefix_caching=c.prefix_caching,
            chunk_tokens=sc.prefill.chunk_tokens, host_overhead_s=e.host_overhead_s,
            emission_overhead_s=e.emission_overhead_s, drafter_kv_fraction=self.kv.drafter_kv_fraction,
            decode_first_token=decode_first, state_blocks=self.kv.state_blocks,
            first_drafts_in_prefill=e.first_drafts == "prefill-step", match_rate=lookup_match_rate(sc, self.policy))
            for i in range(c.num_replicas))
        return ClusterRuntime(
            replicas=replicas, kv_capacity_tokens=self.kv.tokens, router=c.router, colocated=colocated,
            num_prefill_instances=sc.prefill.num_instances, prefill_time_per_token_s=sc.prefill.time_per_token_s,
            prefill_chunk_tokens=sc.prefill.chunk_tokens,
            request_overhead_s=e.request_overhead_s, seed=int(self.config.seed), decode_first_token=decode_first)


def resolve_run(config: RunConfig, profile: StepTimeProfile | None = None,
                drafter_cost: DrafterCost | None = None) -> ResolvedRun:
    """Resolve ``config`` once: policy, knobs, drafter, gamma, profile, drafter cost, KV share and capacity.

    Args:
        config: the run as given.
        profile: override the scenario's step-time profile.
        drafter_cost: a measured drafter cost model (the replay's); see :func:`drafter_cost_of`.

    Raises:
        SpecsimInputError: see :func:`resolve_policy`, :func:`specsim.hardware.profile.resolve_profile` and
            :func:`specsim.hardware.kv_capacity.kv_capacity`.
    """
    sc = config.scenario
    with in_scenario_file(sc, config.gamma is not None):
        choice = resolve_policy(config.policy, sc, config.gamma, config.drafter, config.knobs)
        prof = speculation_terms(sc, recapture(profile or resolve_profile(sc.profile.name, sc.profile.lookup),
                                               sc.engine.cudagraph_max_tokens))
        check_prefill_chunk(sc, prof, profile is not None)
        cost = drafter_cost_of(sc, choice.drafter, drafter_cost, prof)
        frac = drafter_kv_fraction(sc, choice.drafter, choice.gamma, prof)
        gpus, notice = replica_gpus(sc, prof)
        prefill_gpus, prefill_notice = prefill_instance_gpus(sc, prof)
    kvc = kv_capacity(sc, prof, choice.gamma, frac, drafter_weights(sc, choice.drafter, choice.gamma, prof),
                      drafter_attention(sc, choice.drafter, choice.gamma))
    return ResolvedRun(config, choice, prof, cost, frac, kvc, gpus, notice,
                       prefill_gpus, prefill_notice)


def refused_by_window(ctx: ContextWindow, prompt: np.ndarray, output: np.ndarray) -> np.ndarray:
    """(N,) bool: the requests (prompt and output tokens) a run refuses as unservable for context window ``ctx``:
    beyond it after the cut where ``engine.context_overflow`` truncates (a prompt that fills it alone stays)."""
    return ctx.over(prompt, ctx.truncated_output(prompt, output))


def context_refusals(trace, scenario: Scenario) -> tuple[np.ndarray, ContextWindow]:
    """(N,) bool: the requests of ``trace`` a run of ``scenario`` refuses for the context window (its profile's,
    or ``engine.max_model_len``: :func:`refused_by_window`, the run's own rule), and that window; for what a
    sweep says before its points run (their requests per user).

    Raises:
        SpecsimInputError: the scenario's profile does not resolve (:func:`specsim.hardware.profile.resolve_profile`).
    """
    with in_scenario_file(scenario):
        prof = resolve_profile(scenario.profile.name, scenario.profile.lookup)
    ctx = context_window(prof, scenario.engine.max_model_len, scenario.engine.context_overflow)
    return refused_by_window(ctx, np.asarray(trace.prompt_tokens), np.asarray(trace.output_tokens)), ctx
