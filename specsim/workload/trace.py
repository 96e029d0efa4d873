"""The request trace: :class:`Trace`, its columns and their checks, and :func:`trace_stats`.

A trace is the list of requests a simulation replays: arrival time, prompt and output lengths, a
domain (which keys the acceptance model), a unique id and optional prefix information. :class:`Trace`
holds them as column arrays. The workload package's other modules read and write traces:

* :mod:`specsim.workload.jsonl`: the canonical JSONL file format and its validation
  (:func:`~specsim.workload.jsonl.load_trace`, :func:`~specsim.workload.jsonl.save_trace`);
* :mod:`specsim.workload.converters`: public traces and tables into a :class:`Trace` (Azure, Mooncake,
  BurstGPT, any CSV/JSONL through a column map, lengths CSVs);
* :mod:`specsim.workload.lengths`: the per-domain length models fitted to public traces;
* :mod:`specsim.workload.synth`: the synthetic generator :func:`~specsim.workload.synth.synth_trace`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError, plain
from specsim.workload import extra as extra_fields

DEFAULT_DOMAIN = "chat"


def _token_counts(values, name: str, source: str) -> np.ndarray:
    """``values`` as int64 token counts. Whole floats (100.0, as pandas columns often hold them) are accepted
    here; a JSONL file is held to its own stricter rule (an integer literal).

    Raises:
        SpecsimInputError: a value that is not a whole number (100.7 would be cut to 100 silently), or no numbers.
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    try:
        f = arr.astype(np.float64)
    except (TypeError, ValueError):
        raise SpecsimInputError(source, None, name, "whole numbers of tokens", f"{arr.dtype} values") from None
    bad = ~(np.isfinite(f) & (f == np.floor(f)))
    if bad.any():                                  # line: the request's 1-based position, as the other checks
        first = int(np.flatnonzero(bad)[0])
        raise SpecsimInputError(source, first + 1, name, "a whole number of tokens", repr(float(f[first])))
    return f.astype(np.int64)


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
        cut_s: where this trace is the head of a longer one (:meth:`head`), the arrival time of the first request
            it dropped (seconds); None otherwise. Its load stages end there (per-stage figures mark them
            partial); not part of the content hash.

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
    cut_s: float | None = None

    def __post_init__(self) -> None:
        cols = {
            "request_id": np.array([str(x) for x in self.request_id], dtype=object),
            "arrival_s": np.array(self.arrival_s, dtype=np.float64) + 0.0,  # + 0.0 turns -0.0 into 0.0
            "prompt_tokens": _token_counts(self.prompt_tokens, "prompt_tokens", self.source),
            "output_tokens": _token_counts(self.output_tokens, "output_tokens", self.source),
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
        object.__setattr__(self, "extra", extra_fields.normalise(self.extra, n, self.source, self.arrival_s))

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
        """The first ``n`` requests (1 <= n; more than N gives the whole trace), prefix columns kept; ``cut_s`` is
        the arrival of the first request dropped (its load stages end there)."""
        if n < 1:
            raise SpecsimInputError(self.source, None, "n", "an int >= 1", str(n))
        prefix = ({"hash_ids": self.hash_ids[:n], "hash_block_tokens": self.hash_block_tokens[:n],
                   "prefix_group": self.prefix_group[:n], "prefix_tokens": self.prefix_tokens[:n]}
                  if self.has_prefix_info else {})
        cut = float(self.arrival_s[n]) if n < len(self) else self.cut_s
        return Trace(self.request_id[:n], self.arrival_s[:n], self.prompt_tokens[:n],
                     self.output_tokens[:n], self.domain[:n], source=f"{self.source}[:{n}]",
                     extra={k: v[:n] for k, v in self.extra.items()}, cut_s=cut, **prefix)

    @property
    def file(self) -> str | None:
        """The file the trace was read from: :attr:`source` without the ``[:n]`` that :meth:`head` appends (an
        error about a request's line names the file, e.g. ``prod.jsonl``, not ``prod.jsonl[:10]``)."""
        return None if self.source is None else re.sub(r"(\[:\d+\])+$", "", str(self.source))

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
# Statistics


def trace_stats(trace: Trace) -> dict:
    """Summary statistics of a trace (the conventions of SOURCES.md).

    Returns a dict: ``num_requests``, ``span_s`` (last - first arrival), ``rate_req_per_s``
    ((N - 1) / span, None when the span is 0), ``interarrival_cv`` (population std / mean of the
    gaps, None when undefined), and ``domains``: for ``"all"`` and each domain, ``num_requests``
    and prompt/output token ``mean``, ``p50``, ``p99`` (numpy's linear percentiles).

    A conversation trace (:mod:`specsim.workload.extra` session fields) adds ``num_sessions`` and
    ``arrivals: "session starts"``: its span, rate and CV are those of the sessions' first turns, since a later
    turn's ``arrival_s`` is its session's start and the run issues it after the previous turn completes plus its
    ``think_s`` (a simulated time, not the file's).
    """
    a = trace.arrival_s
    turn = (trace.extra or {}).get("turn")
    sessions = turn is not None and bool((turn >= 0).any())
    if sessions:
        a = a[turn <= 0]                              # first turns (and requests outside any session)
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
    out = {"num_requests": len(trace), "span_s": span,
           "rate_req_per_s": (len(a) - 1) / span if span > 0 else None,
           "interarrival_cv": cv, "domains": domains}
    if sessions:
        out.update(num_sessions=int((turn == 0).sum()), arrivals="session starts")
    return out
