"""Per-request and per-step records -> summary metrics (names follow ``vllm bench serve``).

Definitions (the `specsim run` issue, DESIGN.md):

* TTFT = first output token time - arrival. TPOT = (e2e - ttft) / (output_tokens - 1); requests with one
  output token are left out of TPOT and TPS/user (and counted in ``num_single_token``).
  TPS/user of a request = 1 / TPOT; ``mean_tps_per_user`` is the mean over requests.
* ITL = the gap between consecutive emissions of a request (tokens emitted together form one emission).
* E2EL = completion time - arrival.
* Latency statistics, as ``vllm bench serve`` names them: ``mean_``, ``median_``, ``std_`` and the percentiles
  :data:`PERCENTILES` (``p50_``, ``p90_``, ``p99_``, ``p99.9_``) of ``ttft``, ``tpot``, ``itl`` and ``e2el``, in
  ms; percentiles are numpy's linear interpolation (``np.percentile``), as vLLM computes them.
* Load on a replica: ``mean_running_requests`` and ``mean_waiting_requests`` are the time averages over the
  steps (each step's count weighted by its duration, summed over replicas) of the requests admitted (decoding or
  prefilling, holding KV) and of those queued for admission.
* Acceptance length = tokens emitted per request-step, own token included. acceptance_rate = accepted
  drafts / verified drafts (None when nothing was verified). mean_verify_tokens_per_request = mean of
  (1 + l_r) over request-steps.
* Scope. The top-level figures cover the whole run: the completed requests, from the first arrival to the
  last completion (``duration_s``); ``output_throughput`` = their output tokens / ``duration_s``, so
  ``total_output_tokens / duration_s == output_throughput`` in both loop modes. ``arrival_span_s``: first to last
  issued arrival (open loop's overload rule, :mod:`specsim.analysis.overload`, sets it against ``duration_s``).
* Closed loop adds a ``window`` block: the measurement window starts once every user has completed one
  request and ends when the last trace request is issued (``start_s``, ``end_s``, ``duration_s``);
  ``output_tokens`` = tokens emitted inside it, ``output_throughput`` = those / its length;
  ``requests_issued`` = requests issued inside it; its per-request figures (latencies, TPS/user) cover the
  requests that complete inside it (:func:`window_mask`: not a request that finishes in the drain, whose
  steps fewer users share) and its step figures the steps that end inside it. Sweeps and frontiers use the
  window's figures for closed-loop points (a steady state, free of ramp-up and tail).
* Throughput per GPU divides by the decode GPUs (num_replicas x gpus_per_replica, the profile's TP x PP unless
  set); prefill-pool GPUs are reported separately, and ``output_throughput_per_all_gpus`` divides by decode and
  prefill GPUs together (to compare a disaggregated deployment with a colocated one).
* Goodput (``--goodput``), as ``vllm bench serve --goodput`` defines it: a request is good when every given
  limit holds (TTFT, TPOT, E2EL in ms; a one-token request's TPOT counts as 0, as in vLLM);
  ``request_goodput`` = good requests / ``duration_s`` (the window's in the window block). The tier-based
  figure of :mod:`specsim.analysis.frontier` (tok/s/GPU from requests meeting a TPS/user tier) keeps its own name.
* Tolerance: every comparison of a float against a tier, SLO or limit uses :func:`at_least` /
  :func:`at_most` (relative tolerance :data:`REL_TOL`), in this module and in :mod:`specsim.analysis.frontier`, so a
  value that equals its bound up to rounding meets it.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError

#: Latency percentiles reported for TTFT, TPOT, ITL and E2EL (vllm bench serve's key names: ``p99.9_ttft_ms``).
PERCENTILES = (50.0, 90.0, 99.0, 99.9)

#: Relative tolerance of every comparison of a float against a tier, SLO or limit (a few ulps of rounding
#: in sums of step times stay far below it; a real miss of one part in a billion does not matter).
REL_TOL = 1e-9

#: The limits ``--goodput`` accepts: name -> the request-frame column (seconds) it bounds.
GOODPUT_METRICS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2el": "e2el_s"}


def at_least(value, bound):
    """``value >= bound`` up to :data:`REL_TOL` relative to ``bound`` (arrays broadcast; NaN is never at least).

    Args:
        value: a float or an array (e.g. TPS/user, tok/s).
        bound: the tier or floor, same unit.

    Returns:
        A bool, or a bool array of ``value``'s shape.
    """
    res = np.asarray(value, float) >= bound - REL_TOL * abs(bound)
    return bool(res) if res.ndim == 0 else res


def at_most(value, bound):
    """``value <= bound`` up to :data:`REL_TOL` relative to ``bound`` (arrays broadcast; NaN is never at most)."""
    res = np.asarray(value, float) <= bound + REL_TOL * abs(bound)
    return bool(res) if res.ndim == 0 else res


def _pword(p: float) -> str:
    """Percentile as vLLM writes it in a key: 99.0 -> ``99``, 99.9 -> ``99.9``."""
    return str(int(p)) if float(p).is_integer() else str(p)


def parse_percentiles(text: str | None) -> tuple[float, ...]:
    """``--metric-percentiles`` as ``vllm bench serve`` takes it: ``"50,90,99"`` -> (50.0, 90.0, 99.0).

    None or "" gives :data:`PERCENTILES`. Values are sorted and deduplicated.

    Raises:
        SpecsimInputError: a value that is not a number in (0, 100].
    """
    if not text:
        return PERCENTILES
    out = set()
    for part in str(text).replace(" ", ",").split(","):
        if not part:
            continue
        try:
            p = float(part)
        except ValueError:
            p = float("nan")
        if not (np.isfinite(p) and 0 < p <= 100):
            raise SpecsimInputError("--metric-percentiles", None, "metric_percentiles",
                                    "comma-separated percentiles in (0, 100], e.g. '50,90,99'", repr(part))
        out.add(p)
    return tuple(sorted(out)) or PERCENTILES


def percentile_key(p: float, name: str) -> str:
    """vLLM's key of percentile ``p`` of metric ``name``: (99.9, "ttft") -> ``p99.9_ttft_ms``."""
    return f"p{_pword(p)}_{name}_ms"


