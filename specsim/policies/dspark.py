"""DSpark's hardware-aware prefix schedulers (DSpark paper §3.2.2 and §5.2; DESIGN.md formulas).

Every candidate (r, j) -- draft j of request r -- is scored by its survival a_{r,j} = prod_{i<=j} c_{r,i}
(calibrated confidences). Admitting the top-n candidates gives B = R + n verified tokens and an expected
tau = R + (sum of the n largest survivals) emitted tokens; the objective is Theta = tau * SPS(B).
Survival falls along a request's prefix, so any top-n set (ties broken by position) is prefix-closed.
"""

from __future__ import annotations

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView
from specsim.policies.sorting import _sort_bucket, _sort_values_loop
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
    """Theta_n = (R + sum of the n best survivals) * SPS(R + n), for n = 0..N. Shape (N+1,). A view's SPS is
    :meth:`~specsim.policies.base.SchedulingView.drafting_sps` (speculation's own overhead included).

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
    if callable(view) and not hasattr(view, "drafting_sps_range"):
        return tau * view(num_requests + np.arange(n_max + 1))
    return tau * view.drafting_sps_range(num_requests, n_max + 1)


def lengths_from_top(n: int, r_sorted: np.ndarray, num_requests: int) -> np.ndarray:
    """Verify lengths (R,) when the first ``n`` ranked candidates are admitted."""
    return np.bincount(r_sorted[:n], minlength=num_requests).astype(np.int64)


def _greedy_lengths_numpy(conf: np.ndarray, step_times: np.ndarray, num_requests: int) -> np.ndarray:
    """Verify lengths (R,) int64 of the greedy scan with early stop (DSpark paper §3.2.2, Algorithm 1).

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


#: Candidates the first pass keeps in rank order while it forms the survivals (:func:`head_scan`): a scan that
#: stops within them needs no sort (issue 25; at R = 512, gamma = 16 a sort of every survival costs about as
#: much as the rest of the decision).
HEAD = 16


def _admitted_numpy(a_sorted, base_times, constant, num_requests):
    """n, how many of the ranked survivals ``a_sorted`` the scan admits on T = ``base_times + constant``: tau the
    running sum in admission order, Theta = tau * (1 / T), stop before the first admission without gain
    (the arithmetic of :func:`greedy_lengths`, over the first min(len(a_sorted), len(base_times) - 1))."""
    n_max = min(a_sorted.size, base_times.size - 1)
    tau = np.empty(n_max + 1)                                           # (n+1,) expected tokens
    tau[0] = 0.0
    a_sorted[:n_max].cumsum(out=tau[1:])
    tau += num_requests
    theta = tau * (1.0 / (base_times[: n_max + 1] + constant))          # (n+1,) tokens per second
    no_gain = theta[1:] <= theta[:-1]
    return int(no_gain.argmax()) if no_gain.any() else n_max


def _admitted_loop(a_sorted, base_times, constant, num_requests):
    count = min(a_sorted.size, base_times.size - 1)
    total = 0.0
    theta = num_requests * (1.0 / (base_times[0] + constant))
    for k in range(count):
        total += a_sorted[k]
        nxt = (total + num_requests) * (1.0 / (base_times[k + 1] + constant))
        if nxt <= theta:
            return k
        theta = nxt
    return count


def _threshold_lengths_numpy(survival, n, last):
    """Verify lengths (R,) int64 when the ``n`` best candidates by rank (:func:`ranked_candidates`) are admitted,
    ``last`` being the n-th largest survival (+inf for n = 0): every candidate above ``last``, then the
    ``n`` - (those) candidates equal to it in rank order (position, then request). The same lengths as
    ``lengths_from_top(n, ranked_candidates(survival)[1], R)`` without ordering the candidates."""
    R = survival.shape[0]
    above = survival > last                                            # (R, gamma)
    ties = np.flatnonzero((survival == last).T.ravel())[: n - int(above.sum())]   # position-major
    return above.sum(axis=1) + np.bincount(ties % max(R, 1), minlength=R)


