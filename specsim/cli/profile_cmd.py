"""``specsim profile ...``: show, import (Vidur, splitwise-sim), generate (analytic), fit (real measurements)
and measure (torch)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Optional

import typer

from specsim import fmt
from specsim.cli import app, written_to
from specsim.cli.profile_fit_report import say as _say
from specsim.cli.profile_shape import check_table_size, echo_shape, with_capture_limit
from specsim.errors import SpecsimInputError

profile_app = typer.Typer(no_args_is_help=True, help="Step-time profiles: list, show, import (Vidur, splitwise-sim), analytic (from shapes and a datasheet), gpus, fit, measure.")
app.add_typer(profile_app, name="profile")


def shared_root() -> Path:
    """The shared data folder: ``$SPECSIM_SHARED`` or ``../shared`` next to the repository."""
    default = Path(__file__).resolve().parents[3] / "shared"
    return Path(os.environ.get("SPECSIM_SHARED", default)).resolve()


@profile_app.command("list")
def list_profiles() -> None:
    """The bundled profiles a scenario's profile.name may name: GPU, model, TP, kind and the largest measured
    batch; a superseded one is marked (profile show NAME names what replaces it)."""
    import json as _json

    from specsim.hardware.profile import bundled_profiles_dir

    rows = []
    for path in sorted(bundled_profiles_dir().glob("*.json")):
        prof = _json.loads(path.read_text())
        md, top = prof.get("metadata") or {}, prof.get("batch_tokens") or [0]
        rows.append([path.stem, str(md.get("gpu", "?")), str(md.get("model", "?")), str(md.get("tp", "?")),
                     str(md.get("kind", "?")) + (" (superseded)" if md.get("superseded_by") else ""),
                     fmt.value(int(top[-1]))])
    typer.echo(fmt.table(["name", "gpu", "model", "tp", "kind", "max B"], rows,
                         title=f"{len(rows)} bundled profiles (--set profile.name=NAME; profile show NAME prints one)"))


@profile_app.command("show")
def show(path: str = typer.Argument(..., help="profile JSON file or bundled name"),
         png: Path = typer.Option(None, help="also write a PNG here (step time and SPS, or the stacked terms)"),
         min_rel: float = typer.Option(0.01, help="smallest step-time drop counted as an SPS rise"),
         terms: bool = typer.Option(False, "--terms", help="show the step model's terms (table + stacked plot)"),
         context: int = typer.Option(1024, help="with --terms: cached KV tokens per request"),
         tokens_per_request: int = typer.Option(1, help="with --terms: verified tokens per request "
                                                "(1 = no speculation; gamma + 1 for a full verify)")) -> None:
    """Print a profile (step time and SPS per B, marking where SPS rises again); with --terms, the step
    model's terms at each B instead (a table in ms). --png FILE also draws it; nothing is written without it."""
    from specsim.cli.outputs import check_output
    check_output(png, "--png")
    if png is not None and Path(png).suffix.lower() not in IMAGE_SUFFIXES:   # matplotlib picks the format by it
        raise SpecsimInputError("--png", None, None, f"an image file name ({', '.join(IMAGE_SUFFIXES)})", str(png))
    if not 0.0 <= min_rel < 1.0:                # -1 was accepted ("drop > -100%"): every point a rise
        raise SpecsimInputError(None, None, "--min-rel", "a fraction in [0, 1) (0.01: a drop of more than 1%)",
                                f"{min_rel:g}")
    from specsim.hardware.profile import (resolve_profile, speculation_overhead, speculation_text, sps_rise_points,
                                          step_time_slips)
    from specsim.run_config import speculation_terms
    from specsim.scenario import load_scenario

    prof = resolve_profile(path)
    for line in step_time_slips(prof):
        _say(f"warning: {line}")
    if terms and "step_model" not in prof.metadata:
        raise SpecsimInputError(prof.source, None, "metadata.step_model",
                                "a profile built from terms (specsim profile analytic / profile fit); this one "
                                f"is a table (kind: {prof.metadata.get('kind', '?')})", "no step model")
    for k, v in prof.metadata.items():
        if k == "step_model":
            typer.echo("step_model: yes (--terms shows its terms)")
        elif isinstance(v, dict):                   # e.g. a fit's record: one key per line, not one long repr
            typer.echo(f"{k}:")
            for sub, x in v.items():
                typer.echo(f"  {sub}: {x}")
        else:
            typer.echo(f"{k}: {v}")
    typer.echo(f"lookup: {prof.lookup}, extrapolate: {prof.extrapolate}, "
               f"kv_read_s_per_token: {prof.kv_read_s_per_token:.4g}, per_request_s: {prof.per_request_s:.4g}")
    charged = speculation_terms(load_scenario(), prof)          # as a run on the default scenario's engine keys
    typer.echo("speculating runs: " + speculation_text(speculation_overhead(charged)))
    if terms:
        _show_terms(prof, context, tokens_per_request, png)
        return
    rises = sps_rise_points(prof, min_rel)
    typer.echo(fmt.table(["B", "step_ms", "SPS", "SPS rises"],
                         [[fmt.value(int(b)), fmt.number(t * 1e3, 3), fmt.number(1 / t, 1), "yes" if b in rises else ""]
                          for b, t in zip(prof.batch_tokens, prof.step_time_s)],
                         title="a step of B tokens, R = 0, K = 0 (a run adds R x per_request_s, the KV read)"))
    typer.echo(f"{len(rises)} points where SPS rises again (drop > {100 * min_rel:.0f}%): {rises.tolist()}")
    if png is not None:
        _plot(prof, rises, png)
        typer.echo(f"figure written to {png}")