def latency_stats(name: str, values_s: np.ndarray, percentiles=PERCENTILES) -> dict[str, float | None]:
    """``mean_``, ``median_``, ``std_`` and ``p<P>_`` (for P in ``percentiles``) ``<name>_ms`` of ``values_s``.

    Args:
        name: ``ttft``, ``tpot``, ``itl`` or ``e2el``.
        values_s: (n,) latencies in seconds; every value is None when n == 0.
        percentiles: the P values (default :data:`PERCENTILES`; ``--metric-percentiles`` sets them).

    Returns:
        ``{"mean_ttft_ms": ..., "median_ttft_ms": ..., "std_ttft_ms": ..., "p50_ttft_ms": ..., "p90_ttft_ms": ...,
        "p99_ttft_ms": ..., "p99.9_ttft_ms": ...}`` in ms (std with ddof 0, as numpy and vLLM).
    """
    v = np.asarray(values_s, float)
    if v.size == 0:
        keys = ["mean", "median", "std"] + [f"p{_pword(p)}" for p in percentiles]
        return {f"{k}_{name}_ms": None for k in keys}
    out = {f"mean_{name}_ms": float(v.mean() * 1e3), f"median_{name}_ms": float(np.median(v) * 1e3),
           f"std_{name}_ms": float(v.std() * 1e3)}
    for p, q in zip(percentiles, np.percentile(v, percentiles)):
        out[f"p{_pword(p)}_{name}_ms"] = float(q * 1e3)
    return out


