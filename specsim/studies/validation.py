"""Validation against public measurements of real engines (issue 12; docs/validation.md).

Inputs, shipped as package data: the CSVs of ``specsim/studies/data/validation`` (one row per load level of a
series, every row with its source URL and date; their README gives the columns) and the model configs of
``specsim/studies/data/hf_configs``. For each no-speculation series:

1. **fit** the step model's engine-level terms on at most a third of the series' points (``n // 3``, spread over
   the loads: the lowest and, with two, the highest), using the same Little's-law derivation as
   ``specsim profile fit`` reads from ``vllm bench serve`` results (:func:`observation_from_row`); one
   parameter (``kernel_s``) from one point, two (``kernel_s``, ``per_request_step_s``) from two or more, and
   series measured on one server fitted together, with ``mixed_step_s`` as well (:func:`server_observations`);
   and, as ``profile fit`` does, the request overhead on the lowest fitted load's TTFT (:func:`request_overhead`);
2. **predict** every other point by simulating the benchmark: a closed loop of N users, prompts of the source's
   mean length, outputs of its mean length or, where the source served the model's own lengths under a
   max_tokens, spread with that mean (:func:`spread_lengths`), chunked prefill in the replica (vLLM V1's
   default), the engine's running-request limit where the highest fitted point shows queueing
   (:func:`admission_limit`); mean TPOT, output throughput and TTFT (the source's statistic, reported without a
   target) of the closed loop's measurement window, or, where the source ran a fixed number of prompts
   (``measure="run"``: ``vllm bench serve``, SGLang's ``bench_serving``), of that many requests over the whole
   run, ramp-up and drain included, as the source counted them (:func:`simulate_row`);
3. for a speculative series, predict each point with the same fitted profile (never fitted on speculative
   points): ``static`` verification of the source's k drafts (vLLM verifies every draft), the drafter's cost from
   its shape, and a constant per-position acceptance solved from the source's reported acceptance length (an
   input, stated as such); the speed-up is the predicted speculative throughput over the predicted
   no-speculation throughput at the same N, against the measured ratio.

Run ``python -m specsim.studies.validation`` to print the tables of docs/validation.md; ``tests/test_validation.py``
recomputes them and holds each error to its target or its documented miss.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError
from specsim.acceptance.model import alpha_for_acceptance_length
from specsim.hardware.model_config import model_from_hf_config
from specsim.hardware.profile_fit import DEFAULT_PARAMS, fit_step_model
from specsim.hardware.step_points import StepObservation
from specsim.hardware.stepmodel import StepModel, step_model

#: The study's inputs, shipped as package data (an installed specsim has them; the library never reads tests/).
PACKAGE_DATA = Path(__file__).resolve().parent / "data"
DATA = PACKAGE_DATA / "validation"
CONFIGS = PACKAGE_DATA / "hf_configs"
REQUIRED = ("series", "engine", "gpu", "num_gpus", "tp", "model", "input_len", "output_len", "load_kind", "load",
            "spec_method", "output_throughput_tok_s", "mean_tpot_ms", "source_url", "source_date")

#: How each series is modelled: the model's config (``studies/data/hf_configs``), the GPU, TP / EP, weight dtype,
#: the prefill chunk (vLLM's max_num_batched_tokens), ``max_output`` where the source served the model's own output
#: lengths under that max_tokens (:func:`spread_lengths`; else every request has the mean lengths, as a random
#: dataset's fixed lengths are), ``server`` where several series measured one server (fitted together:
#: :func:`server_observations`), ``measure="run"`` where the source ran a fixed number of prompts (``vllm bench
#: serve``, SGLang's ``bench_serving``: every request counted, ramp-up and drain included; else the closed loop's
#: measurement window, as GuideLLM measures), and for speculative series the drafter and its baseline.
#: DeepSeek-R1 has DeepSeek-V3's architecture (its model card) and ships FP8 block-quantized weights. The H100
#: ShareGPT series served the dataset's own completions, which vLLM's sampler keeps to prompt + output <= 2,048
#: tokens (``is_valid_sequence``'s ``max_total_len``, benchmarks/datasets.py): outputs up to 2,048 - 233.
SETUPS: dict[str, dict[str, Any]] = {
    "vllm_b200_qwen3.8-27b_humaneval_nospec": dict(config="qwen3.8-27b.json", gpu="b200", chunk=16384,
                                                   max_output=1024, server="b200-qwen3.8"),
    "vllm_b200_qwen3.8-27b_mathreasoning_nospec": dict(config="qwen3.8-27b.json", gpu="b200", chunk=16384,
                                                       max_output=1024, server="b200-qwen3.8"),
    "vllm_h100_qwen3-8b_sharegpt_nospec": dict(config="qwen3-8b.json", gpu="h100", chunk=8192, max_output=1815,
                                               measure="run"),
    "vllm_h200_deepseek-r1_random3200-800_nospec": dict(config="deepseek-v3.json", gpu="h200", tp=8,
                                                        weight_dtype="fp8", chunk=2048, measure="run"),
    "sglang_h200_deepseek-r1_random3200-800_nospec": dict(config="deepseek-v3.json", gpu="h200", tp=8,
                                                          weight_dtype="fp8", chunk=8192, measure="run"),
    "trtllm_h200_deepseek-r1_random3200-800_nospec": dict(config="deepseek-v3.json", gpu="h200", tp=8,
                                                          weight_dtype="fp8", chunk=8192, measure="run"),
    "vllm_mi300x_deepseek-r1_random3200-800_nospec": dict(config="deepseek-v3.json", gpu="mi300x", tp=8,
                                                          weight_dtype="fp8", chunk=2048, measure="run"),
    "sglang_mi300x_deepseek-r1_random3200-800_nospec": dict(config="deepseek-v3.json", gpu="mi300x", tp=8,
                                                            weight_dtype="fp8", chunk=8192, measure="run"),
}
SPEC_SETUPS: dict[str, dict[str, Any]] = {
    "vllm_b200_qwen3.8-27b_humaneval_dspark7": dict(baseline="vllm_b200_qwen3.8-27b_humaneval_nospec",
                                                   drafter="dspark"),
    "vllm_b200_qwen3.8-27b_humaneval_mtp2": dict(baseline="vllm_b200_qwen3.8-27b_humaneval_nospec", drafter="mtp"),
    "vllm_b200_qwen3.8-27b_mathreasoning_dspark7": dict(baseline="vllm_b200_qwen3.8-27b_mathreasoning_nospec",
                                                       drafter="dspark"),
    "vllm_b200_qwen3.8-27b_mathreasoning_mtp2": dict(baseline="vllm_b200_qwen3.8-27b_mathreasoning_nospec",
                                                    drafter="mtp"),
}
#: The targets: median |error| of TPOT and of throughput on points not fitted (issue 12); the speed-up over no
#: speculation at each concurrency, with speculation's own terms at their sourced defaults (issue 20: 10%).
TARGETS = {"tpot_error": 0.10, "throughput_error": 0.10, "speedup_error": 0.10}
#: Misses, each with the bound it stays under (so a change that worsens it fails tests/test_validation.py) and
#: its cause (docs/validation.md). Keys: (series, metric) for medians, (series, N) for speed-ups.
_MOE_CAUSE = ("with the routed experts charged (issue 20) the predicted step rises with B faster than these engines' "
              "between the two fitted loads: TP 8 / EP 1 is modelled for every engine, while SGLang ran DP attention "
              "and TRT-LLM EP 4, and the early-2025 MoE kernels' cost is absorbed by two fitted constants")
DOCUMENTED_MISSES: dict[tuple[str, Any], tuple[float, str]] = {
    ("sglang_mi300x_deepseek-r1_random3200-800_nospec", "tpot_error"): (0.12, _MOE_CAUSE),
}
_MTP_CAUSE = ("too low: the simulated MTP step is 10% above the measured one at 128 HumanEval users (51.7 against "
              "47.0 ms, read from the users' cycle), of which speculation's own terms at their sourced defaults are "
              "11.5 ms: vLLM issue 49548's K = 0 tax on H100 (84 us per request per step), from a run with dynamic "
              "speculation, is an upper bound for this B200 engine, and the piecewise CUDA graphs vLLM runs it in "
              "explain its fixed part at most (vLLM issue 47089: ~1 us per request on B200); DSpark's speed-ups, "
              "charged the same terms, are within 5.2% except MathReasoning at N = 128 (+8.8%, its KV pool; "
              "docs/validation.md, 'Misses')")
DOCUMENTED_MISSES[("vllm_b200_qwen3.8-27b_humaneval_mtp2", 128)] = (0.12, _MTP_CAUSE)
#: Second protocol (``spec_step_s`` fitted on each speculative series' N = 1 point): the largest |speed-up error|
#: over its loads, held as a bound (issue 20's target is 5%; docs/validation.md gives each miss's cause).
FITTED_SPEEDUP_BOUNDS = {"vllm_b200_qwen3.8-27b_humaneval_dspark7": 0.06, "vllm_b200_qwen3.8-27b_humaneval_mtp2": 0.11,
                         "vllm_b200_qwen3.8-27b_mathreasoning_dspark7": 0.10,
                         "vllm_b200_qwen3.8-27b_mathreasoning_mtp2": 0.10}
#: The request overhead (seconds) where a series' fitted points give no TTFT to fit it on (docs/memory.md's default).
DEFAULT_OVERHEAD_S = 0.005
USERS_REQUESTS = 8          # requests per user in a simulated closed loop (the window needs several per user)


def load_rows(folder: Path = DATA) -> pd.DataFrame:
    """Every CSV of ``folder`` as one frame, each row checked for its source.

    Raises:
        SpecsimInputError: a missing column, or a row without ``source_url`` / ``source_date`` (naming file and line).
    """
    frames = []
    for path in sorted(Path(folder).glob("*.csv")):
        df = pd.read_csv(path)
        missing = [c for c in REQUIRED if c not in df.columns]
        if missing:
            raise SpecsimInputError(str(path), 1, missing[0], "the validation columns (README.md)", "missing")
        for col in ("source_url", "source_date"):
            bad = df[col].isna() | (df[col].astype(str).str.strip() == "")
            if bad.any():
                raise SpecsimInputError(str(path), int(np.flatnonzero(bad)[0]) + 2, col, "a source for every row",
                                        "empty")
        frames.append(df.assign(file=path.name, line=np.arange(len(df)) + 2))
    if not frames:
        raise SpecsimInputError(str(folder), None, None, "validation CSV files", "none")
    return pd.concat(frames, ignore_index=True)


def fit_indices(n: int) -> list[int]:
    """Positions (in load order) of the points a series of ``n`` fits on: ``n // 3`` of them, at least one,
    the lowest load first, then spread evenly to the highest."""
    k = max(1, n // 3)
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, k)}) if k > 1 else [0]


def observation_from_row(row: pd.Series) -> StepObservation:
    """A no-speculation row as a step observation: step = mean TPOT; R = output throughput x TPOT (Little's
    law, at most N); B = R + prompt tokens per second x TPOT (chunked prefill shares the steps); context =
    prompt + half the output (``specsim.hardware.step_points`` explains each)."""
    step = float(row["mean_tpot_ms"]) / 1e3
    out_tps = float(row["output_throughput_tok_s"])
    r = min(out_tps * step, float(row["load"]))
    b = r + out_tps / float(row["output_len"]) * float(row["input_len"]) * step
    ctx = float(row["input_len"]) + float(row["output_len"]) / 2
    return StepObservation(r, b, ctx, step, row["file"], int(row["line"]), "tpot", f"N={int(row['load'])}",
                           ttft_s=ttft_of(row)[0] / 1e3,
                           prompt_tokens=float(row["input_len"]),
                           concurrency=float(row["load"]) if row.get("load_kind") == "concurrency" else float("nan"))


def server_observations(rows: pd.DataFrame, series: str) -> list[StepObservation]:
    """The fitted points of every series measured on the server of ``series`` (:data:`SETUPS`' ``server``: same
    model, GPU and engine build, other datasets), series by series in name order (so each gets the same fit);
    just its own where it names no server. One server's series are fitted together: their datasets turn requests
    over at different rates (a new request every 2 steps on MathReasoning at 128 users, every 6 on HumanEval),
    which separates the cost of a step that starts a prompt (``mixed_step_s``) from the cost per running request,
    and each series still fits only its own :func:`fit_indices` points."""
    server = SETUPS[series].get("server")
    names = sorted(s for s, v in SETUPS.items() if s == series or (server and v.get("server") == server
                                                                    and (rows["series"] == s).any()))
    out: list[StepObservation] = []
    for name in names:
        df = rows[rows["series"] == name].sort_values("load").reset_index(drop=True)
        out += [observation_from_row(df.loc[i]) for i in fit_indices(len(df))]
    return out


def base_model(setup: dict[str, Any], configs: Path = CONFIGS) -> StepModel:
    """The series' unfitted :class:`StepModel` (config, GPU datasheet, TP / EP, dtype)."""
    model = model_from_hf_config(configs / setup["config"], weight_dtype=setup.get("weight_dtype"))
    return step_model(model, setup["gpu"], setup.get("tp", 1), setup.get("ep", 1))


