"""Datasheet numbers of the GPUs specsim knows, for the step-time model's terms and the analytic generator.

Every FLOP/s number is a vendor datasheet value for DENSE tensor-core math (no 2:4 structured sparsity;
datasheets that print "with sparsity" figures are halved, and the halving is said below). BF16 and FP16 run at
the same rate on every GPU here (FP32 accumulate). ``link_bytes_per_s`` is the per-GPU *unidirectional*
scale-up bandwidth (half the "bidirectional" figure datasheets print). ``memory_bytes`` is the capacity in
bytes: the total the device reports (nvidia-smi memory.total, MiB) where specsim.hardware.kv_capacity already records
it (A100, H100, H200, B200; H800 is an H100 80GB) or public logs print it (B300, GB300: their datasheet "288GB"
read as GiB would overstate the device by 4-7%), otherwise the datasheet's GB read as GiB (memory chips come
in binary sizes; a datasheet "80GB" HBM3 part reports 81,559 MiB).

Per GPU (key; HBM/GDDR bandwidth; dense BF16 / FP8 / FP4 tensor FLOP/s; SMs; capacity; link):

* ``a100`` A100 SXM4 80GB: HBM2e 2,039 GB/s; BF16 312 TFLOPS (624 with sparsity); no FP8, no FP4; 108 SMs;
  80 GB; NVLink 3 600 GB/s bidirectional -> 300 GB/s. (NVIDIA A100 Tensor Core GPU datasheet, 2021.)
* ``h100`` H100 SXM5 80GB: HBM3 3.35 TB/s; BF16 989.4 TFLOPS (1,979 with sparsity); FP8 1,978.9 (3,958
  with sparsity); no FP4; 132 SMs; 80 GB; NVLink 4 900 GB/s -> 450 GB/s. (NVIDIA H100 Tensor Core GPU
  datasheet, 2023; SM count from the NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022.)
* ``h200`` H200 SXM 141GB: HBM3e 4.8 TB/s; same GH100 compute as H100 SXM (BF16 989.4, FP8 1,978.9); 132 SMs;
  141 GB; NVLink 900 GB/s -> 450 GB/s. (NVIDIA H200 Tensor Core GPU datasheet, 2024.)
* ``h800`` H800 SXM5 80GB: H100 SXM compute and HBM3 (3.35 TB/s, BF16 989.4, FP8 1,978.9, 132 SMs, 80 GB);
  NVLink cut to 400 GB/s bidirectional -> 200 GB/s. (NVIDIA H800 Tensor Core GPU product brief, 2023.)
* ``h20`` H20 96GB: HBM3 4.0 TB/s; BF16 148 TFLOPS, FP8 296 TFLOPS (dense); no FP4; 78 SMs; 96 GB; NVLink 900
  GB/s -> 450 GB/s. (NVIDIA HGX H20 specification sheet, 2024, as distributed through NVIDIA's partners; no
  public datasheet page exists; SM count as the device reports it.)
* ``b200`` B200 (HGX B200, 1,000 W): HBM3e 8 TB/s; BF16 2.25 PFLOPS, FP8 4.5, FP4 9 (dense; 4.5/9/18 with
  sparsity); 148 SMs; 180 GB; NVLink 5 1.8 TB/s -> 900 GB/s. (NVIDIA HGX B200 / DGX B200 datasheets,
  2024-2025; SM count from the NVIDIA Blackwell architecture technical brief, 2024.)
* ``gb200`` B200 GPU of a GB200 NVL72 (1,200 W): HBM3e 8 TB/s (576 TB/s / 72); BF16 2.5 PFLOPS, FP8 5, FP4 10
  (dense; the rack's 360/720/1,440 PFLOPS with sparsity / 72 / 2); 148 SMs (same die as B200); 186 GB (13.4 TB
  / 72); NVLink 5 1.8 TB/s -> 900 GB/s. (NVIDIA GB200 NVL72 datasheet, 2024.)
* ``b300`` B300 of an HGX B300 board (8 x Blackwell Ultra SXM, "B300 SXM6 AC", 1,100 W): HBM3e 8 TB/s; BF16
  2.25 PFLOPS, FP8 4.5, FP4 13.5 (dense: the board's FP16/BF16 36 and FP8/FP6 72 PFLOPS are printed with
  sparsity, so / 8 / 2; its FP4 row is printed "144 | 108" sparse | dense, so 108 / 8, not halved); 160 SMs;
  275,040 MiB as the device reports it (the datasheet's 288 GB per GPU, the HGX page's 2.1 TB per board); NVLink 5
  1.8 TB/s -> 900 GB/s. (NVIDIA HGX platform page, www.nvidia.com/en-us/data-center/hgx, 2025, its Blackwell
  table as quoted verbatim in public repositories: the page itself was not in the searchable corpus; 8 TB/s,
  288 GB, 160 SMs and NVLink from the NVIDIA Technical Blog "Inside NVIDIA Blackwell Ultra: The Chip Powering
  the AI Factory Era", 2025-08; 275,040 MiB is nvidia-smi's memory.total in public benchmark logs, not an
  NVIDIA page. The 1,100 W board power is the limit those logs show: no NVIDIA page found states it.)
* ``gb300`` Blackwell Ultra GPU of a GB300 NVL72 (1,400 W): HBM3e 8 TB/s; BF16 2.5 PFLOPS, FP8 5, FP4 15 (dense;
  FP4 as the blog prints it; BF16 and FP8 are the rack's 360 / 720 PFLOPS with sparsity / 72 / 2: NVIDIA prints
  no per-GPU BF16 figure); 160 SMs; 284,208 MiB as the device reports it (datasheet 288 GB); NVLink 5 1.8 TB/s
  -> 900 GB/s. (NVIDIA Technical Blog "Inside NVIDIA Blackwell Ultra", 2025-08, for 15 PF dense NVFP4, 160
  SMs, 288 GB, 8 TB/s and 1.8 TB/s NVLink; the 1,400 W is its table as third-party summaries quote it, not seen
  in the blog's searchable text; NVIDIA GB300 NVL72 page, 2025, for the rack rates, as quoted by third parties; 284,208 MiB is nvidia-smi's memory.total on GB300 NVL72 trays in public logs. The
  DGX Station GB300 is another edition: it reports 256,703 MiB at 1,300 W and is not this entry.)
  Blackwell Ultra's FP4 rate is 6x its BF16 rate, not 4x: the Ultra raised only FP4 over Blackwell.
* ``l40s`` L40S 48GB (PCIe): GDDR6 864 GB/s; BF16 362.05 TFLOPS (733 with sparsity), FP8 733 (1,466 with
  sparsity); no FP4; 142 SMs; 48 GB; no NVLink: PCIe Gen4 x16 64 GB/s bidirectional -> 32 GB/s. (NVIDIA L40S
  GPU datasheet, 2023, whose FP8 figure is 1.2% above twice its BF16 one; both kept as printed. The L40, not
  the L40S, is the 181 TFLOPS part.)
* ``rtx4090`` GeForce RTX 4090 24GB: GDDR6X 1,008 GB/s; BF16 165.2 TFLOPS with FP32 accumulate (what PyTorch's
  BF16 GEMMs use; FP16 with FP16 accumulate is 330.3), FP8 330.3 with FP32 accumulate (660.6 with FP16
  accumulate); no FP4; 128 SMs; 24 GB; PCIe Gen4 x16 -> 32 GB/s. (NVIDIA Ada Lovelace GPU Architecture
  whitepaper, appendix table of the RTX 4090, 2022.)
* ``rtxpro6000`` RTX PRO 6000 Blackwell (Workstation / Server Edition) 96GB: GDDR7 1,792 GB/s; BF16 503.8
  TFLOPS, FP8 1,007.6, FP4 2,015.2 (dense; the 4,000 "AI TOPS" headline is FP4 with sparsity); 188 SMs; 96
  GB; no NVLink: PCIe Gen5 x16 128 GB/s bidirectional -> 64 GB/s. (NVIDIA RTX PRO 6000 Blackwell datasheet,
  2025; per-format rates from the NVIDIA RTX Blackwell GPU Architecture whitepaper, 2025.)
* ``mi300x`` AMD Instinct MI300X: HBM3 5.3 TB/s; BF16 1,307.4 TFLOPS, FP8 2,614.9 (dense); no FP4; 304 CUs
  (in ``num_sms``); 192 GB; Infinity Fabric 7 links x 128 GB/s bidirectional -> 448 GB/s. (AMD Instinct
  MI300X accelerator datasheet, 2023.)

``compute_capability`` is CUDA's (``nvidia-smi --query-gpu=compute_cap``; NVIDIA's CUDA GPUs page): 8.0 A100, 8.9
L40S and RTX 4090, 9.0 H100, H200, H800 and H20, 10.0 B200 and GB200, 10.3 B300 and GB300 (Blackwell Ultra,
``sm_103`` since CUDA 12.9), 12.0 RTX PRO 6000 Blackwell; none for the MI300X (AMD's gfx942 is no CUDA
capability). vLLM picks defaults by its family (the CUDA-graph capture limit,
:func:`specsim.hardware.analytic.default_capture_tokens`), so specsim reads it from this field, never from the
name: a GPU spec file gives it or takes the generic default.

``link_latency_s`` is an assumption, not a datasheet number: the small-message all-reduce latency NCCL reaches
inside one NVLink/NVSwitch domain is a few microseconds (nccl-tests all_reduce_perf on 8-GPU HGX nodes), so
specsim takes 5 us for NVLink GPUs, 8 us for MI300X over Infinity Fabric (RCCL), and 10 us for PCIe cards
(peer-to-peer through the host bridge). It is meant to be fitted (``specsim profile fit``) where measurements
exist.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, fields
from pathlib import Path

from specsim.errors import SpecsimInputError

#: Tensor dtypes :meth:`GpuSpec.flops_per_s` knows.
DTYPES = ("bf16", "fp16", "fp8", "fp4")

_GIB = 2.0 ** 30
_MIB = 2.0 ** 20
_NVLINK_LATENCY_S = 5e-6    # assumption (module docstring)
_XGMI_LATENCY_S = 8e-6      # assumption (module docstring)
_PCIE_LATENCY_S = 10e-6     # assumption (module docstring)


#: Plausible range of each field in SI units, to catch a value written in TB/s, TFLOPS, GB or microseconds, and
#: what real parts give (the refused range is wider, so an unusual part passes and a wrong unit does not).
_PLAUSIBLE = {"hbm_bytes_per_s": (1e10, 1e14, "bytes/s", "real HBM/GDDR parts give 1e11 to 1e13; 2.0e12 is 2 TB/s"),
              "bf16_flops_per_s": (1e12, 1e17, "FLOP/s", "real parts give 1e13 to 1e16; 989e12 is 989 TFLOPS"),
              "fp8_flops_per_s": (1e12, 1e17, "FLOP/s", "real parts give 1e13 to 1e16; 1979e12 is 1,979 TFLOPS"),
              "fp4_flops_per_s": (1e12, 1e17, "FLOP/s", "real parts give 1e14 to 2e16; 9e15 is 9 PFLOPS"),
              "memory_bytes": (1e9, 1e13, "bytes", "real parts give 8e9 to 3e11; 80e9 is 80 GB"),
              "link_bytes_per_s": (1e9, 1e13, "bytes/s", "real links give 3e10 (PCIe 4 x16) to 9e11 (NVLink 5)"),
              "link_latency_s": (1e-8, 1e-2, "seconds", "about 5e-6 on NVLink, 1e-5 on PCIe")}


def _in_range(key: str) -> str:
    """The plausible range of ``key`` in words: a finite number > 0 between its bounds, what real parts give."""
    lo, hi, unit, real = _PLAUSIBLE[key]
    return (f"a finite number > 0 in [{lo:.0e}, {hi:.0e}] {unit} ({real}; a value far outside is probably in "
            "another unit, TB/s, TFLOPS, GB or us)")


#: Suffix parts (after the name, ``-``/``_``-separated) that denote the very part each entry of :data:`GPUS` lists:
#: its form factor, memory size, board or edition. Any other suffix (``a100-40gb``, ``h100-pcie``, ``h100-94gb``,
#: ``gb300-dgx-station``, ``rtx4090-d``, ``rtxpro6000-maxq``) names a part with other numbers and is refused.
SAME_PART_SUFFIXES: dict[str, tuple[str, ...]] = {
    "a100": ("sxm", "sxm4", "80gb", "hgx", "dgx"),
    "h100": ("sxm", "sxm5", "80gb", "hgx", "dgx"),
    "h200": ("sxm", "141gb", "hgx", "dgx"),
    "h800": ("sxm", "sxm5", "80gb", "hgx"),
    "h20": ("96gb", "hgx"),
    "b200": ("sxm", "sxm6", "180gb", "hgx", "dgx"),
    "gb200": ("nvl72", "186gb"),
    "b300": ("sxm", "sxm6", "ac", "288gb", "hgx", "dgx"),
    "gb300": ("nvl72", "288gb"),
    "l40s": ("pcie", "48gb"),
    "rtx4090": ("24gb",),
    "rtxpro6000": ("blackwell", "workstation", "server", "edition", "96gb"),
    "mi300x": ("oam", "192gb"),
}


@dataclass(frozen=True)
class GpuSpec:
    """Peak numbers of one GPU (module docstring: every number and its source).

    Args:
        name: short name (``"h100"``).
        hbm_bytes_per_s: peak memory bandwidth in bytes/s.
        bf16_flops_per_s: peak dense BF16/FP16 tensor-core throughput in FLOP/s.
        num_sms: streaming multiprocessors (compute units on AMD); listed by ``profile gpus``. The step model no
            longer rounds a GEMM's tiles up to whole waves of them (stream-K, since 2026-12-06), so it does not
            enter the step time.
        source: the datasheet(s) the numbers come from (title and year).
        memory_bytes: device memory capacity in bytes.
        link_bytes_per_s: per-GPU unidirectional scale-up bandwidth in bytes/s (NVLink, Infinity Fabric, or
            PCIe for cards without either).
        link_latency_s: per-collective latency in seconds (an assumption; module docstring).
        fp8_flops_per_s: peak dense FP8 tensor FLOP/s, or None where the GPU has no FP8 tensor cores.
        fp4_flops_per_s: peak dense FP4 tensor FLOP/s, or None where the GPU has no FP4 tensor cores.
        compute_capability: CUDA compute capability ``"major.minor"`` (``"9.0"``, ``"10.0"``), or None (not
            given, or no CUDA part); the engine's defaults by GPU family read it (module docstring).
        spec_file: the name of the GPU spec file the numbers were read from (:func:`load_gpu_spec` sets it; None
            for the parts of :data:`GPUS`): :attr:`label` names it, so a file whose ``name`` is ``h100`` is never
            taken for the bundled H100.

    Raises:
        SpecsimInputError: a number is not finite and > 0 or outside its plausible SI range (a bandwidth written
            in TB/s); the FP8 peak below the BF16 one, or the FP4 peak below the FP8 (else BF16) one; num_sms not
            an int >= 1; a compute capability that is not a ``"major.minor"`` string; naming the field.
    """

    name: str
    hbm_bytes_per_s: float
    bf16_flops_per_s: float
    num_sms: int
    source: str
    memory_bytes: float
    link_bytes_per_s: float
    link_latency_s: float
    fp8_flops_per_s: float | None = None
    fp4_flops_per_s: float | None = None
    compute_capability: str | None = None
    spec_file: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise SpecsimInputError(None, None, "name", "a non-empty string", repr(self.name))
        if not isinstance(self.source, str):
            raise SpecsimInputError(None, None, "source", "a string", repr(self.source))
        cc = self.compute_capability
        if cc is not None and not (isinstance(cc, str) and re.fullmatch(r"\d{1,2}\.\d{1,2}", cc)):
            raise SpecsimInputError(None, None, "compute_capability", _expected("compute_capability"), repr(cc))
        if self.spec_file is not None and not isinstance(self.spec_file, str):
            raise SpecsimInputError(None, None, "spec_file", "a file name or null", repr(self.spec_file))
        if isinstance(self.num_sms, bool) or not isinstance(self.num_sms, int) or self.num_sms < 1:
            raise SpecsimInputError(None, None, "num_sms", "an int >= 1", repr(self.num_sms))
        for key in ("hbm_bytes_per_s", "bf16_flops_per_s", "memory_bytes", "link_bytes_per_s",
                    "link_latency_s", "fp8_flops_per_s", "fp4_flops_per_s"):
            value = getattr(self, key)
            if value is None and key in ("fp8_flops_per_s", "fp4_flops_per_s"):
                continue
            lo, hi = _PLAUSIBLE[key][:2]
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or not lo <= value <= hi):
                raise SpecsimInputError(None, None, key, _expected(key), repr(value))
        self._check_peak_order()

    def _check_peak_order(self) -> None:
        """A narrower dtype's peak is at least the wider one's: FP8 >= BF16, FP4 >= FP8 (or >= BF16 without FP8),
        as on every part (a lower FP8 peak is a typo or a sparsity figure beside a dense one)."""
        wider = ("bf16_flops_per_s", self.bf16_flops_per_s)
        for key in ("fp8_flops_per_s", "fp4_flops_per_s"):
            value = getattr(self, key)
            if value is None:
                continue
            if value < wider[1]:
                raise SpecsimInputError(None, None, key, f"a peak >= {wider[0]} ({wider[1]:.4g} FLOP/s): a "
                                        "narrower dtype runs at least as fast on every GPU (dense figures for "
                                        "both, or null where the GPU has no such tensor cores)", repr(value))
            wider = (key, value)

    @property
    def label(self) -> str:
        """The GPU as messages and a profile's ``metadata.gpu`` name it: ``name``, and ``(from FILE)`` for a GPU
        spec file's (``h100 (from my_h100.json)``)."""
        return self.name if self.spec_file is None else f"{self.name} (from {self.spec_file})"

    @property
    def name_in_files(self) -> str:
        """The GPU in a default profile name and file name: ``name`` for a bundled part, ``NAME-from-STEM`` for a
        GPU spec file's (``b200-from-my_b200`` for ``my_b200.json``), as :attr:`label` says ``NAME (from FILE)``: a
        profile built on a file whose ``name`` is ``b200`` is never named as one built on the bundled B200 (until
        2026-12-07 both wrote ``b200-...-terms.json``). Characters of the stem other than letters, digits, ``.``,
        ``_`` and ``-`` become ``_``."""
        if self.spec_file is None:
            return self.name
        return f"{self.name}-from-{re.sub(r'[^A-Za-z0-9._-]', '_', Path(self.spec_file).stem)}"

    @property
    def compute_family(self) -> int | None:
        """The major CUDA compute capability (``10`` for ``"10.3"``), or None where not given."""
        return None if self.compute_capability is None else int(self.compute_capability.split(".")[0])

    def supports(self, dtype: str) -> bool:
        """True when the GPU has tensor cores for ``dtype`` (BF16 and FP16 always; FP8 / FP4 where their peak is
        set)."""
        key = str(dtype).lower()
        return key in ("bf16", "fp16") or (key in DTYPES and getattr(self, f"{key}_flops_per_s") is not None)

    def flops_per_s(self, dtype: str) -> float:
        """Peak dense tensor FLOP/s for GEMMs in ``dtype``.

        Args:
            dtype: ``"bf16"``, ``"fp16"`` (same rate as BF16), ``"fp8"`` or ``"fp4"``.
        Returns:
            FLOP/s (dense, no sparsity).
        Raises:
            SpecsimInputError: unknown dtype, or the GPU has no tensor cores for it (naming the GPU).
        """
        key = str(dtype).lower()
        if key in ("bf16", "fp16"):
            return float(self.bf16_flops_per_s)
        if key not in DTYPES:
            raise SpecsimInputError(None, None, "dtype", f"one of {list(DTYPES)}", repr(dtype))
        value = self.fp8_flops_per_s if key == "fp8" else self.fp4_flops_per_s
        if value is None:
            supported = [d for d in DTYPES if d in ("bf16", "fp16") or getattr(self, f"{d}_flops_per_s")]
            raise SpecsimInputError(None, None, "dtype", f"a dtype {self.name} has tensor cores for "
                                    f"({', '.join(supported)})", repr(dtype))
        return float(value)


