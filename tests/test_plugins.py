"""Plug-in policies: policies/template.py, smartspec.py, draft_len_schedule.py, the entry-point group,
duplicate names, and ``specsim policies``."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import inspect
import json
from pathlib import Path

from dataclasses import replace

import numpy as np
import pytest

import specsim.policies as policies_mod
from specsim.policies import registry
from specsim.errors import SpecsimInputError
from specsim.policies import available_policies, load_plugin, make_policy, policy_knobs
from specsim.policies import plugins
from specsim.simulation import simulate
from specsim.workload import synth_trace
from helpers import homogeneous_scenario, make_view

ROOT = Path(__file__).resolve().parents[1]
SMARTSPEC = f"{ROOT / 'policies' / 'smartspec.py'}:SmartSpec"
SCHEDULE = f"{ROOT / 'policies' / 'draft_len_schedule.py'}:DraftLenSchedule"
TEMPLATE = f"{ROOT / 'policies' / 'template.py'}:SurvivalCutoff"


def _with_history(view, verified, accepted):
    """The same view with last_verify_len / last_accepted set (what the previous step revealed)."""
    return dataclasses.replace(view, last_verify_len=np.asarray(verified, np.int64),
                               last_accepted=np.asarray(accepted, np.int64))


# ----------------------------------------------------------------------------------------- template
def test_template_verifies_prefix_with_survival_above_threshold():
    pol = load_plugin(TEMPLATE, threshold=0.5)
    conf = [[0.9, 0.8, 0.9, 0.99],        # survival .9 .72 .648 .6415 -> 4
            [0.6, 0.8, 0.9, 0.9],         # .6 .48 -> 1
            [0.4, 0.99, 0.99, 0.99]]      # .4 -> 0
    assert pol(make_view(conf, np.ones(16))).tolist() == [4, 1, 0]
    assert load_plugin(TEMPLATE, threshold=0.0)(make_view(conf, np.ones(16))).tolist() == [4, 4, 4]
    with pytest.raises(ValueError, match="threshold"):
        load_plugin(TEMPLATE, threshold=1.5)


def test_plug_ins_declare_their_knobs_and_hooks():
    expected = {TEMPLATE: ({"threshold": 0.5}, False),
                SMARTSPEC: ({"ema": 0.02, "prior_alpha": 0.5, "prior_trials": 40.0, "draft_fraction": 0.0,
                             "probe_every": 64}, True),
                SCHEDULE: ({"schedule": ((64, 7), (128, 3))}, True)}
    for spec, (knobs, proposes) in expected.items():
        assert policy_knobs(spec) == knobs
        cls = getattr(_module(Path(spec.rsplit(":", 1)[0]).stem), spec.rsplit(":", 1)[1])
        params = inspect.signature(cls).parameters
        assert {k: params[k].default for k in knobs} == knobs            # one default per knob
        hooks = policies_mod.policy_hooks(load_plugin(spec))
        assert (hooks.view_cls, hooks.capacity, hooks.proposal_length is not None) == (
            policies_mod.SchedulingView, None, proposes)


def test_plug_in_unknown_knob_names_the_knobs_it_accepts():
    with pytest.raises(SpecsimInputError) as e:
        load_plugin(TEMPLATE, thresh=0.5)
    assert e.value.field == "policy survival-cutoff, knob thresh" and e.value.expected.endswith("threshold (closest valid: 'threshold')")
    with pytest.raises(SpecsimInputError, match="ema, prior_alpha, prior_trials, probe_every"):
        make_policy(SMARTSPEC, alpha=0.5)


def test_a_knob_value_the_constructor_rejects_is_named_without_the_exception_class():
    with pytest.raises(SpecsimInputError) as e:
        load_plugin(TEMPLATE, threshold=1.5)
    msg = str(e.value)
    assert e.value.field == "policy survival-cutoff" and "got threshold=1.5" in msg and "ValueError" not in msg


# ----------------------------------------------------------------------------------------- smartspec
def _module(stem: str):
    """Import policies/<stem>.py as a module (the plug-ins are files, not a package)."""
    spec = importlib.util.spec_from_file_location(f"plugin_{stem}", ROOT / "policies" / f"{stem}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_expected_tokens_closed_form():
    mod = _module("smartspec")
    alpha = np.array([0.0, 0.5, 0.9])
    got = mod.expected_tokens(alpha, np.array([0, 1, 3]))
    want = np.array([[(1 - a ** (k + 1)) / (1 - a) for a in alpha] for k in (0, 1, 3)])
    np.testing.assert_allclose(got, want)


def decide(policy, view):
    """SmartSpec's two phases as the engine runs them: the proposal before drafting, then verify it all."""
    k = policy.proposal_length(view)
    return policy(replace(view, gamma=k, conf=view.conf[:, :k], conf_raw=view.conf_raw[:, :k]))


