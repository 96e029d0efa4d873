"""Acceptance models fitted from step logs (format: :mod:`specsim.acceptance.steplog`): empirical and parametric.

Both plug into ``specsim run`` through the scenario (``[acceptance] model = "empirical:DIR"`` or
``"fitted:DIR"``, DIR written by ``specsim fit``) and implement the engine's acceptance API
(:class:`specsim.acceptance.model.AcceptanceModel`: ``draw_request``, ``confidences``, ``accepted``, ``alpha``...).

:func:`resolve_acceptance_model` builds whichever model a scenario's ``[acceptance]`` names (the latent
model of :mod:`specsim.acceptance.model` or one of these two); it lives here because only this module knows
every kind, and the dependency points one way (fitting -> acceptance).

* Empirical (:class:`EmpiricalAcceptanceModel`): replays real blocks. Only *fully labelled* rows are used
  (a rejection happened, or every drafted position was verified); each simulated request replays the
  blocks of logged requests of its domain, drawn with replacement (bootstrap by domain, whole requests so
  that request-level difficulty is kept). Rows of the draws are anchors: logged block j is laid over its
  own emitted tokens (accepted + 1 rows), so a full-verify replay of one logged request follows it step
  for step. Confidences are the logged raw ones; calibrated ones are STS on the log.
* Parametric (:func:`fit_parametric`): the latent model of :mod:`specsim.acceptance.model`. Per domain the
  pooled conditional rates alpha_k = (# accepted at k) / (# reached k) over labelled rows; the latent
  spreads and confidence distortion by simulated moments: the per-position mean and spread of
  logit(c_raw), its correlation across positions of a step and across steps of a request, and per position
  the accepted rate among reached drafts and the share of them in five bins of raw confidence (the log's
  quantiles), weighed by their bootstrap errors and matched by Nelder-Mead on a simulation with fixed random
  numbers; STS temperatures from :func:`specsim.acceptance.calibration.fit_sts`. :func:`calibration_check`
  compares the held-out ECE of the log and of the fitted model (``specsim fit`` prints it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import expit, logit

from specsim.acceptance.model import AcceptanceModel, RequestDraws, build_acceptance_model, implied_tau
from specsim.acceptance.calibration import (apply_temperatures, ece_floor, fit_sts, load_temperatures, position_metrics,
                                            split_by_request, step_log_arrays, survival)
from specsim.acceptance.steplog import FIT_COLUMNS, check_columns, row_order
from specsim.errors import SpecsimInputError
from specsim.scenario import LATENT_DEFAULTS

_BIG = np.float32(20.0)            # |logit| of a replayed outcome: sigmoid(+-20) is 1 or 0 against u = 0.5
_CONF_CLIP = 1e-6
FIT_PARAMS = tuple(LATENT_DEFAULTS)          # every latent and confidence parameter is fitted
_START = dict(LATENT_DEFAULTS)                # the tuned defaults start the search
_EMPIRICAL_CACHE: dict = {}      # (dir, gamma, temperatures, calibration) -> model, like the lru_cache of tables
_NUM_CONF_BINS = 5               # raw-confidence bins (quantiles of the log's) of the calibration moments, per position


# ------------------------------------------------------------------------------------------ log arrays

@dataclass
class LoggedBlocks:
    """Fully labelled blocks of a step log, grouped by request.

    Attributes:
        gamma: drafted positions G (the log's maximum; rows with fewer are dropped).
        domain, request: (N,) str per block; blocks of a request are contiguous and in step order.
        accept: (N, G) bool, draft k accepted given its prefix; False after the first rejection.
        conf_raw: (N, G) float raw confidences.
        num_dropped: rows dropped (censored or shorter gamma).
    """

    gamma: int
    domain: np.ndarray
    request: np.ndarray
    accept: np.ndarray
    conf_raw: np.ndarray
    num_dropped: int = 0

    @property
    def num_accepted(self) -> np.ndarray:
        """(N,) accepted prefix length of each block."""
        return np.cumprod(self.accept, axis=1).sum(axis=1)

    def rates(self) -> dict[str, tuple[float, ...]]:
        """Pooled conditional rates per domain: accepted at k / reached k (k = 1..G)."""
        out = {}
        for dom in np.unique(self.domain):
            m = self.domain == dom
            lab = np.cumprod(self.accept[m], axis=1)               # (n, G) prefix accepted through k
            reached = np.concatenate([np.ones((lab.shape[0], 1)), lab[:, :-1]], axis=1).sum(axis=0)
            acc = lab.sum(axis=0)
            r = np.clip(acc / np.maximum(reached, 1), 1e-4, 1 - 1e-4)
            out[str(dom)] = tuple(float(x) for x in r)
        return out


def logged_blocks(df: pd.DataFrame) -> LoggedBlocks:
    """Extract fully labelled blocks from a step log (rows with gamma = G, label known at every position).

    Only ``FIT_COLUMNS`` of :mod:`specsim.acceptance.steplog` are required; ``step`` and ``replica`` order a
    request's rows where present (the frame's order otherwise).

    Raises:
        SpecsimInputError: a missing column (all named) or a bad row (as
            :func:`specsim.acceptance.calibration.step_log_arrays`), no row with gamma >= 1, or no fully labelled row.
    """
    check_columns(df, "df", FIT_COLUMNS)
    arr = step_log_arrays(df)
    drafted = df["gamma"].to_numpy() > 0
    sub = df[drafted]
    g = arr["gamma_max"]
    full = arr["known"].all(axis=1) & (sub["gamma"].to_numpy() == g)
    if not full.any():
        raise SpecsimInputError(None, None, "verify_len", "rows that verified every drafted position or had "
                                "a rejection (fully labelled blocks)", "none")
    lab = arr["labels"][full]
    prev = np.concatenate([np.ones((lab.shape[0], 1), bool), lab[:, :-1]], axis=1)
    accept = lab & prev                                            # (N, G) accepted given prefix
    sel = sub[full]
    replica = sel["replica"].to_numpy() if "replica" in sel.columns else np.zeros(len(sel), np.int64)
    order = np.lexsort((row_order(df)[drafted][full], replica, sel["request_id"].astype(str).to_numpy()))
    return LoggedBlocks(g, sel["domain"].astype(str).to_numpy()[order],
                        sel["request_id"].astype(str).to_numpy()[order], accept[order],
                        arr["conf_raw"][full][order], int((~full).sum()))


# ------------------------------------------------------------------------------------------ empirical

@dataclass(eq=False)
class EmpiricalAcceptanceModel:
    """Replays logged blocks (see the module docstring); same API as :class:`AcceptanceModel`.

    Args:
        blocks: fully labelled logged blocks.
        gamma: block length of the run (<= blocks.gamma).
        temperatures: (>= gamma,) STS temperatures; None = fitted on the blocks.
        calibration: "sts" or "none".
        source: provenance.

    Raises:
        SpecsimInputError: gamma beyond the logged block length.
    """

    blocks: LoggedBlocks
    gamma: int
    temperatures: tuple[float, ...] | None = None
    calibration: str = "sts"
    source: str = "step log"
    drafter: str = "logged"
    alpha: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gamma > self.blocks.gamma:
            raise SpecsimInputError(self.source, None, "gamma", f"gamma <= {self.blocks.gamma}, the logged block "
                                    "length", str(self.gamma))
        g = self.gamma
        self.alpha = {d: r[:g] for d, r in self.blocks.rates().items()}
        if self.calibration == "none":
            temps = np.ones(g)
        elif self.temperatures is not None:
            temps = np.asarray(self.temperatures, float)[:g]
        else:
            lab = np.cumprod(self.blocks.accept[:, :g], axis=1).astype(bool)
            temps = fit_sts(self.blocks.conf_raw[:, :g], lab)
        self._inv_t = 1.0 / temps
        # per domain: the requests' block ranges and each block's row span (emitted tokens)
        self._by_domain = {}
        emitted = np.minimum(self.blocks.num_accepted, g) + 1
        for dom in self.alpha:
            idx = np.flatnonzero(self.blocks.domain == dom)
            req = self.blocks.request[idx]
            starts = np.flatnonzero(np.r_[True, req[1:] != req[:-1]])
            self._by_domain[dom] = (idx, starts, np.r_[starts[1:], idx.size], emitted[idx])
        lq = np.where(self.blocks.accept[:, :g], _BIG, -_BIG).astype(np.float32)
        conf = np.clip(self.blocks.conf_raw[:, :g], _CONF_CLIP, 1 - _CONF_CLIP)
        self._lq, self._noise = lq, logit(conf).astype(np.float32)

    @property
    def domains(self) -> list[str]:
        """Domains present in the log."""
        return sorted(self.alpha)

    def check_domain(self, domain: str) -> None:
        """Raise SpecsimInputError when ``domain`` is not in the log."""
        if domain not in self.alpha:
            raise SpecsimInputError(self.source, None, "domain", f"a domain of the logged blocks {self.domains}",
                                    repr(domain))

    def implied_tau(self, domain: str) -> float:
        """1 + sum_j prod_{i<=j} alpha_i of the logged pooled rates (a full block of gamma)."""
        return implied_tau(self.alpha[domain])

    def draw_request(self, rng: np.random.Generator, domain: str, num_positions: int) -> RequestDraws:
        """Rows for ``num_positions`` anchors: logged requests of ``domain`` drawn with replacement, each block
        laid over its emitted tokens. Returns RequestDraws (P, gamma) float32 (u = 0.5, outcomes in logit_q)."""
        self.check_domain(domain)
        idx, starts, ends, emitted = self._by_domain[domain]
        rows = []
        filled = 0
        while filled < num_positions:
            j = int(rng.integers(starts.size))
            span = np.arange(starts[j], ends[j])                       # this request's blocks, in order
            rep = np.repeat(idx[span], emitted[span])                  # one row per emitted token
            rows.append(rep)
            filled += rep.size
        rows = np.concatenate(rows)[:num_positions]
        u = np.full((num_positions, self.gamma), 0.5, dtype=np.float32)
        return RequestDraws(logit_q=self._lq[rows], u=u, noise=self._noise[rows])

    def confidences(self, logit_q: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Logged raw confidences (noise holds their logits) and their STS-calibrated values."""
        lin = noise.astype(np.float64)
        return expit(lin), expit(lin * self._inv_t)

    accepted = staticmethod(AcceptanceModel.accepted)

    @property
    def sts_temperatures(self) -> np.ndarray:
        """(gamma,) temperatures in use."""
        return 1.0 / self._inv_t


