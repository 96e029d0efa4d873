"""The one input-error type of specsim.

Every problem with something a user supplied (a trace line, a scenario value, a profile file, a policy
name) is raised as :class:`SpecsimInputError`. The CLI prints it on one line and exits with status 2;
library callers can catch it and read its fields. Internal invariants raise ``RuntimeError`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

#: specsim's bound on simulated time, seconds (about 31.7 years): arrival times, arrivals divided by
#: ``--rate-scale`` and ``--max-sim-s`` must stay at or below it (an input bound shared by the trace readers and
#: the run, so it lives beside the input-error type that every layer may import). A float64 clock near 1e9 s still resolves
#: 2^-23 s (0.12 us), far below a step's or a prefill token's time; near 1e14 s its resolution (2^-6 s)
#: exceeds a step's time, so a request's first token could appear to come before its prefill had ended.
MAX_SIM_TIME_S = 1e9


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

    #: Longest message :meth:`__str__` returns: a longer ``expected`` or ``got`` (a huge value, a long list) is
    #: shortened in its middle, so the CLI's one line stays readable (issue 24 item 11).
    MAX_CHARS = 500

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.field is not None:
            where.append(f"field '{self.field}'")
        head = ", ".join(where) if where else "input"
        expected = _shorten(str(self.expected), max(300, self.MAX_CHARS - len(head) - 70))
        msg = f"{head}: expected {expected}"
        if self.got is not None:
            msg += f", got {_shorten(str(self.got), max(40, self.MAX_CHARS - len(msg) - 6))}"
        return msg


def torch_missing(command: str) -> SpecsimInputError:
    """The error of ``command`` (e.g. ``"specsim replay"``) where torch does not import: it names the install steps
    of docs/torch_backend.md (torch first, pinned, then the ``torch`` extra)."""
    return SpecsimInputError(command, None, None, "torch, which the real-model backend needs (pip install "
                             "torch==2.13.0, then pip install -e '.[torch]' -r requirements-torch.txt; "
                             "docs/torch_backend.md)", "torch is not installed")


def _shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters by dropping its middle (`` ... `` marks the cut)."""
    if len(text) <= limit:
        return text
    keep = max(limit - 5, 2)
    return f"{text[: keep - keep // 3]} ... {text[len(text) - keep // 3:]}"


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
    ``threshhold`` gives ``threshold`` and ``domian`` gives ``domain``; a name that differs only in case is its
    own nearest (``MTP`` gives ``mtp``).
    """
    import difflib

    names = sorted(str(c) for c in choices)
    same = [c for c in names if c.lower() == str(word).lower()]
    match = same or difflib.get_close_matches(str(word), names, n=1)
    return match[0] if match else None


def did_you_mean(word: str, choices) -> str:
    """``" (closest valid: 'name')"`` for the nearest of ``choices`` to ``word`` (:func:`closest`), else ``""``."""
    match = closest(word, choices)
    return f" (closest valid: '{match}')" if match else ""
