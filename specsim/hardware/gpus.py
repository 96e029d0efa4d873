"""Datasheet numbers of the GPUs specsim knows, for KV-read terms and the analytic generator.

Every number is a vendor datasheet value (dense, no structured sparsity), per GPU:

* A100 SXM4 80GB: HBM2e 2,039 GB/s, BF16/FP16 tensor 312 TFLOPS, 108 SMs
  (NVIDIA A100 Tensor Core GPU datasheet, 2021).
* H100 SXM5 80GB: HBM3 3.35 TB/s, BF16/FP16 tensor 989.4 TFLOPS dense (1,979 with sparsity), 132 SMs
  (NVIDIA H100 Tensor Core GPU datasheet, 2023; SM count from the H100 architecture whitepaper).
* H200 SXM 141GB: HBM3e 4.8 TB/s, same GH100 compute as H100 SXM (989.4 TFLOPS dense BF16), 132 SMs
  (NVIDIA H200 Tensor Core GPU datasheet, 2024).
* B200 (HGX B200, 180GB): HBM3e 8 TB/s, 2.25 PFLOPS dense BF16 (4.5 with sparsity), 148 SMs
  (NVIDIA HGX B200 datasheet / DGX B200 datasheet, 2024-2025; SM count from the Blackwell
  architecture technical brief).
"""

from __future__ import annotations

from dataclasses import dataclass

from specsim.errors import SpecsimInputError


@dataclass(frozen=True)
class GpuSpec:
    """Peak numbers of one GPU.

    Args:
        name: short name (``"h100"``).
        hbm_bytes_per_s: peak memory bandwidth in bytes/s.
        bf16_flops_per_s: peak dense BF16/FP16 tensor-core throughput in FLOP/s.
        num_sms: streaming multiprocessors (waves of GEMM tiles are counted against this).
        source: the datasheet the numbers come from.
    """

    name: str
    hbm_bytes_per_s: float
    bf16_flops_per_s: float
    num_sms: int
    source: str


GPUS: dict[str, GpuSpec] = {
    "a100": GpuSpec("a100", 2.039e12, 312e12, 108, "NVIDIA A100 datasheet (SXM4 80GB)"),
    "h100": GpuSpec("h100", 3.35e12, 989.4e12, 132, "NVIDIA H100 datasheet (SXM5)"),
    "h200": GpuSpec("h200", 4.8e12, 989.4e12, 132, "NVIDIA H200 datasheet (SXM)"),
    "b200": GpuSpec("b200", 8.0e12, 2.25e15, 148, "NVIDIA HGX B200 datasheet"),
}


def gpu_spec(name: str) -> GpuSpec:
    """The :class:`GpuSpec` of ``name`` (case-insensitive; ``h100_dgx`` style suffixes allowed).

    Raises:
        SpecsimInputError: unknown GPU; lists the known ones.
    """
    key = name.lower().split("_")[0].split("-")[0]
    if key not in GPUS:
        raise SpecsimInputError(None, None, "gpu", f"one of {sorted(GPUS)}", repr(name))
    return GPUS[key]
