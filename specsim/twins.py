"""Compiled twins of specsim's array algorithms, and the one place that chooses between a twin and its definition.

The definitions are numpy functions in the modules a reader looks in: the latent draws in
:mod:`specsim.engine.draws` (SplitMix64 uniforms, the tabulated normal quantile, Wichura's AS241 in the
tails), the confidence formula and the logistic in :mod:`specsim.acceptance.model`, DSpark's scan and the
lower convex minorant in :mod:`specsim.policies.dspark`, the sort of the survival values in
:mod:`specsim.policies.sorting`, and the step's emission, output clip and decoding slots in
:mod:`specsim.engine.kernels`. Beside each sits its *loop twin*: the same arithmetic written as scalar
loops, which numba compiles. :func:`twin` is the one place that picks which one a call runs:

* the compiled loop twin when numba imports and compiles it (about 2 s for all of them on first use, then
  cached beside the source files, ``cache=True``; numba falls back to its user cache directory where that is
  not writable). numba keys that cache by the twin's own source file only: after editing a helper that lives
  in another module (``confidence_logit`` and ``logistic`` in acceptance/model.py, used by draws.py's twin;
  the bucket sort of policies/sorting.py, used by dspark.py's scan), touch the twin's file or delete its
  ``__pycache__/*.nbi``; the bit-equality tests catch a stale twin;
* the numpy definition when ``SPECSIM_NO_NUMBA=1`` is set, when numba is not installed, or when numba fails to
  compile the twin (a warning names it). The suite passes both ways.

Both forms give the same numbers bit for bit (``tests/test_kernels.py`` checks each pair on random inputs):
every transcendental function is one C-library call per element in both (``math.exp`` / ``math.log`` in the
loops, scipy's ``expit`` ufunc, whose element function is ``1 / (1 + exp(-x))``, in numpy; never numpy's
SIMD ``exp`` / ``log``, which differ from the C library in the last bit on AVX-512 machines), and each
reduction runs in the same order. The compiled twins remove the per-call overhead of some twenty small numpy
operations per step, which dominates at the tens to hundreds of running requests a replica holds
(benchmarks/bench_engine.py), and DSpark's scan sorts survival values once at most, without a stable sort of
every candidate (docs/policies.md, "The compiled twin").

A utility below every layer (docs/architecture.md): the engine and the policies both make their twins here.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable

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
