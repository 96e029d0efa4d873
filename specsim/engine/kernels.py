"""Compiled hot loops of the engine step (numba): the latent draws and outcomes, the DSpark scan, emission.

Each kernel computes, bit for bit, what a reference numpy expression elsewhere computes (named in its
docstring; ``tests/test_kernels.py`` checks the equality on random inputs). They remove the per-call overhead
of some twenty small numpy operations per step, which dominates at the tens to hundreds of running requests a
replica holds (benchmarks/bench_engine.py), and DSpark's scan merges the sorted rows instead of sorting every
candidate. scipy's own ``ndtri`` and ``expit`` are called through their Cython C entry points, so the numbers
are scipy's.

Compiled on first use (about 2 s for all of them) and cached beside this file (``cache=True``; numba falls
back to its user cache directory where that is not writable).
"""

from __future__ import annotations

import ctypes

import llvmlite.binding
import numba
import numpy as np
from numba.extending import get_cython_function_address


def _scipy_double_fn(name: str, symbol: str):
    """scipy.special's C function ``name`` for doubles, as a numba external function (cacheable), called as
    ``f(x, 0)``: Cython's C signature is ``double (double, int __pyx_skip_dispatch)``. A fused function's
    double version is found by that signature, which its capsule names.

    Raises:
        ImportError: this scipy has no such double function.
    """
    import scipy.special.cython_special as cs

    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
    for candidate in [name] + [f"__pyx_fuse_{i}{name}" for i in range(4)]:
        capsule = cs.__pyx_capi__.get(candidate)
        if capsule is not None and get_name(capsule).startswith(b"double (double, int"):
            llvmlite.binding.add_symbol(symbol, get_cython_function_address("scipy.special.cython_special",
                                                                            candidate))
            return numba.types.ExternalFunction(symbol, numba.types.float64(numba.types.float64,
                                                                            numba.types.intc))
    raise ImportError(f"scipy.special.cython_special has no double version of {name}")


_ndtri = _scipy_double_fn("ndtri", "specsim_scipy_ndtri")
_expit = _scipy_double_fn("expit", "specsim_scipy_expit")

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)
_INV_2_32 = 2.0 ** -32


@numba.njit(cache=True, inline="always")
def _mix(x):
    x ^= x >> np.uint64(30)
    x *= _M1
    x ^= x >> np.uint64(27)
    x *= _M2
    x ^= x >> np.uint64(31)
    return x


@numba.njit(cache=True, inline="always")
def _normal(u, quantiles, table_n, tail):
    t = u * table_n
    i = np.intp(t)
    if i < tail or i >= table_n - tail:
        return _ndtri(u, 0)
    lo = quantiles[i]
    return lo + (t - i) * (quantiles[i + 1] - lo)


@numba.njit(cache=True, inline="always")
def _uniforms(key, anchor, u):
    """Fill ``u`` (2 * words,) with the stream's uniforms at ``anchor`` (``specsim.engine.draws.uniforms``' layout)."""
    words = u.size // 2
    start = np.uint64(anchor) * np.uint64(words)
    for w in range(words):
        x = _mix((start + np.uint64(w)) * _GOLDEN + key)
        u[2 * w] = (np.float64(x >> np.uint64(32)) + 0.5) * _INV_2_32
        u[2 * w + 1] = (np.float64(x & _LOW32) + 0.5) * _INV_2_32


