"""One measured job of ``bench_side_by_side.py``, run in a fresh process against whichever specsim is first on
``PYTHONPATH`` (this checkout, or the starting commit unpacked beside it). Public API only, so that both
layouts (before and after the module reorganisation of issue 19) run it. Prints one JSON line.

Jobs:
  vidur TRACE SCENARIO   the Vidur workload, policy ``none``: event-loop seconds, steps, a digest of the results.
  decide                 the decisions at R = 512, gamma = 16 (DSpark's scan, the engine-variant schedulers):
                         per-call microseconds in seven regimes.
  startup                seconds to import the run path (specsim.simulation) and to get the default scenario's
                         acceptance model (built, or loaded from the on-disk cache where there is one).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time

import numpy as np


def _load_trace(path: str):
    import importlib

    for name in ("specsim.workload.jsonl", "specsim.workload.trace", "specsim.trace"):   # newest layout first
        try:
            return importlib.import_module(name).load_trace(path)
        except (ImportError, AttributeError):
            continue
    raise SystemExit("side_by_side_driver: no load_trace in this specsim")


def vidur(trace_path: str, scenario_path: str) -> dict:
    """Run policy ``none`` on the Vidur workload; the digest hashes every request's TTFT and E2E and every step's
    duration (rounded to 1e-12 s), so equal digests mean unchanged results."""
    from specsim.scenario import load_scenario
    from specsim.simulation import simulate

    res = simulate(_load_trace(trace_path), "none", load_scenario(scenario_path), seed=0)
    h = hashlib.sha256()
    for col in (res.requests.ttft_s, res.requests.e2el_s, res.steps.duration_s):
        h.update(np.round(col.to_numpy(dtype=float), 12).tobytes())
    s = res.summary
    return {"loop_s": s["event_loop_wall_s"], "loop_cpu_s": s["event_loop_cpu_s"], "steps": len(res.steps),
            "digest": h.hexdigest()[:16]}


def _view(R: int, gamma: int, conf: np.ndarray, profile, drafter_cost):
    from specsim.policies.base import SchedulingView

    z = np.zeros(R, np.int64)
    vals = {"step": 10, "now_s": 1.0, "gamma": gamma, "request_ids": np.arange(R, dtype=np.int64),
            "domains": np.array(["chat"] * R, dtype=object), "conf_raw": conf, "conf": conf,
            "num_generated": z + 100, "prompt_tokens": z + 1000, "kv_tokens": float(R * 1100),
            "hist_drafts_verified": z, "hist_drafts_accepted": z, "last_verify_len": z - 1,
            "last_accepted": z - 1, "profile": profile, "capacity": None, "drafter_cost": drafter_cost}
    names = {f.name for f in dataclasses.fields(SchedulingView) if f.init}
    return SchedulingView(**{k: v for k, v in vals.items() if k in names})


#: The decisions the ``decide`` job times (issue 25): DSpark's scan under both early-stop rules and the
#: engine-variant schedulers (name, knobs); a side without one (the starting commit has no engine variants)
#: prints it as absent.
DECIDE_POLICIES = (("dspark", {}), ("dspark", {"early_stop": "paper"}), ("vllm-adaptive", {}),
                   ("trtllm-confidence", {}), ("vllm-dsd", {}), ("trtllm-draft-len-schedule", {}))


def _profiles(R: int, gamma: int) -> dict:
    """The seven regimes (profile, confidences) of :func:`decide`."""
    from specsim.hardware.profile import StepTimeProfile, resolve_profile
    from specsim.scenario import load_scenario

    sc = load_scenario()
    bundled = resolve_profile(sc.profile.name, sc.profile.lookup)
    line = StepTimeProfile(np.array([1.0, 65536.0]), np.array([0.02, 0.02 + 65535e-7]), "linear")
    rng = np.random.default_rng(0)
    unif, high = rng.uniform(0.0, 1.0, (R, gamma)), rng.uniform(0.97, 1.0, (R, gamma))
    steep = StepTimeProfile(np.array([1.0, 65536.0]), np.array([0.02, 0.02 + 65535 * 4e-6]), "linear")
    return {"bundled-unif": (bundled, unif), "bundled-high": (bundled, high), "line-unif": (line, unif),
            "line-high": (line, high), "line-all": (line, np.full((R, gamma), 0.99999)),
            "steep-high": (steep, high), "steep-mid": (steep, rng.uniform(0.9, 1.0, (R, gamma)))}


def _timed_call(policy, view, R: int) -> tuple[float, float, np.ndarray, float]:
    """(wall s, thread CPU s, verify lengths, wall s of the ``capacity`` hook alone) of one decision: the
    ``capacity`` hook (asked with this view as the old one, every request still running) and ``__call__`` on the
    view carrying its answer; the view copy between them is not timed."""
    hook = getattr(policy, "capacity", None)
    if hook is None:
        w0, c0 = time.perf_counter(), time.thread_time()
        out = policy(view)
        return time.perf_counter() - w0, time.thread_time() - c0, out, 0.0
    w0, c0 = time.perf_counter(), time.thread_time()
    k = hook(view, view.request_ids, R)
    w1, c1 = time.perf_counter() - w0, time.thread_time() - c0
    live = dataclasses.replace(view, capacity=k)
    w0, c0 = time.perf_counter(), time.thread_time()
    out = policy(live)
    return w1 + time.perf_counter() - w0, c1 + time.thread_time() - c0, out, w1


def decide(R: int = 512, gamma: int = 16, calls: int = 300) -> dict:
    """Per-call microseconds of each decision in :data:`DECIDE_POLICIES` on fixed views: wall p50/p90/p99/max and
    the thread's CPU p50/p99 (which leave out the time other processes hold the CPU), and the drafts admitted.

    Regimes (step-time profile x calibrated confidences): ``bundled`` is the default scenario's profile, on
    which R = 512 is past the throughput knee (few drafts pay: the scan stops early); ``line`` is a smooth
    step-time line, 20 ms + 1e-7 s per token (every extra token nearly free), with confidences uniform(0, 1)
    (``line-unif``), uniform(0.97, 1) (``line-high``) and 0.99999 (``line-all``: every draft is admitted, the
    heap merge's worst case before issue 25); ``steep`` is a line 40 times steeper (4e-6 s per token) with
    confidences uniform(0.97, 1) (``steep-high``: every draft pays, but not by the margin that lets DSpark skip
    the sort) and uniform(0.9, 1) (``steep-mid``: the scan stops after 7,630 of 8,192: a sort of every survival,
    a scan of nearly all and the ties resolved, the slowest path of issue 25's scan).
    """
    from specsim.policies import make_policy

    regimes = _profiles(R, gamma)
    out = {}
    for name, knobs in DECIDE_POLICIES:
        label = name + "".join(f" {k}={v}" for k, v in knobs.items())
        try:
            make_policy(name, gamma=gamma, **knobs)
        except Exception:                   # not in this tree
            out[label] = None
            continue
        out[label] = {}
        for regime, (prof, conf) in regimes.items():
            policy = make_policy(name, gamma=gamma, **knobs)
            view = _view(R, gamma, conf, prof, None)
            for _ in range(20):             # kernels loaded, caches warm
                _timed_call(policy, view, R)
            wall, cpu, hook = np.empty(calls), np.empty(calls), np.empty(calls)
            for i in range(calls):
                wall[i], cpu[i], lengths, hook[i] = _timed_call(policy, view, R)
            wall, cpu, hook = wall * 1e6, cpu * 1e6, hook * 1e6
            out[label][regime] = {"p50": float(np.median(wall)), "p90": float(np.percentile(wall, 90)),
                                  "p99": float(np.percentile(wall, 99)), "max": float(wall.max()),
                                  "cpu_p50": float(np.median(cpu)), "cpu_p99": float(np.percentile(cpu, 99)),
                                  "capacity_p50": float(np.median(hook)),
                                  "call_p50": float(np.median(wall - hook)),
                                  "admitted": int(np.asarray(lengths).sum())}
    return out


def startup() -> dict:
    """Import seconds of the run path and seconds to obtain the default scenario's acceptance model."""
    t0 = time.perf_counter()
    import specsim.simulation  # noqa: F401
    t1 = time.perf_counter()
    try:
        from specsim.acceptance.fitting import resolve_acceptance_model
    except ImportError:                     # the layout before issue 19
        from specsim.fitting import resolve_acceptance_model
    from specsim.scenario import load_scenario

    sc = load_scenario()
    t2 = time.perf_counter()
    resolve_acceptance_model("dspark", 7, domains=("chat", "code", "math"), **sc.to_dict()["acceptance"])
    return {"import_s": t1 - t0, "model_s": time.perf_counter() - t2}


if __name__ == "__main__":
    job = sys.argv[1]
    res = vidur(sys.argv[2], sys.argv[3]) if job == "vidur" else decide() if job == "decide" else startup()
    print(json.dumps(res))
