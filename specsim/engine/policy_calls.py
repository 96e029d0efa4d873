"""The scheduler's calls into a verification policy: the read-only views it builds and the checks of what the
policy returns (STYLE.md 3: the engine checks each result and names the policy in the error).

A policy is reached only through its :class:`~specsim.policies.base.PolicyHooks`: ``proposal_length`` (asked
before drafting), ``capacity`` (asked with the view of two steps ago) and ``decide`` (the verify lengths).
"""

from __future__ import annotations

from collections import deque
from operator import attrgetter
from typing import NamedTuple

import numpy as np

from specsim.engine.draws import Drafts
from specsim.engine.state import Slots
from specsim.engine.workload import Workload
from specsim.errors import SpecsimInputError
from specsim.policies.base import OracleView, SchedulingView


class DecodeBatch(NamedTuple):
    """The decoding requests of one step before the policy's decision."""

    step: int                 # the replica's step index
    now_s: float              # when the step starts, seconds
    decode: np.ndarray        # (R,) slot indices of the decoding requests, ascending
    kv_tokens: float          # KV tokens the decoding requests read
    gamma: int                # drafts proposed per request this step


class Decision(NamedTuple):
    """The policy's decision: (R,) int64 verify lengths (unclipped) and its ``capacity`` value (-1: none)."""

    verify_len: np.ndarray
    capacity: int


class PolicyCalls:
    """Ask one replica's policy, through read-only views of its running requests.

    Args:
        hooks: the policy's hooks (:func:`specsim.policies.base.policy_hooks`).
        slots: the replica's running requests (read only here).
        workload: the read-only per-request inputs (for the requests' domains).
        profile: the target's step-time profile (shown in the view).
        drafter_cost: the drafter's cost model (shown in the view).
    """

    def __init__(self, hooks, slots: Slots, workload: Workload, profile, drafter_cost) -> None:
        self.hooks, self.slots, self.workload = hooks, slots, workload
        self.profile, self.drafter_cost = profile, drafter_cost
        self.name = hooks.name
        self._views: deque[SchedulingView | None] = deque(maxlen=2)
        self._domains: tuple = (None, None)        # (request ids array, their domains) of the last view

    def proposal(self, batch: DecodeBatch, prefill_drafts: bool = False) -> DecodeBatch:
        """The batch with the drafts proposed this step: gamma, or the policy's ``proposal_length``. A step with no
        decoding request asks it only where the engine drafts for the requests it prefills (``prefill_drafts``:
        ``engine.first_drafts = "prefill-step"``), with a view of 0 requests; a step that may pack no prefill
        then drafts nothing either way."""
        h = self.hooks
        if not ((batch.decode.size or prefill_drafts) and batch.gamma and h.proposal_length is not None):
            return batch
        empty = np.zeros((batch.decode.size, 0))
        view = self._view(batch, Drafts(None, empty, empty), None)
        gamma = self._check_int(h.proposal_length(view), "proposal_length", batch.gamma)
        return batch if gamma == batch.gamma else batch._replace(gamma=gamma)

    def decide(self, batch: DecodeBatch, drafts: Drafts) -> Decision:
        """Ask ``capacity`` (with the view ``capacity_view_age`` steps old) and ``decide`` (with this step's view)."""
        R, h, decode = batch.decode.size, self.hooks, batch.decode
        capacity = -1
        if R and h.capacity is not None:
            age = h.capacity_view_age                                    # 1 or 2 steps (policy_hooks checks it)
            old = self._views[-age] if len(self._views) >= age else None
            capacity = self._check_int(h.capacity(old, self.slots.request[decode], R), "capacity", None)
        if not R or (not batch.gamma and h.capacity is None and h.proposal_length is None):
            # no request, or no drafts to verify (``none``; gamma 0): zeros are the only valid decision, so
            # neither the view is built nor the policy asked (issue 25: the step of ``none`` builds no view)
            self._views.append(None)
            return Decision(np.zeros(R, np.int64), capacity)
        view = self._view(batch, drafts, None if capacity < 0 else capacity)
        self._views.append(view)
        return Decision(self._check_lengths(h.decide(view), R, batch.gamma), capacity)

    @property
    def asks_nothing_without_drafts(self) -> bool:
        """A step without drafts (gamma 0) asks this policy nothing and builds no view (no ``capacity`` or
        ``proposal_length`` hook): :meth:`decide` returns zeros."""
        return self.hooks.capacity is None and self.hooks.proposal_length is None

    def skip_steps(self, num_steps: int) -> None:
        """``num_steps`` steps without drafts passed that asked this policy nothing (as :meth:`decide` keeps no
        view for them)."""
        for _ in range(min(num_steps, self._views.maxlen)):
            self._views.append(None)

    def _view(self, batch: DecodeBatch, drafts: Drafts, capacity: int | None) -> SchedulingView:
        """The policy's read-only view of this step: its per-request arrays are made when the policy first reads
        them (:meth:`SchedulingView.shown_lazily`; most policies read a few)."""
        fields = {"step": batch.step, "now_s": batch.now_s, "gamma": batch.gamma, "conf": drafts.conf,
                  "kv_tokens": batch.kv_tokens, "profile": self.profile, "capacity": capacity,
                  "drafter_cost": self.drafter_cost}
        if self.hooks.view_cls is OracleView:
            fields["accept"] = drafts.accept
        return self.hooks.view_cls.shown_lazily(fields, _Shown(self, batch.decode, drafts))

    def domains_of(self, ids: np.ndarray) -> np.ndarray:
        """(R,) the domains of the requests ``ids`` (kept while the same ids array is shown: no admission or
        release)."""
        if ids is not self._domains[0]:
            self._domains = (ids, self.workload.domain[ids])
        return self._domains[1]

    def _check_lengths(self, result, R: int, gamma: int) -> np.ndarray:
        """The policy's verify lengths as an (R,) int64 array (their range is checked by the scheduler)."""
        arr = result if type(result) is np.ndarray else np.asarray(result)
        if arr.shape != (R,) or arr.dtype.kind not in "iub":             # signed, unsigned ints or bools
            raise SpecsimInputError(None, None, f"policy {self.name}",
                                    f"verify lengths as an integer array of shape ({R},)",
                                    f"{arr.dtype} array of shape {arr.shape}")
        if arr.dtype == np.int64:
            return arr
        if arr.dtype.kind == "u" and R and arr.max() > np.iinfo(np.int64).max:
            raise SpecsimInputError(None, None, f"policy {self.name}", f"verify lengths in [0, {gamma}]",
                                    f"values up to {arr.max()}")
        return arr.astype(np.int64)

    def _check_int(self, result, hook: str, upper: int | None) -> int:
        ok = not isinstance(result, (bool, np.bool_)) and isinstance(result, (int, np.integer)) and result >= 0
        if not ok or (upper is not None and result > upper):
            want = "an int >= 0" if upper is None else f"an int in [0, {upper}]"
            raise SpecsimInputError(None, None, f"policy {self.name}, {hook}", want, repr(result))
        return int(result)


