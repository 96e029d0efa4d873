"""The verification schedulers real engines ship, as built-in policies (knobs named as the engines name them).

* ``vllm-adaptive``: vLLM's adaptive verification for DSpark (PR 47808, merged; read at vllm-project/vllm
  ``vllm/v1/worker/gpu/spec_decode/adaptive_verification.py``, commit
  057929c3632766486896597cf27e1425fd838e63, ``AdaptiveVerificationManager.get_num_tokens`` and
  ``reallocate_drafts``).
* ``trtllm-confidence``: TensorRT-LLM's DSpark confidence-head verification scheduling (PR 17056, open;
  read at its description and unit tests ``test_dspark_schedule.py``: ``compute_verify_token_budget``,
  ``schedule_verify_lens_topk``, ``DSparkVerifyPlanner``).
* ``vllm-dsd``: vLLM's dynamic speculative decoding table ``num_speculative_tokens_per_batch_size``
  (read at ``vllm/v1/spec_decode/dynamic/utils.py``, commit 14b450ca590cbff96e7004bdb147a5d3acf5a4f6).
* ``trtllm-draft-len-schedule``: TensorRT-LLM's ``draft_len_schedule`` (``DecodingBaseConfig`` in
  ``tensorrt_llm/llmapi/llm_args.py``, commit 0004396720054fd8e205cbf616f21f0b57c6b412).

The two confidence schedulers size the verify budget on the host from the previous step's confidences
(``capacity_view_age = 1``) and allocate it from this step's live survivals by global rank, so the batch
size is fixed before this step's confidences exist (``fits_zos``). Their step costs come from the
scheduler's own table (:mod:`specsim.policies.cost_table`), not from the cost the engine charges.
"""

from __future__ import annotations

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView
from specsim.policies.cost_table import VLLM_PROFILE_CONTEXT, TableError, build_table, check_profile_context
from specsim.policies.dspark import lengths_from_top, ranked_candidates, scored_candidates

#: ``capacity`` before any old view exists: size the budget in ``__call__`` from confidences of 1.0.
NO_OLD_VIEW = 2**31 - 1


def stale_survival(old_view: SchedulingView | None, running_ids: np.ndarray, gamma: int) -> np.ndarray:
    """(R, gamma) survivals the host holds for the running requests: each request's row from the old view,
    1.0 for a request the old view does not hold (vLLM resets a joining request's stale row to 1.0,
    ``AdaptiveVerificationManager.add_request``). Rows are in ``running_ids`` order."""
    out = np.ones((running_ids.size, gamma))
    if old_view is None or old_view.num_requests == 0 or gamma == 0:
        return out
    old = old_view.survival()                                              # (R_old, g_old)
    g = min(gamma, old.shape[1])
    pos = {int(r): i for i, r in enumerate(old_view.request_ids)}
    for row, rid in enumerate(running_ids):
        i = pos.get(int(rid))
        if i is not None:
            out[row, :g] = old[i, :g]
            out[row, g:] = 0.0                                             # drafts the old step did not make
    return out


class _Tabled(PolicyBase):
    """A policy that reads its engine's scheduler table and reports its error against the charged cost."""

    cost_table = "exact"
    profile_context = VLLM_PROFILE_CONTEXT

    def _table(self, view: SchedulingView):
        key = (id(view.profile), view.gamma)
        if getattr(self, "_key", None) != key:
            self._key = key
            self.table = build_table(self.cost_table, view.profile, view.gamma, view.drafter_cost,
                                     int(self.profile_context))
        return self.table

    def _record(self, view: SchedulingView, lengths: np.ndarray) -> None:
        """Add this step's |table - charged| / charged at the chosen B to ``self.table_error``."""
        table = self._table(view)
        if table is None or view.num_requests == 0:
            return
        R = view.num_requests
        b = int(R + lengths.sum())
        exact = view.profile.step_time(b, view.kv_tokens, R)
        if table.draft_s_per_request is not None:
            exact += view.draft_time_s(view.gamma)
        if not hasattr(self, "table_error"):
            self.table_error = TableError()
        self.table_error.add(abs(table.step_time(b, 0.0, R) - exact) / exact)


