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

from array import array

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView
from specsim.policies.carry import Carry
from specsim.policies.cost_table import VLLM_PROFILE_CONTEXT, TableError, build_table, check_profile_context
from specsim.policies.dspark import cumprod_rows, rise_bound, scored_candidates
from specsim.policies.engine_kernels import (best_prefix, candidate_stats, every_gain_by_range, first_candidate,
                                             lengths_at_sorted, live_beyond_floor, load_engine_kernels, match_rows,
                                             piece_factors, proof_factor, range_stats, stale_rows, survival_live)
from specsim.policies.sorting import sort_values

#: ``capacity`` before any old view exists: size the budget in ``__call__`` from confidences of 1.0.
NO_OLD_VIEW = 2**31 - 1


def stale_survival(old_view: SchedulingView | None, running_ids: np.ndarray, gamma: int) -> np.ndarray:
    """(R, gamma) survivals the host holds for the running requests: each request's row from the old view,
    1.0 for a request the old view does not hold (vLLM resets a joining request's stale row to 1.0,
    ``AdaptiveVerificationManager.add_request``). Rows are in ``running_ids`` order."""
    running_ids = np.asarray(running_ids)
    if old_view is None or old_view.num_requests == 0 or gamma == 0:
        return np.ones((running_ids.size, gamma))
    rows = match_rows(np.array(old_view.request_ids, dtype=np.int64), np.array(running_ids, dtype=np.int64))
    return stale_rows(old_view.conf, rows, int(gamma))


def _cost_args(table, view: SchedulingView, first: int, count: int, num_requests: int, draft: bool) -> tuple:
    """(base, first, add) of :func:`best_prefix` at B = first .. first + count for ``num_requests`` requests: the
    scheduler's table, or (no table) the exact profile at the view's KV read with speculation's own overhead (which
    a step that drafted pays whatever it verifies, as DSpark's T counts it), plus the view's drafter seconds
    when ``draft``."""
    if table is not None:
        return table.verify_s, first, table.draft_s(num_requests)
    cost = (view.profile.step_time_range(first, count + 1, view.kv_tokens, num_requests)
            + view.profile.speculation_s(num_requests, num_requests * view.gamma))
    return (cost + view.draft_time_s(view.gamma) if draft else cost), 0, 0.0


