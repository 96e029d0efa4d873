"""Policies from installed packages: the ``specsim.policies`` entry-point group.

A package registers policies in its ``pyproject.toml``::

    [project.entry-points."specsim.policies"]
    smartspec = "mypkg.policies:SmartSpec"     # name = "module:attribute"

The entry point's name is the policy's registry name. Its object is a policy class (instantiated per run
with the knobs its constructor accepts, like a ``path/file.py:Name`` plug-in), a policy instance, or a
plain function ``view -> verify lengths``. Its one-line description (``specsim policies``) is the
object's ``description`` attribute, else the first line of its docstring.

Entry points are loaded once, on the first :func:`specsim.policies.make_policy` or
:func:`specsim.policies.available_policies` call, after every built-in is registered. A name that is
already registered (a built-in or another package's policy) raises: duplicates are never shadowed
(STYLE.md section 3).
"""

from __future__ import annotations

import importlib.metadata
import inspect
from typing import Any, Callable

from specsim.errors import SpecsimInputError
from specsim.policies.base import Policy, as_policy

GROUP = "specsim.policies"
_loaded = False


def describe(obj: Any) -> str:
    """One-line description of a policy object: its ``description`` attribute or its docstring's first line."""
    desc = getattr(obj, "description", None)
    if isinstance(desc, str) and desc.strip():
        return desc.strip().splitlines()[0]
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def instantiate(obj: Any, **knobs: Any) -> Policy:
    """A policy from a class (given the knobs its constructor accepts), an instance or a function."""
    if inspect.isclass(obj):
        params = inspect.signature(obj).parameters
        accepts_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        obj = obj(**{k: v for k, v in knobs.items() if accepts_any or k in params})
    return as_policy(obj)


def _factory(obj: Any) -> Callable[..., Policy]:
    return lambda **knobs: instantiate(obj, **knobs)


def _dist_name(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or "an installed package"


def load_entry_points(register: Callable[[str, Callable[..., Policy], str], None],
                      registered: Callable[[], Any]) -> list[str]:
    """Register every ``specsim.policies`` entry point; returns the names added.

    Args:
        register: ``register_policy(name, factory, description)``.
        registered: returns the names registered so far (to name the clash in the error).

    Raises:
        SpecsimInputError: an entry point that fails to load or is not a policy (naming the package and
            the entry point), or a name that is already registered (built-in or another package's).
    """
    added: list[str] = []
    for ep in importlib.metadata.entry_points(group=GROUP):
        where = f"entry point {ep.name} = {ep.value} ({_dist_name(ep)})"
        if ep.name in registered():
            raise SpecsimInputError(where, None, "name", "a policy name not registered yet "
                                    "(built-in or from another package)", repr(ep.name))
        try:
            obj = ep.load()
        except Exception as e:  # a package's own import error, reported on one line
            raise SpecsimInputError(where, None, None, "an entry point that imports cleanly",
                                    f"{type(e).__name__}: {e}") from None
        if not callable(obj):
            raise SpecsimInputError(where, None, ep.value, "a policy class, instance or function",
                                    type(obj).__name__)
        register(ep.name, _factory(obj), describe(obj))
        added.append(ep.name)
    return added


def ensure_loaded() -> None:
    """Load the entry-point group into the registry once per process (see the module docstring)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    from specsim.policies import _REGISTRY, register_policy
    load_entry_points(register_policy, lambda: _REGISTRY.keys())
