"""The engine's constants of the step model (:class:`EngineTerms`; :mod:`specsim.hardware.stepmodel` charges them):
efficiencies in (0, 1] and times in seconds >= 0, each with its source (docs/profiles.md, "Step model")."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from specsim.errors import SpecsimInputError
from specsim.hardware.profile import SOURCED_SPEC_REQUEST_S, SOURCED_SPEC_STEP_S


@dataclass(frozen=True)
class EngineTerms:
    """The engine's constants, each an efficiency in (0, 1] or a time in seconds >= 0.

    Attributes:
        flops_eff: achieved fraction of the GPU's dense tensor FLOP/s in GEMMs and prefill attention
            (0.654: :func:`specsim.hardware.analytic.calibrate` on the H100 Vidur curves, docs/profiles.md).
        bw_eff: achieved fraction of HBM bandwidth streaming weights and activations (0.923: same fit).
        attn_bw_eff: achieved fraction of HBM bandwidth reading the KV cache in decode attention (0.803:
            least-squares fit of Vidur's A100 FlashAttention decode profile, docs/profiles.md).
        attn_request_s: decode-attention seconds per request per layer (2.92e-8: same fit).
        kernel_s: GPU-side fixed cost per kernel, seconds (7.84e-6: the H100 Vidur calibration).
        per_request_step_s: per running request per step, seconds (0 until fitted: ``specsim profile fit``).
        fixed_step_s: per step, seconds (0 until fitted).
        mixed_step_s: per step that carries a prefill chunk, seconds (0 until fitted): the engine's mixed-batch
            path beyond the chunk's own tokens (vLLM runs a prefill-sharing batch in piecewise CUDA graphs with the
            attention ops outside them, and a hybrid model's chunked linear-attention kernels as a chain of
            small dependent launches; docs/profiles.md, "Mixed steps"). No public source gives its size for a
            GPU and model, so it is fitted: points of different turnover (new requests per step) separate it from
            ``per_request_step_s`` (docs/validation.md fits it on the two B200 series' fitted points).
        link_eff: achieved fraction of the GPU's link bandwidth in collectives (0.8: our assumption, the
            bus bandwidth nccl-tests reports on NVLink is 75-85% of the link's peak).
        spec_step_s: speculation's own fixed cost per speculative step, seconds (rejection sampling launch, draft
            metadata, the extra CPU-GPU synchronisation); spec_request_s: its cost per request in such a step.
            Defaults 7.75e-4 s and 8.4e-5 s: the two-point line through vLLM issue 49548's measurement (comment
            of 2026-08-24: vLLM 0.27.1, 1x H100 NVL, a 31B FP8 target with a drafter, dynamic speculation held at
            K = 0; mean TPOT 14.374 -> 15.317 ms at 2 users and 77.164 -> 93.820 ms at 189 users over no
            speculation), i.e. (0.943 - 2 x 0.0840) ms fixed and (16.656 - 0.943) / 187 ms per request. An upper
            bound: at K = 0 vLLM still runs the drafter's forward to keep its KV in step, which specsim charges
            as the drafter's own time on steps that draft (docs/profiles.md, "Speculation's own overhead").
        spec_zero_draft_pays: whether a speculative step that proposes no drafts still pays the two terms:
            True as vLLM's dynamic draft length at K = 0 does (issue 49548), False (default) as an engine that
            switches speculation off for the step runs the plain path (vLLM PR 5000's disable-by-batch-size).
        cudagraph_max_tokens: the largest captured CUDA-graph size in tokens; a step of more tokens runs eager
            (0: no graphs, ``--enforce-eager``). Default None: vLLM's ``max_cudagraph_capture_size`` default for
            the GPU (:func:`default_capture_tokens`: 1,024 on data-center Blackwell, 512 elsewhere), which
            :class:`StepModel` fills in, so a built model's terms always hold a number. SGLang's ``--cuda-graph-max-bs``
            counts requests: tokens = requests x (1 + draft tokens); its default is 256 at TP < 4 and 512 at
            TP >= 4 on 80-90 GB GPUs (``server_args.py``; 160 in 0.4-era versions). docs/profiles.md.
        eager_kernel_s: host launch time per kernel of an eager step, seconds (4.4e-6: ~8 ms per eager verify
            forward of ~1,800 kernel launches, imp PR 856 on Qwen3-Coder-30B; xLLM PR 713's Qwen3-0.6B TPOT,
            4.20 ms eager against 2.72 ms in graphs at concurrency 1, gives ~4.1 us over its ~360 kernels).
            Charged in full, an upper bound where GPU kernels are long enough to hide their launches.
        source: provenance of the values.

    Raises:
        SpecsimInputError: a value that is not a number (a string such as ``"1e-6"``), an efficiency outside
            (0, 1] or a negative time, naming the field.
    """

    flops_eff: float = 0.6538
    bw_eff: float = 0.9232
    attn_bw_eff: float = 0.803
    attn_request_s: float = 2.92e-8
    kernel_s: float = 7.840e-6
    per_request_step_s: float = 0.0
    fixed_step_s: float = 0.0
    link_eff: float = 0.8
    spec_step_s: float = SOURCED_SPEC_STEP_S
    spec_request_s: float = SOURCED_SPEC_REQUEST_S
    spec_zero_draft_pays: bool = False
    cudagraph_max_tokens: int | None = None
    eager_kernel_s: float = 4.4e-6
    mixed_step_s: float = 0.0
    source: str = ("defaults: efficiencies and kernel_s calibrated on the H100 Vidur curves, attention on the "
                   "A100 Vidur FlashAttention profile, per-request and fixed costs unfitted (0), speculation's "
                   "overhead from vLLM issue 49548")

    def __post_init__(self) -> None:
        for f in _NUMBERS:
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise SpecsimInputError(None, None, f"terms.{f}", "a number (an efficiency in (0, 1] or seconds "
                                        ">= 0)", repr(v))
        if not isinstance(self.source, str):
            raise SpecsimInputError(None, None, "terms.source", "a string", repr(self.source))
        for f in ("flops_eff", "bw_eff", "attn_bw_eff", "link_eff"):
            v = getattr(self, f)
            if not (np.isfinite(v) and 0.0 < v <= 1.0):
                raise SpecsimInputError(None, None, f"terms.{f}", "an efficiency in (0, 1]", repr(v))
        if not isinstance(self.spec_zero_draft_pays, (bool, np.bool_)):
            raise SpecsimInputError(None, None, "terms.spec_zero_draft_pays", "true or false",
                                    repr(self.spec_zero_draft_pays))
        cap = self.cudagraph_max_tokens
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, np.integer)) or cap < 0):
            raise SpecsimInputError(None, None, "terms.cudagraph_max_tokens", "an int >= 0 (tokens; 0 = no graphs)",
                                    repr(cap))
        for f in ("attn_request_s", "kernel_s", "per_request_step_s", "fixed_step_s", "spec_step_s",
                  "spec_request_s", "eager_kernel_s", "mixed_step_s"):
            v, top = getattr(self, f), _MAX_TIME_S.get(f, 1.0)
            if not (np.isfinite(v) and 0.0 <= v <= top):
                raise SpecsimInputError(None, None, f"terms.{f}", f"a time in [0, {top:g}] s (seconds: a value in "
                                        "ms or us given as seconds reads far above it)", repr(v))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return asdict(self)


#: Upper bounds of the per-kernel and per-layer times (seconds; ~100x the largest fitted values, so that a
#: value in microseconds written as seconds, kernel_s = 7.84, is refused); every other time is at most 1 s per step.
_MAX_TIME_S = {"kernel_s": 1e-3, "eager_kernel_s": 1e-3, "attn_request_s": 1e-3}

#: The numeric fields of :class:`EngineTerms` (efficiencies and seconds).
_NUMBERS = ("flops_eff", "bw_eff", "attn_bw_eff", "link_eff", "attn_request_s", "kernel_s", "per_request_step_s",
            "fixed_step_s", "spec_step_s", "spec_request_s", "eager_kernel_s", "mixed_step_s")

__all__ = ["EngineTerms"]
