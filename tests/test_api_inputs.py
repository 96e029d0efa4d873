"""The Python API's inputs as a notebook user passes them (a fresh user's findings): SLA tiers as a number or a
string, a sweep folder where records are expected, one note as a string; anything else is one clear input error."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.analysis import plots
from specsim.analysis.frontier import compare, frontiers
from specsim.analysis.report import write_report
from specsim.analysis.sweep_records import load_records
from specsim.analysis.tiers import as_tiers
from specsim.errors import SpecsimInputError
from test_report import sweep_dir  # noqa: F401  (module-scoped fixture: a CLI sweep of 2 policies x 2 loads x 2 seeds)


def test_tiers_as_a_number_a_string_or_numbers():
    assert as_tiers(150) == (150.0,)
    assert as_tiers("100, 150") == (100.0, 150.0)
    assert as_tiers([100, 150.5]) == (100.0, 150.5)
    assert as_tiers(np.array([50.0])) == (50.0,)
    for bad in ("100,x", [100, -1], float("nan"), True, {"a": 1}.items(), object()):
        with pytest.raises(SpecsimInputError) as e:
            as_tiers(bad)
        assert e.value.field == "tiers"


def test_compare_takes_a_sweep_folder_and_tiers_in_any_of_those_forms(sweep_dir):  # noqa: F811
    want = compare(load_records(sweep_dir), [100.0, 150.0])
    for tiers in ("100,150", (100, 150)):
        got = compare(str(sweep_dir), tiers)
        assert got[["tier", "curve", "throughput_per_gpu"]].equals(want[["tier", "curve", "throughput_per_gpu"]])
    assert list(compare(sweep_dir, 100).tier.unique()) == [100.0]


def test_a_run_folder_is_not_read_as_an_empty_sweep(tmp_path, sweep_dir):  # noqa: F811
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(SpecsimInputError, match="one run's folder"):
        load_records(tmp_path)
    with pytest.raises(SpecsimInputError, match="its points/ folder: pass"):      # it returned [] silently
        load_records(sweep_dir / "points")


def test_a_folder_that_is_no_sweep_is_refused_and_a_started_sweep_reads_empty(tmp_path):
    with pytest.raises(SpecsimInputError, match="neither points/ nor sweep.json"):     # load_records(".") was []
        load_records(tmp_path)
    (tmp_path / "sweep.json").write_text("{}")          # the manifest is written before the first point
    assert load_records(tmp_path) == []


def test_frontiers_of_records_names_what_it_takes(sweep_dir):  # noqa: F811
    with pytest.raises(SpecsimInputError, match="seed_spread frame"):
        frontiers(load_records(sweep_dir))


def test_plot_frontiers_takes_a_folder_or_records_and_refuses_an_empty_panel(sweep_dir, tmp_path):  # noqa: F811
    assert plots.plot_frontiers(sweep_dir, tmp_path / "a.png", tiers="100").is_file()
    assert plots.plot_frontiers(load_records(sweep_dir), tmp_path / "b.png", tiers=150).is_file()
    with pytest.raises(SpecsimInputError, match="panel 'x'"):
        plots.plot_frontiers([("x", [])], tmp_path / "c.png")
    with pytest.raises(SpecsimInputError):
        plots.plot_frontiers(42, tmp_path / "d.png")


def test_write_report_takes_one_note_as_a_string(sweep_dir, tmp_path):  # noqa: F811
    rep = write_report(sweep_dir, tmp_path / "r.html", tiers="100,150", notes="hello there")
    html = (tmp_path / "r.html").read_text()
    assert "Hello there." in html and "H. E. L" not in html
    assert rep is not None


def test_a_misspelt_simulate_argument_is_named_as_such():
    """``simulate(tr, "dspark", concurency=4)`` was reported as dspark's unknown knob 'concurency': the extra keyword
    arguments are the policy's knobs, so the error now names the argument it is closest to."""
    from conftest import REPO
    from specsim.simulation import simulate
    from specsim.workload import load_trace

    tr = load_trace(REPO / "traces" / "prod.jsonl").head(4)
    with pytest.raises(SpecsimInputError, match="closest: 'concurrency'") as e:
        simulate(tr, "dspark", concurency=4)
    assert e.value.field == "concurency"
    with pytest.raises(SpecsimInputError, match="closest valid: 'early_stop'"):    # a knob's typo stays the knob's
        simulate(tr, "dspark", early_stp="hull")
    with pytest.raises(SpecsimInputError, match=r"simulate\(trace.head\(N\), ...\) \(the CLI's --num-requests\)"):
        simulate(tr, "dspark", num_requests=2)              # a CLI option: reported as dspark's knob before
    with pytest.raises(SpecsimInputError, match="True or False") as e:      # 'no' would have recorded a log
        simulate(tr, "dspark", record_step_log="no")
    assert e.value.field == "record_step_log"


