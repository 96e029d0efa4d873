"""Policies on hand-built views: the paper's Appendix-A case, dspark-async's top-K and capacity search,
SpecDec++'s rule, and causality (decisions never depend on hidden outcomes); PolicyBase's defaults, the
hooks the engine reads (policy_hooks) and the knobs each policy declares."""

from __future__ import annotations

import dataclasses
import inspect
import itertools

import numpy as np
import pytest

from specsim.policies.cost_table import COST_AWARE, TABLE_KNOBS

from helpers import make_view
from specsim.errors import SpecsimInputError
from specsim.policies import (DSpark, DSparkAsync, PolicyBase, SchedulingView, SpecDecPP, StaticK, make_policy,
                              policy_hooks, policy_knobs, register_policy, registry)
from specsim.policies.base import OracleView, ReferenceView, declared_knobs
from specsim.policies.dspark import ranked_candidates


# ---------------------------------------------------------------- the paper's Appendix A
@pytest.mark.parametrize("c2", [0.0, 0.3, 0.9, 1.0])
def test_appendix_a_dspark_early_stop_returns_zero_whatever_c2(c2):
    view = make_view([[0.8, c2]], sps_values=[1.0, 0.5, 0.45])
    assert DSpark(early_stop="paper")(view).tolist() == [0]
    # the hull rule scores B = 2 on the chord from (1, 1 s) to (3, 2.22 s): T = 1.61 s, Theta_1 = 1.8 / 1.61 >
    # Theta_0 = 1, so draft 1 is admitted whatever c2; draft 2 then needs 1.8 + 0.8 c2 > 1.117 * 2.22 (c2 > 0.85)
    assert DSpark(early_stop="hull")(view).tolist() == ([2] if c2 > 0.85 else [1])


def _global_search(view):
    """Plain-loop reference: evaluate every prefix allocation and keep the best Theta."""
    R, g = view.conf.shape
    surv = np.cumprod(view.conf, axis=1)
    best, best_l = -1.0, None
    for ls in itertools.product(range(g + 1), repeat=R):
        tau = R + sum(surv[r, :l].sum() for r, l in enumerate(ls))
        theta = tau * view.sps(R + sum(ls))
        if theta > best + 1e-12:
            best, best_l = theta, ls
    return list(best_l), best


def _random_sawtooth_view(rng):
    """A small random view (R, gamma <= 3) on a decreasing SPS curve with one sawtooth tooth."""
    R, g = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    conf = rng.uniform(0.05, 0.99, (R, g))
    sps = 1.0 / np.cumsum(rng.uniform(0.05, 1.0, R * (g + 1)))
    sps[rng.integers(0, sps.size)] *= 1.3                                  # a sawtooth tooth
    return R, g, conf, make_view(conf, sps)


@pytest.mark.parametrize("c2, expected", [(0.9, [2]), (0.0, [0])])
def test_appendix_a_global_search(c2, expected):
    from specsim.policies.reference import DSparkGlobal
    view = make_view([[0.8, c2]], sps_values=[1.0, 0.5, 0.45])
    assert _global_search(view)[0] == expected
    assert DSparkGlobal()(view).tolist() == expected


def test_dspark_global_equals_brute_force_on_random_views():
    from specsim.policies.reference import DSparkGlobal
    rng = np.random.default_rng(21)
    for _ in range(60):
        R, g, conf, view = _random_sawtooth_view(rng)
        lens = DSparkGlobal()(view)
        surv = np.cumprod(conf, axis=1)
        theta = (R + sum(surv[r, :l].sum() for r, l in enumerate(lens))) * view.sps(R + int(lens.sum()))
        assert theta == pytest.approx(_global_search(view)[1], rel=1e-12)


