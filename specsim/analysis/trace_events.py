"""Per-replica engine steps as Chrome trace events (the JSON that Perfetto and chrome://tracing open).

One process per decode replica (``pid`` = replica index, named ``replica i``); each engine step is a
complete event (``ph: "X"``) on thread 0 from its start to its end, in microseconds of simulated time,
named ``decode`` (``prefill+decode`` when it carried prefill chunk tokens) with the step's record as
``args``; counters (``ph: "C"``) give the running requests, the waiting queue and the KV blocks in use
after each step. Vidur writes its replica schedules the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: Step columns copied into each step event's ``args``.
ARGS_COLUMNS = ("step", "num_running", "num_decode", "batch_tokens", "verified_drafts", "accepted_drafts",
                "emitted_tokens", "prefill_tokens", "capacity", "host_overhead_s", "kv_blocks_used",
                "num_preempted", "num_waiting")
#: Step columns copied too where the frame has them (frames written before they existed lack them).
OPTIONAL_ARGS = ("draft_s", "speculation_s")
#: Counter tracks: name -> step column.
COUNTERS = {"requests": ("num_running", "num_waiting"), "kv_blocks_used": ("kv_blocks_used",)}


def trace_events(steps: pd.DataFrame, title: str = "specsim") -> dict[str, Any]:
    """The Chrome trace-event object of a run's step frame.

    Args:
        steps: the per-step frame (:data:`specsim.engine.records.STEP_COLUMNS`; times in seconds).
        title: shown as each replica process's label.

    Returns:
        ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``; ``ts`` and ``dur`` in
        microseconds of simulated time.

    Raises:
        ValueError: ``steps`` lacks a column of ``replica, start_s, duration_s`` or of :data:`ARGS_COLUMNS`.
    """
    need = {"replica", "start_s", "duration_s", *ARGS_COLUMNS}
    missing = need - set(steps.columns)
    if missing:
        raise ValueError(f"step frame lacks columns {sorted(missing)}")
    events: list[dict[str, Any]] = []
    for rep in sorted(int(r) for r in pd.unique(steps.replica)):
        events.append({"name": "process_name", "ph": "M", "pid": rep, "tid": 0, "args": {"name": f"replica {rep}"}})
        events.append({"name": "process_labels", "ph": "M", "pid": rep, "tid": 0, "args": {"labels": title}})
        events.append({"name": "thread_name", "ph": "M", "pid": rep, "tid": 0, "args": {"name": "engine steps"}})
    start = steps.start_s.to_numpy(float)
    ts = np.round(start * 1e6, 3)                                             # (S,) microseconds
    dur = np.round((start + steps.duration_s.to_numpy(float)) * 1e6, 3) - ts  # (S,) ends rounded once
    rows = steps[[*ARGS_COLUMNS, *(c for c in OPTIONAL_ARGS if c in steps.columns)]].to_dict("records")
    for i, (rep, pre) in enumerate(zip(steps.replica.to_numpy(), steps.prefill_tokens.to_numpy())):
        args = {k: _plain(v) for k, v in rows[i].items()}
        events.append({"name": "prefill+decode" if pre > 0 else "decode", "cat": "step", "ph": "X",
                       "ts": float(ts[i]), "dur": float(dur[i]), "pid": int(rep), "tid": 0, "args": args})
        end = float(ts[i] + dur[i])
        for name, cols in COUNTERS.items():
            events.append({"name": name, "ph": "C", "ts": end, "pid": int(rep),
                           "args": {c: _plain(rows[i][c]) for c in cols}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": title, "time": "simulated seconds x 1e6"}}


def _plain(v: Any) -> Any:
    """A JSON value: numpy scalars as Python numbers, NaN (not measured) as null (strict JSON has no NaN)."""
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if np.isnan(v) else float(v)
    return v


def write_trace_events(steps: pd.DataFrame, path: str | Path, title: str = "specsim") -> Path:
    """Write :func:`trace_events` of ``steps`` to ``path`` (JSON; parent folders created); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(trace_events(steps, title), separators=(",", ":")) + "\n")
    return p
