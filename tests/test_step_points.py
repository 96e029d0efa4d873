"""Step-time observations from real no-speculation measurements (issue 12, the inputs of ``profile fit``).

Every expected value is derived by hand from the sample files in ``tests/data/step_points`` (README there).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.step_points import (StepObservation, as_arrays, detect_format, observations_from_csv,
                                          observations_from_prometheus, observations_from_vllm_results,
                                          read_step_observations)

DATA = Path(__file__).parent / "data" / "step_points"


def _err(excinfo) -> SpecsimInputError:
    return excinfo.value


# ---------------------------------------------------------------------------------------------
# vllm bench serve results


def test_vllm_result_littles_law_by_hand():
    (o,) = observations_from_vllm_results(DATA / "vllm_c16.json")
    # 320 requests of 1024 in / 256 out in 120 s, mean ITL 22 ms: 81,920 - 320 = 81,600 decode gaps of 22 ms
    # = 1,795.2 s of decoding summed over requests, / 120 s = 14.96 requests decoding at once.
    assert o.step_time_s == pytest.approx(0.022, rel=1e-12)
    assert o.num_requests == pytest.approx(81600 * 0.022 / 120.0, rel=1e-12)
    assert o.num_requests == pytest.approx(14.96, rel=1e-12)
    # + the prompts' chunked prefill sharing the steps: 327,680 prompt tokens / 120 s x 22 ms = 60.075 per step
    assert o.batch_tokens == pytest.approx(14.96 + 327680 * 0.022 / 120.0, rel=1e-12)
    assert o.context_tokens == pytest.approx(1024 + 256 / 2)
    assert (o.kind, o.label, o.line, o.weight) == ("tpot", "concurrency=16", 1, 1.0)
    assert Path(o.source).name == "vllm_c16.json"


def test_vllm_append_file_gives_one_observation_per_object_and_falls_back_to_tpot():
    c1, c64 = observations_from_vllm_results(DATA / "vllm_sweep_append.jsonl")
    # concurrency 1 has mean_itl_ms null: mean TPOT 8.4 ms, (10,240 - 40) gaps over 88 s
    assert c1.step_time_s == pytest.approx(0.0084, rel=1e-12)
    assert c1.num_requests == pytest.approx(10200 * 0.0084 / 88.0, rel=1e-12)   # 0.97364 <= 1
    assert c64.step_time_s == pytest.approx(0.055, rel=1e-12)
    assert c64.num_requests == pytest.approx(163200 * 0.055 / 150.0, rel=1e-12)  # 59.84
    assert [o.label for o in (c1, c64)] == ["concurrency=1", "concurrency=64"]
    assert [o.line for o in (c1, c64)] == [1, 2]


def test_vllm_open_loop_label_and_closed_loop_clip():
    r4, c8 = observations_from_vllm_results(DATA / "vllm_rate4_and_clip.jsonl")
    assert r4.label == "rate=4"
    assert r4.num_requests == pytest.approx((61440 - 480) * 0.018 / 121.5, rel=1e-12)  # 9.0311
    assert r4.context_tokens == pytest.approx(512 + 64)
    # (12,800 - 100) x 0.020 / 30 = 8.467 > 8 users: impossible in a closed loop of 8, so clipped and said
    assert c8.num_requests == 8.0 and c8.batch_tokens == pytest.approx(8.0 + 51200 * 0.020 / 30.0, rel=1e-12)
    assert c8.label == "concurrency=8 (R 8.467 clipped to 8)"


def test_vllm_result_with_speculation_is_refused():
    with pytest.raises(SpecsimInputError) as e:
        observations_from_vllm_results(DATA / "vllm_c16_spec.json")
    err = _err(e)
    assert Path(err.file).name == "vllm_c16_spec.json" and err.line == 1
    assert err.field.startswith("spec_decode_")
    assert "without speculative decoding" in str(err)


@pytest.mark.parametrize("key, value, field", [
    ("accept_length", 3.2, "accept_length"),            # SGLang's bench_serving of a speculative run (fresh user)
    ("max_concurrency", 0, "max_concurrency"),           # 0, -8, true and "8" were taken as labels
    ("max_concurrency", True, "max_concurrency"),
    ("max_concurrency", "8", "max_concurrency"),
    ("mean_ttft_ms", -50, "mean_ttft_ms"),               # replaced by the median in silence
    ("mean_itl_ms", 22 * 2.0, "mean_itl_ms"),            # R = 29.9 of 16 users: a speculative run's per-step ITL
    ("duration", 0, "duration"),
    ("completed", None, "completed"),
    ("total_output_tokens", 320, "total_output_tokens"),        # = completed: no decode gap at all
    ("total_input_tokens", -1, "total_input_tokens"),
    ("mean_itl_ms", None, "mean_itl_ms"),                        # and mean_tpot_ms removed below
    ("mean_itl_ms", -3, "mean_itl_ms"),        # negative: refused (it was skipped for mean_tpot_ms silently)
])
def test_vllm_result_bad_fields_name_file_object_and_field(tmp_path, key, value, field):
    obj = json.loads((DATA / "vllm_c16.json").read_text())
    other = dict(obj, label="second")
    other[key] = value
    if key == "mean_itl_ms" and value is None:
        other["mean_tpot_ms"] = 0.0
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(obj) + "\n" + json.dumps(other) + "\n")
    with pytest.raises(SpecsimInputError) as e:
        observations_from_vllm_results(p)
    err = _err(e)
    assert (err.file, err.line, err.field) == (str(p), 2, field)
    assert str(err).startswith(f"{p}, line 2, field '{field}': expected ")


def test_a_file_given_twice_is_refused():
    """A fresh user's one file given twice counted as two points of one load (two terms fitted from it)."""
    with pytest.raises(SpecsimInputError, match="the same file twice"):
        read_step_observations([DATA / "vllm_c16.json", DATA / "vllm_sweep_append.jsonl", DATA / "vllm_c16.json"])


