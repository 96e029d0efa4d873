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

Readers (one per format, shared by every command that takes measured results)
    :func:`read_vllm_result` reads ``vllm bench serve --save-result`` files (one JSON object, or one
    per line with ``--append-result``); :func:`read_guidellm_result` reads guidellm's JSON report
    (``{"benchmarks": [...]}``, each benchmark's ``metrics`` holding status distributions such as
    ``time_to_first_token_ms.successful.mean`` and ``.percentiles.p99``). Each returns
    :class:`MeasuredPoint` objects: the measured run on the frontier's axes (TPS/user and output
    throughput per GPU) plus its metrics under vLLM's names. :func:`read_results` picks the reader
    from the content.

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
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from specsim.errors import SpecsimInputError

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


# ---------------------------------------------------------------------------------------------
# Measured points


@dataclass
class MeasuredPoint:
    """One measured benchmark run, on the frontier's axes.

    Attributes:
        source: the file it came from; tool: ``"vllm"`` or ``"guidellm"``; label: the legend text.
        load: the load in words (``"concurrency 64"``, ``"rate 4 req/s"``, ``"throughput"``).
        gpus: GPUs of the measured deployment (>= 1), for the per-GPU throughput.
        tps_per_user: tokens/s per user (x axis), or None when the file has no TPOT.
        tps_per_user_basis: ``"per-request"`` (mean over requests of (output - 1) / (E2EL - TTFT),
            as the simulator's mean_tps_per_user) or ``"1000 / mean TPOT"`` (a summary file; a lower
            bound of the per-request mean by Jensen's inequality).
        output_throughput: output tokens/s of the whole deployment, or None.
        metrics: the run's figures under vLLM's names (``mean_ttft_ms``, ``p99_tpot_ms``,
            ``request_throughput``, ``completed``, ...), those the file has.
    """

    source: str
    tool: str
    label: str
    load: str
    gpus: int
    tps_per_user: float | None
    tps_per_user_basis: str
    output_throughput: float | None
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def throughput_per_gpu(self) -> float | None:
        """Output tokens/s per GPU (y axis), or None."""
        return None if self.output_throughput is None else self.output_throughput / self.gpus

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (with ``throughput_per_gpu``)."""
        return {**asdict(self), "throughput_per_gpu": self.throughput_per_gpu}


def _num(v) -> float | None:
    """A finite float, or None (JSON null, text, NaN, a missing key)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _json_objects(path: Path) -> list[dict]:
    """The JSON object of a file, or its objects one per line (vLLM's --append-result)."""
    src = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecsimInputError(src, None, None, "a readable UTF-8 file", str(e)) from None
    try:
        obj = json.loads(text)
        objs = obj if isinstance(obj, list) else [obj]
    except json.JSONDecodeError:
        objs = []
        for i, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    objs.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise SpecsimInputError(src, i, None, "a JSON object (or one per line)",
                                            f"malformed JSON ({e.msg})") from None
    bad = next((o for o in objs if not isinstance(o, dict)), None)
    if not objs or bad is not None:
        raise SpecsimInputError(src, None, None, "a JSON object (or one per line)",
                                "nothing" if not objs else type(bad).__name__)
    return objs


def _check_gpus(gpus: int) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise SpecsimInputError("--gpus", None, "gpus", "an int >= 1", repr(gpus))
    return gpus


