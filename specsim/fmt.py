"""Number formatting for tables and one-line summaries: one rule for every command.

Every formatter maps a missing value (``None``) and a non-finite float (NaN, +-inf) to :data:`MISSING`, so a
table never shows ``nan``; integers and numpy scalars are accepted wherever floats are. Only the standard
library is imported here: the CLI renders with it before any numeric library is loaded.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

#: What a missing or non-finite value prints as.
MISSING = "-"


def _missing(v) -> bool:
    """``None``, or a real number that is NaN or infinite."""
    return v is None or (isinstance(v, Real) and not math.isfinite(v))


def number(v, digits: int = 1) -> str:
    """``v`` with thousands separators and ``digits`` decimals: ``number(12345.678) == "12,345.7"``.

    Args:
        v: a real number (int, float, numpy scalar) or ``None``.
        digits: decimals shown, >= 0.

    Raises:
        TypeError: ``v`` is neither ``None`` nor a real number.
    """
    return MISSING if _missing(v) else f"{v:,.{digits}f}"


def percent(v, digits: int = 1, signed: bool = False) -> str:
    """A fraction as a percentage: ``percent(0.1234) == "12.3%"``, ``percent(-0.05, signed=True) == "-5.0%"``.

    Args:
        v: a fraction (1.0 is 100%) or ``None``.
        digits: decimals of the percentage.
        signed: always print the sign (gains and relative errors).
    """
    return MISSING if _missing(v) else f"{v:{'+' if signed else ''}.{digits}%}"


def value(v) -> str:
    """A metric of any kind for a summary table.

    Floats get 3 decimals below 100 in magnitude and 1 from 100 up (``value(0.71234) == "0.712"``,
    ``value(1234.56) == "1,234.6"``); integers get thousands separators (``bool`` prints as itself);
    anything else prints as ``str(v)``; ``None`` and non-finite floats as :data:`MISSING`.
    """
    if _missing(v):
        return MISSING
    if isinstance(v, bool) or not isinstance(v, Real):
        return str(v)
    if isinstance(v, Integral):
        return f"{v:,d}"
    return number(v, 3 if abs(v) < 100 else 1)
