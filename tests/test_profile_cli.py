"""`specsim profile analytic / show --terms / fit / gpus` from the command line (issue 12).

Assertions are on the files written and on short substrings, never on wrapped output; expected values are closed
forms of the step model (module specsim.hardware.stepmodel) or the hand-derived inputs of
``tests/data/step_points/README.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.hardware.gpus import GPUS, gpu_spec, load_gpu_spec
from specsim.hardware.profile import load_profile
from specsim.hardware.profile_fit import predict_observations
from specsim.hardware.step_points import read_step_observations
from specsim.hardware.stepmodel import TERMS, step_model_of

_register()
RUN = CliRunner()
DATA = Path(__file__).parent / "data"
QWEN = DATA / "hf_configs" / "qwen3-8b.json"
POINTS = DATA / "step_points"


def _input_error(r) -> str:
    """The one-line message ``specsim`` prints (exit 2) for the SpecsimInputError a command raised."""
    assert r.exit_code != 0 and isinstance(r.exception, SpecsimInputError), (r.exit_code, r.output, r.exception)
    return str(r.exception)


def _analytic(tmp_path: Path, name: str, *extra: str) -> Path:
    out = tmp_path / name
    r = RUN.invoke(app, ["profile", "analytic", "--config", str(QWEN), "--out", str(out), *extra])
    assert r.exit_code == 0, r.output
    return out


def test_analytic_config_writes_a_profile_whose_step_model_rebuilds(tmp_path):
    out = _analytic(tmp_path, "q.json", "--gpu", "h100")
    prof = load_profile(out)
    assert prof.metadata["kind"] == "analytic" and prof.metadata["gpu"] == "h100"
    sm = step_model_of(prof)
    assert sm is not None and sm.gpu == GPUS["h100"] and sm.tp == 1 and sm.model.hidden == 4096
    # the table is the model at R = 0, K = 0; R and K enter through per_request_s and kv_read_s_per_token
    for b, r, k in ((1, 1, 0.0), (64, 64, 64 * 1024.0), (512, 100, 3e5)):
        assert prof.step_time(b, k, r) == pytest.approx(float(sm.step_time(b, r, k)[0]), rel=1e-9)


def test_analytic_gpu_spec_file(tmp_path):
    h100 = step_model_of(load_profile(_analytic(tmp_path, "h.json", "--gpu", "h100")))
    mine = step_model_of(load_profile(_analytic(tmp_path, "m.json", "--gpu", str(DATA / "gpu_specs/my_gpu.json"))))
    assert mine.gpu.name == "my-gpu" and mine.gpu.num_sms == 100 and mine.gpu.fp4_flops_per_s is None
    assert load_profile(tmp_path / "m.json").metadata["gpu"] == "my-gpu (from my_gpu.json)"      # the user's file
    # the LM head at B = 1 streams its weights: time scales with 1 / HBM bandwidth (3.35 TB/s vs 2.0 TB/s)
    ratio = mine.breakdown(1)["lm_head"][0] / h100.breakdown(1)["lm_head"][0]
    assert ratio == pytest.approx(3.35 / 2.0, rel=1e-9)


def test_analytic_broken_gpu_spec_names_file_and_field(tmp_path):
    r = RUN.invoke(app, ["profile", "analytic", "--config", str(QWEN), "--out", str(tmp_path / "x.json"),
                         "--gpu", str(DATA / "gpu_specs/broken_gpu.json")])
    msg = _input_error(r)
    assert "broken_gpu.json" in msg and "hbm_bytes_per_s" in msg and "> 0" in msg
    assert not (tmp_path / "x.json").exists()


def test_fp8_weights_lower_the_b1_step(tmp_path):
    bf16 = load_profile(_analytic(tmp_path, "b.json", "--gpu", "h100"))
    fp8 = load_profile(_analytic(tmp_path, "f.json", "--gpu", "h100", "--weight-dtype", "fp8"))
    assert fp8.metadata["dtype"] == "fp8" and bf16.metadata["dtype"] == "bf16"
    assert fp8.step_time(1) < 0.8 * bf16.step_time(1)
    # weight GEMMs at B = 1 are memory-bound: half the weight bytes, the same (tiny) activation bytes
    g8, g16 = (step_model_of(p).breakdown(1)["gemm"][0] for p in (fp8, bf16))
    assert 0.5 < g8 / g16 < 0.501
    # the KV cache keeps the config's dtype
    assert fp8.kv_read_s_per_token == pytest.approx(bf16.kv_read_s_per_token, rel=1e-12)


def test_show_terms_prints_every_term_and_writes_png(tmp_path):
    out = _analytic(tmp_path, "q.json", "--gpu", "h100")
    png = tmp_path / "terms.png"
    r = RUN.invoke(app, ["profile", "show", str(out), "--terms", "--png", str(png)])
    assert r.exit_code == 0, r.output
    for term in TERMS:
        assert term in r.output
    assert "total" in r.output
    assert png.stat().st_size > 1000


def test_show_terms_prints_the_whole_jump_at_the_capture_limit():
    """`--terms` printed only the eager launches (+1.936 ms) as the jump at the capture limit, while the step went
    from 15.5 to 21.0 ms (a fresh user's check): it prints both, the step's own from the step model."""
    import re

    from specsim.hardware.profile import resolve_profile
    from specsim.hardware.stepmodel import step_model_of

    r = RUN.invoke(app, ["profile", "show", "h100-qwen3-8b-tp1-terms", "--terms"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    m = re.search(r"the step itself goes from ([\d.]+) ms at B = 512 to ([\d.]+) ms at 520", text)
    assert m and "ms of kernel launches per step" in text
    sm = step_model_of(resolve_profile("h100-qwen3-8b-tp1-terms"))
    want = sm.step_time(np.array([512.0, 520.0]), np.array([512.0, 520.0]), np.array([512.0, 520.0]) * 1024) * 1e3
    assert [float(m.group(1)), float(m.group(2))] == pytest.approx(want, abs=1e-3)


def test_show_writes_no_file_without_png(tmp_path, monkeypatch):
    out = _analytic(tmp_path, "q.json", "--gpu", "h100")
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.iterdir())
    for extra in ([], ["--terms"]):
        r = RUN.invoke(app, ["profile", "show", str(out), *extra])
        assert r.exit_code == 0, r.output
        assert "written to" not in r.output
    assert set(tmp_path.iterdir()) == before


def test_show_terms_on_a_table_profile_fails_naming_step_model():
    r = RUN.invoke(app, ["profile", "show", "h100-llama2-7b-tp1", "--terms", "--png", "unused.png"])
    msg = _input_error(r)
    assert "metadata.step_model" in msg and "h100-llama2-7b-tp1.json" in msg
    assert not Path("unused.png").exists()


def test_fit_with_holdout_reports_residuals_and_writes_provenance(tmp_path):
    fitted = [POINTS / "vllm_c16.json", POINTS / "vllm_sweep_append.jsonl"]
    held = POINTS / "vllm_rate4_and_clip.jsonl"
    out = tmp_path / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", *map(str, fitted), str(held),
                         "--holdout", str(held), "--params", "bw_eff,per_request_step_s", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "fitted: bw_eff = " in " ".join(r.output.split()) and "per_request_step_s = " in " ".join(r.output.split())
    lines = r.output.splitlines()
    # rate=4 and the clipped concurrency=8 held out of the TPOT fit; TTFT fitted on the lowest load (concurrency=1)
    # and predicted at the other four
    assert sum(ln.split()[-1:] == ["holdout"] for ln in lines) == 2
    assert sum(ln.split()[-1:] == ["predicted"] for ln in lines) == 4
    assert "median |TTFT error| on predicted points" in " ".join(r.output.split())
    for label in ("concurrency=16", "concurrency=1 ", "concurrency=64", "rate=4"):
        assert any(ln.startswith(label) for ln in lines), label
    assert "median |error| on holdout points" in " ".join(r.output.split())

    prof = load_profile(out)
    fit = prof.metadata["fit"]
    assert prof.metadata["kind"] == "fitted"
    assert [Path(f).name for f in fit["fitted_on"]] == ["vllm_c16.json", "vllm_sweep_append.jsonl"]
    assert [Path(f).name for f in fit["holdout"]] == ["vllm_rate4_and_clip.jsonl"]
    assert set(fit["params"]) == {"bw_eff", "per_request_step_s"}
    # the points are the README's hand-derived ones (R by Little's law; the clipped one at N = 8)
    pts = {p["label"]: p for p in fit["points"]}
    assert pts["concurrency=16"]["num_requests"] == pytest.approx(14.96, abs=1e-3)
    assert pts["concurrency=64"]["measured_ms"] == pytest.approx(55.0)
    assert pts["rate=4"]["holdout"] and not pts["concurrency=1"]["holdout"]
    # the written step model reproduces every reported prediction, fitted and holdout alike
    sm = step_model_of(prof)
    assert sm.terms.bw_eff == pytest.approx(fit["params"]["bw_eff"], rel=1e-12)
    obs = read_step_observations(fitted) + read_step_observations([held])
    pred_ms = predict_observations(sm, obs) * 1e3
    assert np.allclose(pred_ms, [p["predicted_ms"] for p in fit["points"]], rtol=1e-4, atol=1e-4)


def test_fit_refuses_more_params_than_points(tmp_path):
    out = tmp_path / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(POINTS / "vllm_c16.json"),
                         "--params", "bw_eff,per_request_step_s",
                         "--out", str(out)])
    msg = _input_error(r)
    assert "--params" in msg and "at most 1 parameter" in msg
    assert not out.exists()


def test_gpus_lists_all_thirteen():
    r = RUN.invoke(app, ["profile", "gpus"], env={"COLUMNS": "200"})     # one table: the row checks read whole rows
    assert r.exit_code == 0, r.output
    rows = [ln.split()[0] for ln in r.output.splitlines()[1:] if ln.split() and ln.split()[0] in GPUS]
    rows = list(dict.fromkeys(rows))        # a narrow terminal splits the table: each split repeats the names
    assert rows == list(GPUS) and len(rows) == 13
    h100 = next(ln for ln in r.output.splitlines() if ln.startswith("h100 "))
    assert "3.350" in h100 and "989" in h100 and "1,979" in h100 and " 132 " in h100
    b200 = next(ln for ln in r.output.splitlines() if ln.startswith("b200 "))
    assert "9,000" in b200                                               # dense FP4
    b300 = next(ln for ln in r.output.splitlines() if ln.startswith("b300 "))
    assert b300.split()[1:6] == ["8.000", "2,250", "4,500", "13,500", "160"]   # HGX B300: 108 PF FP4 / 8
    gb300 = next(ln for ln in r.output.splitlines() if ln.startswith("gb300 "))
    assert gb300.split()[1:6] == ["8.000", "2,500", "5,000", "15,000", "160"]
    a100 = next(ln for ln in r.output.splitlines() if ln.startswith("a100 "))
    assert a100.split()[3:5] == ["-", "-"]                              # no FP8, no FP4 tensor cores


def test_entry_point_prints_the_error_on_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    from specsim.cli import main

    monkeypatch.setattr("sys.argv", ["specsim", "profile", "analytic", "--config", str(QWEN), "--gpu",
                                     str(DATA / "gpu_specs/broken_gpu.json"), "--out", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specsim: error: ") and "broken_gpu.json" in err and "hbm_bytes_per_s" in err
    assert "\n" not in err


# ---------------------------------------------------------------------------------------------
# bundled step-model profiles (benchmarks/make_step_profiles.py)

NEW = ("h100-qwen3-8b-tp1-terms", "h200-qwen3-8b-tp1-terms", "b200-qwen3-8b-tp1-terms", "h200-deepseek-v3-tp8-terms",
       "h100-qwen3-8b-vllm-fitted", "b200-qwen3.8-27b-vllm-fitted")


def _recipe():
    import importlib.util
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "make_step_profiles.py"
    spec = importlib.util.spec_from_file_location("make_step_profiles", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", NEW)
def test_bundled_step_profiles_rebuild_from_their_step_model(name):
    from specsim.hardware.profile import resolve_profile

    prof = resolve_profile(name)
    sm = step_model_of(prof)
    assert prof.metadata["name"] == name and sm is not None
    from specsim.hardware.analytic import padded_tokens

    b = prof.batch_tokens
    # decode steps at the CUDA graph they run in, steps with prefill unpadded (+ mixed_step_s where fitted)
    graph = sm.breakdown(padded_tokens(b, sm.terms.cudagraph_max_tokens), num_requests=np.zeros(b.shape))
    assert np.allclose(prof.step_time_s, sum(graph.values()), rtol=1e-12)
    plain = sm.breakdown(b, num_requests=np.zeros(b.shape), kv_tokens=0.0)
    assert np.allclose(prof.mixed_step_time_s, sum(plain.values()) + sm.terms.mixed_step_s, rtol=1e-12)
    assert prof.kv_read_s_per_token == pytest.approx(sm.kv_read_s_per_token, rel=1e-12)
    assert prof.per_request_s == pytest.approx(sm.per_request_s, rel=1e-12)


def test_bundled_terms_profiles_match_their_recipe():
    from specsim.hardware.profile import resolve_profile

    recipe = _recipe()
    for name in recipe.TERMS:
        prof, again = resolve_profile(name), recipe.terms_profile(name)
        assert np.array_equal(prof.batch_tokens, again.batch_tokens)
        assert np.allclose(prof.step_time_s, again.step_time_s, rtol=1e-12), name
    v3 = step_model_of(resolve_profile("h200-deepseek-v3-tp8-terms"))
    assert v3.tp == 8 and v3.model.weight_dtype == "fp8" and v3.gpu.name == "h200"


@pytest.mark.parametrize("name", ["h100-qwen3-8b-vllm-fitted", "b200-qwen3.8-27b-vllm-fitted"])
def test_bundled_fitted_profiles_name_their_source_and_points(name):
    from specsim.hardware.profile import resolve_profile
    from specsim.studies.validation import fit_indices, load_rows

    md = resolve_profile(name).metadata
    fit = md["fit"]
    assert md["kind"] == "fitted" and md["source_url"].startswith("https://") and md["source_date"]
    rows = load_rows()
    series = rows[rows["series"] == fit["series"]].sort_values("load")
    loads = [int(x) for x in series["load"]]
    # at most a third of the series fitted (specsim.studies.validation), the rest predicted, each load exactly once
    assert fit["fitted_loads"] == [loads[i] for i in fit_indices(len(loads))]
    assert sorted(fit["fitted_loads"] + fit["predicted_loads"]) == loads
    own = series["file"].iloc[0]
    assert [p["label"] for p in fit["points"] if p["source"] == own] == [f"N={n}" for n in fit["fitted_loads"]]
    # the other points (if any) are the fitted points of series measured on the same server (fitted together)
    from specsim.studies.validation import SETUPS
    server = SETUPS[fit["series"]].get("server")
    others = {p["source"] for p in fit["points"]} - {own}
    assert others <= {rows.loc[rows["series"] == s, "file"].iloc[0] for s, v in SETUPS.items()
                      if server and v.get("server") == server}
    assert bool(others) == bool(server) == ("fitted_with" in md)          # the B200 pair: fitted together
    assert md["source_url"] in set(series["source_url"])
    assert step_model_of(resolve_profile(name)).terms.kernel_s == pytest.approx(fit["params"]["kernel_s"])


def test_superseded_analytic_profiles_point_to_bundled_ones():
    from specsim.hardware.profile import resolve_profile

    for gpu in ("h100", "h200", "b200"):
        for model in ("qwen3-8b", "deepseek-v3"):
            old = resolve_profile(f"{gpu}-{model}-tp1-analytic")
            new = resolve_profile(old.metadata["superseded_by"])
            assert step_model_of(new).model.name == model


def test_fit_says_the_shape_and_flags_parameters_on_their_bounds(tmp_path):
    # step times written in ms under a step_time_s header: 1000x too slow for any efficiency <= 1
    csv = tmp_path / "ms.csv"
    csv.write_text("num_requests,step_time_s\n1,7.6\n8,7.9\n64,9.2\n")
    r = RUN.invoke(app, ["profile", "fit", str(csv), "--model", "qwen3-8b", "--gpu", "h100", "--out",
                         str(tmp_path / "f.json")])
    assert "shape: qwen3-8b" in " ".join(r.output.split()) and "on h100, TP 1" in " ".join(r.output.split())
    assert "warning: kernel_s ended on its bound" in " ".join(r.output.split())
    # a model that many times too fast is refused too (its signed error, -99%, never passed the +100% bound)
    assert isinstance(r.exception, SpecsimInputError) and "no profile written" in r.exception.expected
    assert not (tmp_path / "f.json").exists()


def test_a_fit_many_times_too_fast_for_its_points_writes_nothing(tmp_path):
    """Steps of 7 and 9 s (ms under step_time_s) fitted at -99.6% and the profile was written: the guard now
    also refuses a model over 10x too fast (here 0.0219x the measured steps in the median)."""
    csv = tmp_path / "b.csv"
    csv.write_text("num_requests,step_time_s\n1,7\n32,9\n")
    r = RUN.invoke(app, ["profile", "fit", str(csv), "--model", "qwen3-8b", "--gpu", "h100", "--out",
                         str(tmp_path / "units.json")])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == "the fit"
    assert r.exception.got.startswith("a median |error| of 9") and not (tmp_path / "units.json").exists()
    assert float(r.exception.got.split("step ")[1].split("x")[0]) == pytest.approx(0.0219, abs=5e-4)


def test_a_vllm_step_time_in_seconds_is_refused_naming_the_field(tmp_path):
    """mean_itl_ms 0.0075 (seconds under a _ms key) was read as R = 0.0 with no error."""
    doc = json.loads((POINTS / "vllm_c16.json").read_text())
    doc.update(mean_itl_ms=0.0075)
    (tmp_path / "s.json").write_text(json.dumps(doc))
    r = RUN.invoke(app, ["profile", "fit", str(tmp_path / "s.json"), "--model", "qwen3-8b", "--gpu", "h100",
                         "--out", str(tmp_path / "o.json")])
    assert isinstance(r.exception, SpecsimInputError)
    assert (r.exception.line, r.exception.field, r.exception.got) == (1, "mean_itl_ms", "0.0075")
    assert "milliseconds" in r.exception.expected


def test_fit_needs_the_model_and_refuses_all_holdout(tmp_path):
    f = str(POINTS / "vllm_c16.json")
    assert "--model/--config" in _input_error(RUN.invoke(app, ["profile", "fit", f, "--gpu", "h100"]))
    msg = _input_error(RUN.invoke(app, ["profile", "fit", f, "--holdout", f, "--model", "qwen3-8b", "--gpu", "h100"]))
    assert "every input is a holdout" in msg


def test_analytic_warns_when_the_weights_do_not_fit(tmp_path):
    r = RUN.invoke(app, ["profile", "analytic", "--model", "llama2-70b", "--gpu", "h100", "--out",
                         str(tmp_path / "x.json")])
    assert r.exit_code == 0, r.output
    assert "warning:" in " ".join(r.output.split()) and "exceed" in " ".join(r.output.split())
    r = RUN.invoke(app, ["profile", "analytic", "--model", "llama2-70b", "--gpu", "h100", "--tp", "4", "--out",
                         str(tmp_path / "y.json")])
    assert "warning:" not in r.output


def test_gpu_spec_in_wrong_units_is_refused(tmp_path):
    spec = json.loads((DATA / "gpu_specs" / "my_gpu.json").read_text())
    spec["hbm_bytes_per_s"] = 2.0                                      # TB/s written where bytes/s belong
    bad = tmp_path / "tb.json"
    bad.write_text(json.dumps(spec))
    with pytest.raises(SpecsimInputError, match="hbm_bytes_per_s"):
        load_gpu_spec(bad)
    with pytest.raises(SpecsimInputError, match="PCIe"):
        gpu_spec("h100-pcie")


def test_gpu_spec_option_reads_a_file(tmp_path):
    out = tmp_path / "g.json"
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--gpu-spec",
                         str(DATA / "gpu_specs" / "my_gpu.json"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert step_model_of(load_profile(out)).gpu.name == load_gpu_spec(DATA / "gpu_specs" / "my_gpu.json").name


def test_analytic_takes_per_component_dtypes(tmp_path):
    out = tmp_path / "mixed.json"
    r = RUN.invoke(app, ["profile", "analytic", "--model", "deepseek-v3", "--gpu", "b200", "--tp", "8", "--ep", "8",
                         "--weight-dtype", "fp8", "--expert-dtype", "fp4", "--attention-dtype", "bf16",
                         "--max-batch-tokens", "64", "--out", str(out)])
    assert r.exit_code == 0, r.output
    meta = json.loads(out.read_text())["metadata"]
    assert (meta["dtype"], meta["expert_dtype"], meta["attention_dtype"]) == ("fp8", "fp4", "bf16")
    model = meta["step_model"]["model"]
    assert (model["weight_dtype"], model["expert_dtype"], model["attention_dtype"]) == ("fp8", "fp4", "bf16")
    # FP4 experts on H100 (no FP4 tensor cores) run weight-only, and the output says so
    r = RUN.invoke(app, ["profile", "analytic", "--model", "deepseek-v3", "--gpu", "h100", "--tp", "8",
                         "--expert-dtype", "fp4", "--out", str(tmp_path / "w4.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "no tensor cores for the weight dtype of its routed-expert (fp4) GEMMs: they run weight-only" in text
    assert "run on it: `specsim run --set profile.name=" in text
    assert json.loads((tmp_path / "w4.json").read_text())["metadata"]["expert_dtype"] == "fp4"


def test_fit_takes_per_component_dtypes(tmp_path):
    out = tmp_path / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(POINTS / "vllm_c16.json"),
                         "--attention-dtype", "fp8", "--params", "per_request_step_s", "--out", str(out)])
    assert r.exit_code == 0, r.output
    model = json.loads(out.read_text())["metadata"]["step_model"]["model"]
    assert (model["weight_dtype"], model["attention_dtype"]) == ("bf16", "fp8") and "expert_dtype" not in model


def test_analytic_and_fit_take_the_activation_dtype(tmp_path):
    # FP4 experts against FP8 activations on H800 run W4A8 at the FP8 rate: the note says so, not weight-only
    r = RUN.invoke(app, ["profile", "analytic", "--model", "deepseek-v3", "--gpu", "h800", "--tp", "8", "--ep", "8",
                         "--weight-dtype", "fp8", "--expert-dtype", "fp4", "--activation-dtype", "fp8",
                         "--max-batch-tokens", "64", "--out", str(tmp_path / "w4a8.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "routed-expert (fp4) GEMMs run W4A8: their stored bytes against fp8 activations at the h800's FP8 rate" in text
    assert "weight-only" not in text
    meta = json.loads((tmp_path / "w4a8.json").read_text())["metadata"]
    assert meta["activation_dtype"] == "fp8" and meta["step_model"]["model"]["activation_dtype"] == "fp8"
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(POINTS / "vllm_c16.json"),
                         "--weight-dtype", "fp8", "--activation-dtype", "fp8", "--params", "per_request_step_s",
                         "--out", str(tmp_path / "fit.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "fit.json").read_text())["metadata"]["step_model"]["model"]["activation_dtype"] == "fp8"
    r = RUN.invoke(app, ["profile", "analytic", "--model", "llama2-7b", "--activation-dtype", "int8",
                         "--out", str(tmp_path / "bad.json")])
    assert "--activation-dtype" in _input_error(r) and "int8" in _input_error(r)


def test_analytic_refuses_conflicting_model_flags_and_warns_of_no_room_for_kv(tmp_path):
    """--model with --config, and --expert-dtype on a dense model, are refused naming the flags; weights that
    fit the GPU but not 90% of it (no KV cache at vLLM's default utilisation) get a warning."""
    r = RUN.invoke(app, ["profile", "analytic", "--config", str(QWEN), "--model", "qwen3-8b",
                         "--out", str(tmp_path / "a.json")])
    assert "--model/--config" in _input_error(r)
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--expert-dtype", "fp4",
                         "--out", str(tmp_path / "b.json")])
    assert "--expert-dtype" in _input_error(r) and "no routed experts" in _input_error(r)
    # DeepSeek-V3 FP8 at TP 8 on A100: 85.1 GB of weights per GPU, under its 85.9 GB, over 90% of it
    r = RUN.invoke(app, ["profile", "analytic", "--model", "deepseek-v3", "--gpu", "a100", "--tp", "8",
                         "--weight-dtype", "fp8", "--max-batch-tokens", "64", "--out", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    assert "leave no KV cache within 90% of the a100's" in " ".join(r.output.split())


def test_an_activation_dtype_that_changes_no_gemm_is_said(tmp_path):
    """--activation-dtype fp8 on BF16 weights runs every GEMM as before (an MMA runs at its wider operand's rate):
    the output says so instead of listing fp8 activations as if they counted (a fresh user's report); on FP4
    experts it names the W4A8 GEMMs and no such note."""
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--gpu", "h100", "--activation-dtype", "fp8",
                         "--out", str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    assert "--activation-dtype fp8 changes no GEMM here" in " ".join(r.output.split())
    r = RUN.invoke(app, ["profile", "analytic", "--model", "deepseek-v3", "--gpu", "h800", "--tp", "8", "--ep", "8",
                         "--expert-dtype", "fp4", "--activation-dtype", "fp8", "--out", str(tmp_path / "b.json")])
    text = " ".join(r.output.split())
    assert r.exit_code == 0 and "GEMMs run W4A8" in text and "changes no GEMM" not in text


def test_profile_list_names_every_bundled_profile(monkeypatch):
    """`specsim profile list` (a fresh user found no way to list the bundled profiles): one row per file, its GPU,
    model and TP, superseded ones marked; an unknown name's error points to it."""
    from specsim.hardware.profile import bundled_profiles_dir, resolve_profile

    monkeypatch.setenv("COLUMNS", "200")
    r = RUN.invoke(app, ["profile", "list"])
    assert r.exit_code == 0, r.output
    names = sorted(p.stem for p in bundled_profiles_dir().glob("*.json"))
    rows = {line.split()[0]: line.split() for line in r.stdout.splitlines()[3:] if line.strip()}
    assert sorted(rows) == names and f"{len(names)} bundled profiles" in r.stdout
    assert rows["h100-llama2-7b-tp1"][1:4] == ["h100", "Llama-2-7b-hf", "1"]
    assert "(superseded)" in " ".join(rows["h100-qwen3-8b-tp1-analytic"])
    with pytest.raises(SpecsimInputError, match="specsim profile list shows all"):
        resolve_profile("no-such-profile-anywhere")


def test_show_prints_a_dict_of_metadata_one_key_per_line(tmp_path):
    """A fitted profile's `fit` record was one long Python-repr line."""
    from specsim.hardware.profile import StepTimeProfile, save_profile

    prof = StepTimeProfile.flat(0.01)
    prof = StepTimeProfile(prof.batch_tokens, prof.step_time_s, metadata={"kind": "fitted",
                                                                       "fit": {"kernel_s": 1e-5, "points": 3}})
    save_profile(prof, tmp_path / "p.json")
    r = RUN.invoke(app, ["profile", "show", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    assert "fit:\n  kernel_s: 1e-05\n  points: 3\n" in r.stdout


def test_a_fit_that_misses_its_own_points_several_fold_writes_nothing(tmp_path):
    """A fresh user's ITL given in seconds fitted at +73,769% and the profile was written with exit status 0."""
    import json

    doc = json.loads((POINTS / "vllm_c16.json").read_text())
    doc.update(mean_itl_ms=doc["mean_itl_ms"] / 100, mean_tpot_ms=doc.get("mean_tpot_ms", 22.0) / 100)  # 0.22 ms
    (tmp_path / "s.json").write_text(json.dumps(doc))
    out = tmp_path / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(tmp_path / "s.json"),
                         "--params", "kernel_s", "--out", str(out)])
    assert r.exception is not None and "no profile written" in str(r.exception) and not out.exists()


def test_fit_warns_when_a_result_names_another_model(tmp_path):
    """A vllm bench result's model_id is read against the shape fitted (the names compared without the org, case,
    punctuation and a -hf/-chat suffix), so a 32B run fitted as Llama-2-7B says so; the same run named as the model
    fitted does not."""
    src = POINTS / "vllm_c16.json"
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(src), "--params", "kernel_s",
                         "--out", str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    assert f"warning: {src} measured acme/dense-32b, the shape fitted is llama2-7b" in " ".join(r.output.split())
    same = tmp_path / "same.json"
    same.write_text(src.read_text().replace("acme/dense-32b", "meta-llama/Llama-2-7b-hf"))
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(same), "--params", "kernel_s",
                         "--out", str(tmp_path / "b.json")])
    assert r.exit_code == 0, r.output
    assert "the shape fitted is" not in " ".join(r.output.split())