# ------------------------------------------------------------------------------------------ parametric

def _conf_edges(blocks: LoggedBlocks, num_bins: int = _NUM_CONF_BINS) -> np.ndarray:
    """Edges of the calibration moments' raw-confidence bins: quantiles of the log's reached confidences (every
    bin holds a like share of the drafts, where the 0.9-1 bin of fixed edges held most of an overconfident head's)."""
    lab = np.cumprod(blocks.accept, axis=1)
    reached = np.concatenate([np.ones((lab.shape[0], 1), bool), lab[:, :-1].astype(bool)], axis=1)
    edges = np.quantile(blocks.conf_raw[reached], np.linspace(0.0, 1.0, num_bins + 1))
    edges[0], edges[-1] = -np.inf, np.inf
    return edges


def _moments(accept: np.ndarray, conf_raw: np.ndarray, request: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Moment vector of (N, G) blocks: per-position mean and sd of logit(c), adjacent-position correlation,
    request intra-class correlation of the block-mean logit, and per position and raw-confidence bin (``edges``)
    the accepted rate among reached drafts and the bin's share of them. ``accept`` may be bool outcomes or (the
    simulation's) acceptance probabilities: rates then are expected ones, smooth in the parameters."""
    y = logit(np.clip(conf_raw, _CONF_CLIP, 1 - _CONF_CLIP))           # (N, G)
    mean, sd = y.mean(axis=0), y.std(axis=0)
    z = (y - mean) / np.where(sd > 0, sd, 1)
    adj = float(np.mean(z[:, 1:] * z[:, :-1])) if y.shape[1] > 1 else 0.0
    bm = y.mean(axis=1)
    _, inv = np.unique(request, return_inverse=True)
    rmean = np.bincount(inv, weights=bm) / np.bincount(inv)
    icc = float(np.var(rmean[inv]) / max(np.var(bm), 1e-12))
    lab = np.cumprod(accept, axis=1, dtype=float)                       # (N, G) prefix accepted through k
    reached = np.concatenate([np.ones((lab.shape[0], 1)), lab[:, :-1]], axis=1)
    nb, g = edges.size - 1, y.shape[1]
    b = (np.digitize(conf_raw, edges) - 1 + nb * np.arange(g)[None, :]).ravel()      # (N * G,) position-bin
    num = np.bincount(b, weights=lab.ravel(), minlength=nb * g)
    den = np.bincount(b, weights=reached.ravel(), minlength=nb * g)
    rate = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    share = den / np.repeat(np.maximum(reached.sum(axis=0), 1e-12), nb)
    return np.concatenate([mean, sd, [adj, icc], rate, share])


def _moment_se(blocks: LoggedBlocks, edges: np.ndarray, seed: int, draws: int = 40) -> np.ndarray:
    """(M,) standard errors of the log's moments: their spread over ``draws`` bootstrap resamples of whole requests."""
    _, inv = np.unique(blocks.request, return_inverse=True)
    order = np.argsort(inv, kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(inv))]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        pick = rng.integers(starts.size - 1, size=starts.size - 1)
        rows = np.concatenate([order[starts[i]:starts[i + 1]] for i in pick])
        req = np.repeat(np.arange(pick.size), np.diff(starts)[pick])
        out.append(_moments(blocks.accept[rows], blocks.conf_raw[rows], req, edges))
    return np.std(out, axis=0)


