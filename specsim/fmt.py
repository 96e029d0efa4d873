"""Number formatting for tables and one-line summaries: one rule for every command.

Every formatter maps a missing value (``None``) and a non-finite float (NaN, +-inf) to :data:`MISSING`, so a
table never shows ``nan``; integers and numpy scalars are accepted wherever floats are. :func:`table` is the
one table renderer of every command (``rich``, imported when a table is drawn); no numeric library is
imported here, so the CLI renders before one is loaded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral, Real
from pathlib import Path

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
def users(n) -> str:
    """A closed load in words: ``"1 user"``, ``"16 users"`` (``n`` formatted with ``:g``)."""
    return f"{n:g} user{'' if n == 1 else 's'}"


def terminal_width(default: int = 80) -> int:
    """Columns of the terminal: ``COLUMNS`` when set, else the terminal's size, else ``default`` (piped output)."""
    import shutil

    return max(20, shutil.get_terminal_size((default, 24)).columns)


def wrapped(text: str, width: int | None = None) -> str:
    """``text`` wrapped at spaces to ``width`` columns (None: :func:`terminal_width`), its later lines indented
    two spaces; a word longer than the width stays whole."""
    import textwrap

    return textwrap.fill(text, width or terminal_width(), subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


def _is_number(cell: str) -> bool:
    """Whether a formatted cell reads as a number (``1,234.5``, ``-5.0%``, ``+12%``, ``-``): never wrapped."""
    s = cell.strip().rstrip("%").lstrip("+-").replace(",", "")
    return cell.strip() == MISSING or s.replace(".", "", 1).isdigit() or s.lower() in ("inf", "nan")


def _longest_word(texts) -> int:
    """Characters of the longest space-free word in ``texts`` (the narrowest a column can be without a cut)."""
    return max((len(w) for t in texts for w in t.split()), default=0)


def _least_width(columns: list[str], body: list[list[str]], i: int, keys: int) -> int:
    """The narrowest column ``i`` can be with nothing cut: a number column its widest cell and its whole
    header (neither wraps); a text column its longest word (it wraps at spaces)."""
    cells = [r[i] for r in body]
    if i >= keys and all(_is_number(c) for c in cells):
        return max([len(columns[i])] + [len(c) for c in cells])
    return _longest_word([columns[i]] + cells)


def _fits(columns: list[str], body: list[list[str]], idx: list[int], keys: int, width: int) -> bool:
    """Whether the table of columns ``idx`` fits ``width`` with nothing cut (2 spaces between columns)."""
    return sum(_least_width(columns, body, i, keys) for i in idx) + 2 * (len(idx) - 1) <= width


def _column_groups(columns: list[str], body: list[list[str]], keys: int, width: int) -> list[list[int]]:
    """Split the value columns into groups that fit ``width`` beside the key columns (each group a table).

    Greedy, left to right, by :func:`_fits`. One value column per group at the least.
    """
    groups: list[list[int]] = []
    cur: list[int] = []
    for i in range(keys, len(columns)):
        if cur and not _fits(columns, body, list(range(keys)) + cur + [i], keys, width):
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur or not groups:
        groups.append(cur)
    return groups


def _rule_box():
    """rich's SIMPLE_HEAD box drawn in ASCII: a ``-`` rule under the header, nothing else (logs stay plain)."""
    from rich.box import Box

    return Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)


def _widths(columns: list[str], body: list[list[str]], idx: list[int], keys: int, width: int) -> list[int]:
    """Each column's width: its natural width (widest cell or header) when the table fits ``width``, else the
    text columns narrowed, widest first, down to their longest word until it fits (numbers keep theirs)."""
    least = [_least_width(columns, body, i, keys) for i in idx]
    w = [max([len(columns[i])] + [len(r[i]) for r in body]) for i in idx]
    excess = sum(w) + 2 * (len(idx) - 1) - width
    while excess > 0:
        room = [j for j in range(len(w)) if w[j] > least[j]]
        if not room:
            break
        j = max(room, key=lambda j: w[j])
        w[j] -= 1
        excess -= 1
    return w


def _rich_table(columns: list[str], body: list[list[str]], idx: list[int], keys: int, width: int = 10 ** 6):
    """A rich ``Table`` of the columns ``idx`` at the widths of :func:`_widths`: keys left-aligned; numbers
    right-aligned, never wrapped; text wrapped at spaces only (no column narrower than its longest word)."""
    from rich.table import Table

    t = Table(box=_rule_box(), show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))   # + the divider: 2 spaces
    for i, w in zip(idx, _widths(columns, body, idx, keys, width)):
        numeric = i >= keys and all(_is_number(r[i]) for r in body)
        t.add_column(columns[i], justify="right" if numeric else "left", no_wrap=numeric, overflow="fold", width=w)
    for r in body:
        t.add_row(*(r[i] for i in idx))
    return t


