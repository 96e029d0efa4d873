"""The verification-policy interface: a read-only scheduling view in, verify lengths out.

A policy decides, every engine step, how many of each running request's gamma drafted tokens the
target verifies (the verify length l_r, 0 <= l_r <= gamma). :class:`PolicyBase` lists every member a
policy may supply, with its default; a plug-in may subclass it or define the same members on a plain
class (or be a plain function ``view -> verify lengths``). The engine reads a policy only through
:func:`policy_hooks`, which checks it once and returns a frozen :class:`PolicyHooks`.

Causality holds by construction: a view holds this step's drafts' confidences and the causal history,
never the hidden outcomes of the step being scheduled. Policies may keep state built only from views; each
replica runs its own policy object (a user's object serves the first replica, deep copies of it the others:
:func:`specsim.run_config.resolve_policy`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, runtime_checkable

import numpy as np

from specsim.errors import SpecsimInputError, did_you_mean
from specsim.policies.guard import guarded, is_user_policy
from specsim.hardware.profile import StepTimeProfile


_VIEW_ARRAYS = ("request_ids", "domains", "conf_raw", "conf", "num_generated", "prompt_tokens",
                "hist_drafts_verified", "hist_drafts_accepted", "last_verify_len", "last_accepted")

#: The per-request arrays an engine-built view makes on first access (:meth:`SchedulingView.shown_lazily`; the raw
#: confidences too: most policies read only the calibrated ones).
LAZY_ARRAYS = frozenset(("request_ids", "domains", "conf_raw", "num_generated", "prompt_tokens",
                         "hist_drafts_verified", "hist_drafts_accepted", "last_verify_len", "last_accepted"))


def _frozen(arr: np.ndarray) -> np.ndarray:
    """``arr`` made read-only: itself when nobody else writes it (the engine's arrays are replaced each step),
    a read-only view of it when it is a view of someone's array."""
    if arr.flags.writeable:
        if isinstance(arr.base, np.ndarray):       # a view of someone's array: freeze our own view of it
            arr = arr.view()
        arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class SchedulingView:
    """Everything a causal policy may read at one engine step of one replica. All arrays are read-only.

    Attributes:
        step: the replica's step index (0-based).
        now_s: simulated time at the start of the step, seconds.
        gamma: drafts proposed per request this step (the block length). Near the end of the running requests'
            outputs it can be below the configured gamma: a step drafts at most the most output any request has
            left, less one (docs/profiles.md); a length above it (up to the configured gamma) is clipped to the
            output left and counted in ``clipped_verify_lengths``, like any length past a request's output.
        request_ids: (R,) int64 trace indices of the running requests, in slot order.
        domains: (R,) object array of domain names.
        conf_raw: (R, gamma) float64 raw drafter confidences c_k in (0, 1) (DSpark paper §3.2.1).
        conf: (R, gamma) float64 calibrated confidences (monotone per-position map of ``conf_raw``).
        num_generated: (R,) int64 output tokens emitted so far (the first comes from prefill).
        prompt_tokens: (R,) int64 prompt lengths.
        kv_tokens: total KV-cache tokens the step will read (sum over running requests), for ``sps``.
        hist_drafts_verified: (R,) int64 drafts each request has had verified so far (causal history).
        hist_drafts_accepted: (R,) int64 of those, how many were accepted.
        last_verify_len: (R,) int64 verify length of each request's previous step (-1 if none).
        last_accepted: (R,) int64 drafts accepted at each request's previous step (-1 if none).
        profile: the replica's step-time profile (SPS(B) = 1 / step time).
        capacity: the value ``policy.capacity`` returned for this step, or None.
        drafter_cost: the drafter's cost model (specsim.hardware.drafter.DrafterCost), or None.
    """

    step: int
    now_s: float
    gamma: int
    request_ids: np.ndarray
    domains: np.ndarray
    conf_raw: np.ndarray
    conf: np.ndarray
    num_generated: np.ndarray
    prompt_tokens: np.ndarray
    kv_tokens: float
    hist_drafts_verified: np.ndarray
    hist_drafts_accepted: np.ndarray
    last_verify_len: np.ndarray
    last_accepted: np.ndarray
    profile: StepTimeProfile
    capacity: int | None = None
    drafter_cost: Any = None

    def __post_init__(self) -> None:
        fields = self.__dict__
        for name in _VIEW_ARRAYS:
            fields[name] = _frozen(fields[name])

    @classmethod
    def shown_lazily(cls, fields: dict, shown: Callable[[str], np.ndarray]) -> "SchedulingView":
        """The engine's constructor (issue 25: a step builds a view for every policy call, and most policies
        read a few of its arrays): a view with ``fields`` (every field but the per-request arrays of
        :data:`LAZY_ARRAYS`, which ``shown(name)`` gives on first access and the view then keeps, read-only; the
        raw confidences among them, which the engine computes only when read, may be in ``fields`` instead).

        ``shown`` must return the same values whenever it is called (the engine's slot arrays are replaced,
        never written in place, so it can keep references to them). Apart from when the arrays are made, the
        view is the one ``cls(**fields, **{name: shown(name)})`` builds."""
        view = object.__new__(cls)
        d = view.__dict__
        d.update(fields)
        d["_shown"] = shown
        d["conf"] = _frozen(d["conf"])
        if "conf_raw" in d:
            d["conf_raw"] = _frozen(d["conf_raw"])
        if d.get("accept") is not None:                 # an oracle's outcomes: its own read-only view of them
            d["accept"] = d["accept"].view()
            d["accept"].setflags(write=False)
        return view

    def __getattr__(self, name: str):
        # reached only for an attribute the instance does not hold: a lazily shown array not read yet
        shown = self.__dict__.get("_shown")
        if shown is None or name not in LAZY_ARRAYS:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        arr = self.__dict__[name] = _frozen(shown(name))
        return arr

    @property
    def num_requests(self) -> int:
        """R, the number of running requests (the rows of ``conf``, (R, gamma))."""
        return int(self.conf.shape[0])

    def sps(self, batch_tokens: int | np.ndarray) -> float | np.ndarray:
        """Target steps per second at B tokens (scalar or array), with this step's KV read included."""
        return self.profile.sps(batch_tokens, self.kv_tokens, self.num_requests)

    @property
    def speculation_s(self) -> float:
        """Seconds of speculation's own overhead this step pays once it has drafted, whatever it verifies (the
        profile's ``speculation_s`` at R requests drafting gamma each, issue 20, docs/profiles.md; 0 for a
        scheduler table, which carries none, and without drafts)."""
        f = getattr(self.profile, "speculation_s", None)
        return 0.0 if f is None else f(self.num_requests, self.num_requests * self.gamma)

    def drafting_sps(self, batch_tokens: int | np.ndarray) -> float | np.ndarray:
        """Steps per second of this step, which has drafted, at B verified tokens: 1 / (the target's step time
        with this step's KV read + :attr:`speculation_s`). What a verify-length decision scores (DSpark's
        Theta); :meth:`sps` is the target's alone (a decision on how much to draft, where drafting nothing
        pays no speculation overhead, reads it)."""
        return 1.0 / (self.profile.step_time(batch_tokens, self.kv_tokens, self.num_requests) + self.speculation_s)

    def draft_time_s(self, gamma: int) -> float:
        """Seconds to draft ``gamma`` tokens for every running request (0 without a drafter)."""
        if self.drafter_cost is None or gamma <= 0:
            return 0.0
        return self.drafter_cost.draft_time_s(self.num_requests, gamma, self.profile, self.kv_tokens)

    def sps_range(self, first: int, count: int) -> np.ndarray:
        """SPS at B = first .. first + count - 1, shape (count,), with this step's KV read included."""
        return 1.0 / self.profile.step_time_range(first, count, self.kv_tokens, self.num_requests)

    def drafting_sps_range(self, first: int, count: int) -> np.ndarray:
        """:meth:`drafting_sps` at B = first .. first + count - 1, shape (count,)."""
        return 1.0 / (self.profile.step_time_range(first, count, self.kv_tokens, self.num_requests)
                      + self.speculation_s)

    def survival(self, calibrated: bool = True) -> np.ndarray:
        """(R, gamma) survival a_{r,j} = prod_{i<=j} c_{r,i} (DSpark paper §3.2.1)."""
        return (self.conf if calibrated else self.conf_raw).cumprod(axis=1)


@dataclass(frozen=True, eq=False)
class ReferenceView(SchedulingView):
    """The view handed to non-causal *reference* policies (``view_kind = "reference"``).

    Same content as :class:`SchedulingView`; its own type marks that the policy using it is a yardstick
    (e.g. ``dspark-global``: a synchronous global search without early stop, which is not lossless,
    DSpark paper Appendix A), never a default.
    """


@dataclass(frozen=True, eq=False)
class OracleView(SchedulingView):
    """The view of clairvoyant policies (``view_kind = "oracle"``): it includes this step's outcomes.

    Attributes:
        accept: (R, gamma) bool, True where draft k of request r would be accepted given its prefix
            (the hidden realisations). Only oracle policies ever see it; they give an upper bound.
    """

    accept: np.ndarray = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.accept is not None and self.accept.flags.writeable:
            arr = self.accept.view()
            arr.setflags(write=False)
            object.__setattr__(self, "accept", arr)


VIEW_KINDS = {"causal": SchedulingView, "reference": ReferenceView, "oracle": OracleView}


# ------------------------------------------------------------------------------------------ the policy


class PolicyBase:
    """Base class of verification policies: every member a policy may supply, with its default.

    Subclass it, set ``name``, implement ``__call__`` and override only what differs. A plug-in may
    instead define the same members on a plain class (or be a plain function); :func:`policy_hooks`
    reads both the same way.

    Attributes:
        name: shown in outputs and error messages (required, non-empty).
        fits_zos: True when the batch size is fixed before this step's confidences exist, so
            zero-overhead scheduling (ZOS) hides the host overhead; False (default): the engine charges
            the host overhead on every step.
        view_kind: ``"causal"`` (default, a :class:`SchedulingView`), ``"reference"`` (a
            :class:`ReferenceView`, non-causal yardsticks) or ``"oracle"`` (an :class:`OracleView` that
            holds this step's outcomes; clairvoyant upper bounds only).
        knobs: ``{knob name: default}`` the constructor accepts as keyword arguments (default: none).
            Knobs come from a scenario's ``[policy.knobs]`` table or the caller; any other knob is an
            error (:func:`specsim.policies.make_policy`). Every declared knob reaches the constructor, the
            declared default when not given, so this table is the one place a knob's default is written.
            ``gamma`` is not a knob: a constructor with a ``gamma`` parameter receives the run's gamma.
        drafter: a drafter family the policy forces (``"none"``, ``"mtp"``), or None (default): the
            scenario's drafter.
        gamma: a block length the policy forces together with its ``drafter`` (mtp1: 1), or None
            (default): the run's gamma.
        capacity: optional hook, None (default) = not used. When defined as a method
            ``capacity(old_view, running_ids, num_running) -> int``, the engine calls it before
            ``__call__`` with the view of ``capacity_view_age`` steps earlier (or None when none exists
            yet), the ids (R_t,) int64 and the count R_t of the requests running now; the int >= 0 it
            returns reaches ``__call__`` as ``view.capacity`` (dspark-async, DSpark paper §5.2).
        capacity_view_age: how many steps old the view handed to ``capacity`` is: 2 (default; DSpark's
            asynchronous variant sizes from step t-2, DSpark paper §5.2) or 1 (vLLM's adaptive verification
            and TensorRT-LLM's confidence planner read the confidences of the previous step). ZOS needs
            at least 1: the batch size of step t is fixed before step t's confidences exist.
        proposal_length: optional hook, None (default) = not used (the drafter proposes gamma tokens).
            When defined as a method ``proposal_length(view) -> int``, the engine calls it before drafting
            with a view whose ``gamma`` is the largest proposal and whose confidence arrays have shape
            (R, 0) (this step's drafts do not exist yet); it returns gamma_t in [0, gamma], the tokens the
            drafter proposes this step (the drafter cost is paid for gamma_t, nothing when 0), and
            ``__call__`` then sees a view with ``gamma = gamma_t``. This is how adaptive proposal lengths
            (SmartSpec / TurboSpec, draft-length schedules) skip drafting when speculation does not pay.
            A step with no decoding request that prefills one asks it too, with a view of 0 requests
            (``num_requests`` 0, arrays of length 0), for the drafts of the requests it prefills
            (``engine.first_drafts = "prefill-step"``, the default; docs/profiles.md "When the drafter runs").
        reads_confidence: True (default) when the policy reads the drafts' confidences (``view.conf``,
            ``view.conf_raw``); False for one that never does (static k, none, draft-length schedules, the
            oracle). A run of a confidence-reading policy on a drafter without a confidence head (the CPU
            drafters ngram and suffix) carries a notice: it schedules on simulated confidences.
    """

    name: str = ""
    fits_zos: bool = False
    view_kind: ClassVar[str] = "causal"
    knobs: ClassVar[dict[str, Any]] = {}
    drafter: ClassVar[str | None] = None
    gamma: ClassVar[int | None] = None
    capacity: ClassVar[Callable[[SchedulingView | None, np.ndarray, int], int] | None] = None
    capacity_view_age: ClassVar[int] = 2
    proposal_length: ClassVar[Callable[[SchedulingView], int] | None] = None
    reads_confidence: ClassVar[bool] = True

    def __call__(self, view: SchedulingView) -> np.ndarray:
        """Verify lengths for this step: (R,) integers in [0, view.gamma] (up to the configured gamma is
        accepted: each length is clipped to its request's output left)."""
        raise NotImplementedError(f"policy {type(self).__name__} defines no __call__(view)")


@runtime_checkable
class Policy(Protocol):
    """The members every policy has (PolicyBase lists the optional ones)."""

    name: str
    fits_zos: bool

    def __call__(self, view: SchedulingView) -> np.ndarray: ...


class FunctionPolicy(PolicyBase):
    """Wraps a plain function ``f(view) -> (R,) verify lengths`` as a policy with ``fits_zos = False``."""

    def __init__(self, fn: Callable[[SchedulingView], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__

    def __call__(self, view: SchedulingView) -> np.ndarray:
        return self.fn(view)


def as_policy(obj: Any) -> Policy:
    """Return ``obj`` as a policy: policies pass through, classes are instantiated without arguments,
    plain callables are wrapped in :class:`FunctionPolicy`.

    Raises:
        TypeError: ``obj`` is neither a policy nor callable, or has some of a policy's members
            (:data:`POLICY_MEMBERS`) but not ``name`` and ``fits_zos``.
    """
    if isinstance(obj, type):
        obj = obj()
    if isinstance(obj, PolicyBase) or (hasattr(obj, "fits_zos") and hasattr(obj, "name") and callable(obj)):
        return obj
    if callable(obj):
        members = [m for m in POLICY_MEMBERS if hasattr(obj, m)]
        if members:          # a policy class missing name or fits_zos: wrapping it would drop those members
            missing = " and ".join(m for m in ("name", "fits_zos") if not hasattr(obj, m))
            raise TypeError(f"{type(obj).__name__} has policy members ({', '.join(members)}) but no {missing}: "
                            f"give it {missing} (a plain function is wrapped with fits_zos False, and its other "
                            "members would be ignored)")
        return FunctionPolicy(obj)
    raise TypeError(f"{obj!r} is not a policy: expected a callable view -> verify lengths")


#: The members only a policy object has (a plain function has none): with any of them, ``name`` and ``fits_zos``
#: are required (:func:`as_policy`).
POLICY_MEMBERS = ("name", "fits_zos", "capacity", "proposal_length", "view_kind", "capacity_view_age", "reads_confidence",
                  "drafter", "gamma", "knobs")


# ------------------------------------------------------------------------------------------ hooks


@dataclass(frozen=True)
class PolicyHooks:
    """What the engine calls on a policy, checked once by :func:`policy_hooks`.

    Attributes:
        name: the policy's name (for outputs and error messages).
        fits_zos: True when ZOS hides the host overhead (see :class:`PolicyBase`).
        view_cls: the view type the policy receives: SchedulingView, ReferenceView or OracleView.
        decide: ``decide(view) -> (R,) verify lengths``, the policy's ``__call__``.
        capacity: ``capacity(old_view, running_ids, num_running) -> int``, or None = not used.
        proposal_length: ``proposal_length(view) -> int``, or None = not used.
        capacity_view_age: 1 or 2, how many steps old the view ``capacity`` receives is.
    """

    name: str
    fits_zos: bool
    view_cls: type
    decide: Callable[[SchedulingView], Any]
    capacity: Callable[[SchedulingView | None, np.ndarray, int], int] | None
    proposal_length: Callable[[SchedulingView], int] | None
    capacity_view_age: int = 2


def policy_hooks(policy: Any) -> PolicyHooks:
    """Check a policy once and return the hooks the engine calls.

    Args:
        policy: a :class:`PolicyBase` subclass instance, a plain object with the same members (the
            plug-ins), or a plain function (wrapped by :func:`as_policy`).

    Raises:
        SpecsimInputError: not a policy, an empty name, a non-bool ``fits_zos``, an unknown
            ``view_kind``, a ``drafter``/``gamma`` of the wrong type, a ``capacity_view_age`` other than 1 or
            2, or a hook that is neither None nor a
            method taking the documented arguments; the message names the policy and the member.
    """
    try:
        policy = as_policy(policy)
    except TypeError as e:
        raise SpecsimInputError(None, None, "policy", "a policy (callable view -> verify lengths)", str(e)) from None
    name = getattr(policy, "name", None)
    if not isinstance(name, str) or not name:
        raise SpecsimInputError(None, None, f"policy {type(policy).__name__}, name", "a non-empty str", repr(name))

    def bad(member: str, expected: str, got: Any) -> SpecsimInputError:
        return SpecsimInputError(None, None, f"policy {name}, {member}", expected, repr(got))

    if isinstance(policy, PolicyBase) and type(policy).__call__ is PolicyBase.__call__:
        raise bad("__call__", "a method __call__(view) -> (R,) verify lengths", None)
    fits_zos = getattr(policy, "fits_zos", None)
    if not isinstance(fits_zos, (bool, np.bool_)):
        raise bad("fits_zos", "True or False", fits_zos)
    kind = getattr(policy, "view_kind", "causal")
    if kind not in VIEW_KINDS:
        raise bad("view_kind", f"one of {', '.join(VIEW_KINDS)}", kind)
    drafter = getattr(policy, "drafter", None)
    if drafter is not None and not isinstance(drafter, str):
        raise bad("drafter", "a drafter family name or None", drafter)
    gamma = getattr(policy, "gamma", None)
    if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, (int, np.integer)) or gamma < 0):
        raise bad("gamma", "an int >= 0 or None", gamma)
    age = getattr(policy, "capacity_view_age", 2)
    if isinstance(age, bool) or age not in (1, 2):
        raise bad("capacity_view_age", "1 or 2 (steps)", age)
    hooks = {"decide": policy, "capacity": _hook(policy, "capacity", 3, bad),
             "proposal_length": _hook(policy, "proposal_length", 1, bad)}
    if is_user_policy(policy):             # a user's code that raises: one line naming its file and line
        hooks = {hook: guarded(name, hook, fn) for hook, fn in hooks.items()}
    return PolicyHooks(name=name, fits_zos=bool(fits_zos), view_cls=VIEW_KINDS[kind], capacity_view_age=int(age),
                       **hooks)


_HOOK_SIGNATURES = {"capacity": "capacity(old_view, running_ids, num_running) -> int",
                    "proposal_length": "proposal_length(view) -> int"}


def _hook(policy: Any, member: str, num_args: int, bad: Callable[..., SpecsimInputError]) -> Callable | None:
    """The bound hook ``member`` of ``policy``, or None when it is absent or None (not used)."""
    fn = getattr(policy, member, None)
    if fn is None:
        return None
    if not callable(fn):
        raise bad(member, f"None or a method {_HOOK_SIGNATURES[member]}", fn)
    try:
        inspect.signature(fn).bind(*([None] * num_args))
    except TypeError:
        raise bad(member, f"a method {_HOOK_SIGNATURES[member]}", fn) from None
    except ValueError:       # no signature to read (a builtin): trust it
        pass
    return fn


# ------------------------------------------------------------------------------------------ knobs


def declared_knobs(obj: Any) -> dict[str, Any]:
    """The knobs a policy class, instance or function accepts: ``{name: default}`` (a copy).

    A class or instance with a ``knobs`` attribute declares them there (:class:`PolicyBase`). A plug-in
    class without one takes as knobs its constructor's keyword parameters with defaults, ``gamma``
    excepted (plug-ins written before knobs were declared keep working). Functions and instances without
    ``knobs`` take none.

    Raises:
        SpecsimInputError: a ``knobs`` attribute that is not a dict with str keys (``gamma`` is not a knob).
    """
    knobs = getattr(obj, "knobs", None)
    if knobs is None:
        if not inspect.isclass(obj):
            return {}
        params = _init_params(obj)
        return {k: p.default for k, p in params.items() if k != "gamma" and p.default is not p.empty
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    name = getattr(obj, "name", None) or getattr(obj, "__name__", type(obj).__name__)
    if not isinstance(knobs, dict) or not all(isinstance(k, str) for k in knobs) or "gamma" in knobs:
        raise SpecsimInputError(None, None, f"policy {name}, knobs",
                                "a dict {knob name: default} with str keys, gamma excepted", repr(knobs))
    return dict(knobs)


def _init_params(cls: type) -> dict[str, inspect.Parameter]:
    """The constructor's parameters (empty when there is no signature to read)."""
    try:
        return dict(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return {}


def check_knobs(policy_name: str, declared: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Declared defaults overridden by the given knobs, checked.

    Args:
        policy_name: named in errors.
        declared: ``{knob: default}`` (:func:`declared_knobs`).
        given: the knobs supplied (scenario ``[policy.knobs]`` and the call).

    Returns:
        ``{knob: value}`` for every declared knob.

    Raises:
        SpecsimInputError: a knob the policy does not accept (naming the policy, the knob, the knobs it
            accepts and the closest of them, :func:`specsim.errors.did_you_mean`), or a non-number for a
            knob whose default is a number (bool for bool).
    """
    for knob, value in given.items():
        if knob not in declared:
            expected = (f"one of the knobs policy {policy_name} accepts: {', '.join(sorted(declared))}"
                        f"{did_you_mean(knob, declared)}" if declared
                        else f"no knobs (policy {policy_name} accepts none)")
            raise SpecsimInputError(None, None, f"policy {policy_name}, knob {knob}", expected, repr(value))
        default = declared[knob]
        if isinstance(default, bool):
            ok = isinstance(value, (bool, np.bool_))
        elif isinstance(default, (int, float, np.integer, np.floating)):
            ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
        else:
            ok = True
        if not ok:
            raise SpecsimInputError(None, None, f"policy {policy_name}, knob {knob}",
                                    f"{_article(type(default).__name__)} like its default {default!r}", repr(value))
    return {**declared, **given}


def _article(word: str) -> str:
    """``word`` with its indefinite article (an int, a float)."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