class VllmAdaptive(_Tabled):
    """``vllm-adaptive``: vLLM's adaptive verification (vLLM PR 47808, merged; module docstring source).

    Budget (host, ``capacity`` with the view one step old): the running requests' stale survivals
    (:func:`stale_survival`, from the confidences the step's view shows, ``view.conf``; no EMA: the
    merged code publishes each step's confidences as they are, ``record_confidences``, and the EMA of the
    PR's description is not in it), sorted descending, s_(1) >= s_(2) >= ...;
    the budget is n* = argmax_n (R + s_(1) + ... + s_(n)) / (draft(R) + verify(R + n)), n = 0..R*gamma,
    the first maximum (a global search, no early stop), on vLLM's table (``cost_table="vllm"``:
    profiled at ``VLLM_ADAPTIVE_VERIFICATION_PROFILE_CONTEXT_LEN`` tokens, monotone, CUDA-graph
    staircase, draft cost included; :func:`specsim.policies.cost_table.build_table`).
    Allocation (device, ``__call__``): the n* candidates with the highest *live* survival
    (``_assign_draft_token_budget``: a global top-k of the cumulative products), prefix-closed.

    Knobs (vLLM's names): ``enable_adaptive_verification`` (False: verify every draft, fixed k),
    ``profile_context_len`` (tokens of context per request in the profiling steps), ``cost_table``
    (``vllm``, or ``exact`` to give the scheduler the true cost).
    """

    name = "vllm-adaptive"
    fits_zos = True
    capacity_view_age = 1
    knobs = {"enable_adaptive_verification": True, "profile_context_len": VLLM_PROFILE_CONTEXT,
             "cost_table": "vllm"}

    def __init__(self, enable_adaptive_verification: bool = True, profile_context_len: int = VLLM_PROFILE_CONTEXT,
                 cost_table: str = "vllm") -> None:
        if cost_table not in ("vllm", "exact"):
            raise ValueError(f"cost_table: expected 'vllm' or 'exact', got {cost_table!r}")
        self.enabled = bool(enable_adaptive_verification)
        self.cost_table, self.profile_context = cost_table, check_profile_context(profile_context_len)

    def capacity(self, old_view: SchedulingView | None, running_ids: np.ndarray, num_running: int) -> int:
        """n*, the drafts verified this step, from the view one step old (class docstring)."""
        if old_view is None:
            return NO_OLD_VIEW
        return self._budget(stale_survival(old_view, running_ids, old_view.gamma), old_view)

    def _budget(self, survival: np.ndarray, view: SchedulingView) -> int:
        R = survival.shape[0]
        scores = np.sort(survival.ravel())[::-1]                                       # (R*g,) descending
        n_max = scored_candidates(R, scores.size, view.profile.batch_limit)
        tau = R + np.concatenate([[0.0], np.cumsum(scores[:n_max])])                  # (n_max+1,)
        table = self._table(view)
        cost = (table.step_time_range(R, n_max + 1, 0.0, R) if table is not None
                else view.profile.step_time_range(R, n_max + 1, view.kv_tokens, R) + view.draft_time_s(view.gamma))
        return int(np.argmax(tau / cost))

    def __call__(self, view: SchedulingView) -> np.ndarray:
        R, g = view.num_requests, view.gamma
        if R == 0 or g == 0:
            return np.zeros(R, dtype=np.int64)
        if not self.enabled:
            out = np.full(R, g, dtype=np.int64)
        else:
            k = view.capacity if view.capacity is not None else NO_OLD_VIEW
            if k == NO_OLD_VIEW:                         # first step: vLLM's stale rows start at 1.0
                k = self._budget(np.ones((R, g)), view)
            _, r_sorted = ranked_candidates(view.survival())
            out = lengths_from_top(min(int(k), R * g), r_sorted, R)
        self._record(view, out)
        return out


