"""A minimal verification policy to copy: verify each request's drafts while their survival stays high.

Run it with ``specsim run --policy policies/template.py:SurvivalCutoff --trace traces/prod.jsonl``
(or in a sweep: ``--policies dspark,policies/template.py:SurvivalCutoff``).

The contract (``specsim/policies/base.py`` has the full text):

* ``name`` (str): the label in outputs, sweeps and error messages.
* ``fits_zos`` (bool): True only when the batch size is fixed before this step's confidences exist, so
  zero-overhead scheduling hides the host overhead. This policy reads this step's confidences, so False:
  the engine charges ``engine.host_overhead_s`` on each of its steps.
* ``__call__(view) -> np.ndarray``: verify lengths l_r, shape (R,), integers in [0, view.gamma].
* ``knobs`` (dict): the knobs the constructor accepts, with their defaults. A run passes the ones set in
  its scenario's ``[policy.knobs]`` table (or ``--threshold``), the declared default otherwise; any other
  knob is an error. A constructor argument named ``gamma`` receives the run's gamma.
* Optional hooks (``capacity``, ``proposal_length``), ``view_kind``, ``drafter``, ``gamma``: see
  ``specsim.policies.base.PolicyBase``, which lists them all with their defaults. Subclassing it is
  optional: a plain class like this one works the same.

What a view holds (all read-only, one row per running request r, R rows):
``view.conf`` / ``view.conf_raw`` (R, gamma) calibrated / raw confidences c_{r,k}; ``view.survival()``
(R, gamma) their cumulative products; ``view.sps(B)`` target steps per second at B verified tokens;
``view.hist_drafts_verified`` / ``view.hist_drafts_accepted`` / ``view.last_verify_len`` /
``view.last_accepted`` the causal history; ``view.num_generated``, ``view.prompt_tokens``,
``view.request_ids``, ``view.domains``, ``view.now_s``, ``view.step``. Never the outcomes of this step:
that is what keeps speculative decoding lossless (DESIGN.md "Causality").
"""

from __future__ import annotations

import numpy as np


class SurvivalCutoff:
    """Verify draft j of request r while its calibrated survival a_{r,j} = c_{r,1} ... c_{r,j} >= ``threshold``.

    Load-unaware (it never looks at ``view.sps``), so at high load it verifies as much as at low load;
    compare it with ``dspark`` in a sweep to see what hardware awareness buys.

    Args:
        threshold: minimum survival in [0, 1] for a draft to be verified (a knob, default 0.5: ``--threshold``
            or the scenario's ``[policy.knobs] threshold``). 0 verifies everything, 1 nothing.

    Raises:
        ValueError: threshold outside [0, 1].
    """

    name = "survival-cutoff"
    fits_zos = False  # the batch size depends on this step's confidences
    knobs = {"threshold": 0.5}

    def __init__(self, threshold: float = knobs["threshold"]) -> None:
        if not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"threshold: expected a float in [0, 1], got {threshold!r}")
        self.threshold = float(threshold)

    def __call__(self, view) -> np.ndarray:
        survival = view.survival()                              # (R, gamma), non-increasing along a row
        return np.sum(survival >= self.threshold, axis=1).astype(np.int64)   # (R,) prefix lengths