def read_vllm_result(path, gpus: int = 1, label: str | None = None) -> list[MeasuredPoint]:
    """Read a ``vllm bench serve --save-result`` file: one point per JSON object.

    TPS/user is per-request when the file has ``--save-detailed`` lists (``ttfts``, ``output_lens``
    and ``latencies``, or ``itls`` to sum), else 1000 / ``mean_tpot_ms``. Throughput is
    ``output_throughput``.

    Args:
        path: the JSON file.
        gpus: GPUs of the measured deployment.
        label: legend text (default: ``measured: <label or model_id> (<load>)``).

    Raises:
        SpecsimInputError: an unreadable file, malformed JSON, or an object without
            ``output_throughput`` (naming the 1-based object index as the line).
    """
    path, gpus = Path(path), _check_gpus(gpus)
    points = []
    for k, obj in enumerate(_json_objects(path), start=1):
        if _num(obj.get("output_throughput")) is None:
            raise SpecsimInputError(str(path), k, "output_throughput", "a number (a vllm bench serve result)",
                                    repr(obj.get("output_throughput")))
        conc = obj.get("max_concurrency")
        rate = obj.get("request_rate")
        load = (f"concurrency {conc}" if conc not in (None, "") else
                f"rate {rate} req/s" if rate not in (None, "inf") else "request rate inf")
        tps, basis = _vllm_tps_per_user(obj)
        metrics = {k2: v for k2, v in obj.items() if not isinstance(v, (list, dict))}
        name = obj.get("label") or obj.get("model_id") or path.stem
        points.append(MeasuredPoint(str(path), "vllm", label or f"measured: {name} ({load})", load, gpus, tps,
                                    basis, _num(obj["output_throughput"]), metrics))
    return points


def _vllm_tps_per_user(obj: dict) -> tuple[float | None, str]:
    """(TPS/user, basis) of one vLLM result object."""
    ttfts, outs = obj.get("ttfts"), obj.get("output_lens")
    lats = obj.get("latencies")
    if lats is None and isinstance(obj.get("itls"), list) and isinstance(ttfts, list):
        lats = [t + sum(i) if isinstance(t, (int, float)) and isinstance(i, list) else None
                for t, i in zip(ttfts, obj["itls"])]
    if isinstance(ttfts, list) and isinstance(outs, list) and isinstance(lats, list):
        rows = [(_num(t), o, _num(e)) for t, o, e in zip(ttfts, outs, lats)]
        tps = [(o - 1) / (e - t) for t, o, e in rows
               if t is not None and e is not None and isinstance(o, int) and o > 1 and e > t]
        if tps:
            return float(np.mean(tps)), "per-request"
    tpot = _num(obj.get("mean_tpot_ms"))
    return (1000.0 / tpot if tpot else None), "1000 / mean TPOT"


#: guidellm metric -> (vLLM metric word, scale to ms).
GUIDELLM_LATENCIES = {"time_to_first_token_ms": ("ttft", 1.0), "time_per_output_token_ms": ("tpot", 1.0),
                      "inter_token_latency_ms": ("itl", 1.0), "request_latency": ("e2el", 1000.0)}
GUIDELLM_PERCENTILES = {"p50": "50", "p90": "90", "p95": "95", "p99": "99", "p999": "99.9"}


def _guidellm_stat(metrics: dict, name: str, stat: str = "mean") -> float | None:
    """``metrics[name].successful[stat]`` (or ``.percentiles[stat]``), None where absent."""
    dist = (metrics.get(name) or {}).get("successful") or {}
    if stat in GUIDELLM_PERCENTILES:
        return _num((dist.get("percentiles") or {}).get(stat))
    return _num(dist.get(stat))


def _guidellm_load(bench: dict) -> str:
    """The load of one guidellm benchmark in words, from its strategy."""
    for holder in (bench.get("args"), bench.get("config"), bench):
        strat = (holder or {}).get("strategy") if isinstance(holder, dict) else None
        if isinstance(strat, dict):
            kind = strat.get("type_") or strat.get("type") or "?"
            if strat.get("streams") is not None:
                return f"concurrency {strat['streams']}"
            if strat.get("rate") is not None:
                return f"{kind} rate {strat['rate']} req/s"
            return str(kind)
    return "unknown load"


