"""Measured results of real serving benchmarks, read into points on the frontier's axes.

Readers (one per format, shared by every command that takes measured results)
    :func:`read_vllm_result` reads ``vllm bench serve --save-result`` files (one JSON object, or one
    per line with ``--append-result``); :func:`read_guidellm_result` reads guidellm's JSON report
    (``{"benchmarks": [...]}``, each benchmark's ``metrics`` holding status distributions such as
    ``time_to_first_token_ms.successful.mean`` and ``.percentiles.p99``). Each returns
    :class:`MeasuredPoint` objects: the measured run on the frontier's axes (TPS/user and output
    throughput per GPU) plus its metrics under vLLM's names. :func:`read_results` picks the reader
    from the content.

:func:`save_measured` / :func:`load_measured` keep the points of ``specsim import-results`` in one JSON file;
:func:`measured_for_plot` gathers those ``specsim plot`` draws. The hardware model's fits read the same files
(:mod:`specsim.hardware.step_points`, :mod:`specsim.hardware.spec_fit`); the analysis side re-exports them
(:mod:`specsim.analysis.results`, which also writes a simulated run as a vLLM result).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from specsim.errors import SpecsimInputError, plain
from specsim.jsonfiles import json_rows, read_text


@dataclass
class MeasuredPoint:
    """One measured benchmark run, on the frontier's axes.

    Attributes:
        source: the file it came from; tool: ``"vllm"``, ``"sglang"`` (a ``bench_serving`` result, whose
            ``backend`` key names SGLang; the same keys as vLLM's) or ``"guidellm"``; label: the legend text.
        load: the load in words (``"concurrency 64"``, ``"rate 4 req/s"``, ``"throughput"``).
        gpus: GPUs of the measured deployment (>= 1), for the per-GPU throughput.
        tps_per_user: tokens/s per user (x axis), or None when the file has no TPOT.
        tps_per_user_basis: ``"per-request"`` (mean over requests of (output - 1) / (E2EL - TTFT),
            as the simulator's mean_tps_per_user) or ``"1000 / mean TPOT"`` (a summary file; a lower
            bound of the per-request mean by Jensen's inequality), ``"1000 / median TPOT"`` or
            ``"1000 / median ITL"`` (a file that gives medians only, as SGLang's ``bench_serving`` can).
        output_throughput: output tokens/s of the whole deployment, or None.
        metrics: the run's figures under vLLM's names (``mean_ttft_ms``, ``p99_tpot_ms``,
            ``request_throughput``, ``completed``, ...), those the file has, and from a ``--save-detailed``
            result ``token_weighted_tpot_ms`` (every request's stream gaps over every request's output - 1).
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


#: Keys of other benchmark tools that mean the run speculated (SGLang's ``bench_serving`` writes ``accept_length``).
SPEC_KEYS = ("accept_length", "acceptance_length", "avg_accept_length")


def _num(v) -> float | None:
    """A finite float, or None (JSON null, text, NaN, a missing key)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _json_objects(path: Path) -> list[dict]:
    """The JSON object of a file, or its objects one per line (vLLM's --append-result)."""
    src = str(path)
    rows = json_rows(read_text(path), src, "a JSON object (or one per line)")
    bad = next(((line, o) for line, o in rows if not isinstance(o, dict)), None)   # a pair: a null is bad too
    if not rows or bad is not None:
        raise SpecsimInputError(src, None if bad is None else bad[0], None, "a JSON object (or one per line)",
                                "nothing" if bad is None else "null" if bad[1] is None else type(bad[1]).__name__)
    return [obj for _, obj in rows]


def _check_signs(src: str, index: int, figures: dict) -> None:
    """A measured point's throughput and mean TPOT must be >= 0 (a negative TPOT would give a negative TPS/user;
    0, as vLLM writes when no request decoded a second token, leaves TPS/user unknown).

    Raises:
        SpecsimInputError: naming the file, the 1-based object (or benchmark) index and the field.
    """
    for key, ok, want in (("output_throughput", lambda v: v >= 0, "a throughput >= 0 (tok/s)"),
                          ("mean_tpot_ms", lambda v: v >= 0, "a mean TPOT >= 0 ms")):
        v = _num(figures.get(key))
        if v is not None and not ok(v):
            raise SpecsimInputError(src, index, key, want, f"{v:g}")


#: The per-request lists of a ``--save-detailed`` result -> (what each entry must be, its check).
DETAILED_LISTS = {
    "ttfts": ("a list of seconds (numbers >= 0)", lambda v: _num(v) is not None and v >= 0),
    "latencies": ("a list of seconds (numbers >= 0)", lambda v: _num(v) is not None and v >= 0),
    "output_lens": ("a list of token counts (ints >= 0)",
                    lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0),
    "itls": ("a list of seconds per request (lists of numbers >= 0)",
             lambda v: isinstance(v, list) and all(_num(g) is not None and g >= 0 for g in v)),
}


def _check_detailed(src: str, index: int, obj: dict) -> None:
    """The ``--save-detailed`` lists of one result object (``ttfts``, ``latencies`` and ``itls`` in seconds,
    ``output_lens`` in tokens), where present, must be lists of such values.

    Raises:
        SpecsimInputError: naming the file, the 1-based object index, the list and its first bad entry.
    """
    for key, (want, ok) in DETAILED_LISTS.items():
        values = obj.get(key)
        if values is None:
            continue
        if not isinstance(values, list):
            raise SpecsimInputError(src, index, key, want, f"{type(values).__name__} {values!r}")
        bad = next((i for i, v in enumerate(values) if not ok(v)), None)
        if bad is not None:
            raise SpecsimInputError(src, index, key, want, _bad_entry(values[bad], bad, key == "itls"))


def _bad_entry(value, i: int, nested: bool) -> str:
    """The bad entry ``i`` (0-based) of a detailed list as an error shows it: for ``itls`` (a list per request) the
    bad gap and its index only (the request's whole gap list was printed)."""
    if nested and isinstance(value, list):
        j, gap = next((j, g) for j, g in enumerate(value) if not (_num(g) is not None and g >= 0))
        return f"{plain(gap)} at request {i + 1}, gap {j + 1}"
    return f"{plain(value) if not isinstance(value, (list, dict)) else type(value).__name__} at entry {i + 1}"


#: Summary figures of a result read as numbers: every ``*_ms`` key (TTFT, TPOT, ITL, E2EL statistics) and these.
NUMBER_KEYS = ("duration", "completed", "total_input_tokens", "total_output_tokens", "request_throughput",
               "output_throughput")


def _check_numbers(src: str, index: int, obj: dict) -> None:
    """A result's summary figures (:data:`NUMBER_KEYS` and ``*_ms``), where present, must be finite JSON numbers
    (null: not measured); text (``"7.5"``), a boolean, an infinity or a NaN was skipped in silence for the next
    figure (a NaN ``mean_itl_ms`` read the mean TPOT, a NaN ``mean_ttft_ms`` the median: docs/profiles.md).

    Raises:
        SpecsimInputError: naming the file, the 1-based object index and the key.
    """
    for key, v in obj.items():
        if not (key in NUMBER_KEYS or key.endswith("_ms")) or v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise SpecsimInputError(src, index, key, "a finite JSON number (null where not measured)"
                                    + (", in milliseconds" if key.endswith("_ms") else ""), plain(v))


#: A speculative result's figures -> (what each must be, its check): vLLM's ``spec_decode_acceptance_rate`` is a
#: percentage (100 x accepted / draft tokens), its per-position rates fractions of the drafts (position k accepted),
#: its acceptance length 1 + accepted tokens per draft, its counts counts.
SPEC_FIGURES = {
    "spec_decode_acceptance_rate": ("a percentage in [0, 100] (100 x accepted / draft tokens)",
                                    lambda v: 0 <= v <= 100),
    "spec_decode_acceptance_length": ("an acceptance length >= 1 (1 + accepted tokens per draft)", lambda v: v >= 1),
    "spec_decode_num_drafts": ("a count >= 0", lambda v: v >= 0),
    "spec_decode_draft_tokens": ("a count >= 0", lambda v: v >= 0),
    "spec_decode_accepted_tokens": ("a count >= 0", lambda v: v >= 0),
}


def _check_spec(src: str, index: int, obj: dict) -> None:
    """A speculative result's figures (:data:`SPEC_FIGURES`), where present and not null, must be finite numbers
    in range; ``spec_decode_per_position_acceptance_rates`` a list of rates in [0, 1]; accepted tokens at most the
    draft tokens (``specsim counters`` refused a rate of 1.5 or 161.2% that ``profile fit --spec`` and
    ``import-results`` read).

    Raises:
        SpecsimInputError: naming the file, the 1-based object index and the field.
    """
    for key, (want, ok) in SPEC_FIGURES.items():
        v = obj.get(key)
        if v is not None and (_num(v) is None or not ok(v)):
            raise SpecsimInputError(src, index, key, want, plain(v))
    rates = obj.get("spec_decode_per_position_acceptance_rates")
    if rates is not None:
        if not isinstance(rates, list):
            raise SpecsimInputError(src, index, "spec_decode_per_position_acceptance_rates", "a list of rates in "
                                    "[0, 1] (position k's accepted drafts / drafts)", type(rates).__name__)
        bad = next((i for i, r in enumerate(rates) if _num(r) is None or not 0 <= r <= 1), None)
        if bad is not None:
            raise SpecsimInputError(src, index, f"spec_decode_per_position_acceptance_rates[{bad}]", "a rate in "
                                    "[0, 1] (position k's accepted drafts / drafts)", plain(rates[bad]))
    acc, drafted = _num(obj.get("spec_decode_accepted_tokens")), _num(obj.get("spec_decode_draft_tokens"))
    if acc is not None and drafted is not None and acc > drafted:
        raise SpecsimInputError(src, index, "spec_decode_accepted_tokens", f"at most the draft tokens "
                                f"({drafted:,.0f})", f"{acc:,.0f}")


#: Milliseconds below which a result's ITL or step (TPOT x acceptance length) is no engine step (10,000 tokens/s for
#: one user), and a TTFT no first token: seconds written where milliseconds belong.
MIN_STEP_MS = 0.1
#: Milliseconds above which a mean or median TTFT is no benchmark's (one hour): microseconds, or a broken file.
MAX_TTFT_MS = 3.6e6
#: Little's law R above the run's ``max_concurrency`` by more than this factor: times not in milliseconds (or, read
#: per streamed chunk, a run that speculated).
R_OVER_CONCURRENCY = 1.5
#: A closed loop's requests in the system (completed x mean E2EL / duration) below this share of its users: a
#: duration not in seconds, or times not in milliseconds.
R_UNDER_CONCURRENCY = 0.05
#: ``output_throughput`` and ``total_output_tokens / duration`` (vLLM writes the one from the other) further apart
#: than this factor: a duration not in seconds.
THROUGHPUT_AGREES = 2.0


def acceptance_length(obj: dict) -> float | None:
    """A speculative result's acceptance length (``spec_decode_acceptance_length``, else a key of :data:`SPEC_KEYS`),
    None where it gives none above 1."""
    return next((v for key in ("spec_decode_acceptance_length", *SPEC_KEYS)
                 if (v := _num(obj.get(key))) is not None and v > 1), None)


def summary_tpot(obj: dict) -> tuple[str, float] | None:
    """(key, milliseconds of decode per output token) from a result's summary: ``mean_tpot_ms``, else
    ``mean_itl_ms`` (/ the acceptance length of a speculative run), else the medians alike; None where none is
    > 0, or only an ITL of a run that speculated at an unknown acceptance length."""
    spec = any(k.startswith("spec_decode_") or k in SPEC_KEYS for k in obj)
    tau = acceptance_length(obj)
    names = ("mean_tpot_ms", "mean_itl_ms") if "mean_tpot_ms" in obj or "mean_itl_ms" in obj else (
        "median_tpot_ms", "median_itl_ms")
    for name in names:
        v = _num(obj.get(name))
        if v is not None and v > 0:
            if name.endswith("_tpot_ms"):
                return name, v
            if not spec or tau is not None:
                return name, v / (tau or 1.0)
    return None


def _check_units(src: str, k: int, obj: dict) -> None:
    """The units of one result object, where its fields allow a check (shared by ``profile fit`` and
    ``import-results``):

    * an ITL, or a TPOT x the acceptance length (a step), of at least :data:`MIN_STEP_MS` ms, and a mean or median
      TTFT in [:data:`MIN_STEP_MS`, :data:`MAX_TTFT_MS`] ms;
    * ``output_throughput`` within :data:`THROUGHPUT_AGREES` x of ``total_output_tokens / duration``;
    * Little's law against ``max_concurrency`` N: the requests decoding at once, (``total_output_tokens`` -
      ``completed``) x TPOT / ``duration``, at most :data:`R_OVER_CONCURRENCY` x N; in a closed loop (no finite
      ``request_rate``) the requests in the system, ``completed`` x ``mean_e2el_ms`` / ``duration``, at least
      :data:`R_UNDER_CONCURRENCY` x N.

    Raises:
        SpecsimInputError: naming the file, the 1-based object index, the field and its unit.
    """
    tau = acceptance_length(obj)
    spec = any(key.startswith("spec_decode_") or key in SPEC_KEYS for key in obj)
    for name in ("mean_itl_ms", "median_itl_ms", "mean_tpot_ms", "median_tpot_ms"):
        v = _num(obj.get(name))
        per_step = None if v is None or (spec and tau is None and "tpot" in name) else (
            v * (tau or 1.0) if "tpot" in name else v)
        if per_step is not None and 0 < per_step < MIN_STEP_MS:
            raise SpecsimInputError(src, k, name, f"a time in milliseconds (a step takes >= {MIN_STEP_MS:g} ms; "
                                    "this reads as seconds)", plain(v))
    for name in ("mean_ttft_ms", "median_ttft_ms"):
        v = _num(obj.get(name))
        if v is not None and 0 < v < MIN_STEP_MS:
            raise SpecsimInputError(src, k, name, f"a time in milliseconds (a first token takes >= {MIN_STEP_MS:g} "
                                    "ms; this reads as seconds)", plain(v))
        if v is not None and v > MAX_TTFT_MS:
            raise SpecsimInputError(src, k, name, f"a time in milliseconds, at most {MAX_TTFT_MS:,.0f} (one hour; "
                                    "this reads as microseconds or a broken file)", plain(v))
    dur, tout, done = (_num(obj.get(key)) for key in ("duration", "total_output_tokens", "completed"))
    thr = _num(obj.get("output_throughput"))
    if dur and tout and thr and done and dur > 0 and tout > done >= 1 and thr > 0 and not (
            1 / THROUGHPUT_AGREES <= thr * dur / tout <= THROUGHPUT_AGREES):
        raise SpecsimInputError(src, k, "duration", f"seconds agreeing with output_throughput ({thr:,.4g} tok/s: "
                                f"total_output_tokens {tout:,.0f} in {tout / thr:,.4g} s)",
                                f"{dur:g} ({tout / dur:,.4g} tok/s; milliseconds?)")
    conc = _num(obj.get("max_concurrency"))
    tpot = summary_tpot(obj)
    if not (conc and conc >= 1 and dur and dur > 0 and done and done >= 1 and tout and tout > done):
        return
    if tpot is not None:
        r = (tout - done) * tpot[1] / 1e3 / dur
        if r > R_OVER_CONCURRENCY * conc:
            raise SpecsimInputError(src, k, tpot[0], f"a time in milliseconds whose decode time fits the run's "
                                    f"{conc:g} users (Little's law gives R = {r:,.4g} requests decoding at once, over "
                                    f"{R_OVER_CONCURRENCY:g}x max_concurrency): times not in milliseconds",
                                    plain(obj[tpot[0]]))
    try:
        closed = not math.isfinite(float(obj.get("request_rate", "inf")))
    except (TypeError, ValueError):
        closed = False
    e2el = _num(obj.get("mean_e2el_ms"))
    if closed and e2el and e2el > 0 and done * e2el / 1e3 / dur < R_UNDER_CONCURRENCY * conc:
        raise SpecsimInputError(src, k, "duration", f"seconds in which a closed loop of {conc:g} users held about "
                                f"{conc:g} requests (Little's law: completed x mean_e2el_ms / duration = "
                                f"{done * e2el / 1e3 / dur:.3g}, under {R_UNDER_CONCURRENCY:g}x max_concurrency): a "
                                "duration in milliseconds, or E2EL not in milliseconds", f"{dur:g}")


def _check_gpus(gpus: int) -> int:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise SpecsimInputError("--gpus", None, "gpus", "an int >= 1", repr(gpus))
    return gpus


def read_vllm_result(path, gpus: int = 1, label: str | None = None) -> list[MeasuredPoint]:
    """Read a ``vllm bench serve --save-result`` file: one point per JSON object.

    TPS/user is per-request when the file has ``--save-detailed`` lists (``ttfts``, ``output_lens``
    and ``latencies``, or ``itls`` to sum), else 1000 / ``mean_tpot_ms``, else (a file with medians only) 1000 /
    ``median_tpot_ms`` or ``median_itl_ms``. Throughput is ``output_throughput``. SGLang's ``bench_serving``
    writes the same keys; its points say ``sglang`` (its ``backend`` key) rather than ``vllm``.

    Args:
        path: the JSON file.
        gpus: GPUs of the measured deployment.
        label: legend text (default: ``measured: <label or model_id> (<load>)``).

    Raises:
        SpecsimInputError: an unreadable file, malformed JSON, an object without
            ``output_throughput``, a summary figure that is not a finite number (:data:`NUMBER_KEYS`, ``*_ms``), or
            a ``--save-detailed`` list with an entry that is not a number of seconds
            (``ttfts``, ``latencies``, ``itls``) or of tokens (``output_lens``), or a speculative figure out of
            range (:func:`_check_spec`) (naming the 1-based object index as the line).
    """
    path, gpus = Path(path), _check_gpus(gpus)
    points = []
    for k, obj in enumerate(_json_objects(path), start=1):
        if _num(obj.get("output_throughput")) is None:
            raise SpecsimInputError(str(path), k, "output_throughput", "a number (a vllm bench serve result)",
                                    repr(obj.get("output_throughput")))
        _check_numbers(str(path), k, obj)
        _check_signs(str(path), k, obj)
        _check_detailed(str(path), k, obj)
        _check_spec(str(path), k, obj)
        _check_units(str(path), k, obj)
        conc = obj.get("max_concurrency")
        rate = obj.get("request_rate")
        load = (f"concurrency {conc}" if conc not in (None, "") else
                f"rate {rate} req/s" if rate not in (None, "inf") else "request rate inf")
        weighted, ref = _token_weighted_tpot_ms(obj), summary_tpot(obj)
        off = weighted is not None and ref is not None and not 0.5 < weighted / ref[1] < 2
        tps, basis = _vllm_tps_per_user(obj, use_itls=not off)
        if off:         # itls in milliseconds (or another run's lists): the summary instead, said in the basis
            basis += f" (itls {weighted / ref[1]:,.3g}x {ref[0]}: not seconds?)"
        metrics = {k2: v for k2, v in obj.items() if not isinstance(v, (list, dict))}
        if weighted is not None and not off:
            metrics["token_weighted_tpot_ms"] = weighted
        name = obj.get("label") or obj.get("model_id") or path.stem
        tool = "sglang" if str(obj.get("backend", "")).startswith("sglang") else "vllm"
        tau = next((_num(obj.get(k)) for k in SPEC_KEYS if _num(obj.get(k))), None)
        spec = f", speculative: acceptance length {tau:g}" if tau else (
            ", speculative" if any(k.startswith("spec_decode_") for k in obj) else "")
        points.append(MeasuredPoint(str(path), tool, label or f"measured: {name} ({load}{spec})", load, gpus, tps,
                                    basis, _num(obj["output_throughput"]), metrics))
    return points


def _token_weighted_tpot_ms(m: dict) -> float | None:
    """Milliseconds of decode per output token over every request of a ``--save-detailed`` result (its ``itls``: the
    gaps of each request's stream in seconds; ``output_lens``): sum of all gaps / sum of (output - 1); None where
    the result lacks them, they disagree in length, or any is malformed (:func:`read_vllm_result` drops it where it
    is not within a factor 2 of the summary's TPOT, :func:`summary_tpot`: itls in milliseconds)."""
    itls, lens = m.get("itls"), m.get("output_lens")
    if not (isinstance(itls, list) and isinstance(lens, list) and itls and len(itls) == len(lens)):
        return None
    try:
        gaps = sum(float(sum(g)) for g in itls)
        tokens = sum(max(int(n) - 1, 0) for n in lens)
    except (TypeError, ValueError):
        return None
    return 1e3 * gaps / tokens if tokens > 0 and math.isfinite(gaps) and gaps > 0 else None


def _vllm_tps_per_user(obj: dict, use_itls: bool = True) -> tuple[float | None, str]:
    """(TPS/user, basis) of one vLLM result object (``use_itls`` False: its ``itls`` are not summed for the
    latencies, as they disagree with the summary's TPOT)."""
    ttfts, outs = obj.get("ttfts"), obj.get("output_lens")
    lats = obj.get("latencies")
    if lats is None and use_itls and isinstance(obj.get("itls"), list) and isinstance(ttfts, list):
        lats = [t + sum(i) if isinstance(t, (int, float)) and isinstance(i, list) else None
                for t, i in zip(ttfts, obj["itls"])]
    if isinstance(ttfts, list) and isinstance(outs, list) and isinstance(lats, list):
        rows = [(_num(t), o, _num(e)) for t, o, e in zip(ttfts, outs, lats)]
        tps = [(o - 1) / (e - t) for t, o, e in rows
               if t is not None and e is not None and isinstance(o, int) and o > 1 and e > t]
        if tps:
            return float(np.mean(tps)), "per-request"
    for key, basis in (("mean_tpot_ms", "1000 / mean TPOT"), ("median_tpot_ms", "1000 / median TPOT"),
                       ("median_itl_ms", "1000 / median ITL")):
        tpot = _num(obj.get(key))
        if tpot:
            return 1000.0 / tpot, basis
    return None, "none: no TPOT or ITL in the file"


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
        _check_signs(src, k, metrics)
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
