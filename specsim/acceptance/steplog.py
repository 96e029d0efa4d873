"""The step-log format: what happened at every (step, request) of a speculative-decoding run.

Written by the simulator (``specsim run --out``), by the torch backend for real runs, and by any other
engine that wants to use ``specsim calibrate`` / ``specsim fit``. One Parquet file, one row per
(step, running request), columns:

=================  ==============  ============================================================
column             type            meaning
=================  ==============  ============================================================
step               int64           engine step index of the replica (0-based)
replica            int64           replica index (0 for a single engine)
time_s             float64         step start time, seconds (simulated or wall clock)
step_time_s        float64         duration of the step, seconds
request_id         string          the request's id
domain             string          the request's domain (chat, code, math, ...)
gamma              int64           drafts proposed for this request this step
verify_len         int64           drafts sent to verification, 0..gamma (l_r)
num_accepted       int64           verified drafts accepted (0..verify_len); emitted = num_accepted + 1
conf_raw           list<float64>   raw drafter confidences c_1..c_gamma
conf               list<float64>   calibrated confidences (may equal conf_raw)
=================  ==============  ============================================================

``conf_raw`` holds exactly ``gamma`` values (a row that drafts nothing, an empty list or null), each a
probability: a finite number in [0, 1] (not percent, not logits); exactly 0 and 1 are accepted
(calibration clips them to [1e-6, 1 - 1e-6] before the logit). :func:`read_step_log` refuses any other
value, naming the file, the row (``line``, 1-based) and the position.

Only what a command reads is required: ``specsim calibrate`` reads request_id, gamma, verify_len,
num_accepted and conf_raw (:data:`CALIBRATION_COLUMNS`), ``specsim fit`` those and domain
(:data:`FIT_COLUMNS`); step and replica order a request's rows where present (the file's order otherwise);
time_s, step_time_s and conf are not read by either. Commands that read a run's timing check every column.

Outcome labels: the prefix-accepted label of draft position k (1-based) is known when k <= verify_len
(label = k <= num_accepted) or when a rejection happened before it (num_accepted < verify_len, then the
label is 0 for every k > num_accepted); otherwise it is unknown. Runs that verify every drafted position
(static full-gamma) label every position; adaptive runs label only a biased subset.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError, plain

COLUMNS = {
    "step": "int64", "replica": "int64", "time_s": "float64", "step_time_s": "float64",
    "request_id": "string", "domain": "string", "gamma": "int64", "verify_len": "int64",
    "num_accepted": "int64", "conf_raw": "list", "conf": "list",
}
#: The columns calibration reads (:func:`specsim.acceptance.calibration.calibrate_step_log`, ``specsim calibrate``):
#: a hand-built log needs no others. ``step`` (and ``replica``) are read where present: without them a
#: request's rows are taken in the order of the file.
CALIBRATION_COLUMNS = ("request_id", "gamma", "verify_len", "num_accepted", "conf_raw")
#: The columns ``specsim fit`` reads (:func:`specsim.acceptance.fitting.write_fit`): calibration's and the domain.
FIT_COLUMNS = CALIBRATION_COLUMNS + ("domain",)
#: What a confidence must be (the words of the errors that refuse one).
PROBABILITIES = "values in [0, 1] (probabilities, not percent or logits)"


def write_step_log(df: pd.DataFrame, path: str | Path) -> None:
    """Write a step log (columns as in the module docstring) to Parquet.

    Raises:
        SpecsimInputError: a required column is missing.
    """
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SpecsimInputError(str(path), None, missing[0], "all step-log columns " + ", ".join(COLUMNS))
    df.to_parquet(path, index=False)


def check_columns(df: pd.DataFrame, source: str | None, columns: Sequence[str]) -> None:
    """Raise SpecsimInputError naming ``source`` and every one of ``columns`` that ``df`` lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise SpecsimInputError(source, None, ", ".join(missing), "the step-log columns " + ", ".join(columns)
                                + " (format: specsim.acceptance.steplog)", "no column " + ", ".join(missing))


def check_step_log(df: pd.DataFrame, source: str | None = "df", columns: Sequence[str] = tuple(COLUMNS)) -> None:
    """Validate a step-log frame: ``columns`` present, counts integers with 0 <= num_accepted <= verify_len <=
    gamma, and (where ``conf_raw`` is among ``columns``) :func:`check_confidences`.

    Args:
        df: the frame.
        source: the file (or argument) named in the errors.
        columns: the columns the caller reads (every column of the format by default).

    Raises:
        SpecsimInputError: naming every missing column, else the first bad row (``line``, 1-based) and its field.
    """
    check_columns(df, source, columns)
    counts = [c for c in ("gamma", "verify_len", "num_accepted") if c in columns]
    for c in counts:
        x = pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(x) | (x != np.round(x))
        if bad.any():
            i = int(np.argmax(bad))
            raise SpecsimInputError(source, i + 1, c, "an integer", plain(df[c].to_numpy()[i]))
    if len(counts) == 3:
        v, a, g = (df[c].to_numpy() for c in ("verify_len", "num_accepted", "gamma"))
        bad = np.flatnonzero((v < 0) | (v > g) | (a < 0) | (a > v))
        if bad.size:
            i = int(bad[0])
            raise SpecsimInputError(source, i + 1, "verify_len/num_accepted",
                                    "0 <= num_accepted <= verify_len <= gamma",
                                    f"{int(a[i])}, {int(v[i])}, {int(g[i])}")
    if "conf_raw" in columns:
        check_confidences(df["conf_raw"], df["gamma"].to_numpy(), source)


