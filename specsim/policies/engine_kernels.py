"""The compiled pieces of the engines' confidence schedulers (``vllm-adaptive``, ``trtllm-confidence``,
:mod:`specsim.policies.engines`): each a numpy definition and its loop twin (:mod:`specsim.twins`), bit-equal
(tests/test_engine_decision.py).

* the stale rows: :func:`match_rows` (each running request's row in the old view, by a hashed id) and
  :func:`stale_rows` (the host's survivals from the old view's confidences);
* the budget: :func:`every_gain` (a proof that Theta rises at every step, so no sort is needed), the same
  proof piece by piece (:func:`candidate_stats`, :func:`every_gain_by_range`) and :func:`best_prefix` (the
  global argmax over the sorted candidates);
* the allocation: :func:`live_beyond_floor` (trtllm-confidence's candidates) and :func:`lengths_at_sorted`;
* the carry (issue 25, :mod:`specsim.policies.carry`): :func:`drop_and_join`, last step's sorted candidates
  less the finished requests' plus the joining requests' ones.
"""

from __future__ import annotations

import numpy as np

from specsim.policies.dspark import column_total, load_scan_kernels, threshold_lengths
from specsim.policies.sorting import sort_values
from specsim.twins import twin


def _match_rows_numpy(old_ids, ids):
    """(R,) int64: the row of each of ``ids`` in ``old_ids`` (its last row if repeated), -1 where absent."""
    if old_ids.size == 0:
        return np.full(ids.size, -1, np.int64)
    order = np.argsort(old_ids, kind="stable")
    at = np.maximum(np.searchsorted(old_ids[order], ids, side="right") - 1, 0)
    return np.where(old_ids[order[at]] == ids, order[at], -1).astype(np.int64)


#: Fibonacci hashing's multiplier, 2**64 / golden ratio, as a signed 64-bit int (wrapping products spread the ids).
_GOLDEN = 0x9E3779B97F4A7C15 - 2**64


def _match_rows_loop(old_ids, ids):
    size = 1
    while size < 2 * old_ids.size + 2:
        size *= 2
    keys, vals = np.empty(size, np.int64), np.full(size, -1, np.int64)   # open addressing, linear probing
    for i in range(old_ids.size):
        h = (old_ids[i] * _GOLDEN) & (size - 1)
        while vals[h] >= 0 and keys[h] != old_ids[i]:
            h = (h + 1) & (size - 1)
        keys[h], vals[h] = old_ids[i], i                                 # a repeated id keeps its last row
    rows = np.full(ids.size, -1, np.int64)
    for i in range(ids.size):
        h = (ids[i] * _GOLDEN) & (size - 1)
        while vals[h] >= 0:
            if keys[h] == ids[i]:
                rows[i] = vals[h]
                break
            h = (h + 1) & (size - 1)
    return rows


def _stale_rows_numpy(old_conf, rows, gamma):
    """(R, gamma) survivals: row i the cumulative product of ``old_conf[rows[i], :g]`` (g = min(gamma, the old
    gamma)) followed by zeros (drafts the old step did not make), or ones where ``rows[i] < 0``."""
    out = np.ones((rows.size, gamma))
    g = min(gamma, old_conf.shape[1])
    have = rows >= 0
    out[have, :g] = old_conf.cumprod(axis=1)[rows[have], :g]
    out[have, g:] = 0.0
    return out


def _stale_rows_loop(old_conf, rows, gamma):
    out = np.ones((rows.size, gamma))
    g = min(gamma, old_conf.shape[1])
    for i in range(rows.size):
        if rows[i] >= 0:
            acc = 1.0
            for j in range(gamma):
                acc = acc * old_conf[rows[i], j] if j < g else 0.0
                out[i, j] = acc
    return out


def _best_prefix_numpy(a_asc, count, offset, base, first, add):
    """n in 0..``count`` maximising Theta_n = (``offset`` + the n largest of ``a_asc``, summed largest first) /
    cost_n, the first maximum (a global search); cost_n = ``base[min(first + n, len(base) - 1)] + add``.

    Args:
        a_asc: (M,) values sorted ascending (M >= count). offset: tau at n = 0 (tokens).
        base: a step-time table (seconds; a :class:`SchedulerTable`'s ``verify_s`` read at B = first + n)
            or the (count + 1,) costs themselves (``first`` = 0, ``add`` = 0.0).
        add: seconds added to every entry (the table's drafter seconds at R requests).
    """
    tau = offset + np.concatenate([[0.0], np.cumsum(a_asc[::-1][:count])])          # (count+1,)
    cost = base[np.minimum(first + np.arange(count + 1), base.size - 1)] + add
    return int(np.argmax(tau / cost))


