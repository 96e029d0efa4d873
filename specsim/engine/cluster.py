"""The serving cluster: arrivals (open or closed loop), request overheads, prefill, routers, decode replicas.

Data flows one way: :func:`specsim.simulation.simulate` builds a :class:`Cluster`, runs it, and hands its
:class:`~specsim.engine.records.Records` to :mod:`specsim.analysis.metrics`. Replicas never see the cluster: they get their
inputs and a completion callback.

* Open loop: requests arrive at the trace's ``arrival_s`` (divided by ``rate_scale``).
* Closed loop (``concurrency=N``): N users across the whole cluster; each issues the next trace request as soon
  as its previous one completes (no think time).
* Request overhead: ``engine.request_overhead_s`` (API server, tokenisation) passes before the request reaches a
  prefill instance or a replica's queue; it counts in TTFT.
* Prefill ``disaggregated``: a pool of ``prefill.num_instances`` instances, one request at a time each, FCFS
  over the pool (any free instance) or, with the ``prefix-aware`` router, on the instance holding the longest
  cached prefix of the request (ties: fewest outstanding requests, then lowest index). Each instance keeps its
  own prefix cache; a request's cached prompt tokens skip prefill compute. The prefill emits the first output
  token (``prefill.first_token = prefill``, the default), then the router sends the request to a decode
  replica (whose own cache shares the transferred prefix blocks); with ``decode-step`` the decode replica's
  first step that includes it recomputes the last prompt token and emits the first output token (vLLM's
  KV-connector path: docs/memory.md, "TTFT under disaggregation"). A request preempted on its decode replica re-prefills there, in chunks inside its steps.
  ``colocated``: the router sends the request at arrival and the replica prefills it in chunks.
* Prefill time: ``prefill.time_per_token_s * tokens`` when set, else the profile's step time of a step with
  prefill (its eager table where it has one, one request) summed over ``prefill.chunk_tokens``-token chunks,
  plus the profile's prefill attention of each chunk over the tokens before it.
* Routers: ``round-robin``, ``least-outstanding`` (queued + running), ``prefix-aware`` (longest cached prefix,
  ties by outstanding requests, among the instances within a load guard of the least loaded: :data:`BALANCE_ABS`).
* A request whose prompt + output tokens need more KV blocks than a replica has, or exceed the model's context
  window (``ClusterRuntime.context_reasons``, decided by specsim.hardware.context), can never be served: it is
  counted ``unservable`` at arrival with its reason and never blocks the requests behind it.
* Conversation sessions (:mod:`specsim.engine.sessions`): a later turn is issued ``think_s`` after the previous
  turn completes (in open loop by a process per session, in closed loop by the user running the session), and
  the previous turn's whole context (prompt + output full blocks) stays cached, evictable, in the decode
  replica that served it and, disaggregated, in the prefill instance that prefilled it (an assumption: a KV
  store such as Mooncake's keeps the conversation reachable from prefill). A closed-loop user takes the next
  session's first turn; the window closes when the last session starts.
"""

from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import simpy

from specsim.acceptance.model import AcceptanceModel
from specsim.engine.draws import row_draws
from specsim.engine.replica import Replica, ReplicaConfig
from specsim.engine.kv import BlockPool
from specsim.engine.kv_manager import cache_context, cache_prefilled_prompt
from specsim.engine.records import Records
from specsim.engine.sessions import Sessions
from specsim.engine.workload import Workload


@dataclass
class ClosedLoopWindow:
    """The measurement window of a closed-loop run: [start_s, end_s] (see specsim.analysis.metrics)."""

    start_s: float
    end_s: float


@dataclass(frozen=True)
class ClusterRuntime:
    """What the cluster needs beyond its replicas' configs (resolved once per run: :meth:`specsim.run_config.ResolvedRun.cluster_runtime`).

    Attributes:
        replicas: one :class:`~specsim.engine.replica.ReplicaConfig` per decode replica.
        kv_capacity_tokens: a replica's KV capacity as configured, tokens (``num_blocks`` is it floored to blocks).
        router: ``round-robin``, ``least-outstanding`` or ``prefix-aware``.
        colocated: chunked prefill inside the replicas (else a disaggregated prefill pool).
        num_prefill_instances: the pool's size (disaggregated).
        prefill_time_per_token_s: fixed prefill seconds per token, or None to use the profile.
        prefill_chunk_tokens: chunk size for the profile-based prefill time.
        request_overhead_s: fixed seconds per request before it reaches the scheduler.
        decode_first_token: disaggregated: the first token comes from the decode replica's first step (scenario
            ``prefill.first_token = decode-step``), else at the end of prefill.
        seed: the run seed (request r's draws come from its own counter-based stream, specsim.engine.draws).
        context_reasons: request index -> why it exceeds the model's context window (unservable at arrival).
    """

    replicas: tuple[ReplicaConfig, ...]
    kv_capacity_tokens: int
    router: str
    colocated: bool
    num_prefill_instances: int
    prefill_time_per_token_s: float | None
    prefill_chunk_tokens: int
    request_overhead_s: float
    seed: int
    context_reasons: Mapping[int, str] = field(default_factory=dict)
    decode_first_token: bool = False


