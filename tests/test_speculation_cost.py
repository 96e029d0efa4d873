"""Speculation's own overhead (issue 20): named step terms, the zero-draft setting, the engine's charge."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from helpers import make_trace
from specsim.errors import SpecsimInputError
from specsim.hardware.profile import StepTimeProfile, load_profile, save_profile
from specsim.hardware.stepmodel import EngineTerms, step_model
from specsim.scenario import load_scenario
from specsim.simulation import simulate

FIXED, PER_REQUEST = 1e-3, 1e-4


class _Propose:
    """Proposes ``k`` drafts before drafting and verifies all of them (k = 0: speculation on, no drafts)."""

    name = "propose-k"
    fits_zos = True

    def __init__(self, k: int):
        self.k = k

    def proposal_length(self, view):
        return self.k

    def __call__(self, view):
        return np.full(view.num_requests, view.gamma)


def _flat(pays: bool) -> StepTimeProfile:
    return replace(StepTimeProfile.flat(0.02, 4096), spec_step_s=FIXED, spec_request_s=PER_REQUEST,
                   spec_zero_draft_pays=pays)


def _decode_steps(policy, profile, outputs=(30, 30), overrides=()):
    """Steps of a run whose prompts are prefilled elsewhere, so every step decodes only (no drafter cost)."""
    n = len(outputs)
    trace = make_trace([0.0] * n, [50] * n, list(outputs))
    sc = load_scenario(overrides=["prefill.time_per_token_s=0.001", f"prefill.num_instances={n}",
                                  "drafter.base_fraction=0", "drafter.per_draft_fraction=0", *overrides])
    res = simulate(trace, policy, sc, profile=profile, gamma=None if policy == "none" else 3, record_step_log=True)
    s = res.steps
    return s[s["num_decode"] > 0]


def test_speculation_s_by_hand():
    p = _flat(False)
    assert p.speculation_s(8, 24) == pytest.approx(FIXED + 8 * PER_REQUEST)
    assert p.speculation_s(8, 0) == 0.0                                  # speculation switched off: plain path
    assert _flat(True).speculation_s(8, 0) == pytest.approx(FIXED + 8 * PER_REQUEST)   # vLLM dynamic K = 0
    assert p.speculation_s(0, 0) == 0.0 and _flat(True).speculation_s(0, 5) == 0.0     # nothing decodes
    assert StepTimeProfile.flat(0.02).speculation_s(8, 24) == 0.0         # a plain table charges none


def test_zero_draft_step_costs_a_plain_step_plus_exactly_the_terms_where_the_engine_pays_them():
    plain = _decode_steps("none", _flat(True))
    pays = _decode_steps(_Propose(0), _flat(True))
    off = _decode_steps(_Propose(0), _flat(False))
    assert len(plain) == len(pays) == len(off) > 10
    extra = FIXED + PER_REQUEST * pays["num_decode"].to_numpy()
    np.testing.assert_allclose(pays["duration_s"].to_numpy(), plain["duration_s"].to_numpy() + extra, rtol=0,
                               atol=1e-12)
    np.testing.assert_allclose(off["duration_s"].to_numpy(), plain["duration_s"].to_numpy(), rtol=0, atol=1e-12)


def test_the_scenario_sets_whether_a_zero_draft_step_pays():
    # engine.spec_zero_draft_pays overrides the profile's own, either way; unset keeps it
    plain = _decode_steps("none", _flat(True))["duration_s"].to_numpy()
    on = _decode_steps(_Propose(0), _flat(False), overrides=("engine.spec_zero_draft_pays=true",))
    off = _decode_steps(_Propose(0), _flat(True), overrides=("engine.spec_zero_draft_pays=false",))
    np.testing.assert_allclose(on["duration_s"].to_numpy(),
                               plain + FIXED + PER_REQUEST * on["num_decode"].to_numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(off["duration_s"].to_numpy(), plain, rtol=0, atol=1e-12)
    from specsim.run_config import speculation_terms
    kept = _flat(True)
    assert speculation_terms(load_scenario(), kept) is kept
    with pytest.raises(SpecsimInputError, match="engine.spec_zero_draft_pays"):
        load_scenario(overrides=['engine.spec_zero_draft_pays="yes"'])


def test_a_step_that_proposes_drafts_pays_the_terms_either_way():
    for pays in (True, False):
        steps = _decode_steps(_Propose(2), _flat(pays))
        expect = 0.02 + FIXED + PER_REQUEST * steps["num_decode"].to_numpy()
        np.testing.assert_allclose(steps["duration_s"].to_numpy(), expect, rtol=0, atol=1e-12)
        # the step frame names the terms' share (the drafter is free here)
        np.testing.assert_allclose(steps["speculation_s"].to_numpy(), expect - 0.02, rtol=0, atol=1e-12)
        assert (steps["draft_s"] == 0).all()


def test_step_model_profiles_carry_the_sourced_defaults_and_round_trip(tmp_path):
    terms = EngineTerms()
    assert (terms.spec_step_s, terms.spec_request_s, terms.spec_zero_draft_pays) == (7.75e-4, 8.4e-5, False)
    # the defaults are the two-point line through vLLM issue 49548's K = 0 measurement (2 and 189 users)
    for users, plain_ms, k0_ms in ((2, 14.374, 15.317), (189, 77.164, 93.820)):
        assert terms.spec_step_s + users * terms.spec_request_s == pytest.approx((k0_ms - plain_ms) / 1e3, rel=0.01)
    prof = step_model("qwen3-8b", "h100", terms=replace(terms, spec_zero_draft_pays=True)).profile(256)
    assert (prof.spec_step_s, prof.spec_request_s, prof.spec_zero_draft_pays) == (7.75e-4, 8.4e-5, True)
    path = tmp_path / "p.json"
    save_profile(prof, path)
    back = load_profile(path)
    assert (back.spec_step_s, back.spec_request_s, back.spec_zero_draft_pays) == (7.75e-4, 8.4e-5, True)


def test_a_table_that_states_no_terms_is_charged_the_sourced_defaults(tmp_path):
    """A plain table file without the keys (as the bundled Vidur-derived ones) pays EngineTerms' sourced defaults
    on every drafting step; the scenario's engine keys override them (0: the earlier plain-table behaviour); a
    file stating 0, a closed-form flat profile and a step-model profile keep their own terms."""
    from specsim.hardware.profile import resolve_profile
    from specsim.run_config import speculation_terms
    d = EngineTerms()
    table = tmp_path / "table.json"
    table.write_text('{"batch_tokens": [1, 4096], "step_time_s": [0.02, 0.02]}')
    steps = _decode_steps(_Propose(2), load_profile(table))
    expect = 0.02 + d.spec_step_s + d.spec_request_s * steps["num_decode"].to_numpy()
    np.testing.assert_allclose(steps["duration_s"].to_numpy(), expect, rtol=0, atol=1e-12)
    sc = load_scenario()
    got = speculation_terms(sc, resolve_profile(sc.profile.name))
    assert (got.spec_step_s, got.spec_request_s) == (7.75e-4, 8.4e-5)
    assert got.metadata["speculation_terms"].startswith("vLLM issue 49548")
    off = load_scenario(overrides=["engine.spec_step_s=0", "engine.spec_request_s=0"])
    assert speculation_terms(off, load_profile(table)).speculation_s(8, 24) == 0.0
    half = load_scenario(overrides=["engine.spec_step_s=0.002"])          # one key set: the other from the default
    assert (speculation_terms(half, load_profile(table)).spec_step_s,
            speculation_terms(half, load_profile(table)).spec_request_s) == (0.002, 8.4e-5)
    zero = tmp_path / "zero.json"
    zero.write_text('{"batch_tokens": [1, 4096], "step_time_s": [0.02, 0.02], "spec_step_s": 0}')
    for prof in (load_profile(zero), StepTimeProfile.flat(0.02)):
        assert speculation_terms(sc, prof) is prof and prof.speculation_s(8, 24) == 0.0
    model = step_model("qwen3-8b", "h100", terms=replace(d, spec_step_s=5e-4)).profile(256)
    assert speculation_terms(sc, model) is model
    both = speculation_terms(half, model)
    assert (both.spec_step_s, both.spec_request_s) == (0.002, 8.4e-5)
    with pytest.raises(SpecsimInputError, match="engine.spec_step_s"):
        load_scenario(overrides=["engine.spec_step_s=0.775"])          # milliseconds given for seconds


def test_dspark_prices_its_step_with_speculations_overhead():
    """R = 1, gamma = 1, T(1) = 10 ms, T(2) = 12 ms: Theta rises with the draft iff (1 + a) / (12 + c) > 1 / (10 + c),
    i.e. a > 2 / (10 + c) ms. At a = 0.15 DSpark admits the draft when the step pays c = 10 ms of speculation's own
    overhead (threshold 0.1) and not without it (threshold 0.2); both early-stop rules, and the view's SPS."""
    from specsim.policies import SchedulingView, make_policy
    table = StepTimeProfile(np.array([1, 2]), np.array([0.010, 0.012]), metadata={"speculation_terms": "none"})
    one = np.array([[0.15]])
    z = np.zeros(1, np.int64)

    def view(prof):
        return SchedulingView(step=0, now_s=0.0, gamma=1, request_ids=z, domains=np.array(["chat"], dtype=object),
                              conf_raw=one, conf=one, num_generated=z + 1, prompt_tokens=z + 10, kv_tokens=0.0,
                              hist_drafts_verified=z, hist_drafts_accepted=z, last_verify_len=z - 1,
                              last_accepted=z - 1, profile=prof)
    paid = replace(table, spec_step_s=0.010)
    assert view(paid).speculation_s == 0.010 and view(table).speculation_s == 0.0
    assert view(paid).drafting_sps(2) == pytest.approx(1 / 0.022) and view(paid).sps(2) == pytest.approx(1 / 0.012)
    for rule in ("hull", "paper"):
        pol = make_policy("dspark", early_stop=rule)
        assert list(pol(view(table))) == [0] and list(pol(view(paid))) == [1], rule