def test_vllm_result_missing_key_says_so(tmp_path):
    obj = json.loads((DATA / "vllm_c16.json").read_text())
    del obj["duration"]
    p = tmp_path / "r.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(SpecsimInputError, match="field 'duration'.*no such key"):
        observations_from_vllm_results(p)


# ---------------------------------------------------------------------------------------------
# CSV


def test_csv_rows_in_ms_with_weights_and_extra_column():
    obs = observations_from_csv(DATA / "steps.csv")
    assert [o.line for o in obs] == [2, 3, 4, 5, 6, 7]
    assert [o.num_requests for o in obs] == [1, 8, 32, 64, 128, 16]
    assert [o.batch_tokens for o in obs] == [1, 8, 32, 64, 128, 528]
    assert [o.step_time_s for o in obs] == pytest.approx([0.0079, 0.0091, 0.0136, 0.0198, 0.0332, 0.0415])
    assert [o.weight for o in obs] == [412, 380, 655, 702, 240, 37]
    assert obs[-1].context_tokens == 1080 and obs[-1].label == "B=528" and obs[-1].kind == "step"


def test_csv_batch_tokens_alone_stands_for_both_and_seconds_column():
    a, b = observations_from_csv(DATA / "buckets_seconds.csv")
    assert (a.num_requests, a.batch_tokens, a.step_time_s, a.label) == (4.0, 4.0, 0.0085, "b4")
    assert (b.num_requests, b.batch_tokens, b.step_time_s, b.label) == (256.0, 256.0, 0.0612, "b256")
    assert math.isnan(a.context_tokens) and a.weight == 1.0


@pytest.mark.parametrize("text, line, field", [
    ("num_requests,step_time_ms\n4,9.1\n8,-1\n", 3, "step_time_ms"),
    ("num_requests,step_time_ms\n4,9.1\n\n8,fast\n", 4, "step_time_ms"),    # blank line still counted
    ("num_requests,step_time_s,step_time_ms\n4,0.009,9\n", 1, "step_time_s"),
    ("batch,step_time_ms\n4,9.1\n", 1, "num_requests"),
    ("num_requests,batch_tokens,step_time_ms\n8,4,9.1\n", 2, "batch_tokens"),
    ("num_requests,step_time_ms\n0,9.1\n", 2, "num_requests"),
    ("num_requests,batch_tokens,step_time_ms,prompt_token\n4,8,9.1,100\n", 1, "prompt_token"),
    ("num_requests,step_time_ms,context_tokens\n4,9.1,-3\n", 2, "context_tokens"),
    ("num_requests,step_time_ms,weight\n4,9.1,0\n", 2, "weight"),
    ("num_requests,step_time_ms\n4,\n", 2, "step_time_ms"),
])
def test_csv_errors_name_file_line_and_column(tmp_path, text, line, field):
    p = tmp_path / "steps.csv"
    p.write_text(text)
    with pytest.raises(SpecsimInputError) as e:
        observations_from_csv(p)
    assert (_err(e).file, _err(e).line, _err(e).field) == (str(p), line, field)


