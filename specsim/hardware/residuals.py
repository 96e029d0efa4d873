"""A fit's residuals against measured points, shared by ``specsim profile fit``'s two fits: the step terms on
TPOT (:mod:`specsim.hardware.profile_fit`) and the request overhead on TTFT (:mod:`specsim.hardware.ttft_fit`).

A residual is one point's measured and predicted seconds; its relative error is (predicted - measured) /
measured, and a fit is summarised by the median |relative error| of its fitted points and, apart, of its
holdout points (docs/validation.md's protocol: never fit on what is predicted).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

import numpy as np


class Residual:
    """Methods of a residual dataclass with ``label``, ``source`` (a file path), ``measured_s`` and
    ``predicted_s`` (seconds) and ``holdout`` (bool) fields."""

    @property
    def rel_error(self) -> float:
        """(predicted - measured) / measured."""
        return self.predicted_s / self.measured_s - 1.0

    def row(self, **fields: Any) -> dict[str, Any]:
        """The residual as a row of the written profile's metadata: ``label``, ``source`` (the file name),
        ``fields`` in order, then ``measured_ms`` and ``predicted_ms`` (milliseconds, 4 decimals),
        ``rel_error`` (4 decimals) and ``holdout``."""
        return {"label": self.label, "source": Path(self.source).name, **fields,
                "measured_ms": round(self.measured_s * 1e3, 4), "predicted_ms": round(self.predicted_s * 1e3, 4),
                "rel_error": round(self.rel_error, 4), "holdout": self.holdout}


def median_abs_error(points: Iterable[Residual], holdout: bool) -> float | None:
    """Median |relative error| of the fitted (``holdout`` False) or holdout (True) points; None if there are none."""
    e = [abs(p.rel_error) for p in points if p.holdout == holdout]
    return float(np.median(e)) if e else None



def median_ratio(points: Iterable[Residual], holdout: bool) -> float | None:
    """Median predicted / measured of the fitted (``holdout`` False) or holdout (True) points: how many times too
    slow (> 1) or too fast (< 1) the model is (a signed relative error never goes below -100%, so a model 250x too
    fast reads -99.6%); None if there are none."""
    r = [p.predicted_s / p.measured_s for p in points if p.holdout == holdout]
    return float(np.median(r)) if r else None
