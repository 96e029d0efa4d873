"""GPU datasheet table, name lookup, dtype rates and user GPU spec files."""

from __future__ import annotations

import json
import math
from dataclasses import fields

import pytest

from specsim.errors import SpecsimInputError
from specsim.hardware.gpus import DTYPES, GPUS, GpuSpec, gpu_spec, load_gpu_spec, resolve_gpu

KEYS = {"a100", "h100", "h200", "h800", "h20", "b200", "gb200", "b300", "gb300", "l40s", "rtx4090", "rtxpro6000",
        "mi300x"}
#: Blackwell Ultra raised only FP4: 6x its BF16 rate (HGX B300 13.5 / 2.25 PF, GB300 15 / 2.5 PF dense).
FP4_OVER_BF16 = {"b300": 6, "gb300": 6}


def test_every_gpu_is_listed_with_positive_numbers():
    assert set(GPUS) == KEYS
    for key, g in GPUS.items():
        assert g.name == key and g.source
        for f in fields(GpuSpec):
            value = getattr(g, f.name)
            if f.name in ("name", "source", "compute_capability", "spec_file") or value is None:
                continue
            assert math.isfinite(value) and value > 0, (key, f.name)
        assert g.flops_per_s("bf16") == g.flops_per_s("fp16") == g.bf16_flops_per_s
        for dtype in ("fp8", "fp4"):
            rate = getattr(g, f"{dtype}_flops_per_s")
            if rate is None:
                with pytest.raises(SpecsimInputError, match=key):
                    g.flops_per_s(dtype)
            else:
                # Each narrower dtype doubles the dense tensor rate (the L40S datasheet's FP8 is 1.2% above 2x).
                ratio = 2 if dtype == "fp8" else FP4_OVER_BF16.get(key, 4)
                assert g.flops_per_s(dtype) == pytest.approx(g.bf16_flops_per_s * ratio, rel=0.013)


def test_dtype_support_matches_the_datasheets():
    fp8 = {k for k, g in GPUS.items() if g.fp8_flops_per_s}
    fp4 = {k for k, g in GPUS.items() if g.fp4_flops_per_s}
    assert fp8 == KEYS - {"a100"}
    assert fp4 == {"b200", "gb200", "b300", "gb300", "rtxpro6000"}
    with pytest.raises(SpecsimInputError, match="dtype"):
        GPUS["h100"].flops_per_s("int8")
    assert DTYPES == ("bf16", "fp16", "fp8", "fp4")


def test_blackwell_ultra_numbers_per_gpu():
    """HGX B300: the board's 36 / 72 PFLOPS (sparse) BF16 / FP8 and 108 PFLOPS dense FP4 over 8 GPUs; GB300: 15 PF
    dense FP4 per GPU, the rack's 360 / 720 PFLOPS (sparse) over 72 GPUs halved; memory as the devices report it."""
    b, gb = gpu_spec("hgx-b300"), gpu_spec("gb300-nvl72")
    assert (b.bf16_flops_per_s, b.fp8_flops_per_s, b.fp4_flops_per_s) == (36e15 / 8 / 2, 72e15 / 8 / 2, 108e15 / 8)
    assert (gb.bf16_flops_per_s, gb.fp8_flops_per_s, gb.fp4_flops_per_s) == (360e15 / 72 / 2, 720e15 / 72 / 2, 15e15)
    assert b.num_sms == gb.num_sms == 160 and b.hbm_bytes_per_s == gb.hbm_bytes_per_s == 8e12
    assert b.link_bytes_per_s == gb.link_bytes_per_s == 1.8e12 / 2
    assert (b.memory_bytes, gb.memory_bytes) == (275040 * 2 ** 20, 284208 * 2 ** 20)
    assert b.memory_bytes < gb.memory_bytes < 288 * 2 ** 30            # below the datasheet "288GB" read as GiB