def _best_prefix_loop(a_asc, count, offset, base, first, add):
    size, top = a_asc.size, base.size - 1
    total, best_n = 0.0, 0
    best = (offset + total) / (base[min(first, top)] + add)
    for n in range(1, count + 1):
        total += a_asc[size - n]
        theta = (offset + total) / (base[min(first + n, top)] + add)
        if theta > best:
            best, best_n = theta, n
    return best_n


def _live_numpy(survival, floor, eps):
    """(R, gamma - floor) the survivals beyond the first ``floor`` drafts, -1.0 where below ``eps`` (never
    admitted), and how many are not."""
    live = np.where(survival[:, floor:] >= eps, survival[:, floor:], -1.0)
    return live, int((live >= 0).sum())


def _live_loop(survival, floor, eps):
    R, G = survival.shape
    live = np.empty((R, G - floor))
    count = 0
    for r in range(R):
        for j in range(floor, G):
            keep = survival[r, j] >= eps
            live[r, j - floor] = survival[r, j] if keep else -1.0
            count += keep
    return live, count


def _survival_live_numpy(conf, floor, eps):
    """(survival (R, gamma) = ``conf.cumprod(axis=1)``, then :func:`live_beyond_floor` of it): trtllm-confidence's
    allocation inputs in one pass."""
    survival = conf.cumprod(axis=1)
    live, count = _live_numpy(survival, floor, eps)
    return survival, live, count


def _survival_live_loop(conf, floor, eps):
    R, G = conf.shape
    survival, live = np.empty((R, G)), np.empty((R, G - floor))
    count = 0
    for r in range(R):
        acc = 1.0
        for j in range(G):
            acc *= conf[r, j]
            survival[r, j] = acc
            if j >= floor:
                keep = acc >= eps
                live[r, j - floor] = acc if keep else -1.0
                count += keep
    return survival, live, count


def _every_gain_numpy(values, offset, ratio):
    """Whether every step of the global search provably raises Theta (its first maximum is then the last n):
    the smallest candidate (the entries >= 0 of ``values``; negative ones are not candidates) exceeds
    (``offset`` + the candidates' sum) * (ratio * (1 + 1e-6) + 1e-9), ``ratio`` an upper bound on cost[n+1] /
    cost[n] - 1 (the proof of :func:`specsim.policies.dspark.head_scan`, tau starting at ``offset``)."""
    cand = values >= 0
    total = column_total(np.where(cand, values, 0.0))               # adding 0.0 changes no sum
    return bool(values[cand].min(initial=np.inf) > (offset + total) * proof_factor(ratio))


def _every_gain_loop(values, offset, ratio):
    R, G = values.shape
    cols, lows = np.zeros(G), np.full(G, np.inf)
    for r in range(R):
        for j in range(G):
            v = values[r, j]
            if v >= 0:
                cols[j] += v
                lows[j] = min(lows[j], v)
    total, low = 0.0, np.inf
    for j in range(G):
        total += cols[j]
        low = min(low, lows[j])
    return low > (offset + total) * (max(ratio, 0.0) * (1.0 + 1e-6) + 1e-9)


def _drop_and_join_numpy(a_asc, gone, ones):
    """(sorted, ok): the values ``a_asc`` (M,) sorted ascending, less one entry equal to each of ``gone`` (K,),
    plus ``ones`` entries 1.0, sorted ascending, shape (M - K + ones,); ``ok`` False (and an empty array) when
    some value of ``gone`` is not among ``a_asc`` (counted with repeats; NaN never is). Among equal values the
    first ones in ``a_asc`` go (only -0.0 and 0.0 are equal and differ, and no sum or comparison of the
    schedulers tells them apart)."""
    if gone.size > a_asc.size:
        return np.empty(0), False
    g = np.sort(gone)                                                          # (K,)
    idx = np.searchsorted(a_asc, g, "left") + (np.arange(g.size) - np.searchsorted(g, g, "left"))
    if g.size and (idx[-1] >= a_asc.size or not (a_asc[np.minimum(idx, a_asc.size - 1)] == g).all()):
        return np.empty(0), False
    kept = np.delete(a_asc, idx)                                               # (M - K,)
    return np.insert(kept, np.searchsorted(kept, 1.0, "right"), np.ones(ones)), True


