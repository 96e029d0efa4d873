"""The one input-error type of specsim.

Every problem with something a user supplied (a trace line, a scenario value, a profile file, a policy
name) is raised as :class:`SpecsimInputError`. The CLI prints it on one line and exits with status 2;
library callers can catch it and read its fields. Internal invariants raise ``RuntimeError`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SpecsimInputError(ValueError):
    """Bad user input, located as precisely as possible.

    Args:
        file: the file (or source such as ``--set``) the bad value came from, or None.
        line: 1-based line number in ``file``, or None when not line-oriented.
        field: the field, column or key name, or None.
        expected: what was expected, in words (``"int >= 1"``).
        got: what was found, already formatted for display, or None.
    """

    file: str | None
    line: int | None
    field: str | None
    expected: str
    got: str | None = None

    def __post_init__(self) -> None:
        # args hold the fields so that copies (SimPy re-raises with type(e)(*e.args)) and pickles
        # (process pools) rebuild the same error.
        super().__init__(self.file, self.line, self.field, self.expected, self.got)

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        head = ", ".join(where) if where else "input"
        msg = f"{head}: expected {self.expected}"
        if self.got is not None:
            msg += f", got {self.got}"
        return msg


def plain(value: object) -> str:
    """``value`` as an error message shows it: numpy scalars as plain Python values, NaN as ``NaN``.

    ``repr`` of a numpy 2 scalar leaks the type (``np.float64(nan)``); this shows ``NaN``, ``1.5``,
    ``7`` or a quoted string instead. Does not import numpy (the CLI's start-up stays light).
    """
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return "NaN"
    return repr(value)


def closest(word: str, choices) -> str | None:
    """The valid name nearest to the typo ``word`` among ``choices``, or None when none is close.

    Uses :func:`difflib.get_close_matches` (ratio cutoff 0.6, the standard library's default), so
    ``threshhold`` gives ``threshold`` and ``domian`` gives ``domain``.
    """
    import difflib

    match = difflib.get_close_matches(str(word), sorted(str(c) for c in choices), n=1)
    return match[0] if match else None


def did_you_mean(word: str, choices) -> str:
    """``" (closest valid: 'name')"`` for the nearest of ``choices`` to ``word`` (:func:`closest`), else ``""``."""
    match = closest(word, choices)
    return f" (closest valid: '{match}')" if match else ""
