"""Drafter cost models: seconds to draft gamma tokens for R running requests.

Families (DESIGN.md vocabulary): ``none`` (no drafter), ``mtp`` (one MTP module step per draft),
``parallel`` (DFlash-style: one drafter forward over R x gamma positions, nearly flat in gamma),
``autoregressive`` (EAGLE-style: gamma sequential drafter forwards), ``semi-autoregressive`` (DSpark:
parallel backbone plus a light sequential head per position).

Costs are expressed as fractions of the target's step time at batch R (the drafter shares the GPU
and its kernels scale with the same batch). Default fractions are documented in ``DRAFTER_FAMILIES``.
With a drafter profile (``DrafterCost(..., drafter_profile=p)``, a :class:`StepTimeProfile` of the
drafter itself, e.g. from ``specsim profile measure``) the time comes from it instead:

* parallel: ``p.step_time(R * gamma)`` (one forward over R x gamma positions);
* autoregressive, mtp: ``gamma * p.step_time(R)`` (gamma sequential forwards of R tokens);
* semi-autoregressive: the parallel time plus ``gamma * per_draft_fraction_head * target_step(R)``
  for the sequential head (PAPER.md 8.3: +0.2% of a round at draft length 4 to +1.3% at 16).
"""

from __future__ import annotations

from dataclasses import dataclass

from specsim.errors import SpecsimInputError
from specsim.hardware.profile import StepTimeProfile


@dataclass(frozen=True)
class DrafterCost:
    """Draft time model: ``t = target_step(R) * (base_fraction + per_draft_fraction * gamma)``.

    Args:
        family: one of the families in the module docstring.
        base_fraction: cost independent of gamma, as a fraction of the target step at batch R.
        per_draft_fraction: cost per drafted position, same unit.
    """

    family: str
    base_fraction: float
    per_draft_fraction: float
    drafter_profile: StepTimeProfile | None = None
    head_fraction: float = 0.001

    def draft_time_s(self, num_requests: int, gamma: int, profile: StepTimeProfile,
                     kv_tokens: float = 0.0) -> float:
        """Seconds to draft ``gamma`` tokens for each of ``num_requests`` requests (0 for ``none``).

        Args:
            num_requests: R, requests drafting this step.
            gamma: draft tokens per request.
            profile: the target's profile (fractions are of ``profile.step_time(R)``).
            kv_tokens: KV tokens the drafter reads (used only with a drafter profile).
        """
        if self.family == "none" or num_requests == 0 or gamma == 0:
            return 0.0
        base = profile.step_time(min(num_requests, profile.max_batch_tokens))
        d = self.drafter_profile
        if d is None:
            return float(base * (self.base_fraction + self.per_draft_fraction * gamma))
        if self.family in ("autoregressive", "mtp"):
            return float(gamma * d.step_time(min(num_requests, d.max_batch_tokens), kv_tokens))
        par = d.step_time(min(num_requests * gamma, d.max_batch_tokens), kv_tokens)
        head = gamma * self.head_fraction * base if self.family == "semi-autoregressive" else 0.0
        return float(par + head)


# Defaults (documented choices; derivations in docs/profiles.md "Drafter cost models"):
# PAPER.md 8.3 per-draft numbers: DFlash round +2.6% from length 4 to 16 = 12 more drafts -> 0.0022 of a
# round (~0.002 of a target step) per draft; DSpark's Markov head adds (1.3% - 0.2%) / 12 ~ 0.001 per draft.
# - parallel: a 5-layer drafter on a 36-layer target ~ 5/36 ~ 0.14 of a target step, nearly flat in gamma
#   (PAPER.md 8.3: DFlash round time grows 2.6% from draft length 4 to 16 at batch 128).
# - semi-autoregressive: parallel plus the Markov head's serial sampling loop, +0.2% (len 4) to +1.3%
#   (len 16) of a whole round (PAPER.md 8.3) ~ 0.001 of a step per position on top of parallel.
# - autoregressive: one 1-layer EAGLE head forward per draft ~ 1/36 of a target step each.
# - mtp: one MTP module (one transformer block) per draft ~ 1/61 of a DeepSeek-V3 step each.
DRAFTER_FAMILIES: dict[str, DrafterCost] = {
    "none": DrafterCost("none", 0.0, 0.0),
    "parallel": DrafterCost("parallel", 0.14, 0.002),
    "semi-autoregressive": DrafterCost("semi-autoregressive", 0.14, 0.003),
    "autoregressive": DrafterCost("autoregressive", 0.0, 0.028),
    "mtp": DrafterCost("mtp", 0.0, 0.016),
}

DRAFTER_FAMILY_OF = {"none": "none", "mtp": "mtp", "eagle3": "autoregressive",
                     "dflash": "parallel", "dspark": "semi-autoregressive"}


def drafter_cost(drafter: str) -> DrafterCost:
    """The default cost model of a named drafter (``mtp``, ``eagle3``, ``dflash``, ``dspark``, ``none``).

    Raises:
        SpecsimInputError: unknown drafter name.
    """
    fam = DRAFTER_FAMILY_OF.get(drafter)
    if fam is None:
        raise SpecsimInputError(None, None, "drafter", f"one of {sorted(DRAFTER_FAMILY_OF)}", repr(drafter))
    return DRAFTER_FAMILIES[fam]
