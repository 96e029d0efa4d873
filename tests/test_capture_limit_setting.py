"""``engine.cudagraph_max_tokens``: the CUDA-graph capture limit set from a scenario, and the eager steps counted."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.analytic import graph_limit
from specsim.hardware.profile import resolve_profile
from specsim.hardware.capture import eager_steps, recapture
from specsim.hardware.stepmodel import step_model_of
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload import load_trace

B200 = "specsim/scenarios/b200-qwen3.8-27b-vllm.toml"


def _b200_profile():
    sc = load_scenario(B200)
    return resolve_profile(sc.profile.name, sc.profile.lookup)


def test_the_key_is_a_scenario_key_and_unset_by_default():
    assert load_scenario().engine.cudagraph_max_tokens is None
    assert load_scenario(B200, ["engine.cudagraph_max_tokens=512"]).engine.cudagraph_max_tokens == 512
    with pytest.raises(SpecsimInputError, match="engine.cudagraph_max_tokens"):
        load_scenario(None, ["engine.cudagraph_max_tokens=-1"])


def test_recapture_keeps_the_profile_unset_or_at_its_own_limit_and_reprices_otherwise():
    p = _b200_profile()
    own = step_model_of(p).terms.cudagraph_max_tokens
    assert own == 1024
    assert recapture(p, None) is p and recapture(p, own) is p
    q = recapture(p, 256)
    assert q.metadata["cudagraph_max_tokens"] == 256 and q.metadata["name"] == p.metadata["name"]
    assert (q.source, q.lookup, q.extrapolate) == (p.source, p.lookup, p.extrapolate)
    assert step_model_of(q).terms.cudagraph_max_tokens == 256
    b = p.batch_tokens
    assert np.array_equal(q.batch_tokens[q.batch_tokens <= 256], b[b <= 256])     # the graphs it keeps
    assert np.allclose(q.step_time_s[q.batch_tokens <= 256], p.step_time_s[b <= 256], rtol=0, atol=0)
    want = step_model_of(p).with_terms(cudagraph_max_tokens=256).profile(p.max_batch_tokens)
    assert np.array_equal(q.step_time_s, want.step_time_s) and np.array_equal(q.batch_tokens, want.batch_tokens)
    assert q.step_time_s[-1] == p.step_time_s[-1]          # 17,408 tokens: eager under either limit


def test_a_plain_table_profile_refuses_a_capture_limit():
    sc = load_scenario(None, ["engine.cudagraph_max_tokens=64"])
    t = load_trace("traces/prod.jsonl").head(5)
    with pytest.raises(SpecsimInputError) as e:
        simulate(t, "none", sc)
    assert e.value.field == "engine.cudagraph_max_tokens" and "unset for a plain table profile" in e.value.expected


def test_eager_steps_are_the_steps_beyond_the_last_captured_size():
    t = load_trace("traces/prod.jsonl").head(200)
    base = simulate(t, "none", load_scenario(B200), rate_scale=8.0)
    same = simulate(t, "none", load_scenario(B200, ["engine.cudagraph_max_tokens=1024"]), rate_scale=8.0)
    assert same.summary["output_throughput"] == base.summary["output_throughput"]    # the profile's own limit
    assert same.summary["profile_range"]["eager_steps"] == base.summary["profile_range"]["eager_steps"]
    for res, cap in ((base, 1024), (simulate(t, "none", load_scenario(B200, ["engine.cudagraph_max_tokens=64"]),
                                             rate_scale=8.0), 64)):
        pr, b = res.summary["profile_range"], res.steps.batch_tokens.to_numpy()
        assert pr["eager_steps"] == int((b > graph_limit(cap)).sum()) > 0
        assert pr["eager_share"] == pytest.approx(pr["eager_steps"] / b.size)
        assert any(n.startswith(f"{pr['eager_steps']:,} of {b.size:,} steps") and "ran eager" in n
                   for n in pr["notices"])
    assert eager_steps(_b200_profile(), np.array([0, 1024, 1025])) == 1
    assert eager_steps(resolve_profile(load_scenario().profile.name, None), np.array([5000])) is None


def test_specsim_run_prints_the_eager_notice():
    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    res = CliRunner().invoke(app, ["run", "--scenario", B200, "--trace", "traces/prod.jsonl", "--policy", "none",
                                   "--num-requests", "60", "--set", "engine.cudagraph_max_tokens=0"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    said = " ".join(res.output.split())
    assert "ran eager, their batch beyond no CUDA graphs (cudagraph_max_tokens 0)" in said
