"""``trace convert --from table --time-unit``: arrival times in one unit declared as another are refused where the
trace would be impossible and warned of where they look like a larger unit (specsim/workload/time_units.py); logs
in the unit they declare convert without a word."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import run_cli

from specsim.errors import SpecsimInputError
from specsim.workload import convert_table
from specsim.workload.time_units import MIN_MEAN_GAP_S

CMAP = "arrival_s=ts,prompt_tokens=in,output_tokens=out"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _log(path: Path, times) -> Path:
    path.write_text("ts,in,out\n" + "".join(f"{t},100,20\n" for t in times))
    return path


def _convert(path: Path, unit: str):
    """(trace, the warnings' texts) of one conversion."""
    notes: list[str] = []
    return convert_table(path, CMAP, time_unit=unit, on_note=notes.append), notes


def test_seconds_declared_ms_at_a_rate_no_server_takes_are_refused(tmp_path):
    """5,000 arrivals 0.5 ms apart, in seconds (2,000 requests a second): read as ms they are 0.5 us apart, two
    million requests a second. Refused, naming the file, the column and the likely unit (s: a 2.4995 s span)."""
    p = _log(tmp_path / "dense.csv", [f"{0.0005 * k:.4f}" for k in range(5000)])
    with pytest.raises(SpecsimInputError) as ei:
        convert_table(p, CMAP, time_unit="ms")
    e = ei.value
    assert (e.file, e.line, e.field) == (str(p), None, "ts")
    assert "1 us apart or more on average in --time-unit ms" in e.expected
    assert e.got == ("5,000 arrivals within 0.0025 s (mean gap 5e-07 s): probably --time-unit s, a span of "
                     "2.5 s")
    assert MIN_MEAN_GAP_S == 1e-6
    # read in seconds, the same file converts: 4,999 gaps of 0.5 ms
    tr, notes = _convert(p, "s")
    assert tr.arrival_s[-1] == pytest.approx(2.4995) and notes == []
    # seconds read as nanoseconds: gaps of 1.8 ns; the unit that puts the mean gap nearest a second is s
    q = _log(tmp_path / "slow.csv", ["0.0", "1.8", "3.6", "5.4"])
    with pytest.raises(SpecsimInputError, match=r"mean gap 1\.8e-09 s\): probably --time-unit s, a span of 5\.4 s"):
        convert_table(q, CMAP, time_unit="ns")


def test_a_one_hour_seconds_log_declared_ms_is_warned_of_and_names_the_likely_unit(tmp_path):
    """A fresh user's report: a one-hour log in seconds (with decimals) declared --time-unit ms became a 3.6 s
    trace without a word. It still converts (a log in fractional ms is possible), with a warning naming the file,
    the column, the first fractional value's line and the span in seconds."""
    times = ["0.0", "1.25", "2.5", "900.75", "1800.5", "3600.0"]
    p = _log(tmp_path / "hour.csv", times)
    tr, notes = _convert(p, "ms")
    assert tr.arrival_s[-1] == pytest.approx(3.6)                 # converted as declared
    assert len(notes) == 1
    assert notes[0] == (f"{p}, field 'ts': arrivals read as ms carry fractions of a ms (4 of 6 values, the first "
                        "1.25 on line 3), as a clock in a larger unit with decimals writes them: they look like s "
                        "(--time-unit s gives a span of 3,600.0 s, not 3.6 s); if ms is right, ignore this")
    with pytest.warns(UserWarning, match="they look like s"):    # the library without on_note
        convert_table(p, CMAP, time_unit="ms")


def test_unix_seconds_declared_ms_are_warned_of_with_their_date(tmp_path):
    """Whole Unix seconds (2023-11-14) declared ms are 19.7 days after 1 January 1970: warned, naming the date."""
    p = _log(tmp_path / "unix.csv", [1700000000 + 3 * k for k in range(10)])
    tr, notes = _convert(p, "ms")
    assert tr.arrival_s[-1] == pytest.approx(0.027)
    assert len(notes) == 1 and notes[0] == (
        f"{p}, field 'ts': arrivals read as ms are 19.7 days after the Unix epoch (January 1970), while read as s "
        "they are Unix times of 2023-11-14: they look like s (--time-unit s gives a span of 27.0 s, not 0.027 s); "
        "if ms is right, ignore this")


def test_logs_in_the_unit_they_declare_convert_without_a_word(tmp_path):
    """Unix ms (examples/log.csv: 40 requests over 17.503 s), whole ms from zero, Unix ms with a fraction
    (time.time() * 1000), Unix us, a burst at one instant, and seconds with decimals declared s: no warning,
    nothing refused, the spans as written."""
    cases = [(EXAMPLES / "log.csv", "ms", 17.503),
             (_log(tmp_path / "rel.csv", [0, 31, 442, 1207, 3600000]), "ms", 3600.0),
             (_log(tmp_path / "frac.csv", ["1700000000000.5", "1700000003023.456"]), "ms", 3.022956),
             (_log(tmp_path / "us.csv", [1700000000000000, 1700000000200000]), "us", 0.2),
             (_log(tmp_path / "batch.csv", [5] * 300), "ns", 0.0),
             (_log(tmp_path / "sec.csv", ["0.0", "1.25", "3600.0"]), "s", 3600.0)]
    for path, unit, span in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("error")                       # a warning would fail here
            tr, notes = _convert(path, unit)
        assert notes == [] and tr.arrival_s[-1] - tr.arrival_s[0] == pytest.approx(span), path.name
    # a busy log in its unit: 2,000 requests a second (gaps of 0.5 ms, written as whole us) converts
    q = _log(tmp_path / "busy.csv", [500 * k for k in range(100)])
    tr, notes = _convert(q, "us")
    assert notes == [] and np.diff(tr.arrival_s) == pytest.approx(np.full(99, 0.0005))


def test_cli_prints_the_warning_and_refuses_in_one_line(tmp_path, monkeypatch, capsys):
    """On the command line: the warning on stderr and the trace written; a refusal in one line, exit status 2,
    no trace written."""
    monkeypatch.setenv("COLUMNS", "200")
    p = _log(tmp_path / "hour.csv", ["0.0", "1.25", "2.5", "3600.0"])
    out = tmp_path / "t.jsonl"
    flags = ["--from", "table", "--map", CMAP, "--time-unit", "ms"]
    assert run_cli(["trace", "convert", str(p), str(out), *flags]) == 0 and out.exists()
    err = " ".join(capsys.readouterr().err.split())
    assert f"warning: {p}, field 'ts': arrivals read as ms carry fractions of a ms" in err
    assert "they look like s (--time-unit s gives a span of 3,600.0 s, not 3.6 s)" in err
    dense = _log(tmp_path / "dense.csv", [f"{0.0005 * k:.4f}" for k in range(5000)])
    out2 = tmp_path / "d.jsonl"
    assert run_cli(["trace", "convert", str(dense), str(out2), *flags]) == 2 and not out2.exists()
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"{dense}, field 'ts': expected arrivals 1 us apart or more" in err and "probably --time-unit s" in err