def _stacked(columns: list[str], body: list[list[str]], i: int, keys: int):
    """Column ``i`` when even the keys and it alone do not fit: a one-column table, per row the key cells on
    one line and the value on the next (nothing cut): a number right-aligned, text indented by two spaces and
    wrapped at spaces."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    t = Table(box=_rule_box(), show_edge=False, pad_edge=False, padding=(0, 0), expand=True)
    t.add_column(" / ".join(columns[:keys] + [columns[i]]), overflow="fold")
    for r in body:
        value = Text(r[i], justify="right") if _is_number(r[i]) else Padding(Text(r[i]), (0, 0, 0, 2))
        t.add_row(Group(Text("  ".join(r[:keys])), value))
    return t


def table(columns, rows, *, title: str | None = None, width: int | None = None, keys: int = 1,
          notes=()) -> str:
    """The one table renderer of every command: a ``rich`` table rendered to plain text at ``width`` columns.

    Numbers (cells such as ``1,234.5``, ``-5.0%``, ``-``) are right-aligned and never wrapped; names and other
    text wrap at spaces only when the terminal is narrow. When the columns do not fit ``width`` even at
    their minimum, the value columns are split into several tables, each repeating the ``keys`` leading
    columns (so every row is still identified), as pandas splits a wide frame. Titles and notes wrap at
    spaces. When even the keys and one value column do not fit, that column is shown per row as the keys on
    one line and the value under them. No line is wider than ``width`` unless a single word is (rich then
    folds it).

    Args:
        columns: (c,) column names.
        rows: (r, c) cells, already formatted as strings (:func:`value`, :func:`number`, ...).
        title: a line above the (first) table, or None.
        width: the width to fit, characters (None: :func:`terminal_width`).
        keys: how many leading columns identify a row (left-aligned, repeated in every split).
        notes: lines printed below the table (wrapped at spaces).

    Returns:
        The table as text, lines joined by ``\\n`` (no trailing newline, no trailing spaces).

    Raises:
        ValueError: a row whose length differs from ``columns``.
    """
    import io

    from rich.console import Console
    from rich.text import Text

    width = terminal_width() if width is None else int(width)
    cols = [str(c) for c in columns]
    body = [[str(x) for x in r] for r in rows]
    for r in body:
        if len(r) != len(cols):
            raise ValueError(f"a row of {len(r)} cells for {len(cols)} columns")
    console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False, emoji=False,
                      markup=False, force_terminal=False, legacy_windows=False)
    if title:
        console.print(Text(title), overflow="fold")
    if cols:
        keys = min(keys, len(cols))
        groups = _column_groups(cols, body, keys, width)
        for n, g in enumerate(groups):
            if n:
                console.print()
            idx = list(range(keys)) + g
            if len(g) == 1 and keys and not _fits(cols, body, idx, keys, width):
                console.print(_stacked(cols, body, g[0], keys))
            else:
                console.print(_rich_table(cols, body, idx, keys, width))
    for note in notes:
        console.print(Text(str(note)), overflow="fold")
    lines = [line.rstrip() for line in console.file.getvalue().splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def factor(x: float) -> str:
    """A multiplying factor in two decimals (``0.50``), or two significant digits below 0.01 (``0.00049``), never
    a bare ``0.00``."""
    return f"{x:.2f}" if abs(x) >= 0.01 or x == 0 else f"{x:.2g}"


def and_list(items) -> str:
    """Words joined as a sentence lists them: ``"a"``, ``"a and b"``, ``"a, b and c"`` (``""`` for none)."""
    items = [str(i) for i in items]
    return ", ".join(items[:-1]) + " and " + items[-1] if len(items) > 1 else "".join(items)

def folder_titles(folders: Sequence[str | Path]) -> list[str]:
    """One panel title per sweep folder: its name (``runs/a`` -> ``a``), or where several folders share a name, as
    many of its trailing path parts as tell it apart (``x/sweep``, ``y/sweep``); the same folder given twice is
    numbered (``a``, ``a (2)``)."""
    parts = [Path(f).parts or (str(f),) for f in folders]
    titles = []
    for p in parts:
        k = 1
        while k < len(p) and sum(q[-k:] == p[-k:] for q in set(parts)) > 1:     # one folder twice: one name
            k += 1
        titles.append("/".join(p[-k:]))
    seen: dict[str, int] = {}
    for i, t in enumerate(titles):
        seen[t] = seen.get(t, 0) + 1
        titles[i] = t if seen[t] == 1 else f"{t} ({seen[t]})"
    return titles