def request_frame(records, workload, trace) -> pd.DataFrame:
    """One row per trace request: times (s), token counts, speculative and memory counters, status.
    ``prefill_wait_s`` is the time a disaggregated request waited for a prefill instance (NaN where prefill is
    colocated, or it was never prefilled); the summary's ``mean_prefill_wait_ms`` is its mean.

    Args:
        records: the run's :class:`specsim.engine.records.Records`.
        workload: its :class:`specsim.engine.workload.Workload`.
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
        "prefill_wait_s": r.prefill_start_s - r.queued_s,
        "decode_steps": r.decode_steps, "verified_drafts": r.verified_drafts, "accepted_drafts": r.accepted_drafts,
        "emitted_tokens": r.emitted_tokens, "preemptions": r.preemptions, "recomputed_tokens": r.recomputed_tokens,
        "prefix_hit_tokens": r.prefix_hit_tokens, "prefix_lookup_tokens": r.prefix_lookup_tokens,
        "recompute_hit_tokens": r.recompute_hit_tokens, "recompute_lookup_tokens": r.recompute_lookup_tokens,
        "replica": r.replica, "status": status,
        "unservable_reason": [r.unservable_reason.get(i, "") for i in range(n)],
    })


def memory_summary(records, requests: pd.DataFrame) -> dict[str, Any]:
    """KV-memory figures of a run: preemptions, recomputed tokens, prefix-cache token hit rates, unservable reasons.

    ``kv_clipped_verify_lengths`` counts verify lengths the KV lookahead shortened; ``drafter_kv_lost_drafts`` the
    request-steps that drafted nothing because their drafter's KV share did not fit (docs/memory.md).

    ``prefix_cache_hit_rate`` is hit tokens / looked-up prompt tokens over first-time prompt lookups (each
    request's first prefill, on every prefill instance and replica; vLLM's definition since its PR 25787,
    docs/memory.md); ``prefix_cache`` gives it per instance. The lookups of re-prefills after preemptions are
    reported apart: ``recompute_prefix_hit_tokens`` and ``recompute_prefix_hit_rate`` (hit tokens / the prompt
    + generated tokens those recomputes looked up; None when nothing was recomputed).
    """
    rates = records.prefix_hit_rates()
    rec_lookup = int(records.recompute_lookup_tokens.sum())
    rec_hit = int(records.recompute_hit_tokens.sum())
    unservable = requests[requests.status == "unservable"]
    return {
        "num_preemptions": int(records.preemptions.sum()),
        "preempted_requests": int((records.preemptions > 0).sum()),
        "recomputed_tokens": int(records.recomputed_tokens.sum()),
        "kv_clipped_verify_lengths": int(records.num_kv_clips),
        "drafter_kv_lost_drafts": int(records.num_drafter_kv_losses),
        "prefix_cache_hit_rate": rates.pop("overall"),
        "prefix_cache": rates,
        "recompute_prefix_hit_tokens": rec_hit,
        "recompute_prefix_hit_rate": rec_hit / rec_lookup if rec_lookup else None,
        "unservable_requests": {str(rid): why for rid, why in zip(unservable.request_id, unservable.unservable_reason)},
    }


def _figures(measured: pd.DataFrame, steps: pd.DataFrame, itl_s: np.ndarray, duration: float,
             out_tokens: int, decode_gpus: int, percentiles=PERCENTILES, prefill_gpus: int = 0) -> dict[str, Any]:
    """The figures of one scope: ``measured`` requests, ``steps``, ITL gaps, ``duration`` s, ``out_tokens``;
    ``output_throughput_per_all_gpus`` also counts the ``prefill_gpus`` of a disaggregated pool (the figure to
    compare a disaggregated deployment with a colocated one)."""
    multi = measured[measured.output_tokens > 1]
    req_steps = float(steps.num_decode.sum())
    verified = float(steps.verified_drafts.sum())
    accepted = float(steps.accepted_drafts.sum())
    out: dict[str, Any] = {
        "measured_requests": int(len(measured)),
        "duration_s": duration,
        "request_throughput": len(measured) / duration if duration > 0 else None,
        "output_throughput": out_tokens / duration if duration > 0 else None,
    }
    out["output_throughput_per_gpu"] = (out["output_throughput"] / decode_gpus
                                        if out["output_throughput"] is not None else None)
    out["output_throughput_per_all_gpus"] = (out["output_throughput"] / (decode_gpus + prefill_gpus)
                                             if out["output_throughput"] is not None else None)
    out.update(latency_stats("ttft", measured.ttft_s.to_numpy(), percentiles))
    out.update(latency_stats("tpot", multi.tpot_s.to_numpy(), percentiles))
    out.update(latency_stats("itl", itl_s, percentiles))
    out.update(latency_stats("e2el", measured.e2el_s.to_numpy(), percentiles))
    wait = measured.prefill_wait_s.to_numpy() if "prefill_wait_s" in measured else np.zeros(0)
    out["mean_prefill_wait_ms"] = float(np.nanmean(wait) * 1e3) if np.isfinite(wait).any() else None
    out["mean_running_requests"] = (float((steps.num_running * steps.duration_s).sum() / duration)
                                    if duration > 0 and "num_running" in steps else None)
    out["mean_waiting_requests"] = (float((steps.num_waiting * steps.duration_s).sum() / duration)
                                    if duration > 0 and "num_waiting" in steps else None)
    out["mean_tps_per_user"] = float(multi.tps_per_user.mean()) if len(multi) else None
    out["median_tps_per_user"] = float(multi.tps_per_user.median()) if len(multi) else None
    out["num_single_token"] = int((measured.output_tokens == 1).sum())
    out["mean_acceptance_length"] = float((accepted + req_steps) / req_steps) if req_steps else None
    out["acceptance_rate"] = float(accepted / verified) if verified else None
    out["mean_verify_tokens_per_request"] = float((req_steps + verified) / req_steps) if req_steps else None
    return out


def window_mask(requests: pd.DataFrame, window: tuple[float, float]) -> pd.Series:
    """(n,) bool: the requests a closed-loop window measures, those that complete inside (start_s, end_s], as its
    steps are counted: the steady state's completions, as GuideLLM counts the requests completed in its window
    after the warm-up. Every user's first request (the opening burst) has completed by ``start_s``, and none of
    these ran in the drain, which begins at ``end_s`` when the last request is issued; a request issued inside
    the window that finishes in the drain, where fewer users share the steps, is not counted, so TPOT and
    TPS/user read as the steady state's, not faster."""
    start, end = window
    return (requests.done_s > start) & (requests.done_s <= end)


