"""A later ``--set`` replaces how an earlier file sized the KV pool; ``none`` clears an optional key."""

from __future__ import annotations

import pytest

from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario
from specsim.sections import later_override

B200 = "specsim/scenarios/b200-qwen3.8-27b-vllm.toml"


def test_kv_capacity_set_later_replaces_the_files_memory_share(capsys):
    assert load_scenario(B200).cluster.gpu_memory_utilization == 0.9
    c = load_scenario(B200, ["cluster.kv_capacity_tokens=8000000"]).cluster
    assert (c.kv_capacity_tokens, c.gpu_memory_utilization) == (8_000_000, None)
    err = capsys.readouterr().err
    assert "note: --set cluster.kv_capacity_tokens=8000000 replaces cluster.gpu_memory_utilization = 0.9" in err


def test_memory_share_set_later_replaces_an_earlier_capacity():
    c = load_scenario(None, ["cluster.kv_capacity_tokens=8000", "cluster.gpu_memory_utilization=0.8"]).cluster
    assert (c.kv_capacity_tokens, c.gpu_memory_utilization) == (None, 0.8)


def test_none_clears_an_optional_key():
    c = load_scenario(B200, ["cluster.gpu_memory_utilization=none"]).cluster
    assert (c.kv_capacity_tokens, c.gpu_memory_utilization) == (None, None)
    c = load_scenario(B200, ["cluster.gpu_memory_utilization=none", "cluster.kv_capacity_tokens=9000"]).cluster
    assert (c.kv_capacity_tokens, c.gpu_memory_utilization) == (9000, None)


def test_none_stays_a_word_for_a_string_key_or_a_required_one():
    assert later_override(load_scenario(), {"cluster": {"router": "none"}}, "--set") == {"cluster": {"router": "none"}}
    with pytest.raises(SpecsimInputError, match="cluster.max_num_seqs"):
        load_scenario(None, ["cluster.max_num_seqs=none"])


def test_both_in_one_set_is_still_an_error():
    with pytest.raises(SpecsimInputError, match="no value while cluster.kv_capacity_tokens is set"):
        load_scenario().with_updates({"cluster": {"kv_capacity_tokens": 8000, "gpu_memory_utilization": 0.8}})
