"""The replica's step runner: what a planned step costs, and what it did once its time has elapsed (nano-vllm's
``ModelRunner`` for a simulator: no model runs, a step-time profile prices it and the hidden outcomes are revealed).

* cost (:meth:`StepRunner.step_time_s`): ``step_time(B)`` at B = sum_r (1 + l_r) plus prefill / recompute chunk
  tokens, the host overhead unless the policy fits ZOS, the drafter's time for the requests that drafted and
  for those the step prefills (:func:`prefill_proposals`), speculation's own work while speculation is configured
  (``profile.speculation_s``, issue 20), the prefill chunks' attention, and the per-emission cost (DESIGN.md, the
  step-time issue);
* reveal and emit (:meth:`StepRunner.finish`): each decoding request emits its accepted prefix + 1 tokens; a
  finished (re-)prefill emits one token; the step's record (and, when asked, its per-request step-log rows)
  goes to the records.
"""

from __future__ import annotations

import numpy as np

from specsim.engine import kernels
from specsim.engine.kv_manager import KVManager
from specsim.engine.records import Records, StepLogRow, StepRecord
from specsim.engine.scheduler import StepOutcome, StepPlan, Stretch
from specsim.engine.state import ReplicaConfig, Slots
from specsim.engine.workload import Workload

NO_STEPS = np.zeros(0)          # no plain step (read-only)
NO_STEPS.setflags(write=False)


def speculation_parts(plan: StepPlan, ctx, drafter_cost, profile,
                      first_drafts_in_prefill: bool) -> tuple[float, float]:
    """(draft_s, speculation_s) of a step while speculation is configured, seconds each: the drafter's time for
    the requests proposing (the decoders that draft, and the prefills it drafts for: docs/profiles.md, "When
    the drafter runs") and speculation's own terms (``profile.speculation_s``), whose drafts are those to verify:
    a lookup drafter's requests without a match (``plan.num_proposing``) add none, so a step where none matched
    pays the terms only as ``spec_zero_draft_pays`` says (vLLM runs its plain sampler when no request has drafts).

    Args:
        plan: the step. ctx: (n,) tokens each prefill chunk's request already holds (None: no chunk).
        drafter_cost: ``draft_time_s(R, gamma, profile, kv_tokens)``. profile: the step-time profile.
        first_drafts_in_prefill: whether the step that ends a prefill drafts for its request.
    """
    batch = plan.batch
    rows, rows_kv = prefill_proposals(plan, ctx) if first_drafts_in_prefill else (0, 0.0)
    drafting = plan.num_drafting if batch.gamma else 0
    # the step's draft length: the decoders' where they draft, else the policy's proposal for the prefills
    g = batch.gamma if drafting else plan.proposal_gamma
    proposing = drafting + (rows if g else 0)
    draft = drafter_cost.draft_time_s(proposing, g, profile, batch.kv_tokens + rows_kv) if proposing else 0.0
    matched = proposing if plan.num_proposing < 0 or not drafting else plan.num_proposing + (rows if g else 0)
    return draft, profile.speculation_s(batch.decode.size + rows, matched * g)


