"""Per-position acceptance models with confidence signals (DESIGN.md; PAPER.md sections 3, 4, 8.2).

A model holds, per drafter and domain, the pooled per-position conditional acceptance rates
alpha_k = P(draft k accepted | drafts 1..k-1 accepted), k = 1..gamma_max, as the paper's Fig. 2 reports
them (pooled over requests). Requests and steps differ through latent difficulty on the logit scale:

    q[p, k] = sigmoid(beta_k + z_r + e_p + eps_{p,k}),   z_r ~ N(0, sigma_request^2),
              e_p ~ N(0, sigma_step^2),  eps_{p,k} ~ N(0, sigma_token^2)

where p is the anchor (output position) of the step and k the draft depth. The offsets beta_k are
solved left to right so that the pooled conditional rate E[prod_{i<=k} q_i] / E[prod_{i<k} q_i] equals
alpha_k exactly on a fixed Monte Carlo sample. Draft k anchored at p is accepted iff u[p, k] < q[p, k].

Each draft carries a raw confidence (informative, imperfect, overconfident like the paper's raw head):

    logit(c_raw) = conf_scale * (logit(q) + n) + conf_shift,   n ~ N(0, sigma_conf^2)

and a calibrated one: a monotone per-position map of c_raw (isotonic regression of the conditional outcome
on c_raw), fitted once on a separate sample when the model is built; never the latent q itself.

Common random numbers: :meth:`AcceptanceModel.draw_request` takes a generator seeded from
``SeedSequence([seed, request_index])`` and draws everything the request will ever need, so every policy
faces the same realisations and they stay hidden until verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.optimize import brentq, isotonic_regression
from scipy.special import expit, logit

from specsim.errors import SpecsimInputError

# Fig. 2 of the paper (Qwen3-4B, gamma 7): pooled per-position conditional acceptance, PAPER.md 8.2.
FIG2_ALPHA: dict[str, dict[str, tuple[float, ...]]] = {
    "dspark": {
        "math": (.905, .890, .888, .885, .887, .891, .882),
        "code": (.886, .872, .860, .861, .858, .859, .851),
        "chat": (.735, .738, .740, .744, .758, .766, .761),
    },
    "dflash": {
        "math": (.885, .827, .820, .834, .841, .839, .828),
        "code": (.865, .815, .797, .801, .810, .801, .777),
        "chat": (.718, .648, .638, .661, .682, .692, .688),
    },
    "eagle3": {
        "math": (.811, .823, .838, .844, .851, .856, .850),
        "code": (.771, .774, .781, .791, .787, .794, .784),
        "chat": (.534, .589, .642, .678, .709, .729, .733),
    },
    # DeepSeek-V3 technical report: second-token (MTP-1 draft) acceptance 85-90%; we take the midpoint.
    "mtp": {"math": (.875,), "code": (.875,), "chat": (.875,)},
}

# A fixed seed for building a model (the beta solve and the calibration map): the model is part of the
# scenario, not of the run, so it must not change with the run seed.
_MODEL_SEED = 20260412
_CALIB_BINS = 4096  # resolution of the tabulated calibration map over raw confidence in [0, 1]


@dataclass(frozen=True)
class RequestDraws:
    """Everything drawn for one request at admission; rows are anchors p = 0..P-1, columns depths k.

    Acceptance and confidences are deterministic functions of these draws (see
    :meth:`AcceptanceModel.outcomes`), evaluated only for the rows a step touches.

    Attributes:
        logit_q: (P, gamma) float32 latent logit of the acceptance probability, beta_k + z_r + e_p + eps_{p,k}.
        u: (P, gamma) float32 uniforms; draft k anchored at p is accepted iff u < sigmoid(logit_q).
        noise: (P, gamma) float32 confidence noise n (logit scale).
    """

    logit_q: np.ndarray
    u: np.ndarray
    noise: np.ndarray


@dataclass(frozen=True, eq=False)
class AcceptanceModel:
    """Latent-difficulty acceptance model for one drafter (see module docstring).

    Args:
        drafter: drafter name (a key of the rate table).
        alpha: domain -> (gamma_max,) pooled conditional acceptance rates.
        gamma: block length used by runs of this model (<= every domain's table length).
        sigma_request, sigma_step, sigma_token: latent difficulty spreads (logit scale).
        sigma_conf: confidence noise (logit scale); conf_scale, conf_shift: overconfidence distortion.
        source: where the rates come from (for provenance).

    Raises:
        SpecsimInputError: gamma beyond a table's length (naming the table), rates outside (0, 1).
    """

    drafter: str
    alpha: dict[str, tuple[float, ...]]
    gamma: int
    sigma_request: float = 0.5
    sigma_step: float = 0.8
    sigma_token: float = 0.8
    sigma_conf: float = 0.6
    conf_scale: float = 1.25
    conf_shift: float = 0.45
    source: str = "PAPER.md 8.2 (Fig. 2)"
    _beta: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _calib_x: list = field(default_factory=list, repr=False)
    _calib_y: list = field(default_factory=list, repr=False)
    _calib_table: list = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        for dom, rates in self.alpha.items():
            if self.gamma > len(rates):
                raise SpecsimInputError(None, None, "gamma",
                                        f"gamma <= {len(rates)}, the length of the '{self.drafter}' "
                                        f"acceptance table for domain '{dom}'", str(self.gamma))
            r = np.asarray(rates, dtype=float)
            if np.any(~np.isfinite(r)) or np.any(r <= 0) or np.any(r >= 1):
                raise SpecsimInputError(None, None, f"acceptance.{self.drafter}.{dom}",
                                        "rates strictly between 0 and 1", str(rates))
        if self.gamma > 0:
            common = float(np.hypot(self.sigma_request, self.sigma_step))
            for dom, rates in self.alpha.items():
                self._beta[dom] = _solve_beta(np.asarray(rates[: self.gamma], float), common, self.sigma_token)
            self._fit_calibration()

    @property
    def domains(self) -> list[str]:
        """Domains this model has rates for."""
        return sorted(self.alpha)

    def check_domain(self, domain: str) -> None:
        """Raise SpecsimInputError when ``domain`` has no rate table."""
        if domain not in self.alpha:
            raise SpecsimInputError(None, None, "domain",
                                    f"a domain of the '{self.drafter}' acceptance table {self.domains}",
                                    repr(domain))

    def _latent_sample(self, n: int = 40000) -> np.ndarray:
        """(n, gamma) fixed Monte Carlo sample of z_r + e_p + eps_{p,k}."""
        rng = np.random.default_rng(_MODEL_SEED)
        z = rng.normal(0, self.sigma_request, (n, 1)) + rng.normal(0, self.sigma_step, (n, 1))
        return z + rng.normal(0, self.sigma_token, (n, self.gamma))

    def _q(self, domain: str, latent: np.ndarray) -> np.ndarray:
        return expit(self._beta[domain][None, :] + latent)

    def _raw_conf(self, q: np.ndarray, noise: np.ndarray) -> np.ndarray:
        return expit(self.conf_scale * (logit(np.clip(q, 1e-9, 1 - 1e-9)) + noise) + self.conf_shift)

    def _fit_calibration(self) -> None:
        """Per-position isotonic map c_raw -> P(accept k | prefix accepted), pooled over domains."""
        rng = np.random.default_rng(_MODEL_SEED + 1)
        xs, ys = [[] for _ in range(self.gamma)], [[] for _ in range(self.gamma)]
        for dom in self.domains:
            latent = self._latent_sample(20000) + 0.0
            latent = latent[rng.permutation(latent.shape[0])]
            q = self._q(dom, latent)
            c = self._raw_conf(q, rng.normal(0, self.sigma_conf, q.shape))
            acc = rng.random(q.shape) < q
            alive = np.ones(q.shape[0], bool)
            for k in range(self.gamma):
                xs[k].append(c[alive, k])
                ys[k].append(acc[alive, k])
                alive &= acc[:, k]
        grid = (np.arange(_CALIB_BINS) + 0.5) / _CALIB_BINS
        for k in range(self.gamma):
            x = np.concatenate(xs[k])
            y = np.concatenate(ys[k]).astype(float)
            order = np.argsort(x, kind="stable")
            fitted = isotonic_regression(y[order]).x
            # Tabulate the monotone map on a fine uniform grid of raw confidence: one lookup per query.
            self._calib_x.append(grid)
            self._calib_y.append(np.clip(np.interp(grid, x[order], fitted), 1e-4, 1 - 1e-4))
        self._calib_table.append(np.stack(self._calib_y, axis=1))      # (bins, gamma)

    def calibrate(self, conf_raw: np.ndarray) -> np.ndarray:
        """Apply the per-position calibration map to (..., gamma) raw confidences (table lookup)."""
        table = self._calib_table[0]
        idx = np.minimum((conf_raw * _CALIB_BINS).astype(np.intp), _CALIB_BINS - 1)   # (..., gamma)
        return table[idx, np.arange(self.gamma)]

    def draw_request(self, rng: np.random.Generator, domain: str, num_positions: int) -> RequestDraws:
        """Draw a request's latent difficulty, acceptance uniforms and confidence noise (all it will need).

        Args:
            rng: the request's own generator (``SeedSequence([seed, request_index])``).
            domain: the request's domain (must be in the table).
            num_positions: P, anchors needed (the request's output tokens).

        Returns:
            RequestDraws with (P, gamma) float32 arrays.
        """
        g = self.gamma
        shape = (num_positions, g)
        z = rng.standard_normal(dtype=np.float32) * self.sigma_request
        e = rng.standard_normal((num_positions, 1), dtype=np.float32) * np.float32(self.sigma_step)
        logit_q = rng.standard_normal(shape, dtype=np.float32)
        logit_q *= np.float32(self.sigma_token)
        logit_q += e
        logit_q += (self._beta[domain] + z).astype(np.float32)[None, :]
        u = rng.random(shape, dtype=np.float32)
        noise = rng.standard_normal(shape, dtype=np.float32)
        noise *= np.float32(self.sigma_conf)
        return RequestDraws(logit_q=logit_q, u=u, noise=noise)

    def confidences(self, logit_q: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw and calibrated confidences (float64, same shape) from the drawn latent and noise."""
        raw = expit(self.conf_scale * (logit_q.astype(np.float64) + noise) + self.conf_shift)
        return raw, self.calibrate(raw)

    @staticmethod
    def accepted(logit_q: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Bool acceptance outcomes: u < sigmoid(logit_q) (the draft would pass verification)."""
        return u < expit(logit_q)

    def outcomes(self, draws: RequestDraws) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Full (P, gamma) arrays (accept, conf_raw, conf) of one request's draws (for tests and tools)."""
        raw, cal = self.confidences(draws.logit_q, draws.noise)
        return self.accepted(draws.logit_q, draws.u), raw, cal

    def implied_tau(self, domain: str) -> float:
        """tau = 1 + sum_j prod_{i<=j} alpha_i for a full block of gamma (PAPER.md 8.2)."""
        return float(1.0 + np.cumprod(self.alpha[domain][: self.gamma]).sum())


def _solve_beta(alpha: np.ndarray, sigma_common: float, sigma_token: float) -> np.ndarray:
    """Solve logit offsets beta_k left to right so pooled conditional rates equal ``alpha`` (gamma,).

    The latent is c + eps_k with c = z_r + e_p ~ N(0, sigma_common^2) shared by a block and eps_k ~
    N(0, sigma_token^2) per position, so E[prod_{i<=k} q_i] = E_c[prod_i g_i(c)] with
    g_i(c) = E_eps[sigmoid(beta_i + c + eps)]: two nested Gauss-Hermite quadratures, exact to ~1e-9.
    """
    xc, wc = np.polynomial.hermite_e.hermegauss(96)
    xe, we = np.polynomial.hermite_e.hermegauss(48)
    c = xc * sigma_common                                        # (Nc,) common latent nodes
    e = xe * sigma_token                                         # (Ne,) per-position latent nodes
    we = we / we.sum()

    def g(b: float) -> np.ndarray:                               # (Nc,) E_eps sigmoid(b + c + eps)
        return expit(b + c[:, None] + e[None, :]) @ we

    surv = wc / wc.sum()                                         # weight x P(prefix survived | c)
    beta = np.empty(alpha.size)
    for k, a in enumerate(alpha):
        w = surv / surv.sum()
        beta[k] = brentq(lambda b: float(w @ g(b)) - a, -30.0, 30.0, xtol=1e-12)
        surv = surv * g(beta[k])
    return beta


@lru_cache(maxsize=32)
def _cached_model(drafter: str, gamma: int, table: tuple, params: tuple, source: str) -> AcceptanceModel:
    return AcceptanceModel(drafter=drafter, alpha=dict(table), gamma=gamma, source=source, **dict(params))


def build_acceptance_model(drafter: str, gamma: int, constant_alpha: float = 0.0,
                           domains: tuple[str, ...] = (), **params: float) -> AcceptanceModel:
    """The acceptance model of a named drafter at block length ``gamma`` (cached).

    Args:
        drafter: a key of :data:`FIG2_ALPHA` (dspark, dflash, eagle3, mtp).
        gamma: block length.
        constant_alpha: when > 0, every domain in ``domains`` (plus chat, code, math) gets this conditional
            rate at every position instead of the Fig. 2 table (closed-form checks).
        params: latent and confidence parameters (see :class:`AcceptanceModel`).

    Raises:
        SpecsimInputError: unknown drafter, or gamma beyond its table.
    """
    if constant_alpha > 0:
        doms = sorted(set(domains) | {"chat", "code", "math"})
        table = tuple((d, (float(constant_alpha),) * max(gamma, 1)) for d in doms)
        return _cached_model(drafter, gamma, table, tuple(sorted(params.items())),
                             f"constant alpha {constant_alpha}")
    if drafter not in FIG2_ALPHA:
        raise SpecsimInputError(None, None, "drafter", f"one of {sorted(FIG2_ALPHA)}", repr(drafter))
    table = tuple(sorted(FIG2_ALPHA[drafter].items()))
    return _cached_model(drafter, gamma, table, tuple(sorted(params.items())), "PAPER.md 8.2 (Fig. 2)")
