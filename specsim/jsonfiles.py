"""Reading JSON and JSON Lines input files, every failure a one-line :class:`~specsim.errors.SpecsimInputError`;
and :func:`jsonable`, what every writer of a JSON file passes its values through.

Shared by the readers of other tools' files (vLLM and guidellm results, DeepSpec and Spec-Bench outputs,
ShareGPT conversations), which accept a JSON document or JSON Lines (https://jsonlines.org: one JSON value per
line, blank lines skipped). A utility: every level of specsim may import it (docs/architecture.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from specsim.errors import SpecsimInputError


def jsonable(x: Any) -> Any:
    """``x`` with numpy scalars as Python numbers, tuples as lists, dict keys as str and NaN/inf as None (strict
    JSON has no NaN: a file specsim writes parses anywhere)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        x = float(x)
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def read_text(path: str | Path, expected: str = "a readable UTF-8 file") -> str:
    """The UTF-8 text of ``path``.

    Raises:
        SpecsimInputError: the file cannot be read (naming the OS error) or is not UTF-8, with ``expected``.
    """
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        got = "bytes that are not UTF-8 text" if isinstance(e, UnicodeDecodeError) else (e.strerror or type(e).__name__)
        raise SpecsimInputError(str(path), None, None, expected, got) from None


def json_document(text: str, src: str, expected: str) -> Any:
    """``text`` parsed as one JSON document.

    Raises:
        SpecsimInputError: malformed JSON, naming ``src``, the line of the error and ``expected``.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecsimInputError(src, e.lineno, None, expected, f"malformed JSON ({e.msg})") from None


def json_lines(text: str, src: str, expected: str) -> list[tuple[int, Any]]:
    """``text`` as JSON Lines: (1-based line, value) per non-blank line.

    Raises:
        SpecsimInputError: a line that is not JSON, naming ``src``, the line and ``expected``.
    """
    rows = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if raw.strip():
            try:
                rows.append((line, json.loads(raw)))
            except json.JSONDecodeError as e:
                raise SpecsimInputError(src, line, None, expected, f"malformed JSON ({e.msg})") from None
    return rows


def json_rows(text: str, src: str, expected: str) -> list[tuple[int, Any]]:
    """``text`` as (line, value) rows: a JSON document is one row at line 1, or one row per item at line 1 when it
    is a list; anything else is read as JSON Lines (:func:`json_lines`; ``expected`` names the line format).
    A document that is empty or ``null`` is read as JSON Lines too.

    Raises:
        SpecsimInputError: as :func:`json_lines`.
    """
    stripped = text.strip()
    try:
        doc = json.loads(stripped) if stripped else None
    except json.JSONDecodeError:
        doc = None
    if doc is not None:
        return [(1, r) for r in doc] if isinstance(doc, list) else [(1, doc)]
    return json_lines(text, src, expected)