def test_smartspec_picks_the_goodput_argmax_by_hand():
    pol = load_plugin(SMARTSPEC, prior_trials=0.0)     # no shrinkage: a request's rate is its own MLE
    pol.probe_every = 0
    R, gamma = 4, 3
    # step time grows linearly: 10 ms + 1 ms per token, so SPS(B) = 1 / (0.01 + 0.001 B)
    sps = 1.0 / (0.01 + 0.001 * np.arange(1, 64))
    conf = np.full((R, gamma), 0.5)
    v0 = make_view(conf, sps)
    # step 0: no history; the batch prior alpha = 0.5: goodput(k) = 4 (2 - 0.5^k) / (0.01 + 0.004 (1 + k))
    k = np.arange(4)
    want = int(np.argmax(R * (2 - 0.5 ** k) / (0.01 + 0.001 * R * (1 + k))))
    assert decide(pol, v0).tolist() == [want] * R and want == 1
    # the previous step verified 3 drafts each and accepted all: alpha estimate 1 -> E(k) = 1 + k
    v1 = _with_history(v0, [3] * R, [3] * R)
    decide(pol, v1)                                   # decides with the old estimate, then folds this outcome in
    got = decide(pol, _with_history(v0, [-1] * R, [-1] * R))
    want = int(np.argmax(R * (1 + k) / (0.01 + 0.001 * R * (1 + k))))
    assert got.tolist() == [want] * R and want == 3
    # every verified draft rejected at once: alpha -> 0, k = 0 is the only sensible choice
    fresh = load_plugin(SMARTSPEC, prior_trials=0.0)
    fresh.probe_every = 0
    decide(fresh, _with_history(v0, [2] * R, [0] * R))
    assert decide(fresh, v0).tolist() == [0] * R
    np.testing.assert_allclose(fresh.alpha_estimate(np.arange(R)), 0.0)


def test_smartspec_moving_average_estimate():
    """Decayed sums (keep 1 - ema = 0.98 per step), the batch rate from 40 pseudo-trials at 0.5, and a request's
    rate shrunk towards it with 40 pseudo-trials (policies/smartspec.py docstring), by hand."""
    pol = load_plugin(SMARTSPEC)
    v = make_view(np.full((1, 4), 0.5), np.ones(32))
    np.testing.assert_allclose(pol.alpha_estimate(np.array([0])), 0.5)            # the prior, before any outcome
    decide(pol, _with_history(v, [4], [4]))           # 4 accepted, no rejection
    batch = 0.98 * np.array([20.0, 20.0]) + [4, 0]
    b = batch[0] / batch.sum()
    np.testing.assert_allclose(pol.alpha_estimate(np.array([0])), (4 + 40 * b) / (4 + 40))
    decide(pol, _with_history(v, [4], [1]))           # 1 accepted, then a rejection
    batch = 0.98 * batch + [1, 1]
    b = batch[0] / batch.sum()
    acc, rej = 0.98 * 4 + 1, 1.0
    np.testing.assert_allclose(pol.alpha_estimate(np.array([0])), (acc + 40 * b) / (acc + rej + 40))
    np.testing.assert_allclose(pol.alpha_estimate(np.array([7])), b)                # an unseen request: the batch


def test_smartspec_probes_when_idle():
    pol = load_plugin(SMARTSPEC)
    pol.probe_every = 3
    v = make_view(np.full((2, 3), 0.5), 1.0 / (0.01 + 0.01 * np.arange(1, 64)))   # steep: k = 0 wins
    decide(pol, _with_history(v, [3, 3], [0, 0]))
    picks = [int(decide(pol, v)[0]) for _ in range(6)]
    assert picks == [0, 0, 1, 0, 0, 1] or picks == [0, 1, 0, 0, 1, 0]


def _small_trace(n=64):
    return synth_trace(n, 50.0, mix="chat=0.5,code=0.5", seed=3, max_output_tokens=192)


