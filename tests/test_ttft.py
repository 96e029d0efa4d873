"""The TTFT term (issue 20): a disaggregated request's first token comes from its decode replica's first step
(vLLM's KV-connector path recomputes the last prompt token there and samples token 1; docs/memory.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import make_trace
from specsim.errors import SpecsimInputError
from specsim.hardware.profile import load_profile
from specsim.hardware.step_points import StepObservation, observations_from_vllm_results
from specsim.hardware.ttft_fit import fit_ttft, predict_ttft
from specsim.scenario import load_scenario
from specsim.simulation import simulate

DATA = Path(__file__).parent / "data"
POINTS = DATA / "step_points"


def _flat(*extra: str):
    """Flat 20 ms steps, prefill 2^-10 s per prompt token, no overheads, no drafter cost; the first token from
    the decode replica's first step."""
    return load_scenario(overrides=[f"profile.name={DATA / 'flat20ms_profile.json'}", "engine.host_overhead_s=0",
                                    "prefill.first_token=decode-step",
                                    "engine.request_overhead_s=0", "drafter.base_fraction=0",
                                    "drafter.per_draft_fraction=0", "prefill.time_per_token_s=0.0009765625",
                                    *extra])


def test_disaggregated_first_token_arrives_with_the_decode_replicas_first_step():
    # prompt 64: prefill 64 x 2^-10 = 62.5 ms; the decode replica's first step (20 ms) emits token 1 at 82.5 ms,
    # then 4 decode steps of 20 ms: done at 162.5 ms; TPOT = (162.5 - 82.5) / 4 = 20 ms
    r = simulate(make_trace([0.0], [64], [5]), "none", _flat(), seed=0).requests
    assert r["prefill_s"][0] == pytest.approx(0.0625)
    assert r["ttft_s"][0] == pytest.approx(0.0825)
    assert r["e2el_s"][0] == pytest.approx(0.1625)
    assert r["tpot_s"][0] == pytest.approx(0.020)


def test_the_default_rule_stamps_the_first_token_at_the_end_of_prefill():
    sc = load_scenario(overrides=[f"profile.name={DATA / 'flat20ms_profile.json'}", "engine.host_overhead_s=0",
                                  "engine.request_overhead_s=0", "prefill.time_per_token_s=0.0009765625"])
    r = simulate(make_trace([0.0], [64], [5]), "none", sc, seed=0).requests
    assert r["ttft_s"][0] == pytest.approx(0.0625) and r["e2el_s"][0] == pytest.approx(0.1425)   # + 4 steps


def test_a_bad_first_token_rule_is_named():
    with pytest.raises(SpecsimInputError, match="first_token"):
        load_scenario(overrides=["prefill.first_token=decode"])


def test_a_one_token_request_also_waits_for_its_decode_step():
    r = simulate(make_trace([0.0], [64], [1]), "none", _flat(), seed=0).requests
    assert r["ttft_s"][0] == pytest.approx(0.0825) and r["e2el_s"][0] == pytest.approx(0.0825)


def test_the_wait_for_a_decode_slot_counts_in_ttft_not_in_tpot():
    # one decode slot: request 1 (prefilled on the second instance by 62.5 ms) waits while request 0 decodes
    # (steps end 82.5 .. 162.5 ms); it is admitted at 162.5 ms and emits its first token at 182.5 ms
    sc = _flat("prefill.num_instances=2", "cluster.max_num_seqs=1")
    r = simulate(make_trace([0.0, 0.0], [64, 64], [5, 3]), "none", sc, seed=0).requests
    assert list(r["ttft_s"]) == pytest.approx([0.0825, 0.1825])
    assert list(r["tpot_s"]) == pytest.approx([0.020, 0.020])


def test_colocated_ttft_still_ends_with_the_last_prefill_chunk():
    # the replica prefills the 64-token prompt in one 20 ms step, which emits token 1
    r = simulate(make_trace([0.0], [64], [5]), "none", _flat("prefill.mode=colocated"), seed=0).requests
    assert r["ttft_s"][0] == pytest.approx(0.020) and r["e2el_s"][0] == pytest.approx(0.100)