def test_fit_separates_the_mixed_step_on_a_csv_of_two_turnovers(tmp_path):
    # a step CSV with prompt_tokens: two datasets' points at R = 1 and 128 (new prompts every 2 or 50 steps);
    # profile fit recovers the three terms that made them and writes mixed_step_s into the profile
    from specsim.hardware.step_points import StepObservation
    from specsim.hardware.stepmodel import step_model

    truth = step_model("qwen3-8b", "h100").with_terms(kernel_s=4e-6, per_request_step_s=3e-5, mixed_step_s=0.006)
    pts = [StepObservation(r, r + 150.0 * share, 400.0, 1.0, "x.csv", 2, "step", "p", prompt_tokens=150.0)
           for r in (1.0, 128.0) for share in (0.02, 0.5)]
    steps = predict_observations(truth, pts)
    csv = tmp_path / "steps.csv"
    csv.write_text("step_time_s,num_requests,batch_tokens,context_tokens,prompt_tokens\n" + "".join(
        f"{float(t)!r},{p.num_requests},{p.batch_tokens},400,150\n" for p, t in zip(pts, steps)))
    out = tmp_path / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", str(csv), "--model", "qwen3-8b", "--gpu", "h100", "--params",
                         "kernel_s,per_request_step_s,mixed_step_s", "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "not separated" not in " ".join(r.output.split())
    terms = step_model_of(load_profile(out)).terms
    assert terms.mixed_step_s == pytest.approx(0.006, rel=1e-3)
    assert terms.per_request_step_s == pytest.approx(3e-5, rel=1e-3)
    # a prompt length below one token is refused, naming the cell
    csv.write_text("step_time_s,num_requests,prompt_tokens\n0.02,4,0.5\n")
    msg = _input_error(RUN.invoke(app, ["profile", "fit", str(csv), "--model", "qwen3-8b", "--gpu", "h100"]))
    assert "line 2" in msg and "prompt_tokens" in msg


