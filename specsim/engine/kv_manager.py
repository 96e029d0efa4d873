"""Every KV-block rule of a replica in one class, the only code that changes a :class:`~specsim.engine.kv.BlockPool`.

The rules follow vLLM (V1) (docs/memory.md, DESIGN.md): a request holding T tokens of KV holds
ceil(T / block_size) blocks.

* base need: a decode-ready request needs blocks for prompt + generated + 1 tokens (:meth:`KVManager.fit_base_need`;
  last step's unused lookahead returns to the pool);
* admission: ``paged`` takes the prompt's blocks (+ generated + 1) minus prefix-cache hits; ``reserve`` takes
  prompt + output tokens up front and never preempts (:meth:`KVManager.admit`);
* recurrent state: a linear-attention model's request holds ``state_blocks`` more blocks from admission to
  release (its per-request state, vLLM's mamba blocks; none for an attention-only model);
* drafter room: a drafting request's drafter holds ``drafter_kv_fraction`` blocks per target token, FCFS
  (:meth:`KVManager.reserve_draft_room`);
* lookahead: a step verifying l drafts needs prompt + generated + l + 1 tokens (the policy's verify length + 1,
  not gamma + 1: the target writes KV only for the tokens it verifies), FCFS; a request that does not fit
  verifies fewer (:meth:`KVManager.reserve_lookahead`).

Lazy accounting: while the free blocks cover ``max_num_seqs`` requests' largest growth per step
(:attr:`KVManager.growth_bound`) on top of what earlier lazy steps may have used, a step skips the per-request
block arithmetic (it would grant everything); the first step where that no longer holds, or an admission that
does not fit the lazy margin, switches to exact accounting and brings every holding up to date. Decisions are
the same as with exact accounting every step (tests/test_memory.py checks it).

Which request gives way when blocks run out (preemption) is the scheduler's choice, not this module's.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from specsim.engine import kernels
from specsim.engine.kv import BlockPool, blocks_for
from specsim.engine.state import ReplicaConfig, Slots


class Admission(NamedTuple):
    """Blocks an admitted request now holds: ``blocks`` in all (cached hits included), ``hit_blocks`` of them
    shared prefix-cache hits."""

    blocks: int
    hit_blocks: int


class PlainKV(NamedTuple):
    """The KV accounting of plain steps (:meth:`KVManager.plain_steps`), (n,) int64 each: the blocks in use each
    step reports, what lazy accounting owes after it, the blocks taken (net) up to it, the latest exact step up to
    it (-1: none)."""

    used: np.ndarray
    owed: np.ndarray
    taken: np.ndarray
    last_exact: np.ndarray


class Lookahead(NamedTuple):
    """Verify lengths after the KV lookahead ((R,) ints) and how many requests it shortened."""

    verify_len: np.ndarray
    num_kv_clipped: int


def base_tokens(s: Slots) -> np.ndarray:
    """(R,) tokens each slot needs in KV to decode one more token: prompt + generated + 1."""
    return s.prompt_tokens + s.num_generated + 1


def cache_prefilled_prompt(pool: BlockPool, keys: tuple[int, ...]) -> None:
    """A prefill instance's cache keeps a request's shareable prompt blocks ``keys`` (evictable once it leaves)."""
    if not keys or not pool.prefix_caching:
        return
    hit = pool.match(keys)
    pool.acquire_cached(keys[:hit])
    pool.take(len(keys) - hit)
    new = pool.publish(keys[hit:])
    pool.drop_cached(keys[:hit] + new)
    pool.release(len(keys) - hit - len(new))


def cache_context(pool: BlockPool, keys: tuple[int, ...]) -> int:
    """A finished conversation turn's whole context ``keys`` (prompt + output full blocks) stays cached, evictable,
    for its next turn (:mod:`specsim.engine.sessions`); returns the number of keys kept.

    Keys already cached are refreshed; blocks for the missing ones are taken (evicting least recently freed cached
    blocks when no free one is left) as far as blocks are available, and the keys after the first that does not
    fit are not kept (a prefix stays a prefix). As vLLM's prefix caching keeps a finished request's full blocks.
    """
    if not keys or not pool.prefix_caching:
        return 0
    hit = pool.match(keys)
    pool.acquire_cached(keys[:hit])
    need = min(len(keys) - hit, pool.num_available)
    pool.take(need)
    new = pool.publish(keys[hit:hit + need])
    pool.drop_cached(keys[:hit] + new)
    pool.release(need - len(new))
    return hit + need


class KVManager:
    """One replica's KV blocks: its pool, the blocks each running request holds, and the accounting mode.

    Args:
        config: the replica's :class:`~specsim.engine.state.ReplicaConfig` (blocks, block size, allocation
            rule, prefix caching, ``max_num_seqs``, gamma and the drafter's KV fraction).
        lazy: allow lazy accounting (False: exact every step; for tests).

    Attributes:
        pool: the :class:`~specsim.engine.kv.BlockPool` (read it freely; only this class changes it).
        exact: this step accounts KV exactly and allocates each verify length's blocks (the lookahead); always
            False under ``reserve``, which never grows.
        lazy_step: this step skips the per-request block arithmetic (lazy accounting).
        growth_bound: most blocks (target + drafter) one request can add in one step.
    """

    def __init__(self, config: ReplicaConfig, lazy: bool = True) -> None:
        self.config = config
        self.pool = BlockPool(config.num_blocks, config.prefix_caching)
        self.block_size = config.block_size
        self.paged = config.kv_allocation == "paged"
        self._lazy_allowed = lazy and self.paged
        self._owed = 0                             # blocks lazy steps may have grown into since exact accounting
        self.exact = True
        self.lazy_step = False
        self._cached_keys: dict[int, tuple] = {}   # cache keys each running request holds
        self.growth_bound = self._growth_bound()

    def _growth_bound(self) -> int:
        """Most KV blocks (target + drafter) one request can add in one step: its tokens grow by <= gamma + 1."""
        cfg = self.config
        step_tokens = cfg.gamma + 1
        target = blocks_for(step_tokens, cfg.block_size) + 1
        drafter = (blocks_for(int(np.ceil(step_tokens * cfg.drafter_kv_fraction)), cfg.block_size) + 1
                   if cfg.gamma and cfg.drafter_kv_fraction else 0)
        return int(target + drafter)

    # ----------------------------------------------------------------- accounting mode
    def _lazy_margin(self) -> int:
        return self._owed + self.config.max_num_seqs * self.growth_bound

    def begin_step(self) -> bool:
        """Choose this step's accounting; True when it is exact (the caller then brings holdings up to date
        with :meth:`fit_base_need`)."""
        if not self.paged:
            self.exact = self.lazy_step = False
            return False
        if self._lazy_allowed and self._lazy_margin() <= self.pool.num_free:
            self.exact, self.lazy_step = False, True
            return False
        self.switch_to_exact()
        return True

    def switch_to_exact(self) -> None:
        """Account exactly from now on in this step (the caller then calls :meth:`fit_base_need`)."""
        self.exact, self.lazy_step = True, False
        self._owed = 0

    def admission_margin(self) -> int:
        """Blocks an admission must leave free: the lazy margin in a lazy step, else 0."""
        return self._lazy_margin() if self.lazy_step else 0

    def count_lazy_growth(self, num_running: int) -> None:
        """A lazy step's ``num_running`` requests may each have grown by up to :attr:`growth_bound` blocks."""
        if self.lazy_step:
            self._owed += num_running * self.growth_bound

    def plain_steps(self, s: Slots, decode: np.ndarray, num_steps: int) -> PlainKV:
        """The KV accounting of the next ``num_steps`` plain steps (each slot of ``decode`` (R,) decodes one token
        per step, nothing is admitted or freed, no drafts; a prefilling slot holds its blocks from admission), step
        by step as :meth:`begin_step`, :meth:`fit_base_need`, :meth:`count_lazy_growth` and
        :meth:`exact_blocks_used` would do it, changing nothing (:meth:`apply_plain_steps` does). Stops before an
        exact step whose blocks exceed the free ones (one that preempts or evicts cached blocks)."""
        if not self.paged:                          # reserve: no accounting, nothing grows
            zeros = np.zeros(num_steps, np.int64)
            return PlainKV(zeros + self.num_blocks_used, zeros, zeros, zeros - 1)
        return PlainKV(*kernels.plain_kv_steps(
            num_steps, self._lazy_allowed, self._owed, self.pool.num_free, self.config.max_num_seqs * self.growth_bound,
            s.size * self.growth_bound, self.num_blocks_used, decode, s.prompt_tokens, s.num_generated, s.kv_blocks,
            self.block_size))

    def apply_plain_steps(self, s: Slots, decode: np.ndarray, plan: PlainKV, num_steps: int) -> None:
        """Account the first ``num_steps`` steps of ``plan`` (:meth:`plain_steps`, made before the slots' tokens
        grew): what is owed, the accounting mode, the blocks taken and the decoding slots' holdings at the latest
        exact step."""
        if not self.paged:
            return
        j = num_steps - 1
        last = int(plan.last_exact[j])
        self._owed = int(plan.owed[j])
        self.exact = last == j
        self.lazy_step = not self.exact
        taken = int(plan.taken[j])
        self.pool.take(taken) if taken >= 0 else self.pool.release(-taken)
        if last >= 0:
            s.kv_blocks[decode] = blocks_for(s.prompt_tokens[decode] + s.num_generated[decode] + 1 + last,
                                             self.block_size)

    @property
    def num_blocks_used(self) -> int:
        """Blocks in use (cached evictable blocks not counted)."""
        return self.pool.num_blocks - self.pool.num_available

    def exact_blocks_used(self, s: Slots, decode: np.ndarray, verify_len: np.ndarray, gamma: int) -> int:
        """Blocks in use after this step's allocation as exact accounting holds them (the figure a step reports).

        An exact step's pool count is it. A lazy step skipped the block arithmetic, so its decoding slots' holdings
        are stale: exact accounting would hold blocks_for(prompt + generated + 1 + l) target blocks each (last
        step's unused lookahead released) and the drafter's share of prompt + generated + gamma tokens for each
        drafting slot (a lazy step is one where every request's growth fits, so every request drafts).
        """
        used = self.num_blocks_used
        if not self.lazy_step or not decode.size:
            return used
        return used + int(kernels.lazy_growth_blocks(decode, verify_len, s.prompt_tokens, s.num_generated,
                                                     s.kv_blocks, s.draft_kv_blocks, self.block_size, int(gamma),
                                                     float(self.config.drafter_kv_fraction)))

    # ----------------------------------------------------------------- base need, freeing
    def fit_base_need(self, s: Slots) -> bool:
        """Set every decode-ready slot's blocks to its base need when the pool allows it (last step's unused
        lookahead returns); False, changing nothing, when it does not."""
        ready = s.prefill_left == 0
        delta = np.where(ready, blocks_for(base_tokens(s), self.block_size) - s.kv_blocks, 0)
        total = int(delta.sum())
        if total > self.pool.num_available:
            return False
        self.pool.take(total) if total >= 0 else self.pool.release(-total)
        s.kv_blocks += delta
        return True

    def free_lone_drafter_share(self, s: Slots) -> bool:
        """A request running alone gives up its drafter's blocks before it is preempted; True when it had some."""
        if s.size == 1 and s.draft_kv_blocks[0]:
            self.pool.release(int(s.draft_kv_blocks[0]))
            s.draft_kv_blocks[0] = 0
            return True
        return False

    def free(self, s: Slots, slots: int | np.ndarray) -> None:
        """Return every block of ``slots`` (one slot index or an array of them; their cached prefix blocks stay
        cached, evictable once unused, most recent last in slot order)."""
        slots = slots if isinstance(slots, np.ndarray) else np.array([slots])
        for idx in s.request[slots].tolist():
            self.pool.drop_cached(self._cached_keys.pop(idx, ()))
        held = s.kv_blocks[slots] - s.kv_cached[slots] + s.draft_kv_blocks[slots]
        self.pool.release(int(np.add.reduce(held)) + self.config.state_blocks * held.size)

    # ----------------------------------------------------------------- admission and the prefix cache
    def admit(self, idx: int, keys: tuple, *, prompt_tokens: int, output_tokens: int, num_generated: int,
              margin: int) -> Admission | None:
        """Allocate request ``idx``'s blocks (``keys``: its prefix-cache keys); None when they do not fit beside
        ``margin`` blocks. A hit never covers the prompt's last token (its logits are computed). The request's
        recurrent-state blocks (``config.state_blocks``) are taken too; ``blocks`` counts the KV blocks only."""
        bs, state = self.block_size, self.config.state_blocks
        hit = min(self.pool.match(keys), (prompt_tokens - 1) // bs)
        tokens = prompt_tokens + (num_generated + 1 if self.paged else output_tokens)
        blocks = int(blocks_for(tokens, bs))
        evictable = self.pool.num_evictable_in(keys[:hit]) if hit else 0
        if blocks - hit + state + evictable > self.pool.num_available - margin:
            return None                                 # (reviving an evictable hit takes it off the free list)
        self.pool.acquire_cached(keys[:hit])
        self.pool.take(blocks - hit + state)
        self._cached_keys[idx] = keys[:hit]
        return Admission(blocks, hit)

    def publish_prefix(self, idx: int, keys: tuple, hit: int) -> int:
        """Cache request ``idx``'s computed prefix blocks beyond its ``hit`` hits; returns how many became cached."""
        new = self.pool.publish(keys[hit:])
        self._cached_keys[idx] = self._cached_keys.get(idx, ())[:hit] + new
        return len(new)

    def num_cached_held(self, idx: int) -> int:
        """Shared cache blocks request ``idx`` holds."""
        return len(self._cached_keys[idx])

    # ----------------------------------------------------------------- a step's growth
    def reserve_draft_room(self, s: Slots, decode: np.ndarray, gamma: int) -> np.ndarray | None:
        """Allocate the drafter's blocks for ``gamma`` drafts of each decoding slot, FCFS. Returns (R,) bool:
        which requests draft (the others verify nothing); None when all do (no drafter KV, or a lazy step)."""
        fraction = self.config.drafter_kv_fraction
        if not self.exact or gamma == 0 or fraction == 0:
            return None
        ctx = s.prompt_tokens[decode] + s.num_generated[decode] + gamma
        need = np.maximum(blocks_for(np.ceil(ctx * fraction).astype(np.int64), self.block_size)
                          - s.draft_kv_blocks[decode], 0)
        fits = np.cumsum(need) <= self.pool.num_available
        granted = np.where(fits, need, 0)
        self.pool.take(int(granted.sum()))
        s.draft_kv_blocks[decode] += granted
        can = fits | (need == 0)
        return None if can.all() else can

    def reserve_lookahead(self, s: Slots, decode: np.ndarray, verify_len: np.ndarray) -> Lookahead:
        """Allocate blocks for prompt + generated + l + 1 tokens, FCFS; a request that does not fit verifies fewer."""
        bs = self.block_size
        base = base_tokens(s)[decode]
        need = np.maximum(blocks_for(base + verify_len, bs) - s.kv_blocks[decode], 0)
        avail, num_clipped = self.pool.num_available, 0
        if need.sum() > avail:
            cum = np.cumsum(need)
            short = cum > avail
            left = avail - np.concatenate([[0], cum[:-1]])
            grant = np.where(short, np.maximum(np.minimum(need, left), 0) * (np.cumsum(short) == 1), need)
            fit_len = (s.kv_blocks[decode] + grant) * bs - base
            num_clipped = int((fit_len < verify_len).sum())
            verify_len = np.minimum(verify_len, fit_len)
            need = np.maximum(blocks_for(base + verify_len, bs) - s.kv_blocks[decode], 0)
        self.pool.take(int(need.sum()))
        s.kv_blocks[decode] += need
        return Lookahead(verify_len, num_clipped)
