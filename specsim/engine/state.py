"""One replica's settings and its running requests' state (the arrays the scheduler, the KV manager and the
step runner share; DESIGN.md words).

:class:`ReplicaConfig` is resolved from the scenario by the cluster; :class:`Slots` holds one entry per running
request in admission order. Nothing here allocates KV blocks or runs a step.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, fields

import numpy as np


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
        state_blocks: blocks each running request holds from admission to release for a linear-attention
            model's recurrent state (:func:`specsim.hardware.kv_capacity.state_blocks_per_request`; 0 without).
        decode_first_token: disaggregated requests arrive with their prompt's KV only; their first step here
            recomputes the last prompt token and emits token 1 (scenario ``prefill.first_token = decode-step``).
        first_drafts_in_prefill: a speculating step drafts for the requests it prefills too, so a request's first
            drafts come in the step that ends its (re-)prefill (scenario ``engine.first_drafts = prefill-step``);
            else only decoding requests are drafted for.
        match_rate: the share of request-steps a lookup drafter proposes drafts in (1: every one; scenario
            ``drafter.match_rate``); a request without a match verifies none.
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
    decode_first_token: bool = False
    state_blocks: int = 0
    first_drafts_in_prefill: bool = True
    match_rate: float = 1.0


NO_SLOTS = np.zeros(0, np.int64)   # no slots (read-only: shared by every step that has none)
NO_SLOTS.setflags(write=False)


def at_slots(arr: np.ndarray, decode: np.ndarray) -> np.ndarray:
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
    ``decode_steps`` and the history for causal policies (flushed to the records when the request leaves or is
    preempted). :meth:`empty` makes the state of no running request.

    The arrays a scheduling view shows (``request``, ``prompt_tokens``, ``num_generated``, the history) are
    never written in place: an update replaces the array, so a view keeps them without copying.
    """

    request: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    num_generated: np.ndarray
    prefill_left: np.ndarray
    kv_blocks: np.ndarray
    kv_cached: np.ndarray
    draft_kv_blocks: np.ndarray
    draw_key: np.ndarray
    draw_base: np.ndarray
    decode_steps: np.ndarray
    drafts_verified: np.ndarray
    drafts_accepted: np.ndarray
    last_verify_len: np.ndarray
    last_accepted: np.ndarray
    last_emit_s: np.ndarray

    @classmethod
    def empty(cls, gamma: int) -> "Slots":
        """No running request: every array empty, int64 but for ``draw_key`` (uint64), ``draw_base`` (float64,
        (0, gamma)) and ``last_emit_s`` (float64)."""
        shape = {"draw_base": (0, gamma)}
        return cls(**{name: np.zeros(shape.get(name, 0), _DTYPES.get(name, np.int64)) for name in _SLOT_FIELDS})

    @property
    def size(self) -> int:
        """Number of running requests."""
        return self.request.size

    def append(self, rows: list) -> None:
        """Append one slot per :data:`SlotRow` of ``rows``, in order (each array replaced)."""
        d, n, k = self.__dict__, self.request.shape[0], len(rows)
        for name, values in zip(_SLOT_FIELDS, rows[0] if k == 1 else zip(*rows)):    # (field, its new values)
            old = d[name]
            new = np.empty((n + k,) + old.shape[1:], old.dtype)
            new[:n] = old
            if k == 1:                                  # (one item set: the common admission of one request)
                new[n] = values
            else:
                new[n:] = values
            d[name] = new

    def keep(self, mask: np.ndarray) -> None:
        """Keep the slots where ``mask`` (R,) is True, in order (each array replaced)."""
        d, kept = self.__dict__, mask.nonzero()[0]
        for name in _SLOT_FIELDS:
            d[name] = d[name].take(kept, axis=0)

    def drop(self, slots: np.ndarray) -> None:
        """Remove ``slots`` (distinct slot indices), keeping the others in order."""
        mask = np.empty(self.request.shape[0], bool)
        mask.fill(True)
        mask[slots] = False
        self.keep(mask)

    def row(self, slot: int) -> dict[str, object]:
        """One slot's values as a dict (for parking a preempted request)."""
        return {name: self.__dict__[name][slot] for name in _SLOT_FIELDS}


_SLOT_FIELDS = tuple(f.name for f in fields(Slots))
#: One slot's values of every :class:`Slots` field, in field order (an admission: :meth:`Slots.append`).
SlotRow = namedtuple("SlotRow", _SLOT_FIELDS)
_DTYPES = {"draw_key": np.uint64, "draw_base": np.float64, "last_emit_s": np.float64}   # else int64
