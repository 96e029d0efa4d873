"""``profile fit`` on large per-step inputs: rows of one step shape merged (the same least squares), the CSV read a
column at a time (the same observations as row by row), and the residuals stored and printed in bounded bins.

A 100,000-row CSV took 43-50 s and wrote every row into ``metadata.fit.points`` (26 MB); ``benchmarks/
bench_profile_fit.py`` times it (no timing is asserted here).
"""

from __future__ import annotations

import json
import math
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.hardware import step_points
from specsim.hardware.fit_points import MAX_PRINTED_POINTS, MAX_STORED_POINTS, merge_shapes, summarise
from specsim.hardware.profile import load_profile
from specsim.hardware.profile_fit import fit_step_model, predict_observations
from specsim.hardware.step_observation import StepObservation
from specsim.hardware.step_points import observations_from_csv
from specsim.hardware.stepmodel import step_model

_register()
RUN = CliRunner()
DATA = Path(__file__).parent / "data" / "step_points"
TRUTH = {"kernel_s": 4e-6, "per_request_step_s": 2e-5}


@dataclass(frozen=True)
class RawRow:
    """A row the fit takes as it is (not a StepObservation: never merged), for the raw-row reference fit."""

    num_requests: float
    batch_tokens: float
    context_tokens: float
    step_time_s: float
    label: str = ""
    source: str = "steps.csv"
    weight: float = 1.0


def _rows(n: int, seed: int = 1, shapes: int = 6) -> list[StepObservation]:
    """``n`` noisy decode steps of the truth's model on R in 1..64 and ``shapes`` contexts: shapes recur."""
    rng = np.random.default_rng(seed)
    r = rng.integers(1, 65, n).astype(float)
    ctx = rng.choice(np.linspace(256, 4096, shapes), n)
    truth = step_model("qwen3-8b", "h100").with_terms(**TRUTH)
    base = [StepObservation(a, a, c, 1.0, "steps.csv", i + 2, "step", f"B={a:g}") for i, (a, c) in enumerate(zip(r, ctx))]
    t = predict_observations(truth, base) * rng.lognormal(0.0, 0.05, n)
    w = rng.choice([1.0, 2.0, 5.0], n)
    return [StepObservation(o.num_requests, o.batch_tokens, o.context_tokens, float(x), o.source, o.line, "step",
                            o.label, float(wi)) for o, x, wi in zip(base, t, w)]


def test_rows_of_one_shape_merge_into_their_weighted_geometric_mean():
    a = StepObservation(8.0, 8.0, 1000.0, 0.010, "s.csv", 2, "step", "B=8", 1.0)
    b = StepObservation(8.0, 8.0, 1000.0, 0.040, "s.csv", 3, "step", "B=8", 3.0)
    c = StepObservation(8.0, 8.0, 1001.0, 0.020, "s.csv", 4, "step", "B=8")       # another context: its own point
    d = StepObservation(8.0, 8.0, math.nan, 0.030, "s.csv", 5, "step", "x")       # NaN contexts merge with each other
    e = StepObservation(8.0, 8.0, math.nan, 0.030, "s.csv", 6, "step", "y")
    out = merge_shapes([a, c, b, d, e])
    assert [o.line for o in out] == [2, 4, 5]
    # exp((1 ln 0.010 + 3 ln 0.040) / 4) = 0.010 x 4^(3/4) = 0.028284 s, weight 4, 2 rows
    assert out[0].step_time_s == pytest.approx(0.01 * 4 ** 0.75, rel=1e-12)
    assert (out[0].weight, out[0].rows, out[0].label) == (4.0, 2, "B=8")
    assert out[1] is c
    assert (out[2].rows, out[2].step_time_s, out[2].label) == (2, pytest.approx(0.03, rel=1e-12),
                                                               "x (+1 rows of its shape)")
    assert merge_shapes([a, c]) == [a, c]                                         # nothing to merge: as given