def test_bad_speculation_terms_are_named(tmp_path):
    with pytest.raises(SpecsimInputError, match="spec_request_s"):
        EngineTerms(spec_request_s=-1.0)
    with pytest.raises(SpecsimInputError, match="spec_zero_draft_pays"):
        EngineTerms(spec_zero_draft_pays="yes")
    ms = tmp_path / "ms.json"                 # a fresh user's 0.775 (milliseconds) in a profile file
    ms.write_text('{"batch_tokens": [1, 8], "step_time_s": [0.01, 0.02], "spec_step_s": 0.775}')
    with pytest.raises(SpecsimInputError, match=r"spec_step_s.*seconds, not ms"):
        load_profile(ms)
    path = tmp_path / "bad.json"
    path.write_text('{"batch_tokens": [1, 8], "step_time_s": [0.01, 0.02], "spec_zero_draft_pays": 1}')
    with pytest.raises(SpecsimInputError, match="spec_zero_draft_pays"):
        load_profile(path)


# ------------------------------------------------------------------ fitting the speculation terms
from pathlib import Path  # noqa: E402

from specsim.hardware.drafter import shaped_drafter_cost  # noqa: E402
from specsim.hardware.spec_fit import (SpecObservation, fit_speculation, predict_speculative,  # noqa: E402
                                       spec_observations_from_vllm_results)

