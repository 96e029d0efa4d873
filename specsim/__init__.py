"""specsim: a discrete-event simulator for speculative-decoding verification scheduling in LLM serving.

The everyday Python API is reachable from the package itself, loaded on first use (``import specsim`` loads no
numeric library): ``specsim.simulate`` (:func:`specsim.simulation.simulate`), ``specsim.load_trace``,
``specsim.synth_trace``, ``specsim.load_scenario``, ``specsim.SweepSpec``, ``specsim.run_sweep``,
``specsim.load_records`` and ``specsim.compare`` (:func:`specsim.analysis.frontier.compare`).
"""

from importlib import import_module
from typing import Any

from specsim.errors import SpecsimInputError

__version__ = "0.1.0"

#: name -> the module it lives in (PEP 562: imported when the name is first read).
_LAZY = {"simulate": "specsim.simulation", "load_trace": "specsim.workload", "synth_trace": "specsim.workload",
         "load_scenario": "specsim.scenario", "SweepSpec": "specsim.sweep", "run_sweep": "specsim.sweep",
         "load_records": "specsim.sweep", "compare": "specsim.analysis.frontier"}

__all__ = ["SpecsimInputError", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    """One of :data:`_LAZY`'s names, from its module (a fresh user's ``specsim.simulate`` was an AttributeError)."""
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'specsim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
