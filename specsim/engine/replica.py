"""One decode replica as a SimPy process: admit, make room, draft, decide, verify, accept (DESIGN.md, STYLE.md 2).

The split follows nano-vllm's scheduler / model-runner: :class:`Replica` schedules (admission, KV blocks,
preemption, the policy's decision, prefill packing) and costs a step from the profile; what happens inside
the step (outcomes) is revealed only when it ends. The replica sees only what it needs (its config, the
policy's hooks, the profile, the drafter cost, a draw source (which owns the acceptance model), the read-only workload
and a :class:`~specsim.engine.records.Records` sink), never the cluster.

A step:

1. make room (``paged``): every decode-ready request needs KV blocks for prompt + generated + 1 tokens; when
   blocks run out the most recently admitted request is preempted by recompute (vLLM V1): its blocks are freed
   and it returns to the front of the queue, to re-prefill prompt + generated tokens when admitted again;
2. admit queued requests FCFS while ``max_num_seqs`` and the KV blocks allow (``paged``: the prompt's blocks
   minus prefix-cache hits; ``reserve``: prompt + output tokens reserved up front, never preempted);
3. draft: requests whose drafter KV share fits draft gamma tokens (the others verify nothing this step);
4. decide: the policy sees a read-only view (no outcomes) and returns verify lengths in [0, gamma]; the engine
   clips them to the remaining output - 1 and (``paged``) to the KV blocks left: a step verifying l drafts needs
   room for prompt + generated + l + 1 tokens (the policy's verify length + 1, not gamma + 1: the target
   writes KV only for the tokens it verifies, and allocating for the decided length never blocks memory for
   drafts that are not verified);
5. cost: ``step_time(B)`` at B = sum_r (1 + l_r) plus prefill / recompute chunk tokens, the host overhead
   unless the policy fits ZOS, the drafter's time for the requests that drafted, the per-emission cost;
6. accept: each decoding request emits its accepted prefix + 1 tokens; a finished (re-)prefill emits one token.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields
from typing import Callable, NamedTuple

import numpy as np
import simpy

from specsim.engine import kernels
from specsim.errors import SpecsimInputError
from specsim.engine.kv import BlockPool, blocks_for
from specsim.policies.base import OracleView, SchedulingView
from specsim.engine.records import Records, StepRecord
from specsim.engine.workload import Workload


@dataclass(frozen=True)
class ReplicaConfig:
    """The settings of one decode replica (resolved from the scenario by the cluster).

    Attributes:
        index: replica index.
        gamma: drafts per request per step (0 without a drafter).
        colocated: prefill in chunks inside the replica's steps (else requests arrive prefilled).
        max_num_seqs: running requests at most.
        kv_allocation: ``"paged"`` (blocks on demand, preemption) or ``"reserve"`` (prompt + output up front).
        num_blocks, block_size: KV capacity in blocks of ``block_size`` tokens.
        prefix_caching: reuse cached prefix blocks.
        chunk_tokens: token budget of a step for prefill / recompute chunks (decode tokens count against it).
        host_overhead_s: CPU scheduling per step, seconds (0 for policies that fit ZOS).
        emission_overhead_s: seconds per emitting request per step (output processing).
        drafter_kv_fraction: drafter KV per target KV token.
    """

    index: int
    gamma: int
    colocated: bool
    max_num_seqs: int
    kv_allocation: str
    num_blocks: int
    block_size: int
    prefix_caching: bool
    chunk_tokens: int
    host_overhead_s: float
    emission_overhead_s: float = 0.0
    drafter_kv_fraction: float = 0.0


def _ints() -> np.ndarray:
    return np.zeros(0, np.int64)


_NONE = _ints()                     # no slots (read-only: shared by every step that has none)
_NONE.setflags(write=False)


def _at(arr: np.ndarray, decode: np.ndarray) -> np.ndarray:
    """``arr[decode]`` of a per-slot array ((R,) or (R, k)); the array itself, uncopied, when ``decode`` is every
    slot (it is an ascending index array of distinct slots, so same size means all of them)."""
    return arr if decode.size == arr.shape[0] else arr[decode]


@dataclass
class Slots:
    """Running requests' state, one entry per slot in admission order: named (R,) arrays (DESIGN.md words).

    ``request`` is the trace index; ``num_generated`` output tokens emitted so far; ``prefill_left`` prompt (or,
    after a preemption, prompt + generated) tokens still to prefill; ``kv_blocks`` target KV blocks held (cached
    prefix blocks included), ``kv_cached`` how many of those are shared cache blocks, ``draft_kv_blocks`` the
    drafter's blocks; ``draw_key`` and ``draw_base`` (R, gamma) the request's random stream (specsim.engine.draws);
    ``decode_steps`` and the
    history for causal policies (flushed to the records when the request leaves or is preempted).

    The arrays a scheduling view shows (``request``, ``prompt_tokens``, ``num_generated``, the history) are
    never written in place: an update replaces the array, so a view keeps them without copying.
    """

    request: np.ndarray = field(default_factory=_ints)
    prompt_tokens: np.ndarray = field(default_factory=_ints)
    output_tokens: np.ndarray = field(default_factory=_ints)
    num_generated: np.ndarray = field(default_factory=_ints)
    prefill_left: np.ndarray = field(default_factory=_ints)
    kv_blocks: np.ndarray = field(default_factory=_ints)
    kv_cached: np.ndarray = field(default_factory=_ints)
    draft_kv_blocks: np.ndarray = field(default_factory=_ints)
    draw_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    draw_base: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    decode_steps: np.ndarray = field(default_factory=_ints)
    drafts_verified: np.ndarray = field(default_factory=_ints)
    drafts_accepted: np.ndarray = field(default_factory=_ints)
    last_verify_len: np.ndarray = field(default_factory=_ints)
    last_accepted: np.ndarray = field(default_factory=_ints)
    last_emit_s: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))

    @classmethod
    def empty(cls, gamma: int) -> "Slots":
        """No running request; ``draw_base`` rows have ``gamma`` columns."""
        return cls(draw_base=np.zeros((0, gamma)))

    @property
    def size(self) -> int:
        """Number of running requests."""
        return self.request.size

    def append(self, rows: list[dict]) -> None:
        """Append one slot per dict of field values (every field given), in order."""
        d, n = self.__dict__, len(rows)
        for name in _SLOT_FIELDS:
            old = d[name]
            new = np.empty((old.shape[0] + n,) + old.shape[1:], old.dtype)
            new[:old.shape[0]] = old
            new[old.shape[0]:] = [r[name] for r in rows] if n > 1 else rows[0][name]
            d[name] = new

    def keep(self, mask: np.ndarray) -> None:
        """Keep the slots where ``mask`` (R,) is True, in order."""
        d, kept = self.__dict__, np.flatnonzero(mask)
        for name in _SLOT_FIELDS:
            d[name] = d[name][kept]

    def take(self, slot: int) -> dict[str, object]:
        """One slot's values as a dict (for parking a preempted request)."""
        return {name: self.__dict__[name][slot] for name in _SLOT_FIELDS}


