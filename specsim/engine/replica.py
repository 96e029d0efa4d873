"""One decode replica as a SimPy process: schedule -> run -> postprocess (DESIGN.md, STYLE.md 2).

The split follows nano-vllm's engine: the :class:`~specsim.engine.scheduler.Scheduler` decides what a step
does (admission, preemption, the policy's decision, prefill packing) and fixes it in a frozen
:class:`~specsim.engine.scheduler.StepPlan`; the :class:`~specsim.engine.step_runner.StepRunner` prices the step
from the profile and, once its time has elapsed, reveals the outcomes and emits; the scheduler then releases
the requests that finished. Every KV-block rule is the :class:`~specsim.engine.kv_manager.KVManager`'s. What
happens inside a step (outcomes) is revealed only when it ends.

The replica sees only what it needs (its config, the policy's hooks, the profile, the drafter cost, a draw
source (which owns the acceptance model), the read-only workload and a :class:`~specsim.engine.records.Records`
sink), never the cluster.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import simpy

from specsim.engine import kernels
from specsim.engine.kv_manager import KVManager
from specsim.engine.policy_calls import PolicyCalls
from specsim.engine.records import Records
from specsim.engine.scheduler import Scheduler
from specsim.engine.state import ReplicaConfig, Slots
from specsim.engine.step_runner import StepRunner
from specsim.engine.workload import Workload

__all__ = ["Replica", "ReplicaConfig"]

#: Most plain steps run at once (bounds the (k, R) arrays of a stretch).
PLAIN_STEPS_MAX = 4096


class Replica:
    """A decode serving instance: continuous batching, FCFS admission, paged KV (one SimPy process).

    Args (keyword-only):
        env: the SimPy environment.
        config: this replica's :class:`~specsim.engine.state.ReplicaConfig`.
        hooks: the policy's hooks (:func:`specsim.policies.base.policy_hooks`).
        profile: the target's step-time profile.
        drafter_cost: the drafter's cost model.
        draws: the run's draw source (:func:`specsim.engine.draws.row_draws`): a request's drafts' confidences and
            hidden outcomes at an anchor (None when gamma is 0).
        workload: the read-only per-request inputs.
        records: the run's record sink.
        on_done: ``on_done(ids, now_s)`` when requests complete.
        lazy_kv: allow lazy KV accounting (False: exact every step; for tests).
        horizon_s: the run's horizon, simulated seconds (None: none); no step is run ahead past it.
        alone: the cluster's only replica (no other process records steps): a stretch of plain steps may then end
            with a step that runs past the next event (which cannot see or change a planned step).
    """

    def __init__(self, *, env: simpy.Environment, config: ReplicaConfig, hooks, profile,
                 drafter_cost, draws, workload: Workload, records: Records,
                 on_done: Callable[[np.ndarray, float], None], lazy_kv: bool = True,
                 horizon_s: float | None = None, alone: bool = False) -> None:
        self.env, self.config, self.index = env, config, config.index
        self.horizon_s = float("inf") if horizon_s is None else float(horizon_s)
        self.alone = alone
        if config.gamma == 0:
            kernels.load_plain_kernels()            # plain stretches run only without drafts
        self.slots = Slots.empty(config.gamma)
        self.kv = KVManager(config, lazy=lazy_kv)
        policy = PolicyCalls(hooks, self.slots, workload, profile, drafter_cost)
        self.scheduler = Scheduler(config=config, slots=self.slots, kv=self.kv, policy=policy, draws=draws,
                                   workload=workload, records=records, on_done=on_done)
        self.runner = StepRunner(config=config, slots=self.slots, kv=self.kv, fits_zos=hooks.fits_zos,
                                 profile=profile, drafter_cost=drafter_cost, workload=workload, records=records)
        self._idle: simpy.Event | None = None
        self.process = env.process(self.run())

    # ----------------------------------------------------------------- arrivals
    def enqueue(self, idx: int, first_token_s: float = float("nan")) -> None:
        """A request joins this replica's FCFS queue (``first_token_s``: when a prefill instance emitted its
        first token; NaN when this replica emits it)."""
        self.scheduler.enqueue(idx, first_token_s)
        if self._idle is not None and not self._idle.triggered:
            self._idle.succeed()

    @property
    def num_outstanding(self) -> int:
        """Queued plus running requests (for the least-outstanding router)."""
        return len(self.scheduler.queue) + self.slots.size

    @property
    def pool(self):
        """The replica's KV :class:`~specsim.engine.kv.BlockPool` (read only: the KV manager changes it)."""
        return self.kv.pool

    # ----------------------------------------------------------------- the process
    def run(self):
        """Serve forever (the SimPy process): schedule -> run (the step's time elapses) -> postprocess; sleep while
        there is no work. Without drafts, a stretch of plain steps runs at once (:meth:`_serve_plain`); with
        drafts, steps that end before any other event run without a SimPy event each (:meth:`_serve_drafting`)."""
        return self._serve_plain() if self.config.gamma == 0 else self._serve_drafting()

    def _serve_plain(self):
        while True:
            stretch_end = self._plain_steps()
            if stretch_end is not None:
                end_s, finished = stretch_end
                yield self.env.timeout(end_s - self.env.now)
                if finished:                            # its last step finished requests: they leave now
                    self.scheduler.release_finished(self.env.now)
                continue
            plan = self.scheduler.schedule(self.env.now)
            if plan is None:
                yield from self._sleep()
                continue
            yield self.env.timeout(self.runner.step_time_s(plan))
            outcome = self.runner.finish(plan, self.env.now)
            self.scheduler.postprocess(plan, outcome, self.env.now)

    def _serve_drafting(self):
        """The loop of a replica with drafts, keeping its own clock ``now`` (the end of its last step, never behind
        SimPy's). A step that ends before the next other event (``env.peek()``) and the horizon, at a time SimPy
        would reach exactly from its clock, is finished at once: nothing else can happen before it ends, and none
        of the step's work reads SimPy's clock, so every number is that of one event per step. Whatever another
        process may see (a release tells the cluster, a sleep waits for it, a step in flight) waits for SimPy's
        clock to catch up: one event to ``now``, which is exact by that check."""
        now = self.env.now
        while True:
            plan = self.scheduler.schedule(now)
            if plan is None:
                yield from self._catch_up(now)
                yield from self._sleep()
                now = self.env.now
                continue
            dt = self.runner.step_time_s(plan)
            end = now + dt
            if not self._ahead(end):
                yield from self._catch_up(now)
                yield self.env.timeout(dt)              # SimPy's now + dt: end, as computed above
            outcome = self.runner.finish(plan, end)
            if self.scheduler.may_release(plan, outcome):            # requests may leave: the cluster is told
                yield from self._catch_up(end)
            self.scheduler.postprocess(plan, outcome, end)
            now = end

    def _ahead(self, end_s: float) -> bool:
        """Whether a step ending at ``end_s`` may finish before SimPy's clock gets there (:meth:`_serve_drafting`)."""
        now = self.env.now
        return bool(end_s < self.env.peek() and end_s <= self.horizon_s and now + (end_s - now) == end_s)

    def _catch_up(self, now_s: float):
        """Bring SimPy's clock to the replica's own (``now_s``, reached exactly: :meth:`_ahead`)."""
        if now_s != self.env.now:
            yield self.env.timeout(now_s - self.env.now)

    def _sleep(self):
        """Wait until a request joins the queue (:meth:`enqueue`)."""
        self._idle = self.env.event()
        yield self._idle
        self._idle = None

    def _plain_steps(self) -> tuple[float, bool] | None:
        """Run the plain steps ahead (:meth:`Scheduler.plain_steps_ahead`) that start before the next other event
        (``env.peek()``) and end before it (a replica that is ``alone``: before the horizon; its last step may
        straddle the event) and the horizon; returns (when the last one ends, whether it finished requests, which
        leave then), None when there is none.

        Nothing else happens before the next event, and a plain step depends only on what held when it started,
        so running them at once changes no number: each step is priced, recorded and accounted as one by one (the
        step times are added in the same order, and the returned end is reached exactly: a stretch whose end the
        event loop's ``now + (end - now)`` would not reproduce bit for bit is shortened to its first steps). An
        event during the last step sees the replica's slots a step ahead, which none reads; only another replica's
        step record would see the order change, hence ``alone``."""
        stretch = self.scheduler.plain_steps_ahead(PLAIN_STEPS_MAX)
        if stretch is None:
            return None
        now, next_s = self.env.now, self.env.peek()
        end_by_s = self.horizon_s if self.alone else min(next_s, self.horizon_s)
        start_s, end_s = self.runner.plain_step_ends(now, next_s, end_by_s, stretch)
        kv = self.kv.plain_steps(self.slots, stretch.decode, end_s.size)     # stops before a preemption
        k = kv.used.size
        while k and now + (float(end_s[k - 1]) - now) != float(end_s[k - 1]):
            k -= 1
        if not k:
            return None
        self.kv.apply_plain_steps(self.slots, stretch.decode, kv, k)
        self.runner.finish_plain(start_s[:k], end_s[:k], stretch, kv.used[:k], step=self.scheduler.step_index,
                                 num_waiting=len(self.scheduler.queue))
        self.scheduler.skip_plain_steps(k)
        return float(end_s[k - 1]), k == stretch.finish_step

    def report_running(self) -> None:
        """Give the records every running request's counters (at the end of a run with a horizon)."""
        self.scheduler.report_running()
