"""The synthetic trace generator: renewal arrivals, a domain mix, fitted, fixed or sampled lengths, shared
prefixes (:func:`synth_trace`; the length models are :mod:`specsim.workload.lengths`)."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.workload.lengths import (LENGTH_MODELS, LengthModel, _draw_lengths, maxent_lengths, parse_length_spec,
                                      parse_mix)
from specsim.workload.trace import Trace

ARRIVALS = ("poisson", "gamma", "constant")
#: The most requests one synthetic trace may hold (about 1 GB of JSONL; 100x the largest benchmarked run): a larger
#: count is almost always a typo in a rate or a duration, and would fill the machine's memory before failing.
MAX_SYNTH_REQUESTS = 10_000_000


def _synth_arrivals(rng: np.random.Generator, n: int | None, rate: float, arrival: str, cv: float,
                    duration_s: float | None, span_s: float | None) -> np.ndarray:
    """(N,) float64 arrivals from 0 s: N given, or every arrival in [0, duration_s) when N is None.

    Gaps are i.i.d. with mean 1/rate (exponential, Gamma(1/cv^2, cv^2/rate) or exactly 1/rate);
    ``span_s`` then rescales them so that the last arrival is at ``span_s``.
    """
    def gaps(k: int) -> np.ndarray:
        if arrival == "poisson":
            return rng.exponential(1.0 / rate, k)
        if arrival == "gamma":
            return rng.gamma(1.0 / cv**2, cv**2 / rate, k)
        return np.full(k, 1.0 / rate)

    if n is not None:
        times = np.r_[0.0, np.cumsum(gaps(n - 1))]
    else:
        chunk = int(rate * duration_s * 1.25) + 16   # draws in a few chunks, deterministic per seed
        times = np.zeros(1)
        while times[-1] < duration_s:
            times = np.r_[times, times[-1] + np.cumsum(gaps(chunk))]
        times = times[times < duration_s]
    if span_s is not None:
        times = times * (span_s / times[-1])
    return times


def _synth_lengths(rng_model: np.random.Generator, rng_extra: np.random.Generator, n: int,
                   params: np.ndarray, lengths: tuple[np.ndarray, np.ndarray] | None,
                   specs: tuple[tuple | None, tuple | None], maxima: tuple[int, int]) -> list[np.ndarray]:
    """[(N,) prompt, (N,) output] int64 lengths: the domain models, or pairs drawn from ``lengths``,
    then replaced by the fixed, uniform or maximum-entropy ``specs`` where given."""
    if lengths is not None:
        idx = rng_extra.integers(0, lengths[0].size, n)                 # pairs drawn with replacement
        out = [np.clip(lengths[k][idx], 1, maxima[k]).astype(np.int64) for k in (0, 1)]
    else:
        z = rng_model.standard_normal((n, 2))
        z_out = params[:, 4] * z[:, 0] + np.sqrt(1.0 - params[:, 4] ** 2) * z[:, 1]  # (N,) copula
        out = [_draw_lengths(params[:, 0], params[:, 1], z[:, 0], maxima[0]),
               _draw_lengths(params[:, 2], params[:, 3], z_out, maxima[1])]
    for k, spec in enumerate(specs):
        if spec is not None and spec[0] == "fixed":
            out[k] = np.full(n, spec[1], dtype=np.int64)
        elif spec is not None and spec[0] == "maxent":
            out[k] = maxent_lengths(spec[1], spec[2], n, rng_extra)
        elif spec is not None:
            out[k] = rng_extra.integers(spec[1], spec[2] + 1, n).astype(np.int64)
    return out


def _synth_count(num_requests, duration_s, span_s, prefix_groups, questions_per_group) -> int | None:
    """The request count the arguments fix (None: all arrivals before ``duration_s``); raises on conflicts."""
    grouped = questions_per_group if prefix_groups else None
    given = [k for k, v in (("num_requests", num_requests), ("duration_s", duration_s),
                            ("questions_per_group", grouped)) if v is not None]
    if len(given) != 1 and not (given == ["num_requests", "questions_per_group"]
                                and num_requests == prefix_groups * questions_per_group):
        raise SpecsimInputError(None, None, "num_requests", "exactly one of num_requests (--num-requests), "
                                "duration_s (--duration, with the rate) or prefix_groups x questions_per_group "
                                "(--prefix-groups, --questions-per-group)", f"{given or 'none'}")
    if span_s is not None and duration_s is not None:
        raise SpecsimInputError(None, None, "span_s", "span_s (--span) without duration_s (--duration): both set "
                                "the time span", f"span_s={span_s}, duration_s={duration_s}")
    if grouped is not None:
        return prefix_groups * questions_per_group
    return None if num_requests is None else int(num_requests)


def synth_trace(num_requests: int | None, rate: float, *, arrival: str = "poisson", cv: float = 1.0,
                mix: str | Mapping[str, float] = "chat=1", seed: int = 0,
                max_prompt_tokens: int = 8192, max_output_tokens: int = 2048,
                length_models: Mapping[str, LengthModel] = LENGTH_MODELS,
                duration_s: float | None = None, span_s: float | None = None,
                output_len: int | str | None = None, prompt_len: int | str | None = None,
                lengths: tuple[np.ndarray, np.ndarray] | None = None,
                prefix_groups: int = 0, prefix_tokens: int = 0,
                questions_per_group: int | None = None) -> Trace:
    """Draw a synthetic trace: renewal arrivals, a domain mix, fitted, fixed or sampled lengths.

    Count: ``num_requests``; or, with ``duration_s``, every arrival in [0, duration_s) at ``rate``;
    or, with prefix groups, ``prefix_groups x questions_per_group`` (exactly one of the three).

    Arrivals: the first request arrives at 0 s; inter-arrival gaps are i.i.d. with mean 1/rate:
    exponential for ``poisson`` (CV 1), Gamma with shape 1/cv^2 and scale cv^2/rate for ``gamma``
    (CV = ``cv``; cv > 1 is bursty), exactly 1/rate for ``constant``. With ``span_s`` the drawn
    arrivals are rescaled so that the last one is at ``span_s`` (a stage of that duration; the shape
    of the gaps is kept and ``rate`` no longer matters). Arrivals are rounded to microseconds so
    files round-trip.

    Domains: exact counts from the mix by largest remainder, then randomly permuted. Lengths: each
    request's domain model (:class:`LengthModel`) truncated to [1, max_*_tokens]; or, with
    ``lengths``, (prompt, output) pairs drawn with replacement from those arrays (clipped to the
    maxima); then ``prompt_len`` / ``output_len`` (:func:`parse_length_spec`: fixed N or
    uniform:LO:HI, used as given) replace the drawn values where set.

    Shared prefixes (``prefix_groups`` G >= 1 with ``prefix_tokens`` P >= 1): each request belongs to
    one of G groups (``prefix_group`` ``"g0"``..``"g{G-1}"``, balanced: ``questions_per_group`` each
    when given, else request k's group is k mod G before a random permutation); its prompt is the P
    shared system-prompt tokens followed by its question, whose length is the prompt length drawn
    above, so ``prompt_tokens`` = P + question and ``prefix_tokens`` = P (docs/memory.md).

    Ids: "0".."N-1". Random streams: ``SeedSequence(seed).spawn(5)``: arrivals, domain order, model
    lengths (the first three as before these options existed, so earlier traces are unchanged),
    group order, and the lengths-file / uniform draws.

    Args:
        num_requests: N in [1, :data:`MAX_SYNTH_REQUESTS`], or None with ``duration_s`` or
            ``questions_per_group``.
        rate: mean arrival rate in requests per second, > 0.
        arrival: ``"poisson"``, ``"gamma"`` or ``"constant"``.
        cv: inter-arrival coefficient of variation, > 0 (must be 1 for ``poisson`` and ``constant``).
        mix: domain weights, a ``"chat=0.2,code=0.4,math=0.4"`` string or a mapping.
        seed: the one seed, an int >= 0.
        max_prompt_tokens, max_output_tokens: clipping maxima in tokens, >= 1.
        length_models: per-domain length models (default: :data:`LENGTH_MODELS`).
        duration_s: seconds > 0; with ``rate`` instead of a count (rate x duration at most
            :data:`MAX_SYNTH_REQUESTS`).
        span_s: seconds > 0, the last arrival after rescaling (N >= 2).
        output_len, prompt_len: fixed or uniform lengths (:func:`parse_length_spec`).
        lengths: (prompt, output) int arrays of equal length M >= 1
            (:func:`specsim.workload.converters.load_lengths_csv`).
        prefix_groups, prefix_tokens, questions_per_group: the shared-prefix groups (0 = none).

    Raises:
        SpecsimInputError: any argument outside the ranges above or a conflicting combination,
            naming it as the field.
    """
    for name, v, kind in (("num_requests", num_requests, "an int"), ("rate", rate, "a number (req/s)"),
                          ("cv", cv, "a number"), ("seed", seed, "an int")):
        number = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
        if not ((v is None and name == "num_requests") or (number and (kind != "an int" or float(v).is_integer()))):
            raise SpecsimInputError(None, None, name, kind, repr(v))     # "5" or 10.5 failed deep inside or was cut
    n = _synth_count(num_requests, duration_s, span_s, prefix_groups, questions_per_group)
    for name, v, ok, expected in [
        ("num_requests", n, n is None or 1 <= n <= MAX_SYNTH_REQUESTS, f"an int in [1, {MAX_SYNTH_REQUESTS:,}]"),
        ("rate", rate, math.isfinite(rate) and rate > 0, "a finite rate > 0 req/s"),
        ("arrival", arrival, arrival in ARRIVALS, f"one of {ARRIVALS}"),
        ("cv", cv, math.isfinite(cv) and cv > 0 and (arrival == "gamma" or cv == 1.0),
         "a finite cv > 0 (exactly 1 for poisson and constant arrivals)"),
        ("seed", seed, seed >= 0, "an int >= 0"),
        ("max_prompt_tokens", max_prompt_tokens, max_prompt_tokens >= 1, "an int >= 1"),
        ("max_output_tokens", max_output_tokens, max_output_tokens >= 1, "an int >= 1"),
        ("duration_s", duration_s, duration_s is None or (math.isfinite(duration_s) and duration_s > 0),
         "a finite duration > 0 s"),
        ("rate x duration_s", None if duration_s is None else f"{rate * duration_s:.3g} requests",
         duration_s is None or not rate * duration_s > MAX_SYNTH_REQUESTS,
         f"at most {MAX_SYNTH_REQUESTS:,} requests (MAX_SYNTH_REQUESTS; lower --rate or --duration)"),
        ("span_s", span_s, span_s is None or (math.isfinite(span_s) and span_s > 0 and (n or 0) >= 2),
         "a finite span > 0 s with at least 2 requests"),
        ("prefix_groups", prefix_groups, prefix_groups >= 0, "an int >= 0"),
        ("prefix_tokens", prefix_tokens, (prefix_tokens >= 1) == (prefix_groups >= 1) and prefix_tokens >= 0,
         "an int >= 1 exactly when prefix_groups >= 1"),
        ("questions_per_group", questions_per_group, questions_per_group is None or questions_per_group >= 1,
         "an int >= 1"),
        ("lengths", None if lengths is None else len(lengths[0]),
         lengths is None or (len(lengths) == 2 and len(lengths[0]) == len(lengths[1]) >= 1),
         "two arrays of equal length >= 1"),
    ]:
        if not ok:
            raise SpecsimInputError(None, None, name, expected, repr(v))
    specs = (parse_length_spec(prompt_len, "prompt_len"), parse_length_spec(output_len, "output_len"))
    weights = parse_mix(mix, length_models)
    arr_rng, dom_rng, len_rng, group_rng, extra_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(5))

    arrival_s = np.round(_synth_arrivals(arr_rng, n, rate, arrival, cv, duration_s, span_s), 6)
    n = arrival_s.size  # rounding is monotone: order kept

    names = list(weights)
    quota = np.array([weights[k] for k in names]) * n
    counts = np.floor(quota).astype(np.int64)
    extra = np.argsort(-(quota - counts), kind="stable")[: n - counts.sum()]
    counts[extra] += 1
    dom_idx = dom_rng.permutation(np.repeat(np.arange(len(names)), counts))  # (N,)

    params = np.array([[getattr(length_models[k], f) for f in
                        ("prompt_mu", "prompt_sigma", "output_mu", "output_sigma", "rho")]
                       for k in names])[dom_idx]  # (N, 5)
    pairs = None if lengths is None else tuple(np.asarray(x, dtype=np.int64) for x in lengths)
    prompt, output = _synth_lengths(len_rng, extra_rng, n, params, pairs, specs,
                                    (max_prompt_tokens, max_output_tokens))
    desc = (f"synth(n={n}, rate={rate}, arrival={arrival}, cv={cv}, mix={weights}, seed={seed})")
    prefix = {}
    if prefix_groups:
        group = group_rng.permutation(np.arange(n) % prefix_groups)           # (N,) balanced groups
        prompt = prompt + prefix_tokens
        prefix = {"prefix_group": np.array([f"g{g}" for g in group], dtype=object),
                  "prefix_tokens": np.full(n, prefix_tokens, dtype=np.int64)}
        desc = desc[:-1] + f", prefix_groups={prefix_groups}, prefix_tokens={prefix_tokens})"
    return Trace(np.array([str(k) for k in range(n)], dtype=object), arrival_s,
                 prompt, output, np.array(names, dtype=object)[dom_idx], source=desc, **prefix)
