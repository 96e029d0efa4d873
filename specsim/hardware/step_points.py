"""Step-time observations from a user's real no-speculation measurements: the inputs of ``specsim profile fit``.

One reader per format a user already has, each returning :class:`StepObservation` objects, the target's step
time at a known batch: R requests, B tokens, a mean context length. ``profile fit`` fits the engine-level terms
to them; fitting must use runs *without* speculative decoding (the protocol of issue 12: fit on no-speculation
runs, predict the speculative policies), so every reader refuses input that shows speculation was on.

``vllm bench serve`` result JSON (:func:`observations_from_vllm_results`, ``kind="tpot"``)
    Read with :func:`specsim.hardware.measured.read_vllm_result` (one object per file, or one per line with
    ``--append-result``); one observation per object, derived from the summary fields only:

    * **step time** = ``mean_itl_ms`` / 1000 (the mean over every inter-token gap of every request, so
      token-weighted); where the file has no ITL (``null``, 0 or absent), ``mean_tpot_ms`` / 1000 (a mean over
      requests of (E2EL - TTFT) / (output - 1), the same value when all requests have the same output length,
      as with ``--random-output-len`` and no range ratio); a file without either mean key (results that give
      medians only, as SGLang's ``bench_serving`` can) uses ``median_itl_ms``, then ``median_tpot_ms``. Without speculation
      each streamed chunk is one
      token and each gap is one engine step the request took part in, so the mean gap is the mean step time
      seen by a decoding request (steps weighted by the requests in them, mixed prefill steps included).
    * **R, requests decoding at once** (Little's law: mean number in a stage = rate through it x time in it).
      Every output token but a request's first (which its prefill step produces) closes one decode gap, so
      the decode time summed over requests is (``total_output_tokens`` - ``completed``) x step time, and the
      time-average number of requests decoding over the run is
      ``R = (total_output_tokens - completed) x step_time_s / duration``.
      This is ``output_throughput x step_time_s`` less the first tokens (``output_throughput`` =
      ``total_output_tokens / duration``): the first token of each request is not a decode gap. In a closed
      loop at ``max_concurrency`` N no more than N requests are ever in flight, so R > N can only come from
      gaps that are not one token each (a server streaming several tokens per chunk makes fewer, longer gaps);
      R is then clipped to N and the label says so (``"concurrency=8 (R 8.467 clipped to 8)"``).
    * **B** = R + ``total_input_tokens x step_time_s / duration``: each decoding request verifies one token,
      and the prompts are prefilled in chunks that share the decode steps (vLLM's chunked prefill), so the mean
      step also carries the prompt tokens per second times the step time (prompt tokens the prefix cache
      skips are counted too: the summary does not say how many).
    * **context** = ``total_input_tokens / completed + (total_output_tokens / completed) / 2``: a request that
      has produced k of its n outputs reads prompt + k KV tokens, k running from 0 to n over its decode, so
      n / 2 on average (exact for equal lengths; a token-weighted mean would weigh long outputs more).
    * **label** ``"concurrency=N"`` when ``max_concurrency`` is set, else ``"rate=X"`` (``request_rate``,
      ``"rate=inf"`` for an unlimited rate).
    * **refused**: any ``spec_decode_*`` key with a value (vLLM adds them when the server reports speculative
      decoding), and objects lacking ``duration`` > 0, ``completed`` >= 1, ``total_input_tokens`` >= 0,
      ``total_output_tokens`` > ``completed`` or both step-time fields.

guidellm JSON report (:func:`observations_from_guidellm`, ``kind="tpot"``)
    One observation per entry of ``benchmarks``, derived as above from the fields :data:`GUIDELLM_FIELDS` maps
    to vLLM's names (guidellm's inter-token latency is vLLM's TPOT: decode gaps only).

CSV of steps or buckets (:func:`observations_from_csv`, ``kind="step"``)
    A header row, then one row per engine step or per bucket of steps. Columns: exactly one of
    ``step_time_s`` / ``step_time_ms``; ``num_requests`` (running requests) and/or ``batch_tokens`` (tokens in
    the step; either one alone stands for both, as without speculation a decode step has B = R); optional
    ``context_tokens`` (mean KV tokens per request; NaN where absent), ``prompt_tokens`` (the mean prompt length
    of the requests whose chunks share these steps, >= 1; with ``batch_tokens`` above ``num_requests`` it gives
    the share of steps that start a prompt, which ``mixed_step_s`` is charged on; NaN where absent), ``weight``
    (> 0, e.g. steps in a bucket; default 1) and ``label`` (default ``"B=<batch_tokens>"``); ``num_requests``
    may be below 1 (Little's law at one user). Other columns are ignored (``step_time_ms_p99``), but a known
    column by another spelling (case, a plural s, step_time in another unit: ``prompt_token``, ``Step_Time_MS``,
    ``step_time_us``) or a column given twice is refused; ``line`` is the row's 1-based line (header = 1).

vLLM's Prometheus ``/metrics`` text dump (:func:`observations_from_prometheus`, ``kind="histogram"``)
    A ``curl http://HOST:PORT/metrics > dump.prom`` of a vLLM V1 server. Histograms are cumulative since the
    server started, so one dump gives one observation per label set (``model_name``, ``engine``: one per
    data-parallel engine), the means since start; ``baseline=`` an earlier dump of the same server gives the
    means between the two dumps instead (``read_step_observations(..., fmt="prometheus-delta")`` chains
    dumps taken after each load phase). Metric names as vLLM V1 exposes them (``vllm/v1/metrics/loggers.py``):

    * **step time** = ``vllm:inter_token_latency_seconds`` _sum / _count (newer vLLM), else
      ``vllm:time_per_output_token_seconds`` _sum / _count (its older name, which vLLM V1 observes per
      token gap, the same quantity).
    * **B** = ``vllm:iteration_tokens_total`` _sum / _count: tokens (prompt + generated) per engine step,
      averaged over steps.
    * **R** = ``vllm:generation_tokens_total`` / ``vllm:iteration_tokens_total_count``: without
      speculation each request in a step generates one token, so generated tokens per step is the mean
      number of requests generating per step (steps of prefill only included). Where the counter is missing,
      the ``vllm:num_requests_running`` gauge is used instead: a snapshot at the time of the dump, not a mean.
    * **context** = ``vllm:request_prompt_tokens`` mean + ``vllm:request_generation_tokens`` mean / 2
      (finished requests; NaN when these histograms are absent).
    * Step time is weighted by requests per step and R by steps: they agree when the batch held steady, which
      is why a dump per steady load phase (and ``baseline``) gives better points than one dump of a mixed day.
    * **refused**: any ``vllm:spec_decode_*`` sample > 0 (speculation was on), a dump without the step-time
      or iteration histograms, and (with ``baseline``) a count that fell (a restarted server).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Iterable

import numpy as np

from specsim.errors import SpecsimInputError, plain
from specsim.hardware.measured import SPEC_KEYS, read_vllm_result
from specsim.hardware.step_observation import NO_SPEC, StepObservation
from specsim.hardware.step_prometheus import _SAMPLE, observations_from_prometheus

#: ``fmt`` values of :func:`read_step_observations`.
FORMATS = ("vllm", "guidellm", "csv", "prometheus", "prometheus-delta")


# ---------------------------------------------------------------------------------------------
# vllm bench serve results


def _field(metrics: dict, name: str, src: str, k: int, expected: str, ok) -> float:
    """``metrics[name]`` as a float passing ``ok``, else SpecsimInputError naming the object and field."""
    v = metrics.get(name)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
        raise SpecsimInputError(src, k, name, expected, plain(v) if name in metrics else "no such key")
    return float(v)


def _step_time_s(m: dict, src: str, k: int) -> float:
    """Mean ITL, else mean TPOT; in a file without either mean key (medians only, as SGLang's ``bench_serving``
    can give), median ITL, else median TPOT; in seconds (module docstring)."""
    names = ("mean_itl_ms", "mean_tpot_ms") if "mean_itl_ms" in m or "mean_tpot_ms" in m else (
        "median_itl_ms", "median_tpot_ms")              # a file without the means (medians only)
    for name in names:                   # a negative time is a broken file, not a missing figure: refused
        v = m.get(name)
        if not isinstance(v, bool) and isinstance(v, (int, float)) and v < 0:
            raise SpecsimInputError(src, k, name, "a time >= 0 ms", plain(v))
    for name in names:
        v = m.get(name)
        if not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            if v < MIN_STEP_MS:             # 0.0075: seconds written under a _ms key (R came out 0.0)
                raise SpecsimInputError(src, k, name, f"a time in milliseconds (a step takes >= {MIN_STEP_MS:g} ms; "
                                        "this reads as seconds)", plain(v))
            return float(v) / 1000.0
    raise SpecsimInputError(src, k, "mean_itl_ms", "mean or median ITL or TPOT > 0 (a streamed run)",
                            f"{plain(m.get('mean_itl_ms'))} / {plain(m.get('mean_tpot_ms'))}")



#: Milliseconds below which a result's ITL or TPOT is no engine step (10,000 tokens/s for one user): seconds
#: written where milliseconds belong.
MIN_STEP_MS = 0.1

#: Little's law R above the run's ``max_concurrency`` by more than this factor: the run speculated (each step then
#: emits several tokens, so TPOT x tokens overstates the decode time), or its times are not milliseconds.
R_OVER_CONCURRENCY = 1.5


def _ttft_s(m: dict, src: str, k: int) -> float:
    """Mean TTFT, else median TTFT, in seconds; NaN where the file gives neither (> 0). A negative one is refused
    (a fresh user's -50 ms was replaced by the median in silence)."""
    for name in ("mean_ttft_ms", "median_ttft_ms"):
        v = m.get(name)
        if not isinstance(v, bool) and isinstance(v, (int, float)) and v < 0:
            raise SpecsimInputError(src, k, name, "a time >= 0 ms", plain(v))
    for name in ("mean_ttft_ms", "median_ttft_ms"):
        v = m.get(name)
        if not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
            return float(v) / 1000.0
    return math.nan


def _concurrency(m: dict, src: str, k: int) -> float | None:
    """``max_concurrency`` as a number >= 1, None where the run had none (open loop); anything else is refused
    (a fresh user's 0, -8, ``true`` and ``"8"`` were taken as labels and the R clip skipped)."""
    conc = m.get("max_concurrency")
    if conc is None:
        return None
    if isinstance(conc, bool) or not isinstance(conc, (int, float)) or not math.isfinite(conc) or conc < 1:
        raise SpecsimInputError(src, k, "max_concurrency", "a number >= 1 (or null: an open-loop run)", plain(conc))
    return float(conc)


def _closed_loop(m: dict, conc: float | None) -> float:
    """The closed loop's N users: ``max_concurrency`` where requests were sent as fast as they end
    (``request_rate`` inf or absent); NaN for an open loop, capped or not (a finite rate: arrivals independent)."""
    try:
        open_loop = math.isfinite(float(m.get("request_rate", "inf")))
    except (TypeError, ValueError):
        open_loop = False
    return math.nan if conc is None or open_loop else float(conc)


def load_label(m: dict) -> str:
    """A ``vllm bench serve`` result's load, as a fit's residual table names its point: ``concurrency=N`` for a
    closed loop (``max_concurrency``), else ``rate=R`` (``request_rate``; ``inf``, vLLM's default, when absent)."""
    conc = m.get("max_concurrency")
    if conc not in (None, ""):
        return f"concurrency={conc}"
    rate = m.get("request_rate")
    return f"rate={rate:g}" if isinstance(rate, (int, float)) else f"rate={rate if rate is not None else 'inf'}"


def observations_from_vllm_results(path) -> list[StepObservation]:
    """Step-time observations from a ``vllm bench serve --save-result`` file: one per JSON object.

    Derivation (Little's law for R, mean ITL or TPOT for the step) in the module docstring.

    Args:
        path: the result file (one JSON object, or one per line as ``--append-result`` writes).

    Returns:
        One ``kind="tpot"`` observation per object, in file order, ``line`` = 1-based object index.

    Raises:
        SpecsimInputError: as :func:`specsim.hardware.measured.read_vllm_result` does; an object showing speculative
            decoding (a ``spec_decode_*`` key with a value); a missing or bad ``duration``, ``completed``,
            ``total_input_tokens``, ``total_output_tokens`` or step-time field (naming object and field).
    """
    src = str(path)
    out = []
    for k, point in enumerate(read_vllm_result(path), start=1):
        m = point.metrics
        spec = next((key for key in sorted(m) if (key.startswith("spec_decode") or key in SPEC_KEYS)
                     and m[key] is not None), None)
        if spec is not None:
            raise SpecsimInputError(src, k, spec, NO_SPEC + (": give a speculative run to --spec (with "
                                    "--num-spec-tokens: the file has no draft counts)" if spec in SPEC_KEYS else ""),
                                    plain(m[spec]))
        out.append(_observation(m, src, k))
    return out


def _observation(m: dict, src: str, k: int) -> StepObservation:
    """One no-speculation observation from a run's summary under ``vllm bench serve``'s names (module docstring).

    Raises:
        SpecsimInputError: a missing or bad field, naming object ``k`` and the field.
    """
    conc = _concurrency(m, src, k)
    duration = _field(m, "duration", src, k, "a number > 0 (seconds)", lambda v: v > 0)
    completed = _field(m, "completed", src, k, "a count >= 1", lambda v: v >= 1)
    tin = _field(m, "total_input_tokens", src, k, "a count >= 0", lambda v: v >= 0)
    tout = _field(m, "total_output_tokens", src, k, f"a count > completed ({completed:g}: some decode)",
                  lambda v: v > completed)
    step_s = _step_time_s(m, src, k)
    r = (tout - completed) * step_s / duration          # Little's law: decode time summed / duration
    label = load_label(m)
    if conc is not None and r > R_OVER_CONCURRENCY * conc:
        raise SpecsimInputError(src, k, "mean_itl_ms", f"a run whose decode time fits its {conc:g} users "
                                f"(Little's law gives R = {r:.4g} running requests, over {R_OVER_CONCURRENCY:g}x "
                                "max_concurrency): a run that speculated (give it to --spec) or times not in "
                                "milliseconds", f"{step_s * 1e3:g} ms per step")
    if conc is not None and r > conc:
        label += f" (R {r:.4g} clipped to {conc:g})"
        r = conc
    b = r + tin * step_s / duration                     # + prefill tokens per step (chunked prefill)
    return StepObservation(r, b, tin / completed + tout / completed / 2.0, step_s, src, k, "tpot",
                           label, ttft_s=_ttft_s(m, src, k), prompt_tokens=tin / completed,
                           concurrency=_closed_loop(m, conc))


#: The guidellm report field each ``vllm bench serve`` name of :func:`_observation` is read from (per benchmark;
#: distributions are their ``successful`` requests').
GUIDELLM_FIELDS = {"duration": "end_time - start_time", "completed": "request_totals.successful",
                   "total_input_tokens": "metrics.prompt_token_count.successful.total_sum",
                   "total_output_tokens": "metrics.output_token_count.successful.total_sum",
                   "mean_tpot_ms": "metrics.inter_token_latency_ms.successful.mean",
                   "mean_itl_ms": "metrics.inter_token_latency_ms.successful.mean",
                   "mean_ttft_ms": "metrics.time_to_first_token_ms.successful.mean",
                   "max_concurrency": "args.strategy.streams"}


def _guidellm_summary(bench: dict) -> dict:
    """One guidellm benchmark's figures under the ``vllm bench serve`` names :func:`_observation` reads
    (:data:`GUIDELLM_FIELDS`): guidellm's inter-token latency of a request, (latency - TTFT) / (output - 1), is
    vLLM's TPOT; a ``concurrent`` strategy of N streams is ``max_concurrency`` N (a closed loop), ``synchronous``
    one stream, a ``constant`` or ``poisson`` one its ``rate`` (open loop), ``throughput`` an unlimited rate."""
    m = bench.get("metrics") if isinstance(bench.get("metrics"), dict) else {}

    def stat(name: str, key: str):
        dist = m.get(name)
        dist = dist.get("successful") if isinstance(dist, dict) else None
        return dist.get(key) if isinstance(dist, dict) else None
    start, end = bench.get("start_time"), bench.get("end_time")
    timed = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (start, end))
    totals = bench.get("request_totals") if isinstance(bench.get("request_totals"), dict) else {}
    args = bench.get("args") if isinstance(bench.get("args"), dict) else {}
    strategy = args.get("strategy") if isinstance(args.get("strategy"), dict) else {}
    kind = strategy.get("type_") or strategy.get("type")
    streams = 1 if kind == "synchronous" else strategy.get("streams")
    rate = strategy.get("rate") if kind in ("constant", "poisson") else float("inf")
    return {"duration": end - start if timed else None, "completed": totals.get("successful"),
            "total_input_tokens": stat("prompt_token_count", "total_sum"),
            "total_output_tokens": stat("output_token_count", "total_sum"),
            "mean_tpot_ms": stat("inter_token_latency_ms", "mean"),
            "mean_ttft_ms": stat("time_to_first_token_ms", "mean"), "max_concurrency": streams, "request_rate": rate}


