"""How many requests a sweep point runs (``--num-requests``, ``--requests-per-user``), said before the sweep
starts, and folders swept under the earlier rule. A fresh user's ``--requests-per-user 8`` without
``--num-requests`` ran the whole 19,366-request trace at every point (14 min 51 s; 16 s with the request count
the help text promised)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli
from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.sweep import SweepSpec, load_records
from specsim.sweep.spec import expand_points, point_requests
from specsim.workload import Trace, save_trace


def _trace(n: int = 60) -> Trace:
    rng = np.random.default_rng(0)
    return Trace(request_id=[f"r{i}" for i in range(n)], arrival_s=np.arange(n) * 0.05,
                 prompt_tokens=rng.integers(32, 256, n), output_tokens=rng.integers(40, 160, n),
                 domain=np.array(["chat", "code", "math"] * (n // 3), dtype=object))


def test_a_point_runs_k_times_its_users_without_num_requests_and_the_larger_with_it():
    assert [point_requests(None, 8, "closed", c, 19366) for c in (8, 16, 128, 4096)] == [64, 128, 1024, 19366]
    assert [point_requests(400, 8, "closed", c, 19366) for c in (8, 64, 128)] == [400, 512, 1024]
    assert point_requests(400, None, "closed", 128, 19366) == 400
    assert point_requests(None, None, "closed", 128, 19366) == 19366
    assert point_requests(None, 8, "open", 2.0, 19366) == 19366          # K scales closed loads only
    assert point_requests(30000, 8, "closed", 8, 19366) == 19366         # never more than the trace


def test_a_points_identity_is_its_request_count_not_the_flags_that_set_it():
    """Old folders resume: a point's id hashes the requests it runs, so K without N now gives the ids of
    --num-requests K x C, and a folder swept when K without N ran the whole trace resumes with --num-requests set
    to the trace's size."""
    tr, scen = _trace(), load_scenario()
    ids = {(p.policy, p.load): (p.num_requests, p.id)
           for p in expand_points(SweepSpec(policies=("none",), concurrency=(2, 4), requests_per_user=4), scen, tr)}
    assert {k: n for k, (n, _) in ids.items()} == {("none", 2.0): 8, ("none", 4.0): 16}
    for c, n in ((2, 8), (4, 16)):
        (same,) = expand_points(SweepSpec(policies=("none",), concurrency=(c,), num_requests=n), scen, tr)
        assert same.id == ids[("none", float(c))][1]
    whole = expand_points(SweepSpec(policies=("none",), concurrency=(2, 4), requests_per_user=4, num_requests=60),
                          scen, tr)
    plain = expand_points(SweepSpec(policies=("none",), concurrency=(2, 4)), scen, tr)
    assert [p.id for p in whole] == [p.id for p in plain] and {p.num_requests for p in whole} == {60}


@pytest.mark.parametrize("k", [1, 2])
def test_two_or_fewer_requests_per_user_without_num_requests_is_refused(k):
    """K x C requests at C users cannot form a closed-loop window (it needs more than 2 x C): every point would
    fail, so the spec is refused, naming the flag; with --num-requests the larger count may still serve."""
    with pytest.raises(SpecsimInputError, match="an int >= 3 without --num-requests") as e:
        SweepSpec(policies=("none",), concurrency=(4,), requests_per_user=k)
    assert e.value.file == "--requests-per-user" and e.value.got == repr(k)
    assert SweepSpec(policies=("none",), concurrency=(4,), requests_per_user=k, num_requests=20).requests_per_user == k


def _sweep(trace: Path, out: Path, *extra: str) -> int:
    return run_cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "none", "--concurrency", "2,4",
                    "--executor", "serial", "--quiet", *extra])


def test_the_sweep_says_what_each_point_runs_before_it_starts(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    save_trace(_trace(), trace)
    assert _sweep(trace, tmp_path / "a", "--requests-per-user", "4") == 0
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"note: created folder {tmp_path / 'a'} for --out note: each closed-loop point runs the "
                          f"trace's first --requests-per-user 4 x its users requests ({trace} holds 60): 8 at 2 users, "
                          "16 at 4 users")
    assert sorted(r["config"]["num_requests"] for r in load_records(tmp_path / "a")) == [8, 16]
    assert _sweep(trace, tmp_path / "b", "--requests-per-user", "4", "--num-requests", "12") == 0
    err = " ".join(capsys.readouterr().err.split())
    assert ("runs the trace's first max(--num-requests 12, --requests-per-user 4 x its users) requests "
            f"({trace} holds 60): 12 at 2 users, 16 at 4 users") in err
    assert _sweep(trace, tmp_path / "c") == 0
    err = " ".join(capsys.readouterr().err.split())
    assert (f"note: each point runs the whole trace, 60 requests ({trace}; --num-requests N or --requests-per-user K "
            "run fewer)") in err


def test_a_folder_swept_when_k_ran_the_whole_trace_is_named_and_resumes_with_its_size(tmp_path, capsys):
    trace, out = tmp_path / "t.jsonl", tmp_path / "old"
    save_trace(_trace(), trace)
    assert _sweep(trace, out, "--requests-per-user", "4", "--num-requests", "60") == 0
    man = json.loads((out / "sweep.json").read_text())
    man["spec"]["num_requests"] = None                  # as the earlier rule's sweep of K alone wrote it
    (out / "sweep.json").write_text(json.dumps(man))
    capsys.readouterr()
    assert _sweep(trace, out, "--requests-per-user", "4", "--num-requests", "60") == 0   # resumes: nothing to run
    assert len(list((out / "points").glob("*.json"))) == 2
    man["spec"]["num_requests"] = None
    (out / "sweep.json").write_text(json.dumps(man))
    capsys.readouterr()
    assert _sweep(trace, out, "--requests-per-user", "4") == 0
    err = " ".join(capsys.readouterr().err.split())
    assert (f"note: 2 closed-loop points in {out} ran the whole trace (60 requests): until 2026-12-07 "
            "--requests-per-user without --num-requests ran it at every load. This sweep runs --requests-per-user 4 "
            "x the users and measures those points again (compare reads the new ones); --num-requests 60 resumes "
            "the old ones instead") in err
    assert sorted(r["config"]["num_requests"] for r in load_records(out)) == [8, 16]    # the latest sweep's
