"""Request traces: the canonical JSONL format, converters from public traces, a synthetic generator.

A trace is the list of requests a simulation replays: arrival time, prompt and output lengths, a
domain (which keys the acceptance model) and a unique id. :class:`Trace` holds them as column arrays.

Canonical JSONL, one request per line (blank lines are skipped)::

    {"arrival_s": 0.25, "prompt_tokens": 812, "output_tokens": 95, "domain": "code", "request_id": "a7"}

* ``arrival_s``: number (int or float, not bool), finite, >= 0, seconds from trace start, at most
  :data:`MAX_SIM_TIME_S` (1e9 s, specsim's bound on simulated time); arrivals never decrease from one
  request to the next (equal arrivals are a burst and are valid).
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
* Other fields are ignored.

Every problem raises :class:`~specsim.errors.SpecsimInputError` naming the file, the 1-based line,
the field, what was expected and what was found.

Converters read the public traces described in ``../shared/data/SOURCES.md``: the Azure LLM
inference 2023 CSVs (section 1a, :func:`convert_azure`) and the Mooncake FAST'25 conversation JSONL
(section 1b, :func:`convert_mooncake`, which keeps its ``hash_ids``). :func:`synth_trace` draws
Poisson or Gamma-renewal arrivals and lognormal lengths fitted to the public traces
(:data:`LENGTH_MODELS`, refit by :func:`fit_length_models`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

from specsim.errors import MAX_SIM_TIME_S, SpecsimInputError, plain
from specsim.workload import extra as extra_fields

DEFAULT_DOMAIN = "chat"


@dataclass(frozen=True, eq=False)
class Trace:
    """A request trace as column arrays (N requests, in arrival order).

    Args:
        request_id: (N,) object array of str, unique.
        arrival_s: (N,) float64 seconds from trace start, >= 0, non-decreasing.
        prompt_tokens: (N,) int64 prompt lengths in tokens, >= 1.
        output_tokens: (N,) int64 output lengths in tokens, >= 1.
        domain: (N,) object array of str (e.g. ``chat``, ``code``, ``math``).
        source: the file path or a description, used in messages and provenance.
        hash_ids: length-N tuple; entry i is request i's prefix-block hashes as a tuple of ints
            (``ceil(prompt_tokens / hash_block_tokens)`` of them, see the module docstring) or
            None. Default: None for every request.
        hash_block_tokens: (N,) int64 tokens per hash id, >= 1 where ``hash_ids`` is given (one
            value for the whole trace), 0 elsewhere. Default: zeros.
        prefix_group: (N,) object array, a non-empty str (the shared system prompt's group) or
            None. Default: None for every request.
        prefix_tokens: (N,) int64 length of the group's shared prefix, in [1, prompt_tokens] where
            ``prefix_group`` is given (the same for every request of a group), 0 elsewhere.
            Default: zeros.
        extra: optional per-request columns of :mod:`specsim.workload.extra` (load stages, conversation
            sessions) as ``{field: (N,) array}``; ``{}`` by default.

    The arrays are copied and made read-only; after construction the four prefix columns are
    never None (the defaults above are filled in). A request has ``hash_ids`` or a
    ``prefix_group`` or neither, never both. Raises:
        SpecsimInputError: arrays of different lengths, an empty trace, or any value outside the
            ranges above (naming ``source`` and the 1-based request position as the line).
    """

    request_id: np.ndarray
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    domain: np.ndarray
    source: str = "<memory>"
    hash_ids: tuple[tuple[int, ...] | None, ...] | None = None
    hash_block_tokens: np.ndarray | None = None
    prefix_group: np.ndarray | None = None
    prefix_tokens: np.ndarray | None = None
    extra: dict | None = None

    def __post_init__(self) -> None:
        cols = {
            "request_id": np.array([str(x) for x in self.request_id], dtype=object),
            "arrival_s": np.array(self.arrival_s, dtype=np.float64) + 0.0,  # + 0.0 turns -0.0 into 0.0
            "prompt_tokens": np.array(self.prompt_tokens, dtype=np.int64),
            "output_tokens": np.array(self.output_tokens, dtype=np.int64),
            "domain": np.array([str(x) for x in self.domain], dtype=object),
        }
        n = cols["arrival_s"].shape[0]
        given = any(x is not None for x in (self.hash_ids, self.hash_block_tokens,
                                            self.prefix_group, self.prefix_tokens))
        cols.update(_prefix_columns(self, n))
        for name, a in cols.items():
            if a.ndim != 1 or a.shape[0] != n:
                raise SpecsimInputError(self.source, None, name, f"a 1-D array of length {n}",
                                        f"shape {a.shape}")
        if n == 0:
            raise SpecsimInputError(self.source, None, None, "at least one request", "an empty trace")
        hash_ids = _hash_id_tuples(self.hash_ids, n, self.source)
        _check_columns(cols, self.source)
        if given:  # the defaults need no check (keeps 100k-request traces cheap to build)
            _check_prefix_columns(cols, hash_ids, self.source)
        for name, a in cols.items():
            a.flags.writeable = False
            object.__setattr__(self, name, a)
        object.__setattr__(self, "hash_ids", hash_ids)
        object.__setattr__(self, "extra", extra_fields.normalise(self.extra, n, self.source))

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])

    @property
    def has_prefix_info(self) -> bool:
        """True when any request has ``hash_ids`` or a ``prefix_group``."""
        return bool((self.hash_block_tokens > 0).any() or (self.prefix_tokens > 0).any())

    def content_hash(self) -> str:
        """SHA-256 hex digest of the trace content (not ``source``), stable across runs and machines.

        Canonical bytes: a version tag, N, ``arrival_s`` as little-endian float64, the token counts
        as little-endian int64, then the ids and domains as compact JSON lists. A trace with prefix
        information (:attr:`has_prefix_info`) appends a tag, ``hash_ids`` as a compact JSON list
        (null where none), ``hash_block_tokens`` and ``prefix_tokens`` as little-endian int64 and
        ``prefix_group`` as a JSON list, so traces without it keep their earlier hashes.
        """
        h = hashlib.sha256(b"specsim-trace-v1\n")
        h.update(str(len(self)).encode())
        h.update(self.arrival_s.astype("<f8").tobytes())
        h.update(self.prompt_tokens.astype("<i8").tobytes())
        h.update(self.output_tokens.astype("<i8").tobytes())
        h.update(json.dumps(self.request_id.tolist(), separators=(",", ":")).encode())
        h.update(json.dumps(self.domain.tolist(), separators=(",", ":")).encode())
        if self.has_prefix_info:
            h.update(b"\nprefix-v1\n")
            h.update(json.dumps([None if x is None else list(x) for x in self.hash_ids],
                                separators=(",", ":")).encode())
            h.update(self.hash_block_tokens.astype("<i8").tobytes())
            h.update(json.dumps(self.prefix_group.tolist(), separators=(",", ":")).encode())
            h.update(self.prefix_tokens.astype("<i8").tobytes())
        for k in sorted(self.extra):                       # stages / sessions (absent: earlier hashes kept)
            h.update(f"\nextra-{k}\n".encode() + json.dumps(self.extra[k].tolist(), separators=(",", ":")).encode())
        return h.hexdigest()

    def head(self, n: int) -> Trace:
        """The first ``n`` requests (1 <= n; more than N gives the whole trace), prefix columns kept."""
        if n < 1:
            raise SpecsimInputError(self.source, None, "n", "an int >= 1", str(n))
        prefix = ({"hash_ids": self.hash_ids[:n], "hash_block_tokens": self.hash_block_tokens[:n],
                   "prefix_group": self.prefix_group[:n], "prefix_tokens": self.prefix_tokens[:n]}
                  if self.has_prefix_info else {})
        return Trace(self.request_id[:n], self.arrival_s[:n], self.prompt_tokens[:n],
                     self.output_tokens[:n], self.domain[:n], source=f"{self.source}[:{n}]",
                     extra={k: v[:n] for k, v in self.extra.items()}, **prefix)

    def to_frame(self) -> pd.DataFrame:
        """A DataFrame with columns request_id, arrival_s, prompt_tokens, output_tokens, domain.

        When the trace has prefix information (:attr:`has_prefix_info`) the columns hash_ids
        (tuples or None), hash_block_tokens, prefix_group and prefix_tokens follow.
        """
        cols = {"request_id": self.request_id, "arrival_s": self.arrival_s,
                "prompt_tokens": self.prompt_tokens, "output_tokens": self.output_tokens,
                "domain": self.domain}
        if self.has_prefix_info:
            cols.update(hash_ids=pd.Series(self.hash_ids, dtype=object),
                        hash_block_tokens=self.hash_block_tokens, prefix_group=self.prefix_group,
                        prefix_tokens=self.prefix_tokens)
        cols.update(self.extra)                            # stage / session columns (specsim.workload.extra)
        return pd.DataFrame(cols)


def _check_columns(cols: Mapping[str, np.ndarray], source: str) -> None:
    """Vectorised range checks for a Trace; the first bad request is reported (1-based position)."""
    a = cols["arrival_s"]
    checks = [
        ("arrival_s", ~np.isfinite(a) | (a < 0), "a finite number >= 0"),
        ("arrival_s", np.r_[False, np.diff(a) < 0], "arrivals that never decrease"),
        ("prompt_tokens", cols["prompt_tokens"] < 1, "an int >= 1"),
        ("output_tokens", cols["output_tokens"] < 1, "an int >= 1"),
        ("domain", np.array([d == "" for d in cols["domain"]], dtype=bool), "a non-empty string"),
    ]
    for name, bad, expected in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise SpecsimInputError(source, i + 1, name, expected, plain(cols[name][i]))
    ids = cols["request_id"]
    if len(set(ids.tolist())) != ids.shape[0]:
        _, first = np.unique(ids, return_index=True)
        dup = np.setdiff1d(np.arange(ids.shape[0]), first)[0]
        raise SpecsimInputError(source, int(dup) + 1, "request_id", "unique ids", repr(ids[dup]))


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _prefix_columns(t: Trace, n: int) -> dict[str, np.ndarray]:
    """The (N,) prefix columns of a Trace being built, defaults filled in (None -> 0 / None)."""
    groups = (np.full(n, None, dtype=object) if t.prefix_group is None
              else np.array(list(t.prefix_group), dtype=object))
    return {
        "hash_block_tokens": (np.zeros(n, np.int64) if t.hash_block_tokens is None
                              else np.array(t.hash_block_tokens, dtype=np.int64)),
        "prefix_group": groups,
        "prefix_tokens": (np.zeros(n, np.int64) if t.prefix_tokens is None
                          else np.array(t.prefix_tokens, dtype=np.int64)),
    }


def _hash_id_tuples(hash_ids, n: int, source: str) -> tuple[tuple[int, ...] | None, ...]:
    """``hash_ids`` as a length-N tuple of int tuples / None; a bad entry names its position."""
    if hash_ids is None:
        return (None,) * n
    out = tuple(hash_ids)
    if len(out) != n:
        raise SpecsimInputError(source, None, "hash_ids", f"a sequence of length {n}",
                                f"length {len(out)}")
    return tuple(None if h is None else _int_tuple(h, source, i + 1) for i, h in enumerate(out))


def _int_tuple(h, source: str, pos: int) -> tuple[int, ...]:
    """One request's hash ids as a tuple of Python ints (a non-empty 1-D int sequence in int64)."""
    a = np.asarray(h)
    if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
        raise SpecsimInputError(source, pos, "hash_ids", "a non-empty list of ints or None",
                                f"an array of dtype {a.dtype} and shape {a.shape}")
    ids = tuple(int(x) for x in a.tolist())
    if max(ids) > _INT64_MAX:
        raise SpecsimInputError(source, pos, "hash_ids", "ints in the int64 range", str(max(ids)))
    return ids


def _check_prefix_columns(cols: Mapping[str, np.ndarray], hash_ids: tuple, source: str) -> None:
    """Range and consistency checks of the prefix columns; the first bad request is reported."""
    prompt, block, tokens = cols["prompt_tokens"], cols["hash_block_tokens"], cols["prefix_tokens"]
    groups = cols["prefix_group"]
    has_h = np.array([h is not None for h in hash_ids], dtype=bool)            # (N,)
    has_g = np.array([g is not None for g in groups.tolist()], dtype=bool)      # (N,)
    count = np.array([0 if h is None else len(h) for h in hash_ids], np.int64)  # (N,)
    first_block = block[has_h][0] if has_h.any() else 0
    checks = [
        ("prefix_group", has_h & has_g, "either hash_ids or a prefix_group, not both",
         lambda i: "both on one request"),
        ("prefix_group", np.array([g is not None and (not isinstance(g, str) or g == "")
                                   for g in groups.tolist()], dtype=bool),
         "a non-empty string or None", lambda i: repr(groups[i])),
        ("hash_block_tokens", has_h & (block < 1), "an int >= 1 where hash_ids is given",
         lambda i: str(block[i])),
        ("hash_block_tokens", ~has_h & (block != 0), "0 where hash_ids is None",
         lambda i: str(block[i])),
        ("hash_block_tokens", has_h & (block != first_block),
         f"one value for the whole trace ({first_block}, as on the first request with hash_ids)",
         lambda i: str(block[i])),
        ("hash_ids", has_h & ((count * block < prompt) | ((count - 1) * block >= prompt)),
         "ceil(prompt_tokens / hash_block_tokens) ids",
         lambda i: f"{count[i]} ids of {block[i]} tokens for {prompt[i]} prompt tokens"),
        ("prefix_tokens", has_g & ((tokens < 1) | (tokens > prompt)),
         "an int in [1, prompt_tokens]", lambda i: f"{tokens[i]} (prompt_tokens {prompt[i]})"),
        ("prefix_tokens", ~has_g & (tokens != 0), "0 where prefix_group is None",
         lambda i: str(tokens[i])),
    ]
    for name, bad, expected, shown in checks:
        if bad.any():
            i = int(np.argmax(bad))
            raise SpecsimInputError(source, i + 1, name, expected, shown(i))
    _check_group_lengths(groups, tokens, source)


def _check_group_lengths(groups: np.ndarray, tokens: np.ndarray, source: str) -> None:
    """Every request of a prefix group has the same prefix_tokens (1-based position reported)."""
    first: dict[str, tuple[int, int]] = {}
    for i, (g, k) in enumerate(zip(groups.tolist(), tokens.tolist())):
        if g is None:
            continue
        k0, pos = first.setdefault(g, (k, i + 1))
        if k != k0:
            raise SpecsimInputError(source, i + 1, "prefix_tokens",
                                    f"{k0}, the prefix_tokens of group {g!r} at request {pos}", str(k))


# ---------------------------------------------------------------------------------------------
# Canonical JSONL


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
                                    f"malformed JSON ({e.msg} at column {e.colno})") from None
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