def test_h100_numbers_unchanged():
    h = gpu_spec("h100")
    assert (h.hbm_bytes_per_s, h.bf16_flops_per_s, h.num_sms) == (3.35e12, 989.4e12, 132)
    assert (gpu_spec("a100").hbm_bytes_per_s, gpu_spec("a100").bf16_flops_per_s) == (2.039e12, 312e12)
    assert (gpu_spec("b200").bf16_flops_per_s, gpu_spec("h200").hbm_bytes_per_s) == (2.25e15, 4.8e12)
    assert h.link_bytes_per_s == 450e9 and gpu_spec("h800").link_bytes_per_s == 200e9
    assert gpu_spec("h800").bf16_flops_per_s == h.bf16_flops_per_s


@pytest.mark.parametrize("name,key", [
    ("H100", "h100"), ("h100_dgx", "h100"), ("h100-sxm", "h100"), ("H100-SXM5-80GB", "h100"),
    ("MI300X", "mi300x"), ("mi300x-oam", "mi300x"), ("RTX 4090", "rtx4090"), ("geforce-rtx-4090", "rtx4090"),
    ("rtx-pro-6000", "rtxpro6000"), ("RTX_PRO_6000_server", "rtxpro6000"), ("gb200-nvl72", "gb200"),
    ("hgx-b200", "b200"), ("L40S", "l40s"), ("h20", "h20"), ("HGX-B300", "b300"), ("b300_sxm6_ac", "b300"),
    ("GB300-NVL72", "gb300"), ("dgx_b300", "b300")])
def test_lookup_is_tolerant(name, key):
    assert gpu_spec(name) is GPUS[key]


def test_unknown_gpu_lists_known_ones():
    with pytest.raises(SpecsimInputError, match="mi300x") as err:
        gpu_spec("v100")
    assert err.value.field == "gpu"


GOOD = {"name": "my-gpu", "hbm_bytes_per_s": 2e12, "bf16_flops_per_s": 400e12, "num_sms": 100,
        "memory_bytes": 64e9, "link_bytes_per_s": 100e9, "link_latency_s": 7e-6, "fp8_flops_per_s": None}


def test_load_gpu_spec_and_resolve(tmp_path):
    path = tmp_path / "my_gpu.json"
    path.write_text(json.dumps(GOOD))
    g = load_gpu_spec(path)
    assert (g.name, g.num_sms, g.fp8_flops_per_s, g.fp4_flops_per_s) == ("my-gpu", 100, None, None)
    assert g.source == "user GPU spec my_gpu.json" and g.flops_per_s("bf16") == 400e12
    assert resolve_gpu(str(path)) == g and resolve_gpu(path) == g
    assert resolve_gpu("h100") is GPUS["h100"] and resolve_gpu(g) is g


@pytest.mark.parametrize("change,field", [
    ({"memory_bytes": None}, "memory_bytes"),                 # missing (removed below)
    ({"num_sms": 1.5}, "num_sms"),
    ({"hbm_bytes_per_s": -1}, "hbm_bytes_per_s"),
    ({"bf16_flops_per_s": "fast"}, "bf16_flops_per_s"),
    ({"fp4_flops_per_s": 0}, "fp4_flops_per_s"),
    ({"link_latency_s": float("inf")}, "link_latency_s"),
    ({"nvlink": 900e9}, "nvlink"),                            # unknown key
])
def test_load_gpu_spec_errors_name_file_and_field(tmp_path, change, field):
    data = {**GOOD, **change}
    if change.get("memory_bytes", 0) is None:
        del data["memory_bytes"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecsimInputError) as err:
        load_gpu_spec(path)
    assert err.value.file == str(path) and err.value.field == field
    assert str(path) in str(err.value)


def test_load_gpu_spec_bad_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(SpecsimInputError, match="JSON object"):
        load_gpu_spec(bad)
    bad.write_text("{")
    with pytest.raises(SpecsimInputError, match="invalid JSON"):
        load_gpu_spec(bad)
    with pytest.raises(SpecsimInputError, match="readable"):
        load_gpu_spec(tmp_path / "none.json")


