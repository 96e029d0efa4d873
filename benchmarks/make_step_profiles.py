"""Rebuild the bundled step-model profiles of ``specsim/data/profiles`` (issue 12; docs/profiles.md).

Not a benchmark: a reproducible recipe for the committed JSON. Two kinds:

* ``*-terms.json``: :class:`specsim.hardware.stepmodel.StepModel` profiles from a preset shape and a GPU
  datasheet with the default :class:`~specsim.hardware.stepmodel.EngineTerms` (``kind: analytic``), the same as
  ``specsim profile analytic --model M --gpu G --tp T [--weight-dtype D]``;
* ``*-vllm-fitted.json``: the engine-level terms fitted on a public vLLM no-speculation series of
  ``specsim/studies/data/validation`` exactly as :func:`specsim.studies.validation.validate_series` fits them (at most a third of
  the points), with the source URL and date, the fitted points and the errors on the points it predicts.

Usage: ``python benchmarks/make_step_profiles.py [--out specsim/data/profiles] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "specsim" / "data" / "profiles"

#: name -> (preset model, gpu, tp, weight dtype, max B, why)
TERMS: dict[str, tuple[str, str, int, str | None, int, str]] = {
    "h100-qwen3-8b-tp1-terms": ("qwen3-8b", "h100", 1, None, 8192, "dense 8B, bf16, one GPU"),
    "h200-qwen3-8b-tp1-terms": ("qwen3-8b", "h200", 1, None, 8192, "dense 8B, bf16, one GPU"),
    "b200-qwen3-8b-tp1-terms": ("qwen3-8b", "b200", 1, None, 8192, "dense 8B, bf16, one GPU"),
    "h200-deepseek-v3-tp8-terms": ("deepseek-v3", "h200", 8, "fp8", 8192,
                                   "DeepSeek-V3 as served on one 8x H200 node: TP 8, fp8 block-quantised weights "
                                   "(the checkpoint's dtype), bf16 KV (MLA latent); ~85 GB of weights per GPU"),
}
#: name -> (preset model, gpu, tp, weight dtype, max B, CUDA-graph capture limit in tokens, why): profiles whose
#: engine captures fewer graph sizes than vLLM's default 512 (issue 20)
CAPTURE: dict[str, tuple[str, str, int, str | None, int, int, str]] = {
    "h200-deepseek-v3-tp8-graphs256-terms": (
        "deepseek-v3", "h200", 8, "fp8", 8192, 256,
        "DeepSeek-V3 on one 8x H200 node (TP 8, fp8) with CUDA graphs captured up to 256 tokens, vLLM's "
        "min(2 x max_num_seqs, 512) at max_num_seqs 128: a K = 7 verification batch (8 tokens per request) of "
        "more than 32 requests runs eager, paying every kernel launch from the host"),
}
#: name -> validation series (specsim.studies.validation.SETUPS); the table reaches the series' prefill chunk + 1,024
FITTED: dict[str, str] = {
    "h100-qwen3-8b-vllm-fitted": "vllm_h100_qwen3-8b_sharegpt_nospec",
    "b200-qwen3.8-27b-vllm-fitted": "vllm_b200_qwen3.8-27b_humaneval_nospec",
}


def terms_profile(name: str):
    """The ``*-terms`` profile ``name`` of :data:`TERMS`."""
    from dataclasses import replace

    from specsim.hardware.model_config import MODELS
    from specsim.hardware.stepmodel import step_model

    model, gpu, tp, dtype, max_b, why = TERMS[name]
    shape = replace(MODELS[model], weight_dtype=dtype) if dtype else MODELS[model]
    return step_model(shape, gpu, tp).profile(max_b, name=name, provenance={"deployment": why})


def capture_profile(name: str):
    """The ``*-graphs<N>-terms`` profile ``name`` of :data:`CAPTURE`."""
    from dataclasses import replace

    from specsim.hardware.model_config import MODELS
    from specsim.hardware.stepmodel import EngineTerms, step_model

    model, gpu, tp, dtype, max_b, cap, why = CAPTURE[name]
    shape = replace(MODELS[model], weight_dtype=dtype) if dtype else MODELS[model]
    terms = replace(EngineTerms(), cudagraph_max_tokens=cap)
    return step_model(shape, gpu, tp, terms=terms).profile(max_b, name=name, provenance={"deployment": why})


def fitted_profile(name: str):
    """The ``*-vllm-fitted`` profile ``name`` of :data:`FITTED`: fitted as docs/validation.md fits it."""
    from specsim.studies.validation import fit_indices, load_rows, server_observations, validate_series

    series = FITTED[name]
    rows = load_rows()
    df = rows[rows["series"] == series].sort_values("load").reset_index(drop=True)
    idx = fit_indices(len(df))
    res = validate_series(rows, series)                     # the fit and the predictions of docs/validation.md
    held = res.table[~res.table["fitted"]]
    first = df.iloc[0]
    prov = {"fit": dict(res.profile.metadata["fit"])}
    prov["fit"]["series"] = series
    prov["fit"]["fitted_loads"] = [int(df.loc[i, "load"]) for i in idx]
    prov["fit"]["predicted_loads"] = [int(x) for x in held["load"]]
    prov["fit"]["median_abs_error_predicted_tpot"] = round(float(np.median(np.abs(held["tpot_error"]))), 4)
    prov["fit"]["median_abs_error_predicted_throughput"] = round(
        float(np.median(np.abs(held["throughput_error"]))), 4)
    prov["fit"]["ttft"] = {"request_overhead_s": res.setup["request_overhead_s"],      # as profile fit writes it
                           "how": "fitted on the lowest fitted load's mean TTFT (specsim.studies.validation."
                                  "request_overhead; profile fit's TTFT term)"}
    prov["fit"]["how"] = ("specsim.studies.validation: step = mean TPOT, R = output throughput x TPOT (Little's law, <= N), "
                          "B = R + prompt tokens per step, context = prompt + output / 2; the other loads "
                          "predicted by simulation (docs/validation.md)"
                          + ("; fitted together with the other series measured on the same server (their fitted "
                             "points: specsim.studies.validation.server_observations), which separates mixed_step_s"
                             if "mixed_step_s" in res.params else ""))
    dtype = first["dtype"] if isinstance(first["dtype"], str) else "dtype not given"
    meta = {"measured": f"{first['engine']} {first['engine_version']}, {int(first['num_gpus'])}x "
                        f"{first['gpu']}, TP {int(first['tp'])}, {first['model']} ({dtype}), "
                        f"{first['dataset']}, closed loop N = {', '.join(str(int(n)) for n in df['load'])}, "
                        "no speculation",
            "source_url": str(first["source_url"]), "source_date": str(first["source_date"]),
            "validation_data": f"specsim/studies/data/validation/{first['file']}", **prov}
    others = sorted({o.source for o in server_observations(rows, series)} - {first["file"]})
    if others:                          # fitted together with the other series measured on the same server
        meta["fitted_with"] = [{"series": str(rows.loc[rows["file"] == f, "series"].iloc[0]),
                                "source_url": str(rows.loc[rows["file"] == f, "source_url"].iloc[0]),
                                "validation_data": f"specsim/studies/data/validation/{f}"} for f in others]
    return res.model.profile(res.profile.max_batch_tokens, name=name, kind="fitted", provenance=meta)


def main(argv: list[str] | None = None) -> None:
    """Write the profiles (all, or ``--only``) and print one line each."""
    from specsim.hardware.profile import save_profile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", nargs="*", default=None)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    for name in [*TERMS, *CAPTURE, *FITTED]:
        if a.only and name not in a.only:
            continue
        prof = (terms_profile(name) if name in TERMS else capture_profile(name) if name in CAPTURE
                else fitted_profile(name))
        dest = a.out / f"{name}.json"
        save_profile(prof, dest)
        print(f"{dest.name}: step {prof.step_time(1) * 1e3:.2f} ms at B=1, {prof.step_time(256) * 1e3:.2f} ms at "
              f"B=256 (no KV read); KV {prof.kv_read_s_per_token * 1e9:.2f} ns/token; "
              f"per request {prof.per_request_s * 1e6:.1f} us")


if __name__ == "__main__":
    main()
