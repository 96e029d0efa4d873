"""Replay: serve a trace with real models, then predict the same run with the simulator and compare.

Closes the loop between the torch backend and the simulator (issue 7, DESIGN.md "replay against real
models"):

1. **Serve** (:func:`serve_trace`): a continuous-batching loop around
   :class:`~specsim.backends.torch.decode.SpecDecoder`. Requests arrive at the trace's ``arrival_s`` with
   prompts drawn from the corpus by domain (:func:`domain_prompts`: chat = English texts, code = Python
   sources, math = arithmetic word problems written by :func:`math_problems`; any other domain is refused)
   of the trace's ``prompt_tokens``; each generates exactly ``output_tokens`` tokens (EOS ignored). One
   iteration = prefill of the newly arrived requests (one forward, their first token) + one speculative
   step (draft, policy, verify, accept) of the requests that were already running: the colocated
   prefill of the simulator's engine (``specsim.engine.replica``), where a request prefilled in step t first
   decodes in step t+1; the loop drafts for running requests only, so the prediction charges a request's first
   drafts in its first decode step (``engine.first_drafts = decode-step``, not vLLM's prefill step). Times are
   real wall-clock seconds of each iteration on a virtual clock that jumps over idle gaps to the next arrival (no
   sleeping), so arrivals and queueing are as in the trace.
2. **Predict** (:func:`predict`): the simulator runs the same trace, open loop, with the same policy
   object type, a colocated scenario with one replica (prefill chunk budget large enough to prefill
   every waiting prompt in one step, as the replay does), an acceptance model fitted by
   :func:`specsim.acceptance.fitting.write_fit` from a DIFFERENT run's step log (another seed and/or policy; never the
   run being predicted), the step-time profile of the target measured on this machine
   (:func:`specsim.backends.torch.measure.measure_profile`) and the drafter's measured cost (a linear
   fit of logged draft time against running requests, from the fitting run's log).
3. **Compare** (:func:`compare`): relative error (predicted - measured) / measured per metric.

Metrics come from :func:`specsim.analysis.metrics.summarize` on both sides (the replay builds the same request
and step frames as the simulator's cluster), so names and definitions are those of ``specsim run``.

torch is imported inside the functions that need it: importing this module needs only numpy/pandas.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError

#: Metrics of the side-by-side table: (summary key, label). Names as in specsim.analysis.metrics.
COMPARED = (("mean_acceptance_length", "mean acceptance length (tok/step)"),
            ("acceptance_rate", "acceptance rate"),
            ("mean_verify_tokens_per_request", "mean verify tokens per request"),
            ("output_throughput", "output throughput (tok/s)"),
            ("mean_tps_per_user", "mean TPS/user (tok/s)"),
            ("mean_ttft_ms", "mean TTFT (ms)"))

#: Torch drafter family -> the simulator's drafter name (used for labels and cost families only).
SIM_DRAFTER = {"semi-autoregressive": "dspark", "parallel": "dflash", "autoregressive": "eagle3"}

_NAMES = ("Tom", "Ana", "Ravi", "Mei", "Olu", "Sara", "Ivan", "Lena")
_ITEMS = ("apples", "pencils", "marbles", "books", "coins", "stamps", "cards", "eggs")


def math_problems(rng: np.random.Generator, num_chars: int) -> str:
    """Arithmetic word problems with worked answers, concatenated to at least ``num_chars`` characters.

    Each problem: a person has a items, gets b more groups of c, gives away d; the answer line states the
    arithmetic a + b * c - d = result (all integers drawn from ``rng``; results are exact).

    Args:
        rng: a numpy Generator (seeded by the caller).
        num_chars: minimum length of the returned text, characters.
    """
    parts: list[str] = []
    n = 0
    while n < num_chars:
        who, item = _NAMES[rng.integers(len(_NAMES))], _ITEMS[rng.integers(len(_ITEMS))]
        a, b, c = (int(x) for x in rng.integers(2, 30, size=3))
        d = int(rng.integers(0, a + b * c))
        s = (f"Question: {who} has {a} {item}. {who} buys {b} boxes with {c} {item} in each box, "
             f"then gives away {d} {item}. How many {item} does {who} have now?\n"
             f"Answer: {a} + {b} * {c} - {d} = {a + b * c - d}. {who} has {a + b * c - d} {item}.\n\n")
        parts.append(s)
        n += len(s)
    return "".join(parts)


def domain_prompts(target, trace, seed: int) -> list[list[int]]:
    """One prompt of exactly ``trace.prompt_tokens[i]`` token ids per request, drawn by domain.

    chat: held-out English corpus text; code: held-out standard-library Python sources
    (:mod:`specsim.backends.torch.corpus`); math: :func:`math_problems`. Request i's text comes from
    ``SeedSequence([seed, 7, i])`` (math) or the corpus sampler seeded with ``seed * 100003 + i``.

    Raises:
        SpecsimInputError: a domain other than chat, code or math (naming the trace line).
    """
    from specsim.backends.torch.corpus import load_documents, sample_chunks
    docs = None
    chars_per_token = 1 if getattr(target, "name", "") == "tiny-char" else 8
    out = []
    for i, (dom, n_tok) in enumerate(zip(trace.domain, trace.prompt_tokens)):
        n_tok = int(n_tok)
        if dom not in ("chat", "code", "math"):
            raise SpecsimInputError(getattr(trace, "file", None), i + 1, "domain",
                                    "chat, code or math (the replay has prompts for these only)", repr(dom))
        ids: list[int] = []
        attempt = 0
        while len(ids) < n_tok:                       # a short draw (rare: dense tokens) is extended
            n_chars = (n_tok - len(ids)) * chars_per_token + 16
            if dom == "math":
                rng = np.random.default_rng(np.random.SeedSequence([seed, 7, i, attempt]))
                text = math_problems(rng, n_chars)
            else:
                docs = docs if docs is not None else load_documents()
                text = sample_chunks(docs, 1, n_chars, seed * 100003 + i + 7919 * attempt, heldout=True,
                                     domain=dom)[0][1]
            ids += target.encode(text)
            attempt += 1
        out.append(ids[:n_tok])
    return out


@dataclass
class ReplayRun:
    """What a replay measured.

    Attributes:
        summary: :func:`specsim.analysis.metrics.summarize` of the run plus policy, seed, target, drafter, gamma.
        requests: per-request frame (the columns of :func:`specsim.analysis.metrics.request_frame`).
        steps: per-iteration frame (:data:`specsim.engine.records.STEP_COLUMNS` plus ``prefill_s`` and
            ``draft_time_s``, seconds, and ``kv_tokens``, context tokens of the decoding requests).
        step_log: per (step, request) rows (:mod:`specsim.acceptance.steplog` format, wall-clock times).
    """

    summary: dict[str, Any]
    requests: pd.DataFrame
    steps: pd.DataFrame
    step_log: pd.DataFrame


def serve_trace(target, drafter, policy, profile, trace, prompts: list[list[int]], gamma: int, seed: int,
                greedy: bool = False, temperature: float = 1.0, max_batch: int = 64,
                served: Callable[[int], None] | None = None) -> ReplayRun:
    """Serve ``trace`` with real models in a continuous-batching loop (module docstring, step 1).

    Args:
        target, drafter: torch target and drafter (:mod:`specsim.backends.torch.workflow` loaders).
        policy: a policy name or object (the same objects as the simulator's).
        profile: the step-time profile the policy sees (:class:`~specsim.hardware.profile.StepTimeProfile`).
        trace: a :class:`specsim.workload.trace.Trace` (N requests).
        prompts: N token-id lists (:func:`domain_prompts`).
        gamma: draft block length; seed: per-request random streams ``SeedSequence([seed, i])``.
        greedy, temperature: acceptance by argmax match, or rejection sampling at ``temperature``.
        max_batch: most running requests (FCFS admission, as the simulator's ``max_num_seqs``).
        served: told the number of finished requests whenever it grows (a progress bar's feed).

    Raises:
        RuntimeError: a request did not emit exactly its output length (an internal invariant).
    """
    from collections import deque

    from specsim.backends.torch.decode import SpecDecoder
    from specsim.engine.records import STEP_COLUMNS
    from specsim.analysis.metrics import summarize
    from specsim.policies import make_policy

    pol = make_policy(policy, gamma=gamma) if isinstance(policy, str) else policy
    dec = SpecDecoder(target, drafter, pol, profile, gamma=gamma, greedy=greedy, temperature=temperature,
                      seed=seed, clip_to_budget=True, max_batch=max_batch)
    n = len(trace)
    arrival = np.asarray(trace.arrival_s, float)
    first_s, done_s = np.full(n, np.nan), np.full(n, np.nan)
    last_emit = np.full(n, np.nan)
    req_steps, req_ver, req_acc = (np.zeros(n, np.int64) for _ in range(3))
    itl: list[float] = []
    steps: list[tuple] = []
    clock, nxt = 0.0, 0
    while nxt < n or dec.has_work:
        if not dec.has_work:
            clock = max(clock, float(arrival[nxt]))          # idle: jump to the next arrival
        while nxt < n and arrival[nxt] <= clock:
            dec.add_request(prompts[nxt], int(trace.output_tokens[nxt]), request_id=str(nxt),
                            domain=str(trace.domain[nxt]), ignore_eos=True)
            nxt += 1
        n_emit, n_rows = len(dec.emissions), len(dec.rows)
        t0 = time.perf_counter()
        before = list(dec.running)
        kv_tokens = sum(len(r.tokens) for r in before)
        dec._prefill()                                      # newcomers: one forward, first token
        new = dec.running[len(before):]
        t1 = time.perf_counter()
        dec.running, waiting, dec.pending = before, dec.pending, deque()
        if before:
            dec.step()                                      # draft, policy, verify, accept (no prefill)
        dec.pending = waiting
        dec.running = dec.running + [r for r in new if not r.done]
        dur = time.perf_counter() - t0
        start, clock = clock, clock + dur
        rows = dec.rows[n_rows:]
        for row in rows:                                    # the log gets the iteration's virtual times
            row["time_s"], row["step_time_s"] = start, dur
        R = len(rows)
        ver = sum(r["verify_len"] for r in rows)
        acc = sum(r["num_accepted"] for r in rows)
        for rid, step, toks in dec.emissions[n_emit:]:
            i = int(rid)
            if step < 0:
                first_s[i] = clock
            else:
                itl.append(clock - last_emit[i])
                req_steps[i] += 1
            last_emit[i] = clock
        for row in rows:
            i = int(row["request_id"])
            req_ver[i] += row["verify_len"]
            req_acc[i] += row["num_accepted"]
        finished = [int(r.request_id) for r in dec.requests if r.done and np.isnan(done_s[int(r.request_id)])]
        done_s[finished] = clock
        if finished and served is not None:
            served(int(np.isfinite(done_s).sum()))
        prefill_tokens = sum(r.prompt_len for r in new)
        draft_s = rows[0]["draft_time_s"] if rows else 0.0
        steps.append((0, len(steps), start, dur, len(before) + len(new), R, R + ver + prefill_tokens, ver, acc,
                      acc + R, prefill_tokens, -1, 0.0, -1, 0, len(waiting),           # no paged KV: -1 blocks
                      draft_s, np.nan,              # the engine's own speculation work is inside the measured step
                      t1 - t0, draft_s, kv_tokens))
    out = np.asarray(trace.output_tokens, np.int64)
    gen = np.array([r.num_generated for r in dec.requests])
    if np.any(gen != out) or np.any(req_acc + req_steps + 1 != out):
        raise RuntimeError("internal error: a replayed request did not emit exactly its output length")
    ttft, e2el = first_s - arrival, done_s - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(out > 1, (e2el - ttft) / (out - 1), np.nan)
    requests = pd.DataFrame({
        "request_id": np.asarray(trace.request_id, dtype=object), "domain": np.asarray(trace.domain, dtype=object),
        "prompt_tokens": np.asarray(trace.prompt_tokens, np.int64), "output_tokens": out, "arrival_s": arrival,
        "prefill_s": np.nan, "first_token_s": first_s, "done_s": done_s, "ttft_s": ttft, "e2el_s": e2el,
        "tpot_s": tpot, "tps_per_user": 1.0 / tpot, "decode_steps": req_steps, "verified_drafts": req_ver,
        "accepted_drafts": req_acc, "replica": 0, "status": "completed", "unservable_reason": ""})
    steps_df = pd.DataFrame(steps, columns=[*STEP_COLUMNS, "prefill_s", "draft_time_s", "kv_tokens"])
    summary = summarize(requests, steps_df, np.asarray(itl), window=None, decode_gpus=1, prefill_gpus=0,
                        mean_in_system=None)
    summary.update({"policy": pol.name, "seed": int(seed), "gamma": int(dec.gamma), "greedy": bool(greedy),
                    "temperature": float(temperature), "target": getattr(target, "name", "?"),
                    "drafter": getattr(drafter, "family", None), "clipped_verify_lengths": dec.num_clipped,
                    "mean_draft_time_ms": float(steps_df.draft_time_s[steps_df.num_decode > 0].mean() * 1e3)})
    log = dec.step_log()
    log["step"] = log["step"].astype("int64")
    return ReplayRun(summary, requests, steps_df, log)


def drafter_cost_from_log(step_log: pd.DataFrame, gamma: int, max_requests: int):
    """The drafter's measured cost as a :class:`~specsim.hardware.drafter.DrafterCost`.

    Fits draft_time_s = a + b * R by least squares over the logged steps (R = requests drafting in the
    step; the torch drafters always draft their full block, so the time does not depend on the policy),
    and wraps it as a ``parallel``-family cost whose drafter profile maps R * gamma -> a + b * R
    (``DrafterCost.draft_time_s`` looks up ``step_time(R * gamma)`` for that family).

    Args:
        step_log: a torch step log with ``draft_time_s`` (seconds per step, repeated on each request row).
        gamma: the run's block length; max_requests: the largest R the profile table covers.

    Returns:
        (cost, (a_s, b_s_per_request)).

    Raises:
        SpecsimInputError: the log has no ``draft_time_s`` column.
    """
    from specsim.hardware.drafter import DrafterCost
    from specsim.hardware.profile import StepTimeProfile
    if "draft_time_s" not in step_log.columns:
        raise SpecsimInputError(None, None, "draft_time_s", "a torch step log with draft times", "no column")
    per_step = step_log.groupby("step").agg(R=("request_id", "size"), t=("draft_time_s", "first"))
    R, t = per_step["R"].to_numpy(float), per_step["t"].to_numpy(float)
    if np.unique(R).size >= 2:
        b, a = np.polyfit(R, t, 1)
        if a < 0 or b < 0:                               # noisy timings: fall back to proportional
            a, b = 0.0, float(t.sum() / R.sum())
    else:
        a, b = float(np.median(t)), 0.0
    r = np.arange(1, max(max_requests, 2) + 1)
    prof = StepTimeProfile(r * gamma, a + b * r, lookup="linear", extrapolate="linear",
                           metadata={"kind": "measured", "source": "draft_time_s of a torch step log",
                                     "model": "drafter"}, source="<measured drafter>")
    return DrafterCost("parallel", 0.0, 0.0, drafter_profile=prof), (float(a), float(b))


def profile_from_run(steps: pd.DataFrame, max_batch_tokens: int, source: str):
    """A step-time profile calibrated on another replay's iterations (the second prediction of the table).

    Least squares over the iterations that decoded: verify_s = c0 + c1 * B + c2 * kv_tokens, where
    verify_s = iteration time - prefill time - draft time (so it holds the batched forward with its
    padding, the float64 softmax and rejection sampling, the policy and the Python bookkeeping),
    B = batch_tokens - prefill_tokens and kv_tokens the decoding requests' context. Negative
    coefficients (timing noise) are set to 0 and the rest refitted.

    Returns:
        a ``linear`` profile with step_time(B) = c0 + c1 * B on 1..max_batch_tokens and
        ``kv_read_s_per_token = c2`` (kind "calibrated").

    Raises:
        SpecsimInputError: fewer than 3 decoding iterations.
    """
    from specsim.hardware.profile import StepTimeProfile
    d = steps[steps.num_decode > 0]
    if len(d) < 3:
        raise SpecsimInputError(source, None, "steps", "at least 3 decoding iterations", str(len(d)))
    y = (d.duration_s - d.prefill_s - d.draft_time_s).to_numpy(float)
    X = np.column_stack([np.ones(len(d)), (d.batch_tokens - d.prefill_tokens).to_numpy(float),
                         d.kv_tokens.to_numpy(float)])
    keep = np.ones(3, bool)
    for _ in range(3):
        coef = np.zeros(3)
        coef[keep] = np.linalg.lstsq(X[:, keep], y, rcond=None)[0]
        if (coef >= 0).all():
            break
        keep &= coef > 0
    coef = np.maximum(coef, 0.0)
    grid = np.arange(1, max(int(max_batch_tokens), 2) + 1)
    return StepTimeProfile(grid, np.maximum(coef[0] + coef[1] * grid, 1e-6), lookup="linear", extrapolate="linear",
                           kv_read_s_per_token=float(coef[2]),
                           metadata={"kind": "calibrated", "source": source, "model": "replay iteration",
                                     "coefficients_s": [float(c) for c in coef]}, source=f"<calibrated {source}>")


def replay_scenario(gamma: int, max_batch: int, prefill_chunk_tokens: int, acceptance_model: str):
    """The simulator scenario matching the replay loop (module docstring, step 2).

    One replica, ``max_num_seqs = max_batch``, unbounded KV (the replay has no KV limit), no request overhead
    (the replay loop has no API server), first drafts charged in the first decode step (the loop drafts for
    running requests only: ``engine.first_drafts = decode-step``), colocated
    prefill with a chunk budget covering every waiting prompt, no separate host overhead (the measured
    iteration time already contains the Python host work; it is not in the profile, see docs/replay.md),
    the fitted acceptance model and raw confidences (the replay runs without STS).
    """
    from specsim.scenario import load_scenario
    return load_scenario().with_updates({
        "cluster": {"num_replicas": 1, "gpus_per_replica": 1, "max_num_seqs": max_batch,
                    "kv_capacity_tokens": 10 ** 9},
        "prefill": {"mode": "colocated", "chunk_tokens": int(prefill_chunk_tokens)},
        "engine": {"gamma": gamma, "host_overhead_s": 0.0, "request_overhead_s": 0.0, "first_drafts": "decode-step"},
        "acceptance": {"model": acceptance_model, "calibration": "none"},
    }, src="replay")


class _PolicySeesProfile:
    """A policy whose views carry ``profile`` instead of the cluster's (all other attributes delegated).

    The calibrated prediction charges step times from a profile calibrated on the fitting run, while
    the replayed policy chose its verify lengths from the measured profile: the wrapper keeps the
    simulated policy's decisions on the same curve as the real one.
    """

    def __init__(self, policy, profile) -> None:
        self._policy, self._profile = policy, profile

    def __getattr__(self, name):
        if name == "capacity" and callable(getattr(self._policy, "capacity", None)):
            return lambda old, ids, R: self._policy.capacity(self._swap(old), ids, R)
        if name == "proposal_length" and callable(getattr(self._policy, "proposal_length", None)):
            return lambda view: self._policy.proposal_length(self._swap(view))
        return getattr(self._policy, name)

    def _swap(self, view):
        from dataclasses import replace
        return None if view is None else replace(view, profile=self._profile)

    def __call__(self, view):
        return self._policy(self._swap(view))


def predict(trace, policy: str, scenario, profile, drafter_cost, drafter_name: str, seed: int,
            policy_profile=None):
    """Simulate ``trace`` open loop under ``policy`` with the measured drafter cost; returns the summary dict.

    :func:`specsim.simulation.simulate` with ``drafter_cost`` (the measured one instead of the drafter
    name's defaults). ``policy_profile``: the profile the policy sees, when it differs from the one
    charging step times.

    Raises:
        SpecsimInputError: a trace domain missing from the fitted acceptance model.
        RuntimeError: a request not completed or emitting a wrong number of tokens.
    """
    from specsim.policies import make_policy
    from specsim.simulation import simulate

    g = scenario.engine.gamma
    pol = make_policy(policy, gamma=g)
    if policy_profile is not None:
        pol = _PolicySeesProfile(pol, policy_profile)
    res = simulate(trace, pol, scenario, seed=seed, gamma=g, drafter=drafter_name, profile=profile,
                   drafter_cost=drafter_cost)
    summary = dict(res.summary)
    summary.update({"policy": policy, "acceptance_source": summary["provenance"]["acceptance_source"]})
    return summary


def compare(measured: dict, predicted: dict, calibrated: dict | None = None) -> pd.DataFrame:
    """Side-by-side table: metric, label, measured, predicted, rel_error = (predicted - measured) / measured;
    with ``calibrated`` (the prediction with the step cost calibrated on the fitting run) two more columns,
    predicted_calibrated and rel_error_calibrated."""
    def rel(m, p):
        return (p - m) / m if m not in (None, 0) and p is not None else float("nan")
    rows = []
    for key, label in COMPARED:
        m, p = measured.get(key), predicted.get(key)
        row = {"metric": key, "label": label, "measured": m, "predicted": p, "rel_error": rel(m, p)}
        if calibrated is not None:
            row["predicted_calibrated"] = calibrated.get(key)
            row["rel_error_calibrated"] = rel(m, calibrated.get(key))
        rows.append(row)
    return pd.DataFrame(rows)


def run_replay(trace, policy: str, out: Path, target_spec: str = "tiny", drafter_ckpt: Path | None = None,
               fit_logs: Path | None = None, fit_seed: int | None = None, fit_policy: str = "static",
               seed: int = 0, gamma: int = 7, greedy: bool = False, temperature: float = 1.0,
               max_batch: int = 16, profile_path: Path | None = None, acceptance: str = "empirical",
               fit_max_evals: int = 60, threads: int = 1, progress=None,
               served: Callable[[int, int, str], None] | None = None) -> dict:
    """``specsim replay``: serve, fit from another run, predict, compare; writes everything under ``out``.

    Files: ``replay/`` (summary.json, requests.parquet, steps.parquet, step_log.parquet), ``fit_run/``
    (the fitting run's files when ``fit_seed`` is used), ``fit/`` (``specsim fit`` output),
    ``profile.json`` (the measured target profile), ``prediction.json``, ``prediction_calibrated.json``
    (step cost calibrated on the fitting run's iterations, when they are known), ``comparison.csv``,
    ``report.json``.

    Args:
        trace: the trace; policy: policy name (or ``path.py:Name``).
        target_spec: ``tiny``, ``smollm2`` or a path (:func:`specsim.backends.torch.workflow.load_target`).
        drafter_ckpt: drafter checkpoint (default: the bundled tiny DSpark drafter for ``tiny``).
        fit_logs: another run's step log to fit the acceptance model from; or
        fit_seed: run the trace again with ``fit_policy`` and this seed and fit from that run.
        acceptance: ``empirical`` (replay the fitted blocks) or ``fitted`` (the parametric latent model).
        profile_path: a measured profile JSON of this target on this machine (default: measure now).
        threads: torch CPU threads for the whole command (1 keeps timings steadier on a shared machine).
        progress: optional callable(str) for status lines.
        served: optional ``served(done, total, label)``, e.g. :meth:`specsim.progress.ProgressBar.update`:
            the requests served so far out of every real-model run's (the trace once, twice with ``fit_seed``).

    Raises:
        SpecsimInputError: neither or both of fit_logs / fit_seed, a fitting run identical to the replay
            (same seed and policy), fit_logs equal to the replay's own log, a prompt + output longer than
            the target's context, ``gamma`` beyond the drafter's block length or a temperature not > 0
            (:func:`specsim.backends.torch.workflow.check_decoding`), bad names or files.
    """
    import torch

    from specsim.backends.torch.measure import measure_profile
    from specsim.backends.torch.workflow import BUNDLED, check_decoding, load_drafters, load_target, max_context
    from specsim.policies import make_policy
    from specsim.acceptance.fitting import write_fit
    from specsim.hardware.profile import load_profile, save_profile
    from specsim.acceptance.steplog import read_step_log

    say = progress or (lambda s: None)
    if (fit_logs is None) == (fit_seed is None):
        raise SpecsimInputError("--fit-logs/--fit-seed", None, "fit source", "exactly one of --fit-logs FILE or "
                                "--fit-seed S", "both" if fit_logs is not None else "neither")
    if fit_seed is not None and fit_seed == seed and fit_policy == policy:
        raise SpecsimInputError("--fit-seed", None, "fit_seed", f"a seed other than the replay's ({seed}) or "
                                "another --fit-policy: never fit on the run being predicted", str(fit_seed))
    if acceptance not in ("empirical", "fitted"):
        raise SpecsimInputError("--acceptance", None, "acceptance", "'empirical' or 'fitted'", repr(acceptance))
    torch.set_num_threads(int(threads))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if fit_logs is not None and Path(fit_logs).resolve() == (out / "replay" / "step_log.parquet").resolve():
        raise SpecsimInputError(str(fit_logs), None, "--fit-logs", "another run's step log", "this run's own log")
    target = load_target(target_spec)
    if drafter_ckpt is None:
        if target_spec != "tiny":
            raise SpecsimInputError("--drafter-ckpt", None, "drafter_ckpt", "a checkpoint for this target", "none")
        drafter_ckpt = BUNDLED / "tiny" / "dspark.pt"
    drafter = next(iter(load_drafters(target, [Path(drafter_ckpt)]).values()))
    for name in [policy] + ([fit_policy] if fit_seed is not None else []):
        check_decoding(drafter, drafter_ckpt, make_policy(name, gamma=gamma), gamma, greedy, temperature)
    max_len = max_context(target)
    need = np.asarray(trace.prompt_tokens) + np.asarray(trace.output_tokens) + gamma + 1
    if max_len and need.max() > max_len:
        i = int(np.argmax(need > max_len))
        raise SpecsimInputError(getattr(trace, "file", None), i + 1, "prompt_tokens + output_tokens",
                                f"<= {max_len - gamma - 1} for target {target_spec!r}", str(int(need[i] - gamma - 1)))
    total = len(trace) * (1 if fit_seed is None else 2)

    def feed(offset: int, label: str) -> Callable[[int], None] | None:
        return None if served is None else (lambda k: served(offset + k, total, label))
    if served is not None:
        served(0, total, "")
    say("prompts")
    prompts = domain_prompts(target, trace, seed)
    if profile_path is not None:
        profile = load_profile(profile_path)
    else:
        say("measuring the target's step-time profile")
        grid = [b for b in (1, 2, 4, 8, 16, 32, 64, 128, 256) if b <= max(8, max_batch * (gamma + 1))]
        profile = measure_profile(target, grid, repeats=5)
        for w in profile.metadata["timing_warnings"]:
            say(f"warning: {w}")
    save_profile(profile, out / "profile.json")
    sim_drafter = SIM_DRAFTER.get(drafter.family, "dspark")

    say(f"replaying {len(trace)} requests under {policy} (seed {seed})")
    run = serve_trace(target, drafter, policy, profile, trace, prompts, gamma, seed, greedy, temperature, max_batch,
                      feed(0, f"{policy}, seed {seed}"))
    _save_run(run, out / "replay")
    if fit_seed is not None:
        say(f"fitting run: {fit_policy}, seed {fit_seed}")
        # the same requests (prompts) with independent sampling streams: the outcomes of the run being
        # predicted are never seen; only the workload is shared, as a user fits on their own traffic
        fit_run = serve_trace(target, drafter, fit_policy, profile, trace, prompts, gamma, fit_seed, greedy,
                              temperature, max_batch, feed(len(trace), f"fitting run: {fit_policy}, seed {fit_seed}"))
        _save_run(fit_run, out / "fit_run")
        fit_log, fit_src = fit_run.step_log, f"fit_run (policy {fit_policy}, seed {fit_seed})"
        fit_steps = fit_run.steps
    else:
        fit_log, fit_src = read_step_log(fit_logs), str(fit_logs)
        sp = Path(fit_logs).parent / "steps.parquet"       # a replay's own folder layout
        fit_steps = pd.read_parquet(sp) if sp.exists() else None
        if fit_steps is not None and "kv_tokens" not in fit_steps.columns:
            fit_steps = None
    say("fitting the acceptance model")
    write_fit(fit_log.assign(request_id="fit:" + fit_log["request_id"].astype(str)), out / "fit", [fit_src],
              max_evals=fit_max_evals)
    cost_log = fit_log if "draft_time_s" in fit_log.columns else run.step_log
    cost, (a_s, b_s) = drafter_cost_from_log(cost_log, gamma, max_batch)
    scen = replay_scenario(gamma, max_batch, int(np.sum(trace.prompt_tokens)) + max_batch * (gamma + 1),
                           f"{acceptance}:{out / 'fit'}")
    say("simulating")
    pred = predict(trace, policy, scen, profile, cost, sim_drafter, seed)
    (out / "prediction.json").write_text(json.dumps(pred, indent=1, default=float) + "\n")
    calibrated = None
    if fit_steps is not None:
        say("simulating with the step cost calibrated on the fitting run")
        cal_prof = profile_from_run(fit_steps, max(profile.max_batch_tokens, max_batch * (gamma + 1)), fit_src)
        calibrated = predict(trace, policy, scen, cal_prof, cost, sim_drafter, seed, policy_profile=profile)
        calibrated["profile_coefficients_s"] = cal_prof.metadata["coefficients_s"]
        (out / "prediction_calibrated.json").write_text(json.dumps(calibrated, indent=1, default=float) + "\n")
    table = compare(run.summary, pred, calibrated)
    table.to_csv(out / "comparison.csv", index=False)
    report = {"policy": policy, "seed": seed, "target": target_spec, "drafter": str(drafter_ckpt),
              "fit_source": fit_src, "acceptance_model": f"{acceptance}:fit",
              "drafter_cost": {"intercept_s": a_s, "per_request_s": b_s,
                               "source": "fit run" if cost_log is fit_log else "replayed run"},
              "profile": profile.metadata, "torch_threads": torch.get_num_threads(),
              "calibrated_step_cost_s": None if calibrated is None else calibrated["profile_coefficients_s"],
              "measured": run.summary, "mean_iteration_ms": float(run.steps.duration_s.mean() * 1e3),
              "comparison": table.to_dict(orient="records")}
    (out / "report.json").write_text(json.dumps(report, indent=1, default=float) + "\n")
    return report


def _save_run(run: ReplayRun, d: Path) -> None:
    from specsim.acceptance.steplog import write_step_log
    d.mkdir(parents=True, exist_ok=True)
    (d / "summary.json").write_text(json.dumps(run.summary, indent=1, default=float) + "\n")
    run.requests.to_parquet(d / "requests.parquet", index=False)
    run.steps.to_parquet(d / "steps.parquet", index=False)
    write_step_log(run.step_log, d / "step_log.parquet")