def load_trace(path) -> Trace:
    """Read a canonical JSONL trace (format in the module docstring).

    Args:
        path: a JSONL file.

    Returns:
        The :class:`Trace`, ``source`` = ``str(path)``.

    Raises:
        SpecsimInputError: naming file, 1-based line, field, expected and found, for malformed JSON,
            a missing field, a wrong type (bool is not an int, a string is not a number), NaN or
            Infinity, tokens <= 0, a decreasing arrival, a duplicate id, an empty or blank-only file,
            and for the prefix fields: hash_ids and prefix_group on one line, hash_block_tokens or
            prefix_tokens without its partner, hash_ids not ceil(prompt_tokens /
            hash_block_tokens) long, two hash_block_tokens values in one trace, prefix_tokens
            outside [1, prompt_tokens] or different within a group.
    """
    path = Path(path)
    src = str(path)
    ids, arr, pro, out, dom = [], [], [], [], []
    prefix = _PrefixReader(src)
    extra = extra_fields.ExtraReader(src)
    id_line: dict[str, int] = {}
    prev_arrival, prev_line = 0.0, 0
    for line, obj in _iter_json_lines(path):
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


# ---------------------------------------------------------------------------------------------
# Converters (SOURCES.md sections 1a and 1b)


def _first_bad(mask: np.ndarray) -> int | None:
    """Index of the first True in ``mask``, or None."""
    return int(np.argmax(mask)) if mask.any() else None


