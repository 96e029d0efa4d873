"""The read-only per-request inputs of a run, taken from a trace once (prompt and output lengths, domains,
prefix-cache keys), shared by the cluster and the replicas."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from specsim.engine.kv import blocks_for, prefix_block_keys


@dataclass(frozen=True, eq=False)
class Workload:
    """Per-request inputs, arrays indexed by trace position (read-only).

    Args:
        prompt: (N,) int64 prompt tokens.
        output: (N,) int64 output tokens.
        domain: (N,) object domain names.
        block_size: KV block size in tokens (the prefix keys are per block).
        trace: the trace (its optional ``hash_ids`` / ``prefix_group`` columns give the prefix keys).
    """

    prompt: np.ndarray
    output: np.ndarray
    domain: np.ndarray
    block_size: int
    trace: object = None

    @classmethod
    def from_trace(cls, trace, block_size: int) -> "Workload":
        """Build from a :class:`specsim.workload.trace.Trace` (arrays copied, read-only)."""
        arrays = [np.array(trace.prompt_tokens, np.int64), np.array(trace.output_tokens, np.int64),
                  np.array(trace.domain, dtype=object)]
        for a in arrays:
            a.setflags(write=False)
        return cls(*arrays, block_size=block_size, trace=trace)

    @cached_property
    def blocks_needed(self) -> np.ndarray:
        """(N,) KV blocks each request's prompt + output tokens fill (read-only)."""
        need = blocks_for(self.prompt + self.output, self.block_size)
        need.setflags(write=False)
        return need

    @cached_property
    def _keyed(self) -> bool:
        """Whether the trace says which prompt blocks are shared (``hash_ids`` or ``prefix_group``)."""
        return any(getattr(self.trace, name, None) is not None for name in ("hash_ids", "prefix_group"))

    def prefix_keys(self, idx: int) -> tuple[int, ...]:
        """Cache keys of request ``idx``'s shareable full prompt blocks (empty when none; computed each call,
        so that long traces keep no per-block state)."""
        if not self._keyed:
            return ()
        t = self.trace
        hash_ids = getattr(t, "hash_ids", None)
        groups = getattr(t, "prefix_group", None)
        kw = {}
        if hash_ids is not None and hash_ids[idx]:
            kw = dict(hash_ids=hash_ids[idx], hash_block_tokens=int(t.hash_block_tokens[idx]))
        elif groups is not None and groups[idx] is not None:
            kw = dict(prefix_group=groups[idx], prefix_tokens=int(t.prefix_tokens[idx]))
        return prefix_block_keys(int(self.prompt[idx]), self.block_size, **kw) if kw else ()
