"""Plain decode stretches (specsim/engine/replica.py ``Replica._plain_steps``, issue 25): runs of steps in which
every running request decodes one token and nothing else happens are run at once; the numbers must be those of
running them one by one, bit for bit, whatever the scenario."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers import assert_same_run, make_trace
from specsim import twins
from specsim.engine import kernels, replica, scheduler
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.simulation import simulate

needs_numba = pytest.mark.skipif(not twins.compiled(), reason="numba unavailable or SPECSIM_NO_NUMBA=1")

VIDUR = str(Path(__file__).resolve().parent.parent / "specsim" / "scenarios" / "vidur-codellama34b-a100-tp2.toml")


def _trace(n: int = 160, seed: int = 3, span_s: float = 6.0):
    rng = np.random.default_rng(seed)
    return make_trace(np.sort(rng.uniform(0, span_s, n)), rng.integers(20, 1800, n), rng.integers(1, 300, n))


def _run_both(monkeypatch, trace, policy, scen, **kw):
    """(result with stretches, result step by step, steps run in stretches)."""
    fused: list[int] = []
    real_skip = scheduler.Scheduler.skip_plain_steps

    def spy(self, k):
        fused.append(k)
        real_skip(self, k)

    monkeypatch = monkeypatch or pytest.MonkeyPatch()
    with monkeypatch.context() as m:
        m.setattr(scheduler.Scheduler, "skip_plain_steps", spy)
        ahead = simulate(trace, policy, scen, seed=5, **kw)
    with monkeypatch.context() as m:
        m.setattr(replica, "PLAIN_STEPS_MAX", 0)
        one_by_one = simulate(trace, policy, scen, seed=5, **kw)
    return ahead, one_by_one, sum(fused)


#: (case, policy, scenario, simulate's keywords, least share of the steps run in stretches)
CASES = [
    ("colocated chunked prefill (Vidur's scenario)", "none", VIDUR, {}, 0.2),
    ("disaggregated prefill", "none", ["engine.host_overhead_s=0.0004", "engine.emission_overhead_s=0.00002"], {},
     0.2),
    # each replica's next step end bounds the other's stretches
    ("two replicas", "none", [f"@{VIDUR}", "cluster.num_replicas=2"], {}, 0.0),
    # exact accounting (memory short) admits or preempts at any step: few stretches
    ("tight KV: lazy and exact accounting, preemptions", "none", [f"@{VIDUR}", "cluster.kv_capacity_tokens=6000"],
     {}, 0.0),
    # a queue waiting for memory with free slots retries its admission every step: no stretch then
    ("reserve allocation", "none", [f"@{VIDUR}", "cluster.kv_allocation=reserve", "cluster.kv_capacity_tokens=30000"],
     {}, 0.1),
    ("closed loop", "none", VIDUR, {"concurrency": 12}, 0.2),
    ("a speculative policy (no stretch may run)", "dspark", None, {}, None),
]


def _scenario(spec):
    if spec is None or isinstance(spec, str):
        return load_scenario(spec)
    base = [s[1:] for s in spec if s.startswith("@")]
    return load_scenario(base[0] if base else None, overrides=[s for s in spec if not s.startswith("@")])


@pytest.mark.parametrize("name, policy, spec, kw, least", CASES, ids=[c[0] for c in CASES])
def test_stretches_change_no_number(monkeypatch, name, policy, spec, kw, least):
    ahead, one_by_one, fused = _run_both(monkeypatch, _trace(), policy, _scenario(spec), **kw)
    assert_same_run(ahead, one_by_one)
    if least is None:
        assert fused == 0
    else:
        assert fused >= least * len(one_by_one.steps), f"only {fused} of {len(one_by_one.steps)} steps ran ahead"


@pytest.mark.parametrize("horizon_s", [1.5, 3.0, 5.0])
def test_a_horizon_mid_stretch_stops_it(monkeypatch, horizon_s):
    rng = np.random.default_rng(1)
    trace = make_trace(np.sort(rng.uniform(0, 0.5, 20)), rng.integers(50, 200, 20), rng.integers(100, 300, 20))
    ahead, one_by_one, fused = _run_both(monkeypatch, trace, "none", load_scenario(VIDUR), max_sim_s=horizon_s)
    assert_same_run(ahead, one_by_one)
    assert fused > 0.5 * len(one_by_one.steps) and one_by_one.summary["unfinished"] > 0
    assert (ahead.steps.start_s + ahead.steps.duration_s).max() <= horizon_s


def test_a_horizon_at_a_step_end_is_kept(monkeypatch):
    """A step that ends exactly at the horizon T is processed (specsim.simulation.HORIZON_RULE); the replica then
    plans its next step at T, and no stretch may run past T."""
    rng = np.random.default_rng(1)
    trace = make_trace(np.sort(rng.uniform(0, 0.5, 20)), rng.integers(50, 200, 20), rng.integers(100, 300, 20))
    full = simulate(trace, "none", load_scenario(VIDUR), seed=5)
    horizon_s = float((full.steps.start_s + full.steps.duration_s).iloc[len(full.steps) // 2])
    ahead, one_by_one, fused = _run_both(monkeypatch, trace, "none", load_scenario(VIDUR), max_sim_s=horizon_s)
    assert_same_run(ahead, one_by_one)
    assert fused > 0 and (ahead.steps.start_s + ahead.steps.duration_s).max() == horizon_s


def test_a_long_prompt_prefills_its_middle_chunks_in_a_stretch(monkeypatch):
    """Colocated: while four requests decode, a 6,000-token prompt runs chunks of 512 - 4 tokens; its middle
    chunks (not its last, which emits the first token) run in a stretch with the decodes, bit for bit."""
    from specsim.engine import step_runner
    chunks: list[int] = []
    real = step_runner.StepRunner.finish_plain

    def spy(self, start_s, end_s, stretch, used, **kw):
        chunks.extend([stretch.chunk] * end_s.size)
        real(self, start_s, end_s, stretch, used, **kw)

    monkeypatch.setattr(step_runner.StepRunner, "finish_plain", spy)
    trace = make_trace([0.0, 0.0, 0.0, 0.0, 0.5], [100, 120, 140, 160, 6000], [400, 400, 400, 400, 20])
    ahead, one_by_one, _ = _run_both(monkeypatch, trace, "none", load_scenario(VIDUR))
    assert_same_run(ahead, one_by_one)
    assert chunks.count(508) >= 10                                      # 6000 // 508 = 11 middle chunks
    long_prompt = one_by_one.steps[one_by_one.steps.prefill_tokens == 508]
    assert len(long_prompt) == 11 and (long_prompt.num_decode == 4).all()


def test_a_lone_long_prompt_prefills_in_a_stretch(monkeypatch):
    """No request decodes (R = 0) while one 3,000-token prompt runs its 512-token chunks: a stretch of five
    middle chunks, then its last chunk alone (it emits the first token), bit for bit."""
    trace = make_trace([0.0], [3000], [5])
    ahead, one_by_one, fused = _run_both(monkeypatch, trace, "none", load_scenario(VIDUR))
    assert_same_run(ahead, one_by_one)
    steps = one_by_one.steps
    assert steps.prefill_tokens.tolist()[:6] == [512] * 5 + [440] and fused >= 5


def test_preemptions_still_happen_under_tight_kv(monkeypatch):
    scen = load_scenario(VIDUR, overrides=["cluster.kv_capacity_tokens=6000"])
    ahead, one_by_one, _ = _run_both(monkeypatch, _trace(), "none", scen)
    assert one_by_one.summary["num_preemptions"] > 0
    assert ahead.summary["num_preemptions"] == one_by_one.summary["num_preemptions"]


def test_a_long_lone_request_runs_in_few_events():
    """One request of 2,000 output tokens: its decode runs in stretches of up to PLAIN_STEPS_MAX steps (one
    event each) and still gives one step row and one inter-token gap per token."""
    trace = make_trace([0.0], [100], [2000])
    res = simulate(trace, "none", load_scenario(VIDUR), seed=0)
    decode = res.steps[res.steps.num_decode > 0]
    assert len(decode) == 1999 and (decode.emitted_tokens == 1).all()
    assert (decode.step.diff().dropna() == 1).all()
    np.testing.assert_allclose(decode.start_s.to_numpy()[1:],
                               (decode.start_s + decode.duration_s).to_numpy()[:-1], rtol=0, atol=0)


def test_a_stretch_ends_with_the_step_that_finishes_a_request(monkeypatch):
    """A lone request (100-token prompt, 300 tokens out) plans one step the slow way, its admission with its only
    prefill chunk; the 299 decode steps run as one stretch whose last step finishes it, and it leaves when that
    step ends (done_s), as step by step; nothing else is left in the event queue to stop the stretch."""
    planned = []
    real_plan = scheduler.Scheduler._plan

    def spy(self, *args):
        planned.append(self.step_index)
        return real_plan(self, *args)

    monkeypatch.setattr(scheduler.Scheduler, "_plan", spy)
    ahead, one_by_one, fused = _run_both(None, make_trace([0.0], [100], [300]), "none", load_scenario(VIDUR))
    assert_same_run(ahead, one_by_one)
    # the run ahead plans step 0 only; step by step plans all 300
    assert fused == 299 and planned == [0] + list(range(300))
    last = ahead.steps.iloc[-1]
    assert ahead.requests.done_s[0] == last.start_s + last.duration_s


@settings(derandomize=True, database=None, deadline=None, max_examples=25,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_stretches_change_no_number_anywhere(data):
    """Property: on random small traces and scenarios (colocated or not, chunk budget, block size, KV room,
    slots, overheads, prefix caching, open or closed loop, a horizon), running plain stretches at once gives
    every number of running them one by one."""
    n = data.draw(st.integers(1, 24), "requests")
    seed = data.draw(st.integers(0, 2 ** 16), "seed")
    rng = np.random.default_rng(seed)
    trace = make_trace(np.sort(rng.uniform(0, data.draw(st.sampled_from([0.1, 1.0, 4.0]), "span"), n)),
                       rng.integers(1, 2500, n), rng.integers(1, 200, n))
    sets = [f"prefill.mode={data.draw(st.sampled_from(['colocated', 'disaggregated']), 'mode')}",
            f"prefill.chunk_tokens={data.draw(st.sampled_from([64, 256, 512, 2048]), 'chunk')}",
            f"cluster.block_size={data.draw(st.sampled_from([1, 16]), 'block')}",
            f"cluster.kv_capacity_tokens={data.draw(st.sampled_from([3000, 12000, 400000]), 'kv')}",
            f"cluster.max_num_seqs={data.draw(st.sampled_from([1, 4, 64]), 'seqs')}",
            f"engine.host_overhead_s={data.draw(st.sampled_from([0.0, 0.0005]), 'host')}",
            f"engine.emission_overhead_s={data.draw(st.sampled_from([0.0, 2e-5]), 'emission')}",
            f"cluster.prefix_caching={str(data.draw(st.booleans(), 'prefix')).lower()}",
            "engine.context_overflow=truncate"]
    kw = {}
    if data.draw(st.booleans(), "closed loop") and n >= 4:
        kw["concurrency"] = 2
    elif data.draw(st.booleans(), "horizon"):
        kw["max_sim_s"] = data.draw(st.sampled_from([0.5, 2.0, 6.0]), "horizon_s")
    scen = load_scenario(VIDUR, overrides=sets)

    def run(max_steps):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(replica, "PLAIN_STEPS_MAX", max_steps)
            try:
                return simulate(trace, "none", scen, seed=5, **kw)
            except SpecsimInputError as e:      # e.g. a closed-loop window too short: both must refuse it alike
                return str(e)

    ahead, one_by_one = run(replica.PLAIN_STEPS_MAX), run(0)
    if isinstance(one_by_one, str):
        assert ahead == one_by_one
    else:
        assert_same_run(ahead, one_by_one)


# --------------------------------------------------------------------------- the kernels' two forms

@needs_numba
@pytest.mark.parametrize("limit", [np.inf, 0.3, 0.0])
@pytest.mark.parametrize("end_by", [np.inf, 0.5])
@pytest.mark.parametrize("attention", [0.0, 2e-3])
def test_plain_step_ends_twins_are_equal(limit, end_by, attention):
    """Steps start before ``limit`` (the next event; the last may straddle it) and end before ``end_by``."""
    args = (0.123, limit, end_by, 0.0211, 3.1e-8, 12345, 7, 7 * 1.3e-5, 4e-4, np.linspace(0, attention, 50), 7 * 2e-5)
    a = kernels.plain_step_ends.numpy_form(*args)
    b = twins.compiled_twin(kernels.plain_step_ends)(*args)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    starts, ends = a
    assert np.all(starts < limit) and np.array_equal(starts[1:], ends[:-1])
    assert np.all(ends < end_by)
    last = ends[-1] if ends.size else 0.123
    assert ends.size == 50 or last >= limit or last + 0.0212 >= end_by         # stopped for a reason
    if limit == np.inf and end_by == np.inf:
        assert ends.size == 50


def test_plain_step_ends_adds_the_step_times_in_order():
    """End k is ((now + t0) + t1) + ..., each t as StepTimeProfile.step_time and StepRunner.step_time_s build it."""
    attention = np.array([0.0, 1e-3, 2e-3])
    starts, ends = kernels.plain_step_ends.numpy_form(1.0, np.inf, np.inf, 0.02, 1e-7, 1000, 4, 4e-5, 1e-3,
                                                      attention, 4e-6)
    now = 1.0
    for j in range(3):
        t = ((((0.02 + 1e-7 * float(1000 + 4 * j)) + 4e-5) + 1e-3) + attention[j]) + 4e-6
        assert starts[j] == now and ends[j] == now + t
        now = now + t


def _kv_by_hand(num_steps, lazy_allowed, owed, free, margin, per_step, used, decode, prompt, gen, held, bs):
    """KVManager's rules step by step (begin_step, fit_base_need, count_lazy_growth, exact_blocks_used)."""
    held = held.copy()
    out = []
    for j in range(num_steps):
        need = -(-(prompt + gen + 1 + j) // bs)
        if lazy_allowed and owed + margin <= free:
            out.append((used + int((need - held)[decode].sum()), owed + per_step))
            owed += per_step
        else:
            delta = int((need - held)[decode].sum())
            if delta > free:
                break
            free, used, owed = free - delta, used + delta, 0
            held[decode] = need[decode]
            out.append((used, 0))
    return out


@pytest.mark.parametrize("block_size", [1, 3, 16])
@pytest.mark.parametrize("free", [40, 400, 5000])
@pytest.mark.parametrize("lazy_allowed", [True, False])
def test_plain_kv_steps_follow_the_managers_rules(block_size, free, lazy_allowed):
    rng = np.random.default_rng(block_size + free)
    prompt, gen = rng.integers(1, 500, 9), rng.integers(0, 300, 9)
    held = -(-(prompt + gen + 1) // block_size) - rng.integers(0, 2, 9)
    decode = np.array([0, 1, 2, 4, 5, 6, 7, 8], np.int64)              # slot 3 prefills: not counted
    args = (60, lazy_allowed, 10, free, 64, 18, 1000, decode, prompt, gen, held, block_size)
    a = kernels.plain_kv_steps.numpy_form(*args)
    want = _kv_by_hand(*args)
    assert list(zip(a[0].tolist(), a[1].tolist())) == want
    if twins.compiled():
        for x, y in zip(a, twins.compiled_twin(kernels.plain_kv_steps)(*args)):
            np.testing.assert_array_equal(x, y)


@needs_numba
@pytest.mark.parametrize("seed", range(4))
def test_plain_slots_twins_are_equal(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 12))
    left = np.where(rng.uniform(size=n) < 0.3, rng.integers(1, 900, n), 0).astype(np.int64)
    out = rng.integers(2, 400, n)
    gen = np.minimum(rng.integers(0, 400, n), out - 1)
    prompt = rng.integers(1, 5000, n)
    a = kernels.plain_slots.numpy_form(left, out, gen, prompt)
    b = twins.compiled_twin(kernels.plain_slots)(left, out, gen, prompt)
    np.testing.assert_array_equal(a[0], b[0])
    assert a[1:] == b[1:]
    decode = np.flatnonzero(left == 0)
    assert a[1] == (np.flatnonzero(left)[0] if (left > 0).any() else -1)
    assert a[2] == ((out - gen)[decode].min() if decode.size else 0)
    assert a[3] == sum(int(prompt[s] + gen[s]) for s in decode)


@pytest.mark.parametrize("seed", range(4))
def test_plain_emit_by_hand_and_twins(seed):
    """k plain steps' emissions: the first gap from each slot's last emission, the later ones a step long, k tokens
    and k steps added at the decoding slots only, their last emission moved to the last step's end."""
    rng = np.random.default_rng(seed)
    S, k = int(rng.integers(1, 10)), int(rng.integers(1, 6))
    decode = np.sort(rng.choice(S, int(rng.integers(0, S + 1)), replace=False)).astype(np.int64)
    end_s = 5.0 + np.cumsum(rng.uniform(0.01, 0.05, k))
    last = rng.uniform(4.0, 5.0, S)
    generated, steps = rng.integers(0, 50, S), rng.integers(0, 50, S)
    want_last = last.copy()
    want_last[decode] = end_s[-1]
    forms = [kernels.plain_emit.numpy_form] + ([twins.compiled_twin(kernels.plain_emit)] if twins.compiled() else [])
    for form in forms:
        got_last = last.copy()
        gaps, g, st = form(end_s, got_last, decode, generated, steps)
        assert gaps.shape == (k, decode.size)
        np.testing.assert_array_equal(gaps[0], end_s[0] - last[decode])
        for j in range(1, k):
            np.testing.assert_array_equal(gaps[j], np.full(decode.size, end_s[j] - end_s[j - 1]))
        np.testing.assert_array_equal(g, generated + k * np.isin(np.arange(S), decode))
        np.testing.assert_array_equal(st, steps + k * np.isin(np.arange(S), decode))
        np.testing.assert_array_equal(got_last, want_last)
        assert g is not generated and st is not steps
