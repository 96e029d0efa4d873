"""The vLLM, TensorRT-LLM and SGLang configuration of a policy and its knobs, for ``specsim recommend``
(:mod:`specsim.sweep.recommend`). Only keys checked against the engines' sources are written:

* vLLM ``--speculative-config`` JSON: ``method``, ``num_speculative_tokens`` (vllm/config/speculative.py),
  ``enable_adaptive_verification`` (PR 47808, merged; vllm-project/vllm commit
  057929c3632766486896597cf27e1425fd838e63, ``vllm/v1/worker/gpu/spec_decode/adaptive_verification.py``:
  DSpark only), ``num_speculative_tokens_per_batch_size`` (commit 14b450ca590cbff96e7004bdb147a5d3acf5a4f6,
  ``vllm/v1/spec_decode/dynamic/utils.py``); the profiling context is the environment variable
  ``VLLM_ADAPTIVE_VERIFICATION_PROFILE_CONTEXT_LEN``.
* TensorRT-LLM ``speculative_config`` (LLM API / ``extra_llm_api_options`` YAML): ``max_draft_len``,
  ``draft_len_schedule`` (``DecodingBaseConfig``, tensorrt_llm/llmapi/llm_args.py, commit
  0004396720054fd8e205cbf616f21f0b57c6b412: keys are upper bounds, 0 above the largest). The confidence
  scheduler (PR 17056) is not merged: not expressible in a release.
* SGLang ``launch_server`` flags: ``--speculative-algorithm``, ``--speculative-num-steps``,
  ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens`` (python/sglang/srt/server_args.py);
  ``DSPARK`` takes no step or draft-token flags (sglang PR 29538's docs). No SGLang flag for a
  per-batch-size draft length or a confidence-driven verify budget was found: not expressible.

A setting an engine cannot express is said so (``config`` None and a ``note``), never invented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specsim.hardware.drafter import DRAFTER_BLOCK

#: Source of each engine's keys (module docstring), printed with every configuration.
SOURCES = {
    "vllm": "vLLM main: vllm/config/speculative.py; enable_adaptive_verification at commit 057929c3 (PR 47808); "
            "num_speculative_tokens_per_batch_size at commit 14b450ca",
    "trtllm": "TensorRT-LLM main at commit 00043967: llmapi/llm_args.py DecodingBaseConfig (max_draft_len, "
              "draft_len_schedule)",
    "sglang": "SGLang python/sglang/srt/server_args.py (speculative flags); DSPARK per sglang PR 29538",
}
#: specsim drafter -> vLLM ``method`` / SGLang ``--speculative-algorithm``.
VLLM_METHOD = {"mtp": "mtp", "eagle3": "eagle3", "dflash": "dflash", "dspark": "dspark"}
SGLANG_ALGORITHM = {"mtp": "NEXTN", "eagle3": "EAGLE3", "dflash": "DFLASH", "dspark": "DSPARK"}
CONFIDENCE_POLICIES = ("dspark", "dspark-async", "vllm-adaptive", "trtllm-confidence")


@dataclass
class EngineConfig:
    """One engine's configuration for a recommendation: ``config`` (JSON-ready; None when the engine cannot
    express the policy), ``note`` (what it means or why not), ``source`` (where the keys were checked),
    ``exact`` (False when ``config`` is only the engine's nearest setting, another scheduler) and, where the
    winner is not exact on this engine, ``alternative``: the best curve of the sweep at the tier that the engine
    does run exactly, ``{"curve", "throughput_per_gpu", "config", "note"}`` (None when the sweep has none).
    ``runs_as``: where ``config`` is only the nearest setting, the specsim policy that simulates it
    (``vllm-adaptive``), and ``simulated``: that curve of the sweep with this same configuration at the tier,
    ``{"curve", "throughput_per_gpu"}`` (None when the sweep did not run it)."""

    engine: str
    config: Any
    note: str
    source: str
    exact: bool = True
    alternative: dict[str, Any] | None = None
    runs_as: str | None = None
    simulated: dict[str, Any] | None = None


def _ranges_from_bounds(schedule: dict[int, int]) -> list[list[int]]:
    """TensorRT-LLM upper bounds -> vLLM [bs_lo, bs_hi, K] ranges (0 past the largest bound, as TRT-LLM)."""
    rows, lo = [], 1
    for bound, k in sorted(schedule.items()):
        rows.append([lo, int(bound), int(k)])
        lo = int(bound) + 1
    rows.append([lo, 1 << 20, 0])
    return rows


def _bounds_from_ranges(rows: list[list[int]]) -> dict[int, int]:
    """vLLM ranges -> TensorRT-LLM upper bounds; a gap takes the previous K and the last K runs on (vLLM's
    rule), so the last range's bound is extended to 2**20 running requests."""
    out = {}
    for (lo, hi, k), nxt in zip(rows, list(rows[1:]) + [None]):
        out[int(nxt[0]) - 1 if nxt else 1 << 20] = int(k)
    return out


def _schedule(policy: str, knobs: dict[str, Any], gamma: int) -> tuple[list[list[int]], dict[int, int]] | None:
    """(vLLM ranges, TRT-LLM bounds) of a draft-length-table policy, or None for other policies."""
    if policy == "vllm-dsd":
        from specsim.policies.schedules import DEFAULT_DSD, parse_dsd
        rows = [list(r) for r in parse_dsd(knobs.get("num_speculative_tokens_per_batch_size") or DEFAULT_DSD)]
        return rows, _bounds_from_ranges(rows)
    if policy == "trtllm-draft-len-schedule":
        from specsim.policies.schedules import TrtllmDraftLenSchedule
        sched = TrtllmDraftLenSchedule(knobs.get("draft_len_schedule"), gamma).schedule
        return _ranges_from_bounds(sched), sched
    return None


def engine_configs(policy: str, knobs: dict[str, Any]) -> list[EngineConfig]:
    """The vLLM, TensorRT-LLM and SGLang configurations of ``policy`` with ``knobs`` (module docstring)."""
    gamma, drafter = int(knobs.get("gamma") or 0), str(knobs.get("drafter") or "")
    if policy == "mtp1":
        gamma, drafter = 1, "mtp"
    return [_vllm(policy, knobs, gamma, drafter), _trtllm(policy, knobs, gamma, drafter),
            _sglang(policy, gamma, drafter)]


def _cannot(engine: str, why: str) -> EngineConfig:
    return EngineConfig(engine, None, f"cannot express: {why}", SOURCES[engine])


def _vllm(policy: str, knobs: dict[str, Any], gamma: int, drafter: str) -> EngineConfig:
    if policy == "none":
        return EngineConfig("vllm", {}, "no --speculative-config (speculation off)", SOURCES["vllm"])
    method = VLLM_METHOD.get(drafter)
    if method is None:
        return _cannot("vllm", f"no vLLM method for drafter {drafter!r}")
    base = {"method": method, "num_speculative_tokens": gamma}
    if policy in ("static", "mtp1"):
        return EngineConfig("vllm", base, f"fixed k = {gamma}", SOURCES["vllm"])
    sched = _schedule(policy, knobs, gamma)
    if sched is not None:
        return EngineConfig("vllm", {**base, "num_speculative_tokens_per_batch_size": sched[0]},
                            "K per running-request range (dynamic speculative decoding)", SOURCES["vllm"])
    if policy in CONFIDENCE_POLICIES:
        if drafter != "dspark":
            return _cannot("vllm", "adaptive verification needs DSpark's confidence head (method dspark)")
        note = ("vLLM's adaptive verification: budget from the previous step's confidences on its own cost table "
                f"(set VLLM_ADAPTIVE_VERIFICATION_PROFILE_CONTEXT_LEN={knobs.get('profile_context_len', 8192)})")
        exact = policy == "vllm-adaptive"
        if not exact:
            note += f"; the nearest vLLM setting to {policy}, not the same scheduler"
        return EngineConfig("vllm", {**base, "enable_adaptive_verification": True}, note, SOURCES["vllm"], exact,
                            runs_as=None if exact else "vllm-adaptive")
    return _cannot("vllm", f"no vLLM setting for {policy}'s rule")


def _trtllm(policy: str, knobs: dict[str, Any], gamma: int, drafter: str) -> EngineConfig:
    if policy == "none":
        return EngineConfig("trtllm", {}, "no speculative_config (speculation off)", SOURCES["trtllm"])
    if policy in ("static", "mtp1"):
        return EngineConfig("trtllm", {"max_draft_len": gamma},
                            "in your drafter's speculative_config (its decoding type and model)", SOURCES["trtllm"])
    sched = _schedule(policy, knobs, gamma)
    if sched is not None:
        bounds = sched[1]
        first = bounds[min(bounds)]
        return EngineConfig("trtllm", {"max_draft_len": first, "draft_len_schedule": {str(k): v for k, v in bounds.items()}},
                            "draft length per running-request bound; the smallest bound's length is max_draft_len",
                            SOURCES["trtllm"])
    if policy in CONFIDENCE_POLICIES:
        return _cannot("trtllm", "the confidence scheduler (PR 17056) is not in a release")
    return _cannot("trtllm", f"no TensorRT-LLM setting for {policy}'s rule")


def _sglang(policy: str, gamma: int, drafter: str) -> EngineConfig:
    if policy == "none":
        return EngineConfig("sglang", [], "no --speculative-* flags (speculation off)", SOURCES["sglang"])
    algo = SGLANG_ALGORITHM.get(drafter)
    if algo is None:
        return _cannot("sglang", f"no SGLang algorithm for drafter {drafter!r}")
    if policy in ("static", "mtp1"):
        if algo == "DSPARK":
            if gamma == DRAFTER_BLOCK.get("dspark"):          # DSPARK verifies the checkpoint's whole block
                return EngineConfig("sglang", ["--speculative-algorithm", algo],
                                    f"fixed k = {gamma}: DSPARK verifies the checkpoint's whole block, {gamma} drafts "
                                    "for the paper's checkpoint (a checkpoint with another block verifies that)",
                                    SOURCES["sglang"])
            return _cannot("sglang", f"DSPARK takes no draft-length flags; it verifies the checkpoint's whole block "
                           f"({DRAFTER_BLOCK.get('dspark')} drafts for the paper's checkpoint), not {gamma}")
        flags = ["--speculative-algorithm", algo, "--speculative-num-draft-tokens", str(gamma + 1)]
        if algo != "DFLASH":
            flags[2:2] = ["--speculative-num-steps", str(gamma), "--speculative-eagle-topk", "1"]
        return EngineConfig("sglang", flags, f"fixed k = {gamma} (a chain: top-k 1)", SOURCES["sglang"])
    return _cannot("sglang", f"no SGLang flag for {policy}'s per-step rule was found")
