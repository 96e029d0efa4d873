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


# --------------------------------------------------------------------------------------------- tables
def terminal_width(default: int = 80) -> int:
    """Columns of the terminal: ``COLUMNS`` when set, else the terminal's size, else ``default`` (piped output)."""
    import shutil

    return max(20, shutil.get_terminal_size((default, 24)).columns)


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` wrapped at spaces only: a word (a name or a number) is never split, even when longer than width."""
    import textwrap

    return textwrap.wrap(text, width=max(1, width), initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [indent.rstrip()]


def table(columns, rows, *, title: str | None = None, width: int | None = None, keys: int = 1,
          notes=()) -> str:
    """A plain-text table that shows every name and number whole at any width (never truncated).

    Layouts, the first that fits ``width``: (1) wide: one line per row, columns aligned (numbers right,
    the ``keys`` leading columns left); (2) transposed (``keys == 1`` only): one line per column, one
    column per row, headed by the rows' keys; (3) stacked: per row a heading of its key cells
    (``name: value``), then one ``column  value`` line per other column (a value that does not fit
    beside its name goes on the next line, indented). Titles and notes wrap at spaces only. A single word longer than ``width`` is printed
    whole on its own line (the terminal folds it; the text keeps it whole).

    Args:
        columns: (c,) column names.
        rows: (r, c) cells, already formatted as strings (:func:`value`, :func:`number`, ...).
        title: a line above the table, or None.
        width: the width to fit, characters (None: :func:`terminal_width`).
        keys: how many leading columns identify a row (left-aligned; the stacked layout's heading).
        notes: lines printed below the table (wrapped at spaces).

    Returns:
        The table as text, lines joined by ``\\n`` (no trailing newline).

    Raises:
        ValueError: a row whose length differs from ``columns``.
    """
    width = terminal_width() if width is None else int(width)
    cols = [str(c) for c in columns]
    body = [[str(x) for x in r] for r in rows]
    for r in body:
        if len(r) != len(cols):
            raise ValueError(f"a row of {len(r)} cells for {len(cols)} columns")
    out: list[str] = _wrap(title, width) if title else []
    widths = [max([len(c)] + [len(r[i]) for r in body]) for i, c in enumerate(cols)]
    if sum(widths) + 2 * (len(cols) - 1) <= width:
        def line(cells):
            return "  ".join(c.ljust(w) if i < keys else c.rjust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
        out.append(line(cols))
        out.append("  ".join("-" * w for w in widths))
        out.extend(line(r) for r in body)
    elif keys == 1 and body and _fits_transposed(cols, body, width):
        flipped = [[c] + [r[i] for r in body] for i, c in enumerate(cols) if i > 0]
        return table([cols[0]] + [r[0] for r in body], flipped, title=title, width=10 ** 6, keys=1, notes=notes)
    else:
        name_w = max((len(c) for c in cols[keys:]), default=0)
        for r in body:
            head = "  ".join(f"{c}: {v}" for c, v in zip(cols[:keys], r[:keys]))
            out.extend(_wrap(head, width) if keys else [])
            for c, v in zip(cols[keys:], r[keys:]):
                if 2 + name_w + 2 + len(v) <= width:
                    out.append(f"  {c.ljust(name_w)}  {v}")
                else:
                    out.append(f"  {c}")
                    out.extend(_wrap(v, width, "      "))
    for n in notes:
        out.extend(_wrap(n, width))
    return "\n".join(out)


def _fits_transposed(cols: list[str], body: list[list[str]], width: int) -> bool:
    """Whether the transposed layout of :func:`table` (columns as lines) fits ``width``."""
    first = max(len(c) for c in cols)
    rest = [max([len(r[0])] + [len(x) for x in r[1:]]) for r in body]
    return first + sum(rest) + 2 * len(rest) <= width
