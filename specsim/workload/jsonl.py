"""The canonical JSONL trace format: reading with full validation, and writing.

Canonical JSONL, one request per line (blank lines are skipped)::

    {"arrival_s": 0.25, "prompt_tokens": 812, "output_tokens": 95, "domain": "code", "request_id": "a7"}

* ``arrival_s``: number (int or float, not bool), finite, >= 0, seconds from trace start, at most
  :data:`~specsim.errors.MAX_SIM_TIME_S` (1e9 s, specsim's bound on simulated time); arrivals never decrease from one request to the next (equal arrivals are a burst and are valid).
* ``prompt_tokens``, ``output_tokens``: int >= 1 (a JSON bool or a float such as ``5.0`` is rejected).
* ``domain``: optional non-empty string, default ``"chat"``.
* ``request_id``: optional, a non-empty string or an int (stored as its decimal string), unique in
  the file. When absent the field ``id`` is used (Vidur's workload files name it so); when both are
  absent, the 0-based index of the request among the file's requests (the line index when the file
  has no blank lines).
* Prefix information, optional, one of two kinds per request (both on one line is an error); the
  engine's prefix cache reads it (a request with neither shares nothing with the others):

  - ``hash_ids``: a non-empty list of ints in the int64 range, the hashes of the prompt's
    consecutive blocks of ``hash_block_tokens`` tokens (int >= 1, required with ``hash_ids`` and
    the same on every line that has it), as in the Mooncake traces (SOURCES.md section 1b). Equal
    ids at the same position mean the same content; the list is a chain, so block i is identified
    by ``hash_ids[:i + 1]``, not by ``hash_ids[i]`` alone. The list covers the prompt exactly:
    ``len(hash_ids) == ceil(prompt_tokens / hash_block_tokens)`` (``len * block >= prompt_tokens``
    and ``(len - 1) * block < prompt_tokens``; every one of the 12,031 Mooncake conversation
    requests satisfies it). A trailing partial block is never a cache hit.
  - ``prefix_group`` (non-empty string) with ``prefix_tokens`` (int, 1 <= prefix_tokens <=
    prompt_tokens): the first ``prefix_tokens`` tokens of the prompt are a system prompt shared by
    every request of the group, so every request of a group has the same ``prefix_tokens``.

* Load-stage fields (``stage``, ``stage_start_s``, ``stage_end_s``) and conversation-session fields
  (``session_id``, ``turn``, ``think_s``): optional, defined in :mod:`specsim.workload.extra`.
* Any other field is refused (a typo such as ``domian`` would otherwise run as ``chat``): the error names
  the file, the line, the key and the closest valid field. A trace that carries fields of its own for
  other tools declares them with keys starting with ``x_`` (``"x_user": "u7"``): accepted, whatever
  their values, and not read by the simulator (:data:`OWN_PREFIX`).

Every problem raises :class:`~specsim.errors.SpecsimInputError` naming the file, the 1-based line,
the field, what was expected and what was found.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from specsim.errors import MAX_SIM_TIME_S, SpecsimInputError, did_you_mean
from specsim.workload import extra as extra_fields
from specsim.workload.trace import _INT64_MAX, _INT64_MIN, DEFAULT_DOMAIN, Trace

#: The fields of a canonical JSONL line (``id`` is the alternative name of ``request_id``).
FIELDS = ("arrival_s", "prompt_tokens", "output_tokens", "domain", "request_id", "id", "hash_ids",
          "hash_block_tokens", "prefix_group", "prefix_tokens")
#: Every field a line may carry: the canonical ones and the stage / session fields of specsim.workload.extra.
KNOWN_FIELDS = FIELDS + tuple(extra_fields.EXTRA_FIELDS)
#: Keys with this prefix are the trace's own fields for other tools (accepted, not read).
OWN_PREFIX = "x_"


def _check_keys(obj: dict, src: str, line: int) -> None:
    """Refuse a key that is neither a canonical field nor a declared extra one, naming the closest field."""
    for key in obj:
        if key in KNOWN_FIELDS or key.startswith(OWN_PREFIX):
            continue
        shown = json.dumps(key)[1:-1]                      # one line, escapes visible
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise SpecsimInputError(src, line, shown, f"a trace field ({', '.join(KNOWN_FIELDS)})"
                                f"{did_you_mean(key, KNOWN_FIELDS)}; fields of your own start with '{OWN_PREFIX}'",
                                "an unknown field")


class _JsonConstant:
    """Marks NaN / Infinity / -Infinity tokens, which Python's json accepts but JSON does not."""

    def __init__(self, token: str) -> None:
        self.token = token


