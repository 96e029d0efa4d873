"""The serving cluster: arrivals (open or closed loop), prefill, router, decode replicas (SimPy).

Data flows one way: a trace feeds :func:`simulate`, which builds a :class:`Cluster`, runs it, and hands
its per-request and per-step records to :mod:`specsim.metrics`.

* Open loop: requests arrive at the trace's ``arrival_s`` (divided by ``rate_scale``).
* Closed loop (``concurrency=N``): N users across the whole cluster; each issues the next trace request
  as soon as its previous one completes (no think time).
* Prefill ``disaggregated``: a prefill pool of ``num_instances`` instances (one request at a time each,
  FCFS) computes the prompt, emits the first output token, then the router sends the request to a decode
  replica. ``colocated``: the router sends the request at arrival and the replica prefills it in chunks
  inside its own steps.
* Prefill time: ``prefill.time_per_token_s * prompt`` when set, else the profile's step time summed
  over ``prefill.chunk_tokens``-token chunks of the prompt.
* A request whose prompt + output + gamma + 1 tokens exceed a replica's KV capacity can never be served:
  it is counted ``unservable`` at arrival with its reason and never blocks the requests behind it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import simpy

from specsim.acceptance import AcceptanceModel, RequestDraws
from specsim.engine import Replica, StepPlan
from specsim.errors import SpecsimInputError
from specsim.hardware.drafter import DrafterCost
from specsim.hardware.profile import StepTimeProfile
from specsim.scenario import Scenario

STEP_COLUMNS = ["replica", "step", "start_s", "duration_s", "num_running", "num_decode", "batch_tokens",
                "verified_drafts", "accepted_drafts", "emitted_tokens", "prefill_tokens", "capacity",
                "host_overhead_s"]


@dataclass
class ClosedLoopWindow:
    """The measurement window of a closed-loop run: [start_s, end_s] (see specsim.metrics)."""

    start_s: float
    end_s: float


class Cluster:
    """Router, prefill and decode replicas for one simulation run (one SimPy environment).

    Args:
        trace: the workload (a :class:`specsim.trace.Trace`).
        scenario: the resolved scenario.
        policy_factory: zero-argument callable returning a fresh policy object per replica.
        gamma: drafts per request per step for this run (0 for no drafter).
        acceptance: the acceptance model (None when gamma is 0).
        profile: the replicas' step-time profile.
        drafter_cost: the drafter's cost model.
        seed: the run seed; request r's draws come from SeedSequence([seed, r]).
        record_step_log: keep per (step, request) rows (the specsim.steplog format).
    """

    def __init__(self, trace, scenario: Scenario, policy_factory, gamma: int,
                 acceptance: AcceptanceModel | None, profile: StepTimeProfile, drafter_cost: DrafterCost,
                 seed: int, record_step_log: bool = False) -> None:
        self.env = simpy.Environment()
        self.trace = trace
        self.scenario = scenario
        self.gamma = gamma
        self.acceptance = acceptance
        self.profile = profile
        self.drafter_cost = drafter_cost
        self.seed = int(seed)
        self.record_step_log = record_step_log
        n = len(trace)
        self.prompt = np.asarray(trace.prompt_tokens, np.int64)
        self.output = np.asarray(trace.output_tokens, np.int64)
        self.domain = np.asarray(trace.domain, dtype=object)
        # per-request records (NaN / -1 until set)
        self.arrival_s = np.full(n, np.nan)
        self.prefill_start_s = np.full(n, np.nan)
        self.prefill_s = np.full(n, np.nan)
        self.first_token_s = np.full(n, np.nan)
        self.admitted_s = np.full(n, np.nan)
        self.done_s = np.full(n, np.nan)
        self.replica_of = np.full(n, -1, np.int64)
        self.unservable_reason: dict[int, str] = {}
        self.req_steps = np.zeros(n, np.int64)
        self.req_verified = np.zeros(n, np.int64)
        self.req_accepted = np.zeros(n, np.int64)
        self.issued = np.zeros(n, bool)
        self.num_clips = 0
        # per-step records
        self._steps: list[tuple] = []
        self._itl: list[np.ndarray] = []
        self._itl_end_s: list[float] = []                 # the step end time of each gap array
        self._log: list[tuple] = []
        # Little's law bookkeeping: integral of the number of requests in the system
        self.in_system = 0
        self._area = 0.0
        self._last_t = 0.0
        self._done_events: dict[int, simpy.Event] = {}
        sc = scenario
        self.colocated = sc.prefill.mode == "colocated"
        self.replicas = [Replica(self, i, policy_factory(), gamma, self.colocated)
                         for i in range(sc.cluster.num_replicas)]
        self._rr = 0
        self.prefill_pool = simpy.Resource(self.env, capacity=sc.prefill.num_instances)

    # ----------------------------------------------------------------- randomness
    def draw_request(self, idx: int) -> RequestDraws:
        """Everything request ``idx`` will need, from its own stream SeedSequence([seed, idx])."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, int(idx)]))
        return self.acceptance.draw_request(rng, self.domain[idx], int(self.output[idx]))

    # ----------------------------------------------------------------- bookkeeping
    def _count(self, delta: int) -> None:
        now = self.env.now
        self._area += self.in_system * (now - self._last_t)
        self._last_t = now
        self.in_system += delta

    def record_step(self, rep: Replica, plan: StepPlan, start: float, end: float, accepted: int) -> None:
        R = plan.num_decode
        self._steps.append((rep.index, rep.step_index, start, end - start, rep.ids.size, R, plan.batch_tokens,
                            plan.num_verified, accepted, accepted + R, plan.batch_tokens - R - plan.num_verified,
                            plan.capacity, rep.host_s if plan.batch_tokens else 0.0))

    def record_step_requests(self, rep: Replica, plan: StepPlan, start: float, end: float,
                             accepted: np.ndarray, gaps: np.ndarray) -> None:
        ids = rep.ids[plan.decode]
        self.req_steps[ids] += 1
        self.req_verified[ids] += plan.verify_len
        self.req_accepted[ids] += accepted
        self._itl.append(gaps)
        self._itl_end_s.append(end)
        if self.record_step_log:
            g = plan.gamma
            self._log.append((rep.step_index, rep.index, start, end - start, ids, g, plan.verify_len, accepted,
                              plan.conf_raw, plan.conf))

    # ----------------------------------------------------------------- request lifecycle
    def arrive(self, idx: int) -> simpy.Event:
        """Request ``idx`` enters the system now; returns an event that fires when it leaves."""
        now = self.env.now
        self.arrival_s[idx] = now
        self.issued[idx] = True
        done = self.env.event()
        need = int(self.prompt[idx] + self.output[idx] + self.gamma + 1)
        cap = self.scenario.cluster.kv_capacity_tokens
        if need > cap:
            self.unservable_reason[idx] = (f"needs {need} KV tokens (prompt + output + gamma + 1) "
                                           f"> kv_capacity_tokens {cap}")
            done.succeed()
            return done
        self._count(+1)
        self._done_events[idx] = done
        if self.colocated:
            self.route(idx)
        else:
            self.env.process(self._prefill(idx))
        return done

    def _prefill(self, idx: int):
        with self.prefill_pool.request() as slot:
            yield slot
            self.prefill_start_s[idx] = self.env.now
            dt = self.prefill_time_s(int(self.prompt[idx]))
            yield self.env.timeout(dt)
        self.prefill_s[idx] = dt
        self.on_first_token(np.array([idx]), self.env.now)
        if self.output[idx] <= 1:
            self.on_complete(np.array([idx]), self.env.now)
        else:
            self.route(idx)

    def prefill_time_s(self, prompt_tokens: int) -> float:
        """Seconds to prefill a prompt (module docstring rule)."""
        pf = self.scenario.prefill
        if pf.time_per_token_s is not None:
            return pf.time_per_token_s * prompt_tokens
        chunk = min(pf.chunk_tokens, self.profile.max_batch_tokens)
        full, rest = divmod(prompt_tokens, chunk)
        t = full * self.profile.step_time(chunk)
        if rest:
            t += self.profile.step_time(rest)
        return float(t)

    def route(self, idx: int) -> None:
        """Send a request to a decode replica (round-robin or least outstanding requests)."""
        if self.scenario.cluster.router == "round-robin":
            rep = self.replicas[self._rr % len(self.replicas)]
            self._rr += 1
        else:
            rep = min(self.replicas, key=lambda r: (r.num_outstanding, r.index))
        rep.enqueue(idx)

    def on_first_token(self, ids: np.ndarray, now: float) -> None:
        self.first_token_s[ids] = now
        if self.colocated:
            self.prefill_s[ids] = now - self.admitted_s[ids]

    def on_complete(self, ids: np.ndarray, now: float) -> None:
        self.done_s[ids] = now
        for idx in ids.tolist():
            self._count(-1)
            self._done_events.pop(idx).succeed()

    # ----------------------------------------------------------------- drivers
    def open_loop(self, rate_scale: float):
        arrivals = np.asarray(self.trace.arrival_s, np.float64) / rate_scale
        for idx, t in enumerate(arrivals):
            if t > self.env.now:
                yield self.env.timeout(t - self.env.now)
            self.arrive(idx)

    def closed_loop(self, concurrency: int, window: ClosedLoopWindow):
        n = len(self.trace)
        next_idx = [0]
        first_done: list[float] = []

        def user():
            first = True
            while next_idx[0] < n:
                idx = next_idx[0]
                next_idx[0] += 1
                if next_idx[0] == n:
                    window.end_s = self.env.now
                yield self.arrive(idx)
                if first:
                    first_done.append(self.env.now)
                    first = False
                    if len(first_done) == concurrency:
                        window.start_s = self.env.now

        for _ in range(concurrency):
            self.env.process(user())
        yield self.env.timeout(0)

    def integrate_until(self, t: float) -> float:
        """Close the Little's-law integral at time ``t``; returns the area (request-seconds)."""
        self._area += self.in_system * (t - self._last_t)
        self._last_t = t
        return self._area

    # ----------------------------------------------------------------- records
    def steps_frame(self) -> pd.DataFrame:
        return pd.DataFrame(self._steps, columns=STEP_COLUMNS)

    def itl_s(self, window: tuple[float, float] | None = None) -> np.ndarray:
        """(E,) inter-emission gaps in seconds; with a window, only emissions inside (start, end]."""
        if window is None:
            parts = self._itl
        else:
            parts = [g for g, t in zip(self._itl, self._itl_end_s) if window[0] < t <= window[1]]
        return np.concatenate(parts) if parts else np.zeros(0)

    def step_log_frame(self) -> pd.DataFrame:
        """Per (step, request) rows in the specsim.steplog format (columns built in one pass each)."""
        cols = ["step", "replica", "time_s", "step_time_s", "request_id", "domain", "gamma", "verify_len",
                "num_accepted", "conf_raw", "conf"]
        if not self._log:
            return pd.DataFrame({c: [] for c in cols})
        step, rep, start, dur, ids, g, l, a, cr, cc = zip(*self._log)
        counts = np.fromiter((x.size for x in ids), np.int64, len(ids))

        def per_row(values, dtype):                          # one value per step -> one per (step, request)
            return np.repeat(np.asarray(values, dtype), counts)

        ids_all = np.concatenate(ids)
        rid = np.asarray(self.trace.request_id, dtype=object)

        def conf_lists(blocks):                               # (R_s, gamma_s) blocks -> list<float64> column
            flat = np.concatenate([b.ravel() for b in blocks]).astype(np.float64)
            offsets = np.concatenate([[0], np.cumsum(np.repeat(np.asarray(g, np.int64), counts))])
            arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat))
            return pd.Series(arr.to_pandas(), copy=False)

        df = pd.DataFrame({
            "step": per_row(step, np.int64), "replica": per_row(rep, np.int64),
            "time_s": per_row(start, np.float64), "step_time_s": per_row(dur, np.float64),
            "request_id": pd.array(rid[ids_all], dtype="string"),
            "domain": pd.array(self.domain[ids_all], dtype="string"),
            "gamma": per_row(g, np.int64), "verify_len": np.concatenate(l).astype(np.int64),
            "num_accepted": np.concatenate(a).astype(np.int64),
        })
        df["conf_raw"] = conf_lists(cr)
        df["conf"] = conf_lists(cc)
        return df