def admission_limit(top: StepObservation, users: int) -> int:
    """The engine's running-request limit seen at the highest fitted load: where fewer than 90% of the N users
    were decoding on average (Little's law R; the rest queued, as their long TTFT shows), the limit is R
    rounded up, so the simulated engine queues the same share; else vLLM's 1024 (it never binds here)."""
    return int(np.ceil(top.num_requests)) if top.num_requests < 0.9 * users else 1024


def request_overhead(sm: StepModel, obs: list[StepObservation], chunk: int) -> float:
    """The request overhead (seconds) the series' predictions run with: ``profile fit``'s TTFT term, fitted on the
    lowest fitted load's TTFT (:func:`specsim.hardware.ttft_fit.fit_ttft`; a fitted point, so nothing predicted
    is fitted), or :data:`DEFAULT_OVERHEAD_S` where the points give no TTFT or the fit lands above
    :data:`~specsim.hardware.ttft_fit.MAX_REQUEST_OVERHEAD_S` (no engine's own overhead: a prefill or queue the
    model does not see, where ``profile fit`` warns instead of advising it)."""
    from specsim.hardware.ttft_fit import MAX_REQUEST_OVERHEAD_S, fit_ttft, has_ttft

    if not any(has_ttft(o) for o in obs):
        return DEFAULT_OVERHEAD_S
    fitted = fit_ttft(sm, obs, chunk).request_overhead_s
    return fitted if fitted <= MAX_REQUEST_OVERHEAD_S else DEFAULT_OVERHEAD_S