# --------------------------------------------------------------------------------------------- profile fit
class _Flat20:
    """The flat 20 ms profile as a step model: every step 20 ms whatever its tokens, no prefill attention."""

    def step_time(self, batch_tokens, num_requests=None, kv_tokens=0.0):
        return np.full(np.shape(batch_tokens), 0.020)

    def prefill_attention_s(self, chunk_tokens, context_tokens):
        return 0.0


def _point(r, prompt, ttft_s, label="p"):
    return StepObservation(r, r, float(prompt), 0.02, "x.json", 1, "tpot", label, ttft_s=ttft_s,
                           prompt_tokens=float(prompt))


def test_ttft_prediction_by_hand_on_the_flat_profile():
    # R = 4: half of the step in flight (10 ms) + the 3000-token prompt in chunks of 2048 and 952 (2 x 20 ms)
    # R = 0.5: a step in flight half of the time: 0.5 x 10 ms + one chunk of 100 tokens (20 ms)
    pts = [_point(4, 3000, 0.055), _point(0.5, 100, 0.033)]
    np.testing.assert_allclose(predict_ttft(_Flat20(), pts, chunk_tokens=2048), [0.050, 0.025])
    np.testing.assert_allclose(predict_ttft(_Flat20(), pts, chunk_tokens=None, request_overhead_s=0.001),
                               [0.031, 0.026])                      # the whole prompt in one step


def test_ttft_fit_finds_the_request_overhead_and_reports_both_points():
    # fitted on the lowest load only (R = 0.5: 8 ms over the model), the loaded point predicted (a fresh user's
    # queued N = 128 point set a 33.75 s overhead when every point was fitted)
    pts = [_point(4, 3000, 0.055, "a"), _point(0.5, 100, 0.033, "b")]
    rep = fit_ttft(_Flat20(), pts, chunk_tokens=2048, holdout=[_point(2, 100, 0.040, "c")])
    assert rep.request_overhead_s == pytest.approx(0.008)
    got = {p.label: (p.predicted_s, p.rel_error, p.holdout) for p in rep.points}
    assert got["a"] == pytest.approx((0.058, 0.058 / 0.055 - 1, True))
    assert got["b"] == pytest.approx((0.033, 0.0, False))
    assert got["c"] == pytest.approx((0.038, 0.038 / 0.040 - 1, True))   # 8 + 10 + 20 ms
    assert rep.median_abs_error(False) == pytest.approx(0.0)
    # two points of the lowest load: the mean of theirs
    two = fit_ttft(_Flat20(), [_point(0.5, 100, 0.031, "d"), _point(0.5, 100, 0.033, "e"), pts[0]], 2048)
    assert two.request_overhead_s == pytest.approx(0.007)
    # an overhead below 0 would be unphysical: clipped
    assert fit_ttft(_Flat20(), [_point(4, 3000, 0.045)], 2048).request_overhead_s == 0.0


def test_vllm_result_ttft_and_prompt_are_read():
    (o,) = observations_from_vllm_results(POINTS / "vllm_c16.json")
    assert o.ttft_s == pytest.approx(0.062) and o.prompt_tokens == pytest.approx(327680 / 320)