# Wall-clock times (the Azure converters; see parse_wall_times)

# YYYY-MM-DD, a 'T' / 't' / space, HH:MM[:SS[.fraction]], then an optional zone: Z or +HH[:MM].
_WALL_TIME = (r"^\s*([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2})"
              r"(?::([0-9]{2})(?:[.,]([0-9]+))?)?"
              r"\s*(?:([Zz])|([+-])([0-9]{2})(?::?([0-9]{2}))?)?\s*$")
_WALL_TIME_WORDS = ("a time 'YYYY-MM-DD HH:MM:SS.fffffff' or ISO 8601 such as "
                    "'2024-03-01T00:00:00.5Z' or '2024-03-01T01:00:00+01:00' (seconds, fraction "
                    "and zone optional)")
#: Largest span between two wall-clock times of one file: int64 nanoseconds hold about 292 years.
MAX_WALL_SPAN_S = 9_000_000_000
_MONTH_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """(N,) days since 1970-01-01 of proleptic Gregorian dates (H. Hinnant's algorithm)."""
    y = y - (m <= 2)
    era = y // 400
    yoe = y - era * 400                                        # year of era, [0, 399]
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1  # day of year from March 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy              # day of era
    return era * 146097 + doe - 719468


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
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    mdays = _MONTH_DAYS[np.clip(mo - 1, 0, 11)] + ((mo == 2) & leap)
    ok &= ((mo >= 1) & (mo <= 12) & (d >= 1) & (d <= mdays) & (hh <= 23) & (mi <= 59)
           & (ss <= 59) & (oh <= 23) & (om <= 59))
    i = _first_bad(~ok)
    if i is not None:
        raise SpecsimInputError(source, int(lines[i]), field, _WALL_TIME_WORDS, repr(texts[i]))
    aware = (g[7].notna() | g[8].notna()).to_numpy()
    i = _first_bad(aware != aware[0])
    if i is not None:
        kind = ("zone-aware", "naive")
        raise SpecsimInputError(
            source, int(lines[i]), field,
            f"{kind[not aware[0]]} times throughout, as on line {int(lines[0])} (the file mixes "
            "zone-aware and naive times, which have no common clock)",
            f"{texts[i]!r}, a {kind[not aware[i]]} time")
    sign = np.where(g[8].to_numpy() == "-", -1, 1)
    secs = ((_days_from_civil(y, mo, d) * 24 + hh) * 60 + mi) * 60 + ss - sign * (oh * 3600 + om * 60)
    frac = g[6].fillna("").str.slice(0, 9).str.pad(9, side="right", fillchar="0").astype(np.int64)
    rel_s = secs - secs[0]                                      # (N,) whole seconds, exact
    i = _first_bad(np.abs(rel_s) > MAX_WALL_SPAN_S)
    if i is not None:
        raise SpecsimInputError(source, int(lines[i]), field,
                                f"a time within {MAX_WALL_SPAN_S} s of line {int(lines[0])}'s",
                                repr(texts[i]))
    return rel_s * 1_000_000_000 + (frac.to_numpy() - int(frac.iloc[0]))


