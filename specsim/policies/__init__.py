"""Built-in verification policies, the registry, and plug-in loading.

Names: ``none``, ``static``, ``mtp1``, ``specdecpp``, ``dspark``, ``dspark-async``. A plug-in is loaded
with ``path/to/file.py:Name`` (a class, instantiated without arguments or with the knobs it accepts,
or a plain function, wrapped with ``fits_zos = False``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Callable

from specsim.errors import SpecsimInputError
from specsim.policies.base import FunctionPolicy, Policy, SchedulingView, as_policy
from specsim.policies.dspark import DSpark, DSparkAsync
from specsim.policies.static import MTP1, NoSpeculation, SpecDecPP, StaticK

_REGISTRY: dict[str, tuple[Callable[..., Policy], str]] = {}


def register_policy(name: str, factory: Callable[..., Policy], description: str = "") -> None:
    """Add a policy factory under ``name``.

    Raises:
        ValueError: ``name`` is already registered (duplicates are never silently shadowed).
    """
    if name in _REGISTRY:
        raise ValueError(f"policy name {name!r} is already registered")
    _REGISTRY[name] = (factory, description)


register_policy("none", lambda **kw: NoSpeculation(), "no speculation: verify nothing")
register_policy("static", lambda gamma=None, **kw: StaticK(gamma), "static-k: verify all gamma drafts")
register_policy("mtp1", lambda **kw: MTP1(), "MTP-1: static 1 with the MTP drafter (DeepSeek's baseline)")
register_policy("specdecpp", lambda threshold=0.3, **kw: SpecDecPP(threshold),
                "SpecDec++: verify while P(any rejection) <= threshold")
register_policy("dspark", lambda **kw: DSpark(), "DSpark Algorithm 1: greedy prefix scheduler, early stop")
register_policy("dspark-async", lambda **kw: DSparkAsync(),
                "DSpark asynchronous (ZOS): capacity from step t-2, top-K now")


def available_policies() -> dict[str, str]:
    """Registered policy names with their one-line descriptions."""
    from specsim.policies.plugins import ensure_loaded; ensure_loaded()  # noqa: E702  (entry points)
    return {name: desc for name, (_, desc) in sorted(_REGISTRY.items())}


def make_policy(name: str, **knobs: Any) -> Policy:
    """Build a policy by registry name or ``path/to/file.py:Name``.

    Args:
        name: registry name or plug-in spec.
        knobs: policy knobs (``gamma``, ``threshold``, ...); each policy takes what it needs.

    Raises:
        SpecsimInputError: unknown name, missing plug-in file or attribute, or an object that is not a policy.
    """
    from specsim.policies.plugins import ensure_loaded; ensure_loaded()  # noqa: E702  (entry points)
    if name in _REGISTRY:
        try:
            return _REGISTRY[name][0](**knobs)
        except ValueError as e:                  # a knob outside the policy's range
            if isinstance(e, SpecsimInputError):
                raise
            raise SpecsimInputError(None, None, f"policy {name}", "knobs in the policy's range", str(e)) from None
    if ":" in name and name.split(":", 1)[0].endswith(".py"):
        return load_plugin(name, **knobs)
    hint = " (a plug-in file needs ':Name', the class or function to load)" if name.endswith(".py") else ""
    raise SpecsimInputError(None, None, "policy", f"one of {sorted(_REGISTRY)} or path/to/file.py:Name{hint}",
                            repr(name))


def load_plugin(spec: str, **knobs: Any) -> Policy:
    """Load ``path/to/file.py:Name`` (a policy class or function) as a policy.

    Raises:
        SpecsimInputError: the file does not exist or fails to import, or has no such attribute.
    """
    path_s, attr = spec.rsplit(":", 1)
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
    from specsim.policies.plugins import instantiate
    try:
        return instantiate(obj, **knobs)
    except (TypeError, ValueError) as e:     # not a policy, or its constructor rejected the knobs
        raise SpecsimInputError(path_s, None, attr, "a policy (callable view -> verify lengths) built from "
                                "the given knobs", f"{type(e).__name__}: {e}") from None


__all__ = ["DSpark", "DSparkAsync", "FunctionPolicy", "MTP1", "NoSpeculation", "Policy", "SchedulingView",
           "SpecDecPP", "StaticK", "as_policy", "available_policies", "load_plugin", "make_policy",
           "register_policy"]

from specsim.policies.reference import DSparkGlobal, Oracle  # noqa: E402  (reference policies, issue 5)

register_policy("dspark-global", lambda **kw: DSparkGlobal(),
                "reference: synchronous DSpark, global search without early stop (not lossless)")
register_policy("oracle", lambda **kw: Oracle(),
                "reference: clairvoyant, verifies only accepted drafts (upper bound)")

from specsim.policies.threshold import ConfidenceThreshold  # noqa: E402  (issue 4)

register_policy("threshold", lambda threshold=0.3, **kw: ConfidenceThreshold(threshold),
                "DeepSpec per-position rule: verify up to the first raw c_k < threshold")