POINTS = Path(__file__).parent / "data" / "step_points"


def _spec_points(sm, requests, k=3, tau=2.5, context=1200.0):
    d = shaped_drafter_cost("eagle3", sm)
    pts = [SpecObservation(r, r * (1 + k), context, 1.0, k, tau, "spec.json", None, f"R={r}") for r in requests]
    t = predict_speculative(sm, d, pts)
    return [replace(p, step_time_s=float(x)) for p, x in zip(pts, t)]


def test_fit_recovers_the_speculation_terms_and_only_them():
    base = step_model("qwen3-8b", "h100").with_terms(kernel_s=4e-6, per_request_step_s=3e-5)
    truth = base.with_terms(spec_step_s=1.5e-3, spec_request_s=5e-5)
    obs = _spec_points(truth, [2, 16, 64])
    rep = fit_speculation(base, obs[:2], "eagle3", holdout=obs[2:])
    assert rep.params == pytest.approx({"spec_step_s": 1.5e-3, "spec_request_s": 5e-5}, rel=1e-4)
    assert rep.model.terms.kernel_s == 4e-6 and rep.model.terms.per_request_step_s == 3e-5   # held
    assert rep.median_abs_error(True) < 1e-5 and [p.holdout for p in rep.points] == [False, False, True]
    # a single low-load point fits the fixed part only
    one = fit_speculation(base.with_terms(spec_request_s=5e-5), obs[:1], "eagle3")
    assert set(one.params) == {"spec_step_s"} and one.params["spec_step_s"] == pytest.approx(1.5e-3, rel=1e-4)
    with pytest.raises(SpecsimInputError, match="spec-params"):
        fit_speculation(base, obs[:1], "eagle3", params=("spec_step_s", "spec_request_s"))
    with pytest.raises(SpecsimInputError, match="--params"):          # no-speculation points cannot fit them
        from specsim.hardware.profile_fit import fit_step_model
        fit_step_model(base, obs, ("spec_step_s",))


