"""Conversation sessions in the cluster: who follows whom, after what think time, and the context a turn leaves.

A trace with session fields (:mod:`specsim.workload.extra`) chains each turn k >= 1 of a session to turn k-1:
the cluster issues it ``think_s`` seconds after turn k-1 completes (open and closed loop alike; its trace
``arrival_s`` is only the file's order), and when turn k-1 completes its whole context (prompt and output
tokens, full KV blocks) stays in the prefix cache, evictable, so turn k's prompt, which starts with that
context, hits it. This follows vLLM's automatic prefix caching, which keeps a finished request's full blocks
(generated ones included) cached until evicted; specsim otherwise keeps only the shareable prompt blocks.

The context's cache keys come from turn k's ``hash_ids`` (the chain of the conversation's blocks, which covers
turn k-1's context): :func:`specsim.engine.kv.prefix_block_keys` of (prompt + output) tokens of turn k-1 over
that chain, so they equal the keys of turn k's leading blocks by construction.
"""

from __future__ import annotations

import numpy as np

from specsim.engine.kv import prefix_block_keys


class Sessions:
    """Follow-up turns of a trace (read-only), built by :meth:`from_trace`.

    Attributes:
        next_turn: (N,) int64 index of the request's next turn, -1 for none.
        think_s: (N,) float64 think time before each request (0 for a session's first turn).
        starts: (S,) int64 indices of the requests that are not follow-ups, in trace order.
    """

    def __init__(self, next_turn: np.ndarray, think_s: np.ndarray, trace, workload) -> None:
        self.next_turn, self.think_s, self.trace, self.workload = next_turn, think_s, trace, workload
        follows = np.zeros(next_turn.size, bool)
        follows[next_turn[next_turn >= 0]] = True
        self.starts = np.flatnonzero(~follows)

    @classmethod
    def from_trace(cls, trace, workload) -> "Sessions | None":
        """The sessions of ``trace`` (None when it has no session fields)."""
        extra = getattr(trace, "extra", None) or {}
        if "session_id" not in extra:
            return None
        sid, n = extra["session_id"], len(extra["session_id"])
        nxt, last = np.full(n, -1, np.int64), {}
        for i, s in enumerate(sid.tolist()):
            if s is not None:
                if s in last:
                    nxt[last[s]] = i
                last[s] = i
        think = np.nan_to_num(np.asarray(extra["think_s"], np.float64), nan=0.0)
        return cls(nxt, think, trace, workload)

    def follow_up(self, idx: int) -> tuple[int, float]:
        """(next turn's index or -1, its think time in seconds)."""
        j = int(self.next_turn[idx])
        return j, float(self.think_s[j]) if j >= 0 else 0.0

    def context_keys(self, idx: int) -> tuple[int, ...]:
        """Cache keys of request ``idx``'s completed context (prompt + output full blocks); () without a next turn."""
        j = int(self.next_turn[idx])
        hash_ids = getattr(self.trace, "hash_ids", None)
        if j < 0 or hash_ids is None or not hash_ids[j]:
            return ()
        w = self.workload
        tokens = int(w.prompt[idx] + w.output[idx])
        return prefix_block_keys(tokens, w.block_size, hash_ids=hash_ids[j],
                                 hash_block_tokens=int(self.trace.hash_block_tokens[j]))