def measured_mask(requests: pd.DataFrame, summary: dict[str, Any]) -> pd.Series:
    """(n,) bool: the requests a run's summary measures: the completed ones, in closed loop only those
    :func:`window_mask` counts (``summary["load"]`` holds the window's ends; a window that never opened measures
    the completed ones)."""
    meas = requests.status == "completed"
    load = summary.get("load") or {}
    if load.get("mode") == "closed" and load.get("window_start_s") is not None:
        meas &= window_mask(requests, (load["window_start_s"], load["window_end_s"]))
    return meas


def summarize(requests: pd.DataFrame, steps: pd.DataFrame, itl_s: np.ndarray, *, window: tuple[float, float] | None,
              decode_gpus: int, prefill_gpus: int, mean_in_system: float | None,
              window_itl_s: np.ndarray | None = None, percentiles=PERCENTILES) -> dict[str, Any]:
    """Summary metrics of one run (scopes: the module docstring).

    Args:
        requests: :func:`request_frame` output.
        steps: the per-step frame (specsim.engine.records.STEP_COLUMNS).
        itl_s: (E,) inter-emission gaps in seconds over the whole run.
        window: closed-loop measurement window (start_s, end_s), or None for open loop.
        decode_gpus: GPUs of the decode replicas; prefill_gpus: GPUs of the prefill pool.
        mean_in_system: time-average number of requests in the system over the run, for Little's law.
        window_itl_s: (E',) the gaps of emissions inside the window (closed loop; None: none given).
        percentiles: latency percentiles to report (``--metric-percentiles``; default :data:`PERCENTILES`).

    Returns:
        A flat dict of whole-run figures (times in ms, throughput in tok/s) plus, in closed loop, a
        ``window`` dict of the window's figures (same names, and ``start_s``, ``end_s``,
        ``requests_issued``, ``output_tokens``).
    """
    done = requests[requests.status == "completed"]
    duration = float(done.done_s.max() - requests.arrival_s.min()) if len(done) else 0.0
    out: dict[str, Any] = {
        "completed": int((requests.status == "completed").sum()),
        "unfinished": int((requests.status == "unfinished").sum()),
        "unservable": int((requests.status == "unservable").sum()),
        "not_issued": int((requests.status == "not_issued").sum()),     # a horizon ended the run before them
        "total": int(len(requests)),
        "total_input_tokens": int(done.prompt_tokens.sum()),
        "total_output_tokens": int(done.output_tokens.sum()),
    }
    out.update(_figures(done, steps, itl_s, duration, out["total_output_tokens"], decode_gpus, percentiles,
                        prefill_gpus))
    out["decode_gpus"] = decode_gpus
    out["prefill_gpus"] = prefill_gpus
    out["steps"] = int(len(steps))
    issued = requests.arrival_s[requests.status != "not_issued"]   # open loop: the overload rule's arrival span
    out["arrival_span_s"] = float(issued.max() - issued.min()) if len(issued) else 0.0
    out["mean_requests_in_system"] = mean_in_system
    if window is not None:
        start, end = window
        issued = (requests.arrival_s >= start) & (requests.arrival_s <= end)
        measured = done[window_mask(done, window)]
        step_end = steps.start_s + steps.duration_s
        in_win = (step_end > start) & (step_end <= end)
        first_in = int(((requests.first_token_s > start) & (requests.first_token_s <= end)).sum())
        tokens = int(steps.emitted_tokens[in_win].sum() + first_in)
        w: dict[str, Any] = {"start_s": float(start), "end_s": float(end), "requests_issued": int(issued.sum()),
                             "output_tokens": tokens}
        w.update(_figures(measured, steps[in_win], np.zeros(0) if window_itl_s is None else window_itl_s,
                          float(end - start), tokens, decode_gpus, percentiles, prefill_gpus))
        out["window"] = w
    return out