def convert_azure(path, domain: str | None = None) -> Trace:
    """Convert an Azure LLM inference 2023 CSV (SOURCES.md section 1a) to a :class:`Trace`.

    ``TIMESTAMP`` (wall clock ``YYYY-MM-DD HH:MM:SS.fffffff``, 100 ns resolution, or any ISO 8601
    form :func:`parse_wall_times` accepts: ``T``, ``Z``, offsets, no fraction or one of any
    length) becomes seconds from the first row, computed exactly in integer nanoseconds before
    one division by 1e9;
    ``ContextTokens`` -> prompt_tokens, ``GeneratedTokens`` -> output_tokens; request ids are the
    0-based row indices.

    Args:
        path: the CSV file (header ``TIMESTAMP,ContextTokens,GeneratedTokens``).
        domain: the domain of every request; default ``"code"`` when the file name contains "code",
            else ``"chat"``.

    Raises:
        SpecsimInputError: a missing column, an unparsable timestamp, a file mixing zone-aware and
            naive timestamps, a non-integer or < 1 token count, or a timestamp earlier than the
            row before, naming the 1-based file line.
    """
    path = Path(path)
    src = str(path)
    if domain is None:
        domain = "code" if "code" in path.name.lower() else "chat"
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, skip_blank_lines=False)
    except FileNotFoundError:
        raise SpecsimInputError(src, None, None, "a readable file", "no such file") from None
    except OSError as e:                                   # a folder, no permission
        raise SpecsimInputError(src, None, None, "a readable file", e.strerror or type(e).__name__) from None
    except UnicodeDecodeError:
        raise SpecsimInputError(src, None, None, "an Azure LLM trace CSV (UTF-8 text)", "undecodable bytes") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as e:
        raise SpecsimInputError(src, None, None, "an Azure LLM trace CSV", " ".join(str(e).split())[:120]) from None
    for col in ("TIMESTAMP", "ContextTokens", "GeneratedTokens"):
        if col not in df.columns:
            raise SpecsimInputError(src, 1, col, "a header column", f"columns {list(df.columns)}")
    if len(df) == 0:
        raise SpecsimInputError(src, 2, None, "at least one data row", "only a header")
    line = np.arange(len(df)) + 2  # header is line 1
    ns = parse_wall_times(df["TIMESTAMP"].tolist(), src, line, "TIMESTAMP")  # (N,) int64 from row 1
    i = _first_bad(np.r_[False, np.diff(ns) < 0])
    if i is not None:
        raise SpecsimInputError(src, int(line[i]), "TIMESTAMP", "times that never decrease",
                                f"{df['TIMESTAMP'].iloc[i]!r} after {df['TIMESTAMP'].iloc[i - 1]!r}")
    counts = []
    for col in ("ContextTokens", "GeneratedTokens"):
        s = df[col].str.strip()
        ok = s.str.fullmatch(r"\d{1,15}").to_numpy()
        v = np.where(ok, pd.to_numeric(s.where(ok, "0")).to_numpy(), 0).astype(np.int64)
        i = _first_bad(v < 1)
        if i is not None:
            raise SpecsimInputError(src, int(line[i]), col, "an int >= 1", repr(df[col].iloc[i]))
        counts.append(v)
    arrival = ns / 1e9
    n = len(df)
    return Trace(np.array([str(k) for k in range(n)], dtype=object), arrival, counts[0], counts[1],
                 np.full(n, domain, dtype=object), source=src)


SLOTS = ("burst", "spread")
# Tokens per Mooncake hash id: "remapped hashes of 512-token prefix blocks" (SOURCES.md section 1b);
# every one of the 12,031 conversation requests has exactly ceil(input_length / 512) ids.
MOONCAKE_BLOCK_TOKENS = 512