def _spec(name: str, hbm: float, bf16: float, fp8: float | None, fp4: float | None, sms: int,
          memory_bytes: float, link: float, latency_s: float, source: str, cc: str | None) -> GpuSpec:
    """A :class:`GpuSpec` from positional datasheet numbers (SI units: bytes/s, FLOP/s, bytes, s) and its CUDA
    compute capability."""
    return GpuSpec(name=name, hbm_bytes_per_s=hbm, bf16_flops_per_s=bf16, num_sms=sms, source=source,
                   memory_bytes=memory_bytes, link_bytes_per_s=link, link_latency_s=latency_s,
                   fp8_flops_per_s=fp8, fp4_flops_per_s=fp4, compute_capability=cc)


GPUS: dict[str, GpuSpec] = {
    "a100": _spec("a100", 2.039e12, 312e12, None, None, 108, 81920 * _MIB, 300e9, _NVLINK_LATENCY_S,
                  "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB), 2021", "8.0"),
    "h100": _spec("h100", 3.35e12, 989.4e12, 1978.9e12, None, 132, 81559 * _MIB, 450e9, _NVLINK_LATENCY_S,
                  "NVIDIA H100 Tensor Core GPU datasheet (SXM5), 2023", "9.0"),
    "h200": _spec("h200", 4.8e12, 989.4e12, 1978.9e12, None, 132, 143771 * _MIB, 450e9, _NVLINK_LATENCY_S,
                  "NVIDIA H200 Tensor Core GPU datasheet (SXM), 2024", "9.0"),
    "h800": _spec("h800", 3.35e12, 989.4e12, 1978.9e12, None, 132, 81559 * _MIB, 200e9, _NVLINK_LATENCY_S,
                  "NVIDIA H800 Tensor Core GPU product brief (SXM5), 2023", "9.0"),
    "h20": _spec("h20", 4.0e12, 148e12, 296e12, None, 78, 96 * _GIB, 450e9, _NVLINK_LATENCY_S,
                 "NVIDIA HGX H20 specification sheet (via partners), 2024", "9.0"),
    "b200": _spec("b200", 8.0e12, 2250e12, 4500e12, 9000e12, 148, 183359 * _MIB, 900e9, _NVLINK_LATENCY_S,
                  "NVIDIA HGX B200 datasheet, 2024", "10.0"),
    "gb200": _spec("gb200", 8.0e12, 2500e12, 5000e12, 10000e12, 148, 186 * _GIB, 900e9, _NVLINK_LATENCY_S,
                   "NVIDIA GB200 NVL72 datasheet (per GPU), 2024", "10.0"),
    "b300": _spec("b300", 8.0e12, 2250e12, 4500e12, 13500e12, 160, 275040 * _MIB, 900e9, _NVLINK_LATENCY_S,
                  "NVIDIA HGX platform page (HGX B300, per GPU) and NVIDIA Technical Blog 'Inside NVIDIA Blackwell "
                  "Ultra', 2025", "10.3"),
    "gb300": _spec("gb300", 8.0e12, 2500e12, 5000e12, 15000e12, 160, 284208 * _MIB, 900e9, _NVLINK_LATENCY_S,
                   "NVIDIA Technical Blog 'Inside NVIDIA Blackwell Ultra' and GB300 NVL72 page (per GPU), 2025",
                   "10.3"),
    "l40s": _spec("l40s", 0.864e12, 362.05e12, 733e12, None, 142, 48 * _GIB, 32e9, _PCIE_LATENCY_S,
                  "NVIDIA L40S GPU datasheet, 2023", "8.9"),
    "rtx4090": _spec("rtx4090", 1.008e12, 165.2e12, 330.3e12, None, 128, 24 * _GIB, 32e9, _PCIE_LATENCY_S,
                     "NVIDIA Ada Lovelace GPU Architecture whitepaper (GeForce RTX 4090), 2022", "8.9"),
    "rtxpro6000": _spec("rtxpro6000", 1.792e12, 503.8e12, 1007.6e12, 2015.2e12, 188, 96 * _GIB, 64e9,
                        _PCIE_LATENCY_S, "NVIDIA RTX PRO 6000 Blackwell datasheet and RTX Blackwell GPU Architecture "
                        "whitepaper, 2025", "12.0"),
    "mi300x": _spec("mi300x", 5.3e12, 1307.4e12, 2614.9e12, None, 304, 192 * _GIB, 448e9, _XGMI_LATENCY_S,
                    "AMD Instinct MI300X accelerator datasheet, 2023", None),
}

