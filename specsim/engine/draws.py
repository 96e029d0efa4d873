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
  (max error 3e-6) and scipy's exact ``ndtri`` in the two tails (u < 1 / 128 or u > 1 - 1 / 128).

So the draws of request r at anchor p are the same whatever the policy, the batch, or the step they are used in
(common random numbers per (seed, request)), and nothing is stored per request.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from specsim.engine import kernels

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)
_TABLE_N = 16384
_TAIL = 128             # the outer 128 / 16384 of each side (|z| > 2.4) use ndtri: the table's curvature grows there
_QUANTILES = ndtri(np.arange(_TABLE_N + 1) / _TABLE_N)        # +-inf at the ends: the tails use ndtri


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, in place on a uint64 array (wrapping arithmetic)."""
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def request_keys(seed: int, ids: np.ndarray) -> np.ndarray:
    """(R,) uint64 stream keys of requests ``ids`` under ``seed`` (distinct streams per (seed, request))."""
    base = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)
    x = (np.asarray(ids, np.int64).astype(np.uint64) + np.uint64(1)) * _GOLDEN
    x += _mix(np.array([base], np.uint64))[0]
    return _mix(x)


def uniforms(keys: np.ndarray, anchors: np.ndarray, num_columns: int) -> np.ndarray:
    """(R, num_columns) float64 uniforms in (0, 1) of requests ``keys`` (R,) at ``anchors`` (R,) int.

    Raises:
        ValueError: shapes of ``keys`` and ``anchors`` differ.
    """
    if keys.shape != anchors.shape:
        raise ValueError(f"keys {keys.shape} and anchors {anchors.shape} differ in shape")
    words = (num_columns + 1) // 2
    counter = anchors.astype(np.uint64)[:, None] * np.uint64(words) + np.arange(words, dtype=np.uint64)
    x = counter * _GOLDEN
    x += keys[:, None]
    _mix(x)
    out = np.empty((keys.size, 2 * words))
    out[:, 0::2] = (x >> _S32).astype(np.float64)
    out[:, 1::2] = (x & _LOW32).astype(np.float64)
    out += 0.5
    out *= 2.0 ** -32
    return out[:, :num_columns]


def std_normal(u: np.ndarray) -> np.ndarray:
    """Standard normal quantiles of uniforms ``u`` in (0, 1), same shape (see the module docstring)."""
    t = u * _TABLE_N
    i = t.astype(np.intp)
    tail = (i < _TAIL) | (i >= _TABLE_N - _TAIL)
    i[tail] = _TAIL
    lo = _QUANTILES[i]
    z = lo + (t - i) * (_QUANTILES[i + 1] - lo)
    if tail.any():
        z[tail] = ndtri(u[tail])
    return z


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
        scales, shifts = model._lin                 # the model's terms as latent_outcomes takes them
        self._model_terms = (self._scale, scales, shifts, float(model.conf_low_ratio), model._inv_t[0],
                             _QUANTILES, _TAIL)
        # every request's key and latent difficulty z_r (counter -1 of its stream), drawn at once
        self._keys = request_keys(self.seed, np.arange(num_requests))
        self._z = std_normal(uniforms(self._keys, np.full(num_requests, -1), 1))[:, 0] * model.sigma_request

    def request_state(self, idx: int, domain: str) -> tuple[int, np.ndarray]:
        """(key, base) of request ``idx``: its stream key and (gamma,) beta(domain) + z_r."""
        return self._keys[idx], self.model.beta(domain) + self._z[idx]

    def forget(self, key) -> None:
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
        numbers as ``model.confidences`` and ``model.accepted`` of :meth:`rows`, in one compiled pass
        (:func:`specsim.engine.kernels.latent_outcomes`)."""
        return kernels.latent_outcomes(keys, np.asarray(anchors, np.int64), base, *self._model_terms, gamma)


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

    def forget(self, key) -> None:
        """Drop a finished request's rows."""
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


def row_draws(model, seed: int, domain: np.ndarray, output: np.ndarray):
    """The draw source of ``model``: on-demand latent rows when it is the latent model, else stored rows."""
    if all(hasattr(model, a) for a in ("sigma_request", "sigma_step", "sigma_token", "sigma_conf", "beta")):
        return LatentRows(model, seed, len(output))
    return StoredRows(model, seed, domain, output)
