"""A step-time profile in memory: the verify step's cost as a function of the verification batch size B.

:class:`StepTimeProfile` holds a measured table of ``(batch_tokens, step_time_s)`` for one target model on one
engine and GPU setup, plus an optional KV-read term (seconds per KV-cache token read in a step) and metadata
naming its source; :class:`PrefillAttentionProfile` adds a measured prefill-attention grid. ``SPS(B) = 1 /
step_time_s(B)`` is the quantity the DSpark scheduler maximises against (DSpark paper §3.2.2). The file
format, and reading and writing it, are in :mod:`specsim.hardware.profile`.

Lookup rules (explicit, tested):

* ``linear``: exact at measured points, linear interpolation between neighbours.
* ``padded``: the step time of the smallest measured batch size >= B, as engines with CUDA-graph
  buckets behave (a batch of B runs in the next captured graph).
* B below the first point: the first point's time (a batch can always be padded up). B above the last
  point is an error (:class:`SpecsimInputError`) unless ``extrapolate="linear"`` was chosen, which
  continues the last segment's slope; never a silent clamp.
* Schedulers that score batch sizes (dspark's Theta = tau * SPS(B)) score only inside the table under
  ``extrapolate="error"`` (:attr:`StepTimeProfile.batch_limit`) and beyond it under ``"linear"``.
  Neither edge is silent: :func:`specsim.hardware.profile.range_report` counts, from a run's steps, the
  steps padded up to the first measured B and the steps a policy ended exactly at the last one with drafts
  left over (capped by the range); a run's summary carries it as ``profile_range`` with one notice line per
  edge hit.
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specsim.errors import SpecsimInputError

LOOKUPS = ("linear", "padded")
#: Largest speculation overhead a profile or scenario may state, seconds per step and per request per step (50 ms
#: and 10 ms: far above any measured engine's, so a value typed in milliseconds is caught; the fit's bounds too).
SPEC_STEP_S_MAX, SPEC_REQUEST_S_MAX = 0.05, 0.01
EXTRAPOLATIONS = ("error", "linear")
#: Tokens per block of the chunked linear-attention (Gated DeltaNet) prefill kernel: flash-linear-attention's
#: ``chunk_gated_delta_rule`` (vLLM runs its copy; ``chunk_delta_h``, block ``BT = 64``) reads a request's state
#: once, writes the final state once, and stores a bf16 copy of the state (half the fp32 state's bytes) at every
#: block boundary, which its output kernel reads back: 2 + ceil(c / 64) state moves for a prefill chunk of c tokens,
#: where a decode or verify step writes the state after every token it runs.
LINEAR_CHUNK_TOKENS = 64


def prefill_state_moves(chunk_tokens) -> np.ndarray:
    """(n,) times a prefill chunk of c tokens moves a request's linear-attention state, in whole-state units
    (:data:`LINEAR_CHUNK_TOKENS`): ``2 + ceil(c / 64)``, float64 like ``chunk_tokens``."""
    return 2.0 + np.ceil(np.asarray(chunk_tokens, np.float64) / LINEAR_CHUNK_TOKENS)


@dataclass(frozen=True, eq=False)
class StepTimeProfile:
    """A target step-time table with a stated lookup rule.

    Args:
        batch_tokens: (n,) strictly increasing verification batch sizes in tokens, >= 1.
        step_time_s: (n,) measured step time in seconds at each size, finite and > 0.
        lookup: ``"linear"`` or ``"padded"`` (see module docstring).
        kv_read_s_per_token: seconds added per KV-cache token read in a step (0 disables the term).
        extrapolate: ``"error"`` (default) or ``"linear"`` beyond the last measured size.
        metadata: free-form provenance (gpu, model, dtype, tp, engine, source, date, kind).
        source: the file it was read from, for error messages.
        per_request_s: seconds added per running request in a step (``step_time(..., num_requests=R)``;
            the step model's per-request term, 0 for plain tables). JSON key ``per_request_s``.
        mixed_step_time_s: (n,) optional step times on the same grid for steps that carry prefill chunks
            (eager, no CUDA-graph padding: always ``linear`` lookup); None = the decode table.
        prefill_attn_s_per_pair: seconds of prefill attention per (chunk token x attended token) pair
            (:meth:`prefill_attention_s`); 0 = none.
        linear_state_s: seconds to move one request's linear-attention state once (hybrid models such as
            Qwen3.8's Gated DeltaNet layers; 0 = none): the tables write it after every token of B, as decode and
            verify steps do; :meth:`prefill_attention_s` charges a prefill chunk its kernel's moves instead
            (:class:`PrefillAttentionProfile`, whose measured grid prices a chunk, does not apply it).
        spec_step_s, spec_request_s, spec_zero_draft_pays: speculation's own overhead (:meth:`speculation_s`;
            step-model profiles carry :class:`~specsim.hardware.stepmodel.EngineTerms`' sourced defaults, plain
            tables 0 unless their file sets the JSON keys of the same names; a run charges a table that states
            none, neither by these keys nor by ``metadata["speculation_terms"]``, the sourced defaults:
            :func:`specsim.run_config.speculation_terms`).

    Raises:
        SpecsimInputError: NaN or non-positive times, unsorted or duplicate sizes, length mismatch,
            an unknown lookup rule, a negative coefficient, a speculation term above its bound
            (:data:`SPEC_STEP_S_MAX`, :data:`SPEC_REQUEST_S_MAX`: a value in milliseconds).
    """

    batch_tokens: np.ndarray
    step_time_s: np.ndarray
    lookup: str = "linear"
    kv_read_s_per_token: float = 0.0
    extrapolate: str = "error"
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = "<memory>"
    per_request_s: float = 0.0
    mixed_step_time_s: np.ndarray | None = None
    prefill_attn_s_per_pair: float = 0.0
    linear_state_s: float = 0.0
    spec_step_s: float = 0.0
    spec_request_s: float = 0.0
    spec_zero_draft_pays: bool = False

    def __post_init__(self) -> None:
        b = np.asarray(self.batch_tokens, dtype=np.int64)
        t = np.asarray(self.step_time_s, dtype=np.float64)
        src = self.source
        if b.ndim != 1 or t.ndim != 1 or b.size != t.size or b.size == 0:
            raise SpecsimInputError(src, None, "batch_tokens/step_time_s",
                                    "two non-empty lists of equal length", f"{b.size} and {t.size}")
        if self.lookup not in LOOKUPS:
            raise SpecsimInputError(src, None, "lookup", f"one of {LOOKUPS}", repr(self.lookup))
        if self.extrapolate not in EXTRAPOLATIONS:
            raise SpecsimInputError(src, None, "extrapolate", f"one of {EXTRAPOLATIONS}",
                                    repr(self.extrapolate))
        bad = np.flatnonzero(~np.isfinite(t) | (t <= 0))
        if bad.size:
            raise SpecsimInputError(src, None, f"step_time_s[{bad[0]}]", "a finite time > 0 s",
                                    repr(float(t[bad[0]])))
        if b[0] < 1:
            raise SpecsimInputError(src, None, "batch_tokens[0]", "an int >= 1", str(int(b[0])))
        nonincr = np.flatnonzero(np.diff(b) <= 0)
        if nonincr.size:
            i = int(nonincr[0]) + 1
            raise SpecsimInputError(src, None, f"batch_tokens[{i}]",
                                    "strictly increasing sizes (no duplicates)",
                                    f"{int(b[i])} after {int(b[i - 1])}")
        if not isinstance(self.spec_zero_draft_pays, (bool, np.bool_)):
            raise SpecsimInputError(src, None, "spec_zero_draft_pays", "true or false",
                                    repr(self.spec_zero_draft_pays))
        for key in ("kv_read_s_per_token", "per_request_s", "prefill_attn_s_per_pair", "linear_state_s",
                    "spec_step_s", "spec_request_s"):
            v = getattr(self, key)
            if not np.isfinite(v) or v < 0:
                raise SpecsimInputError(src, None, key, "a finite value >= 0", repr(v))
        for key, most in (("spec_step_s", SPEC_STEP_S_MAX), ("spec_request_s", SPEC_REQUEST_S_MAX)):
            if getattr(self, key) > most:
                raise SpecsimInputError(src, None, key, f"seconds in [0, {most:g}] (seconds, not ms)",
                                        repr(getattr(self, key)))
        if self.mixed_step_time_s is not None:
            mixed = np.asarray(self.mixed_step_time_s, dtype=np.float64)
            if mixed.shape != t.shape or not np.all(np.isfinite(mixed) & (mixed > 0)):
                raise SpecsimInputError(src, None, "mixed_step_time_s",
                                        f"{t.size} finite times > 0 (one per batch_tokens entry)", str(mixed.shape))
            mixed.setflags(write=False)
            object.__setattr__(self, "mixed_step_time_s", mixed)
        b.setflags(write=False)
        t.setflags(write=False)
        object.__setattr__(self, "batch_tokens", b)
        object.__setattr__(self, "step_time_s", t)
        # Dense lookup table over 1..max_batch_tokens: one fancy-index per query in the hot path.
        grid = np.arange(1, int(b[-1]) + 1)
        if self.lookup == "linear":
            dense = np.interp(grid, b, t)
        else:
            dense = t[np.searchsorted(b, grid, side="left")]
        dense = np.concatenate([[dense[0]], dense])  # index 0 unused (B >= 1); keeps B as the index
        dense.setflags(write=False)
        object.__setattr__(self, "_dense", dense)

    @functools.cached_property
    def max_batch_tokens(self) -> int:
        """The largest measured batch size in tokens."""
        return int(self.batch_tokens[-1])

    @functools.cached_property
    def batch_limit(self) -> int | None:
        """The largest B a scheduler may score: the last measured size, or None (no limit) when the
        profile extrapolates linearly beyond it."""
        return None if self.extrapolate == "linear" else self.max_batch_tokens

    def provenance(self) -> dict[str, Any]:
        """The profile's metadata plus the rules a run used: lookup, extrapolate and the measured range."""
        return {**self.metadata, "lookup": self.lookup, "extrapolate": self.extrapolate,
                "measured_batch_tokens": [int(self.batch_tokens[0]), self.max_batch_tokens]}

    def step_time(self, batch_tokens: int | np.ndarray, kv_tokens: float = 0.0,
                  num_requests: int = 0) -> float | np.ndarray:
        """Target step time in seconds at verification batch size ``batch_tokens`` (scalar or array).

        Args:
            batch_tokens: B, tokens in the step (int or int array), >= 1.
            kv_tokens: total KV-cache tokens read by the step (adds ``kv_read_s_per_token * kv_tokens``).
            num_requests: R, requests in the step (adds ``per_request_s * R``).

        Raises:
            SpecsimInputError: B < 1, or B beyond the table with ``extrapolate="error"``.
        """
        if type(batch_tokens) is int and 1 <= batch_tokens < self._dense.size:   # scalar fast path
            return float(self._dense[batch_tokens] + self.kv_read_s_per_token * kv_tokens
                         + self.per_request_s * num_requests)
        b = np.asarray(batch_tokens, dtype=np.int64)
        bmax = self.max_batch_tokens
        if b.size and (b.min() < 1 or (b.max() > bmax and self.extrapolate == "error")):
            worst = int(b.min()) if b.min() < 1 else int(b.max())
            if worst < 1:
                raise SpecsimInputError(self.source, None, "batch_tokens", "a batch size >= 1 (tokens in the "
                                        "step)", str(worst))
            raise SpecsimInputError(self.source, None, "batch_tokens",
                                    f"a batch size in [1, {bmax}] (the profile's measured range; "
                                    "a bigger step needs fewer running requests (cluster.max_num_seqs) or drafts "
                                    "(engine.gamma), or a profile measured further or whose file sets extrapolate: "
                                    "linear)", str(worst))
        if b.size and b.max() > bmax:
            slope = (self.step_time_s[-1] - self.step_time_s[-2]) / max(
                1, self.batch_tokens[-1] - self.batch_tokens[-2]) if self.batch_tokens.size > 1 else 0.0
            inside = self._dense[np.minimum(b, bmax)]
            t = np.where(b > bmax, self.step_time_s[-1] + slope * (b - bmax), inside)
        else:
            t = self._dense[b]
        t = t + self.kv_read_s_per_token * kv_tokens + self.per_request_s * num_requests
        return float(t) if t.ndim == 0 else t

    def decode_step_terms(self, batch_tokens: int, num_requests: int) -> tuple[float, float, float] | None:
        """The terms :meth:`step_time` adds for an int ``batch_tokens`` on its scalar path: (the table's seconds at
        B, ``kv_read_s_per_token``, ``per_request_s * num_requests``), so that a caller pricing many steps of the
        same B and R (the engine's plain decode stretches) adds them in the same order, bit for bit:
        ``(table + kv_read_s_per_token * kv_tokens) + per_request``. None where :meth:`step_time` takes another
        path (B outside the dense table, or a subclass that prices steps otherwise)."""
        if type(self).step_time is not StepTimeProfile.step_time or not 1 <= batch_tokens < self._dense.size:
            return None
        per_request = float(self.per_request_s * num_requests)
        return float(self._dense[batch_tokens]), float(self.kv_read_s_per_token), per_request

    def mixed_step_terms(self, batch_tokens: int, num_requests: int) -> tuple[float, float, float] | None:
        """:meth:`decode_step_terms` for a step that carries prefill chunks: the terms :meth:`mixed_step_time`
        adds for an int ``batch_tokens`` (the eager table's seconds at B where the profile has one); None where
        it takes another path."""
        if type(self).mixed_step_time is not StepTimeProfile.mixed_step_time:
            return None
        if self.mixed_step_time_s is None or batch_tokens > self.max_batch_tokens:
            return self.decode_step_terms(batch_tokens, num_requests)
        table_s = float(np.interp(batch_tokens, self.batch_tokens, self.mixed_step_time_s))
        return table_s, float(self.kv_read_s_per_token), float(self.per_request_s * num_requests)

    def mixed_step_time(self, batch_tokens: int | np.ndarray, kv_tokens: float = 0.0,
                        num_requests: int = 0) -> float | np.ndarray:
        """Seconds of a step that carries prefill chunks (scalar or array like ``batch_tokens``): the eager
        table (``mixed_step_time_s``, linear lookup, no CUDA-graph padding, a step model's ``mixed_step_s``
        included) where the profile has one, else :meth:`step_time`; beyond the table, :meth:`step_time`'s
        extrapolation plus the mixed table's offset over the decode table at its last size.

        Raises:
            SpecsimInputError: as :meth:`step_time` beyond the table.
        """
        largest = batch_tokens if type(batch_tokens) is int else np.max(batch_tokens)
        if self.mixed_step_time_s is None:
            return self.step_time(batch_tokens, kv_tokens, num_requests)
        if largest > self.max_batch_tokens:     # beyond: step_time's rule (extrapolate or raise) + the mixed offset
            beyond = self.step_time(batch_tokens, kv_tokens, num_requests)     # at the last size (mixed_step_s, eager)
            offset = float(self.mixed_step_time_s[-1] - self.step_time_s[-1])
            inside = self.mixed_step_time(np.minimum(batch_tokens, self.max_batch_tokens), kv_tokens, num_requests)
            t = np.where(np.asarray(batch_tokens) > self.max_batch_tokens, beyond + offset, inside)
            return float(t) if np.ndim(t) == 0 else t
        t = np.interp(batch_tokens, self.batch_tokens, self.mixed_step_time_s)
        t = t + self.kv_read_s_per_token * kv_tokens + self.per_request_s * num_requests
        return float(t) if np.ndim(t) == 0 else t

    def step_time_range(self, first: int, count: int, kv_tokens: float = 0.0,
                        num_requests: int = 0) -> np.ndarray:
        """Step times (count,) at B = first, first + 1, ..., first + count - 1 (hot path of the schedulers).

        Raises:
            SpecsimInputError: as :meth:`step_time` for sizes outside the table.
        """
        parts = self.step_time_parts(first, count, kv_tokens, num_requests)
        if parts is not None:
            return parts[0] + parts[1]
        return self.step_time(np.arange(first, first + count), kv_tokens, num_requests)

    def step_time_parts(self, first: int, count: int, kv_tokens: float = 0.0,
                        num_requests: int = 0) -> tuple[np.ndarray, float] | None:
        """``(table, constant)``: :meth:`step_time_range` is ``table + constant`` element by element, ``table``
        (count,) a read-only view of the lookup table at B = first .. first + count - 1 (no copy: a scheduler
        adds the constant where it reads an entry, issue 25) and ``constant`` the KV-read and per-request
        seconds; None where the range leaves the table (extrapolation: use :meth:`step_time_range`)."""
        last = first + count - 1
        if 1 <= first and last < self._dense.size:
            constant = self.kv_read_s_per_token * kv_tokens + self.per_request_s * num_requests
            return self._dense[first: last + 1], constant
        return None

    def sps(self, batch_tokens: int | np.ndarray, kv_tokens: float = 0.0,
            num_requests: int = 0) -> float | np.ndarray:
        """Steps per second, ``1 / step_time(B)``, scalar or array like ``batch_tokens``."""
        return 1.0 / self.step_time(batch_tokens, kv_tokens, num_requests)

    def speculation_s(self, num_requests: int, drafts: int) -> float:
        """Seconds of speculation's own work in a step of a speculating engine (issue 20): ``spec_step_s +
        spec_request_s * num_requests`` when the step proposes drafts, and when it proposes none only if
        ``spec_zero_draft_pays`` (vLLM's dynamic draft length at K = 0 pays, vLLM issue 49548; an engine that
        switches speculation off for the step runs the plain path, vLLM PR 5000); 0 for a step that drafts for no
        request. The engine adds it to the step time of every step while speculation is configured.

        Args:
            num_requests: the requests the step drafts for: its R decoding requests and, where the engine drafts
                for them (``engine.first_drafts = prefill-step``), those it prefills (0: the step pays nothing).
            drafts: draft tokens proposed this step (all requests).

        Raises:
            SpecsimInputError: a negative or NaN ``num_requests`` or ``drafts``.
        """
        if not (num_requests > 0 and drafts > 0):
            if not (num_requests >= 0 and drafts >= 0):   # off the common path: never negative nor NaN in a run
                key, v = ("num_requests", num_requests) if not num_requests >= 0 else ("drafts", drafts)
                raise SpecsimInputError(None, None, key, "an int >= 0 (requests drafted for, or draft tokens, "
                                        "in one step)", repr(v))
            if num_requests == 0 or not self.spec_zero_draft_pays:
                return 0.0
        return self.spec_step_s + self.spec_request_s * num_requests

    @property
    def charges_prefill_attention(self) -> bool:
        """Whether :meth:`prefill_attention_s` can be nonzero (else callers may skip building its inputs)."""
        return bool(self.prefill_attn_s_per_pair or self.linear_state_s)

    def prefill_attention_s(self, chunk_tokens: np.ndarray, context_tokens: np.ndarray) -> float:
        """Seconds of attention that prefill chunks add to a mixed (colocated) step's table time (summed).

        Args:
            chunk_tokens: (n,) prompt tokens each prefill chunk processes this step (or one int).
            context_tokens: (n,) prompt tokens of the same requests already in the KV cache (or one int).

        The base table charges ``prefill_attn_s_per_pair * sum(c * (k + (c + 1) / 2))`` (causal attention of
        c chunk tokens over k cached ones; the step model's coefficient), 0 for plain tables (the linear
        layers' cost of the chunk tokens is already in ``step_time(B)``), plus for hybrid models
        ``linear_state_s * sum(2 + ceil(c / 64) - c)``: the table wrote the linear-attention state after each
        of the c tokens, the chunked kernel moves it 2 + ceil(c / 64) times (:func:`prefill_state_moves`), so a
        chunk of more than three tokens is charged less. Profiles with a measured attention grid override it.
        """
        if not self.charges_prefill_attention:
            return 0.0
        if isinstance(chunk_tokens, (int, np.integer)):          # one chunk: the same arithmetic on scalars
            c, k = float(chunk_tokens), float(context_tokens)
            t = self.prefill_attn_s_per_pair * (c * (k + (c + 1.0) / 2.0))
            if self.linear_state_s:
                t += self.linear_state_s * (2.0 + np.ceil(c / LINEAR_CHUNK_TOKENS) - c)
            return float(t)
        c = np.asarray(chunk_tokens, dtype=np.float64)
        k = np.asarray(context_tokens, dtype=np.float64)
        t = self.prefill_attn_s_per_pair * np.sum(c * (k + (c + 1.0) / 2.0))
        if self.linear_state_s:
            t += self.linear_state_s * np.sum(prefill_state_moves(c) - c)
        return float(t)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-serialisable form written by :func:`save_profile`."""
        return {
            "metadata": dict(self.metadata),
            "lookup": self.lookup,
            "extrapolate": self.extrapolate,
            "kv_read_s_per_token": self.kv_read_s_per_token,
            "batch_tokens": [int(x) for x in self.batch_tokens],
            "step_time_s": [float(x) for x in self.step_time_s],
            **({"per_request_s": self.per_request_s} if self.per_request_s else {}),
            **({"prefill_attn_s_per_pair": self.prefill_attn_s_per_pair} if self.prefill_attn_s_per_pair else {}),
            **({"linear_state_s": self.linear_state_s} if self.linear_state_s else {}),
            **({"mixed_step_time_s": [float(x) for x in self.mixed_step_time_s]}
               if self.mixed_step_time_s is not None else {}),
            **({"spec_step_s": self.spec_step_s, "spec_request_s": self.spec_request_s,
                "spec_zero_draft_pays": bool(self.spec_zero_draft_pays)}
               if self.spec_step_s or self.spec_request_s else {}),
        }

    @classmethod
    def flat(cls, step_time_s: float, max_batch_tokens: int = 65536) -> "StepTimeProfile":
        """A constant step time at every B in [1, max_batch_tokens] (for closed-form checks): a step costs
        ``step_time_s`` and nothing else, so its ``metadata["speculation_terms"]`` states no speculation overhead
        (:func:`specsim.run_config.speculation_terms` then adds none unless the scenario sets it)."""
        return cls(np.array([1, max_batch_tokens]), np.array([step_time_s, step_time_s]),
                   metadata={"kind": "synthetic", "source": "flat profile",
                             "speculation_terms": "none: a closed-form profile"}, source="<flat>")


def grid_bilinear(x_axis: np.ndarray, y_axis: np.ndarray, values: np.ndarray, x: np.ndarray,
                  y: np.ndarray) -> np.ndarray:
    """Bilinear interpolation on a rectilinear grid by direct cell index: (n,) points -> (n,) values.

    The same numbers as ``scipy.interpolate.RegularGridInterpolator((x_axis, y_axis), values)`` (method
    "linear") bit for bit, including its operation order (scipy >= 1.10's 2-D fast path: cell i with
    axis[i] <= v < axis[i + 1], the last cell at the upper edge, weights (v - axis[i]) / (axis[i + 1] - axis[i]));
    ``tests/test_hardware_profile.py`` checks the equality. Without the generic interpolator's set-up on
    every call it is about 10x faster for the one or two chunks of a step (issue 25).

    Args:
        x_axis, y_axis: (nx,), (ny,) strictly increasing axes, nx, ny >= 2.
        values: (nx, ny) grid values.
        x, y: (n,) points inside the axes' ranges (callers clip).
    """
    i = np.clip(np.searchsorted(x_axis, x, side="right") - 1, 0, x_axis.size - 2)
    j = np.clip(np.searchsorted(y_axis, y, side="right") - 1, 0, y_axis.size - 2)
    u = (x - x_axis[i]) / (x_axis[i + 1] - x_axis[i])
    w = (y - y_axis[j]) / (y_axis[j + 1] - y_axis[j])
    return (values[i, j] * (1 - u) * (1 - w) + values[i, j + 1] * (1 - u) * w
            + values[i + 1, j] * u * (1 - w) + values[i + 1, j + 1] * u * w)


@dataclass(frozen=True, eq=False)
class PrefillAttentionProfile(StepTimeProfile):
    """A :class:`StepTimeProfile` with a measured prefill-attention model for mixed (colocated) steps.

    ``step_time(B, kv_tokens)`` is unchanged (linear layers, all-reduce, decode attention via the KV
    term). :meth:`prefill_attention_s` adds, for each prefill chunk in the step, the measured attention
    kernel time of a chunk of ``c`` tokens over ``k`` cached tokens, bilinear in ``(c, k)`` on the
    measured grid (points outside are clipped to its edge), times ``num_layers``, minus the per-token
    attention cost the table already charges to those ``c`` tokens (so a chunk's attention is counted
    once).

    Extra args (JSON key ``prefill_attention``: ``num_layers``, ``chunk_tokens``, ``context_tokens``,
    ``ms_per_layer``, ``charged_ms_per_token_per_layer``):
        num_layers: layers of the model (>= 1).
        prefill_chunk_tokens: (nc,) increasing measured chunk sizes (tokens).
        prefill_context_tokens: (nk,) increasing measured cached lengths (tokens).
        prefill_ms_per_layer: (nc, nk) attention kernel ms per layer per shard.
        charged_ms_per_token_per_layer: attention ms per token per layer already in ``step_time_s``.

    Raises:
        SpecsimInputError: shapes that do not match, unsorted axes, NaN or non-positive times.
    """

    num_layers: int = 1
    prefill_chunk_tokens: np.ndarray = field(default_factory=lambda: np.array([1.0]))
    prefill_context_tokens: np.ndarray = field(default_factory=lambda: np.array([0.0]))
    prefill_ms_per_layer: np.ndarray = field(default_factory=lambda: np.zeros((1, 1)))
    charged_ms_per_token_per_layer: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        c = np.asarray(self.prefill_chunk_tokens, dtype=np.float64)
        k = np.asarray(self.prefill_context_tokens, dtype=np.float64)
        m = np.asarray(self.prefill_ms_per_layer, dtype=np.float64)
        src = self.source
        if m.shape != (c.size, k.size) or c.size < 2 or k.size < 2:
            raise SpecsimInputError(src, None, "prefill_attention.ms_per_layer",
                                    f"a {c.size} x {k.size} grid (>= 2 x 2)", str(m.shape))
        for name, ax in (("chunk_tokens", c), ("context_tokens", k)):
            if np.any(np.diff(ax) <= 0):
                raise SpecsimInputError(src, None, f"prefill_attention.{name}", "strictly increasing",
                                        "unsorted or duplicate values")
        if not np.all(np.isfinite(m) & (m > 0)) or self.num_layers < 1:
            raise SpecsimInputError(src, None, "prefill_attention", "finite times > 0 and num_layers >= 1",
                                    "a NaN/non-positive time or bad num_layers")
        object.__setattr__(self, "prefill_chunk_tokens", c)
        object.__setattr__(self, "prefill_context_tokens", k)
        object.__setattr__(self, "prefill_ms_per_layer", m)

    @property
    def charges_prefill_attention(self) -> bool:
        """Always: the measured grid charges every chunk."""
        return True

    def prefill_attention_s(self, chunk_tokens: np.ndarray, context_tokens: np.ndarray) -> float:
        """Seconds of prefill attention for the chunks of a mixed step (see the class docstring).

        Args:
            chunk_tokens: (n,) prompt tokens each prefill chunk processes this step.
            context_tokens: (n,) prompt tokens of the same requests already in the KV cache.
        """
        if (type(chunk_tokens) is np.ndarray and type(context_tokens) is np.ndarray and chunk_tokens.ndim == 1
                and chunk_tokens.size <= 2 and context_tokens.shape == chunk_tokens.shape):   # a step's own arrays
            return self._few_chunks_s([float(x) for x in chunk_tokens.tolist()],
                                      [float(x) for x in context_tokens.tolist()]) if chunk_tokens.size else 0.0
        c = np.atleast_1d(np.asarray(chunk_tokens, dtype=np.float64))
        if c.size == 0:
            return 0.0
        k = np.broadcast_to(np.asarray(context_tokens, dtype=np.float64), c.shape)
        if c.size <= 2:          # a step's usual one or two chunks: scalar arithmetic, the same numbers
            return self._few_chunks_s(c.tolist(), k.tolist())
        pts = np.stack([np.clip(c, self.prefill_chunk_tokens[0], self.prefill_chunk_tokens[-1]),
                        np.clip(k, self.prefill_context_tokens[0], self.prefill_context_tokens[-1])], -1)
        per_layer_ms = (grid_bilinear(self.prefill_chunk_tokens, self.prefill_context_tokens,
                                      self.prefill_ms_per_layer, pts[:, 0], pts[:, 1])
                        - self.charged_ms_per_token_per_layer * c)  # (n,)
        return float(self.num_layers * np.maximum(per_layer_ms, 0.0).sum() * 1e-3)

    @functools.cached_property
    def _grid_lists(self) -> tuple[list[float], list[float], list[list[float]]]:
        """The measured grid's axes and values as plain floats (the same doubles), for :meth:`_few_chunks_s`."""
        return (self.prefill_chunk_tokens.tolist(), self.prefill_context_tokens.tolist(),
                self.prefill_ms_per_layer.tolist())

    def _few_chunks_s(self, chunks: list[float], contexts: list[float]) -> float:
        """:meth:`prefill_attention_s` for one or two chunks in plain floats (IEEE doubles, the same operations
        in the same order as :func:`grid_bilinear` and numpy's sum of two terms: bit-identical, tested), without
        numpy's per-call overhead (issue 25: the vectorised lookup was 23% of the Vidur scenario's loop)."""
        xs, ys, m = self._grid_lists
        charged, total = self.charged_ms_per_token_per_layer, 0.0
        for ci, ki in zip(chunks, contexts):
            x, y = min(max(ci, xs[0]), xs[-1]), min(max(ki, ys[0]), ys[-1])
            i = min(max(bisect_right(xs, x) - 1, 0), len(xs) - 2)
            j = min(max(bisect_right(ys, y) - 1, 0), len(ys) - 2)
            u = (x - xs[i]) / (xs[i + 1] - xs[i])
            w = (y - ys[j]) / (ys[j + 1] - ys[j])
            v = (m[i][j] * (1 - u) * (1 - w) + m[i][j + 1] * (1 - u) * w
                 + m[i + 1][j] * u * (1 - w) + m[i + 1][j + 1] * u * w)
            total += max(v - charged * ci, 0.0)
        return float(self.num_layers * total * 1e-3)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the base fields plus the ``prefill_attention`` section."""
        d = super().to_dict()
        d["prefill_attention"] = {
            "num_layers": int(self.num_layers),
            "chunk_tokens": [float(x) for x in self.prefill_chunk_tokens],
            "context_tokens": [float(x) for x in self.prefill_context_tokens],
            "ms_per_layer": [[round(float(x), 6) for x in row] for row in self.prefill_ms_per_layer],
            "charged_ms_per_token_per_layer": self.charged_ms_per_token_per_layer,
        }
        return d
