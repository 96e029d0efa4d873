"""DSpark's hardware-aware prefix schedulers (PAPER.md sections 5.1 and 5.2; DESIGN.md formulas).

Every candidate (r, j) -- draft j of request r -- is scored by its survival a_{r,j} = prod_{i<=j} c_{r,i}
(calibrated confidences). Admitting the top-n candidates gives B = R + n verified tokens and an expected
tau = R + (sum of the n largest survivals) emitted tokens; the objective is Theta = tau * SPS(B).
Survival falls along a request's prefix, so any top-n set (ties broken by position) is prefix-closed.
"""

from __future__ import annotations

import functools

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView


@functools.cache
def _kernels():
    """specsim.engine.kernels, imported on first use (listing the policies does not load numba and scipy)."""
    from specsim.engine import kernels
    return kernels


def ranked_candidates(survival: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank all candidates by survival, highest first; ties keep position order, then request order.

    Args:
        survival: (R, gamma) survival a_{r,j}.

    Returns:
        (a_sorted, r_sorted): (R*gamma,) survivals in admission order and their request indices.
    """
    R = survival.shape[0]
    flat = survival.T.ravel()                                          # (g*R,) position-major: j, then r
    order = (-flat).argsort(kind="stable")                             # ties keep (j, r) order
    return flat[order], order % max(R, 1)


def scored_candidates(num_requests: int, num_candidates: int, batch_limit: int | None) -> int:
    """N, how many of the ranked candidates a scheduler scores: all of them, or as many as keep R + N within
    the profile's ``batch_limit`` (None: no limit)."""
    if batch_limit is None:
        return num_candidates
    return max(0, min(num_candidates, batch_limit - num_requests))


def theta_curve(num_requests: int, a_sorted: np.ndarray, view, max_batch_tokens: int | None = None) -> np.ndarray:
    """Theta_n = (R + sum of the n best survivals) * SPS(R + n), for n = 0..N. Shape (N+1,).

    Args:
        num_requests: R, the anchor slots.
        a_sorted: (N,) survivals in admission order.
        view: the scheduling view (its profile and this step's KV read give SPS), or a function B -> SPS
            together with ``max_batch_tokens``.

    N is capped so that R + N stays within the profile's measured range, unless the profile extrapolates
    (``extrapolate="linear"``: every candidate is scored; :attr:`StepTimeProfile.batch_limit`). A run
    reports the steps the cap stopped (:func:`specsim.hardware.profile.range_report`).
    """
    if max_batch_tokens is None:
        max_batch_tokens = view.profile.batch_limit
    n_max = scored_candidates(num_requests, a_sorted.size, max_batch_tokens)
    tau = np.empty(n_max + 1)
    tau[0] = 0.0
    a_sorted[:n_max].cumsum(out=tau[1:])
    tau += num_requests
    if callable(view) and not hasattr(view, "sps_range"):
        return tau * view(num_requests + np.arange(n_max + 1))
    return tau * view.sps_range(num_requests, n_max + 1)


def lengths_from_top(n: int, r_sorted: np.ndarray, num_requests: int) -> np.ndarray:
    """Verify lengths (R,) when the first ``n`` ranked candidates are admitted."""
    return np.bincount(r_sorted[:n], minlength=num_requests).astype(np.int64)


class DSpark(PolicyBase):
    """``dspark``: the paper's Algorithm 1 (synchronous, greedy with early stop).

    Start from B = R and tau = R (each request's own token), admit candidates in survival order adding
    a_{r,j} to tau, and stop at the first admission that does not raise Theta = tau * SPS(B).
    Early stop keeps the decision for a request's draft j independent of draft j+1's confidence, which
    keeps speculative decoding lossless (PAPER.md Appendix A, section 5.1).
    """

    name = "dspark"
    fits_zos = False  # sizes the batch from this step's confidences

    def __call__(self, view: SchedulingView) -> np.ndarray:
        R = view.num_requests
        if R == 0 or view.gamma == 0:
            return np.zeros(R, dtype=np.int64)
        n_max = scored_candidates(R, R * view.gamma, view.profile.batch_limit)
        step_times = view.profile.step_time_range(R, n_max + 1, view.kv_tokens, R)   # (N+1,) B = R .. R+N
        # ranked_candidates + theta_curve + the first-no-gain scan, in one compiled pass (same numbers)
        return _kernels().dspark_greedy(view.conf, step_times, R)


class DSparkAsync(PolicyBase):
    """``dspark-async``: the zero-overhead-scheduling variant (PAPER.md section 5.2).

    Phase 1, ``capacity``: from the view of two steps earlier, pick K (drafts admitted beyond the R_t
    anchor slots) by a global search without early stop, maximising
    (R_t + sum of the K largest step-(t-2) survivals of requests still running) * SPS(R_t + K).
    K = 0 while no view two steps old exists.
    Phase 2, ``__call__``: admit the K highest current survivals (K capped at the current candidates).
    Because K is fixed from old data, the batch size is known before this step's confidences exist.
    """

    name = "dspark-async"
    fits_zos = True

    def capacity(self, old_view: SchedulingView | None, running_ids: np.ndarray, num_running: int) -> int:
        """K, the drafts admitted this step beyond the ``num_running`` anchors, from the view of step t-2."""
        if old_view is None or old_view.gamma == 0 or old_view.num_requests == 0:
            return 0
        still = np.isin(old_view.request_ids, running_ids)
        a_sorted, _ = ranked_candidates(old_view.survival()[still])
        # Scored with the old view's SPS (same replica; its KV read is the best causal estimate).
        theta = theta_curve(num_running, a_sorted, old_view)
        return int(np.argmax(theta))                                       # global search, first max

    def __call__(self, view: SchedulingView) -> np.ndarray:
        R = view.num_requests
        if R == 0 or view.gamma == 0:
            return np.zeros(R, dtype=np.int64)
        k = min(int(view.capacity or 0), R * view.gamma)
        _, r_sorted = ranked_candidates(view.survival())
        return lengths_from_top(k, r_sorted, R)
