"""Counter-based random draws: each (seed, request, anchor position) has its own numbers, computed on demand.

A step needs, for each decoding request r at anchor p (its tokens so far), the hidden acceptance uniforms, the
latent logits and the confidence noise of its gamma drafts. Drawing every anchor of a request when it is admitted
costs far more than the rows a run reads (a request emits several tokens per step, so most anchors are never
used), so the engine computes only the rows a step uses, from a hash of (seed, request, anchor, column):

* ``request_keys(seed, ids)``: one 64-bit key per request (SplitMix64 of the seed and the index);
* ``uniforms(keys, anchors, n)``: (R, n) uniforms in (0, 1): column c of anchor p of request r is the SplitMix64
  output at counter (p * n + c) of the stream keyed by r (Steele, Lea and Flood, "Fast splittable pseudorandom
  number generators", OOPSLA 2014; the same finaliser as java.util.SplittableRandom), 32 bits per uniform (two per
  64-bit output);
* ``std_normal(u)``: the inverse normal CDF, from a table of 16384 quantiles with linear interpolation inside
  (max error 3e-6) and the exact quantile in the two tails (u < 1 / 128 or u > 1 - 1 / 128). The exact quantile
  is Wichura's algorithm AS 241 (PPND16: "The percentage points of the normal distribution", Applied
  Statistics 37(3), 1988, 477-484; relative error about 1e-16), written once in :func:`normal_quantile` and
  used by the table, the numpy form and the compiled twin alike.

So the draws of request r at anchor p are the same whatever the policy, the batch, or the step they are used in
(common random numbers per (seed, request)), and nothing is stored per request.

:func:`latent_outcomes` (a step's confidences and acceptance outcomes) is defined here in numpy; its loop twin
beside it is what runs when numba is available (:func:`specsim.twins.twin` chooses; the two are equal
bit for bit, tests/test_kernels.py).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy.special import expit

from specsim.acceptance.model import confidence_logit, logistic
from specsim.twins import twin

GOLDEN = np.uint64(0x9E3779B97F4A7C15)          # SplitMix64's increment (Steele et al. 2014)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
LOW32 = np.uint64(0xFFFFFFFF)
INV_2_32 = 2.0 ** -32                           # a 32-bit integer k maps to the uniform (k + 0.5) / 2^32
TABLE_N = 16384
TAIL = 128              # the outer 128 / 16384 of each side (|z| > 2.4) use AS 241: the table's curvature grows there

# AS 241 (PPND16) coefficients, Wichura (1988), highest power first for Horner's rule.
_A = (2509.0809287301226727, 33430.575583588128105, 67265.770927008700853, 45921.953931549871457,
      13731.693765509461125, 1971.5909503065514427, 133.14166789178437745, 3.387132872796366608)
_B = (5226.495278852854561, 28729.085735721942674, 39307.89580009271061, 21213.794301586595867,
      5394.1960214247511077, 687.1870074920579083, 42.313330701600911252, 1.0)
_C = (7.7454501427834140764e-4, 0.0227238449892691845833, 0.24178072517745061177, 1.27045825245236838258,
      3.64784832476320460504, 5.7694972214606914055, 4.6303378461565452959, 1.42343711074968357734)
_D = (1.05075007164441684324e-9, 5.475938084995344946e-4, 0.0151986665636164571966, 0.14810397642748007459,
      0.68976733498510000455, 1.6763848301838038494, 2.05319162663775882187, 1.0)
_E = (2.01033439929228813265e-7, 2.71155556874348757815e-5, 0.0012426609473880784386, 0.026532189526576123093,
      0.29656057182850489123, 1.7848265399172913358, 5.4637849111641143699, 6.6579046435011037772)
_F = (2.04426310338993978564e-15, 1.4215117583164458887e-7, 1.8463183175100546818e-5, 7.868691311456132591e-4,
      0.0148753612908506148525, 0.13692988092273580531, 0.59983220655588793769, 1.0)


def mix(x):
    """SplitMix64's finaliser on uint64 (wrapping arithmetic): in place on an array, or on one number (the
    compiled twin's form)."""
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _horner(coeffs, r):
    """Polynomial with ``coeffs`` (highest power first) at ``r``."""
    out = 0.0
    for c in coeffs:
        out = out * r + c
    return out


