"""Converters: public traces and tables into a :class:`~specsim.workload.trace.Trace`.

Every converter returns a :class:`~specsim.workload.trace.Trace` (or plain arrays) and raises
:class:`~specsim.errors.SpecsimInputError` naming the file, the 1-based line, the column and what was expected.
The public traces are described in ``../shared/data/SOURCES.md``.

* :func:`convert_azure`: the Azure LLM inference 2023 CSVs (SOURCES.md section 1a); wall-clock times by
  :func:`specsim.workload.wall_times.parse_wall_times` (ISO 8601 forms, exact integer nanoseconds).
* :func:`convert_mooncake`: the Mooncake FAST'25 conversation JSONL (section 1b), keeping its ``hash_ids``.
* :func:`convert_burstgpt`: the BurstGPT trace (Wang et al., "BurstGPT: A Real-world Workload Dataset
  to Optimize LLM Serving Systems", arXiv 2401.17644; files ``BurstGPT_1.csv`` ... of the HPMLL/BurstGPT
  GitHub releases). Its published columns are ``Timestamp`` (seconds from the start of the trace),
  ``Model`` (``ChatGPT`` or ``GPT-4``), ``Request tokens``, ``Response tokens``, ``Total tokens`` and
  ``Log Type`` (``Conversation log`` or ``API log``); the project's README says rows whose ``Response
  tokens`` is 0 are failed requests (the ``_without_fails`` files leave them out).
* :func:`convert_table`: a CSV or JSONL file in any layout, read through a column map such as
  ``arrival_s=ts,prompt_tokens=in,output_tokens=out`` with a time unit and an origin.
* :func:`load_lengths_csv`: (prompt, output) length pairs from a CSV such as the ShareGPT lengths file
  (columns ``num_prefill_tokens,num_decode_tokens``), for :func:`specsim.workload.synth.synth_trace`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from specsim.errors import MAX_SIM_TIME_S, SpecsimInputError, plain
from specsim.workload.jsonl import MAX_COUNT, _describe, _get, _get_hash_ids, _iter_json_lines
from specsim.workload.time_units import TIME_UNITS, check_time_unit
from specsim.workload.trace import DEFAULT_DOMAIN, Trace
from specsim.workload.wall_times import _first_bad, parse_wall_times


def convert_azure(path, domain: str | None = None) -> Trace:
    """Convert an Azure LLM inference 2023 CSV (SOURCES.md section 1a) to a :class:`Trace`.

    ``TIMESTAMP`` (wall clock ``YYYY-MM-DD HH:MM:SS.fffffff``, 100 ns resolution, or any ISO 8601
    form :func:`parse_wall_times` accepts: ``T``, ``Z``, offsets, no fraction or one of any
    length) becomes seconds from the first row, computed exactly in integer nanoseconds before
    one division by 1e9;
    ``ContextTokens`` -> prompt_tokens, ``GeneratedTokens`` -> output_tokens; request ids are the
    0-based row indices.

    Args:
        path: the CSV file (header ``TIMESTAMP,ContextTokens,GeneratedTokens``).
        domain: the domain of every request; default ``"code"`` when the file name contains "code",
            else ``"chat"``.

    Raises:
        SpecsimInputError: a missing column, an unparsable timestamp, a file mixing zone-aware and
            naive timestamps, a non-integer or < 1 token count, or a timestamp earlier than the
            row before, naming the 1-based file line.
    """
    path = Path(path)
    src = str(path)
    if domain is None:
        domain = "code" if "code" in path.name.lower() else "chat"
    try:
        df = _without_blank_rows(pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False))
    except FileNotFoundError:
        raise SpecsimInputError(src, None, None, "a readable file", "no such file") from None
    except OSError as e:                                   # a folder, no permission
        raise SpecsimInputError(src, None, None, "a readable file", e.strerror or type(e).__name__) from None
    except UnicodeDecodeError:
        raise SpecsimInputError(src, None, None, "an Azure LLM trace CSV (UTF-8 text)", "undecodable bytes") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise SpecsimInputError(src, None, None, "an Azure LLM trace CSV", " ".join(str(e).split())[:120]) from None
    for col in ("TIMESTAMP", "ContextTokens", "GeneratedTokens"):
        if col not in df.columns:
            raise SpecsimInputError(src, 1, col, "a header column", f"columns {list(df.columns)}")
    if len(df) == 0:
        raise SpecsimInputError(src, 2, None, "at least one data row", "only a header")
    line = df.attrs["lines"]  # header is line 1
    ns = parse_wall_times(df["TIMESTAMP"].tolist(), src, line, "TIMESTAMP")  # (N,) int64 from row 1
    i = _first_bad(np.r_[False, np.diff(ns) < 0])
    if i is not None:
        raise SpecsimInputError(src, int(line[i]), "TIMESTAMP", "times that never decrease",
                                f"{df['TIMESTAMP'].iloc[i]!r} after {df['TIMESTAMP'].iloc[i - 1]!r}")
    counts = []
    for col in ("ContextTokens", "GeneratedTokens"):
        s = df[col].str.strip()
        ok = s.str.fullmatch(r"\d{1,15}").to_numpy()
        v = np.where(ok, pd.to_numeric(s.where(ok, "0")).to_numpy(), 0).astype(np.int64)
        i = _first_bad(v < 1)
        if i is not None:
            raise SpecsimInputError(src, int(line[i]), col, "an int >= 1", repr(df[col].iloc[i]))
        counts.append(v)
    arrival = ns / 1e9
    n = len(df)
    return Trace(np.array([str(k) for k in range(n)], dtype=object), arrival, counts[0], counts[1],
                 np.full(n, domain, dtype=object), source=src)


SLOTS = ("burst", "spread")
# Tokens per Mooncake hash id: "remapped hashes of 512-token prefix blocks" (SOURCES.md section 1b);
# every one of the 12,031 conversation requests has exactly ceil(input_length / 512) ids.
MOONCAKE_BLOCK_TOKENS = 512


def convert_mooncake(path, slots: str = "burst", domain: str = "chat") -> Trace:
    """Convert a Mooncake FAST'25 trace JSONL (SOURCES.md section 1b) to a :class:`Trace`.

    Fields: ``timestamp`` (ms since the trace start: an int as in the published files, or a
    float with a fraction of any length; at most 2^53), ``input_length`` -> prompt_tokens, ``output_length`` ->
    output_tokens; arrivals are seconds from the first timestamp; ids are the 0-based request
    indices. ``hash_ids`` (hashes of 512-token prefix blocks; equal ids at a position mean a
    shareable KV prefix) are kept as :attr:`Trace.hash_ids` with ``hash_block_tokens`` =
    :data:`MOONCAKE_BLOCK_TOKENS` (512, SOURCES.md section 1b), for the prefix cache; a line
    without ``hash_ids`` gets None (no prefix information).

    The timestamps are quantised to about 3 s slots (about 10 requests share each). ``slots``:

    * ``"burst"``: keep each slot's requests simultaneous at the slot's timestamp.
    * ``"spread"``: the k-th of the n requests of a slot starting at t arrives at t + w * k / n,
      where w (the slot width) is the gap to the next distinct timestamp, or the median of those
      gaps for the last slot (0 when the trace has one timestamp). Deterministic, order kept.

    Raises:
        SpecsimInputError: an unknown ``slots``, or any line with malformed JSON, a missing or
            wrongly typed field, a negative or decreasing timestamp, a length < 1, ``hash_ids`` that
            is not a non-empty list of ints ceil(input_length / 512) long (naming the line).
    """
    if slots not in SLOTS:
        raise SpecsimInputError(None, None, "slots", f"one of {SLOTS}", repr(slots))
    path = Path(path)
    src = str(path)
    ts, pro, out, hashes = [], [], [], []
    prev, prev_line = 0, 0
    for line, obj in _iter_json_lines(path):
        t = obj.get("timestamp")
        if type(t) not in (int, float) or not 0 <= t <= MAX_COUNT:   # NaN fails the comparison
            got = "nothing (field missing)" if "timestamp" not in obj else _describe(t)
            raise SpecsimInputError(src, line, "timestamp",
                                    "a number of ms in [0, 2^53] (an int, or a float with a fraction)",
                                    got)
        if t < prev:
            raise SpecsimInputError(src, line, "timestamp",
                                    f"a value >= {prev} (the timestamp on line {prev_line})", str(t))
        prev, prev_line = t, line
        ts.append(t)
        pro.append(_get(obj, "input_length", "count", src, line))
        out.append(_get(obj, "output_length", "count", src, line))
        hashes.append(_get_hash_ids(obj["hash_ids"], MOONCAKE_BLOCK_TOKENS, pro[-1], src, line)
                      if "hash_ids" in obj else None)
    exact = all(type(t) is int for t in ts)
    t_ms = np.array(ts, dtype=np.int64 if exact else np.float64)  # (N,) ms, ints kept exact
    if slots == "burst":
        arrival_ms = (t_ms - t_ms[0]).astype(np.float64)
    else:
        starts, first, counts = np.unique(t_ms, return_index=True, return_counts=True)
        gaps = np.diff(starts)
        width = np.r_[gaps, np.median(gaps) if gaps.size else 0.0].astype(np.float64)
        rank = np.arange(t_ms.size) - np.repeat(first, counts)  # position of a request in its slot
        arrival_ms = (np.repeat(starts - starts[0], counts)
                      + np.repeat(width / counts, counts) * rank)
    n = t_ms.size
    block = np.array([0 if h is None else MOONCAKE_BLOCK_TOKENS for h in hashes], dtype=np.int64)
    return Trace(np.array([str(k) for k in range(n)], dtype=object), arrival_ms / 1000.0,
                 np.array(pro, dtype=np.int64), np.array(out, dtype=np.int64),
                 np.full(n, domain, dtype=object), source=src, hash_ids=tuple(hashes),
                 hash_block_tokens=block)


BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
FAILED_RULES = ("drop", "keep")


def _without_blank_rows(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the rows of blank lines, each kept row's 1-based file line in ``attrs["lines"]`` (header 1)."""
    keep = ~(df == "").all(axis=1).to_numpy() if len(df.columns) else np.ones(len(df), bool)
    out = df[keep].reset_index(drop=True)
    out.attrs["lines"] = (np.arange(len(df)) + 2)[keep]
    return out