def test_a_speculation_term_at_its_zero_bound_gets_the_bound_note_not_a_ratio_warning():
    """Points that would take a negative per-request speculation cost fit spec_request_s to its 0 bound: that was printed as
    3.955e-24 and warned '4.71e-20x its default ... an order of magnitude away', with the advice 'leave it out of
    --params', which does not take spec terms. Now: shown as 0 (its bound), one at-bound line that names what
    applies to --spec fits, no ratio warning; --params spec_step_s says where the spec terms are fitted."""
    base = step_model("qwen3-8b", "h100").with_terms(kernel_s=4e-6, per_request_step_s=3e-5)
    obs = _spec_points(base.with_terms(spec_step_s=1.5e-3, spec_request_s=0.0), [2, 16])
    obs[1] = replace(obs[1], step_time_s=0.9 * obs[1].step_time_s)     # a negative per-request cost would fit
    rep = fit_speculation(base, obs, "eagle3")
    assert rep.at_bounds == ["spec_request_s"] and "spec_request_s" not in rep.far_from_default
    assert rep.shown("spec_request_s", " s") == "0 s (its bound)"
    assert rep.shown("spec_step_s", " s") == f"{rep.params['spec_step_s']:.4g} s"
    (line,) = [w for w in rep.warnings() if "spec_request_s" in w]
    assert line.startswith("spec_request_s ended on its bound 0: the speculative points show no such cost")
    assert "--params" not in line and "--acceptance-length" in line
    from specsim.hardware.profile_fit import fit_step_model
    with pytest.raises(SpecsimInputError) as e:
        fit_step_model(base, _spec_points(base, [1, 2, 3]), ("spec_step_s",))
    assert "spec_step_s" not in e.value.expected.split(";")[0] and "given with --spec" in e.value.expected


