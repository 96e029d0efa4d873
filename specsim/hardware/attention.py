"""The attention term, from the one real attention-kernel profile (Vidur ``attention.csv`` format).

Vidur's operator profiles (SOURCES.md 2a) carry no attention; the only attention measurement at hand is
``anchors/vidur_run/vidur_attention_a100_n8192_q64_kv8_tp2.csv`` (A100, FlashAttention, 64 query / 8 KV
heads, head_dim 128, TP 2, timed with kineto): decode rows (batch 1..128 x KV length 32..4,032) and
prefill rows (one chunk of 64..4,096 tokens x KV already cached 0..4,032). Times are per layer, per shard,
in ms.

Two uses:

* :func:`fit_decode_attention` fits ``t_ms = a + b * batch + c * batch * kv_len`` by least squares over the
  decode rows. ``c`` is a bandwidth: ``bytes_per_kv_token_per_layer / c`` is the KV-read bandwidth the
  kernel achieved. Its ratio to the A100 datasheet bandwidth is the *efficiency* that
  :func:`specsim.hardware.vidur.build_vidur_profile` applies on other GPUs and models. **Assumption**:
  the decode-attention kernel reaches the same fraction of peak HBM bandwidth on H100 as on A100, and
  its fixed per-layer cost ``a`` and per-request cost ``b`` carry over unchanged (they are launch and
  per-sequence bookkeeping costs, not bandwidth).
* :class:`AttentionTable` interpolates the measured decode and prefill kernel times directly; it is exact
  for models with this attention shape (CodeLlama-34B: 64/8 heads, hidden 8,192, TP 2), used for the
  Vidur side-by-side.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.interpolate import RegularGridInterpolator

from specsim.errors import SpecsimInputError
from specsim.hardware.gpus import gpu_spec

DECODE_COL = "time_stats.attn_decode.median"
PREFILL_COL = "time_stats.attn_prefill.median"
RESHAPE_COLS = ("time_stats.attn_input_reshape.median", "time_stats.attn_output_reshape.median")


def read_attention_csv(path: str | Path) -> pd.DataFrame:
    """Read a Vidur ``attention.csv``: decode rows have ``is_prefill == False``.

    Raises:
        SpecsimInputError: missing file or column; NaN kernel time in a row of its kind (names the line).
    """
    p = Path(path)
    if not p.is_file():
        raise SpecsimInputError(str(p), None, None, "an existing Vidur attention.csv", "no such file")
    df = pd.read_csv(p)
    need = [DECODE_COL, PREFILL_COL, *RESHAPE_COLS, "n_embd", "n_q_head", "n_kv_head",
            "num_tensor_parallel_workers", "batch_size", "prefill_chunk_size", "kv_cache_size", "is_prefill"]
    for col in need:
        if col not in df.columns:
            raise SpecsimInputError(str(p), 1, col, "this column in the header", "absent")
    is_pf = df["is_prefill"].astype(str).str.lower().eq("true").to_numpy()
    t = np.where(is_pf, df[PREFILL_COL], df[DECODE_COL]).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(t) | (t <= 0))
    if bad.size:
        col = PREFILL_COL if is_pf[bad[0]] else DECODE_COL
        raise SpecsimInputError(str(p), int(bad[0]) + 2, col, "a finite time > 0 ms", repr(t[bad[0]]))
    df = df.assign(is_prefill=is_pf,
                   reshape_ms=df[list(RESHAPE_COLS)].sum(axis=1).astype(np.float64),
                   kernel_ms=t)
    df.attrs["source"] = str(p)
    return df


def _kv_bytes_per_token_per_layer(df: pd.DataFrame) -> float:
    """K+V bytes of one token on one shard of one layer (fp16): ``2 * n_kv_head/tp * head_dim * 2``."""
    row = df.iloc[0]
    head_dim = int(row["n_embd"]) // int(row["n_q_head"])
    return 2.0 * int(row["n_kv_head"]) / int(row["num_tensor_parallel_workers"]) * head_dim * 2


@dataclass(frozen=True)
class DecodeAttentionFit:
    """Least-squares fit of decode attention per layer: ``t_ms = fixed_ms + per_request_ms * batch
    + per_kv_token_ms * batch * kv_len`` (reshapes included).

    Attributes:
        fixed_ms, per_request_ms, per_kv_token_ms: the coefficients (ms, ms/request, ms/KV token).
        kv_bytes_per_token_per_layer: bytes of K+V per token per layer on one shard in the profile.
        effective_bytes_per_s: achieved KV-read bandwidth, ``kv_bytes / (per_kv_token_ms * 1e-3)``.
        efficiency: ``effective_bytes_per_s`` over the datasheet bandwidth of ``gpu``.
        gpu: the GPU of the profile.
        median_rel_err, p90_rel_err: fit error over the decode rows.
        num_rows: decode rows used.
    """

    fixed_ms: float
    per_request_ms: float
    per_kv_token_ms: float
    kv_bytes_per_token_per_layer: float
    effective_bytes_per_s: float
    efficiency: float
    gpu: str
    median_rel_err: float
    p90_rel_err: float
    num_rows: int

    def note(self, source: str) -> str:
        """One-line provenance for profile metadata."""
        return (f"decode attention fitted on {source} ({self.gpu.upper()}, {self.num_rows} rows): "
                f"t = {self.fixed_ms:.4g} ms + {self.per_request_ms:.3g} ms/request + "
                f"{self.per_kv_token_ms:.3g} ms/KV token per layer (median error "
                f"{100 * self.median_rel_err:.1f}%, p90 {100 * self.p90_rel_err:.1f}%); KV-read bandwidth "
                f"{self.effective_bytes_per_s / 1e12:.3f} TB/s = {100 * self.efficiency:.1f}% of datasheet. "
                "Assumed: same efficiency and fixed/per-request costs on other GPUs and models; the "
                "per-request cost is charged per token of the step (B = requests without speculation)")


def fit_decode_attention(df: pd.DataFrame, gpu: str = "a100") -> DecodeAttentionFit:
    """Fit the decode-attention model (class docstring) on the decode rows of an attention profile.

    Raises:
        SpecsimInputError: the profile has no decode rows.
    """
    dec = df[~df["is_prefill"]]
    if dec.empty:
        raise SpecsimInputError(df.attrs.get("source"), None, "is_prefill", "some decode rows", "none")
    batch = dec["batch_size"].to_numpy(np.float64)
    kv = dec["kv_cache_size"].to_numpy(np.float64)
    y = (dec["kernel_ms"] + dec["reshape_ms"]).to_numpy(np.float64)
    design = np.column_stack([np.ones_like(batch), batch, batch * kv])  # (n, 3)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    rel = np.abs(design @ coef - y) / y
    kv_bytes = _kv_bytes_per_token_per_layer(dec)
    eff_bw = kv_bytes / (coef[2] * 1e-3)
    return DecodeAttentionFit(
        fixed_ms=float(coef[0]), per_request_ms=float(coef[1]), per_kv_token_ms=float(coef[2]),
        kv_bytes_per_token_per_layer=kv_bytes, effective_bytes_per_s=float(eff_bw),
        efficiency=float(eff_bw / gpu_spec(gpu).hbm_bytes_per_s), gpu=gpu,
        median_rel_err=float(np.median(rel)), p90_rel_err=float(np.quantile(rel, 0.9)),
        num_rows=int(len(dec)))


def _fill_beyond_max_len(kv: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Fill unmeasured prefill cells (chunk + context beyond the profile's ``max_model_len``) by a
    least-squares line in context through that chunk's measured cells (attention is linear in the
    context read); a row with fewer than 4 measured cells keeps its own level but borrows the slope of
    the last row that had 4 or more."""
    out = vals.copy()
    slope = 0.0
    for i, row in enumerate(vals):
        ok = ~np.isnan(row)
        if ok.sum() >= 4:
            slope, icpt = np.polyfit(kv[ok], row[ok], 1)
        elif ok.sum() >= 1:
            icpt = float(np.mean(row[ok] - slope * kv[ok]))
        else:
            continue
        out[i, ~ok] = icpt + slope * kv[~ok]
    return out