def test_dspark_theta_rises_at_every_admission_and_stops_at_first_drop():
    rng = np.random.default_rng(3)
    for _ in range(50):
        R, g = rng.integers(1, 6), rng.integers(1, 5)
        conf = rng.uniform(0.05, 0.99, (R, g))
        sps = 1.0 / np.cumsum(rng.uniform(0.01, 1.0, R * (g + 1)))     # decreasing SPS, any shape
        view = make_view(conf, sps)
        lens = DSpark(early_stop="paper")(view)
        surv = np.cumprod(conf, axis=1)
        a_sorted, _ = ranked_candidates(surv)
        n = int(lens.sum())
        tau = R + np.concatenate([[0.0], np.cumsum(a_sorted)])
        theta = tau * view.sps(R + np.arange(a_sorted.size + 1))
        assert np.all(np.diff(theta[: n + 1]) > 0)
        assert n == a_sorted.size or theta[n + 1] <= theta[n]
        # the admitted set is prefix-closed and made of the top-n survivals
        admitted = np.concatenate([surv[r, :l] for r, l in enumerate(lens)])
        np.testing.assert_allclose(np.sort(admitted)[::-1], a_sorted[:n])


# ---------------------------------------------------------------- dspark-async
def test_async_allocation_is_top_k_survivals():
    rng = np.random.default_rng(7)
    pol = DSparkAsync()
    for _ in range(100):
        R, g = rng.integers(1, 8), rng.integers(1, 6)
        conf = rng.uniform(0.01, 0.999, (R, g))
        k = int(rng.integers(0, R * g + 3))
        view = make_view(conf, np.linspace(1.0, 0.2, R * (g + 1)), capacity=k)
        lens = pol(view)
        surv = np.cumprod(conf, axis=1)
        assert lens.sum() == min(k, R * g)
        chosen = np.concatenate([surv[r, :l] for r, l in enumerate(lens)])
        top = np.sort(surv.ravel())[::-1][: min(k, R * g)]
        np.testing.assert_allclose(np.sort(chosen)[::-1], top)


def test_async_capacity_equals_brute_force_search():
    rng = np.random.default_rng(11)
    pol = DSparkAsync()
    for _ in range(60):
        R, g, conf, old = _random_sawtooth_view(rng)
        k = pol.capacity(old, np.arange(R), R)
        best_l, best_theta = _global_search(old)
        surv = np.cumprod(conf, axis=1)
        a = np.sort(surv.ravel())[::-1]
        theta_k = (R + a[:k].sum()) * old.sps(R + k)
        assert theta_k == pytest.approx(best_theta, rel=1e-12)


def test_async_capacity_only_counts_requests_still_running():
    pol = DSparkAsync()
    old = make_view([[0.99, 0.99], [0.99, 0.99]], [1.0, 0.99, 0.98, 0.97, 0.96], ids=[10, 20])
    # only request 20 still runs (R_t = 1): at most its 2 candidates count
    assert pol.capacity(old, np.array([20]), 1) == 2
    assert pol.capacity(None, np.array([20]), 1) == 0


# ---------------------------------------------------------------- simple policies
def test_specdecpp_threshold_rule():
    view = make_view([[0.9, 0.9, 0.5], [0.6, 0.9, 0.9]], np.ones(8))
    # survival row 0: .9 .81 .405 -> 1 - s: .1 .19 .595 ; row 1: .6 .54 .486 -> .4 .46 .514
    assert SpecDecPP(0.2)(view).tolist() == [2, 0]
    assert SpecDecPP(0.45)(view).tolist() == [2, 1]
    assert SpecDecPP(1.0)(view).tolist() == [3, 3]


def test_static_k_and_registry():
    view = make_view(np.full((3, 4), 0.5), np.ones(16))
    assert StaticK()(view).tolist() == [4, 4, 4]
    assert make_policy("static", gamma=2)(view).tolist() == [2, 2, 2]
    with pytest.raises(SpecsimInputError, match="policy"):
        make_policy("no-such-policy")


def test_views_are_read_only():
    view = make_view([[0.5, 0.5]], np.ones(4))
    with pytest.raises(ValueError):
        view.conf[0, 0] = 1.0
    assert not hasattr(view, "accept")


