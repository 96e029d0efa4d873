"""SmartSpec: goodput-maximising proposal length (Liu et al. 2024; later TurboSpec).

Liu et al., "Optimizing Speculative Decoding for Serving Large Language Models Using Goodput" (2024),
choose one proposal length k for the whole batch each step by predicting the *goodput*, generated
tokens per second, of every candidate k and taking the best. Two ingredients:

* Acceptance: each request's token acceptance rate alpha_r is estimated from its own past verify steps
  (a moving average), falling back to a batch-wide moving average while a request has no history.
* Expected generated tokens of a request verifying k drafts, under independent acceptance at rate alpha
  (Leviathan et al. 2023, eq. 1; the tau of DESIGN.md with equal survivals alpha^j):
  E_r(k) = 1 + alpha + ... + alpha^k = (1 - alpha^(k+1)) / (1 - alpha).

Goodput(k) = sum_r E_r(k) / (step_time(R (1 + k)) + draft_time(k)), where the step time comes from the
replica's step-time profile (``view.sps``, DSpark paper §3.2.2) and the drafting time of a k-token
proposal from the drafter's cost model (``view.draft_time_s``). k = 0 is always a candidate, with goodput
R / step_time(R) and no drafting at all: SmartSpec never predicts itself below no speculation.

The choice is made in ``proposal_length``, before drafting (the engine then drafts only k tokens, and
nothing when k = 0); ``__call__`` verifies the whole proposal.

Estimating alpha from outcomes (our choice; the paper keeps a moving average of the observed acceptance
rate): a verify step of l drafts that accepted a of them shows a accepted drafts and one rejection when
a < l (later drafts were never tested; the engine clips l to the request's remaining output first, so a
short accepted run is a real rejection). Under the geometric model the maximum-likelihood rate is
accepted / (accepted + rejections), over "trials" = accepted drafts + rejections (about 4 per step at
alpha 0.8 and gamma 7). The estimator pools trials, never averages per-step ratios:

* window: every count is a decayed sum, each older step weighing ``1 - ema`` times the next (``ema`` 0.02:
  a half-life of 34 steps; the sums hold about 1 / ema = 50 steps);
* batch-wide: the sums of accepted drafts and rejections over every request's steps (the same decay per
  step), started from ``prior_trials`` pseudo-trials at ``prior_alpha``; alpha_batch = A_b / (A_b + J_b);
* per request: its own decayed sums A_r, J_r shrunk towards the batch rate with ``prior_trials`` pseudo-trials
  (a beta prior, empirical Bayes): alpha_r = (A_r + m alpha_batch) / (A_r + J_r + m), m = ``prior_trials``.
  A new request starts at the batch rate; its own evidence takes over as it verifies.

With constant acceptance 0.8, gamma 7 on a flat 20 ms profile, closed loop (tests/test_plugins.py), at least
90% of request-step estimates lie within 0.8 +- 0.05 after 200 steps (an estimate from n trials has sd
sqrt(0.16 / n): 0.03 needs about 180 trials, about 45 steps of one request or the batch's pooled history).
The earlier estimator, moving averages with weight 0.2 started from a request's first step, left about half
of them outside.

Timing (DESIGN.md "Timeline under ZOS"): k is chosen from estimates that exclude the newest outcome
(those of the previous step are folded in only after deciding), and the batch size R (1 + k) does not
depend on this step's confidences, so the batch shape is fixed before they exist: ``fits_zos = True``.

Exploration: when k = 0 wins no outcome is observed, so the estimate could never recover. Every
``probe_every``-th step that would verify nothing verifies one draft per request instead (about 1/64 of
the steps by default), which keeps a moving estimate at the cost of one verified token per request on
those steps.
"""

from __future__ import annotations

import numpy as np


def expected_tokens(alpha: np.ndarray, k: np.ndarray) -> np.ndarray:
    """E(k) = sum_{j=0..k} alpha^j: expected tokens emitted per request-step when verifying k drafts.

    Args:
        alpha: (R,) acceptance rates in [0, 1].
        k: (K,) candidate proposal lengths (ints >= 0).

    Returns:
        (K, R) expected emitted tokens, the target's own token included.
    """
    powers = alpha[None, :] ** np.arange(int(k.max()) + 1)[:, None]        # (kmax+1, R): alpha^j
    return np.cumsum(powers, axis=0)[k]                                   # (K, R)


