"""``acceptance.length``: an operator gives the acceptance length their engine reports (tokens per verify step,
the bonus token included) at the drafts it ran, and the constant per-position rate is solved from it."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.acceptance.model import alpha_for_acceptance_length, build_acceptance_model
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload.trace import Trace


def test_the_rate_is_solved_from_the_length_at_its_gamma():
    a = alpha_for_acceptance_length(3.43, 7)
    assert sum(a ** i for i in range(8)) == pytest.approx(3.43, rel=1e-9)      # (1 - a^8) / (1 - a)
    assert alpha_for_acceptance_length(1.5, 1) == pytest.approx(0.5)                  # one draft: tau = 1 + alpha
    m = build_acceptance_model("dspark", 3, length=3.43, length_gamma=7, domains=("code",))
    assert m.alpha["code"] == pytest.approx((a, a, a))          # measured at 7 drafts, run at 3: the same rate
    at_run_gamma = build_acceptance_model("mtp", 2, length=2.27, domains=("code",))
    assert at_run_gamma.alpha["code"] == pytest.approx((alpha_for_acceptance_length(2.27, 2),) * 2)
    with pytest.raises(SpecsimInputError, match=r"a value in \(1, 3\)"):
        build_acceptance_model("mtp", 2, length=3.5)


@pytest.mark.parametrize("over, field, says", [
    (["acceptance.length=1.0"], "acceptance.length", "a float > 1"),
    (["acceptance.length=3.4", "acceptance.constant_alpha=0.7"], "acceptance.length",
     "beside acceptance.constant_alpha"),
    (["acceptance.length_gamma=7"], "acceptance.length_gamma", "acceptance.length set too"),
])
def test_bad_lengths_are_named(over, field, says):
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(None, over)
    assert e.value.field == field and says in str(e.value)


def test_a_run_reproduces_the_length_it_was_given():
    """MTP k = 2 at the measured 2.27 (the public B200 HumanEval sweep), latent spreads off: the simulated
    acceptance length is the one given, and no built-in-rates notice is printed."""
    n = 64
    tr = Trace(request_id=[f"r{i}" for i in range(n)], arrival_s=np.zeros(n), prompt_tokens=np.full(n, 100),
               output_tokens=np.full(n, 400), domain=["code"] * n, source="t")
    sc = load_scenario(None, ["acceptance.length=2.27", "acceptance.sigma_request=0", "acceptance.sigma_step=0",
                              "acceptance.sigma_token=0"])
    res = simulate(tr, "static", sc, seed=0, gamma=2, drafter="mtp", concurrency=16)
    assert res.summary["mean_acceptance_length"] == pytest.approx(2.27, rel=0.02)
    assert not res.summary.get("acceptance_notice")