def scenario_for(setup: dict[str, Any], overrides: tuple[str, ...] = ()):
    """A vLLM-V1-like scenario: chunked prefill in the replica, the series' chunk, KV from 90% of memory, the
    running-request limit of :func:`admission_limit`."""
    from specsim.scenario import load_scenario
    return load_scenario(None, ['prefill.mode="colocated"', f"prefill.chunk_tokens={setup.get('chunk', 8192)}",
                                f"cluster.max_num_seqs={setup.get('max_num_seqs', 1024)}",
                                "cluster.gpu_memory_utilization=0.9",
                                f"engine.request_overhead_s={setup.get('request_overhead_s', DEFAULT_OVERHEAD_S)}",
                                *overrides])


def simulate_row(row: pd.Series, profile, setup: dict[str, Any], policy: str = "none", gamma: int | None = None,
                 drafter: str | None = None, alpha: float | None = None, seed: int = 0) -> dict[str, float]:
    """Simulate one closed-loop benchmark point as its source measured it (``measure="run"``: the row's
    ``num_prompts`` requests, every one counted; else 8 requests per user, read in the closed loop's measurement
    window); returns mean TPOT (ms), output throughput (tok/s), the TTFT statistic the row gives
    (:func:`ttft_of`: its mean, else its median; ms, NaN where it gives neither), the mean number of running
    requests over the steps measured (``running``, as vLLM's ``num_requests_running`` gauge counts them: decoding
    and prefilling) and the KV pool's blocks (``kv_blocks``, vLLM's: a hybrid layout's engine blocks times the
    vLLM blocks each stands for, so the pool rounded down to whole engine blocks)."""
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    n = int(row["load"])
    run = setup.get("measure") == "run"         # the source's prompt count, every request counted
    if run and not (pd.notna(row.get("num_prompts")) and float(row["num_prompts"]) >= 1):
        raise SpecsimInputError(row.get("file"), int(row["line"]) if pd.notna(row.get("line")) else None,
                                "num_prompts", "the source's prompt count (>= 1): this series is simulated as its "
                                "benchmark ran, a fixed number of prompts", str(row.get("num_prompts")))
    over: tuple[str, ...] = ()
    if alpha is not None:
        over = (f"acceptance.constant_alpha={alpha}", "acceptance.sigma_request=0", "acceptance.sigma_step=0",
                "acceptance.sigma_token=0", f"drafter.name=\"{drafter}\"")
    trace = synth_trace(int(float(row["num_prompts"])) if run else max(64, USERS_REQUESTS * n), 1.0, seed=seed,
                        prompt_len=max(1, int(round(float(row["input_len"])))),
                        output_len=max(2, int(round(float(row["output_len"])))))
    if setup.get("max_output"):                 # the model's own lengths, capped by the request's max_tokens
        trace = replace(trace, output_tokens=spread_lengths(float(row["output_len"]), int(setup["max_output"]),
                                                            len(trace), seed))
    sc = scenario_for(setup, over)
    res = simulate(trace, policy, sc, seed=seed, concurrency=n, profile=profile, gamma=gamma,
                   drafter=drafter if policy != "none" else None)
    s = res.summary if run else res.summary.get("window") or res.summary     # else the closed loop's window
    stat = ttft_of(row)[1]
    steps, kv = res.steps, res.summary["kv_capacity"]
    end = steps["start_s"] + steps["duration_s"]
    measured = (end > s["start_s"]) & (end <= s["end_s"]) if "start_s" in s else end > 0
    return {"tpot_ms": float(s["mean_tpot_ms"]), "throughput": float(s["output_throughput"]),
            "ttft_ms": float(s[f"{stat}_ttft_ms"]) if stat else float("nan"),
            "running": float(steps["num_running"][measured].mean()),
            "kv_blocks": float(kv["blocks"] * kv.get("engine_groups", 1))}


