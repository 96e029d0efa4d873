"""Per-position acceptance models with confidence signals (DESIGN.md; DSpark paper §3.2.1, §4.3 and §5).

A model holds, per drafter and domain (or dataset), the pooled per-position conditional acceptance rates
alpha_k = P(draft k accepted | drafts 1..k-1 accepted), k = 1..gamma_max, as the paper's Fig. 2 reports
them (pooled over verification steps, like Table 1's tokens / cycles and vLLM's counters). Requests and
steps differ through latent difficulty on the logit scale:

    x[p, k] = beta_k + z_r + e_p + eps_{p,k},   q = sigmoid(x),   z_r ~ N(0, sigma_request^2),
              e_p ~ N(0, sigma_step^2),  eps_{p,k} ~ N(0, sigma_token^2)

where p is the anchor (output position) of the step and k the draft depth. The offsets beta_k are solved
left to right by quadrature so that the pooled conditional rate E_w[prod_{i<=k} q_i] / E_w[prod_{i<k} q_i]
equals alpha_k, where E_w weights a request by the steps it runs per token, 1 / tau(z_r), for full blocks
of the run's gamma: a run's per-step acceptance length then equals the table's implied tau (within the
~0.5-1% that the clipped last steps of a 512-1024-token request cost). Draft k anchored at p is accepted
iff u[p, k] < q[p, k].

Each draft carries a raw confidence, informative but imperfect and overconfident like the paper's raw
head (DSpark paper §3.2.1), with a per-position affine distortion on the logit scale (not a pure
temperature: the shift moves c = 0.5, as the paper's 0.53 -> 0.47 point requires):

    logit(c_raw[p, k]) = s_k * m(x[p, k] + n[p, k]) + h_k,   n ~ N(0, sigma_conf^2)
    m(y) = y for y >= 0, conf_low_ratio * y for y < 0   (the head is compressed upwards at the low end)
    s_1 = conf_scale, h_1 = conf_shift;  s_k = conf_scale_later, h_k = conf_shift_later for k >= 2

The calibrated confidence the policies see is Sequential Temperature Scaling of the raw one,
c = sigmoid(logit(c_raw) / T_k) (DSpark paper §3.2.1), with T fitted by :func:`specsim.acceptance.calibration.fit_sts`
on a separate simulated sample when the model is built, or read from a ``temperatures.json``. Both
confidences are cheap on (R, gamma) arrays: two ``expit`` of the same linear map.

The rate tables (``[acceptance] table``) are those of :mod:`specsim.acceptance.tables`.

Common random numbers: :meth:`AcceptanceModel.draw_request` takes a generator seeded from
``SeedSequence([seed, request_index])`` and draws everything the request will ever need, so every policy
faces the same realisations and they stay hidden until verification.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.special import expit

# The rate tables live in specsim.acceptance.tables; their names stay importable from here.
from specsim.acceptance.tables import (BUILTIN_TABLES, DATASET_DOMAIN, DOMAIN_ALIASES, FIG2_ALPHA,  # noqa: F401
                                       FIG4_GAMMAS, FIG4_TAU, MTP_ALPHA, PRODUCTION_DOMAIN_MIX, TABLE1_DATASETS,
                                       TABLE1_TAU, brentq, built_table, builtin_table, check_rates, implied_tau,
                                       load_rate_table, scale_to_tau)
from specsim.errors import SpecsimInputError
from specsim.scenario import LATENT_DEFAULTS, LOOKUP_DRAFTERS, LatentParams


# A fixed seed for building a model (the STS fit sample): the model is part of the scenario, not of the
# run, so it must not change with the run seed.
_MODEL_SEED = 20260412
_STS_SAMPLE = 16000               # simulated blocks for the build-time STS fit (~0.3 s; 8000 left 2.1% ECE)


# ------------------------------------------------------------------------------------ the two formulas

def logistic(x: float) -> float:
    """The logistic sigma(x) = 1 / (1 + exp(-x)) of one float, with the C library's ``exp``.

    This is the formula every confidence and acceptance probability uses. On arrays the model calls
    ``scipy.special.expit``, whose element function is this same expression with the same C ``exp`` (scipy's
    ``_logit.h``; tests/test_kernels.py checks the two bit for bit); numpy's own ``np.exp`` is avoided on
    arrays because its SIMD kernels differ from the C library in the last bit on AVX-512 machines, which would
    break the equality of the numpy and compiled forms (:mod:`specsim.twins`). Raises OverflowError
    for x < -709 in plain Python (compiled code returns 0 there, as ``expit`` does).
    """
    return 1.0 / (1.0 + math.exp(-x))


def confidence_logit(x, noise, low_ratio: float, scale, shift):
    """logit(c_raw) = s_k m(x + n) + h_k with m(y) = y + (low_ratio - 1) min(y, 0) (module docstring).

    Elementwise on float64 arrays (``scale``, ``shift`` (gamma,) broadcast on the last axis) or on floats (the
    compiled twin's form); the same operations in the same order either way.
    """
    lin = x + noise
    if low_ratio != 1.0:
        lin = lin + (low_ratio - 1.0) * np.minimum(lin, 0.0)
    return lin * scale + shift


# ---------------------------------------------------------------------------------------------- model

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
class AcceptanceModel(LatentParams):
    """Latent-difficulty acceptance model for one drafter (see module docstring).

    Args:
        drafter: drafter name.
        alpha: domain -> (gamma_max,) pooled conditional acceptance rates.
        gamma: block length used by runs of this model (<= every domain's table length).
        sigma_request ... conf_low_ratio: the latent difficulty spreads and the confidence distortion, keyword
            only (:class:`specsim.scenario.LatentParams`, defaults tuned to DSpark paper §3.2.1 and Figs. 5-6).
        temperatures: (gamma,) STS temperatures; None = fit them at build time on a simulated sample.
        calibration: "sts" (default) or "none" (policies see the raw confidences).
        domain_weights: domain -> weight of the build-time STS sample (default: the production mix over
            math / code / chat when present, else equal weights).
        source: where the rates come from (for provenance).

    Raises:
        SpecsimInputError: gamma beyond a table's length (naming the table), rates outside (0, 1),
            temperatures fewer than gamma or not positive.
    """

    drafter: str
    alpha: dict[str, tuple[float, ...]]
    gamma: int
    temperatures: tuple[float, ...] | None = None
    calibration: str = "sts"
    domain_weights: dict[str, float] | None = None
    source: str = "DSpark paper Fig. 2"
    _beta: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _tau_grid: dict[str, tuple] = field(default_factory=dict, repr=False)  # domain -> (z grid, tau(z))
    _lin: list = field(default_factory=list, repr=False)     # [(gamma,) scales s_k, (gamma,) shifts h_k]
    _inv_t: list = field(default_factory=list, repr=False)   # [(gamma,) 1 / T_k]

    def __post_init__(self) -> None:
        for dom, rates in self.alpha.items():
            if self.gamma > len(rates):
                raise SpecsimInputError(None, None, "gamma",
                                        f"gamma <= {len(rates)}, the length of the '{self.drafter}' "
                                        f"acceptance table for domain '{dom}' ({self.source}; --gamma "
                                        f"{len(rates)} or engine.gamma sets it; a longer gamma needs rates that "
                                        "long: acceptance.rates, acceptance.constant_alpha, or acceptance.length "
                                        "measured)", str(self.gamma))
            r = np.asarray(rates, dtype=float)
            if np.any(~np.isfinite(r)) or np.any(r <= 0) or np.any(r >= 1):
                raise SpecsimInputError(None, None, f"acceptance.{self.drafter}.{dom}",
                                        "rates strictly between 0 and 1", str(rates))
        if self.calibration not in ("sts", "none"):
            raise SpecsimInputError(None, None, "acceptance.calibration", "'sts' or 'none'", repr(self.calibration))
        g = self.gamma
        scales = np.full(g, self.conf_scale_later, dtype=float)
        shifts = np.full(g, self.conf_shift_later, dtype=float)
        if g:
            scales[0], shifts[0] = self.conf_scale, self.conf_shift
        self._lin.extend([scales, shifts])
        if g == 0:
            self._inv_t.append(np.ones(0))
            return
        if self.calibration == "none":
            temps = np.ones(g)
        elif self.temperatures is not None:
            temps = np.asarray(self.temperatures, dtype=float)
            if temps.size < g or not np.all(np.isfinite(temps[:g]) & (temps[:g] > 0)):
                raise SpecsimInputError(None, None, "acceptance.temperatures",
                                        f"{g} positive temperatures", str(list(self.temperatures)))
            temps = temps[:g]
        else:
            temps = self._fit_sts()
        self._inv_t.append(1.0 / temps)

    # ------------------------------------------------------------------ properties
    @property
    def domains(self) -> list[str]:
        """Domains this model has rates for."""
        return sorted(self.alpha)

    @property
    def sts_temperatures(self) -> np.ndarray:
        """(gamma,) the STS temperatures in use (ones when calibration is "none")."""
        return 1.0 / self._inv_t[0]

    def check_domain(self, domain: str) -> None:
        """Raise SpecsimInputError when ``domain`` has no rate table."""
        if domain not in self.alpha:
            raise SpecsimInputError(None, None, "domain",
                                    f"a domain of the '{self.drafter}' acceptance table {self.domains}",
                                    repr(domain))

    def implied_tau(self, domain: str) -> float:
        """tau = 1 + sum_j prod_{i<=j} alpha_i for a full block of gamma (DSpark paper Fig. 2)."""
        return implied_tau(self.alpha[domain][: self.gamma])

    def beta(self, domain: str) -> np.ndarray:
        """(gamma,) logit offsets of ``domain``, solved on first use (:func:`_solve_beta`) and kept."""
        b = self._beta.get(domain)
        if b is None:
            self.check_domain(domain)
            b = _solve_beta(np.asarray(self.alpha[domain][: self.gamma], float), self.sigma_request,
                            self.sigma_step, self.sigma_token)
            self._beta[domain] = b
        return b

    # ------------------------------------------------------------------ draws
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
        logit_q += (self.beta(domain) + z).astype(np.float32)[None, :]
        u = rng.random(shape, dtype=np.float32)
        noise = rng.standard_normal(shape, dtype=np.float32)
        noise *= np.float32(self.sigma_conf)
        return RequestDraws(logit_q=logit_q, u=u, noise=noise)

    def raw_logit(self, logit_q: np.ndarray, noise: np.ndarray) -> np.ndarray:
        """logit(c_raw) = s_k m(x + n) + h_k, float64. (..., gamma) -> (..., gamma)."""
        scales, shifts = self._lin
        return confidence_logit(logit_q.astype(np.float64), noise, self.conf_low_ratio, scales, shifts)

    def confidences(self, logit_q: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw and calibrated (STS: sigmoid(logit(c_raw) / T_k)) confidences, float64, same shape
        (``expit`` is :func:`logistic` per element)."""
        lin = self.raw_logit(logit_q, noise)                      # (..., gamma)
        return expit(lin), expit(lin * self._inv_t[0])

    def calibrate(self, conf_raw: np.ndarray) -> np.ndarray:
        """Apply this model's STS temperatures to (..., gamma) raw confidences."""
        c = np.clip(np.asarray(conf_raw, dtype=float), 1e-13, 1 - 1e-13)
        return expit(np.log(c / (1 - c)) * self._inv_t[0])

    @staticmethod
    def accepted(logit_q: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Bool acceptance outcomes: u < sigmoid(logit_q) (the draft would pass verification)."""
        return u < expit(logit_q)

    def outcomes(self, draws: RequestDraws) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Full (P, gamma) arrays (accept, conf_raw, conf) of one request's draws (for tests and tools)."""
        raw, cal = self.confidences(draws.logit_q, draws.noise)
        return self.accepted(draws.logit_q, draws.u), raw, cal

    def request_tau(self, domain: str, z: np.ndarray) -> np.ndarray:
        """Expected tokens per full block of requests with latent ``z``: (n,) -> (n,).

        Quadrature over e and eps on a grid of 161 z values over +-8 sigma_request (kept per domain),
        then linear interpolation (error ~1e-5 tokens).
        """
        grid = self._tau_grid.get(domain)
        if grid is None:
            xe, we = np.polynomial.hermite_e.hermegauss(20)
            xt, wt = np.polynomial.hermite_e.hermegauss(24)
            zs = np.linspace(-8.0, 8.0, 161) * max(self.sigma_request, 1e-6)
            c = zs[:, None] + xe[None, :] * self.sigma_step                     # (161, Ne)
            survival, tau = np.ones(c.shape), np.ones(c.shape)
            for b in self.beta(domain):
                survival *= expit(b + c[..., None] + xt * self.sigma_token) @ (wt / wt.sum())
                tau += survival
            grid = self._tau_grid[domain] = (zs, tau @ (we / we.sum()))
        return np.interp(np.asarray(z, float), *grid)

    def step_weighted_z(self, domain: str, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n,) request latents drawn as a run's steps weight them: density of N(0, sigma_request^2) times
        1 / tau(z), by inverse CDF on :meth:`request_tau`'s grid (n uniforms: smooth in the parameters, so
        fits with fixed random numbers stay smooth)."""
        if self.sigma_request <= 0:
            rng.random(n)
            return np.zeros(n)
        self.request_tau(domain, np.zeros(1))                    # fills the grid
        zs, tau = self._tau_grid[domain]
        dens = np.exp(-0.5 * (zs / self.sigma_request) ** 2) / tau    # (161,) unnormalised step density
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(zs))])
        return np.interp(rng.random(n), cdf / cdf[-1], zs)

    def sample_blocks(self, domain: str, num_blocks: int, rng: np.random.Generator,
                      blocks_per_request: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Full blocks of ``domain`` as a run's steps see them: (accept, conf_raw, conf), each (num_blocks, gamma).

        Requests are drawn as steps weight them (density of z_r times 1 / tau(z_r), :meth:`step_weighted_z`:
        a request of acceptance length tau runs 1 / tau steps per token), so pooled rates over the sample
        equal the table, like the paper's per-step statistics. ``conf`` is None while the model is being
        built (before its temperatures exist). Requests of ``blocks_per_request`` consecutive blocks share
        their request latent z_r.
        """
        g = self.gamma
        n_req = -(-num_blocks // blocks_per_request)
        z = np.repeat(self.step_weighted_z(domain, n_req, rng), blocks_per_request)[:num_blocks, None]
        x = (self.beta(domain)[None, :] + z + rng.normal(0.0, self.sigma_step, (num_blocks, 1))
             + rng.normal(0.0, self.sigma_token, (num_blocks, g)))
        acc = self.accepted(x, rng.random((num_blocks, g)))
        lin = self.raw_logit(x, rng.normal(0.0, self.sigma_conf, (num_blocks, g)))
        cal = expit(lin * self._inv_t[0]) if self._inv_t else None
        return acc, expit(lin), cal

    def _weights(self) -> dict[str, float]:
        w = self.domain_weights
        if w is None:
            base = [d for d in PRODUCTION_DOMAIN_MIX if d in self.alpha]
            w = {d: PRODUCTION_DOMAIN_MIX[d] for d in base} if base else {d: 1.0 for d in self.alpha}
        w = {d: float(v) for d, v in w.items() if d in self.alpha and v > 0}
        if not w:
            raise SpecsimInputError(None, None, "acceptance.domain_weights", "a positive weight for a table domain",
                                    repr(self.domain_weights))
        return w

    def _fit_sts(self) -> np.ndarray:
        """STS temperatures fitted on a simulated sample (fixed seed, domains by :meth:`_weights`)."""
        from specsim.acceptance.calibration import fit_sts

        rng = np.random.default_rng(_MODEL_SEED)
        w = self._weights()
        total = sum(w.values())
        raws, labels = [], []
        for dom in sorted(w):
            n = max(1, int(round(_STS_SAMPLE * w[dom] / total)))
            acc, raw, _ = self.sample_blocks(dom, n, rng)
            raws.append(raw)
            labels.append(np.cumprod(acc, axis=1).astype(bool))
        return fit_sts(np.concatenate(raws), np.concatenate(labels))


def _solve_beta(alpha: np.ndarray, sigma_request: float, sigma_step: float, sigma_token: float) -> np.ndarray:
    """Solve logit offsets beta_k so the per-step pooled conditional rates equal ``alpha`` (gamma,) -> (gamma,).

    What a run reports (and what the paper's Table 1, Fig. 2 and vLLM's counters count) is pooled over
    verification steps: tokens / cycles, accepted at k / reached k. A request of difficulty z_r with
    acceptance length tau(z_r) runs L / tau(z_r) steps for its L tokens, so steps weight requests by
    1 / tau(z_r) (output length is independent of z_r; within a request the anchors a step lands on carry
    i.i.d. step latents e_p, so they are not biased). Solving with every request weighted equally (the
    earlier rule) left the per-step acceptance length ~6% below the table.

    With c = z_r + e_p and eps_k per position, E[prod_{i<=k} q_i | c] = prod_i g_i(c), g_i(c) =
    E_eps[sigmoid(beta_i + c + eps)]. Gauss-Hermite nodes over (z, e, eps) (20 x 20 x 24, exact to ~1e-9
    in tau); the weights 1 / tau(z) depend on beta, so the left-to-right solve is repeated to a fixed
    point (8-12 rounds, about 0.05 s per domain).

    Raises:
        SpecsimInputError: spreads so large that no offset in [-40, 40] reaches a rate (sigma 20 and up).
    """
    xz, wz = np.polynomial.hermite_e.hermegauss(20)
    xe, we = np.polynomial.hermite_e.hermegauss(20)
    xt, wt = np.polynomial.hermite_e.hermegauss(24)
    wz, we, wt = wz / wz.sum(), we / we.sum(), wt / wt.sum()
    c = (xz[:, None] * sigma_request + xe[None, :] * sigma_step).ravel()   # (Nz * Ne,) common latent nodes
    eps = xt * sigma_token                                                  # (Nt,) per-position nodes

    def g(b: float) -> np.ndarray:                               # (Nz * Ne,) E_eps sigmoid(b + c + eps)
        return expit(b + c[:, None] + eps[None, :]) @ wt

    step_weight = np.ones(xz.size)                               # (Nz,) steps per token of request z
    beta = np.zeros(alpha.size)
    for _ in range(40):
        weight = ((wz * step_weight)[:, None] * we[None, :]).ravel()  # (Nz * Ne,) step weight of node c
        survival = np.ones(c.size)                               # P(prefix 1..k accepted | c)
        tau_c = np.ones(c.size)                                  # tokens of a full block given c
        new = np.empty(alpha.size)
        for k, a in enumerate(alpha):
            w = weight * survival / (weight @ survival)
            try:
                new[k] = brentq(lambda b: float(w @ g(b)) - a, -40.0, 40.0, xtol=1e-12)
            except ValueError:          # no offset in [-40, 40] reaches the rate: the spreads swamp it
                raise SpecsimInputError(None, None, "acceptance.sigma_request, sigma_step, sigma_token",
                                        f"spreads with which the rate alpha_{k + 1} = {a:.4g} is reachable (the "
                                        "logit offset solving for it would leave [-40, 40]; the fitted spreads "
                                        "are about 1)", f"{sigma_request:g}, {sigma_step:g}, {sigma_token:g}") from None
            survival = survival * g(new[k])
            tau_c += survival
        step_weight = 1.0 / (tau_c.reshape(xz.size, xe.size) @ we)  # (Nz,) 1 / tau(z)
        done = np.max(np.abs(new - beta)) < 1e-9
        beta = new
        if done:
            break
    return beta


# -------------------------------------------------------------------------------------------- building

_LATENT_KEYS = tuple(LATENT_DEFAULTS)   # the nine latent and confidence parameters, in order


@lru_cache(maxsize=32)
def _cached_model(drafter: str, gamma: int, table: tuple, params: tuple, source: str,
                  temperatures: tuple | None, calibration: str, weights: tuple | None) -> AcceptanceModel:
    from specsim.acceptance.cache import cached     # built once per machine, then loaded (issue 25)

    return cached((drafter, gamma, table, params, source, temperatures, calibration, weights),
                  lambda: _new_model(drafter, gamma, table, params, source, temperatures, calibration, weights),
                  AcceptanceModel)


def _new_model(drafter: str, gamma: int, table: tuple, params: tuple, source: str,
               temperatures: tuple | None, calibration: str, weights: tuple | None) -> AcceptanceModel:
    return AcceptanceModel(drafter=drafter, alpha=dict(table), gamma=gamma, source=source,
                           temperatures=temperatures, calibration=calibration,
                           domain_weights=dict(weights) if weights else None, **dict(params))


def alpha_for_acceptance_length(tau: float, k: int) -> float:
    """Constant per-position acceptance alpha whose acceptance length with k drafts is ``tau``:
    ``tau = (1 - alpha^(k+1)) / (1 - alpha)`` (tokens per verify step, the bonus token included, as vLLM reports
    ``spec_decode`` acceptance length), solved by bisection; the closed form of a geometric acceptance (Leviathan
    et al., 2023, eq. 1).

    Raises:
        SpecsimInputError: tau outside (1, k + 1), k < 1.
    """
    if k < 1 or not 1.0 < tau < k + 1:
        raise SpecsimInputError(None, None, "acceptance.length", f"a value in (1, {k + 1}) (tokens per step at "
                                f"{k} draft{'s' * (k != 1)}, the bonus token included)", repr(tau))
    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(100):
        a = (lo + hi) / 2
        if sum(a ** i for i in range(k + 1)) < tau:
            lo = a
        else:
            hi = a
    return (lo + hi) / 2


def build_acceptance_model(drafter: str, gamma: int, constant_alpha: float | None = None,
                           domains: tuple[str, ...] = (), table: str | None = None, rates: dict | None = None,
                           model: str | None = None, temperatures: str | None = None, calibration: str = "sts",
                           length: float | None = None, length_gamma: int | None = None, **params: float):
    """The acceptance model of a drafter at block length ``gamma`` (cached), from the scenario's [acceptance].

    Args:
        drafter: dspark, dflash, eagle3, mtp, or a CPU drafter (ngram, suffix: no built-in table, so
            ``length``, ``constant_alpha``, ``rates`` or a JSON ``table`` is needed).
        gamma: block length.
        constant_alpha: when set (> 0), every domain in ``domains`` (plus chat, code, math) gets this conditional
            rate at every position (closed-form checks); wins over ``table`` and ``rates``.
        length, length_gamma: a measured acceptance length (tokens per verify step, bonus included) at
            ``length_gamma`` drafts (default ``gamma``): ``constant_alpha`` is solved from it
            (:func:`alpha_for_acceptance_length`), the per-position rate being what carries to other gammas.
        domains: the run's domains: ``constant_alpha`` gives them rows; when given, rows of other domains
            shorter than ``gamma`` are left out instead of refused (only the run's domains need gamma rates).
        table: None (``fig2``; ``dspark5`` for a run of gamma 5 is not implied: name it), a built-in table
            name (fig2, fig4, dspark5, mtp) or a JSON rate-table path.
        rates: inline ``{domain: [a_1, ...]}``; added to (and overriding rows of) the table.
        model: None only: this builds the latent model above. A scenario's ``fitted:DIR`` or ``empirical:DIR``
            is built by :func:`specsim.acceptance.fitting.resolve_acceptance_model`, which knows every kind (fitting
            builds on this module, never the reverse).
        temperatures: None (STS fitted at build time) or a ``specsim calibrate`` temperatures.json.
        calibration: "sts" or "none".
        params: latent and confidence parameters (see :class:`AcceptanceModel`).

    Raises:
        SpecsimInputError: unknown drafter or table, unreadable files, gamma beyond the table, a CPU drafter
            with a built-in table only, or a non-empty ``model``.
    """
    if model:
        raise SpecsimInputError(None, None, "acceptance.model", "'' here (fitted and empirical models are built "
                                "by specsim.acceptance.fitting.resolve_acceptance_model)", repr(model))
    params = {k: float(v) for k, v in params.items() if k in _LATENT_KEYS}
    temps = None
    if temperatures:
        from specsim.acceptance.calibration import load_temperatures
        temps = tuple(float(t) for t in load_temperatures(temperatures, gamma))
    weights = None
    if length is not None:
        constant_alpha = alpha_for_acceptance_length(float(length), int(length_gamma or gamma))
    if constant_alpha:  # None (or 0) = off
        doms = sorted(set(domains) | {"chat", "code", "math"})
        alpha = {d: (float(constant_alpha),) * max(gamma, 1) for d in doms}
        source = f"constant alpha {constant_alpha}"
    else:
        name = table or ("mtp" if drafter == "mtp" else "fig2")
        if drafter in LOOKUP_DRAFTERS and (table is None or table in BUILTIN_TABLES):
            if not rates:       # a CPU drafter's acceptance is the workload's repetition: no paper table holds it
                raise SpecsimInputError(None, None, "acceptance.length", f"the acceptance you measured for the "
                                        f"{drafter} drafter, which has no built-in table (acceptance.length, "
                                        "acceptance.rates, acceptance.constant_alpha or a JSON acceptance.table; "
                                        "public values in docs/acceptance.md, 'CPU drafters')",
                                        "no acceptance given" if table is None else f"the paper's table {table!r}")
            name = None
        if name is None:
            alpha, source = {}, ""
        elif name in BUILTIN_TABLES:
            alpha, source = builtin_table(drafter, name, gamma)
            if name == "dspark5":
                weights = tuple(sorted(PRODUCTION_DOMAIN_MIX.items()))
        else:
            alpha, source = load_rate_table(name), f"rate table {name}"
        if rates:
            alpha = {**alpha, **check_rates(rates, "acceptance.rates")}
            source = f"{source} + inline rates" if source else "inline rates"
        if domains:  # only the run's domains need rows of length >= gamma; shorter others are left out
            kept = {d: r for d, r in alpha.items() if d in domains or len(r) >= gamma}
            if alpha and not kept:
                given = (None if name in BUILTIN_TABLES or name is None else name, "acceptance.rates" if rates else None)
                raise SpecsimInputError(" + ".join(g for g in given if g) or None, None, "alpha",
                                        f"a row for a domain of the run ({', '.join(sorted(domains))}) or of at "
                                        f"least gamma ({gamma}) rates", ", ".join(f"{d} ({len(r)} rate"
                                        f"{'s' * (len(r) != 1)})" for d, r in sorted(alpha.items())))
            alpha = kept
    return _cached_model(drafter, gamma, tuple(sorted(alpha.items())), tuple(sorted(params.items())), source,
                         temps, calibration, weights)