def test_a_csv_that_cannot_fit_the_mixed_step_says_why(tmp_path):
    # a misspelled column, a duplicated one, an empty prompt length in a step with prompt tokens: refused, named;
    # no prompt lengths at all: the fit says mixed_step_s is not fitted by these points (not "one dataset")
    csv = tmp_path / "steps.csv"
    fit = ["profile", "fit", str(csv), "--model", "qwen3-8b", "--gpu", "h100"]
    csv.write_text("step_time_s,num_requests,batch_tokens,prompt_token\n0.02,4,40,100\n")
    msg = _input_error(RUN.invoke(app, fit))
    assert "prompt_token" in msg and "did you mean 'prompt_tokens'" in msg
    csv.write_text("step_time_s,num_requests,prompt_tokens,prompt_tokens\n0.02,4,100,200\n")
    assert "each column once" in _input_error(RUN.invoke(app, fit))
    csv.write_text("step_time_s,num_requests,batch_tokens,prompt_tokens\n0.02,4,40,\n0.03,8,8,\n")
    msg = _input_error(RUN.invoke(app, fit))
    assert "line 2" in msg and "prompt_tokens" in msg and "empty cell" in msg
    csv.write_text("step_time_s,num_requests,batch_tokens\n0.011,0.99,1.5\n0.02,60,90\n0.03,120,200\n")
    r = RUN.invoke(app, fit + ["--params", "kernel_s,per_request_step_s,mixed_step_s", "--out",
                               str(tmp_path / "x.json")], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output          # R = 0.99 (Little's law at one user) is a number > 0
    flat = " ".join(r.output.split())
    assert "mixed_step_s is not fitted by these points" in flat and "not separated" not in flat


def test_fit_says_where_it_wrote_on_one_line_and_how_to_run_with_it(tmp_path):
    # 'profile written to PATH' is one line at any width (commands' written_to contract); the run hint quotes a
    # path with spaces so it can be pasted
    folder = tmp_path / "my fits"
    folder.mkdir()
    out = folder / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", str(POINTS / "vllm_c16.json"), "--model", "qwen3-8b", "--gpu", "h100",
                         "--params", "kernel_s", "--out", str(out)], env={"COLUMNS": "40"})
    assert r.exit_code == 0, r.output
    assert f"profile written to {out}" in r.output.splitlines()
    assert f"--set profile.name='{out}'" in r.output