def test_vllm_speculative_result_read_by_hand(tmp_path):
    # tests/data/step_points/vllm_c16_spec.json: TPOT 12.9 ms, tau 2.836, 86610 draft tokens in 28870 drafts
    (o,) = spec_observations_from_vllm_results(POINTS / "vllm_c16_spec.json")
    assert o.num_spec_tokens == 3 and o.acceptance_length == 2.836
    assert o.step_time_s == pytest.approx(12.9e-3 * 2.836)
    r = (81920 - 320) * 12.9e-3 / 70.0
    assert o.num_requests == pytest.approx(r)
    assert o.batch_tokens == pytest.approx(r * 4 + 327680 * 12.9e-3 * 2.836 / 70.0)
    assert o.context_tokens == pytest.approx(1024 + 256 / 2)
    (given,) = spec_observations_from_vllm_results(POINTS / "vllm_c16_spec.json", acceptance_length=2.0,
                                                   num_spec_tokens=3)
    assert given.num_spec_tokens == 3 and given.step_time_s == pytest.approx(12.9e-3 * 2.0)
    assert given.file_acceptance_length == 2.836                  # replaced: profile fit says so
    with pytest.raises(SpecsimInputError, match="field '--num-spec-tokens': expected the file's K = 3"):
        spec_observations_from_vllm_results(POINTS / "vllm_c16_spec.json", num_spec_tokens=1)   # was taken silently
    import json

    doc = {k: v for k, v in json.loads((POINTS / "vllm_c16_spec.json").read_text()).items()
           if k not in ("spec_decode_num_drafts", "spec_decode_draft_tokens")}
    (tmp_path / "nocounts.json").write_text(json.dumps(doc))
    (given,) = spec_observations_from_vllm_results(tmp_path / "nocounts.json", num_spec_tokens=2)
    assert given.num_spec_tokens == 2                              # no counts in the file: the option gives K
    with pytest.raises(SpecsimInputError, match="--acceptance-length"):
        spec_observations_from_vllm_results(tmp_path / "nocounts.json", acceptance_length=3.5, num_spec_tokens=2)
    with pytest.raises(SpecsimInputError, match="spec_decode_acceptance_length"):
        spec_observations_from_vllm_results(POINTS / "vllm_c16.json")    # no speculation in it, none given



def test_vllm_speculative_result_with_a_negative_time_is_refused(tmp_path):
    """A negative mean ITL or TPOT is a broken file: refused naming the field (it was skipped silently)."""
    import json

    obj = json.loads((POINTS / "vllm_c16_spec.json").read_text())
    for key in ("mean_itl_ms", "mean_tpot_ms"):
        bad = tmp_path / f"{key}.json"
        bad.write_text(json.dumps(dict(obj, **{key: -3.0})))
        with pytest.raises(SpecsimInputError) as ei:
            spec_observations_from_vllm_results(bad)
        assert ei.value.field == key and "-3" in str(ei.value)


