"""Running one sweep point: a :func:`specsim.simulation.simulate` call turned into a record.

Per point, a record keeps the run's summary (``vllm bench serve`` names, see specsim.analysis.metrics) and, for
SLA attainment and goodput (specsim.analysis.frontier), the per-request TPS/user and output tokens of the
measured multi-token requests (closed loop: those that complete inside the window).

Failed points (a :class:`SpecsimInputError`, e.g. a closed-loop window that never opens because the
trace is too short for the concurrency) are recorded with status ``error`` and their message, so the
sweep goes on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from specsim.analysis.metrics import measured_mask
from specsim.analysis.sweep_records import SUMMARY_KEYS
from specsim.errors import SpecsimInputError
from specsim.jsonfiles import jsonable
from specsim.scenario import Scenario
from specsim.sweep.spec import SweepPoint
from specsim.sweep.store import RECORD_VERSION


@dataclass(frozen=True)
class PointTask:
    """What a worker needs to run one point: the point, the scenario and its trace slice (picklable)."""

    point: SweepPoint
    scenario: Scenario
    trace: Any
    whole_trace: bool = False      # the slice is the sweep's whole trace (no more requests per user to give)


def _round6(x: np.ndarray) -> list[float]:
    return [float(f"{v:.6g}") for v in x.tolist()]


def _simulate(task: PointTask):
    """The point's :func:`specsim.simulation.simulate` result."""
    from specsim.simulation import simulate

    p = task.point
    knobs = {k: v for k, v in p.knobs.items() if k not in ("gamma", "drafter")}   # policy knobs
    return simulate(task.trace, p.policy, task.scenario, seed=p.seed,
                    concurrency=int(p.load) if p.mode == "closed" else None,
                    rate_scale=p.load if p.mode == "open" else 1.0, max_sim_s=p.max_sim_s,
                    gamma=p.knobs["gamma"], drafter=p.knobs["drafter"], **knobs)


def _measured_requests(rq, measured) -> dict[str, list]:
    """Per measured (``measured``: the summary's :func:`measured_mask`) multi-token request: ``tps_per_user`` (tok/s,
    6 significant digits), ``output_tokens``."""
    meas = measured & (rq.output_tokens > 1)
    return {"tps_per_user": _round6(rq.tps_per_user[meas].to_numpy()),
            "output_tokens": rq.output_tokens[meas].astype(int).tolist()}


def _latencies(rq, measured) -> dict[str, list]:
    """Per measured request (one-token ones too): ``ttft_ms``, ``tpot_ms`` (0 for one token, as vLLM), ``e2el_ms``."""
    sub = rq[measured]
    tpot = sub.tpot_s.where(sub.output_tokens > 1, 0.0)
    return {k: _round6(v.to_numpy() * 1e3) for k, v in (("ttft_ms", sub.ttft_s), ("tpot_ms", tpot),
                                                          ("e2el_ms", sub.e2el_s))}


def _ok_fields(res) -> dict[str, Any]:
    """The ``summary``, ``requests`` and ``provenance`` fields of a successful point's record."""
    s = res.summary
    summary = {k: s.get(k) for k in SUMMARY_KEYS}
    summary["load"] = s["load"]
    summary["per_domain"] = s["per_domain"]
    summary["window"] = s.get("window")
    summary["speculation_overhead"] = s.get("speculation_overhead")      # what compare says it was charged
    summary["acceptance_notice"] = s.get("acceptance_notice")            # built-in rates, not the user's drafter
    kv = s.get("kv_capacity") or {}                                      # which limit admission hits (cautions)
    summary["admission_limit"] = {"kv_max_requests": kv.get("max_requests"), "kv_tokens": kv.get("tokens"),
                                  "max_num_seqs": s["provenance"]["scenario"]["cluster"].get("max_num_seqs")}
    pv, measured = s["provenance"], measured_mask(res.requests, s)
    return {"summary": jsonable(summary), "requests": _measured_requests(res.requests, measured),
            "latencies": _latencies(res.requests, measured),
            "provenance": {"specsim_version": pv["specsim_version"], "profile_source": pv["profile_source"],
                           "acceptance_source": pv["acceptance_source"], "trace": str(pv["trace"])}}


def run_point(task: PointTask) -> dict[str, Any]:
    """Simulate one point and return its record (never raises for a point's own input error).

    Returns:
        A record dict: ``record_version``, ``id``, ``config``, ``status`` (``ok`` or ``error``), ``error``
        (message or None), ``error_type``, ``summary`` (SUMMARY_KEYS plus ``load``, ``per_domain``),
        ``requests`` (per measured multi-token request: ``tps_per_user`` tok/s and ``output_tokens``),
        ``provenance``, ``wall_time_s``.
    """
    p = task.point
    t0 = time.perf_counter()
    rec: dict[str, Any] = {"record_version": RECORD_VERSION, "id": p.id, "config": p.config,
                           "status": "ok", "error": None, "error_type": None, "summary": None,
                           "requests": None, "provenance": None}
    try:
        res = _simulate(task)
    except SpecsimInputError as e:  # a point the configuration cannot run is recorded, the sweep goes on
        whole = (f" (this point ran the whole trace, {len(task.trace):,} requests: more requests per user cannot "
                 "help; a longer trace or fewer users)" if task.whole_trace and e.field == "concurrency" else "")
        rec.update(status="error", error=str(e) + whole, error_type=type(e).__name__)
    else:
        rec.update(_ok_fields(res))
    rec["wall_time_s"] = time.perf_counter() - t0
    return rec