def _simulate_like(params: dict, rates: dict, blocks: LoggedBlocks, seed: int, expected: bool = False):
    """Blocks from the latent model with ``params`` and the log's domains and request structure: (accept, conf),
    accept bool outcomes, or with ``expected`` each draft's acceptance probability sigmoid(x) (no draws)."""
    g = blocks.gamma
    model = AcceptanceModel("fit", rates, g, calibration="none", **params)
    rng = np.random.default_rng(seed)
    accept = np.zeros(blocks.accept.shape, float if expected else bool)
    conf = np.zeros(blocks.conf_raw.shape)
    _, inv, cnt = np.unique(blocks.request, return_inverse=True, return_counts=True)
    # (N,) request latent, drawn as steps weight requests (1 / tau(z), like the logged blocks), per domain
    z_req = np.zeros(cnt.size)
    for dom in rates:
        reqs = np.unique(inv[blocks.domain == dom])
        z_req[reqs] = model.step_weighted_z(dom, reqs.size, rng)
    z = z_req[inv]
    e = rng.standard_normal(inv.size) * params["sigma_step"]
    eps = rng.standard_normal((inv.size, g)) * params["sigma_token"]
    n = rng.standard_normal((inv.size, g)) * params["sigma_conf"]
    u = rng.random((inv.size, g))
    for dom in rates:
        m = blocks.domain == dom
        x = model.beta(dom)[None, :] + (z[m] + e[m])[:, None] + eps[m]
        accept[m] = expit(x) if expected else u[m] < expit(x)
        conf[m] = expit(model.raw_logit(x, n[m]))
    return accept, conf