def test_csv_header_only_is_refused(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("num_requests,step_time_ms\n")
    with pytest.raises(SpecsimInputError, match="at least one data row"):
        observations_from_csv(p)


# ---------------------------------------------------------------------------------------------
# Prometheus


def test_prometheus_one_dump_means_since_start():
    (o,) = observations_from_prometheus(DATA / "vllm_metrics_phase1.prom")
    assert o.step_time_s == pytest.approx(1795.2 / 81600, rel=1e-12)      # ITL _sum / _count = 22 ms
    assert o.batch_tokens == pytest.approx(409600 / 5440, rel=1e-12)      # tokens per engine step
    assert o.num_requests == pytest.approx(81920 / 5440, rel=1e-12)       # generated tokens per step
    assert o.context_tokens == pytest.approx(327680 / 320 + 81920 / 320 / 2)
    assert (o.kind, o.label, o.line) == ("histogram", "engine=0 model_name=acme/dense-32b", 132)
    assert o.batch_tokens >= o.num_requests


def test_prometheus_delta_between_dumps_gives_the_phase_means():
    first, second = read_step_observations([DATA / "vllm_metrics_phase1.prom", DATA / "vllm_metrics_phase2.prom"],
                                           fmt="prometheus-delta")
    alone = observations_from_prometheus(DATA / "vllm_metrics_phase1.prom")[0]
    assert first == replace(alone, label=f"{alone.label} (vllm_metrics_phase1.prom)")   # one label, two dumps
    # phase 2 alone: 163,200 gaps summing to 8,976 s; 2,720 steps of 819,200 tokens; 163,840 generated
    assert second.step_time_s == pytest.approx(8976 / 163200, rel=1e-12)          # 55 ms
    assert second.batch_tokens == pytest.approx(819200 / 2720, rel=1e-12)
    assert second.num_requests == pytest.approx(163840 / 2720, rel=1e-12)
    assert second.context_tokens == pytest.approx(655360 / 640 + 163840 / 640 / 2)
    # without the baseline, the later dump is the whole-run mean instead
    (whole,) = observations_from_prometheus(DATA / "vllm_metrics_phase2.prom")
    assert whole.step_time_s == pytest.approx(10771.2 / 244800, rel=1e-12)


def test_prometheus_restarted_server_is_refused():
    with pytest.raises(SpecsimInputError) as e:
        observations_from_prometheus(DATA / "vllm_metrics_phase1.prom", baseline=DATA / "vllm_metrics_phase2.prom")
    assert "baseline" in str(e.value) and e.value.line is not None


def test_prometheus_one_observation_per_engine():
    e0, e1 = observations_from_prometheus(DATA / "vllm_metrics_dp2.prom")
    assert [e0.label, e1.label] == ["engine=0 model_name=acme/dense-32b", "engine=1 model_name=acme/dense-32b"]
    assert e1.step_time_s == pytest.approx(852.6 / 40600, rel=1e-12)          # 21 ms
    assert e1.batch_tokens == pytest.approx(201600 / 2800, rel=1e-12)         # 72
    assert e1.num_requests == pytest.approx(40760 / 2800, rel=1e-12)
    assert e1.context_tokens == pytest.approx(160000 / 160 + 40760 / 160 / 2)
    assert e0.step_time_s == pytest.approx(0.022, rel=1e-12)


def _edited(tmp_path, drop=(), add=""):
    lines = (DATA / "vllm_metrics_phase1.prom").read_text().splitlines()
    keep = [ln for ln in lines if not any(ln.startswith(d) for d in drop)]
    p = tmp_path / "m.prom"
    p.write_text("\n".join(keep) + "\n" + add)
    return p


def test_prometheus_with_speculation_is_refused(tmp_path):
    p = _edited(tmp_path, add='vllm:spec_decode_num_drafts_total{engine="0",model_name="acme/dense-32b"} 20400.0\n')
    with pytest.raises(SpecsimInputError) as e:
        observations_from_prometheus(p)
    assert e.value.field == "vllm:spec_decode_num_drafts_total"
    assert "without speculative decoding" in str(e.value)
    # counters at zero (a server with speculation configured but idle, or never drafting) are no speculation
    p2 = _edited(tmp_path, add='vllm:spec_decode_num_drafts_total{engine="0",model_name="acme/dense-32b"} 0.0\n')
    assert len(observations_from_prometheus(p2)) == 1


def test_prometheus_older_names_and_gauge_fallback(tmp_path):
    # an older server: only vllm:time_per_output_token_seconds, no generation counter (the gauge, a snapshot)
    p = _edited(tmp_path, drop=("vllm:inter_token_latency_seconds", "vllm:generation_tokens_total"))
    (o,) = observations_from_prometheus(p)
    assert o.step_time_s == pytest.approx(0.022, rel=1e-12)
    assert o.num_requests == 16.0                                             # vllm:num_requests_running
    q = _edited(tmp_path, drop=("vllm:request_prompt_tokens",))
    assert math.isnan(observations_from_prometheus(q)[0].context_tokens)


def test_prometheus_errors(tmp_path):
    p = _edited(tmp_path, drop=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"))
    with pytest.raises(SpecsimInputError, match="inter_token_latency_seconds"):
        observations_from_prometheus(p)
    p = _edited(tmp_path, drop=("vllm:iteration_tokens_total",))
    with pytest.raises(SpecsimInputError, match="iteration_tokens_total_count"):
        observations_from_prometheus(p)
    p = _edited(tmp_path, add="vllm:num_requests_running{engine=0} 3\n")   # unquoted label value
    with pytest.raises(SpecsimInputError) as e:
        observations_from_prometheus(p)
    assert e.value.line == len((DATA / "vllm_metrics_phase1.prom").read_text().splitlines()) + 1
    p = _edited(tmp_path, add="vllm:num_requests_running{} many\n")
    with pytest.raises(SpecsimInputError, match="field 'vllm:num_requests_running'"):
        observations_from_prometheus(p)


def test_prometheus_label_escapes_and_timestamps(tmp_path):
    p = _edited(tmp_path, add='vllm:cache_config_info{engine="0",note="a \\"q\\", {b}\\n"} 1.0 1764520000000\n')
    assert len(observations_from_prometheus(p)) == 1


# ---------------------------------------------------------------------------------------------
# Dispatch


def test_several_files_give_observations_in_the_order_given():
    files = [DATA / "vllm_sweep_append.jsonl", DATA / "buckets_seconds.csv", DATA / "vllm_metrics_dp2.prom",
             DATA / "vllm_c16.json"]
    obs = read_step_observations(files)
    assert [(Path(o.source).name, o.line) for o in obs] == [
        ("vllm_sweep_append.jsonl", 1), ("vllm_sweep_append.jsonl", 2), ("buckets_seconds.csv", 2),
        ("buckets_seconds.csv", 3), ("vllm_metrics_dp2.prom", 210), ("vllm_metrics_dp2.prom", 232),
        ("vllm_c16.json", 1)]
    assert [o.kind for o in obs] == ["tpot", "tpot", "step", "step", "histogram", "histogram", "tpot"]
    r, b, ctx, t, w = as_arrays(obs)
    assert r.shape == (7,) and t[-1] == pytest.approx(0.022) and math.isnan(ctx[2])


GUIDELLM = Path(__file__).parent / "data" / "guidellm_report_sample.json"


def test_guidellm_report_littles_law_by_hand():
    from specsim.hardware.step_points import observations_from_guidellm

    one, two = observations_from_guidellm(GUIDELLM)
    # concurrency 4: 146 requests, 37,376 prompt and 18,688 output tokens in 1060 - 1000 = 60 s, decode gaps
    # (inter-token latency) of 12.5 ms: 18,542 gaps x 12.5 ms / 60 s = 3.863 requests decoding at once
    assert one.step_time_s == pytest.approx(0.0125, rel=1e-12)
    assert one.num_requests == pytest.approx(18542 * 0.0125 / 60, rel=1e-12)
    assert one.batch_tokens == pytest.approx(18542 * 0.0125 / 60 + 37376 * 0.0125 / 60, rel=1e-12)
    assert one.context_tokens == pytest.approx(256 + 128 / 2)
    assert (one.label, one.concurrency, one.ttft_s, one.line, one.kind) == ("concurrency=4", 4.0, 0.06, 1, "tpot")
    # constant rate 3 req/s: 180 requests, 22,860 gaps of 20 ms in 60 s = 7.62 decoding; an open loop
    assert two.num_requests == pytest.approx(7.62, rel=1e-12)
    assert two.batch_tokens == pytest.approx(7.62 + 46080 * 0.02 / 60, rel=1e-12)
    assert two.label == "rate=3" and math.isnan(two.concurrency) and two.ttft_s == pytest.approx(0.09)
    assert detect_format(GUIDELLM) == "guidellm" and read_step_observations(GUIDELLM) == [one, two]


def test_guidellm_report_errors_name_the_benchmark_and_guidellm_field(tmp_path):
    doc = json.loads(GUIDELLM.read_text())
    del doc["benchmarks"][1]["metrics"]["inter_token_latency_ms"]
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError) as e:
        read_step_observations(path)
    assert str(e.value).startswith(f"{path}, line 2, field 'metrics.inter_token_latency_ms.successful.mean': "
                                   "expected mean or median ITL or TPOT > 0 (a streamed run)")
    doc = json.loads(GUIDELLM.read_text())
    doc["benchmarks"][0]["metrics"]["inter_token_latency_ms"]["successful"]["mean"] = 125.0   # 10x: R = 38.6 > 1.5 x 4
    del doc["benchmarks"][0]["end_time"]
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError) as e:
        read_step_observations(path)
    assert str(e.value).startswith(f"{path}, line 1, field 'end_time - start_time': expected a number > 0 (seconds)")
    doc["benchmarks"][0]["end_time"] = 1060.0
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError) as e:
        read_step_observations(path)
    assert str(e.value).startswith(f"{path}, line 1, field 'metrics.inter_token_latency_ms.successful.mean': "
                                   "expected a run whose decode time fits its 4 users")