def convert_mooncake(path, slots: str = "burst", domain: str = "chat") -> Trace:
    """Convert a Mooncake FAST'25 trace JSONL (SOURCES.md section 1b) to a :class:`Trace`.

    Fields: ``timestamp`` (ms since the trace start: an int as in the published files, or a
    float with a fraction of any length; at most 2^53), ``input_length`` -> prompt_tokens, ``output_length`` ->
    output_tokens; arrivals are seconds from the first timestamp; ids are the 0-based request
    indices. ``hash_ids`` (hashes of 512-token prefix blocks; equal ids at a position mean a
    shareable KV prefix) are kept as :attr:`Trace.hash_ids` with ``hash_block_tokens`` =
    :data:`MOONCAKE_BLOCK_TOKENS` (512, SOURCES.md section 1b), for the prefix cache; a line
    without ``hash_ids`` gets None (no prefix information).

    The timestamps are quantised to about 3 s slots (about 10 requests share each). ``slots``:

    * ``"burst"``: keep each slot's requests simultaneous at the slot's timestamp.
    * ``"spread"``: the k-th of the n requests of a slot starting at t arrives at t + w * k / n,
      where w (the slot width) is the gap to the next distinct timestamp, or the median of those
      gaps for the last slot (0 when the trace has one timestamp). Deterministic, order kept.

    Raises:
        SpecsimInputError: an unknown ``slots``, or any line with malformed JSON, a missing or
            wrongly typed field, a negative or decreasing timestamp, a length < 1, ``hash_ids`` that
            is not a non-empty list of ints ceil(input_length / 512) long (naming the line).
    """
    if slots not in SLOTS:
        raise SpecsimInputError(None, None, "slots", f"one of {SLOTS}", repr(slots))
    path = Path(path)
    src = str(path)
    ts, pro, out, hashes = [], [], [], []
    prev, prev_line = 0, 0
    for line, obj in _iter_json_lines(path):
        t = obj.get("timestamp")
        if type(t) not in (int, float) or not 0 <= t <= MAX_COUNT:   # NaN fails the comparison
            got = "nothing (field missing)" if "timestamp" not in obj else _describe(t)
            raise SpecsimInputError(src, line, "timestamp",
                                    "a number of ms in [0, 2^53] (an int, or a float with a fraction)",
                                    got)
        if t < prev:
            raise SpecsimInputError(src, line, "timestamp",
                                    f"a value >= {prev} (the timestamp on line {prev_line})", str(t))
        prev, prev_line = t, line
        ts.append(t)
        pro.append(_get(obj, "input_length", "count", src, line))
        out.append(_get(obj, "output_length", "count", src, line))
        hashes.append(_get_hash_ids(obj["hash_ids"], MOONCAKE_BLOCK_TOKENS, pro[-1], src, line)
                      if "hash_ids" in obj else None)
    exact = all(type(t) is int for t in ts)
    t_ms = np.array(ts, dtype=np.int64 if exact else np.float64)  # (N,) ms, ints kept exact
    if slots == "burst":
        arrival_ms = (t_ms - t_ms[0]).astype(np.float64)
    else:
        starts, first, counts = np.unique(t_ms, return_index=True, return_counts=True)
        gaps = np.diff(starts)
        width = np.r_[gaps, np.median(gaps) if gaps.size else 0.0].astype(np.float64)
        rank = np.arange(t_ms.size) - np.repeat(first, counts)  # position of a request in its slot
        arrival_ms = (np.repeat(starts - starts[0], counts)
                      + np.repeat(width / counts, counts) * rank)
    n = t_ms.size
    block = np.array([0 if h is None else MOONCAKE_BLOCK_TOKENS for h in hashes], dtype=np.int64)
    return Trace(np.array([str(k) for k in range(n)], dtype=object), arrival_ms / 1000.0,
                 np.array(pro, dtype=np.int64), np.array(out, dtype=np.int64),
                 np.full(n, domain, dtype=object), source=src, hash_ids=tuple(hashes),
                 hash_block_tokens=block)


# ---------------------------------------------------------------------------------------------
# Synthetic traces


@dataclass(frozen=True)
class LengthModel:
    """Prompt/output lengths of one domain: a bivariate lognormal, truncated to the maxima.

    ``log(prompt) ~ N(prompt_mu, prompt_sigma^2)``, ``log(output) ~ N(output_mu, output_sigma^2)``,
    the two joined by a Gaussian copula with correlation ``rho``. :func:`synth_trace` draws each
    length from its lognormal truncated to [0.5, max + 0.5) by inverse CDF and rounds it, so every
    value lies in [1, max] without a spike at the cap.

    Fit (:func:`fit_length_models`): ``mu`` = median of log(length) and ``sigma`` = (p90 - p50 of
    log(length)) / z_0.9 (z_0.9 = 1.2816), i.e. the lognormal through the data's median and 90th
    percentile; ``rho`` = Pearson correlation of the logs. Quantiles, not maximum likelihood,
    because the public files are bounded by context limits (Azure code prompts end at 7,437,
    ShareGPT is filtered to 8k) and have a long left tail of tiny prompts: the likelihood fit puts
    11% of ShareGPT prompts above 8,192 tokens where the data has none. After truncation the
    quantile fit keeps the data's medians within 6%, its means within 16% and its p25/p90/p99
    within a factor of 1.8 (table in traces/README.md).
    """

    prompt_mu: float
    prompt_sigma: float
    output_mu: float
    output_sigma: float
    rho: float
    source: str


# Refit with fit_length_models(<shared>/data); rounded to 4 decimals (tests/test_trace.py checks them).
# - chat: Azure LLM 2023 conv (SOURCES.md 1a), 19,366 rows: prompt and output jointly.
# - code: prompt from Azure LLM 2023 code (1a, 8,819 rows); output from the ShareGPT lengths (1c).
#   The Azure code outputs (median 13 tokens) are completions of a coding assistant, far shorter
#   than the code answers speculative decoding is benchmarked on (PAPER.md section 6: responses
#   regenerated by the target, up to 4,096 tokens), so outputs take ShareGPT's; rho = 0 because
#   the two margins come from different files.
# - math: no public trace has math lengths; ShareGPT lengths (1c, 30,731 rows) stand in for both.
LENGTH_MODELS: dict[str, LengthModel] = {
    "chat": LengthModel(6.9276, 0.7695, 4.8598, 0.9285, 0.0875,
                        "Azure LLM 2023 conv (SOURCES.md 1a)"),
    "code": LengthModel(7.2923, 0.9845, 6.0283, 0.5446, 0.0000,
                        "prompt: Azure LLM 2023 code (SOURCES.md 1a); output: ShareGPT (1c)"),
    "math": LengthModel(7.4559, 0.9298, 6.0283, 0.5446, 0.0624,
                        "ShareGPT lengths, Llama-2 tokenizer (SOURCES.md 1c)"),
}

AZURE_CODE = "traces/azure_llm_2023/AzureLLMInferenceTrace_code.csv"
AZURE_CONV = "traces/azure_llm_2023/AzureLLMInferenceTrace_conv.csv"
SHAREGPT = "traces/lengths/sharegpt_8k_filtered_stats_llama2_tokenizer.csv"
Z_90 = float(ndtri(0.9))  # standard normal 90th percentile, 1.2816


def _log_fit(x: np.ndarray) -> tuple[float, float]:
    """Lognormal through the median and 90th percentile of ``x``: (mu, sigma) of log(x)."""
    p50, p90 = np.percentile(np.log(x.astype(np.float64)), [50, 90])
    return float(p50), float((p90 - p50) / Z_90)


