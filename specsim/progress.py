"""Progress of one long simulation, and the command line a run (or a sweep's manifest) records.

:func:`progress_ticker` is a SimPy process that reports (finished requests, total, simulated seconds) to a
callback every ``interval_s`` simulated seconds and ends when no other event is pending, so a run ends
exactly as without it (it only reads records; SimPy orders the other events as before).
:class:`ProgressBar` is the one progress bar of every long command (``run``, ``sweep``, ``tune``, ...): done /
total, elapsed, ETA on a terminal's stderr; one summary line instead when stderr is not a terminal (pipes,
CI, notebooks). :func:`run_progress` draws it over a run's requests; :func:`counting` counts the items of a
library loop (production fit and prediction points) towards it. Imports here are the standard library
only; rich is imported when a bar is drawn.
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


class ProgressBar:
    """The progress bar of every long command, on stderr: ``LABEL [bar] done/total UNIT elapsed ETA note``.

    Use as a context manager and call :meth:`update` (or call the object with a
    :class:`specsim.sweep.runner.SweepProgress`). On a terminal it draws a rich bar (no refresh thread:
    process pools fork workers, which must not inherit a held lock); elsewhere it draws nothing while
    running and prints one line at the end (``LABEL: done/total UNIT in S s``). Disabled, it prints nothing.

    Args:
        label: what runs (``"sweep"``, ``"tune"``).
        unit: what is counted (``"points"``, ``"requests"``).
        enabled: False for ``--quiet``.
        terminal: force the terminal (bar) or not (summary line); None = whether stderr is a terminal.
        total_note: a word after the total when it is an upper bound (``"at most"``), or "".
    """

    def __init__(self, label: str, unit: str = "points", enabled: bool = True, terminal: bool | None = None,
                 total_note: str = "") -> None:
        self.label, self.unit, self.enabled, self.total_note = label, unit, enabled, total_note
        self.terminal = sys.stderr.isatty() if terminal is None else terminal
        self.bar: Any = None
        self.task: Any = None
        self.done, self.total, self.t0 = 0, 0, time.monotonic()

    def __enter__(self) -> "ProgressBar":
        self.t0 = time.monotonic()
        if self.enabled and self.terminal:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            self.bar = Progress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(),
                                TextColumn(f"{self.unit}{' (' + self.total_note + ')' if self.total_note else ''}"),
                                TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                TextColumn("{task.description}"), console=Console(stderr=True), transient=False,
                                auto_refresh=False)
            self.bar.__enter__()
        return self

    def update(self, done: int, total: int | None = None, note: str = "") -> None:
        """Record ``done`` of ``total`` (None: unchanged) and redraw; ``note``: what runs now."""
        self.done, self.total = int(done), int(self.total if total is None else total)
        if self.bar is None:
            return
        if self.task is None:   # the first report: the total and what finished before this run
            self.task = self.bar.add_task(note, total=self.total, completed=self.done)
        self.bar.update(self.task, total=self.total, completed=self.done, description=note)
        self.bar.refresh()

    def __call__(self, ev) -> None:
        """A :class:`specsim.sweep.runner.SweepProgress` report (the sweep library's callback)."""
        more = f" (+{len(ev.running) - 1})" if len(ev.running) > 1 else ""
        self.update(ev.done, ev.total, (ev.running[0].label() + more) if ev.running else "")

    def summary(self) -> str:
        """The line printed at the end off a terminal: ``LABEL: done/total UNIT in S s``."""
        return f"{self.label}: {self.done}/{self.total} {self.unit} in {time.monotonic() - self.t0:.1f} s"

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            if self.task is not None:
                self.bar.update(self.task, description="")
            self.bar.__exit__(*exc)
        elif self.enabled and exc[0] is None:
            print(self.summary(), file=sys.stderr)


def counting(progress: Callable[[int, int, str], None] | None, total: int) -> Callable[[str], None] | None:
    """A per-item callback ``tick(label)`` that reports ``progress(done, total, label)`` after each of ``total``
    items (``progress`` such as :meth:`ProgressBar.update`; told ``(0, total, "")`` at once, so the total and
    ETA show from the start); None when ``progress`` is None."""
    if progress is None:
        return None
    progress(0, total, "")
    done = [0]

    def tick(label: str) -> None:
        done[0] += 1
        progress(done[0], total, label)
    return tick


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
    last = [0.0]
    with ProgressBar("run", "requests", terminal=True) as bar:
        bar.update(0, total)

        def report(done: int, n: int, now_s: float) -> None:
            t = time.monotonic()
            if t - last[0] >= 0.1 or done >= n:
                last[0] = t
                bar.update(done, n, f"simulated {now_s:,.1f} s")
        yield report