def ttft_of(row: pd.Series) -> tuple[float, str | None]:
    """(the row's measured TTFT in ms, its statistic: ``mean``, else ``median``, None where it gives neither)."""
    for stat in ("mean", "median"):
        if pd.notna(row.get(f"{stat}_ttft_ms")):
            return float(row[f"{stat}_ttft_ms"]), stat
    return float("nan"), None


def _ttft_columns(t: pd.DataFrame) -> pd.DataFrame:
    """``ttft_error`` = pred_ttft_ms / ttft_ms - 1 (reported, no target: docs/validation.md, "TTFT")."""
    t["ttft_error"] = t["pred_ttft_ms"] / t["ttft_ms"] - 1
    return t


def spread_lengths(mean: float, cap: int, n: int, seed: int = 0) -> np.ndarray:
    """(n,) int64 output lengths in [2, cap] with mean ``mean``: :func:`specsim.workload.lengths.maxent_lengths`
    (the maximum-entropy distribution on 2..cap with that mean, at its n quantiles) shuffled by ``seed``; the
    CLI's ``trace synth --output-len maxent:MEAN:MAX`` draws the same distribution.

    Why: a closed loop of equal lengths runs in lockstep (every user's request ends in the same step and the next
    ones prefill together), which an engine serving the model's own lengths never sees (docs/validation.md).

    Raises:
        SpecsimInputError: ``mean`` outside (2, cap).
    """
    from specsim.workload.lengths import maxent_lengths

    return maxent_lengths(mean, cap, n, np.random.default_rng(seed))


