"""Results in the ecosystem's words: a ``vllm bench serve`` result writer and readers of measured results.

Writer
    :func:`vllm_result` turns a :class:`~specsim.simulation.SimulationResult` into the JSON object
    ``vllm bench serve --save-result`` writes, so dashboards and scripts made for vLLM read a simulated
    run unchanged (``specsim run --result-format vllm``). The key set is that of vLLM's
    ``vllm/benchmarks/serve.py`` as of 2026 (read at main-branch commit 009e6d4a, after the v0.11
    releases; the exact release tag was not checked; a file saved without ``--save-detailed``):
    ``date, endpoint_type, backend, label, model_id, tokenizer_id, num_prompts, request_rate,
    burstiness, max_concurrency, duration, completed, failed, total_input_tokens,
    total_output_tokens, request_throughput, request_goodput, output_throughput,
    total_token_throughput, latencies, queue_times, max_output_tokens_per_s,
    max_concurrent_requests, rtfx``, the ``spec_decode_*`` keys vLLM adds when the server reports
    speculative decoding, and ``mean_/median_/std_/p<P>_`` ``ttft, tpot, itl, e2el`` ``_ms`` for the
    percentiles 50, 90, 99 and 99.9 (as ``vllm bench serve --percentile-metrics ttft,tpot,itl,e2el
    --metric-percentiles 50,90,99,99.9`` writes them: ``p50_ttft_ms`` ... ``p99.9_ttft_ms``).

Readers: the readers of measured results (vLLM, guidellm) and :class:`MeasuredPoint` live in
:mod:`specsim.hardware.measured` (fits of the hardware model read them too) and are re-exported here.

Mapping of a simulated run onto vLLM's fields (the choices a reader should know):

* ``completed`` = the completed requests of the whole run (a closed-loop window's figures stay in the summary);
  ``failed`` = every other prompt, so ``completed + failed == num_prompts`` as in vLLM's ``serve.py``
  (``failed`` counts the outputs that did not succeed): the unservable requests (a real server rejects them)
  and, under a horizon (``--max-sim-s``), the requests still running and those never issued (a client that
  stops at the horizon gets no successful output for them); ``--save-detailed``'s ``errors`` names each
  one's status (``unservable``, ``unfinished``, ``not_issued``). ``queue_times`` are 0 (specsim
  users issue a request as soon as their previous one completes, with no client-side queue).
* ``request_rate``: ``"inf"`` in closed loop (vLLM's closed loop is ``--request-rate inf
  --max-concurrency N``); in open loop the replayed mean rate (N - 1) / arrival span, and
  ``burstiness`` = 1 / CV^2 of the inter-arrival gaps (vLLM's gamma shape; 1 = Poisson; None for
  evenly spaced arrivals, CV 0, which no finite shape describes).
* TTFT, TPOT and E2EL statistics are computed here from the measured requests (numpy: mean, median,
  population std, linear percentiles, as vLLM does); ITL statistics are taken from the run summary,
  ``None`` where the summary has no such key.
* ``max_output_tokens_per_s`` and ``max_concurrent_requests``: the largest count of emitted tokens /
  requests in flight over 1-second buckets from the first arrival, as vLLM buckets them.
* ``spec_decode_acceptance_rate`` is a percentage and ``spec_decode_acceptance_length`` = 1 +
  accepted / drafts, as vLLM computes them from the server's counters; a request-step is one draft.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from specsim.errors import SpecsimInputError
# The readers of measured results live in specsim.hardware.measured; their names stay importable from here.
from specsim.hardware.measured import (GUIDELLM_LATENCIES, GUIDELLM_PERCENTILES, MEASURED_FILE,  # noqa: F401
                                       MEASURED_FORMAT, MeasuredPoint, load_measured, measured_for_plot,
                                       read_guidellm_result, read_results, read_vllm_result, save_measured)

VLLM_PERCENTILES = (50.0, 90.0, 99.0, 99.9)
VLLM_METRICS = ("ttft", "tpot", "itl", "e2el")
#: Keys a ``vllm bench serve --save-result`` file (serve.py at commit 009e6d4a) has before the metric statistics.
VLLM_HEAD_KEYS = ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
                  "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
                  "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
                  "output_throughput", "total_token_throughput", "latencies", "queue_times",
                  "max_output_tokens_per_s", "max_concurrent_requests", "rtfx")


def _p_word(p: float) -> str:
    """vLLM's percentile key word: 99 -> ``99``, 99.9 -> ``99.9``."""
    return str(int(p)) if int(p) == p else str(p)


