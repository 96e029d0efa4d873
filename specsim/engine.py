"""One decode replica as a SimPy process: admit, draft, schedule, verify, accept (DESIGN.md, STYLE.md 2).

The replica owns its running requests' state as numpy arrays in slot order (no per-token Python
objects) and an arena holding each running request's pre-drawn acceptance outcomes and confidences,
rows indexed by anchor position. A step:

1. draft: the drafter proposes gamma tokens for every decode-ready request; the full gamma is paid
   (``specsim.hardware.drafter``);
2. schedule: the policy sees a read-only :class:`SchedulingView` (no outcomes) and returns verify lengths
   in [0, gamma]; the engine clips them to the request's remaining output - 1 and counts the clips;
3. verify: the step costs ``step_time(B) `` at B = sum_r (1 + l_r) (+ prefill chunk tokens when colocated)
   plus the host overhead unless the policy ``fits_zos``;
4. accept: each request emits its accepted prefix + 1 tokens.

KV accounting: a running request reserves prompt + output + gamma + 1 tokens at admission (the final
value of prompt + generated + (gamma + 1) lookahead; the trace's output length plays the client's
max_tokens), so a running request never outgrows its reservation and no preemption is needed. There is no
preemption in this model.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import simpy

from specsim.errors import SpecsimInputError
from specsim.policies.base import VIEW_KINDS, OracleView, SchedulingView

if TYPE_CHECKING:
    from specsim.cluster import Cluster


#: The replica's per-running-request arrays (one entry per slot, admission order): trace index, tokens
#: generated, output and prompt lengths, arena offset, KV reservation, prompt tokens left to prefill,
#: drafts verified / accepted so far, last step's verify length / accepted drafts, last emission time (s).
SLOT_FIELDS = ("ids", "gen", "out", "prompt", "off", "reserve", "prefill_left", "hist_v", "hist_a",
               "last_v", "last_a", "last_emit")


class Arena:
    """Row storage for running requests' pre-drawn outcomes: (capacity, gamma) arrays, compacted on demand."""

    LOGIT_Q, NOISE, U = 0, 1, 2   # planes of ``data``: latent logit, confidence noise, acceptance uniform

    def __init__(self, gamma: int, capacity: int = 1 << 14) -> None:
        self.gamma = gamma
        # one row per anchor, the three draws side by side: a step gathers its rows in one fancy-index
        self.data = np.zeros((capacity, 3, gamma), dtype=np.float32)
        self.tail = 0

    def write(self, off: int, draws) -> None:
        """Store one request's draws (RequestDraws, (P, gamma) each) at rows off .. off + P - 1."""
        n = draws.logit_q.shape[0]
        self.data[off: off + n, self.LOGIT_Q] = draws.logit_q
        self.data[off: off + n, self.NOISE] = draws.noise
        self.data[off: off + n, self.U] = draws.u

    def alloc(self, n: int, live_off: np.ndarray, live_len: np.ndarray) -> tuple[int, np.ndarray]:
        """Reserve ``n`` rows; may compact live blocks (returns their new offsets). Returns (offset, new_live_off)."""
        if self.tail + n > self.data.shape[0]:
            live_off = self._compact(live_off, live_len, n)
        off = self.tail
        self.tail += n
        return off, live_off

    def _compact(self, live_off: np.ndarray, live_len: np.ndarray, need: int) -> np.ndarray:
        used = int(live_len.sum())
        cap = self.data.shape[0]
        while used + need > cap // 2 and used + need > cap - cap // 4:
            cap *= 2
        if live_len.size:
            src = np.concatenate([np.arange(o, o + n) for o, n in zip(live_off, live_len)])
        else:
            src = np.zeros(0, dtype=np.int64)
        new_off = np.concatenate([[0], np.cumsum(live_len)[:-1]]).astype(np.int64) if live_len.size else live_off
        fresh = np.zeros((cap, 3, self.gamma), dtype=np.float32)
        fresh[: src.size] = self.data[src]
        self.data = fresh
        self.tail = used
        return new_off


