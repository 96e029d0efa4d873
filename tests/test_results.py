"""vLLM-format results of simulated runs, and measured vllm / guidellm results as frontier points.

The samples in tests/data are hand-written from the documented layouts (README there); the expected
values below are computed from them by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.analysis.results import (VLLM_HEAD_KEYS, load_measured, measured_for_plot, read_guidellm_result,
                             read_results, read_vllm_result, save_measured, vllm_result, write_vllm_result)
from specsim.simulation import simulate
from specsim.workload import save_trace, synth_trace
from helpers import homogeneous_scenario

DATA = Path(__file__).parent / "data"
runner = CliRunner()
_register()


# --------------------------------------------------------------------------------------------- readers
def test_vllm_summary_file_point():
    """No per-request lists: TPS/user = 1000 / mean_tpot_ms = 50; 2375.1 tok/s over 2 GPUs = 1187.55 (48 users
    at 50 tok/s less the TTFT share: 48 x 480 tokens / (0.12 + 479 x 0.02 s) = 2375.3, Little's law)."""
    (p,) = read_vllm_result(DATA / "vllm_result_sample.json", gpus=2)
    assert p.tool == "vllm" and p.load == "concurrency 48"
    assert p.tps_per_user == pytest.approx(50.0) and p.tps_per_user_basis == "1000 / mean TPOT"
    assert p.throughput_per_gpu == pytest.approx(1187.55)
    assert p.metrics["p99_ttft_ms"] == 210.0 and "latencies" not in p.metrics
    assert p.label == "measured: meta-llama/Llama-3.1-8B-Instruct (concurrency 48)"


def test_vllm_detailed_file_uses_per_request_tps():
    """(11-1)/(0.6-0.1) = 20 and (21-1)/(0.7-0.2) = 40 tok/s; the 1-token request is left out: mean 30.

    1000 / mean TPOT would give 26.7 (Jensen: the harmonic form is lower)."""
    (p,) = read_vllm_result(DATA / "vllm_result_detailed_sample.json")
    assert p.tps_per_user == pytest.approx(30.0) and p.tps_per_user_basis == "per-request"
    assert p.load == "rate 2.0 req/s" and p.label.startswith("measured: eagle3-run")
    assert p.throughput_per_gpu == pytest.approx(22.0)


def test_vllm_detailed_without_latencies_sums_itls(tmp_path):
    obj = json.loads((DATA / "vllm_result_detailed_sample.json").read_text())
    del obj["latencies"]                                  # older files: latency = ttft + sum(itls)
    f = tmp_path / "r.json"
    f.write_text(json.dumps(obj))
    assert read_vllm_result(f)[0].tps_per_user == pytest.approx(30.0)


def test_an_sglang_bench_serving_file_with_medians_only_is_read_and_named(tmp_path):
    # SGLang's bench_serving writes vLLM's keys with backend "sglang"; a file may give only the medians
    obj = json.loads((DATA / "vllm_result_sample.json").read_text())
    obj["backend"] = "sglang-oai"
    for key in ("mean_tpot_ms", "mean_itl_ms"):
        del obj[key]
    f = tmp_path / "sglang.json"
    f.write_text(json.dumps(obj))
    (p,) = read_results([f])
    assert p.tool == "sglang" and p.tps_per_user_basis == "1000 / median TPOT"
    assert p.tps_per_user == pytest.approx(1000.0 / 19.5)
    del obj["median_tpot_ms"]
    f.write_text(json.dumps(obj))
    (p,) = read_vllm_result(f)
    assert p.tps_per_user == pytest.approx(1000.0 / 19.0) and p.tps_per_user_basis == "1000 / median ITL"
    del obj["median_itl_ms"]
    f.write_text(json.dumps(obj))
    (p,) = read_vllm_result(f)
    assert p.tps_per_user is None and p.tps_per_user_basis == "none: no TPOT or ITL in the file"   # not plotted
    obj["accept_length"] = 3.2                                   # SGLang's speculative runs say so in the label
    f.write_text(json.dumps(obj))
    assert read_vllm_result(f)[0].label.endswith("(concurrency 48, speculative: acceptance length 3.2)")


def test_vllm_appended_file_gives_one_point_per_line():
    pts = read_vllm_result(DATA / "vllm_result_append_sample.json", gpus=4)
    assert [p.load for p in pts] == ["rate 2.0 req/s", "rate 4.0 req/s"]
    assert [p.tps_per_user for p in pts] == pytest.approx([100.0, 80.0])
    assert [p.throughput_per_gpu for p in pts] == pytest.approx([125.0, 250.0])


def test_guidellm_report_points():
    pts = read_guidellm_result(DATA / "guidellm_report_sample.json")
    assert [p.load for p in pts] == ["concurrency 4", "constant rate 3.0 req/s"]
    assert [p.tps_per_user for p in pts] == pytest.approx([80.0, 50.0])       # 1000 / 12.5 and 1000 / 20
    assert [p.throughput_per_gpu for p in pts] == pytest.approx([310.7739, 384.0])   # 4 / 1.6475 s and 3 req/s, x 128
    m = pts[0].metrics
    assert m["p99.9_tpot_ms"] == 19.5 and m["median_tpot_ms"] == 12.0 and m["p90_itl_ms"] == 15.0
    assert m["mean_e2el_ms"] == pytest.approx(1647.5)          # request_latency in seconds: 0.06 + 127 x 0.0125
    assert m["completed"] == 146 and m["request_throughput"] == pytest.approx(2.4279)


def test_read_results_detects_the_format_and_round_trips(tmp_path):
    pts = read_results([DATA / "vllm_result_sample.json", DATA / "guidellm_report_sample.json"], gpus=1)
    assert [p.tool for p in pts] == ["vllm", "guidellm", "guidellm"]
    f = save_measured(pts, tmp_path / "measured.json")
    back = load_measured(f)
    assert [b.to_dict() for b in back] == [p.to_dict() for p in pts]
    assert len(measured_for_plot([tmp_path], [])) == 3          # <dir>/measured.json found
    assert len(measured_for_plot([tmp_path], [f])) == 3         # the same file only once


def test_reader_errors(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{"hello": 1}')
    with pytest.raises(SpecsimInputError, match="guidellm report"):
        read_results([f])
    f.write_text('{"output_throughput": "fast"}')
    with pytest.raises(SpecsimInputError, match="line 1, field 'output_throughput'"):
        read_vllm_result(f)
    f.write_text('{"benchmarks": []}')
    with pytest.raises(SpecsimInputError, match="benchmarks"):
        read_guidellm_result(f)
    f.write_text("{not json\n")
    with pytest.raises(SpecsimInputError, match="malformed JSON"):
        read_results([f])
    with pytest.raises(SpecsimInputError, match="gpus"):
        read_vllm_result(DATA / "vllm_result_sample.json", gpus=0)
    with pytest.raises(SpecsimInputError, match="import-results"):
        load_measured(DATA / "vllm_result_sample.json")


# --------------------------------------------------------------------------------------------- writer
@pytest.fixture(scope="module")
def open_run():
    """Open loop on 40 requests arriving every 0.25 s (4 req/s), fixed lengths, step log kept."""
    tr = synth_trace(40, 4.0, arrival="constant", prompt_len=200, output_len=32)
    return simulate(tr, "dspark", homogeneous_scenario(), seed=0, record_step_log=True)


def test_vllm_result_keys_and_values(open_run):
    s = open_run.summary
    d = vllm_result(open_run)
    json.loads(json.dumps(d))                                  # plain JSON (no NaN or numpy types)
    assert set(VLLM_HEAD_KEYS) <= set(d)
    for m in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p50", "p90", "p99", "p99.9"):
            assert f"{stat}_{m}_ms" in d
    assert d["request_rate"] == pytest.approx(4.0) and d["max_concurrency"] is None
    assert d["burstiness"] is None                              # constant spacing: CV 0, no gamma shape
    assert d["completed"] == s["measured_requests"] == 40 and d["failed"] == 0
    assert d["total_output_tokens"] == 40 * 32 and d["total_input_tokens"] == 40 * 200
    assert d["output_throughput"] == s["output_throughput"]
    assert d["mean_ttft_ms"] == pytest.approx(s["mean_ttft_ms"])
    assert d["median_ttft_ms"] == pytest.approx(s["median_ttft_ms"]) == pytest.approx(d["p50_ttft_ms"])
    assert d["p99_tpot_ms"] == pytest.approx(s["p99_tpot_ms"])
    assert d["mean_itl_ms"] == s["mean_itl_ms"]
    assert np.mean(d["latencies"]) * 1e3 == pytest.approx(d["mean_e2el_ms"]) == pytest.approx(s["mean_e2el_ms"])
    assert d["p90_ttft_ms"] <= d["p99_ttft_ms"] <= d["p99.9_ttft_ms"]
    assert d["spec_decode_acceptance_length"] == pytest.approx(s["mean_acceptance_length"])
    assert d["spec_decode_acceptance_rate"] == pytest.approx(100 * s["acceptance_rate"])
    rates = d["spec_decode_per_position_acceptance_rates"]
    assert len(rates) == s["gamma"] and all(a >= b for a, b in zip(rates, rates[1:]))   # survival decreases
    # an 0.8 constant alpha: position k is reached with probability <= 0.8^k when fully verified
    assert rates[0] <= 0.8 + 0.05
    assert d["max_concurrent_requests"] >= 1 and d["max_output_tokens_per_s"] > 0


def test_vllm_result_closed_loop_and_detailed(tmp_path):
    tr = synth_trace(48, 4.0, prompt_len=100, output_len=16)
    res = simulate(tr, "mtp1", homogeneous_scenario(), seed=0, concurrency=4)
    d = vllm_result(res, detailed=True, label="x", model_id="m", percentiles=(50, 95))
    assert d["request_rate"] == "inf" and d["max_concurrency"] == 4 and d["label"] == "x" and d["model_id"] == "m"
    assert d["completed"] == res.summary["measured_requests"] and len(d["latencies"]) == d["completed"]
    assert "p95_ttft_ms" in d and "p99_ttft_ms" not in d
    assert len(d["input_lens"]) == 48 and d["output_lens"][0] == 16
    assert d["spec_decode_acceptance_length"] == pytest.approx(res.summary["mean_acceptance_length"])
    assert d["spec_decode_per_position_acceptance_rates"] == []          # no step log kept
    f = write_vllm_result(res, tmp_path / "r.json")
    (p,) = read_vllm_result(f)                                            # our own file reads back as a point
    assert p.throughput_per_gpu == pytest.approx(res.summary["output_throughput"])
    with pytest.raises(SpecsimInputError, match="percentiles"):
        vllm_result(res, percentiles=(0,))


# --------------------------------------------------------------------------------------------- CLI
def test_run_result_format_cli(tmp_path):
    trace = tmp_path / "t.jsonl"
    save_trace(synth_trace(30, 4.0, prompt_len=100, output_len=16), trace)
    out = tmp_path / "run"
    r = runner.invoke(app, ["run", "--trace", str(trace), "--policy", "mtp1", "--concurrency", "4", "--out",
                            str(out), "--result-format", "vllm", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads((out / "vllm_result.json").read_text())
    assert d["completed"] == json.loads((out / "summary.json").read_text())["measured_requests"]
    r = runner.invoke(app, ["run", "--trace", str(trace), "--result-format", "vllm"])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == "out"
    r = runner.invoke(app, ["run", "--trace", str(trace), "--result-format", "csv", "--out", str(out)])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == "result_format"


def test_import_results_cli_and_plot(tmp_path):
    out = tmp_path / "measured.json"
    r = runner.invoke(app, ["import-results", str(DATA / "vllm_result_sample.json"),
                            str(DATA / "guidellm_report_sample.json"), "--gpus", "2", "--out", str(out)],
                      env={"COLUMNS": "60"})
    assert r.exit_code == 0, r.output
    pts = load_measured(out)
    assert [p.throughput_per_gpu for p in pts] == pytest.approx([1187.55, 155.38695, 192.0])
    # --out naming a folder (a sweep's) writes its measured.json, where specsim plot looks
    r = runner.invoke(app, ["import-results", str(DATA / "vllm_result_sample.json"), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert [p.throughput_per_gpu for p in load_measured(tmp_path / "measured.json")] == pytest.approx([2375.1])


def test_import_results_into_a_sweep_of_another_model_says_so(tmp_path):
    """The sample result is of meta-llama/Llama-3.1-8B-Instruct; a sweep of the default scenario simulates
    Llama-2-7b-hf: the import notes the mismatch. The same model under another suffix or organisation is not one."""
    from specsim.analysis.results import _model_key, other_model_note

    assert _model_key("meta-llama/Llama-2-7b-chat-hf") == _model_key("Llama-2-7b-hf") == "llama-2-7b"
    assert _model_key("meta-llama/Llama-3.1-8B-Instruct") == "llama-3.1-8b"
    (tmp_path / "sweep.json").write_text(json.dumps({"scenario": {"profile": {"name": "h100-llama2-7b-tp1",
                                                                              "lookup": None}}}))
    r = runner.invoke(app, ["import-results", str(DATA / "vllm_result_sample.json"), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert ("note: the measured points are of meta-llama/Llama-3.1-8B-Instruct, the sweep in "
            f"{tmp_path} simulates Llama-2-7b-hf (profile h100-llama2-7b-tp1)") in text
    pts = load_measured(tmp_path / "measured.json")
    for p in pts:
        p.metrics["model_id"] = "meta-llama/Llama-2-7b-chat-hf"
    assert other_model_note(pts, tmp_path) is None
    assert other_model_note(pts, tmp_path / "no-sweep-here") is None


def test_plot_frontiers_draws_measured_points(tmp_path):
    """A measured point far from the simulated ones stretches the axes: the PNG differs from one without it."""
    from specsim.analysis.plots import plot_frontiers
    from specsim.sweep import SweepSpec, load_records, run_sweep

    tr = synth_trace(24, 4.0, prompt_len=100, output_len=16)
    spec = SweepSpec(policies=("mtp1",), concurrency=(1, 4), seeds=(0,), num_requests=12, requests_per_user=4)
    run_sweep(spec, homogeneous_scenario(), tr, tmp_path / "sw", executor="serial", progress=False)
    recs = [("sw", load_records(tmp_path / "sw"))]
    pts = read_vllm_result(DATA / "vllm_result_sample.json")
    a = plot_frontiers(recs, tmp_path / "a.png").read_bytes()
    b = plot_frontiers(recs, tmp_path / "b.png", measured=pts).read_bytes()
    assert a[:8] == b"\x89PNG\r\n\x1a\n" and a != b
    save_measured(pts, tmp_path / "sw" / "measured.json")
    r = runner.invoke(app, ["plot", str(tmp_path / "sw"), "--out", str(tmp_path / "plots")])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "plots" / "frontiers.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_negative_tpot_or_throughput_is_refused(tmp_path):
    """A result whose mean TPOT or throughput is < 0 is an input error naming the object and the field (a fresh
    user imported mean_tpot_ms: -5 and got TPS/user -200); a TPOT of 0 (no second token) leaves TPS/user unknown."""
    import json

    from specsim.hardware.measured import read_vllm_result

    for key, value in (("mean_tpot_ms", -5.0), ("output_throughput", -1.0)):
        f = tmp_path / f"{key}{value}.json"
        f.write_text(json.dumps({"output_throughput": 100.0, "mean_tpot_ms": 20.0, key: value}))
        with pytest.raises(SpecsimInputError, match=f"line 1, field '{key}'"):
            read_vllm_result(f)
    f = tmp_path / "zero.json"
    f.write_text(json.dumps({"output_throughput": 100.0, "mean_tpot_ms": 0.0}))
    assert read_vllm_result(f)[0].tps_per_user is None


@pytest.mark.parametrize("key, value, shown", [("itls", [["x"]] * 2, "'x' at request 1, gap 1"),
                                               ("ttfts", [0.1, "0.2"], "'0.2' at entry 2"),
                                               ("output_lens", ["11", 21], "'11' at entry 1"),
                                               ("latencies", "0.6", "str '0.6'")])
def test_a_detailed_list_with_a_non_number_is_refused(tmp_path, key, value, shown):
    """A --save-detailed list holding text (itls [["x"]] gave a TypeError traceback in profile fit and
    import-results; text in ttfts or output_lens was silently skipped) is an error naming the file, the list
    and what each entry must be."""
    obj = json.loads((DATA / "vllm_result_detailed_sample.json").read_text())
    obj[key] = value
    f = tmp_path / "r.json"
    f.write_text(json.dumps(obj))
    with pytest.raises(SpecsimInputError) as e:
        read_vllm_result(f)
    assert (e.value.file, e.value.line, e.value.field, e.value.got) == (str(f), 1, key, shown)
    assert "seconds" in e.value.expected if key != "output_lens" else "token counts" in e.value.expected
    r = runner.invoke(app, ["import-results", str(f), "--out", str(tmp_path / "m.json")])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == key


@pytest.mark.parametrize("key, value, shown", [("mean_itl_ms", "7.5", "'7.5'"), ("mean_itl_ms", float("inf"), "inf"),
                                               ("mean_ttft_ms", "abc", "'abc'"), ("completed", True, "True")])
def test_a_summary_figure_that_is_not_a_finite_number_is_refused(tmp_path, key, value, shown):
    """mean_itl_ms "7.5" or Infinity fell back to the TPOT, and mean_ttft_ms "abc" was ignored, in silence; null
    (not measured) is still read as absent."""
    obj = {"output_throughput": 100.0, "mean_tpot_ms": 20.0, "mean_itl_ms": 21.0, key: value}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(obj))
    with pytest.raises(SpecsimInputError) as e:
        read_vllm_result(f)
    assert (e.value.file, e.value.line, e.value.field, e.value.got) == (str(f), 1, key, shown)
    f.write_text(json.dumps({**obj, key: None}))
    assert read_vllm_result(f)[0].metrics[key] is None