class SmartSpec:
    """Goodput-based uniform proposal length per step (module docstring).

    Args (all but ``gamma`` are knobs, declared in ``knobs`` with their defaults):
        gamma: largest proposal length considered (capped at the step's gamma); None = the step's gamma.
        ema: the estimator's window: each older step weighs ``1 - ema`` times the next, in (0, 1].
        prior_alpha: acceptance assumed before any outcome, in (0, 1).
        prior_trials: strength of the batch rate in a request's estimate, pseudo-trials >= 0 (module docstring).
        draft_fraction: a margin on the drafter's own cost model, >= 0: a k-token proposal is charged
            ``draft_time_s(k) * (1 + draft_fraction * k)`` (0 by default: the cost model as it is).
        probe_every: every n-th would-be-empty step verifies one draft per request (0 disables probing).

    Raises:
        ValueError: an argument outside its range.
    """

    name = "smartspec"
    fits_zos = True
    knobs = {"ema": 0.02, "prior_alpha": 0.5, "prior_trials": 40.0, "draft_fraction": 0.0, "probe_every": 64}

    def __init__(self, gamma: int | None = None, ema: float = knobs["ema"], prior_alpha: float = knobs["prior_alpha"],
                 prior_trials: float = knobs["prior_trials"], draft_fraction: float = knobs["draft_fraction"],
                 probe_every: int = knobs["probe_every"]) -> None:
        if gamma is not None and int(gamma) < 0:
            raise ValueError(f"gamma: expected an int >= 0 or None, got {gamma!r}")
        if not 0.0 < ema <= 1.0:
            raise ValueError(f"ema: expected a float in (0, 1], got {ema!r}")
        if not 0.0 < prior_alpha < 1.0:
            raise ValueError(f"prior_alpha: expected a float in (0, 1), got {prior_alpha!r}")
        if not prior_trials >= 0:
            raise ValueError(f"prior_trials: expected a float >= 0, got {prior_trials!r}")
        if draft_fraction < 0:
            raise ValueError(f"draft_fraction: expected a float >= 0, got {draft_fraction!r}")
        if probe_every < 0:
            raise ValueError(f"probe_every: expected an int >= 0, got {probe_every!r}")
        self.gamma = gamma
        self.ema, self.prior_alpha, self.prior_trials = float(ema), float(prior_alpha), float(prior_trials)
        self.draft_fraction, self.probe_every = float(draft_fraction), int(probe_every)
        self._acc = np.zeros(0)                  # per request id: decayed sum of accepted drafts
        self._rej = np.zeros(0)                  # per request id: decayed sum of rejections
        # batch-wide decayed (accepted, rejections), from prior_trials pseudo-trials at prior_alpha (>= 1e-9 so
        # the rate is defined with prior_trials = 0)
        m = max(self.prior_trials, 1e-9)
        self._batch = np.array([prior_alpha * m, (1.0 - prior_alpha) * m])
        self._empty_steps = 0
        self.last_k = 0                          # the proposal length chosen at the latest step

    def batch_alpha(self) -> float:
        """The batch-wide estimate A_b / (A_b + J_b) (module docstring)."""
        return float(self._batch[0] / self._batch.sum())

    def alpha_estimate(self, request_ids: np.ndarray) -> np.ndarray:
        """(R,) current acceptance estimates (A_r + m alpha_batch) / (A_r + J_r + m), m = ``prior_trials``."""
        self._grow(request_ids)
        acc, rej = self._acc[request_ids], self._rej[request_ids]
        m, batch = self.prior_trials, self.batch_alpha()
        trials = acc + rej + m
        return np.divide(acc + m * batch, trials, out=np.full(acc.shape, batch), where=trials > 0)

    def proposal_length(self, view) -> int:
        """k for this step, chosen before drafting from the causal history (module docstring)."""
        R = view.num_requests
        kmax = view.gamma if self.gamma is None else min(int(self.gamma), view.gamma)
        if R == 0 or kmax == 0:
            self._observe(view)
            self.last_k = 0
            return 0
        alpha = self.alpha_estimate(view.request_ids)                # (R,) excludes the newest outcome
        k = np.arange(kmax + 1)                                      # (K,) candidate proposal lengths
        fits = R * (1 + k) <= view.profile.max_batch_tokens
        k = k[fits]
        tokens = expected_tokens(alpha, k).sum(axis=1)              # (K,) expected tokens of the batch
        step_s = 1.0 / view.sps(R * (1 + k))                         # (K,) target step time
        draft_s = np.array([view.draft_time_s(int(j)) for j in k]) * (1.0 + self.draft_fraction * k)
        goodput = tokens / (step_s + draft_s)
        best = int(k[np.argmax(goodput)])                            # first max: ties go to shorter k
        if best == 0 and self.probe_every:
            self._empty_steps += 1
            if self._empty_steps % self.probe_every == 0:
                best = 1
        self.last_k = best
        self._observe(view)
        return best

    def __call__(self, view) -> np.ndarray:
        return np.full(view.num_requests, view.gamma, dtype=np.int64)   # verify the whole proposal

    def _grow(self, request_ids: np.ndarray) -> None:
        need = int(request_ids.max()) + 1 if request_ids.size else 0
        if need > self._acc.size:
            pad = need - self._acc.size
            self._acc = np.concatenate([self._acc, np.zeros(pad)])
            self._rej = np.concatenate([self._rej, np.zeros(pad)])

    def _observe(self, view) -> None:
        """Fold each request's previous verify step (last_verify_len, last_accepted) into the decayed sums."""
        ids = view.request_ids
        if ids.size == 0:
            return
        self._grow(ids)
        had = view.last_verify_len > 0                               # (R,) steps that verified drafts
        if not had.any():
            return
        ids = ids[had]
        acc = view.last_accepted[had].astype(float)                 # accepted drafts of that step
        rej = (view.last_accepted[had] < view.last_verify_len[had]).astype(float)   # 1 if a rejection
        keep = 1.0 - self.ema
        self._acc[ids] = keep * self._acc[ids] + acc
        self._rej[ids] = keep * self._rej[ids] + rej
        self._batch = keep * self._batch + np.array([acc.sum(), rej.sum()])
