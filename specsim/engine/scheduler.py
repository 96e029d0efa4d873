"""The replica's scheduler: admission, preemption, the policy's decision, prefill packing (nano-vllm's
``Scheduler``). It fixes everything a step will do in a frozen :class:`StepPlan` before the step's time elapses,
and after the step releases the requests that finished.

A schedule:

1. accounting (:meth:`~specsim.engine.kv_manager.KVManager.begin_step`); an exact step makes room: every
   decode-ready request needs KV blocks for prompt + generated + 1 tokens; when blocks run out the most recently
   admitted request is preempted by recompute (vLLM V1): its blocks are freed and it returns to the front of the
   queue, to re-prefill prompt + generated tokens when admitted again;
2. admit queued requests FCFS while ``max_num_seqs`` and the KV blocks allow (``paged``: the prompt's blocks
   minus prefix-cache hits; ``reserve``: prompt + output tokens reserved up front, never preempted);
3. draft: requests whose drafter KV share fits draft gamma tokens (the others verify nothing this step);
4. decide: the policy sees a read-only view (no outcomes) and returns verify lengths in [0, gamma]; they are
   clipped to the remaining output - 1 and (exact ``paged`` steps) to the KV blocks left (the lookahead);
5. pack prefill / recompute chunks into the step's token budget.

The KV arithmetic of every step is the :class:`~specsim.engine.kv_manager.KVManager`'s; the scheduler chooses
who runs and who gives way. The policy's results are checked here (:mod:`specsim.engine.policy_calls`).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, NamedTuple

import numpy as np

from specsim.engine import kernels
from specsim.engine.draws import Drafts, lookup_matches
from specsim.engine.kv_manager import KVManager
from specsim.engine.policy_calls import DecodeBatch, PolicyCalls
from specsim.engine.records import Records
from specsim.engine.state import NO_SLOTS, ReplicaConfig, SlotRow, Slots, at_slots
from specsim.engine.workload import Workload
from specsim.errors import SpecsimInputError


class StepPlan(NamedTuple):
    """What a step will do, fixed before its duration elapses (arrays over the R decoding requests; immutable,
    a NamedTuple because one is built every step)."""

    batch: DecodeBatch        # the step index, its start, the R decoding slots, their KV tokens, gamma
    verify_len: np.ndarray    # (R,) clipped verify lengths
    drafts: Drafts            # (R, gamma) hidden outcomes (revealed only when the step ends) and confidences
    prefill: np.ndarray       # (n,) slot indices getting prefill chunks
    chunk: np.ndarray         # (n,) tokens of each chunk
    capacity: int             # the policy's capacity hook value, -1 when not used
    num_drafting: int         # requests that drafted (0 when gamma is 0)
    verified_drafts: int      # sum of verify_len
    prefill_tokens: int       # sum of chunk
    batch_tokens: int         # decode B plus prefill chunk tokens
    num_preempted: int
    num_waiting: int
    kv_blocks_used: int       # blocks in use after the step's allocation, exact even in lazy steps
    proposal_gamma: int = 0   # drafts proposed this step before the cut to what decoders can use (gamma at R = 0)
    num_proposing: int = -1   # of the drafting requests, those with drafts to verify (a lookup's matches); -1: all


class Stretch(NamedTuple):
    """Plain steps ahead (:meth:`Scheduler.plain_steps_ahead`): how many at most, the (R,) decoding slots, the
    slot prefilling a chunk of ``chunk`` tokens in each of them (-1 and 0: none), the KV tokens the first
    step's decodes read (each later step reads R more), and the step that finishes a request (the last one it
    may run)."""

    num_steps: int
    decode: np.ndarray
    prefill_slot: int
    chunk: int
    kv_tokens: int
    finish_step: int          # the step (1-based) in which the first decoding request reaches its output; 0: none


class StepOutcome(NamedTuple):
    """What a finished step changed that the scheduler acts on (from the step runner)."""

    num_decode_finished: int  # decoding requests that reached their output length
    progress_tokens: int      # decode requests plus prefill chunk tokens (0: the step did nothing)


class Scheduler:
    """Admission, preemption and the policy's decision for one replica (see the module docstring).

    Args (keyword-only):
        config: the replica's :class:`~specsim.engine.state.ReplicaConfig`.
        slots: the running requests' state (shared with the step runner).
        kv: the replica's :class:`~specsim.engine.kv_manager.KVManager`.
        policy: the policy's hooks behind :class:`~specsim.engine.policy_calls.PolicyCalls`.
        draws: the run's draw source (:func:`specsim.engine.draws.row_draws`; None when gamma is 0).
        workload: the read-only per-request inputs.
        records: the run's record sink (written through its methods).
        on_done: ``on_done(ids, now_s)`` when requests complete.
    """

    def __init__(self, *, config: ReplicaConfig, slots: Slots, kv: KVManager, policy: PolicyCalls, draws,
                 workload: Workload, records: Records, on_done: Callable[[np.ndarray, float], None]) -> None:
        self.config, self.slots, self.kv, self.policy = config, slots, kv, policy
        self.draws, self.workload, self.records, self.on_done = draws, workload, records, on_done
        self.queue: deque[int] = deque()
        self.parked: dict[int, dict] = {}          # preempted requests' state, by trace index
        self._first_token_s: dict[int, float] = {}  # queued requests' first-token times (nan: emitted here)
        self._pending: list[SlotRow] = []          # admitted this step, not yet in the slots
        self._stalled = 0
        self.step_index = 0
        # a speculating step drafts for the requests it prefills too (engine.first_drafts = "prefill-step")
        self._prefill_drafts = bool(config.gamma and config.first_drafts_in_prefill)

    def enqueue(self, idx: int, first_token_s: float) -> None:
        """Request ``idx`` joins the FCFS queue (``first_token_s``: when its prefill emitted the first token,
        NaN when this replica emits it)."""
        self.queue.append(idx)
        self._first_token_s[idx] = first_token_s

    # ----------------------------------------------------------------- schedule
    def schedule(self, now_s: float) -> StepPlan | None:
        """Make room, admit, and plan the next step at ``now_s``; None when no request is running."""
        preempted = self._make_room() if self.kv.begin_step() else 0
        preempted += self._admit(now_s)
        waiting = len(self.queue)                  # still queued through this step (the admitted ones run in it)
        if self.slots.size == 0:
            return None
        return self._plan(now_s, preempted, waiting)

    def _make_room(self) -> int:
        """Bring decode-ready requests to their base KV need, preempting the most recently admitted request
        while the blocks do not suffice. Returns preemptions."""
        s, preempted = self.slots, 0
        while s.size and not self.kv.fit_base_need(s):
            if not self.kv.free_lone_drafter_share(s):
                self._preempt(s.size - 1)
                preempted += 1
        return preempted

    def _preempt(self, slot: int) -> None:
        """Preempt by recompute: free the slot's blocks, park its state, requeue it at the front."""
        s = self.slots
        idx = int(s.request[slot])
        self.kv.free(s, slot)
        self._report_counters(np.array([slot]))
        self.parked[idx] = s.row(slot)
        s.drop(np.array([slot]))
        self.queue.appendleft(idx)
        self.records.request_preempted(idx)

    def _admit(self, now_s: float) -> int:
        """Admit queued requests FCFS while slots and KV blocks allow (a lazy step turns exact to retry).
        Returns the preemptions that turning exact made."""
        preempted = 0
        while self.queue and self.slots.size + len(self._pending) < self.config.max_num_seqs:
            lazy = self.kv.lazy_step
            if self._admit_one(self.queue[0], self.kv.admission_margin(), now_s):
                self.queue.popleft()
            elif lazy:
                self._add_pending()
                self.kv.switch_to_exact()
                preempted += self._make_room()
            else:
                break                                   # FCFS: the head waits for memory
        self._add_pending()
        return preempted

    def _add_pending(self) -> None:
        if self._pending:
            self.slots.append(self._pending)
            self._pending = []

    def _admit_one(self, idx: int, margin: int, now_s: float) -> bool:
        """Allocate request ``idx``'s blocks and give it a slot; False when they do not fit beside ``margin``."""
        w, cfg = self.workload, self.config
        parked = self.parked.get(idx)
        emits_here = cfg.colocated or cfg.decode_first_token         # this replica emits token 1
        generated = int(parked["num_generated"]) if parked else (0 if emits_here else 1)
        prompt, keys = int(w.prompt[idx]), w.prefix_keys(idx)
        got = self.kv.admit(idx, keys, prompt_tokens=prompt, output_tokens=int(w.output[idx]),
                            num_generated=generated, margin=margin)
        if got is None:
            return False
        recompute = cfg.colocated or parked is not None
        # decode_first_token: the KV came from a prefill instance; the first step recomputes the last prompt
        # token and samples the first token (vLLM's scheduler with a KV connector, docs/memory.md)
        prefill_left = (prompt + generated - got.hit_blocks * cfg.block_size if recompute
                        else int(cfg.decode_first_token))
        if recompute:
            self.records.prefix_lookup(f"replica{cfg.index}", idx, got.hit_blocks * cfg.block_size,
                                       prompt + generated)
        else:                                           # KV computed by a prefill instance: cache it here
            self.kv.publish_prefix(idx, keys, got.hit_blocks)
        if parked:
            self.records.recompute_admitted(idx, prefill_left)
        else:
            self.records.request_admitted(idx, cfg.index, now_s)
        self._add_slot(idx, parked, generated, prefill_left, got.blocks)
        return True

    def _add_slot(self, idx: int, parked: dict | None, generated: int, prefill_left: int, blocks: int) -> None:
        """Queue a slot for request ``idx`` (restoring a preempted request's counters)."""
        w = self.workload
        p = parked if parked is not None else {"last_emit_s": self._first_token_s.pop(idx)}
        key, base = self.draws.request_state(idx, w.domain[idx]) if self.config.gamma else (0, ())
        self._pending.append(SlotRow(
            request=idx, prompt_tokens=w.prompt[idx], output_tokens=w.output[idx], num_generated=generated,
            prefill_left=prefill_left, kv_blocks=blocks, kv_cached=self.kv.num_cached_held(idx),
            draft_kv_blocks=0, draw_key=key, draw_base=base, decode_steps=p.get("decode_steps", 0),
            drafts_verified=p.get("drafts_verified", 0), drafts_accepted=p.get("drafts_accepted", 0),
            last_verify_len=p.get("last_verify_len", -1), last_accepted=p.get("last_accepted", -1),
            last_emit_s=p["last_emit_s"]))
        self.parked.pop(idx, None)

    # ----------------------------------------------------------------- the step's plan
    def _plan(self, now_s: float, preempted: int, waiting: int) -> StepPlan:
        """Draft, ask the policy, limit its verify lengths (allocating their KV) and pack prefill chunks."""
        s = self.slots
        decode, kv_tokens, most_left = kernels.decoding_slots(s.prefill_left, s.prompt_tokens, s.num_generated,
                                                              s.output_tokens)
        prefill_drafts = self._prefill_drafts
        proposed = self.policy.proposal(DecodeBatch(self.step_index, now_s, decode, float(kv_tokens),
                                                    self.config.gamma), prefill_drafts and decode.size < s.size)
        batch = self._useful_drafts(proposed, most_left)
        can_draft, proposes = self._drafters(batch)
        drafts = self._draft(batch, proposes)
        decision = self.policy.decide(batch, drafts)
        verify_len, verified = self._limit_verify_lengths(batch, decision.verify_len, proposes, proposed.gamma)
        B = decode.size + verified
        prefill, chunk = self._pack_prefill(B) if decode.size < s.size else (NO_SLOTS, NO_SLOTS)
        prefill_tokens = int(chunk.sum()) if chunk.size else 0
        drafting = (decode.size if can_draft is None else int(can_draft.sum())) if batch.gamma else 0
        if decode.size and self.config.gamma and not batch.gamma and not (prefill_drafts and chunk.size
                                                                           and proposed.gamma):
            self.records.count_undrafted_step()     # drafted nothing: none useful or proposed, no prefill drafted
        used = self.kv.exact_blocks_used(s, decode, verify_len, batch.gamma)
        if self.kv.lazy_step:
            self.kv.count_lazy_growth(s.size)
        return StepPlan(batch=batch, verify_len=verify_len, drafts=drafts, prefill=prefill, chunk=chunk,
                        capacity=decision.capacity, num_drafting=drafting, verified_drafts=verified,
                        prefill_tokens=prefill_tokens, batch_tokens=B + prefill_tokens, num_preempted=preempted,
                        num_waiting=waiting, kv_blocks_used=used, proposal_gamma=proposed.gamma,
                        num_proposing=-1 if proposes is can_draft or not batch.gamma else int(proposes.sum()))

    def _useful_drafts(self, batch: DecodeBatch, most_left: int) -> DecodeBatch:
        """Draft at most the largest useful length in the batch: a request can verify at most its remaining
        output - 1 drafts, so drafting beyond the batch's largest such length (``most_left`` - 1: the most output
        tokens a decoding request has left, less one) only costs drafter time. A step where it is 0 drafts
        nothing for its decoders (no drafter time for them; :meth:`_plan` counts it with
        Records.count_undrafted_step unless the step drafts for a request it prefills), as does a step whose
        policy proposed none (``proposal_length`` 0) in a run that drafts."""
        if not (batch.decode.size and batch.gamma):
            return batch
        useful = most_left - 1
        return batch if useful >= batch.gamma else batch._replace(gamma=max(useful, 0))

    def _drafters(self, batch: DecodeBatch) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(can_draft, proposes), (R,) bool each or None (all): the decoding requests the drafter runs for (room
        for their drafter KV, reserved here; losses counted) and, of those, the ones with drafts to verify: a
        lookup drafter's request-steps without a match (``config.match_rate`` < 1) propose none, their lookup
        still run (:func:`specsim.engine.draws.lookup_matches`)."""
        s, decode = self.slots, batch.decode
        can_draft = self.kv.reserve_draft_room(s, decode, batch.gamma)
        if can_draft is not None:
            self.records.count_drafter_kv_losses(int(can_draft.size - can_draft.sum()))
        if self.config.match_rate >= 1.0 or not (decode.size and batch.gamma):
            return can_draft, can_draft
        matched = lookup_matches(self.draws.seed, at_slots(s.request, decode), at_slots(s.num_generated, decode),
                                 self.config.match_rate)
        return can_draft, matched if can_draft is None else can_draft & matched

    def _draft(self, batch: DecodeBatch, can_draft: np.ndarray | None) -> Drafts:
        """This step's drafts at each decoding request's anchor (its tokens so far); requests that cannot draft
        get confidence 0. The outcomes stay hidden until the step ends."""
        s, decode, gamma = self.slots, batch.decode, batch.gamma
        R = decode.size
        if not (R and gamma):
            z = np.zeros((R, gamma))
            return Drafts(np.zeros((R, gamma), bool), z, z)
        drafts = self.draws.drafts(at_slots(s.draw_key, decode), at_slots(s.num_generated, decode),
                                   at_slots(s.draw_base, decode), gamma)
        if can_draft is not None:
            drafts.silence(~can_draft)
        return drafts

    def _limit_verify_lengths(self, batch: DecodeBatch, verify_len: np.ndarray, can_draft: np.ndarray | None,
                              gamma: int) -> tuple[np.ndarray, int]:
        """Check the policy's lengths are in [0, gamma] (the drafts proposed: a step that drafts fewer, as none
        is useful beyond, has every longer length clipped by the output left); limit them to the remaining output
        - 1, the drafter's room and (exact steps) the KV lookahead, which allocates their blocks. Returns (verify
        lengths, sum)."""
        decode, s = batch.decode, self.slots
        verify_len, total, num_clipped, low, high = kernels.clip_to_output(verify_len, decode, s.output_tokens,
                                                                           s.num_generated)
        if not (0 <= low and high <= gamma):
            why = (f" (its proposal_length proposed {gamma} drafts this step: no more can be verified)"
                   if gamma < self.config.gamma and self.policy.hooks.proposal_length is not None else "")
            raise SpecsimInputError(None, None, f"policy {self.policy.name}", f"verify lengths in [0, {gamma}]{why}",
                                    f"values in [{low}, {high}]")
        lookahead = self.kv.exact and verify_len.size       # exact steps allocate each verify length's blocks
        if can_draft is None and not lookahead:
            if num_clipped:
                self.records.count_clips(num_clipped, 0)
            return verify_len, total
        if can_draft is not None:
            verify_len = np.where(can_draft, verify_len, 0)
        num_kv_clipped = 0
        if lookahead:
            verify_len, num_kv_clipped = self.kv.reserve_lookahead(s, decode, verify_len)
        self.records.count_clips(num_clipped, num_kv_clipped)
        return verify_len, int(verify_len.sum())

    def _pack_prefill(self, B: int) -> tuple[np.ndarray, np.ndarray]:
        """FCFS prefill / recompute chunks within the step's token budget: (slots, chunk tokens)."""
        budget = self.config.chunk_tokens - B
        if budget <= 0:
            return NO_SLOTS, NO_SLOTS
        return kernels.pack_prefill(self.slots.prefill_left, budget)

    # ----------------------------------------------------------------- plain decode stretches
    def plain_steps_ahead(self, limit: int) -> Stretch | None:
        """The plain steps next (at most ``limit``), None when the next step is not one. A plain step has no
        drafts (gamma 0, a policy asked nothing), nothing to admit (an empty queue, or every slot taken), no step
        log, and every running request decoding one token, but those still prefilling: the first of them runs a
        middle chunk (the step's whole chunk budget, not its last chunk), the others wait. The step in which a
        request reaches its output ends the stretch (its requests leave when it ends:
        :meth:`release_finished`). Such steps depend on nothing but their own times and KV accounting that does
        not preempt (:meth:`KVManager.plain_steps` says how many of them it allows), so the replica can run them
        at once (:meth:`Replica.run`)."""
        s, cfg = self.slots, self.config
        if (cfg.gamma or not s.size or self._pending or self.records.record_step_log
                or not self.policy.asks_nothing_without_drafts or (self.queue and s.size < cfg.max_num_seqs)):
            return None
        decode, slot, fewest_left, kv_tokens = kernels.plain_slots(s.prefill_left, s.output_tokens, s.num_generated,
                                                                   s.prompt_tokens)
        chunk = 0
        if slot >= 0:                   # FCFS packing: the first prefilling takes the whole budget while it needs more
            budget = cfg.chunk_tokens - decode.size
            if budget <= 0:
                return None
            chunk, limit = budget, min(limit, (int(s.prefill_left[slot]) - 1) // budget)   # its last chunk: alone
        if decode.size:
            limit = min(limit, fewest_left)                                 # the next finish ends the stretch
        return Stretch(limit, decode, slot, chunk, kv_tokens, fewest_left) if limit > 0 else None

    def skip_plain_steps(self, num_steps: int) -> None:
        """``num_steps`` plain steps ran (:meth:`plain_steps_ahead`; their KV accounted by
        :meth:`KVManager.apply_plain_steps`): advance the step index and account their policy calls as
        :meth:`schedule` and :meth:`postprocess` would have one by one."""
        self.policy.skip_steps(num_steps)
        self.step_index += num_steps
        self._stalled = 0

    # ----------------------------------------------------------------- after the step
    def postprocess(self, plan: StepPlan, outcome: StepOutcome, now_s: float) -> None:
        """After the step: guard against a livelock, advance the step index, release finished requests."""
        self._check_progress(outcome.progress_tokens)
        self.step_index += 1
        if self.may_release(plan, outcome):
            self.release_finished(now_s)

    @staticmethod
    def may_release(plan: StepPlan, outcome: StepOutcome) -> bool:
        """Whether requests may leave after the step: one reached its output, or a prefill chunk ran (a finished
        prefill may complete a 1-token output)."""
        return bool(outcome.num_decode_finished or plan.prefill.size)

    def release_finished(self, now_s: float) -> None:
        """The requests that reached their output length leave at ``now_s`` (the end of their last step)."""
        done = (self.slots.num_generated >= self.slots.output_tokens).nonzero()[0]
        if done.size:
            self._release(done, now_s)

    def _check_progress(self, progress: int) -> None:
        """Raise after 1000 consecutive steps without any decode or prefill progress (a livelock guard).

        Raises:
            RuntimeError: naming the replica, its running and queued requests and the KV blocks available.
        """
        self._stalled = 0 if progress else self._stalled + 1
        if self._stalled > 1000:
            raise RuntimeError(f"replica {self.config.index} cannot progress: {self.slots.size} running, "
                               f"{len(self.queue)} queued, {self.kv.pool.num_available} KV blocks available")

    def _release(self, slots: np.ndarray, now_s: float) -> None:
        """Finished requests leave: blocks freed, counters reported, draw state dropped, ``on_done`` told."""
        s = self.slots
        ids = s.request[slots]
        self.kv.free(s, slots)
        self._report_counters(slots)
        if self.config.gamma:
            self.draws.forget(s.draw_key[slots])
        s.drop(slots)
        self.on_done(ids, now_s)

    def _report_counters(self, slots: np.ndarray) -> None:
        """Give the records the per-request counters of ``slots`` (totals so far)."""
        s = self.slots
        self.records.request_counters(s.request[slots], decode_steps=s.decode_steps[slots],
                                      verified_drafts=s.drafts_verified[slots],
                                      accepted_drafts=s.drafts_accepted[slots], emitted_tokens=s.num_generated[slots])

    def report_running(self) -> None:
        """Give the records every running request's counters (at the end of a run with a horizon)."""
        self._report_counters(np.arange(self.slots.size))