_SLOT_FIELDS = tuple(f.name for f in fields(Slots))


class StepPlan(NamedTuple):
    """What a step will do, fixed before its duration elapses (arrays over the R decoding requests; immutable,
    a NamedTuple because one is built every step)."""

    decode: np.ndarray        # (R,) slot indices of decoding requests
    verify_len: np.ndarray    # (R,) clipped verify lengths
    accept: np.ndarray        # (R, gamma) bool hidden outcomes (revealed only when the step ends)
    conf_raw: np.ndarray      # (R, gamma) raw confidences
    conf: np.ndarray          # (R, gamma) calibrated
    prefill: np.ndarray       # (n,) slot indices getting prefill chunks
    chunk: np.ndarray         # (n,) tokens of each chunk
    duration_s: float
    capacity: int
    gamma: int                # drafts proposed this step
    verified_drafts: int      # sum of verify_len
    prefill_tokens: int       # sum of chunk
    batch_tokens: int         # decode B plus prefill chunk tokens
    num_preempted: int
    num_waiting: int


class Replica:
    """A decode serving instance: continuous batching, FCFS admission, paged KV (one SimPy process).

    KV accounting is exact whenever memory is short and lazy otherwise: while the free blocks cover
    ``max_num_seqs`` requests' largest possible growth per step (``growth_bound``) on top of what earlier lazy
    steps may have used, a step skips the per-request block arithmetic (it would grant everything); the first
    step where that no longer holds, or an admission that does not fit the lazy margin, brings every holding up
    to date exactly. Decisions are the same as with exact accounting every step (a test checks it).

    Args (keyword-only):
        env: the SimPy environment.
        config: this replica's :class:`ReplicaConfig`.
        hooks: the policy's hooks (:func:`specsim.policies.base.policy_hooks`).
        profile: the target's step-time profile.
        drafter_cost: the drafter's cost model.
        draws: the run's draw source (:func:`specsim.engine.draws.row_draws`): a request's drafts' confidences and
            hidden outcomes at an anchor (None when gamma is 0).
        workload: the read-only per-request inputs.
        records: the run's record sink.
        on_done: ``on_done(ids, now_s)`` when requests complete.
        lazy_kv: allow lazy KV accounting (False: exact every step; for tests).
    """

    def __init__(self, *, env: simpy.Environment, config: ReplicaConfig, hooks, profile,
                 drafter_cost, draws, workload: Workload, records: Records,
                 on_done: Callable[[np.ndarray, float], None], lazy_kv: bool = True) -> None:
        self.env, self.config, self.hooks = env, config, hooks
        self.profile, self.drafter_cost = profile, drafter_cost
        self.draws, self.workload, self.records, self.on_done = draws, workload, records, on_done
        self.index = config.index
        self.pool = BlockPool(config.num_blocks, config.prefix_caching)
        self.slots = Slots.empty(config.gamma)
        self._pending: list[dict] = []             # admitted this step, not yet in the slots
        self.queue: deque[int] = deque()
        self.parked: dict[int, dict] = {}          # preempted requests' state, by trace index
        self.cached_keys: dict[int, tuple] = {}    # cache keys each running request holds
        self._views: deque[SchedulingView | None] = deque(maxlen=2)
        self._domains: tuple = (None, None)        # (request ids array, their domains) of the last view
        self._idle: simpy.Event | None = None
        self._paged = config.kv_allocation == "paged"
        self._lazy = lazy_kv and self._paged
        self._owed = 0                             # blocks lazy steps may have grown into since the last sync
        self._exact = True                         # this step accounts KV exactly
        self.growth_bound = self._growth_bound()
        self._stalled = 0
        self.step_index = 0
        self.process = env.process(self.run())

    def _growth_bound(self) -> int:
        """Most KV blocks (target + drafter) one request can add in one step: its tokens grow by <= gamma + 1."""
        cfg = self.config
        step_tokens = cfg.gamma + 1
        target = blocks_for(step_tokens, cfg.block_size) + 1
        drafter = (blocks_for(int(np.ceil(step_tokens * cfg.drafter_kv_fraction)), cfg.block_size) + 1
                   if cfg.gamma and cfg.drafter_kv_fraction else 0)
        return int(target + drafter)

    # ----------------------------------------------------------------- arrivals
    def enqueue(self, idx: int) -> None:
        """A request joins this replica's FCFS queue (prefilled unless colocated)."""
        self.queue.append(idx)
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    @property
    def num_outstanding(self) -> int:
        """Queued plus running requests (for the least-outstanding router)."""
        return len(self.queue) + self.slots.size

    # ----------------------------------------------------------------- the process
    def run(self):
        """Serve forever, sleeping while there is no work."""
        while True:
            preempted = self._start_step()
            waiting = len(self.queue)
            preempted += self._admit()
            if self.slots.size == 0:
                self._idle = self.env.event()
                yield self._idle
                self._idle = None
                continue
            plan = self._plan(preempted, waiting)
            start = self.env.now
            yield self.env.timeout(plan.duration_s)
            self._finish(plan, start)

    def _start_step(self) -> int:
        """Choose lazy or exact KV accounting for this step; exact makes room first. Returns preemptions."""
        if not self._paged:
            self._exact = False
            return 0
        margin = self._owed + self.config.max_num_seqs * self.growth_bound
        self._exact = not (self._lazy and margin <= self.pool.num_free)
        return self._sync() if self._exact else 0

    def _sync(self) -> int:
        """Switch this step to exact accounting: bring holdings up to date, preempting where short."""
        self._exact = True
        self._owed = 0
        return self._make_room()

    # ----------------------------------------------------------------- memory: room, admission, preemption
    def _base_tokens(self, s: Slots) -> np.ndarray:
        """(R,) tokens each slot needs in KV to decode one more token: prompt + generated + 1."""
        return s.prompt_tokens + s.num_generated + 1

    def _make_room(self) -> int:
        """Set decode-ready requests' blocks to their base need (last step's unused lookahead returns),
        preempting the most recently admitted request while the blocks do not suffice. Returns preemptions."""
        s, pool, bs = self.slots, self.pool, self.config.block_size
        preempted = 0
        while s.size:
            ready = s.prefill_left == 0
            delta = np.where(ready, blocks_for(self._base_tokens(s), bs) - s.kv_blocks, 0)
            total = int(delta.sum())
            if total <= pool.num_available:
                pool.take(total) if total >= 0 else pool.release(-total)
                s.kv_blocks += delta
                return preempted
            if s.size == 1 and s.draft_kv_blocks[0]:
                pool.release(int(s.draft_kv_blocks[0]))     # alone: drop the drafter's share first
                s.draft_kv_blocks[0] = 0
                continue
            self._preempt(s.size - 1)
            preempted += 1
        return preempted

    def _preempt(self, slot: int) -> None:
        """Preempt by recompute: free the slot's blocks, park its state, requeue it at the front."""
        s = self.slots
        idx = int(s.request[slot])
        self._free_blocks(slot)
        self._flush(np.array([slot]))
        self.parked[idx] = s.take(slot)
        keep = np.ones(s.size, bool)
        keep[slot] = False
        s.keep(keep)
        self.queue.appendleft(idx)
        self.records.preemptions[idx] += 1

    def _free_blocks(self, slot: int) -> None:
        s = self.slots
        keys = self.cached_keys.pop(int(s.request[slot]), ())
        self.pool.drop_cached(keys)
        self.pool.release(int(s.kv_blocks[slot] - s.kv_cached[slot] + s.draft_kv_blocks[slot]))

    def _flush(self, slots: np.ndarray) -> None:
        """Copy the per-request counters of ``slots`` to the records (totals so far)."""
        s, r = self.slots, self.records
        ids = s.request[slots]
        r.decode_steps[ids] = s.decode_steps[slots]
        r.verified_drafts[ids] = s.drafts_verified[slots]
        r.accepted_drafts[ids] = s.drafts_accepted[slots]
        r.emitted_tokens[ids] = s.num_generated[slots]

    def flush_running(self) -> None:
        """Copy every running request's counters to the records (at the end of a run with a horizon)."""
        self._flush(np.arange(self.slots.size))

    def _admit(self) -> int:
        """Admit queued requests FCFS while slots and KV blocks allow (a lazy step turns exact to retry).
        Returns the preemptions that turning exact made."""
        preempted = 0
        while self.queue and self.slots.size + len(self._pending) < self.config.max_num_seqs:
            lazy = self._lazy and not self._exact
            margin = self._owed + self.config.max_num_seqs * self.growth_bound if lazy else 0
            if self._admit_one(self.queue[0], margin):
                self.queue.popleft()
            elif lazy:
                self._add_pending()
                preempted += self._sync()
            else:
                break                                   # FCFS: the head waits for memory
        self._add_pending()
        return preempted

    def _add_pending(self) -> None:
        if self._pending:
            self.slots.append(self._pending)
            self._pending = []

    def _admit_one(self, idx: int, margin: int) -> bool:
        """Allocate request ``idx``'s blocks and give it a slot; False when they do not fit beside ``margin``."""
        w, cfg = self.workload, self.config
        parked = self.parked.get(idx)
        generated = int(parked["num_generated"]) if parked else (0 if cfg.colocated else 1)
        prompt = int(w.prompt[idx])
        keys = w.prefix_keys(idx)
        hit = min(self.pool.match(keys), (prompt - 1) // cfg.block_size)
        tokens = prompt + int(w.output[idx]) if cfg.kv_allocation == "reserve" else prompt + generated + 1
        blocks = int(blocks_for(tokens, cfg.block_size))
        if blocks - hit + self.pool.num_evictable_in(keys[:hit]) > self.pool.num_available - margin:
            return False                                # (reviving an evictable hit takes it off the free list)
        self.pool.acquire_cached(keys[:hit])
        self.pool.take(blocks - hit)
        recompute = cfg.colocated or parked is not None
        prefill_left = prompt + generated - hit * cfg.block_size if recompute else 0
        if recompute:
            self.records.prefix_lookup(f"replica{self.index}", idx, hit * cfg.block_size, prompt + generated)
        if parked:
            self.records.recomputed_tokens[idx] += prefill_left
        self.cached_keys[idx] = keys[:hit]
        if not recompute:                               # KV computed by a prefill instance: cache it here
            self._publish(idx, keys, hit)
        self._add_slot(idx, parked, generated, prefill_left, blocks)
        return True

    def _publish(self, idx: int, keys: tuple, hit: int) -> int:
        """Cache request ``idx``'s computed prefix blocks beyond its hits; returns how many became cached."""
        new = self.pool.publish(keys[hit:])
        self.cached_keys[idx] = self.cached_keys.get(idx, ())[:hit] + new
        return len(new)

    def _add_slot(self, idx: int, parked: dict | None, generated: int, prefill_left: int, blocks: int) -> None:
        """Queue a slot for request ``idx`` (restoring a preempted request's counters)."""
        w, p, now = self.workload, parked or {}, self.env.now
        key, base = self.draws.request_state(idx, w.domain[idx]) if self.config.gamma else (0, ())
        self._pending.append(dict(
            request=idx, prompt_tokens=w.prompt[idx], output_tokens=w.output[idx], num_generated=generated,
            prefill_left=prefill_left, kv_blocks=blocks, kv_cached=len(self.cached_keys[idx]), draft_kv_blocks=0,
            draw_key=key, draw_base=base, decode_steps=p.get("decode_steps", 0),
            drafts_verified=p.get("drafts_verified", 0), drafts_accepted=p.get("drafts_accepted", 0),
            last_verify_len=p.get("last_verify_len", -1), last_accepted=p.get("last_accepted", -1),
            last_emit_s=p.get("last_emit_s", np.nan if self.config.colocated else self.records.first_token_s[idx])))
        self.parked.pop(idx, None)
        if not parked:
            self.records.admitted_s[idx] = now
            self.records.replica[idx] = self.index

    # ----------------------------------------------------------------- the step: view, decide, cost, pack
    def _plan(self, preempted: int, waiting: int) -> StepPlan:
        s = self.slots
        decode, kv_tokens = kernels.decoding_slots(s.prefill_left, s.prompt_tokens, s.num_generated)
        kv_tokens = float(kv_tokens)
        gamma = self._proposal(decode, kv_tokens)
        can_draft = self._draft_room(decode, gamma)
        accept, conf_raw, conf, capacity, verify_len = self._decide(decode, gamma, can_draft, kv_tokens)
        verify_len, verified = self._clip(decode, verify_len, can_draft, gamma)
        B = decode.size + verified
        if decode.size < s.size:                          # some slots are (re-)prefilling
            prefill, chunk = self._pack_prefill(B)
            prefill_tokens = int(chunk.sum())
        else:
            prefill, chunk, prefill_tokens = _NONE, _NONE, 0
        drafting = (decode.size if can_draft is None else int(can_draft.sum())) if gamma else 0
        duration = self._cost(decode.size, B, prefill, chunk, prefill_tokens, drafting, gamma, kv_tokens)
        if self._lazy and not self._exact:
            self._owed += s.size * self.growth_bound
        return StepPlan(decode=decode, verify_len=verify_len, accept=accept, conf_raw=conf_raw, conf=conf,
                        prefill=prefill, chunk=chunk, duration_s=duration, capacity=capacity, gamma=gamma,
                        verified_drafts=verified, prefill_tokens=prefill_tokens, batch_tokens=B + prefill_tokens,
                        num_preempted=preempted, num_waiting=waiting)

    def _proposal(self, decode: np.ndarray, kv_tokens: float) -> int:
        """Drafts proposed this step: gamma, or the policy's ``proposal_length`` (asked before drafting)."""
        gamma, h = self.config.gamma, self.hooks
        if not (decode.size and gamma and h.proposal_length is not None):
            return gamma
        empty = np.zeros((decode.size, 0))
        view = self._view(decode, None, empty, empty, kv_tokens, None, gamma)
        return self._check_int(h.proposal_length(view), "proposal_length", gamma)

    def _draft_room(self, decode: np.ndarray, gamma: int) -> np.ndarray | None:
        """(R,) bool: requests whose drafter KV share fits (FCFS); they draft, the others verify nothing.
        None when every request drafts (no drafter KV to allocate, or a lazy step)."""
        cfg, s = self.config, self.slots
        if not self._exact or gamma == 0 or cfg.drafter_kv_fraction == 0:
            return None
        ctx = s.prompt_tokens[decode] + s.num_generated[decode] + gamma
        need = np.maximum(blocks_for(np.ceil(ctx * cfg.drafter_kv_fraction).astype(np.int64), cfg.block_size)
                          - s.draft_kv_blocks[decode], 0)
        fits = np.cumsum(need) <= self.pool.num_available
        granted = np.where(fits, need, 0)
        self.pool.take(int(granted.sum()))
        s.draft_kv_blocks[decode] += granted
        can = fits | (need == 0)
        return None if can.all() else can

    def _decide(self, decode: np.ndarray, gamma: int, can_draft: np.ndarray | None, kv_tokens: float):
        """The step's drafts and the policy's verify lengths (unclipped): (accept, c_raw, c, capacity, l)."""
        R, h, s = decode.size, self.hooks, self.slots
        accept, conf_raw, conf = self._draft(decode, gamma, can_draft)
        capacity = -1
        if R and h.capacity is not None:
            old = self._views[0] if len(self._views) == 2 else None
            capacity = self._check_int(h.capacity(old, s.request[decode], R), "capacity", None)   # a copy: the hook's own
        if not R:
            self._views.append(None)
            return accept, conf_raw, conf, capacity, np.zeros(0, np.int64)
        view = self._view(decode, accept, conf_raw, conf, kv_tokens, None if capacity < 0 else capacity, gamma)
        self._views.append(view)
        return accept, conf_raw, conf, capacity, self._check_lengths(h.decide(view), R, gamma)

    def _draft(self, decode: np.ndarray, gamma: int, can_draft: np.ndarray | None):
        """(accept, conf_raw, conf), each (R, gamma), of this step's drafts at each request's anchor (its
        tokens so far); requests that cannot draft get confidence 0. ``accept`` is hidden until the step ends."""
        s, R = self.slots, decode.size
        if not (R and gamma):
            z = np.zeros((R, gamma))
            return np.zeros((R, gamma), bool), z, z
        conf_raw, conf, accept = self.draws.outcomes(_at(s.draw_key, decode), _at(s.num_generated, decode),
                                                     _at(s.draw_base, decode), gamma)
        if can_draft is not None:
            conf_raw[~can_draft] = 0.0
            conf[~can_draft] = 0.0
        return accept, conf_raw, conf

    def _clip(self, decode: np.ndarray, verify_len: np.ndarray, can_draft: np.ndarray | None,
              gamma: int) -> tuple[np.ndarray, int]:
        """Check the policy's lengths are in [0, gamma]; clip them to the remaining output - 1, the drafter's
        room and (exact steps) the KV left. Returns (verify lengths, their sum)."""
        s = self.slots
        verify_len, total, num_clipped, low, high = kernels.clip_to_output(verify_len, decode, s.output_tokens,
                                                                           s.num_generated)
        if not (0 <= low and high <= gamma):
            raise SpecsimInputError(None, None, f"policy {self.hooks.name}", f"verify lengths in [0, {gamma}]",
                                    f"values in [{low}, {high}]")
        self.records.num_clips += num_clipped
        if can_draft is None and not (self._exact and self._paged and verify_len.size):
            return verify_len, total
        if can_draft is not None:
            verify_len = np.where(can_draft, verify_len, 0)
        if self._exact and self._paged and verify_len.size:
            verify_len = self._lookahead(decode, verify_len)
        return verify_len, int(verify_len.sum())

    def _lookahead(self, decode: np.ndarray, verify_len: np.ndarray) -> np.ndarray:
        """Allocate blocks for prompt + generated + l + 1 tokens, FCFS; a request that does not fit verifies fewer."""
        s, bs = self.slots, self.config.block_size
        base = self._base_tokens(s)[decode]
        need = np.maximum(blocks_for(base + verify_len, bs) - s.kv_blocks[decode], 0)
        avail = self.pool.num_available
        if need.sum() > avail:
            cum = np.cumsum(need)
            short = cum > avail
            left = avail - np.concatenate([[0], cum[:-1]])
            grant = np.where(short, np.maximum(np.minimum(need, left), 0) * (np.cumsum(short) == 1), need)
            fit_len = (s.kv_blocks[decode] + grant) * bs - base
            self.records.num_kv_clips += int((fit_len < verify_len).sum())
            verify_len = np.minimum(verify_len, fit_len)
            need = np.maximum(blocks_for(base + verify_len, bs) - s.kv_blocks[decode], 0)
        self.pool.take(int(need.sum()))
        s.kv_blocks[decode] += need
        return verify_len

    def _pack_prefill(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        """FCFS prefill / recompute chunks within the step's token budget: (slots, chunk tokens)."""
        left_all = self.slots.prefill_left
        waiting = np.flatnonzero(left_all > 0)
        budget = max(0, self.config.chunk_tokens - B)
        if not waiting.size or budget == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        left = left_all[waiting]
        take = np.minimum(left, np.maximum(0, budget - np.concatenate([[0], np.cumsum(left)[:-1]])))
        keep = take > 0
        return waiting[keep], take[keep]

    def _cost(self, R: int, B: int, prefill: np.ndarray, chunk: np.ndarray, prefill_tokens: int, drafting: int,
              gamma: int, kv_tokens: float) -> float:
        """Seconds of the step: target step + host + drafter + prefill attention + emissions."""
        s, prof, cfg = self.slots, self.profile, self.config
        total = B + prefill_tokens
        if not total:
            return 0.0
        step_time = prof.mixed_step_time if chunk.size else prof.step_time   # prefill in the step: eager
        t = step_time(total, kv_tokens, R) + self.host_overhead_s
        if drafting and gamma:
            t += self.drafter_cost.draft_time_s(drafting, gamma, prof, kv_tokens)
        if chunk.size:
            ctx = s.prompt_tokens[prefill] + s.num_generated[prefill] - s.prefill_left[prefill]
            t += prof.prefill_attention_s(chunk, ctx)
        return float(t + cfg.emission_overhead_s * R)

    @property
    def host_overhead_s(self) -> float:
        """CPU scheduling time charged per step (0 when the policy fits ZOS)."""
        return 0.0 if self.hooks.fits_zos else self.config.host_overhead_s

    # ----------------------------------------------------------------- policy results and views
    def _view(self, decode, accept, conf_raw, conf, kv_tokens, capacity, gamma) -> SchedulingView:
        s = self.slots
        shown = (s.request, s.num_generated, s.prompt_tokens, s.drafts_verified, s.drafts_accepted,
                 s.last_verify_len, s.last_accepted)
        if decode.size < s.size:                         # else every slot decodes: the arrays serve as they are
            shown = tuple(a[decode] for a in shown)
        ids, generated, prompt, verified, accepted, last_verify_len, last_accepted = shown
        if ids is not self._domains[0]:                  # same ids array (no admission or release): same domains
            self._domains = (ids, self.workload.domain[ids])
        extra = {"accept": accept} if self.hooks.view_cls is OracleView else {}
        return self.hooks.view_cls(
            step=self.step_index, now_s=self.env.now, gamma=gamma, request_ids=ids,
            domains=self._domains[1], conf_raw=conf_raw, conf=conf, num_generated=generated,
            prompt_tokens=prompt, kv_tokens=kv_tokens, hist_drafts_verified=verified,
            hist_drafts_accepted=accepted, last_verify_len=last_verify_len, last_accepted=last_accepted,
            profile=self.profile, capacity=capacity, drafter_cost=self.drafter_cost, **extra)

    def _check_lengths(self, result, R: int, gamma: int) -> np.ndarray:
        """The policy's verify lengths as an (R,) int64 array (their range is checked by :meth:`_clip`)."""
        arr = result if type(result) is np.ndarray else np.asarray(result)
        if arr.shape != (R,) or arr.dtype.kind not in "iub":             # signed, unsigned ints or bools
            raise SpecsimInputError(None, None, f"policy {self.hooks.name}",
                                    f"verify lengths as an integer array of shape ({R},)",
                                    f"{arr.dtype} array of shape {arr.shape}")
        if arr.dtype == np.int64:
            return arr
        if arr.dtype.kind == "u" and R and arr.max() > np.iinfo(np.int64).max:
            raise SpecsimInputError(None, None, f"policy {self.hooks.name}", f"verify lengths in [0, {gamma}]",
                                    f"values up to {arr.max()}")
        return arr.astype(np.int64)

    def _check_int(self, result, hook: str, upper: int | None) -> int:
        ok = not isinstance(result, (bool, np.bool_)) and isinstance(result, (int, np.integer)) and result >= 0
        if not ok or (upper is not None and result > upper):
            want = "an int >= 0" if upper is None else f"an int in [0, {upper}]"
            raise SpecsimInputError(None, None, f"policy {self.hooks.name}, {hook}", want, repr(result))
        return int(result)

    # ----------------------------------------------------------------- the step ends
    def _finish(self, plan: StepPlan, start: float) -> None:
        now = self.env.now
        accepted, finished = self._emit_decode(plan, start, now)
        recomputed = self._advance_prefill(plan, now)
        self._record(plan, start, now, accepted, recomputed)
        self.step_index += 1
        if finished or plan.prefill.size:                 # a finished prefill may complete a 1-token output
            done = np.flatnonzero(self.slots.num_generated >= self.slots.output_tokens)
            if done.size:
                self._release(done, now)

    def _emit_decode(self, plan: StepPlan, start: float, now: float) -> tuple[int, int]:
        """Reveal the step's outcomes; each decoding request emits its accepted prefix + 1 (the view's arrays
        are replaced, never written in place: :func:`specsim.engine.kernels.emit_decode`).
        Returns (accepted drafts, requests that reached their output length)."""
        s, d, l = self.slots, plan.decode, plan.verify_len
        if not d.size:
            return 0, 0
        (accepted, gaps_s, s.num_generated, s.decode_steps, s.drafts_verified, s.drafts_accepted,
         num_accepted, num_finished) = kernels.emit_decode(d, l, plan.accept, now, s.last_emit_s, s.num_generated,
                                                           s.decode_steps, s.drafts_verified, s.drafts_accepted,
                                                           s.output_tokens)
        self.records.itl(gaps_s, now)
        if d.size == s.size:                                                   # every slot decoded
            s.last_verify_len, s.last_accepted = l, accepted
        else:
            s.last_verify_len, s.last_accepted = s.last_verify_len.copy(), s.last_accepted.copy()
            s.last_verify_len[d], s.last_accepted[d] = l, accepted
        if self.records.record_step_log:
            self.records.step_log((self.step_index, self.index, start, now - start, s.request[d], plan.gamma, l,
                                   accepted, plan.conf_raw, plan.conf))
        return num_accepted, num_finished

    def _advance_prefill(self, plan: StepPlan, now: float) -> int:
        """Apply the step's prefill chunks; finished (re-)prefills emit one token. Returns finished recomputes."""
        if not plan.prefill.size:
            return 0
        s = self.slots
        s.prefill_left[plan.prefill] -= plan.chunk
        done = plan.prefill[s.prefill_left[plan.prefill] == 0]
        for slot in done.tolist():
            idx = int(s.request[slot])
            s.kv_cached[slot] += self._publish(idx, self.workload.prefix_keys(idx), int(s.kv_cached[slot]))
        first = done[s.num_generated[done] == 0]
        again = done[s.num_generated[done] > 0]
        if again.size:                                   # a recompute finished: its next token is sampled
            self.records.recompute_emit(s.request[again], now - s.last_emit_s[again], now)
        generated = s.num_generated.copy()
        generated[done] += 1
        s.num_generated = generated
        s.last_emit_s[done] = now
        if first.size:
            self.records.first_token(s.request[first], now)
        return int(again.size)

    def _record(self, plan: StepPlan, start: float, now: float, num_acc: int, recomputed: int) -> None:
        R = plan.decode.size
        self.records.step(StepRecord(
            replica=self.index, step=self.step_index, start_s=start, duration_s=now - start,
            num_running=self.slots.size, num_decode=R, batch_tokens=plan.batch_tokens,
            verified_drafts=plan.verified_drafts, accepted_drafts=num_acc,
            emitted_tokens=num_acc + R + recomputed, prefill_tokens=plan.prefill_tokens, capacity=plan.capacity,
            host_overhead_s=self.host_overhead_s if plan.batch_tokens else 0.0,
            kv_blocks_used=self.pool.num_blocks - self.pool.num_available,
            num_preempted=plan.num_preempted, num_waiting=plan.num_waiting))
        if self._stall(R + plan.prefill_tokens):
            raise RuntimeError(f"replica {self.index} cannot progress: {self.slots.size} running, "
                               f"{len(self.queue)} queued, {self.pool.num_available} KV blocks available")

    def _stall(self, progress: int) -> bool:
        """True after 1000 consecutive steps without any decode or prefill progress (a livelock guard)."""
        self._stalled = 0 if progress else self._stalled + 1
        return self._stalled > 1000

    def _release(self, slots: np.ndarray, now: float) -> None:
        s = self.slots
        ids = s.request[slots]
        for slot in slots.tolist():
            self._free_blocks(slot)
        self._flush(slots)
        if self.config.gamma:
            for key in s.draw_key[slots].tolist():
                self.draws.forget(key)
        keep = np.ones(s.size, bool)
        keep[slots] = False
        s.keep(keep)
        self.on_done(ids, now)