class TrtllmConfidence(_Tabled):
    """``trtllm-confidence``: TensorRT-LLM's DSpark confidence scheduling (PR 17056, open; module docstring).

    Budget (host planner, ``capacity`` with the view one step old: "written by slot and read one
    iteration later"): every request verifies at least ``min_verify_len`` drafts; the candidates beyond
    that floor with stale survival >= ``survival_eps`` are sorted descending and the budget is the global
    argmax (not a first descent: the cost is a staircase and Theta is not unimodal on it) of
    (R + floor survivals + s_(1) + ... + s_(n)) / table(R * (min_verify_len + 1) + n) over n.
    ``cost_table="trtllm"``: the profiled points, clamped linear interpolation, target cost only, profiled
    at 8,192 context tokens per request (PR 17056 does not say at which context its table is measured; the
    same default as vLLM's); ``cost_table="none"``: no table, and the planner refuses to trim (every draft
    is verified); ``cost_table="exact"``: the true cost.
    Allocation (device): the budget goes to the highest live survivals beyond the floor (global rank).
    """

    name = "trtllm-confidence"
    fits_zos = True
    capacity_view_age = 1
    knobs = {"enable_confidence_scheduling": True, "min_verify_len": 1, "survival_eps": 0.0, "cost_table": "trtllm"}

    def __init__(self, enable_confidence_scheduling: bool = True, min_verify_len: int = 1, survival_eps: float = 0.0,
                 cost_table: str = "trtllm") -> None:
        if cost_table not in ("trtllm", "none", "exact"):
            raise ValueError(f"cost_table: expected 'trtllm', 'none' or 'exact', got {cost_table!r}")
        if not (isinstance(min_verify_len, int) and min_verify_len >= 1):
            raise ValueError(f"min_verify_len: expected an int >= 1, got {min_verify_len!r}")
        if not 0.0 <= float(survival_eps) < 1.0:
            raise ValueError(f"survival_eps: expected a value in [0, 1), got {survival_eps!r}")
        self.enabled = bool(enable_confidence_scheduling) and cost_table != "none"
        self.min_len, self.eps = min_verify_len, float(survival_eps)
        self.cost_table = "exact" if cost_table == "none" else cost_table

    def capacity(self, old_view: SchedulingView | None, running_ids: np.ndarray, num_running: int) -> int:
        """The budget beyond the floor from the view one step old (class docstring)."""
        if old_view is None:
            return NO_OLD_VIEW
        return self._budget(stale_survival(old_view, running_ids, old_view.gamma), old_view)

    def _budget(self, survival: np.ndarray, view: SchedulingView) -> int:
        R, g = survival.shape
        floor = min(self.min_len, g)
        cand = survival[:, floor:].ravel()
        cand = np.sort(cand[cand >= self.eps])[::-1]                                    # (N,) descending
        first = R * (floor + 1)
        n_max = scored_candidates(first, cand.size, view.profile.batch_limit)
        tau = R + survival[:, :floor].sum() + np.concatenate([[0.0], np.cumsum(cand[:n_max])])
        table = self._table(view)
        cost = (table.step_time_range(first, n_max + 1, 0.0, R) if table is not None
                else view.profile.step_time_range(first, n_max + 1, view.kv_tokens, R))
        return int(np.argmax(tau / cost))

    def __call__(self, view: SchedulingView) -> np.ndarray:
        R, g = view.num_requests, view.gamma
        if R == 0 or g == 0:
            return np.zeros(R, dtype=np.int64)
        if not self.enabled:
            return np.full(R, g, dtype=np.int64)                 # no table: refuse to trim
        floor = min(self.min_len, g)
        k = view.capacity if view.capacity is not None else NO_OLD_VIEW
        if k == NO_OLD_VIEW:
            k = self._budget(np.ones((R, g)), view)
        live = view.survival()[:, floor:]
        live = np.where(live >= self.eps, live, -1.0)            # below eps: never admitted
        a_sorted, r_sorted = ranked_candidates(live)
        k = min(int(k), int((a_sorted >= 0).sum()))
        out = floor + lengths_from_top(k, r_sorted, R)
        self._record(view, out)
        return out
