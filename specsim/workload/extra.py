"""Optional per-request trace fields beyond the canonical ones: load stages and conversation sessions.

A canonical JSONL line may carry, besides the fields of :mod:`specsim.workload.trace`:

* load stages (written by ``specsim trace synth --stages``, :mod:`specsim.workload.stages`): ``stage`` (int >= 0,
  the stage's index), ``stage_start_s`` and ``stage_end_s`` (the stage's nominal time span in trace seconds,
  start < end). All three or none; every request of a stage has the same span; stages do not overlap.
* conversation sessions (:mod:`specsim.workload.conversations`): ``session_id`` (non-empty string), ``turn``
  (int >= 0) and ``think_s`` (seconds >= 0, the user's think time before this turn). Turns of one session appear
  in file order 0, 1, 2, ...; a turn k >= 1 is issued ``think_s`` after turn k-1 completes (its ``arrival_s`` is
  the session's first arrival, kept for the file's arrival order), and its prompt holds the whole previous
  context (prompt and output of turn k-1) followed by the new user message.

They travel in :attr:`specsim.workload.trace.Trace.extra` as ``{field: (N,) array}`` (absent fields get the
defaults of :data:`EXTRA_FIELDS`). This module owns their names, types and rules, so the trace format needs
only call-site hooks.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from specsim.errors import MAX_SIM_TIME_S, SpecsimInputError

#: field -> (kind, default for a line without it, numpy dtype)
EXTRA_FIELDS: dict[str, tuple[str, object, object]] = {
    "stage": ("int", -1, np.int64), "stage_start_s": ("number", np.nan, np.float64),
    "stage_end_s": ("number", np.nan, np.float64),
    "session_id": ("str", None, object), "turn": ("int", -1, np.int64), "think_s": ("number", np.nan, np.float64),
}
STAGE_FIELDS = ("stage", "stage_start_s", "stage_end_s")
SESSION_FIELDS = ("session_id", "turn", "think_s")


def _value(obj: Mapping, key: str, src: str, line: int):
    kind = EXTRA_FIELDS[key][0]
    v = obj[key]
    if kind == "str":
        ok = type(v) is str and v != ""
    elif kind == "int":
        ok = type(v) is int and v >= 0
    else:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and v >= 0
    if not ok:
        want = {"str": "a non-empty string", "int": "an int >= 0", "number": "a finite number >= 0"}[kind]
        raise SpecsimInputError(src, line, key, want, repr(v)[:40])
    return v


class ExtraReader:
    """Collects the optional fields of :data:`EXTRA_FIELDS` line by line (type-checked, naming the line)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.rows: list[dict] = []
        self.seen = False

    def read(self, obj: Mapping, line: int) -> None:
        """Read one line's extra fields (a group's fields come together: all of stage or all of session)."""
        row = {}
        for group in (STAGE_FIELDS, SESSION_FIELDS):
            have = [k for k in group if k in obj]
            if have and len(have) != len(group):
                missing = next(k for k in group if k not in obj)
                raise SpecsimInputError(self.src, line, missing, f"all of {', '.join(group)} together",
                                        f"only {', '.join(have)}")
            row.update({k: _value(obj, k, self.src, line) for k in have})
        self.rows.append(row)
        self.seen = self.seen or bool(row)

    def columns(self) -> dict[str, np.ndarray] | None:
        """``{field: (N,) array}`` of the fields any line had (None when no line had one)."""
        if not self.seen:
            return None
        present = {k for r in self.rows for k in r}
        return {k: np.array([r.get(k, EXTRA_FIELDS[k][1]) for r in self.rows], dtype=EXTRA_FIELDS[k][2])
                for k in EXTRA_FIELDS if k in present}