def fit_length_models(data_dir) -> dict[str, LengthModel]:
    """Refit :data:`LENGTH_MODELS` from the shared public data (the ``data/`` folder of SOURCES.md).

    Returns unrounded parameters; the recipe per domain is the comment above LENGTH_MODELS and the
    fit is described in :class:`LengthModel`.
    """
    d = Path(data_dir)
    conv = pd.read_csv(d / AZURE_CONV)
    code = pd.read_csv(d / AZURE_CODE)
    sg = pd.read_csv(d / SHAREGPT)

    def corr(a, b):
        return float(np.corrcoef(np.log(a.to_numpy(float)), np.log(b.to_numpy(float)))[0, 1])

    sg_out = _log_fit(sg["num_decode_tokens"].to_numpy())
    return {
        "chat": LengthModel(*_log_fit(conv["ContextTokens"].to_numpy()),
                            *_log_fit(conv["GeneratedTokens"].to_numpy()),
                            corr(conv["ContextTokens"], conv["GeneratedTokens"]),
                            LENGTH_MODELS["chat"].source),
        "code": LengthModel(*_log_fit(code["ContextTokens"].to_numpy()), *sg_out, 0.0,
                            LENGTH_MODELS["code"].source),
        "math": LengthModel(*_log_fit(sg["num_prefill_tokens"].to_numpy()), *sg_out,
                            corr(sg["num_prefill_tokens"], sg["num_decode_tokens"]),
                            LENGTH_MODELS["math"].source),
    }


def truncated_lognormal_mean(mu: float, sigma: float, max_tokens: int) -> float:
    """Mean of exp(N(mu, sigma^2)) truncated to [0.5, max_tokens + 0.5) (before rounding).

    Closed form: exp(mu + sigma^2/2) (Phi(b - sigma) - Phi(a - sigma)) / (Phi(b) - Phi(a)) with
    a, b the standardised log bounds.
    """
    a = (math.log(0.5) - mu) / sigma
    b = (math.log(max_tokens + 0.5) - mu) / sigma
    return float(math.exp(mu + sigma**2 / 2) * (ndtr(b - sigma) - ndtr(a - sigma))
                 / (ndtr(b) - ndtr(a)))


def _draw_lengths(mu: np.ndarray, sigma: np.ndarray, z: np.ndarray, max_tokens: int) -> np.ndarray:
    """(N,) int64 lengths: standard normals ``z`` mapped into the truncated lognormals, rounded."""
    lo = ndtr((np.log(0.5) - mu) / sigma)                  # (N,) CDF at the lower bound
    hi = ndtr((np.log(max_tokens + 0.5) - mu) / sigma)     # (N,) CDF at the upper bound
    u = lo + (hi - lo) * ndtr(z)                           # (N,) uniform within the bounds
    x = np.exp(mu + sigma * ndtri(u))
    return np.clip(np.rint(x), 1, max_tokens).astype(np.int64)


def parse_mix(mix: str | Mapping[str, float], known=LENGTH_MODELS) -> dict[str, float]:
    """Parse a domain mix such as ``"chat=0.2,code=0.4,math=0.4"`` into normalised weights.

    Raises:
        SpecsimInputError (field ``mix``): bad syntax, an unknown domain, a negative or non-finite
            weight, a repeated domain, or weights summing to 0.
    """
    if isinstance(mix, str):
        items = []
        for part in mix.split(","):
            name, _, val = part.partition("=")
            try:
                items.append((name.strip(), float(val)))
            except ValueError:
                raise SpecsimInputError(None, None, "mix", "name=weight pairs separated by commas",
                                        repr(mix)) from None
    else:
        items = [(str(k), float(v)) for k, v in mix.items()]
    names = [k for k, _ in items]
    for name, w in items:
        if name not in known:
            raise SpecsimInputError(None, None, "mix", f"domains from {sorted(known)}", repr(name))
        if not math.isfinite(w) or w < 0:
            raise SpecsimInputError(None, None, "mix", "finite weights >= 0", f"{name}={w}")
    if len(set(names)) != len(names) or sum(w for _, w in items) <= 0:
        raise SpecsimInputError(None, None, "mix", "distinct domains with weights summing to > 0",
                                repr(mix))
    total = sum(w for _, w in items)
    return {k: w / total for k, w in items}


ARRIVALS = ("poisson", "gamma", "constant")


def parse_length_spec(spec: int | str | None, field: str) -> tuple | None:
    """A fixed or distributed length: ``128`` or ``"128"`` (fixed), ``"uniform:LO:HI"`` (integers
    LO..HI inclusive, 1 <= LO <= HI); None keeps the fitted model.

    Returns ``("fixed", n)``, ``("uniform", lo, hi)`` or None. Raises SpecsimInputError naming ``field``.
    """
    if spec is None:
        return None
    text = str(spec).strip()
    parts = text.split(":")
    try:
        if len(parts) == 1 or (len(parts) == 2 and parts[0] == "fixed"):
            n = int(parts[-1])
            if n >= 1:
                return ("fixed", n)
        elif len(parts) == 3 and parts[0] == "uniform":
            lo, hi = int(parts[1]), int(parts[2])
            if 1 <= lo <= hi:
                return ("uniform", lo, hi)
    except ValueError:
        pass
    raise SpecsimInputError(None, None, field, "a fixed length N >= 1 or uniform:LO:HI with 1 <= LO <= HI",
                            repr(spec))


def _synth_arrivals(rng: np.random.Generator, n: int | None, rate: float, arrival: str, cv: float,
                    duration_s: float | None, span_s: float | None) -> np.ndarray:
    """(N,) float64 arrivals from 0 s: N given, or every arrival in [0, duration_s) when N is None.

    Gaps are i.i.d. with mean 1/rate (exponential, Gamma(1/cv^2, cv^2/rate) or exactly 1/rate);
    ``span_s`` then rescales them so that the last arrival is at ``span_s``.
    """
    def gaps(k: int) -> np.ndarray:
        if arrival == "poisson":
            return rng.exponential(1.0 / rate, k)
        if arrival == "gamma":
            return rng.gamma(1.0 / cv**2, cv**2 / rate, k)
        return np.full(k, 1.0 / rate)

    if n is not None:
        times = np.r_[0.0, np.cumsum(gaps(n - 1))]
    else:
        chunk = int(rate * duration_s * 1.25) + 16   # draws in a few chunks, deterministic per seed
        times = np.zeros(1)
        while times[-1] < duration_s:
            times = np.r_[times, times[-1] + np.cumsum(gaps(chunk))]
        times = times[times < duration_s]
    if span_s is not None:
        times = times * (span_s / times[-1])
    return times