def test_the_report_names_a_runner_up_that_is_the_baseline_once(sweep_dir, tmp_path):  # noqa: F811
    """'+131.7% over mtp1 (one seed), +131.7% over the baseline mtp1': the same lead said twice."""
    import re

    write_report(sweep_dir, tmp_path / "r.html", tiers=(100, 150))
    lines = re.findall(r'<p class="winner"[^>]*>(.*?)</p>', (tmp_path / "r.html").read_text())
    assert lines and any("over mtp1, the baseline" in x for x in lines)
    assert not any("over the baseline mtp1" in x and "over mtp1" in x.replace("over the baseline mtp1", "")
                   for x in lines)


def test_a_simulation_result_reads_in_one_line():
    """Evaluating a SimulationResult in a notebook cell printed about 10,900 characters (every frame, the summary)."""
    from conftest import REPO
    from specsim.simulation import simulate
    from specsim.workload import load_trace

    res = simulate(load_trace(REPO / "traces" / "prod.jsonl").head(6), "static", gamma=2)
    text = repr(res)
    assert "\n" not in text and len(text) < 400
    assert "policy='static'" in text and f"steps=<{len(res.steps)} rows>" in text


def test_the_report_carries_the_notes_of_measured_points(sweep_dir, tmp_path, monkeypatch):  # noqa: F811
    """With measured points beside a sweep, specsim plot warned that they are of another model and its figure read
    1000 / mean TPOT; the report showed the stars without either note while its tables read per-request TPS/user."""
    import shutil
    import sys

    from conftest import REPO
    from specsim.cli import main

    d = tmp_path / "s"
    shutil.copytree(sweep_dir, d)
    bench = sorted(str(p) for p in (REPO / "examples" / "bench").glob("*.json"))
    monkeypatch.setattr(sys, "argv", ["specsim", "import-results", *bench, "--gpus", "8",
                                      "--out", str(d / "measured.json")])
    with pytest.raises(SystemExit) as e:
        main()
    assert not e.value.code
    write_report(d, tmp_path / "r.html")
    html = " ".join((tmp_path / "r.html").read_text().split())
    assert "the overlay compares different models" in html
    assert "x-axis is 1000 / mean TPOT for every curve" in html


def test_more_api_inputs_a_second_fresh_user_tried(sweep_dir, tmp_path):  # noqa: F811
    """Tiers given twice made a winner its own runner-up; bytes became tiers 49, 48, 48; a numpy array broke
    plot_frontiers; an empty panel list, plot_budget([]), compare of junk records, write_report of records and
    notes that are not strings gave raw Python errors; a report name without a suffix was written without .html."""
    import numpy as np

    assert as_tiers([100, 100, 150]) == (100.0, 150.0) and as_tiers(np.int64(100)) == (100.0,)
    with pytest.raises(SpecsimInputError):
        as_tiers(b"100")
    got = compare(sweep_dir, [100, 100])
    winner = got[got.winner].iloc[0]
    assert len(got) == 2 and winner.runner_up != winner.curve
    assert plots.plot_frontiers(sweep_dir, tmp_path / "a.png", tiers=np.array([100.0, 150.0])).is_file()
    for call in (lambda: plots.plot_frontiers([], tmp_path / "b.png"), lambda: plots.plot_budget([], tmp_path / "c"),
                 lambda: compare([{"a": 1}], 100), lambda: write_report(load_records(sweep_dir), tmp_path / "r"),
                 lambda: write_report(sweep_dir, tmp_path / "r", notes=5)):
        with pytest.raises(SpecsimInputError):
            call()
    rep = write_report(sweep_dir, tmp_path / "r", notes=["", "Measured on 2 GPUs."])
    assert rep.path == tmp_path / "r.html" and rep.path.is_file()
    html = rep.path.read_text()
    assert "Measured on 2 GPUs." in html and "GPUs.." not in html


def test_the_everyday_api_is_reachable_from_the_package():
    """A fresh user's ``import specsim; specsim.simulate`` was an AttributeError."""
    import specsim
    from specsim.analysis.frontier import compare as compare_fn
    from specsim.simulation import simulate

    assert specsim.simulate is simulate and specsim.compare is compare_fn
    assert {"simulate", "load_trace", "load_scenario", "run_sweep"} <= set(dir(specsim)) & set(specsim.__all__)
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        specsim.simulat  # noqa: B018


# ---- the step model's Python API and a profile's metadata.step_model (profile-fixes2 item 14)