def _data_start(blocks: LoggedBlocks) -> dict:
    """A start for the moment fit read off the log (ignoring the low-end compression): per head (position 1,
    positions >= 2) a logistic regression of acceptance on logit(c) among reached drafts gives scale 1 / slope
    and shift; the latent x = (logit(c) - shift) / scale then splits its variance into request (between requests'
    mean), step (shared across a block's positions) and the rest, halved between token and confidence noise."""
    y = logit(np.clip(blocks.conf_raw, _CONF_CLIP, 1 - _CONF_CLIP))   # (N, G)
    lab = np.cumprod(blocks.accept, axis=1)
    reached = np.concatenate([np.ones((lab.shape[0], 1), bool), lab[:, :-1].astype(bool)], axis=1)
    heads = []
    for cols in (slice(0, 1), slice(1, None)):
        yy, aa = y[:, cols][reached[:, cols]], blocks.accept[:, cols][reached[:, cols]]
        x, w = np.c_[np.ones(yy.size), yy], np.zeros(2)
        for _ in range(25):                                            # Newton steps, lightly regularised
            p = expit(x @ w)
            w += np.linalg.solve(x.T @ (x * (p * (1 - p))[:, None]) + 1e-6 * np.eye(2), x.T @ (aa - p))
        scale = float(np.clip(1.0 / max(w[1], 0.25), 0.3, 4.0)) if yy.size and np.all(np.isfinite(w)) else 1.0
        heads.append((scale, float(np.clip(-w[0] * scale, -3, 3)) if np.isfinite(w[0]) else 0.0))
    (s1, h1), (s2, h2) = heads if y.shape[1] > 1 else heads[:1] * 2
    x = (y - np.r_[h1, [h2] * (y.shape[1] - 1)]) / np.r_[s1, [s2] * (y.shape[1] - 1)]
    xc = x - x.mean(axis=0)
    _, inv = np.unique(blocks.request, return_inverse=True)
    cnt = np.bincount(inv)
    bm = xc.mean(axis=1)
    rmean = np.bincount(inv, weights=bm) / cnt
    var_r = max(np.var(rmean[cnt > 1]) - np.mean((bm - rmean[inv]) ** 2) / cnt.mean() if np.any(cnt > 1) else 0, 0.01)
    g = y.shape[1]
    cross = float((xc.sum(axis=1) ** 2 - (xc ** 2).sum(axis=1)).mean() / (g * (g - 1))) if g > 1 else var_r
    rest = max(float(xc.var(axis=0).mean()) - cross, 0.02)
    return {"sigma_request": np.sqrt(var_r), "sigma_step": np.sqrt(max(cross - var_r, 0.01)),
            "sigma_token": np.sqrt(rest / 2), "sigma_conf": np.sqrt(rest / 2), "conf_scale": s1, "conf_shift": h1,
            "conf_scale_later": s2, "conf_shift_later": h2, "conf_low_ratio": 1.0}