def parse_goodput(specs: Iterable[str]) -> dict[str, float]:
    """``--goodput`` limits: ``["ttft:200 tpot:50", "e2el:3000"]`` -> ``{"ttft": 200.0, "tpot": 50.0, "e2el": 3000.0}``.

    Each item holds ``NAME:MS`` pairs separated by spaces or commas; NAME is ``ttft``, ``tpot`` or ``e2el``;
    MS a finite number of milliseconds > 0.

    Raises:
        SpecsimInputError: an unknown name, a value that is not a number > 0, or a name given twice.
    """
    out: dict[str, float] = {}
    for item in specs:
        for part in item.replace(",", " ").split():
            name, sep, ms = part.partition(":")
            name = name.strip().lower()
            try:
                val = float(ms)
            except ValueError:
                val = float("nan")
            if not sep or name not in GOODPUT_METRICS or not (np.isfinite(val) and val > 0) or name in out:
                raise SpecsimInputError("--goodput", None, "goodput",
                                        "NAME:MS pairs with NAME one of ttft, tpot, e2el (each once) and MS a "
                                        "number of milliseconds > 0, e.g. --goodput 'ttft:200 tpot:50'",
                                        repr(part))
            out[name] = val
    return out


def check_slos(slos_ms: Any) -> dict[str, float]:
    """Latency limits as the Python API takes them (``{"ttft"|"tpot"|"e2el": ms}``, or None for none), checked
    as :func:`parse_goodput` checks ``--goodput`` (a misspelt key failed with a KeyError deep inside).

    Raises:
        SpecsimInputError: not a dict, an unknown key, or a value that is not a finite number of ms > 0.
    """
    if slos_ms is None:
        return {}
    if not isinstance(slos_ms, dict):
        raise SpecsimInputError(None, None, "slos_ms", "a dict {'ttft'|'tpot'|'e2el': milliseconds}",
                                type(slos_ms).__name__)
    out = {}
    for key, value in slos_ms.items():
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value) and value > 0
        if key not in GOODPUT_METRICS or not ok:
            raise SpecsimInputError(None, None, f"slos_ms[{key!r}]", "keys ttft, tpot, e2el with limits in "
                                    "milliseconds > 0 (e.g. {'ttft': 200, 'tpot': 50})", repr(value))
        out[key] = float(value)
    return out