def _show_terms(prof, context: int, tokens_per_request: int, png: Path | None) -> None:
    """Print the step model's terms (ms) at B = 1, 2, 4, ... and write their stacked plot."""
    import numpy as np

    from specsim.hardware.analytic import capture_sizes, capture_text
    from specsim.hardware.stepmodel import TERMS, step_model_of, terms_table
    from specsim.analysis.plots import plot_step_terms

    sm = step_model_of(prof)                      # show() has refused table profiles already
    if tokens_per_request < 1 or context < 0:
        raise SpecsimInputError(None, None, "--tokens-per-request/--context", "an int >= 1 / >= 0",
                                f"{tokens_per_request} / {context}")
    b = 2 ** np.arange(int(np.log2(prof.max_batch_tokens)) + 1)
    cap = sm.terms.cudagraph_max_tokens
    captured, first_eager = capture_sizes(cap)
    if captured.size and first_eager <= prof.max_batch_tokens:   # the cliff: the last captured and first eager size
        last = int(captured[-1])
        b = np.unique(np.concatenate([b, [last, first_eager]]))
        eager_ms = sm.breakdown([first_eager])["eager"][0] * 1e3
        rq = np.maximum(1, np.array([last, first_eager]) // tokens_per_request)
        steps_ms = sm.step_time(np.array([last, first_eager], float), rq, rq * context) * 1e3
        gemm = sm.breakdown([float(last), float(first_eager)])["gemm"]
        tiles = "the GEMMs' next row of tiles, " if gemm[1] > gemm[0] * (1 + 1e-9) else ""
        typer.echo(f"CUDA graphs up to B = {last} tokens (capture sizes {capture_text(cap)}); beyond, eager: + "
                   f"{eager_ms:.3f} ms of kernel launches per step ({sm.terms.eager_kernel_s * 1e6:.2g} us per "
                   f"launch); the step itself goes from {steps_ms[0]:.3f} ms at B = {last} to {steps_ms[1]:.3f} ms "
                   f"at {first_eager} (+ {steps_ms[1] - steps_ms[0]:.3f} ms: the launches, {tiles}the "
                   f"{first_eager - last} more tokens)")
    elif not captured.size:
        typer.echo("no CUDA graphs (cudagraph_max_tokens 0): every step runs eager")
    r = np.maximum(1, b // tokens_per_request)
    df = terms_table(sm, b, r, r * context)
    typer.echo(f"terms in ms per step (R = B / {tokens_per_request} requests, {context} cached tokens each):")
    typer.echo(fmt.table(list(df.columns), [[fmt.value(v) if not isinstance(v, float) else fmt.number(v, 3)
                                              for v in row] for row in df.itertuples(index=False)]))
    if png is not None:
        plot_step_terms(df, list(TERMS), png, title=f"{prof.metadata.get('name', prof.source)}: {context} cached "
                        f"tokens/request, {tokens_per_request} token(s)/request")
        typer.echo(f"figure written to {png}")


def _plot(prof, rises, out: Path) -> None:
    """Step time and SPS against B, the SPS rises (``rises``, (k,) B values) marked; a PNG at ``out``."""
    from specsim import figures
    import numpy as np

    b, t = prof.batch_tokens, prof.step_time_s
    fig, (a1, a2) = figures.subplots(2, 1, figsize=(8, 6), sharex=True)
    a1.plot(b, t * 1e3, ".-", ms=3)
    a1.set_ylabel("step time (ms)")
    a2.plot(b, 1 / t, ".-", ms=3)
    idx = np.searchsorted(b, rises)
    if rises.size:                                   # no legend entry for points the table does not have
        a2.plot(rises, 1 / t[idx], "rv", label="SPS rises again")
    a2.set_ylabel("SPS (steps/s)")
    cap = prof.metadata.get("cudagraph_max_tokens")
    if cap:                                          # the last captured size: eager steps beyond it
        from specsim.hardware.analytic import graph_limit
        for ax in (a1, a2):
            ax.axvline(graph_limit(cap), color="grey", ls="--", lw=0.8, label="CUDA-graph capture limit (eager beyond)")
    a2.set_xlabel("B (tokens in the step)")
    a2.set_xscale("log", base=2)
    if a2.get_legend_handles_labels()[0]:
        a2.legend()
    md = prof.metadata
    import textwrap                                  # the whole title on up to three lines, never cut mid-word
    title = (f"{md.get('model', '?')} on {md.get('gpu', '?')} TP{md.get('tp', '?')} ({md.get('kind', '?')}; "
             f"{md.get('source', '')})")
    fig.suptitle("\n".join(textwrap.wrap(title, 110, max_lines=3, placeholder=" ...")), fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


@profile_app.command("import-vidur")
def import_vidur_cmd(
    mlp: Path = typer.Option(None, help="a Vidur mlp.csv (default with --all: every one in the shared data)"),
    tp: int = typer.Option(None, help="TP degree (default: every degree in the file)"),
    gpu: str = typer.Option(None, help="GPU (default: the compute/<gpu>/ folder name)"),
    allreduce: Path = typer.Option(None, help="Vidur all_reduce.csv (default: network/<gpu>_dgx)"),
    attention: Path = typer.Option(None, help="attention.csv for the attention term (default: the anchor)"),
    vidur_engine: bool = typer.Option(False, help="apply Vidur's engine-model defaults (side-by-sides)"),
    all_: bool = typer.Option(False, "--all", help="import every model, GPU and TP in the shared data"),
    out: Path = typer.Option(Path("."), help="output folder"),
    num_layers: int = typer.Option(None, "--num-layers", min=1,
                                   help="model depth (default: from the model folder's name)"),
) -> None:
    """Build whole-model step-time curves from Vidur per-operator CSVs (see specsim.hardware.vidur)."""
    from specsim.hardware.profile import save_profile
    from specsim.hardware.vidur import import_vidur_files

    if not all_ and mlp is None:
        raise SpecsimInputError(None, None, "--mlp", "an mlp.csv path or --all", "neither")
    from specsim.cli.outputs import check_output
    check_output(out, "--out", folder=True)
    profiles = import_vidur_files(shared_root(), None if all_ else [mlp], tp=tp, gpu=gpu, allreduce_csv=allreduce,
                                  attention_csv=attention, vidur_engine=vidur_engine, num_layers=num_layers)
    out.mkdir(parents=True, exist_ok=True)
    for name, prof in profiles.items():
        dest = out / f"{name}.json"
        save_profile(prof, dest)
        b = prof.max_batch_tokens
        typer.echo(f"{dest}: B 1..{b}, step {prof.step_time(1) * 1e3:.2f} ms at B=1, "
                   f"{prof.step_time(b) * 1e3:.1f} ms at B={b}")


@profile_app.command("import-splitwise")
def import_splitwise_cmd(
    csv: Path = typer.Option(None, help="splitwise-sim perf_model.csv (default: the copy in the project's shared "
                             "data, $SPECSIM_SHARED or ../shared beside the repository; not shipped in the package)"),
    model: str = typer.Option("llama2-70b"), hardware: str = typer.Option("h100-80gb"),
    tp: int = typer.Option(2), out: Path = typer.Option(Path("."), help="output folder"),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing output file."),
) -> None:
    """Decode step-time curve from splitwise-sim's measurements (B = sequences, one token each).

    Writes ``<out>/<gpu>-<model>-tp<tp>-splitwise.json`` (:func:`specsim.hardware.splitwise.profile_name`:
    distinct for every hardware of the file); an existing file is kept unless ``--force``.
    """
    from specsim.cli.outputs import check_output
    from specsim.hardware.profile import save_profile
    from specsim.hardware.splitwise import import_splitwise, profile_name

    check_output(out, "--out", folder=True)
    dest = out / f"{profile_name(model, hardware, tp)}.json"
    if dest.exists() and not force:
        raise SpecsimInputError("--out", None, None, "a new file (or --force to overwrite it)", f"{dest} exists")
    root = shared_root() if csv is None else None
    path = csv or root / "data/profiles/splitwise_sim/perf_model.csv"
    prof = import_splitwise(path, model, hardware, tp, source="shared/data/profiles/splitwise_sim/perf_model.csv"
                            if csv is None else Path(csv).name)
    out.mkdir(parents=True, exist_ok=True)
    save_profile(prof, dest)
    typer.echo(f"{dest}: kv_read_s_per_token {prof.kv_read_s_per_token:.3g}; "
               + ", ".join(f"B={b}: {t * 1e3:.1f} ms" for b, t in zip(prof.batch_tokens, prof.step_time_s)))


@profile_app.command("analytic")
def analytic_cmd(
    model: str = typer.Option(None, help="preset: llama2-7b (the default), llama2-70b, qwen3-8b, deepseek-v3, "
                                         "v4-flash, v4-pro (DeepSeek-V4 ranks: TP 1, experts over --ep)"),
    config: Path = typer.Option(None, help="a Hugging Face config.json (dense, GQA, MoE, MLA, hybrid linear "
                                           "attention) instead of --model"),
    gpu: str = typer.Option(None, help="a GPU name (specsim profile gpus) or a GPU spec JSON file [default: h100]"),
    gpu_spec: Path = typer.Option(None, "--gpu-spec", help="a GPU spec JSON file (instead of --gpu)"),
    tp: int = typer.Option(1, help="tensor-parallel degree"), ep: int = typer.Option(1, help="expert-parallel degree"),
    ep_link_gbs: float = typer.Option(None, "--ep-link-gbs", help="GB/s per GPU of the EP all-to-all's link "
                                      "when EP spans nodes (50 for 400 Gb/s InfiniBand per GPU, as DeepSeek's "
                                      "H800 nodes); default: the GPU's own link (NVLink)"),
    weight_dtype: str = typer.Option(None, help="bf16, fp8 or fp4 (default: the config's)"),
    kv_dtype: str = typer.Option(None, help="bf16, fp8 or fp4 (default: the config's)"),
    expert_dtype: str = typer.Option(None, help="the routed experts' dtype, bf16, fp8 or fp4 (default: the "
                                                "config's quantization_config, else --weight-dtype)"),
    attention_dtype: str = typer.Option(None, help="the attention projections' dtype, bf16, fp8 or fp4 (default: "
                                                   "the config's quantization_config, else --weight-dtype)"),
    activation_dtype: str = typer.Option(None, help="the dtype the engine quantizes GEMM activations to: fp8 runs "
                                                    "FP8 and FP4 weights at the FP8 rate (W8A8 / W4A8: DeepGEMM's "
                                                    "fp8_fp4 GEMMs on Hopper) where the "
                                                    "GPU has FP8; default: each GEMM in its weights' dtype where the "
                                                    "GPU has it, else weight-only at BF16"),
    max_batch_tokens: int = typer.Option(4096),
    out: Path = typer.Option(None, help="output JSON (default: GPU-MODEL-tpN-terms.json in the working folder, a "
                             "GPU spec file's GPU as NAME-from-STEM; a scenario reaches it by that .json path, while "
                             "the bare name is the bundled profile's)"),
    calibrate_: bool = typer.Option(False, "--calibrate", help="refit the GEMM constants on H100 Vidur curves "
                                    "(needs Vidur's profiling CSVs from the project's shared data, $SPECSIM_SHARED "
                                    "or ../shared beside the repository; not shipped in the package)"),
    cudagraph_max_tokens: Optional[int] = typer.Option(None, help="largest CUDA-graph size in tokens (vLLM's "
                                                       "max_cudagraph_capture_size; 0 = eager); eager beyond. "
                                                       "Default: vLLM's for the GPU, 1024 on compute "
                                                       "capability 10.x (b200, gb200, b300, gb300; a GPU spec "
                                                       "file's compute_capability), else 512"),
) -> None:
    """Step-model profile from a model's shapes and a GPU's datasheet (labelled kind: analytic).

    --gpu takes any name specsim profile gpus lists (a100, h100, h200, h800, h20, b200, gb200, b300,
    gb300, l40s, rtx4090, rtxpro6000, mi300x) or a GPU spec JSON file (docs/profiles.md gives its keys)."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out")
    from specsim.hardware.profile import save_profile
    from specsim.hardware.stepmodel import EngineTerms, step_model

    terms = None
    if calibrate_:
        from specsim.hardware.vidur import calibrate_on_vidur
        res = calibrate_on_vidur(shared_root())
        eff = res.efficiency
        typer.echo(f"calibrated: bw_eff {eff.bw_eff:.4f}, flops_eff {eff.flops_eff:.4f}, kernel_s {eff.kernel_s:.4g}")
        for name, (med, mx) in res.errors.items():
            typer.echo(f"  {name}: median error {100 * med:.1f}%, max {100 * mx:.1f}%")
        terms = EngineTerms(flops_eff=eff.flops_eff, bw_eff=eff.bw_eff, kernel_s=eff.kernel_s,
                            source=f"recalibrated: {eff.source}")
    check_table_size(max_batch_tokens)
    if ep_link_gbs is not None and not (ep_link_gbs > 0 and ep > 1):
        raise SpecsimInputError(None, None, "--ep-link-gbs", "GB/s > 0, with --ep > 1 (the EP all-to-all's link)",
                                f"{ep_link_gbs} (ep {ep})")
    sm = step_model(_model_arg(model, config, weight_dtype, kv_dtype, expert_dtype, attention_dtype,
                               activation_dtype), _gpu_arg(gpu, gpu_spec, "h100"), tp, ep, terms,
                    ep_link_bytes_per_s=None if ep_link_gbs is None else ep_link_gbs * 1e9)
    sm = with_capture_limit(sm, cudagraph_max_tokens)
    echo_shape(sm)
    prof = sm.profile(max_batch_tokens)
    from specsim.hardware.analytic import graph_limit
    limit = graph_limit(sm.terms.cudagraph_max_tokens)
    if max_batch_tokens < limit:
        _say(f"note: the table stops at {max_batch_tokens:,} token{'s' * (max_batch_tokens > 1)} "
             f"(--max-batch-tokens), below the "
             f"{limit:,}-token CUDA-graph range: a run on it is refused at its first larger step (R requests x "
             "(1 + gamma) tokens, or a prefill chunk)")
    dest = out or Path(f"{prof.metadata['name']}-terms.json")
    save_profile(prof, dest)
    chunk = prof.step_time(max_batch_tokens) + prof.prefill_attention_s(max_batch_tokens, 0)
    typer.echo(f"{dest}: step {prof.step_time(1) * 1e3:.2f} ms at B=1, "
               f"{prof.step_time(max_batch_tokens) * 1e3:.1f} ms at B={max_batch_tokens} (no KV read; a prefill "
               f"chunk of {max_batch_tokens} tokens {chunk * 1e3:.1f} ms); "
               f"KV read {prof.kv_read_s_per_token * 1e9:.3f} ns/token; `specsim profile show {dest} --terms`; "
               f"run on it: `specsim run --set profile.name={dest} ...`")


def _model_arg(model: str, config: Path | None, weight_dtype: str | None, kv_dtype: str | None,
               expert_dtype: str | None = None, attention_dtype: str | None = None,
               activation_dtype: str | None = None):
    """A preset name or a parsed config.json, with dtype overrides (per component: routed experts, attention;
    and the engine's GEMM activation dtype)."""
    from dataclasses import replace

    from specsim.hardware.model_config import BYTES_PER_DTYPE, model_from_hf_config
    from specsim.hardware.stepmodel import model_presets

    if config is not None and model is not None:
        raise SpecsimInputError(None, None, "--model/--config", "one of the two (the shape of one model)",
                                f"--model {model} --config {config}")
    if config is not None:
        m = model_from_hf_config(config, weight_dtype=weight_dtype, kv_dtype=kv_dtype, expert_dtype=expert_dtype,
                                 attention_dtype=attention_dtype)
    else:
        model, presets = model or "llama2-7b", model_presets()
        if model not in presets:
            from specsim.studies.validation import CONFIGS
            shipped = ", ".join(sorted(f.name for f in CONFIGS.glob("*.json")))
            raise SpecsimInputError(None, None, "--model", f"one of {sorted(presets)} (or --config config.json; "
                                    f"specsim ships {shipped} in specsim/studies/data/hf_configs)", repr(model))
        over = {k: v for k, v in (("weight_dtype", weight_dtype), ("kv_dtype", kv_dtype),
                                  ("expert_dtype", expert_dtype), ("attention_dtype", attention_dtype)) if v}
        m = replace(presets[model], **over) if over else presets[model]
    if expert_dtype and not m.num_experts:
        raise SpecsimInputError(None, None, "--expert-dtype", f"no value for a dense model ({m.name} has no routed "
                                "experts; --weight-dtype sets its MLPs)", repr(expert_dtype))
    if activation_dtype is not None:
        if activation_dtype not in BYTES_PER_DTYPE:
            raise SpecsimInputError(None, None, "--activation-dtype", f"one of {list(BYTES_PER_DTYPE)}",
                                    repr(activation_dtype))
        m = replace(m, activation_dtype=activation_dtype)
    return m


#: File suffixes ``profile show --png`` writes (matplotlib's formats by suffix; ``.txt`` raised from inside it).
IMAGE_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp")


def _gpu_arg(gpu: str | None, spec: Path | None = None, default: str | None = None):
    """A GPU by name or a GPU spec JSON file, one of the two (``default`` where neither is given).

    Raises:
        SpecsimInputError: both given (a fit ran on the file's GPU while --gpu named another), or neither without
            a default.
    """
    from specsim.hardware.gpus import load_gpu_spec, resolve_gpu

    if spec is not None and gpu is not None:
        raise SpecsimInputError(None, None, "--gpu-spec", "one GPU: --gpu NAME or --gpu-spec FILE, not both",
                                f"--gpu {gpu} and --gpu-spec {spec}")
    if spec is not None:
        return load_gpu_spec(spec)
    gpu = gpu if gpu is not None else default
    if gpu is None:
        raise SpecsimInputError(None, None, "--gpu", "the GPU measured: a name (specsim profile gpus) or --gpu-spec "
                                "FILE.json", "neither")
    return resolve_gpu(gpu)


@profile_app.command("gpus")
def gpus_cmd() -> None:
    """The GPUs --gpu knows by name: datasheet bandwidth, dense tensor TFLOPS by dtype, SMs, memory, link
    (unidirectional), CUDA compute capability and source (module specsim.hardware.gpus). Anything else: --gpu
    my_gpu.json."""
    from specsim.hardware.gpus import GPUS

    def tf(v: float | None) -> str:
        return "-" if v is None else f"{v / 1e12:,.0f}"

    rows = [[name, fmt.number(g.hbm_bytes_per_s / 1e12, 3), tf(g.bf16_flops_per_s), tf(g.fp8_flops_per_s),
             tf(g.fp4_flops_per_s), fmt.value(g.num_sms), fmt.number(g.memory_bytes / 2 ** 30, 1),
             fmt.number(g.link_bytes_per_s / 1e9, 0), g.compute_capability or "-", g.source]
            for name, g in GPUS.items()]
    typer.echo(fmt.table(["name", "HBM_TB/s", "BF16_TF", "FP8_TF", "FP4_TF", "SMs", "mem_GiB", "link_GB/s",
                          "CC", "source"], rows))
    typer.echo("TFLOPS dense (no sparsity); link per GPU, one direction; '-': no tensor cores for that dtype; CC: "
               "CUDA compute capability. Another GPU: --gpu my_gpu.json (docs/profiles.md).")


@profile_app.command("fit")
def fit_cmd(
    inputs: list[Path] = typer.Argument(..., help="no-speculation measurements: vllm bench serve result JSON, "
                                                   "a guidellm JSON report, a CSV of (num_requests or "
                                                   "batch_tokens, step time), or a "
                                                   "Prometheus /metrics dump"),
    model: str = typer.Option(None, help="the served model: a preset (llama2-7b, llama2-70b, qwen3-8b, "
                                         "deepseek-v3, v4-flash, v4-pro) or --config"),
    config: Path = typer.Option(None, help="a Hugging Face config.json"),
    gpu: str = typer.Option(None, help="the GPU measured: a name (specsim profile gpus) or a GPU spec JSON file"),
    gpu_spec: Path = typer.Option(None, "--gpu-spec", help="a GPU spec JSON file (instead of --gpu)"),
    tp: int = typer.Option(1, help="tensor-parallel degree"), ep: int = typer.Option(1, help="expert-parallel degree"),
    weight_dtype: str = typer.Option(None), kv_dtype: str = typer.Option(None),
    expert_dtype: str = typer.Option(None, help="the routed experts' dtype (default: as profile analytic)"),
    attention_dtype: str = typer.Option(None, help="the attention projections' dtype (default: as profile analytic)"),
    activation_dtype: str = typer.Option(None, help="the GEMM activations' dtype, fp8 for W8A8 / W4A8 at the FP8 "
                                                    "rate (default: as profile analytic)"),
    params: str = typer.Option(",".join(("kernel_s", "per_request_step_s")),
                               help="engine-level terms to fit, comma-separated (bw_eff, flops_eff, attn_bw_eff, "
                                    "kernel_s, per_request_step_s, fixed_step_s, attn_request_s, link_eff, "
                                    "eager_kernel_s, mixed_step_s: per step carrying a prefill chunk, separated "
                                    "from per_request_step_s by points of different turnover, e.g. two datasets "
                                    "on one server)"),
    holdout: list[Path] = typer.Option([], help="files to predict only (never fitted); repeat the option"),
    context: int = typer.Option(None, help="cached tokens per request for inputs that do not give it (CSV "
                                           "without context_tokens, dumps without length histograms)"),
    max_batch_tokens: int = typer.Option(4096), out: Path = typer.Option(None, help="output profile JSON "
                                                                          "(default: GPU-MODEL-tpN-fitted.json, a GPU "
                                                                          "spec file's GPU as NAME-from-STEM)"),
    chunk_tokens: int = typer.Option(None, help="the engine's prefill chunk (max_num_batched_tokens): a prompt "
                                                "longer than it is fitted as chunks of it, a shorter one whole, "
                                                "beside the decode rows of the steps it shares (default: every "
                                                "prompt whole; the mean B where no prompt length is given)"),
    cudagraph_max_tokens: Optional[int] = typer.Option(None, help="the engine's largest CUDA-graph size in "
                                                       "tokens (vLLM's max_cudagraph_capture_size; 0 = eager). "
                                                       "Default: vLLM's for the GPU, 1024 on compute "
                                                       "capability 10.x (b200, gb200, b300, gb300; a GPU spec "
                                                       "file's compute_capability), else 512"),
    spec: list[Path] = typer.Option([], help="speculative vllm bench serve results: fit speculation's own terms "
                                            "(spec_step_s from one point, + spec_request_s from two); repeat"),
    drafter: Optional[str] = typer.Option(None, help="the speculative runs' drafter (dspark, dflash, eagle3, mtp, "
                                          "ngram, suffix): required with --spec, as its shape (ngram, suffix: its CPU "
                                          "time) is charged beside the terms fitted"),
    acceptance_length: float = typer.Option(None, help="the speculative runs' acceptance length (default: the "
                                                        "files' spec_decode_acceptance_length or accept_length)"),
    num_spec_tokens: int = typer.Option(None, help="drafts per step (default: the files' spec_decode_* counts)"),
) -> None:
    """Fit the step model's engine-level terms to a real engine's no-speculation runs (and, with --spec,
    speculation's own terms to speculative runs); print the residual of every point (holdout files apart)
    and write the fitted profile."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out")
    from dataclasses import replace

    import numpy as np

    from specsim.cli.profile_fit_report import (check_fit_quality, check_spec_options, echo_other_model,
                                                echo_residuals, fit_speculation_terms, fit_ttft_term,
                                                read_spec_points)
    from specsim.hardware.profile import save_profile
    from specsim.hardware.profile_fit import fit_step_model
    from specsim.hardware.step_observation import check_outliers
    from specsim.hardware.step_points import read_step_observations
    from specsim.hardware.stepmodel import step_model

    check_spec_options(spec, drafter, acceptance_length, num_spec_tokens)
    held_names = {str(p) for p in holdout}
    fitted_files = [p for p in inputs if str(p) not in held_names]      # --holdout files are never fitted
    if not fitted_files:
        raise SpecsimInputError(None, None, "--holdout", "at least one input left to fit besides the holdout files",
                                "every input is a holdout")
    if model is None and config is None:
        raise SpecsimInputError(None, None, "--model/--config", "the served model's shape: a preset name or a "
                                "config.json", "neither")
    if context is not None and context < 0:
        raise SpecsimInputError(None, None, "--context", "an int >= 0 (cached tokens per request)", str(context))
    check_table_size(max_batch_tokens)
    obs = read_step_observations(fitted_files)
    held = read_step_observations(holdout) if holdout else []
    check_outliers([*obs, *held])                  # a row 10^9x off was fitted, and the model blamed for it
    spec_obs = read_spec_points(spec, acceptance_length, num_spec_tokens)     # refused before any fit output
    biggest = max(o.batch_tokens for o in [*obs, *held])
    if biggest > max_batch_tokens:
        raise SpecsimInputError(None, None, "--max-batch-tokens", f"at least the largest measured step "
                                f"({int(np.ceil(biggest))} tokens)", str(max_batch_tokens))
    if context is not None:
        obs, held = ([replace(o, context_tokens=float(context)) if o.context_tokens != o.context_tokens else o
                      for o in group] for group in (obs, held))
    elif any(o.context_tokens != o.context_tokens for o in [*obs, *held]):
        _say("note: some inputs give no context length; their steps read no KV (set --context TOKENS)")
    base = step_model(_model_arg(model, config, weight_dtype, kv_dtype, expert_dtype, attention_dtype,
                                 activation_dtype), _gpu_arg(gpu, gpu_spec), tp, ep)
    base = with_capture_limit(base, cudagraph_max_tokens)
    echo_shape(base)
    echo_other_model([*fitted_files, *holdout], base.model.name)
    if chunk_tokens is not None and chunk_tokens < 1:
        raise SpecsimInputError(None, None, "--chunk-tokens", "an int >= 1 (tokens)", str(chunk_tokens))
    rep = fit_step_model(base, obs, [p.strip() for p in params.split(",") if p.strip()], held, chunk_tokens)
    _say(_points_read(rep, len(fitted_files), len(holdout)))
    typer.echo("fitted: " + ", ".join([f"{k} = {rep.shown(k)}" for k in rep.params] + [
        f"{k} = {getattr(rep.model.terms, k):.4g} (held: {why})" for k, why in rep.held.items()]))
    for line in rep.warnings():
        _say(f"warning: {line}")
    echo_residuals(rep, ("ctx", "context_tokens"), ("measured_ms", "model_ms"), "error")
    check_fit_quality(rep, units="ms in a vllm bench result, step_time_s vs step_time_ms in a CSV",
                      check="the model, dtype, TP and GPU",       # ITL in s fitted at +73,769%; ms as s at -99.6%
                      causes=" (a mixed prefill step, a batch past the CUDA-graph sizes, other units)")
    fitted_model, prov = fit_speculation_terms(rep, spec_obs, drafter, acceptance_length, chunk_tokens)
    fit_ttft_term(fitted_model, obs, held, chunk_tokens, prov)
    prof = fitted_model.profile(max_batch_tokens, kind="fitted", provenance=prov)
    dest = out or Path(f"{prof.metadata['name']}-fitted.json")
    save_profile(prof, dest)
    written_to(dest, "profile")
    _say(f"note: its tables reach {max_batch_tokens:,} tokens (--max-batch-tokens; a scenario that prefills in the "
         "replica needs its prefill chunk); run with it:")
    typer.echo(f"  specsim run ... --set profile.name={shlex.quote(str(dest))}")


def _points_read(rep, files: int, holdout_files: int) -> str:
    """``profile fit``'s line on its inputs: rows read, distinct step shapes fitted (and held out)."""
    def part(holdout: bool, n_files: int) -> str:
        rows, shapes = rep.rows_read(holdout), sum(p.holdout == holdout for p in rep.points)
        return (f"{rows:,} row{'s' * (rows != 1)} read from {n_files} file{'s' * (n_files != 1)}, {shapes:,} "
                f"distinct step shape{'s' * (shapes != 1)} " + ("held out" if holdout else "fitted"))
    text = "points: " + part(False, files) + (f"; {part(True, holdout_files)}" if holdout_files else "")
    if any(p.rows > 1 for p in rep.points):
        text += (" (the rows of one shape are fitted as one point: their summed weight, and the geometric mean of "
                 "their step times; the same least squares)")
    return text


@profile_app.command("measure")
def measure_cmd(
    model: str = typer.Option("specsim-tiny", help="specsim-tiny or an analytic preset (dense)"),
    device: str = typer.Option("cpu"), batch: str = typer.Option("1,2,4,8,16,32,64", help="B values, or A:B:STEP"),
    context: int = typer.Option(0, help="cached tokens per sequence"),
    warmup: int = typer.Option(3), repeats: int = typer.Option(10),
    threads: int = typer.Option(None, help="CPU threads"), cuda_graphs: bool = typer.Option(True),
    out: Path = typer.Option(None, help="output JSON"),
) -> None:
    """Time real forward passes with torch (random weights) over a grid of B."""
    from specsim.cli.outputs import check_output
    check_output(out, "--out")
    from specsim.hardware.measure import measure_profile
    from specsim.hardware.profile import save_profile

    if ":" in batch:
        lo, hi, step = (int(x) for x in batch.split(":"))
        bs = sorted({lo, *range(step, hi + 1, step)})
    else:
        bs = [int(x) for x in batch.split(",")]
    prof = measure_profile(model, bs, device, context, warmup, repeats, cuda_graphs, num_threads=threads)
    dest = out or Path(f"{device.split(':')[0]}-{model}.json")
    save_profile(prof, dest)
    typer.echo(f"{dest}: " + ", ".join(f"B={b}: {t * 1e3:.2f} ms" for b, t in
                                        zip(prof.batch_tokens, prof.step_time_s)))