class _Shown:
    """The per-request arrays of one step's view (:meth:`PolicyCalls._view`), made on first access from the slot
    arrays as they were when the view was built (those arrays are replaced, never written in place), and its raw
    confidences from the step's drafts (:class:`~specsim.engine.draws.Drafts`, computed when first read)."""

    __slots__ = ("calls", "decode", "arrays", "drafts")

    NAMES = ("request_ids", "num_generated", "prompt_tokens", "hist_drafts_verified", "hist_drafts_accepted",
             "last_verify_len", "last_accepted")
    _SLOTS = attrgetter("request", "num_generated", "prompt_tokens", "drafts_verified", "drafts_accepted",
                        "last_verify_len", "last_accepted")          # the slot array of each of NAMES

    def __init__(self, calls: PolicyCalls, decode: np.ndarray, drafts: Drafts) -> None:
        self.calls, self.decode, self.arrays, self.drafts = calls, decode, self._SLOTS(calls.slots), drafts

    def __call__(self, name: str) -> np.ndarray:
        if name == "conf_raw":
            return self.drafts.conf_raw
        if name == "domains":
            return self.calls.domains_of(self._at("request_ids"))
        return self._at(name)

    def _at(self, name: str) -> np.ndarray:
        arr = self.arrays[self.NAMES.index(name)]      # every slot decodes: the array serves as it is
        return arr if self.decode.size == arr.shape[0] else arr[self.decode]