#: Most (prompt tokens, cached tokens) pairs whose prefill seconds a cluster keeps (cleared when full).
PREFILL_MEMO_MAX = 1 << 16
_EAGER: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()      # profile -> its eager step seconds kept
_EAGER_LAST: list = [lambda: None, None]                               # (weak reference to the last profile, ditto)


def _eager_memo(profile) -> dict:
    """The eager step seconds kept for ``profile``: a profile is immutable, so its prices are kept while it lives (a
    run prices the same few prefill chunks again and again)."""
    if _EAGER_LAST[0]() is profile:
        return _EAGER_LAST[1]
    try:
        memo = _EAGER.setdefault(profile, {})
    except TypeError:                                   # (a profile object without weak references: nothing kept)
        return {}
    _EAGER_LAST[:] = [weakref.ref(profile), memo]
    return memo


def eager_step_s(profile, tokens: int) -> float:
    """``profile.mixed_step_time(tokens, 0.0, 1)``: one request's prefill step of ``tokens`` tokens (kept)."""
    memo = _eager_memo(profile)
    got = memo.get(tokens)
    if got is None:
        got = memo[tokens] = profile.mixed_step_time(tokens, 0.0, 1)
    return got


def eager_chunks_s(profile, chunk: int) -> np.ndarray:
    """(chunk + 1,) seconds of one request's prefill step of ``chunk`` tokens ([0]) and of 1 .. chunk tokens ([1:]),
    priced in one array whose largest size is ``chunk``, as a prompt of several chunks prices its full chunks and its
    last one together (``profile.mixed_step_time`` prices each size of an array alone, on the table its largest size
    selects: the same seconds as the pair [chunk, last]); kept, read-only."""
    memo = _eager_memo(profile)
    got = memo.get(("chunks", chunk))
    if got is None:
        sizes = np.arange(chunk + 1)
        sizes[0] = chunk
        got = memo["chunks", chunk] = profile.mixed_step_time(sizes, 0.0, 1)
        got.setflags(write=False)
    return got


#: The prefix-aware router's load guard (our choice, in the spirit of SGLang's cache-aware router, which falls
#: back to load balancing when workers are imbalanced): only instances whose outstanding requests are at most
#: max(least + BALANCE_ABS, BALANCE_REL x least) compete on their cached prefix. Without it a trace whose requests
#: all share a first block (Mooncake's) sends everything to one replica.
BALANCE_ABS, BALANCE_REL = 8, 1.5


def balanced(instances: list, load) -> list:
    """The ``instances`` whose ``load(i)`` is within the guard above of the least loaded one's."""
    least = min(load(i) for i in instances)
    bound = max(least + BALANCE_ABS, BALANCE_REL * least)
    return [i for i in instances if load(i) <= bound]


class PrefillInstance:
    """One disaggregated prefill instance: its index, its own prefix cache, its outstanding requests."""

    def __init__(self, index: int, num_blocks: int, prefix_caching: bool) -> None:
        self.index = index
        self.name = f"prefill{index}"
        self.pool = BlockPool(num_blocks, prefix_caching)
        self.outstanding = 0