def test_profile_fit_reads_a_guidellm_report(tmp_path, monkeypatch, capsys):
    from helpers import run_cli

    monkeypatch.setenv("COLUMNS", "200")
    out = tmp_path / "x.json"
    code = run_cli(["profile", "fit", str(GUIDELLM), "--model", "llama2-7b", "--gpu", "h100", "--out", str(out)])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "concurrency=4" in cap.out and "rate=3" in cap.out and out.exists()


def test_format_detection_by_content(tmp_path):
    for src, name, fmt in [("vllm_c16.json", "a.txt", "vllm"), ("steps.csv", "b.txt", "csv"),
                           ("vllm_metrics_phase1.prom", "c.txt", "prometheus")]:
        (tmp_path / name).write_text((DATA / src).read_text())
        assert detect_format(tmp_path / name) == fmt
    assert read_step_observations(tmp_path / "a.txt") == [
        StepObservation(**{**observations_from_vllm_results(DATA / "vllm_c16.json")[0].__dict__,
                           "source": str(tmp_path / "a.txt")})]
    (tmp_path / "d.txt").write_text("hello world\n")
    with pytest.raises(SpecsimInputError, match="d.txt, line 1"):
        detect_format(tmp_path / "d.txt")


def test_bad_format_and_no_paths():
    with pytest.raises(SpecsimInputError, match="one of vllm, guidellm, csv, prometheus, prometheus-delta"):
        read_step_observations([DATA / "steps.csv"], fmt="xlsx")
    with pytest.raises(SpecsimInputError, match="at least one measurement file"):
        read_step_observations([])


