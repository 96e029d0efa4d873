"""Decode step-time curves from splitwise-sim's whole-model measurements (``specsim profile import-splitwise``).

Input: ``perf_model.csv`` of ``Mutinifni/splitwise-sim`` (SOURCES.md 2c): DGX-A100/H100 runs of Llama-2-70B
(TP 2/4/8) and BLOOM-176B (TP 8); ``token_time`` is the mean decode iteration time in ms of a run that
generated ``token_size`` tokens for ``batch_size`` sequences after a ``prompt_size``-token prompt; five
repetitions per configuration.

Mapping to specsim:

* sequences -> tokens: a decode iteration processes one token per sequence, so the verification batch
  size is ``B = batch_size`` (the batch sweep is at prompt 512, 128 output tokens: B = 1, 2, 4, ..., 64).
* KV term: the batch-1 rows vary the prompt (128..8,192) and the output length (128..8,192); a least-squares
  line of ``token_time`` against the mean context read per iteration (``prompt + token_size / 2``) gives
  ``kv_read_s_per_token`` (clipped at 0). The table is the median over repetitions minus that term at the
  batch sweep's own mean context (``B * (512 + 128 / 2)`` tokens), so ``step_time(B, kv_tokens)`` returns
  the measurement at the measured context.
"""

from __future__ import annotations

import datetime as _dt
import re
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError
from specsim.hardware.profile import StepTimeProfile

COLUMNS = ("model", "hardware", "prompt_size", "batch_size", "token_size", "token_time", "tensor_parallel")


def profile_name(model: str, hardware: str, tp: int) -> str:
    """The file stem ``import-splitwise`` writes: ``<gpu>-<model without dashes>-tp<tp>-splitwise``.

    ``<gpu>`` is the hardware name without its memory-size part (``h100-80gb`` -> ``h100``, ``h100-80gb-pcap``
    -> ``h100-pcap``, ``a100-80gb`` -> ``a100``), so every hardware of the file gets its own name while the
    bundled ``h100-llama270b-tp2-splitwise`` keeps its own.
    """
    gpu = "-".join(part for part in hardware.split("-") if not re.fullmatch(r"\d+gb", part.lower())) or hardware
    return f"{gpu}-{model.replace('-', '')}-tp{tp}-splitwise"


def read_splitwise_csv(path: str | Path) -> pd.DataFrame:
    """Read ``perf_model.csv`` and check its columns and ``token_time`` values.

    Raises:
        SpecsimInputError: missing file or column, NaN or non-positive ``token_time`` (names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise SpecsimInputError(str(p), None, None, "an existing splitwise-sim perf_model.csv", "no such file")
    df = pd.read_csv(p)
    for col in COLUMNS:
        if col not in df.columns:
            raise SpecsimInputError(str(p), 1, col, "this column in the header", "absent")
    t = df["token_time"].to_numpy(np.float64)
    bad = np.flatnonzero(~np.isfinite(t) | (t <= 0))
    if bad.size:
        raise SpecsimInputError(str(p), int(bad[0]) + 2, "token_time", "a finite time > 0 ms", repr(t[bad[0]]))
    df.attrs["source"] = str(p)
    return df


def import_splitwise(path: str | Path, model: str = "llama2-70b", hardware: str = "h100-80gb",
                     tp: int = 2, source: str | None = None, date: str | None = None) -> StepTimeProfile:
    """Build a decode :class:`StepTimeProfile` for one ``(model, hardware, tp)`` (mapping in the module doc).

    Args:
        path: ``perf_model.csv``.
        model, hardware, tp: the configuration (``hardware`` as in the file: ``a100-80gb``, ``h100-80gb``).
        source: provenance string for the metadata (default: the file name).

    Returns:
        A ``linear``-lookup profile over B = 1, 2, 4, ..., 64 with the fitted KV term.

    Raises:
        SpecsimInputError: a configuration not in the file (lists the available ones).
    """
    df = read_splitwise_csv(path)
    sub = df[(df["model"] == model) & (df["hardware"] == hardware) & (df["tensor_parallel"] == tp)]
    if sub.empty:
        avail = sorted({f"{m}/{h}/tp{t}" for m, h, t in
                        df[["model", "hardware", "tensor_parallel"]].itertuples(index=False)})
        raise SpecsimInputError(str(path), None, "model/hardware/tensor_parallel",
                                f"one of {avail}", f"{model}/{hardware}/tp{tp}")
    single = sub[sub["batch_size"] == 1]
    ctx = (single["prompt_size"] + single["token_size"] / 2).to_numpy(np.float64)
    slope_ms, _ = np.polyfit(ctx, single["token_time"].to_numpy(np.float64), 1)
    kv_s = max(float(slope_ms) * 1e-3, 0.0)
    sweep = sub[(sub["prompt_size"] == 512) & (sub["token_size"] == 128)]
    med = sweep.groupby("batch_size")["token_time"].median().sort_index()
    b = med.index.to_numpy(np.int64)
    step_s = med.to_numpy(np.float64) * 1e-3 - kv_s * b * (512 + 128 / 2)
    meta = {
        "kind": "measured", "gpu": hardware, "model": model, "dtype": "fp16", "tp": tp,
        "engine": "splitwise-sim measurements (vLLM-based runs on DGX A100/H100), end-to-end decode iterations",
        "source": source or Path(path).name,
        "mapping": "B = batch_size sequences x 1 token each; median of repetitions at prompt 512, "
                   "128 output tokens; KV term fitted on the batch-1 prompt/output sweeps",
        "kv_fit": f"slope {slope_ms:.3g} ms per context token (batch 1, {len(single)} rows); clipped at 0",
        "date": date or _dt.date.today().isoformat(),
    }
    return StepTimeProfile(batch_tokens=b, step_time_s=step_s, lookup="linear", kv_read_s_per_token=kv_s,
                           extrapolate="error", metadata=meta, source=str(path))