def good_requests(requests: pd.DataFrame, slos_ms: dict[str, float]) -> np.ndarray:
    """(n,) bool: requests meeting every limit of ``slos_ms`` (vLLM's rule; a one-token request's TPOT is 0).

    Args:
        requests: :func:`request_frame` rows (``ttft_s``, ``tpot_s``, ``e2el_s`` in seconds).
        slos_ms: ``{"ttft"|"tpot"|"e2el": limit in ms}`` (:func:`parse_goodput`).
    """
    good = np.ones(len(requests), bool)
    for name, limit in slos_ms.items():
        v = requests[GOODPUT_METRICS[name]].to_numpy(float)
        if name == "tpot":
            v = np.where(requests.output_tokens.to_numpy() > 1, v, 0.0)
        good &= at_most(v * 1e3, limit) if v.size else np.zeros(0, bool)
    return good


def add_goodput(summary: dict[str, Any], requests: pd.DataFrame, slos_ms: dict[str, float]) -> dict[str, Any]:
    """Add ``goodput_slos_ms``, ``good_requests`` and ``request_goodput`` (req/s) to ``summary`` (and its window).

    The whole run counts the completed requests over ``duration_s``; the window block the requests that complete
    inside the window (:func:`window_mask`) over the window's ``duration_s``. Returns ``summary`` (changed in place).
    """
    done = requests[requests.status == "completed"]
    scopes = [(summary, done)]
    if summary.get("window"):
        w = summary["window"]
        scopes.append((w, done[window_mask(done, (w["start_s"], w["end_s"]))]))
    for block, sub in scopes:
        n_good = int(good_requests(sub, slos_ms).sum())
        block["goodput_slos_ms"] = dict(slos_ms)
        block["good_requests"] = n_good
        block["request_goodput"] = n_good / block["duration_s"] if block["duration_s"] > 0 else None
    return summary


def domain_breakdown(requests: pd.DataFrame, measured_mask: pd.Series) -> dict[str, dict[str, Any]]:
    """Per-domain metrics of the measured requests: count, TTFT, TPS/user, acceptance length, acceptance rate.

    The acceptance length is pooled over request-steps as at the top level (:func:`_figures`; DESIGN.md
    "Acceptance statistics": sum over sum): (accepted drafts + decode steps) / decode steps of the domain's
    requests. The token a finished recompute emits after a preemption is no decode step and is not counted,
    so with a single domain the figure equals the top level's, and ``none`` gives exactly 1.0.
    """
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
            "mean_acceptance_length": float((sub.accepted_drafts.sum() + steps) / steps) if steps else None,
            "acceptance_rate": float(sub.accepted_drafts.sum() / ver) if ver else None,
        }
    return out


#: Thrashing: a run warns when its recomputed tokens (prefill redone after KV preemptions) exceed this share of
#: its output tokens. At 25% a quarter of the useful work is paid again, which a serving engineer would fix
#: (fewer users per replica, more KV blocks) rather than report; vLLM's scheduler logs each preemption
#: for the same reason (docs.vllm.ai, "Preemption" in the optimization guide).
THRASHING_SHARE = 0.25


#: Prefill-bound: a run says the prefill pool, not decode, limits its load when its requests waited for a
#: disaggregated prefill instance more than this share of their mean TTFT (and at least
#: :data:`PREFILL_WAIT_FLOOR_MS`): the load's TPS/user and throughput then measure that queue, not the policy.
PREFILL_WAIT_SHARE = 0.5
PREFILL_WAIT_FLOOR_MS = 10.0


def prefill_bound(wait_ms: float | None, ttft_ms: float | None) -> bool:
    """Whether a mean prefill wait of ``wait_ms`` in a mean TTFT of ``ttft_ms`` (ms) is prefill-bound
    (:data:`PREFILL_WAIT_SHARE`); False where either is missing (colocated prefill: no wait)."""
    ok = wait_ms is not None and ttft_ms is not None and np.isfinite(wait_ms) and np.isfinite(ttft_ms)
    return bool(ok and wait_ms >= PREFILL_WAIT_FLOOR_MS and wait_ms > PREFILL_WAIT_SHARE * ttft_ms)