def _served(trace) -> int:
    """Requests of ``trace`` within the default scenario's 4,096-token context window (the others are refused)."""
    return int((trace.prompt_tokens + trace.output_tokens <= 4096).sum())


class _VerifyNothing:
    """Verify no draft but keep the drafter (fits ZOS): the best a policy can do when drafts never land."""

    name = "verify-nothing"
    fits_zos = True

    def __call__(self, view):
        return np.zeros(view.num_requests, np.int64)


def test_smartspec_poor_acceptance_matches_not_verifying():
    """alpha = 0.05: SmartSpec's own choices cost at most 1% against verifying nothing with the same
    drafter, and it beats static verification of all gamma drafts."""
    sc = homogeneous_scenario("profile.name=a100-llama2-7b-tp1", alpha=0.05)
    tr = _small_trace(96)
    thr = {name: simulate(tr, pol, sc, concurrency=32, seed=0).summary["window"]["output_throughput_per_gpu"]
           for name, pol in [("smart", SMARTSPEC), ("nothing", _VerifyNothing()), ("static", "static")]}
    assert thr["smart"] >= 0.99 * thr["nothing"]
    assert thr["smart"] > thr["static"]


def test_smartspec_never_below_none_at_poor_acceptance():
    """With the engine's proposal_length hook SmartSpec drafts nothing when drafts never land, so it runs
    at `none`'s throughput; the only cost is its exploration (one draft per request on 1 step in 64 of
    the would-be-empty steps, so the estimate can recover), measured at 0.27% here: a probing step pays the
    drafter and speculation's own overhead (the table's sourced defaults, 0.775 ms + 84 us x 32 requests on a
    ~20 ms step), so 1/64 of the steps cost about 18% more (0.03% before that overhead was charged)."""
    sc = homogeneous_scenario("profile.name=a100-llama2-7b-tp1", alpha=0.05)
    tr = _small_trace(96)
    smart = simulate(tr, SMARTSPEC, sc, concurrency=32, seed=0).summary["window"]["output_throughput_per_gpu"]
    none = simulate(tr, "none", sc, concurrency=32, seed=0).summary["window"]["output_throughput_per_gpu"]
    no_probe = simulate(tr, f"{SMARTSPEC}", sc, concurrency=32, seed=0, probe_every=0)
    # without exploration it stops drafting after its first steps (the estimate falls from its 40 pseudo-trials
    # at 0.5 within a few steps of 32 requests); what those first drafts cost or win depends on their draws
    # (here they win 0.12%), so it matches `none` to 0.2%
    assert no_probe.summary["window"]["output_throughput_per_gpu"] == pytest.approx(none, rel=2e-3)
    assert smart >= 0.995 * none


# ----------------------------------------------------------------------------------------- schedule
def test_schedule_table_and_cap():
    pol = load_plugin(SCHEDULE)
    assert [pol.drafts(r, 7) for r in (1, 64, 65, 128, 129, 10_000)] == [7, 7, 3, 3, 0, 0]
    assert [pol.drafts(r, 5) for r in (1, 100, 200)] == [5, 3, 0]
    capped = load_plugin(SCHEDULE, gamma=2)
    assert [capped.drafts(r, 7) for r in (1, 100, 200)] == [2, 2, 0]
    mod = _module("draft_len_schedule")
    custom = mod.DraftLenSchedule("2:4,inf:1")
    assert [custom.drafts(r, 7) for r in (1, 2, 3, 999)] == [4, 4, 1, 1]
    for bad in ("64:7,32:3", "x:1", "64", "0:3", "64:-1", ""):
        with pytest.raises(ValueError, match="schedule"):
            mod.DraftLenSchedule(bad)


def test_schedule_reaching_zero_still_runs():
    """Above the last bound the schedule verifies nothing: every decode step has B = R."""
    mod = _module("draft_len_schedule")
    sc = homogeneous_scenario(alpha=0.8)
    tr = _small_trace(48)
    res = simulate(tr, mod.DraftLenSchedule("2:3"), sc, concurrency=8, seed=0)
    steps = res.steps[res.steps.num_decode > 0]
    s = res.summary
    assert s["completed"] == _served(tr) == 48 - s["unservable"] and s["unservable"] > 0   # the rest beyond 4,096
    assert (steps.verified_drafts[steps.num_decode > 2] == 0).all()
    big = steps.num_decode > 2
    np.testing.assert_array_equal(steps.batch_tokens[big], steps.num_decode[big])
    small = steps.num_decode <= 2
    assert small.any() and (steps.verified_drafts[small] <= 3 * steps.num_decode[small]).all()
    assert (steps.verified_drafts[small] > 0).any()