@numba.njit(cache=True)
def latent_outcomes(keys, anchors, base, scale, lin_scale, lin_shift, low_ratio, inv_t, quantiles, tail,
                    gamma):
    """(conf_raw, conf, accept), each (R, gamma), of requests ``keys`` (R,) uint64 at ``anchors`` (R,) int64.

    The same numbers as ``LatentRows.rows`` (SplitMix64 uniforms, tabulated normal quantiles) followed by
    ``AcceptanceModel.confidences`` and ``AcceptanceModel.accepted``, for the first ``gamma`` of the model's
    G drafts (``base`` is (R, G); ``scale`` (2G + 1,) [sigma_step, sigma_token x G, sigma_conf x G];
    ``lin_scale``, ``lin_shift``, ``inv_t`` (G,); ``low_ratio`` the model's ``conf_low_ratio``).
    """
    R, G = base.shape
    table_n = quantiles.size - 1
    conf_raw, conf = np.empty((R, gamma)), np.empty((R, gamma))
    accept = np.empty((R, gamma), np.bool_)
    u = np.empty(2 * ((3 * G + 2) // 2))                    # columns e, eps x G, noise x G, u x G (+ 1 spare)
    for r in range(R):
        _uniforms(keys[r], anchors[r], u)
        e = _normal(u[0], quantiles, table_n, tail) * scale[0]
        for k in range(gamma):
            logit_q = (base[r, k] + _normal(u[1 + k], quantiles, table_n, tail) * scale[1 + k]) + e
            lin = logit_q + _normal(u[1 + G + k], quantiles, table_n, tail) * scale[1 + G + k]
            if low_ratio != 1.0:
                lin += (low_ratio - 1.0) * min(lin, 0.0)
            lin *= lin_scale[k]
            lin += lin_shift[k]
            conf_raw[r, k] = _expit(lin, 0)
            conf[r, k] = _expit(lin * inv_t[k], 0)
            accept[r, k] = u[1 + 2 * G + k] < _expit(logit_q, 0)
    return conf_raw, conf, accept


@numba.njit(cache=True, inline="always")
def _before(a, b, head, pos):
    """Candidate order: higher survival first; ties: lower position, then lower request (a stable sort of the
    position-major flat array, as ``policies.dspark.ranked_candidates``)."""
    if head[a] != head[b]:
        return head[a] > head[b]
    if pos[a] != pos[b]:
        return pos[a] < pos[b]
    return a < b


@numba.njit(cache=True, inline="always")
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


@numba.njit(cache=True, inline="always")
def _row_heap(conf, pos):
    """(heap, head): a heap of the R rows ordered by their first candidates (``head``, (R,) survivals)."""
    R = conf.shape[0]
    head = conf[:, 0].copy()
    heap = np.arange(R)
    for i in range(R // 2 - 1, -1, -1):
        _sift_down(heap, R, i, head, pos)
    return heap, head


@numba.njit(cache=True, inline="always")
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


@numba.njit(cache=True)
def dspark_greedy(conf, step_times, num_requests):
    """Verify lengths (R,) int64 of DSpark's Algorithm 1 on calibrated confidences ``conf`` (R, gamma), with
    ``step_times`` (N + 1,) the step times, seconds, at B = R .. R + N (N: the candidates the profile scores).

    As ``policies.dspark``'s ``ranked_candidates`` + ``theta_curve`` + first-no-gain scan: tau_n = (sum of the
    n best survivals) + R, Theta_n = tau_n / step_time(R + n), stop before the first admission that does not
    raise Theta. Survival falls along a row, so the ranking is a heap merge of the R rows, O((R + n) log R).
    """
    R, G = conf.shape
    lengths = np.zeros(R, np.int64)                  # also each row's next position
    n_max = min(R * G, step_times.size - 1)
    if n_max <= 0:
        return lengths
    heap, head = _row_heap(conf, lengths)            # head: survival of each row's next candidate
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


@numba.njit(cache=True)
def emit_decode(decode, verify_len, accept, now_s, last_emit_s, num_generated, decode_steps, drafts_verified,
                drafts_accepted, output_tokens):
    """Reveal a step's outcomes for the decoding slots ``decode`` (R,): returns ``(accepted, gaps_s,
    num_generated, decode_steps, drafts_verified, drafts_accepted, num_accepted, num_finished)``.

    ``accepted`` (R,): each request's leading run of accepted drafts within its verify length,
    ``(accept & (arange(gamma) < verify_len[:, None])).cumprod(axis=1).sum(axis=1)``, and its sum
    ``num_accepted``; ``gaps_s`` (R,): ``now_s - last_emit_s[decode]``, seconds (``last_emit_s[decode]`` is
    set to ``now_s`` in place). The four counters come back as new (S,) arrays (the inputs, which views may
    hold, are not written), each decoding slot adding accepted + 1 tokens, one step, its verify length and its
    accepted drafts; ``num_finished`` counts the decoding slots that reached their ``output_tokens``.
    """
    R = decode.size
    accepted, gaps_s = np.empty(R, np.int64), np.empty(R)
    generated, steps = num_generated.copy(), decode_steps.copy()
    verified, acc = drafts_verified.copy(), drafts_accepted.copy()
    total = finished = 0
    for i in range(R):
        s, n = decode[i], 0
        while n < verify_len[i] and accept[i, n]:
            n += 1
        accepted[i] = n
        total += n
        gaps_s[i] = now_s - last_emit_s[s]
        last_emit_s[s] = now_s
        generated[s], steps[s] = generated[s] + n + 1, steps[s] + 1
        verified[s], acc[s] = verified[s] + verify_len[i], acc[s] + n
        finished += generated[s] >= output_tokens[s]
    return accepted, gaps_s, generated, steps, verified, acc, total, finished


@numba.njit(cache=True)
def clip_to_output(verify_len, decode, output_tokens, num_generated):
    """A policy's verify lengths (R,) int64 clipped so that no request verifies past its output: returns
    ``(clipped, total, num_clipped, low, high)``.

    ``clipped`` is ``minimum(verify_len, output_tokens[decode] - num_generated[decode] - 1)`` (a new array),
    ``total`` its sum, ``num_clipped`` how many were lowered, ``low`` / ``high`` the unclipped lengths' min and max (0 when
    R = 0), for the engine's range check.
    """
    R = verify_len.size
    clipped = np.empty(R, np.int64)
    num_clipped = 0
    total = 0
    low = verify_len[0] if R else 0
    high = low
    for i in range(R):
        v = verify_len[i]
        low, high = min(low, v), max(high, v)
        s = decode[i]
        lmax = output_tokens[s] - num_generated[s] - 1
        if v > lmax:
            v = lmax
            num_clipped += 1
        clipped[i] = v
        total += v
    return clipped, total, num_clipped, low, high


@numba.njit(cache=True)
def decoding_slots(prefill_left, prompt_tokens, num_generated):
    """``(decode, kv_tokens)``: the slots with no prefill left, ``flatnonzero(prefill_left == 0)`` (R,) int64,
    and the KV tokens their step reads, ``sum(prompt_tokens + num_generated)`` over them (an int)."""
    n = prefill_left.size
    decode = np.empty(n, np.int64)
    R = 0
    kv_tokens = 0
    for s in range(n):
        if prefill_left[s] == 0:
            decode[R] = s
            R += 1
            kv_tokens += prompt_tokens[s] + num_generated[s]
    return decode[:R].copy(), kv_tokens