def _read_csv(path: Path, what: str) -> pd.DataFrame:
    """Every cell of a CSV as a string (header = line 1; blank lines skipped, ``attrs["lines"]`` the rows' file
    lines); SpecsimInputError when unreadable or empty."""
    src = str(path)
    try:
        df = _without_blank_rows(pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False))
    except FileNotFoundError:
        raise SpecsimInputError(src, None, None, "a readable file", "no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise SpecsimInputError(src, None, None, what, str(e).strip()) from None
    if len(df) == 0:
        raise SpecsimInputError(src, 2, None, "at least one data row", "only a header")
    df.columns = [str(c).strip() for c in df.columns]
    return df


def _numbers(s: pd.Series, src: str, col: str, lines: np.ndarray, *, integer: bool,
             minimum: float, hint: str = "") -> np.ndarray:
    """(N,) float64 (or int64 when ``integer``) values of a string column, each >= ``minimum``.

    Integral text such as ``12`` passes as an integer; anything else (text, NaN, inf, a fraction where an integer
    is needed, a value below ``minimum``) raises naming the first bad line, an empty one as ``missing`` (+ ``hint``).
    """
    v = pd.to_numeric(s.astype(str).str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(v) | (v < minimum)
    if integer:
        bad |= np.where(np.isfinite(v), (v != np.floor(v)) | (v > MAX_COUNT), True)
    if bad.any():
        i, value, low = int(np.argmax(bad)), s.iloc[int(np.argmax(bad))], f"{minimum:g}" if np.isfinite(minimum) else ""
        kind = f"an int in [{low}, 2^53]" if integer else "a finite number" + (f" >= {low}" if low else "")
        missing = value is None or str(value).strip().lower() in ("", "nan", "none", "null")
        raise SpecsimInputError(src, int(lines[i]), col, kind + hint, "missing" if missing else plain(value))
    return v.astype(np.int64) if integer else v


def convert_burstgpt(path, *, model: str | None = None, failed: str = "drop",
                     domain: str = DEFAULT_DOMAIN) -> tuple[Trace, dict]:
    """Convert a BurstGPT CSV (columns in the module docstring) to a :class:`Trace`.

    ``Timestamp`` (seconds from the trace start) becomes ``arrival_s`` measured from the first kept
    row; ``Request tokens`` -> prompt_tokens, ``Response tokens`` -> output_tokens; ``request_id`` is
    the row's 0-based index among the data rows of the file (so ids point back to the file even after
    filtering). Rows are put in arrival order by a stable sort (the releases are in order; a file that
    is not stays convertible). ``Total tokens`` and ``Log Type`` are read but not used.

    Args:
        path: the CSV file.
        model: keep only rows whose ``Model`` equals this (e.g. ``"GPT-4"``); None keeps all.
        failed: what to do with failed rows (``Response tokens`` = 0): ``"drop"`` leaves them out
            (counted in the returned info); ``"keep"`` keeps them as requests with output_tokens = 1
            (the prompt is still prefilled; 1 is the least the canonical format allows) and the id
            ``"<row>-failed"``, so they stay visible in the records.
        domain: the domain of every request.

    Returns:
        ``(trace, info)``; info counts ``rows`` (data rows in the file), ``model_filtered`` (rows left
        out by ``model``), ``failed`` (failed rows among those of the model), ``dropped_failed`` and
        ``kept``.

    Raises:
        SpecsimInputError: a missing column, a non-numeric or negative Timestamp, a token count that
            is not an int (>= 1 for Request tokens, >= 0 for Response tokens), an unknown ``failed``,
            or no row left (naming the models the file has).
    """
    if failed not in FAILED_RULES:
        raise SpecsimInputError(None, None, "failed", f"one of {FAILED_RULES}", repr(failed))
    path = Path(path)
    src = str(path)
    df = _read_csv(path, "a BurstGPT CSV")
    for col in ("Timestamp", "Model", "Request tokens", "Response tokens"):
        if col not in df.columns:
            raise SpecsimInputError(src, 1, col, f"a header column (BurstGPT columns {list(BURSTGPT_COLUMNS)})",
                                    f"columns {list(df.columns)}")
    lines = df.attrs["lines"]
    rows = np.arange(len(df))
    models = df["Model"].str.strip()
    keep = np.ones(len(df), dtype=bool) if model is None else (models == model).to_numpy()
    if not keep.any():
        raise SpecsimInputError(src, None, "Model", f"rows of model {model!r}",
                                f"only models {sorted(set(models))}")
    df, lines, rows = df[keep], lines[keep], rows[keep]
    ts = _numbers(df["Timestamp"], src, "Timestamp", lines, integer=False, minimum=0)
    prompt = _numbers(df["Request tokens"], src, "Request tokens", lines, integer=True, minimum=1)
    output = _numbers(df["Response tokens"], src, "Response tokens", lines, integer=True, minimum=0)
    is_failed = output == 0
    ids = np.array([str(r) for r in rows], dtype=object)
    info = {"rows": int(keep.size), "model_filtered": int((~keep).sum()), "failed": int(is_failed.sum())}
    if failed == "drop":
        ok = ~is_failed
        if not ok.any():
            raise SpecsimInputError(src, None, "Response tokens", "at least one row that is not failed "
                                    "(Response tokens > 0); use failed='keep' to keep failed rows",
                                    f"{int(is_failed.sum())} failed rows")
        ts, prompt, output, ids = ts[ok], prompt[ok], output[ok], ids[ok]
        info["dropped_failed"] = info["failed"]
    else:
        output = np.where(is_failed, 1, output)
        ids = np.where(is_failed, np.char.add(ids.astype(str), "-failed").astype(object), ids)
        info["dropped_failed"] = 0
    order = np.argsort(ts, kind="stable")
    info["kept"] = int(order.size)
    n = order.size
    return Trace(ids[order], ts[order] - ts[order][0], prompt[order], output[order],
                 np.full(n, domain, dtype=object), source=src), info


# ---------------------------------------------------------------------------------------------
# Generic tables through a column map

CANONICAL_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens", "domain", "request_id",
                    "prefix_group", "prefix_tokens")
REQUIRED_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")


def parse_column_map(text: str) -> dict[str, str]:
    """Parse ``"arrival_s=ts,prompt_tokens=in,output_tokens=out"`` into {canonical field: source column}.

    Canonical fields are :data:`CANONICAL_FIELDS`; arrival_s, prompt_tokens and output_tokens must be
    mapped. A source column may contain spaces (``prompt_tokens=Request tokens``).

    Raises:
        SpecsimInputError (field ``map``): bad syntax, an unknown or repeated field, a required field
            missing.
    """
    out: dict[str, str] = {}
    for part in text.split(","):
        key, eq, col = (x.strip() for x in part.partition("="))
        if not eq or not key or not col:
            raise SpecsimInputError("--map", None, "map", "field=column pairs separated by commas",
                                    repr(part))
        if key not in CANONICAL_FIELDS:
            raise SpecsimInputError("--map", None, "map", f"fields from {list(CANONICAL_FIELDS)}", repr(key))
        if key in out:
            raise SpecsimInputError("--map", None, "map", "each field once", f"{key!r} twice")
        out[key] = col
    missing = [k for k in REQUIRED_FIELDS if k not in out]
    if missing:
        raise SpecsimInputError("--map", None, "map", f"a column for each of {list(REQUIRED_FIELDS)}",
                                f"none for {missing}")
    if ("prefix_group" in out) != ("prefix_tokens" in out):
        raise SpecsimInputError("--map", None, "map", "prefix_group and prefix_tokens together",
                                f"only {'prefix_group' if 'prefix_group' in out else 'prefix_tokens'}")
    return out


def _read_table(path: Path, fmt: str | None) -> pd.DataFrame:
    """A CSV or JSONL file as a frame of strings and objects (JSONL keeps JSON types); without ``fmt``, JSONL
    where the file's first non-blank character opens an object, whatever its suffix (a log.txt of JSON lines was
    read as a one-column CSV), else CSV."""
    fmt = fmt or ("jsonl" if _opens_object(path) else "csv")
    if fmt == "csv" and _opens_object(path, b"["):
        raise SpecsimInputError(str(path), 1, None, "CSV or JSON lines (one object per line)", "a JSON array")
    if fmt == "csv":
        return _read_csv(path, "a CSV file")
    if fmt != "jsonl":
        raise SpecsimInputError(None, None, "format", "csv or jsonl", repr(fmt))
    lines, objs = [], []
    for line, obj in _iter_json_lines(path):
        lines.append(line)
        objs.append(obj)
    df = pd.DataFrame(objs)
    df.attrs["lines"] = np.array(lines)
    return df


def _opens_object(path: Path, char: bytes = b"{") -> bool:
    """Whether the file's first non-blank character is ``char`` (``{``: a JSON line); False where it cannot be
    read (the CSV reader then names the file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False
    return head[:1] == char


#: A time of day followed by a zone (Z or an offset): a zone-aware date-time.
_ZONE_SUFFIX = r"\d:\d\d(?::\d\d(?:[.,]\d+)?)?\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)\s*$"


def _arrival_seconds(col: pd.Series, unit: str, src: str, name: str, lines: np.ndarray,
                     relative: bool = False, origin_s: float = 0.0,
                     on_note: Callable[[str], None] | None = None) -> np.ndarray:
    """(N,) float64 seconds of an arrival column in ``unit`` (a TIME_UNITS key or ``datetime``); ``relative``:
    from the first arrival, subtracted in the column's own unit before scaling (Unix times in ms lose no digit);
    ``origin_s``: seconds subtracted after (a numeric ``--origin``). A numeric column's seconds are rounded to the
    decimal step float64 resolves at its magnitude (Unix seconds, 1.7e9, hold about 0.24 us: 1700000000.442 -
    1700000000 reads 0.4419999, rounded to 1 us the 0.442 the file wrote), so one log in s, ms or us converts to
    one trace.

    The unit is checked by :func:`specsim.workload.time_units.check_time_unit` (its warnings go to ``on_note``).

    Raises:
        SpecsimInputError: a value that is not a time, or a unit :func:`check_time_unit` refuses (Unix
            milliseconds read as seconds, arrivals denser than a server can accept).
    """
    if unit == "datetime":
        text = col.astype(str).str.strip()
        aware = text.str.contains(_ZONE_SUFFIX, regex=True).to_numpy()
        i = _first_bad(aware != aware[0]) if aware.size else None
        if i is not None:        # naive times would be read as UTC beside zoned ones (the Azure reader refuses it)
            kind = ("zone-aware", "naive")
            raise SpecsimInputError(src, int(lines[i]), name, f"{kind[not aware[0]]} times throughout, as on line "
                                    f"{int(lines[0])} (zone-aware and naive times have no common clock)",
                                    f"{text.iloc[i]!r}, a {kind[not aware[i]]} time")
        t = pd.to_datetime(text, errors="coerce", utc=True, format="mixed")
        bad = t.isna().to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            raise SpecsimInputError(src, int(lines[i]), name, "a date-time such as 2024-05-01 12:00:00.5",
                                    repr(col.iloc[i]))
        ns = t.dt.tz_localize(None).to_numpy().astype("datetime64[ns]").astype(np.int64)
        return (ns - ns.min()) / 1e9 - origin_s  # relative; a numeric origin counts from the earliest time
    if unit not in TIME_UNITS:
        raise SpecsimInputError(None, None, "time_unit", f"one of {[*TIME_UNITS, 'datetime']}", repr(unit))
    raw = _numbers(col, src, name, lines, integer=False, minimum=-math.inf, hint=" in --time-unit units (a date "
                   "and time needs --time-unit datetime)")
    check_time_unit(raw, unit, src, name, lines, on_note)
    sec = ((raw - raw.min()) if relative and raw.size else raw) * TIME_UNITS[unit] - origin_s
    top = np.abs(raw).max() if raw.size else 0.0
    return np.round(sec, int(-np.ceil(np.log10(2 * np.spacing(top) * TIME_UNITS[unit])))) if top > 0 else sec


def _bad_row_mask(df: pd.DataFrame, cmap: dict[str, str], time_unit: str) -> tuple[np.ndarray, dict[int, tuple]]:
    """(N,) bool: rows whose arrival is not a time (a number, or a date-time with ``time_unit`` datetime) or whose
    prompt or output tokens are not an int >= 1, the rules :func:`convert_table` enforces; and for each bad row's
    index, its first bad (column, value)."""
    def numeric(col: str) -> np.ndarray:
        return pd.to_numeric(df[col].astype(str).str.strip(), errors="coerce").to_numpy(dtype=np.float64)

    a = cmap["arrival_s"]
    if time_unit == "datetime":
        arr_bad = pd.to_datetime(df[a].astype(str).str.strip(), errors="coerce", utc=True,
                                 format="mixed").isna().to_numpy()
    else:
        arr_bad = ~np.isfinite(numeric(a))
    checks = [(a, arr_bad)]
    for key in ("prompt_tokens", "output_tokens"):
        v = numeric(cmap[key])
        checks.append((cmap[key], ~np.isfinite(v) | (v < 1) | np.where(np.isfinite(v), v != np.floor(v), True)))
    bad = np.logical_or.reduce([m for _, m in checks])
    first = {int(i): next((col, df[col].iloc[i]) for col, m in checks if m[i]) for i in np.flatnonzero(bad)}
    return bad, first


def convert_table(path, mapping: dict[str, str] | str, *, time_unit: str = "s", origin: str | float = "first",
                  fmt: str | None = None, domain: str = DEFAULT_DOMAIN,
                  on_skip: Callable[[int, str, Any], None] | None = None,
                  on_note: Callable[[str], None] | None = None) -> Trace:
    """Convert a CSV or JSONL file in any layout to a :class:`Trace` through a column map.

    Args:
        path: the file; ``fmt`` ``"csv"`` or ``"jsonl"`` (default: JSONL where the file's first non-blank
            character is ``{``, whatever its suffix; else CSV).
        mapping: {canonical field: source column} or its text form (:func:`parse_column_map`).
        time_unit: unit of the arrival column: ``s``, ``ms``, ``us``, ``ns``, ``min``, ``h``, or
            ``datetime`` (date-time text, parsed by pandas; then ``zero`` means the earliest time).
        origin: ``"first"`` (arrivals from the earliest arrival), ``"zero"`` (the values as they are;
            every one must be >= 0 s) or a number (seconds, in the file's unit after conversion,
            subtracted from every arrival; the results must be >= 0).
        domain: the domain of rows without a mapped domain column.
        on_skip: None (the default): a bad row raises. A callable: rows whose arrival, prompt or output tokens
            break the rules are left out instead, each reported as ``on_skip(line, column, value)`` (1-based file
            line); the rest is converted and checked as usual.
        on_note: called with the text of a warning that the arrivals look like a larger unit than ``time_unit``
            (:mod:`specsim.workload.time_units`); None: :func:`warnings.warn`.

    Rows are put in arrival order by a stable sort (logs are often written in completion order).
    Request ids: the mapped column, else the 0-based data row index in the file.

    Raises:
        SpecsimInputError: a mapped column missing from the file, a value of the wrong kind (naming
            the 1-based file line and the source column), an arrival before the origin, duplicate ids,
            prefix values that break the canonical rules, or arrival times implausible in ``time_unit``
            (:func:`specsim.workload.time_units.check_time_unit`: Unix ms read as seconds, or more than a
            million requests a second, naming the likely unit).
    """
    path = Path(path)
    src = str(path)
    cmap = parse_column_map(mapping) if isinstance(mapping, str) else dict(mapping)
    df = _read_table(path, fmt)
    lines = df.attrs.get("lines", np.arange(len(df)) + 2)
    rows = np.arange(len(df))                     # 0-based data row index in the file: the default request id
    for key, col in cmap.items():
        if col not in df.columns:
            raise SpecsimInputError(src, 1 if fmt != "jsonl" and "lines" not in df.attrs else None, col,
                                    f"a column for {key} (columns: {list(map(str, df.columns))})", "no such column")
    if on_skip is not None:
        bad, why = _bad_row_mask(df, cmap, time_unit)
        for i in np.flatnonzero(bad):
            on_skip(int(lines[i]), *why[i])
        if bad.all():
            raise SpecsimInputError(src, None, None, "at least one row that converts", f"{int(bad.sum())} bad rows")
        df, lines, rows = df[~bad].reset_index(drop=True), np.asarray(lines)[~bad], rows[~bad]
    try:
        origin_s = 0.0 if origin in ("first", "zero") else float(origin)
    except (TypeError, ValueError):
        raise SpecsimInputError(None, None, "origin", "first, zero or a number of seconds", repr(origin)) from None
    arrival = _arrival_seconds(df[cmap["arrival_s"]], time_unit, src, cmap["arrival_s"], lines,
                               relative=origin == "first", origin_s=origin_s, on_note=on_note)
    if (arrival < 0).any():
        i = int(np.argmax(arrival < 0))
        raise SpecsimInputError(src, int(lines[i]), cmap["arrival_s"], f"an arrival at or after the origin "
                                f"({origin})", f"{arrival[i]:g} s from it")
    if (arrival > MAX_SIM_TIME_S).any():    # the trace it writes would be refused by stats and run
        i = int(np.argmax(arrival > MAX_SIM_TIME_S))
        raise SpecsimInputError(src, int(lines[i]), cmap["arrival_s"], f"an arrival within {MAX_SIM_TIME_S:g} s of "
                                f"the origin (specsim's bound on simulated time; --origin first counts from the "
                                f"earliest arrival)", f"{arrival[i]:g} s from the origin ({origin})")
    cols = {k: _numbers(df[cmap[k]], src, cmap[k], lines, integer=True, minimum=1)
            for k in ("prompt_tokens", "output_tokens")}
    n = len(df)
    ids = (_id_texts(df[cmap["request_id"]], src, cmap["request_id"], lines) if "request_id" in cmap
           else np.array([str(k) for k in rows], dtype=object))
    dom = (np.array([str(x) for x in df[cmap["domain"]]], dtype=object) if "domain" in cmap
           else np.full(n, domain, dtype=object))
    empty = np.flatnonzero([d in ("", "nan", "None") for d in dom]) if "domain" in cmap else []
    if len(empty):                              # the file's own line (the Trace would name the request's position)
        raise SpecsimInputError(src, int(lines[empty[0]]), cmap["domain"], "a non-empty domain", repr(dom[empty[0]]))
    extra = {}
    if "prefix_group" in cmap:
        groups = np.array([None if (x is None or str(x) in ("", "nan")) else str(x)
                           for x in df[cmap["prefix_group"]]], dtype=object)
        has = np.array([g is not None for g in groups])
        tok = np.zeros(n, dtype=np.int64)
        if has.any():
            tok[has] = _numbers(df[cmap["prefix_tokens"]][has], src, cmap["prefix_tokens"], lines[has],
                                integer=True, minimum=1)
        extra = {"prefix_group": groups, "prefix_tokens": tok}
    dup = pd.Series(ids).duplicated().to_numpy()
    if dup.any():
        i = int(np.argmax(dup))
        raise SpecsimInputError(src, int(lines[i]), cmap.get("request_id"), "unique request ids", repr(ids[i]))
    order = np.argsort(arrival, kind="stable")
    extra = {k: v[order] for k, v in extra.items()}
    return Trace(ids[order], arrival[order], cols["prompt_tokens"][order], cols["output_tokens"][order],
                 dom[order], source=src, **extra)


def _id_texts(col: pd.Series, src: str, name: str, lines: np.ndarray) -> np.ndarray:
    """(N,) object: each row's request id as text, a JSON integer as its digits (17, not the 17.0 pandas makes of
    an int column with a gap).

    Raises:
        SpecsimInputError: a row without an id (naming its line).
    """
    out = []
    for x, line in zip(col, lines):
        if x is None or x == "" or (isinstance(x, float) and math.isnan(x)):
            raise SpecsimInputError(src, int(line), name, "a request id on every row", "none")
        out.append(str(int(x)) if isinstance(x, float) and x.is_integer() else str(x))
    return np.array(out, dtype=object)


# ---------------------------------------------------------------------------------------------
# Lengths CSVs

#: Column pairs (prompt, output) tried in order when no columns are named.
LENGTH_COLUMN_PAIRS = (("num_prefill_tokens", "num_decode_tokens"), ("prompt_tokens", "output_tokens"),
                       ("input_length", "output_length"), ("Request tokens", "Response tokens"))


def load_lengths_csv(path, columns: tuple[str, str] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(prompt, output) length pairs from a CSV, as two (M,) int64 arrays of values >= 1.

    Args:
        path: a CSV with one row per request.
        columns: (prompt column, output column); default: the first pair of
            :data:`LENGTH_COLUMN_PAIRS` the header has (``num_prefill_tokens,num_decode_tokens`` first,
            the layout of Vidur's and the shared data's ShareGPT lengths file).

    Raises:
        SpecsimInputError: no known column pair, or a length that is not an int >= 1 (naming the line).
    """
    path = Path(path)
    src = str(path)
    df = _read_csv(path, "a lengths CSV")
    pairs = [columns] if columns else LENGTH_COLUMN_PAIRS
    pair = next((p for p in pairs if p[0] in df.columns and p[1] in df.columns), None)
    if pair is None:
        raise SpecsimInputError(src, 1, None, f"one of the column pairs {[','.join(p) for p in pairs]}",
                                f"columns {list(df.columns)}")
    lines = df.attrs["lines"]
    return tuple(_numbers(df[c], src, c, lines, integer=True, minimum=1) for c in pair)  # type: ignore[return-value]
