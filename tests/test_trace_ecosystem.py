"""More trace formats (BurstGPT, column-mapped tables, lengths CSVs) and the extended ``trace synth``.

Expected values are computed by hand from the samples in tests/data (README there).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.workload import load_trace, parse_length_spec, save_trace, synth_trace
from specsim.workload import convert_burstgpt, convert_table, load_lengths_csv, parse_column_map

DATA = Path(__file__).parent / "data"
BURST = DATA / "burstgpt_sample.csv"
runner = CliRunner()
_register()


# --------------------------------------------------------------------------------------------- BurstGPT
def test_burstgpt_drops_failed_rows_and_counts_them():
    """Rows 1 and 4 have 0 response tokens; the four others keep their row ids and relative times."""
    tr, info = convert_burstgpt(BURST)
    assert info == {"rows": 6, "model_filtered": 0, "failed": 2, "dropped_failed": 2, "kept": 4}
    assert tr.request_id.tolist() == ["0", "2", "3", "5"]
    assert tr.arrival_s.tolist() == [0.0, 4.0, 9.0, 28.0]          # Timestamps 3, 7, 12, 31 minus 3
    assert tr.prompt_tokens.tolist() == [512, 200, 300, 900]
    assert tr.output_tokens.tolist() == [128, 50, 400, 120]
    assert set(tr.domain) == {"chat"}


def test_burstgpt_model_filter_and_keep_failed():
    """GPT-4 has rows 1 (failed, t=7) and 3 (t=12); kept failed rows become 1-token requests."""
    tr, info = convert_burstgpt(BURST, model="GPT-4", failed="keep")
    assert info["model_filtered"] == 4 and info["failed"] == 1 and info["dropped_failed"] == 0
    assert tr.request_id.tolist() == ["1-failed", "3"]
    assert tr.arrival_s.tolist() == [0.0, 5.0]
    assert tr.output_tokens.tolist() == [1, 400]
    tr2, info2 = convert_burstgpt(BURST, model="GPT-4")
    assert tr2.request_id.tolist() == ["3"] and info2["dropped_failed"] == 1


def test_burstgpt_errors(tmp_path):
    with pytest.raises(SpecsimInputError, match="only models \\['ChatGPT', 'GPT-4'\\]"):
        convert_burstgpt(BURST, model="GPT-5")
    with pytest.raises(SpecsimInputError, match="failed"):
        convert_burstgpt(BURST, failed="maybe")
    bad = tmp_path / "b.csv"
    bad.write_text("Timestamp,Model,Request tokens\n1,ChatGPT,5\n")
    with pytest.raises(SpecsimInputError, match="Response tokens"):
        convert_burstgpt(bad)
    bad.write_text("Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,5,2\nx,ChatGPT,5,2\n")
    with pytest.raises(SpecsimInputError, match="line 3, field 'Timestamp'"):
        convert_burstgpt(bad)
    bad.write_text("Timestamp,Model,Request tokens,Response tokens\n1,ChatGPT,5,0\n")
    with pytest.raises(SpecsimInputError, match="not failed"):
        convert_burstgpt(bad)


def test_burstgpt_cli_prints_failed_count(tmp_path):
    out = tmp_path / "b.jsonl"
    r = runner.invoke(app, ["trace", "convert", str(BURST), str(out), "--from", "burstgpt"])
    assert r.exit_code == 0, r.output
    assert "2 failed (Response tokens 0) dropped" in " ".join(r.output.split())
    assert len(load_trace(out)) == 4
    r = runner.invoke(app, ["trace", "convert", str(BURST), str(out), "--from", "burstgpt", "--model", "GPT-4",
                            "--keep-failed"])
    assert r.exit_code == 0 and load_trace(out).request_id.tolist() == ["1-failed", "3"]


# --------------------------------------------------------------------------------------------- generic tables
def test_table_csv_ms_origin_first_sorted_with_prefix(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("ts_ms,in,out,sys,sys_len\n1500,100,10,a,20\n1000,50,5,,\n2500,70,7,a,20\n")
    tr = convert_table(p, "arrival_s=ts_ms,prompt_tokens=in,output_tokens=out,prefix_group=sys,prefix_tokens=sys_len",
                       time_unit="ms")
    assert tr.arrival_s.tolist() == [0.0, 0.5, 1.5]                # sorted, from the earliest (1000 ms)
    assert tr.request_id.tolist() == ["1", "0", "2"]               # data-row indices travel with the rows
    assert tr.prompt_tokens.tolist() == [50, 100, 70]
    assert tr.prefix_group.tolist() == [None, "a", "a"] and tr.prefix_tokens.tolist() == [0, 20, 20]
    out = tmp_path / "t.jsonl"
    save_trace(tr, out)
    assert load_trace(out).content_hash() == tr.content_hash()


def test_table_unix_milliseconds_keep_their_digits_and_are_not_seconds(tmp_path):
    """Unix times in ms (about 1.7e12): relative arrivals are taken in ms before scaling, so 442 ms is 0.442 s
    exactly (not 0.442000150...); read as seconds (no --time-unit) they are refused, naming --time-unit ms (a
    fresh user's report: a 17.5 s log became 17,503 s without a word)."""
    p = tmp_path / "log.csv"
    p.write_text("ts,in,out\n1764547200803,506,129\n1764547201245,1492,140\n1764547218306,70,7\n")
    tr = convert_table(p, "arrival_s=ts,prompt_tokens=in,output_tokens=out", time_unit="ms")
    assert tr.arrival_s.tolist() == [0.0, 0.442, 17.503]
    with pytest.raises(SpecsimInputError, match=r"line 2, field 'ts'.*--time-unit ms"):    # the first such line
        convert_table(p, "arrival_s=ts,prompt_tokens=in,output_tokens=out")


def test_table_unix_seconds_with_fractions_read_as_written(tmp_path):
    """Unix seconds with a fraction: float64 holds 1700000000.442 only to about 0.24 us, so the relative arrival
    read 0.4419999...; it is rounded to the decimal step the magnitude resolves (1 us), and the same log in
    Unix ms converts to the same trace, hash included; small arrivals keep their digits."""
    cmap = "arrival_s=ts,prompt_tokens=in,output_tokens=out"
    (tmp_path / "s.csv").write_text("ts,in,out\n1700000000.000,10,5\n1700000000.442,10,5\n1700000003.1,10,5\n")
    (tmp_path / "ms.csv").write_text("ts,in,out\n1700000000000,10,5\n1700000000442,10,5\n1700000003100,10,5\n")
    s, ms = convert_table(tmp_path / "s.csv", cmap), convert_table(tmp_path / "ms.csv", cmap, time_unit="ms")
    assert s.arrival_s.tolist() == ms.arrival_s.tolist() == [0.0, 0.442, 3.1]
    # a numeric origin, fractional ms and us: the same arrivals as written (a fresh user's 0.09999990463 s)
    assert convert_table(tmp_path / "s.csv", cmap, origin=1700000000).arrival_s.tolist() == [0.0, 0.442, 3.1]
    assert convert_table(tmp_path / "ms.csv", cmap, time_unit="ms", origin=1700000000).arrival_s.tolist() == [
        0.0, 0.442, 3.1]
    (tmp_path / "frac.csv").write_text("ts,in,out\n1700000000000,10,5\n1700000003023.456,10,5\n")
    assert convert_table(tmp_path / "frac.csv", cmap, time_unit="ms").arrival_s.tolist() == [0.0, 3.023456]
    (tmp_path / "us.csv").write_text("ts,in,out\n1700000000000000,10,5\n1700000000200000,10,5\n")
    assert convert_table(tmp_path / "us.csv", cmap, time_unit="us").arrival_s.tolist() == [0.0, 0.2]
    (tmp_path / "small.csv").write_text("ts,in,out\n0.000001,10,5\n0.0000025,10,5\n")
    assert convert_table(tmp_path / "small.csv", cmap).arrival_s.tolist() == [0.0, 1.5e-06]


def test_table_format_is_read_from_the_content_not_the_suffix(tmp_path):
    cmap = "arrival_s=t,prompt_tokens=p,output_tokens=o"
    (tmp_path / "arr.json").write_text('[{"t": 1.0, "p": 10, "o": 5}]\n')     # read as a CSV of one header line
    with pytest.raises(SpecsimInputError, match="expected CSV or JSON lines .one object per line., got a JSON array"):
        convert_table(tmp_path / "arr.json", cmap)
    (tmp_path / "log.txt").write_text('\n{"t": 1.0, "p": 10, "o": 5}\n{"t": 2.5, "p": 12, "o": 6}\n')
    (tmp_path / "log.dat").write_text("t,p,o\n1.0,10,5\n2.5,12,6\n")
    for name in ("log.txt", "log.dat"):
        tr = convert_table(tmp_path / name, cmap)
        assert tr.arrival_s.tolist() == [0.0, 1.5] and tr.output_tokens.tolist() == [5, 6]


def test_table_jsonl_origins_and_units(tmp_path):
    p = tmp_path / "log.jsonl"
    p.write_text('{"t": 10, "p": 5, "o": 2, "id": "x", "kind": "code"}\n'
                 '{"t": 12.5, "p": 6, "o": 3, "id": "y", "kind": "math"}\n')
    cmap = {"arrival_s": "t", "prompt_tokens": "p", "output_tokens": "o", "request_id": "id", "domain": "kind"}
    assert convert_table(p, cmap, origin="zero").arrival_s.tolist() == [10.0, 12.5]
    assert convert_table(p, cmap, origin=4).arrival_s.tolist() == [6.0, 8.5]
    tr = convert_table(p, cmap, time_unit="min")
    assert tr.arrival_s.tolist() == [0.0, 150.0] and tr.domain.tolist() == ["code", "math"]
    with pytest.raises(SpecsimInputError, match="at or after the origin"):
        convert_table(p, cmap, origin=11)
    d = tmp_path / "d.csv"
    d.write_text("when,p,o\n2024-05-01 12:00:00.5,5,2\n2024-05-01 12:00:03,5,2\n")
    assert convert_table(d, "arrival_s=when,prompt_tokens=p,output_tokens=o",
                         time_unit="datetime").arrival_s.tolist() == [0.0, 2.5]


def test_table_errors(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("ts,in,out\n0,10,0\n")
    with pytest.raises(SpecsimInputError, match="line 2, field 'out': expected an int in \\[1, 2\\^53\\]"):
        convert_table(p, "arrival_s=ts,prompt_tokens=in,output_tokens=out")
    with pytest.raises(SpecsimInputError, match="field 'nope'"):
        convert_table(p, "arrival_s=ts,prompt_tokens=in,output_tokens=nope")
    for bad, what in [("arrival_s=ts,prompt_tokens=in", "output_tokens"), ("arrival_s=ts,foo=in", "foo"),
                      ("arrival_s", "field=column"),
                      ("arrival_s=a,arrival_s=b,prompt_tokens=c,output_tokens=d", "twice"),
                      ("arrival_s=a,prompt_tokens=b,output_tokens=c,prefix_group=g", "together")]:
        with pytest.raises(SpecsimInputError, match=what):
            parse_column_map(bad)
    with pytest.raises(SpecsimInputError, match="time_unit"):
        convert_table(p, "arrival_s=ts,prompt_tokens=in,output_tokens=in", time_unit="fortnight")
    r = runner.invoke(app, ["trace", "convert", str(p), str(tmp_path / "o.jsonl"), "--from", "table"])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == "map"


def test_lengths_csv(tmp_path):
    prompt, output = load_lengths_csv(DATA / "lengths_sample.csv")
    assert prompt.tolist() == [100, 2000, 512] and output.tolist() == [10, 300, 64]
    bad = tmp_path / "l.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(SpecsimInputError, match="num_prefill_tokens,num_decode_tokens"):
        load_lengths_csv(bad)


# --------------------------------------------------------------------------------------------- synth
def test_synth_defaults_unchanged_by_new_options():
    """The new keyword arguments at their defaults give the same trace as before (streams 0-2 kept)."""
    a = synth_trace(50, 3.0, arrival="gamma", cv=2.0, mix="chat=0.5,code=0.5", seed=7)
    b = synth_trace(50, 3.0, arrival="gamma", cv=2.0, mix="chat=0.5,code=0.5", seed=7, duration_s=None,
                    span_s=None, output_len=None, prompt_len=None, lengths=None, prefix_groups=0)
    assert a.content_hash() == b.content_hash()


def test_synth_constant_arrivals_duration_and_fixed_lengths():
    tr = synth_trace(None, 4.0, arrival="constant", duration_s=10.0, output_len=128, prompt_len="uniform:10:20")
    assert len(tr) == 40                                            # arrivals k / 4 for k = 0..39 < 10 s
    assert np.allclose(tr.arrival_s, np.arange(40) / 4.0)
    assert set(tr.output_tokens.tolist()) == {128}
    assert tr.prompt_tokens.min() >= 10 and tr.prompt_tokens.max() <= 20


def test_synth_poisson_duration_stays_inside():
    tr = synth_trace(None, 20.0, duration_s=30.0, seed=3)
    assert tr.arrival_s.max() < 30.0 and tr.arrival_s[0] == 0.0
    assert abs(len(tr) - 600) < 4 * math.sqrt(600)                  # Poisson count, mean rate x duration


def test_synth_span_rescales_the_drawn_arrivals():
    base = synth_trace(30, 2.0, arrival="gamma", cv=3.0, seed=1)
    tr = synth_trace(30, 2.0, arrival="gamma", cv=3.0, seed=1, span_s=60.0)
    assert tr.arrival_s[-1] == 60.0
    assert np.allclose(tr.arrival_s, base.arrival_s * 60.0 / base.arrival_s[-1], atol=2e-6)
    assert np.array_equal(tr.prompt_tokens, base.prompt_tokens)


def test_synth_lengths_from_csv_keep_pairs():
    pairs = load_lengths_csv(DATA / "lengths_sample.csv")
    tr = synth_trace(200, 5.0, lengths=pairs, seed=2, max_prompt_tokens=1024)
    allowed = {(100, 10), (1024, 300), (512, 64)}                   # 2000 clipped to the 1024 maximum
    assert set(zip(tr.prompt_tokens.tolist(), tr.output_tokens.tolist())) == allowed


def test_synth_prefix_groups(tmp_path):
    tr = synth_trace(None, 2.0, prefix_groups=3, prefix_tokens=500, questions_per_group=4, prompt_len=20)
    assert len(tr) == 12
    groups, counts = np.unique(tr.prefix_group.astype(str), return_counts=True)
    assert groups.tolist() == ["g0", "g1", "g2"] and counts.tolist() == [4, 4, 4]
    assert set(tr.prompt_tokens.tolist()) == {520} and set(tr.prefix_tokens.tolist()) == {500}
    out = tmp_path / "p.jsonl"
    save_trace(tr, out)
    assert load_trace(out).content_hash() == tr.content_hash()
    tr2 = synth_trace(10, 2.0, prefix_groups=3, prefix_tokens=8)    # count given: groups k mod 3, shuffled
    assert sorted(np.unique(tr2.prefix_group.astype(str), return_counts=True)[1].tolist()) == [3, 3, 4]


@pytest.mark.parametrize("kwargs, field", [
    ({"num_requests": 5, "duration_s": 3.0}, "num_requests"),
    ({"num_requests": None}, "num_requests"),
    ({"num_requests": 5, "span_s": 3.0, "duration_s": 3.0}, "num_requests"),
    ({"num_requests": None, "span_s": 3.0, "duration_s": 3.0}, "span_s"),
    ({"num_requests": 1, "span_s": 3.0}, "span_s"),
    ({"num_requests": 5, "prefix_tokens": 10}, "prefix_tokens"),
    ({"num_requests": 5, "prefix_groups": 2}, "prefix_tokens"),
    ({"num_requests": 5, "arrival": "constant", "cv": 2.0}, "cv"),
    ({"num_requests": 5, "output_len": "uniform:5:2"}, "output_len"),
    ({"num_requests": 5, "prompt_len": 0}, "prompt_len"),
])
def test_synth_bad_combinations(kwargs, field):
    with pytest.raises(SpecsimInputError) as e:
        synth_trace(rate=2.0, **kwargs)
    assert e.value.field == field


def test_parse_length_spec():
    assert parse_length_spec(128, "x") == ("fixed", 128)
    assert parse_length_spec("fixed:7", "x") == ("fixed", 7)
    assert parse_length_spec("uniform:3:9", "x") == ("uniform", 3, 9)
    assert parse_length_spec("maxent:263.5:1024", "x") == ("maxent", 263.5, 1024)
    assert parse_length_spec(None, "x") is None
    for bad in ("maxent:1024:1024", "maxent:2:100", "maxent:abc:10", "maxent:50"):
        with pytest.raises(SpecsimInputError, match="maxent:MEAN:MAX"):
            parse_length_spec(bad, "x")


def test_synth_maxent_outputs_keep_the_sources_mean_under_its_cap():
    # a source that reports only a mean (263 tokens) under max_tokens 1024: the most-entropy spread, as the
    # validation spreads it (same multiset for the same n; the order is the trace's own draw)
    from specsim.studies.validation import spread_lengths

    tr = synth_trace(1000, 1.0, seed=5, output_len="maxent:263:1024", prompt_len=111)
    out = tr.output_tokens
    assert out.min() >= 2 and out.max() <= 1024 and abs(out.mean() - 263) < 2.7 and np.median(out) < 263
    assert (np.sort(out) == np.sort(spread_lengths(263.0, 1024, 1000))).all()
    assert (tr.prompt_tokens == 111).all()
    again = synth_trace(1000, 1.0, seed=5, output_len="maxent:263:1024", prompt_len=111)
    assert (again.output_tokens == out).all()


def test_synth_cli(tmp_path):
    out = tmp_path / "s.jsonl"
    r = runner.invoke(app, ["trace", "synth", "--rate", "2", "--duration", "5", "--arrival", "constant",
                            "--output-len", "64", "--out", str(out)])
    assert r.exit_code == 0, r.output
    tr = load_trace(out)
    assert len(tr) == 10 and set(tr.output_tokens.tolist()) == {64}
    r = runner.invoke(app, ["trace", "synth", "--rate", "2", "--out", str(out), "--prefix-groups", "2",
                            "--prefix-tokens", "100", "--questions-per-group", "3", "--span", "30",
                            "--lengths-csv", str(DATA / "lengths_sample.csv")])
    assert r.exit_code == 0, r.output
    tr = load_trace(out)
    assert len(tr) == 6 and tr.arrival_s[-1] == 30.0
    assert set(tr.prompt_tokens.tolist()) <= {200, 2100, 612}
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(x["prefix_tokens"] == 100 for x in lines)
    r = runner.invoke(app, ["trace", "synth", "--rate", "2", "--out", str(out)])
    assert isinstance(r.exception, SpecsimInputError)              # no count, duration or groups


def test_skip_bad_leaves_out_rows_that_do_not_convert_and_names_them(tmp_path):
    """--skip-bad: a real log's bad rows (a negative count, text for a number, a missing time) are left out and
    reported (line, column, value), the rest converts with their file row indices as ids; without it the first
    stops the conversion (a fresh user's report: one bad row stopped a whole log)."""
    p = tmp_path / "log.csv"
    p.write_text("ts,in,out\n1000,100,20\n1500,-4,30\n2000,50,x\n,10,10\n2500,60,40\n")
    mapping = "arrival_s=ts,prompt_tokens=in,output_tokens=out"
    with pytest.raises(SpecsimInputError) as e:
        convert_table(p, mapping, time_unit="ms")
    assert (e.value.line, e.value.field) == (5, "ts")        # the arrival column is checked first
    skipped: list = []
    tr = convert_table(p, mapping, time_unit="ms", on_skip=lambda *row: skipped.append(row))
    assert [line for line, _, _ in skipped] == [3, 4, 5]
    assert [col for _, col, _ in skipped] == ["in", "out", "ts"]
    assert list(tr.request_id) == ["0", "4"] and list(tr.arrival_s) == [0.0, 1.5]
    assert list(tr.prompt_tokens) == [100, 60] and list(tr.output_tokens) == [20, 40]
    r = CliRunner().invoke(app, ["trace", "convert", str(p), str(tmp_path / "t.jsonl"), "--from", "table",
                                 "--map", mapping, "--time-unit", "ms", "--skip-bad"])
    assert r.exit_code == 0, r.output
    assert "3 bad rows left out (--skip-bad); the first:" in " ".join(r.output.split())
    p.write_text("ts,in,out\n1000,-1,20\n")
    with pytest.raises(SpecsimInputError, match="at least one row that converts"):
        convert_table(p, mapping, on_skip=lambda *row: None)


def test_table_conversion_errors_read_plainly(tmp_path):
    """A fresh user's bad table rows read 'expected a finite number >= -inf' (a time column), 'got np.float64(nan)'
    (a JSONL row without its output column) and gave no hint for a date-time column without --time-unit datetime."""
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    args = ["--map", "arrival_s=ts,prompt_tokens=in,output_tokens=out"]

    def convert(name: str, text: str) -> str:
        src = tmp_path / name
        src.write_text(text)
        r = CliRunner().invoke(app, ["trace", "convert", "--from", "table", str(src), str(tmp_path / "o.jsonl"), *args])
        assert isinstance(r.exception, SpecsimInputError), r.output      # main() prints it on one line, status 2
        return str(r.exception)

    out = convert("a.csv", "ts,in,out\nabc,10,5\n")
    assert "line 2, field 'ts': expected a finite number in --time-unit units" in out and ">= -inf" not in out
    assert "needs --time-unit datetime" in convert("b.csv", "ts,in,out\n2024-01-01 10:00:00,10,5\n")
    out = convert("c.jsonl", '{"ts": 0, "in": 10, "out": 3}\n{"ts": 1, "in": 10}\n')
    assert "line 2, field 'out': expected an int in [1, 2^53], got missing" in out and "np.float64" not in out
    # an integer too large for int64 was cast to -2^63 and reported on the wrong line
    assert "line 3, field 'in': expected an int in [1, 2^53], got '1e30'" in convert("d.csv", "ts,in,out\n0,10,5\n1,1e30,5\n")


def test_maxent_reaches_means_near_either_end_of_its_range():
    # the bisection's bracket widens where the mean sits within a token of an end (it stopped at lam = +-1)
    from specsim.workload.lengths import maxent_lengths

    rng = np.random.default_rng(0)
    for mean, cap in ((2.2, 4096), (99.9, 100), (2.1, 4), (263.0, 1024)):
        out = maxent_lengths(mean, cap, 4000, rng)
        assert out.min() >= 2 and out.max() <= cap and abs(out.mean() - mean) < 0.02 + 0.005 * mean