def _stats_ms(name: str, values_s: np.ndarray, percentiles: Sequence[float]) -> dict[str, float | None]:
    """mean/median/std/p<P> of ``values_s`` in ms under vLLM's key names (None for an empty array)."""
    v = np.asarray(values_s, dtype=np.float64) * 1e3
    ok = v.size > 0
    out = {f"mean_{name}_ms": float(v.mean()) if ok else None,
           f"median_{name}_ms": float(np.median(v)) if ok else None,
           f"std_{name}_ms": float(v.std()) if ok else None}
    for p in percentiles:
        out[f"p{_p_word(p)}_{name}_ms"] = float(np.percentile(v, p)) if ok else None
    return out


def _measured_mask(summary: dict, requests) -> np.ndarray:
    """(N,) bool: the requests the summary's top-level figures cover: every completed request (the whole run, as
    ``vllm bench serve`` reports a benchmark; a closed-loop run's window figures are in ``summary["window"]``)."""
    return (requests.status == "completed").to_numpy().copy()


def _peak_per_second(starts: np.ndarray, ends: np.ndarray, weights: np.ndarray, t0: float) -> float:
    """Largest sum of ``weights`` over 1-second buckets from ``t0``, each item in the buckets [start, end] spans."""
    if starts.size == 0:
        return 0.0
    first = np.floor(starts - t0).astype(np.int64)
    last = np.floor(ends - t0).astype(np.int64)
    delta = np.zeros(int(last.max()) + 2)
    np.add.at(delta, first, weights)
    np.add.at(delta, last + 1, -weights)
    return float(np.cumsum(delta).max())


def vllm_result(result, *, percentiles: Sequence[float] = VLLM_PERCENTILES, label: str | None = None,
                model_id: str | None = None, detailed: bool = False) -> dict[str, Any]:
    """The ``vllm bench serve --save-result`` JSON object of a simulated run (mapping in the module docstring).

    Args:
        result: a :class:`~specsim.simulation.SimulationResult` (its ``summary``, ``requests`` and
            ``steps``; ``step_log`` when present gives ``spec_decode_per_position_acceptance_rates``).
        percentiles: percentiles in (0, 100] written as ``p<P>_<metric>_ms``.
        label: vLLM's ``label`` (default: the policy name).
        model_id: vLLM's ``model_id`` and ``tokenizer_id`` (default: the profile metadata's ``model``,
            else ``"specsim"``).
        detailed: add the per-request lists of ``--save-detailed`` (``input_lens``, ``output_lens``,
            ``ttfts``, ``start_times``, ``generated_texts``, ``errors``; ``itls`` is left out: the run
            does not keep per-request emission times).

    Returns:
        A JSON-serialisable dict (plain Python numbers, None where undefined).

    Raises:
        SpecsimInputError: a percentile outside (0, 100].
    """
    for p in percentiles:
        if not 0 < p <= 100:
            raise SpecsimInputError(None, None, "percentiles", "values in (0, 100]", repr(p))
    s, req, steps = result.summary, result.requests, result.steps
    meas = req[_measured_mask(s, req)]
    load = s.get("load", {})
    closed = load.get("mode") == "closed"
    meta = (s.get("provenance") or {}).get("profile_metadata") or {}
    model = model_id or meta.get("model") or "specsim"
    arrivals = np.sort(req.arrival_s.to_numpy())
    gaps = np.diff(arrivals)
    cv = gaps.std() / gaps.mean() if gaps.size and gaps.mean() > 0 else 0.0
    duration = float(s["duration_s"])
    out_tput = s.get("output_throughput")
    out: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"), "endpoint_type": "specsim", "backend": "specsim",
        "label": label or s.get("policy"), "model_id": model, "tokenizer_id": model, "num_prompts": int(s["total"]),
        "request_rate": "inf" if closed or arrivals[-1] <= arrivals[0]
        else float((arrivals.size - 1) / (arrivals[-1] - arrivals[0])),
        "burstiness": 1.0 if closed else (float(1.0 / cv**2) if cv > 0 else None),
        "max_concurrency": int(load["concurrency"]) if closed else None,
        "duration": duration, "completed": int(s["completed"]),
        "failed": int(s["total"]) - int(s["completed"]),
        "total_input_tokens": int(s["total_input_tokens"]), "total_output_tokens": int(s["total_output_tokens"]),
        "request_throughput": s.get("request_throughput"), "request_goodput": s.get("request_goodput"),
        "output_throughput": out_tput,
        "total_token_throughput": (out_tput + s["total_input_tokens"] / duration) if out_tput is not None
        and duration > 0 else None,
        "latencies": [float(x) for x in meas.e2el_s],
        "queue_times": [0.0] * len(meas),
    }
    t0 = float(arrivals[0])
    step_end = (steps.start_s + steps.duration_s).to_numpy()
    out["max_output_tokens_per_s"] = _peak_per_second(step_end, step_end, steps.emitted_tokens.to_numpy(float), t0)
    out["max_concurrent_requests"] = int(_peak_per_second(meas.arrival_s.to_numpy(), meas.done_s.to_numpy(),
                                                          np.ones(len(meas)), t0))
    out["rtfx"] = 0.0
    out.update(_spec_decode(s, steps, getattr(result, "step_log", None)))
    multi = meas[meas.output_tokens > 1]
    out.update(_stats_ms("ttft", meas.ttft_s.to_numpy(), percentiles))
    out.update(_stats_ms("tpot", multi.tpot_s.to_numpy(), percentiles))
    for stat in ("mean", "median", "std", *(f"p{_p_word(p)}" for p in percentiles)):
        out[f"{stat}_itl_ms"] = s.get(f"{stat}_itl_ms")
    out.update(_stats_ms("e2el", meas.e2el_s.to_numpy(), percentiles))
    if detailed:
        out.update(input_lens=[int(x) for x in req.prompt_tokens], output_lens=[int(x) for x in req.output_tokens],
                   ttfts=[None if math.isnan(x) else float(x) for x in req.ttft_s],
                   start_times=[float(x) for x in req.arrival_s], generated_texts=[""] * len(req),
                   errors=["" if st == "completed" else st for st in req.status])
    return out


