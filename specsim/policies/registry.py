"""The policy registry: names -> policies, with their knobs, built-ins first, then entry points.

A registered policy is a policy class (it declares its knobs, :class:`~specsim.policies.base.PolicyBase`)
or a factory ``factory(gamma=None, **knobs) -> policy`` registered with its knobs. :func:`make_policy`
builds one by name or from ``path/to/file.py:Name``, checks the knobs against the ones the policy declares
and checks the policy once (:func:`~specsim.policies.base.policy_hooks`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from specsim.errors import SpecsimInputError, did_you_mean
from specsim.policies.base import Policy, declared_knobs, policy_hooks, check_knobs
from specsim.policies.cost_table import COST_AWARE, TABLE_KNOBS, WithCostTable
from specsim.policies.dspark import DSpark, DSparkAsync
from specsim.policies.engines import TrtllmConfidence, VllmAdaptive
from specsim.policies.plugins import (call_with_gamma, instantiate, is_plugin_spec, load_entry_points,
                                      load_plugin, load_plugin_object)
from specsim.policies.reference import DSparkGlobal, Oracle
from specsim.policies.schedules import TrtllmDraftLenSchedule, VllmDsd
from specsim.policies.static import MTP1, NoSpeculation, SpecDecPP, StaticK
from specsim.policies.threshold import ConfidenceThreshold


@dataclass(frozen=True)
class _Entry:
    """One registered policy: its class or factory, its knobs ``{name: default}``, its description."""

    source: Any
    knobs: dict[str, Any]
    description: str


_REGISTRY: dict[str, _Entry] = {}
_entry_points_loaded = False


def register_policy(name: str, policy: Callable[..., Policy], description: str = "",
                    knobs: dict[str, Any] | None = None) -> None:
    """Add a policy under ``name``.

    Args:
        name: the registry name.
        policy: a policy class (its knobs are its ``knobs`` attribute, :func:`declared_knobs`), or a factory
            ``factory(gamma=None, **knobs) -> policy`` (``gamma`` only when it has that parameter).
        description: one line for ``specsim policies``.
        knobs: a factory's knobs ``{name: default}`` (none when omitted); not allowed with a class.

    Raises:
        ValueError: ``name`` is already registered (duplicates are never silently shadowed), or ``knobs``
            given with a class.
    """
    if name in _REGISTRY:
        raise ValueError(f"policy name {name!r} is already registered")
    if inspect.isclass(policy):
        if knobs is not None:
            raise ValueError(f"policy {name!r}: a class declares its knobs in its `knobs` attribute")
        knobs = declared_knobs(policy)
    _REGISTRY[name] = _Entry(policy, dict(knobs or {}), description)


def _ensure_entry_points() -> None:
    """Load the ``specsim.policies`` entry-point group into the registry once per process."""
    global _entry_points_loaded
    if not _entry_points_loaded:
        _entry_points_loaded = True
        load_entry_points(register_policy, lambda: _REGISTRY.keys())


def available_policies() -> dict[str, str]:
    """Registered policy names with their one-line descriptions, sorted by name."""
    _ensure_entry_points()
    return {name: e.description for name, e in sorted(_REGISTRY.items())}


def _unknown_name(name: str) -> SpecsimInputError:
    hint = (" (a plug-in file needs ':Name', the class or function to load)" if name.endswith(".py")
            else did_you_mean(name, sorted(_REGISTRY)))
    return SpecsimInputError(None, None, "policy", f"one of {sorted(_REGISTRY)} or path/to/file.py:Name{hint}",
                             repr(name))


def policy_knobs(name_or_policy: Any) -> dict[str, Any]:
    """The knobs a policy accepts, ``{knob name: default}``.

    Args:
        name_or_policy: a registry name, ``path/to/file.py:Name``, or a policy class, instance or function.

    Raises:
        SpecsimInputError: an unknown name, or a plug-in file that does not load.
    """
    if not isinstance(name_or_policy, str):
        return declared_knobs(name_or_policy)
    _ensure_entry_points()
    if name_or_policy in _REGISTRY:
        extra = TABLE_KNOBS if name_or_policy in COST_AWARE else {}
        return {**_REGISTRY[name_or_policy].knobs, **extra}
    if is_plugin_spec(name_or_policy):
        obj = load_plugin_object(name_or_policy)
        return declared_knobs(obj) if inspect.isclass(obj) else {}
    raise _unknown_name(name_or_policy)


def known_knobs() -> set[str]:
    """Every knob name some registered policy declares (built-ins and entry points)."""
    _ensure_entry_points()
    return {k for e in _REGISTRY.values() for k in e.knobs}


def run_knobs(policy: Any, table: dict[str, Any], given: dict[str, Any],
              shared: tuple[str, ...] = ()) -> dict[str, Any]:
    """The knob values a run of ``policy`` uses: THE knob resolver of specsim (runs, provenance, sweeps, tuning).

    Order: the policy's declared defaults, then the scenario's ``[policy.knobs]`` ``table`` entries the policy
    declares, then ``given`` (the caller's, e.g. ``--threshold``). The table is shared by every policy of a
    scenario (a sweep runs several), so an entry another policy declares is skipped for this one; an entry no
    policy declares is a typo and an error.

    Args:
        policy: a registry name, ``path/to/file.py:Name``, or a policy class, instance or function.
        table: the scenario's ``[policy.knobs]``.
        given: knobs given to this run; each must be declared by ``policy``.
        shared: knob names other policies of the same sweep declare (plug-ins outside the registry).

    Returns:
        ``{knob: value}`` for every knob ``policy`` declares.

    Raises:
        SpecsimInputError: a table entry no policy declares, or a given knob ``policy`` does not declare (each
            naming the key and the closest valid one), a knob of the wrong type, or an unknown policy.
    """
    declared = policy_knobs(policy)
    valid = set(declared) | known_knobs() | set(shared)
    for key in table:
        if key not in valid:
            name = policy if isinstance(policy, str) else getattr(policy, "name", type(policy).__name__)
            raise SpecsimInputError(None, None, f"policy.knobs.{key}",
                                    f"a knob policy {name} declares ({', '.join(sorted(declared)) or 'none'}) or "
                                    f"another policy does{did_you_mean(key, valid)}", repr(table[key]))
    name = policy if isinstance(policy, str) else getattr(policy, "name", None) or getattr(
        policy, "__name__", type(policy).__name__)                 # a plain function: its own name
    return check_knobs(str(name), declared, {**{k: v for k, v in table.items() if k in declared}, **given})


def make_policy(name: str, gamma: int | None = None, **knobs: Any) -> Policy:
    """Build and check a policy by registry name or ``path/to/file.py:Name``.

    Args:
        name: registry name or plug-in spec.
        gamma: the run's gamma, passed to policies whose constructor has a ``gamma`` parameter
            (``static`` verifies that many drafts); None = the step's gamma.
        knobs: knob values (a scenario's ``[policy.knobs]`` merged with the caller's); each must be one
            the policy declares (:func:`policy_knobs`); declared knobs not given take their defaults.

    Raises:
        SpecsimInputError: unknown name, missing plug-in file or attribute, a knob the policy does not
            accept (naming the policy, the knob and the knobs it accepts), a knob value outside the
            policy's range, or an object that is not a policy.
    """
    _ensure_entry_points()
    if name in COST_AWARE and name in _REGISTRY:
        return _with_table(name, gamma, knobs)
    if name in _REGISTRY:
        entry = _REGISTRY[name]
        if inspect.isclass(entry.source):
            return instantiate(entry.source, gamma, None, **knobs)
        values = check_knobs(name, entry.knobs, knobs)
        try:
            policy = call_with_gamma(entry.source, gamma, values)
        except ValueError as e:                  # a knob outside the policy's range
            if isinstance(e, SpecsimInputError):
                raise
            raise SpecsimInputError(None, None, f"policy {name}", "knobs in the policy's range", str(e)) from None
        policy_hooks(policy)
        return policy
    if is_plugin_spec(name):
        return load_plugin(name, gamma, **knobs)
    raise _unknown_name(name)


def _with_table(name: str, gamma: int | None, knobs: dict[str, Any]) -> Policy:
    """A COST_AWARE built-in with its table knobs: the policy itself for ``cost_table="exact"`` (the paper's
    default), else wrapped in :class:`specsim.policies.cost_table.WithCostTable`."""
    table = {k: knobs.pop(k) for k in list(knobs) if k in TABLE_KNOBS}
    check_knobs(name, {**_REGISTRY[name].knobs, **TABLE_KNOBS}, {**knobs, **table})      # names the bad knob
    policy = instantiate(_REGISTRY[name].source, gamma, None, **knobs)
    kind = table.get("cost_table", "exact")
    ctx = table.get("profile_context_len", TABLE_KNOBS["profile_context_len"])
    if isinstance(ctx, bool) or not isinstance(ctx, int) or ctx < 0:
        raise SpecsimInputError(None, None, f"policy {name}, knob profile_context_len",
                                "an int >= 0 (context tokens per request of the profiling step)", repr(ctx))
    if kind == "exact":              # the exact cost: no table (profile_context_len, resolved to its default, unused)
        return policy
    try:
        wrapped = WithCostTable(policy, kind, table.get("profile_context_len", TABLE_KNOBS["profile_context_len"]))
    except ValueError as e:
        raise SpecsimInputError(None, None, f"policy {name}", "knobs in the policy's range", str(e)) from None
    policy_hooks(wrapped)
    return wrapped


register_policy("none", NoSpeculation, "no speculation: verify nothing")
register_policy("static", StaticK, "static-k: verify all gamma drafts")
register_policy("mtp1", MTP1, "MTP-1: static 1 with the MTP drafter (DeepSeek's baseline)")
register_policy("specdecpp", SpecDecPP, "SpecDec++: verify while P(any rejection) <= threshold")
register_policy("dspark", DSpark, "DSpark Algorithm 1: greedy prefix scheduler, early stop")
register_policy("dspark-async", DSparkAsync, "DSpark asynchronous (ZOS): capacity from step t-2, top-K now")
register_policy("dspark-global", DSparkGlobal,
                "reference: synchronous DSpark, global search without early stop (not lossless)")
register_policy("oracle", Oracle, "reference: clairvoyant, verifies accepted drafts first, rejected ones only where "
                "a larger batch runs faster (upper bound)")
register_policy("threshold", ConfidenceThreshold,
                "DeepSpec per-position rule: verify up to the first raw c_k < threshold")
register_policy("vllm-adaptive", VllmAdaptive,
                "vLLM adaptive verification (PR 47808): budget from step t-1 on vLLM's table, live top-k")
register_policy("trtllm-confidence", TrtllmConfidence,
                "TensorRT-LLM confidence scheduling (PR 17056): global argmax on the profiled staircase")
register_policy("vllm-dsd", VllmDsd, "vLLM num_speculative_tokens_per_batch_size: drafts per batch-size range")
register_policy("trtllm-draft-len-schedule", TrtllmDraftLenSchedule,
                "TensorRT-LLM draft_len_schedule: drafts per running-request bound, 0 above the last")