@dataclass
class SeriesResult:
    """One series' fit and predictions: ``table`` has a row per point (load, measured and predicted TPOT and
    throughput, errors, whether fitted); ``params`` the fitted terms; ``profile`` the fitted profile and
    ``setup`` the engine settings the predictions ran with (:data:`SETUPS` plus the admission limit)."""

    series: str
    table: pd.DataFrame
    params: dict[str, float]
    model: StepModel
    profile: Any
    setup: dict[str, Any]

    def median_abs_error(self, column: str) -> float:
        """Median |error| over the predicted (not fitted) points of ``tpot_error``, ``throughput_error`` or
        ``ttft_error`` (points without a measured TTFT left out; NaN where none is left)."""
        held = self.table.loc[~self.table["fitted"], column].dropna()
        return float(np.median(np.abs(held))) if len(held) else float("nan")


def validate_series(rows: pd.DataFrame, series: str, configs: Path = CONFIGS) -> SeriesResult:
    """Fit and predict one no-speculation series (module docstring)."""
    setup = SETUPS[series]
    df = rows[rows["series"] == series].sort_values("load").reset_index(drop=True)
    idx = fit_indices(len(df))
    obs = [observation_from_row(df.loc[i]) for i in idx]
    params = DEFAULT_PARAMS[:len(obs)]          # kernel_s from one point, + per_request_step_s from two
    fit_obs = server_observations(rows, series)
    if len(fit_obs) > len(obs):                 # turnover differs between the datasets: + mixed_step_s
        params = (*DEFAULT_PARAMS, "mixed_step_s")
    base = base_model(setup, configs)
    # prefill-sharing steps are fitted as the engine runs them, prompts arriving whole (profile_fit's
    # predict_observations); MoE: the 3,200-token prompts are cut at the series' chunk where it is shorter
    chunk = int(min(setup.get("chunk", 8192), df["input_len"].min())) if base.model.num_experts else None
    rep = fit_step_model(base, fit_obs, params, chunk_tokens=chunk)
    profile = rep.model.profile(max_batch_tokens=max(4096, setup.get("chunk", 8192) + 1024), kind="fitted",
                                provenance=rep.provenance())
    setup = {**setup, "max_num_seqs": admission_limit(obs[-1], int(df.loc[idx[-1], "load"])),
             "request_overhead_s": request_overhead(rep.model, obs, int(setup.get("chunk", 8192)))}
    out = []
    for i, row in df.iterrows():
        pred = simulate_row(row, profile, setup)
        out.append({"load": int(row["load"]), "fitted": i in idx,
                    "tpot_ms": float(row["mean_tpot_ms"]), "pred_tpot_ms": pred["tpot_ms"],
                    "throughput": float(row["output_throughput_tok_s"]), "pred_throughput": pred["throughput"],
                    "ttft_ms": ttft_of(row)[0], "pred_ttft_ms": pred["ttft_ms"]})
    t = pd.DataFrame(out)
    t["tpot_error"] = t["pred_tpot_ms"] / t["tpot_ms"] - 1
    t["throughput_error"] = t["pred_throughput"] / t["throughput"] - 1
    t = _ttft_columns(t)
    return SeriesResult(series, t, rep.params, rep.model, profile, setup)


