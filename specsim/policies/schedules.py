"""Draft length per batch size, as engines let operators write it: vLLM's and TensorRT-LLM's tables.

Both map R, the number of running requests, to the drafts every request proposes and verifies this
step. R is known before any confidence exists, so the batch size is fixed early (``fits_zos``) and the
drafter proposes only that many (``proposal_length``): a step with 0 drafts drafts nothing, as ``none``.

* ``vllm-dsd``: vLLM's ``num_speculative_tokens_per_batch_size`` (dynamic speculative decoding; read at
  vllm-project/vllm ``vllm/v1/spec_decode/dynamic/utils.py``, commit 14b450ca590cbff96e7004bdb147a5d3acf5a4f6,
  ``validate_and_normalize_dynamic_sd_schedule`` and ``build_dynamic_sd_schedule_lookup``): a list of
  ``[bs_lo, bs_hi, K]`` ranges, sorted, non-overlapping, the first starting at 1; R in a range verifies
  min(K, num_speculative_tokens); a gap between ranges takes the previous range's K, and R past the last
  range the last K. (The 5-item form with context ranges is not modelled: specsim's table is per R.)
* ``trtllm-draft-len-schedule``: TensorRT-LLM's ``draft_len_schedule`` (``DecodingBaseConfig`` in
  ``tensorrt_llm/llmapi/llm_args.py``, commit 0004396720054fd8e205cbf616f21f0b57c6b412): ``{bound: draft_len}``;
  R verifies the draft length of the smallest bound >= R, and 0 (speculation off) above the largest bound;
  the smallest bound's draft length must equal ``max_draft_len`` (the run's gamma here). Older releases
  (1.2.x) read the keys as lower bounds; this is the newer rule.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from specsim.policies.base import PolicyBase, SchedulingView

#: vLLM recipes issue 967's shape: deep speculation while memory-bound, short as the batch fills.
DEFAULT_DSD = ((1, 16, 7), (17, 64, 3), (65, 1024, 1))


def parse_dsd(spec: Any) -> tuple[tuple[int, int, int], ...]:
    """vLLM's ``[[bs_lo, bs_hi, K], ...]`` (a list, or its JSON text), validated as vLLM validates it.

    Raises:
        ValueError: not 3-item entries, a range not positive or reversed, overlapping or unsorted ranges,
            the first range not starting at 1, or K < 0.
    """
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            raise ValueError(f"num_speculative_tokens_per_batch_size: expected JSON like [[1,16,7]], got {spec!r}")
    if not isinstance(spec, (list, tuple)) or not spec:
        raise ValueError("num_speculative_tokens_per_batch_size: expected a non-empty list of [bs_lo, bs_hi, K]")
    rows = []
    for e in spec:
        if not isinstance(e, (list, tuple)) or len(e) != 3:
            raise ValueError(f"num_speculative_tokens_per_batch_size entry {e!r}: expected [bs_lo, bs_hi, K]")
        lo, hi, k = (int(v) for v in e)
        if lo <= 0 or hi < lo or k < 0:
            raise ValueError(f"num_speculative_tokens_per_batch_size entry {list(e)}: expected 1 <= bs_lo <= bs_hi, K >= 0")
        rows.append((lo, hi, k))
    rows.sort()
    if rows[0][0] != 1 or any(b[0] <= a[1] for a, b in zip(rows, rows[1:])):
        raise ValueError(f"num_speculative_tokens_per_batch_size: ranges must start at 1 and not overlap, got {rows}")
    return tuple(rows)


def dsd_drafts(rows: tuple[tuple[int, int, int], ...], num_running: int, max_k: int) -> int:
    """K for ``num_running`` requests under vLLM's rule (module docstring), capped at ``max_k``."""
    k = rows[0][2]
    for lo, _hi, kk in rows:
        if lo > num_running:
            break
        k = kk                                   # in this range, in the gap after it, or past the last
    return int(min(k, max_k))


