"""Reference (yardstick) policies: ``dspark-global`` and ``oracle``. Never defaults, never lossless.

Both declare a ``view_kind`` other than ``"causal"``, so the engine hands them their own view type
(:class:`~specsim.policies.base.ReferenceView`, :class:`~specsim.policies.base.OracleView`); a causal
policy never receives either. They exist to measure what causal policies leave on the table:

* ``dspark-global``: Algorithm 1's greedy ranking with a *global* search over every admission count n
  instead of the early stop (DSpark paper §3.2.2). On a jagged SPS(B) it escapes the local optimum where early
  stop halts, but it reads draft j+1's confidence before deciding on draft j, which biases the output
  distribution (DSpark paper Appendix A): a bound on what early stop costs, not a deployable policy.
* ``oracle``: clairvoyant. Its view includes this step's hidden outcomes, so it knows each request's
  accepted prefix A_r. Rule: for every batch size B = R + n, n = 0..R*gamma, the most tokens a step can
  emit is R + min(n, sum_r A_r) (an accepted draft emits one token, a rejected one none); it picks the
  n maximising the *realised* rate (R + min(n, sum_r A_r)) * SPS(R + n) by a global search (first
  argmax). It admits accepted drafts first, shallowest depth first (every request's first draft, then
  every second draft, ...; slot order within a depth), and pads with rejected drafts only when a larger
  B is faster (a non-monotone, jagged step-time table). This is the per-step maximum of emitted tokens x
  SPS(B) over all verify lengths. It is charged no host overhead (``fits_zos`` True). It is myopic (one
  step at a time), so it bounds causal policies per step; over a whole run it is the yardstick, checked
  empirically against every causal policy in tests/test_reference_policies.py.
"""

from __future__ import annotations

import numpy as np

from specsim.policies.base import OracleView, PolicyBase, SchedulingView
from specsim.policies.dspark import lengths_from_top, ranked_candidates, theta_curve


class DSparkGlobal(PolicyBase):
    """``dspark-global``: synchronous DSpark with a global search over n (no early stop).

    Candidates are ranked by calibrated survival a_{r,j} exactly as in ``dspark``; Theta_n =
    (R + sum of the n best survivals) * SPS(R + n) is evaluated for every n = 0..N and the first argmax
    is taken (DSpark paper §3.2.2, "global search"). Needs this step's confidences, so ZOS cannot hide the
    host overhead (``fits_zos`` False), the same charge as ``dspark``.
    """

    name = "dspark-global"
    fits_zos = False
    view_kind = "reference"

    def __call__(self, view: SchedulingView) -> np.ndarray:
        R = view.num_requests
        if R == 0 or view.gamma == 0:
            return np.zeros(R, dtype=np.int64)
        a_sorted, r_sorted = ranked_candidates(view.survival())
        theta = theta_curve(R, a_sorted, view.drafting_sps, view.profile.max_batch_tokens)   # (N+1,)
        return lengths_from_top(int(np.argmax(theta)), r_sorted, R)


def accepted_prefix(accept: np.ndarray) -> np.ndarray:
    """Leading run of accepted drafts per request: (R, gamma) bool -> (R,) int64 A_r."""
    return np.cumprod(accept, axis=1).sum(axis=1).astype(np.int64)


class Oracle(PolicyBase):
    """``oracle``: clairvoyant upper bound (module docstring states the rule).

    Args (of ``__call__``): an :class:`OracleView` with ``accept`` (R, gamma).

    Raises:
        TypeError: handed a view without outcomes (the engine builds views from ``view_kind``).
    """

    name = "oracle"
    fits_zos = True
    reads_confidence = False
    view_kind = "oracle"

    def __call__(self, view: SchedulingView) -> np.ndarray:
        if not isinstance(view, OracleView) or view.accept is None:
            raise TypeError("the oracle policy needs an OracleView with this step's outcomes")
        R, g = view.num_requests, view.gamma
        if R == 0 or g == 0:
            return np.zeros(R, dtype=np.int64)
        prefix = accepted_prefix(view.accept)                                # (R,) A_r
        depth = np.arange(1, g + 1)
        accepted = depth[None, :] <= prefix[:, None]                         # (R, g) accepted drafts
        slot = np.broadcast_to(np.arange(R)[None, :], (g, R))               # (g, R) depth-major
        # accepted drafts depth-major, then the rejected ones depth-major: prefix-closed per request
        r_order = np.concatenate([slot[accepted.T], slot[~accepted.T]])      # (R*g,)
        n_max = min(R * g, view.profile.max_batch_tokens - R)
        n = np.arange(n_max + 1)
        realised = (R + np.minimum(n, prefix.sum())) * view.drafting_sps(R + n)   # (n_max+1,) tokens/s
        return lengths_from_top(int(np.argmax(realised)), r_order, R)