@dataclass(frozen=True)
class AttentionTable:
    """Measured attention-kernel times per layer and shard, interpolated bilinearly (ms).

    Attributes:
        decode_batch: (nb,) measured decode batch sizes; decode_kv: (nk,) KV lengths;
        decode_ms: (nb, nk) decode kernel + reshapes.
        prefill_chunk: (nc,) chunk sizes; prefill_kv: (nq,) KV already cached;
        prefill_ms: (nc, nq) prefill kernel + reshapes; cells with chunk + context beyond the
        profile's ``max_model_len`` were not measured and are extrapolated linearly in context.
    """

    decode_batch: np.ndarray
    decode_kv: np.ndarray
    decode_ms: np.ndarray
    prefill_chunk: np.ndarray
    prefill_kv: np.ndarray
    prefill_ms: np.ndarray

    @classmethod
    def from_frame(cls, df: pd.DataFrame) -> "AttentionTable":
        """Pivot the decode and prefill rows onto full grids (duplicates -> median).

        Raises:
            SpecsimInputError: a grid with holes (a (size, kv) pair missing).
        """
        src = df.attrs.get("source", "<attention.csv>")
        tot = df["kernel_ms"] + df["reshape_ms"]
        out = {}
        for kind, key in (("decode", "batch_size"), ("prefill", "prefill_chunk_size")):
            rows = df[df["is_prefill"] == (kind == "prefill")]
            grid = rows.assign(t=tot).pivot_table(index=key, columns="kv_cache_size", values="t",
                                                  aggfunc="median")
            kv = grid.columns.to_numpy(np.float64)
            vals = grid.to_numpy(np.float64)  # (n_size, n_kv)
            if kind == "prefill":
                vals = _fill_beyond_max_len(kv, vals)
            if np.isnan(vals).any():
                raise SpecsimInputError(src, None, kind, f"a complete {key} x kv_cache_size grid",
                                        f"{int(np.isnan(vals).sum())} missing cells")
            out[kind] = (grid.index.to_numpy(np.float64), kv, vals)
        return cls(*out["decode"], *out["prefill"])

    def decode(self, batch: np.ndarray, kv_len: np.ndarray) -> np.ndarray:
        """Decode-attention ms per layer for batches of ``batch`` requests of mean KV length ``kv_len``
        (arrays, broadcast; points outside the measured grid are clipped to its edge)."""
        f = RegularGridInterpolator((self.decode_batch, self.decode_kv), self.decode_ms)
        b = np.clip(batch, self.decode_batch[0], self.decode_batch[-1])
        k = np.clip(kv_len, self.decode_kv[0], self.decode_kv[-1])
        return f(np.stack(np.broadcast_arrays(b, k), axis=-1))

    def prefill(self, chunk: np.ndarray, kv_len: np.ndarray) -> np.ndarray:
        """Prefill-attention ms per layer for chunks of ``chunk`` tokens after ``kv_len`` cached tokens."""
        f = RegularGridInterpolator((self.prefill_chunk, self.prefill_kv), self.prefill_ms)
        c = np.clip(chunk, self.prefill_chunk[0], self.prefill_chunk[-1])
        k = np.clip(kv_len, self.prefill_kv[0], self.prefill_kv[-1])
        return f(np.stack(np.broadcast_arrays(c, k), axis=-1))
