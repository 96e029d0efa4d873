"""Warming a sweep's processes once, so that the points that follow pay only for their own simulation.

A sweep point in a fresh process otherwise pays for the run path's imports (pandas, numba, scipy.special),
the acceptance model of its (drafter, gamma) (built, or loaded from :mod:`specsim.acceptance.cache`) and the
first call of every compiled kernel its policy uses (each loaded from numba's on-disk cache, 0.17-0.25 s;
issue 25). :func:`warm_up` runs each distinct (policy, knobs) of the sweep once on the trace's first
:data:`WARM_REQUESTS` requests in open loop, which touches all three; its results are dropped. The process
executor warms the driver before it forks its workers (so they start warm), or each worker once through the
pool's initializer where processes are spawned.
"""

from __future__ import annotations

from dataclasses import replace

from specsim.errors import SpecsimInputError
from specsim.sweep.point import PointTask, _simulate

#: Requests of the warm-up runs: enough for a decode step with more than one request and a completion.
WARM_REQUESTS = 4


def distinct_tasks(tasks: list[PointTask]) -> list[PointTask]:
    """The first task of each distinct (policy, knobs, scenario) in ``tasks``, in order."""
    seen, out = set(), []
    for t in tasks:
        key = (t.point.policy, tuple(sorted(t.point.knobs.items())), id(t.scenario))
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def warm_up(tasks: list[PointTask]) -> int:
    """Run one short open-loop simulation per distinct (policy, knobs) of ``tasks``; return how many ran.

    A warm-up that the configuration cannot run (a :class:`SpecsimInputError`) is skipped: the point itself
    will report the error. Nothing is returned or written; only this process's imports and caches change.
    """
    todo = distinct_tasks(tasks)
    for t in todo:
        head = t.trace.head(WARM_REQUESTS) if len(t.trace) > WARM_REQUESTS else t.trace
        point = replace(t.point, mode="open", load=1.0, max_sim_s=None)
        try:
            _simulate(PointTask(point, t.scenario, head))
        except SpecsimInputError:
            pass
    return len(todo)
