"""Small builders shared by the engine tests."""

from __future__ import annotations

import numpy as np

from specsim.hardware.profile import StepTimeProfile
from specsim.policies.base import SchedulingView
from specsim.scenario import load_scenario
from specsim.workload.trace import Trace


def make_trace(arrival_s, prompt, output, domain=None) -> Trace:
    n = len(arrival_s)
    return Trace(request_id=np.array([str(i) for i in range(n)], dtype=object),
                 arrival_s=np.asarray(arrival_s, float), prompt_tokens=np.asarray(prompt, np.int64),
                 output_tokens=np.asarray(output, np.int64),
                 domain=np.array(domain or ["chat"] * n, dtype=object), source="<test>")


def homogeneous_scenario(*extra: str, alpha: float = 0.8):
    """Constant conditional acceptance ``alpha``, no latent heterogeneity, no host overhead."""
    return load_scenario(overrides=[
        f"acceptance.constant_alpha={alpha}", "acceptance.sigma_request=0", "acceptance.sigma_step=0",
        "acceptance.sigma_token=0", "engine.host_overhead_s=0", "engine.request_overhead_s=0", "prefill.time_per_token_s=0.00001", *extra])


def make_view(conf, sps_values, capacity=None, ids=None) -> SchedulingView:
    """A view with the given (R, gamma) confidences and SPS(1..n) table (step time = 1/SPS)."""
    conf = np.asarray(conf, float)
    R, g = conf.shape
    sps = np.asarray(sps_values, float)
    profile = StepTimeProfile(np.arange(1, sps.size + 1), 1.0 / sps, source="<test sps>")
    z = np.zeros(R, np.int64)
    return SchedulingView(step=0, now_s=0.0, gamma=g, request_ids=np.arange(R) if ids is None else np.asarray(ids),
                          domains=np.array(["chat"] * R, dtype=object), conf_raw=conf, conf=conf,
                          num_generated=z + 1, prompt_tokens=z + 10, kv_tokens=0.0, hist_drafts_verified=z,
                          hist_drafts_accepted=z, last_verify_len=z - 1, last_accepted=z - 1, profile=profile,
                          capacity=capacity)


def random_confidences(rng: np.random.Generator, R: int, G: int, power: float, ties: bool) -> np.ndarray:
    """(R, G) confidences in [0, 1] skewed by ``power``; with ``ties``, exact ties: saturated confidences,
    dead rows (all 0) and values rounded to one decimal (the cases a scan's tie rule must get right)."""
    conf = rng.random((R, G)) ** power
    if ties:
        conf[rng.random((R, G)) < 0.2] = 1.0
        conf[rng.random(R) < 0.1] = 0.0
        conf = np.round(conf, 1)
    return conf


def run_cli(args: list[str]) -> int:
    """``specsim ARGS`` in this process; its exit status (0 when it returns)."""
    import sys

    from specsim.cli import main

    old = sys.argv
    sys.argv = ["specsim", *args]
    try:
        main()
    except SystemExit as e:
        return int(e.code or 0)
    finally:
        sys.argv = old
    return 0


def assert_same_run(a, b) -> None:
    """Two simulation results are the same run: equal steps and requests frames to the bit and equal summaries
    but for the wall and CPU times (NaN equal to NaN)."""
    import pandas as pd

    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
    pd.testing.assert_frame_equal(a.requests, b.requests, check_exact=True)
    for key, value in b.summary.items():
        if key in ("event_loop_wall_s", "event_loop_cpu_s", "wall_time_s"):
            continue
        got = a.summary[key]
        assert got == value or (got != got and value != value), key