def _subset_requests(blocks: LoggedBlocks, max_blocks: int, seed: int) -> LoggedBlocks:
    """Whole requests drawn at random until about ``max_blocks`` blocks (all when fewer)."""
    if blocks.accept.shape[0] <= max_blocks:
        return blocks
    codes, inv = np.unique(blocks.request, return_inverse=True)
    order = np.random.default_rng(seed).permutation(codes.size)
    cnt = np.bincount(inv)[order]
    keep_req = order[: max(1, int(np.searchsorted(np.cumsum(cnt), max_blocks)))]
    m = np.isin(inv, keep_req)
    return LoggedBlocks(blocks.gamma, blocks.domain[m], blocks.request[m], blocks.accept[m], blocks.conf_raw[m])


def fit_parametric(blocks: LoggedBlocks, max_evals: int = 400, seed: int = 0, max_blocks: int = 16_000) -> dict:
    """Fit the latent model to logged blocks: rates exactly, spreads and distortion by simulated moments.

    The objective is sum_m ((simulated_m - log_m) / se_m)^2 over :func:`_moments`, se_m the moment's bootstrap
    standard error over the log's requests inflated for the simulation's own noise (so the request and step
    structure, measured precisely, counts as much as the calibration rates); the simulation gives expected
    acceptance (smooth in the parameters). Nelder-Mead starts from the better of the tuned defaults and
    :func:`_data_start`, restarted from its result while that gains over 1%, within ``max_evals``.

    Args:
        blocks: fully labelled blocks (:func:`logged_blocks`).
        max_evals: objective evaluations.
        seed: of the fixed simulation draws and the bootstrap.
        max_blocks: the simulation reproduces at most this many blocks (whole requests), for speed; the
            target moments use every block.

    Returns:
        {"alpha": {domain: rates}, "params": {FIT_PARAMS...}, "temperatures": [...], "moments_log": [...],
         "moments_fit": [...], "moments_se": [...], "objective": float, "evaluations": int}.
    """
    rates = blocks.rates()
    sim = _subset_requests(blocks, max_blocks, seed)
    edges = _conf_edges(blocks)
    target = _moments(blocks.accept, blocks.conf_raw, blocks.request, edges)
    se = _moment_se(blocks, edges, seed)
    weight = 1.0 / np.maximum(se * np.sqrt(1.0 + blocks.accept.shape[0] / sim.accept.shape[0]), 1e-3)
    logs = ("sigma_request", "sigma_step", "sigma_token", "sigma_conf", "conf_scale", "conf_scale_later",
            "conf_low_ratio")
    evals = [0]

    def unpack(x):
        return {k: float(np.exp(v)) if k in logs else float(v) for k, v in zip(FIT_PARAMS, x)}

    def objective(x):
        evals[0] += 1
        p = unpack(x)
        if max(p["sigma_request"], p["sigma_step"], p["sigma_token"], p["sigma_conf"]) > 5:
            return 1e6
        acc, conf = _simulate_like(p, rates, sim, seed, expected=True)
        return float(np.sum(((_moments(acc, conf, sim.request, edges) - target) * weight) ** 2))

    from scipy.optimize import minimize           # imported on first use (not on the run path)

    starts = [np.array([np.log(max(v, 1e-3)) if k in logs else v for k, v in p.items()])
              for p in (_START, _data_start(blocks))]
    values = [objective(x) for x in starts]
    x, best = starts[int(np.argmin(values))], min(values)
    while evals[0] < max_evals:
        res = minimize(objective, x, method="Nelder-Mead", options={
            "maxfev": max_evals - evals[0], "xatol": 1e-3, "fatol": 1e-4, "adaptive": True})
        gain, x, best = best - res.fun, res.x, min(best, float(res.fun))
        if gain <= 0.01 * best:
            break
    params = unpack(x)
    acc, conf = _simulate_like(params, rates, sim, seed, expected=True)
    lab = np.cumprod(blocks.accept, axis=1).astype(bool)
    temps = fit_sts(blocks.conf_raw, lab)
    return {"alpha": {d: list(r) for d, r in rates.items()}, "params": params,
            "temperatures": [float(t) for t in temps], "objective": best, "evaluations": evals[0],
            "moments_log": target.tolist(), "moments_fit": _moments(acc, conf, sim.request, edges).tolist(),
            "moments_se": se.tolist()}