def _describe(v: object) -> str:
    """A short display form of a parsed JSON value with its JSON type, for error messages."""
    if isinstance(v, _JsonConstant):
        return v.token
    if isinstance(v, bool):
        return f"{str(v).lower()} (a boolean)"
    if v is None:
        return "null"
    text = json.dumps(v) if isinstance(v, (int, float, str)) else type(v).__name__
    text = text if len(text) <= 40 else text[:37] + "..."
    kind = {str: "a string", float: "a float", int: "an int"}.get(type(v), "")
    return f"{text} ({kind})" if kind else text


def _iter_json_lines(path: Path):
    """Yield (1-based line number, parsed JSON object) for each non-blank line of ``path``.

    Raises SpecsimInputError for an unreadable file, bad UTF-8, malformed JSON, a non-object line,
    or a file without any non-blank line.
    """
    src = str(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise SpecsimInputError(src, None, None, "a readable file", e.strerror or str(e)) from None
    lines = data.split(b"\n")
    seen = 0
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw, parse_constant=_JsonConstant)
        except UnicodeDecodeError:
            raise SpecsimInputError(src, i, None, "UTF-8 text", "undecodable bytes") from None
        except json.JSONDecodeError as e:
            raise SpecsimInputError(src, i, None, "one JSON object per line",
                                    f"malformed JSON ({e.msg.removesuffix(' at')} at column {e.colno})") from None
        except (ValueError, RecursionError) as e:   # an int of > 4,300 digits; nesting too deep
            raise SpecsimInputError(src, i, None, "one JSON object per line",
                                    f"JSON Python cannot read ({type(e).__name__}: "
                                    f"{str(e).split(';')[0][:80]})") from None
        if not isinstance(obj, dict):
            raise SpecsimInputError(src, i, None, "a JSON object", _describe(obj))
        seen += 1
        yield i, obj
    if seen == 0:
        got = "an empty file" if not data.strip(b"\n") else "only blank lines"
        raise SpecsimInputError(src, max(1, len(lines) - (lines[-1] == b"")), None,
                                "at least one request line", got)


#: Largest token count (and Mooncake millisecond timestamp) a file may hold: 2^53, the largest
#: range in which every int is exact as a float64 (and far inside int64).
MAX_COUNT = 2**53


def _get(obj: dict, key: str, kind: str, src: str, line: int):
    """Read a required field: kind ``number`` (finite int/float >= 0) or ``count`` (int in [1, 2^53])."""
    if key not in obj:
        raise SpecsimInputError(src, line, key, "a required field", "nothing (field missing)")
    v = obj[key]
    t = type(v)
    if kind == "count":
        if t is not int:
            raise SpecsimInputError(src, line, key, "an int >= 1", _describe(v))
        if v < 1:
            raise SpecsimInputError(src, line, key, "an int >= 1", str(v))
        if v > MAX_COUNT:
            raise SpecsimInputError(src, line, key, f"an int <= 2^53 = {MAX_COUNT}", str(v))
    else:
        if t is not int and t is not float:
            raise SpecsimInputError(src, line, key, "a finite number >= 0", _describe(v))
        if not math.isfinite(v) or v < 0:
            raise SpecsimInputError(src, line, key, "a finite number >= 0", repr(v))
    return v


def _get_id(obj: dict, default: str, src: str, line: int) -> str:
    """The request id: ``request_id``, else ``id``, else ``default``; a non-empty str or an int."""
    key = "request_id" if "request_id" in obj else "id" if "id" in obj else None
    if key is None:
        return default
    v = obj[key]
    if type(v) is int:
        return str(v)
    if type(v) is not str or v == "":
        raise SpecsimInputError(src, line, key, "a non-empty string or an int", _describe(v))
    return v


