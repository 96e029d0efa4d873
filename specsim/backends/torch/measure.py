"""Measurements with real models: step-time profiles, per-position acceptance curves, calibration, plots.

* :func:`measure_profile`: the target's verify-step time on this machine as a
  :class:`~specsim.hardware.profile.StepTimeProfile` (median of repeated forwards of B tokens, taken in
  interleaved rounds, kept as measured, with warnings where the repeats disagree or the curve falls), plus a
  per-context-token term: this backend has no KV cache, so every step recomputes each request's prefix;
  ``kv_read_s_per_token`` is the measured slope of step time in context tokens.
* :func:`acceptance_curves`: the small-scale version of the DSpark paper's Fig. 2 (§4.3.1): run each drafter
  on the same target and prompts with ``static`` full-gamma verification, and pool
  alpha_k = P(draft k accepted | drafts 1..k-1 accepted) = (#rows with accepted >= k) / (#rows with
  accepted >= k-1) over every step of every request.
* :func:`calibration_report`: ECE/AUROC of the DSpark confidence head before and after STS, through
  :func:`specsim.acceptance.calibration.calibrate_step_log` (fit on half the requests, evaluated on the other half).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from specsim.backends.torch.decode import SpecDecoder
from specsim.hardware.profile import StepTimeProfile
from specsim.policies import make_policy


def _time_rounds(target, sizes: list[int], repeats: int, vocab: int) -> list[list[float]]:
    """Timed forwards of each size in ``sizes`` (tokens), seconds: one warm-up each, then ``repeats`` rounds that
    each time every size once, so a burst of load on a shared machine costs one run of several sizes, never
    every run of one size."""
    ids = [torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(n)) for n in sizes]
    samples: list[list[float]] = [[] for _ in sizes]
    with torch.no_grad():
        for x in ids:
            target(x)                                                  # warm-up
        for _ in range(repeats):
            for x, times in zip(ids, samples):
                t0 = time.perf_counter()
                target(x)
                times.append(time.perf_counter() - t0)
    return samples


#: The statistics a measured point may take over its repeats: ``median`` (a step's typical time) or ``min`` (the
#: least disturbed run: on a busy machine most runs may be slowed, and no run is ever sped up).
STATISTICS = {"median": np.median, "min": np.min}


def measure_profile(target, batch_tokens=(1, 2, 4, 8, 16, 32, 64), context_tokens: int = 64,
                    repeats: int = 5, statistic: str = "median") -> StepTimeProfile:
    """Measure the target's step time at each verification batch size B on this machine.

    Each point is the ``statistic`` of ``repeats`` runs taken in interleaved rounds (:func:`_time_rounds`); points are
    kept as measured (a monotone envelope would carry one slow run to every larger B). Pin torch's threads
    first (``torch.set_num_threads(1)``, as ``specsim torch profile`` and ``specsim replay`` do) on a shared
    machine.

    Args:
        target: a target model.
        batch_tokens: B grid (tokens per forward), increasing.
        context_tokens: extra prefix tokens used to fit the per-context-token slope.
        repeats: timed repetitions per point, >= 1.
        statistic: a name in :data:`STATISTICS`, what each point keeps of its repeats.

    Raises:
        SpecsimInputError: an unknown ``statistic``.

    Returns:
        a ``linear``-lookup profile with ``kv_read_s_per_token`` = slope of time in context tokens
        (kind "measured"; the metadata holds the torch thread count, the statistic and ``timing_warnings``:
        :func:`specsim.hardware.measure.timing_warnings` of the repeats, empty when the curve looks physical).
    """
    from specsim.errors import SpecsimInputError
    from specsim.hardware.measure import timing_warnings
    if statistic not in STATISTICS:
        raise SpecsimInputError(None, None, "statistic", f"one of {sorted(STATISTICS)}", repr(statistic))
    b = [int(x) for x in batch_tokens]
    vocab = int(target.vocab_size)
    samples = _time_rounds(target, b + [b[-1] + context_tokens], repeats, vocab)
    med = [float(STATISTICS[statistic](s)) for s in samples]
    t, t_ctx = np.maximum(med[:-1], 1e-6), med[-1]
    slope = max(0.0, (t_ctx - t[-1]) / context_tokens)
    return StepTimeProfile(np.array(b), t, lookup="linear", kv_read_s_per_token=slope, extrapolate="linear",
                           metadata={"kind": "measured", "model": getattr(target, "name", "target"),
                                     "engine": "specsim torch backend (no KV cache; prefix recomputed)",
                                     "device": "cpu", "threads": torch.get_num_threads(),
                                     "statistic": f"{statistic} of {repeats} interleaved rounds after one warm-up",
                                     "timing_warnings": timing_warnings(b, samples[:-1]),
                                     "date": time.strftime("%Y-%m-%d"),
                                     "source": "specsim.backends.torch.measure.measure_profile"},
                           source="<measured>")


def run_static(target, drafter, prompts: list[tuple[str, list[int]]], gamma: int, max_new_tokens: int,
               seed: int, greedy: bool = False, temperature: float = 1.0, profile: StepTimeProfile | None = None,
               max_batch: int = 16, ignore_eos: bool = True) -> SpecDecoder:
    """Decode ``prompts`` ((domain, ids) pairs) with ``static`` full-gamma verification; returns the decoder."""
    profile = profile or StepTimeProfile.flat(1.0)
    dec = SpecDecoder(target, drafter, make_policy("static", gamma=gamma), profile, gamma=gamma, greedy=greedy,
                      temperature=temperature, seed=seed, max_batch=max_batch)
    for dom, ids in prompts:
        dec.add_request(ids, max_new_tokens, domain=dom, ignore_eos=ignore_eos)
    dec.run()
    return dec


def conditional_acceptance(step_log: pd.DataFrame, gamma: int) -> pd.DataFrame:
    """Pooled per-position conditional acceptance from a full-gamma step log.

    Returns:
        one row per position k: position, alpha (P(accept k | 1..k-1 accepted)), survival
        (P(1..k accepted)), n (rows that reached position k).
    """
    full = step_log[step_log["verify_len"] == gamma]
    acc = full["num_accepted"].to_numpy()
    reach = np.array([(acc >= k - 1).sum() for k in range(1, gamma + 1)])
    passed = np.array([(acc >= k).sum() for k in range(1, gamma + 1)])
    return pd.DataFrame({"position": np.arange(1, gamma + 1), "alpha": passed / np.maximum(reach, 1),
                         "survival": passed / max(len(acc), 1), "n": reach})


def acceptance_curves(target, drafters: dict, prompts, gamma: int, max_new_tokens: int, seed: int,
                      greedy: bool = False, max_batch: int = 16) -> tuple[pd.DataFrame, dict]:
    """Per-position conditional acceptance of several drafters on the same target and prompts.

    Returns:
        (curves, logs): curves has columns drafter, position, alpha, survival, n, acceptance_length
        (mean tokens per step incl. the target's own); logs maps drafter name -> step log.
    """
    frames, logs = [], {}
    for name, drafter in drafters.items():
        dec = run_static(target, drafter, prompts, gamma, max_new_tokens, seed, greedy=greedy, max_batch=max_batch)
        log = dec.step_log()
        logs[name] = log
        c = conditional_acceptance(log, gamma)
        c.insert(0, "drafter", name)
        c["acceptance_length"] = float((log["num_accepted"] + 1).mean())
        frames.append(c)
    return pd.concat(frames, ignore_index=True), logs


def calibration_report(step_log: pd.DataFrame):
    """ECE/AUROC per position of the raw and STS-calibrated confidences (see :mod:`specsim.acceptance.calibration`)."""
    from specsim.acceptance.calibration import calibrate_step_log
    return calibrate_step_log(step_log, source=["torch backend static run"], warn_to_stderr=False)


def plot_acceptance_curves(curves: pd.DataFrame, path: str | Path, title: str = "") -> None:
    """Conditional acceptance alpha_k against position k, one line per drafter (PNG; the DSpark paper's Fig. 2
    layout)."""
    from specsim import figures

    fig, ax = figures.subplots(figsize=(5.2, 3.6))
    for name, g in curves.groupby("drafter", sort=False):
        tau = g["acceptance_length"].iloc[0]
        ax.plot(g["position"], g["alpha"], marker="o", label=f"{name} (tau {tau:.2f})")
    ax.set(xlabel="draft position k", ylabel="P(accept k | 1..k-1 accepted)", ylim=(0, 1),
           title=title or "per-position conditional acceptance")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