def observations_from_guidellm(path) -> list[StepObservation]:
    """Step-time observations from a guidellm JSON report: one per entry of ``benchmarks``, derived as for a
    ``vllm bench serve`` result (module docstring) from the fields :data:`GUIDELLM_FIELDS` lists.

    guidellm does not say whether the server speculated: give it runs without speculative decoding (a run that
    did shows a Little's-law R above its streams, refused as for vLLM's results).

    Raises:
        SpecsimInputError: no ``benchmarks`` list, or a benchmark missing a field or holding a bad one (naming its
            1-based index as the line and the guidellm field).
    """
    from dataclasses import replace as with_field
    from specsim.hardware.measured import _json_objects

    src = str(path)
    benches = _json_objects(Path(path))[0].get("benchmarks")
    if not isinstance(benches, list) or not benches:
        raise SpecsimInputError(src, None, "benchmarks", "a non-empty list (a guidellm JSON report)",
                                type(benches).__name__)
    out = []
    for k, bench in enumerate(benches, start=1):
        if not isinstance(bench, dict):
            raise SpecsimInputError(src, k, "benchmarks", "a benchmark object", type(bench).__name__)
        try:
            out.append(_observation(_guidellm_summary(bench), src, k))
        except SpecsimInputError as e:
            raise with_field(e, field=GUIDELLM_FIELDS.get(e.field, e.field)) from None
    return out