def test_analytic_capture_limit_defaults_to_vllms_for_the_gpu_and_the_option_overrides_it(tmp_path):
    b200 = load_profile(_analytic(tmp_path, "b.json", "--gpu", "b200"))
    h100 = load_profile(_analytic(tmp_path, "h.json", "--gpu", "h100"))
    older = load_profile(_analytic(tmp_path, "o.json", "--gpu", "b200", "--cudagraph-max-tokens", "512"))
    assert [p.metadata["cudagraph_max_tokens"] for p in (b200, h100, older)] == [1024, 512, 512]
    assert "8..248 step 8, 256..1024 step 16" in b200.metadata["engine"]
    assert older.step_time(640) > b200.step_time(640)           # eager launches only where graphs end


def test_profile_analytic_builds_a_deepseek_v4_rank_by_name(tmp_path):
    from specsim.hardware.v4 import V4_FLASH

    out = tmp_path / "v4.json"
    res = RUN.invoke(app, ["profile", "analytic", "--model", "v4-flash", "--gpu", "b200", "--ep", "8", "--out",
                           str(out)])
    assert res.exit_code == 0, res.output
    sm = step_model_of(load_profile(out))
    assert sm.model == V4_FLASH and (sm.tp, sm.ep) == (1, 8)
    res = RUN.invoke(app, ["profile", "analytic", "--model", "v4-flash", "--gpu", "b200", "--tp", "2", "--out",
                           str(tmp_path / "no.json")])
    assert "data-parallel attention" in _input_error(res)
    # EP across nodes: the all-to-all over a 50 GB/s InfiniBand link instead of the GPU's NVLink, kept in the file
    ib = tmp_path / "ib.json"
    res = RUN.invoke(app, ["profile", "analytic", "--model", "v4-flash", "--gpu", "b200", "--ep", "8",
                           "--ep-link-gbs", "50", "--out", str(ib)])
    assert res.exit_code == 0, res.output
    slow = step_model_of(load_profile(ib))
    assert slow.ep_link_bytes_per_s == 50e9
    assert load_profile(ib).step_time(4096) > load_profile(out).step_time(4096)
    res = RUN.invoke(app, ["profile", "analytic", "--model", "v4-flash", "--ep-link-gbs", "50", "--out",
                           str(tmp_path / "no.json")])
    assert "--ep-link-gbs" in _input_error(res)


