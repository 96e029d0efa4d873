"""Drafters that run on the host CPU: n-gram prompt lookup (vLLM ``method = "ngram"``) and suffix decoding
(vLLM ``method = "suffix"``, Arctic Inference's SuffixDecoding). They have no GPU layers, no weights and no KV
cache of their own; their cost is CPU seconds on the step's critical path, because the engine looks up the next
drafts once the step's sampled tokens are back on the host and before it schedules the next step (issue 20,
"n-gram / suffix: CPU time, no GPU layers"; DESIGN.md "The cost of a speculative step").

Sources of the defaults:

* n-gram: vLLM's proposer scans each drafting request's whole context once per step (a KMP pass over its
  tokens, ``vllm/v1/spec_decode/ngram_proposer.py``), on one thread per TP rank as shipped: vLLM PR 24986
  (2025-09) made the scan parallel over requests but left its thread cap at ``min(1, cpu_count // 2)``, to be
  raised to 8 once TP-aware drafting lands (its TODO; PRs 26056 and 56732, which do so, were closed). vLLM PR
  56732 (2026) measured the scan: 66.3 M context tokens (512 requests x 129,536) in 70.28 ms on one thread and
  9.95 ms on 8, so :data:`NGRAM_SCAN_S_PER_TOKEN` = 70.28 ms / 66.3 M = 1.06 ns per token on one thread, and 8
  threads run 7.06x faster (:data:`NGRAM_SPEEDUP_8`; linear in between), for an engine patched to use them.
* suffix: about 20 us of CPU per request per step, one request after the other (:data:`SUFFIX_REQUEST_S`):
  the SuffixDecoding paper's speculation cost (arXiv 2411.04975), as its users quote it ("~20 us/token draft
  cost", ik_llama.cpp issue 1602), read as one tree lookup per request and step whatever its draft length
  (each lookup proposes the step's drafts); a second-hand figure, older than Arctic Inference's later speed-ups,
  and no engine measurement of it was found.

Neither has a built-in acceptance table: give the run the acceptance you measured (``acceptance.length``,
``acceptance.rates`` or ``acceptance.constant_alpha``; docs/acceptance.md lists public values).
"""

from __future__ import annotations

from dataclasses import dataclass

from specsim.scenario import LOOKUP_DRAFTERS

#: Seconds per context token one thread's n-gram scan takes (vLLM PR 56732: 70.28 ms / 66.3 M tokens).
NGRAM_SCAN_S_PER_TOKEN = 70.28e-3 / 66.3e6
#: Speed-up of the scan on 8 threads over one (vLLM PR 56732: 70.28 / 9.95 ms).
NGRAM_SPEEDUP_8 = 70.28 / 9.95
#: The n-gram proposer's threads in vLLM as shipped (PR 24986: ``min(1, cpu_count // 2)``, per TP rank).
NGRAM_THREADS = 1
#: Context tokens in the batch below which vLLM's proposer scans on one thread whatever its cap (PR 24986's
#: ``num_tokens_threshold``).
NGRAM_PARALLEL_MIN_TOKENS = 8192
#: CPU seconds per drafting request and step of suffix decoding (arXiv 2411.04975 via ik_llama.cpp issue 1602).
SUFFIX_REQUEST_S = 20e-6


def scan_speedup(threads: int) -> float:
    """The n-gram scan's speed-up on ``threads`` threads over one: 1 at one thread, :data:`NGRAM_SPEEDUP_8` at 8,
    linear in between (each added thread adds (7.06 - 1) / 7 = 0.87 of one), and no faster beyond 8 (no
    measurement past 8; vLLM PR 24986's review found no gain beyond 8 threads)."""
    return 1.0 + (min(max(int(threads), 1), 8) - 1) * (NGRAM_SPEEDUP_8 - 1.0) / 7.0


@dataclass(frozen=True)
class LookupDrafterCost:
    """Draft time of a CPU drafter: no GPU work, CPU seconds on the step's critical path.

    * ``ngram``: ``kv_tokens x scan_s_per_token / scan_speedup(min(threads, R))`` (every drafting request's
      context scanned once per step, requests spread over the threads; one thread below
      :data:`NGRAM_PARALLEL_MIN_TOKENS` context tokens);
    * ``suffix``: ``R x request_s``.

    Args:
        method: ``"ngram"`` or ``"suffix"``.
        threads: the n-gram proposer's threads, int >= 1 (vLLM as shipped: 1; 8 with PR 56732's patch).
        scan_s_per_token: seconds per context token on one thread (n-gram).
        request_s: seconds per drafting request (suffix).

    Raises:
        ValueError: an unknown method or threads < 1 (the scenario validates both before this is built).
    """

    method: str
    threads: int = NGRAM_THREADS
    scan_s_per_token: float = NGRAM_SCAN_S_PER_TOKEN
    request_s: float = SUFFIX_REQUEST_S
    family: str = "lookup"

    def __post_init__(self) -> None:
        if self.method not in LOOKUP_DRAFTERS:
            raise ValueError(f"method: expected one of {LOOKUP_DRAFTERS}, got {self.method!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads: expected an int >= 1, got {self.threads!r}")

    def draft_time_s(self, num_requests: int, gamma: int, profile=None, kv_tokens: float = 0.0) -> float:
        """Seconds of CPU drafting for ``num_requests`` requests proposing ``gamma`` drafts each (0 when none
        draft); ``kv_tokens``: the drafting requests' context tokens (prompt plus generated), which the n-gram
        scan reads. ``profile`` is unused (no GPU work; the argument keeps the drafter costs' signature)."""
        if num_requests <= 0 or gamma <= 0:
            return 0.0
        if self.method == "suffix":
            return float(num_requests * self.request_s)
        threads = min(self.threads, num_requests) if kv_tokens >= NGRAM_PARALLEL_MIN_TOKENS else 1
        return float(kv_tokens * self.scan_s_per_token / scan_speedup(threads))