def test_profile_fit_cli_fits_speculation_or_says_it_used_the_defaults(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    run = CliRunner()
    base = ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(POINTS / "vllm_c16.json")]
    r = run.invoke(app, [*base, "--params", "kernel_s", "--out", str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    assert "speculation terms: the defaults spec_step_s = 0.000775 s" in " ".join(r.output.split())
    assert "per-request and the per-verified-token cost together" in " ".join(r.output.split())
    assert "fitted on speculative points (--spec; per_request_step_s is held there)" in " ".join(r.output.split())
    assert load_profile(tmp_path / "a.json").spec_step_s == 7.75e-4
    spec = ["--params", "kernel_s", "--spec", str(POINTS / "vllm_c16_spec.json")]
    r = run.invoke(app, [*base, *spec, "--out", str(tmp_path / "c.json")])       # which drafter ran: required
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == "--drafter"
    assert "fitted:" not in r.output                                # checked before the plain fit, not after it
    for extra, field, got in (([*spec, "--drafter", "medusa"], "--drafter", "'medusa'"),
                              (["--drafter", "eagle3"], "--drafter", "no --spec"),
                              (["--num-spec-tokens", "3"], "--num-spec-tokens", "no --spec")):
        r = run.invoke(app, [*base, "--params", "kernel_s", *extra, "--out", str(tmp_path / "d.json")])
        assert isinstance(r.exception, SpecsimInputError) and (r.exception.field, r.exception.got) == (field, got)
        assert "fitted:" not in r.output and not (tmp_path / "d.json").exists()
    r = run.invoke(app, [*base, *spec, "--drafter", "medusa"])
    assert "ngram, suffix" in r.exception.expected                 # every drafter the fit takes, lookup ones too
    r = run.invoke(app, [*base, *spec, "--drafter", "eagle3", "--out", str(tmp_path / "b.json")],
                   env={"COLUMNS": "200"})                       # the table read by rows: unwrapped at any terminal
    assert r.exit_code == 0, r.output
    # the speculative residual rows sit under a header of their own (they had none)
    rows = r.stdout.split("fitted speculation terms")[1].splitlines()
    head = next(i for i, row in enumerate(rows) if row.startswith("point "))
    assert rows[head].split() == ["point", "R", "B", "measured_ms", "model_ms", "error", "set"]
    assert rows[head + 2].split()[:2] == ["concurrency=16", "(speculative)"] and rows[head + 2].split()[-1] == "fitted"
    assert "TTFT" not in "".join(rows[:head])                       # the speculative table, not the TTFT one
    # with --spec the note (whose advice is --spec) is not printed: the spec fit holds per_request_step_s
    assert "per-verified-token" not in r.output and "spec_request_s" in r.output
    line = r.output.split("fitted speculation terms (eagle3 drafter): spec_step_s = ")[1].splitlines()[0]
    assert "spec_request_s = 8.4e-05 s (held)" in line           # the term one point cannot fit, said held
    prof = load_profile(tmp_path / "b.json")
    fit = prof.metadata["fit"]["speculation"]
    assert fit["drafter"] == "eagle3"
    assert fit["params"]["spec_step_s"] == prof.spec_step_s and len(fit["points"]) == 1
    assert abs(fit["points"][0]["rel_error"]) < 1e-3 or fit["at_bounds"] == ["spec_step_s"]


def test_a_result_with_median_itl_only_is_read(tmp_path):
    # SGLang's bench_serving can give medians only: the step falls back to median ITL, then median TPOT
    import json

    from specsim.hardware.step_points import observations_from_vllm_results

    doc = json.loads((POINTS / "vllm_c16.json").read_text())
    for key in ("mean_itl_ms", "mean_tpot_ms"):
        doc.pop(key, None)
    doc["median_itl_ms"] = 21.5
    path = tmp_path / "sglang.json"
    path.write_text(json.dumps(doc))
    (o,) = observations_from_vllm_results(path)
    assert o.step_time_s == pytest.approx(0.0215)


def test_a_detailed_speculative_result_is_read_token_weighted(tmp_path):
    # --save-detailed lists: two requests of 101 and 11 tokens whose streams took 1.0 s and 0.2 s: the decode time
    # per token is 1.2 / (100 + 10) s, not the mean of their TPOTs (10 and 20 ms: 15 ms), which over-weights the
    # short, low-acceptance request; the step is that times tau
    import json

    doc = json.loads((POINTS / "vllm_c16_spec.json").read_text())
    doc.update(itls=[[0.25, 0.25, 0.5], [0.1, 0.1]], output_lens=[101, 11], ttfts=[0.05, 0.05])
    path = tmp_path / "detailed.json"
    path.write_text(json.dumps(doc))
    (o,) = spec_observations_from_vllm_results(path)
    assert o.step_time_s == pytest.approx(1.2 / 110 * 2.836, rel=1e-12)
    doc.update(output_lens=[101])                                           # lists that disagree: the mean TPOT
    path.write_text(json.dumps(doc))
    assert spec_observations_from_vllm_results(path)[0].step_time_s == pytest.approx(12.9e-3 * 2.836)


def test_detailed_gaps_in_milliseconds_fall_back_to_the_mean_tpot(tmp_path):
    # itls are seconds in vllm bench serve's detailed results; lists a factor 1000 off the mean TPOT are not used
    import json

    doc = json.loads((POINTS / "vllm_c16_spec.json").read_text())
    doc.update(itls=[[12.9 * 2.836] * 100] * 2, output_lens=[101, 101])            # milliseconds
    path = tmp_path / "ms.json"
    path.write_text(json.dumps(doc))
    assert spec_observations_from_vllm_results(path)[0].step_time_s == pytest.approx(12.9e-3 * 2.836)


def test_an_sglang_speculative_result_with_accept_length_and_medians_only_is_read(tmp_path):
    """SGLang's bench_serving writes accept_length (its avg_spec_accept_length: accepted drafts plus the bonus token
    per verify step, vLLM's acceptance length) and may give medians only: the --spec reader read neither (a fresh
    user was told 'spec_decode_acceptance_length: no such key', then 'mean_itl_ms'). Median TPOT 3.6 ms per token
    x tau 2.6 = a 9.36 ms step; with a median ITL only, that ITL is the step."""
    import json

    doc = json.loads((POINTS / "vllm_c16_spec.json").read_text())
    for key in [k for k in doc if k.startswith("spec_decode_") or k.startswith("mean_")]:
        del doc[key]
    doc.update(backend="sglang", accept_length=2.6, median_tpot_ms=3.6, median_itl_ms=9.0)
    path = tmp_path / "sglang_spec.json"
    path.write_text(json.dumps(doc))
    (o,) = spec_observations_from_vllm_results(path, num_spec_tokens=3)
    assert (o.acceptance_length, o.num_spec_tokens) == (2.6, 3)
    assert o.step_time_s == pytest.approx(3.6e-3 * 2.6, rel=1e-12)
    del doc["median_tpot_ms"]
    path.write_text(json.dumps(doc))
    assert spec_observations_from_vllm_results(path, num_spec_tokens=3)[0].step_time_s == pytest.approx(9.0e-3)
    doc["accept_length"] = 4.5                                              # over K + 1 = 4: named as the file's key
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError, match="field 'accept_length': expected a value in \\(1, K \\+ 1 = 4\\]"):
        spec_observations_from_vllm_results(path, num_spec_tokens=3)
    del doc["median_itl_ms"]
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError, match="field 'median_tpot_ms': expected median_tpot_ms or median_itl_ms"):
        spec_observations_from_vllm_results(path, acceptance_length=2.6, num_spec_tokens=3)