class Cluster:
    """Router, prefill and decode replicas for one simulation run (one SimPy environment).

    Args:
        trace: the workload's trace (a :class:`specsim.workload.trace.Trace`).
        config: the resolved :class:`ClusterRuntime`.
        make_hooks: zero-argument callable returning a fresh policy's hooks per replica.
        acceptance: the acceptance model (None when gamma is 0).
        profile: the replicas' step-time profile.
        drafter_cost: the drafter's cost model.
        record_step_log: keep per (step, request) rows (the specsim.acceptance.steplog format).
        horizon_s: the run's horizon, simulated seconds (None: none); replicas run no step ahead past it.
    """

    def __init__(self, trace, config: ClusterRuntime, make_hooks, acceptance: AcceptanceModel | None, profile,
                 drafter_cost, record_step_log: bool = False, horizon_s: float | None = None) -> None:
        self.env = simpy.Environment()
        self.trace, self.config, self.acceptance, self.profile = trace, config, acceptance, profile
        first = config.replicas[0]
        self.workload = Workload.from_trace(trace, first.block_size)
        self.records = Records(len(trace), record_step_log)
        self.num_blocks, self.state_blocks = first.num_blocks, first.state_blocks
        self.kv_capacity_tokens = config.kv_capacity_tokens
        draws = row_draws(acceptance, config.seed, self.workload.domain, self.workload.output) if acceptance else None
        self.replicas = [Replica(env=self.env, config=rc, hooks=make_hooks(), profile=profile,
                                 drafter_cost=drafter_cost, draws=draws, workload=self.workload, records=self.records,
                                 on_done=self.on_complete, horizon_s=horizon_s, alone=len(config.replicas) == 1)
                         for rc in config.replicas]
        self.prefill_instances = [PrefillInstance(i, first.num_blocks, first.prefix_caching)
                                  for i in range(config.num_prefill_instances)]
        # prefill queues, FCFS: one shared by the pool (any free instance serves its head), or one per instance
        # when the prefix-aware router picks the instance; each queue's free instances wait beside it
        self._per_instance = config.router == "prefix-aware" and len(self.prefill_instances) > 1
        queues = len(self.prefill_instances) if self._per_instance else 1
        self._prefill_waiting: list[deque[int]] = [deque() for _ in range(queues)]
        self._prefill_free: list[deque[PrefillInstance]] = (
            [deque([inst]) for inst in self.prefill_instances] if self._per_instance
            else [deque(self.prefill_instances)])
        self._rr, self._prefill_s = 0, {}         # the round-robin turn; prefill_time_s by (tokens, cached tokens)
        self.in_system, self._area, self._last_t = 0, 0.0, 0.0      # Little's-law integral
        self._done_events: dict[int, simpy.Event] = {}
        self.sessions = Sessions.from_trace(trace, self.workload)
        self._prefilled_on: dict[int, PrefillInstance] = {}          # sessions: where a turn was prefilled

    # ----------------------------------------------------------------- request lifecycle
    def arrive(self, idx: int, notify: bool = True) -> simpy.Event | None:
        """Request ``idx`` enters the system now; returns an event that fires when it leaves (``notify``; None
        without: an open loop waits for no request, and an event nobody waits on would still take a place in
        the event queue at the request's end, where a replica's plain stretch then cannot start)."""
        rec = self.records
        rec.request_arrived(idx, self.env.now)
        done = self.env.event() if notify else None
        why = self._unservable(idx)
        if why is not None:
            rec.request_unservable(idx, why)
            if done is not None:
                done.succeed()
            return done
        self._count(+1)
        if done is not None:
            self._done_events[idx] = done
        if self.config.request_overhead_s > 0:
            self.env.timeout(self.config.request_overhead_s).callbacks.append(lambda _ev: self._enter(idx))
        else:
            self._enter(idx)
        return done

    def _unservable(self, idx: int) -> str | None:
        """Why request ``idx`` can never be served (beyond the context window, or more KV blocks than a replica
        has), or None."""
        if idx in self.config.context_reasons:
            return self.config.context_reasons[idx]
        w = self.workload
        need = int(w.blocks_needed[idx]) + self.state_blocks
        if need > self.num_blocks:
            tokens = int(w.prompt[idx] + w.output[idx])
            held = f" + {self.state_blocks} blocks of linear-attention state" if self.state_blocks else ""
            return (f"needs {need} KV blocks (prompt + output = {tokens} tokens in blocks of {w.block_size}{held}) "
                    f"> the {self.num_blocks} blocks of the replica's KV capacity ({self.kv_capacity_tokens:,} tokens)")
        return None

    def _enter(self, idx: int) -> None:
        """After its fixed overhead the request reaches prefill (disaggregated) or a replica (colocated)."""
        self.records.request_queued(idx, self.env.now)
        if self.config.colocated:
            self.route(idx)
        else:
            self._prefill(idx)

    def _prefill(self, idx: int) -> None:
        """Request ``idx`` joins its prefill queue (the pool's, or the instance the router picks), and starts at
        once when an instance of that queue is free."""
        chosen = self._pick_prefill(idx)
        if chosen is not None:
            chosen.outstanding += 1                     # picked instances count their queue as outstanding
        queue = 0 if chosen is None else chosen.index
        if self._prefill_free[queue]:
            self._start_prefill(self._prefill_free[queue].popleft(), idx)
        else:
            self._prefill_waiting[queue].append(idx)

    def _start_prefill(self, inst: PrefillInstance, idx: int) -> None:
        """``inst`` prefills request ``idx`` now; its completion is one timeout (no process per request)."""
        if not self._per_instance:
            inst.outstanding += 1
        self.records.prefill_started(idx, self.env.now)
        dt = self._prefill_with_cache(inst, idx)
        self.env.timeout(dt).callbacks.append(lambda _ev: self._prefill_done(inst, idx, dt))

    def _prefill_done(self, inst: PrefillInstance, idx: int, dt: float) -> None:
        """``inst`` finished request ``idx`` (``dt`` seconds): cache its prompt, emit or route its first token, then
        take the next request of its queue or wait free."""
        cache_prefilled_prompt(inst.pool, self.workload.prefix_keys(idx))
        if self.sessions is not None:
            self._prefilled_on[idx] = inst
        inst.outstanding -= 1
        self.first_token(idx, dt)
        queue = inst.index if self._per_instance else 0
        if self._prefill_waiting[queue]:
            self._start_prefill(inst, self._prefill_waiting[queue].popleft())
        else:
            self._prefill_free[queue].append(inst)

    def _prefill_with_cache(self, inst: PrefillInstance, idx: int) -> float:
        """Seconds to prefill request ``idx`` on ``inst``, skipping its cached prefix (at least 1 token computed)."""
        prompt, bs = int(self.workload.prompt[idx]), self.workload.block_size
        hit = min(inst.pool.match(self.workload.prefix_keys(idx)), (prompt - 1) // bs) * bs
        self.records.prefix_lookup(inst.name, idx, hit, prompt)
        key = (prompt - hit, hit)                   # a pure function of the two: kept, as prompt lengths repeat
        dt = self._prefill_s.get(key)
        if dt is None:
            if len(self._prefill_s) >= PREFILL_MEMO_MAX:
                self._prefill_s.clear()
            dt = self._prefill_s[key] = self.prefill_time_s(prompt - hit, hit)
        return dt

    def prefill_time_s(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        """Seconds to prefill ``prompt_tokens`` tokens after ``cached_tokens`` cached ones (module docstring rule)."""
        c = self.config
        if c.prefill_time_per_token_s:
            return c.prefill_time_per_token_s * prompt_tokens
        chunk = min(c.prefill_chunk_tokens, self.profile.batch_limit or c.prefill_chunk_tokens)  # beyond if extrapolating
        prof = self.profile
        if prompt_tokens <= chunk:                          # one chunk: the same sums, on scalars
            return float(eager_step_s(prof, prompt_tokens) + prof.prefill_attention_s(prompt_tokens, cached_tokens))
        full, rest = divmod(prompt_tokens, chunk)
        table = eager_chunks_s(prof, chunk)
        each = table[0], table[rest or chunk]               # one request per step, eager;
        times = np.full(full + (rest > 0), each[0])        # the table is chosen by the largest chunk, as for all
        if rest:
            times[-1] = each[1]
        if not prof.charges_prefill_attention:
            return float(times.sum())
        sizes = np.full(times.size, chunk, dtype=np.int64)
        if rest:
            sizes[-1] = rest
        done = cached_tokens + chunk * np.arange(sizes.size)                 # tokens before each chunk
        return float(times.sum() + prof.prefill_attention_s(sizes, done))   # + each chunk's attention so far

    def first_token(self, idx: int, prefill_s: float) -> None:
        """A disaggregated prefill of ``prefill_s`` seconds finished. ``decode_first_token``: the request goes to
        decode, whose first step that includes it emits the first token the client sees (docs/memory.md, "TTFT
        under disaggregation"). Else the prefill emitted the first token now: the request completes or goes to
        decode (its replica learns when the token was emitted, for the next inter-token gap)."""
        now = self.env.now
        if self.config.decode_first_token:
            self.records.prefilled(idx, prefill_s)
            self.route(idx)
            return
        self.records.prefilled(idx, prefill_s, now)
        if self.workload.output[idx] <= 1:
            self.on_complete(np.array([idx]), now)
        else:
            self.route(idx, now)

    # ----------------------------------------------------------------- routing
    def route(self, idx: int, first_token_s: float = float("nan")) -> None:
        """Send a request to a decode replica by the configured router (``first_token_s``: when its prefill
        emitted the first token, NaN when the replica emits it)."""
        router = self.config.router
        if router == "round-robin":
            rep = self.replicas[self._rr % len(self.replicas)]
            self._rr += 1
        elif router == "least-outstanding":
            rep = min(self.replicas, key=lambda r: (r.num_outstanding, r.index))
        else:
            keys = self.workload.prefix_keys(idx)                    # computed once, matched per replica
            rep = min(balanced(self.replicas, lambda r: r.num_outstanding),
                      key=lambda r: (-r.pool.match(keys), r.num_outstanding, r.index))
        rep.enqueue(idx, first_token_s)

    def _pick_prefill(self, idx: int) -> PrefillInstance | None:
        """The prefill instance for ``idx`` under the prefix-aware router (None: any free one, FCFS)."""
        if self.config.router != "prefix-aware" or len(self.prefill_instances) == 1:
            return None
        keys = self.workload.prefix_keys(idx)
        return min(balanced(self.prefill_instances, lambda i: i.outstanding),
                   key=lambda i: (-i.pool.match(keys), i.outstanding, i.index))

    # ----------------------------------------------------------------- completion and bookkeeping
    def on_complete(self, ids: np.ndarray, now: float) -> None:
        """Requests ``ids`` finished at ``now``: record, and wake their closed-loop users."""
        self.records.requests_done(ids, now)
        for idx in ids.tolist():
            self._count(-1)
            if self.sessions is not None:
                self._keep_context(idx)
            done = self._done_events.pop(idx, None)
            if done is not None:
                done.succeed()

    def _keep_context(self, idx: int) -> None:
        """A session turn completed: its whole context stays cached where its next turn will look (module doc)."""
        keys = self.sessions.context_keys(idx)
        inst = self._prefilled_on.pop(idx, None)
        pools = [inst.pool] if inst is not None else []
        rep = int(self.records.replica[idx])
        pools += [self.replicas[rep].pool] if rep >= 0 else []
        for pool in pools:
            cache_context(pool, keys)

    def _chain(self, idx: int):
        """SimPy process: issue request ``idx``, then its session's later turns, each its think time after the
        previous one completes; ends when the last turn completes."""
        while idx >= 0:
            yield self.arrive(idx)
            idx, think = self.sessions.follow_up(idx) if self.sessions is not None else (-1, 0.0)
            if idx >= 0 and think > 0:
                yield self.env.timeout(think)

    def _count(self, delta: int) -> None:
        now = self.env.now
        self._area += self.in_system * (now - self._last_t)
        self._last_t = now
        self.in_system += delta

    def integrate_until(self, t: float) -> float:
        """Close the Little's-law integral at time ``t``; returns the area (request-seconds)."""
        self._area += self.in_system * (t - self._last_t)
        self._last_t = t
        return self._area

    # ----------------------------------------------------------------- drivers
    def open_loop(self, rate_scale: float):
        """SimPy process: issue every trace request at its arrival time / ``rate_scale`` (a session's later turns
        follow its first one, see :meth:`_chain`)."""
        arrivals = np.asarray(self.trace.arrival_s, np.float64) / rate_scale
        order = range(len(arrivals)) if self.sessions is None else self.sessions.starts.tolist()
        for idx in order:
            t = arrivals[idx]
            if t > self.env.now:
                yield self.env.timeout(t - self.env.now)
            if self.sessions is None:
                self.arrive(idx, notify=False)
            else:
                self.env.process(self._chain(idx))

    def closed_loop(self, concurrency: int, window: ClosedLoopWindow):
        """SimPy process: ``concurrency`` users issue the trace's requests (sessions) in order, each after its last."""
        order = list(range(len(self.trace))) if self.sessions is None else self.sessions.starts.tolist()
        n = len(order)
        next_idx = [0]
        first_done: list[float] = []

        def user():
            first = True
            while next_idx[0] < n:
                idx = order[next_idx[0]]
                next_idx[0] += 1
                if next_idx[0] == n:
                    window.end_s = self.env.now
                yield from self._chain(idx)
                if first:
                    first_done.append(self.env.now)
                    first = False
                    if len(first_done) == concurrency:
                        window.start_s = self.env.now

        for _ in range(concurrency):
            self.env.process(user())
        yield self.env.timeout(0)