def _threshold_lengths_loop(survival, n, last):
    R, G = survival.shape
    if n == 0 or n == R * G:                         # none or every candidate: nothing to compare
        return np.full(R, G if n else 0, np.int64)
    lengths, equal = np.zeros(R, np.int64), np.zeros(R, np.int64)
    for r in range(R):
        c = e = 0
        for j in range(G):
            c += survival[r, j] > last
            e += survival[r, j] == last
        lengths[r], equal[r] = c, e
    left = n - lengths.sum()
    if left == equal.sum():                          # every tie is admitted: no order among them needed
        return lengths + equal
    for j in range(G if left > 0 else 0):            # the first ``left`` ties at ``last``, position-major
        for r in range(R):
            if survival[r, j] == last:
                lengths[r] += 1
                left -= 1
                if left == 0:
                    return lengths
    return lengths


def column_total(values):
    """The sum of a 2-D array's entries, each column summed down its rows first (``np.add.accumulate``: one
    running sum per column, in row order), then the columns in order: the order the compiled passes add in,
    with one independent chain per column."""
    if values.size == 0:
        return 0.0
    return float(np.cumsum(np.add.accumulate(values, axis=0)[-1])[-1])


def _head_scan_numpy(conf, base_times, constant, num_requests, ratio):
    """The scan's first :data:`HEAD` candidates: ``(lengths, empty (0, 0))`` when the scan ends among them (it
    stops, or they are all it may score) or provably admits every candidate, else ``(zeros (R,), survival
    (R, gamma))`` for :func:`sorted_scan`.

    Args:
        conf: (R, gamma) calibrated confidences.
        base_times: (N + 1,) seconds at B = R .. R + N, without ``constant``: the scan's T is ``base_times +
            constant``, element by element (as :func:`greedy_lengths` is given it).
        constant: seconds added to every entry (the step's per-request and KV-read terms; 0.0 for none).
        num_requests: R.
        ratio: an upper bound on (T[n+1] - T[n]) / T[n] over the scored range, or inf (none known).

    Every candidate is admitted when N >= R * gamma and the smallest survival exceeds (R + S) * (ratio * (1 +
    1e-6) + 1e-9), S the sum of all survivals: admitting survival a after n others raises Theta iff a > (R +
    S_n) * (T[n+1] - T[n]) / T[n] (DESIGN.md's Theta), and the margins exceed the float error of each test
    (a few ulp of Theta) by six orders of magnitude, so the float scan admits each one as well.
    """
    R = conf.shape[0]
    if conf.size and base_times.size > 1 and ((conf >= 0.0) & (conf <= 1.0)).all():   # best survival: a first draft
        top = conf[:, 0].max()
        theta0, theta1 = num_requests * (1.0 / (base_times[0] + constant)), (top + num_requests) * (
            1.0 / (base_times[1] + constant))
        if theta1 <= theta0:
            return np.zeros(R, np.int64), np.empty((0, 0))                # the scan's first test fails
    survival = conf.cumprod(axis=1)
    n_max = min(survival.size, base_times.size - 1)
    if n_max == survival.size and survival.min(initial=np.inf) > (column_total(survival) + num_requests) * (
            max(ratio, 0.0) * (1.0 + 1e-6) + 1e-9):
        return np.full(R, conf.shape[1], dtype=np.int64), np.empty((0, 0))
    m = min(HEAD, n_max)
    a_head = np.sort(survival, axis=None)[::-1][:m]                    # (m,) the best survivals, in rank order
    n = _admitted_numpy(a_head, base_times, constant, num_requests)
    if n < m or m == n_max:
        return _threshold_lengths_numpy(survival, n, a_head[n - 1] if n else np.inf), np.empty((0, 0))
    return np.zeros(R, np.int64), survival


def _first_pays_not(conf, base_times, constant, num_requests):
    """Whether the scan stops before its first candidate, read from the confidences alone: with every confidence
    in [0, 1] the best survival is the largest first-draft confidence, and admitting it must not raise Theta
    (the scan's first test, the same arithmetic). Lets the common early stop skip the survivals (issue 25;
    :func:`head_scan`'s numpy form writes the same test in numpy)."""
    if conf.size == 0 or base_times.size < 2:
        return False
    in_range = True
    for c in conf.ravel():
        in_range &= (c >= 0.0) & (c <= 1.0)           # a flag, not a running max: no long dependency chain
    if not in_range:
        return False
    top = conf[:, 0].max()
    theta0 = num_requests * (1.0 / (base_times[0] + constant))
    return (top + num_requests) * (1.0 / (base_times[1] + constant)) <= theta0


