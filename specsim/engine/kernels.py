"""Compiled twins of the engine step's array algorithms, chosen here, and the step's own array passes.

The definitions are numpy functions in the modules a reader looks in: the latent draws in
:mod:`specsim.engine.draws` (SplitMix64 uniforms, the tabulated normal quantile, Wichura's AS241 in the
tails), the confidence formula and the logistic in :mod:`specsim.acceptance.model`, DSpark's scan and the
lower convex minorant in :mod:`specsim.policies.dspark`, and the step's emission, output clip and decoding
slots below. Beside each sits its *loop twin*: the same arithmetic written as scalar loops, which numba
compiles. :func:`twin` is the one place that picks which one a call runs:

* the compiled loop twin when numba imports and compiles it (about 2 s for all of them on first use, then
  cached beside the source files, ``cache=True``; numba falls back to its user cache directory where that is
  not writable). numba keys that cache by the twin's own source file only: after editing a helper that lives
  in another module (``confidence_logit`` and ``logistic`` in acceptance/model.py, used by draws.py's twin),
  touch the twin's file or delete its ``__pycache__/*.nbi``; the bit-equality tests catch a stale twin;
* the numpy definition when ``SPECSIM_NO_NUMBA=1`` is set, when numba is not installed, or when numba fails to
  compile the twin (a warning names it). The suite passes both ways.

Both forms give the same numbers bit for bit (``tests/test_kernels.py`` checks each pair on random inputs):
every transcendental function is one C-library call per element in both (``math.exp`` / ``math.log`` in the
loops, scipy's ``expit`` ufunc, whose element function is ``1 / (1 + exp(-x))``, in numpy; never numpy's
SIMD ``exp`` / ``log``, which differ from the C library in the last bit on AVX-512 machines), and each
reduction runs in the same order. The compiled twins remove the per-call overhead of some twenty small numpy
operations per step, which dominates at the tens to hundreds of running requests a replica holds
(benchmarks/bench_engine.py), and DSpark's twin merges the sorted rows instead of sorting every candidate.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable

import numpy as np

#: Set to "1" to run the numpy definitions instead of the compiled twins.
NO_NUMBA_ENV = "SPECSIM_NO_NUMBA"

_registered: set = set()          # helpers already made callable from compiled code
_compiled: dict = {}              # loop form -> its numba dispatcher


def _numba():
    """The numba module, or None when ``SPECSIM_NO_NUMBA=1`` or numba is not installed."""
    if os.environ.get(NO_NUMBA_ENV) == "1":
        return None
    try:
        import numba
    except ImportError:
        return None
    return numba


def _compile(numba, loop_form: Callable, helpers: tuple) -> Callable:
    """``loop_form`` compiled by numba, its ``helpers`` made callable (and inlined) from compiled code."""
    from numba.extending import register_jitable

    for h in helpers:
        if h not in _registered:
            register_jitable(h)           # returns h itself: Python callers are unchanged (LLVM inlines it)
            _registered.add(h)
    if loop_form not in _compiled:
        _compiled[loop_form] = numba.njit(cache=True)(loop_form)
    return _compiled[loop_form]


def _choose(numpy_form: Callable, loop_form: Callable, helpers: tuple, args: tuple) -> tuple[Callable, object]:
    """(the form to run from now on, its result on ``args``): the compiled twin, or the numpy form when numba
    is unavailable or raises a compile error (with a warning)."""
    numba = _numba()
    if numba is None:
        return numpy_form, numpy_form(*args)
    fn = _compile(numba, loop_form, helpers)
    try:
        return fn, fn(*args)
    except numba.core.errors.NumbaError as e:
        warnings.warn(f"specsim: numba could not compile {loop_form.__qualname__} ({type(e).__name__}); "
                      f"running the numpy form {numpy_form.__qualname__}")
        return numpy_form, numpy_form(*args)


def twin(numpy_form: Callable, loop_form: Callable, helpers: tuple = ()) -> Callable:
    """A function that runs ``loop_form`` compiled by numba, or ``numpy_form`` (module docstring).

    Args:
        numpy_form: the definition (numpy).
        loop_form: the same arithmetic as scalar loops (numba-compilable), bit-equal to ``numpy_form``.
        helpers: plain Python functions ``loop_form`` calls (shared with ``numpy_form`` where they are the
            formula itself, e.g. SplitMix64's finaliser); registered with numba on first use.

    The choice is made on the first call (so importing a module with twins loads neither numba nor LLVM)
    and kept; errors of the inputs are not caught. The returned function carries ``numpy_form``,
    ``loop_form`` and ``helpers`` as attributes (for the bit-equality tests).
    """
    chosen: list[Callable] = []

    def call(*args):
        if chosen:
            return chosen[0](*args)
        fn, out = _choose(numpy_form, loop_form, helpers, args)
        chosen.append(fn)
        return out

    call.__doc__, call.__name__ = numpy_form.__doc__, numpy_form.__name__.lstrip("_").removesuffix("_numpy")
    call.numpy_form, call.loop_form, call.helpers = numpy_form, loop_form, helpers
    return call


def compiled() -> bool:
    """Whether the twins run compiled in this process (numba present and not disabled)."""
    return _numba() is not None


def compiled_twin(fn: Callable) -> Callable:
    """The compiled loop twin of a function made by :func:`twin` (for the bit-equality tests).

    Raises:
        RuntimeError: numba is not available or disabled (``SPECSIM_NO_NUMBA=1``).
    """
    numba = _numba()
    if numba is None:
        raise RuntimeError(f"numba is not available or {NO_NUMBA_ENV}=1")
    return _compile(numba, fn.loop_form, fn.helpers)


# ------------------------------------------------------------------------ the step's own array passes

def _emit_decode_numpy(decode, verify_len, accept, now_s, last_emit_s, num_generated, decode_steps,
                       drafts_verified, drafts_accepted, output_tokens):
    """Reveal a step's outcomes for the decoding slots ``decode`` (R,): returns ``(accepted, gaps_s,
    num_generated, decode_steps, drafts_verified, drafts_accepted, num_accepted, num_finished)``.

    ``accepted`` (R,) int64: each request's leading run of accepted drafts within its verify length, and its
    sum ``num_accepted``; ``gaps_s`` (R,): ``now_s - last_emit_s[decode]``, seconds (``last_emit_s[decode]``
    is set to ``now_s`` in place). The four (S,) counters come back as new arrays (the inputs, which views
    may hold, are not written), each decoding slot adding accepted + 1 tokens (the target's own token), one
    step, its verify length and its accepted drafts; ``num_finished`` counts the decoding slots that reached
    their ``output_tokens``.
    """
    gamma = accept.shape[1]
    within = accept & (np.arange(gamma)[None, :] < verify_len[:, None])            # (R, gamma)
    accepted = within.cumprod(axis=1).sum(axis=1).astype(np.int64)                  # (R,) leading run
    gaps_s = now_s - last_emit_s[decode]
    last_emit_s[decode] = now_s
    generated, steps = num_generated.copy(), decode_steps.copy()
    verified, acc = drafts_verified.copy(), drafts_accepted.copy()
    generated[decode] += accepted + 1
    steps[decode] += 1
    verified[decode] += verify_len
    acc[decode] += accepted
    num_finished = int((generated[decode] >= output_tokens[decode]).sum())
    return accepted, gaps_s, generated, steps, verified, acc, int(accepted.sum()), num_finished


def _emit_decode_loop(decode, verify_len, accept, now_s, last_emit_s, num_generated, decode_steps,
                      drafts_verified, drafts_accepted, output_tokens):
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


def _clip_to_output_numpy(verify_len, decode, output_tokens, num_generated):
    """A policy's verify lengths (R,) clipped so that no request verifies past its output: returns
    ``(clipped, total, num_clipped, low, high)``.

    ``clipped`` (R,) int64 is ``minimum(verify_len, output_tokens[decode] - num_generated[decode] - 1)`` (a
    new array), ``total`` its sum, ``num_clipped`` how many were lowered, ``low`` / ``high`` the unclipped
    lengths' min and max (0 when R = 0), for the engine's range check.
    """
    room = output_tokens[decode] - num_generated[decode] - 1                          # (R,) drafts left
    clipped = np.minimum(verify_len, room).astype(np.int64)
    low, high = (int(verify_len.min()), int(verify_len.max())) if verify_len.size else (0, 0)
    return clipped, int(clipped.sum()), int((verify_len > room).sum()), low, high


def _clip_to_output_loop(verify_len, decode, output_tokens, num_generated):
    R = verify_len.size
    clipped = np.empty(R, np.int64)
    num_clipped = total = 0
    low = verify_len[0] if R else 0
    high = low
    for i in range(R):
        v = verify_len[i]
        low, high = min(low, v), max(high, v)
        s = decode[i]
        room = output_tokens[s] - num_generated[s] - 1
        if v > room:
            v = room
            num_clipped += 1
        clipped[i] = v
        total += v
    return clipped, total, num_clipped, low, high


def _decoding_slots_numpy(prefill_left, prompt_tokens, num_generated):
    """``(decode, kv_tokens)``: the slots with no prefill left, (R,) int64, and the KV tokens their step
    reads, ``sum(prompt_tokens + num_generated)`` over them (an int)."""
    decode = np.flatnonzero(prefill_left == 0).astype(np.int64)
    return decode, int((prompt_tokens[decode] + num_generated[decode]).sum())


def _decoding_slots_loop(prefill_left, prompt_tokens, num_generated):
    n = prefill_left.size
    decode = np.empty(n, np.int64)
    R = kv_tokens = 0
    for s in range(n):
        if prefill_left[s] == 0:
            decode[R] = s
            R += 1
            kv_tokens += prompt_tokens[s] + num_generated[s]
    return decode[:R].copy(), kv_tokens


emit_decode = twin(_emit_decode_numpy, _emit_decode_loop)
clip_to_output = twin(_clip_to_output_numpy, _clip_to_output_loop)
decoding_slots = twin(_decoding_slots_numpy, _decoding_slots_loop)
