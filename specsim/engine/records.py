"""What a run recorded: per-request arrays and per-step rows, owned by one :class:`Records` collector.

Replicas and the cluster write here only through the named methods below (tests/test_architecture.py checks that
nobody else writes its arrays), and never read back what another layer wrote; :mod:`specsim.analysis.metrics` and
the simulation read it. Nothing here runs the simulation, so the flow is one way: engine -> records -> metrics.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa


class StepRecord(NamedTuple):
    """One engine step of one replica, fixed when the step ends (immutable; a NamedTuple, cheap to build).

    Attributes:
        replica, step: replica index and its step index (0-based).
        start_s, duration_s: when the step started and how long it took, seconds.
        num_running: requests holding a slot; num_decode: R, those that decoded this step.
        batch_tokens: tokens the target processed (decode B = sum_r (1 + l_r) plus prefill chunk tokens).
        verified_drafts, accepted_drafts: sums over the decoding requests.
        emitted_tokens: tokens emitted by decoding (accepted + R) plus those emitted by finished prefills.
        prefill_tokens: prefill (or recompute) chunk tokens in the step.
        capacity: the policy's ``capacity`` hook value, -1 when not used.
        host_overhead_s: CPU scheduling time charged to the step.
        kv_blocks_used: KV blocks in use after the step's allocation (cached evictable blocks not counted), as
            exact accounting holds them, also in steps the lazy accounting skipped (KVManager.exact_blocks_used).
        num_preempted: requests preempted before this step; num_waiting: requests still queued once its
            admissions are made.
        draft_s: drafting time charged to the step, seconds (the drafter's GPU passes, or a CPU drafter's
            lookup; 0 where nothing drafts); speculation_s: speculation's own terms charged to it, seconds
            (``spec_step_s + spec_request_s x`` the requests it drafts for: the R decoders and the prefills it
            ends, docs/profiles.md "When the drafter runs"; NaN in a torch replay, whose engine work is inside
            the measured step). Both are part of ``duration_s``.
    """

    replica: int
    step: int
    start_s: float
    duration_s: float
    num_running: int
    num_decode: int
    batch_tokens: int
    verified_drafts: int
    accepted_drafts: int
    emitted_tokens: int
    prefill_tokens: int
    capacity: int
    host_overhead_s: float
    kv_blocks_used: int
    num_preempted: int
    num_waiting: int
    draft_s: float
    speculation_s: float


class StepLogRow(NamedTuple):
    """One step's per-request step-log rows (the specsim.acceptance.steplog format), kept as the step's arrays.

    Attributes:
        step, replica: the replica's step index and the replica index.
        start_s, duration_s: when the step started and how long it took, seconds.
        request: (R,) trace indices of the decoding requests.
        gamma: drafts proposed per request this step.
        verify_len, num_accepted: (R,) verify lengths and accepted drafts.
        conf_raw, conf: (R, gamma) raw and calibrated confidences.
    """

    step: int
    replica: int
    start_s: float
    duration_s: float
    request: np.ndarray
    gamma: int
    verify_len: np.ndarray
    num_accepted: np.ndarray
    conf_raw: np.ndarray
    conf: np.ndarray


#: Columns of the per-step frame (one row per engine step of a replica); times in seconds.
STEP_COLUMNS = list(StepRecord._fields)

_ITL_PACK_STEPS = 4096          # steps whose per-step gap arrays are packed into one (Records.itl)


class Records:
    """Every per-request and per-step record of one run (arrays indexed by trace position).

    Args:
        num_requests: N, the trace's length.
        record_step_log: keep per (step, request) rows (the specsim.acceptance.steplog format).

    Per-request attributes are (N,) arrays, NaN / -1 / 0 until set: times in seconds (``arrival_s``,
    ``queued_s`` when the request reaches the scheduler after its fixed overhead, ``prefill_start_s``,
    ``prefill_s``, ``first_token_s``, ``admitted_s``, ``done_s``), ``replica``, counters (``decode_steps``,
    ``verified_drafts``, ``accepted_drafts``, ``emitted_tokens``, ``preemptions``, ``recomputed_tokens``,
    ``recompute_emissions``, ``prefix_hit_tokens``, ``prefix_lookup_tokens`` (the first prefill's lookup),
    ``recompute_hit_tokens``, ``recompute_lookup_tokens`` (lookups of re-prefills after preemptions); the
    replicas write the decode
    counters when a request leaves, is preempted, or the run ends), ``issued`` and ``unservable_reason`` (index -> text).
    """

    def __init__(self, num_requests: int, record_step_log: bool = False) -> None:
        n = num_requests
        for name in ("arrival_s", "queued_s", "prefill_start_s", "prefill_s", "first_token_s", "admitted_s",
                     "done_s"):
            setattr(self, name, np.full(n, np.nan))
        self.replica = np.full(n, -1, np.int64)
        for name in ("decode_steps", "verified_drafts", "accepted_drafts", "emitted_tokens", "preemptions",
                     "recomputed_tokens", "recompute_emissions", "prefix_hit_tokens", "prefix_lookup_tokens",
                     "recompute_hit_tokens", "recompute_lookup_tokens"):
            setattr(self, name, np.zeros(n, np.int64))
        self.issued = np.zeros(n, bool)
        self.unservable_reason: dict[int, str] = {}
        self.num_clips = 0
        self.num_kv_clips = 0
        self.num_undrafted_steps = 0            # speculative steps that drafted nothing (none useful or proposed)
        self.num_drafter_kv_losses = 0          # request-steps without drafts: the drafter's KV share did not fit
        self.record_step_log = record_step_log
        self._steps: list[StepRecord] = []
        self._itl: list[np.ndarray] = []            # gaps of the latest steps, one array per step ...
        self._itl_end_s: list[float] = []           # ... and when each step ended
        self._itl_packed: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # (gaps, step ends, counts)
        self._log: list[StepLogRow] = []
        self.replica_prefix: dict[str, list[int]] = {}   # instance name -> [hit tokens, lookup tokens]
        self._looked_up = np.zeros(n, bool)              # a request's first prefill has looked up the cache

    # ----------------------------------------------------------------- writers: the cluster
    def request_arrived(self, idx: int, now_s: float) -> None:
        """Request ``idx`` was issued and entered the system at ``now_s``."""
        self.arrival_s[idx] = now_s
        self.issued[idx] = True

    def request_unservable(self, idx: int, reason: str) -> None:
        """Request ``idx`` can never be served (``reason``: why, for the summary)."""
        self.unservable_reason[idx] = reason

    def request_queued(self, idx: int, now_s: float) -> None:
        """Request ``idx`` reached the scheduler (after its fixed overhead) at ``now_s``."""
        self.queued_s[idx] = now_s

    def prefill_started(self, idx: int, now_s: float) -> None:
        """A disaggregated prefill instance started request ``idx`` at ``now_s``."""
        self.prefill_start_s[idx] = now_s

    def prefilled(self, idx: int, prefill_s: float, first_token_s: float = float("nan")) -> None:
        """A disaggregated prefill instance computed request ``idx``'s prompt in ``prefill_s`` seconds and, when
        ``first_token_s`` is given, emitted its first token then (else the decode replica's first step emits
        it: :meth:`first_token`)."""
        self.prefill_s[idx] = prefill_s
        if first_token_s == first_token_s:
            self.first_token_s[idx] = first_token_s
            self.emitted_tokens[idx] = 1

    def requests_done(self, ids: np.ndarray, now_s: float) -> None:
        """Requests ``ids`` completed at ``now_s``."""
        self.done_s[ids] = now_s

    # ----------------------------------------------------------------- writers: the replicas
    def request_admitted(self, idx: int, replica: int, now_s: float) -> None:
        """Request ``idx`` got a slot on ``replica`` at ``now_s`` for the first time."""
        self.admitted_s[idx] = now_s
        self.replica[idx] = replica

    def request_preempted(self, idx: int) -> None:
        """Request ``idx`` was preempted by recompute."""
        self.preemptions[idx] += 1

    def recompute_admitted(self, idx: int, recompute_tokens: int) -> None:
        """Preempted request ``idx`` was admitted again and will re-prefill ``recompute_tokens`` tokens."""
        self.recomputed_tokens[idx] += recompute_tokens

    def request_counters(self, ids: np.ndarray, *, decode_steps: np.ndarray, verified_drafts: np.ndarray,
                         accepted_drafts: np.ndarray, emitted_tokens: np.ndarray) -> None:
        """Requests ``ids``' decode counters so far ((n,) arrays each; written when a request leaves, is
        preempted, or the run ends)."""
        self.decode_steps[ids] = decode_steps
        self.verified_drafts[ids] = verified_drafts
        self.accepted_drafts[ids] = accepted_drafts
        self.emitted_tokens[ids] = emitted_tokens

    def count_clips(self, num_output: int, num_kv: int) -> None:
        """A step clipped ``num_output`` verify lengths to the remaining output and ``num_kv`` to the KV left."""
        self.num_clips += num_output
        self.num_kv_clips += num_kv

    def count_undrafted_step(self) -> None:
        """A speculative step drafted nothing: no decoding request could verify a draft (each at its last token),
        or the policy proposed none (``proposal_length`` 0)."""
        self.num_undrafted_steps += 1

    def count_drafter_kv_losses(self, num_requests: int) -> None:
        """In a step, ``num_requests`` decoding requests drafted nothing: their drafter's KV share did not fit."""
        self.num_drafter_kv_losses += num_requests

    def step(self, rec: StepRecord) -> None:
        """Append one step's record."""
        self._steps.append(rec)

    def itl(self, gaps_s: np.ndarray, end_s: float) -> None:
        """Inter-emission gaps (s) of the requests emitting in a step that ends at ``end_s``."""
        self._itl.append(gaps_s)
        self._itl_end_s.append(end_s)
        if len(self._itl) >= _ITL_PACK_STEPS:
            self._pack_itl()

    def plain_steps(self, recs: list[StepRecord], gaps_s: np.ndarray, end_s: np.ndarray) -> None:
        """Several consecutive steps of one replica at once, as :meth:`step` and :meth:`itl` one by one would
        keep them: their records, and (k, R) gaps of the R requests emitting in each of the k steps ending at
        ``end_s`` (k,) (none when R = 0)."""
        self._steps.extend(recs)
        if not gaps_s.shape[1]:
            return
        self._itl.extend(gaps_s)                  # the k steps' (R,) rows, as :meth:`itl` keeps one step's
        self._itl_end_s.extend(end_s.tolist())
        if len(self._itl) >= _ITL_PACK_STEPS:
            self._pack_itl()

    def _pack_itl(self) -> None:
        """Pack the latest steps' gaps into one array: a kept array per step costs about 100 bytes of header
        (more for the compiled kernels' arrays), over a million steps in long runs."""
        counts = np.fromiter((g.size for g in self._itl), np.int64, len(self._itl))
        self._itl_packed.append((np.concatenate(self._itl), np.array(self._itl_end_s), counts))
        self._itl, self._itl_end_s = [], []

    def recompute_emit(self, ids: np.ndarray, gaps_s: np.ndarray, end_s: float) -> None:
        """Each of ``ids`` finished re-prefilling after a preemption and emitted one token."""
        self.recompute_emissions[ids] += 1
        self.itl(gaps_s, end_s)

    def first_token(self, ids: np.ndarray, now_s: float) -> None:
        """A replica's step emitted the first token of ``ids`` at ``now_s``. Colocated: its last prefill chunk ran,
        prefill_s = now - admission; disaggregated: the decode replica's first step (prefill_s stays the prefill
        instance's time)."""
        self.first_token_s[ids] = now_s
        self.prefill_s[ids] = np.where(np.isnan(self.prefill_s[ids]), now_s - self.admitted_s[ids],
                                       self.prefill_s[ids])

    def step_log(self, row: StepLogRow) -> None:
        """One step's per-request rows."""
        self._log.append(row)

    def prefix_lookup(self, instance: str, idx: int, hit_tokens: int, lookup_tokens: int) -> None:
        """A prefill looked up ``lookup_tokens`` tokens in ``instance``'s prefix cache and hit ``hit_tokens``.

        A request's first lookup is its prompt's (counted in the hit rate, per instance); every later one is a
        recompute after a preemption (prompt + generated tokens), kept apart in ``recompute_*_tokens``.
        """
        if self._looked_up[idx]:
            self.recompute_hit_tokens[idx] += hit_tokens
            self.recompute_lookup_tokens[idx] += lookup_tokens
            return
        self._looked_up[idx] = True
        self.prefix_hit_tokens[idx] += hit_tokens
        self.prefix_lookup_tokens[idx] += lookup_tokens
        acc = self.replica_prefix.setdefault(instance, [0, 0])
        acc[0] += hit_tokens
        acc[1] += lookup_tokens

    # ----------------------------------------------------------------- readers
    def steps_frame(self) -> pd.DataFrame:
        """One row per engine step (:data:`STEP_COLUMNS`)."""
        if not self._steps:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in STEP_COLUMNS})
        return pd.DataFrame(self._steps, columns=STEP_COLUMNS)

    def itl_s(self, window: tuple[float, float] | None = None) -> np.ndarray:
        """(E,) inter-emission gaps in seconds, in step order; with a window, only emissions inside (start, end]."""
        if self._itl:
            self._pack_itl()
        if window is None:
            parts = [gaps for gaps, _, _ in self._itl_packed]
        else:
            parts = [gaps[np.repeat((window[0] < ends) & (ends <= window[1]), counts)]
                     for gaps, ends, counts in self._itl_packed]
        return np.concatenate(parts) if parts else np.zeros(0)

    def prefix_hit_rates(self) -> dict[str, float | None]:
        """Token hit rate of first-time prompt lookups per instance and ``overall`` (None where nothing was looked up).

        vLLM's definition since its PR 25787: hits over prompt tokens queried by new requests; a recompute's
        lookups are left out (``recompute_hit_tokens`` / ``recompute_lookup_tokens`` hold them).
        """
        out = {k: (h / n if n else None) for k, (h, n) in sorted(self.replica_prefix.items())}
        h = sum(v[0] for v in self.replica_prefix.values())
        n = sum(v[1] for v in self.replica_prefix.values())
        out["overall"] = h / n if n else None
        return out

    def step_log_frame(self, request_id: np.ndarray, domain: np.ndarray) -> pd.DataFrame:
        """Per (step, request) rows in the specsim.acceptance.steplog format (columns built in one pass each)."""
        cols = ["step", "replica", "time_s", "step_time_s", "request_id", "domain", "gamma", "verify_len",
                "num_accepted", "conf_raw", "conf"]
        if not self._log:
            return pd.DataFrame({c: [] for c in cols})
        log = self._log
        ids = [row.request for row in log]
        g = [row.gamma for row in log]
        counts = np.fromiter((x.size for x in ids), np.int64, len(ids))

        def per_row(values, dtype):                          # one value per step -> one per (step, request)
            return np.repeat(np.asarray(values, dtype), counts)

        ids_all = np.concatenate(ids)

        def conf_lists(blocks):                               # (R_s, gamma_s) blocks -> list<float64> column
            flat = np.concatenate([b.ravel() for b in blocks]).astype(np.float64)
            offsets = np.concatenate([[0], np.cumsum(np.repeat(np.asarray(g, np.int64), counts))])
            arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat))
            return pd.Series(arr.to_pandas(), copy=False)

        df = pd.DataFrame({
            "step": per_row([row.step for row in log], np.int64),
            "replica": per_row([row.replica for row in log], np.int64),
            "time_s": per_row([row.start_s for row in log], np.float64),
            "step_time_s": per_row([row.duration_s for row in log], np.float64),
            "request_id": pd.array(np.asarray(request_id, dtype=object)[ids_all], dtype="string"),
            "domain": pd.array(np.asarray(domain, dtype=object)[ids_all], dtype="string"),
            "gamma": per_row(g, np.int64), "verify_len": np.concatenate([row.verify_len for row in log]).astype(np.int64),
            "num_accepted": np.concatenate([row.num_accepted for row in log]).astype(np.int64),
        })
        df["conf_raw"] = conf_lists([row.conf_raw for row in log])
        df["conf"] = conf_lists([row.conf for row in log])
        return df