def calibration_check(blocks: LoggedBlocks, params: dict, rates: dict, seed: int = 1) -> dict:
    """Goodness of fit on the confidence side: per position, the held-out ECE of the cumulative survival, raw and
    after STS, of the log and of blocks simulated from the fitted model with the log's domains and requests (the
    same size, so the same sampling noise), each split by request and calibrated on one half as
    ``specsim calibrate`` does.

    Args:
        blocks: the logged blocks; params, rates: the fitted latent parameters and rates; seed: of the simulation.

    Returns:
        {"ece_raw_log", "ece_sts_log", "ece_raw_fit", "ece_sts_fit", "ece_floor", "differs"}: lists over positions,
        ECE as fractions; ``ece_floor`` the ECE a calibrated head shows at the log's size from sampling alone
        (:func:`specsim.acceptance.calibration.ece_floor` of the log's held-out calibrated survival); ``differs``
        True where raw or STS ECE of log and fit part by more than 1 point and twice the floor.
    """
    fit = split_by_request(blocks.request)

    def held_out(accept: np.ndarray, conf: np.ndarray):
        lab = np.cumprod(accept, axis=1).astype(bool)
        cal = apply_temperatures(conf[~fit], fit_sts(conf[fit], lab[fit]))
        known = np.ones_like(lab[~fit])
        return (position_metrics(conf[~fit], lab[~fit], known)["ece"].to_numpy(),
                position_metrics(cal, lab[~fit], known)["ece"].to_numpy(), survival(cal))

    raw_log, sts_log, surv = held_out(blocks.accept, blocks.conf_raw)
    raw_fit, sts_fit, _ = held_out(*_simulate_like(params, rates, blocks, seed))
    floor = np.array([ece_floor(surv[:, k]) for k in range(blocks.gamma)])
    tol = np.maximum(0.01, 2 * floor)
    differs = (np.abs(raw_fit - raw_log) > tol) | (np.abs(sts_fit - sts_log) > tol)
    return {"ece_raw_log": raw_log.tolist(), "ece_sts_log": sts_log.tolist(), "ece_raw_fit": raw_fit.tolist(),
            "ece_sts_fit": sts_fit.tolist(), "ece_floor": floor.tolist(), "differs": differs.tolist()}


# ------------------------------------------------------------------------------------------ files