def test_csv_from_a_spreadsheet_with_a_byte_order_mark(tmp_path):
    p = tmp_path / "excel.csv"
    p.write_bytes("\ufeffnum_requests,step_time_ms\r\n4,9.1\r\n".encode("utf-8"))
    (o,) = observations_from_csv(p)
    assert (o.num_requests, o.step_time_s, o.line) == (4.0, pytest.approx(0.0091), 2)


@pytest.mark.parametrize("column, refused", [
    ("prompt_token", True), ("Step_Time_MS", True), ("weights", True), ("num_request", True), ("step_time_us", True),
    ("step_time", True), ("step_time_ms_p99", False), ("max_num_requests", False), ("batch_tokens_p50", False),
    ("num_prompt_tokens", False), ("mean_step_time_ms", False), ("requests", False)])
def test_a_misspelt_column_is_refused_and_a_statistic_beside_it_ignored(tmp_path, column, refused):
    # other columns are ignored (module docstring), but one that is a known column by another spelling (case,
    # a plural s, step_time in another unit) would silently lose its data: refused, naming it
    path = tmp_path / "s.csv"
    path.write_text(f"step_time_ms,num_requests,batch_tokens,{column}\n9.1,4,8,7\n")
    if refused:
        with pytest.raises(SpecsimInputError) as e:
            observations_from_csv(path)
        assert e.value.field == column and e.value.line == 1
    else:
        (o,) = observations_from_csv(path)
        assert (o.step_time_s, o.num_requests, o.batch_tokens) == pytest.approx((9.1e-3, 4.0, 8.0))


