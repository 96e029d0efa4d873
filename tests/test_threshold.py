"""The ``threshold`` policy (DeepSpec's per-position rule) and the DSpark paper's Fig. 5 sweep (§4.3.3)."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.model import build_acceptance_model
from specsim.hardware.profile import resolve_profile
from specsim.policies import make_policy
from specsim.policies.base import SchedulingView
from specsim.policies.threshold import ConfidenceThreshold
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace
from tests.conftest import REPO

# The DSpark paper's Fig. 5 sweep (§4.3.3) is measured in runs: tests/test_acceptance.py::test_fig5_endpoints_in_runs.


def view_of(conf_raw: np.ndarray) -> SchedulingView:
    r, g = conf_raw.shape
    ints = np.zeros(r, np.int64)
    return SchedulingView(step=0, now_s=0.0, gamma=g, request_ids=np.arange(r), domains=np.full(r, "chat", object),
                          conf_raw=conf_raw, conf=conf_raw, num_generated=ints, prompt_tokens=ints, kv_tokens=0.0,
                          hist_drafts_verified=ints, hist_drafts_accepted=ints, last_verify_len=ints - 1,
                          last_accepted=ints - 1, profile=resolve_profile("h100-llama2-7b-tp1"))


def test_truncates_at_the_first_low_confidence():
    conf = np.array([[0.9, 0.8, 0.4, 0.95],      # third below 0.5: verify 2, even though the fourth is high
                     [0.3, 0.9, 0.9, 0.9],       # first below: verify none
                     [0.5, 0.6, 0.7, 0.99],      # c = threshold counts as confident: verify all
                     [0.99, 0.99, 0.99, 0.49]])
    out = ConfidenceThreshold(0.5)(view_of(conf))
    assert out.dtype == np.int64 and out.tolist() == [2, 0, 4, 3]
    assert ConfidenceThreshold(0.0)(view_of(conf)).tolist() == [4, 4, 4, 4]
    assert make_policy("threshold", threshold=0.95).threshold == 0.95
    with pytest.raises(ValueError):
        ConfidenceThreshold(1.5)


def test_threshold_zero_is_static_in_the_engine():
    trace = load_trace(REPO / "traces" / "prod.jsonl").head(40)
    # open loop: step timing differs (static fits ZOS, threshold pays the host overhead), but with common
    # random numbers every request verifies and accepts exactly the same drafts
    a = simulate(trace, "threshold", seed=3, threshold=0.0)
    b = simulate(trace, "static", seed=3)
    np.testing.assert_array_equal(a.requests.accepted_drafts, b.requests.accepted_drafts)
    np.testing.assert_array_equal(a.requests.decode_steps, b.requests.decode_steps)
    c = simulate(trace, "threshold", seed=3, threshold=0.8)
    assert c.summary["mean_verify_tokens_per_request"] < b.summary["mean_verify_tokens_per_request"]
    assert c.summary["acceptance_rate"] > b.summary["acceptance_rate"]