def write_fit(df: pd.DataFrame, out: str | Path, source: list[str] | None = None, max_evals: int = 400) -> dict:
    """``specsim fit``: write DIR/model.json (parametric, with its :func:`calibration_check`), DIR/blocks.parquet
    (empirical), return model.json.

    Raises:
        SpecsimInputError: no usable rows.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    blocks = logged_blocks(df)
    fit = fit_parametric(blocks, max_evals=max_evals)
    g = blocks.gamma
    pd.DataFrame({"request_id": blocks.request, "domain": blocks.domain,
                  "accept": list(blocks.accept.astype(bool)), "conf_raw": list(blocks.conf_raw)}).to_parquet(
        out / "blocks.parquet", index=False)
    fit["calibration_check"] = calibration_check(blocks, fit["params"], blocks.rates())
    fit.update({"kind": "specsim fitted acceptance model", "gamma": g, "source": list(source or []),
                "num_blocks": int(blocks.accept.shape[0]), "num_dropped_rows": blocks.num_dropped,
                "num_requests": int(np.unique(blocks.request).size),
                "implied_tau": {d: implied_tau(r) for d, r in fit["alpha"].items()}})
    (out / "model.json").write_text(json.dumps(fit, indent=1) + "\n")
    return fit


def _read_blocks(path: Path) -> LoggedBlocks:
    df = pd.read_parquet(path)
    acc = np.stack(df["accept"].to_numpy()).astype(bool)
    return LoggedBlocks(acc.shape[1], df["domain"].astype(str).to_numpy(), df["request_id"].astype(str).to_numpy(),
                        acc, np.stack(df["conf_raw"].to_numpy()).astype(float))


def load_fitted_model(spec: str, drafter: str, gamma: int, temperatures: tuple | None = None,
                      calibration: str = "sts"):
    """The model named by ``fitted:DIR`` (parametric, DIR/model.json) or ``empirical:DIR`` (DIR/blocks.parquet).

    Explicit ``temperatures`` (a scenario's temperatures.json) replace the fitted ones.

    Raises:
        SpecsimInputError: bad spec, missing or unreadable files, gamma beyond the fitted block length.
    """
    kind, _, d = spec.partition(":")
    path = Path(d)
    try:
        fit = json.loads((path / "model.json").read_text())
    except (OSError, ValueError) as e:
        why = ("no such file" if isinstance(e, FileNotFoundError) else "unreadable" if isinstance(e, OSError)
               else f"not JSON ({str(e)[:60]})")
        raise SpecsimInputError(str(path / "model.json"), None, "acceptance.model",
                                "a directory written by specsim fit (its model.json)", f"{spec!r}: {why}") from None
    temps = temperatures if temperatures is not None else tuple(fit["temperatures"])
    src = f"{kind}:{path}"
    if kind == "empirical":
        key = (str(path), gamma, temps, calibration)
        if key not in _EMPIRICAL_CACHE:
            try:
                blocks = _read_blocks(path / "blocks.parquet")
            except (OSError, ValueError, KeyError) as e:
                raise SpecsimInputError(str(path / "blocks.parquet"), None, "acceptance.model",
                                        "blocks written by specsim fit", f"{type(e).__name__}: {str(e)[:60]}") from None
            _EMPIRICAL_CACHE[key] = EmpiricalAcceptanceModel(blocks, gamma, temps, calibration, source=src)
        return _EMPIRICAL_CACHE[key]
    if kind != "fitted":
        raise SpecsimInputError(None, None, "acceptance.model", "'fitted:DIR' or 'empirical:DIR'", repr(spec))
    alpha = {d: tuple(r) for d, r in fit["alpha"].items()}
    return AcceptanceModel(drafter, alpha, gamma, temperatures=temps, calibration=calibration, source=src,
                           **{k: float(v) for k, v in fit["params"].items() if k in FIT_PARAMS})


def resolve_acceptance_model(drafter: str, gamma: int, model: str = "", temperatures: str = "",
                             calibration: str = "sts", **acceptance: Any):
    """The acceptance model a scenario's ``[acceptance]`` section names (pass its fields as keywords).

    Args:
        drafter: the drafter family (dspark, dflash, eagle3, mtp).
        gamma: block length.
        model: "" (the latent model, :func:`specsim.acceptance.model.build_acceptance_model`), ``fitted:DIR`` (a
            ``specsim fit`` parametric model: rates, latent and confidence parameters, temperatures from
            DIR/model.json) or ``empirical:DIR`` (replay of logged blocks, :class:`EmpiricalAcceptanceModel`).
        temperatures: "" or a ``specsim calibrate`` temperatures.json (replaces fitted temperatures).
        calibration: "sts" or "none".
        acceptance: the other ``[acceptance]`` fields (table, rates, constant_alpha, domains, latent
            parameters), used by the latent model.

    Returns:
        An :class:`specsim.acceptance.model.AcceptanceModel` or an :class:`EmpiricalAcceptanceModel`.

    Raises:
        SpecsimInputError: see :func:`specsim.acceptance.model.build_acceptance_model` and :func:`load_fitted_model`.
    """
    if not model:
        return build_acceptance_model(drafter, gamma, temperatures=temperatures, calibration=calibration,
                                      **acceptance)
    temps = tuple(float(t) for t in load_temperatures(temperatures, gamma)) if temperatures else None
    return load_fitted_model(model, drafter, gamma, temperatures=temps, calibration=calibration)
