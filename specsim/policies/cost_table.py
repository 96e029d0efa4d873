"""The scheduler's own cost table: the step time a policy *believes*, built the way its engine builds it.

A real scheduler never reads the true cost of the step it is planning. It reads a table profiled once at
start-up, at one synthetic context length, and the engine then charges whatever the step really costs
(DESIGN.md, "The scheduler's own cost table"). specsim keeps the two apart: the engine always charges
the profile's exact cost; a policy with a table sees, through its views, the table instead.

Kinds (:data:`TABLE_KINDS`):

* ``exact``: the profile itself at the step's own KV read and request count (the paper's policies, and
  specsim's behaviour before tables existed).
* ``vllm``: vLLM's adaptive-verification table (PR 47808, merged; read at vllm-project/vllm
  ``vllm/v1/worker/gpu/spec_decode/adaptive_verification.py``, commit 057929c3632766486896597cf27e1425fd838e63,
  ``build_cost_tables_from_curves`` and ``batches_to_profile``): dummy steps at the profiled sizes, each
  request at the context ``VLLM_ADAPTIVE_VERIFICATION_PROFILE_CONTEXT_LEN`` (knob ``profile_context``,
  default 8,192 tokens); the curve forced monotone (running maximum); at or below the CUDA-graph capture
  limit the cost of B is the next profiled size's (graphs pad up: a staircase), above it linear between
  profiled points past the limit, linear extrapolation beyond the last; plus the drafter's cost at R
  requests (vLLM adds its draft table).
* ``trtllm``: TensorRT-LLM's ``SpsCostTable`` (PR 17056, open; read at its unit tests
  ``tests/unittest/_torch/speculative/test_dspark_schedule.py``): the profiled points, clamped linear
  interpolation between them, clamped (flat) beyond the last; no monotone forcing; target cost only.
  ``none`` means no table: PR 17056 then refuses to trim.

Profiling step at B tokens: ``R_p = ceil(B / (gamma + 1))`` requests of ``gamma + 1`` tokens each (a
uniform speculative decode batch), KV read ``R_p * profile_context`` tokens, the per-request term at
``R_p``; the profiled sizes are the profile's own ``batch_tokens`` (the sizes it was measured at), and the
capture limit is the profile's ``capture_limit`` attribute when it has one, else its largest size.

A :class:`SchedulerTable` stands in for the profile inside a view (``step_time``, ``step_time_range``,
``sps``, ``batch_limit``, ``max_batch_tokens``): policies read it through ``view.sps`` unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

TABLE_KINDS = ("exact", "vllm", "trtllm")
#: vLLM's default profiling context per request, tokens (VLLM_ADAPTIVE_VERIFICATION_PROFILE_CONTEXT_LEN).
VLLM_PROFILE_CONTEXT = 8192


@dataclass
class SchedulerTable:
    """A scheduler's step-time table over B = 1..max_batch_tokens (module docstring rules).

    Attributes:
        kind: ``vllm`` or ``trtllm``.
        verify_s: (max_batch_tokens + 1,) seconds of a target step at B tokens (index B; index 0 unused).
        profile: the exact profile the table was built from (its limits are kept).
        draft_s_per_request: callable R -> seconds of drafting for R requests added to every step, or None.
    """

    kind: str
    verify_s: np.ndarray
    profile: object
    draft_s_per_request: object = None
    _draft_cache: dict = field(default_factory=dict)

    @property
    def max_batch_tokens(self) -> int:
        """The exact profile's largest measured size (the table covers 1..that)."""
        return self.profile.max_batch_tokens

    @property
    def batch_limit(self) -> int | None:
        """As the exact profile's: a scheduler never scores sizes the engine could not run."""
        return self.profile.batch_limit

    def draft_s(self, num_requests: int) -> float:
        """Seconds the table adds to every B at ``num_requests`` requests (the drafter's; 0.0 without one)."""
        return self._draft(num_requests)

    def _draft(self, num_requests: int) -> float:
        if self.draft_s_per_request is None or num_requests <= 0:
            return 0.0
        if num_requests not in self._draft_cache:
            self._draft_cache[num_requests] = float(self.draft_s_per_request(num_requests))
        return self._draft_cache[num_requests]

    def step_time(self, batch_tokens, kv_tokens: float = 0.0, num_requests: int = 0):
        """The table's seconds at B (scalar or array); ``kv_tokens`` is ignored (fixed at profiling)."""
        if type(batch_tokens) is int:                  # scalar fast path: the same sum
            top = self.verify_s.size - 1
            return float(self.verify_s[min(max(batch_tokens, 1), top)] + self._draft(int(num_requests)))
        b = np.asarray(batch_tokens, dtype=np.int64)
        t = self.verify_s[np.clip(b, 1, self.verify_s.size - 1)] + self._draft(int(num_requests))
        return float(t) if t.ndim == 0 else t

    def step_time_range(self, first: int, count: int, kv_tokens: float = 0.0, num_requests: int = 0) -> np.ndarray:
        """(count,) table seconds at B = first .. first + count - 1."""
        return self.step_time(np.arange(first, first + count), kv_tokens, num_requests)

    def sps(self, batch_tokens, kv_tokens: float = 0.0, num_requests: int = 0):
        """1 / the table's step time."""
        return 1.0 / self.step_time(batch_tokens, kv_tokens, num_requests)


