"""Policies from outside specsim: ``path/to/file.py:Name`` files and the ``specsim.policies`` entry points.

A plug-in object is a policy class (instantiated per run with the knobs it declares, see
:func:`specsim.policies.base.declared_knobs`), a policy instance, or a plain function
``view -> verify lengths``. A package registers policies in its ``pyproject.toml``::

    [project.entry-points."specsim.policies"]
    smartspec = "mypkg.policies:SmartSpec"     # name = "module:attribute"

The entry point's name is the policy's registry name and its one-line description (``specsim policies``)
is the object's ``description`` attribute, else the first line of its docstring. The registry
(:mod:`specsim.policies.registry`) loads the group once, after every built-in is registered; a name that
is already registered raises: duplicates are never shadowed (STYLE.md section 3).

This module builds policies from plug-in objects and never imports the registry (the registry passes
its ``register_policy`` in), so the dependency points one way: registry -> plugins -> base.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
from pathlib import Path
from typing import Any, Callable

from specsim.errors import SpecsimInputError
from specsim.policies.base import Policy, as_policy, declared_knobs, policy_hooks, check_knobs
from specsim.policies.guard import user_frame

GROUP = "specsim.policies"


def describe(obj: Any) -> str:
    """One-line description of a policy object: its ``description`` attribute or its docstring's first line."""
    desc = getattr(obj, "description", None)
    if isinstance(desc, str) and desc.strip():
        return desc.strip().splitlines()[0]
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def call_with_gamma(fn: Callable[..., Any], gamma: int | None, kwargs: dict[str, Any]) -> Any:
    """``fn(**kwargs)``, adding ``gamma=gamma`` when ``fn`` has a ``gamma`` parameter or takes ``**kwargs``."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_gamma = "gamma" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    return fn(**kwargs, gamma=gamma) if takes_gamma else fn(**kwargs)


def instantiate(obj: Any, gamma: int | None = None, where: str | None = None, **knobs: Any) -> Policy:
    """A checked policy from a plug-in object: a class (built with its declared knobs), an instance or a function.

    Args:
        obj: the plug-in object.
        gamma: the run's gamma, passed to a constructor that has a ``gamma`` parameter.
        where: the file or entry point it came from, for errors (None: the policy name alone).
        knobs: knob values; a class receives every knob it declares (the default when not given);
            an instance or a function accepts none.

    Raises:
        SpecsimInputError: an unknown knob (naming the policy, the knob and the accepted knobs), a
            constructor that rejects its knobs, or an object that is not a policy (:func:`policy_hooks`).
    """
    label = getattr(obj, "name", None) or getattr(obj, "__name__", None) or type(obj).__name__
    declared = declared_knobs(obj) if inspect.isclass(obj) else {}
    values = check_knobs(str(label), declared, knobs)
    if inspect.isclass(obj):
        try:
            obj = call_with_gamma(obj, gamma, values)
        except (TypeError, ValueError) as e:     # the constructor rejected a knob (range, type)
            if isinstance(e, SpecsimInputError):
                raise
            given = ", ".join(f"{k}={v!r}" for k, v in knobs.items()) or "no knobs"
            why = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            raise SpecsimInputError(where, None, f"policy {label}",
                                    f"knob values its constructor accepts (it said: {why})", given) from None
        except Exception as e:                   # a user's constructor that fails otherwise: its file and line
            frame = user_frame(e.__traceback__)
            if frame is None:
                raise
            raise SpecsimInputError(frame[0], frame[1], f"policy {label}, its constructor",
                                    "a constructor that runs without raising", f"{type(e).__name__}: {e}") from e
    try:
        policy = as_policy(obj)
    except TypeError as e:
        got = f"{_kind(obj)}, which is not callable" if not callable(obj) else str(e)
        raise SpecsimInputError(where, None, str(label), "a policy class, instance or function "
                                "(a callable view -> verify lengths)", got) from None
    policy_hooks(policy)                            # checked once, when the policy is made
    return policy


def _kind(obj: Any) -> str:
    """What a non-policy object is, in words, without its repr (no memory addresses in messages)."""
    if isinstance(obj, (bool, int, float)) or obj is None:
        return f"{type(obj).__name__} {obj!r}"
    return f"a {type(obj).__name__}" if type(obj).__module__ == "builtins" else f"an instance of {type(obj).__name__}"


def load_plugin_object(spec: str) -> Any:
    """The object ``Name`` of ``path/to/file.py:Name`` (the file is executed as a fresh module).

    Raises:
        SpecsimInputError: ``Name`` is not an identifier, the file does not exist or fails to import, or
            has no such attribute.
    """
    path_s, attr = spec.rsplit(":", 1)
    if not attr.isidentifier():
        raise SpecsimInputError(path_s, None, "policy", "path/to/file.py:Name, Name a Python identifier",
                                repr(attr) if attr else "nothing after the ':'")
    path = Path(path_s)
    if not path.is_file():
        raise SpecsimInputError(path_s, None, "policy", "an existing Python file", "no such file")
    mod_spec = importlib.util.spec_from_file_location(f"specsim_plugin_{path.stem}", path)
    module = importlib.util.module_from_spec(mod_spec)
    try:
        mod_spec.loader.exec_module(module)
    except Exception as e:  # a plug-in's own error, reported on one line
        raise SpecsimInputError(path_s, None, None, "a plug-in file that imports cleanly",
                                f"{type(e).__name__}: {e}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise SpecsimInputError(path_s, None, attr, "a policy class or function defined in the file")
    return obj


def is_plugin_spec(name: str) -> bool:
    """True for ``path/to/file.py:Name``."""
    return ":" in name and name.rsplit(":", 1)[0].endswith(".py")


def load_plugin(spec: str, gamma: int | None = None, **knobs: Any) -> Policy:
    """Load ``path/to/file.py:Name`` (a policy class, instance or function) as a checked policy.

    Args:
        spec: ``path/to/file.py:Name``.
        gamma: the run's gamma (for a constructor with a ``gamma`` parameter).
        knobs: knob values (:func:`instantiate`).

    Raises:
        SpecsimInputError: the file does not exist or fails to import, has no such attribute, an unknown
            knob, or the object is not a policy.
    """
    return instantiate(load_plugin_object(spec), gamma, spec.rsplit(":", 1)[0], **knobs)


def _dist_name(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return getattr(dist, "name", None) or "an installed package"


def load_entry_points(register: Callable[..., None], registered: Callable[[], Any]) -> list[str]:
    """Register every ``specsim.policies`` entry point; returns the names added.

    Args:
        register: ``register_policy(name, policy, description)`` of the registry; a class is registered
            as itself (it declares its knobs), an instance or a function through a factory without knobs.
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
        if inspect.isclass(obj):
            register(ep.name, obj, describe(obj))
        else:
            register(ep.name, lambda gamma=None, _obj=obj, _where=where: instantiate(_obj, gamma, _where),
                     describe(obj))
        added.append(ep.name)
    return added