def _head_scan_loop(conf, base_times, constant, num_requests, ratio):
    R, G = conf.shape
    if _first_pays_not(conf, base_times, constant, num_requests):
        return np.zeros(R, np.int64), np.empty((0, 0))
    n_max = min(R * G, base_times.size - 1)
    m = min(HEAD, n_max)
    survival = np.empty((R, G))
    head = np.full(HEAD, -np.inf)                    # the m largest survivals so far, descending
    cols, lows = np.zeros(G), np.full(G, np.inf)     # per position: independent sums and minima (no long chain)
    for r in range(R):
        acc = 1.0
        for j in range(G):
            acc *= conf[r, j]
            survival[r, j] = acc
            cols[j] += acc
            lows[j] = min(lows[j], acc)
            if m > 0 and acc > head[m - 1]:          # insert: an equal value changes no value of the head
                i = m - 1
                while i > 0 and head[i - 1] < acc:
                    head[i] = head[i - 1]
                    i -= 1
                head[i] = acc
    total, low = 0.0, np.inf
    for j in range(G):
        total += cols[j]
        low = min(low, lows[j])
    if n_max == R * G and low > (total + num_requests) * (max(ratio, 0.0) * (1.0 + 1e-6) + 1e-9):
        return np.full(R, G, np.int64), np.empty((0, 0))
    n = _admitted_loop(head[:m], base_times, constant, num_requests)
    if n < m or m == n_max:
        return _threshold_lengths_loop(survival, n, head[n - 1] if n else np.inf), np.empty((0, 0))
    return np.zeros(R, np.int64), survival


def _sorted_scan_numpy(survival, a_asc, base_times, constant, num_requests):
    """The greedy scan's verify lengths (R,) int64 from every survival sorted once (the long scans' path).

    Args:
        survival: (R, gamma) survivals a_{r,j}.
        a_asc: (R*gamma,) the same values sorted ascending (``np.sort``; only the values matter: equal
            survivals add the same to tau whichever candidate they belong to).
        base_times, constant, num_requests: as :func:`head_scan`.
    """
    a_sorted = a_asc[::-1]
    n = _admitted_numpy(a_sorted, base_times, constant, num_requests)
    return _threshold_lengths_numpy(survival, n, a_sorted[n - 1] if n else np.inf)


def _sorted_scan_loop(survival, a_asc, base_times, constant, num_requests):
    a_sorted = a_asc[::-1]
    n = _admitted_loop(a_sorted, base_times, constant, num_requests)
    return _threshold_lengths_loop(survival, n, a_sorted[n - 1] if n else np.inf)


def _scan_lengths_numpy(conf, base_times, constant, num_requests, ratio):
    """:func:`scan_lengths`' passes: :func:`head_scan`, and for a longer scan one sort of the survival values and
    :func:`sorted_scan` (in numpy: ``np.sort``; the twin: :func:`specsim.policies.sorting.sort_values`' bucket sort,
    the three in one compiled call)."""
    lengths, survival = _head_scan_numpy(conf, base_times, constant, num_requests, ratio)
    if survival.size == 0:
        return lengths
    return _sorted_scan_numpy(survival, np.sort(survival, axis=None), base_times, constant, num_requests)


def _scan_lengths_loop(conf, base_times, constant, num_requests, ratio):
    lengths, survival = _head_scan_loop(conf, base_times, constant, num_requests, ratio)
    if survival.size == 0:
        return lengths
    return _sorted_scan_loop(survival, _sort_values_loop(survival), base_times, constant, num_requests)


def _greedy_lengths_loop(conf, step_times, num_requests):
    """The scan in two passes (:func:`scan_lengths` on T = ``step_times``): the survivals with the best :data:`HEAD`
    kept in order, then (a longer scan) one sort of every survival and the scan over it in value order; ties
    resolved by :func:`threshold_lengths`."""
    return _scan_lengths_loop(conf, step_times, 0.0, num_requests, np.inf)


def _cumprod_rows_numpy(conf):
    """(R, gamma) survivals a_{r,j} = prod_{i<=j} c_{r,i}: ``conf.cumprod(axis=1)`` (``SchedulingView.survival``)."""
    return conf.cumprod(axis=1)


def _cumprod_rows_loop(conf):
    R, G = conf.shape
    out = np.empty((R, G))
    for r in range(R):
        acc = 1.0
        for j in range(G):
            acc *= conf[r, j]
            out[r, j] = acc
    return out


