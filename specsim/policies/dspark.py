"""DSpark's hardware-aware prefix schedulers (PAPER.md sections 5.1 and 5.2; DESIGN.md formulas).

Every candidate (r, j) -- draft j of request r -- is scored by its survival a_{r,j} = prod_{i<=j} c_{r,i}
(calibrated confidences). Admitting the top-n candidates gives B = R + n verified tokens and an expected
tau = R + (sum of the n largest survivals) emitted tokens; the objective is Theta = tau * SPS(B).
Survival falls along a request's prefix, so any top-n set (ties broken by position) is prefix-closed.
"""

from __future__ import annotations

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView
from specsim.twins import twin


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


def _greedy_lengths_numpy(conf: np.ndarray, step_times: np.ndarray, num_requests: int) -> np.ndarray:
    """Verify lengths (R,) int64 of the greedy scan with early stop (PAPER.md 5.1, Algorithm 1).

    Args:
        conf: (R, gamma) calibrated confidences.
        step_times: (N + 1,) the step times, seconds, the scan scores at B = R .. R + N (N: the candidates
            the profile scores): the profile's own (``early_stop="paper"``) or their lower convex minorant
            (``"hull"``, :func:`lower_convex_minorant`).
        num_requests: R.

    Rank every candidate by survival, tau_n = R + (sum of the n best survivals), Theta_n = tau_n /
    step_times[n]; admit candidates in rank order and stop before the first one that does not raise Theta.
    """
    a_sorted, r_sorted = ranked_candidates(conf.cumprod(axis=1))
    n_max = min(a_sorted.size, step_times.size - 1)
    tau = np.empty(n_max + 1)                                           # (N+1,) expected tokens
    tau[0] = 0.0
    a_sorted[:n_max].cumsum(out=tau[1:])
    tau += num_requests
    theta = tau * (1.0 / step_times[: n_max + 1])                       # (N+1,) tokens per second
    no_gain = theta[1:] <= theta[:-1]
    n = int(no_gain.argmax()) if no_gain.any() else n_max               # early stop: first admission without gain
    return lengths_from_top(n, r_sorted, num_requests)


def _lower_convex_minorant_numpy(y: np.ndarray) -> np.ndarray:
    """The lower convex minorant (lower convex hull) of the points (n, y[n]), n = 0..N, at every n: (N+1,).

    Its vertices by Andrew's monotone chain (a middle point leaves when it lies strictly above the chord of its
    neighbours, so a straight run keeps its points), then linear interpolation between consecutive vertices;
    at a vertex the value is y itself, so a convex (or linear) curve is its own minorant.
    """
    vertices: list[int] = []
    values = y.tolist()
    for n, yn in enumerate(values):
        while len(vertices) >= 2:
            i0, i1 = vertices[-2], vertices[-1]
            if (values[i1] - values[i0]) * (n - i0) <= (yn - values[i0]) * (i1 - i0):
                break                                                   # i1 lies on or below the chord
            vertices.pop()
        vertices.append(n)
    v = np.array(vertices)
    if v.size < 2:
        return y.copy()
    n = np.arange(y.size)
    seg = np.minimum(np.searchsorted(v, n, side="right") - 1, v.size - 2)  # (N+1,) segment [a, b) holding n
    a, b = v[seg], v[seg + 1]
    hull = y[a] + (y[b] - y[a]) * ((n - a) / (b - a))
    hull[v] = y[v]
    return hull


def _lower_convex_minorant_loop(y):
    size = y.size
    hull = y.copy()
    vertices = np.empty(size, np.int64)
    m = 0
    for n in range(size):
        while m >= 2:
            i0, i1 = vertices[m - 2], vertices[m - 1]
            if (y[i1] - y[i0]) * (n - i0) <= (y[n] - y[i0]) * (i1 - i0):
                break
            m -= 1
        vertices[m] = n
        m += 1
    for s in range(m - 1):
        a, b = vertices[s], vertices[s + 1]
        for n in range(a + 1, b):
            hull[n] = y[a] + (y[b] - y[a]) * ((n - a) / (b - a))
    return hull


def _before(a, b, head, pos):
    """Candidate order: higher survival first; ties: lower position, then lower request (a stable sort of the
    position-major flat array, as :func:`ranked_candidates`)."""
    if head[a] != head[b]:
        return head[a] > head[b]
    if pos[a] != pos[b]:
        return pos[a] < pos[b]
    return a < b