def test_the_fit_on_merged_shapes_equals_the_fit_on_the_raw_rows():
    rows = _rows(3000)
    raw = [RawRow(o.num_requests, o.batch_tokens, o.context_tokens, o.step_time_s, o.label, weight=o.weight)
           for o in rows]
    base = step_model("qwen3-8b", "h100")
    merged = fit_step_model(base, rows)
    reference = fit_step_model(base, raw)
    assert len(reference.points) == 3000
    shapes = len({(o.num_requests, o.context_tokens) for o in rows})
    assert len(merged.points) == shapes < 400
    assert merged.rows_read() == 3000 and sum(p.rows for p in merged.points) == 3000
    for name in ("kernel_s", "per_request_step_s"):
        assert merged.params[name] == pytest.approx(reference.params[name], rel=1e-6)
        assert merged.params[name] == pytest.approx(TRUTH[name], rel=0.05)
    prov = merged.provenance()["fit"]
    assert (prov["rows_read"], prov["points_fitted"], len(prov["points"])) == (3000, shapes, shapes)
    assert "points_binned" not in prov                                  # within the bound: every point stored
    assert sum(p.get("rows", 1) for p in prov["points"]) == 3000


def test_more_parameters_than_distinct_shapes_is_refused_naming_the_rows():
    one = [StepObservation(4.0, 4.0, 500.0, 0.008 + 1e-4 * i, "s.csv", i + 2, "step", "B=4") for i in range(5)]
    with pytest.raises(SpecsimInputError) as e:
        fit_step_model(step_model("qwen3-8b", "h100"), one, ("kernel_s", "per_request_step_s"))
    assert e.value.field == "--params" and "1 distinct step shape(s) of 5 row(s) to fit" in e.value.expected


def test_residuals_beyond_the_bound_are_summarised_in_bins_that_keep_every_row():
    rows = _rows(6000, seed=3, shapes=400)
    rep = fit_step_model(step_model("qwen3-8b", "h100"), rows)
    assert len(rep.points) > 2000
    shown, how = summarise(rep.points, 60)
    assert len(shown) <= 60 and "bins (each spans a factor" in how and any(b.points > 1 for b in shown)
    assert sum(p.rows for p in shown) == 6000 and sum(p.points for p in shown) == len(rep.points)
    assert sum(p.weight for p in shown) == pytest.approx(sum(o.weight for o in rows), rel=1e-12)
    # a bin's error is its points' weighted mean log residual, and its worst point bounds it
    for b in shown:
        if b.points > 1:                                               # a bin of one point is the point itself
            assert abs(b.worst_rel_error) >= abs(b.rel_error) - 1e-12
            assert b.label.startswith("R ") and b.rows >= b.points
        assert min(p.num_requests for p in rep.points) <= b.num_requests <= max(p.num_requests for p in rep.points)
    assert [b.num_requests for b in shown] == sorted(b.num_requests for b in shown)     # in order of R
    prov = rep.provenance()["fit"]
    assert len(prov["points"]) <= MAX_STORED_POINTS and prov["points_binned"].startswith(f"{len(rep.points):,} points")
    assert sum(p.get("rows", 1) for p in prov["points"]) == 6000
    assert len(json.dumps(prov)) < 600_000


def _write_csv(path: Path, rows: list[StepObservation]) -> None:
    path.write_text("num_requests,context_tokens,step_time_ms,weight\n" + "".join(
        f"{o.num_requests:g},{o.context_tokens:g},{o.step_time_s * 1e3!r},{o.weight:g}\n" for o in rows))