# ---------------------------------------------------------------- PolicyBase, policy_hooks, knobs
class _Half(PolicyBase):
    """A subclass overriding only name and __call__: every other member keeps PolicyBase's default."""

    name = "half"

    def __call__(self, view):
        return np.full(view.num_requests, view.gamma // 2, dtype=np.int64)


def test_policy_base_defaults_mean_not_used():
    assert (PolicyBase.fits_zos, PolicyBase.view_kind, PolicyBase.knobs, PolicyBase.drafter, PolicyBase.gamma,
            PolicyBase.capacity, PolicyBase.proposal_length) == (False, "causal", {}, None, None, None, None)
    hooks = policy_hooks(_Half())
    assert (hooks.name, hooks.fits_zos, hooks.view_cls, hooks.capacity, hooks.proposal_length) == (
        "half", False, SchedulingView, None, None)
    assert hooks.decide(make_view(np.full((3, 5), 0.5), np.ones(32))).tolist() == [2, 2, 2]
    with pytest.raises(dataclasses.FrozenInstanceError):
        hooks.name = "other"


# name -> (fits_zos, view class, capacity used, proposal_length used, knobs)
BUILT_INS = {
    "none": (True, SchedulingView, False, False, {}),
    "static": (True, SchedulingView, False, False, {}),
    "mtp1": (True, SchedulingView, False, False, {}),
    "specdecpp": (False, SchedulingView, False, False, {"threshold": 0.3}),
    "threshold": (False, SchedulingView, False, False, {"threshold": 0.3}),
    "dspark": (False, SchedulingView, False, False, {"early_stop": "hull", "diagnose": False}),
    "dspark-async": (True, SchedulingView, True, False, {}),
    "dspark-global": (False, ReferenceView, False, False, {}),
    "oracle": (True, OracleView, False, False, {}),
    "vllm-adaptive": (True, SchedulingView, True, False, {"enable_adaptive_verification": True,
                                                          "profile_context_len": 8192, "cost_table": "vllm"}),
    "trtllm-confidence": (True, SchedulingView, True, False, {"enable_confidence_scheduling": True,
                                                              "min_verify_len": 1, "survival_eps": 0.0,
                                                              "cost_table": "trtllm"}),
    "vllm-dsd": (True, SchedulingView, False, True,
                 {"num_speculative_tokens_per_batch_size": [[1, 16, 7], [17, 64, 3], [65, 1024, 1]]}),
    "trtllm-draft-len-schedule": (True, SchedulingView, False, True, {"draft_len_schedule": None}),
}


@pytest.mark.parametrize("name", sorted(BUILT_INS))
def test_hooks_and_knobs_of_every_built_in(name):
    fits_zos, view_cls, uses_capacity, uses_proposal, knobs = BUILT_INS[name]
    policy = make_policy(name, gamma=4)
    assert isinstance(policy, PolicyBase)
    hooks = policy_hooks(policy)
    assert (hooks.name, hooks.fits_zos, hooks.view_cls) == (name, fits_zos, view_cls)
    assert (hooks.capacity is not None, hooks.proposal_length is not None) == (uses_capacity, uses_proposal)
    # the registry adds the scheduler-table knobs to the paper's cost-aware policies (cost_table.TABLE_KNOBS)
    table = TABLE_KNOBS if name in COST_AWARE else {}
    assert policy_knobs(name) == {**knobs, **table} and knobs == policy_knobs(type(policy))
    # the constructor's defaults are the declared ones (one place per default)
    params = inspect.signature(type(policy)).parameters
    assert {k: params[k].default if not isinstance(params[k].default, tuple) else [list(r) for r in params[k].default]
            for k in knobs} == knobs
    if name in ("none", "static", "mtp1", "specdecpp", "threshold", "dspark", "dspark-async", "dspark-global", "oracle"):
        assert {k: getattr(policy, k) for k in knobs} == knobs                 # defaults reach the policy


def test_forced_drafter_and_gamma():
    assert (make_policy("mtp1").drafter, make_policy("mtp1").gamma) == ("mtp", 1)
    assert (make_policy("none").drafter, make_policy("none").gamma) == ("none", None)
    assert (make_policy("dspark").drafter, make_policy("dspark").gamma) == (None, None)


def test_dspark_async_capacity_through_hooks():
    hooks = policy_hooks(make_policy("dspark-async"))
    assert hooks.capacity(None, np.array([3, 4]), 2) == 0                     # no view two steps old yet
    old = make_view([[0.9, 0.9]], [1.0, 1.0, 1.0])                           # flat SPS: admit every draft
    assert hooks.capacity(old, np.array([0]), 1) == 2


def test_hooks_of_a_plain_function_and_a_plain_class():
    def verify_one(view):
        return np.ones(view.num_requests, dtype=np.int64)

    hooks = policy_hooks(verify_one)
    assert (hooks.name, hooks.fits_zos, hooks.view_cls, hooks.capacity, hooks.proposal_length) == (
        "verify_one", False, SchedulingView, None, None)
    assert hooks.decide(make_view(np.full((2, 3), 0.5), np.ones(8))).tolist() == [1, 1]

    class Plain:                                   # hooks as plain methods, no subclassing
        name, fits_zos = "plain", True

        def proposal_length(self, view):
            return 1

        def __call__(self, view):
            return np.full(view.num_requests, view.gamma, dtype=np.int64)

    hooks = policy_hooks(Plain())
    assert hooks.capacity is None and hooks.proposal_length(None) == 1 and hooks.fits_zos is True


def _policy(**members):
    return type("P", (PolicyBase,), {"name": "p", "__call__": lambda self, v: None, **members})()


@pytest.mark.parametrize("policy, field", [
    (_policy(view_kind="clairvoyant"), "policy p, view_kind"),
    (_policy(name=""), "policy P, name"),
    (_policy(fits_zos="yes"), "policy p, fits_zos"),
    (_policy(drafter=3), "policy p, drafter"),
    (_policy(gamma=-1), "policy p, gamma"),
    (_policy(capacity=8), "policy p, capacity"),
    (_policy(capacity=lambda self, view: 0), "policy p, capacity"),          # wrong arguments
    (_policy(proposal_length=lambda self: 0), "policy p, proposal_length"),
    (type("Q", (PolicyBase,), {"name": "q"})(), "policy q, __call__"),       # no __call__
    (42, "policy"),
])
def test_policy_hooks_rejects_a_bad_member_naming_it(policy, field):
    with pytest.raises(SpecsimInputError) as e:
        policy_hooks(policy)
    assert e.value.field == field


def test_unknown_knob_names_the_policy_the_knob_and_the_accepted_knobs():
    with pytest.raises(SpecsimInputError) as e:
        make_policy("specdecpp", gamma=7, thresold=0.2)
    assert e.value.field == "policy specdecpp, knob thresold" and "threshold" in e.value.expected
    assert str(e.value) == ("field 'policy specdecpp, knob thresold': expected one of the knobs policy specdecpp "
                            "accepts: threshold (closest valid: 'threshold'), got 0.2")
    with pytest.raises(SpecsimInputError, match="no knobs"):
        make_policy("mtp1", threshold=0.3)                                 # no knob is forced into a policy
    with pytest.raises(SpecsimInputError, match="accepts: cost_table, profile_context_len"):
        make_policy("dspark-global", threshold=0.3)                        # only the scheduler-table knobs
    with pytest.raises(SpecsimInputError, match="early_stop"):
        make_policy("dspark", early_stop="convex")                         # out of range, from the constructor
    with pytest.raises(SpecsimInputError, match="knob threshold.*float"):
        make_policy("specdecpp", threshold="high")
    with pytest.raises(SpecsimInputError, match="threshold"):
        make_policy("threshold", threshold=1.5)                            # out of range, from the constructor
    assert make_policy("specdecpp", threshold=0.5).threshold == 0.5
    assert make_policy("threshold", threshold=1).threshold == 1.0          # an int for a float knob


def test_registered_factory_declares_its_knobs(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    register_policy("fixed", lambda gamma=None, drafts=1: StaticK(drafts), "verify `drafts`", knobs={"drafts": 1})
    view = make_view(np.full((2, 4), 0.5), np.ones(16))
    assert make_policy("fixed")(view).tolist() == [1, 1]
    assert make_policy("fixed", drafts=3)(view).tolist() == [3, 3]
    assert policy_knobs("fixed") == {"drafts": 1}
    with pytest.raises(SpecsimInputError, match="fixed.*knob k.*drafts"):
        make_policy("fixed", k=2)
    with pytest.raises(ValueError, match="knobs"):
        register_policy("fixed-class", SpecDecPP, knobs={"threshold": 0.3})  # a class declares its own


def test_declared_knobs_of_plug_in_objects(tmp_path):
    class Declared:
        knobs = {"level": 2}

        def __init__(self, level=1):
            self.level = level

    class Undeclared:                              # written before knobs: its keyword parameters
        def __init__(self, gamma=None, width=3, *, depth=0.5, **rest):
            pass

    assert declared_knobs(Declared) == {"level": 2}
    assert declared_knobs(Undeclared) == {"width": 3, "depth": 0.5}
    assert declared_knobs(lambda view: view) == {}
    with pytest.raises(SpecsimInputError, match="knobs"):
        declared_knobs(type("Bad", (), {"knobs": {"gamma": 3}}))           # gamma is the run's, not a knob
    path = tmp_path / "level.py"
    path.write_text("import numpy as np\n\nclass Level:\n    name, fits_zos = 'level', True\n"
                    "    knobs = {'level': 2}\n\n    def __init__(self, level=1):\n        self.level = level\n\n"
                    "    def __call__(self, view):\n        return np.full(view.num_requests, self.level)\n")
    assert policy_knobs(f"{path}:Level") == {"level": 2}
    assert make_policy(f"{path}:Level").level == 2                          # the declared default wins
    assert make_policy(f"{path}:Level", level=0).level == 0
    with pytest.raises(SpecsimInputError, match="level.*knob lvl"):
        make_policy(f"{path}:Level", lvl=0)


def test_a_misspelt_scenario_knob_names_the_key_and_the_closest_valid_one():
    """Issue 24 item 10: ``--set policy.knobs.threshhold=0.9`` with specdecpp is refused, not run at the default."""
    from specsim.policies.registry import run_knobs
    from specsim.run_config import resolve_policy
    from specsim.scenario import load_scenario

    sc = load_scenario(overrides=["policy.knobs.threshhold=0.9"])
    with pytest.raises(SpecsimInputError) as e:
        resolve_policy("specdecpp", sc, None, None)
    assert e.value.field == "policy.knobs.threshhold" and "closest valid: 'threshold'" in e.value.expected
    # a knob another policy declares stays valid for the shared table: dspark runs, specdecpp reads it
    sc = load_scenario(overrides=["policy.knobs.threshold=0.9"])
    dspark_knobs = resolve_policy("dspark", sc, None, None).knobs
    assert "threshold" not in dspark_knobs            # dspark's own declared defaults only
    assert dspark_knobs == run_knobs("dspark", {}, {})
    assert resolve_policy("specdecpp", sc, None, None).knobs == {"threshold": 0.9}
    # the run's own knob wins over the table's; the declared default fills the rest
    assert run_knobs("specdecpp", {"threshold": 0.9}, {"threshold": 0.2}) == {"threshold": 0.2}
    assert run_knobs("specdecpp", {}, {}) == {"threshold": make_policy("specdecpp").threshold}


def test_a_misspelt_policy_name_gets_the_closest_valid_one():
    from specsim.errors import SpecsimInputError
    from specsim.policies import make_policy
    with pytest.raises(SpecsimInputError, match=r"closest valid: 'dspark'\), got 'dpsark'"):
        make_policy("dpsark")