# ----------------------------------------------------------------------------------------- entry points
class _Dist:
    def __init__(self, name):
        self.name = name


def _fake_entry_points(monkeypatch, tmp_path, entries):
    """Simulate installed distributions: write their modules, patch importlib.metadata.entry_points."""
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = []
    for dist, name, module, attr, source in entries:
        (tmp_path / f"{module}.py").write_text(source)
        ep = importlib.metadata.EntryPoint(name=name, value=f"{module}:{attr}", group=plugins.GROUP)
        eps.append(ep._for(_Dist(dist)) if hasattr(ep, "_for") else ep)

    real = importlib.metadata.entry_points

    def entry_points(**kw):
        if kw != {"group": plugins.GROUP}:      # another library's look-up (numba's first compile asks for all)
            return real(**kw)
        return importlib.metadata.EntryPoints(eps)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)


HALF = '''
import numpy as np

class Half:
    """Verify half of the drafts (rounded down)."""
    name = "half"
    fits_zos = True
    def __init__(self, gamma=None):
        self.gamma = gamma
    def __call__(self, view):
        return np.full(view.num_requests, view.gamma // 2, dtype=np.int64)
'''


def test_entry_point_policy_is_registered_and_runs(monkeypatch, tmp_path):
    _fake_entry_points(monkeypatch, tmp_path, [("acme-policies", "half", "acme_half", "Half", HALF)])
    assert available_policies()["half"] == "Verify half of the drafts (rounded down)."
    pol = make_policy("half", gamma=5)
    assert pol.gamma == 5 and pol(make_view(np.full((3, 6), 0.5), np.ones(32))).tolist() == [3, 3, 3]
    # a window every request fits (the synthetic prompts pass Llama-2's 4,096 tokens): this is about the plug-in
    sc = homogeneous_scenario("engine.max_model_len=16384", alpha=0.8)
    res = simulate(_small_trace(16), "half", sc, concurrency=4, seed=0)
    st = res.steps[res.steps.num_decode > 0]
    # gamma 7 -> 3 drafts per request except where the engine clips at a request's end
    assert res.summary["completed"] == 16 and (st.verified_drafts <= 3 * st.num_decode).all()
    assert (st.verified_drafts == 3 * st.num_decode).mean() > 0.9


def test_entry_point_knobs_are_checked(monkeypatch, tmp_path):
    fn = "import numpy as np\n\ndef verify_none(view):\n    return np.zeros(view.num_requests, np.int64)\n"
    _fake_entry_points(monkeypatch, tmp_path, [("acme", "half", "acme_half", "Half", HALF),
                                                ("acme", "nothing", "acme_fn", "verify_none", fn)])
    with pytest.raises(SpecsimInputError, match="half.*no knobs"):
        make_policy("half", gamma=5, threshold=0.3)                 # Half declares none (gamma is not a knob)
    hooks = policies_mod.policy_hooks(make_policy("nothing"))
    assert (hooks.name, hooks.fits_zos, policy_knobs("nothing")) == ("verify_none", False, {})
    with pytest.raises(SpecsimInputError, match="nothing.*no knobs"):
        make_policy("nothing", threshold=0.3)


def test_entry_point_duplicate_names_raise(monkeypatch, tmp_path):
    _fake_entry_points(monkeypatch, tmp_path, [("acme", "dspark", "acme_dup", "Half", HALF)])
    with pytest.raises(SpecsimInputError, match="dspark.*acme"):
        available_policies()
    _fake_entry_points(monkeypatch, tmp_path, [("one", "half", "mod_one", "Half", HALF),
                                                ("two", "half", "mod_two", "Half", HALF)])
    with pytest.raises(SpecsimInputError, match="(?s)half.*two.*not registered yet"):
        make_policy("half")


def test_entry_point_broken_import_names_the_package(monkeypatch, tmp_path):
    _fake_entry_points(monkeypatch, tmp_path, [("acme-broken", "broken", "acme_broken", "X",
                                                "raise ImportError('needs libfoo')\n")])
    with pytest.raises(SpecsimInputError, match="acme-broken.*needs libfoo"):
        make_policy("none")


def test_register_policy_duplicate_raises():
    with pytest.raises(ValueError, match="already registered"):
        policies_mod.register_policy("static", lambda **kw: None)