_SCAN = (_admitted_loop, _threshold_lengths_loop, _first_pays_not)
_PASSES = _SCAN + (_head_scan_loop, _sorted_scan_loop, _sort_values_loop, _sort_bucket, _scan_lengths_loop)
greedy_lengths = twin(_greedy_lengths_numpy, _greedy_lengths_loop, helpers=_PASSES)
scan_passes = twin(_scan_lengths_numpy, _scan_lengths_loop, helpers=_PASSES)
head_scan = twin(_head_scan_numpy, _head_scan_loop, helpers=_SCAN)
sorted_scan = twin(_sorted_scan_numpy, _sorted_scan_loop, helpers=_SCAN)
threshold_lengths = twin(_threshold_lengths_numpy, _threshold_lengths_loop)
cumprod_rows = twin(_cumprod_rows_numpy, _cumprod_rows_loop)


def top_lengths(survival: np.ndarray, n: int) -> np.ndarray:
    """Verify lengths (R,) int64 when the ``n`` best candidates of ``survival`` (R, gamma) by rank are admitted:
    ``lengths_from_top(n, ranked_candidates(survival)[1], R)``, the same lengths, by one ``np.partition`` (the
    n-th largest survival) and :func:`threshold_lengths` instead of a stable sort of every candidate (issue 25).
    ``n`` is clipped to 0 .. R * gamma."""
    size = survival.size
    n = max(0, min(int(n), size))
    if n == 0 or n == size:
        return np.full(survival.shape[0], survival.shape[1] if n else 0, dtype=np.int64)
    last = np.partition(survival, size - n, axis=None)[size - n]
    return threshold_lengths(survival, n, last)


def scan_lengths(conf: np.ndarray, base_times: np.ndarray, constant: float, num_requests: int,
                 ratio: float = np.inf) -> np.ndarray:
    """:func:`greedy_lengths` on T = ``base_times + constant``, the same lengths bit for bit, fast at any length
    of scan (issue 25: R = 512, gamma = 16 within 100 us): :func:`head_scan` (the survivals, and the scan when it
    ends within the best :data:`HEAD` candidates or provably admits them all), else one sort of every survival
    value (:func:`specsim.policies.sorting.sort_values`: a bucket sort, several times numba's own quicksort) and
    :func:`sorted_scan`; compiled, the three run in one call (:data:`scan_passes`).

    Args:
        conf: (R, gamma) calibrated confidences. base_times: (N + 1,) seconds at B = R .. R + N.
        constant: seconds added to each of them. num_requests: R.
        ratio: an upper bound on (T[n+1] - T[n]) / T[n] over B = R .. R + N (:func:`rise_bound`), or inf.
    """
    return scan_passes(conf, base_times, constant, num_requests, float(ratio))


_LOADED: list = []        # set once the scan's compiled pieces are loaded in this process


def load_scan_kernels() -> None:
    """Call each compiled piece of the scan once on tiny inputs typed as a step's are (read-only confidences, as
    views carry them), so that numba loads all of them at a run's first decision, which a run makes before its
    event loop is timed (``simulation._warm_kernels``), and not at the first long scan inside the loop (about
    0.2 s each from numba's cache, issue 25). Once per process."""
    if _LOADED:
        return
    _LOADED.append(True)
    conf = np.full((2, 1), 0.5)
    conf.setflags(write=False)
    base, survival = np.array([1.0, 1.0, 1.0]), np.full((2, 1), 0.5)
    table = base.copy()
    table.setflags(write=False)                      # a profile's own table (the paper rule) is read-only
    for times in (base, table):
        scan_passes(conf, times, 0.0, 2, np.inf)
    threshold_lengths(survival, 1, 0.5)
    cumprod_rows(conf)


def _stats(table: np.ndarray) -> tuple[float, float, float]:
    """(largest rise between neighbours, smallest, largest entry) of a step-time table, seconds."""
    return (float(np.diff(table).max()) if table.size > 1 else 0.0, float(table.min()), float(table.max()))


def rise_bound(stats: tuple[float, float, float], constant: float) -> float:
    """An upper bound on (T[n+1] - T[n]) / T[n] for T = table + ``constant`` (``constant`` >= 0 s), from the
    table's ``stats`` = (largest rise between neighbours, smallest, largest entry) in seconds: the rise plus
    two ulp of the largest T (the rounding of each sum) over the smallest T."""
    rise, low, high = stats
    return (rise + 4.5e-16 * (high + constant)) / (low + constant)