# ---------------------------------------------------------------------------------------------
# CSV

CSV_COLUMNS = ("step_time_s", "step_time_ms", "num_requests", "batch_tokens", "context_tokens", "prompt_tokens",
               "weight", "label")


def _meant_column(name: str) -> str | None:
    """What a header cell that is not a known column most likely meant, where it is one by another spelling (case,
    a plural s, step_time in another unit); None for any other name (ignored, as the module docstring says:
    statistics such as step_time_ms_p99 or max_num_requests are no misspelling)."""
    if name in CSV_COLUMNS:
        return None
    low = name.lower()
    for known in CSV_COLUMNS:
        if low in (known, known + "s") or low + "s" == known:
            return f"did you mean {known!r}?"
    if low.startswith("step_time") and low.count("_") <= 2:
        return "step times are read from step_time_s or step_time_ms only"
    return None


def _csv_header(header: list[str], src: str) -> dict[str, int]:
    """Column name -> index of the columns this reader uses; checks the required ones."""
    names = [name.strip() for name in header]
    cols = {name: i for i, name in enumerate(names)}
    for name in names:
        if name in CSV_COLUMNS and names.count(name) > 1:
            raise SpecsimInputError(src, 1, name, "each column once", f"{names.count(name)} columns named {name!r}")
        meant = _meant_column(name)
        if meant:
            raise SpecsimInputError(src, 1, name, f"a column this reader knows ({meant}; the columns: "
                                    f"{', '.join(CSV_COLUMNS)})", repr(name))
    times = [c for c in ("step_time_s", "step_time_ms") if c in cols]
    if len(times) != 1:
        raise SpecsimInputError(src, 1, "step_time_s", "exactly one of the columns step_time_s, step_time_ms",
                                f"columns {[c.strip() for c in header]}")
    if "num_requests" not in cols and "batch_tokens" not in cols:
        raise SpecsimInputError(src, 1, "num_requests", "a num_requests and/or batch_tokens column",
                                f"columns {[c.strip() for c in header]}")
    return {c: cols[c] for c in CSV_COLUMNS if c in cols}