def _sift_down(heap, size, i, head, pos):
    item = heap[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and _before(heap[child + 1], heap[child], head, pos):
            child += 1
        if not _before(heap[child], item, head, pos):
            break
        heap[i] = heap[child]
        i = child
    heap[i] = item


def _admit_top(heap, size, head, conf, pos):
    """Admit the top row's candidate: the row moves on to its next draft, or leaves the heap after its last.
    Returns the heap's new size."""
    top = heap[0]
    pos[top] += 1
    if pos[top] < conf.shape[1]:
        head[top] *= conf[top, pos[top]]
    else:
        size -= 1
        heap[0] = heap[size]
    _sift_down(heap, size, 0, head, pos)
    return size


def _greedy_lengths_loop(conf, step_times, num_requests):
    """The scan as a heap merge of the R rows (survival falls along a row), O((R + n) log R)."""
    R, G = conf.shape
    lengths = np.zeros(R, np.int64)                  # also each row's next position
    n_max = min(R * G, step_times.size - 1)
    if n_max <= 0:
        return lengths
    head = conf[:, 0].copy()                         # survival of each row's next candidate
    heap = np.arange(R)
    for i in range(R // 2 - 1, -1, -1):
        _sift_down(heap, R, i, head, lengths)
    size, total = R, 0.0
    theta = num_requests * (1.0 / step_times[0])
    for n in range(n_max):
        total += head[heap[0]]
        nxt = (total + num_requests) * (1.0 / step_times[n + 1])
        if nxt <= theta:
            break
        theta = nxt
        size = _admit_top(heap, size, head, conf, lengths)
    return lengths


greedy_lengths = twin(_greedy_lengths_numpy, _greedy_lengths_loop, helpers=(_before, _sift_down, _admit_top))
lower_convex_minorant = twin(_lower_convex_minorant_numpy, _lower_convex_minorant_loop)

EARLY_STOP_RULES = ("hull", "paper")


class DSpark(PolicyBase):
    """``dspark``: the paper's Algorithm 1 (synchronous, greedy with early stop), its early stop run on the
    lower convex minorant of the step-time curve by default.

    Start from B = R and tau = R (each request's own token), admit candidates in survival order adding
    a_{r,j} to tau, and stop at the first admission that does not raise Theta = tau / T(B) (PAPER.md 5.1).
    T(B) is the step time at B = R .. R + N including the step's constant terms (per-request and KV-read
    seconds, known before drafting). The early stop keeps the decision for a request's draft j independent
    of its later drafts' confidences, which keeps speculative decoding lossless (PAPER.md Appendix A).

    Args:
        early_stop: ``"hull"`` (default): the scan's T is the lower convex minorant of the step-time curve
            over the batch sizes this step may reach, plus the step's constant terms (the minorant of the
            table is kept per (R, N); adding a constant keeps it the minorant of T), so a sawtooth rise of
            the table (PAPER.md 5.2's "hardware cliffs") cannot stop it in a local optimum; the step is
            still charged the true T.
            ``"paper"``: Algorithm 1 as printed, on the raw curve. docs/policies.md ("dspark") says why both
            stay lossless.
        diagnose: count, per step, whether the early stop ended below the global best of the true Theta on
            the same view (:meth:`diagnostics`; off by default: the hot path pays nothing).

    Raises:
        ValueError: an unknown ``early_stop`` rule.
    """

    name = "dspark"
    fits_zos = False  # sizes the batch from this step's confidences
    knobs = {"early_stop": "hull", "diagnose": False}

    def __init__(self, early_stop: str = "hull", diagnose: bool = False) -> None:
        if early_stop not in EARLY_STOP_RULES:
            raise ValueError(f"early_stop: expected one of {EARLY_STOP_RULES}, got {early_stop!r}")
        self.early_stop, self.diagnose = early_stop, bool(diagnose)
        self._steps = self._below = 0
        self._shortfall = 0.0
        self._hull_profile, self._hulls = None, {}        # (R, N) -> the table's minorant at B = R .. R+N

    def __call__(self, view: SchedulingView) -> np.ndarray:
        R = view.num_requests
        if R == 0 or view.gamma == 0:
            return np.zeros(R, dtype=np.int64)
        profile = view.profile
        n_max = scored_candidates(R, R * view.gamma, profile.batch_limit)
        if self.early_stop == "hull":                   # the constant terms: per-request and KV-read seconds
            constant = profile.step_time(R, view.kv_tokens, R) - profile.step_time(R)
            scan_times = self._table_hull(profile, R, n_max) + constant                # (N+1,) B = R .. R+N
        else:
            scan_times = profile.step_time_range(R, n_max + 1, view.kv_tokens, R)     # (N+1,) B = R .. R+N
        lengths = greedy_lengths(view.conf, scan_times, R)
        if self.diagnose:
            self._count(view.conf, profile.step_time_range(R, n_max + 1, view.kv_tokens, R), int(lengths.sum()))
        return lengths

    def _table_hull(self, profile, R: int, n_max: int) -> np.ndarray:
        """(N+1,) the lower convex minorant of the profile's step times at B = R .. R+N without the constant
        terms (a function of R and N only: computed once per pair and kept while the profile is the same)."""
        if profile is not self._hull_profile:
            self._hull_profile, self._hulls = profile, {}
        hull = self._hulls.get((R, n_max))
        if hull is None:
            hull = self._hulls[R, n_max] = lower_convex_minorant(profile.step_time_range(R, n_max + 1))
        return hull

    def _count(self, conf: np.ndarray, step_times: np.ndarray, n: int) -> None:
        """Record whether admitting ``n`` candidates reached the global best of the true Theta."""
        a_sorted, _ = ranked_candidates(conf.cumprod(axis=1))
        theta = theta_curve(conf.shape[0], a_sorted, lambda b: 1.0 / step_times[b - conf.shape[0]],
                            max_batch_tokens=conf.shape[0] + step_times.size - 1)    # (N+1,)
        best = float(theta.max())
        self._steps += 1
        self._below += bool(theta[n] < best * (1.0 - 1e-12))
        self._shortfall += 1.0 - float(theta[n]) / best

    def diagnostics(self) -> dict | None:
        """With ``diagnose``: ``{"early_stop": rule, "steps": scheduled steps, "below_global_best": steps whose
        early stop ended below max_n Theta_n, "theta_shortfall_sum": sum over steps of 1 - Theta(chosen) /
        max_n Theta_n}``, Theta on the true step times of the same view (a run's summary sums them over
        replicas as ``policy_diagnostics``); None without ``diagnose``."""
        if not self.diagnose:
            return None
        return {"early_stop": self.early_stop, "steps": self._steps, "below_global_best": self._below,
                "theta_shortfall_sum": self._shortfall}


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
        running = np.sort(running_ids)        # sorted-ids membership: np.isin was 24% of the loop (issue 25)
        at = np.minimum(np.searchsorted(running, old_view.request_ids), running.size - 1)
        still = running[at] == old_view.request_ids
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
