"""Paged KV-cache memory of one serving instance: blocks, a prefix cache, and the drafter's share.

The model follows vLLM (V1) (the engine issue, docs/memory.md):

* Memory is ``num_blocks = kv_capacity_tokens // block_size`` blocks of ``block_size`` tokens (vLLM's
  default 16). A request holding ``T`` tokens of KV holds ``ceil(T / block_size)`` blocks.
* Prefix cache: a full block whose content is shared with other requests (a trace's ``hash_ids`` chain or a
  ``prefix_group`` system prompt) is keyed by a hash of its whole prefix, as in vLLM's automatic prefix caching.
  A cached block is reference-counted while running requests use it; when its count drops to 0 it stays
  cached but evictable, and free blocks are taken first from the never-cached pool, then by evicting cached
  blocks least recently freed first (LRU). A request's own unique content (and its generated tokens) is not
  kept for reuse after it leaves (vLLM would keep those blocks until evicted; a recompute after preemption is
  charged in full, as the engine issue asks).
* The drafter's own KV cache, where its family has one, takes ``DRAFTER_KV_FRACTION`` target blocks' worth per
  target token (the drafter's layers over the target's, from the shapes in DSpark paper §3.1).

Keys are Python ``hash`` values of tuples of ints and strings, which are deterministic across runs for ints and,
because Python randomises ``str`` hashes per process, made deterministic for group names by hashing their UTF-8
bytes with ``zlib.crc32`` first.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict

import numpy as np

#: The drafter's KV per target KV token, by drafter family (fractions of the target's per-token KV).
#: parallel / semi-autoregressive (DFlash, DSpark): 5 draft layers with the target's layer config, whose
#: attention holds the injected context K/V, on a 36-layer target: 5/36 (DSpark paper §3.1, offline config).
#: autoregressive (EAGLE-3): one draft layer: 1/36 (DSpark paper §4.1). mtp: one MTP module (one transformer
#: block) beside DeepSeek-V3's 61 layers: 1/61. none and lookup (the CPU drafters ngram and suffix): 0. Plain
#: tables use these per-family constants (step-model profiles size the drafter from its shape);
#: ``[drafter] kv_fraction`` overrides them.
DRAFTER_KV_FRACTION: dict[str, float] = {
    "none": 0.0, "parallel": 5 / 36, "semi-autoregressive": 5 / 36, "autoregressive": 1 / 36, "mtp": 1 / 61,
    "lookup": 0.0,
}


def blocks_for(tokens: np.ndarray | int, block_size: int) -> np.ndarray | int:
    """Blocks needed to hold ``tokens`` tokens: ceil(tokens / block_size) (array or int)."""
    return -(-tokens // block_size)


def _str_key(s: str) -> int:
    return zlib.crc32(s.encode())


def _chain(hash_ids) -> list[int]:
    """Prefix hashes of a hash-id chain: entry i identifies hash blocks 0..i together."""
    out, h = [], 0
    for x in hash_ids:
        h = hash((h, int(x)))
        out.append(h)
    return out


def prefix_block_keys(prompt_tokens: int, block_size: int, hash_ids=None, hash_block_tokens: int = 0,
                      prefix_group=None, prefix_tokens: int = 0) -> tuple[int, ...]:
    """Cache keys of a prompt's leading shareable full KV blocks (empty when it shares nothing).

    Args:
        prompt_tokens: the prompt length, tokens.
        block_size: KV block size, tokens.
        hash_ids: a Mooncake-style chain of prefix-block hashes (block i covers tokens
            [i * hash_block_tokens, (i + 1) * hash_block_tokens)); only hash blocks wholly inside the prompt are
            shareable (a trailing partial block is never a hit).
        hash_block_tokens: tokens per hash id (512 in the Mooncake traces).
        prefix_group, prefix_tokens: a system prompt: the first ``prefix_tokens`` tokens, shared by the group.

    Returns:
        Keys of KV blocks 0 .. n-1, n = shareable tokens // block_size; key j depends on the whole prefix to j.
    """
    if hash_ids:
        full = min(len(hash_ids), prompt_tokens // hash_block_tokens)
        chain = _chain(hash_ids[:full])
        n = full * hash_block_tokens // block_size
        return tuple(                                   # block j's key: the last hash block it touches
            hash((chain[((j + 1) * block_size - 1) // hash_block_tokens], j)) for j in range(n))
    if prefix_group is not None and prefix_tokens > 0:
        g = _str_key(str(prefix_group))
        n = min(prefix_tokens, prompt_tokens) // block_size
        return tuple(hash((g, -1, j)) for j in range(n))
    return ()


class BlockPool:
    """The KV blocks of one instance: a free count and a prefix cache of reference-counted keyed blocks.

    Args:
        num_blocks: total blocks (``kv_capacity_tokens // block_size``).
        prefix_caching: keep keyed blocks for reuse (else keys are ignored: every block is private).

    Attributes:
        num_free: blocks held by nobody and caching nothing.
        hit_tokens, lookup_tokens: prefix-cache tokens hit and looked up (the token hit rate is their ratio).
    """

    def __init__(self, num_blocks: int, prefix_caching: bool) -> None:
        self.num_blocks = int(num_blocks)
        self.prefix_caching = prefix_caching
        self.num_free = int(num_blocks)
        self._refs: dict[int, int] = {}                          # cached key -> running users
        self._evictable: OrderedDict[int, None] = OrderedDict()  # cached keys with 0 users, LRU first

    @property
    def num_available(self) -> int:
        """Blocks that an allocation can take now: free plus evictable cached blocks."""
        return self.num_free + len(self._evictable)

    @property
    def num_cached(self) -> int:
        """Blocks currently holding a cached prefix (in use or evictable)."""
        return len(self._refs)

    def match(self, keys: tuple[int, ...]) -> int:
        """Number of leading ``keys`` present in the cache (without taking them)."""
        if not self.prefix_caching:
            return 0
        n = 0
        for k in keys:
            if k not in self._refs:
                break
            n += 1
        return n

    def num_evictable_in(self, keys: tuple[int, ...]) -> int:
        """How many of the cached ``keys`` are evictable now (acquiring them takes them off the evictable list)."""
        return sum(1 for k in keys if self._refs[k] == 0)

    def take(self, num_blocks: int) -> None:
        """Take ``num_blocks`` blocks, evicting LRU cached blocks once the free ones run out.

        Raises:
            RuntimeError: fewer than ``num_blocks`` are available (callers check ``num_available`` first).
        """
        if num_blocks > self.num_available:
            raise RuntimeError(f"internal error: {num_blocks} KV blocks asked, {self.num_available} available")
        evict = num_blocks - self.num_free
        self.num_free -= min(num_blocks, self.num_free)
        for _ in range(max(0, evict)):
            key, _ = self._evictable.popitem(last=False)
            del self._refs[key]

    def release(self, num_blocks: int) -> None:
        """Return ``num_blocks`` private (unkeyed) blocks to the free pool."""
        self.num_free += int(num_blocks)

    def acquire_cached(self, keys: tuple[int, ...]) -> None:
        """A request starts using cached ``keys`` (all present: a :meth:`match` prefix)."""
        for k in keys:
            r = self._refs[k]
            if r == 0:
                del self._evictable[k]
            self._refs[k] = r + 1

    def publish(self, keys: tuple[int, ...]) -> tuple[int, ...]:
        """A request has computed the blocks of ``keys`` (held privately so far): cache the new ones.

        Returns:
            The keys whose private blocks became cached, now held by the request (keys already cached by
            another request stay private).
        """
        if not self.prefix_caching:
            return ()
        new = tuple(k for k in keys if k not in self._refs)
        for k in new:
            self._refs[k] = 1
        return new

    def drop_cached(self, keys: tuple[int, ...]) -> None:
        """A request stops using cached ``keys``: each unused one stays cached, evictable, most recent last."""
        for k in keys:
            r = self._refs[k] - 1
            self._refs[k] = r
            if r == 0:
                self._evictable[k] = None

    def check(self, held_blocks: int) -> None:
        """Invariant: free + cached + private-held blocks == num_blocks (``held_blocks``: private blocks held)."""
        total = self.num_free + len(self._refs) + held_blocks
        if total != self.num_blocks:
            raise RuntimeError(f"internal error: KV blocks not conserved ({total} != {self.num_blocks})")