def test_a_request_count_below_one_carries_one_token(tmp_path):
    # Little's law R at one user is below 1; alone it stands for B too, and a step carries at least one token
    path = tmp_path / "s.csv"
    path.write_text("step_time_s,num_requests\n0.011,0.5\n")
    (o,) = observations_from_csv(path)
    assert (o.num_requests, o.batch_tokens) == (0.5, 1.0)


def test_labels_that_two_files_share_name_their_files():
    # two /metrics dumps of one server both say engine=0: the residual table must tell them apart
    pts = read_step_observations([DATA / "vllm_metrics_phase1.prom", DATA / "vllm_metrics_phase2.prom"])
    assert [p.label.rsplit(" (", 1)[1] for p in pts] == ["vllm_metrics_phase1.prom)", "vllm_metrics_phase2.prom)"]
    assert len({p.label for p in pts}) == 2
    one = read_step_observations(DATA / "vllm_metrics_phase1.prom")
    assert "(" not in one[0].label                                  # a label only one file uses stays as it was


def test_a_csv_row_with_more_cells_than_the_header_is_refused(tmp_path):
    """A row of 3 cells under a 2-column header was read by position; trailing empty cells (a spreadsheet's) are
    still accepted."""
    f = tmp_path / "extra.csv"
    f.write_text("num_requests,step_time_s\n1,0.0076\n8,0.0079,5\n")
    with pytest.raises(SpecsimInputError) as e:
        observations_from_csv(f)
    assert (e.value.line, e.value.expected, e.value.got) == (3, "at most 2 cells (the header's columns)", "3 cells")
    f.write_text("num_requests,step_time_s\n1,0.0076,,\n8,0.0079,\n")
    assert [o.step_time_s for o in observations_from_csv(f)] == [0.0076, 0.0079]


@pytest.mark.parametrize("value, shown", [("NaN", "NaN"), ("-5", "-5.0"), ("+Inf", "inf")])
def test_prometheus_nan_negative_or_infinite_counter_is_refused_naming_line_and_metric(tmp_path, value, shown):
    # a NaN or negative sum reached the fit as a scipy traceback ("Residuals are not finite")
    n = len((DATA / "vllm_metrics_phase1.prom").read_text().splitlines())
    p = _edited(tmp_path, add=f'vllm:inter_token_latency_seconds_sum{{engine="0",model_name="acme/dense-32b"}} {value}\n')
    with pytest.raises(SpecsimInputError) as e:
        observations_from_prometheus(p)
    assert (e.value.line, e.value.field, e.value.got) == (n + 1, "vllm:inter_token_latency_seconds_sum", shown)
    assert "a finite number >= 0" in str(e.value)
    p = _edited(tmp_path, add=f'vllm:generation_tokens_total{{engine="0",model_name="acme/dense-32b"}} {value}\n')
    with pytest.raises(SpecsimInputError, match=f"line {n + 1}, field 'vllm:generation_tokens_total'"):
        observations_from_prometheus(p)