def _first_token(policy, prompt: int, chunk: int = 512, *extra: str) -> float:
    """TTFT of one request prefilled on its replica (flat 20 ms steps, the drafter 2 ms at R = 1: 10% of a step)."""
    sc = load_scenario(overrides=["prefill.mode=colocated", f"prefill.chunk_tokens={chunk}", "engine.host_overhead_s=0",
                                  "engine.request_overhead_s=0", "drafter.base_fraction=0.1",
                                  "drafter.per_draft_fraction=0", *extra])
    res = simulate(make_trace([0.0], [prompt], [20]), policy, sc, profile=_flat(False),
                   gamma=None if policy == "none" else 2)
    return float(res.requests["ttft_s"][0])


def test_a_prefill_step_drafts_for_the_requests_it_prefills():
    """vLLM's proposer runs over every request scheduled in the step (its padded drafter batch): the step that
    ends a prefill proposes the request's first drafts, one with a middle chunk drafts and throws them away, and
    either pays the drafter (R = 1) and speculation's own terms before the first token is out."""
    assert _first_token("none", 100) == pytest.approx(0.020)
    assert _first_token(_Propose(2), 100) == pytest.approx(0.020 + 0.002 + FIXED + PER_REQUEST)
    assert _first_token(_Propose(2), 900) == pytest.approx(0.040 + 2 * (0.002 + FIXED + PER_REQUEST))  # 2 chunks
    # an engine that drafts for running requests only (specsim's torch replay loop): the prefill step is plain
    assert _first_token(_Propose(2), 100, 512, "engine.first_drafts=decode-step") == pytest.approx(0.020)
    with pytest.raises(SpecsimInputError, match="first_drafts"):
        load_scenario(overrides=["engine.first_drafts=prefill"])


