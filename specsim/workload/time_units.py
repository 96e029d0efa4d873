"""Is a table's arrival column in the unit it was declared in? The checks of ``trace convert --from table
--time-unit`` (:func:`specsim.workload.converters.convert_table`).

A wrong unit scales every arrival by a power of 1,000 and converts without a word: a one-hour log in seconds
declared ``--time-unit ms`` became a 3.6 s trace, a thousand times the load. :func:`check_time_unit` applies
three rules, each from what a clock can read or a server can accept:

* Unix milliseconds read as seconds (refused, naming the first such line): seconds beyond
  :data:`MAX_ARRIVAL_SECONDS` (1e11 s, about the year 5100 as a Unix time; Unix times in ms are about 1.7e12).
* Denser than a server can accept (refused): a mean gap between the first and the last arrival under
  :data:`MIN_MEAN_GAP_S` (1 us: more than a million requests a second). No LLM server accepts requests that
  fast: each one is at least an HTTP request (the fastest HTTP servers answer about a million small requests a
  second per machine, doing nothing else) and a prefill forward pass of the model over its prompt (milliseconds
  of GPU time, shared by a batch of at most a few hundred requests), and the busiest public LLM traces arrive at
  a few to tens of requests a second (Azure 2023, BurstGPT, Mooncake: ../shared/data/SOURCES.md). Seconds read
  as us or ns, ms read as ns, and seconds read as ms where the log took 1,000 requests a second or more, are
  refused by it; the message names the unit that puts the mean gap nearest one second. Requests that all arrive
  at one time (a span of 0, a batch) are not refused, whatever the unit.
* Signs of the next larger unit (a warning, not refused: a legitimate log can show them), with ``--time-unit``
  ``ms``, ``us`` or ``ns``: (a) values with a fraction of the unit (``3585.434``), as a seconds clock with
  decimals writes them, while clocks that count ms, us or ns write whole numbers (``Date.now()``,
  ``time.time_ns()``, the Mooncake and Azure traces); Unix times in the declared unit (1e9 to 2.2e9 s read in it,
  ``time.time() * 1000``) are left alone; (b) every value a Unix time of 2001 to 2039 (1e9 to 2.2e9 s) in the
  next larger unit: Unix seconds read as ms are 12 to 25 days after 1 January 1970. A log in fractional ms
  counted from zero (``time.perf_counter() * 1000``) warns by (a), and an ms clock 12 to 25 days after its boot
  by (b).

What no rule can tell: whole seconds counted from zero read as ms (0, 3, 7, ... is also a plausible ms log).
"""

from __future__ import annotations

import math
import warnings
from datetime import datetime, timezone
from typing import Callable

import numpy as np

from specsim.errors import SpecsimInputError

#: Seconds per unit of the arrival column (``datetime`` parses timestamps such as ISO 8601 instead).
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0}
#: Arrival values in seconds beyond this (about the year 5100 as a Unix time) are another unit: Unix times in
#: milliseconds are about 1.7e12.
MAX_ARRIVAL_SECONDS = 1e11
#: The least mean gap between arrivals, seconds, a server can accept (a million requests a second; module
#: docstring).
MIN_MEAN_GAP_S = 1e-6
#: Unix times, seconds, of 2001-09-09 and 2039-09-18: a column whose every value lies here in the next larger
#: unit holds Unix times in that unit.
UNIX_SECONDS = (1e9, 2.2e9)
#: Each sub-second unit and the unit 1,000 times larger.
LARGER = {"ms": "s", "us": "ms", "ns": "us"}