#: Queued: a closed-loop point where at least this share of its users (and at least one) wait on average to be
#: admitted to a replica (its KV pool or max_num_seqs full): their TTFT holds that queue while TPS/user counts decode
#: speed only, so a TPS/user tier met there can come with seconds to the first token (a fresh user was recommended
#: a point with 35 of 96 users waiting and a median TTFT of 1.7 s). More users there add waiting, not throughput.
QUEUED_SHARE = 0.1


def queued(waiting: float | None, users: float | None) -> bool:
    """Whether ``waiting`` requests queued for admission on average (``mean_waiting_requests``) are at least
    :data:`QUEUED_SHARE` of a closed loop's ``users`` and at least one; False where either is missing."""
    ok = waiting is not None and users is not None and np.isfinite(waiting) and np.isfinite(users)
    return bool(ok and waiting >= 1.0 and waiting >= QUEUED_SHARE * float(users))


#: A closed-loop point whose users have fewer than this share of themselves in the system on average spends most
#: of its time in the users' think time between turns (a session trace): its TPS/user and throughput measure the
#: users' pace, not the server's capacity (a fresh user's multi-turn sweep had 0.5 of 8 users in the system).
BUSY_SHARE = 0.5


def users_in_system(request_throughput: float | None, mean_e2el_ms: float | None,
                    resident: float | None = None) -> float:
    """Requests in the system on average: by Little's law, ``request_throughput`` (req/s) x ``mean_e2el_ms`` / 1000,
    or ``resident`` (``mean_running_requests + mean_waiting_requests``, counted over the steps) where that is
    larger: Little's law over a short window's few completed requests can read half the users (a fresh user's
    96-user run read 45 while 96 were running). NaN where neither is given. In a closed loop without think time it
    is about the number of users."""
    ok = request_throughput is not None and mean_e2el_ms is not None
    little = float(request_throughput) * float(mean_e2el_ms) / 1000.0 if ok else float("nan")
    if resident is not None and np.isfinite(resident) and not little >= resident:
        return float(resident)
    return little


def resident_requests(s: dict) -> float | None:
    """``mean_running_requests + mean_waiting_requests`` of a summary (or its window), None where not kept."""
    run, wait = s.get("mean_running_requests"), s.get("mean_waiting_requests")
    return None if run is None else float(run) + float(wait or 0.0)


def think_bound(users: float | None, request_throughput: float | None, mean_e2el_ms: float | None,
                resident: float | None = None) -> bool:
    """Whether a closed loop of ``users`` keeps fewer than :data:`BUSY_SHARE` of them in the system
    (:func:`users_in_system`); False where a figure is missing."""
    busy = users_in_system(request_throughput, mean_e2el_ms, resident)
    return bool(users and np.isfinite(busy) and busy < BUSY_SHARE * float(users))


def think_bound_warning(s: dict) -> str | None:
    """The think-bound warning of closed-loop run summary ``s`` (its measurement window's figures), or None."""
    load, w = s.get("load") or {}, s.get("window") or s
    users = load.get("concurrency") if load.get("mode") == "closed" else None
    if not think_bound(users, w.get("request_throughput"), w.get("mean_e2el_ms"), resident_requests(w)):
        return None
    busy = users_in_system(w.get("request_throughput"), w.get("mean_e2el_ms"), resident_requests(w))
    return (f"warning: think-bound: {busy:.1f} of the {users} users had a request in the system on average "
            "(request throughput x mean E2EL, or the replicas' running and waiting requests); the rest were between "
            "turns, so TPS/user and throughput measure the users' think time, not the server's capacity: more users "
            "give the server's answer")