def test_profile_fit_cli_reports_ttft_residuals(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    r = CliRunner().invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", "--params", "kernel_s",
                                 str(POINTS / "vllm_c16.json"), "--out", str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "TTFT: fitted request_overhead_s = " in flat and "median |TTFT error| on fitted points" in flat
    fit = load_profile(tmp_path / "a.json").metadata["fit"]
    (tp,) = fit["ttft"]["points"]
    assert tp["measured_ms"] == pytest.approx(62.0)
    assert abs(tp["rel_error"]) < 1e-6 or fit["ttft"]["request_overhead_s"] == 0.0   # one point: met exactly
    assert len(fit["points"]) == 1                                   # the TPOT residual is still there


def test_profile_fit_warns_when_the_ttft_model_misses_a_point_by_more_than_a_fifth(tmp_path):
    """Two points of the same load whose TTFTs differ 5x (one queued in the server): the one fitted overhead
    misses both by far more than 20%, and the fit says so and why (a fresh user's report: a TTFT fit off
    several-fold printed no warning); a single point met exactly gets none."""
    import json

    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    base = json.loads((POINTS / "vllm_c16.json").read_text())
    slow = {**base, **{k: 5 * v for k, v in base.items() if k.endswith("_ttft_ms") and isinstance(v, (int, float))}}
    (tmp_path / "fast.json").write_text(json.dumps(base))
    (tmp_path / "slow.json").write_text(json.dumps(slow))
    args = ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", "--params", "kernel_s"]
    r = CliRunner().invoke(app, [*args, str(tmp_path / "fast.json"), str(tmp_path / "slow.json"),
                                 "--out", str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "warning: the TTFT model misses" in text and "assumes no queue in the server" in text
    # the queued point is named as the cause (measured 5x the fast one), the fast one as the consequence
    assert "concurrency=16 (slow.json) measured 67% above the model" in text
    assert "so concurrency=16 (fast.json) comes out +200%" in text
    assert "pulls the one fitted request_overhead_s up" in text and "--holdout" in text
    r = CliRunner().invoke(app, [*args, str(POINTS / "vllm_c16.json"), "--out", str(tmp_path / "b.json")])
    assert r.exit_code == 0 and "TTFT model misses" not in " ".join(r.output.split())


def test_an_overhead_no_engine_has_is_warned_of_not_advised(tmp_path):
    """A fresh user's DeepSeek-R1 fit wrote request_overhead_s = 33.75 s and advised setting it: the TTFT fit now
    reads the lowest load only, and an overhead above 1 s is warned of instead of advised."""
    import json

    from typer.testing import CliRunner

    from specsim.cli import _register, app

    _register()
    base = json.loads((POINTS / "vllm_c16.json").read_text())
    queued = {**base, "mean_ttft_ms": 40_000.0, "median_ttft_ms": 38_000.0}        # a queue in the server
    (tmp_path / "q.json").write_text(json.dumps(queued))
    r = CliRunner().invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", "--params", "kernel_s",
                                 str(tmp_path / "q.json"), "--out", str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "warning: request_overhead_s above 1 s is no engine's own overhead" in text
    assert "do not set engine.request_overhead_s" in text and "(set engine.request_overhead_s" not in text


def test_each_prefill_chunk_step_pays_the_mixed_step_cost():
    # the 3000-token prompt runs in two mixed steps (chunks of 2048 and 952): 2 x 5 ms more than without the term
    from specsim.hardware.stepmodel import step_model

    sm = step_model("qwen3-8b", "h100")
    pts = [_point(4, 3000, 0.055), _point(0.5, 100, 0.033)]
    extra = predict_ttft(sm.with_terms(mixed_step_s=0.005), pts, 2048) - predict_ttft(sm, pts, 2048)
    np.testing.assert_allclose(extra, [0.010, 0.005], rtol=1e-9)


def _mixed_runs(tmp_path, trace, *overrides: str, max_b: int = 1024):
    """Two runs of ``trace`` on the Qwen3-8B H100 step model, mixed_step_s 0 and 7 ms (no request or host
    overhead), each with ``overrides``."""
    from specsim.hardware.profile import save_profile
    from specsim.hardware.stepmodel import step_model

    runs = []
    for m in (0.0, 0.007):
        path = tmp_path / f"m{m}.json"
        save_profile(step_model("qwen3-8b", "h100").with_terms(mixed_step_s=m).profile(max_b), path)
        sc = load_scenario(overrides=[f"profile.name={path}", "engine.request_overhead_s=0",
                                      "engine.host_overhead_s=0", *overrides])
        runs.append(simulate(trace, "none", sc, seed=0))
    return runs


def test_the_simulated_prefill_step_pays_the_mixed_step_cost_once(tmp_path):
    # one request alone, colocated chunked prefill: only its prefill step is mixed, so TTFT grows by exactly
    # mixed_step_s and the decode steps (TPOT) do not move
    a, b = (r.requests for r in _mixed_runs(tmp_path, make_trace([0.0], [300], [6]), 'prefill.mode="colocated"',
                                            "prefill.chunk_tokens=512"))
    assert b["ttft_s"][0] - a["ttft_s"][0] == pytest.approx(0.007, rel=1e-9)
    assert b["tpot_s"][0] == pytest.approx(a["tpot_s"][0], rel=1e-12)


def test_mixed_steps_keep_their_cost_beyond_the_table_and_a_one_token_chunk_is_a_decode_row(tmp_path):
    # a profile extrapolating linearly: a mixed step beyond the table keeps mixed_step_s (it fell back to the
    # decode table); on a disaggregated decode replica the 1-token recompute of the last prompt token beside
    # 1-token decode rows is a uniform decode batch to vLLM, so only the prefill instance's chunks pay it
    from dataclasses import replace as dc_replace

    from specsim.hardware.stepmodel import step_model

    prof = dc_replace(step_model("qwen3-8b", "h100").with_terms(mixed_step_s=0.007).profile(1024), extrapolate="linear")
    b = np.array([96, 1024, 1025, 1124])                   # on the capture grid (decode pads, mixed does not)
    np.testing.assert_allclose(prof.mixed_step_time(b) - prof.step_time(b), 0.007, rtol=1e-9)
    assert prof.mixed_step_time(1500) - prof.step_time(1500) == pytest.approx(0.007, rel=1e-9)
    a, b = (r.requests["ttft_s"][0] for r in _mixed_runs(
        tmp_path, make_trace([0.0], [3000], [6]), 'prefill.mode="disaggregated"', "prefill.chunk_tokens=512",
        'prefill.first_token="decode-step"', max_b=4096))
    assert b - a == pytest.approx(6 * 0.007, rel=1e-6)                   # 6 chunks of 512 on the prefill side


def test_every_step_carrying_a_chunk_beside_a_decoding_request_pays_the_mixed_step_once(tmp_path):
    # a short request decoding while a 3000-token prompt runs in chunks of 512: the same steps in both runs (their
    # composition depends on tokens, not times), and each step that carries a chunk of more than one token is
    # exactly mixed_step_s longer, every other step unchanged
    a, b = (r.steps for r in _mixed_runs(tmp_path, make_trace([0.0, 0.0], [100, 3000], [40, 4]),
                                         'prefill.mode="colocated"', "prefill.chunk_tokens=512"))
    assert list(a["prefill_tokens"]) == list(b["prefill_tokens"]) and (a["prefill_tokens"] > 1).sum() >= 6
    extra = (b["duration_s"] - a["duration_s"]).to_numpy()
    np.testing.assert_allclose(extra, np.where(a["prefill_tokens"] > 1, 0.007, 0.0), atol=1e-12)


def test_a_one_token_chunk_beside_verify_rows_is_a_mixed_step():
    # vLLM replays its full decode graph only for a batch of equal query lengths: a 1-token recompute row beside
    # 1-token decode rows is one (no mixed_step_s), beside verify rows of 1 + k = 3 tokens it is not (+ m)
    from types import SimpleNamespace

    from specsim.engine.step_runner import StepRunner
    from specsim.hardware.stepmodel import step_model

    prof = step_model("qwen3-8b", "h100").with_terms(mixed_step_s=0.007).profile(1024)
    fake = SimpleNamespace(slots=SimpleNamespace(prompt_tokens=np.array([3000]), num_generated=np.array([0]),
                                                 prefill_left=np.array([1])),
                           profile=prof, drafter_cost=SimpleNamespace(draft_time_s=lambda *a: 0.0),
                           config=SimpleNamespace(gamma=2, emission_overhead_s=0.0, first_drafts_in_prefill=True),
                           host_overhead_s=0.0)

    def plan(verified, chunk=1):
        return SimpleNamespace(batch_tokens=16 + chunk - 1, chunk=np.array([chunk]), prefill=np.array([0]),
                               batch=SimpleNamespace(decode=np.arange(5), kv_tokens=0.0, gamma=2),
                               num_drafting=5, verified_drafts=verified, num_proposing=-1)

    with_verify, plain = StepRunner.step_time_s(fake, plan(10)), StepRunner.step_time_s(fake, plan(0))
    assert with_verify - plain == pytest.approx(0.007, rel=1e-9)       # B = 16 is on the capture grid
    assert StepRunner.step_time_s(fake, plan(0, chunk=9)) > plain + 0.007     # a real chunk: mixed either way


def test_a_closed_loop_of_one_user_has_no_step_in_flight_when_its_next_request_arrives():
    """In a closed loop of N users a request arrives as its user's last one ends, so only the other users' share
    of the running requests, R (1 - 1/N), can have a step in flight or decode beside the prompt: none at N = 1.
    The prediction had charged half a step there, which set the B200 sweep's fitted request overhead 5.5 ms
    short of its N = 1 TTFT; an open-loop point (no concurrency) keeps R."""
    from dataclasses import replace

    one, two = replace(_point(1.0, 100, 0.033), concurrency=1.0), replace(_point(2.0, 100, 0.043), concurrency=2.0)
    opened = _point(1.0, 100, 0.043)
    np.testing.assert_allclose(predict_ttft(_Flat20(), [one, two, opened], 2048), [0.020, 0.030, 0.030])
    (o,) = observations_from_vllm_results(POINTS / "vllm_c16.json")
    assert o.concurrency == 16.0


def test_the_fit_recovers_the_request_overhead_of_a_simulated_closed_loop_of_one_user():
    """Fit and simulator agree on TTFT: the overhead a one-user closed loop ran with comes back from its TTFT."""
    from specsim.hardware.profile import resolve_profile
    from specsim.hardware.stepmodel import step_model_of
    from specsim.workload import synth_trace

    prof = resolve_profile("h100-qwen3-8b-tp1-terms")
    sc = load_scenario(overrides=['prefill.mode="colocated"', "prefill.chunk_tokens=2048",
                                  "engine.request_overhead_s=0.012", "engine.host_overhead_s=0"])
    s = simulate(synth_trace(16, 1.0, seed=0, prompt_len=700, output_len=40), "none", sc, seed=0, concurrency=1,
                 profile=prof).summary
    obs = StepObservation(1.0, 1.0, 720.0, s["mean_tpot_ms"] / 1e3, "sim", None, "tpot", "N=1",
                          ttft_s=s["mean_ttft_ms"] / 1e3, prompt_tokens=700.0, concurrency=1.0)
    rep = fit_ttft(step_model_of(prof), [obs], chunk_tokens=2048)
    assert rep.request_overhead_s == pytest.approx(0.012, abs=3e-4)


class _Linear:
    """A step of 10 ms + 1 ms per token, whatever its requests and KV: the decode rows beside the prompt count."""

    def step_time(self, batch_tokens, num_requests=None, kv_tokens=0.0):
        return 0.010 + 0.001 * np.asarray(batch_tokens, np.float64)

    def prefill_attention_s(self, chunk_tokens, context_tokens):
        return 0.0


def test_a_closed_loop_of_two_users_counts_the_other_users_rows_only():
    """N = 2, R = D = 2: the other user's one request is in flight (half of its 11 ms step) and decodes beside the
    100-token prompt (a 101-token step, 111 ms): 116.5 ms. An open loop counts both requests: 6 + 112 = 118 ms."""
    from dataclasses import replace

    two = replace(_point(2.0, 100, 0.1), concurrency=2.0)
    np.testing.assert_allclose(predict_ttft(_Linear(), [two, _point(2.0, 100, 0.1)]), [0.1165, 0.118])


def test_a_rate_limited_run_is_an_open_loop_even_with_a_concurrency_cap(tmp_path):
    import json

    doc = json.loads((POINTS / "vllm_c16.json").read_text())
    doc["request_rate"] = 4.0
    (tmp_path / "r.json").write_text(json.dumps(doc))
    (o,) = observations_from_vllm_results(tmp_path / "r.json")
    assert np.isnan(o.concurrency)
