"""Load-unaware policies: no speculation, static-k (MTP-1 is static 1), and SpecDec++'s threshold."""

from __future__ import annotations

import numpy as np

from specsim.policies.base import SchedulingView


class NoSpeculation:
    """``none``: verify no drafts; every step emits the target's own token (the drafter is ``none``)."""

    name = "none"
    fits_zos = True  # batch size = R, known before any confidence exists
    drafter = "none"

    def __call__(self, view: SchedulingView) -> np.ndarray:
        return np.zeros(view.num_requests, dtype=np.int64)


class StaticK:
    """``static``: verify all ``k`` drafts of every request (``k`` = gamma by default).

    Args:
        k: drafts verified per request per step; None means the step's gamma.
    """

    fits_zos = True  # B = R (1 + k) is fixed before this step's confidences exist

    def __init__(self, k: int | None = None, name: str = "static") -> None:
        self.k = k
        self.name = name

    def __call__(self, view: SchedulingView) -> np.ndarray:
        k = view.gamma if self.k is None else min(self.k, view.gamma)
        return np.full(view.num_requests, k, dtype=np.int64)


class MTP1(StaticK):
    """``mtp1``: static 1 with the MTP drafter, gamma forced to 1 (DeepSeek's production baseline, PAPER.md 8.5)."""

    drafter = "mtp"
    gamma = 1

    def __init__(self) -> None:
        super().__init__(k=1, name="mtp1")


class SpecDecPP:
    """``specdecpp``: SpecDec++ (Huang et al. 2024) on calibrated confidences.

    Verifies positions j while the predicted probability of at least one rejection,
    1 - prod_{i<=j} c_i, stays <= ``threshold``; the first position past it is not verified
    (PAPER.md section 7). Survival falls along the prefix, so this is a count per row.

    Args:
        threshold: h in [0, 1].
    """

    name = "specdecpp"
    fits_zos = False  # needs this step's confidences to size the batch

    def __init__(self, threshold: float = 0.3) -> None:
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"threshold: expected a float in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)

    def __call__(self, view: SchedulingView) -> np.ndarray:
        survival = view.survival()                                   # (R, gamma)
        return np.sum(1.0 - survival <= self.threshold, axis=1).astype(np.int64)
