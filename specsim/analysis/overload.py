"""Open-loop overload: a point whose offered rate the server does not keep up with.

A closed loop cannot run away: its users wait for their answers, so its queue is bounded by the users
(:func:`specsim.analysis.metrics.queued` flags where some of them wait). An open loop issues the trace's arrivals
whatever the server does: where the offered rate exceeds what the server completes, the queue grows for as long as
requests arrive, and the point's E2EL and TPS/user grow with the trace's length while its throughput is the
server's ceiling, not its answer to that rate (a fresh user's ``none`` at rate x4: 364.1 requests waited for a
decode slot against 22.8 running, mean E2EL 54 s, and compare divided a +159% gain by it).

The rule (:func:`overloaded`), from the two time averages every summary keeps (``mean_waiting_requests``: queued
for admission, ``mean_running_requests``: admitted): an open-loop point is overloaded when at least one request
waited on average and at least as many waited as ran. By Little's law, applied over the run to the queue and to the
admitted requests alike (the same completion rate), waiting / running is the mean wait for admission over the mean
time admitted: at or above one, queueing is at least half of each request's time in the system. A stable queue
before a batch of tens of slots reaches that only at the server's capacity (an M/M/c queue of 24 slots at a
utilisation of about 0.96; a server of one or two slots reaches it earlier, where its latency is the queue's all
the same). What it misses: a trace too short for its queue to outgrow the running batch (200 requests at 8x the
rate ``none`` keeps up with on ``traces/prod.jsonl`` kept 21 waiting against 45 running, finishing 33 s after
arrivals that spanned 6 s); such a point's ``duration_s`` far beyond its trace's arrival span shows it.
"""

from __future__ import annotations

import numpy as np


def overloaded(waiting: float | None, running: float | None) -> bool:
    """Whether an open-loop point's ``waiting`` requests queued for admission on average
    (``mean_waiting_requests``) are at least one and at least its ``running`` ones (``mean_running_requests``):
    the module docstring's rule. False where either is missing."""
    ok = waiting is not None and running is not None and np.isfinite(waiting) and np.isfinite(running)
    return bool(ok and waiting >= 1.0 and waiting >= running)


#: What an overloaded point's figures measure, for every warning that names one (sweep, compare, report, run).
OVERLOAD_MEANS = ("the offered rate is at or past what the server completes (past it, the queue and E2EL grow with "
                  "the trace's length instead of settling), TPS/user holds the wait where the first token is stamped "
                  "before admission, and the throughput is the server's ceiling, not its answer to that rate; a "
                  "lower rate scale gives a point it keeps up with")


def overload_warning(s: dict) -> str | None:
    """The overload warning of open-loop run summary ``s`` (:func:`overloaded` on its whole-run
    ``mean_waiting_requests`` and ``mean_running_requests``), or None (a closed loop: its queue warning is
    :func:`specsim.analysis.metrics.queued_warning`)."""
    if (s.get("load") or {}).get("mode") != "open":
        return None
    waiting, running = s.get("mean_waiting_requests"), s.get("mean_running_requests")
    if not overloaded(waiting, running):
        return None
    return (f"warning: overloaded: {waiting:.1f} requests waited to be admitted on average against {running:.1f} "
            f"admitted (by Little's law, {waiting / (waiting + running):.0%} of a request's time in the system was "
            f"spent queued): {OVERLOAD_MEANS}")
