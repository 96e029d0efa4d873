"""A batch-size -> draft-length table, as serving engines offer it.

Engines let operators shrink speculation as load grows: vLLM's and SGLang's speculative configs and
TensorRT-LLM's draft-length schedules map the number of running requests to a number of drafts. The
rule here: with R running requests, find the first row whose bound is >= R and verify that many drafts
for every request (capped at the step's gamma); above the last bound verify none. The default table,
7 drafts up to 64 running requests, 3 up to 128 and 0 above, follows the shape those configs use (a
long block while the GPU is memory-bound, a short one as the batch fills it, none when it is saturated).

The verify length depends only on R, which is known before any confidence exists, so the batch size is
fixed early: ``fits_zos = True``. The length is chosen in ``proposal_length``, before drafting, so the
drafter proposes only that many tokens; a schedule that reaches 0 drafts still runs: those steps draft
nothing and verify only each request's own token (B = R), exactly like ``none``.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

DEFAULT_SCHEDULE = ((64, 7), (128, 3))


def parse_schedule(spec: str | Iterable[tuple[float, int]]) -> tuple[tuple[float, int], ...]:
    """A schedule as ``((max_running, drafts), ...)`` from ``"64:7,128:3"`` or pairs.

    Bounds must be strictly increasing numbers >= 1 (``inf`` allowed last); drafts ints >= 0.

    Raises:
        ValueError: a malformed entry, naming it.
    """
    if isinstance(spec, str):
        pairs = []
        for item in (s.strip() for s in spec.split(",") if s.strip()):
            bound, sep, drafts = item.partition(":")
            if not sep:
                raise ValueError(f"schedule entry {item!r}: expected max_running:drafts, e.g. 64:7")
            try:
                pairs.append((float(bound), int(drafts)))
            except ValueError:
                raise ValueError(f"schedule entry {item!r}: expected a number and an int") from None
    else:
        pairs = [(float(b), int(d)) for b, d in spec]
    if not pairs:
        raise ValueError("schedule: expected at least one max_running:drafts entry")
    bounds = [b for b, _ in pairs]
    if any(not (b >= 1) for b in bounds) or any(b2 <= b1 for b1, b2 in zip(bounds, bounds[1:])):
        raise ValueError(f"schedule bounds: expected strictly increasing values >= 1, got {bounds}")
    if any(d < 0 for _, d in pairs):
        raise ValueError(f"schedule drafts: expected ints >= 0, got {[d for _, d in pairs]}")
    return tuple(pairs)


class DraftLenSchedule:
    """Verify ``drafts(R)`` drafts per request, from a running-requests -> draft-length table.

    Args:
        schedule: ``"64:7,128:3"`` or pairs ``(max_running, drafts)``; above the last bound, 0 drafts (knob).
        gamma: a further cap on the drafts (the run's ``--gamma`` knob); None = only the step's gamma.

    Raises:
        ValueError: a malformed schedule (see :func:`parse_schedule`) or gamma < 0.
    """

    name = "draft-len-schedule"
    fits_zos = True
    knobs = {"schedule": DEFAULT_SCHEDULE}     # a TOML knob: schedule = "64:7,128:3" or [[64, 7], [128, 3]]

    def __init__(self, schedule: str | Iterable[tuple[float, int]] = DEFAULT_SCHEDULE,
                 gamma: int | None = None) -> None:
        self.schedule = parse_schedule(schedule)
        if gamma is not None and int(gamma) < 0:
            raise ValueError(f"gamma: expected an int >= 0 or None, got {gamma!r}")
        self.gamma = gamma
        self._bounds = np.array([b for b, _ in self.schedule] + [math.inf])   # (n+1,)
        self._drafts = np.array([d for _, d in self.schedule] + [0])          # (n+1,)

    def drafts(self, num_running: int, gamma: int) -> int:
        """Drafts per request with ``num_running`` requests, capped at ``gamma`` (and ``self.gamma``)."""
        row = int(np.searchsorted(self._bounds, num_running, side="left"))   # first bound >= R
        cap = gamma if self.gamma is None else min(gamma, int(self.gamma))
        return int(min(self._drafts[row], cap))

    def proposal_length(self, view) -> int:
        """Drafts to propose this step (before drafting; ``view.gamma`` is the largest proposal)."""
        return self.drafts(view.num_requests, view.gamma)

    def __call__(self, view) -> np.ndarray:
        return np.full(view.num_requests, self.drafts(view.num_requests, view.gamma), dtype=np.int64)