def spec_observation_from_row(row: pd.Series):
    """A speculative row as :class:`specsim.hardware.spec_fit.SpecObservation`: step = t x tau, t the decode time
    per token of a user's cycle, (N x output / throughput - TTFT) / (output - 1) where the row gives a TTFT (mean,
    else median), else the mean TPOT (which averages per request, 2-7% below t under speculation at N = 1:
    docs/validation.md, method 6); R = output throughput x t (at most N), B = R (1 + k) + prompt tokens per step,
    context = prompt + output / 2."""
    from specsim.hardware.spec_fit import SpecObservation

    per_token = float(row["mean_tpot_ms"]) / 1e3
    tau, k = float(row["acceptance_length"]), int(row["num_spec_tokens"])
    out_tps = float(row["output_throughput_tok_s"])
    ttft_ms = ttft_of(row)[0]
    if pd.notna(ttft_ms):           # the decode time of a user's cycle (Little's law), not the mean of per-request TPOT
        out = float(row["output_len"])
        per_token = (float(row["load"]) * out / out_tps - float(ttft_ms) / 1e3) / (out - 1)
    r = min(out_tps * per_token, float(row["load"]))
    step = per_token * tau
    b = r * (1 + k) + out_tps / float(row["output_len"]) * float(row["input_len"]) * step
    return SpecObservation(r, b, float(row["input_len"]) + float(row["output_len"]) / 2, step, k, tau, row["file"],
                           int(row["line"]), f"N={int(row['load'])} (speculative)")


