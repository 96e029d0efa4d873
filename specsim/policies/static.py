"""Load-unaware policies: no speculation, static-k (MTP-1 is static 1), and SpecDec++'s threshold."""

from __future__ import annotations

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView

# h of specdecpp (and of the ``threshold`` policy). Source: the DSpark paper's Fig. 5 sweep (§4.3.3, of the
# per-position rule): at 0.3 the accepted tokens per step stay within 2% of threshold 0 in every domain
# (math 6.12 vs 6.11, code 5.40 vs 5.38, chat 3.56 vs 3.64) while chat verifies one token fewer per step;
# 0.5 already loses 10% of chat's. One h for both rules so they compare at one setting; not a value from
# the SpecDec++ paper itself.
DEFAULT_THRESHOLD = 0.3


class NoSpeculation(PolicyBase):
    """``none``: verify no drafts; every step emits the target's own token (the drafter is ``none``)."""

    name = "none"
    fits_zos = True  # batch size = R, known before any confidence exists
    reads_confidence = False
    drafter = "none"

    def __call__(self, view: SchedulingView) -> np.ndarray:
        return np.zeros(view.num_requests, dtype=np.int64)


class StaticK(PolicyBase):
    """``static``: verify all ``gamma`` drafts of every request.

    Args:
        gamma: drafts verified per request per step (the run's gamma); None means the step's gamma.
    """

    name = "static"
    fits_zos = True  # B = R (1 + k) is fixed before this step's confidences exist
    reads_confidence = False

    def __init__(self, gamma: int | None = None) -> None:
        self.k = gamma

    def __call__(self, view: SchedulingView) -> np.ndarray:
        k = view.gamma if self.k is None else min(self.k, view.gamma)
        return np.full(view.num_requests, k, dtype=np.int64)


class MTP1(StaticK):
    """``mtp1``: static 1 with the MTP drafter, gamma forced to 1 (DeepSeek's production baseline, DSpark paper §5).

    Args:
        gamma: ignored (the run's gamma; this policy forces 1).
    """

    name = "mtp1"
    drafter = "mtp"
    gamma = 1

    def __init__(self, gamma: int | None = None) -> None:
        super().__init__(1)


class SpecDecPP(PolicyBase):
    """``specdecpp``: SpecDec++ (Huang et al. 2024) on calibrated confidences.

    Verifies positions j while the predicted probability of at least one rejection,
    1 - prod_{i<=j} c_i, stays <= ``threshold``; the first position past it is not verified
    (DeepSpec's ``draft_ops._confident_prefix_length``). Survival falls along the prefix, so this is a count per row.

    Args:
        threshold: h in [0, 1] (knob; default :data:`DEFAULT_THRESHOLD`).

    Raises:
        ValueError: threshold outside [0, 1].
    """

    name = "specdecpp"
    fits_zos = False  # needs this step's confidences to size the batch
    knobs = {"threshold": DEFAULT_THRESHOLD}

    def __init__(self, threshold: float = DEFAULT_THRESHOLD) -> None:
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"threshold: expected a float in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)

    def __call__(self, view: SchedulingView) -> np.ndarray:
        survival = view.survival()                                   # (R, gamma)
        return np.sum(1.0 - survival <= self.threshold, axis=1).astype(np.int64)
