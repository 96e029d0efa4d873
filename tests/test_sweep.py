"""Sweeps: point identity, knob resolution, atomic resumable records, executors giving identical numbers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.cli.sweep_cmd import parse_list
from specsim.sweep import (SweepProgress, SweepSpec, expand_points, load_records, points_dir,
                           policy_uses_threshold, read_record, results_frame, run_sweep, seed_spread, write_record)
from specsim.workload import Trace, save_trace

REPO = Path(__file__).resolve().parent.parent


def small_trace(n: int = 24, seed: int = 7) -> Trace:
    """A short mixed-domain trace (outputs 40-160 tokens) that simulates in well under a second."""
    rng = np.random.default_rng(seed)
    return Trace(request_id=[f"r{i}" for i in range(n)], arrival_s=np.arange(n) * 0.05,
                 prompt_tokens=rng.integers(32, 256, n), output_tokens=rng.integers(40, 160, n),
                 domain=np.array(["chat", "code", "math"])[np.arange(n) % 3], source="small")


def strip(rec: dict, keep_source: bool = True) -> dict:
    """A record without its wall time (the one field that may differ between executors), and without the
    trace's file name when ``keep_source`` is False (the same content read from another file)."""
    out = {k: v for k, v in rec.items() if k not in ("wall_time_s", "checksum")}
    if not keep_source:
        out["provenance"] = {k: v for k, v in out["provenance"].items() if k != "trace"}
    return out


SPEC = SweepSpec(policies=("mtp1", "dspark"), concurrency=(1, 4), seeds=(0, 1), num_requests=16)


@pytest.fixture(scope="module")
def serial_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    res = run_sweep(SPEC, load_scenario(), small_trace(), out, executor="serial", progress=False)
    assert res.computed == 8 and res.skipped == 0 and res.failed == []
    return out


# --------------------------------------------------------------------------------------------- axes
def test_parse_list_progressions_and_errors():
    assert parse_list("1,2,4,...,256", int) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert parse_list("10,20,...,50", int) == [10, 20, 30, 40, 50]
    assert parse_list("1,2,...,8", int) == [1, 2, 4, 8]           # both fit: geometric
    assert parse_list("1,2,3,...,6", int) == [1, 2, 3, 4, 5, 6]   # three values decide
    assert parse_list("0.5,1,...,4", float) == [0.5, 1.0, 2.0, 4.0]
    assert parse_list("0.5, 1, 2", float) == [0.5, 1.0, 2.0]
    for bad in ("1,x", "...,4", "1,...,4", "1,3,...,8", "4,2,...,1"):
        with pytest.raises(SpecsimInputError):
            parse_list(bad, int, "concurrency")


def test_spec_rejects_empty_or_bad_axes():
    with pytest.raises(SpecsimInputError, match="concurrency"):
        SweepSpec(policies=("mtp1",))
    with pytest.raises(SpecsimInputError, match="concurrency"):
        SweepSpec(policies=("mtp1",), concurrency=(0,))
    with pytest.raises(SpecsimInputError, match="threshold"):
        SweepSpec(policies=("specdecpp",), concurrency=(1,), thresholds=(1.5,))
    # a function (simulate takes one) names the field, not a TypeError from deep in the point ids
    with pytest.raises(SpecsimInputError, match="policy names or path/file.py:Name") as e:
        SweepSpec(policies=("mtp1", lambda view: None), concurrency=(1,))
    assert e.value.field == "policies" and e.value.got == "function"


def test_knobs_are_resolved_and_ignored_knobs_never_duplicate_points():
    spec = SweepSpec(policies=("mtp1", "none", "static", "specdecpp"), concurrency=(2,),
                     gammas=(3, 5), thresholds=(0.2, 0.4))
    pts = expand_points(spec, load_scenario(), small_trace())
    by_policy: dict[str, list] = {}
    for p in pts:
        by_policy.setdefault(p.policy, []).append(p.knobs)
    # mtp1 forces gamma 1 and the MTP drafter, none forces gamma 0: one point each whatever the axes
    assert by_policy["mtp1"] == [{"gamma": 1, "drafter": "mtp"}]
    assert by_policy["none"] == [{"gamma": 0, "drafter": "none"}]
    # static uses gamma but not the threshold; specdecpp uses both
    assert by_policy["static"] == [{"gamma": 3, "drafter": "dspark"}, {"gamma": 5, "drafter": "dspark"}]
    assert len(by_policy["specdecpp"]) == 4
    assert {k["threshold"] for k in by_policy["specdecpp"]} == {0.2, 0.4}
    assert len({p.id for p in pts}) == len(pts) == 8
    assert [policy_uses_threshold(p, 3) for p in ("mtp1", "none", "static", "specdecpp")] == [False, False,
                                                                                              False, True]