def queued_warning(s: dict) -> str | None:
    """The queueing warning of closed-loop run summary ``s`` (its window's ``mean_waiting_requests`` against its
    users, :func:`queued`), or None. Where the first token is stamped at a disaggregated prefill
    (``admission_wait_in_tpot``) the wait shows in TPOT and TPS/user instead of TTFT, and the warning says so
    (:data:`QUEUE_SHOWS`; :func:`decode_queue_notice` too)."""
    load, w = s.get("load") or {}, s.get("window") or s
    users = load.get("concurrency") if load.get("mode") == "closed" else None
    waiting = w.get("mean_waiting_requests")
    if not queued(waiting, users):
        return None
    return (f"warning: requests queue: {waiting:.1f} of the {users} users waited to be admitted on average "
            f"({w.get('mean_running_requests') or 0:.1f} running; the KV pool or max_num_seqs full), so "
            f"{QUEUE_SHOWS[bool(s.get('admission_wait_in_tpot'))]}; more users here add waiting, not throughput")


#: Where an admission queue shows, by whether the first token is stamped before admission (a disaggregated
#: prefill with ``prefill.first_token = "prefill"``: the summary's ``admission_wait_in_tpot``).
QUEUE_SHOWS = {False: "TTFT holds that queue while TPS/user counts decode speed only",
               True: "TPOT and TPS/user hold that queue (the first token is stamped at the end of the "
                     "disaggregated prefill, before admission: prefill.first_token = \"prefill\") and TTFT does not"}


#: The share of issued requests left unfinished by a horizon above which a run's whole-run figures are flagged.
UNFINISHED_SHARE = 0.10


def horizon_warning(s: dict) -> str | None:
    """A warning when a horizon (``max_sim_s``) left more than :data:`UNFINISHED_SHARE` of run summary ``s``'s
    issued requests unfinished: its whole-run throughput and latencies count completed requests only, which
    favours the short ones (a fresh user's 14x "gain" of dspark over none at 78% unfinished); else None."""
    unfinished = s.get("unfinished") or 0
    issued = unfinished + (s.get("completed") or 0)
    if not issued or unfinished <= UNFINISHED_SHARE * issued:
        return None
    return (f"warning: {unfinished:,} of the {issued:,} issued requests ({unfinished / issued:.0%}) were still "
            "running at the horizon (--max-sim-s): the whole-run throughput and latencies count completed requests "
            "only, which favours the short ones; compare policies on runs to completion, or on a closed loop's "
            "window")


def thrashing_warning(s: dict) -> str | None:
    """The thrashing warning of run summary ``s``, or None when recomputed tokens stay within
    :data:`THRASHING_SHARE` of ``total_output_tokens``."""
    recomputed, output = s.get("recomputed_tokens") or 0, s.get("total_output_tokens") or 0
    if output <= 0 or recomputed <= THRASHING_SHARE * output:
        return None
    return (f"warning: thrashing: {recomputed:,} tokens recomputed after {s.get('num_preemptions', 0):,} "
            f"preemptions against {output:,} output tokens ({recomputed / output:.0%}, over the "
            f"{THRASHING_SHARE:.0%} limit): the KV cache is too small for this load (fewer users or more KV blocks)")


def decode_queue_notice(s: dict, first_token: str | None) -> str | None:
    """One line when a disaggregated run's prefilled requests queued for a decode slot (the KV pool or
    ``max_num_seqs`` full: ``mean_waiting_requests`` of ``s``'s window, else of the whole run, at least one) while
    the first token is stamped at the end of prefill (``first_token`` ``"prefill"``; None for colocated prefill):
    that wait then lengthens TPOT, not TTFT, so TTFT reads low next to an engine that counts it. Else None."""
    w = s.get("window") if isinstance(s.get("window"), dict) else s
    waiting = w.get("mean_waiting_requests")
    if first_token != "prefill" or not waiting or waiting < 1.0:
        return None
    return (f"{waiting:.1f} prefilled requests waited for a decode slot on average (the KV pool or max_num_seqs "
            "full); the first token is stamped at the end of prefill (prefill.first_token = \"prefill\"), so their "
            "wait lengthens TPOT, not TTFT: prefill.first_token = \"decode-step\" counts it in TTFT as vLLM's "
            "disaggregated path does, and prefill.mode = \"colocated\" (vLLM's default) queues them before prefill")