class StepRunner:
    """Prices and finishes one replica's steps (see the module docstring).

    Args (keyword-only):
        config: the replica's :class:`~specsim.engine.state.ReplicaConfig`.
        slots: the running requests' state (shared with the scheduler).
        kv: the replica's KV manager (a finished prefill publishes its prefix blocks to the cache).
        fits_zos: the policy fits zero-overhead scheduling (no host overhead charged; none either without drafts).
        profile: the target's step-time profile.
        drafter_cost: the drafter's cost model.
        workload: the read-only per-request inputs.
        records: the run's record sink.
    """

    def __init__(self, *, config: ReplicaConfig, slots: Slots, kv: KVManager, fits_zos: bool, profile,
                 drafter_cost, workload: Workload, records: Records) -> None:
        self.config, self.slots, self.kv = config, slots, kv
        self.profile, self.drafter_cost, self.workload, self.records = profile, drafter_cost, workload, records
        # CPU scheduling is charged per step unless ZOS hides it: the policy fits ZOS, or nothing is drafted (gamma
        # 0: every batch is known before any confidence exists, whatever the policy, as for ``none``)
        self.host_overhead_s = 0.0 if fits_zos or not config.gamma else config.host_overhead_s
        self._spec_parts = (0.0, 0.0)    # the last priced step's (draft_s, speculation_s), for its record

    def step_time_s(self, plan: StepPlan) -> float:
        """Seconds of the step: target step + host + drafter + speculation's own work + prefill attention +
        emissions."""
        s, prof, batch = self.slots, self.profile, plan.batch
        self._spec_parts = (0.0, 0.0)
        if not plan.batch_tokens:
            return 0.0
        R, kv_tokens = batch.decode.size, batch.kv_tokens
        # prefill in the step: the mixed path (eager table, mixed_step_s). vLLM replays its full decode graph for a
        # batch of equal query lengths (1 + k): a 1-token chunk (a KV connector's recompute of the last prompt
        # token) beside 1-token decode rows is such a batch; beside verify rows of 1 + k tokens it is not
        mixed = plan.chunk.size and (plan.chunk.max() > 1 or plan.verified_drafts > 0)
        step_time = prof.mixed_step_time if mixed else prof.step_time
        t = step_time(plan.batch_tokens, kv_tokens, R) + self.host_overhead_s
        # (n,) tokens each prefill chunk's request already holds in the KV cache (None: no chunk)
        ctx = (s.prompt_tokens[plan.prefill] + s.num_generated[plan.prefill] - s.prefill_left[plan.prefill]
               if plan.chunk.size else None)
        if self.config.gamma:                          # speculation configured: the drafter, its own work (issue 20)
            self._spec_parts = speculation_parts(plan, ctx, self.drafter_cost, prof,
                                                 self.config.first_drafts_in_prefill)
            t += self._spec_parts[0]                   # (added one after the other, as before: same seconds)
            t += self._spec_parts[1]
        if ctx is not None:
            t += prof.prefill_attention_s(plan.chunk, ctx)
        return float(t + self.config.emission_overhead_s * R)

    def finish(self, plan: StepPlan, end_s: float) -> StepOutcome:
        """The step ends at ``end_s``: reveal outcomes, emit tokens, advance prefills, record the step."""
        num_accepted, num_finished = self._emit_decode(plan, end_s)
        num_recomputed = self._advance_prefill(plan, end_s)
        R = plan.batch.decode.size
        start_s = plan.batch.now_s
        self.records.step(StepRecord(
            replica=self.config.index, step=plan.batch.step, start_s=start_s, duration_s=end_s - start_s,
            num_running=self.slots.size, num_decode=R, batch_tokens=plan.batch_tokens,
            verified_drafts=plan.verified_drafts, accepted_drafts=num_accepted,
            emitted_tokens=num_accepted + R + num_recomputed, prefill_tokens=plan.prefill_tokens,
            capacity=plan.capacity, host_overhead_s=self.host_overhead_s if plan.batch_tokens else 0.0,
            kv_blocks_used=plan.kv_blocks_used, num_preempted=plan.num_preempted, num_waiting=plan.num_waiting,
            draft_s=self._spec_parts[0], speculation_s=self._spec_parts[1]))
        return StepOutcome(num_decode_finished=num_finished, progress_tokens=R + plan.prefill_tokens)

    # ----------------------------------------------------------------- plain stretches
    def plain_step_ends(self, now_s: float, next_s: float, end_by_s: float,
                        stretch: Stretch) -> tuple[np.ndarray, np.ndarray]:
        """Start and end times, seconds ((k,) each), of the first k of ``stretch``'s plain steps from ``now_s``
        (:meth:`~specsim.engine.scheduler.Scheduler.plain_steps_ahead`) that start before ``next_s`` and end
        before ``end_by_s``, each priced as :meth:`step_time_s` prices it, bit for bit (the profile's
        ``decode_step_terms`` or ``mixed_step_terms``, its ``prefill_attention_s`` per chunk). k = 0 where the
        profile prices steps otherwise than by its scalar table lookup (B beyond the table, a cost model without
        the terms)."""
        s, prof, num, decode = self.slots, self.profile, stretch.num_steps, stretch.decode
        slot, chunk = stretch.prefill_slot, stretch.chunk
        R = decode.size
        terms = getattr(prof, "mixed_step_terms" if chunk > 1 else "decode_step_terms", None)   # as step_time_s
        terms = terms(R + chunk, R) if terms is not None else None
        if terms is None:
            return NO_STEPS, NO_STEPS
        table_s, kv_read_s_per_token, per_request_s = terms
        shortest = (table_s + self.host_overhead_s) * (1.0 - 1e-9)         # every term is >= 0
        span = min(next_s, end_by_s) - now_s
        if shortest > 0.0 and span < num * shortest:                        # (a bound: no step priced in vain)
            num = min(num, max(0, int(span / shortest) + 2))
        attention_s = np.zeros(num)
        if chunk:
            done = int(s.prompt_tokens[slot] + s.num_generated[slot] - s.prefill_left[slot])
            tokens = np.array([chunk], np.int64)
            for j in range(num):
                attention_s[j] = prof.prefill_attention_s(tokens, np.array([done + j * chunk], np.int64))
        return kernels.plain_step_ends(float(now_s), float(next_s), float(end_by_s), table_s, kv_read_s_per_token,
                                       stretch.kv_tokens, R, per_request_s, float(self.host_overhead_s), attention_s,
                                       float(self.config.emission_overhead_s * R))

    def finish_plain(self, start_s: np.ndarray, end_s: np.ndarray, stretch: Stretch, used: np.ndarray, *,
                     step: int, num_waiting: int) -> None:
        """The first k = ``end_s.size`` of ``stretch``'s plain steps ran from ``start_s`` to ``end_s`` ((k,) each,
        from :meth:`plain_step_ends`; the first is step index ``step``): each decoding slot emitted one token per
        step, the prefilling slot (if any) ran a chunk per step. Emits and records them as :meth:`finish` would
        step by step (``used``: the KV blocks each reports; ``num_waiting``: the queue's length, unchanged)."""
        s, k, d, slot, chunk = self.slots, end_s.size, stretch.decode, stretch.prefill_slot, stretch.chunk
        R = d.size
        gaps, s.num_generated, s.decode_steps = kernels.plain_emit(end_s, s.last_emit_s, d, s.num_generated,
                                                                   s.decode_steps)
        if R == s.size:
            s.last_verify_len, s.last_accepted = np.zeros(R, np.int64), np.zeros(R, np.int64)
        else:
            s.last_verify_len, s.last_accepted = s.last_verify_len.copy(), s.last_accepted.copy()
            s.last_verify_len[d], s.last_accepted[d] = 0, 0
        if chunk:
            s.prefill_left[slot] -= k * chunk
        replica, host, size = self.config.index, self.host_overhead_s, s.size
        self.records.plain_steps(
            [StepRecord(replica, step + j, a, b - a, size, R, R + chunk, 0, 0, R, chunk, -1, host, u, 0, num_waiting,
                        0.0, 0.0)
             for j, (a, b, u) in enumerate(zip(start_s.tolist(), end_s.tolist(), used.tolist()))],
            gaps, end_s)

    def _emit_decode(self, plan: StepPlan, end_s: float) -> tuple[int, int]:
        """Reveal the step's outcomes; each decoding request emits its accepted prefix + 1 (the view's arrays
        are replaced, never written in place: :func:`specsim.engine.kernels.emit_decode`).
        Returns (accepted drafts, requests that reached their output length)."""
        s, d, l = self.slots, plan.batch.decode, plan.verify_len
        if not d.size:
            return 0, 0
        (accepted, gaps_s, s.num_generated, s.decode_steps, s.drafts_verified, s.drafts_accepted,
         num_accepted, num_finished) = kernels.emit_decode(d, l, plan.drafts.accept, end_s, s.last_emit_s,
                                                           s.num_generated, s.decode_steps, s.drafts_verified,
                                                           s.drafts_accepted, s.output_tokens)
        self.records.itl(gaps_s, end_s)
        if d.size == s.size:                                                   # every slot decoded
            s.last_verify_len, s.last_accepted = l, accepted
        else:
            s.last_verify_len, s.last_accepted = s.last_verify_len.copy(), s.last_accepted.copy()
            s.last_verify_len[d], s.last_accepted[d] = l, accepted
        if self.records.record_step_log:
            self.records.step_log(StepLogRow(
                step=plan.batch.step, replica=self.config.index, start_s=plan.batch.now_s,
                duration_s=end_s - plan.batch.now_s, request=s.request[d], gamma=plan.batch.gamma, verify_len=l,
                num_accepted=accepted, conf_raw=plan.drafts.conf_raw, conf=plan.drafts.conf))
        return num_accepted, num_finished

    def _advance_prefill(self, plan: StepPlan, end_s: float) -> int:
        """Apply the step's prefill chunks; finished (re-)prefills emit one token. Returns finished recomputes."""
        if not plan.prefill.size:
            return 0
        s = self.slots
        s.prefill_left[plan.prefill] -= plan.chunk
        done = plan.prefill[s.prefill_left[plan.prefill] == 0]
        if not done.size:                                # middle chunks only: nobody emits
            return 0
        for slot in done.tolist():
            idx = int(s.request[slot])
            s.kv_cached[slot] += self.kv.publish_prefix(idx, self.workload.prefix_keys(idx), int(s.kv_cached[slot]))
        first = done[s.num_generated[done] == 0]
        again = done[s.num_generated[done] > 0]
        if again.size:                                   # a recompute finished: its next token is sampled
            self.records.recompute_emit(s.request[again], end_s - s.last_emit_s[again], end_s)
        generated = s.num_generated.copy()
        generated[done] += 1
        s.num_generated = generated
        s.last_emit_s[done] = end_s
        if first.size:
            self.records.first_token(s.request[first], end_s)
        return int(again.size)


def prefill_proposals(plan: StepPlan, ctx: np.ndarray | None) -> tuple[int, float]:
    """Requests prefilling in this step and their context tokens once the step is done (``ctx``: (n,) tokens each
    chunk's request held before the step, None without chunks; :meth:`StepRunner.step_time_s`). vLLM's proposer runs
    over every request scheduled in the step, after sampling (``EagleProposer.propose``, the DFlash / DSpark
    proposers: its padded drafter batch): a request whose prefill ends here gets its first drafts, one still
    prefilling gets drafts that are thrown away (``discard_request_mask``), and either way the step pays the
    drafter and speculation's own work for it. The request's decode steps then draft for it as for every decoding
    request, so over its life it is drafted for in every step it is scheduled in (docs/profiles.md, "When the
    drafter runs"). An engine that drafts for running requests only: ``engine.first_drafts = decode-step``."""
    if ctx is None:
        return 0, 0.0
    return int(plan.chunk.size), float((ctx + plan.chunk).sum())