def test_a_null_json_document_or_line_is_refused_as_not_an_object(tmp_path):
    # `null` gave an AttributeError in profile fit and a TypeError in import-results
    from specsim.hardware.measured import read_results

    p = tmp_path / "null.json"
    p.write_text("null")
    for read in (observations_from_vllm_results, lambda f: read_results([f])):
        with pytest.raises(SpecsimInputError) as e:
            read(p)
        assert (e.value.line, e.value.expected, e.value.got) == (1, "a JSON object (or one per line)", "null")
    p.write_text((DATA / "vllm_c16.json").read_text().replace("\n", " ") + "\nnull\n")
    with pytest.raises(SpecsimInputError, match="line 2: expected a JSON object .*, got null"):
        observations_from_vllm_results(p)


def test_outlier_rows_are_refused_by_line_before_a_fit(tmp_path):
    from specsim.hardware.step_observation import check_outliers

    text = (DATA / "steps.csv").read_text()
    check_outliers(observations_from_csv(DATA / "steps.csv"))          # 7.9 to 41.5 ms: no outlier
    path = tmp_path / "out.csv"
    path.write_text(text.replace("32,32,1150,13.60", "32,32,1150,9.10e9"))
    with pytest.raises(SpecsimInputError) as e:
        check_outliers(observations_from_csv(path))
    assert str(e.value) == (
        f"{path}, line 4, field 'step time': expected a step within 100x of the others' and under 10x the slowest a "
        "served model takes: fix or drop this point (B=32) before fitting, got 9.1e+09 ms, 4.6e+08x the median of "
        "the 5 other points (19.8 ms), 1.18e+07x the slowest step at 32 tokens (0.771 s)")
    # a second outlier, far below the others: counted with its line
    path.write_text(text.replace("32,32,1150,13.60", "32,32,1150,9.10e9").replace("64,64,1160,19.80",
                                                                                   "64,64,1160,0.0198"))
    with pytest.raises(SpecsimInputError) as e:
        check_outliers(observations_from_csv(path))
    assert str(e.value).endswith("(0.771 s); 1 more outlier (line 5)")
    path.write_text(text.replace("32,32,1150,13.60", "32,32,1150,0.0198"))
    with pytest.raises(SpecsimInputError, match=r"line 4, .* got 0.0198 ms, 1/1,000 of the median of the 5 other "
                                                r"points \(19.8 ms\)$"):
        check_outliers(observations_from_csv(path))
    # two points: no median of others to compare with, only the slowest plausible step
    path.write_text("batch_tokens,step_time_s\n1,0.0079\n8,7\n")
    with pytest.raises(SpecsimInputError, match=r"line 3, .* got 7000 ms, 19.8x the slowest step at 8 tokens "
                                                r"\(0.353 s\)$"):
        check_outliers(observations_from_csv(path))
    for steps in ("0.0079\n8,0.7", "7\n8,7.9"):     # plausible; or every point slow: other units, the fit says so
        path.write_text(f"batch_tokens,step_time_s\n1,{steps}\n")
        check_outliers(observations_from_csv(path))


def test_profile_fit_names_the_outlier_row(tmp_path, monkeypatch, capsys):
    from helpers import run_cli

    path = tmp_path / "out.csv"
    path.write_text((DATA / "steps.csv").read_text().replace("32,32,1150,13.60", "32,32,1150,9.10e9"))
    monkeypatch.setenv("COLUMNS", "200")
    code = run_cli(["profile", "fit", str(path), "--model", "llama2-7b", "--gpu", "h100", "--out",
                    str(tmp_path / "y.json")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"specsim: error: {path}, line 4, field 'step time'" in err
    assert "got 9.1e+09 ms, 4.6e+08x the median of the 5 other points (19.8 ms)" in err
    assert not (tmp_path / "y.json").exists()
