"""A user's GPU spec file is the file's, whatever its ``name`` says: labelled as the file, its defaults taken from
its own fields (``compute_capability`` for the CUDA-graph capture limit), never from the bundled part it shares a
name with. Bundled parts given by name (``--gpu b200``) keep theirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specsim.cli import _register, app
from specsim.errors import SpecsimInputError
from specsim.hardware.analytic import default_capture_tokens
from specsim.hardware.gpus import GPUS, GpuSpec, load_gpu_spec, resolve_gpu
from specsim.hardware.profile import load_profile
from specsim.hardware.stepmodel import step_model, step_model_of

_register()
RUN = CliRunner()
POINTS = Path(__file__).parent / "data" / "step_points"

#: A B200's datasheet numbers in a user's file named b200.json whose GPU is named "b200" (no compute capability).
B200_FILE = {"name": "b200", "hbm_bytes_per_s": 8.0e12, "bf16_flops_per_s": 2250e12, "fp8_flops_per_s": 4500e12,
             "fp4_flops_per_s": 9000e12, "num_sms": 148, "memory_bytes": 192e9, "link_bytes_per_s": 900e9,
             "link_latency_s": 5e-6}


def _file(tmp_path: Path, name: str, doc: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_bundled_parts_state_their_compute_capability():
    cc = {name: g.compute_capability for name, g in GPUS.items()}
    assert cc == {"a100": "8.0", "h100": "9.0", "h200": "9.0", "h800": "9.0", "h20": "9.0", "b200": "10.0",
                  "gb200": "10.0", "b300": "10.3", "gb300": "10.3", "l40s": "8.9", "rtx4090": "8.9",
                  "rtxpro6000": "12.0", "mi300x": None}
    assert all(g.spec_file is None and g.label == name for name, g in GPUS.items())
    assert [default_capture_tokens(g) for g in GPUS.values()].count(1024) == 4       # b200, gb200, b300, gb300


def test_a_file_named_like_a_bundled_part_is_labelled_as_the_file_and_takes_its_own_defaults(tmp_path):
    g = load_gpu_spec(_file(tmp_path, "b200.json", B200_FILE))
    assert (g.name, g.spec_file, g.label) == ("b200", "b200.json", "b200 (from b200.json)")
    assert g != GPUS["b200"] and g.compute_capability is None
    assert default_capture_tokens(g) == 512                     # it took the bundled B200's 1,024 by its name
    assert step_model("qwen3-8b", g).terms.cudagraph_max_tokens == 512
    stated = load_gpu_spec(_file(tmp_path, "mine.json", {**B200_FILE, "name": "my-gpu", "compute_capability": "10.3"}))
    assert default_capture_tokens(stated) == 1024 and stated.label == "my-gpu (from mine.json)"
    hopper = load_gpu_spec(_file(tmp_path, "h.json", {**B200_FILE, "name": "b200", "compute_capability": "9.0"}))
    assert default_capture_tokens(hopper) == 512
    assert resolve_gpu("b200") is GPUS["b200"] and default_capture_tokens(resolve_gpu("b200")) == 1024


@pytest.mark.parametrize("value", [10.0, "10", "sm_100", "ten", ""])
def test_a_compute_capability_that_is_not_major_minor_is_refused_naming_file_and_key(tmp_path, value):
    path = _file(tmp_path, "g.json", {**B200_FILE, "compute_capability": value})
    with pytest.raises(SpecsimInputError) as e:
        load_gpu_spec(path)
    assert (e.value.file, e.value.field, e.value.got) == (str(path), "compute_capability", repr(value))
    assert '"major.minor"' in e.value.expected


def test_spec_file_is_set_from_the_path_never_by_the_file(tmp_path):
    path = _file(tmp_path, "g.json", {**B200_FILE, "spec_file": "h100.json"})
    with pytest.raises(SpecsimInputError) as e:
        load_gpu_spec(path)
    assert (e.value.field, e.value.got) == ("spec_file", "an unknown key")


def test_a_profile_of_a_spec_file_keeps_its_label_and_limit_when_rebuilt(tmp_path):
    path = _file(tmp_path, "b200.json", B200_FILE)
    out = tmp_path / "a.json"
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--gpu-spec", str(path), "--out", str(out)],
                   env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "on b200 (from b200.json), TP 1" in text
    assert "note: b200.json gives no compute_capability, so CUDA graphs are taken to capture up to 512 tokens" in text
    prof = load_profile(out)
    assert (prof.metadata["gpu"], prof.metadata["cudagraph_max_tokens"]) == ("b200 (from b200.json)", 512)
    sm = step_model_of(prof)
    assert sm.gpu.spec_file == "b200.json" and sm.gpu.label == "b200 (from b200.json)"
    # the same file stating its family gets vLLM's 1,024 for it, and no note; --gpu b200 is the bundled part
    _file(tmp_path, "b200.json", {**B200_FILE, "compute_capability": "10.0"})
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--gpu", str(path), "--out", str(out)])
    assert r.exit_code == 0 and "compute_capability" not in r.output
    assert load_profile(out).metadata["cudagraph_max_tokens"] == 1024
    r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--gpu", "b200", "--out", str(out)])
    assert r.exit_code == 0 and "(from" not in r.output
    assert (load_profile(out).metadata["gpu"], load_profile(out).metadata["cudagraph_max_tokens"]) == ("b200", 1024)


def test_profile_fit_on_a_spec_file_names_the_file(tmp_path):
    path = _file(tmp_path, "h100.json", {**B200_FILE, "name": "h100", "hbm_bytes_per_s": 3.35e12,
                                         "bf16_flops_per_s": 989.4e12, "fp8_flops_per_s": 1978.9e12,
                                         "fp4_flops_per_s": None, "num_sms": 132, "memory_bytes": 85.5e9,
                                         "link_bytes_per_s": 450e9})
    out = tmp_path / "fit.json"
    r = RUN.invoke(app, ["profile", "fit", str(POINTS / "vllm_c16.json"), "--model", "llama2-7b", "--gpu-spec",
                         str(path), "--params", "kernel_s", "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "on h100 (from h100.json), TP 1" in " ".join(r.output.split())
    assert load_profile(out).metadata["gpu"] == "h100 (from h100.json)"
    assert step_model_of(load_profile(out)).gpu == GpuSpec(**{**B200_FILE, "name": "h100", "hbm_bytes_per_s": 3.35e12,
                                                              "bf16_flops_per_s": 989.4e12,
                                                              "fp8_flops_per_s": 1978.9e12, "fp4_flops_per_s": None,
                                                              "num_sms": 132, "memory_bytes": 85.5e9,
                                                              "link_bytes_per_s": 450e9,
                                                              "source": "user GPU spec h100.json",
                                                              "spec_file": "h100.json"})


def test_a_profiles_default_name_tells_a_spec_file_from_the_bundled_part(tmp_path, monkeypatch):
    """``profile analytic --gpu b200.json`` (the file's GPU named b200) wrote b200-qwen3-8b-tp1-terms.json, the name
    of a profile built on the bundled B200; the file's GPU is now NAME-from-STEM in the default name, as its label
    says NAME (from FILE); the bundled part's names do not move."""
    assert all(g.name_in_files == name for name, g in GPUS.items())
    odd = load_gpu_spec(_file(tmp_path, "my b200 (v2).json", B200_FILE))
    assert odd.name_in_files == "b200-from-my_b200__v2_" and odd.label == "b200 (from my b200 (v2).json)"
    path = _file(tmp_path, "b200.json", {**B200_FILE, "compute_capability": "10.0"})
    assert step_model("qwen3-8b", load_gpu_spec(path)).profile(64).metadata["name"] == "b200-from-b200-qwen3-8b-tp1"
    monkeypatch.chdir(tmp_path)
    for gpu, name in ((str(path), "b200-from-b200-qwen3-8b-tp1-terms.json"), ("b200", "b200-qwen3-8b-tp1-terms.json")):
        r = RUN.invoke(app, ["profile", "analytic", "--model", "qwen3-8b", "--gpu", gpu, "--max-batch-tokens", "64"],
                       env={"COLUMNS": "200"})
        assert r.exit_code == 0, r.output
        assert r.output.splitlines()[-1].startswith(f"{name}: step ")
        assert load_profile(tmp_path / name).metadata["name"] == name.removesuffix(".json").removesuffix("-terms")
    r = RUN.invoke(app, ["profile", "fit", str(POINTS / "vllm_c16.json"), "--model", "llama2-7b", "--gpu-spec",
                         str(_file(tmp_path, "h100.json", {**B200_FILE, "name": "h100"})), "--params", "kernel_s"],
                   env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert (tmp_path / "h100-from-h100-llama2-7b-tp1-fitted.json").is_file()
