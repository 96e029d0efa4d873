"""TOML files read with the line of every key, so an error can point at its line (tomllib keeps no positions).

Used by :func:`specsim.scenario.load_scenario`: a bad key or value in a scenario file names its line; and
:func:`parse_override`, a ``--set section.key=value`` item in TOML syntax; :func:`json_beside`, a JSON file the TOML
file names, found beside it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Callable

from specsim.errors import SpecsimInputError

_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")


def key_lines(text: str) -> dict[str, int]:
    """Dotted key -> the 1-based line of a TOML text where it is first set (``[section]`` headers too).

    A line scan, enough to point an error at its line (tomllib keeps no positions): table headers set the
    prefix, ``key = value`` lines (dotted keys included) name ``prefix.key``; keys inside multi-line values
    or inline tables are attributed to the line that opens them.
    """
    out: dict[str, int] = {}
    prefix = ""
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0]
        m = _TABLE.match(line)
        if m and not line.lstrip().startswith("[["):
            prefix = ".".join(p.strip().strip("\"'") for p in m.group(1).split("."))
            out.setdefault(prefix, i)
            continue
        m = _KEY.match(line)
        if m:
            key = ".".join(p.strip().strip("\"'") for p in m.group(1).split("."))
            out.setdefault(f"{prefix}.{key}" if prefix else key, i)
    return out


def read_toml(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """A scenario file's TOML tables and the line of each key (:func:`key_lines`).

    Raises:
        SpecsimInputError: a missing, unreadable, non-UTF-8 or invalid file (with the line where TOML broke).
    """
    try:
        text = path.read_bytes().decode("utf-8")
        return tomllib.loads(text), key_lines(text)
    except FileNotFoundError:
        raise SpecsimInputError(str(path), None, None, "an existing scenario file", "no such file") from None
    except OSError as e:
        raise SpecsimInputError(str(path), None, None, "a readable scenario file",
                                e.strerror or type(e).__name__) from None
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise SpecsimInputError(str(path), line, None, "a TOML file (UTF-8 text)", "undecodable bytes") from None
    except tomllib.TOMLDecodeError as e:
        m = re.search(r"at line (\d+)", str(e))
        line = getattr(e, "lineno", None) or (int(m.group(1)) if m else None)
        raise SpecsimInputError(str(path), line, None, "valid TOML", str(e).split(" (at")[0]) from None


def key_line(source: str | None, key: str, held: Any = None,
             as_loaded: Callable[[Any], Any] = lambda v: v) -> tuple[str, int] | None:
    """(file, line) where the TOML file ``source`` sets the dotted ``key``; None without a file, where it does not
    set it, or where the file's value, read as loading it does (``as_loaded``), is not ``held`` (the value in use,
    when given: a later ``--set`` replaced the file's; errors about a value then name the value alone)."""
    if not source or not Path(source).is_file():
        return None
    doc, lines = read_toml(Path(source))
    if key not in lines:
        return None
    written: Any = doc
    for part in key.split("."):
        written = written.get(part) if isinstance(written, dict) else None
    return None if held is not None and as_loaded(written) != held else (source, lines[key])


def parse_override(item: str) -> dict[str, dict[str, Any]]:
    """Parse ``section.key=value`` or ``section.key.name=value`` (TOML syntax; bare words are strings).

    A dotted key reaches into a table: ``policy.knobs.threshold=0.5`` gives
    ``{"policy": {"knobs": {"threshold": 0.5}}}``.

    Raises:
        SpecsimInputError: not of the form section.key=value, or an empty part in the dotted key.
    """
    lhs = item.split("=", 1)[0]
    parts = [p.strip() for p in lhs.split(".")]
    if "=" not in item or len(parts) < 2 or not all(parts):
        raise SpecsimInputError("--set", None, item, "section.key=value (or section.key.name=value)")
    rhs = item.split("=", 1)[1].strip()
    try:
        value: Any = tomllib.loads(f"v = {rhs}")["v"]
    except tomllib.TOMLDecodeError:
        value = rhs
    for part in reversed(parts[1:]):
        value = {part: value}
    return {parts[0]: value}


def json_beside(name: Any, path: Path) -> Any:
    """A file name the TOML file at ``path`` writes (a scenario's profile), as loading it resolves it: a relative
    ``.json`` path that is a file beside the TOML file, as that file's path; anything else (a bundled name, a path
    relative to the working folder, an absolute path) as written."""
    if not isinstance(name, str) or Path(name).is_absolute():
        return name
    beside = path.parent / name
    return str(beside) if beside.suffix == ".json" and beside.is_file() else name
