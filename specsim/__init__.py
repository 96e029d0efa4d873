"""specsim: a discrete-event simulator for speculative-decoding verification scheduling in LLM serving."""

from specsim.errors import SpecsimInputError

__version__ = "0.1.0"

__all__ = ["SpecsimInputError", "__version__"]
