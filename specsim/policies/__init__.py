"""Built-in verification policies, the registry, and plug-in loading.

Names: ``none``, ``static``, ``mtp1``, ``specdecpp``, ``dspark``, ``dspark-async``, ``threshold`` and the
reference policies ``dspark-global`` and ``oracle``. A plug-in is loaded with ``path/to/file.py:Name``
(a class, instantiated with the knobs it declares, an instance, or a plain function, wrapped with
``fits_zos = False``) or from the ``specsim.policies`` entry-point group.

Modules: :mod:`~specsim.policies.base` (views, :class:`PolicyBase`, :func:`policy_hooks`, knobs),
the policies (:mod:`~specsim.policies.static`, :mod:`~specsim.policies.dspark`,
:mod:`~specsim.policies.threshold`, :mod:`~specsim.policies.reference`), :mod:`~specsim.policies.plugins`
(plug-in objects) and :mod:`~specsim.policies.registry` (names); imports point one way, in that order.
"""

from __future__ import annotations

from specsim.policies.base import (FunctionPolicy, Policy, PolicyBase, PolicyHooks, SchedulingView, as_policy,
                                   policy_hooks)
from specsim.policies.dspark import DSpark, DSparkAsync
from specsim.policies.plugins import load_plugin
from specsim.policies.reference import DSparkGlobal, Oracle
from specsim.policies.registry import available_policies, make_policy, policy_knobs, register_policy
from specsim.policies.static import MTP1, NoSpeculation, SpecDecPP, StaticK
from specsim.policies.threshold import ConfidenceThreshold

__all__ = ["ConfidenceThreshold", "DSpark", "DSparkAsync", "DSparkGlobal", "FunctionPolicy", "MTP1",
           "NoSpeculation", "Oracle", "Policy", "PolicyBase", "PolicyHooks", "SchedulingView", "SpecDecPP",
           "StaticK", "as_policy", "available_policies", "load_plugin", "make_policy", "policy_hooks",
           "policy_knobs", "register_policy"]
