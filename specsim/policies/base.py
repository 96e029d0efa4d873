"""The verification-policy interface: a read-only scheduling view in, verify lengths out.

A policy decides, every engine step, how many of each running request's gamma drafted tokens the
target verifies (the verify length l_r, 0 <= l_r <= gamma). What a policy may supply, exactly:

* ``name`` (str): shown in outputs and error messages.
* ``fits_zos`` (bool): True when the policy's batch size is fixed before the current step's
  confidences exist, so zero-overhead scheduling (ZOS) hides the host overhead; False otherwise
  (the engine then charges the host overhead on every step).
* ``__call__(view: SchedulingView) -> np.ndarray``: verify lengths, shape (R,), integers in [0, gamma].
* optionally ``capacity(old_view, running_ids, num_running) -> int``: called before ``__call__`` with
  the view of two steps earlier (or None when none exists yet), the ids (R_t,) and the count R_t of the
  requests running now; the result reaches ``__call__`` as ``view.capacity`` (dspark-async, PAPER.md 5.2).

* optionally ``proposal_length(view) -> int``: called before drafting, with a view whose ``gamma`` is the
  largest proposal and whose confidence arrays have shape (R, 0) (this step's drafts do not exist yet);
  returns gamma_t in [0, gamma], the tokens the
  drafter proposes this step (the drafter cost is paid for gamma_t, nothing when 0), and ``__call__`` then
  sees a view with ``gamma = gamma_t``. This is how engines with adaptive proposal lengths (SmartSpec /
  TurboSpec, draft-length schedules) skip drafting when speculation does not pay.

Causality holds by construction: a view holds this step's drafts' confidences and the causal history,
never the hidden outcomes of the step being scheduled. Policies may keep state built only from views.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from specsim.hardware.profile import StepTimeProfile


@dataclass(frozen=True, eq=False)
class SchedulingView:
    """Everything a causal policy may read at one engine step of one replica. All arrays are read-only.

    Attributes:
        step: the replica's step index (0-based).
        now_s: simulated time at the start of the step, seconds.
        gamma: drafts proposed per request this step (the block length).
        request_ids: (R,) int64 trace indices of the running requests, in slot order.
        domains: (R,) object array of domain names.
        conf_raw: (R, gamma) float64 raw drafter confidences c_k in (0, 1) (PAPER.md section 3).
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
        for name in ("request_ids", "domains", "conf_raw", "conf", "num_generated", "prompt_tokens",
                     "hist_drafts_verified", "hist_drafts_accepted", "last_verify_len", "last_accepted"):
            arr = getattr(self, name)
            if arr.flags.writeable:
                if arr.base is not None:           # a view of someone's array: freeze our own view of it
                    arr = arr.view()
                    object.__setattr__(self, name, arr)
                arr.setflags(write=False)          # an array the view owns (the engine's copies): freeze it

    @property
    def num_requests(self) -> int:
        """R, the number of running requests."""
        return int(self.request_ids.shape[0])

    def sps(self, batch_tokens: int | np.ndarray) -> float | np.ndarray:
        """Target steps per second at B tokens (scalar or array), with this step's KV read included."""
        return self.profile.sps(batch_tokens, self.kv_tokens)

    def draft_time_s(self, gamma: int) -> float:
        """Seconds to draft ``gamma`` tokens for every running request (0 without a drafter)."""
        if self.drafter_cost is None or gamma <= 0:
            return 0.0
        return self.drafter_cost.draft_time_s(self.num_requests, gamma, self.profile, self.kv_tokens)

    def sps_range(self, first: int, count: int) -> np.ndarray:
        """SPS at B = first .. first + count - 1, shape (count,), with this step's KV read included."""
        return 1.0 / self.profile.step_time_range(first, count, self.kv_tokens)

    def survival(self, calibrated: bool = True) -> np.ndarray:
        """(R, gamma) survival a_{r,j} = prod_{i<=j} c_{r,i} (PAPER.md section 3)."""
        return (self.conf if calibrated else self.conf_raw).cumprod(axis=1)


@runtime_checkable
class Policy(Protocol):
    """A verification policy (see the module docstring for the full contract)."""

    name: str
    fits_zos: bool

    def __call__(self, view: SchedulingView) -> np.ndarray: ...


class FunctionPolicy:
    """Wraps a plain function ``f(view) -> (R,) verify lengths`` as a policy with ``fits_zos = False``."""

    def __init__(self, fn: Callable[[SchedulingView], Any], name: str | None = None) -> None:
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "function")
        self.fits_zos = False

    def __call__(self, view: SchedulingView) -> np.ndarray:
        return self.fn(view)


def as_policy(obj: Any) -> Policy:
    """Return ``obj`` as a policy: policies pass through, plain callables are wrapped.

    Raises:
        TypeError: ``obj`` is neither a policy nor callable.
    """
    if isinstance(obj, type):
        obj = obj()
    if hasattr(obj, "fits_zos") and hasattr(obj, "name") and callable(obj):
        return obj
    if callable(obj):
        return FunctionPolicy(obj)
    raise TypeError(f"{obj!r} is not a policy: expected a callable view -> verify lengths")


@dataclass(frozen=True, eq=False)
class ReferenceView(SchedulingView):
    """The view handed to non-causal *reference* policies (``view_kind = "reference"``).

    Same content as :class:`SchedulingView`; its own type marks that the policy using it is a yardstick
    (e.g. ``dspark-global``: a synchronous global search without early stop, which is not lossless,
    PAPER.md Appendix A), never a default.
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


@dataclass(frozen=True)
class PolicyHooks:
    """What the engine calls on a policy, resolved and checked once when the policy is made."""

    name: str
    fits_zos: bool
    view_cls: type
    decide: Callable[[SchedulingView], Any]
    capacity: Callable | None
    proposal_length: Callable | None


def policy_hooks(policy: Any) -> PolicyHooks:
    """The hooks of ``policy`` (TEMPORARY integration shim: replaced by the policy base-class work)."""
    from specsim.errors import SpecsimInputError
    kind = getattr(policy, "view_kind", "causal")
    if kind not in VIEW_KINDS:
        raise SpecsimInputError(None, None, f"policy {policy.name}, view_kind", f"one of {sorted(VIEW_KINDS)}",
                                repr(kind))
    cap = getattr(policy, "capacity", None)
    prop = getattr(policy, "proposal_length", None)
    return PolicyHooks(name=getattr(policy, "name", repr(policy)), fits_zos=bool(policy.fits_zos),
                       view_cls=VIEW_KINDS[kind], decide=policy, capacity=cap if callable(cap) else None,
                       proposal_length=prop if callable(prop) else None)
