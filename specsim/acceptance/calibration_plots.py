"""Figures of calibration: reliability diagrams and survival histograms, raw vs calibrated, one panel per
draft position (``specsim calibrate``'s reliability.png and survival_hist.png; metrics in
:mod:`specsim.acceptance.calibration`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specsim.acceptance.calibration import N_BINS, reliability, survival


def plot_reliability(conf_raw: np.ndarray, conf_cal: np.ndarray, labels: np.ndarray, known: np.ndarray,
                     path: str | Path, n_bins: int = N_BINS) -> None:
    """Reliability diagrams of the cumulative survival, raw vs calibrated, one panel per position (PNG)."""
    from specsim import figures

    gamma = conf_raw.shape[1]
    ncols = min(gamma, 4)
    nrows = -(-gamma // ncols)
    fig, axes = figures.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.2 * nrows), squeeze=False)
    for k, ax in enumerate(axes.ravel()):
        if k >= gamma:
            ax.axis("off")
            continue
        m = known[:, k]
        ax.plot([0, 1], [0, 1], color="0.6", lw=0.8, ls="--")
        for conf, name, color in ((conf_raw, "raw", "tab:red"), (conf_cal, "STS", "tab:blue")):
            a = survival(np.nan_to_num(conf, nan=0.0))[m, k]
            r = reliability(a, labels[m, k], n_bins)
            ok = r.counts > 0
            ax.plot(r.mean_pred[ok], r.observed[ok], marker="o", ms=3, color=color,
                    label=f"{name} ECE {100 * r.ece:.1f}%")
        ax.set(title=f"position {k + 1}", xlim=(0, 1), ylim=(0, 1), xlabel="predicted survival",
               ylabel="observed prefix acceptance")
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_survival_hist(conf_raw: np.ndarray, conf_cal: np.ndarray, known: np.ndarray, path: str | Path,
                       n_bins: int = N_BINS) -> None:
    """Histograms of predicted survival per position, raw vs calibrated (the paper's Fig. 6 insets; PNG)."""
    from specsim import figures

    gamma = conf_raw.shape[1]
    ncols = min(gamma, 4)
    nrows = -(-gamma // ncols)
    fig, axes = figures.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.6 * nrows), squeeze=False)
    edges = np.linspace(0, 1, n_bins + 1)
    for k, ax in enumerate(axes.ravel()):
        if k >= gamma:
            ax.axis("off")
            continue
        m = known[:, k]
        for conf, name, color in ((conf_raw, "raw", "tab:red"), (conf_cal, "STS", "tab:blue")):
            a = survival(np.nan_to_num(conf, nan=0.0))[m, k]
            w = np.full(a.size, 1.0 / max(a.size, 1))
            ax.hist(a, bins=edges, weights=w, histtype="step", color=color, label=name)
        ax.set(title=f"position {k + 1}", xlim=(0, 1), xlabel="predicted survival", ylabel="share")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
