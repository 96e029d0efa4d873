"""Last step's survivals, carried to this step's budget (issue 25: the decision within 100 us).

``vllm-adaptive`` and ``trtllm-confidence`` size this step's budget in ``capacity`` from the view one step old
(``capacity_view_age = 1``), which is the very view their ``__call__`` allocated from one step earlier. So the
stale survivals ``capacity`` needs are the survivals ``__call__`` already formed, less the rows of the requests
that finished, plus a row of ones for each request that joined (vLLM resets a joining request's stale row to 1.0,
:func:`specsim.policies.engines.stale_survival`). ``__call__`` keeps its survivals and their candidates sorted
(one sort, :func:`specsim.policies.sorting.sort_values`, which also gives its own allocation's threshold);
``capacity`` then drops the finished requests' values from that sorted array and adds the joining requests' ones
in one merge pass (:func:`specsim.policies.engine_kernels.drop_and_join`) instead of matching every row, forming
the survivals and sorting them again. The result is the same array of values, so the budget is the same bit for
bit (tests/test_engine_carry.py checks it against the from-scratch path over random runs with joins and finishes).

Causality: the carry is built only from a view the policy was handed (its confidences and request ids, which
views never write in place: :class:`specsim.policies.base.SchedulingView`) and is used only when ``capacity``
is handed that same view again (the same arrays); any other view takes the from-scratch path.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from specsim.policies.engine_kernels import drop_and_join, gather_rows, match_rows


class Carry:
    """The survivals one ``__call__`` formed, kept for the next ``capacity`` (module docstring).

    Attributes:
        conf, request_ids: the view's arrays (kept by reference: the key; views never write them).
        survival: (R, gamma) survivals a_{r,j} of that view.
        a_asc: (R * width,) the scheduler's candidates from ``survival`` (``candidates(survival)``), sorted
            ascending, or None when ``__call__`` needed no sort (it admitted none or every candidate): the
            budget then sorts only if its proof fails, as from scratch.
    """

    def __init__(self, candidates: Callable[[np.ndarray], np.ndarray]) -> None:
        """``candidates``: (K, gamma) survivals -> (K, width) candidate values of those rows (the scheduler's:
        every survival, or those beyond the floor with -1.0 below eps)."""
        self.candidates = candidates
        self.conf = self.request_ids = self.survival = self.a_asc = None

    def keep(self, view, survival: np.ndarray, a_asc: np.ndarray | None) -> None:
        """Keep ``view``'s ``survival`` (R, gamma) and its candidates sorted ascending, ``a_asc`` (or None)."""
        self.conf, self.request_ids, self.survival, self.a_asc = view.conf, view.request_ids, survival, a_asc

    def stale(self, old_view, running_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | None] | None:
        """(stale survivals (R, gamma) in ``running_ids`` order, their candidates sorted ascending or None when
        none were sorted) when ``old_view`` is the kept view, else None. The stale survivals are
        :func:`specsim.policies.engines.stale_survival`'s (the same rows, or the same array when no request
        joined or finished); None also when requests joined or finished and nothing was sorted, when a kept row
        would serve two running requests or when a value to drop is missing (not in a run's views): the
        from-scratch path then answers."""
        if (self.conf is None or old_view.conf is not self.conf or old_view.request_ids is not self.request_ids
                or self.conf.flags.writeable or self.survival.shape[1] != old_view.gamma):
            return None
        running_ids = np.asarray(running_ids)
        if running_ids.shape == self.request_ids.shape and (running_ids == self.request_ids).all():
            return self.survival, self.a_asc                 # no request joined or finished
        if self.a_asc is None:
            return None
        rows = match_rows(np.array(self.request_ids, dtype=np.int64), np.array(running_ids, dtype=np.int64))
        used = np.bincount(rows[rows >= 0], minlength=self.survival.shape[0])           # (R_old,)
        if used.max(initial=0) > 1:
            return None
        width = self.candidates(self.survival[:0]).shape[1]
        gone = self.candidates(self.survival[used == 0]).ravel()                        # the finished rows' values
        a_asc, ok = drop_and_join(self.a_asc, gone, int((rows < 0).sum()) * width)
        if not ok:
            return None
        return gather_rows(self.survival, rows), a_asc                  # stale_rows' values, read