def normalise(extra: Mapping[str, object] | None, n: int, source: str,
              arrival: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Copies of ``extra``'s columns as read-only (N,) arrays of their dtypes, checked (:func:`check`; ``arrival``:
    the requests' (N,) arrival times, seconds, each inside its stage's span)."""
    if not extra:
        return {}
    out = {}
    for k, v in extra.items():
        if k not in EXTRA_FIELDS:
            raise SpecsimInputError(source, None, k, f"one of {', '.join(EXTRA_FIELDS)}", "an unknown column")
        a = np.array(v, dtype=EXTRA_FIELDS[k][2])
        if a.ndim != 1 or a.shape[0] != n:
            raise SpecsimInputError(source, None, k, f"a 1-D array of length {n}", f"shape {a.shape}")
        out[k] = a
    check(out, source, arrival)
    for a in out.values():
        a.flags.writeable = False
    return out


def check(cols: Mapping[str, np.ndarray], source: str, arrival: np.ndarray | None = None) -> None:
    """Rules across lines: one span per stage, stages not overlapping, a request's arrival (``arrival``, when given)
    inside its stage's span [start, end) (a line labelled stage 0 of [0, 1) arriving at 5 s was counted in stage
    0); session turns 0, 1, ... in order, a session's think times within specsim's bound on simulated time
    (:data:`specsim.errors.MAX_SIM_TIME_S`)."""
    if "stage" in cols and arrival is not None:
        s, a, b, t = cols["stage"], cols["stage_start_s"], cols["stage_end_s"], np.asarray(arrival, np.float64)
        tol = 1e-9 * np.maximum(1.0, np.abs(b))
        out = np.flatnonzero((s >= 0) & ((t < a - tol) | (t >= b + tol)))
        if out.size:
            i = int(out[0])
            raise SpecsimInputError(source, i + 1, "arrival_s", f"an arrival inside its stage {int(s[i])}'s span "
                                    f"[{a[i]:g}, {b[i]:g}) s", f"{t[i]:g}")
    if "stage" in cols:
        spans: dict[int, tuple[float, float, int]] = {}
        for i, (s, a, b) in enumerate(zip(cols["stage"], cols["stage_start_s"], cols["stage_end_s"])):
            if s < 0:
                continue
            if not b > a:
                raise SpecsimInputError(source, i + 1, "stage_end_s", f"> stage_start_s = {a}", str(b))
            first = spans.setdefault(int(s), (float(a), float(b), i + 1))
            if first[:2] != (a, b):
                raise SpecsimInputError(source, i + 1, "stage_start_s", f"the span of stage {s} on line {first[2]} "
                                        f"[{first[0]}, {first[1]})", f"[{a}, {b})")
        ordered = sorted(spans.values())
        for (a0, b0, l0), (a1, _, l1) in zip(ordered, ordered[1:]):
            if a1 < b0:
                raise SpecsimInputError(source, l1, "stage_start_s", f">= {b0}, the end of the stage on line {l0}",
                                        str(a1))
    if "session_id" in cols:
        last: dict[str, int] = {}
        thought: dict[str, float] = {}
        for i, (sid, turn, think) in enumerate(zip(cols["session_id"], cols["turn"], cols["think_s"])):
            if sid is None:
                continue
            want = last.get(sid, -1) + 1
            if turn != want:
                raise SpecsimInputError(source, i + 1, "turn", f"{want} (turns of session {sid!r} in order 0, 1, ...)",
                                        str(turn))
            last[sid] = int(turn)
            thought[sid] = thought.get(sid, 0.0) + (float(think) if turn > 0 and np.isfinite(think) else 0.0)
            if thought[sid] > MAX_SIM_TIME_S:      # its later turns could never be issued within simulated time
                raise SpecsimInputError(source, i + 1, "think_s", f"think times of session {sid!r} summing to at most "
                                        f"{MAX_SIM_TIME_S:g} s (specsim's bound on simulated time)",
                                        f"{thought[sid]:g} s by turn {turn}")


def json_fields(extra: Mapping[str, np.ndarray], i: int) -> str:
    """The JSON text of request ``i``'s extra fields with a leading comma, or "" (absent values left out)."""
    import json

    parts = []
    for k, a in extra.items():
        v = a[i]
        if v is None or (isinstance(v, float) and np.isnan(v)) or (EXTRA_FIELDS[k][0] == "int" and v < 0):
            continue
        v = v.item() if hasattr(v, "item") else v
        parts.append(f',"{k}":{json.dumps(v)}')
    return "".join(parts)


def conversation_counts(trace) -> np.ndarray | None:
    """How many conversations the first n requests of ``trace`` hold, for every n: the closed loop's units of work
    (a user runs a whole conversation before taking the next, :mod:`specsim.engine.sessions`).

    A conversation starts at a session's first line (turn 0) and at every request without a ``session_id``: the
    rule of ``Sessions.starts``, whose length the run checks against twice the users. A count only grows with n,
    since the first n requests of a session trace keep each conversation's first turns.

    Returns:
        (N + 1,) int64, element n the conversations among the first n requests (element 0 is 0); None when the
        trace has no session fields.
    """
    extra = getattr(trace, "extra", None) or {}
    if "session_id" not in extra:
        return None
    seen: set[str] = set()
    first = np.zeros(len(extra["session_id"]), np.int64)
    for i, sid in enumerate(extra["session_id"].tolist()):
        first[i] = sid is None or sid not in seen
        seen.add(sid)
    return np.r_[np.int64(0), np.cumsum(first)]