class VllmDsd(PolicyBase):
    """``vllm-dsd``: drafts per request from vLLM's ``num_speculative_tokens_per_batch_size`` (module docstring).

    Knobs: ``num_speculative_tokens_per_batch_size`` (list of [bs_lo, bs_hi, K] or its JSON text).
    ``num_speculative_tokens`` is the run's gamma.
    """

    name = "vllm-dsd"
    fits_zos = True
    reads_confidence = False
    knobs = {"num_speculative_tokens_per_batch_size": [list(r) for r in DEFAULT_DSD]}

    def __init__(self, num_speculative_tokens_per_batch_size: Any = DEFAULT_DSD) -> None:
        self.rows = parse_dsd(num_speculative_tokens_per_batch_size)

    def proposal_length(self, view: SchedulingView) -> int:
        return dsd_drafts(self.rows, view.num_requests, view.gamma)

    def __call__(self, view: SchedulingView) -> np.ndarray:
        return np.full(view.num_requests, dsd_drafts(self.rows, view.num_requests, view.gamma), dtype=np.int64)


def parse_draft_len_schedule(spec: Any) -> dict[int, int]:
    """TensorRT-LLM's ``{bound: draft_len}`` from a dict, pairs, JSON text or ``"16:7,64:3"``.

    Raises:
        ValueError: a bound < 1, a draft length < 0, or text that does not parse.
    """
    if isinstance(spec, str):
        text = spec.strip()
        if text.startswith("{"):
            spec = json.loads(text)
        else:
            try:
                spec = {int(a): int(b) for a, b in (item.split(":") for item in text.split(",") if item.strip())}
            except ValueError:
                raise ValueError(f"draft_len_schedule: expected 'bound:draft_len,...' or JSON, got {text!r}") from None
    items = spec.items() if isinstance(spec, dict) else spec
    out = {int(b): int(d) for b, d in items}
    if not out or min(out) < 1 or min(out.values()) < 0:
        raise ValueError(f"draft_len_schedule: expected bounds >= 1 and draft lengths >= 0, got {out}")
    return dict(sorted(out.items()))


class TrtllmDraftLenSchedule(PolicyBase):
    """``trtllm-draft-len-schedule``: TensorRT-LLM's ``draft_len_schedule`` (module docstring rule).

    Knobs: ``draft_len_schedule`` (``{bound: draft_len}``, JSON, or ``"16:7,64:3,256:1"``; None: the
    documented shape at the run's gamma, {16: gamma, 64: min(3, gamma), 256: min(1, gamma)}). Its smallest
    bound's draft length must equal the run's gamma (TensorRT-LLM's ``max_draft_len`` check).

    Raises:
        ValueError: a malformed schedule, or a smallest bound whose draft length differs from gamma (as
            TensorRT-LLM's validator does).
    """

    name = "trtllm-draft-len-schedule"
    fits_zos = True
    reads_confidence = False
    knobs = {"draft_len_schedule": None}

    def __init__(self, draft_len_schedule: Any = None, gamma: int | None = None) -> None:
        if draft_len_schedule is None:
            g = 7 if gamma is None else int(gamma)
            draft_len_schedule = {16: g, 64: min(3, g), 256: min(1, g)}
        self.schedule = parse_draft_len_schedule(draft_len_schedule)
        first = self.schedule[min(self.schedule)]
        if gamma is not None and first != int(gamma):
            raise ValueError(f"draft_len_schedule[{min(self.schedule)}] = {first} must equal max_draft_len "
                             f"(the run's gamma, {gamma}), as TensorRT-LLM requires")
        self._bounds = np.array(list(self.schedule))
        self._lens = np.array(list(self.schedule.values()) + [0])

    def drafts(self, num_running: int, gamma: int) -> int:
        """Draft length for ``num_running`` requests: the smallest bound >= R, 0 above all, capped at gamma."""
        return int(min(self._lens[int(np.searchsorted(self._bounds, num_running, side="left"))], gamma))

    def proposal_length(self, view: SchedulingView) -> int:
        return self.drafts(view.num_requests, view.gamma)

    def __call__(self, view: SchedulingView) -> np.ndarray:
        return np.full(view.num_requests, self.drafts(view.num_requests, view.gamma), dtype=np.int64)