def test_a_step_drafts_for_its_decoders_and_the_requests_it_prefills():
    """R = 4 decoders at gamma 3 beside a 512-token chunk: one drafter call over 5 requests, speculation's terms for
    5; where the decoders draft nothing (their outputs end) the prefill still drafts at the policy's proposal;
    with engine.first_drafts = decode-step only the decoders are drafted for."""
    from types import SimpleNamespace

    from specsim.engine.step_runner import StepRunner

    calls = []

    def draft_time_s(n, g, profile, kv=0.0):
        calls.append((n, g))
        return 0.001 * n

    def runner(prefill_too: bool):
        slots = SimpleNamespace(prompt_tokens=np.array([3000]), num_generated=np.array([0]),
                                prefill_left=np.array([3000]))
        config = SimpleNamespace(gamma=3, emission_overhead_s=0.0, first_drafts_in_prefill=prefill_too)
        return SimpleNamespace(slots=slots, profile=_flat(False), config=config, host_overhead_s=0.0,
                               drafter_cost=SimpleNamespace(draft_time_s=draft_time_s))

    def plan(gamma):
        return SimpleNamespace(batch_tokens=4 * (1 + gamma) + 512, chunk=np.array([512]), prefill=np.array([0]),
                               batch=SimpleNamespace(decode=np.arange(4), kv_tokens=0.0, gamma=gamma), num_drafting=4,
                               verified_drafts=4 * gamma, proposal_gamma=3, num_proposing=-1)

    assert StepRunner.step_time_s(runner(True), plan(3)) == pytest.approx(0.02 + 0.005 + FIXED + 5 * PER_REQUEST)
    assert StepRunner.step_time_s(runner(True), plan(0)) == pytest.approx(0.02 + 0.001 + FIXED + 5 * PER_REQUEST)
    assert StepRunner.step_time_s(runner(False), plan(3)) == pytest.approx(0.02 + 0.004 + FIXED + 4 * PER_REQUEST)
    assert calls == [(5, 3), (1, 3), (4, 3)]


def test_a_prefill_only_step_drafts_at_the_policys_proposal():
    """A step with no decoding request asks ``proposal_length`` (a view of 0 requests) for the drafts of the
    request it prefills: vllm-dsd's row for the smallest batch, not the configured gamma. Proposing 0 runs the
    prefill step plain (or pays speculation's terms where a zero-draft step pays them)."""
    assert _first_token(_Propose(0), 100) == pytest.approx(0.020)
    sc = load_scenario(overrides=["prefill.mode=colocated", "prefill.chunk_tokens=512", "engine.host_overhead_s=0",
                                  "engine.request_overhead_s=0", "drafter.base_fraction=0",
                                  "drafter.per_draft_fraction=0.05"])
    res = simulate(make_trace([0.0], [100], [20]), "vllm-dsd", sc, profile=_flat(False), gamma=4,
                   num_speculative_tokens_per_batch_size=[[1, 1024, 1]])
    assert float(res.requests["ttft_s"][0]) == pytest.approx(0.020 * (1 + 0.05 * 1) + FIXED + PER_REQUEST)


def test_a_step_that_drafts_only_for_its_prefill_is_not_counted_undrafted():
    """A's last token (nothing useful to draft for it) shares a step with B's prefill, which is drafted for:
    that step drafted, so only B's own last step counts as undrafted."""
    sc = load_scenario(overrides=["prefill.mode=colocated", "prefill.chunk_tokens=512", "engine.host_overhead_s=0",
                                  "engine.request_overhead_s=0", "drafter.base_fraction=0.1",
                                  "drafter.per_draft_fraction=0"])
    res = simulate(make_trace([0.0, 0.001], [100, 100], [2, 2]), _Propose(2), sc, profile=_flat(False), gamma=2)
    assert res.steps["prefill_tokens"].tolist() == [100, 100, 0]
    assert res.steps["num_decode"].tolist() == [0, 1, 1]
    assert res.summary["undrafted_steps"] == 1
    # the shared step pays the drafter for B (R = 1) and speculation's terms for both requests
    assert res.steps["duration_s"][1] == pytest.approx(0.020 + 0.002 + FIXED + 2 * PER_REQUEST)