# ----------------------------------------------------------------------------------------- CLI
def test_policies_command_lists_registry_and_plugin_files(monkeypatch, capsys):
    from test_cli import run_cli

    monkeypatch.chdir(ROOT)
    code, stdout, _ = run_cli(monkeypatch, capsys, "policies", "--json")
    out = json.loads(stdout)
    assert code == 0
    assert out["registered"]["dspark"].startswith("DSpark Algorithm 1")
    assert set(out["registered"]) >= {"none", "static", "mtp1", "specdecpp", "dspark", "dspark-async"}
    files = out["plugin_files"]
    assert files["policies/smartspec.py:SmartSpec"].startswith("Goodput-based")
    assert set(files) == {"policies/smartspec.py:SmartSpec", "policies/template.py:SurvivalCutoff",
                          "policies/draft_len_schedule.py:DraftLenSchedule"}
    # the knobs' defaults the scenario file points users to (a fresh user's report: none were listed)
    assert out["knobs"]["specdecpp"] == {"threshold": 0.3} and out["knobs"]["static"] == {}
    assert out["knobs"]["vllm-adaptive"]["cost_table"] == "vllm"
    # the plug-in files' declared knobs, read without importing them (a module constant as its value)
    assert out["knobs"]["policies/template.py:SurvivalCutoff"] == {"threshold": 0.5}
    assert out["knobs"]["policies/smartspec.py:SmartSpec"]["probe_every"] == 64
    assert out["knobs"]["policies/draft_len_schedule.py:DraftLenSchedule"] == {"schedule": [[64, 7], [128, 3]]}
    code, stdout, _ = run_cli(monkeypatch, capsys, "policies")
    assert code == 0 and "threshold=0.3" in stdout.split()


def test_a_plugin_constructor_that_raises_is_named_by_file_and_line(tmp_path):
    """A plug-in class whose constructor raises (not a knob it rejects): one input error naming the user's file,
    the line that raised and the exception, never a traceback (a fresh user's report)."""
    src = tmp_path / "bad.py"
    src.write_text("import numpy as np\n\n\nclass CtorRaises:\n    name = 'ctor-raises'\n\n    def __init__(self):\n"
                   "        raise RuntimeError('ctor failed')\n\n    def __call__(self, view):\n"
                   "        return np.zeros(view.num_requests, np.int64)\n")
    with pytest.raises(SpecsimInputError) as e:
        simulate(synth_trace(4, 10.0, seed=0), f"{src}:CtorRaises", seed=0)
    assert e.value.file == str(src) and e.value.line == 8
    assert "RuntimeError: ctor failed" in str(e.value) and "its constructor" in str(e.value)


class _StepWatcher:
    """A stateful policy: counts its calls and how often the step index it sees goes backwards (it would, were
    replicas to share it)."""

    name, fits_zos = "watcher", False

    def __init__(self) -> None:
        self.last, self.backwards, self.calls = -1, 0, 0

    def __call__(self, view):
        self.calls += 1
        self.backwards += view.step <= self.last
        self.last = view.step
        return np.full(view.num_requests, view.gamma, np.int64)


def test_each_replica_runs_its_own_user_policy_object():
    """A user's stateful policy object or class gives each replica its own object (a fresh user's counter, shared
    by three replicas, saw view.step go backwards 445 times); the object itself serves the first replica."""
    from specsim.scenario import load_scenario

    trace = synth_trace(100, rate=40.0, seed=3, max_prompt_tokens=512, max_output_tokens=128)
    three = load_scenario(None, ["cluster.num_replicas=3"])
    obj = _StepWatcher()
    res = simulate(trace, obj, three)
    assert obj.backwards == 0 and 0 < obj.calls <= (res.steps.replica == 0).sum()   # replica 0's steps only
    assert set(res.steps.replica) == {0, 1, 2}
    by_class = simulate(trace, _StepWatcher, three)
    assert by_class.steps.equals(res.steps)                  # a class: one instance per replica, the same run
    single = _StepWatcher()
    simulate(trace, single, load_scenario(None, []))
    assert single.backwards == 0 and single.calls > 0