def test_profile_fit_cli_on_many_rows_says_what_it_read_and_writes_a_bounded_profile(tmp_path):
    rows = _rows(4000, seed=5, shapes=600)
    csv = tmp_path / "steps.csv"
    _write_csv(csv, rows)
    out = tmp_path / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", str(csv), "--model", "qwen3-8b", "--gpu", "h100", "--out", str(out)],
                   env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    fit = load_profile(out).metadata["fit"]
    shapes = len({(o.num_requests, o.context_tokens) for o in rows})
    text = " ".join(r.output.split())
    assert f"points: 4,000 rows read from 1 file, {shapes:,} distinct step shapes fitted" in text
    assert (fit["rows_read"], fit["points_fitted"]) == (4000, shapes)
    assert len(fit["points"]) <= MAX_STORED_POINTS < shapes and sum(p.get("rows", 1) for p in fit["points"]) == 4000
    table = [ln for ln in r.output.splitlines() if ln.split()[-1:] == ["fitted"]]
    assert 0 < len(table) <= MAX_PRINTED_POINTS and f"residuals of {shapes:,} points in {len(table)} bins" in text
    rep = fit_step_model(step_model("qwen3-8b", "h100"), observations_from_csv(csv))
    assert fit["params"] == pytest.approx(rep.params, rel=1e-12)


@pytest.mark.parametrize("name", ["steps.csv", "buckets_seconds.csv"])
def test_the_column_reader_gives_what_the_row_reader_gives(name):
    path = DATA / name
    fast = observations_from_csv(path)
    cols, rows, width = _parsed(path)
    assert _same(fast, [step_points._csv_row(row, cols, str(path), line, width) for line, row in rows])


def _same(a: list, b: list) -> bool:
    """Whether two lists of observations hold the same values, field by field (NaN equal to NaN)."""
    def key(o) -> tuple:
        return tuple("NaN" if isinstance(v, float) and math.isnan(v) else (v, type(v)) for v in astuple(o))
    return len(a) == len(b) and all(key(x) == key(y) for x, y in zip(a, b))


def _parsed(path: Path):
    import csv

    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = next(reader)
        cols = step_points._csv_header(header, str(path))
        rows = [(reader.line_num, row) for row in reader if "".join(row).strip()]
    return cols, rows, len(header)


def test_the_column_reader_takes_empty_optional_cells_as_the_row_reader_does(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text("batch_tokens,num_requests,context_tokens,prompt_tokens,weight,label,step_time_s\n"
                    "8,8,,,,,0.01\n"                      # decode row: no context, no prompt, weight 1
                    "520,8,1000,512,2,chunk,0.03\n"       # a prompt chunk in the step
                    "16, 16 ,2000,,0.5,,0.012\n"          # spaces around a cell
                    "\n"
                    "4,4,0,7,1,,0.009\n")                 # a prompt length on a decode row is kept
    fast = observations_from_csv(path)
    cols, rows, width = _parsed(path)
    assert _same(fast, [step_points._csv_row(row, cols, str(path), line, width) for line, row in rows])
    assert [o.line for o in fast] == [2, 3, 4, 6]
    assert math.isnan(fast[0].context_tokens) and math.isnan(fast[0].prompt_tokens) and fast[0].weight == 1.0
    assert (fast[1].prompt_tokens, fast[1].weight, fast[1].label, fast[2].num_requests) == (512.0, 2.0, "chunk", 16.0)


@pytest.mark.parametrize("cell, field, got", [("", "step_time_ms", "an empty cell"), ("fast", "step_time_ms", "'fast'"),
                                              ("-1", "step_time_ms", "'-1'"), ("nan", "step_time_ms", "'nan'")])
def test_a_bad_cell_deep_in_a_large_csv_is_named_by_its_line(tmp_path, cell, field, got):
    rows = _rows(3000, seed=7)
    path = tmp_path / "big.csv"
    _write_csv(path, rows)
    lines = path.read_text().splitlines()
    parts = lines[2500].split(",")
    parts[2] = cell
    lines[2500] = ",".join(parts)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SpecsimInputError) as e:
        observations_from_csv(path)
    assert (e.value.file, e.value.line, e.value.field, e.value.got) == (str(path), 2501, field, got)
