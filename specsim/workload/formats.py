"""More trace formats: BurstGPT, any CSV/JSONL through a column map, lengths CSVs.

Kept apart from :mod:`specsim.workload.trace` (the canonical format, the Azure and Mooncake converters and the
synthetic generator) so that each module stays one concept; every function here returns a
:class:`~specsim.workload.trace.Trace` or plain arrays and raises :class:`~specsim.errors.SpecsimInputError`
naming the file, the 1-based line, the column and what was expected.

* :func:`convert_burstgpt`: the BurstGPT trace (Wang et al., "BurstGPT: A Real-world Workload Dataset
  to Optimize LLM Serving Systems", arXiv 2401.17644; files ``BurstGPT_1.csv`` ... of the HPMLL/BurstGPT
  GitHub releases). Its published columns are ``Timestamp`` (seconds from the start of the trace),
  ``Model`` (``ChatGPT`` or ``GPT-4``), ``Request tokens``, ``Response tokens``, ``Total tokens`` and
  ``Log Type`` (``Conversation log`` or ``API log``); the project's README says rows whose ``Response
  tokens`` is 0 are failed requests (the ``_without_fails`` files leave them out).
* :func:`convert_table`: a CSV or JSONL file in any layout, read through a column map such as
  ``arrival_s=ts,prompt_tokens=in,output_tokens=out`` with a time unit and an origin.
* :func:`load_lengths_csv`: (prompt, output) length pairs from a CSV such as the ShareGPT lengths file
  (columns ``num_prefill_tokens,num_decode_tokens``), for :func:`specsim.workload.trace.synth_trace`.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError
from specsim.workload.trace import DEFAULT_DOMAIN, Trace

BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
FAILED_RULES = ("drop", "keep")


def _read_csv(path: Path, what: str) -> pd.DataFrame:
    """Every cell of a CSV as a string (header = line 1); SpecsimInputError when unreadable or empty."""
    src = str(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=True)
    except FileNotFoundError:
        raise SpecsimInputError(src, None, None, "a readable file", "no such file") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise SpecsimInputError(src, None, None, what, str(e).strip()) from None
    if len(df) == 0:
        raise SpecsimInputError(src, 2, None, "at least one data row", "only a header")
    df.columns = [str(c).strip() for c in df.columns]
    return df


def _numbers(s: pd.Series, src: str, col: str, lines: np.ndarray, *, integer: bool,
             minimum: float) -> np.ndarray:
    """(N,) float64 (or int64 when ``integer``) values of a string column, each >= ``minimum``.

    Integral text such as ``12`` or ``12.0`` passes as an integer; anything else (text, NaN, inf, a
    fraction where an integer is needed, a value below ``minimum``) raises naming the first bad line.
    """
    v = pd.to_numeric(s.astype(str).str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(v) | (v < minimum)
    if integer:
        bad |= np.where(np.isfinite(v), v != np.floor(v), True)
    if bad.any():
        i = int(np.argmax(bad))
        kind = f"an int >= {minimum:g}" if integer else f"a finite number >= {minimum:g}"
        raise SpecsimInputError(src, int(lines[i]), col, kind, repr(s.iloc[i]))
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
    lines = np.arange(len(df)) + 2
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
#: Seconds per unit of the arrival column (``datetime`` parses timestamps such as ISO 8601 instead).
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0}


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
    """A CSV or JSONL file as a frame of strings and objects (JSONL keeps JSON types)."""
    fmt = fmt or ("jsonl" if path.suffix.lower() in (".jsonl", ".json", ".ndjson") else "csv")
    if fmt == "csv":
        return _read_csv(path, "a CSV file")
    if fmt != "jsonl":
        raise SpecsimInputError(None, None, "format", "csv or jsonl", repr(fmt))
    from specsim.workload.trace import _iter_json_lines  # the canonical reader's line checks, reused

    lines, objs = [], []
    for line, obj in _iter_json_lines(path):
        lines.append(line)
        objs.append(obj)
    df = pd.DataFrame(objs)
    df.attrs["lines"] = np.array(lines)
    return df


def _arrival_seconds(col: pd.Series, unit: str, src: str, name: str, lines: np.ndarray) -> np.ndarray:
    """(N,) float64 seconds of an arrival column in ``unit`` (a TIME_UNITS key or ``datetime``)."""
    if unit == "datetime":
        t = pd.to_datetime(col.astype(str).str.strip(), errors="coerce", utc=True, format="mixed")
        bad = t.isna().to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            raise SpecsimInputError(src, int(lines[i]), name, "a date-time such as 2024-05-01 12:00:00.5",
                                    repr(col.iloc[i]))
        ns = t.dt.tz_localize(None).to_numpy().astype("datetime64[ns]").astype(np.int64)
        return (ns - ns.min()) / 1e9 + 0.0  # relative; the origin rule then applies to these seconds
    if unit not in TIME_UNITS:
        raise SpecsimInputError(None, None, "time_unit", f"one of {[*TIME_UNITS, 'datetime']}", repr(unit))
    return _numbers(col, src, name, lines, integer=False, minimum=-math.inf) * TIME_UNITS[unit]


def convert_table(path, mapping: dict[str, str] | str, *, time_unit: str = "s", origin: str | float = "first",
                  fmt: str | None = None, domain: str = DEFAULT_DOMAIN) -> Trace:
    """Convert a CSV or JSONL file in any layout to a :class:`Trace` through a column map.

    Args:
        path: the file; ``fmt`` ``"csv"`` or ``"jsonl"`` (default: from the suffix, .jsonl/.json/.ndjson
            are JSONL, anything else CSV).
        mapping: {canonical field: source column} or its text form (:func:`parse_column_map`).
        time_unit: unit of the arrival column: ``s``, ``ms``, ``us``, ``ns``, ``min``, ``h``, or
            ``datetime`` (date-time text, parsed by pandas; then ``zero`` means the earliest time).
        origin: ``"first"`` (arrivals from the earliest arrival), ``"zero"`` (the values as they are;
            every one must be >= 0 s) or a number (seconds, in the file's unit after conversion,
            subtracted from every arrival; the results must be >= 0).
        domain: the domain of rows without a mapped domain column.

    Rows are put in arrival order by a stable sort (logs are often written in completion order).
    Request ids: the mapped column, else the 0-based data row index in the file.

    Raises:
        SpecsimInputError: a mapped column missing from the file, a value of the wrong kind (naming
            the 1-based file line and the source column), an arrival before the origin, duplicate ids,
            or prefix values that break the canonical rules.
    """
    path = Path(path)
    src = str(path)
    cmap = parse_column_map(mapping) if isinstance(mapping, str) else dict(mapping)
    df = _read_table(path, fmt)
    lines = df.attrs.get("lines", np.arange(len(df)) + 2)
    for key, col in cmap.items():
        if col not in df.columns:
            raise SpecsimInputError(src, 1 if fmt != "jsonl" and "lines" not in df.attrs else None, col,
                                    f"a column for {key} (columns: {list(map(str, df.columns))})", "no such column")
    arrival = _arrival_seconds(df[cmap["arrival_s"]], time_unit, src, cmap["arrival_s"], lines)
    if origin == "first":
        arrival = arrival - arrival.min()
    elif origin != "zero":
        try:
            arrival = arrival - float(origin)
        except (TypeError, ValueError):
            raise SpecsimInputError(None, None, "origin", "first, zero or a number of seconds",
                                    repr(origin)) from None
    if (arrival < 0).any():
        i = int(np.argmax(arrival < 0))
        raise SpecsimInputError(src, int(lines[i]), cmap["arrival_s"], f"an arrival at or after the origin "
                                f"({origin})", f"{arrival[i]:g} s from it")
    cols = {k: _numbers(df[cmap[k]], src, cmap[k], lines, integer=True, minimum=1)
            for k in ("prompt_tokens", "output_tokens")}
    n = len(df)
    ids = (np.array([str(x) for x in df[cmap["request_id"]]], dtype=object) if "request_id" in cmap
           else np.array([str(k) for k in range(n)], dtype=object))
    dom = (np.array([str(x) for x in df[cmap["domain"]]], dtype=object) if "domain" in cmap
           else np.full(n, domain, dtype=object))
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
    lines = np.arange(len(df)) + 2
    return tuple(_numbers(df[c], src, c, lines, integer=True, minimum=1) for c in pair)  # type: ignore[return-value]