def _drop_and_join_loop(a_asc, gone, ones):
    # each value of ``gone`` found by a binary search (its k-th repeat at the k-th equal entry), then the kept
    # stretches between them and the ones copied as slices
    if gone.size > a_asc.size:
        return np.empty(0), False
    g = np.sort(gone)
    idx = np.empty(g.size, np.int64)
    for i in range(g.size):
        idx[i] = idx[i - 1] + 1 if i > 0 and g[i] == g[i - 1] else np.searchsorted(a_asc, g[i])
        if idx[i] >= a_asc.size or a_asc[idx[i]] != g[i]:
            return np.empty(0), False
    kept = np.empty(a_asc.size - g.size)
    k = start = 0
    for i in range(g.size):
        kept[k:k + idx[i] - start] = a_asc[start:idx[i]]
        k += idx[i] - start
        start = idx[i] + 1
    kept[k:] = a_asc[start:]
    at = np.searchsorted(kept, 1.0, side="right")
    out = np.empty(kept.size + ones)
    out[:at] = kept[:at]
    out[at:at + ones] = 1.0
    out[at + ones:] = kept[at:]
    return out, True


def _gather_rows_numpy(survival, rows):
    """(R, gamma) rows ``survival[rows[i]]``, ones where ``rows[i] < 0``: :func:`stale_rows` of the confidences
    behind ``survival`` (the same products), read rather than multiplied again."""
    out = np.ones((rows.size, survival.shape[1]))
    have = rows >= 0
    out[have] = survival[rows[have]]
    return out


def _gather_rows_loop(survival, rows):
    out = np.ones((rows.size, survival.shape[1]))
    for i in range(rows.size):
        if rows[i] >= 0:
            out[i, :] = survival[rows[i], :]
    return out


def first_candidate(a_asc: np.ndarray) -> int:
    """The index of the first entry >= 0 of ``a_asc`` (sorted ascending): the candidates start there."""
    if a_asc.size == 0 or a_asc[0] >= 0.0:
        return 0
    return int(np.searchsorted(a_asc, 0.0, "left"))


def proof_factor(ratio):
    """The factor the proof that Theta rises multiplies tau by: an upper bound ``ratio`` on cost[n+1] / cost[n] - 1
    (a float or an array of them) with the margins six orders above the float error (:func:`every_gain`); a
    float for a float (Python arithmetic: an infinite ratio times a zero tau is NaN without a numpy warning)."""
    if np.ndim(ratio) == 0:
        return max(float(ratio), 0.0) * (1.0 + 1e-6) + 1e-9
    return np.maximum(ratio, 0.0) * (1.0 + 1e-6) + 1e-9


def every_gain_sorted(a_asc: np.ndarray, offset: float, ratio: float) -> bool:
    """:func:`every_gain` read from the same candidates sorted ascending (negative entries not candidates): the
    smallest candidate is the first entry >= 0 and their sum is taken in another order, which moves it by a
    relative 1e-12 at most (8,192 candidates) against the proof's margin of 1e-6, so the proof stays sound and
    the budget it returns (every candidate) is the global argmax's, as on the matrix."""
    start = first_candidate(a_asc)
    factor = proof_factor(ratio)
    if start == a_asc.size:                              # no candidate: the smallest is +inf, the sum 0.0
        return bool(np.inf > offset * factor)
    if not a_asc[start] > offset * factor:               # fails before the sum (candidates >= 0, offset >= 0)
        return False
    return bool(a_asc[start] > (offset + float(a_asc[start:].sum())) * factor)


def lengths_at_sorted(survival: np.ndarray, a_asc: np.ndarray | None, n: int) -> np.ndarray:
    """:func:`specsim.policies.dspark.top_lengths` (the ``n`` best candidates of ``survival`` (R, gamma) by rank)
    when its values are already sorted, ``a_asc`` = ``np.sort(survival, axis=None)``: the n-th largest is read
    there rather than found by ``np.partition`` (the same value). ``n`` is clipped to 0 .. R * gamma; ``a_asc``
    is not read (may be None) when that leaves none or every candidate."""
    size = survival.size
    n = max(0, min(int(n), size))
    if n == 0 or n == size:
        return np.full(survival.shape[0], survival.shape[1] if n else 0, dtype=np.int64)
    return threshold_lengths(survival, n, a_asc[size - n])


def _candidate_stats_numpy(values):
    """(smallest, largest, sum) of the candidates, the entries >= 0 of ``values`` (R, G): (inf, -inf, 0.0)
    when there is none; the sum in column order, as :func:`every_gain` takes it."""
    cand = values >= 0
    total = column_total(np.where(cand, values, 0.0))
    return (float(values[cand].min(initial=np.inf)), float(values[cand].max(initial=-np.inf)), float(total))


def _candidate_stats_loop(values):
    R, G = values.shape
    cols, low, high = np.zeros(G), np.inf, -np.inf
    for r in range(R):
        for j in range(G):
            v = values[r, j]
            if v >= 0:
                cols[j] += v
                low, high = min(low, v), max(high, v)
    total = 0.0
    for j in range(G):
        total += cols[j]
    return low, high, total


