"""What compare, recommend and plot read from a sweep folder that was rerun or has failed points (found by a
new user's trial): an earlier version of the trace or of a plug-in is never averaged in, failed points are
named, and a plug-in that raises fails its own points with its file and line while the sweep goes on."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli
from specsim.analysis.sweep_records import load_records, manifest_point_ids, superseded
from specsim.workload import Trace, save_trace

BOOM = '''import numpy as np


class P:
    name = "boom"
    fits_zos = True

    def __call__(self, view):
        return np.full(view.num_requests, 1 // 0)
'''


def _trace(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    n = 24
    save_trace(Trace(request_id=[f"r{i}" for i in range(n)], arrival_s=np.arange(n) * 0.05,
                     prompt_tokens=rng.integers(32, 256, n), output_tokens=rng.integers(40, 160, n),
                     domain=np.array(["chat", "code", "math"] * 8, dtype=object)), path)
    return path


_cli = run_cli


def _compare(out: Path, capsys) -> tuple[dict, str]:
    capsys.readouterr()
    assert _cli(["compare", str(out), "--json", "--tiers", "20"]) == 0
    got = capsys.readouterr()
    return json.loads(got.out), got.err


def _sweep(trace: Path, out: Path, policies: str = "mtp1,dspark") -> int:
    return _cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", policies, "--concurrency", "2,4",
                 "--requests-per-user", "6", "--executor", "serial", "--quiet"])


def test_a_rerun_after_the_trace_changed_reads_as_the_rerun_alone(tmp_path, capsys):
    trace = _trace(tmp_path / "t.jsonl", 1)
    assert _sweep(trace, tmp_path / "s") == 0
    _trace(trace, 2)                                     # same file name, other content
    assert _sweep(trace, tmp_path / "s") == 0
    assert len(list((tmp_path / "s" / "points").glob("*.json"))) == 8      # both versions kept on disk
    assert _sweep(trace, tmp_path / "fresh") == 0        # the same sweep of the new trace alone
    rerun, err = _compare(tmp_path / "s", capsys)
    fresh, _ = _compare(tmp_path / "fresh", capsys)
    assert rerun["tiers"] == fresh["tiers"] and rerun == fresh
    assert "4 points of an earlier version of this sweep (its trace, plug-in or profile, or its number of requests)" \
        " are left out" in err
    recs = load_records(tmp_path / "s", latest=False)
    old = superseded(recs, manifest_point_ids(tmp_path / "s"))
    assert len(old) == 4 and len(load_records(tmp_path / "s")) == 4


def test_a_plugin_that_raises_fails_its_points_and_compare_names_them(tmp_path, capsys, monkeypatch):
    trace = _trace(tmp_path / "t.jsonl", 1)
    (tmp_path / "boom.py").write_text(BOOM)
    monkeypatch.chdir(tmp_path)
    assert _sweep(trace, tmp_path / "s", "dspark,boom.py:P") == 0
    recs = load_records(tmp_path / "s")
    failed = [r for r in recs if r["status"] != "ok"]
    assert len(recs) == 4 and len(failed) == 2                 # the sweep went on: dspark's points are there
    assert all("boom.py, line 9" in r["error"] and "ZeroDivisionError" in r["error"] for r in failed)
    js, err = _compare(tmp_path / "s", capsys)
    assert "warning: 2 failed points are left out" in err and "boom.py:P at closed load 2, seed 0" in err
    # the same plug-in in a run: one line naming its file and line, exit 2
    capsys.readouterr()
    assert _cli(["run", "--trace", str(trace), "--policy", "boom.py:P"]) == 2
    err = capsys.readouterr().err
    assert "boom.py, line 9" in err and "ZeroDivisionError" in err and "Traceback" not in err


def test_a_builtin_policy_error_is_not_taken_for_the_users():
    """Built-in policies are called unwrapped (their errors are specsim's bugs, with their traceback); in a
    user's, the innermost frame of the user's code is named even when the error is raised inside numpy."""
    from specsim.policies.base import policy_hooks
    from specsim.policies.guard import is_user_policy, user_frame
    from specsim.policies.static import StaticK

    builtin = StaticK(3)
    assert not is_user_policy(builtin) and policy_hooks(builtin).decide is builtin
    try:
        np.zeros(2).reshape(3)
    except ValueError as e:                               # raised in numpy, called from this file
        assert user_frame(e.__traceback__) is not None and user_frame(e.__traceback__)[0] == __file__


@pytest.mark.parametrize("policies", ["dspark,nosuch", "missing_file.py:P"])
def test_an_unknown_policy_fails_before_the_out_folder_is_created(tmp_path, capsys, policies):
    out = tmp_path / "never"
    assert _sweep(_trace(tmp_path / "t.jsonl", 0), out, policies) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and policies.split(",")[-1].split(":")[0] in err, err
    assert not out.exists()


def test_a_sweep_of_another_scenario_into_the_same_out_is_refused(tmp_path, capsys):
    """compare, recommend and report read one scenario per folder: a second sweep with a --set that changes the
    scenario is refused before it runs, naming --out; the same scenario resumes as before."""
    trace, out = _trace(tmp_path / "t.jsonl", 0), tmp_path / "s"
    assert _sweep(trace, out, "mtp1") == 0
    before = sorted(p.name for p in (out / "points").glob("*.json"))
    capsys.readouterr()
    code = _cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "mtp1", "--concurrency", "2,4",
                 "--requests-per-user", "6", "--executor", "serial", "--quiet",
                 "--set", "cluster.kv_capacity_tokens=50000"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--out" in err and "another scenario" in err, err
    assert sorted(p.name for p in (out / "points").glob("*.json")) == before
    assert _sweep(trace, out, "mtp1") == 0                   # the same scenario still resumes


def test_a_rerun_with_more_requests_per_user_replaces_the_points_it_measures_again(tmp_path, capsys):
    """A rerun into the same folder with another --requests-per-user measures the same points (policy, load,
    seed) with more requests: compare reads the rerun alone, as a fresh sweep of those settings, and a point
    that failed before and succeeds now is no longer reported as failed."""
    trace = _trace(tmp_path / "t.jsonl", 1)

    def sweep(out: Path, per_user: str) -> int:
        return _cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "mtp1,dspark",
                     "--concurrency", "2,4", "--num-requests", "8", "--requests-per-user", per_user,
                     "--executor", "serial", "--quiet"])

    assert sweep(tmp_path / "s", "3") == 0
    assert sweep(tmp_path / "s", "6") == 0
    assert len(list((tmp_path / "s" / "points").glob("*.json"))) == 8      # both versions kept on disk
    assert sweep(tmp_path / "fresh", "6") == 0
    rerun, err = _compare(tmp_path / "s", capsys)
    fresh, _ = _compare(tmp_path / "fresh", capsys)
    assert rerun == fresh and "4 points of an earlier version of this sweep" in err
    assert len(load_records(tmp_path / "s")) == 4


def test_curves_swept_on_different_requests_into_one_folder_are_named(tmp_path, capsys):
    """Two sweeps of different policies into one --out with different --num-requests: compare warns that the
    curves ran on different requests, naming each (a fresh user's report: static's 100-request points were
    ranked against mtp1's 200-request ones with no note); one setting gives no warning."""
    trace = _trace(tmp_path / "t.jsonl", 1)

    def sweep(policy: str, n: str) -> int:
        return _cli(["sweep", "--trace", str(trace), "--out", str(tmp_path / "s"), "--policies", policy,
                     "--rate-scales", "1", "--num-requests", n, "--executor", "serial", "--quiet"])

    assert sweep("mtp1", "12") == 0 and sweep("dspark", "12") == 0
    _, err = _compare(tmp_path / "s", capsys)
    assert "different requests" not in err
    assert sweep("static", "16") == 0
    _, err = _compare(tmp_path / "s", capsys)
    text = " ".join(err.split())
    assert "the curves ran on different requests (open load 1: dspark, mtp1 on 12 requests" in text
    assert "static on 16 requests" in text
    assert _cli(["report", str(tmp_path / "s"), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert '<p id="mixed">At 1 load the curves ran on different requests' in page


def test_plot_of_a_sweep_whose_every_point_failed_is_refused(tmp_path, capsys, monkeypatch):
    """No finished point: plot exits 2 naming the folder instead of writing blank figures (a fresh user's
    report), and a --quiet sweep's last error does not point at errors it did not print."""
    trace = _trace(tmp_path / "t.jsonl", 1)
    plugin = tmp_path / "boom.py"
    plugin.write_text(BOOM)
    code = _cli(["sweep", "--trace", str(trace), "--out", str(tmp_path / "s"), "--policies", f"{plugin}:P",
                 "--rate-scales", "1", "--num-requests", "8", "--executor", "serial", "--quiet"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 1 and "their errors are in" in err and "above" not in err
    assert _cli(["plot", str(tmp_path / "s"), "--out", str(tmp_path / "plots")]) == 2
    assert "no point finished" in capsys.readouterr().err
    assert not (tmp_path / "plots" / "frontiers.png").exists()


def test_compare_says_what_speculation_overhead_the_points_were_charged(tmp_path, capsys):
    """A sweep keeps no run notices: compare (and report's page) says, from the points' scenario, that the default
    profile's speculating points paid vLLM issue 49548's sourced defaults (issue 20), that a sweep with them set to
    0 paid none and its speed-ups come out high, and says nothing of speculation for a sweep of `none` alone."""
    trace = _trace(tmp_path / "t.jsonl", 1)
    assert _sweep(trace, tmp_path / "s") == 0
    err = " ".join(_compare(tmp_path / "s", capsys)[1].split())
    assert "note: speculation's own overhead: 0.775 ms per speculative step + 0.084 ms per running request" in err
    assert "acceptance: the built-in rates of drafters dspark (DSpark paper Fig. 2" in err     # whose rates they use
    assert _cli(["report", str(tmp_path / "s"), "--out", str(tmp_path / "r.html")]) == 0     # and the report's page
    assert '<p id="notes">Speculation&#39;s own overhead: 0.775 ms' in (tmp_path / "r.html").read_text()
    zero = ["--set", "engine.spec_step_s=0", "--set", "engine.spec_request_s=0"]
    assert _cli(["sweep", "--trace", str(trace), "--out", str(tmp_path / "z"), "--policies", "mtp1,dspark",
                 "--concurrency", "2,4", "--requests-per-user", "6", "--executor", "serial", "--quiet", *zero]) == 0
    err = " ".join(_compare(tmp_path / "z", capsys)[1].split())
    assert "the run charges no speculation overhead (the scenario;" in err and "sourced defaults" not in err
    # records of an earlier specsim kept no charge: compare says so instead of guessing it from today's code
    from specsim.sweep.store import write_record
    for f in (tmp_path / "z" / "points").glob("*.json"):
        rec = json.loads(f.read_text())
        if rec["status"] == "ok":
            rec["summary"].pop("speculation_overhead")
            write_record(tmp_path / "z", {k: v for k, v in rec.items() if k != "checksum"})
    err = " ".join(_compare(tmp_path / "z", capsys)[1].split())
    assert "speculating points were recorded by an earlier specsim" in err and "charges no" not in err
    assert _sweep(trace, tmp_path / "n", policies="none") == 0
    capsys.readouterr()
    assert _cli(["compare", str(tmp_path / "n"), "--json", "--tiers", "20", "--baseline", "none"]) == 0
    assert "speculation" not in capsys.readouterr().err


def test_thrashing_points_are_named_by_sweep_and_the_report_alike():
    """The report's page repeats sweep's thrashing warning (a fresh user found it only in the terminal): one
    rule, :func:`thrashing_points`, recomputed tokens above 25% of the output tokens."""
    import pandas as pd

    from specsim.analysis.sweep_tables import cautions, thrashing_points
    from specsim.cli.sweep_cmd import caution_text
    df = pd.DataFrame({"status": ["ok", "ok", "ok", "error"], "curve": ["dspark", "dspark", "static", "mtp1"],
                       "load": [16.0, 64.0, 64.0, 64.0], "recomputed_tokens": [10, 300, 251, 900],
                       "total_output_tokens": [1000, 1000, 1000, 1000]})
    assert thrashing_points(df) == ["dspark at 64", "static at 64"]          # 25% exactly is not thrashing
    assert cautions(df)[0] == ("thrashing", "thrashing at 2 points (dspark at 64, static at 64): recomputed tokens "
                               "exceed 25% of output tokens; the KV cache is too small for those loads")
    assert "thrashing at 2 points (dspark at 64, static at 64)" in " ".join(caution_text(df).split())
    assert cautions(df.iloc[:1]) == [] and caution_text(df.iloc[:1]) == ""


def test_recommend_says_how_far_unmet_tiers_are(tmp_path, capsys):
    """No tier met: recommend names the sweep's fastest deployable point instead of only saying so."""
    trace = _trace(tmp_path / "t.jsonl", 1)
    assert _sweep(trace, tmp_path / "s") == 0
    capsys.readouterr()
    assert _cli(["recommend", str(tmp_path / "s"), "--tiers", "5000"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    from specsim.sweep import results_frame
    df = results_frame(load_records(tmp_path / "s"))
    means = df.groupby(["curve", "load"]).mean_tps_per_user.mean()     # seed means (a fresh user saw one seed's)
    (curve, load), fastest = means.idxmax(), means.max()
    assert out == ("no deployable policy meets any of the tiers: the sweep's fastest point runs "
                   f"{fastest:.1f} TPS/user ({curve} at closed load {load:g}, mean over its seeds); lower the "
                   "tiers or sweep lighter loads")


def test_interrupted_sweep_says_what_it_kept(tmp_path, monkeypatch, capsys):
    """Ctrl-C during a sweep: status 130 and one line on how many finished records are kept and how to resume
    (a fresh user's interrupted sweep printed nothing)."""
    import specsim.sweep

    trace = _trace(tmp_path / "t.jsonl", 0)
    out = tmp_path / "sw"
    assert _cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "static", "--concurrency", "2",
                 "--executor", "serial", "--quiet"]) == 0
    capsys.readouterr()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(specsim.sweep, "run_sweep", interrupted)
    assert _cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "static,none", "--concurrency",
                 "2,4", "--executor", "serial", "--quiet"]) == 130
    err = " ".join(capsys.readouterr().err.split())
    assert "interrupted: the 0 point records this sweep finished are kept" in err and "resumes" in err
    assert err.endswith("specsim: interrupted") and "Traceback" not in err

    def interrupted_in_a_kernel(*args, **kwargs):        # Ctrl-C while a compiled kernel returns: numba's error
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise SystemError("CPUDispatcher(<function f>) returned a result with an exception set")

    monkeypatch.setattr(specsim.sweep, "run_sweep", interrupted_in_a_kernel)
    assert _cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "static", "--concurrency", "2",
                 "--executor", "serial", "--quiet"]) == 130
    assert "this sweep finished are kept" in " ".join(capsys.readouterr().err.split())

    def broken(*args, **kwargs):       # a worker killed (out of memory, a group signal the parent ignored)
        from concurrent.futures.process import BrokenProcessPool
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(specsim.sweep, "run_sweep", broken)
    assert _cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "static", "--concurrency", "2",
                 "--executor", "serial", "--quiet"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "a worker process of the sweep ended abruptly" in err and "resumes" in err and "Traceback" not in err


def test_a_pool_worker_keeps_an_ignored_sigint_ignored():
    """Workers exit at once on Ctrl-C, unless their parent ignores SIGINT (a shell's background job): then they do
    too, so a group SIGINT does not break the pool of a parent that runs on (a fresh user's traceback)."""
    import signal

    from specsim.sweep.executors import _worker_start

    saved = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _worker_start()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _worker_start()
        assert callable(signal.getsignal(signal.SIGINT)) and signal.getsignal(signal.SIGINT) is not \
            signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, saved)


def test_a_sweep_into_a_folder_of_another_workload_warns_at_once(tmp_path, capsys):
    """A fresh user swept mtp1 with --num-requests 500 into a folder swept with 2000: the sweep said nothing and
    compare warned only later while still ranking them; the sweep now warns when it leaves the folder mixed."""
    trace = _trace(tmp_path / "t.jsonl", 0)
    out = tmp_path / "sw"
    base = ["sweep", "--trace", str(trace), "--out", str(out), "--concurrency", "2", "--executor", "serial",
            "--quiet"]
    assert _cli([*base, "--policies", "static,none", "--num-requests", "24"]) == 0
    assert "different workloads" not in capsys.readouterr().err
    assert _cli([*base, "--policies", "static,none", "--num-requests", "24"]) == 0      # the same again: no warning
    assert "different workloads" not in capsys.readouterr().err
    assert _cli([*base, "--policies", "none", "--num-requests", "12"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "now holds points of different workloads" in err and "none on 12 requests" in err


def test_records_a_sweep_replaced_stay_replaced_after_a_sweep_of_other_policies(tmp_path):
    """A fresh user swept three policies on 300 requests, again on 200, then two other policies into the same
    folder: the 300-request records came back and were pooled with the 200-request ones as extra seeds."""
    trace = _trace(tmp_path / "t.jsonl", 0)
    out = tmp_path / "sw"
    base = ["sweep", "--trace", str(trace), "--out", str(out), "--concurrency", "2", "--executor", "serial",
            "--quiet"]
    assert _cli([*base, "--policies", "static,none", "--num-requests", "24"]) == 0
    assert _cli([*base, "--policies", "static,none", "--num-requests", "12"]) == 0
    assert _cli([*base, "--policies", "mtp1", "--num-requests", "12"]) == 0
    recs = load_records(out)
    assert sorted(r["config"]["policy"] for r in recs) == ["mtp1", "none", "static"]
    assert {r["config"]["num_requests"] for r in recs} == {12}
    # the first version swept again is current again (its records are found, not recomputed)
    assert _cli([*base, "--policies", "static,none", "--num-requests", "24"]) == 0
    assert {(r["config"]["policy"], r["config"]["num_requests"]) for r in load_records(out)} == {
        ("static", 24), ("none", 24), ("mtp1", 12)}


def test_sweep_notes_what_gamma_values_do_not_change(tmp_path, capsys):
    """sweep --policies mtp1 --gamma 7 and --gamma 0 said nothing of the fixed or zero gamma that run notes."""
    trace = _trace(tmp_path / "t.jsonl", 0)
    assert _cli(["sweep", "--trace", str(trace), "--out", str(tmp_path / "sw"), "--policies", "mtp1,static",
                 "--gamma", "0,3", "--concurrency", "2", "--executor", "serial", "--quiet"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "mtp1 fixes gamma 1" in err and "at gamma 0 nothing is drafted, so static run as no speculation" in err
    assert _cli(["sweep", "--trace", str(trace), "--out", str(tmp_path / "sw2"), "--policies", "static",
                 "--gamma", "3", "--concurrency", "2", "--executor", "serial", "--quiet"]) == 0
    assert "fixes gamma" not in (err := capsys.readouterr().err) and "at gamma 0" not in err
    assert _cli(["sweep", "--trace", str(trace), "--out", str(tmp_path / "sw3"), "--policies", "none",
                 "--gamma", "3,5", "--concurrency", "2", "--executor", "serial", "--quiet"]) == 0
    assert "none never drafts: the --gamma values do not apply to it" in " ".join(capsys.readouterr().err.split())


def test_a_sweep_of_another_trace_that_would_leave_the_folder_mixed_is_refused(tmp_path, capsys):
    """A fresh user swept mtp1 and none on a synthetic trace into a folder of the bundled one: the sweep ran, and
    compare built curves from both traces (the scenario's change was refused; the trace's was not). Now a sweep
    that would leave points of another trace beside its own is refused; one that recomputes them all replaces
    them, as before."""
    out = tmp_path / "s"
    assert _sweep(_trace(tmp_path / "a.jsonl", 1), out, "static,none") == 0
    before = sorted(p.name for p in (out / "points").iterdir())
    other = _trace(tmp_path / "b.jsonl", 2)
    capsys.readouterr()
    assert _sweep(other, out, "none") == 2                          # static's points of a.jsonl would stay
    err = " ".join(capsys.readouterr().err.split())
    assert "field 'trace': expected a new --out for another trace" in err and "holds 2 points measured on" in err
    assert "static at 2, static at 4" in err
    assert sorted(p.name for p in (out / "points").iterdir()) == before           # nothing run, nothing written
    assert _sweep(other, out, "static,none") == 0                   # every point again: the rerun replaces them
    from specsim.workload import load_trace
    tr = load_trace(other)                                          # 2 and 4 users x 6: its first 12, all 24
    shas = {(r["config"]["num_requests"], r["config"]["trace_sha"]) for r in load_records(out)}
    assert shas == {(12, tr.head(12).content_hash()), (24, tr.content_hash())}
