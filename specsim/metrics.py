"""Per-request and per-step records -> summary metrics (names follow ``vllm bench serve``).

Definitions (the `specsim run` issue, DESIGN.md):

* TTFT = first output token time - arrival. TPOT = (e2e - ttft) / (output_tokens - 1); requests with one
  output token are left out of TPOT and TPS/user (and counted in ``num_single_token``).
  TPS/user of a request = 1 / TPOT; ``mean_tps_per_user`` is the mean over requests.
* ITL = the gap between consecutive emissions of a request (tokens emitted together form one emission).
* Acceptance length = tokens emitted per request-step, own token included. acceptance_rate = accepted
  drafts / verified drafts (None when nothing was verified). mean_verify_tokens_per_request = mean of
  (1 + l_r) over request-steps.
* Open loop: duration from the first arrival to the last completion; throughput = output tokens of the
  completed requests / duration.
* Closed loop: a window that starts once every user has completed one request and ends when the last
  trace request is issued; throughput = tokens emitted inside the window / window length; per-request
  metrics cover the requests issued inside the window (they run to completion).
* Throughput per GPU divides by the decode GPUs (num_replicas x gpus_per_replica); prefill-pool GPUs are
  reported separately.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd


def _ms(x: np.ndarray, fn) -> float | None:
    return float(fn(x) * 1e3) if x.size else None


def _stats(prefix: str, values_s: np.ndarray) -> dict[str, float | None]:
    return {f"mean_{prefix}_ms": _ms(values_s, np.mean), f"median_{prefix}_ms": _ms(values_s, np.median),
            f"p99_{prefix}_ms": _ms(values_s, lambda v: np.percentile(v, 99))}


def request_frame(records, workload, trace) -> pd.DataFrame:
    """One row per trace request: times (s), token counts, speculative and memory counters, status.

    Args:
        records: the run's :class:`specsim.records.Records`.
        workload: its :class:`specsim.workload.Workload`.
        trace: the trace (for request ids).
    """
    r, n = records, len(workload.prompt)
    status = np.where(~np.isnan(r.done_s), "completed", np.where(r.issued, "unfinished", "not_issued"))
    for idx in r.unservable_reason:
        status[idx] = "unservable"
    ttft = r.first_token_s - r.arrival_s
    e2el = r.done_s - r.arrival_s
    out = workload.output
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / (out - 1), np.nan)
        tps = 1.0 / tpot
    return pd.DataFrame({
        "request_id": np.asarray(trace.request_id, dtype=object), "domain": workload.domain,
        "prompt_tokens": workload.prompt, "output_tokens": out, "arrival_s": r.arrival_s,
        "prefill_s": r.prefill_s, "first_token_s": r.first_token_s, "done_s": r.done_s,
        "ttft_s": ttft, "e2el_s": e2el, "tpot_s": tpot, "tps_per_user": tps,
        "decode_steps": r.decode_steps, "verified_drafts": r.verified_drafts, "accepted_drafts": r.accepted_drafts,
        "emitted_tokens": r.emitted_tokens, "preemptions": r.preemptions, "recomputed_tokens": r.recomputed_tokens,
        "prefix_hit_tokens": r.prefix_hit_tokens, "prefix_lookup_tokens": r.prefix_lookup_tokens,
        "replica": r.replica, "status": status,
        "unservable_reason": [r.unservable_reason.get(i, "") for i in range(n)],
    })


def memory_summary(records, requests: pd.DataFrame) -> dict[str, Any]:
    """KV-memory figures of a run: preemptions, recomputed tokens, prefix-cache token hit rates, unservable reasons.

    ``prefix_cache_hit_rate`` is hit tokens / looked-up prompt tokens over every prefill lookup (first prefills
    and recomputes, on every prefill instance and replica); ``prefix_cache`` gives it per instance.
    """
    rates = records.prefix_hit_rates()
    unservable = requests[requests.status == "unservable"]
    return {
        "num_preemptions": int(records.preemptions.sum()),
        "preempted_requests": int((records.preemptions > 0).sum()),
        "recomputed_tokens": int(records.recomputed_tokens.sum()),
        "kv_clipped_verify_lengths": int(records.num_kv_clips),
        "prefix_cache_hit_rate": rates.pop("overall"),
        "prefix_cache": rates,
        "unservable_requests": {str(rid): why for rid, why in zip(unservable.request_id, unservable.unservable_reason)},
    }


def summarize(requests: pd.DataFrame, steps: pd.DataFrame, itl_s: np.ndarray, *, window: tuple[float, float] | None,
              decode_gpus: int, prefill_gpus: int, mean_in_system: float | None) -> dict[str, Any]:
    """Summary metrics of one run.

    Args:
        requests: :func:`request_frame` output.
        steps: the per-step frame (specsim.records.STEP_COLUMNS).
        itl_s: (E,) inter-emission gaps in seconds (closed loop: of emissions inside the window).
        window: closed-loop measurement window (start_s, end_s), or None for open loop.
        decode_gpus: GPUs of the decode replicas; prefill_gpus: GPUs of the prefill pool.
        mean_in_system: time-average number of requests in the system (open loop), for Little's law.

    Returns:
        A flat dict with the metric names of the module docstring (times in ms, throughput in tok/s).
    """
    done = requests[requests.status == "completed"]
    if window is None:
        measured = done
        duration = float(done.done_s.max() - requests.arrival_s.min()) if len(done) else 0.0
        out_tokens = int(measured.output_tokens.sum())
        step_sel = steps
    else:
        start, end = window
        measured = done[(done.arrival_s >= start) & (done.arrival_s <= end)]
        duration = end - start
        step_end = steps.start_s + steps.duration_s
        in_win = (step_end > start) & (step_end <= end)
        first_in = ((requests.first_token_s > start) & (requests.first_token_s <= end)).sum()
        out_tokens = int(steps.emitted_tokens[in_win].sum() + first_in)
        step_sel = steps[in_win]
    multi = measured[measured.output_tokens > 1]
    req_steps = float(step_sel.num_decode.sum())
    verified = float(step_sel.verified_drafts.sum())
    out: dict[str, Any] = {
        "completed": int((requests.status == "completed").sum()),
        "unfinished": int((requests.status == "unfinished").sum()),
        "unservable": int((requests.status == "unservable").sum()),
        "total": int(len(requests)),
        "measured_requests": int(len(measured)),
        "total_input_tokens": int(measured.prompt_tokens.sum()),
        "total_output_tokens": int(measured.output_tokens.sum()),
        "duration_s": duration,
        "request_throughput": len(measured) / duration if duration > 0 else None,
        "output_throughput": out_tokens / duration if duration > 0 else None,
    }
    out["output_throughput_per_gpu"] = (out["output_throughput"] / decode_gpus
                                        if out["output_throughput"] is not None else None)
    out["decode_gpus"] = decode_gpus
    out["prefill_gpus"] = prefill_gpus
    out.update(_stats("ttft", measured.ttft_s.to_numpy()))
    out.update(_stats("tpot", multi.tpot_s.to_numpy()))
    out["mean_itl_ms"] = _ms(itl_s, np.mean)
    out["p99_itl_ms"] = _ms(itl_s, lambda v: np.percentile(v, 99))
    out["mean_e2el_ms"] = _ms(measured.e2el_s.to_numpy(), np.mean)
    out["mean_tps_per_user"] = float(multi.tps_per_user.mean()) if len(multi) else None
    out["median_tps_per_user"] = float(multi.tps_per_user.median()) if len(multi) else None
    out["num_single_token"] = int((measured.output_tokens == 1).sum())
    out["mean_acceptance_length"] = (float((step_sel.accepted_drafts.sum() + req_steps) / req_steps)
                                     if req_steps else None)
    out["acceptance_rate"] = float(step_sel.accepted_drafts.sum() / verified) if verified else None
    out["mean_verify_tokens_per_request"] = float((req_steps + verified) / req_steps) if req_steps else None
    out["steps"] = int(len(steps))
    out["mean_requests_in_system"] = mean_in_system
    return out


def domain_breakdown(requests: pd.DataFrame, measured_mask: pd.Series) -> dict[str, dict[str, Any]]:
    """Per-domain metrics of the measured requests: count, TTFT, TPS/user, acceptance length, acceptance rate."""
    out = {}
    sub_all = requests[measured_mask]
    for dom, sub in sub_all.groupby("domain", sort=True):
        multi = sub[sub.output_tokens > 1]
        steps = sub.decode_steps.sum()
        ver = sub.verified_drafts.sum()
        out[str(dom)] = {
            "requests": int(len(sub)),
            "mean_ttft_ms": float(sub.ttft_s.mean() * 1e3) if len(sub) else None,
            "mean_tpot_ms": float(multi.tpot_s.mean() * 1e3) if len(multi) else None,
            "mean_tps_per_user": float(multi.tps_per_user.mean()) if len(multi) else None,
            "mean_acceptance_length": float((sub.output_tokens.sum() - len(sub)) / steps) if steps else None,
            "acceptance_rate": float(sub.accepted_drafts.sum() / ver) if ver else None,
        }
    return out
