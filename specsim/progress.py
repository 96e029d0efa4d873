"""Progress of one long simulation, and the command line a run (or a sweep's manifest) records.

:func:`progress_ticker` is a SimPy process that reports (finished requests, total, simulated seconds) to a
callback every ``interval_s`` simulated seconds and ends when no other event is pending, so a run ends
exactly as without it (it only reads records; SimPy orders the other events as before).
:func:`run_progress` is the terminal side: a rich progress bar on stderr, drawn only when stderr is a
terminal (quiet in pipes, CI and notebooks). Imports here are the standard library only; rich is imported
when a bar is drawn.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

#: A progress callback: ``(finished requests, total requests, simulated seconds)``.
ProgressCallback = Callable[[int, int, float], None]


def command_line(argv: list[str] | None = None) -> str:
    """The exact command line of this process as a shell-quoted string, ``specsim`` first
    (``argv``: the arguments after the program name; default ``sys.argv[1:]``)."""
    return shlex.join(["specsim", *(sys.argv[1:] if argv is None else argv)])


def record_command_line(json_path: str | Path, argv: list[str] | None = None) -> None:
    """Add ``command_line`` (:func:`command_line`) to the JSON object in ``json_path`` (a sweep's
    ``sweep.json``), rewritten through a temporary file; a missing file is left alone."""
    p = Path(json_path)
    if not p.is_file():
        return
    doc = json.loads(p.read_text())
    doc["command_line"] = command_line(argv)
    tmp = p.with_name(f".{p.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, p)


def progress_ticker(cluster: Any, total: int, report: ProgressCallback, interval_s: float = 0.5,
                    wall_s: float = 0.05):
    """SimPy process: ``report(done, total, now_s)`` every ``interval_s`` simulated seconds or more.

    ``done`` counts requests that left (completed) plus those found unservable. The interval doubles while
    reports come faster than every ``wall_s`` wall seconds, so a long run pays for a few reports per wall
    second, not one per half simulated second (each report scans the (N,) records once). Ends (after a last
    report) when the event queue holds nothing else.

    Args:
        cluster: a :class:`specsim.engine.cluster.Cluster` (its ``env`` and ``records`` are read, never written).
        total: the trace's request count.
        report: the callback; interval_s: the first interval, simulated seconds > 0; wall_s: see above.
    """
    env, rec = cluster.env, cluster.records
    last = time.monotonic()
    while True:
        yield env.timeout(interval_s)
        done = int((rec.done_s == rec.done_s).sum()) + len(rec.unservable_reason)   # not NaN = done
        report(min(done, total), total, float(env.now))
        if math.isinf(env.peek()):
            return
        now = time.monotonic()
        if now - last < wall_s:
            interval_s *= 2
        last = now


@contextmanager
def run_progress(total: int, enabled: bool | None = None) -> Iterator[ProgressCallback | None]:
    """A rich progress bar of ``total`` requests on stderr; yields its callback, or None when not drawn.

    Args:
        total: the trace's request count.
        enabled: force it on or off; None = only when stderr is a terminal.
    """
    if enabled is None:
        enabled = sys.stderr.isatty()
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("run"), BarColumn(), MofNCompleteColumn(), TextColumn("requests"),
                   TimeElapsedColumn(), TextColumn("{task.description}"), console=Console(stderr=True),
                   transient=True)
    last = [0.0]
    with bar:
        task = bar.add_task("", total=total)

        def report(done: int, n: int, now_s: float) -> None:
            t = time.monotonic()
            if t - last[0] >= 0.1 or done >= n:
                last[0] = t
                bar.update(task, completed=done, description=f"simulated {now_s:,.1f} s")
        yield report
