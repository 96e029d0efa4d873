"""On-disk cache of built acceptance models, so that a new process does not rebuild one it built before.

Building the latent model (:class:`specsim.acceptance.model.AcceptanceModel`) solves each domain's logit
offsets and fits the STS temperatures on a simulated sample: about 0.85 s per process on the README's
machine class (issue 25), repeated by every ``specsim run`` and by every sweep worker. The built model is
pure data (floats and numpy arrays), so it is pickled once under a key and loaded by later processes.

The key is a SHA-256 over everything the built model depends on: the builder's arguments (drafter, gamma,
rates, latent parameters, source, temperatures, calibration, domain weights), the source text of the modules
that compute it (``acceptance/model.py``, ``acceptance/tables.py`` and ``acceptance/calibration.py``: a code
change invalidates the entry) and the numpy and scipy versions. A loaded model is therefore the model the
builder would return, bit for bit (``tests/test_acceptance_cache.py`` checks this).

Where: ``$SPECSIM_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/specsim`` (default ``~/.cache/specsim``, the
XDG base-directory specification, https://specifications.freedesktop.org/basedir-spec/), in a
``acceptance/`` folder. ``SPECSIM_CACHE=0`` (or ``off``/``no``/``false``) turns the cache off. A file that
cannot be read or unpickled, or that holds something other than a model, is ignored and rebuilt; a folder
that cannot be written leaves the run uncached, never failed. Files are written to a temporary name and
renamed, so concurrent sweep workers never read half a file. The files are pickles: the cache folder must
be one only its user writes (as ``~/.cache`` is).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

_OFF = {"0", "off", "no", "false"}
_SOURCES = ("model.py", "tables.py", "calibration.py")   # the modules whose code decides the built model's numbers


def cache_dir() -> Path | None:
    """The acceptance-model cache folder, or None when ``SPECSIM_CACHE`` turns the cache off."""
    if os.environ.get("SPECSIM_CACHE", "").strip().lower() in _OFF:
        return None
    root = os.environ.get("SPECSIM_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(xdg) / "specsim")
    return Path(root) / "acceptance"


@lru_cache(maxsize=1)
def _code_digest() -> bytes:
    import numpy
    import scipy

    h = hashlib.sha256(f"numpy {numpy.__version__} scipy {scipy.__version__}".encode())
    here = Path(__file__).resolve().parent
    for name in _SOURCES:
        h.update((here / name).read_bytes())
    return h.digest()


def cache_key(*inputs: Any) -> str:
    """Hex SHA-256 of ``repr(inputs)`` and the model code (see the module docstring)."""
    h = hashlib.sha256(_code_digest())
    h.update(repr(inputs).encode())
    return h.hexdigest()


def cached(key_inputs: tuple, build: Callable[[], Any], kind: type) -> Any:
    """The object ``build()`` returns, loaded from the cache when an entry for ``key_inputs`` exists.

    Args:
        key_inputs: every input of ``build`` (hashable reprs: tuples, strings, floats).
        build: builds the object on a miss.
        kind: the type a valid entry holds; anything else is treated as corrupt and rebuilt.

    Returns:
        The cached or freshly built object (stored on a miss when the folder is writable).
    """
    folder = cache_dir()
    if folder is None:
        return build()
    path = folder / f"{cache_key(*key_inputs)}.pkl"
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f)
        if isinstance(obj, kind):
            return obj
    except Exception:                       # missing, truncated or foreign file: rebuild below
        pass
    obj = build()
    _store(path, obj)
    return obj


def _store(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` atomically (temporary file, then rename); an unwritable folder is skipped."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except (OSError, UnboundLocalError):
            pass