def validate_speculative(rows: pd.DataFrame, series: str, baseline: SeriesResult) -> tuple[pd.DataFrame, float]:
    """Predict a speculative series' speed-up over no speculation at each N with the baseline's fitted profile,
    twice: with speculation's own terms at their sourced defaults, and with ``spec_step_s`` fitted on the
    series' lowest-load point (:func:`specsim.hardware.spec_fit.fit_speculation`; that point is then fitted).

    Returns (a frame per load: measured and predicted throughputs, speed-ups and errors, ``fitted_*`` for the
    second protocol; the fitted ``spec_step_s``)."""
    from specsim.hardware.spec_fit import fit_speculation

    spec = SPEC_SETUPS[series]
    profile, setup = baseline.profile, baseline.setup
    base = baseline.table.set_index("load")
    df = rows[rows["series"] == series].sort_values("load")
    chunk = int(min(setup.get("chunk", 8192), df["input_len"].min()))    # one verify batch of R (1 + k) tokens
    srep = fit_speculation(baseline.model, [spec_observation_from_row(df.iloc[0])], spec["drafter"],
                           chunk_tokens=chunk)
    fitted = srep.model.profile(profile.max_batch_tokens, kind="fitted", provenance=srep.provenance())
    out = []
    for _, row in df.iterrows():
        k, tau = int(row["num_spec_tokens"]), float(row["acceptance_length"])
        alpha = alpha_for_acceptance_length(tau, k)
        pred = [simulate_row(row, p, setup, policy="static", gamma=k, drafter=spec["drafter"], alpha=alpha)
                for p in (profile, fitted)]
        n = int(row["load"])
        out.append({"load": n, "acceptance_length": tau, "alpha": alpha,
                    "throughput": float(row["output_throughput_tok_s"]), "pred_throughput": pred[0]["throughput"],
                    "speedup": float(row["output_throughput_tok_s"]) / base.loc[n, "throughput"],
                    "pred_speedup": pred[0]["throughput"] / base.loc[n, "pred_throughput"],
                    "fitted_pred_speedup": pred[1]["throughput"] / base.loc[n, "pred_throughput"],
                    "ttft_ms": ttft_of(row)[0], "pred_ttft_ms": pred[0]["ttft_ms"]})
    t = pd.DataFrame(out)
    t["speedup_error"] = t["pred_speedup"] / t["speedup"] - 1
    t["fitted_speedup_error"] = t["fitted_pred_speedup"] / t["speedup"] - 1
    t = _ttft_columns(t)
    return t, srep.params["spec_step_s"]


def run_all(folder: Path = DATA, configs: Path = CONFIGS):
    """Every series of :data:`SETUPS` and :data:`SPEC_SETUPS` present in ``folder``: ({series:
    :class:`SeriesResult`}, {speculative series: speed-up frame}, {speculative series: fitted spec_step_s})."""
    rows = load_rows(folder)
    present = set(rows["series"])
    base = {s: validate_series(rows, s, configs) for s in SETUPS if s in present}
    spec = {s: validate_speculative(rows, s, base[v["baseline"]])
            for s, v in SPEC_SETUPS.items() if s in present and v["baseline"] in base}
    return base, {s: t for s, (t, _) in spec.items()}, {s: x for s, (_, x) in spec.items()}


def _markdown(df: pd.DataFrame) -> str:
    """A markdown table of ``df``: errors in %, times in ms, throughputs in tok/s."""
    def cell(col: str, v: Any) -> str:
        if isinstance(v, (bool, np.bool_)):
            return "fit" if v else ""
        if isinstance(v, float) and np.isnan(v):
            return "-"
        if col.endswith("error"):
            return f"{100 * v:+.1f}%"
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns)
    body = ["| " + " | ".join(cell(c, v) for c, v in zip(df.columns, r)) + " |" for r in df.itertuples(index=False)]
    return "\n".join([head, *body])


def main(argv: list[str] | None = None) -> None:
    """Print the validation tables (markdown) for docs/validation.md."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--configs", type=Path, default=CONFIGS)
    a = ap.parse_args(argv)
    base, spec, fitted = run_all(a.data, a.configs)
    for name, r in base.items():
        print(f"\n### {name}\n\nfitted: " + ", ".join(f"{k} = {v:.4g}" for k, v in r.params.items())
              + f"; request_overhead_s = {r.setup['request_overhead_s']:.4g}; median |error| on predicted points: "
              f"TPOT {100 * r.median_abs_error('tpot_error'):.1f}%, "
              f"throughput {100 * r.median_abs_error('throughput_error'):.1f}%, TTFT (the source's mean, else its "
              f"median; no target) {100 * r.median_abs_error('ttft_error'):.1f}%\n")
        print(_markdown(r.table))
    for name, t in spec.items():
        print(f"\n### {name} (speed-up over no speculation)\n\n`fitted_*`: spec_step_s = {fitted[name]:.4g} s fitted "
              "on the lowest load (N = 1), the rest at the sourced defaults; TTFT with the sourced defaults (the "
              "source's mean, else its median; no target)\n")
        print(_markdown(t))


if __name__ == "__main__":
    main()
