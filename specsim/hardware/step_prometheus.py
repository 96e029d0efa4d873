"""vLLM's Prometheus ``/metrics`` text dump read into step-time observations (``specsim profile fit``'s
``kind="histogram"`` points): the parser, the means between two dumps, and the checks of every counter read.
The derivation (which histogram gives the step, B, R and the context) is in :mod:`specsim.hardware.step_points`'
docstring, which re-exports :func:`observations_from_prometheus`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from specsim.errors import SpecsimInputError, plain
from specsim.hardware.step_observation import NO_SPEC, StepObservation

ITL_METRICS = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
ITERATION = "vllm:iteration_tokens_total"
GENERATED = "vllm:generation_tokens_total"
RUNNING = "vllm:num_requests_running"
PROMPT_HIST, GEN_HIST = "vllm:request_prompt_tokens", "vllm:request_generation_tokens"

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}

#: One dump: (sample name, identity labels) -> (value, line). Identity labels: all but ``le`` / ``quantile``.
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, int]]


def _labels(text: str, src: str, line: int) -> tuple[tuple[str, str], ...]:
    """The label pairs of ``{...}`` without ``le``/``quantile``, sorted; SpecsimInputError when malformed."""
    pairs, pos = [], 0
    while pos < len(text.rstrip()):
        m = _LABEL.match(text, pos)
        if m is None:
            raise SpecsimInputError(src, line, None, 'labels name="value", comma-separated', repr(text))
        value = re.sub(r'\\[\\"n]', lambda e: _UNESCAPE[e.group(0)], m.group(2))
        if m.group(1) not in ("le", "quantile"):
            pairs.append((m.group(1), value))
        pos = m.end()
    return tuple(sorted(pairs))


def _parse_prometheus(path) -> Samples:
    """Every sample of a text-exposition file (``# HELP``/``# TYPE`` and other comments skipped).

    Only ``_sum``, ``_count``, counter and gauge samples are used, so buckets of one label set share a key;
    the last bucket line wins, harmlessly.
    """
    src = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecsimInputError(src, None, None, "a readable UTF-8 Prometheus text dump", str(e)) from None
    samples: Samples = {}
    for i, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        m = _SAMPLE.match(s)
        if m is None:
            raise SpecsimInputError(src, i, None, "a sample line 'name{labels} value [timestamp]'", repr(s[:80]))
        try:
            value = float(m.group(3))
        except ValueError:
            raise SpecsimInputError(src, i, m.group(1), "a number (or +Inf, -Inf, NaN)", repr(m.group(3))) from None
        samples[(m.group(1), _labels(m.group(2) or "", src, i))] = (value, i)
    return samples


def _check_no_speculation(samples: Samples, src: str) -> None:
    for (name, _), (value, line) in samples.items():
        if name.startswith("vllm:spec_decode") and value > 0:
            raise SpecsimInputError(src, line, name, NO_SPEC + ": no spec_decode samples above 0", f"{value:g}")


def _counter(samples: Samples, name: str, key, src: str) -> tuple[float, int]:
    """(value, line) of a counter, histogram _sum/_count or gauge read: NaN, an infinity or a value below 0 is
    refused (they reached the fit as non-finite residuals, a scipy traceback)."""
    v, line = samples[(name, key)]
    if not math.isfinite(v) or v < 0:
        raise SpecsimInputError(src, line, name, "a finite number >= 0 (a Prometheus counter, histogram sum or "
                                "count)", plain(v))
    return v, line


def _delta(samples: Samples, base: Samples | None, name: str, key, src: str, base_src: str) -> float | None:
    """A counter or histogram _sum/_count since ``base`` (since start without it); None when absent."""
    if (name, key) not in samples:
        return None
    v, line = _counter(samples, name, key, src)
    if base is None or (name, key) not in base:
        return v
    b = _counter(base, name, key, base_src)[0]
    if v < b:
        raise SpecsimInputError(src, line, name, f">= its value {b:g} in the baseline {base_src} (dumps of one "
                                "server run, in time order)", f"{v:g}")
    return v - b


def _ratio(samples, base, num: str, den: str, key, src, base_src) -> float | None:
    n, d = (_delta(samples, base, x, key, src, base_src) for x in (num, den))
    return None if n is None or d is None or d <= 0 else n / d


def _prom_observation(samples: Samples, base: Samples | None, itl: str, key, src: str,
                      base_src: str) -> StepObservation | None:
    """The :class:`~specsim.hardware.step_points.StepObservation` of one label set (None when no token gap was
    observed in the window)."""
    label = " ".join(f"{k}={v}" for k, v in key) or "all"
    step_s = _ratio(samples, base, f"{itl}_sum", f"{itl}_count", key, src, base_src)
    if step_s is None:
        return None
    b = _ratio(samples, base, f"{ITERATION}_sum", f"{ITERATION}_count", key, src, base_src)
    if b is None:
        raise SpecsimInputError(src, None, f"{ITERATION}_count", f"engine steps for {label} (vLLM's "
                                "tokens-per-step histogram, > 0)", "none")
    r = _ratio(samples, base, GENERATED, f"{ITERATION}_count", key, src, base_src)
    if r is None and (RUNNING, key) in samples:
        r = _counter(samples, RUNNING, key, src)[0]         # a snapshot at the dump, not a mean
    if r is None or r <= 0:
        raise SpecsimInputError(src, None, GENERATED, f"generated tokens (or {RUNNING} > 0) for {label}",
                                "none" if r is None else f"{r:g}")
    prompt = _ratio(samples, base, f"{PROMPT_HIST}_sum", f"{PROMPT_HIST}_count", key, src, base_src)
    gen = _ratio(samples, base, f"{GEN_HIST}_sum", f"{GEN_HIST}_count", key, src, base_src)
    ctx = prompt + gen / 2.0 if prompt is not None and gen is not None else math.nan
    return StepObservation(r, b, ctx, step_s, src, samples[(f"{itl}_count", key)][1], "histogram", label)


def observations_from_prometheus(path, *, baseline=None) -> list[StepObservation]:
    """Step-time observations from a text dump of vLLM's ``/metrics``: one per label set (derivation above).

    Args:
        path: the dump (Prometheus text exposition format, as ``curl .../metrics`` saves it).
        baseline: an earlier dump of the same server: the observations are then the means between the two.

    Returns:
        One ``kind="histogram"`` observation per label set (``model_name``, ``engine``) with token gaps in
        the window, in order of first appearance; ``line`` = the line of the step-time ``_count`` sample.

    Raises:
        SpecsimInputError: an unreadable or malformed dump (naming the line), speculative-decoding samples
            above 0, no step-time histogram with observations, no engine steps or generated tokens for a
            label set, or a count below the baseline's.
    """
    src = str(path)
    samples = _parse_prometheus(path)
    _check_no_speculation(samples, src)
    base = None if baseline is None else _parse_prometheus(baseline)
    itl = next((n for n in ITL_METRICS if any(name == f"{n}_count" for name, _ in samples)), None)
    if itl is None:
        raise SpecsimInputError(src, None, f"{ITL_METRICS[0]}_count", f"a vLLM /metrics dump with "
                                f"{ITL_METRICS[0]} or {ITL_METRICS[1]}", "neither")
    keys = [key for name, key in samples if name == f"{itl}_count"]
    out = [o for key in keys
           if (o := _prom_observation(samples, base, itl, key, src, str(baseline))) is not None]
    if not out:
        raise SpecsimInputError(src, None, f"{itl}_count", "token gaps observed (> 0" +
                                (f" since {baseline})" if baseline is not None else ")"), "0")
    return out
