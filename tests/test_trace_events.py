"""``specsim run --trace-events``: per-replica steps as Chrome trace events; and the run's progress reports
(the ticker changes no result; the bar is quiet off a terminal)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from conftest import REPO
from specsim.cli import main
from specsim.engine.cluster import ClosedLoopWindow
from specsim.progress import command_line, run_progress
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload.trace import Trace
from specsim.analysis.trace_events import ARGS_COLUMNS, OPTIONAL_ARGS, trace_events, write_trace_events


def _trace(n: int = 30) -> Trace:
    rng = np.random.default_rng(3)
    return Trace(request_id=[f"r{i}" for i in range(n)], arrival_s=np.arange(n) * 0.03,
                 prompt_tokens=rng.integers(32, 256, n), output_tokens=rng.integers(20, 90, n),
                 domain=np.array(["chat", "code"])[np.arange(n) % 2], source="t")


@pytest.fixture(scope="module")
def two_replicas():
    return simulate(_trace(), "dspark", load_scenario(overrides=["cluster.num_replicas=2"]), seed=2)


def test_chrome_trace_structure(two_replicas, tmp_path):
    steps = two_replicas.steps
    path = write_trace_events(steps, tmp_path / "t" / "trace.json", "specsim run: dspark")
    doc = json.loads(path.read_text())
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"} and doc["displayTimeUnit"] == "ms"
    ev = doc["traceEvents"]
    meta = [e for e in ev if e["ph"] == "M"]
    spans = [e for e in ev if e["ph"] == "X"]
    counters = [e for e in ev if e["ph"] == "C"]
    assert {e["args"]["name"] for e in meta if e["name"] == "process_name"} == {"replica 0", "replica 1"}
    assert len(spans) == len(steps) and len(counters) == 2 * len(steps)
    for e in spans:
        assert set(e) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
        assert e["name"] in ("decode", "prefill+decode") and e["pid"] in (0, 1) and e["tid"] == 0
        assert isinstance(e["ts"], float) and e["dur"] > 0 and set(e["args"]) == {*ARGS_COLUMNS, *OPTIONAL_ARGS}
    # microseconds of simulated time, one span per step, in the step's own replica
    assert sum(e["dur"] for e in spans) == pytest.approx(steps.duration_s.sum() * 1e6, rel=1e-9)
    assert sum(e["args"]["emitted_tokens"] for e in spans) == int(steps.emitted_tokens.sum())
    for pid in (0, 1):
        mine = sorted((e["ts"], e["dur"]) for e in spans if e["pid"] == pid)
        assert len(mine) == int((steps.replica == pid).sum()) > 0
        ends = np.array([t + d for t, d in mine[:-1]])
        assert np.all(np.array([t for t, _ in mine[1:]]) >= ends - 2e-3)   # a replica's steps never overlap
    c = next(e for e in counters if e["name"] == "requests")
    assert set(c["args"]) == {"num_running", "num_waiting"}


def test_missing_columns_raise(two_replicas):
    with pytest.raises(ValueError, match="kv_blocks_used"):
        trace_events(two_replicas.steps.drop(columns=["kv_blocks_used"]))


def test_older_frames_and_unmeasured_values_still_export(two_replicas, tmp_path):
    # a frame written before draft_s / speculation_s existed; a torch replay's NaN speculation_s is strict JSON null
    old = trace_events(two_replicas.steps.drop(columns=list(OPTIONAL_ARGS)))
    assert all(set(e["args"]) == set(ARGS_COLUMNS) for e in old["traceEvents"] if e["ph"] == "X")
    steps = two_replicas.steps.assign(speculation_s=np.nan)
    text = write_trace_events(steps, tmp_path / "nan.json").read_text()
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    assert all(e["args"]["speculation_s"] is None for e in doc["traceEvents"] if e["ph"] == "X")


def test_run_cli_writes_trace_events_and_its_command_line(monkeypatch, capsys, tmp_path):
    argv = ["run", "--trace", str(REPO / "traces" / "prod.jsonl"), "--num-requests", "20", "--json",
            "--trace-events", str(tmp_path / "ev.json"), "--out", str(tmp_path / "o")]
    monkeypatch.setattr(sys, "argv", ["specsim", *argv])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 0
    s = json.loads(capsys.readouterr().out)
    doc = json.loads((tmp_path / "ev.json").read_text())
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == s["steps"]
    assert s["command_line"] == command_line(argv) == "specsim " + " ".join(argv)
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["command_line"] == s["command_line"]


def test_command_line_quotes_for_the_shell():
    assert command_line(["run", "--set", "policy.knobs.note=a b"]) == "specsim run --set 'policy.knobs.note=a b'"


def test_progress_reports_change_no_result_and_end_at_the_total():
    tr, sc = _trace(), load_scenario()
    seen: list[tuple[int, int, float]] = []
    plain = simulate(tr, "dspark", sc, seed=1, concurrency=4)
    watched = simulate(tr, "dspark", sc, seed=1, concurrency=4, progress=lambda d, n, t: seen.append((d, n, t)))
    for k in ("duration_s", "mean_ttft_ms", "mean_tpot_ms", "steps", "mean_acceptance_length"):
        assert plain.summary[k] == watched.summary[k], k
    done = [d for d, _, _ in seen]
    assert seen and all(n == len(tr) for _, n, _ in seen) and done == sorted(done) and done[-1] == len(tr)
    times = np.array([t for _, _, t in seen])
    assert np.all(np.diff(times) > 0) and np.allclose(times / 0.5, np.round(times / 0.5))  # 0.5 s, doubling


def test_reports_come_every_half_second_while_the_wall_clock_is_slow():
    """With ``wall_s=0`` the interval never grows: one report per 0.5 simulated seconds."""
    from specsim.progress import progress_ticker
    from specsim.simulation import RunConfig, _build

    tr, seen = _trace(), []
    built = _build(tr, RunConfig(scenario=load_scenario(), concurrency=4), None, None)
    env = built.cluster.env
    env.process(built.cluster.closed_loop(4, ClosedLoopWindow(np.nan, np.nan)))
    env.process(progress_ticker(built.cluster, len(tr), lambda d, n, t: seen.append(t), wall_s=0.0))
    env.run()
    assert np.allclose(np.diff(seen), 0.5) and seen[-1] == env.now and len(seen) == round(env.now / 0.5)


def test_the_bar_is_quiet_off_a_terminal(capsys):
    with run_progress(10) as bar:                                 # pytest's stderr is not a terminal
        assert bar is None
    with run_progress(10, enabled=False) as bar:
        assert bar is None
    with run_progress(10, enabled=True) as bar:
        bar(10, 10, 1.0)
    assert capsys.readouterr().out == ""


def test_progress_bar_off_a_terminal_prints_one_summary_line(capsys):
    from specsim.progress import ProgressBar

    with ProgressBar("tune", "points", terminal=False) as bar:
        bar.update(0, 12)
        bar.update(5, note="specdecpp threshold=0.5")
        bar.update(12)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("tune: 12/12 points in ") and err[0].endswith(" s")
    with ProgressBar("sweep", enabled=False, terminal=False) as bar:     # --quiet: nothing at all
        bar.update(1, 2)
    assert capsys.readouterr().err == ""
    with pytest.raises(RuntimeError), ProgressBar("sweep", terminal=False) as bar:   # no summary after a failure
        bar.update(1, 2)
        raise RuntimeError("boom")
    assert capsys.readouterr().err == ""