def _get_hash_ids(v, block: int, prompt: int, src: str, line: int) -> tuple[int, ...]:
    """One line's ``hash_ids``: a non-empty list of int64-range ints, ceil(prompt / block) long."""
    if type(v) is not list or not v:
        got = "an empty list" if v == [] else _describe(v)
        raise SpecsimInputError(src, line, "hash_ids", "a non-empty list of ints", got)
    for k, x in enumerate(v):
        if type(x) is not int or not _INT64_MIN <= x <= _INT64_MAX:
            raise SpecsimInputError(src, line, "hash_ids", "a list of ints in the int64 range",
                                    f"{_describe(x)} at index {k}")
    need = -(-prompt // block)  # ceil: the last block may be partial
    if len(v) != need:
        raise SpecsimInputError(src, line, "hash_ids",
                                f"{need} ids (ceil of {prompt} prompt tokens / {block} per id)",
                                f"{len(v)} ids")
    return tuple(v)


class _PrefixReader:
    """Reads the optional prefix fields of canonical JSONL lines into Trace columns.

    Checks each line (both kinds, a field without its partner, types and ranges) and the rules
    across lines (one ``hash_block_tokens`` per trace, one ``prefix_tokens`` per group), naming the
    file line.
    """

    def __init__(self, src: str) -> None:
        self.src = src
        self.block: tuple[int, int] | None = None        # (hash_block_tokens, its first line)
        self.groups: dict[str, tuple[int, int]] = {}     # group -> (prefix_tokens, first line)
        self.cols: dict[str, list] = {k: [] for k in
                                      ("hash_ids", "hash_block_tokens", "prefix_group", "prefix_tokens")}

    def read(self, obj: dict, prompt: int, line: int) -> None:
        """Read one line's prefix fields (``prompt`` = its prompt_tokens)."""
        src = self.src
        if "hash_ids" in obj and "prefix_group" in obj:
            raise SpecsimInputError(src, line, "prefix_group", "either hash_ids (with "
                                    "hash_block_tokens) or prefix_group (with prefix_tokens), not both",
                                    "both on one line")
        for extra, needs in (("hash_block_tokens", "hash_ids"), ("prefix_tokens", "prefix_group")):
            if extra in obj and needs not in obj:
                raise SpecsimInputError(src, line, extra, f"{needs} on the same line",
                                        f"{extra} without {needs}")
        ids, block = (self._hash(obj, prompt, line) if "hash_ids" in obj else (None, 0))
        group, tokens = (self._group(obj, prompt, line) if "prefix_group" in obj else (None, 0))
        for k, v in zip(self.cols, (ids, block, group, tokens)):
            self.cols[k].append(v)

    def _hash(self, obj: dict, prompt: int, line: int) -> tuple[tuple[int, ...], int]:
        block = _get(obj, "hash_block_tokens", "count", self.src, line)
        self.block = self.block or (block, line)
        if block != self.block[0]:
            raise SpecsimInputError(self.src, line, "hash_block_tokens",
                                    f"{self.block[0]}, as on line {self.block[1]} (one value per trace)",
                                    str(block))
        return _get_hash_ids(obj["hash_ids"], block, prompt, self.src, line), block

    def _group(self, obj: dict, prompt: int, line: int) -> tuple[str, int]:
        g = obj["prefix_group"]
        if type(g) is not str or g == "":
            raise SpecsimInputError(self.src, line, "prefix_group", "a non-empty string", _describe(g))
        k = _get(obj, "prefix_tokens", "count", self.src, line)
        if k > prompt:
            raise SpecsimInputError(self.src, line, "prefix_tokens",
                                    f"an int in [1, prompt_tokens = {prompt}]", str(k))
        k0, first = self.groups.setdefault(g, (k, line))
        if k != k0:
            raise SpecsimInputError(self.src, line, "prefix_tokens",
                                    f"{k0}, the prefix_tokens of group {g!r} on line {first}", str(k))
        return g, k

    def columns(self) -> dict:
        """Keyword arguments of :class:`Trace` for the prefix columns read so far ({} if none)."""
        c = self.cols
        if self.block is None and not self.groups:
            return {}
        return {"hash_ids": tuple(c["hash_ids"]),
                "hash_block_tokens": np.array(c["hash_block_tokens"], dtype=np.int64),
                "prefix_group": np.array(c["prefix_group"], dtype=object),
                "prefix_tokens": np.array(c["prefix_tokens"], dtype=np.int64)}


def load_trace(path, max_requests: int | None = None) -> Trace:
    """Read a canonical JSONL trace (format in the module docstring).

    Args:
        path: a JSONL file.
        max_requests: read only the first this many requests (the rest of the file is neither parsed nor checked:
            a run of the first 200 requests of a million-line trace reads 200 lines), None = all.

    Returns:
        The :class:`Trace`, ``source`` = ``str(path)``.

    Raises:
        SpecsimInputError: naming file, 1-based line, field, expected and found, for malformed JSON,
            a missing field, a wrong type (bool is not an int, a string is not a number), NaN or
            Infinity, tokens <= 0, a decreasing arrival, a duplicate id, an empty or blank-only file,
            and for the prefix fields: hash_ids and prefix_group on one line, hash_block_tokens or
            prefix_tokens without its partner, hash_ids not ceil(prompt_tokens /
            hash_block_tokens) long, two hash_block_tokens values in one trace, prefix_tokens
            outside [1, prompt_tokens] or different within a group; a field that is neither canonical nor
            declared extra (naming the closest canonical field).
    """
    path = Path(path)
    src = str(path)
    ids, arr, pro, out, dom = [], [], [], [], []
    prefix = _PrefixReader(src)
    extra = extra_fields.ExtraReader(src)
    id_line: dict[str, int] = {}
    prev_arrival, prev_line = 0.0, 0
    for line, obj in _iter_json_lines(path):
        if max_requests is not None and len(ids) >= max_requests:
            break
        _check_keys(obj, src, line)
        a = _get(obj, "arrival_s", "number", src, line)
        if a > MAX_SIM_TIME_S:
            raise SpecsimInputError(src, line, "arrival_s", f"a time <= {MAX_SIM_TIME_S:g} s (specsim's bound on "
                                    "simulated time)", repr(a))
        if a < prev_arrival:
            raise SpecsimInputError(src, line, "arrival_s",
                                    f"a value >= {prev_arrival!r} (the arrival on line {prev_line})",
                                    repr(a))
        rid = _get_id(obj, str(len(ids)), src, line)
        if rid in id_line:
            raise SpecsimInputError(src, line, "request_id", "a unique id",
                                    f"{rid!r}, already used on line {id_line[rid]}")
        d = obj.get("domain", DEFAULT_DOMAIN)
        if type(d) is not str or d == "":
            raise SpecsimInputError(src, line, "domain", "a non-empty string", _describe(d))
        id_line[rid] = line
        prev_arrival, prev_line = a, line
        ids.append(rid)
        arr.append(a)
        pro.append(_get(obj, "prompt_tokens", "count", src, line))
        out.append(_get(obj, "output_tokens", "count", src, line))
        dom.append(d)
        prefix.read(obj, pro[-1], line)
        extra.read(obj, line)
    return Trace(np.array(ids, dtype=object), np.array(arr, dtype=np.float64),
                 np.array(pro, dtype=np.int64), np.array(out, dtype=np.int64),
                 np.array(dom, dtype=object), source=src, extra=extra.columns(), **prefix.columns())


def _prefix_fields(trace: Trace, i: int) -> str:
    """The JSON text of request ``i``'s prefix fields, with a leading comma, or ""."""
    ids = trace.hash_ids[i]
    if ids is not None:
        return (',"hash_ids":' + json.dumps(list(ids), separators=(",", ":"))
                + f',"hash_block_tokens":{int(trace.hash_block_tokens[i])}')
    group = trace.prefix_group[i]
    if group is not None:
        return f',"prefix_group":{json.dumps(group)},"prefix_tokens":{int(trace.prefix_tokens[i])}'
    return ""


def save_trace(trace: Trace, path) -> None:
    """Write ``trace`` as canonical JSONL (compact separators, one request per line).

    ``arrival_s`` is written with Python's shortest round-trip float repr, so :func:`load_trace`
    gives back the same :meth:`Trace.content_hash`. ``request_id`` is omitted on every line when all
    ids equal their default (the 0-based request index), which keeps bundled files small. The
    prefix fields (``hash_ids`` with ``hash_block_tokens``, or ``prefix_group`` with
    ``prefix_tokens``) are written only on the lines of the requests that have them.

    Raises:
        SpecsimInputError: ``path`` cannot be written (a folder, a missing parent folder, no permission).
    """
    ids = trace.request_id.tolist()
    default_ids = ids == [str(i) for i in range(len(ids))]
    rows = []
    for i, (rid, a, p, o, d) in enumerate(zip(ids, trace.arrival_s.tolist(),
                                              trace.prompt_tokens.tolist(),
                                              trace.output_tokens.tolist(), trace.domain.tolist())):
        head = "{" if default_ids else '{"request_id":' + json.dumps(rid) + ","
        rows.append(f'{head}"arrival_s":{a!r},"prompt_tokens":{p},"output_tokens":{o},'
                    f'"domain":{json.dumps(d)}{_prefix_fields(trace, i)}'
                    f'{extra_fields.json_fields(trace.extra, i)}}}\n')
    try:
        Path(path).write_text("".join(rows), encoding="utf-8")
    except OSError as e:                                   # a folder, a missing parent, no permission
        raise SpecsimInputError(str(path), None, None, "a writable file path",
                                e.strerror or type(e).__name__) from None