def normal_quantile(p: float) -> float:
    """The standard normal quantile of ``p`` in (0, 1) by AS 241 (PPND16; module docstring), one float.

    Rational approximations in r = 0.180625 - q^2 for |q| = |p - 0.5| <= 0.425, else in r = sqrt(-log(min(p,
    1 - p))) - 1.6 (r <= 5) or - 5 (beyond).
    """
    q = p - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        return q * _horner(_A, r) / _horner(_B, r)
    r = math.sqrt(-math.log(p if q < 0.0 else 1.0 - p))
    if r <= 5.0:
        r -= 1.6
        z = _horner(_C, r) / _horner(_D, r)
    else:
        r -= 5.0
        z = _horner(_E, r) / _horner(_F, r)
    return -z if q < 0.0 else z


def _table_quantile(quantiles, t, i):
    """Linear interpolation of the quantile table at t = u * TABLE_N in cell i = floor(t) (arrays or floats)."""
    lo = quantiles[i]
    return lo + (t - i) * (quantiles[i + 1] - lo)


_QUANTILES = np.array([-np.inf] + [normal_quantile(k / TABLE_N) for k in range(1, TABLE_N)] + [np.inf])
_QUANTILES.setflags(write=False)                # +-inf at the ends: the tails use normal_quantile


def request_keys(seed: int, ids: np.ndarray) -> np.ndarray:
    """(R,) uint64 stream keys of requests ``ids`` under ``seed`` (distinct streams per (seed, request))."""
    base = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)
    x = (np.asarray(ids, np.int64).astype(np.uint64) + np.uint64(1)) * GOLDEN
    x += mix(np.array([base], np.uint64))[0]
    return mix(x)


def uniforms(keys: np.ndarray, anchors: np.ndarray, num_columns: int) -> np.ndarray:
    """(R, num_columns) float64 uniforms in (0, 1) of requests ``keys`` (R,) at ``anchors`` (R,) int.

    Raises:
        ValueError: shapes of ``keys`` and ``anchors`` differ.
    """
    if keys.shape != anchors.shape:
        raise ValueError(f"keys {keys.shape} and anchors {anchors.shape} differ in shape")
    words = (num_columns + 1) // 2
    counter = anchors.astype(np.uint64)[:, None] * np.uint64(words) + np.arange(words, dtype=np.uint64)
    x = counter * GOLDEN
    x += keys[:, None]
    mix(x)
    out = np.empty((keys.size, 2 * words))
    out[:, 0::2] = (x >> _S32).astype(np.float64)
    out[:, 1::2] = (x & LOW32).astype(np.float64)
    out += 0.5
    out *= INV_2_32
    return out[:, :num_columns]


def std_normal(u: np.ndarray) -> np.ndarray:
    """Standard normal quantiles of uniforms ``u`` in (0, 1), same shape (see the module docstring)."""
    t = u * TABLE_N
    i = t.astype(np.intp)
    tail = (i < TAIL) | (i >= TABLE_N - TAIL)
    i[tail] = TAIL
    z = _table_quantile(_QUANTILES, t, i)
    if tail.any():
        z[tail] = [normal_quantile(p) for p in u[tail]]
    return z


class LatentTerms(NamedTuple):
    """The latent model's per-draft terms as :func:`latent_outcomes` takes them (G: the model's drafts; both forms
    unpack them by position, so a plain tuple of the same fields serves as well: the engine passes one, which numba
    types in a third of the time).

    Attributes:
        scale: (2G + 1,) [sigma_step, sigma_token x G, sigma_conf x G] (logit scale).
        lin_scale, lin_shift: (G,) the raw confidence's s_k and h_k (:func:`confidence_logit`).
        low_ratio: the model's ``conf_low_ratio``.
        inv_t: (G,) 1 / T_k, the STS temperatures' inverses.
        quantiles: (TABLE_N + 1,) the normal quantile table.
    """

    scale: np.ndarray
    lin_scale: np.ndarray
    lin_shift: np.ndarray
    low_ratio: float
    inv_t: np.ndarray
    quantiles: np.ndarray