def profiled_points(profile, gamma: int, profile_context: int) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, seconds) of the profiling run: the profile at its measured sizes, R_p requests of
    ``gamma + 1`` tokens each at ``profile_context`` tokens of context (module docstring)."""
    xs = np.asarray(profile.batch_tokens, dtype=np.int64)
    reqs = np.maximum(1, np.ceil(xs / (gamma + 1))).astype(np.int64)       # (n,) requests per dummy step
    ys = np.array([profile.step_time(int(b), float(r) * profile_context, int(r)) for b, r in zip(xs, reqs)])
    return xs, ys


def vllm_verify_table(xs: np.ndarray, ys: np.ndarray, max_tokens: int, capture_limit: int) -> np.ndarray:
    """(max_tokens + 1,) vLLM's verify table from profiled (xs, ys): monotone, staircase up to
    ``capture_limit``, linear between points above it, linear extrapolation past the last point."""
    ys = np.maximum.accumulate(np.asarray(ys, float))
    values = np.arange(max_tokens + 1)
    out = ys[np.minimum(np.searchsorted(xs, values, side="left"), xs.size - 1)]   # pad up to the next size
    above = xs > capture_limit
    smooth = values > capture_limit
    if smooth.any() and above.any():
        out[smooth] = np.interp(values[smooth], xs[above], ys[above])
    if xs.size > 1:
        past = values > xs[-1]
        out[past] = ys[-1] + (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) * (values[past] - xs[-1])
    return np.maximum(out, 1e-9)


def trtllm_verify_table(xs: np.ndarray, ys: np.ndarray, max_tokens: int) -> np.ndarray:
    """(max_tokens + 1,) TensorRT-LLM's SpsCostTable lookup: clamped linear interpolation."""
    return np.interp(np.arange(max_tokens + 1), xs, np.asarray(ys, float))


def check_profile_context(value) -> int:
    """``profile_context_len`` as an int >= 0 tokens; ValueError naming the knob otherwise."""
    if isinstance(value, bool) or not (isinstance(value, (int, np.integer)) and value >= 0):
        raise ValueError(f"profile_context_len: expected an int >= 0 tokens, got {value!r}")
    return int(value)


def build_table(kind: str, profile, gamma: int, drafter_cost=None, profile_context: int = VLLM_PROFILE_CONTEXT,
                monotone: bool | None = None, include_draft: bool | None = None) -> SchedulerTable | None:
    """The scheduler table of ``kind`` for ``profile`` (None for ``exact``: the view keeps the profile).

    Args:
        kind: one of :data:`TABLE_KINDS`.
        profile: the run's :class:`specsim.hardware.profile.StepTimeProfile`.
        gamma: the run's block length (the profiling batch's tokens per request are gamma + 1).
        drafter_cost: the run's drafter cost model (``draft_time_s(R, gamma, profile, kv_tokens)``) or None.
        profile_context: context tokens per request in the profiling run (vLLM default 8,192).
        monotone: force the curve monotone (default: True for vllm, False for trtllm).
        include_draft: add the drafter's cost at R requests (default: True for vllm, False for trtllm).

    Raises:
        ValueError: an unknown kind or a profile_context that is not an int >= 0.
    """
    if kind not in TABLE_KINDS:
        raise ValueError(f"cost_table: expected one of {TABLE_KINDS}, got {kind!r}")
    check_profile_context(profile_context)
    if kind == "exact":
        return None
    g = max(int(gamma), 0)
    xs, ys = profiled_points(profile, g, int(profile_context))
    mono = (kind == "vllm") if monotone is None else bool(monotone)
    ys = np.maximum.accumulate(ys) if mono else ys
    top = int(profile.max_batch_tokens)
    if kind == "vllm":
        limit = int(getattr(profile, "capture_limit", None) or top)
        verify = vllm_verify_table(xs, ys, top, limit)
    else:
        verify = trtllm_verify_table(xs, ys, top)
    draft = None
    if ((kind == "vllm") if include_draft is None else include_draft) and drafter_cost is not None and g > 0:
        ctx = float(profile_context)
        draft = lambda r: drafter_cost.draft_time_s(r, g, profile, r * ctx)  # noqa: E731
    return SchedulerTable(kind, verify, profile, draft)