@pytest.mark.parametrize("value", ["-1", "1", "1.5"])
def test_show_refuses_a_min_rel_outside_zero_to_one(value):
    """--min-rel -1 was accepted and printed 'drop > -100%' (every point a rise)."""
    r = RUN.invoke(app, ["profile", "show", "h100-llama2-7b-tp1", "--min-rel", value])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.field == "--min-rel"
    assert r.exception.expected.startswith("a fraction in [0, 1)") and "rises" not in r.output
    from specsim.hardware.profile import resolve_profile, sps_rise_points
    with pytest.raises(SpecsimInputError, match="min_rel"):
        sps_rise_points(resolve_profile("h100-llama2-7b-tp1"), float(value))


def test_weight_only_note_names_only_the_parts_the_model_has(tmp_path):
    """A dense model's note names its MLP, not shared experts it lacks; a MoE model without dense layers or
    shared experts (Qwen3-30B-A3B) names its routed experts and router only."""
    r = RUN.invoke(app, ["profile", "analytic", "--config", str(QWEN), "--gpu", "a100", "--weight-dtype", "fp8",
                         "--max-batch-tokens", "64", "--out", str(tmp_path / "d.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "weight dtype of its attention (fp8) and MLP (fp8) GEMMs: they run weight-only" in text
    assert "shared-expert" not in text
    r = RUN.invoke(app, ["profile", "analytic", "--config", str(DATA / "hf_configs" / "qwen3-30b-a3b.json"),
                         "--gpu", "h100", "--weight-dtype", "fp4", "--attention-dtype", "bf16",
                         "--max-batch-tokens", "64", "--out", str(tmp_path / "m.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "weight dtype of its routed-expert (fp4) and router (fp4) GEMMs: they run weight-only" in text
    assert "shared-expert" not in text and "MLP" not in text
    r = RUN.invoke(app, ["profile", "analytic", "--model", "deepseek-v3", "--gpu", "a100", "--tp", "8",
                         "--max-batch-tokens", "64", "--out", str(tmp_path / "v3.json")])
    assert r.exit_code == 0, r.output
    assert ("attention (fp8), routed-expert (fp8) and dense-MLP/shared-expert/router (fp8) GEMMs"
            in " ".join(r.output.split()))


def test_analytic_and_fit_refuse_an_empty_table_naming_the_option(tmp_path):
    """--max-batch-tokens 0 is refused as the option, not as a batch size in [1, 1] with scheduler advice."""
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--max-batch-tokens", "0",
                         "--out", str(tmp_path / "z.json")])
    err = _input_error(r)
    assert r.exception.field == "--max-batch-tokens" and r.exception.got == "0" and "an int >= 1" in err
    assert "max_num_seqs" not in err and not (tmp_path / "z.json").exists()
    r = RUN.invoke(app, ["profile", "fit", "--model", "llama2-7b", "--gpu", "h100", str(POINTS / "vllm_c16.json"),
                         "--params", "per_request_step_s", "--max-batch-tokens", "-3", "--out", str(tmp_path / "f.json")])
    assert _input_error(r) and r.exception.field == "--max-batch-tokens" and r.exception.got == "-3"
    # one token is one request's plain decode step: accepted, with a note that the table stops there
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--max-batch-tokens", "1",
                         "--out", str(tmp_path / "one.json")])
    assert r.exit_code == 0, r.output
    assert "the table stops at 1 token (--max-batch-tokens), below the 512-token CUDA-graph range" in " ".join(
        r.output.split())
    assert list(load_profile(tmp_path / "one.json").batch_tokens) == [1]


def test_a_capture_limit_between_capture_sizes_is_kept_and_noted(tmp_path):
    """--cudagraph-max-tokens 100 captures up to 96 (vLLM's sizes up to the limit): the output says so; a
    capture size gives no note; a negative one is refused naming the option."""
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--cudagraph-max-tokens", "100",
                         "--max-batch-tokens", "128", "--out", str(tmp_path / "c.json")])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert ("--cudagraph-max-tokens 100 is not one of vLLM's capture sizes" in text
            and "graphs are captured up to 96 tokens" in text and "a step of 97 or more runs eager" in text
            and "(give 96 or 104 to say so)" in text)
    sm = step_model_of(load_profile(tmp_path / "c.json"))
    assert sm.terms.cudagraph_max_tokens == 100
    eager = sm.breakdown([96.0, 97.0])["eager"]
    assert eager[0] == 0.0 and eager[1] > 0.0
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--cudagraph-max-tokens", "96",
                         "--max-batch-tokens", "128", "--out", str(tmp_path / "c96.json")])
    assert r.exit_code == 0 and "capture sizes" not in r.output
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--cudagraph-max-tokens", "-1",
                         "--out", str(tmp_path / "neg.json")])
    assert "an int >= 0" in _input_error(r) and r.exception.field == "--cudagraph-max-tokens"