def test_point_id_covers_scenario_seed_load_and_trace_content():
    tr, sc = small_trace(), load_scenario()
    spec = SweepSpec(policies=("dspark",), concurrency=(2,), num_requests=16)
    (a,) = expand_points(spec, sc, tr)
    assert [p.id for p in expand_points(spec, sc, tr)] == [a.id]                  # stable
    (b,) = expand_points(spec, load_scenario(overrides=["engine.host_overhead_s=0.001"]), tr)
    (c,) = expand_points(SweepSpec(policies=("dspark",), concurrency=(2,), seeds=(1,), num_requests=16), sc, tr)
    (d,) = expand_points(SweepSpec(policies=("dspark",), concurrency=(3,), num_requests=16), sc, tr)
    other = small_trace(seed=8)
    (e,) = expand_points(spec, sc, other)
    (f,) = expand_points(SweepSpec(policies=("dspark",), concurrency=(2,), num_requests=17), sc, tr)
    assert len({a.id, b.id, c.id, d.id, e.id, f.id}) == 6
    # the trace's source name is not content: a renamed copy keeps the id
    renamed = Trace(tr.request_id, tr.arrival_s, tr.prompt_tokens, tr.output_tokens, tr.domain, source="x")
    assert expand_points(spec, sc, renamed)[0].id == a.id


def test_requests_per_user_scales_the_trace_head_with_concurrency():
    spec = SweepSpec(policies=("mtp1",), concurrency=(1, 2, 4, 8), num_requests=5, requests_per_user=3)
    pts = expand_points(spec, load_scenario(), small_trace(24))
    assert [p.num_requests for p in pts] == [5, 6, 12, 24]


# --------------------------------------------------------------------------------------------- records
def test_record_holds_summary_and_measured_requests(serial_dir):
    recs = load_records(serial_dir)
    assert len(recs) == 8
    for r in recs:
        assert r["status"] == "ok"
        s = r["summary"]["window"]                      # closed loop: the measurement window's figures
        tps = np.array(r["requests"]["tps_per_user"])
        # the per-request data are exactly the measured multi-token requests behind the summary
        assert tps.size == s["measured_requests"] - s["num_single_token"]
        assert np.mean(tps) == pytest.approx(s["mean_tps_per_user"], rel=1e-5)
        load = r["summary"]["load"]
        assert load["mode"] == "closed" and load["concurrency"] == r["config"]["load"]["value"]


def test_results_frame_and_seed_spread(serial_dir):
    df = results_frame(serial_dir)
    assert len(df) == 8 and set(df.curve) == {"mtp1", "dspark"}
    sp = seed_spread(df)
    assert len(sp) == 4 and (sp.num_seeds == 2).all()
    for _, row in sp.iterrows():
        v = df[(df.curve == row.curve) & (df.load == row.load)].output_throughput_per_gpu.to_numpy()
        assert row.output_throughput_per_gpu_mean == pytest.approx(v.mean())
        assert row.output_throughput_per_gpu_std == pytest.approx(np.std(v, ddof=1))
        assert row.output_throughput_per_gpu_min == v.min() and row.output_throughput_per_gpu_max == v.max()