@pytest.mark.parametrize("name, other", [
    ("a100-40gb", "40gb"), ("gb300-dgx-station", "dgx-station"), ("h100-94gb", "94gb"), ("h20-141gb", "141gb"),
    ("rtx4090-d", "d"), ("rtxpro6000-maxq", "maxq"), ("h100-pcie", "pcie"), ("h100-nvl", "nvl")])
def test_a_suffix_naming_another_part_is_refused(name, other):
    """A suffix was dropped, so a100-40gb got the A100 80GB's 2,039 GB/s and gb300-dgx-station the NVL72 GPU's
    numbers; only suffixes of the listed part are accepted, others refused naming the suffix."""
    with pytest.raises(SpecsimInputError) as err:
        gpu_spec(name)
    assert err.value.field == "gpu" and err.value.got == repr(name)
    assert f"'{other}' names a part with other numbers" in err.value.expected


def test_suffixes_of_the_listed_part_are_accepted_and_a_typo_gets_the_nearest_names():
    assert gpu_spec("l40s-pcie") is GPUS["l40s"] and gpu_spec("A100-SXM4-80GB") is GPUS["a100"]
    assert gpu_spec("gb300-nvl72-288gb") is GPUS["gb300"] and gpu_spec("rtx-4090-24gb") is GPUS["rtx4090"]
    with pytest.raises(SpecsimInputError, match=r"did you mean h100 or h20\?"):
        gpu_spec("h10")


def test_gpu_spec_file_gives_the_plausible_range_and_refuses_the_wrong_unit(tmp_path):
    """HBM bandwidth written in TB/s (2.0) is refused with the range real parts give, naming file and key."""
    path = tmp_path / "tb.json"
    path.write_text(json.dumps({**GOOD, "hbm_bytes_per_s": 2.0}))
    with pytest.raises(SpecsimInputError) as err:
        load_gpu_spec(path)
    msg = " ".join(str(err.value).split())
    assert (err.value.file, err.value.field, err.value.got) == (str(path), "hbm_bytes_per_s", "2.0")
    assert "bytes/s" in msg and "[1e+10, 1e+14]" in msg and "1e11 to 1e13" in msg and "TB/s" in msg
    path.write_text(json.dumps({**GOOD, "hbm_bytes_per_s": 2e15}))        # 2 PB/s: far above any part
    with pytest.raises(SpecsimInputError, match="hbm_bytes_per_s"):
        load_gpu_spec(path)
    path.write_text(json.dumps({**GOOD, "hbm_bytes_per_s": 1.2e11}))       # a small part's 120 GB/s passes
    assert load_gpu_spec(path).hbm_bytes_per_s == 1.2e11


@pytest.mark.parametrize("change,field,floor", [
    ({"fp8_flops_per_s": 200e12}, "fp8_flops_per_s", "bf16_flops_per_s"),           # below BF16's 400e12
    ({"fp8_flops_per_s": 800e12, "fp4_flops_per_s": 500e12}, "fp4_flops_per_s", "fp8_flops_per_s"),
    ({"fp4_flops_per_s": 300e12}, "fp4_flops_per_s", "bf16_flops_per_s"),           # no FP8: against BF16
])
def test_gpu_spec_refuses_a_narrower_peak_below_a_wider_one(tmp_path, change, field, floor):
    path = tmp_path / "order.json"
    path.write_text(json.dumps({**GOOD, **change}))
    with pytest.raises(SpecsimInputError) as err:
        load_gpu_spec(path)
    assert (err.value.file, err.value.field) == (str(path), field)
    assert f"a peak >= {floor}" in str(err.value)
    ok = {**GOOD, "fp8_flops_per_s": 400e12, "fp4_flops_per_s": 1600e12}            # equal to BF16 is accepted
    assert GpuSpec(**{**ok, "source": "t"}).flops_per_s("fp4") == 1600e12