def _latent_outcomes_numpy(keys, anchors, base, terms: LatentTerms, gamma: int):
    """(raw_logit, conf, accept), each (R, gamma), of requests ``keys`` (R,) uint64 at ``anchors`` (R,) int64
    with ``base`` (R, G) = beta_k(domain) + z_r: :meth:`LatentRows.rows` followed by the model's
    ``confidences`` and ``accepted`` (:mod:`specsim.acceptance.model`), cut to the first ``gamma`` drafts; the raw
    confidence is ``expit(raw_logit)``, left to whoever reads it (:class:`Drafts`)."""
    scale, lin_scale, lin_shift, low_ratio, inv_t, _ = terms
    G = base.shape[1]
    u = uniforms(keys, anchors, 3 * G + 1)                        # columns e, eps x G, noise x G, u x G
    z = std_normal(u[:, : 2 * G + 1])
    z *= scale
    logit_q = base + z[:, 1: G + 1]                               # (R, G) beta + z_r + eps, then + e
    logit_q += z[:, :1]
    lin = confidence_logit(logit_q, z[:, G + 1:], low_ratio, lin_scale, lin_shift)
    accept = u[:, 2 * G + 1:] < expit(logit_q)                    # expit: logistic per element (module doc)
    return lin[:, :gamma], expit(lin * inv_t)[:, :gamma], accept[:, :gamma]


def _row_uniforms(key, anchor, u):
    """Fill ``u`` (2 * words,) with one row of :func:`uniforms` (the loop twin's form)."""
    words = u.size // 2
    start = np.uint64(anchor) * np.uint64(words)
    for w in range(words):
        x = mix((start + np.uint64(w)) * GOLDEN + key)
        u[2 * w] = (np.float64(x >> _S32) + 0.5) * INV_2_32
        u[2 * w + 1] = (np.float64(x & LOW32) + 0.5) * INV_2_32


def _normal(u, quantiles):
    """One value of :func:`std_normal` (the loop twin's form)."""
    t = u * TABLE_N
    i = np.intp(t)
    if i < TAIL or i >= TABLE_N - TAIL:
        return normal_quantile(u)
    return _table_quantile(quantiles, t, i)


def _scaled_normals(u, quantiles, scale, gamma, z):
    """Fill ``z`` (R, 2G + 1) with :func:`std_normal` of ``u``'s columns e, eps and noise (the first ``gamma`` of
    each) times ``scale`` (the loop twin's pass over the quantile table: independent lookups, which the processor
    overlaps, where a row at a time waited on each miss of the 128 KiB table)."""
    G = (z.shape[1] - 1) // 2
    for r in range(z.shape[0]):
        z[r, 0] = _normal(u[r, 0], quantiles) * scale[0]
        for k in range(gamma):
            z[r, 1 + k] = _normal(u[r, 1 + k], quantiles) * scale[1 + k]
            z[r, 1 + G + k] = _normal(u[r, 1 + G + k], quantiles) * scale[1 + G + k]