def test_rerun_skips_finished_points_and_recomputes_missing_or_cut_off(serial_dir, tmp_path):
    out = tmp_path / "resume"
    import shutil
    shutil.copytree(serial_dir, out)
    before = {r["id"]: strip(r) for r in load_records(out)}
    res = run_sweep(SPEC, load_scenario(), small_trace(), out, executor="serial", progress=False)
    assert (res.computed, res.skipped) == (0, 8)
    files = sorted(points_dir(out).glob("*.json"))
    files[0].unlink()                                                   # lost
    text = files[1].read_text()
    files[1].write_text(text[: len(text) // 2])                        # cut off
    files[2].write_text(text.replace('"status":"ok"', '"status":"OK"'))  # checksum mismatch (and wrong id)
    (points_dir(out) / ".deadbeef.json.tmp-123").write_text("{")       # leftover temporary file
    assert read_record(files[1]) is None and read_record(files[2]) is None
    res = run_sweep(SPEC, load_scenario(), small_trace(), out, executor="serial", progress=False)
    assert (res.computed, res.skipped, res.recomputed_bad) == (3, 5, 2)
    assert not list(points_dir(out).glob(".*tmp*"))
    assert {r["id"]: strip(r) for r in load_records(out)} == before    # recomputed bit for bit


def test_progress_callback_reports_every_point_and_resumed_ones(tmp_path):
    spec = SweepSpec(policies=("mtp1",), concurrency=(1, 2), seeds=(0, 1), num_requests=8)
    events: list[SweepProgress] = []
    run_sweep(spec, load_scenario(), small_trace(), tmp_path, executor="serial", progress=events.append)
    assert events[0] == SweepProgress(total=4, done=0, running=())
    assert all(e.total == 4 for e in events)
    # serial: each point is announced running, then reported done (no longer running)
    starts = [e for e in events if e.running]
    assert [len(e.running) for e in starts] == [1, 1, 1, 1] and [e.done for e in starts] == [0, 1, 2, 3]
    assert [e.done for e in events if not e.running] == [0, 1, 2, 3, 4]
    assert {e.running[0].id for e in starts} == {r["id"] for r in load_records(tmp_path)}
    assert starts[0].running[0].label().startswith("mtp1 gamma=1 c=")
    again: list[SweepProgress] = []
    run_sweep(spec, load_scenario(), small_trace(), tmp_path, executor="serial", progress=again.append)
    assert again == [SweepProgress(total=4, done=4, running=())]                   # all resumed


def test_write_record_is_atomic_and_checksummed(tmp_path):
    rec = {"record_version": 1, "id": "abc", "status": "ok", "summary": {"x": 1.5}, "wall_time_s": 0.1}
    path = write_record(tmp_path, rec)
    assert path.name == "abc.json" and read_record(path)["summary"] == {"x": 1.5}
    assert not [p for p in path.parent.iterdir() if p.name != "abc.json"]


def test_failed_point_is_recorded_and_the_sweep_goes_on(tmp_path):
    # 6 requests cannot give 4 users a closed-loop window: that point fails, the others run
    spec = SweepSpec(policies=("mtp1",), concurrency=(1, 4), num_requests=6)
    res = run_sweep(spec, load_scenario(), small_trace(), tmp_path, executor="serial", progress=False)
    assert len(res.failed) == 1
    df = results_frame(tmp_path)
    bad = df[df.status == "error"]
    assert list(bad.load) == [4.0] and "closed-loop window" in bad.error.iloc[0]
    assert (df[df.load == 1.0].status == "ok").all()
    # failed points are skipped on a re-run unless asked to retry
    assert run_sweep(spec, load_scenario(), small_trace(), tmp_path, executor="serial", progress=False).computed == 0
    again = run_sweep(spec, load_scenario(), small_trace(), tmp_path, executor="serial", progress=False,
                      retry_failed=True)
    assert again.computed == 1 and len(again.failed) == 1


# --------------------------------------------------------------------------------------------- executors
def test_process_pool_gives_identical_records(serial_dir, tmp_path):
    res = run_sweep(SPEC, load_scenario(), small_trace(), tmp_path, executor="process", jobs=2, progress=False)
    assert res.computed == 8
    assert [strip(r) for r in load_records(tmp_path)] == [strip(r) for r in load_records(serial_dir)]


def _need(module: str):
    try:
        __import__(module)
    except ImportError:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {module} is not installed")
        pytest.skip(f"{module} not installed")


def test_dask_local_cluster_gives_identical_records(serial_dir, tmp_path):
    _need("distributed")
    res = run_sweep(SPEC, load_scenario(), small_trace(), tmp_path, executor="dask", jobs=2, progress=False)
    assert res.computed == 8
    assert [strip(r) for r in load_records(tmp_path)] == [strip(r) for r in load_records(serial_dir)]


def test_ray_local_cluster_gives_identical_records(serial_dir, tmp_path):
    _need("ray")
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        res = run_sweep(SPEC, load_scenario(), small_trace(), tmp_path, executor="ray", jobs=2, progress=False)
    finally:
        ray.shutdown()
    assert res.computed == 8
    assert [strip(r) for r in load_records(tmp_path)] == [strip(r) for r in load_records(serial_dir)]


def test_unknown_executor_is_an_input_error(tmp_path):
    with pytest.raises(SpecsimInputError, match="executor"):
        run_sweep(SPEC, load_scenario(), small_trace(), tmp_path, executor="mpi", progress=False)


# --------------------------------------------------------------------------------------------- SIGKILL
def test_sigkill_loses_nothing_finished(serial_dir, tmp_path):
    """Kill a CLI sweep with SIGKILL once some records exist; the re-run completes the same records."""
    trace_file = tmp_path / "small.jsonl"
    save_trace(small_trace(), trace_file)
    out = tmp_path / "killed"
    cmd = [sys.executable, "-c", "from specsim.cli import main; main()", "sweep", "--trace", str(trace_file), "--out", str(out),
           "--policies", "mtp1,dspark", "--concurrency", "1,4", "--seeds", "2", "--num-requests", "16",
           "--executor", "serial", "--quiet"]
    env = dict(os.environ, COLUMNS="200")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list(points_dir(out).glob("*.json"))) >= 2 if points_dir(out).is_dir() else False:
            break
        time.sleep(0.05)
    if proc.poll() is not None:
        pytest.fail(f"sweep ended before it could be killed: {proc.stderr.read().decode()[-500:]}")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survivors = {p.name: p.read_bytes() for p in points_dir(out).glob("*.json")}
    assert 2 <= len(survivors) < 8
    assert all(read_record(points_dir(out) / n) is not None for n in survivors)
    res = run_sweep(SPEC, load_scenario(), small_trace(), out, executor="serial", progress=False)
    assert res.skipped == len(survivors) and res.computed == 8 - len(survivors)
    assert all((points_dir(out) / n).read_bytes() == b for n, b in survivors.items())   # untouched
    assert [strip(r, False) for r in load_records(out)] == [strip(r, False) for r in load_records(serial_dir)]


def test_cli_sweep_prints_the_spread_and_writes_the_manifest(tmp_path):
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    trace_file = tmp_path / "small.jsonl"
    save_trace(small_trace(), trace_file)
    out = tmp_path / "cli"
    r = CliRunner().invoke(app, ["sweep", "--trace", str(trace_file), "--out", str(out), "--policies", "mtp1",
                                 "--concurrency", "1,2", "--num-requests", "12", "--executor", "serial"])
    assert r.exit_code == 0, r.output
    assert "2 points: 2 computed" in r.output and "per load point (one seed: no spread" in r.output
    assert "+-" not in r.output                                    # one seed: no spread shown
    man = json.loads((out / "sweep.json").read_text())
    assert man["trace_sha"] == small_trace().content_hash() and len(man["point_ids"]) == 2


def test_cli_sweep_exits_1_when_every_point_failed(tmp_path):
    """Every point failed (a horizon before each closed loop's window closes): the records keep the errors and
    the command exits 1, so a script sees it (a fresh user's report: it exited 0)."""
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    trace_file = tmp_path / "small.jsonl"
    save_trace(small_trace(), trace_file)
    out = tmp_path / "cli"
    args = ["sweep", "--trace", str(trace_file), "--out", str(out), "--policies", "mtp1", "--concurrency", "1,2",
            "--num-requests", "12", "--executor", "serial"]
    r = CliRunner().invoke(app, args + ["--max-sim-s", "0.001"])
    assert r.exit_code == 1 and "every one of the sweep's 2 points failed" in r.output
    assert "2 points: 2 computed (2 of them failed), 0 already done" in " ".join(r.output.split())
    bogus = CliRunner().invoke(app, args[:4] + [str(tmp_path / "never")] + args[5:-2] + ["--executor", "bogus"])
    assert bogus.exit_code != 0 and not (tmp_path / "never").exists()      # refused before --out is created
    assert len(list((out / "points").glob("*.json"))) == 2                      # recorded, with their errors


def test_open_loop_rate_axis_and_knob_curves(tmp_path):
    """Open-loop rate scales and a gamma axis: curves are labelled by the knob that varies."""
    spec = SweepSpec(policies=("mtp1", "static"), rate_scales=(1.0, 4.0), gammas=(2, 4), num_requests=12)
    res = run_sweep(spec, load_scenario(), small_trace(), tmp_path, executor="serial", progress=False)
    assert len(res.points) == 6 and res.failed == []        # mtp1 ignores gamma: 2 points, static 4
    df = results_frame(tmp_path)
    assert set(df.curve) == {"mtp1", "static gamma=2", "static gamma=4"}
    assert (df["mode"] == "open").all() and df.concurrency.isna().all() and set(df.rate_scale) == {1.0, 4.0}
    # open loop: every request is measured, and x4 compresses the arrivals
    assert (df.measured_requests == 12).all()
    for _, sub in df.groupby("curve"):
        sub = sub.sort_values("rate_scale")
        assert sub.request_throughput.iloc[1] > sub.request_throughput.iloc[0]
    # static verifies gamma drafts per request-step: the budget is gamma + 1 up to end-of-output clips
    for g in (2, 4):
        v = df[df.curve == f"static gamma={g}"].mean_verify_tokens_per_request
        assert ((v <= g + 1 + 1e-9) & (v > g + 0.8)).all()


# --------------------------------------------------------------------------------------------- imports
def _new_modules(first: str, then: str) -> list[str]:
    """Modules a fresh interpreter loads for ``import then`` after ``import first``."""
    code = (f"import sys, {first}; before = set(sys.modules); import {then}; "
            "print(' '.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.split()


def test_frontier_reads_records_without_loading_the_sweep():
    loaded = _new_modules("specsim", "specsim.analysis.frontier")
    assert "specsim.analysis.sweep_records" in loaded and "specsim.analysis.sweep_tables" in loaded
    assert not {"specsim.sweep", "specsim.sweep.runner", "specsim.sweep.executors", "specsim.sweep.point",
                "specsim.simulation"} & set(loaded)


def test_sweep_command_module_imports_stay_light():
    loaded = _new_modules("specsim.cli", "specsim.cli.sweep_cmd")
    assert [m for m in loaded if m.split(".")[0] in ("rich", "pandas", "numpy") or
            m.startswith("specsim.sweep")] == []


def test_every_public_name_is_importable_from_the_package():
    import specsim.sweep as sweep_pkg

    for name in sweep_pkg.__all__:
        assert getattr(sweep_pkg, name) is not None
    with pytest.raises(AttributeError):
        sweep_pkg.parse_list       # noqa: B018  (moved to the CLI)


def test_requests_per_user_beyond_the_trace_is_noted_before_the_sweep_runs(capsys):
    """A fresh user's 512-line trace at 128 and 256 users with --requests-per-user 8: the points were cut to the
    trace without a word, and those at 256 users failed advising more requests per user."""
    from pathlib import Path

    from specsim.cli.sweep_notes import note_requests_per_user

    note_requests_per_user(8, (16, 64, 128, 256), Path("he.jsonl"), 512)
    err = " ".join(capsys.readouterr().err.split())
    assert err == ("note: he.jsonl holds 512 requests, fewer than --requests-per-user 8 x the users at 2 loads; at "
                   "128 users the points run all of them (4.0 per user); at 256 users that is no more than twice "
                   "the users, too few for a closed-loop window: those points will fail (a longer trace, or fewer "
                   "users)")
    note_requests_per_user(8, (16, 64), Path("he.jsonl"), 512)
    note_requests_per_user(None, (256,), Path("he.jsonl"), 512)
    assert capsys.readouterr().err == ""


def test_a_point_that_ran_the_whole_trace_says_more_requests_per_user_cannot_help(tmp_path):
    """A fresh user's 300-line trace with --requests-per-user 8: the point at 64 users ran all 300 requests and
    failed advising more requests per user; compare then advised more --requests-per-user too."""
    from specsim.analysis.frontier import compare
    from specsim.workload import synth_trace

    tr = synth_trace(40, 1.0, seed=3, prompt_len=100, output_len=20)
    spec = SweepSpec(policies=("none",), concurrency=(2, 4, 32), requests_per_user=4)
    res = run_sweep(spec, load_scenario(), tr, tmp_path / "s", executor="serial")
    recs = {r["config"]["load"]["value"]: r for r in load_records(tmp_path / "s")}
    assert recs[32.0]["status"] == "error" and recs[4.0]["status"] == "ok" and len(res.failed) == 1
    assert recs[32.0]["error"].endswith("(this point ran the whole trace, 40 requests: more requests per user "
                                        "cannot help; a longer trace or fewer users)")
    advice = compare(list(recs.values()), [1.0]).iloc[0].advice
    assert advice.startswith("heavier load 32 failed for want of requests: those points ran the whole trace")


def _window_trace(n: int = 100) -> Trace:
    """``n`` requests, 0.1 s apart: of every 5, the 1st has 4,000 prompt + 500 output tokens and the 2nd a
    5,000-token prompt (both beyond the default profile's 4,096-token window: a run refuses them; a truncating one
    cuts the 1st's output to 96 tokens), the others 200 + 50."""
    k = np.arange(n) % 5
    return Trace(np.array([str(i) for i in range(n)], dtype=object), np.arange(n) * 0.1,
                 np.select([k == 0, k == 1], [4000, 5000], 200), np.where(k == 0, 500, 50),
                 np.full(n, "chat", dtype=object))


def test_the_requests_per_user_note_counts_only_the_requests_the_context_window_admits(tmp_path, capsys):
    """A 100-request trace whose 40 requests exceed the 4,096-token window: the note said nothing at 8 users x 10
    requests (80 <= 100) and 3.3 per user at 30 users, while the run refused the 40 at once and its users ran 60
    (7.5 and 2.0 per user). The note now counts the requests the run admits, by the run's own rule, and names
    the window's refusals; with truncation only a prompt that fills the window alone is refused. Since
    2026-12-07 a point at C users runs the first 10 x C requests (not the whole trace), so the window's refusals
    leave fewer per user at every load: 24 of the first 40 at 4 users, 48 of the first 80 at 8."""
    from specsim.cli.sweep_notes import context_refused, note_requests_per_user
    from specsim.run_config import context_refusals

    tr = _window_trace()
    refused, window = context_refused(tr, load_scenario())
    assert int(refused.sum()) == 40 and window.startswith("4,096 tokens, max_position_embeddings of")
    note_requests_per_user(10, (4, 8, 30, 60), Path("ctx.jsonl"), 100, refused, window)
    err = " ".join(capsys.readouterr().err.split())
    assert err == (f"note: ctx.jsonl holds 100 requests, of which the context window ({window}) refuses 40 as "
                   "unservable (prompt + output beyond it), so fewer than --requests-per-user 10 x the users can run "
                   "at 4 loads; at 4, 8, 30 users the points run 24, 48, 60 of them (6.0, 6.0, 2.0 per user); at 30 "
                   "users that is no "
                   "more than twice the users: the closed-loop window may not form (the point then fails; a longer "
                   "trace, or fewer users); at 60 users that is no more than twice the users, too few for a "
                   "closed-loop window: those points will fail (a longer trace, or fewer users)")
    # with --num-requests 20 the points at 8 users run the first 20, 12 of which the window admits
    note_requests_per_user(2, (4, 8), Path("ctx.jsonl"), 100, refused, window, num_requests=20)
    err = " ".join(capsys.readouterr().err.split())
    assert "at 1 load; at 8 users the points run those 12 (1.5 per user)" in err
    # the run's own rule: --set engine.max_model_len widens the window; truncation admits a request whose output
    # can be cut to fit, not a prompt that fills the window alone (64 of the first 80 admitted: 8.0 per user)
    assert int(context_refusals(tr, load_scenario(overrides=["engine.max_model_len=5050"]))[0].sum()) == 0
    cut = load_scenario(overrides=["engine.context_overflow=truncate"])
    assert np.flatnonzero(context_refusals(tr, cut)[0]).tolist() == list(range(1, 100, 5))   # the 5,000-token prompts
    note_requests_per_user(10, (8,), Path("ctx.jsonl"), 100, *context_refused(tr, cut))
    assert "refuses 20 as unservable" in " ".join(capsys.readouterr().err.split())
    note_requests_per_user(10, (8,), Path("ctx.jsonl"), 100, *context_refused(tr, cut), num_requests=100)
    assert capsys.readouterr().err == ""          # the first 100: 80 admitted, 8 users x 10 fit


def test_the_sweep_notes_what_its_points_then_refuse(tmp_path):
    """End to end: sweep --requests-per-user names the window's refusals up front, and the point's record counts
    the same: at 8 users x 10 the point runs the first 80 requests, 32 unservable and 48 completed."""
    from typer.testing import CliRunner

    from specsim.cli import _register, app
    _register()
    trace_file = tmp_path / "ctx.jsonl"
    save_trace(_window_trace(), trace_file)
    out = tmp_path / "sw"
    r = CliRunner().invoke(app, ["sweep", "--trace", str(trace_file), "--out", str(out), "--policies", "none",
                                 "--concurrency", "8", "--requests-per-user", "10", "--executor", "serial",
                                 "--quiet"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "refuses 40 as unservable (prompt + output beyond it)" in text
    assert ("each closed-loop point runs the trace's first --requests-per-user 10 x its users requests "
            f"({trace_file} holds 100): 80 at 8 users") in text
    assert "at 8 users the points run those 48 (6.0 per user)" in text
    (rec,) = load_records(out)
    assert (rec["config"]["num_requests"], rec["summary"]["unservable"], rec["summary"]["completed"]) == (80, 32, 48)
