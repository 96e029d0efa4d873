"""Checks of measured results shared by ``profile fit`` (plain and ``--spec`` points) and ``import-results``: units,
Little's law against the run's users, NaN, and the options that go with speculative points.

Each case writes a small inline result into ``tmp_path``; the values are worked by hand in the comments.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.hardware.measured import read_vllm_result

_register()
runner = CliRunner()

#: A closed loop of 16 users, 200 requests of 1000 in / 256 out in 28.0875 s at 8.6 ms per step (Qwen3-8B on an
#: H100): Little's law R = (51,200 - 200) x 8.6 ms / 28.0875 s = 15.62 running requests.
PLAIN = {"backend": "vllm", "model_id": "Qwen/Qwen3-8B", "request_rate": "inf", "max_concurrency": 16,
         "duration": 28.0875, "completed": 200, "total_input_tokens": 200000, "total_output_tokens": 51200,
         "request_throughput": 7.1206, "output_throughput": 1822.875, "mean_ttft_ms": 54.0, "median_ttft_ms": 51.3,
         "mean_tpot_ms": 8.686, "median_tpot_ms": 8.6, "mean_itl_ms": 8.6, "median_itl_ms": 8.428,
         "mean_e2el_ms": 2247.0, "median_e2el_ms": 2247.0}
#: The same users speculating (tau 2.5, K 3): 4.242 ms per token, 4.2 ms per streamed chunk, 13.7875 s.
SPEC = {**PLAIN, "duration": 13.7875, "request_throughput": 14.5059, "output_throughput": 3713.509,
        "mean_ttft_ms": 32.0, "mean_tpot_ms": 4.242, "median_tpot_ms": 4.2, "mean_itl_ms": 4.2, "median_itl_ms": 4.116,
        "mean_e2el_ms": 1103.0, "median_e2el_ms": 1103.0, "spec_decode_acceptance_length": 2.5,
        "spec_decode_num_drafts": 20000, "spec_decode_draft_tokens": 60000, "spec_decode_accepted_tokens": 30000}


def _write(tmp_path, name: str, obj) -> str:
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return str(p)


def test_a_bad_gap_in_itls_is_named_by_request_and_gap_only(tmp_path):
    # the error printed the request's whole gap list (256 numbers); now the bad gap and where it is
    f = _write(tmp_path, "r.json", {**PLAIN, "ttfts": [0.05] * 3, "output_lens": [256] * 3,
                                    "itls": [[0.0086] * 255, [0.0086] * 255, [0.0086] * 4 + [-1.0] + [0.0086] * 250]})
    with pytest.raises(SpecsimInputError) as e:
        read_vllm_result(f)
    assert (e.value.field, e.value.got) == ("itls", "-1.0 at request 3, gap 5")
    assert "0.0086" not in str(e.value)


def test_num_spec_tokens_below_one_is_refused_up_front(tmp_path):
    # -2 was refused only after the plain fit, as "spec_decode_acceptance_length: expected (1, K + 1 = -1]"
    base = ["profile", "fit", _write(tmp_path, "v.json", PLAIN), "--model", "qwen3-8b", "--gpu", "h100",
            "--spec", _write(tmp_path, "s.json", SPEC), "--drafter", "eagle3", "--out", str(tmp_path / "o.json")]
    for option, value, field in (("--num-spec-tokens", "-2", "--num-spec-tokens"),
                                 ("--num-spec-tokens", "0", "--num-spec-tokens"),
                                 ("--acceptance-length", "0.5", "--acceptance-length")):
        r = runner.invoke(app, [*base, option, value])
        assert isinstance(r.exception, SpecsimInputError), r.output
        assert (r.exception.field, r.exception.got) == (field, value)
        assert "fitted:" not in r.output and not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("edit, field, got", [
    # seconds under _ms keys: 8.6 ms written 0.0086 gave R 0.0 and, in import-results, 114,942 TPS/user
    ({"mean_itl_ms": 0.0086, "mean_tpot_ms": 0.0087}, "mean_itl_ms", "0.0086"),
    # microseconds under _ms keys: R = 51,000 x 8.6 s / 28.0875 s = 15,616 running requests of 16 users
    ({"mean_itl_ms": 8600.0, "mean_tpot_ms": 8700.0}, "mean_tpot_ms", "8700.0"),
    # a duration in ms: 51,200 tokens / 28,087.5 = 1.823 tok/s beside output_throughput 1,823 tok/s
    ({"duration": 28087.5}, "duration", "28087.5 (1.823 tok/s; milliseconds?)"),
    # a TTFT in seconds (31.5 ms written 0.0315) and one of 12.5 hours
    ({"mean_ttft_ms": 0.0315}, "mean_ttft_ms", "0.0315"),
    ({"mean_ttft_ms": 4.5e7}, "mean_ttft_ms", "45000000.0"),
    ({"median_ttft_ms": 0.03, "mean_ttft_ms": None}, "median_ttft_ms", "0.03"),
    # NaN is refused as Infinity is (it fell back to the next figure in silence)
    ({"mean_itl_ms": float("nan")}, "mean_itl_ms", "NaN"),
    ({"mean_ttft_ms": float("nan")}, "mean_ttft_ms", "NaN"),
])
def test_units_are_checked_alike_by_profile_fit_and_import_results(tmp_path, edit, field, got):
    f = _write(tmp_path, "r.json", {**PLAIN, **edit})
    from specsim.hardware.step_points import observations_from_vllm_results

    for read in (read_vllm_result, observations_from_vllm_results):
        with pytest.raises(SpecsimInputError) as e:
            read(f)
        assert (e.value.file, e.value.line, e.value.field, e.value.got) == (f, 1, field, got)
    r = runner.invoke(app, ["import-results", f, "--out", str(tmp_path / "m.json")])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == field
    assert not (tmp_path / "m.json").exists()
    r = runner.invoke(app, ["profile", "fit", f, "--model", "qwen3-8b", "--gpu", "h100", "--out", str(tmp_path / "o.json")])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == field
    assert not (tmp_path / "o.json").exists()


def test_unit_errors_say_the_unit(tmp_path):
    with pytest.raises(SpecsimInputError, match="seconds agreeing with output_throughput \\(1,823 tok/s: "
                                                "total_output_tokens 51,200 in 28.09 s\\)"):
        read_vllm_result(_write(tmp_path, "d.json", {**PLAIN, "duration": 28087.5}))
    with pytest.raises(SpecsimInputError, match="Little's law gives R = 1.562e\\+04 requests decoding at once"):
        read_vllm_result(_write(tmp_path, "u.json", {**PLAIN, "mean_itl_ms": 8600.0, "mean_tpot_ms": 8600.0}))
    with pytest.raises(SpecsimInputError, match="a step takes >= 0.1 ms; this reads as seconds"):
        read_vllm_result(_write(tmp_path, "s.json", {**PLAIN, "mean_itl_ms": 0.0086}))


def test_a_closed_loop_far_below_its_users_is_refused_naming_the_duration(tmp_path):
    # without output_throughput agreeing to catch it: duration and output_throughput both 1000x off, the E2EL says
    # 200 requests x 2.247 s / 28,087.5 s = 0.016 requests in a loop of 16 users (< 0.05 x 16)
    f = _write(tmp_path, "r.json", {**PLAIN, "duration": 28087.5, "output_throughput": 1.823})
    with pytest.raises(SpecsimInputError) as e:
        read_vllm_result(f)
    assert (e.value.field, e.value.got) == ("duration", "28087.5")
    assert "completed x mean_e2el_ms / duration = 0.016" in e.value.expected
    # an open loop (a finite request rate) may hold few requests: read
    (p,) = read_vllm_result(_write(tmp_path, "o.json", {**PLAIN, "duration": 28087.5, "output_throughput": 1.823,
                                                          "request_rate": 0.007}))
    assert p.output_throughput == pytest.approx(1.823)


def test_null_still_reads_as_not_measured(tmp_path):
    # null (not measured) falls back to the next figure: mean ITL null -> mean TPOT 8.686 ms; TTFT -> the median
    from specsim.hardware.step_points import observations_from_vllm_results

    (o,) = observations_from_vllm_results(_write(tmp_path, "r.json", {**PLAIN, "mean_itl_ms": None,
                                                                        "mean_ttft_ms": None}))
    assert o.step_time_s == pytest.approx(8.686e-3, rel=1e-12)
    assert o.ttft_s == pytest.approx(51.3e-3, rel=1e-12)


def test_itls_in_milliseconds_fall_back_to_the_summary_and_the_basis_says_so(tmp_path):
    # import-results wrote 0.2 TPS/user beside 3,713 tok/s at 16 users: the per-request latencies were TTFT + the
    # itls summed as seconds; now 1000 / mean TPOT = 1000 / 4.242 = 235.7, and the basis names the disagreement
    f = _write(tmp_path, "r.json", {**SPEC, "ttfts": [0.032] * 2, "output_lens": [256] * 2, "itls": [[4.2] * 255] * 2})
    (p,) = read_vllm_result(f)
    assert p.tps_per_user == pytest.approx(1000 / 4.242, rel=1e-12)
    assert p.tps_per_user_basis == "1000 / mean TPOT (itls 990x mean_tpot_ms: not seconds?)"
    assert "token_weighted_tpot_ms" not in p.metrics
    # without mean_tpot_ms the reference is mean_itl_ms / tau = 4.2 / 2.5 = 1.68 ms per token (the --spec fit took
    # the ms lists as 10,500 ms steps)
    from specsim.hardware.spec_fit import spec_observations_from_vllm_results

    doc = {k: v for k, v in SPEC.items() if k != "mean_tpot_ms"}
    (o,) = spec_observations_from_vllm_results(_write(tmp_path, "n.json", {**doc, "ttfts": [0.032] * 2,
                                                                            "output_lens": [256] * 2,
                                                                            "itls": [[4.2] * 255] * 2}))
    assert o.step_time_s == pytest.approx(4.2e-3, rel=1e-12)                # 1.68 ms x tau 2.5: the ITL


def _fit(tmp_path, *spec_args):
    """profile fit of the plain 16-user point with the given --spec arguments (eagle3), into tmp_path/o.json."""
    return runner.invoke(app, ["profile", "fit", _write(tmp_path, "v.json", PLAIN), "--model", "qwen3-8b", "--gpu",
                               "h100", "--params", "kernel_s", "--drafter", "eagle3", *spec_args,
                               "--out", str(tmp_path / "o.json")])


def test_speculative_points_get_the_plain_points_checks(tmp_path):
    # TPOT 34 ms where 4.242 was measured: R = 51,000 x 34 ms / 13.7875 s = 125.8 of 16 users (it was capped at 16)
    r = _fit(tmp_path, "--spec", _write(tmp_path, "over.json", {**SPEC, "mean_tpot_ms": 34.0}))
    assert isinstance(r.exception, SpecsimInputError), r.output
    assert (r.exception.field, r.exception.got) == ("mean_tpot_ms", "34.0")
    assert "R = 125.8 requests decoding at once" in r.exception.expected
    assert not (tmp_path / "o.json").exists()
    # the file says K = 60,000 / 20,000 = 3: --num-spec-tokens 100 replaced it without a word
    r = _fit(tmp_path, "--spec", _write(tmp_path, "s.json", SPEC), "--num-spec-tokens", "100")
    assert isinstance(r.exception, SpecsimInputError), r.output
    assert (r.exception.field, r.exception.got) == ("--num-spec-tokens", "100")
    assert "the file's K = 3" in r.exception.expected and not (tmp_path / "o.json").exists()
    # an equal one, and --acceptance-length over the file's 2.5, are taken: the latter said
    r = _fit(tmp_path, "--spec", _write(tmp_path, "s.json", SPEC), "--num-spec-tokens", "3", "--acceptance-length", "2.8")
    assert r.exit_code == 0, r.output
    assert "measured acceptance length 2.5; --acceptance-length 2.8 is used instead" in " ".join(r.output.split())


@pytest.mark.parametrize("edit, field", [
    ({"mean_tpot_ms": 34.0}, "mean_tpot_ms"),                        # R = 125.8 of 16 users (above)
    ({"spec_decode_acceptance_length": None}, "spec_decode_acceptance_length"),      # no acceptance length
    ({"duration": -1.0}, "duration"),
])
def test_a_bad_speculative_file_is_refused_before_the_plain_fit_prints_anything(tmp_path, edit, field):
    # the error came after the plain fit had printed its shape, constants and residual table
    r = _fit(tmp_path, "--spec", _write(tmp_path, "bad.json", {**SPEC, **edit}))
    assert isinstance(r.exception, SpecsimInputError), r.output
    assert (r.exception.file, r.exception.line, r.exception.field) == (str(tmp_path / "bad.json"), 1, field)
    assert r.output == "" and not (tmp_path / "o.json").exists()


def test_a_speculative_fit_that_misses_its_points_by_over_10x_writes_nothing_and_over_20_percent_warns(tmp_path):
    # an open loop (no max_concurrency: no Little's-law bound) whose TPOT is f x the real 4.242 ms (duration and
    # throughput scaled alike): spec_step_s, at most 0.05 s, cannot reach a step of f x 10.6 ms at R = 15.7
    def slow(f: float) -> dict:
        return {**SPEC, "max_concurrency": None, "request_rate": 16.0, "mean_tpot_ms": 4.242 * f,
                "median_tpot_ms": 4.2 * f, "mean_itl_ms": 4.2 * f, "median_itl_ms": 4.116 * f,
                "duration": 13.7875 * f, "output_throughput": 3713.509 / f, "request_throughput": 14.5059 / f,
                "mean_e2el_ms": 1103.0 * f}

    r = _fit(tmp_path, "--spec", _write(tmp_path, "slow100.json", slow(100)))       # a 1,060 ms step: 0.057x
    assert isinstance(r.exception, SpecsimInputError), r.output
    assert r.exception.field == "the speculative fit" and "no profile written" in r.exception.expected
    assert "the model's step 0.05" in r.exception.got
    assert not (tmp_path / "o.json").exists()
    r = _fit(tmp_path, "--spec", _write(tmp_path, "slow10.json", slow(10)))         # 106 ms: the model -43%
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "warning: the speculative fit misses its own points by more than 20% (median 43%)" in text
    assert (tmp_path / "o.json").exists()


def test_a_ttft_below_the_model_is_not_blamed_on_a_queue(tmp_path):
    # one user, 1000-token prompts: the model's prefill takes tens of ms, the file says 0.5 ms; a queue only raises
    # a measured TTFT, so the warning (+94823% "assumes no queue" before) names the units and lengths instead
    one = {**PLAIN, "max_concurrency": 1, "duration": 373.5, "output_throughput": 137.08, "request_throughput": 0.5355,
           "mean_ttft_ms": 0.5, "median_ttft_ms": 0.5, "mean_tpot_ms": 7.272, "median_tpot_ms": 7.2,
           "mean_itl_ms": 7.2, "median_itl_ms": 7.056, "mean_e2el_ms": 1867.5, "median_e2el_ms": 1867.5}
    r = runner.invoke(app, ["profile", "fit", _write(tmp_path, "c1.json", one), "--model", "qwen3-8b", "--gpu",
                            "h100", "--params", "kernel_s", "--out", str(tmp_path / "o.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "TTFT: fitted request_overhead_s = 0 s" in text
    assert "(measured concurrency=1 0.5 ms, below the model's" in text
    assert "check mean_ttft_ms is in milliseconds" in text and "assumes no queue" not in text


@pytest.mark.parametrize("edit, field, expected, got", [
    # vLLM writes the acceptance rate as a percentage: 161.2% of the drafts accepted is no run's
    ({"spec_decode_acceptance_rate": 161.2}, "spec_decode_acceptance_rate",
     "a percentage in [0, 100] (100 x accepted / draft tokens)", "161.2"),
    ({"spec_decode_per_position_acceptance_rates": [1.5, 0.61, 0.445]}, "spec_decode_per_position_acceptance_rates[0]",
     "a rate in [0, 1] (position k's accepted drafts / drafts)", "1.5"),
    ({"spec_decode_per_position_acceptance_rates": [0.8, "x", 0.4]}, "spec_decode_per_position_acceptance_rates[1]",
     "a rate in [0, 1] (position k's accepted drafts / drafts)", "'x'"),
    ({"spec_decode_acceptance_length": 0.5}, "spec_decode_acceptance_length",
     "an acceptance length >= 1 (1 + accepted tokens per draft)", "0.5"),
    ({"spec_decode_accepted_tokens": 70000}, "spec_decode_accepted_tokens", "at most the draft tokens (60,000)",
     "70,000"),
    ({"spec_decode_num_drafts": -3}, "spec_decode_num_drafts", "a count >= 0", "-3"),
])
def test_speculative_figures_out_of_range_are_refused_by_fit_spec_and_import_results(tmp_path, edit, field,
                                                                                      expected, got):
    f = _write(tmp_path, "bad.json", {**SPEC, "spec_decode_acceptance_rate": 50.0,
                                      "spec_decode_per_position_acceptance_rates": [0.8, 0.5, 0.2], **edit})
    with pytest.raises(SpecsimInputError) as e:
        read_vllm_result(f)
    assert (e.value.file, e.value.line, e.value.field, e.value.expected, e.value.got) == (f, 1, field, expected, got)
    r = _fit(tmp_path, "--spec", f)
    assert isinstance(r.exception, SpecsimInputError), r.output
    assert (r.exception.file, r.exception.field) == (f, field) and not (tmp_path / "o.json").exists()
    r = runner.invoke(app, ["import-results", f, "--out", str(tmp_path / "m.json")])
    assert isinstance(r.exception, SpecsimInputError) and (r.exception.file, r.exception.field) == (f, field)
    assert not (tmp_path / "m.json").exists()
    # the same file in range is read
    assert read_vllm_result(_write(tmp_path, "ok.json", {**SPEC, "spec_decode_acceptance_rate": 50.0,
                                                         "spec_decode_per_position_acceptance_rates": [0.8, 0.5, 0.2]}))