def test_a_policy_class_without_name_is_refused_not_wrapped():
    """An object with policy members (fits_zos, capacity) but no name used to run as a plain function, its
    fits_zos and capacity silently dropped."""
    class NoName:
        fits_zos = True

        def capacity(self, old_view, running_ids, num_running):
            raise AssertionError("never called")

        def __call__(self, view):
            return np.zeros(view.num_requests, np.int64)

    trace = synth_trace(20, rate=40.0, seed=3)
    for policy in (NoName(), 5):
        with pytest.raises(SpecsimInputError) as ei:
            simulate(trace, policy)
        assert ei.value.field == "policy"
    assert "not a policy" in str(ei.value)
    for policy in (NoName, NoName()):                    # the class is built as a plug-in's class is: its name
        with pytest.raises(SpecsimInputError, match="but no name"):
            simulate(trace, policy)

    # the members a fresh user's classes lost the same way: reads_confidence, a forced drafter and gamma
    class Quiet:
        reads_confidence = False

        def __call__(self, view):
            return np.zeros(view.num_requests, np.int64)

    class Forced(Quiet):
        drafter, gamma = "mtp", 1

    for policy in (Quiet, Forced):
        with pytest.raises(SpecsimInputError, match="but no name and fits_zos"):
            simulate(trace, policy)


def test_a_raising_policy_typed_at_python_c_is_named():
    """A policy defined by ``python -c``, stdin or ``exec`` (file ``<string>``) that raises is one input error
    naming the policy and its line, like one in a file (it was a bare KeyError through SimPy's frames)."""
    scope: dict = {}
    exec("def bad(view):\n    return {}['x']\n", scope)
    with pytest.raises(SpecsimInputError) as ei:
        simulate(synth_trace(20, rate=40.0, seed=3), scope["bad"])
    assert (ei.value.file, ei.value.line) == ("<string>", 2) and "policy bad" in str(ei.value.field)
    assert "KeyError" in str(ei.value)


def test_knobs_given_with_a_policy_class_reach_it_and_an_objects_are_refused():
    """simulate(trace, TheClass, threshold=0.95) checked the knob, then ran the class's default (a fresh user's
    mean verify length 4.89 either way); the class is now built with its knobs, as its path:Name plug-in is, and
    an object, whose knobs are its own, refuses them instead of ignoring them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("template_policy", TEMPLATE.split(":")[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    trace = synth_trace(120, 10.0, seed=1)
    by_class = simulate(trace, mod.SurvivalCutoff, None, concurrency=12, threshold=0.95, seed=0)
    by_path = simulate(trace, TEMPLATE, None, concurrency=12, threshold=0.95, seed=0)
    default = simulate(trace, mod.SurvivalCutoff, None, concurrency=12, seed=0)
    assert by_class.steps.equals(by_path.steps)
    assert by_class.summary["mean_verify_tokens_per_request"] < default.summary["mean_verify_tokens_per_request"]
    with pytest.raises(SpecsimInputError, match="not for an object"):
        simulate(trace, mod.SurvivalCutoff(), None, concurrency=12, threshold=0.95)


def test_plugin_files_read_declared_knobs_without_importing(tmp_path):
    from specsim.cli.policies_cmd import plugin_files

    (tmp_path / "mine.py").write_text('LIMIT = 4\nraise SystemExit("never imported")\n\n'
                                      'class Mine:\n    """Mine."""\n    knobs = {"limit": LIMIT, "scale": float("2")}\n'
                                      '    def __call__(self, view):\n        return None\n\n'
                                      'class Bare:\n    def __call__(self, view):\n        return None\n')
    (tmp_path / "more.py").write_text('class Ctor:\n    def __init__(self, level=2, gamma=None, *, tag="x"):\n'
                                      '        pass\n    def __call__(self, view):\n        return None\n\n'
                                      'class Dicted:\n    knobs = dict(alpha=0.1)\n    def __call__(self, view):\n'
                                      '        return None\n\ndef half(view):\n    """Half."""\n\n'
                                      'def helper(x, y):\n    return x\n')
    got = plugin_files(tmp_path)
    at = tmp_path.as_posix()
    assert got[f"{at}/mine.py:Mine"] == ("Mine.", {"limit": 4, "scale": "float('2')"})
    assert got[f"{at}/mine.py:Bare"] == ("", {})
    # a constructor's keyword defaults are its knobs (gamma aside), dict(...) too; a function of view is listed
    assert got[f"{at}/more.py:Ctor"][1] == {"level": 2, "tag": "x"}
    assert got[f"{at}/more.py:Dicted"][1] == {"alpha": 0.1}
    assert got[f"{at}/more.py:half"] == ("Half.", {}) and f"{at}/more.py:helper" not in got