def _spec_decode(s: dict, steps, step_log) -> dict[str, Any]:
    """vLLM's ``spec_decode_*`` keys over every step of the run, as the summary's top level (empty when nothing
    was verified)."""
    drafts = int(steps.num_decode.sum())
    draft_tokens = int(steps.verified_drafts.sum())
    accepted = int(steps.accepted_drafts.sum())
    if draft_tokens == 0 or drafts == 0:
        return {}
    per_pos: list[float] = []
    if step_log is not None and len(step_log):
        gamma = int(step_log.gamma.max())
        acc = step_log.num_accepted.to_numpy()
        per_pos = [float((acc >= k).sum() / len(step_log)) for k in range(1, gamma + 1)]
    return {"spec_decode_acceptance_rate": 100.0 * accepted / draft_tokens,
            "spec_decode_acceptance_length": 1.0 + accepted / drafts,
            "spec_decode_num_drafts": drafts, "spec_decode_draft_tokens": draft_tokens,
            "spec_decode_accepted_tokens": accepted, "spec_decode_per_position_acceptance_rates": per_pos}


def write_vllm_result(result, path, **kwargs) -> Path:
    """Write :func:`vllm_result` (``kwargs`` passed on) as one JSON object, as vLLM does; returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(vllm_result(result, **kwargs)) + "\n")
    return p


def _model_key(name: str) -> str:
    """A model name reduced for comparison: the part after the last ``/``, lower case, without a trailing
    ``-hf``, ``-instruct``, ``-chat`` or ``-it`` (``meta-llama/Llama-2-7b-chat-hf`` -> ``llama-2-7b``)."""
    key = str(name).rsplit("/", 1)[-1].lower()
    for suffix in ("-hf", "-instruct", "-chat", "-it"):
        key = key.removesuffix(suffix)
    return key


def other_model_note(points, sweep_dir: str | Path) -> str | None:
    """A note when measured ``points`` (their vLLM ``model_id``) name another model than the one the sweep in
    ``sweep_dir`` simulates (its scenario's profile metadata ``model``), so an overlay compares unlike with
    like; None when they agree, or either side names no model, or ``sweep_dir`` holds no sweep."""
    from specsim.analysis.sweep_records import read_manifest
    from specsim.hardware.profile import resolve_profile

    prof = (read_manifest(sweep_dir).get("scenario") or {}).get("profile") or {}
    measured = sorted({str(p.metrics["model_id"]) for p in points if p.metrics.get("model_id")})
    if not prof.get("name") or not measured:
        return None
    try:
        simulated = (resolve_profile(prof["name"], prof.get("lookup")).metadata or {}).get("model")
    except SpecsimInputError:
        return None
    other = [m for m in measured if simulated and _model_key(m) != _model_key(simulated)]
    if not other:
        return None
    return (f"the measured points are of {', '.join(other)}, the sweep in {sweep_dir} simulates {simulated} "
            f"(profile {prof['name']}): the overlay compares different models")