def _synth_lengths(rng_model: np.random.Generator, rng_extra: np.random.Generator, n: int,
                   params: np.ndarray, lengths: tuple[np.ndarray, np.ndarray] | None,
                   specs: tuple[tuple | None, tuple | None], maxima: tuple[int, int]) -> list[np.ndarray]:
    """[(N,) prompt, (N,) output] int64 lengths: the domain models, or pairs drawn from ``lengths``,
    then replaced by the fixed or uniform ``specs`` where given."""
    if lengths is not None:
        idx = rng_extra.integers(0, lengths[0].size, n)                 # pairs drawn with replacement
        out = [np.clip(lengths[k][idx], 1, maxima[k]).astype(np.int64) for k in (0, 1)]
    else:
        z = rng_model.standard_normal((n, 2))
        z_out = params[:, 4] * z[:, 0] + np.sqrt(1.0 - params[:, 4] ** 2) * z[:, 1]  # (N,) copula
        out = [_draw_lengths(params[:, 0], params[:, 1], z[:, 0], maxima[0]),
               _draw_lengths(params[:, 2], params[:, 3], z_out, maxima[1])]
    for k, spec in enumerate(specs):
        if spec is not None and spec[0] == "fixed":
            out[k] = np.full(n, spec[1], dtype=np.int64)
        elif spec is not None:
            out[k] = rng_extra.integers(spec[1], spec[2] + 1, n).astype(np.int64)
    return out


def _synth_count(num_requests, duration_s, span_s, prefix_groups, questions_per_group) -> int | None:
    """The request count the arguments fix (None: all arrivals before ``duration_s``); raises on conflicts."""
    grouped = questions_per_group if prefix_groups else None
    given = [k for k, v in (("num_requests", num_requests), ("duration_s", duration_s),
                            ("questions_per_group", grouped)) if v is not None]
    if len(given) != 1 and not (given == ["num_requests", "questions_per_group"]
                                and num_requests == prefix_groups * questions_per_group):
        raise SpecsimInputError(None, None, "num_requests", "exactly one of num_requests, duration_s "
                                "(with rate) or prefix_groups x questions_per_group", f"{given or 'none'}")
    if span_s is not None and duration_s is not None:
        raise SpecsimInputError(None, None, "span_s", "span_s without duration_s (both set the time span)",
                                f"span_s={span_s}, duration_s={duration_s}")
    if grouped is not None:
        return prefix_groups * questions_per_group
    return None if num_requests is None else int(num_requests)