def check_time_unit(raw: np.ndarray, unit: str, src: str, column: str, lines: np.ndarray,
                    on_note: Callable[[str], None] | None = None) -> None:
    """Refuse an arrival column whose declared unit makes the trace impossible; warn where it looks like the next
    larger unit (the rules of the module docstring).

    Args:
        raw: (N,) float64 arrival values as the file gives them, in ``unit`` (a :data:`TIME_UNITS` key).
        unit: the declared unit (``--time-unit``).
        src, column: the file and the arrival column, for the messages.
        lines: (N,) the 1-based file line of each value.
        on_note: called with a warning's text; None: :func:`warnings.warn` (a ``UserWarning``).

    Raises:
        SpecsimInputError: seconds beyond :data:`MAX_ARRIVAL_SECONDS` (naming the first such line and --time-unit
            ms), or a mean gap under :data:`MIN_MEAN_GAP_S` between the first and the last arrival (naming the
            likely unit).
    """
    if not raw.size:
        return
    if unit == "s" and np.abs(raw).max() > MAX_ARRIVAL_SECONDS:
        i = int(np.argmax(np.abs(raw) > MAX_ARRIVAL_SECONDS))              # the first such line
        raise SpecsimInputError(src, int(lines[i]), column, f"arrival times in seconds (at most "
                                f"{MAX_ARRIVAL_SECONDS:g}; Unix times in milliseconds are about 1.7e12: pass "
                                "--time-unit ms)", f"{raw[i]:g}")
    span = float(raw.max() - raw.min())                                    # in the declared unit
    gap = span / (raw.size - 1) if raw.size > 1 else 0.0
    if gap > 0 and gap * TIME_UNITS[unit] < MIN_MEAN_GAP_S:
        likely = _likely_unit(gap, unit)
        raise SpecsimInputError(src, None, column, f"arrivals {MIN_MEAN_GAP_S * 1e6:g} us apart or more on average "
                                f"in --time-unit {unit} (no server accepts a million requests a second; "
                                "docs/workloads.md)", f"{raw.size:,} arrivals within {_seconds(span * TIME_UNITS[unit])}"
                                f" (mean gap {_seconds(gap * TIME_UNITS[unit])}): probably --time-unit {likely}, "
                                f"a span of {_seconds(span * TIME_UNITS[likely])}")
    signs, big = _larger_unit_signs(raw, unit, gap, lines)
    if signs:
        text = (f"{src}, field '{column}': arrivals read as {unit} {' and '.join(signs)}: they look like {big} "
                f"(--time-unit {big} gives a span of {_seconds(span * TIME_UNITS[big])}, not "
                f"{_seconds(span * TIME_UNITS[unit])}); if {unit} is right, ignore this")
        if on_note is None:
            warnings.warn(text, UserWarning, stacklevel=3)
        else:
            on_note(text)


def _larger_unit_signs(raw: np.ndarray, unit: str, gap: float, lines: np.ndarray) -> tuple[list[str], str]:
    """The signs (a) and (b) of the module docstring that ``raw`` (values in ``unit``, mean gap ``gap``; ``lines``
    their file lines) shows, in
    words ([] for units of a second or more), and the unit they point to: the next larger for (b), else
    :func:`_likely_unit`'s."""
    if unit not in LARGER:
        return [], unit
    signs = []
    own = raw * TIME_UNITS[unit]                                      # the values as seconds, in the declared unit
    whole = raw == np.floor(raw)
    if not whole.all() and not (UNIX_SECONDS[0] <= own.min() and own.max() <= UNIX_SECONDS[1]):
        i = int(np.argmax(~whole))
        signs.append(f"carry fractions of a {unit} ({int((~whole).sum()):,} of {raw.size:,} values, the first "
                     f"{float(raw[i])!r} on line {int(lines[i])}), as a clock in a larger unit with decimals writes "
                     "them")
    unix = own * 1000                                                 # the values as seconds, in the larger unit
    if UNIX_SECONDS[0] <= unix.min() and unix.max() <= UNIX_SECONDS[1]:
        day = datetime.fromtimestamp(float(unix.min()), timezone.utc).date()
        signs.append(f"are {own.min() / 86400:.1f} days after the Unix epoch (January 1970), while read as "
                     f"{LARGER[unit]} they are Unix times of {day}")
        return signs, LARGER[unit]
    return signs, _likely_unit(gap, unit) if gap > 0 else LARGER[unit]


def _likely_unit(gap: float, unit: str) -> str:
    """The clock unit (s, ms, us) larger than ``unit`` that puts a mean gap of ``gap`` (in ``unit``) nearest one
    second (``s`` where none is larger)."""
    larger = [u for u in ("us", "ms", "s") if TIME_UNITS[u] > TIME_UNITS[unit]] or ["s"]
    return min(larger, key=lambda u: abs(math.log10(gap * TIME_UNITS[u])))


def _seconds(s: float) -> str:
    """A duration in seconds, readable at any scale: ``3,600.0 s``, ``3.6 s``, ``0.00036 s``."""
    return f"{s:,.1f} s" if s >= 1 else f"{s:.3g} s"