class _Tabled(PolicyBase):
    """A policy that reads its engine's scheduler table and reports its error against the charged cost."""

    cost_table = "exact"
    profile_context = VLLM_PROFILE_CONTEXT

    def _table(self, view: SchedulingView):
        key = (id(view.profile), view.gamma)
        if getattr(self, "_key", None) != key:
            load_engine_kernels()
            self._key, self._rises = key, {}
            self.table = build_table(self.cost_table, view.profile, view.gamma, view.drafter_cost,
                                     int(self.profile_context))
        return self.table

    def _search(self, values: np.ndarray | None, count: int, offset: float, view: SchedulingView, first: int,
                num_requests: int, draft: bool, a_asc: np.ndarray | None = None) -> int:
        """The budget: the first n in 0..``count`` maximising (``offset`` + the n largest candidates) / cost(first
        + n), candidates the entries >= 0 of ``values``. Without a sort when :func:`every_gain`'s proof (from
        :func:`candidate_stats`, the same arithmetic), or the same proof piece by piece
        (:func:`every_gain_by_range`), shows Theta rises at every n on the table (the rise bounds kept per
        (first, count)); else one sort (:func:`specsim.policies.sorting.sort_values`, ``np.sort`` bit for bit) and
        :func:`best_prefix`. ``a_asc``: the entries of ``values``
        already sorted ascending (the carry, :mod:`specsim.policies.carry`; ``values`` is then not read, and the
        sum is taken as :func:`every_gain_sorted` takes it)."""
        table = self._table(view)
        base, at, add = _cost_args(table, view, first, count, num_requests, draft)
        if table is not None and self._proven(values, a_asc, offset, base, first, count, add):
            return count
        if a_asc is None:
            a_asc = sort_values(values)                                       # np.sort(values, axis=None)
        return best_prefix(a_asc, count, offset, base, at, add)

    def _proven(self, values: np.ndarray | None, a_asc: np.ndarray | None, offset: float, base: np.ndarray,
                first: int, count: int, add: float) -> bool:
        """Whether Theta provably rises at every n (the budget is then every candidate, as the global search
        finds): :func:`every_gain`'s proof (the same arithmetic; :func:`every_gain_sorted`'s sum when carried),
        or the same proof piece by piece (:func:`every_gain_by_range`). Both fail at once when the smallest
        candidate does not clear ``offset`` times their factors (no sum taken). The table's rise bounds are kept
        per (first, count), the pieces' factors per (first, count, add)."""
        got = self._rises.get((first, count))
        if got is None:
            seg = base[np.minimum(first + np.arange(count + 1), base.size - 1)]          # (count+1,) seconds
            got = self._rises[first, count] = ((float(np.diff(seg).max()) if count else 0.0, float(seg.min()),
                                                float(seg.max())), range_stats(seg), {})
        stats, pieces, factors = got
        if add not in factors:                   # (single factor, pieces' factors, the largest of those)
            single, by_piece = float(proof_factor(rise_bound(stats, add))), piece_factors(pieces, add)
            factors[add] = (single, by_piece, float(by_piece.max()) if by_piece.size else single)
        factor, by_piece, most = factors[add]
        least = min(factor, most)                # a candidate at or below offset * it disproves both
        if a_asc is not None:
            start = first_candidate(a_asc)
            if start == a_asc.size:                                  # no candidate: nothing to disprove
                return bool(np.inf > offset * factor)
            low = float(a_asc[start])
            if not low > offset * least:
                return False                                          # fails before any sum
            cand = (low, float(a_asc[-1]), float(a_asc[start:].sum()))
        else:
            cand = candidate_stats(values)                            # (smallest, largest, sum) in one pass
        if cand[0] > (offset + cand[2]) * factor:
            return True
        return bool(cand[0] > offset * most) and every_gain_by_range(cand, offset, pieces[0], by_piece)

    def _record(self, view: SchedulingView, lengths: np.ndarray) -> None:
        """Note this step's chosen B (and what its charged cost depends on) for ``table_error``, which adds
        |table - charged| / charged when read: the same arithmetic in the same step order, kept off the
        decision's path (issue 25). Per step three floats (B, KV read, R), and the table, profile, drafter
        and gamma once per change of them."""
        table = self._table(view)
        if table is None or view.num_requests == 0:
            return
        R = view.num_requests
        notes = self.__dict__.get("_notes")
        if notes is None:
            notes = self._notes = ([], array("d"))
        last = notes[0][-1][1] if notes[0] else None
        if (last is None or last[0] is not table or last[1] is not view.profile or last[2] is not view.drafter_cost
                or last[3] != view.gamma):
            notes[0].append((len(notes[1]), (table, view.profile, view.drafter_cost, view.gamma)))   # (first, context)
        notes[1].extend((float(R + lengths.sum()), view.kv_tokens, R))

    @property
    def table_error(self) -> TableError | None:
        """The mean relative error of the table against the charged cost over the steps so far
        (:class:`specsim.policies.cost_table.TableError`), or None before any step with a table."""
        notes = self.__dict__.get("_notes")
        if notes is not None and notes[1]:
            err = self.__dict__.setdefault("_table_error", TableError())
            contexts, values = notes
            ends = [start for start, _ in contexts[1:]] + [len(values)]
            for (start, (table, profile, drafter, gamma)), end in zip(contexts, ends):
                for i in range(start, end, 3):
                    b, kv, R = int(values[i]), values[i + 1], int(values[i + 2])
                    exact = profile.step_time(b, kv, R)
                    if table.draft_s_per_request is not None and drafter is not None and gamma > 0:
                        exact += drafter.draft_time_s(R, gamma, profile, kv)        # SchedulingView.draft_time_s
                    err.add(abs(table.step_time(b, 0.0, R) - exact) / exact)
            self._notes = None
        return self.__dict__.get("_table_error")


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
        self._carry = Carry(lambda survival: survival)           # every survival is a candidate

    def capacity(self, old_view: SchedulingView | None, running_ids: np.ndarray, num_running: int) -> int:
        """n*, the drafts verified this step, from the view one step old (class docstring): from the survivals
        the last ``__call__`` sorted when that is this view (:mod:`specsim.policies.carry`), else from scratch."""
        if old_view is None:
            return NO_OLD_VIEW
        carried = self._carry.stale(old_view, running_ids)
        if carried is not None:
            return self._budget(carried[0], old_view, carried[1])
        return self._budget(stale_survival(old_view, running_ids, old_view.gamma), old_view)

    def _budget(self, survival: np.ndarray, view: SchedulingView, a_asc: np.ndarray | None = None) -> int:
        R = survival.shape[0]
        n_max = scored_candidates(R, survival.size, view.profile.batch_limit)
        return self._search(survival, n_max, float(R), view, R, R, True, a_asc)

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
            survival, n = cumprod_rows(view.conf), min(int(k), R * g)                # (R, g)
            a_asc = sort_values(survival) if 0 < n < R * g else None             # also the next budget's
            out = lengths_at_sorted(survival, a_asc, n)                           # the k best live survivals
            self._carry.keep(view, survival, a_asc)
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
        self._carry = Carry(self._live)

    def _live(self, survival: np.ndarray) -> np.ndarray:
        """(K, gamma - floor) the candidates of K rows of survivals: beyond the floor, -1.0 below eps."""
        return live_beyond_floor(survival, min(self.min_len, survival.shape[1]), self.eps)[0]

    def capacity(self, old_view: SchedulingView | None, running_ids: np.ndarray, num_running: int) -> int:
        """The budget beyond the floor from the view one step old (class docstring): from the candidates the
        last ``__call__`` sorted when that is this view (:mod:`specsim.policies.carry`), else from scratch."""
        if old_view is None:
            return NO_OLD_VIEW
        carried = self._carry.stale(old_view, running_ids)
        if carried is not None:
            return self._budget(carried[0], old_view, carried[1])
        return self._budget(stale_survival(old_view, running_ids, old_view.gamma), old_view)

    def _budget(self, survival: np.ndarray, view: SchedulingView, a_asc: np.ndarray | None = None) -> int:
        """The budget from (R, g) stale survivals; ``a_asc``: their candidates sorted, when carried."""
        R, g = survival.shape
        floor = min(self.min_len, g)
        if a_asc is None:
            live, count = live_beyond_floor(survival, floor, self.eps)   # (R, g - floor), -1.0 below eps
        else:
            live, count = None, a_asc.size - first_candidate(a_asc)
        first = R * (floor + 1)
        n_max = scored_candidates(first, count, view.profile.batch_limit)
        return self._search(live, n_max, float(R + survival[:, :floor].sum()), view, first, R, False, a_asc)

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
        survival, live, count = survival_live(view.conf, floor, self.eps)       # (R, g); below eps: never admitted
        n = min(int(k), count)
        a_asc = sort_values(live) if 0 < n < live.size else None                # also the next budget's
        out = floor + lengths_at_sorted(live, a_asc, n)
        self._carry.keep(view, survival, a_asc)
        self._record(view, out)
        return out