def synth_trace(num_requests: int | None, rate: float, *, arrival: str = "poisson", cv: float = 1.0,
                mix: str | Mapping[str, float] = "chat=1", seed: int = 0,
                max_prompt_tokens: int = 8192, max_output_tokens: int = 2048,
                length_models: Mapping[str, LengthModel] = LENGTH_MODELS,
                duration_s: float | None = None, span_s: float | None = None,
                output_len: int | str | None = None, prompt_len: int | str | None = None,
                lengths: tuple[np.ndarray, np.ndarray] | None = None,
                prefix_groups: int = 0, prefix_tokens: int = 0,
                questions_per_group: int | None = None) -> Trace:
    """Draw a synthetic trace: renewal arrivals, a domain mix, fitted, fixed or sampled lengths.

    Count: ``num_requests``; or, with ``duration_s``, every arrival in [0, duration_s) at ``rate``;
    or, with prefix groups, ``prefix_groups x questions_per_group`` (exactly one of the three).

    Arrivals: the first request arrives at 0 s; inter-arrival gaps are i.i.d. with mean 1/rate:
    exponential for ``poisson`` (CV 1), Gamma with shape 1/cv^2 and scale cv^2/rate for ``gamma``
    (CV = ``cv``; cv > 1 is bursty), exactly 1/rate for ``constant``. With ``span_s`` the drawn
    arrivals are rescaled so that the last one is at ``span_s`` (a stage of that duration; the shape
    of the gaps is kept and ``rate`` no longer matters). Arrivals are rounded to microseconds so
    files round-trip.

    Domains: exact counts from the mix by largest remainder, then randomly permuted. Lengths: each
    request's domain model (:class:`LengthModel`) truncated to [1, max_*_tokens]; or, with
    ``lengths``, (prompt, output) pairs drawn with replacement from those arrays (clipped to the
    maxima); then ``prompt_len`` / ``output_len`` (:func:`parse_length_spec`: fixed N or
    uniform:LO:HI, used as given) replace the drawn values where set.

    Shared prefixes (``prefix_groups`` G >= 1 with ``prefix_tokens`` P >= 1): each request belongs to
    one of G groups (``prefix_group`` ``"g0"``..``"g{G-1}"``, balanced: ``questions_per_group`` each
    when given, else request k's group is k mod G before a random permutation); its prompt is the P
    shared system-prompt tokens followed by its question, whose length is the prompt length drawn
    above, so ``prompt_tokens`` = P + question and ``prefix_tokens`` = P (docs/memory.md).

    Ids: "0".."N-1". Random streams: ``SeedSequence(seed).spawn(5)``: arrivals, domain order, model
    lengths (the first three as before these options existed, so earlier traces are unchanged),
    group order, and the lengths-file / uniform draws.

    Args:
        num_requests: N >= 1, or None with ``duration_s`` or ``questions_per_group``.
        rate: mean arrival rate in requests per second, > 0.
        arrival: ``"poisson"``, ``"gamma"`` or ``"constant"``.
        cv: inter-arrival coefficient of variation, > 0 (must be 1 for ``poisson`` and ``constant``).
        mix: domain weights, a ``"chat=0.2,code=0.4,math=0.4"`` string or a mapping.
        seed: the one seed, an int >= 0.
        max_prompt_tokens, max_output_tokens: clipping maxima in tokens, >= 1.
        length_models: per-domain length models (default: :data:`LENGTH_MODELS`).
        duration_s: seconds > 0; with ``rate`` instead of a count.
        span_s: seconds > 0, the last arrival after rescaling (N >= 2).
        output_len, prompt_len: fixed or uniform lengths (:func:`parse_length_spec`).
        lengths: (prompt, output) int arrays of equal length M >= 1
            (:func:`specsim.workload.formats.load_lengths_csv`).
        prefix_groups, prefix_tokens, questions_per_group: the shared-prefix groups (0 = none).

    Raises:
        SpecsimInputError: any argument outside the ranges above or a conflicting combination,
            naming it as the field.
    """
    n = _synth_count(num_requests, duration_s, span_s, prefix_groups, questions_per_group)
    for name, v, ok, expected in [
        ("num_requests", n, n is None or n >= 1, "an int >= 1"),
        ("rate", rate, math.isfinite(rate) and rate > 0, "a finite rate > 0 req/s"),
        ("arrival", arrival, arrival in ARRIVALS, f"one of {ARRIVALS}"),
        ("cv", cv, math.isfinite(cv) and cv > 0 and (arrival == "gamma" or cv == 1.0),
         "a finite cv > 0 (exactly 1 for poisson and constant arrivals)"),
        ("seed", seed, seed >= 0, "an int >= 0"),
        ("max_prompt_tokens", max_prompt_tokens, max_prompt_tokens >= 1, "an int >= 1"),
        ("max_output_tokens", max_output_tokens, max_output_tokens >= 1, "an int >= 1"),
        ("duration_s", duration_s, duration_s is None or (math.isfinite(duration_s) and duration_s > 0),
         "a finite duration > 0 s"),
        ("span_s", span_s, span_s is None or (math.isfinite(span_s) and span_s > 0 and (n or 0) >= 2),
         "a finite span > 0 s with at least 2 requests"),
        ("prefix_groups", prefix_groups, prefix_groups >= 0, "an int >= 0"),
        ("prefix_tokens", prefix_tokens, (prefix_tokens >= 1) == (prefix_groups >= 1) and prefix_tokens >= 0,
         "an int >= 1 exactly when prefix_groups >= 1"),
        ("questions_per_group", questions_per_group, questions_per_group is None or questions_per_group >= 1,
         "an int >= 1"),
        ("lengths", None if lengths is None else len(lengths[0]),
         lengths is None or (len(lengths) == 2 and len(lengths[0]) == len(lengths[1]) >= 1),
         "two arrays of equal length >= 1"),
    ]:
        if not ok:
            raise SpecsimInputError(None, None, name, expected, repr(v))
    specs = (parse_length_spec(prompt_len, "prompt_len"), parse_length_spec(output_len, "output_len"))
    weights = parse_mix(mix, length_models)
    arr_rng, dom_rng, len_rng, group_rng, extra_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5))

    arrival_s = np.round(_synth_arrivals(arr_rng, n, rate, arrival, cv, duration_s, span_s), 6)
    n = arrival_s.size  # rounding is monotone: order kept

    names = list(weights)
    quota = np.array([weights[k] for k in names]) * n
    counts = np.floor(quota).astype(np.int64)
    extra = np.argsort(-(quota - counts), kind="stable")[: n - counts.sum()]
    counts[extra] += 1
    dom_idx = dom_rng.permutation(np.repeat(np.arange(len(names)), counts))  # (N,)

    params = np.array([[getattr(length_models[k], f) for f in
                        ("prompt_mu", "prompt_sigma", "output_mu", "output_sigma", "rho")]
                       for k in names])[dom_idx]  # (N, 5)
    pairs = None if lengths is None else tuple(np.asarray(x, dtype=np.int64) for x in lengths)
    prompt, output = _synth_lengths(len_rng, extra_rng, n, params, pairs, specs,
                                    (max_prompt_tokens, max_output_tokens))
    desc = (f"synth(n={n}, rate={rate}, arrival={arrival}, cv={cv}, mix={weights}, seed={seed})")
    prefix = {}
    if prefix_groups:
        group = group_rng.permutation(np.arange(n) % prefix_groups)           # (N,) balanced groups
        prompt = prompt + prefix_tokens
        prefix = {"prefix_group": np.array([f"g{g}" for g in group], dtype=object),
                  "prefix_tokens": np.full(n, prefix_tokens, dtype=np.int64)}
        desc = desc[:-1] + f", prefix_groups={prefix_groups}, prefix_tokens={prefix_tokens})"
    return Trace(np.array([str(k) for k in range(n)], dtype=object), arrival_s,
                 prompt, output, np.array(names, dtype=object)[dom_idx], source=desc, **prefix)


# ---------------------------------------------------------------------------------------------
# Statistics


def trace_stats(trace: Trace) -> dict:
    """Summary statistics of a trace (the conventions of SOURCES.md).

    Returns a dict: ``num_requests``, ``span_s`` (last - first arrival), ``rate_req_per_s``
    ((N - 1) / span, None when the span is 0), ``interarrival_cv`` (population std / mean of the
    gaps, None when undefined), and ``domains``: for ``"all"`` and each domain, ``num_requests``
    and prompt/output token ``mean``, ``p50``, ``p99`` (numpy's linear percentiles).
    """
    a = trace.arrival_s
    span = float(a[-1] - a[0])
    gaps = np.diff(a)
    cv = float(gaps.std() / gaps.mean()) if gaps.size and gaps.mean() > 0 else None

    def lengths(mask: np.ndarray) -> dict:
        row = {"num_requests": int(mask.sum())}
        for name, col in (("prompt", trace.prompt_tokens), ("output", trace.output_tokens)):
            x = col[mask]
            row[f"{name}_mean"] = float(x.mean())
            row[f"{name}_p50"], row[f"{name}_p99"] = (float(v) for v in np.percentile(x, [50, 99]))
        return row

    domains = {"all": lengths(np.ones(len(trace), dtype=bool))}
    for d in sorted(set(trace.domain.tolist())):
        domains[d] = lengths(trace.domain == d)
    return {"num_requests": len(trace), "span_s": span,
            "rate_req_per_s": (len(trace) - 1) / span if span > 0 else None,
            "interarrival_cv": cv, "domains": domains}