#: Other spellings of the keys of :data:`GPUS` (after lower-casing; ``_`` and spaces read as ``-``).
ALIASES: dict[str, str] = {
    "a100-sxm": "a100", "a100-sxm4": "a100", "h100-sxm": "h100", "h100-sxm5": "h100", "h200-sxm": "h200",
    "h800-sxm": "h800", "h800-sxm5": "h800", "hgx-b200": "b200", "dgx-b200": "b200", "gb200-nvl72": "gb200",
    "hgx-b300": "b300", "dgx-b300": "b300", "gb300-nvl72": "gb300",
    "rtx-4090": "rtx4090", "geforce-rtx-4090": "rtx4090", "4090": "rtx4090",
    "rtx-pro-6000": "rtxpro6000", "rtx-pro-6000-blackwell": "rtxpro6000", "rtx6000-pro": "rtxpro6000",
    "mi300": "mi300x", "instinct-mi300x": "mi300x", "amd-mi300x": "mi300x",
}


def gpu_spec(name: str) -> GpuSpec:
    """The :class:`GpuSpec` of ``name``: a key of :data:`GPUS` or :data:`ALIASES`, case-insensitive.

    A trailing suffix is accepted only where it denotes the listed part (:data:`SAME_PART_SUFFIXES`:
    ``h100_dgx``, ``h100-sxm5-80gb``, ``mi300x-oam``, ``rtx-pro-6000-server``, ``l40s-pcie``): the longest
    leading run of ``-``/``_``-separated parts that names a GPU wins, and every part after it must be one of that
    entry's suffixes. Another suffix (``a100-40gb``, ``h100-pcie``, ``gb300-dgx-station``) names a part with other
    numbers and is refused: give a GPU spec file for it.

    Raises:
        SpecsimInputError: unknown GPU, or a suffix naming another part; lists the known names (and the nearest).
    """
    text = str(name).strip().lower().replace("_", "-").replace(" ", "-")
    parts = text.split("-")
    for end in range(len(parts), 0, -1):
        cand = "-".join(parts[:end])
        key = next((k if k in GPUS else ALIASES[k] for k in (cand, cand.replace("-", ""))
                    if k in GPUS or k in ALIASES), None)
        if key is None:
            continue
        rest = [p for p in parts[end:] if p]
        other = [p for p in rest if p not in SAME_PART_SUFFIXES[key]]
        if other:
            raise SpecsimInputError(None, None, "gpu", f"{key} with a suffix that names the listed part "
                                    f"({', '.join(SAME_PART_SUFFIXES[key])}; `specsim profile gpus`), or a GPU spec "
                                    f".json file for this one ('{'-'.join(other)}' names a part with other numbers"
                                    + ("; PCIe and NVL parts have other bandwidth and clocks" if {"pcie", "nvl"} &
                                       set(other) else "") + ")",
                                    repr(name))
        return GPUS[key]
    near = difflib.get_close_matches(text, [*GPUS, *ALIASES], n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    raise SpecsimInputError(None, None, "gpu", f"one of {sorted(GPUS)} or a GPU spec .json file{hint}", repr(name))


_REQUIRED = ("name", "hbm_bytes_per_s", "bf16_flops_per_s", "num_sms", "memory_bytes", "link_bytes_per_s",
             "link_latency_s")
_OPTIONAL = ("fp8_flops_per_s", "fp4_flops_per_s", "source")


def load_gpu_spec(path: str | Path) -> GpuSpec:
    """A :class:`GpuSpec` from a JSON file (``--gpu-spec my_gpu.json``) with the field names of GpuSpec.

    Required keys: ``name``, ``hbm_bytes_per_s``, ``bf16_flops_per_s``, ``num_sms``, ``memory_bytes``,
    ``link_bytes_per_s``, ``link_latency_s`` (SI units: bytes, bytes/s, FLOP/s, s; dense, no sparsity).
    Optional: ``fp8_flops_per_s``, ``fp4_flops_per_s`` (null or absent: unsupported), ``compute_capability``
    (``"major.minor"`` as ``nvidia-smi --query-gpu=compute_cap`` prints it; null or absent: not given, and the
    engine's defaults by GPU family take their generic value) and ``source`` (default: the file's name). The spec
    is the file's whatever its ``name``: a file naming its GPU ``h100`` or ``b200`` gets none of the bundled
    part's numbers or defaults, and its :attr:`GpuSpec.label` names the file. Example::

        {"name": "my-gpu", "hbm_bytes_per_s": 3.35e12, "bf16_flops_per_s": 989.4e12, "num_sms": 132,
         "memory_bytes": 85520809984, "link_bytes_per_s": 450e9, "link_latency_s": 5e-6,
         "fp8_flops_per_s": 1978.9e12, "compute_capability": "9.0", "source": "vendor datasheet, 2024"}

    Raises:
        SpecsimInputError: unreadable file or not JSON; not an object; a missing or unknown key; a value of the
            wrong type, not > 0 or outside its plausible SI range (a bandwidth in TB/s); an FP8 peak below the
            BF16 one or an FP4 peak below the FP8 one (naming the file and the key).
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecsimInputError(str(path), None, None, "a readable GPU spec JSON file", str(e)) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        line = getattr(e, "lineno", None)
        raise SpecsimInputError(str(path), line, None, "a JSON object", f"invalid JSON ({e})") from None
    if not isinstance(data, dict):
        raise SpecsimInputError(str(path), None, None, "a JSON object of GpuSpec fields", type(data).__name__)
    for key in _REQUIRED:
        if key not in data:
            raise SpecsimInputError(str(path), None, key, _expected(key), "nothing (missing)")
    known = {f.name for f in fields(GpuSpec)} - {"spec_file"}          # set from the path, not the file
    for key in data:
        if key not in known:
            raise SpecsimInputError(str(path), None, str(key), f"one of the GpuSpec fields {sorted(known)}",
                                    "an unknown key")
    values = dict(data)
    values.setdefault("source", f"user GPU spec {path.name}")
    values["spec_file"] = path.name
    try:
        return GpuSpec(**values)
    except SpecsimInputError as e:
        expected = e.expected if e.field in _PLAUSIBLE else _expected(e.field or "")   # ranges, the peaks' order
        raise SpecsimInputError(str(path), None, e.field, expected, e.got) from None


def _expected(key: str) -> str:
    """What a GPU spec file must hold under ``key``, in words with units."""
    return {
        "name": "a non-empty string", "num_sms": "an int >= 1 (SMs, or CUs on AMD)",
        "hbm_bytes_per_s": "memory bandwidth in bytes/s, " + _in_range("hbm_bytes_per_s"),
        "bf16_flops_per_s": "dense BF16 tensor FLOP/s, " + _in_range("bf16_flops_per_s"),
        "memory_bytes": "device memory in bytes, " + _in_range("memory_bytes"),
        "link_bytes_per_s": "per-GPU unidirectional interconnect bandwidth in bytes/s, "
                            + _in_range("link_bytes_per_s"),
        "link_latency_s": "per-collective latency in seconds, " + _in_range("link_latency_s"),
        "fp8_flops_per_s": "dense FP8 tensor FLOP/s, " + _in_range("fp8_flops_per_s") + ", or null (unsupported)",
        "fp4_flops_per_s": "dense FP4 tensor FLOP/s, " + _in_range("fp4_flops_per_s") + ", or null (unsupported)",
        "source": "a string naming where the numbers come from",
        "compute_capability": "the CUDA compute capability as a string \"major.minor\" (nvidia-smi --query-gpu="
                              "compute_cap prints it: \"9.0\" for an H100, \"10.0\" for a B200), or null",
    }.get(key, "a GpuSpec field")


def resolve_gpu(name_or_path: str | Path | GpuSpec) -> GpuSpec:
    """A GPU by name (:func:`gpu_spec`) or from a ``.json`` spec file (:func:`load_gpu_spec`).

    Args:
        name_or_path: a known name (``h100``, ``mi300x``), a path ending in ``.json``, or a GpuSpec (returned).
    Raises:
        SpecsimInputError: unknown name, or a bad spec file.
    """
    if isinstance(name_or_path, GpuSpec):
        return name_or_path
    if isinstance(name_or_path, Path) or str(name_or_path).lower().endswith(".json"):
        return load_gpu_spec(name_or_path)
    return gpu_spec(str(name_or_path))