def read_step_log(path: str | Path, columns: Sequence[str] = tuple(COLUMNS)) -> pd.DataFrame:
    """Read and validate a step log (:func:`check_step_log`).

    Args:
        path: the Parquet file.
        columns: the columns the caller needs (every column of the format by default).

    Raises:
        SpecsimInputError: unreadable file, missing columns (all named), a count that is no integer,
            verify_len outside [0, gamma], num_accepted outside [0, verify_len], a conf_raw that is no list of
            gamma values, or a conf_raw value that is not a number in [0, 1] (naming the first bad row as
            ``line``, 1-based).
    """
    if not Path(path).is_file():
        raise SpecsimInputError(str(path), None, None, "a Parquet step log",
                                "a folder" if Path(path).is_dir() else "no such file")
    try:
        df = pd.read_parquet(path)
    except (OSError, ValueError) as e:
        raise SpecsimInputError(str(path), None, None, "a Parquet step log", str(e)[:80]) from None
    check_step_log(df, str(path), columns)
    return df


def _row_lengths(col: pd.Series) -> np.ndarray:
    """(N,) number of values in each row of a list column: 0 for a null row, -1 for a row that is no list."""
    return np.fromiter((0 if v is None else len(v) if isinstance(v, (list, tuple, np.ndarray)) and np.ndim(v) == 1
                        else -1 for v in col.to_numpy()), np.int64, len(col))


def check_confidences(col: pd.Series, gamma: np.ndarray, source: str | None) -> None:
    """Check a ``conf_raw`` column: each row a list of exactly ``gamma`` values, each a finite number in [0, 1].

    Args:
        col: the list column, one list per row.
        gamma: (N,) drafts proposed per row (the ``gamma`` column).
        source: the file (or argument) named in the error.

    Raises:
        SpecsimInputError: naming ``source``, the row (``line``, 1-based) and the field of the first row that is
            no list or holds a number of values other than its gamma, else of the first value that is NaN,
            infinite or outside [0, 1] (confidences in percent or as logits), with its position.
    """
    lengths = _row_lengths(col)
    gamma = np.asarray(gamma)
    wrong = np.flatnonzero(lengths != gamma)
    if wrong.size:
        i = int(wrong[0])
        value = col.to_numpy()[i]
        got = str(lengths[i]) if lengths[i] >= 0 else plain(value)
        raise SpecsimInputError(source, i + 1, "conf_raw", f"{'' if lengths[i] >= 0 else 'a list of '}gamma "
                                f"({int(gamma[i])}) values", got)
    if lengths.sum() == 0:
        return
    try:
        flat = np.concatenate([np.asarray(v, dtype=float) for v in col.to_numpy() if v is not None])
    except (TypeError, ValueError):                                 # a value that is no number
        flat = np.concatenate([pd.to_numeric(pd.Series(v, dtype=object), errors="coerce").to_numpy(float)
                               for v in col.to_numpy() if v is not None])
    bad = ~((flat >= 0.0) & (flat <= 1.0))                          # NaN is bad too
    if bad.any():
        j = int(np.argmax(bad))
        ends = np.cumsum(lengths)
        row = int(np.searchsorted(ends, j, side="right"))
        k = j - int(ends[row] - lengths[row])
        raise SpecsimInputError(source, row + 1, "conf_raw", PROBABILITIES,
                                f"{plain(col.to_numpy()[row][k])} at position {k + 1}")


def read_step_logs(paths: Sequence[str | Path], columns: Sequence[str] = tuple(COLUMNS)) -> pd.DataFrame:
    """Read several step logs (:func:`read_step_log` each, requiring ``columns``) into one frame.

    ``request_id`` becomes ``"<file index>:<request_id>"`` (a string), so requests of different runs never
    collide when the logs are pooled (``specsim fit`` and ``specsim calibrate``).

    Raises:
        SpecsimInputError: no paths, or as :func:`read_step_log` for the first bad file.
    """
    if not paths:
        raise SpecsimInputError(None, None, "logs", "at least one step-log file", "none")
    frames = [df.assign(request_id=f"{i}:" + df["request_id"].astype(str))
              for i, df in enumerate(read_step_log(p, columns) for p in paths)]
    return pd.concat(frames, ignore_index=True)


def row_order(df: pd.DataFrame) -> np.ndarray:
    """(N,) int64 step of each row: the ``step`` column, or the row's position in the frame where there is none
    (a hand-built log without steps: a request's rows in the file's order)."""
    return df["step"].to_numpy(dtype=np.int64) if "step" in df.columns else np.arange(len(df), dtype=np.int64)

def prefix_labels(verify_len: np.ndarray, num_accepted: np.ndarray, gamma: int) -> tuple[np.ndarray, np.ndarray]:
    """Prefix-accepted labels and their known-mask per draft position.

    Args:
        verify_len: (N,) drafts verified per row.
        num_accepted: (N,) drafts accepted per row.
        gamma: number of draft positions.

    Returns:
        (label, known): two (N, gamma) bool arrays; ``label[i, k-1]`` is True iff drafts 1..k were all
        accepted, meaningful only where ``known`` is True (see the module docstring).
    """
    k = np.arange(1, gamma + 1)[None, :]                     # (1, gamma)
    v = np.asarray(verify_len)[:, None]
    a = np.asarray(num_accepted)[:, None]
    label = k <= a
    known = (k <= v) | (a < v)
    return label, known