def test_step_model_api_refuses_wrong_types_and_ranges_naming_the_argument():
    from specsim.hardware.stepmodel import EngineTerms, step_model

    with pytest.raises(SpecsimInputError) as err:
        step_model("qwen3-8b", "h100", tp="2")
    assert (err.value.field, err.value.got) == ("tp", "'2'")
    with pytest.raises(SpecsimInputError) as err:
        step_model("qwen3-8b", "h100", ep=0)
    assert err.value.field == "ep" and "an int >= 1" in err.value.expected
    with pytest.raises(SpecsimInputError) as err:
        EngineTerms(kernel_s="1e-6")
    assert (err.value.field, err.value.got) == ("terms.kernel_s", "'1e-6'")
    with pytest.raises(SpecsimInputError, match=r"a time in \[0, 0.001\] s") as err:
        EngineTerms(kernel_s=7.84)                         # 7.84 us written as seconds
    assert err.value.field == "terms.kernel_s"
    with pytest.raises(SpecsimInputError, match=r"a time in \[0, 1\] s"):
        EngineTerms(fixed_step_s=12.0)                     # 12 ms written as seconds... as 12 s
    sm = step_model("qwen3-8b", "h100")
    for kw, field in (({"batch_tokens": [-1]}, "batch_tokens"), ({"batch_tokens": [float("nan")]}, "batch_tokens"),
                      ({"batch_tokens": [4], "num_requests": [-2]}, "num_requests"),
                      ({"batch_tokens": [4], "kv_tokens": -5.0}, "kv_tokens")):
        with pytest.raises(SpecsimInputError) as err:
            sm.breakdown(**kw)
        assert err.value.field == field and ">= 0" in err.value.expected
    assert sm.breakdown([0.0])["gemm"][0] == 0.0            # an empty step (a drafter's table row 0) stays allowed
    for bad in (0, -5, 2.5):
        with pytest.raises(SpecsimInputError) as err:
            sm.profile(bad)
        assert err.value.field == "max_batch_tokens" and err.value.got == repr(bad)
    prof = sm.profile(64)
    for args, field in (((-1, 3), "num_requests"), ((2, -1), "drafts"), ((float("nan"), 3), "num_requests"),
                        ((2, float("nan")), "drafts")):
        with pytest.raises(SpecsimInputError) as err:
            prof.speculation_s(*args)
        assert err.value.field == field
    assert prof.speculation_s(0, 3) == 0.0 and prof.speculation_s(2, 0) == 0.0
    assert prof.speculation_s(2, 3) == pytest.approx(7.75e-4 + 2 * 8.4e-5)
    for b in (0, [0, 3], -4):
        with pytest.raises(SpecsimInputError) as err:
            prof.step_time(b)
        assert err.value.field == "batch_tokens" and "a batch size >= 1" in err.value.expected
        assert "max_num_seqs" not in str(err.value)


@pytest.mark.parametrize("change,field,expected", [
    (lambda sm: sm.pop("gpu"), "metadata.step_model.gpu", "a JSON object, the GPU's datasheet numbers"),
    (lambda sm: sm.update(terms=5), "metadata.step_model.terms", "a JSON object of EngineTerms fields"),
    (lambda sm: sm["terms"].update(cudagraph_max_tokens=-4), "metadata.step_model.terms.cudagraph_max_tokens",
     "an int >= 0"),
    (lambda sm: sm["terms"].update(kernel_s="x"), "metadata.step_model.terms.kernel_s", "a number"),
    (lambda sm: sm["gpu"].update(nvlink=1), "metadata.step_model.gpu.nvlink", "one of the GpuSpec fields"),
    (lambda sm: sm["model"].update(num_layers="x"), "metadata.step_model.model.num_layers", "an int"),
    (lambda sm: sm.update(tp="two"), "metadata.step_model.tp", "an int >= 1"),
])
def test_a_bad_step_model_in_a_profile_names_the_file_and_field(tmp_path, change, field, expected):
    import json

    from specsim.hardware.profile import load_profile, save_profile
    from specsim.hardware.stepmodel import step_model, step_model_of

    path = tmp_path / "p.json"
    save_profile(step_model("qwen3-8b", "h100").profile(64), path)
    data = json.loads(path.read_text())
    change(data["metadata"]["step_model"])
    path.write_text(json.dumps(data))
    with pytest.raises(SpecsimInputError) as err:
        step_model_of(load_profile(path))
    assert (err.value.file, err.value.field) == (str(path), field)
    assert expected in err.value.expected and "Error" not in str(err.value)


def test_a_step_model_that_is_not_an_object_names_the_file(tmp_path):
    from specsim.hardware.stepmodel import step_model_from_spec

    with pytest.raises(SpecsimInputError) as err:
        step_model_from_spec([1], "prof.json")
    assert (err.value.file, err.value.field, err.value.got) == ("prof.json", "metadata.step_model", "list")


def test_step_model_inputs_a_notebook_gets_wrong_are_named():
    from specsim.hardware.profile_fit import snap_to_bounds
    from specsim.hardware.stepmodel import step_model

    with pytest.raises(SpecsimInputError) as e:
        step_model(None, "h100")                         # an AttributeError from deep inside
    assert e.value.field == "model"
    sm = step_model("qwen3-8b", "h100")
    with pytest.raises(SpecsimInputError, match="one per step of the 3 batch sizes"):
        sm.breakdown([1, 2, 3], [1, 2])                  # numpy's broadcast error
    assert sm.breakdown([1, 2, 3], [1, 1, 1])["gemm"].shape == (3,)
    # a term the fit drove to its bound is saved as the bound, not 7e-24 s
    lo, hi = np.array([0.0, 0.5]), np.array([1e-3, 1.0])
    np.testing.assert_array_equal(snap_to_bounds(np.array([7e-24, 0.999999999]), lo, hi), [0.0, 1.0])
    np.testing.assert_array_equal(snap_to_bounds(np.array([2e-4, 0.7]), lo, hi), [2e-4, 0.7])
