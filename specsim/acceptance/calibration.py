"""Calibration of drafter confidences: ECE, AUROC, reliability, Sequential Temperature Scaling (STS).

A drafter emits one raw confidence c_k per draft position, an estimate of the conditional acceptance
alpha_k = P(draft k accepted | drafts 1..k-1 accepted) (DSpark paper §3.2.1). The scheduler uses the
survival a_k = c_1 * ... * c_k as an absolute probability, so the confidences have to be calibrated,
not just well ranked. Everything here is evaluated the way the paper and DeepSpec evaluate it
(DSpark paper §3.2.1): per position k, the *predicted cumulative survival* a_k against the binary
prefix label y_k = 1 iff drafts 1..k were all accepted.

- ECE: 20 equal-width bins on [0, 1]; ECE = sum_b (n_b / N) * |mean a in b - mean y in b|.
- AUROC: exact Mann-Whitney statistic with mid-ranks for ties (DeepSpec approximates it with 1000 bins).
- STS: for k = 1..gamma, left to right, T_k minimises the ECE of
  prod_{i<k} sigmoid(logit(c_i) / T_i*) * sigmoid(logit(c_k) / T) against y_k, earlier T fixed.
  The paper gives neither the search range nor the grid; we search T on a
  log-spaced grid over [0.1, 10] (161 points, ratio 1.029 between neighbours) and refine the best grid
  point with a bounded scalar search between its two neighbours.

Arrays are ``(N, gamma)``: one row per (step, request), one column per draft position; ``known`` masks
positions whose label is observed (see :func:`specsim.acceptance.steplog.prefix_labels`).

Predictions and confidences must be finite numbers in [0, 1] (percent or logits are refused, naming the argument,
row and position), labels 0 or 1; exactly 0 and 1 are clipped to [1e-6, 1 - 1e-6] before the logit (``_EPS``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from specsim.errors import SpecsimInputError, plain
from specsim.acceptance.steplog import CALIBRATION_COLUMNS, PROBABILITIES, check_step_log, prefix_labels, row_order

N_BINS = 20                                   # DeepSpec's ECE bins (DSpark paper §3.2.1)
T_MIN, T_MAX, T_GRID_POINTS = 0.1, 10.0, 161  # STS search range (our choice: the paper gives none)
_EPS = 1e-6                                   # confidences are clipped to [eps, 1 - eps] before logit
_MAX_GRID_ELEMS = 4_000_000                   # memory cap for the vectorised grid evaluation
ADAPTIVE_WARN_FRACTION = 0.01                 # share of censored rows above which calibrate warns
MIN_ROWS_PER_BIN = 50       # fewer fit or held-out rows a bin: calibrate warns that ECE and T are mostly noise
ECE_RISE_WARN = 0.005       # held-out ECE rising under STS by more than this (0.5 points): calibrate warns


# ---------------------------------------------------------------------------------------------- checks

def check_probabilities(values: np.ndarray, name: str, where: np.ndarray | None = None) -> np.ndarray:
    """``values`` as a float array, checked to be finite numbers in [0, 1] (where ``where`` is True, if given).

    Args:
        values: (N,) or (N, gamma) array-like.
        name: the argument's name, for the error.
        where: a bool mask of ``values``' shape: only these entries are checked (NaN may pad the others).

    Raises:
        SpecsimInputError: naming ``name``, the first bad value and its index (or row and position, 1-based).
    """
    v = np.asarray(values, dtype=float)
    bad = ~((v >= 0.0) & (v <= 1.0))                               # NaN is bad too
    if where is not None:
        bad &= np.asarray(where, dtype=bool)
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), v.shape)
        at = f"row {i[0] + 1}, position {i[1] + 1}" if v.ndim == 2 else f"index {i[0]}" if v.ndim else "0-d"
        raise SpecsimInputError(None, None, name, PROBABILITIES, f"{plain(v[i])} at {at}")
    return v


def _read_positions(known: np.ndarray) -> np.ndarray:
    """(N, gamma) bool: the positions a survival a_k with a known label reads, k itself and every earlier one."""
    return np.flip(np.cumsum(np.flip(np.asarray(known, dtype=bool), axis=1), axis=1), axis=1) > 0


def _check_labels(label: np.ndarray, size: int, name: str = "label") -> np.ndarray:
    """(N,) labels as floats, each 0 or 1 (bools allowed), as many as the predictions.

    Raises:
        SpecsimInputError: a label that is not 0 or 1, or a length other than ``size``.
    """
    y = np.asarray(label, dtype=float).ravel()
    if y.size != size:
        raise SpecsimInputError(None, None, name, f"{size} labels, one per prediction", str(y.size))
    bad = (y != 0) & (y != 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise SpecsimInputError(None, None, name, "labels 0 or 1 (bool)", f"{plain(y[i])} at index {i}")
    return y


# ---------------------------------------------------------------------------------------------- metrics

def _bin_index(pred: np.ndarray, n_bins: int) -> np.ndarray:
    """Equal-width bin of each prediction on [0, 1]; 1.0 falls in the last bin."""
    return np.clip((np.asarray(pred, dtype=float) * n_bins).astype(np.int64), 0, n_bins - 1)


@dataclass(frozen=True)
class Reliability:
    """Per-bin reliability statistics (the points of a reliability diagram).

    Attributes:
        edges: (n_bins + 1,) bin edges on [0, 1].
        mean_pred: (n_bins,) mean prediction per bin, NaN where the bin is empty.
        observed: (n_bins,) observed positive rate per bin, NaN where empty.
        counts: (n_bins,) samples per bin.
    """

    edges: np.ndarray
    mean_pred: np.ndarray
    observed: np.ndarray
    counts: np.ndarray

    @property
    def ece(self) -> float:
        """sum_b (n_b / N) |mean_pred_b - observed_b| over non-empty bins (NaN for no samples)."""
        n = self.counts.sum()
        if n == 0:
            return float("nan")
        nz = self.counts > 0
        return float(np.sum(self.counts[nz] * np.abs(self.mean_pred[nz] - self.observed[nz])) / n)


def reliability(pred: np.ndarray, label: np.ndarray, n_bins: int = N_BINS) -> Reliability:
    """Bin predictions into ``n_bins`` equal-width bins on [0, 1] and average predictions and labels.

    Args:
        pred: (N,) predicted probabilities in [0, 1].
        label: (N,) binary outcomes (bool or 0/1).
        n_bins: number of bins (20 as in DeepSpec's evaluation, DSpark paper §3.2.1).

    Raises:
        SpecsimInputError: a prediction outside [0, 1] or NaN (field ``pred``), a label other than 0 or 1 or
            a label count other than the predictions' (field ``label``).
    """
    pred = check_probabilities(np.ravel(pred), "pred")
    label = _check_labels(label, pred.size)
    b = _bin_index(pred, n_bins)
    counts = np.bincount(b, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_pred = np.bincount(b, weights=pred, minlength=n_bins) / counts
        observed = np.bincount(b, weights=label, minlength=n_bins) / counts
    return Reliability(np.linspace(0.0, 1.0, n_bins + 1), mean_pred, observed, counts)


def ece(pred: np.ndarray, label: np.ndarray, n_bins: int = N_BINS) -> float:
    """Expected calibration error, ECE = sum_b (n_b / N) |mean pred_b - mean label_b|.

    Equal-width bins on [0, 1], empty bins skipped; as DeepSpec evaluates the confidence head
    (DSpark paper §3.2.1). Per draft position, ``pred`` is the predicted cumulative survival a_k and
    ``label`` the prefix-accepted indicator.

    Args:
        pred: (N,) predictions in [0, 1].
        label: (N,) binary outcomes.
        n_bins: number of bins.

    Returns:
        ECE as a fraction (0.057 = 5.7%); NaN when N = 0.

    Raises:
        SpecsimInputError: as :func:`reliability` (``pred`` outside [0, 1], e.g. in percent; bad ``label``).
    """
    return reliability(pred, label, n_bins).ece


def auroc(pred: np.ndarray, label: np.ndarray) -> float:
    """Area under the ROC curve, exact: the Mann-Whitney U statistic with mid-ranks for ties.

    AUROC = (sum of positive ranks - P (P + 1) / 2) / (P * Q) for P positives and Q negatives, i.e. the
    probability that a random positive scores above a random negative, ties counted one half.

    Args:
        pred: (N,) scores.
        label: (N,) binary outcomes.

    Returns:
        AUROC in [0, 1]; NaN when one class is absent.

    Raises:
        SpecsimInputError: a score that is NaN or infinite (field ``pred``), a label other than 0 or 1.
    """
    pred = np.asarray(pred, dtype=float).ravel()
    if not np.all(np.isfinite(pred)):
        i = int(np.argmax(~np.isfinite(pred)))
        raise SpecsimInputError(None, None, "pred", "finite scores", f"{plain(pred[i])} at index {i}")
    label = _check_labels(label, pred.size).astype(bool)
    num_pos = int(label.sum())
    num_neg = label.size - num_pos
    if num_pos == 0 or num_neg == 0:
        return float("nan")
    from scipy.stats import rankdata             # imported on first use: ~0.5 s, not on the run path

    ranks = rankdata(pred)                        # mid-ranks for ties
    u = ranks[label].sum() - num_pos * (num_pos + 1) / 2.0
    return float(u / (num_pos * num_neg))


def brier(pred: np.ndarray, label: np.ndarray) -> float:
    """Brier score, mean (pred - label)^2 (DeepSpec also reports it, DSpark paper §3.2.1); NaN when N = 0.

    Raises:
        SpecsimInputError: as :func:`reliability`.
    """
    pred = check_probabilities(np.ravel(pred), "pred")
    label = _check_labels(label, pred.size)
    return float(np.mean((pred - label) ** 2)) if pred.size else float("nan")


# ------------------------------------------------------------------------------------------------- STS

def _logits(conf: np.ndarray) -> np.ndarray:
    return logit(np.clip(np.asarray(conf, dtype=float), _EPS, 1.0 - _EPS))


def apply_temperatures(conf_raw: np.ndarray, temperatures: np.ndarray) -> np.ndarray:
    """Calibrated conditional confidences: c'_k = sigmoid(logit(c_k) / T_k).

    Monotone in c_k for every T_k > 0, so each position's ranking is kept (DSpark paper §3.2.1).

    Args:
        conf_raw: (N, gamma) raw confidences in [0, 1], clipped to [1e-6, 1 - 1e-6] (NaN passes through).
        temperatures: (gamma,) or (gamma',) with gamma' >= gamma; positive.

    Returns:
        (N, gamma) calibrated confidences.

    Raises:
        ValueError: a temperature is not positive or there are fewer temperatures than positions.
        SpecsimInputError: a confidence outside [0, 1] (field ``conf_raw``; percent or logits, not
            probabilities).
    """
    conf_raw = np.atleast_2d(np.asarray(conf_raw, dtype=float))
    check_probabilities(conf_raw, "conf_raw", where=~np.isnan(conf_raw))
    temps = np.asarray(temperatures, dtype=float).ravel()
    gamma = conf_raw.shape[1]
    if temps.size < gamma or np.any(~(temps[:gamma] > 0)):
        raise ValueError(f"temperatures: expected {gamma} positive values, got {temps.tolist()}")
    return expit(_logits(conf_raw) / temps[None, :gamma])


def survival(conf: np.ndarray) -> np.ndarray:
    """Cumulative survival a_k = c_1 * ... * c_k per row (DSpark paper §3.2.1). (N, gamma) -> (N, gamma)."""
    return np.cumprod(np.asarray(conf, dtype=float), axis=1)


def _ece_for_temperatures(prefix: np.ndarray, z: np.ndarray, label: np.ndarray, temps: np.ndarray,
                          n_bins: int) -> np.ndarray:
    """ECE of prefix * sigmoid(z / T) against label for every T in temps. (N,), (N,), (N,), (G,) -> (G,)."""
    n = prefix.size
    out = np.empty(temps.size)
    chunk = max(1, _MAX_GRID_ELEMS // max(n, 1))
    lab = label.astype(float)
    for s in range(0, temps.size, chunk):
        t = temps[s:s + chunk]                                     # (g,)
        pred = prefix[None, :] * expit(z[None, :] / t[:, None])    # (g, N) predicted survival
        flat = (_bin_index(pred, n_bins) + n_bins * np.arange(t.size)[:, None]).ravel()
        size = t.size * n_bins
        sum_p = np.bincount(flat, weights=pred.ravel(), minlength=size)
        sum_y = np.bincount(flat, weights=np.broadcast_to(lab, pred.shape).ravel(), minlength=size)
        # sum_b (n_b/N)|mean_p - mean_y| = sum_b |sum_p - sum_y| / N
        out[s:s + t.size] = np.abs(sum_p - sum_y).reshape(t.size, n_bins).sum(axis=1) / n
    return out


def _fit_one_temperature(prefix: np.ndarray, z: np.ndarray, label: np.ndarray, n_bins: int) -> float:
    """1-D search for T minimising ECE(prefix * sigmoid(z / T), label): log grid, then bounded refine."""
    log_grid = np.linspace(np.log(T_MIN), np.log(T_MAX), T_GRID_POINTS)
    errs = _ece_for_temperatures(prefix, z, label, np.exp(log_grid), n_bins)
    i = int(np.argmin(errs))
    best_log_t, best_err = log_grid[i], errs[i]
    lo, hi = log_grid[max(i - 1, 0)], log_grid[min(i + 1, log_grid.size - 1)]
    if hi > lo:
        from scipy.optimize import minimize_scalar  # imported on first use (not on the run path)

        res = minimize_scalar(
            lambda lt: _ece_for_temperatures(prefix, z, label, np.array([np.exp(lt)]), n_bins)[0],
            bounds=(lo, hi), method="bounded", options={"xatol": 1e-4})
        if res.fun < best_err:
            best_log_t = float(res.x)
    return float(np.exp(best_log_t))


def fit_sts(conf_raw: np.ndarray, labels: np.ndarray, known: np.ndarray | None = None,
            n_bins: int = N_BINS) -> np.ndarray:
    """Sequential Temperature Scaling: per-position temperatures fitted left to right (DSpark paper §3.2.1).

    For k = 1..gamma, with T_1..T_{k-1} already fixed,
    T_k = argmin_T ECE( prod_{i<k} sigmoid(logit(c_i)/T_i) * sigmoid(logit(c_k)/T), y_k ),
    found on a log grid over [T_MIN, T_MAX] = [0.1, 10] refined by a bounded Brent search. Only rows
    whose label at position k is known enter the fit of T_k, so T_k never depends on data at later
    positions. A position with no known rows keeps T = 1. Confidences of exactly 0 or 1 are clipped to
    [1e-6, 1 - 1e-6] before the logit.

    Args:
        conf_raw: (N, gamma) raw conditional confidences c_k in [0, 1] (any value, NaN too, where not known).
        labels: (N, gamma) bool, prefix-accepted labels y_k.
        known: (N, gamma) bool, which labels are observed (all when None).
        n_bins: ECE bins (20, DeepSpec's evaluation).

    Returns:
        (gamma,) temperatures, each in [0.1, 10].

    Raises:
        ValueError: shapes differ.
        SpecsimInputError: a confidence a known label reads (its position or an earlier one) is NaN or
            outside [0, 1] (field ``conf_raw``, with its row and position): confidences in percent or as
            logits are refused, not fitted.
    """
    conf_raw = np.asarray(conf_raw, dtype=float)
    labels = np.asarray(labels, dtype=bool)
    known = np.ones_like(labels) if known is None else np.asarray(known, dtype=bool)
    if conf_raw.ndim != 2 or labels.shape != conf_raw.shape or known.shape != conf_raw.shape:
        raise ValueError(f"fit_sts: conf_raw, labels, known must share one (N, gamma) shape, got "
                         f"{conf_raw.shape}, {labels.shape}, {known.shape}")
    check_probabilities(conf_raw, "conf_raw", where=_read_positions(known))
    z = _logits(conf_raw)                                          # (N, gamma)
    gamma = conf_raw.shape[1]
    temps = np.ones(gamma)
    prefix = np.ones(conf_raw.shape[0])                           # prod_{i<k} calibrated c_i
    for k in range(gamma):
        rows = known[:, k]
        if rows.any():
            temps[k] = _fit_one_temperature(prefix[rows], z[rows, k], labels[rows, k], n_bins)
        prefix = prefix * expit(np.nan_to_num(z[:, k]) / temps[k])
    return temps


def position_metrics(conf: np.ndarray, labels: np.ndarray, known: np.ndarray,
                     n_bins: int = N_BINS) -> pd.DataFrame:
    """ECE, AUROC and Brier of the cumulative survival per position, on known rows.

    Args:
        conf: (N, gamma) conditional confidences (raw or calibrated).
        labels, known: (N, gamma) bool prefix labels and their mask.

    Raises:
        SpecsimInputError: a confidence outside [0, 1] or NaN (field ``conf``) at a known position or before one.

    Returns:
        DataFrame with one row per position: position (1-based), n, accept_rate, mean_pred, ece, auroc,
        brier.
    """
    conf = np.asarray(conf, dtype=float)
    check_probabilities(conf, "conf", where=_read_positions(known))
    a = survival(np.nan_to_num(conf, nan=0.0))
    rows = []
    for k in range(conf.shape[1]):
        m = known[:, k]
        p, y = a[m, k], labels[m, k]
        rows.append({"position": k + 1, "n": int(m.sum()),
                     "accept_rate": float(y.mean()) if m.any() else float("nan"),
                     "mean_pred": float(p.mean()) if m.any() else float("nan"),
                     "ece": ece(p, y, n_bins), "auroc": auroc(p, y), "brier": brier(p, y)})
    return pd.DataFrame(rows)


def ece_floor(pred: np.ndarray, n_bins: int = N_BINS, draws: int = 20, seed: int = 0) -> float:
    """The ECE a perfectly calibrated head shows from sampling alone: the mean ECE of ``pred`` against labels drawn
    as Bernoulli(pred), ``draws`` times (fixed seed). (N,) predictions -> fraction; NaN when N = 0."""
    pred = check_probabilities(np.ravel(pred), "pred")
    if pred.size == 0:
        return float("nan")
    rng = np.random.default_rng(seed)
    return float(np.mean([ece(pred, rng.random(pred.size) < pred, n_bins) for _ in range(draws)]))


def failure_warnings(metrics: pd.DataFrame, survival_sts: np.ndarray, labels: np.ndarray, known: np.ndarray,
                     n_bins: int = N_BINS) -> list[str]:
    """Per position, the signs that STS failed or cannot be judged (positions with no rows are skipped):

    - T on a bound of the search range [T_MIN, T_MAX] (the fit would push it further);
    - held-out ECE rising under STS by more than :data:`ECE_RISE_WARN`;
    - fewer than :data:`MIN_ROWS_PER_BIN` fit or held-out rows a bin, with :func:`ece_floor` of the held-out
      calibrated survival (what sampling alone gives).

    Args:
        metrics: :attr:`CalibrationReport.metrics`.
        survival_sts: (N, gamma) calibrated survival of the held-out rows; labels, known: theirs.
        n_bins: ECE bins.

    Returns:
        One line per finding, each naming its position.
    """
    out = []
    for r in metrics[(metrics["n_fit"] > 0) & (metrics["n_eval"] > 0)].itertuples():
        k = int(r.position)
        for bound, why in ((T_MAX, f"STS flattens them toward 0.5: the raw confidences barely rank acceptance "
                                   f"here (held-out AUROC {r.auroc_raw:.3f})"),
                           (T_MIN, "STS sharpens them as far as it may: the raw confidences are far underconfident")):
            if abs(np.log(r.temperature / bound)) < 1e-3:
                out.append(f"position {k}: T ended on its bound {bound:g} (STS searches [{T_MIN:g}, {T_MAX:g}]): "
                           f"the fit would push it further; {why}. Check that conf_raw holds this position's "
                           "conditional acceptance probability c_k (not percent, logits or the survival c_1...c_k)")
        if r.ece_sts > r.ece_raw + ECE_RISE_WARN:
            out.append(f"position {k}: held-out ECE rose under STS, {100 * r.ece_raw:.2f}% -> {100 * r.ece_sts:.2f}%: "
                       "the temperature fitted on one half of the requests does not carry to the other (too few "
                       "rows, or halves that differ)")
        if min(r.n_fit, r.n_eval) < MIN_ROWS_PER_BIN * n_bins:
            m = known[:, k - 1]
            floor = ece_floor(survival_sts[m, k - 1], n_bins)
            out.append(f"position {k}: {r.n_fit} fit and {r.n_eval} held-out rows over {n_bins} bins (under "
                       f"{MIN_ROWS_PER_BIN} a bin): a calibrated head would show an ECE of about {100 * floor:.1f}% "
                       "from sampling alone, so this position's ECE and T are mostly noise; log more requests or "
                       "pass fewer --bins")
    return out


# ------------------------------------------------------------------------------------------- step logs

def _conf_matrix(col: pd.Series, gamma_max: int) -> np.ndarray:
    """Ragged list column -> (N, gamma_max) float array, NaN-padded."""
    lengths = col.map(len).to_numpy(dtype=np.int64)
    out = np.full((lengths.size, gamma_max), np.nan)
    if lengths.sum() == 0:
        return out
    flat = np.concatenate([np.asarray(v, dtype=float) for v in col.to_numpy()])
    row = np.repeat(np.arange(lengths.size), lengths)
    pos = np.arange(flat.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    keep = pos < gamma_max
    out[row[keep], pos[keep]] = flat[keep]
    return out


def step_log_arrays(df: pd.DataFrame) -> dict:
    """Confidences, prefix labels and their mask from a step log (format: :mod:`specsim.acceptance.steplog`).

    Rows with gamma = 0 are dropped. A position k is known when the step-log rule says so and the row
    drafted k (k <= gamma of that row).

    Returns:
        dict with conf_raw (N, G) float, labels (N, G) bool, known (N, G) bool, censored (N,) bool
        (verify_len < gamma without a rejection: the later positions are unlabelled), request_id (N,),
        step (N,) (the row's position in ``df`` where there is no step column), gamma_max G.

    Raises:
        SpecsimInputError: a column calibration reads is missing (``CALIBRATION_COLUMNS`` of
            :mod:`specsim.acceptance.steplog`, all missing ones named), a bad count, a conf_raw that is no list of
            gamma values or holds a value that is not a number in [0, 1] (``df``, its 1-based row as ``line``;
            :func:`specsim.acceptance.steplog.check_step_log`), no row with gamma >= 1.
    """
    check_step_log(df, "df", CALIBRATION_COLUMNS)
    drafted = df["gamma"].to_numpy() > 0
    step = row_order(df)[drafted]
    df = df[drafted]
    gamma = df["gamma"].to_numpy(dtype=np.int64)
    if gamma.size == 0:
        raise SpecsimInputError(None, None, "gamma", "at least one row with gamma >= 1", "none")
    gamma_max = int(gamma.max())
    v = df["verify_len"].to_numpy(dtype=np.int64)
    a = df["num_accepted"].to_numpy(dtype=np.int64)
    labels, known = prefix_labels(v, a, gamma_max)
    known &= np.arange(1, gamma_max + 1)[None, :] <= gamma[:, None]
    conf_raw = _conf_matrix(df["conf_raw"], gamma_max)
    known &= np.isfinite(conf_raw)
    return {"conf_raw": conf_raw, "labels": labels, "known": known, "censored": (v < gamma) & (a == v),
            "request_id": df["request_id"].astype(str).to_numpy(), "step": step,
            "gamma_max": gamma_max}


def split_by_request(request_id: np.ndarray) -> np.ndarray:
    """Deterministic half split by a hash of the request id: True = fit set, False = evaluation set.

    Steps of one request are correlated (shared difficulty), so a request's steps all land on one side.
    Falls back to alternating rows when the hash puts everything on one side (e.g. one request).
    """
    h = pd.util.hash_pandas_object(pd.Series(request_id, dtype=str), index=False).to_numpy()
    fit = (h % 2) == 0
    if fit.all() or not fit.any():
        fit = (np.arange(fit.size) % 2) == 0
    return fit


@dataclass
class CalibrationReport:
    """Result of :func:`calibrate_step_log`.

    Attributes:
        temperatures: (gamma,) STS temperatures, fitted on the fit split.
        metrics: one row per position: position, n_fit, n_eval, accept_rate, and ece / auroc / brier
            before (``_raw``) and after (``_sts``) STS, all on the held-out evaluation split.
        num_rows: step-log rows used (gamma >= 1).
        censored_fraction: share of rows with verify_len < gamma and no rejection (missing labels), a request's
            last step not counted (it verifies at most the output left, whatever the policy).
        warnings: human-readable warnings (adaptive-run bias, empty positions, and per position a T on its
            bound, held-out ECE rising under STS, too few rows for the bins: :func:`failure_warnings`).
        split: how the rows were split.
        source: where the log came from (file names).
    """

    temperatures: np.ndarray
    metrics: pd.DataFrame
    num_rows: int
    censored_fraction: float
    warnings: list[str] = field(default_factory=list)
    split: str = "request-id hash (half fit, half evaluation)"
    source: list[str] = field(default_factory=list)
    n_bins: int = N_BINS

    def to_json(self) -> dict:
        """The temperatures.json payload (scenarios carry ``temperatures``)."""
        return {"temperatures": [round(float(t), 6) for t in self.temperatures],
                "source": self.source, "method": "sequential temperature scaling (DSpark paper §3.2.1)",
                "objective": f"ECE of cumulative survival, {self.n_bins} equal-width bins",
                "t_range": [T_MIN, T_MAX], "split": self.split, "num_rows": self.num_rows,
                "censored_fraction": self.censored_fraction, "warnings": self.warnings,
                "ece_raw": self.metrics["ece_raw"].round(6).tolist(),
                "ece_sts": self.metrics["ece_sts"].round(6).tolist()}


def calibrate_step_log(df: pd.DataFrame, source: list[str] | None = None, n_bins: int = N_BINS,
                       adaptive_warn_fraction: float = ADAPTIVE_WARN_FRACTION,
                       warn_to_stderr: bool = True) -> CalibrationReport:
    """Fit STS on half of a step log's requests and evaluate raw and calibrated confidences on the rest.

    Args:
        df: a step log (format in :mod:`specsim.acceptance.steplog`; only ``CALIBRATION_COLUMNS`` are required:
            request_id, gamma, verify_len, num_accepted, conf_raw); may concatenate several runs.
        source: names of the files the log came from (recorded in the report).
        n_bins: ECE bins.
        adaptive_warn_fraction: warn when more than this share of rows is censored (verify_len < gamma
            without a rejection), i.e. the log comes from an adaptive-length policy: its labels are
            missing not at random (a scheduler verifies the confident prefixes), which biases the fit.
            A request's last step is not counted: it verifies at most the output left, in any run (a static
            run's only censored rows are those).
        warn_to_stderr: also print each warning on stderr (the report always holds them).

    Returns:
        CalibrationReport.

    Raises:
        SpecsimInputError: a missing column (all named), a bad row or no row with gamma >= 1 (as
            :func:`step_log_arrays`).
    """
    arr = step_log_arrays(df)
    conf, labels, known = arr["conf_raw"], arr["labels"], arr["known"]
    fit = split_by_request(arr["request_id"])
    warnings = []
    # a request's last step verifies at most its remaining output - 1 drafts in any run: not the policy's choice
    steps = pd.DataFrame({"r": arr["request_id"], "s": arr["step"]})
    last = (steps.groupby("r").s.transform("max") == steps.s).to_numpy()
    censored = float((arr["censored"] & ~last).mean())
    if censored > adaptive_warn_fraction:
        warnings.append(
            f"{censored:.1%} of rows verified fewer drafts than proposed without a rejection (a request's last "
            "step not counted): this log looks like an adaptive-length run; its labels are missing not at random "
            "and bias the fit. Calibrate on runs that verify every drafted position (static full-gamma).")
    temps = fit_sts(conf[fit], labels[fit], known[fit], n_bins)
    ev = ~fit
    raw = position_metrics(conf[ev], labels[ev], known[ev], n_bins)
    sts = position_metrics(apply_temperatures(conf[ev], temps), labels[ev], known[ev], n_bins)
    metrics = pd.DataFrame({"position": raw["position"], "n_fit": known[fit].sum(axis=0),
                            "n_eval": raw["n"], "accept_rate": raw["accept_rate"],
                            "temperature": temps})
    for name in ("mean_pred", "ece", "auroc", "brier"):
        metrics[f"{name}_raw"] = raw[name]
        metrics[f"{name}_sts"] = sts[name]
    for k in np.flatnonzero((metrics["n_fit"] == 0) | (metrics["n_eval"] == 0)):
        warnings.append(f"position {k + 1}: no labelled rows in the fit or evaluation split")
    warnings += failure_warnings(metrics, survival(apply_temperatures(conf[ev], temps)), labels[ev], known[ev],
                                 n_bins)
    if warn_to_stderr:
        for w in warnings:
            print(f"specsim calibrate: warning: {w}", file=sys.stderr)
    return CalibrationReport(temps, metrics, int(conf.shape[0]), censored, warnings,
                             source=list(source or []), n_bins=n_bins)


def load_temperatures(path: str | Path, gamma: int | None = None) -> np.ndarray:
    """Read the ``temperatures`` list of a ``specsim calibrate`` temperatures.json (for scenarios).

    Args:
        path: the file.
        gamma: the run's draft positions, when known: the file must hold at least as many temperatures (the
            first ``gamma`` are used).

    Returns:
        (n,) positive temperatures, all of the file's.

    Raises:
        SpecsimInputError: unreadable JSON, missing key, a value that is not a positive number, or fewer
            temperatures than ``gamma`` (naming the file).
    """
    try:
        data = json.loads(Path(path).read_text())
        temps = np.asarray(data["temperatures"], dtype=float).ravel()
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SpecsimInputError(str(path), None, "temperatures", "a temperatures.json written by "
                                "specsim calibrate", f"{type(e).__name__}: {str(e)[:60]}") from None
    if temps.size == 0 or not np.all(np.isfinite(temps) & (temps > 0)):
        raise SpecsimInputError(str(path), None, "temperatures", "a non-empty list of positive numbers",
                                str(temps.tolist()))
    if gamma is not None and temps.size < gamma:
        raise SpecsimInputError(str(path), None, "temperatures", f"{gamma} positive temperatures, one per draft "
                                f"position of the run (gamma {gamma}; calibrate a log of at least that gamma)",
                                f"{temps.size}: {temps.tolist()}")
    return temps