def _csv_number(row: list[str], cols: dict, name: str, src: str, line: int, expected: str, ok,
                default: float | None = None) -> float | None:
    """The cell of column ``name`` as a float passing ``ok``; ``default`` when the column or cell is empty."""
    cell = row[cols[name]].strip() if name in cols and cols[name] < len(row) else ""
    if cell == "":
        if default is not None or name not in cols:
            return default
        raise SpecsimInputError(src, line, name, expected, "an empty cell")
    try:
        v = float(cell)
    except ValueError:
        raise SpecsimInputError(src, line, name, expected, repr(cell)) from None
    if not math.isfinite(v) or not ok(v):
        raise SpecsimInputError(src, line, name, expected, repr(cell))
    return v


def _csv_row(row: list[str], cols: dict, src: str, line: int, width: int) -> StepObservation:
    if any(c.strip() for c in row[width:]):     # a shifted row would be read by position (empty ones: a spreadsheet)
        raise SpecsimInputError(src, line, None, f"at most {width} cells (the header's columns)", f"{len(row)} cells")
    tname = "step_time_s" if "step_time_s" in cols else "step_time_ms"
    t = _csv_number(row, cols, tname, src, line, "a number > 0", lambda v: v > 0)
    step_s = t if tname == "step_time_s" else t / 1000.0
    r = _csv_number(row, cols, "num_requests", src, line, "a number > 0 (Little's law gives below 1 at one user)",
                    lambda v: v > 0)
    b = _csv_number(row, cols, "batch_tokens", src, line, "a number >= 1", lambda v: v >= 1)
    r, b = (b if r is None else r), (max(r, 1.0) if b is None else b)     # a step carries at least one token
    if b < r:
        raise SpecsimInputError(src, line, "batch_tokens", f">= num_requests ({r:g}: each request adds a token)",
                                f"{b:g}")
    ctx = _csv_number(row, cols, "context_tokens", src, line, "a number >= 0", lambda v: v >= 0, math.nan)
    prompt = _csv_number(row, cols, "prompt_tokens", src, line, "a number >= 1 (tokens)", lambda v: v >= 1,
                         None if "prompt_tokens" in cols and b > r else math.nan)   # prompts in the step: given
    prompt = math.nan if prompt is None else prompt
    w = _csv_number(row, cols, "weight", src, line, "a number > 0", lambda v: v > 0, 1.0)
    label = row[cols["label"]].strip() if "label" in cols and cols["label"] < len(row) else ""
    return StepObservation(r, b, ctx, step_s, src, line, "step", label or f"B={b:g}", w, prompt_tokens=prompt)


