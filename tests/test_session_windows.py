"""Closed loops on session traces: a user runs a whole conversation before taking the next, so a point's window
needs its requests to hold more than twice its users in conversations, not in requests. A sweep of a
40-conversation, 160-request trace at 2 to 32 users with --requests-per-user 8 said nothing up front and failed
every point (16 requests at 2 users hold 4 conversations)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import run_cli
from specsim.cli.sweep_notes import SESSION_WINDOW_USERS, check_closed_points, conversations_text
from specsim.engine.sessions import Sessions
from specsim.errors import SpecsimInputError
from specsim.simulation import simulate
from specsim.workload import save_trace, synth_trace
from specsim.workload.conversations import Conversation, session_trace, synthetic_conversations
from specsim.workload.extra import conversation_counts


def _sessions(num: int = 40, turns: int = 4):
    """``num`` conversations of ``turns`` turns each (num x turns requests, a session's turns together)."""
    convs = synthetic_conversations(num, turns, seed=3, output_len=24, prompt_len="uniform:40:80")
    return session_trace(convs, rate=4.0, think=("const", (0.05,)), seed=3)


def test_conversation_counts_follow_the_clusters_rule_on_every_prefix():
    tr = _sessions(10, 3)
    counts = conversation_counts(tr)
    assert counts.tolist() == [0] + [k // 3 + 1 for k in range(30)]         # a conversation opens every 3 lines
    for n in range(1, 31):
        assert counts[n] == len(Sessions.from_trace(tr.head(n), None).starts)
    assert conversation_counts(synth_trace(5, 1.0, seed=0)) is None           # no session fields


def test_the_note_names_failing_and_thin_points_and_the_requests_per_user_that_fix_them():
    tr = _sessions()
    text = " ".join(conversations_text(tr, Path("s.jsonl"), (2, 4, 8, 32), requests_per_user=8).split())
    # K 8 x 2, 4, 8 users = 16, 32, 64 requests = 4, 8, 16 conversations (2 x the users); at 32 the whole trace's 40
    assert text == ("s.jsonl is a session trace (40 conversations in 160 requests), and a closed-loop user runs a "
                    "whole conversation, think times included, before taking the next; at 2, 4, 8, 32 users the "
                    "points' first 16, 32, 64, 160 requests hold 4, 8, 16, 40 conversations, no more than twice the "
                    "users: those points will fail (the run refuses them): --requests-per-user 17 (more than 4 x the "
                    "users in conversations at 2, 4, 8 users), a longer trace, of more conversations (this one holds "
                    "too few for 4 x 32 users), or fewer users")
    # 4 x 2 users: the 9th conversation opens at line 33, so K = ceil(33 / 2) = 17
    assert SESSION_WINDOW_USERS == 4 and conversation_counts(tr)[33] == 9
    text = " ".join(conversations_text(tr, Path("s.jsonl"), (2, 4), requests_per_user=12).split())
    assert ("at 2, 4 users the points' first 24, 48 requests hold 6, 12 conversations, fewer than 4 x the users: the "
            "window, open once every user has completed its first conversation and closed when the last one "
            "starts, may not open (the point then fails after its whole run) or measure few requests: "
            "--requests-per-user 17 (more than 4 x the users in conversations at 2, 4 users), a longer trace, of "
            "more conversations, or fewer users") in text
    assert "will fail" not in text
    with_n = " ".join(conversations_text(tr, Path("s.jsonl"), (4,), num_requests=40).split())
    assert with_n.endswith("--num-requests 65 (more than 4 x the users in conversations at 4 users), a longer "
                           "trace, of more conversations, or fewer users")
    assert conversations_text(tr, Path("s.jsonl"), (2, 4), requests_per_user=20) is None     # 10, 20: 5 x
    assert conversations_text(synth_trace(50, 1.0, seed=0), Path("r.jsonl"), (32,)) is None  # requests: not here


def test_a_sweep_whose_every_closed_point_would_fail_is_refused_before_out_exists(tmp_path, capsys):
    trace = tmp_path / "s.jsonl"
    save_trace(_sessions(), trace)
    out = tmp_path / "sw"
    code = run_cli(["sweep", "--trace", str(trace), "--out", str(out), "--policies", "none", "--concurrency",
                    "2,4,8,32", "--requests-per-user", "8", "--executor", "serial", "--quiet"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and not out.exists()
    assert ("the run refuses every point here; a closed-loop user runs a whole conversation before taking the "
            f"next; {trace} holds 40 conversations): more --requests-per-user or --num-requests, a longer trace, "
            "or fewer users, got 4, 8, 16, 40 conversations at 2, 4, 8, 32 users") in err
    with pytest.raises(SpecsimInputError, match="got 20 requests at 16 users"):      # a plain trace: by requests
        check_closed_points(20, None, (16,), (), Path("r.jsonl"), synth_trace(50, 1.0, seed=0))
    check_closed_points(20, None, (16,), (1.0,), Path("r.jsonl"), synth_trace(50, 1.0, seed=0))  # open points run


def test_a_sweep_warns_up_front_and_its_failing_point_is_refused_before_simulating(tmp_path, capsys):
    trace = tmp_path / "s.jsonl"
    save_trace(_sessions(), trace)
    code = run_cli(["sweep", "--trace", str(trace), "--out", str(tmp_path / "sw"), "--policies", "none",
                    "--concurrency", "4,32", "--requests-per-user", "20", "--executor", "serial", "--quiet"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0
    assert ("warning: " + f"{trace} is a session trace (40 conversations in 160 requests), and a closed-loop user "
            "runs a whole conversation, think times included, before taking the next; at 32 users the points' first "
            "160 requests hold 40 conversations, no more than twice the users: those points will fail") in err
    assert "no more than twice the users, too few" not in err          # the note by requests says nothing of it
    from specsim.sweep import load_records
    recs = {r["config"]["load"]["value"]: r for r in load_records(tmp_path / "sw")}
    assert recs[4.0]["status"] == "ok" and recs[32.0]["status"] == "error"
    assert "expected more than 64 conversations (twice the users)" in recs[32.0]["error"]
    assert "got 40 conversations in 160 requests" in recs[32.0]["error"]


def test_run_refuses_too_few_conversations_at_once_and_warns_of_a_thin_window(tmp_path, capsys):
    tr = _sessions()
    with pytest.raises(SpecsimInputError) as e:
        simulate(tr, "none", concurrency=20)
    assert e.value.field == "concurrency" and e.value.got == "40 conversations in 160 requests"
    assert "a user runs a whole conversation before taking the next" in e.value.expected
    trace = tmp_path / "s.jsonl"
    save_trace(tr, trace)
    assert run_cli(["run", "--trace", str(trace), "--policy", "none", "--concurrency", "16", "--json"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert (f"warning: {trace} is a session trace, and a closed-loop user runs a whole conversation, think times "
            "included, before taking the next; at 16 users the run's first 160 requests hold 40 conversations, "
            "fewer than 4 x the users") in err
    assert err.count("run's first") == 1 and "more --num-requests, a longer trace (more conversations)" in err


def test_a_window_that_never_opens_names_the_conversations():
    """Conversations of 1 to 8 turns, 21 of them for 8 users: more than twice the users, yet the user with the
    longest first conversation finishes it after the last one has started, so the run fails after its end."""
    rng = np.random.default_rng(0)
    convs = [Conversation(f"c{s}", 0, tuple((int(rng.integers(50, 300)), int(rng.integers(20, 200)))
                                            for _ in range(int(rng.integers(1, 9))))) for s in range(21)]
    tr = session_trace(convs, rate=4.0, think=("exp", (2.0,)), seed=0)
    with pytest.raises(SpecsimInputError) as e:
        simulate(tr, "mtp1", concurrency=8)
    assert (f"the window closes when the last of 21 conversations ({len(tr)} requests) is issued, before every user "
            "completed its first conversation; a user completes a whole conversation") in e.value.expected


def test_auto_concurrency_caps_users_by_the_traces_conversations(tmp_path):
    """The search's cap counted requests: on 40 four-turn conversations it would try 64 users (160 requests allow
    79), every one of whose points the run refuses; it now stops at 19 users, for the conversations' reason."""
    from specsim.scenario import load_scenario
    from specsim.sweep import SweepSpec
    from specsim.sweep.auto import auto_sweep

    res = auto_sweep(SweepSpec(policies=("none",), concurrency=(1,), requests_per_user=16), "closed", [1.0],
                     load_scenario(), _sessions(), tmp_path / "c", executor="serial")
    assert max(res.loads["none"]) == 16.0 and res.failed == []
    assert res.stopped["none"] == ["the trace's 40 conversations (a closed-loop window needs more than twice the "
                                   "users: at most 19 users)"]
