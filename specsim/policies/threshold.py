"""``threshold``: DeepSpec's static per-position confidence threshold (the DSpark paper's Fig. 5 sweep, §4.3.3).

Verify the drafts of a request up to, not including, the first position k whose *raw* confidence
c_k < threshold: l_r = number of leading positions with c_{r,k} >= threshold. This is the rule of
DeepSpec's ``draft_ops._confident_prefix_length``, which the paper's Fig. 5 sweep most likely used (the paper
says neither which rule nor whether raw or calibrated confidences); SpecDec++'s cumulative rule on calibrated
survival is ``specdecpp``. Load-unaware:
threshold 0 verifies every draft, like ``static``.
"""

from __future__ import annotations

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView
from specsim.policies.static import DEFAULT_THRESHOLD


class ConfidenceThreshold(PolicyBase):
    """Truncate each request's block at its first raw confidence below ``threshold``.

    Args:
        threshold: in [0, 1]; a draft with c_k >= threshold (and all earlier ones too) is verified (knob;
            default :data:`specsim.policies.static.DEFAULT_THRESHOLD`, sourced there).

    Raises:
        ValueError: threshold outside [0, 1].
    """

    name = "threshold"
    fits_zos = False  # the batch size depends on this step's confidences
    knobs = {"threshold": DEFAULT_THRESHOLD}

    def __init__(self, threshold: float = DEFAULT_THRESHOLD) -> None:
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"threshold: expected a float in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)

    def __call__(self, view: SchedulingView) -> np.ndarray:
        confident = view.conf_raw >= self.threshold                        # (R, gamma)
        return np.cumprod(confident, axis=1).sum(axis=1).astype(np.int64)  # leading run of confident drafts