@dataclass
class TableError:
    """Running mean relative error between the table a policy used and the cost charged.

    Per step: |table(B) - exact(B)| / exact(B), with B = R + sum of the verify lengths the policy chose,
    exact = the profile's target step time at the step's KV read and R (plus the drafter's cost at the
    step's KV read when the table includes one). Mean over steps with R > 0.
    """

    sum_rel: float = 0.0
    num_steps: int = 0

    def add(self, rel: float) -> None:
        if math.isfinite(rel):
            self.sum_rel += rel
            self.num_steps += 1

    @property
    def mean(self) -> float:
        """The mean relative error (NaN before any step)."""
        return self.sum_rel / self.num_steps if self.num_steps else float("nan")


# --------------------------------------------------------------------------------------------- paper policies
#: Built-in cost-aware policies that may read a scheduler table through the ``cost_table`` knob
#: (default ``exact``: the paper's policies read the true cost, as before tables existed).
COST_AWARE = ("dspark", "dspark-async", "dspark-global")
#: The knobs :func:`with_cost_table` adds to a COST_AWARE policy.
TABLE_KNOBS = {"cost_table": "exact", "profile_context_len": VLLM_PROFILE_CONTEXT}


class WithCostTable:
    """A cost-aware policy whose views carry a scheduler table in place of the exact profile.

    Every member the engine reads (``name``, ``fits_zos``, ``view_kind``, ``capacity`` and its view age,
    ``proposal_length``, ``drafter``, ``gamma``) is the wrapped policy's; views (and the old view the
    capacity hook gets) are copied with ``profile`` replaced by the table, so ``view.sps`` and
    ``view.profile.step_time_range`` read the table. ``table_error`` accumulates the mean relative error
    of the table against the cost the engine charges (:class:`TableError`).

    Args:
        inner: the policy; kind: ``vllm`` or ``trtllm``; profile_context_len: tokens per request in the
            profiling run.
    """

    def __init__(self, inner, kind: str, profile_context_len: int = VLLM_PROFILE_CONTEXT) -> None:
        check_profile_context(profile_context_len)
        if kind not in TABLE_KINDS:
            raise ValueError(f"cost_table: expected one of {TABLE_KINDS}, got {kind!r}")
        if kind == "exact":
            raise ValueError("cost_table 'exact' needs no wrapper: use the policy itself (profile_context_len "
                             "applies to the vllm and trtllm tables only)")
        self.inner, self.kind, self.profile_context = inner, kind, int(profile_context_len)
        for member in ("name", "fits_zos", "view_kind", "drafter", "gamma", "capacity_view_age", "knobs"):
            if hasattr(inner, member):
                setattr(self, member, getattr(inner, member))
        self.capacity = self._capacity if getattr(inner, "capacity", None) is not None else None
        self.proposal_length = getattr(inner, "proposal_length", None)
        self.table_error = TableError()
        self._key, self._table = None, None

    def _swap(self, view):
        import dataclasses

        key = (id(view.profile), view.gamma)
        if key != self._key:
            self._key = key
            self._table = build_table(self.kind, view.profile, view.gamma, view.drafter_cost, self.profile_context)
        return dataclasses.replace(view, profile=self._table)

    def _capacity(self, old_view, running_ids, num_running):
        return self.inner.capacity(None if old_view is None else self._swap(old_view), running_ids, num_running)

    def __call__(self, view):
        lengths = np.asarray(self.inner(self._swap(view)))
        R = view.num_requests
        if R:
            b = int(R + lengths.sum())
            exact = view.profile.step_time(b, view.kv_tokens, R)
            if self._table.draft_s_per_request is not None:
                exact += view.draft_time_s(view.gamma)
            self.table_error.add(abs(self._table.step_time(b, 0.0, R) - exact) / exact)
        return lengths


def table_report(policies) -> dict | None:
    """The run's ``scheduler_cost_table`` summary block from its policy objects (one per replica), or None
    when no policy read a table: ``{"kind", "profile_context_len", "mean_rel_error", "steps"}``, the mean
    relative error pooled over every replica's steps (sum over sum)."""
    unique = {id(p): p for p in policies}.values()                  # a shared user object counts once
    errs = [(p, p.table_error) for p in unique if isinstance(getattr(p, "table_error", None), TableError)]
    if not errs:
        return None
    steps = sum(e.num_steps for _, e in errs)
    first = errs[0][0]
    kind = getattr(first, "kind", None) or getattr(first, "cost_table", None)
    return {"kind": kind, "profile_context_len": int(getattr(first, "profile_context", VLLM_PROFILE_CONTEXT)),
            "mean_rel_error": (sum(e.sum_rel for _, e in errs) / steps) if steps else None, "steps": steps}