#: Pieces of a budget's range of steps in :func:`every_gain_by_range`.
RANGE_PIECES = 16


def range_stats(seg: np.ndarray, pieces: int = RANGE_PIECES) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                      np.ndarray]:
    """The per-piece (last step, largest rise, smallest, largest entry) of a cost segment ``seg`` (count + 1,)
    seconds (cost at n = 0 .. count, without a constant): its ``count`` steps n -> n + 1 in up to ``pieces``
    pieces of consecutive steps; ``last`` (K,) int the piece's largest n + 1, the others (K,) seconds over the
    costs its steps read (for :func:`specsim.policies.dspark.rise_bound` per piece)."""
    count = seg.size - 1
    if count < 1:
        return (np.zeros(0, np.int64),) + (np.zeros(0),) * 3
    edges = np.unique(np.linspace(0, count, min(pieces, count) + 1).astype(np.int64))
    lo, hi = edges[:-1], edges[1:]
    rise = np.maximum.reduceat(np.diff(seg), lo)
    low = np.minimum.reduceat(seg[:-1], lo)                   # T at n, the step's start
    high = np.maximum.reduceat(seg[1:], lo)                   # T at n + 1, the step's end
    return hi, rise, low, high


def piece_factors(pieces: tuple, add: float) -> np.ndarray:
    """(K,) each piece's rise bound times the proof's margins (:func:`every_gain`'s factor, per piece), for a
    cost ``add`` seconds above the segment of :func:`range_stats`."""
    last, rise, cmin, cmax = pieces
    return proof_factor((rise + 4.5e-16 * (cmax + add)) / (cmin + add))     # rise_bound per piece


def every_gain_by_range(stats: tuple[float, float, float], offset: float, last: np.ndarray,
                        factors: np.ndarray) -> bool:
    """:func:`every_gain`'s proof piece by piece: Theta rises at every step n -> n + 1 when the smallest candidate
    exceeds (``offset`` + a bound on the sum of the n largest) * (the piece's rise bound, with the proof's
    margins). The bound on that sum over a piece is the least of their total, (its last n) * the largest
    candidate and the total less (the steps after it) * the smallest: on a cost that rises fastest where the
    batch is small (a steep line), the pieces with many candidates admitted have the smallest relative rise,
    which the single bound over every step cannot use.

    Args:
        stats: (smallest, largest, sum) of the candidates (:func:`candidate_stats`).
        offset: tau at n = 0 (tokens). last: (K,) each piece's last n + 1 (:func:`range_stats`).
        factors: (K,) :func:`piece_factors`.
    """
    low, high, total = stats
    if not last.size or not np.isfinite(low):                  # no step, or no candidate: nothing to disprove
        return True
    bound = offset + np.minimum(np.minimum(total, last * high), total - (last[-1] - last) * low)
    return bool((low > bound * factors).all())


candidate_stats = twin(_candidate_stats_numpy, _candidate_stats_loop)
stale_rows = twin(_stale_rows_numpy, _stale_rows_loop)
every_gain = twin(_every_gain_numpy, _every_gain_loop)
best_prefix = twin(_best_prefix_numpy, _best_prefix_loop)
match_rows = twin(_match_rows_numpy, _match_rows_loop)
live_beyond_floor = twin(_live_numpy, _live_loop)
drop_and_join = twin(_drop_and_join_numpy, _drop_and_join_loop)
gather_rows = twin(_gather_rows_numpy, _gather_rows_loop)
survival_live = twin(_survival_live_numpy, _survival_live_loop)


def load_engine_kernels() -> None:
    """Call each compiled piece of the two confidence schedulers once on tiny inputs typed as a step's are, so
    that numba loads them at a run's first decision, before its event loop is timed (as
    :func:`specsim.policies.dspark.load_scan_kernels`). Once per process."""
    if _LOADED:
        return
    _LOADED.append(True)
    load_scan_kernels()
    conf = np.full((2, 2), 0.5)
    conf.setflags(write=False)
    ids = np.arange(2, dtype=np.int64)
    survival = stale_rows(conf, match_rows(ids, ids.copy()), 2)
    live, _ = live_beyond_floor(survival, 1, 0.0)
    survival_live(conf, 1, 0.0)
    every_gain(live, 2.0, 0.0)
    candidate_stats(live)
    a_asc = sort_values(survival)
    sort_values(live)
    best_prefix(a_asc, 2, 2.0, np.ones(5), 2, 0.0)
    drop_and_join(a_asc, survival[0], 2)
    gather_rows(survival, ids)


_LOADED: list = []
