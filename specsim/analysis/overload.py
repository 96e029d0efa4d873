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
the same). What it misses: a queue that has not outgrown the running batch because the batch is large or the trace
short (200 requests at 8x the rate ``none`` keeps up with on ``traces/prod.jsonl`` kept 21 waiting against 45
running, finishing 33 s after arrivals that spanned 6 s; a B200 scenario admitting 1,024 requests kept 124 waiting
against 341 running at rate x4, delivering 2,969 tok/s of the 4,986 offered and finishing at 130 s after arrivals
that ended at 77 s, p50 TTFT 6.8 s).

A second, physical rule catches those: the run did not keep up with its arrivals. It is overloaded where at least
one request waited on average and its completion span (``duration_s``: first arrival to last completion) exceeds
:data:`KEEP_UP_FACTOR` (1.5) times its arrival span (``arrival_span_s``: first to last issued arrival). A server
that keeps up completes requests at the rate they arrive and finishes its last one about one request's time in the
system after that request arrived, so over an arrival span long against one request's E2EL (what a rate point is
run for) its completion span is the arrival span plus a little; a drain of half the arrival span or more means the
server completed at most 2/3 of the offered request rate over the run (completed / ``duration_s`` against issued /
``arrival_span_s``), a backlog, not a tail. The queue condition (at least one waiting) keeps out a trace whose
arrival span is short against one request's E2EL (a few requests a second apart, each taking seconds): its drain is
the requests' own service, with nobody waiting. Summaries and sweep records written before ``arrival_span_s`` was
kept are judged by the first rule only.
"""

from __future__ import annotations

import numpy as np


#: The second rule's factor: a completion span over this many times the arrival span (the module docstring).
KEEP_UP_FACTOR = 1.5


def _finite(*xs) -> bool:
    return all(x is not None and np.isfinite(x) for x in xs)


def overload_reason(waiting: float | None, running: float | None, duration_s: float | None = None,
                    arrival_span_s: float | None = None) -> str | None:
    """Why an open-loop point is overloaded (the module docstring's two rules), in words, or None where it is not.

    Args:
        waiting, running: requests queued for admission and admitted, time averages (``mean_waiting_requests``,
            ``mean_running_requests``).
        duration_s: seconds from the first arrival to the last completion (``duration_s``).
        arrival_span_s: seconds from the first to the last issued arrival (``arrival_span_s``); None (a record
            written before it was kept): the first rule only.
    """
    if not (_finite(waiting, running) and waiting >= 1.0):
        return None
    if waiting >= running:
        return (f"{waiting:.1f} requests waited to be admitted on average against {running:.1f} admitted (by "
                f"Little's law, {waiting / (waiting + running):.0%} of a request's time in the system was spent "
                "queued)")
    if _finite(duration_s, arrival_span_s) and arrival_span_s > 0 and duration_s > KEEP_UP_FACTOR * arrival_span_s:
        return (f"it did not keep up with its arrivals: the last request completed {duration_s:,.1f} s after the "
                f"first arrival, {duration_s / arrival_span_s:.2f}x the {arrival_span_s:,.1f} s the arrivals spanned "
                f"(over {KEEP_UP_FACTOR:g}x), while {waiting:.1f} requests waited to be admitted on average against "
                f"{running:.1f} admitted")
    return None


def overloaded(waiting: float | None, running: float | None, duration_s: float | None = None,
               arrival_span_s: float | None = None) -> bool:
    """Whether an open-loop point is overloaded: :func:`overload_reason` (same arguments) gives a reason. False where
    ``waiting`` or ``running`` is missing; the second rule only where both spans are given."""
    return overload_reason(waiting, running, duration_s, arrival_span_s) is not None


#: What an overloaded point's figures measure, for every warning that names one (sweep, compare, report, run).
OVERLOAD_MEANS = ("the offered rate is at or past what the server completes (past it, the queue and E2EL grow with "
                  "the trace's length instead of settling), TPS/user holds the wait where the first token is stamped "
                  "before admission, and the throughput is the server's ceiling, not its answer to that rate; a "
                  "lower rate scale gives a point it keeps up with")


def overload_warning(s: dict) -> str | None:
    """The overload warning of open-loop run summary ``s`` (:func:`overload_reason` on its whole-run
    ``mean_waiting_requests``, ``mean_running_requests``, ``duration_s`` and ``arrival_span_s``), or None (a closed
    loop: its queue warning is :func:`specsim.analysis.metrics.queued_warning`)."""
    if (s.get("load") or {}).get("mode") != "open":
        return None
    why = overload_reason(s.get("mean_waiting_requests"), s.get("mean_running_requests"), s.get("duration_s"),
                          s.get("arrival_span_s"))
    return None if why is None else f"warning: overloaded: {why}: {OVERLOAD_MEANS}"
