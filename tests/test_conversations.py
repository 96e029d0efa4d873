"""Conversations (issue 23): ShareGPT-style files -> multi-turn sessions; a turn follows the previous one's
completion plus a think time and hits its whole context in the prefix cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.simulation import simulate
from specsim.workload.conversations import (parse_think, read_conversations, session_trace,
                                            synthetic_conversations, token_counter)
from specsim.workload import load_trace, save_trace

DATA = Path(__file__).parent / "data" / "conversations"


def _two_turns():
    count, how = token_counter(None)
    convs, skipped = read_conversations(DATA / "two_turns.json", count)
    return convs, skipped, how


def test_sharegpt_turns_in_tokens_by_the_character_rule():
    convs, skipped, how = _two_turns()
    assert skipped == 1 and "characters / 4" in how          # the question without a reply has no full turn
    # 400, 624, 40, 80 characters -> 100, 156, 10, 20 tokens
    assert convs[0].turns == ((100, 156), (10, 20))
    tr = session_trace(convs, rate=1.0, think=("const", (2.0,)))
    assert tr.prompt_tokens.tolist() == [100, 100 + 156 + 10] and tr.output_tokens.tolist() == [156, 20]
    assert tr.extra["turn"].tolist() == [0, 1] and tr.extra["think_s"].tolist() == [0.0, 2.0]


@pytest.mark.parametrize("sets", [[], ["prefill.mode=colocated"]], ids=["disaggregated", "colocated"])
def test_second_turn_hits_the_first_turns_whole_context(sets):
    convs, _, _ = _two_turns()
    tr = session_trace(convs, rate=1.0, think=("const", (2.0,)))
    res = simulate(tr, "static", load_scenario(None, sets), gamma=2)
    rq = res.requests
    # by hand: turn 1's context = 100 prompt + 156 output = 256 tokens = 16 full blocks of 16; turn 2's prompt
    # (266 tokens) starts with it, so its prefix hit is all 256; turn 1 had nothing cached
    assert rq.prefix_hit_tokens.tolist() == [0, 256]
    assert rq.prefix_lookup_tokens.tolist() == [100, 266]
    # turn 2 is issued 2.0 s (its think time) after turn 1 completes
    assert rq.arrival_s[1] == pytest.approx(rq.done_s[0] + 2.0)
    assert set(res.summary["prefix_cache"]) == ({"replica0"} if sets else {"prefill0"})


def test_without_prefix_caching_turns_still_chain_but_never_hit():
    convs, _, _ = _two_turns()
    tr = session_trace(convs, rate=1.0, think=("const", (0.5,)))
    rq = simulate(tr, "static", load_scenario(None, ["cluster.prefix_caching=false"]), gamma=2).requests
    assert rq.prefix_hit_tokens.tolist() == [0, 0]
    assert rq.arrival_s[1] == pytest.approx(rq.done_s[0] + 0.5)


def test_synthetic_sessions_hit_rate_by_hand():
    convs = synthetic_conversations(10, 3, seed=1, output_len=64, prompt_len=128)
    tr = session_trace(convs, rate=2.0, think=("exp", (1.0,)), seed=1)
    res = simulate(tr, "static", seed=0, gamma=2)
    # per session: prompts 128, 320, 512 with hits 0, 192, 384 -> 576 / 960
    assert res.summary["prefix_cache_hit_rate"] == pytest.approx(0.6)
    rq, nxt = res.requests, np.arange(len(tr))
    for i in nxt[tr.extra["turn"] > 0]:
        assert rq.arrival_s[i] == pytest.approx(rq.done_s[i - 1] + tr.extra["think_s"][i])


def test_closed_loop_users_run_whole_sessions():
    convs = synthetic_conversations(12, 3, seed=2, output_len=32, prompt_len=64)
    tr = session_trace(convs, rate=5.0, think=("const", (0.25,)), seed=2)
    rq = simulate(tr, "static", seed=0, gamma=2, concurrency=2).requests
    turn = tr.extra["turn"]
    for i in np.flatnonzero(turn > 0):
        assert rq.arrival_s[i] == pytest.approx(rq.done_s[i - 1] + 0.25)
    # never more than 2 sessions open at once: session s is open from its first arrival to its last completion
    spans = [(rq.arrival_s[i], rq.done_s[i + 2]) for i in np.flatnonzero(turn == 0)]
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    assert max(np.cumsum([d for _, d in events])) <= 2


def test_session_fields_round_trip(tmp_path):
    convs, _, _ = _two_turns()
    tr = session_trace(convs, rate=1.0, think=("uniform", (1.0, 3.0)), seed=4)
    p = tmp_path / "c.jsonl"
    save_trace(tr, p)
    back = load_trace(p)
    assert back.content_hash() == tr.content_hash()
    assert back.extra["session_id"].tolist() == ["s0", "s0"]
    lines = p.read_text().splitlines()
    p.write_text(lines[1] + "\n")                                  # turn 1 without its turn 0
    with pytest.raises(SpecsimInputError, match="turn"):
        load_trace(p)


def test_messages_jsonl_and_bad_inputs(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps({"id": "x", "messages": [{"role": "system", "content": "s" * 8},
                                                      {"role": "user", "content": "q" * 12},
                                                      {"role": "assistant", "content": "a" * 9}]}) + "\n")
    convs, _ = read_conversations(p, token_counter(None, 4.0)[0])
    assert convs[0].system == 2 and convs[0].turns == ((3, 3),)
    assert session_trace(convs, rate=1.0).prompt_tokens.tolist() == [5]
    for bad in ("exp", "uniform:3:1", "gauss:1", "exp:-1"):
        with pytest.raises(SpecsimInputError, match="think"):
            parse_think(bad)
    p.write_text('{"id": 1, "conversations": 5}\n')
    with pytest.raises(SpecsimInputError, match="conversations"):
        read_conversations(p, len)


def test_a_named_tokenizer_without_transformers_falls_back_to_the_rule():
    try:
        import transformers  # noqa: F401
    except ImportError:
        count, how = token_counter("gpt2")
        assert count("abcdefgh") == 2 and "not installed" in how
    else:
        pytest.skip("transformers is installed here: the named tokenizer would be loaded")


def test_trace_stats_of_a_conversation_trace_reads_the_session_starts():
    """`trace stats` gave a session trace's rate and CV from every turn's arrival_s, which for a later turn is its
    session's start (a fresh user: 5.03 req/s, CV 2.28 for 100 Poisson sessions at 2/s); they are the session
    starts' now, and the sessions are counted."""
    from specsim.workload.conversations import session_trace, synthetic_conversations
    from specsim.workload.trace import trace_stats

    tr = session_trace(synthetic_conversations(200, 3, seed=5), rate=2.0, think=("const", (2.0,)), seed=5)
    st = trace_stats(tr)
    assert st["num_requests"] == 600 and st["num_sessions"] == 200 and st["arrivals"] == "session starts"
    starts = tr.arrival_s[tr.extra["turn"] == 0]
    assert st["rate_req_per_s"] == pytest.approx(199 / (starts[-1] - starts[0]))
    assert 0.8 < st["interarrival_cv"] < 1.2                      # Poisson starts, not bursts of three