def test_one_gpu_per_command_and_an_image_suffix_for_png(tmp_path):
    """A fresh user's fit ran on the spec file's GPU while --gpu named an H100, and `profile show --png x.txt`
    raised matplotlib's ValueError."""
    spec = Path(__file__).parent / "data" / "gpu_specs" / "my_gpu.json"
    (tmp_path / "steps.csv").write_text("num_requests,step_time_s\n1,0.007\n32,0.009\n")
    for cmd in (["profile", "analytic", "--model", "qwen3-8b", "--max-batch-tokens", "64"],
                ["profile", "fit", str(tmp_path / "steps.csv"), "--model", "qwen3-8b"]):
        r = RUN.invoke(app, [*cmd, "--gpu", "h100", "--gpu-spec", str(spec), "--out", str(tmp_path / "p.json")])
        assert isinstance(r.exception, SpecsimInputError) and r.exception.field == "--gpu-spec"
        assert "not both" in r.exception.expected
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--max-batch-tokens", "64", "--gpu-spec",
                         str(spec), "--out", str(tmp_path / "p.json")])
    assert r.exit_code == 0, r.output
    assert load_profile(tmp_path / "p.json").metadata["gpu"] == load_gpu_spec(spec).label
    r = RUN.invoke(app, ["profile", "show", "h100-qwen3-8b-tp1-terms", "--png", str(tmp_path / "x.txt")])
    assert isinstance(r.exception, SpecsimInputError) and r.exception.file == "--png"
    r = RUN.invoke(app, ["profile", "show", "h100-qwen3-8b-tp1-terms", "--png", str(tmp_path / "x.svg")])
    assert r.exit_code == 0 and (tmp_path / "x.svg").stat().st_size > 1000