def _csv_columns(rows: list, cols: dict, src: str, width: int) -> list[StepObservation] | None:
    """The observations of ``rows`` ((line, cells) each) read a column at a time, as :func:`_csv_row` reads each
    row (a CSV of 500,000 steps took 10 s row by row); None where any row needs its checks (a row of another width,
    a missing or non-numeric cell, a value out of range), so that the row-wise reader names the row and column."""
    n = len(rows)
    if not n or any(len(row) != width for _, row in rows):
        return None

    def cells(name: str) -> list[str] | None:
        return [row[cols[name]].strip() for _, row in rows] if name in cols else None

    def numbers(name: str, empty: float | None) -> np.ndarray | None:
        text = cells(name)
        if text is None:
            return None
        if empty is not None:
            text = [c if c else repr(empty) for c in text]
        return np.fromiter(map(float, text), np.float64, n)      # ValueError on an empty or non-numeric cell

    try:
        tname = "step_time_s" if "step_time_s" in cols else "step_time_ms"
        t, r, b = numbers(tname, None), numbers("num_requests", None), numbers("batch_tokens", None)
        ctx, w = numbers("context_tokens", math.nan), numbers("weight", 1.0)
        prompt = numbers("prompt_tokens", math.nan)
    except ValueError:
        return None
    def given(name: str) -> np.ndarray:
        text = cells(name)
        return np.zeros(n, bool) if text is None else np.array([c != "" for c in text], bool)

    ctx_given, prompt_given = given("context_tokens"), given("prompt_tokens")
    r, b = (b if r is None else r), (np.maximum(r, 1.0) if b is None else b)
    w = np.ones(n) if w is None else w
    ctx = np.full(n, math.nan) if ctx is None else ctx
    prompt = np.full(n, math.nan) if prompt is None else prompt
    ok = (np.isfinite(t) & (t > 0) & np.isfinite(r) & (r > 0) & np.isfinite(b) & (b >= 1) & (b >= r)
          & np.isfinite(w) & (w > 0) & (~ctx_given | (np.isfinite(ctx) & (ctx >= 0)))
          & np.where(prompt_given, np.isfinite(prompt) & (prompt >= 1), ("prompt_tokens" not in cols) | (b <= r)))
    if not ok.all():
        return None
    step_s = t if tname == "step_time_s" else t / 1000.0
    labels = cells("label") or [""] * n
    return [StepObservation(ri, bi, ci, ti, src, line, "step", label or f"B={bi:g}", wi, prompt_tokens=pi)
            for (line, _), ri, bi, ci, ti, wi, pi, label in zip(rows, r.tolist(), b.tolist(), ctx.tolist(),
                                                                step_s.tolist(), w.tolist(), prompt.tolist(), labels)]