@dataclass
class StepPlan:
    """What a step will do, fixed before its duration elapses."""

    decode: np.ndarray | slice  # slot indices of decode-ready requests (a slice when all of them)
    num_decode: int          # R
    verify_len: np.ndarray   # (R,) clipped verify lengths
    rows: np.ndarray         # (R,) arena rows of each request's anchor
    draws: np.ndarray | None  # (R, 3, gamma) those rows' draws (outcomes revealed only in _finish)
    conf_raw: np.ndarray     # (R, gamma) this step's raw confidences
    conf: np.ndarray         # (R, gamma) calibrated
    prefill: np.ndarray      # (n,) slot indices getting prefill chunks (colocated)
    chunk: np.ndarray        # (n,) tokens of each chunk
    duration_s: float
    capacity: int
    gamma: int               # drafts proposed this step (< the replica's gamma after a proposal_length call)
    num_verified: int        # sum of verify_len
    batch_tokens: int        # tokens in the step: decode B plus prefill chunk tokens


class Replica:
    """A decode serving instance running continuous batching with FCFS admission (one SimPy process).

    Args:
        cluster: the owning cluster (records, acceptance model, seeds, completion callback).
        index: replica index.
        policy: the verification policy.
        gamma: drafts per request per step (0 when the drafter is ``none``).
        colocated: prefill in chunks sharing the replica's steps (else requests arrive prefilled).
    """

    def __init__(self, cluster: "Cluster", index: int, policy, gamma: int, colocated: bool) -> None:
        self.c = cluster
        self.env: simpy.Environment = cluster.env
        self.index = index
        self.policy = policy
        self.gamma = gamma
        self.colocated = colocated
        self.uses_capacity = callable(getattr(policy, "capacity", None))
        self.uses_proposal = callable(getattr(policy, "proposal_length", None))
        self._depth = np.arange(gamma)[None, :]                           # (1, gamma) draft depths k - 1
        kind = getattr(policy, "view_kind", "causal")
        if kind not in VIEW_KINDS:
            raise SpecsimInputError(None, None, f"policy {policy.name}, view_kind",
                                    f"one of {sorted(VIEW_KINDS)}", repr(kind))
        self.view_cls = VIEW_KINDS[kind]
        self.host_s = 0.0 if policy.fits_zos else cluster.scenario.engine.host_overhead_s
        sc = cluster.scenario
        self.max_num_seqs = sc.cluster.max_num_seqs
        self.kv_capacity = sc.cluster.kv_capacity_tokens
        self.chunk_tokens = sc.prefill.chunk_tokens
        self.queue: deque[int] = deque()
        self.kv_reserved = 0
        self.arena = Arena(gamma)
        self._views: deque[SchedulingView | None] = deque(maxlen=2)
        self._idle: simpy.Event | None = None
        self.step_index = 0
        for name in SLOT_FIELDS:                                          # running-request state, slot order
            setattr(self, name, np.zeros(0, np.float64 if name == "last_emit" else np.int64))
        self.process = self.env.process(self.run())

    # ----------------------------------------------------------------- arrivals and admission
    def enqueue(self, idx: int) -> None:
        """A request joins this replica's FCFS queue (prefilled unless colocated)."""
        self.queue.append(idx)
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    @property
    def num_outstanding(self) -> int:
        """Queued plus running requests (for the least-outstanding router)."""
        return len(self.queue) + self.ids.size

    def _admit(self) -> None:
        c = self.c
        new = []
        while self.queue and self.ids.size + len(new) < self.max_num_seqs:
            idx = self.queue[0]
            need = int(c.prompt[idx] + c.output[idx] + self.gamma + 1)
            if self.kv_reserved + need > self.kv_capacity:
                break  # FCFS: the head waits for memory (it fits an empty replica: checked at arrival)
            self.queue.popleft()
            self.kv_reserved += need
            new.append((idx, need))
        if not new:
            return
        idxs = np.array([i for i, _ in new], dtype=np.int64)
        for idx, _ in new:
            num_rows = int(c.output[idx])                                   # one row per anchor position
            off, self.off = self.arena.alloc(num_rows, self.off, self.out)
            if self.gamma > 0:
                draws = c.draw_request(idx)
                self.arena.write(off, draws)
            # append one slot at a time so that a compaction sees every live block
            self.ids = np.append(self.ids, idx)
            self.out = np.append(self.out, c.output[idx])
            self.off = np.append(self.off, off)
        k = idxs.size
        self.prompt = np.append(self.prompt, c.prompt[idxs])
        self.reserve = np.append(self.reserve, [need for _, need in new])
        self.gen = np.append(self.gen, np.zeros(k, np.int64) if self.colocated else np.ones(k, np.int64))
        self.prefill_left = np.append(self.prefill_left, c.prompt[idxs] if self.colocated else np.zeros(k, np.int64))
        self.hist_v = np.append(self.hist_v, np.zeros(k, np.int64))
        self.hist_a = np.append(self.hist_a, np.zeros(k, np.int64))
        self.last_v = np.append(self.last_v, np.full(k, -1, np.int64))
        self.last_a = np.append(self.last_a, np.full(k, -1, np.int64))
        self.last_emit = np.append(self.last_emit, c.first_token_s[idxs] if not self.colocated else np.full(k, np.nan))
        c.admitted_s[idxs] = self.env.now
        c.replica_of[idxs] = self.index

    # ----------------------------------------------------------------- the step
    def run(self):
        """The replica's SimPy process: serve forever, sleeping while there is no work."""
        while True:
            self._admit()
            if self.ids.size == 0:
                self._idle = self.env.event()
                yield self._idle
                self._idle = None
                continue
            plan = self._plan()
            start = self.env.now
            yield self.env.timeout(plan.duration_s)
            self._finish(plan, start)

    def _plan(self) -> StepPlan:
        c = self.c
        profile = c.profile
        if self.colocated:
            decode = np.flatnonzero(self.prefill_left == 0)
            R = decode.size
        else:
            decode = slice(None)                                           # every running request decodes
            R = self.ids.size
        gamma = self.gamma
        gen = self.gen[decode]
        rows = self.off[decode] + gen                                      # (R,) anchor rows p = tokens so far
        kv_tokens = float((self.prompt[decode] + gen).sum())
        capacity = -1
        if R and gamma and self.uses_proposal:
            # the policy sizes the proposal before drafting (it sees no confidences of this step)
            empty = np.zeros((R, 0))
            gamma = self._check_proposal(self.policy.proposal_length(
                self._view(decode, rows, empty, empty, kv_tokens, None)))
        if R and gamma:
            # per-position confidence maps cover the full block; a shorter proposal keeps its first columns
            draws = self.arena.data[rows]                                  # (R, 3, gamma), still hidden
            conf_raw, conf = c.acceptance.confidences(draws[:, Arena.LOGIT_Q], draws[:, Arena.NOISE])
            if gamma < self.gamma:
                conf_raw, conf = conf_raw[:, :gamma], conf[:, :gamma]
        else:
            draws = None
            conf_raw = conf = np.zeros((R, gamma))
        if R:
            if self.uses_capacity:
                old = self._views[0] if len(self._views) == 2 else None
                capacity = self._check_capacity(self.policy.capacity(old, self.ids[decode], R))
            view = self._view(decode, rows, conf_raw, conf, kv_tokens, None if capacity < 0 else capacity, gamma)
            verify_len = self._check(self.policy(view), R, gamma)
            self._views.append(view)
            lmax = self.out[decode] - gen - 1                            # never verify past the output
            clipped = verify_len > lmax
            if clipped.any():
                c.num_clips += int(clipped.sum())
                verify_len = np.minimum(verify_len, lmax)
        else:
            verify_len = np.zeros(0, np.int64)
            self._views.append(None)
        # colocated prefill: FCFS chunks within the step's token budget
        prefill = np.zeros(0, np.int64)
        chunk = np.zeros(0, np.int64)
        B = int(R + verify_len.sum())
        if self.colocated:
            waiting = np.flatnonzero(self.prefill_left > 0)
            budget = max(0, self.chunk_tokens - B)
            if waiting.size and budget > 0:
                left = self.prefill_left[waiting]
                take = np.minimum(left, np.maximum(0, budget - np.concatenate([[0], np.cumsum(left)[:-1]])))
                keep = take > 0
                prefill, chunk = waiting[keep], take[keep]
        total = B + int(chunk.sum())
        duration = profile.step_time(total, kv_tokens) + self.host_s if total else 0.0
        if R and gamma:
            duration += c.drafter_cost.draft_time_s(R, gamma, profile, kv_tokens)   # the full proposal
        if chunk.size:
            ctx = self.prompt[prefill] - self.prefill_left[prefill]
            duration += profile.prefill_attention_s(chunk, ctx)
        return StepPlan(decode, R, verify_len, rows, draws, conf_raw, conf, prefill, chunk, float(duration),
                        capacity, gamma, B - R, total)

    def _accept(self, draws: np.ndarray) -> np.ndarray:
        """(R, gamma) hidden outcomes from a step's (R, 3, gamma) arena rows."""
        return self.c.acceptance.accepted(draws[:, Arena.LOGIT_Q], draws[:, Arena.U])

    def _view(self, decode, rows: np.ndarray, conf_raw: np.ndarray, conf: np.ndarray,
              kv_tokens: float, capacity: int | None, gamma: int | None = None) -> SchedulingView:
        c = self.c
        # copies: the view is kept (dspark-async reads it two steps later) while the slots change
        take = (lambda a: a.copy()) if isinstance(decode, slice) else (lambda a: a[decode])
        ids = take(self.ids)
        extra = {"accept": self._accept(self.arena.data[rows])} if self.view_cls is OracleView else {}
        return self.view_cls(
            step=self.step_index, now_s=self.env.now, gamma=self.gamma if gamma is None else gamma, request_ids=ids,
            domains=c.domain[ids], conf_raw=conf_raw, conf=conf, num_generated=take(self.gen),
            prompt_tokens=take(self.prompt), kv_tokens=kv_tokens,
            hist_drafts_verified=take(self.hist_v), hist_drafts_accepted=take(self.hist_a),
            last_verify_len=take(self.last_v), last_accepted=take(self.last_a),
            profile=c.profile, capacity=capacity, drafter_cost=c.drafter_cost, **extra)

    def _check(self, result, R: int, gamma: int) -> np.ndarray:
        name = getattr(self.policy, "name", repr(self.policy))
        arr = result if type(result) is np.ndarray else np.asarray(result)
        if arr.shape != (R,) or arr.dtype.kind not in "iub":             # signed, unsigned ints or bools
            raise SpecsimInputError(None, None, f"policy {name}",
                                    f"verify lengths as an integer array of shape ({R},)",
                                    f"{arr.dtype} array of shape {arr.shape}")
        if R and not (0 <= arr.min() and arr.max() <= gamma):
            raise SpecsimInputError(None, None, f"policy {name}", f"verify lengths in [0, {gamma}]",
                                    f"values in [{arr.min()}, {arr.max()}]")
        return arr if arr.dtype == np.int64 else arr.astype(np.int64)

    def _check_capacity(self, result) -> int:
        name = getattr(self.policy, "name", repr(self.policy))
        if isinstance(result, (bool, np.bool_)) or not isinstance(result, (int, np.integer)) or result < 0:
            raise SpecsimInputError(None, None, f"policy {name}, capacity", "an int >= 0", repr(result))
        return int(result)

    def _check_proposal(self, result) -> int:
        name = getattr(self.policy, "name", repr(self.policy))
        if isinstance(result, (bool, np.bool_)) or not isinstance(result, (int, np.integer)) \
                or not 0 <= result <= self.gamma:
            raise SpecsimInputError(None, None, f"policy {name}, proposal_length",
                                    f"an int in [0, {self.gamma}]", repr(result))
        return int(result)

    def _finish(self, plan: StepPlan, start: float) -> None:
        c = self.c
        now = self.env.now
        d, l = plan.decode, plan.verify_len
        R = plan.num_decode
        if R:
            if plan.gamma:
                acc = self._accept(plan.draws)                                      # (R, gamma) hidden until now
                verified = self._depth < l[:, None]                                  # (R, gamma)
                accepted = (acc & verified).cumprod(axis=1).sum(axis=1)             # leading accepted prefix
            else:
                accepted = np.zeros(R, np.int64)
            emitted = accepted + 1
            gaps = now - self.last_emit[d]
            self.gen[d] += emitted
            self.hist_v[d] += l
            self.hist_a[d] += accepted
            self.last_v[d] = l
            self.last_a[d] = accepted
            self.last_emit[d] = now
            c.record_step_requests(self, plan, start, now, accepted, gaps)
        else:
            accepted = np.zeros(0, np.int64)
        c.record_step(self, plan, start, now, int(accepted.sum()))
        self.step_index += 1
        if plan.prefill.size:
            self.prefill_left[plan.prefill] -= plan.chunk
            done_prefill = plan.prefill[self.prefill_left[plan.prefill] == 0]
            if done_prefill.size:
                ids = self.ids[done_prefill]
                self.gen[done_prefill] = 1                                          # prefill emits token 1
                self.last_emit[done_prefill] = now
                c.on_first_token(ids, now)
        finished = np.flatnonzero(self.gen >= self.out)
        if finished.size:
            self._release(finished, now)

    def _release(self, slots: np.ndarray, now: float) -> None:
        ids = self.ids[slots]
        self.kv_reserved -= int(self.reserve[slots].sum())
        keep = np.ones(self.ids.size, bool)
        keep[slots] = False
        for name in SLOT_FIELDS:
            setattr(self, name, getattr(self, name)[keep])
        if self.ids.size == 0:
            self.arena.tail = 0
        self.c.on_complete(ids, now)