def test_a_profile_key_that_is_not_one_is_refused_with_the_closest(tmp_path):
    """A hand-edited profile's typo (step_times_s) was ignored without a word; every key the writers write loads."""
    from specsim.hardware.profile import PROFILE_KEYS, save_profile
    from specsim.hardware.stepmodel import step_model

    src = Path(__file__).resolve().parents[1] / "specsim" / "data" / "profiles" / "h100-qwen3-8b-tp1-terms.json"
    doc = json.loads(src.read_text())
    doc["step_times_s"] = doc["step_time_s"]
    (tmp_path / "typo.json").write_text(json.dumps(doc))
    with pytest.raises(SpecsimInputError) as e:
        load_profile(tmp_path / "typo.json")
    assert e.value.field == "step_times_s" and "closest valid: 'step_time_s'" in e.value.expected
    prof = step_model("qwen3-8b", "h100").profile(64)
    save_profile(prof, tmp_path / "p.json")
    assert set(json.loads((tmp_path / "p.json").read_text())) <= PROFILE_KEYS
    assert load_profile(tmp_path / "p.json").step_time_s.tolist() == prof.step_time_s.tolist()


@pytest.mark.parametrize("name", ["b200-qwen3.8-27b-vllm-fitted", "h100-qwen3-8b-vllm-fitted"])
def test_show_points_to_validation_data_an_installed_package_holds(name):
    # tests/data/ is not installed; the package's own copy is (specsim/studies/data/validation)
    r = RUN.invoke(app, ["profile", "show", name], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    import re
    paths = re.findall(r"validation_data'?:\s*'?([^\s',}]+)", r.output)
    assert paths and "tests/data" not in r.output
    root = Path(__file__).resolve().parents[1]
    for rel in paths:
        assert rel.startswith("specsim/studies/data/validation/") and (root / rel).is_file(), rel