def observations_from_csv(path) -> list[StepObservation]:
    """Step-time observations from a CSV of steps or buckets of steps (columns in the module docstring).

    Args:
        path: the CSV file (comma-separated, a header row first).

    Returns:
        One ``kind="step"`` observation per non-blank row, in file order, ``line`` = its line in the file.

    Raises:
        SpecsimInputError: an unreadable file, no data rows, a header without the required columns, or a bad
            cell (naming file, line and column).
    """
    src = str(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:  # utf-8-sig: spreadsheet exports
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise SpecsimInputError(src, 1, None, "a header row (step_time_s or step_time_ms, ...)", "nothing")
            cols = _csv_header(header, src)
            rows = [(reader.line_num, row) for row in reader if "".join(row).strip()]     # blank rows skipped
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise SpecsimInputError(src, None, None, "a readable UTF-8 CSV file", str(e)) from None
    out = _csv_columns(rows, cols, src, len(header))
    if out is None:                     # a row the column-wise reader cannot take: the row-wise one names it
        out = [_csv_row(row, cols, src, line, len(header)) for line, row in rows]
    if not out:
        raise SpecsimInputError(src, None, None, "at least one data row", "a header only")
    return out


# ---------------------------------------------------------------------------------------------
# Dispatch (the Prometheus reader: specsim.hardware.step_prometheus)


def _is_guidellm(path: Path) -> bool:
    """Whether a JSON file is a guidellm report (its object has ``benchmarks``; a file that does not read as JSON
    is left to the vLLM reader, which names the problem)."""
    from specsim.hardware.measured import _json_objects
    try:
        return "benchmarks" in _json_objects(path)[0]
    except SpecsimInputError:
        return False


def detect_format(path) -> str:
    """``"vllm"``, ``"guidellm"``, ``"csv"`` or ``"prometheus"`` for one file: by suffix (a JSON object with
    ``benchmarks`` is a guidellm report), else by its first non-blank text.

    Raises:
        SpecsimInputError: an unreadable file, or one that is none of them.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in (".json", ".jsonl"):
        return "guidellm" if _is_guidellm(p) else "vllm"
    if suffix == ".csv":
        return "csv"
    if suffix == ".prom":
        return "prometheus"
    try:
        head = p.read_text(encoding="utf-8")[:4096].lstrip()
    except (OSError, UnicodeDecodeError) as e:
        raise SpecsimInputError(str(p), None, None, "a readable UTF-8 file", str(e)) from None
    first = head.splitlines()[0] if head else ""
    if head.startswith(("{", "[")):
        return "guidellm" if _is_guidellm(p) else "vllm"
    sample = _SAMPLE.match(first)
    if first.startswith("#") or sample and re.fullmatch(r"[+-]?(\d[\d.eE+-]*|\.\d+|Inf|NaN)", sample.group(3)):
        return "prometheus"
    if "step_time_s" in first or "step_time_ms" in first:
        return "csv"
    raise SpecsimInputError(str(p), 1, None, "a vllm bench serve result or guidellm report (.json), a step CSV "
                            "(.csv, with step_time_s or step_time_ms) or a Prometheus dump (.prom)", repr(first[:60]))


def read_step_observations(paths, *, fmt: str | None = None) -> list[StepObservation]:
    """Step-time observations of every file, in the order given (each file's own order inside); a label that
    points of different files share gets its file's name appended (two dumps of one server both say
    ``engine=0``).

    Args:
        paths: one path or a sequence of paths.
        fmt: one of :data:`FORMATS` for every file, or None to detect each file's (:func:`detect_format`).
            ``"prometheus-delta"``: the files are dumps of one server in time order; the first gives the means
            since start, each later one the means since the dump before it.

    Raises:
        SpecsimInputError: an unknown ``fmt``, no paths, or as the readers do.
    """
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if fmt is not None and fmt not in FORMATS:
        raise SpecsimInputError("--format", None, "fmt", f"one of {', '.join(FORMATS)}", repr(fmt))
    if not paths:
        raise SpecsimInputError(None, None, "paths", "at least one measurement file", "none")
    seen = [Path(p).resolve() for p in paths]
    twice = next((p for i, p in enumerate(paths) if seen[i] in seen[:i]), None)
    if twice is not None:                   # a fresh user's file given twice counted as two points of one load
        raise SpecsimInputError(str(twice), None, "paths", "each measurement file once", "the same file twice")
    out: list[StepObservation] = []
    for i, p in enumerate(paths):
        kind = fmt or detect_format(p)
        if kind == "prometheus-delta":
            out += observations_from_prometheus(p, baseline=paths[i - 1] if i else None)
        else:
            out += _READERS[kind](p)
    files: dict[str, set[str]] = {}
    for o in out:
        files.setdefault(o.label, set()).add(o.source)
    return [replace(o, label=f"{o.label} ({Path(o.source).name})") if len(files[o.label]) > 1 else o for o in out]


_READERS = {"vllm": observations_from_vllm_results, "guidellm": observations_from_guidellm,
            "csv": observations_from_csv,
            "prometheus": observations_from_prometheus}


def as_arrays(observations: Iterable[StepObservation]):
    """``(num_requests, batch_tokens, context_tokens, step_time_s, weight)`` as (N,) float64 arrays."""
    obs = list(observations)
    return tuple(np.array([getattr(o, f) for o in obs], dtype=np.float64)
                 for f in ("num_requests", "batch_tokens", "context_tokens", "step_time_s", "weight"))
