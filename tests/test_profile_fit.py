"""``profile fit``: the engine-level terms recovered from steps they generated, holdout, refusals, the CLI."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.profile_fit import FIT_BOUNDS, fit_step_model, predict_observations
from specsim.hardware.stepmodel import step_model


@dataclass(frozen=True)
class Obs:
    num_requests: float
    batch_tokens: float
    context_tokens: float
    step_time_s: float
    label: str = ""
    source: str = "synthetic.csv"


def _observed(sm, requests, context=1500.0, noise=None):
    pts = [Obs(r, r, context, 1.0, f"R={r}") for r in requests]
    t = predict_observations(sm, pts)
    if noise is not None:
        t = t * noise
    return [replace(p, step_time_s=float(x)) for p, x in zip(pts, t)]


def test_fit_recovers_the_terms_that_made_the_steps():
    truth = step_model("qwen3-8b", "h100").with_terms(bw_eff=0.72, per_request_step_s=3.5e-5)
    obs = _observed(truth, [1, 8, 32, 64, 128, 256])
    rep = fit_step_model(step_model("qwen3-8b", "h100"), obs[::3], ("bw_eff", "per_request_step_s"),
                         holdout=obs[1::3] + obs[2::3])
    assert rep.params["bw_eff"] == pytest.approx(0.72, rel=1e-4)
    assert rep.params["per_request_step_s"] == pytest.approx(3.5e-5, rel=1e-3)
    assert rep.median_abs_error(True) < 1e-4
    assert [p.holdout for p in rep.points] == [False, False, True, True, True, True]
    prov = rep.provenance()["fit"]
    assert prov["fitted_on"] == ["synthetic.csv"] and len(prov["points"]) == 6
    prof = rep.model.profile(512, kind="fitted", provenance=rep.provenance())
    assert prof.metadata["kind"] == "fitted" and prof.metadata["step_model"]["terms"]["bw_eff"] == pytest.approx(0.72,
                                                                                                             rel=1e-4)


def test_fit_stays_inside_the_physical_bounds():
    # steps twice as fast as any weight streaming allows: bw_eff stops at its bound 1.0, never above
    truth = step_model("qwen3-8b", "h100").with_terms(bw_eff=1.0)
    obs = [replace(o, step_time_s=o.step_time_s / 2) for o in _observed(truth, [1, 4, 16])]
    rep = fit_step_model(step_model("qwen3-8b", "h100"), obs, params=("bw_eff",))
    assert rep.params["bw_eff"] == pytest.approx(FIT_BOUNDS["bw_eff"][1])
    assert rep.at_bounds == ["bw_eff"]                             # said, not hidden
    assert rep.median_abs_error(False) > 0.3


def test_fit_warns_when_a_constant_lands_an_order_of_magnitude_from_its_default():
    # steps made with attn_request_s 20x and kernel_s 1/20 of their defaults: the fit recovers both and names
    # them, instead of hiding them (kernel_s's ceiling, 50 us, is 6.4x its default: above it the bound warns)
    base = step_model("qwen3-8b", "h100")
    truth = base.with_terms(attn_request_s=20 * base.terms.attn_request_s, kernel_s=base.terms.kernel_s / 20)
    rep = fit_step_model(base, _observed(truth, [1, 16, 64]), ("attn_request_s", "kernel_s"))
    assert rep.far_from_default["attn_request_s"] == pytest.approx(20.0, rel=1e-3)
    assert rep.far_from_default["kernel_s"] == pytest.approx(0.05, rel=1e-3)
    assert any(w.startswith("attn_request_s = ") and "order of magnitude" in w for w in rep.warnings())
    assert any(w.startswith("kernel_s = ") for w in rep.warnings())
    assert rep.provenance()["fit"]["far_from_default"] == rep.far_from_default
    # within a factor 10 either way: no warning; a default of 0 (per_request_step_s) is never compared
    near = fit_step_model(base, _observed(base.with_terms(kernel_s=3 * base.terms.kernel_s,
                                                          per_request_step_s=1e-4), [1, 16, 64]),
                          ("kernel_s", "per_request_step_s"))
    assert near.far_from_default == {} and near.warnings() == []


def test_a_slope_fitted_on_light_loads_only_is_said_to_be_extrapolated():
    """A fresh user's per_request_step_s fitted on 1 and 2 users (0.0% residual) missed 128 users by +149%, with no
    warning: a slope in R fitted below R = 8 only now says it is extrapolated above."""
    base = step_model("qwen3-8b", "h100")
    truth = base.with_terms(per_request_step_s=3e-5)
    light = fit_step_model(base, _observed(truth, [1, 2]), ("kernel_s", "per_request_step_s"))
    assert any(w.startswith("per_request_step_s, the step's slope in R, is fitted on points of R <= 2 only")
               for w in light.warnings())
    wide = fit_step_model(base, _observed(truth, [1, 2]), ("kernel_s", "per_request_step_s"),
                          holdout=_observed(truth, [64]))                 # a holdout is not a fitted point
    assert any("R <= 2 only" in w for w in wide.warnings())
    assert not any("slope" in w for w in fit_step_model(base, _observed(truth, [1, 64]),
                                                        ("kernel_s", "per_request_step_s")).warnings())


def test_fit_refuses_more_parameters_than_points_and_unknown_names():
    base = step_model("qwen3-8b", "h100")
    obs = _observed(base, [1, 8])
    with pytest.raises(SpecsimInputError, match="at most 2 parameter"):
        fit_step_model(base, obs, params=("bw_eff", "per_request_step_s", "fixed_step_s"))
    with pytest.raises(SpecsimInputError, match="--params"):
        fit_step_model(base, obs, params=("scale",))


def test_prefill_sharing_steps_predicted_as_the_engine_runs_them():
    # P = B - R prompt tokens per step in chunks of c: a share f = P / c of the steps carries R + c tokens
    # (eager), the rest R tokens (graph-padded); at the mean B a concave MoE step would be overstated
    sm = step_model("deepseek-v3", "h200", tp=8)
    o = Obs(4.0, 4.0 + 20.0, 2000.0, 1.0)
    f = 20.0 / 2048
    by_hand = (1 - f) * sm.step_time([4.0], [4.0], [8000.0])[0] + f * sm.step_time([4.0 + 2048], [4.0], [8000.0])[0]
    assert predict_observations(sm, [o], chunk_tokens=2048)[0] == pytest.approx(by_hand, rel=1e-12)
    assert predict_observations(sm, [o], chunk_tokens=2048)[0] < predict_observations(sm, [o])[0]
    # a step whose prompt tokens fill the chunk: every step carries them
    full = Obs(4.0, 4.0 + 3000.0, 2000.0, 1.0)
    assert predict_observations(sm, [full], chunk_tokens=2048)[0] == pytest.approx(
        sm.step_time([3004.0], [4.0], [8000.0])[0], rel=1e-12)


@dataclass(frozen=True)
class Turnover(Obs):
    prompt_tokens: float = float("nan")


def test_mixed_step_cost_is_charged_on_the_share_of_steps_that_start_a_prompt():
    # P / L prompts start per step at random: 1 - exp(-P / L) of the steps carry one and pay mixed_step_s
    sm = step_model("qwen3-8b", "h100").with_terms(mixed_step_s=0.004)
    plain = sm.with_terms(mixed_step_s=0.0)
    o = Turnover(64.0, 64.0 + 100.0, 500.0, 1.0, prompt_tokens=200.0)        # half a prompt per step
    extra = predict_observations(sm, [o])[0] - predict_observations(plain, [o])[0]
    assert extra == pytest.approx(0.004 * (1 - np.exp(-0.5)), rel=1e-12)
    # no prompt tokens, or no prompt length given: no mixed step is seen
    assert predict_observations(sm, [Turnover(64.0, 64.0, 500.0, 1.0, prompt_tokens=200.0)])[0] == \
        predict_observations(plain, [Turnover(64.0, 64.0, 500.0, 1.0, prompt_tokens=200.0)])[0]
    assert predict_observations(sm, [Obs(64.0, 164.0, 500.0, 1.0)])[0] == predict_observations(plain, [Obs(
        64.0, 164.0, 500.0, 1.0)])[0]
    # a prompt that fits the engine's chunk arrives whole, as without one; a longer one as chunks of it, on the
    # share f = P / chunk of the steps
    for chunk, f in ((2048, 1 - np.exp(-0.5)), (128, 100.0 / 128)):
        assert (predict_observations(sm, [o], chunk_tokens=chunk)[0]
                - predict_observations(plain, [o], chunk_tokens=chunk)[0] == pytest.approx(0.004 * f, rel=1e-9))


def test_points_of_different_turnover_separate_the_mixed_step_from_the_per_request_cost():
    # two datasets on one server: the same R, new prompts every 2 steps or every 8: three terms from four points
    truth = step_model("qwen3-8b", "h100").with_terms(kernel_s=4e-6, per_request_step_s=3e-5, mixed_step_s=0.006)
    pts = [Turnover(r, r + r * share, 400.0, 1.0, f"R={r}", prompt_tokens=150.0)
           for r in (1.0, 128.0) for share in (0.02, 0.5)]
    pts = [replace(p, step_time_s=float(t)) for p, t in zip(pts, predict_observations(truth, pts))]
    rep = fit_step_model(step_model("qwen3-8b", "h100"), pts, ("kernel_s", "per_request_step_s", "mixed_step_s"))
    assert rep.params == pytest.approx({"kernel_s": 4e-6, "per_request_step_s": 3e-5, "mixed_step_s": 0.006}, rel=1e-3)
    # the step-model profile carries it on the mixed (prefill-sharing) table only
    prof = rep.model.profile(512)
    assert prof.mixed_step_time(64) - prof.step_time(64) == pytest.approx(rep.params["mixed_step_s"], rel=1e-9)
    assert "mixed_step_s" in FIT_BOUNDS


def test_a_mixed_step_fitted_on_one_datasets_loads_is_said_not_separated():
    # one dataset: the share of prompt-starting steps rises with R along the loads, so mixed_step_s and
    # per_request_step_s trade off; the report says so (and not where two datasets' turnover differs)
    truth = step_model("qwen3-8b", "h100").with_terms(kernel_s=4e-6, per_request_step_s=3e-5, mixed_step_s=0.006)
    one = [Turnover(r, r + r * 0.004, 400.0, 1.0, f"R={r}", prompt_tokens=150.0) for r in (1.0, 32.0, 128.0)]
    one = [replace(p, step_time_s=float(t)) for p, t in zip(one, predict_observations(truth, one))]
    rep = fit_step_model(step_model("qwen3-8b", "h100"), one, ("kernel_s", "per_request_step_s", "mixed_step_s"))
    assert rep.unseparated and any("not separated" in w for w in rep.warnings())
    two = one[:1] + [replace(one[2], batch_tokens=128.0 * 1.5), one[2]]
    assert not fit_step_model(step_model("qwen3-8b", "h100"), two,
                              ("kernel_s", "per_request_step_s", "mixed_step_s")).unseparated
    assert not fit_step_model(step_model("qwen3-8b", "h100"), one[:2]).unseparated


def test_chunked_points_without_prompt_lengths_still_fit_the_mixed_step():
    # with --chunk-tokens the share of mixed steps is P / chunk, prompt lengths or not: no "not fitted" warning
    sm = step_model("qwen3-8b", "h100")
    pts = [Obs(r, r + p, 400.0, 1.0, f"R={r}") for r, p in ((4.0, 20.0), (64.0, 400.0))]
    pts = [replace(o, step_time_s=float(t)) for o, t in zip(pts, predict_observations(
        sm.with_terms(mixed_step_s=0.004), pts, chunk_tokens=512))]
    rep = fit_step_model(sm, pts, ("kernel_s", "mixed_step_s"), chunk_tokens=512)
    assert not rep.no_turnover and not any("not fitted by these points" in w for w in rep.warnings())
    assert fit_step_model(sm, pts, ("kernel_s", "mixed_step_s")).no_turnover       # without chunks: no share
    # decode-only buckets and one that carried a 512-token chunk (a fresh user's steps.csv): the chunk's share
    # separates the two terms, where the prompt-length share alone (0 everywhere) said they were not
    rows = [Obs(r, r, 400.0, 1.0, f"R={r}") for r in (1.0, 8.0, 32.0, 64.0)] + [Obs(16.0, 528.0, 400.0, 1.0, "mixed")]
    rows = [replace(o, step_time_s=float(t)) for o, t in zip(rows, predict_observations(
        sm.with_terms(mixed_step_s=0.004, per_request_step_s=2e-5), rows, chunk_tokens=512))]
    rep = fit_step_model(sm, rows, ("kernel_s", "per_request_step_s", "mixed_step_s"), chunk_tokens=512)
    assert not rep.unseparated and not rep.no_turnover
    assert rep.params["mixed_step_s"] == pytest.approx(0.004, rel=1e-3)


def test_the_fit_predicts_the_mean_step_the_simulation_runs():
    """The fit's prediction of an observation is the mean step the simulator runs at that point (issue 20): 128
    users on the bundled B200 Qwen3.8-27B profile, prompts of 111 tokens, outputs spread 2..1,024 with mean 263
    (the MathReasoning sweep's N = 128 point). Two in five steps carry a prompt (1.3 prompts each) beside 127
    decode rows, and the B200's GEMMs turn compute bound between 128 and 265 tokens, so the step at the mean B
    (179 tokens) was 6% under the simulated mean; prompts as they arrive, whole and at random, reproduce it."""
    from specsim.hardware.profile import resolve_profile
    from specsim.hardware.step_points import StepObservation
    from specsim.hardware.stepmodel import step_model_of
    from specsim.scenario import load_scenario
    from specsim.simulation import simulate
    from specsim.workload import synth_trace

    from conftest import REPO

    trace = synth_trace(128 * 6, 1.0, seed=0, prompt_len=111, output_len="maxent:263:1024")
    res = simulate(trace, "none", load_scenario(REPO / "specsim" / "scenarios" / "b200-qwen3.8-27b-vllm.toml"),
                   concurrency=128, seed=0)
    w, st = res.summary["window"], res.steps
    end = st.start_s + st.duration_s
    win = st[(end > w["start_s"]) & (end <= w["end_s"])]
    r = float(win.num_decode.mean())
    done = res.requests[(res.requests.done_s > w["start_s"]) & (res.requests.done_s <= w["end_s"])]
    obs = StepObservation(r, r + float(win.prefill_tokens.mean()), 111.0 + float(done.output_tokens.mean()) / 2,
                          float(win.duration_s.mean()), "sim", None, "step", "N=128", prompt_tokens=111.0)
    sm = step_model_of(resolve_profile("b200-qwen3.8-27b-vllm-fitted"))
    assert predict_observations(sm, [obs])[0] == pytest.approx(obs.step_time_s, rel=0.02)


def test_eager_kernel_s_is_held_where_no_point_runs_beyond_the_capture_limit():
    """--params kernel_s,eager_kernel_s on points all under the capture limit (512 tokens on H100) reported
    eager_kernel_s as fitted at its starting value; it is now held, with the reason, and fitted once a point runs
    eager."""
    base = step_model("qwen3-8b", "h100")
    truth = base.with_terms(kernel_s=5e-6, eager_kernel_s=2e-5)
    rep = fit_step_model(base, _observed(truth, [1, 16, 64]), ("kernel_s", "eager_kernel_s"))
    assert set(rep.params) == {"kernel_s"} and rep.params["kernel_s"] == pytest.approx(5e-6, rel=1e-4)
    assert rep.held == {"eager_kernel_s": "no point beyond the capture limit"}
    assert rep.model.terms.eager_kernel_s == base.terms.eager_kernel_s
    assert rep.provenance()["fit"]["held"] == rep.held
    eager = fit_step_model(base, _observed(truth, [1, 16, 64, 1000]), ("kernel_s", "eager_kernel_s"))
    assert eager.held == {} and eager.params["eager_kernel_s"] == pytest.approx(2e-5, rel=1e-3)


def test_the_docs_kernel_s_ceiling_ratio_is_the_codes():
    """docs/profiles.md said the ceiling was 8.5x kernel_s's default; it is 5e-5 / 7.84e-6 = 6.4x."""
    from pathlib import Path

    from specsim.hardware.stepmodel import EngineTerms

    ratio = FIT_BOUNDS["kernel_s"][1] / EngineTerms().kernel_s
    text = " ".join((Path(__file__).parents[1] / "docs" / "profiles.md").read_text().split())
    default = f"{EngineTerms().kernel_s:.3g}".replace("e-0", "e-")                      # 7.84e-6
    assert f"ceiling (5e-5 s) is {ratio:.1f}x its default ({default} s)" in text