def read_guidellm_result(path, gpus: int = 1, label: str | None = None) -> list[MeasuredPoint]:
    """Read a guidellm JSON report: one point per entry of ``benchmarks``.

    TPS/user = 1000 / ``time_per_output_token_ms.successful.mean``; throughput =
    ``output_tokens_per_second.successful.mean``; TTFT, TPOT, ITL and E2EL (``request_latency``, s ->
    ms) mean, median and p50/p90/p95/p99/p99.9 go into ``metrics`` under vLLM's names.

    Raises:
        SpecsimInputError: an unreadable file, malformed JSON, no ``benchmarks`` list, or a benchmark
            without ``metrics`` (naming its 1-based index as the line).
    """
    path, gpus = Path(path), _check_gpus(gpus)
    src = str(path)
    report = _json_objects(path)[0]
    benches = report.get("benchmarks")
    if not isinstance(benches, list) or not benches:
        raise SpecsimInputError(src, None, "benchmarks", "a non-empty list (a guidellm JSON report)",
                                repr(type(benches).__name__))
    points = []
    for k, bench in enumerate(benches, start=1):
        m = bench.get("metrics") if isinstance(bench, dict) else None
        if not isinstance(m, dict):
            raise SpecsimInputError(src, k, "metrics", "an object of status distributions", "none")
        metrics: dict[str, Any] = {
            "request_throughput": _guidellm_stat(m, "requests_per_second"),
            "output_throughput": _guidellm_stat(m, "output_tokens_per_second"),
            "completed": _num(((m.get("request_totals") or {}).get("successful")))
            or _guidellm_stat(m, "request_latency", "count"),
        }
        for gname, (word, scale) in GUIDELLM_LATENCIES.items():
            for stat in ("mean", "median", *GUIDELLM_PERCENTILES):
                v = _guidellm_stat(m, gname, stat)
                key = stat if stat in ("mean", "median") else f"p{GUIDELLM_PERCENTILES[stat]}"
                metrics[f"{key}_{word}_ms"] = None if v is None else v * scale
        tpot = metrics["mean_tpot_ms"]
        load = _guidellm_load(bench)
        points.append(MeasuredPoint(src, "guidellm", label or f"measured: guidellm ({load})", load, gpus,
                                    1000.0 / tpot if tpot else None, "1000 / mean TPOT",
                                    metrics["output_throughput"], metrics))
    return points


def read_results(paths: Sequence, gpus: int = 1, label: str | None = None) -> list[MeasuredPoint]:
    """Read measured results of any supported tool: guidellm when the JSON has ``benchmarks``, else vLLM.

    Raises:
        SpecsimInputError: as the readers do, and for a file that is neither (naming what it has).
    """
    points: list[MeasuredPoint] = []
    for p in paths:
        path = Path(p)
        first = _json_objects(path)[0]
        if "benchmarks" in first:
            points += read_guidellm_result(path, gpus, label)
        elif "output_throughput" in first or "request_throughput" in first:
            points += read_vllm_result(path, gpus, label)
        else:
            raise SpecsimInputError(str(path), None, None, "a vllm bench serve result (output_throughput) or a "
                                    "guidellm report (benchmarks)", f"keys {sorted(first)[:8]}")
    return points


MEASURED_FORMAT = "specsim-measured-points-v1"


def save_measured(points: Sequence[MeasuredPoint], path) -> Path:
    """Write measured points as JSON (``{"format": ..., "points": [...]}``); returns the path."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"format": MEASURED_FORMAT, "points": [x.to_dict() for x in points]}, indent=1) + "\n")
    return p


def load_measured(path) -> list[MeasuredPoint]:
    """Read a file written by :func:`save_measured`.

    Raises:
        SpecsimInputError: not such a file (naming what was found).
    """
    src = str(path)
    obj = _json_objects(Path(path))[0]
    if obj.get("format") != MEASURED_FORMAT or not isinstance(obj.get("points"), list):
        raise SpecsimInputError(src, None, "format", f"{MEASURED_FORMAT!r} (specsim import-results --out)",
                                repr(obj.get("format")))
    names = {f for f in MeasuredPoint.__dataclass_fields__}
    try:
        return [MeasuredPoint(**{k: v for k, v in d.items() if k in names}) for d in obj["points"]]
    except TypeError as e:
        raise SpecsimInputError(src, None, "points", "measured points", str(e)) from None


MEASURED_FILE = "measured.json"


def measured_for_plot(sweep_dirs: Sequence, files: Sequence = ()) -> list[MeasuredPoint]:
    """The measured points ``specsim plot`` draws: each of ``files`` plus ``<dir>/measured.json`` where it exists."""
    paths = [Path(f) for f in files] + [Path(d) / MEASURED_FILE for d in sweep_dirs
                                        if (Path(d) / MEASURED_FILE).is_file()]
    return [p for path in dict.fromkeys(paths) for p in load_measured(path)]
