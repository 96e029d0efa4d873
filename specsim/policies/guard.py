"""A user's policy code that raises becomes one clear input error, naming the file and line.

Built-in policies are called directly (their errors are specsim's bugs and keep their traceback). A policy whose
code lives outside the specsim package (a ``path/to/file.py:Name`` plug-in, an entry point, a function or
class passed to :func:`specsim.simulation.simulate`) has each hook wrapped by :func:`guarded`: an exception
raised in it is re-raised as :class:`~specsim.errors.SpecsimInputError` naming the innermost frame of the
user's code (file and line), the policy and the exception, so that ``specsim run`` prints one line and a sweep
records the point as failed and goes on (docs/sweeps.md). An exception whose traceback holds no frame of user
code is re-raised unchanged.
"""

from __future__ import annotations

import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any, Callable

from specsim.errors import SpecsimInputError

_SPECSIM = str(Path(__file__).resolve().parents[1])
_LIBRARIES = tuple({str(Path(p).resolve()) for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                                    sysconfig.get_paths()["platlib"], sys.prefix, sys.base_prefix)})


def is_user_policy(policy: Any) -> bool:
    """True when ``policy``'s code (its class, or the function a FunctionPolicy wraps) is not specsim's own."""
    code = getattr(policy, "fn", None) if type(policy).__name__ == "FunctionPolicy" else type(policy)
    module = getattr(code, "__module__", None) or ""
    return not (module == "specsim" or module.startswith("specsim."))


def user_frame(tb) -> tuple[str, int] | None:
    """(file, line) of the innermost traceback frame outside specsim, the standard library and installed
    packages (code typed at ``python -c``, stdin or ``exec`` counts as the user's: ``<string>``, ``<stdin>``;
    frozen modules do not); None when there is none."""
    for frame in reversed(traceback.extract_tb(tb)):
        path = str(Path(frame.filename).resolve())
        if not (path.startswith(_SPECSIM) or path.startswith(_LIBRARIES) or frame.filename.startswith("<frozen")):
            return frame.filename, frame.lineno
    return None


def guarded(name: str, hook: str, fn: Callable | None) -> Callable | None:
    """``fn`` (a user policy's hook, or None) with its exceptions turned into :class:`SpecsimInputError` naming
    the user's file and line, the policy ``name`` and the ``hook`` (module docstring)."""
    if fn is None:
        return None

    def call(*args):
        try:
            return fn(*args)
        except SpecsimInputError:
            raise
        except Exception as e:
            where = user_frame(e.__traceback__)
            if where is None:
                raise
            raise SpecsimInputError(where[0], where[1], f"policy {name}, {hook}", "a hook that runs without raising",
                                    f"{type(e).__name__}: {e}") from e

    call.__name__ = getattr(fn, "__name__", hook)
    return call