lower_convex_minorant = twin(_lower_convex_minorant_numpy, _lower_convex_minorant_loop)

EARLY_STOP_RULES = ("hull", "paper")


class DSpark(PolicyBase):
    """``dspark``: the paper's Algorithm 1 (synchronous, greedy with early stop), its early stop run on the
    lower convex minorant of the step-time curve by default.

    Start from B = R and tau = R (each request's own token), admit candidates in survival order adding
    a_{r,j} to tau, and stop at the first admission that does not raise Theta = tau / T(B) (DSpark paper §3.2.2).
    T(B) is the step time at B = R .. R + N including the step's constant terms (per-request and KV-read
    seconds, known before drafting, and speculation's own overhead, which the step pays whatever it verifies:
    :attr:`SchedulingView.speculation_s`). The early stop keeps the decision for a request's draft j independent
    of its later drafts' confidences, which keeps speculative decoding lossless (DSpark paper Appendix A).

    Args:
        early_stop: ``"hull"`` (default): the scan's T is the lower convex minorant of the step-time curve
            over the batch sizes this step may reach, plus the step's constant terms (the minorant of the
            table is kept per (R, N); adding a constant keeps it the minorant of T), so a sawtooth rise of
            the table (DSpark paper §5.2's "hardware cliffs") cannot stop it in a local optimum; the step is
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
        self._hull_profile, self._hulls = None, {}        # terms of (R, gamma) or (R, N) kept per profile (_kept)

    def __call__(self, view: SchedulingView) -> np.ndarray:
        R = view.num_requests
        if R == 0 or view.gamma == 0:
            return np.zeros(R, dtype=np.int64)
        load_scan_kernels()
        profile = view.profile
        if self.early_stop == "hull":                   # the constant terms: per-request and KV-read seconds
            n_max, spec, table_R, base, stats = self._kept(profile, ("hull", R, view.gamma),
                                                           lambda: self._hull_terms(view, R))
            constant = profile.step_time(R, view.kv_tokens, R) - table_R + spec
            ratio = rise_bound(stats, max(constant, 0.0))
        else:
            n_max = scored_candidates(R, R * view.gamma, profile.batch_limit)
            spec = view.speculation_s                   # speculation's own overhead: paid whatever is verified
            parts = getattr(profile, "step_time_parts", None)             # a scheduler table has none
            parts = None if parts is None else parts(R, n_max + 1, view.kv_tokens, R)
            if parts is None:
                constant, ratio = spec, np.inf
                base = profile.step_time_range(R, n_max + 1, view.kv_tokens, R)
            else:                                                          # the table itself, no copy
                base, constant = parts
                constant += spec
                ratio = rise_bound(self._kept(profile, ("table", R, n_max), lambda: _stats(base)), max(constant, 0.0))
        lengths = scan_lengths(view.conf, base, constant, R, ratio)
        if self.diagnose:
            self._count(view.conf, profile.step_time_range(R, n_max + 1, view.kv_tokens, R) + spec,
                        int(lengths.sum()))
        return lengths

    def _kept(self, profile, key: tuple, make):
        """``make()``, a function of the profile and ``key`` only: computed once per key and kept while the profile is
        the same."""
        if profile is not self._hull_profile:
            self._hull_profile, self._hulls = profile, {}
        got = self._hulls.get(key)
        if got is None:
            got = self._hulls[key] = make()
        return got

    def _hull_terms(self, view: SchedulingView, R: int) -> tuple:
        """The hull rule's terms of a view of R requests drafting gamma each, none of which depends on the step's
        confidences or KV read: (N, :attr:`SchedulingView.speculation_s`, the table's seconds at B = R, the (N+1,)
        lower convex minorant of the table at B = R .. R+N, its (largest rise, smallest, largest entry) for
        :func:`rise_bound`)."""
        profile = view.profile
        n_max = scored_candidates(R, R * view.gamma, profile.batch_limit)
        hull = lower_convex_minorant(profile.step_time_range(R, n_max + 1))
        return n_max, view.speculation_s, profile.step_time(R), hull, _stats(hull)

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
    """``dspark-async``: the zero-overhead-scheduling variant (DSpark paper §5.2).

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
