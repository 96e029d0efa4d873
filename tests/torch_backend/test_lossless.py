"""Losslessness of the torch backend's speculative decoding, on targets with closed-form distributions.

* Hand cases of the rejection sampler (all accepted -> bonus from p_t; p_d = 0 where p_t > 0; an
  all-zero residual; greedy argmax matching).
* Chi-square: sampled outputs under speculative decoding (static and dspark policies, a drafter with
  zeros where the target has mass) against the exact target distribution of a Markov table target.
* DSpark paper Appendix A on real sampling: target (0.7, 0.3), draft (0.5, 0.5), SPS(1, 2, 3) =
  (1.0, 0.5, 0.45), c_1 = 0.8, c_2 = 0.9 after A and 0 after B. A synchronous global search (no early
  stop) moves P(A) of each step's first new token to 0.5 * 1 + 0.5 * 0.7 = 0.85; ``dspark`` (early stop)
  and ``dspark-async`` keep 0.7.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

if os.environ.get("CI", "").lower() == "true" and os.environ.get("SPECSIM_TORCH_PHASE") == "1":
    import torch  # the torch phase of .ci/run: a missing torch is a failure, never a skip
else:
    torch = pytest.importorskip("torch")

from scipy.stats import chisquare  # noqa: E402

from specsim.backends.torch.decode import SpecDecoder, verify_block  # noqa: E402
from specsim.backends.torch.drafters import TableDrafter  # noqa: E402
from specsim.backends.torch.models import TableTarget  # noqa: E402
from specsim.hardware.profile import StepTimeProfile  # noqa: E402
from specsim.policies import make_policy  # noqa: E402
from specsim.policies.base import FunctionPolicy  # noqa: E402
from specsim.policies.dspark import lengths_from_top, ranked_candidates, theta_curve  # noqa: E402

T64 = torch.float64


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: one intra-op thread avoids thread-pool overhead on a shared 2-core machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _t(x, dtype=T64):
    return torch.tensor(x, dtype=dtype)


# ------------------------------------------------------------------------------ hand cases

def test_all_accepted_gives_bonus_from_target():
    p = _t([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])    # (1, 3, 3): bonus row = token 0
    q = _t([[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]])
    acc, nxt = verify_block(torch.tensor([[1, 2]]), q, p, torch.tensor([2]), False, _t([[0.99, 0.99]]), _t([0.5]))
    assert acc.tolist() == [2] and nxt.tolist() == [0]


def test_zero_verify_length_samples_target_token():
    p = _t([[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])
    q = _t([[[0.0, 1.0, 0.0]]])
    acc, nxt = verify_block(torch.tensor([[1]]), q, p, torch.tensor([0]), False, _t([[0.0]]), _t([0.3]))
    assert acc.tolist() == [0] and nxt.tolist() == [2]


def test_rejection_samples_residual_where_draft_has_no_mass():
    # p_t = (0.5, 0.5, 0), p_d = (0, 1, 0): drafted 1 accepted with prob 0.5; the residual is (1, 0, 0).
    p = _t([[[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]])
    q = _t([[[0.0, 1.0, 0.0]]])
    acc, nxt = verify_block(torch.tensor([[1]]), q, p, torch.tensor([1]), False, _t([[0.6]]), _t([0.999]))
    assert acc.tolist() == [0] and nxt.tolist() == [0]               # rejected (0.6 >= 0.5), residual -> 0
    acc, nxt = verify_block(torch.tensor([[1]]), q, p, torch.tensor([1]), False, _t([[0.4]]), _t([0.999]))
    assert acc.tolist() == [1] and nxt.tolist() == [2]               # accepted, bonus from row 1


def test_all_zero_residual_falls_back_to_target():
    # p_t == p_d: the acceptance test u * q < p always passes for u < 1; force the rejection branch with
    # u = 1.0 to reach the all-zero residual, which must fall back to p_t (no NaN, a valid token).
    p = _t([[[0.25, 0.75], [0.5, 0.5]]])
    q = _t([[[0.25, 0.75]]])
    acc, nxt = verify_block(torch.tensor([[1]]), q, p, torch.tensor([1]), False, _t([[1.0]]), _t([0.1]))
    assert acc.tolist() == [0] and nxt.tolist() == [0]               # 0.1 * total falls in token 0 of p_t


def test_greedy_accepts_exact_argmax_matches_only():
    p = _t([[[0.1, 0.9], [0.6, 0.4], [0.2, 0.8]]])
    q = _t([[[0.5, 0.5], [0.5, 0.5]]])
    acc, nxt = verify_block(torch.tensor([[1, 1]]), q, p, torch.tensor([2]), True, _t([[0.0, 0.0]]), _t([0.0]))
    assert acc.tolist() == [1] and nxt.tolist() == [0]


# ------------------------------------------------------------------------------ chi-square

def _markov_pair(V: int = 4, seed: int = 5):
    rng = np.random.default_rng(np.random.SeedSequence([seed]))
    target = rng.dirichlet(np.ones(V), size=V)                      # (V, V)
    draft = rng.dirichlet(np.ones(V), size=V)
    draft[:, 0] = 0.0                                               # p_d = 0 where p_t > 0 (token 0)
    draft /= draft.sum(1, keepdims=True)
    return target, draft


@pytest.mark.parametrize("policy", ["static", "dspark"])
def test_sampled_outputs_match_target_distribution(policy):
    V, gamma, n = 4, 3, 2000
    target_tab, draft_tab = _markov_pair(V)
    conf = np.full((gamma, V), 0.6)
    conf[:, 2] = 0.95                                               # confidence depends on the previous draft
    target = TableTarget(target_tab)
    drafter = TableDrafter(draft_tab, conf)
    profile = StepTimeProfile(np.array([1, 4 * n]), np.array([1.0, 1.3]))
    dec = SpecDecoder(target, drafter, make_policy(policy, gamma=gamma), profile, gamma=gamma, greedy=False,
                      temperature=1.0, seed=11, max_batch=n)
    for _ in range(n):
        dec.add_request([1], 3)
    dec.run()
    outs = np.array(list(dec.outputs().values()))                  # (n, 3)
    assert outs.shape == (n, 3)
    verified = dec.step_log()["verify_len"].sum()
    assert verified > 0                                             # drafts were really verified
    # exact joint law of (y1, y2, y3) after prompt token 1
    exact = (target_tab[1][:, None, None] * target_tab[:, :, None] * target_tab[None, :, :]).ravel()
    counts = np.bincount(outs[:, 0] * V * V + outs[:, 1] * V + outs[:, 2], minlength=V ** 3)
    big = exact * n >= 5                                            # pool sparse cells (chi-square validity)
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(exact[big], exact[~big].sum()) * n
    stat, pval = chisquare(obs, exp)
    assert pval > 1e-3, (stat, pval)


# ------------------------------------------------------------------------------ Appendix A

def _global_search(view):
    """A synchronous scheduler that searches globally without early stop (DSpark paper Appendix A)."""
    R = view.num_requests
    a_sorted, r_sorted = ranked_candidates(view.survival())
    theta = theta_curve(R, a_sorted, view.sps, view.profile.max_batch_tokens)
    return lengths_from_top(int(np.argmax(theta)), r_sorted, R)


def _appendix_a_first_tokens(policy, num_requests: int = 220, seed: int = 3) -> np.ndarray:
    target = TableTarget(np.array([[0.7, 0.3], [0.7, 0.3]]))         # A = 0, B = 1
    drafter = TableDrafter(np.array([[0.5, 0.5], [0.5, 0.5]]),
                           np.array([[0.8, 0.8], [0.9, 0.0]]))       # c_1 = 0.8; c_2 = 0.9 after A, 0 after B
    profile = StepTimeProfile(np.array([1, 2, 3]), np.array([1.0, 2.0, 1 / 0.45]))
    dec = SpecDecoder(target, drafter, policy, profile, gamma=2, greedy=False, seed=seed, max_batch=1,
                      clip_to_budget=False)                          # the budget truncates mid-block instead
    for _ in range(num_requests):
        dec.add_request([0], 10)
    dec.run()
    first = np.array([toks[0] for _, step, toks in dec.emissions if step >= 0])
    outs = dec.outputs()
    assert all(len(v) == 10 for v in outs.values())                 # budget reached mid-block: exactly 10
    return first


def _assert_share_a(first: np.ndarray, expected: float) -> None:
    share = float(np.mean(first == 0))
    se = np.sqrt(expected * (1 - expected) / first.size)
    assert abs(share - expected) < 4 * se, (share, expected, first.size)


def test_appendix_a_global_search_is_biased():
    first = _appendix_a_first_tokens(FunctionPolicy(_global_search, "global-no-early-stop"))
    _assert_share_a(first, 0.85)


@pytest.mark.parametrize("name", ["dspark", "dspark-async"])
def test_appendix_a_dspark_policies_stay_lossless(name):
    first = _appendix_a_first_tokens(make_policy(name, gamma=2))
    _assert_share_a(first, 0.7)
