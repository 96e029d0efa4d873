"""Wall-clock times of trace files (the Azure converters): ISO 8601 forms parsed to exact integer nanoseconds with
the standard library's calendar, no floating point (:func:`parse_wall_times`)."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError


def _first_bad(mask: np.ndarray) -> int | None:
    """Index of the first True in ``mask``, or None."""
    return int(np.argmax(mask)) if mask.any() else None


# YYYY-MM-DD, a 'T' / 't' / space, HH:MM[:SS[.fraction]], then an optional zone: Z or +HH[:MM].
_WALL_TIME = (r"^\s*([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})"
              r"(?::([0-9]{2})(?:[.,]([0-9]+))?)?"
              r"\s*(?:([Zz])|([+-])([0-9]{2})(?::?([0-9]{2}))?)?\s*$")
_WALL_TIME_WORDS = ("a time 'YYYY-MM-DD HH:MM:SS.fffffff' or ISO 8601 such as "
                    "'2024-03-01T00:00:00.5Z' or '2024-03-01T01:00:00+01:00' (seconds, fraction "
                    "and zone optional)")
#: Largest span between two wall-clock times of one file: int64 nanoseconds hold about 292 years.
MAX_WALL_SPAN_S = 9_000_000_000
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()


def _epoch_days(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """(N,) int64 days since 1970-01-01 of the dates (y, m, d), -1 << 62 where the date does not exist.

    The calendar is the standard library's (:meth:`datetime.date.toordinal`, proleptic Gregorian, years
    1..9999), evaluated once per distinct date.
    """
    dates, inverse = np.unique(np.stack([y, m, d], axis=1), axis=0, return_inverse=True)
    days = np.empty(len(dates), dtype=np.int64)
    for k, (yy, mm, dd) in enumerate(dates.tolist()):
        try:
            days[k] = datetime.date(yy, mm, dd).toordinal() - _EPOCH_ORDINAL
        except ValueError:                        # month 13, February 30, year 0 ...
            days[k] = _NO_DAY
    return days[inverse.reshape(-1)]


_NO_DAY = -(1 << 62)


def parse_wall_times(texts, source: str, lines, field: str = "TIMESTAMP") -> np.ndarray:
    """Wall-clock times as (N,) int64 nanoseconds since the first one (exact integer arithmetic).

    Accepted, per value: ``YYYY-MM-DD HH:MM:SS.fffffff`` (the Azure 2023 traces) and ISO 8601 /
    RFC 3339: a ``T`` (or ``t``) instead of the space, the seconds and the fraction optional, a
    fraction of any length (``.`` or ``,``; digits past the 9th, below a nanosecond, are dropped),
    and an optional zone ``Z`` or an offset ``+HH:MM`` / ``+HHMM`` / ``+HH`` (``-`` likewise).
    A time with an offset is converted to UTC (``01:00:01+01:00`` is ``00:00:01Z``). Either every
    time of a file carries a zone or none does: naive times have no known UTC instant, so a file
    that mixes them is refused. Leading and trailing blanks are ignored.

    Args:
        texts: (N,) the values as read (str; anything else counts as unparsable), N >= 1.
        source: the file, for messages.
        lines: (N,) the 1-based file line of each value.
        field: the column name, for messages.

    Returns:
        (N,) int64 nanoseconds from the first value (negative where a time is earlier).

    Raises:
        SpecsimInputError: naming the line and ``field``: a value of another form or with a
            field out of range (month 13, February 30, hour 24, second 60, offset beyond 23:59),
            a file mixing zone-aware and naive times, or two times more than
            :data:`MAX_WALL_SPAN_S` seconds apart.
    """
    s = pd.Series(list(texts), dtype=object)
    s = s.where(s.map(lambda v: isinstance(v, str)), "")
    g = s.str.extract(_WALL_TIME)                               # (N, 11) str or NaN
    ok = g[0].notna().to_numpy().copy()
    num = g[[0, 1, 2, 3, 4, 5, 9, 10]].fillna("0").astype(np.int64).to_numpy()  # (N, 8)
    y, mo, d, hh, mi, ss, oh, om = num.T
    days = _epoch_days(y, mo, d)
    ok &= (days != _NO_DAY) & (hh <= 23) & (mi <= 59) & (ss <= 59) & (oh <= 23) & (om <= 59)
    i = _first_bad(~ok)
    if i is not None:
        raise SpecsimInputError(source, int(lines[i]), field, _WALL_TIME_WORDS, repr(texts[i]))
    aware = (g[7].notna() | g[8].notna()).to_numpy()
    i = _first_bad(aware != aware[0])
    if i is not None:
        kind = ("zone-aware", "naive")
        raise SpecsimInputError(source, int(lines[i]), field,
            f"{kind[not aware[0]]} times throughout, as on line {int(lines[0])} (the file mixes "
            "zone-aware and naive times, which have no common clock)",
            f"{texts[i]!r}, a {kind[not aware[i]]} time")
    sign = np.where(g[8].to_numpy() == "-", -1, 1)
    secs = ((days * 24 + hh) * 60 + mi) * 60 + ss - sign * (oh * 3600 + om * 60)
    frac = g[6].fillna("").str.slice(0, 9).str.pad(9, side="right", fillchar="0").astype(np.int64)
    rel_s = secs - secs[0]                                      # (N,) whole seconds, exact
    i = _first_bad(np.abs(rel_s) > MAX_WALL_SPAN_S)
    if i is not None:
        raise SpecsimInputError(source, int(lines[i]), field,
                                f"a time within {MAX_WALL_SPAN_S} s of line {int(lines[0])}'s",
                                repr(texts[i]))
    return rel_s * 1_000_000_000 + (frac.to_numpy() - int(frac.iloc[0]))
