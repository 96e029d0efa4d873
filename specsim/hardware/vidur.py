"""Whole-model step-time curves from Vidur's per-operator profiles (``specsim profile import-vidur``).

Inputs (SOURCES.md 2a/2b; anchors/vidur_run/README.md):

* ``mlp.csv``: per-shard median time in ms of each non-attention operator of ONE transformer layer, and
  of the embedding, against ``num_tokens`` (1, 2, 4, 8, every 8 to 1,024, coarser to 4,096 or 32,768)
  for TP 1/2/4/8.
* ``all_reduce.csv``: median all-reduce time in ms against message size in bytes per ``num_workers``.
* an ``attention.csv`` (FlashAttention decode and prefill kernels, against batch size, KV length and
  prefill chunk size): only one exists here (A100, 64 query / 8 KV heads, TP 2), used by
  :mod:`specsim.hardware.attention` to calibrate the attention term.

Composition (Vidur's own split of a step, Agrawal et al., MLSys 2024, section 4; SOURCES.md 2a)::

    step_s(B) = L * (sum_op median_op(B) + 2 * all_reduce(B * n_embd * 2 bytes) + attn_fixed_per_layer)
                + emb(B)                                  [table, B = tokens in the step]
              + kv_read_s_per_token * kv_tokens            [KV-read term, kv_tokens = KV tokens read]

``L`` is the number of layers (not in the CSV: :data:`MODEL_LAYERS`, from each model's config.json).
Duplicate ``(num_tokens, TP)`` rows are reduced to their per-operator median (two rows: their mean).
The table keeps the measured grid, so the GEMM tile/wave sawtooth survives (SOURCES.md 2a table).

The shared folder's layout of these files (:data:`COMPUTE_DIR`, :data:`NETWORK_DIR`, :data:`ATTENTION_ANCHOR`)
is read by :func:`import_vidur_files` (every model, GPU and TP at once) and :func:`calibrate_on_vidur`.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from specsim.errors import SpecsimInputError, plain
from specsim.hardware.analytic import MODELS as ANALYTIC_MODELS
from specsim.hardware.analytic import CalibrationResult
from specsim.hardware.analytic import calibrate as calibrate_analytic
from specsim.hardware.gpus import gpu_spec
from specsim.hardware.attention import AttentionTable, fit_decode_attention, read_attention_csv
from specsim.hardware.profile import PrefillAttentionProfile, StepTimeProfile

#: Per-layer operators summed into the layer time (everything in mlp.csv except ``emb``).
OPERATORS = ("input_layernorm", "attn_pre_proj", "attn_rope", "attn_post_proj",
             "post_attention_layernorm", "mlp_up_proj", "mlp_act", "mlp_down_proj", "add")
SHAPE_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size")

#: Number of transformer layers (``num_hidden_layers`` of each model's Hugging Face config.json).
MODEL_LAYERS = {"Llama-2-7b-hf": 32, "Llama-2-70b-hf": 80, "Meta-Llama-3-8B": 32,
                "CodeLlama-34b-Instruct-hf": 48}

ACT_BYTES = 2  # fp16 activations and KV cache, as profiled by Vidur


def _median_col(op: str) -> str:
    return f"time_stats.{op}.median"


@dataclass(frozen=True)
class LayerTable:
    """Per-shard operator times of one model at one TP degree, on the measured token grid.

    Args:
        num_tokens: (n,) strictly increasing token counts.
        layer_ms: (n,) sum of the per-layer operator medians (ms, one layer, one shard).
        emb_ms: (n,) embedding median (ms, once per step).
        shape: model shape from the CSV (``n_head``, ``n_kv_head``, ``n_embd``, ...).
        num_duplicates: how many (num_tokens) keys had more than one row (reduced by median).
    """

    num_tokens: np.ndarray
    layer_ms: np.ndarray
    emb_ms: np.ndarray
    shape: dict[str, int]
    num_duplicates: int


def read_operator_csv(path: str | Path) -> pd.DataFrame:
    """Read a Vidur ``mlp.csv`` and check the columns specsim needs.

    Raises:
        SpecsimInputError: missing file or column; a NaN or non-positive median (names the CSV line).
    """
    p = Path(path)
    if not p.is_file():
        raise SpecsimInputError(str(p), None, None, "an existing Vidur mlp.csv", "no such file")
    df = _read_csv(p, "a Vidur mlp.csv")
    need = [_median_col(o) for o in ("emb",) + OPERATORS] + list(SHAPE_COLUMNS) + [
        "num_tokens", "num_tensor_parallel_workers"]
    for col in need:
        if col not in df.columns:
            raise SpecsimInputError(str(p), 1, col, "this column in the header", "absent")
    vals = _numbers(df, need)                                   # (rows, len(need)), NaN where not a number
    bad = ~np.isfinite(vals)
    bad[:, : len(OPERATORS) + 1] |= vals[:, : len(OPERATORS) + 1] < 0
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise SpecsimInputError(str(p), int(r) + 2, need[c], "a finite number >= 0", plain(df[need[c]].iloc[r]))
    df[need] = vals
    return df


def _read_csv(p: Path, what: str) -> pd.DataFrame:
    """``pd.read_csv(p)``, an unreadable or malformed file raised as a SpecsimInputError."""
    try:
        return pd.read_csv(p)
    except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise SpecsimInputError(str(p), None, None, what, " ".join(str(e).split())[:80]) from None


def _numbers(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """(rows, len(cols)) float64 values of ``cols``; NaN where a cell is empty or not a number."""
    return np.stack([pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=np.float64) for c in cols], axis=1)


def layer_table(df: pd.DataFrame, tp: int, source: str = "<mlp.csv>") -> LayerTable:
    """Per-layer and embedding times at tensor-parallel degree ``tp`` (duplicates -> median).

    Raises:
        SpecsimInputError: ``tp`` not in the file (lists the available degrees).
    """
    avail = sorted(int(x) for x in df["num_tensor_parallel_workers"].unique())
    if tp not in avail:
        raise SpecsimInputError(source, None, "num_tensor_parallel_workers",
                                f"one of the TP degrees in the file {avail}", str(tp))
    sub = df[df["num_tensor_parallel_workers"] == tp]
    cols = [_median_col(o) for o in OPERATORS]
    grouped = sub.groupby("num_tokens", sort=True)
    med = grouped[cols + [_median_col("emb")]].median()
    shape = {c: int(sub[c].iloc[0]) for c in SHAPE_COLUMNS}
    return LayerTable(
        num_tokens=med.index.to_numpy(dtype=np.int64),
        layer_ms=med[cols].sum(axis=1).to_numpy(dtype=np.float64),
        emb_ms=med[_median_col("emb")].to_numpy(dtype=np.float64),
        shape=shape,
        num_duplicates=int((grouped.size() > 1).sum()),
    )


def read_allreduce_csv(path: str | Path) -> pd.DataFrame:
    """Read a Vidur ``all_reduce.csv`` (columns ``time_stats.all_reduce.median``, ``num_workers``, ``size``).

    Raises:
        SpecsimInputError: missing file or column, NaN or non-positive times (names the CSV line).
    """
    p = Path(path)
    if not p.is_file():
        raise SpecsimInputError(str(p), None, None, "an existing Vidur all_reduce.csv", "no such file")
    df = _read_csv(p, "a Vidur all_reduce.csv")
    need = ["time_stats.all_reduce.median", "num_workers", "size", "devices_per_node"]
    for col in need:
        if col not in df.columns:
            raise SpecsimInputError(str(p), 1, col, "this column in the header", "absent")
    vals = _numbers(df, need)                                   # (rows, 4)
    bad = ~np.isfinite(vals)
    bad[:, 0] |= vals[:, 0] <= 0
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise SpecsimInputError(str(p), int(r) + 2, need[c],
                                "a finite time > 0 ms" if c == 0 else "a finite number",
                                plain(df[need[c]].iloc[r]))
    df[need] = vals
    df.attrs["source"] = str(p)
    return df


def allreduce_ms(df: pd.DataFrame, num_workers: int, size_bytes: np.ndarray,
                 extrapolate: bool = False) -> np.ndarray:
    """All-reduce time in ms for messages of ``size_bytes`` (array) among ``num_workers`` GPUs.

    Uses the rows with all workers on one node (``devices_per_node == num_workers``) when present,
    the median over repeated rows per size, and linear interpolation in size between measured sizes.
    With ``extrapolate``, sizes above the largest measured one continue the line through the last two
    sizes (large all-reduces are bandwidth-bound, so time is linear in size there).

    Raises:
        SpecsimInputError: ``num_workers`` not profiled (lists those that are), or a size outside
            the measured range.
    """
    src = df.attrs.get("source", "<all_reduce.csv>")
    avail = sorted(int(x) for x in df["num_workers"].unique())
    if num_workers not in avail:
        raise SpecsimInputError(src, None, "num_workers", f"one of the profiled sizes {avail}",
                                str(num_workers))
    sub = df[df["num_workers"] == num_workers]
    if (sub["devices_per_node"] == num_workers).any():
        sub = sub[sub["devices_per_node"] == num_workers]
    med = sub.groupby("size", sort=True)["time_stats.all_reduce.median"].median()
    sizes = med.index.to_numpy(dtype=np.float64)
    size_bytes = np.asarray(size_bytes, dtype=np.float64)
    times = med.to_numpy(dtype=np.float64)
    if extrapolate and size_bytes.max() > sizes[-1]:
        slope = (times[-1] - times[-2]) / (sizes[-1] - sizes[-2])
        inside = np.interp(np.minimum(size_bytes, sizes[-1]), sizes, times)
        if size_bytes.min() >= sizes[0]:
            return np.where(size_bytes > sizes[-1], times[-1] + slope * (size_bytes - sizes[-1]), inside)
    if size_bytes.min() < sizes[0] or size_bytes.max() > sizes[-1]:
        raise SpecsimInputError(src, None, "size",
                                f"message sizes within the profiled {int(sizes[0])}..{int(sizes[-1])} bytes",
                                f"{int(size_bytes.min())}..{int(size_bytes.max())}")
    return np.interp(size_bytes, sizes, times)


def kv_bytes_per_token(num_layers: int, n_kv_head: int, head_dim: int, tp: int = 1,
                       dtype_bytes: int = ACT_BYTES) -> float:
    """Bytes of K and V cache one token occupies on one TP shard: ``2 * L * n_kv_head * head_dim * bytes / tp``.

    Llama-2-7B fp16: 2 x 32 x 32 x 128 x 2 = 524,288 bytes (0.5 MiB) per token.
    """
    return 2.0 * num_layers * n_kv_head * head_dim * dtype_bytes / tp


def build_vidur_profile(mlp_csv: str | Path, tp: int, gpu: str, *, model: str | None = None,
                        num_layers: int | None = None, allreduce_csv: str | Path | None = None,
                        kv_efficiency: float = 1.0, attn_fixed_ms_per_layer: float = 0.0,
                        attn_ms_per_token_per_layer: float = 0.0, attention_note: str = "",
                        mlp_source: str | None = None, allreduce_source: str | None = None,
                        nccl_launch_ms: float = 0.0, round_tokens_to: int = 1,
                        date: str | None = None) -> StepTimeProfile:
    """Build a whole-model :class:`StepTimeProfile` from a Vidur ``mlp.csv`` (composition in the module doc).

    Args:
        mlp_csv: the per-operator CSV.
        tp: tensor-parallel degree to read (times are per shard, all shards run in parallel).
        gpu: GPU name for the KV-read bandwidth (:mod:`specsim.hardware.gpus`).
        model: model folder name (default: the CSV's parent folder), used for :data:`MODEL_LAYERS`.
        num_layers: overrides :data:`MODEL_LAYERS`.
        allreduce_csv: the network profile; required when ``tp > 1`` (two all-reduces per layer of
            ``B * n_embd * 2`` bytes, as in Vidur).
        kv_efficiency: achieved fraction of the datasheet HBM bandwidth when reading the KV cache.
            ``kv_read_s_per_token = kv_bytes_per_token / (hbm_bytes_per_s * kv_efficiency)``.
        attn_fixed_ms_per_layer: attention-kernel time per layer independent of B and KV (launch).
        attn_ms_per_token_per_layer: attention-kernel time per query token per layer.
        attention_note: how the attention constants were obtained (goes into the metadata).
        mlp_source, allreduce_source: provenance strings for the metadata (default: the file names).
        nccl_launch_ms: CPU launch cost added to each all-reduce (ms; Vidur's default
            ``nccl_cpu_launch_overhead_ms`` is 0.02, its config.py).
        round_tokens_to: 1 keeps the measured grid with linear lookup; 8 reproduces Vidur's engine model
            (token count rounded up to a multiple of 8 before the operator lookup): the table is then
            every multiple of 8 (linear between measured points) with ``padded`` lookup.
        date: ISO date for the metadata (default: today).

    Returns:
        A ``linear``-lookup profile on the measured token grid, ``extrapolate="error"``.

    Raises:
        SpecsimInputError: bad CSVs, missing TP, unknown model depth, or a missing all-reduce
            profile for ``tp > 1``.
    """
    mlp_csv = Path(mlp_csv)
    model = model or mlp_csv.parent.name
    if num_layers is None:
        if model not in MODEL_LAYERS:
            raise SpecsimInputError(str(mlp_csv), None, "model",
                                    f"a model folder of known depth (one of {sorted(MODEL_LAYERS)}) "
                                    "or the number of layers (--num-layers)",
                                    repr(model))
        num_layers = MODEL_LAYERS[model]
    table = layer_table(read_operator_csv(mlp_csv), tp, str(mlp_csv))
    shape = table.shape
    ar_ms = np.zeros_like(table.layer_ms)
    ar_note = ""
    if tp > 1:
        if allreduce_csv is None:
            raise SpecsimInputError(str(mlp_csv), None, "allreduce_csv",
                                    "a Vidur all_reduce.csv for TP > 1", "none")
        ar = read_allreduce_csv(allreduce_csv)
        sizes = table.num_tokens * shape["n_embd"] * ACT_BYTES
        ar_ms = 2.0 * (allreduce_ms(ar, tp, sizes, extrapolate=True) + nccl_launch_ms)
        ar_max = float(ar["size"].max())
        ar_note = (f"{int((sizes > ar_max).sum())} grid points beyond the largest profiled all-reduce "
                   f"({int(ar_max)} B): extrapolated linearly in size" if (sizes > ar_max).any() else "")
    per_layer_ms = (table.layer_ms + ar_ms + attn_fixed_ms_per_layer
                    + attn_ms_per_token_per_layer * table.num_tokens)
    step_ms = num_layers * per_layer_ms + table.emb_ms
    grid, lookup = table.num_tokens, "linear"
    if round_tokens_to > 1:
        grid = np.arange(round_tokens_to, int(grid[-1]) + 1, round_tokens_to)
        step_ms, lookup = np.interp(grid, table.num_tokens, step_ms), "padded"
    spec = gpu_spec(gpu)
    head_dim = shape["n_embd"] // shape["n_head"]
    kv_bytes = kv_bytes_per_token(num_layers, shape["n_kv_head"], head_dim, tp)
    kv_s = kv_bytes / (spec.hbm_bytes_per_s * kv_efficiency)
    meta = {
        "kind": "measured-derived",
        "gpu": spec.name, "model": model, "dtype": "fp16", "tp": tp, "num_layers": num_layers,
        **{k: v for k, v in shape.items()},
        "engine": "Vidur per-operator profiling: eager PyTorch, cuBLAS GEMMs, no CUDA graphs",
        "source": mlp_source or mlp_csv.name,
        "allreduce_source": (allreduce_source or (Path(allreduce_csv).name if allreduce_csv else None))
        if tp > 1 else None,
        "composition": "step_s(B) = L*(sum of per-layer operator medians + 2*all_reduce(B*n_embd*2 B)"
                       " + attn_fixed + attn_per_token*B) + emb(B); + kv_read_s_per_token*kv_tokens",
        "duplicate_rows": f"{table.num_duplicates} token counts had repeated rows: per-operator median",
        "kv_read": (f"kv_bytes_per_token = 2*L*n_kv_head*head_dim*2 B/tp = {kv_bytes:.0f} B; "
                    f"bandwidth {spec.hbm_bytes_per_s / 1e12:.3f} TB/s ({spec.source}) x efficiency "
                    f"{kv_efficiency:.3f}"),
        "kv_efficiency": kv_efficiency,
        "attn_fixed_ms_per_layer": attn_fixed_ms_per_layer,
        "attn_ms_per_token_per_layer": attn_ms_per_token_per_layer,
        "attention_note": attention_note or "no attention-kernel term in the table",
        "nccl_launch_ms_per_all_reduce": nccl_launch_ms if tp > 1 else 0.0,
        "allreduce_note": ar_note,
        "round_tokens_to": round_tokens_to,
        "date": date or _dt.date.today().isoformat(),
    }
    return StepTimeProfile(batch_tokens=grid, step_time_s=step_ms * 1e-3, lookup=lookup,
                           kv_read_s_per_token=kv_s, extrapolate="error", metadata=meta,
                           source=str(mlp_csv))


def import_vidur(mlp_csv: str | Path, tp: int, gpu: str, *, attention_csv: str | Path | None = None,
                 allreduce_csv: str | Path | None = None, model: str | None = None,
                 num_layers: int | None = None, shared_root: str | Path | None = None,
                 vidur_engine: bool = False, date: str | None = None) -> StepTimeProfile:
    """``specsim profile import-vidur``: a whole-model profile with the attention term calibrated.

    The decode-attention fit of :func:`specsim.hardware.attention.fit_decode_attention` on
    ``attention_csv`` (an A100 profile) supplies the KV-read efficiency and the fixed and per-token
    attention costs (its docstring states the transfer assumption). Without ``attention_csv`` the KV term
    uses the datasheet bandwidth at efficiency 1 and no attention-kernel constants.

    Args:
        vidur_engine: also apply Vidur's engine-model defaults (its config.py, not fitted to anything):
            tokens rounded up to a multiple of 8, 0.02 ms NCCL launch per all-reduce, and for GQA models
            decode and prefill attention x 1.1 (``attention_*_batching_overhead_fraction``; applied to
            every batch, Vidur skips it for a lone request). Use it for side-by-sides with Vidur.
        shared_root: when given, source paths in the metadata are written relative to it (no absolute
            machine paths in committed files).
        other args: as :func:`build_vidur_profile`.
    """

    def rel(p: str | Path | None) -> str | None:
        if p is None:
            return None
        p = Path(p).resolve()
        if shared_root is not None:
            try:
                return "shared/" + p.relative_to(Path(shared_root).resolve()).as_posix()
            except ValueError:
                pass
        return p.name

    kw: dict = {}
    att = None
    if attention_csv is not None:
        att = read_attention_csv(attention_csv)
        fit = fit_decode_attention(att, gpu=ATTENTION_PROFILE_GPU)
        gqa = 1.1 if vidur_engine and int(att.iloc[0]["n_q_head"]) > int(att.iloc[0]["n_kv_head"]) else 1.0
        kw = dict(kv_efficiency=fit.efficiency / gqa, attn_fixed_ms_per_layer=fit.fixed_ms * gqa,
                  attn_ms_per_token_per_layer=fit.per_request_ms * gqa,
                  attention_note=fit.note(rel(attention_csv))
                  + (f"; x{gqa} GQA batching overhead (Vidur engine model)" if gqa != 1.0 else ""))
    if vidur_engine:
        kw.update(nccl_launch_ms=0.02, round_tokens_to=8)
    base = build_vidur_profile(mlp_csv, tp, gpu, model=model, num_layers=num_layers,
                               allreduce_csv=allreduce_csv, mlp_source=rel(mlp_csv),
                               allreduce_source=rel(allreduce_csv), date=date, **kw)
    base.metadata["engine_model"] = "vidur (see import_vidur)" if vidur_engine else "plain"
    if att is None or not attention_matches(att, base.metadata, gpu):
        return base
    # Same GPU and attention shape as the attention profile: its decode fit applies without transfer,
    # and its measured prefill kernel times give the prefill-attention model of mixed steps.
    table = AttentionTable.from_frame(att)
    meta = dict(base.metadata)
    meta["attention_note"] += ("; exact match of GPU, heads, hidden size and TP with the attention "
                               "profile: no transfer assumption; prefill attention = its measured "
                               "chunk x context grid (bilinear)")
    return PrefillAttentionProfile(
        batch_tokens=base.batch_tokens, step_time_s=base.step_time_s, lookup=base.lookup,
        kv_read_s_per_token=base.kv_read_s_per_token, extrapolate=base.extrapolate, metadata=meta,
        source=base.source, num_layers=int(meta["num_layers"]), prefill_chunk_tokens=table.prefill_chunk,
        prefill_context_tokens=table.prefill_kv,
        prefill_ms_per_layer=table.prefill_ms * (1.1 if vidur_engine else 1.0),
        charged_ms_per_token_per_layer=kw["attn_ms_per_token_per_layer"])


#: The GPU the one attention profile (anchors/vidur_run) was measured on.
ATTENTION_PROFILE_GPU = "a100"


def attention_matches(att: pd.DataFrame, meta: dict, gpu: str) -> bool:
    """Whether an attention profile was measured for exactly this GPU, head counts, hidden size and TP."""
    row = att.iloc[0]
    return (gpu_spec(gpu).name == ATTENTION_PROFILE_GPU
            and int(row["n_q_head"]) == meta["n_head"] and int(row["n_kv_head"]) == meta["n_kv_head"]
            and int(row["n_embd"]) == meta["n_embd"]
            and int(row["num_tensor_parallel_workers"]) == meta["tp"])


# --- Vidur's profiling-data layout (the shared folder's data/profiles/vidur, SOURCES.md 2a) -------------------
#: Per-operator compute profiles: ``COMPUTE_DIR/<gpu>/<org>/<model>/mlp.csv``.
COMPUTE_DIR = "data/profiles/vidur/compute"
#: All-reduce profiles: ``NETWORK_DIR/<gpu>_dgx/all_reduce.csv``.
NETWORK_DIR = "data/profiles/vidur/network"
#: The one attention profile (A100, 64 query / 8 KV heads, TP 2), relative to the shared folder.
ATTENTION_ANCHOR = "anchors/vidur_run/vidur_attention_a100_n8192_q64_kv8_tp2.csv"
#: Vidur model folder -> short slug used in profile names.
MODEL_SLUGS = {"Llama-2-7b-hf": "llama2-7b", "Llama-2-70b-hf": "llama2-70b", "Meta-Llama-3-8B": "llama3-8b",
               "CodeLlama-34b-Instruct-hf": "codellama34b"}


def vidur_mlp_csvs(shared_root: str | Path) -> list[Path]:
    """Every ``mlp.csv`` of the Vidur layout under ``shared_root``, sorted.

    Raises:
        SpecsimInputError: none found (names the folder searched).
    """
    folder = Path(shared_root) / COMPUTE_DIR
    files = sorted(folder.glob("*/*/*/mlp.csv"))
    if not files:
        raise SpecsimInputError(str(folder), None, None, "Vidur profiles as <gpu>/<org>/<model>/mlp.csv",
                                "none found")
    return files


def vidur_profile_name(mlp_csv: str | Path, gpu: str, tp: int, vidur_engine: bool = False) -> str:
    """``<gpu>-<model slug>-tp<tp>`` (``-vidur`` appended with ``vidur_engine``), e.g. ``h100-llama2-7b-tp1``.

    The model slug is :data:`MODEL_SLUGS` of the ``mlp.csv``'s folder name, or that name in lower case.
    """
    folder = Path(mlp_csv).parent.name
    return f"{gpu}-{MODEL_SLUGS.get(folder, folder.lower())}-tp{tp}{'-vidur' if vidur_engine else ''}"


def import_vidur_files(shared_root: str | Path, mlp_csvs: list[Path] | None = None, *, tp: int | None = None,
                       gpu: str | None = None, allreduce_csv: str | Path | None = None,
                       attention_csv: str | Path | None = None, vidur_engine: bool = False,
                       num_layers: int | None = None) -> dict[str, StepTimeProfile]:
    """Import Vidur profiles laid out as in the shared folder (``specsim profile import-vidur``).

    Defaults follow the layout (the module constants): the GPU is the ``compute/<gpu>/`` folder name of each
    ``mlp.csv``; the all-reduce profile is ``NETWORK_DIR/<gpu>_dgx/all_reduce.csv`` (used for TP > 1 only);
    the attention profile is :data:`ATTENTION_ANCHOR` when that file exists (else no attention calibration,
    see :func:`import_vidur`); every TP degree in the file is imported.

    Args:
        shared_root: the shared data folder; metadata paths are written relative to it.
        mlp_csvs: the ``mlp.csv`` files to import (default: :func:`vidur_mlp_csvs`, all of them).
        tp: one TP degree instead of all in each file.
        gpu: GPU name instead of the folder name (a :func:`specsim.hardware.gpus.gpu_spec` name).
        allreduce_csv, attention_csv: files instead of the layout's.
        vidur_engine: apply Vidur's engine-model defaults (see :func:`import_vidur`).
        num_layers: the model's depth instead of :data:`MODEL_LAYERS`'s (a model folder not listed there).

    Returns:
        ``{vidur_profile_name(...): profile}`` in file then TP order.

    Raises:
        SpecsimInputError: no ``gpu`` for a file outside the layout; as :func:`vidur_mlp_csvs`,
            :func:`read_operator_csv` and :func:`import_vidur`.
    """
    root = Path(shared_root)
    att = Path(attention_csv) if attention_csv is not None else root / ATTENTION_ANCHOR
    if attention_csv is not None and not att.is_file():      # only the default may be absent
        raise SpecsimInputError(str(att), None, "attention", "an existing Vidur attention.csv", "no such file")
    out: dict[str, StepTimeProfile] = {}
    for f in (vidur_mlp_csvs(root) if mlp_csvs is None else [Path(p) for p in mlp_csvs]):
        if gpu is None and len(f.parents) < 4:
            raise SpecsimInputError(str(f), None, "gpu", "a GPU name, or the file at <gpu>/<org>/<model>/mlp.csv",
                                    "neither")
        g = gpu or f.parents[2].name                                  # compute/<gpu>/<org>/<model>/mlp.csv
        ar = Path(allreduce_csv) if allreduce_csv is not None else root / NETWORK_DIR / f"{g}_dgx/all_reduce.csv"
        tps = [tp] if tp else sorted(int(x) for x in read_operator_csv(f)["num_tensor_parallel_workers"].unique())
        for t in tps:
            out[vidur_profile_name(f, g, t, vidur_engine)] = import_vidur(
                f, t, g, attention_csv=att if att.is_file() else None, allreduce_csv=ar if t > 1 else None,
                shared_root=root, vidur_engine=vidur_engine, num_layers=num_layers)
    return out


def calibrate_on_vidur(shared_root: str | Path) -> CalibrationResult:
    """Calibrate the analytic model's constants on the H100 Vidur Llama-2-7B and 70B curves (TP 1).

    The measured curve is ``L * layer_ms + emb_ms`` (linear layers and embedding only) of each model's
    ``COMPUTE_DIR/h100/meta-llama/<model>/mlp.csv``; the fit is :func:`specsim.hardware.analytic.calibrate`.

    Raises:
        SpecsimInputError: a missing or malformed ``mlp.csv``.
    """
    curves = {}
    for slug, folder in (("llama2-7b", "Llama-2-7b-hf"), ("llama2-70b", "Llama-2-70b-hf")):
        t = layer_table(read_operator_csv(Path(shared_root) / COMPUTE_DIR / f"h100/meta-llama/{folder}/mlp.csv"), 1)
        curves[slug] = (ANALYTIC_MODELS[slug], t.num_tokens, (MODEL_LAYERS[folder] * t.layer_ms + t.emb_ms) * 1e-3)
    return calibrate_analytic(curves, "h100", "H100 Vidur Llama-2-7B/70B TP 1")