def _latent_outcomes_loop(keys, anchors, base, terms, gamma):
    scale, lin_scale, lin_shift, low_ratio, inv_t, quantiles = terms
    R, G = base.shape
    u = np.empty((R, 2 * ((3 * G + 2) // 2)))              # columns e, eps x G, noise x G, u x G (+ 1 spare)
    for r in range(R):
        _row_uniforms(keys[r], anchors[r], u[r])
    z = np.empty((R, 2 * G + 1))
    _scaled_normals(u, quantiles, scale, gamma, z)
    raw_logit, conf = np.empty((R, gamma)), np.empty((R, gamma))
    accept = np.empty((R, gamma), np.bool_)
    for r in range(R):
        for k in range(gamma):
            logit_q = (base[r, k] + z[r, 1 + k]) + z[r, 0]
            lin = confidence_logit(logit_q, z[r, 1 + G + k], low_ratio, lin_scale[k], lin_shift[k])
            raw_logit[r, k] = lin
            conf[r, k] = logistic(lin * inv_t[k])
            accept[r, k] = u[r, 1 + 2 * G + k] < logistic(logit_q)
    return raw_logit, conf, accept


latent_outcomes = twin(_latent_outcomes_numpy, _latent_outcomes_loop,
                       helpers=(mix, _horner, normal_quantile, _table_quantile, _row_uniforms, _normal,
                                _scaled_normals, confidence_logit, logistic))


class Drafts:
    """A step's drafts, each (R, gamma): the hidden outcomes ``accept`` (revealed only when the step ends) and the
    raw and calibrated confidences ``conf_raw`` and ``conf`` the policy sees. The latent model gives the raw
    confidences as their logits, ``conf_raw = expit(raw_logit)`` computed on first read (most policies read only
    ``conf``: one ``exp`` per draft saved); :meth:`silence` zeroes the drafts of requests that could not draft."""

    __slots__ = ("accept", "conf", "_conf_raw", "_raw_logit", "_silent")

    def __init__(self, accept: np.ndarray | None, conf_raw: np.ndarray | None, conf: np.ndarray,
                 raw_logit: np.ndarray | None = None) -> None:
        self.accept, self.conf, self._conf_raw, self._raw_logit, self._silent = accept, conf, conf_raw, raw_logit, None

    @property
    def conf_raw(self) -> np.ndarray:
        """(R, gamma) raw confidences (0 for a silenced request)."""
        if self._conf_raw is None:
            self._conf_raw = expit(self._raw_logit)
            if self._silent is not None:
                self._conf_raw[self._silent] = 0.0
        return self._conf_raw

    def silence(self, rows: np.ndarray) -> None:
        """The requests of ``rows`` ((R,) bool) drafted nothing: confidence 0 for each of their drafts."""
        self.conf[rows] = 0.0
        if self._conf_raw is not None:
            self._conf_raw[rows] = 0.0
        else:
            self._silent = rows


class LatentRows:
    """On-demand draws of the latent acceptance model (:class:`specsim.acceptance.model.AcceptanceModel`).

    Distribution exactly as ``AcceptanceModel.draw_request``: for request r at anchor p and draft k,
    ``logit_q = beta_k(domain_r) + z_r + e_{r,p} + eps_{r,p,k}`` with z ~ N(0, sigma_request),
    e ~ N(0, sigma_step), eps ~ N(0, sigma_token); confidence noise ~ N(0, sigma_conf); acceptance uniform u.

    Args:
        model: the acceptance model (its ``beta(domain)`` and spreads).
        seed: the run seed.
    """

    def __init__(self, model, seed: int, num_requests: int) -> None:
        self.model = model
        self.seed = int(seed)
        self.gamma = model.gamma
        self._columns = 3 * self.gamma + 1          # e, eps (gamma), noise (gamma), u (gamma)
        self._scale = np.concatenate([[model.sigma_step], np.full(self.gamma, model.sigma_token),
                                      np.full(self.gamma, model.sigma_conf)])
        scales, shifts = model._lin
        self._terms = tuple(LatentTerms(self._scale, scales, shifts, float(model.conf_low_ratio), model._inv_t[0],
                                        _QUANTILES))                     # a plain tuple (LatentTerms' docstring)
        # every request's key and latent difficulty z_r (counter -1 of its stream), drawn at once
        self._keys = request_keys(self.seed, np.arange(num_requests))
        self._z = std_normal(uniforms(self._keys, np.full(num_requests, -1), 1))[:, 0] * model.sigma_request

    def request_state(self, idx: int, domain: str) -> tuple[int, np.ndarray]:
        """(key, base) of request ``idx``: its stream key and (gamma,) beta(domain) + z_r."""
        return self._keys[idx], self.model.beta(domain) + self._z[idx]

    def forget(self, keys: np.ndarray) -> None:
        """Nothing is stored per request."""

    def rows(self, keys: np.ndarray, anchors: np.ndarray, base: np.ndarray) -> np.ndarray:
        """(R, 3, gamma) float64 [logit_q, noise, u] of requests (keys, base (R, gamma)) at ``anchors``."""
        g = self.gamma
        u = uniforms(keys, anchors, self._columns)
        z = std_normal(u[:, : 2 * g + 1])
        z *= self._scale
        out = np.empty((keys.size, 3, g))
        np.add(base, z[:, 1: g + 1], out=out[:, 0])
        out[:, 0] += z[:, :1]
        out[:, 1] = z[:, g + 1:]
        out[:, 2] = u[:, 2 * g + 1:]
        return out

    def outcomes(self, keys: np.ndarray, anchors: np.ndarray, base: np.ndarray,
                 gamma: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(conf_raw, conf, accept), each (R, gamma), of the first ``gamma`` drafts at ``anchors``: the same
        numbers as ``model.confidences`` and ``model.accepted`` of :meth:`rows` (:func:`latent_outcomes`)."""
        d = self.drafts(keys, anchors, base, gamma)
        return d.conf_raw, d.conf, d.accept

    def drafts(self, keys: np.ndarray, anchors: np.ndarray, base: np.ndarray, gamma: int) -> "Drafts":
        """:meth:`outcomes` as a step's :class:`Drafts`, whose raw confidences are computed when first read."""
        raw_logit, conf, accept = latent_outcomes(keys, np.asarray(anchors, np.int64), base, self._terms, gamma)
        return Drafts(accept, None, conf, raw_logit)


class StoredRows:
    """Whole-request draws kept per running request, for acceptance models that are not the latent model
    (e.g. :class:`specsim.acceptance.fitting.EmpiricalAcceptanceModel`, which replays logged requests): each request's
    (P, gamma) rows are drawn once by ``model.draw_request`` from SeedSequence([seed, request]).

    Same interface as :class:`LatentRows` (the key is the request index; ``base`` is unused).
    """

    def __init__(self, model, seed: int, domain: np.ndarray, output: np.ndarray) -> None:
        self.model, self.seed, self.gamma = model, int(seed), model.gamma
        self._domain, self._output = domain, output
        self._store: dict[int, np.ndarray] = {}

    def request_state(self, idx: int, domain: str) -> tuple[int, np.ndarray]:
        """Draw and keep request ``idx``'s rows; returns (idx, zeros(gamma))."""
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, int(idx)]))
        d = self.model.draw_request(rng, domain, int(self._output[idx]))
        self._store[int(idx)] = np.stack([d.logit_q, d.noise, d.u], axis=1)      # (P, 3, gamma)
        return int(idx), np.zeros(self.gamma)

    def forget(self, keys: np.ndarray) -> None:
        """Drop finished requests' rows (``keys``: their keys, (n,))."""
        for key in keys.tolist():
            self._store.pop(int(key), None)

    def rows(self, keys: np.ndarray, anchors: np.ndarray, base: np.ndarray) -> np.ndarray:
        """(R, 3, gamma) rows of requests ``keys`` at ``anchors``."""
        if not keys.size:
            return np.zeros((0, 3, self.gamma))
        return np.stack([self._store[int(k)][int(p)] for k, p in zip(keys, anchors)])

    def outcomes(self, keys: np.ndarray, anchors: np.ndarray, base: np.ndarray,
                 gamma: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(conf_raw, conf, accept), each (R, gamma), of the first ``gamma`` drafts of :meth:`rows` (the model's
        confidences are computed on all its drafts, then cut: its calibration is per position)."""
        rows = self.rows(keys, anchors, base)
        conf_raw, conf = self.model.confidences(rows[:, 0], rows[:, 1])
        accept = self.model.accepted(rows[:, 0], rows[:, 2])
        return conf_raw[:, :gamma], conf[:, :gamma], accept[:, :gamma]

    def drafts(self, keys: np.ndarray, anchors: np.ndarray, base: np.ndarray, gamma: int) -> "Drafts":
        """:meth:`outcomes` as a step's :class:`Drafts`."""
        conf_raw, conf, accept = self.outcomes(keys, anchors, base, gamma)
        return Drafts(accept, conf_raw, conf)


#: Salt of the lookup-match streams (:func:`lookup_matches`): they are keyed apart from the acceptance draws.
MATCH_SALT = 0x6D61746368        # "match"


def lookup_matches(seed: int, requests: np.ndarray, anchors: np.ndarray, rate: float) -> np.ndarray:
    """(R,) bool: whether the lookup drafter (ngram, suffix) finds a match for each of ``requests`` (R,) trace
    indices at ``anchors`` (R,) (their tokens so far), with probability ``rate`` each, independently per
    request-step: a uniform of the request's own match stream (the run seed salted by :data:`MATCH_SALT`), so the
    acceptance draws are the same with or without it and the same request-step always matches alike."""
    keys = request_keys(int(seed) ^ MATCH_SALT, np.asarray(requests, np.int64))
    return uniforms(keys, np.asarray(anchors, np.int64), 1)[:, 0] < rate


def row_draws(model, seed: int, domain: np.ndarray, output: np.ndarray):
    """The draw source of ``model``: on-demand latent rows when it is the latent model, else stored rows."""
    if all(hasattr(model, a) for a in ("sigma_request", "sigma_step", "sigma_token", "sigma_conf", "beta")):
        return LatentRows(model, seed, len(output))
    return StoredRows(model, seed, domain, output)
