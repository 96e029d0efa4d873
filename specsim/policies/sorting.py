"""The sort of a step's survival values, a numpy definition with its compiled loop twin (:func:`specsim.twins.twin`
chooses; the two are equal bit for bit, tests/test_kernels.py).

The long scans of the schedulers (DSpark's :func:`specsim.policies.dspark.scan_lengths`) read every survival in value
order, and only the values matter (equal survivals add the same to tau whichever candidate they belong to); so do the
budgets and allocations of ``vllm-adaptive`` and ``trtllm-confidence`` (:mod:`specsim.policies.engines`, whose sorted
candidates are also carried to the next step's budget, :mod:`specsim.policies.carry`). The definition is ``np.sort``;
the twin is a bucket sort: the n values map to 2n buckets by a monotone linear map of their range, are counted and
placed bucket by bucket, and each bucket is sorted where it holds more than one value (two to four by a branch-free
network of min / max exchanges, a few more by insertion, numba's quicksort beyond :data:`BUCKET_SORTED` unless they
are one value repeated, so no input is quadratic). Its cost is a few passes over the values whatever the machine's
vector units: numpy's vectorised quicksort was 3-5 ns per value on the AVX-512 machines of issue 25 but 16-26 ns per
value at 1,000-8,000 values on the project's AMD EPYC VM, where the bucket sort takes 5-7 ns (benchmarks/README.md,
2026-12-07).
"""

from __future__ import annotations

import math

import numpy as np

from specsim.twins import twin

#: Buckets of more values than this are sorted by numba's quicksort, not by insertion.
BUCKET_SORTED = 32


def _sort_values_numpy(values: np.ndarray) -> np.ndarray:
    """(n,) the entries of ``values`` (any shape) in ascending order: ``np.sort(values, axis=None)``."""
    return np.sort(values, axis=None)


def _sort_bucket(out, start, end):
    """Sort ``out[start:end]`` in place: one bucket's values (few: most buckets hold 0 to 4)."""
    m = end - start
    if m == 2:
        a, b = out[start], out[start + 1]
        out[start], out[start + 1] = min(a, b), max(a, b)
    elif m == 3:
        a, b, c = out[start], out[start + 1], out[start + 2]
        a, b = min(a, b), max(a, b)
        b, c = min(b, c), max(b, c)
        a, b = min(a, b), max(a, b)
        out[start], out[start + 1], out[start + 2] = a, b, c
    elif m == 4:
        a, b, c, d = out[start], out[start + 1], out[start + 2], out[start + 3]
        a, b = min(a, b), max(a, b)
        c, d = min(c, d), max(c, d)
        a, c = min(a, c), max(a, c)
        b, d = min(b, d), max(b, d)
        b, c = min(b, c), max(b, c)
        out[start], out[start + 1], out[start + 2], out[start + 3] = a, b, c, d
    elif m > BUCKET_SORTED:
        first, same = out[start], True
        for i in range(start + 1, end):                   # one value repeated (trtllm-confidence's -1.0 below
            v = out[i]                                    # eps): numba's quicksort would take n log n on it
            if v != first or math.copysign(1.0, v) != math.copysign(1.0, first):    # the same bits (0.0, -0.0)
                same = False
                break
        if not same:
            out[start:end] = np.sort(out[start:end])
    elif m > 4:
        for i in range(start + 1, end):                   # insertion
            v = out[i]
            j = i - 1
            while j >= start and out[j] > v:
                out[j + 1] = out[j]
                j -= 1
            out[j + 1] = v


def _sort_values_loop(values):
    a = values.ravel()
    n = a.size
    lo = hi = a[0] if n else 0.0
    finite = True
    for i in range(n):
        v = a[i]
        lo, hi = min(lo, v), max(hi, v)
        finite &= v - v == 0.0                       # False for an infinity or a NaN
    if not finite or not hi > lo:                    # (all equal, or none: sorted as they are)
        return np.sort(a) if not finite else a.copy()
    nb = 2 * n
    scale = (nb - 1) / (hi - lo)                     # (v - lo) * scale: monotone in v, in [0, nb - 1]
    start = np.zeros(nb + 1, np.int64)
    for i in range(n):
        start[min(int((a[i] - lo) * scale), nb - 1) + 1] += 1
    for b in range(nb):
        start[b + 1] += start[b]
    out, fill = np.empty(n), start[:nb].copy()
    for i in range(n):
        b = min(int((a[i] - lo) * scale), nb - 1)
        out[fill[b]] = a[i]
        fill[b] += 1
    for b in range(nb):
        if start[b + 1] - start[b] > 1:
            _sort_bucket(out, start[b], start[b + 1])
    return out


sort_values = twin(_sort_values_numpy, _sort_values_loop, helpers=(_sort_bucket,))
