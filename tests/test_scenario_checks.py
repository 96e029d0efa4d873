"""A fresh user's scenario-file mistakes (issue review of the fleet files): each gets an error or a warning that
names the file, the line and the key, and says what to write instead."""

from __future__ import annotations

import pytest

from specsim.errors import SpecsimInputError
from specsim.scenario import load_scenario


def _load_error(tmp_path, text: str) -> SpecsimInputError:
    """The error of loading the scenario file ``text``."""
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    with pytest.raises(SpecsimInputError) as e:
        load_scenario(path)
    assert e.value.file == str(path)
    return e.value


# ---------------------------------------------------------------- [policy] name: the policy is a run's choice
def test_a_policy_name_in_the_scenario_file_says_the_policy_is_chosen_per_run(tmp_path):
    e = _load_error(tmp_path, '[engine]\ngamma = 5\n[policy]\nname = "dspark"\n')
    assert (e.line, e.field) == (4, "policy.name")
    text = str(e)
    assert "the policy is chosen per run, not in the scenario file" in text
    assert "specsim run --policy dspark" in text and "specsim sweep --policies dspark" in text
    assert "simulate(trace, 'dspark', scenario)" in text
    assert "--set policy.knobs.name" not in text and "policy knobs go in" not in text


def test_a_knob_written_in_policy_is_still_sent_to_policy_knobs(tmp_path):
    e = _load_error(tmp_path, "[policy]\nthreshold = 0.5\n")
    assert (e.line, e.field) == (2, "policy.threshold")
    assert "policy knobs go in [policy.knobs]: --set policy.knobs.threshold=..." in str(e)


# ---------------------------------------------------------------- a misspelt [acceptance.drafters.NAME]
def test_a_misspelt_drafter_table_names_its_header_line_and_the_name_alone(tmp_path):
    e = _load_error(tmp_path, "[engine]\ngamma = 5\n\n[acceptance.drafters.eagel3]\nlength = 2.5\n")
    assert (e.line, e.field, e.got) == (4, "acceptance.drafters.eagel3", "'eagel3'")
    assert "(closest valid: 'eagle3')" in str(e) and str(e).endswith("got 'eagel3'")
    assert "length" not in e.got                                 # not the whole table
    # the inline form names the line of its key; an mtp entry on a table without MTP rows names the entry's key
    e = _load_error(tmp_path, "[acceptance]\ndrafters = {mtpp = {length = 1.8}}\n")
    assert (e.line, e.field, e.got) == (2, "acceptance.drafters.mtpp", "'mtpp'") and "closest valid: 'mtp'" in str(e)
    e = _load_error(tmp_path, '[acceptance.drafters.mtp]\nlength = 1.8\ntable = "fig2"\n')
    assert (e.line, e.field, e.got) == (3, "acceptance.drafters.mtp.table", "'fig2'")


# ---------------------------------------------------------------- [profile] without name; a profile too short
@pytest.mark.parametrize("text, line", [
    ('[cluster]\nnum_replicas = 2\n\n[profile]\n\n[engine]\ngamma = 5\n', 4),
    ('[profile]\nlookup = "padded"\n', 1),
    ('profile.lookup = "padded"\n', 1),
])
def test_a_profile_table_without_name_is_refused_at_its_line(tmp_path, text, line):
    e = _load_error(tmp_path, text)
    assert (e.line, e.field, e.got) == (line, "profile.name", "a [profile] table without name")
    assert "a [profile] table that names its profile" in str(e) and "name = 'h100-llama2-7b-tp1' keeps the default" \
        in str(e)


def test_without_a_profile_table_the_default_runs_and_a_set_needs_no_name(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text("[engine]\ngamma = 5\n")
    assert load_scenario(path).profile.name == "h100-llama2-7b-tp1"
    assert load_scenario(path, ["profile.lookup=padded"]).profile.lookup == "padded"


def _colocated_error(scenario, **kw) -> SpecsimInputError:
    from helpers import make_trace
    from specsim.simulation import simulate

    with pytest.raises(SpecsimInputError) as e:
        simulate(make_trace([0.0], [100], [10]), "none", scenario, **kw)
    return e.value


def test_a_profile_too_short_for_the_chunk_names_the_scenario_line_and_the_default_profile(tmp_path):
    path = tmp_path / "fleet.toml"
    path.write_text('[prefill]\nmode = "colocated"\nchunk_tokens = 8192\n')
    e = _colocated_error(load_scenario(path))
    assert (e.file, e.line, e.field) == (str(path), 3, "prefill.chunk_tokens")
    assert "prefill chunk of 8192 tokens" in e.expected and "a chunk of 4096 tokens or less" in e.expected
    assert "name a profile measured that far (specsim profile list)" in e.expected      # a bundled one: not rebuilt
    assert "build it with" not in e.expected
    assert e.got.startswith("profile h100-llama2-7b-tp1 (") and "h100-llama2-7b-tp1.json, the default: the " \
        "scenario names none), ending at 4096 tokens" in e.got
    # named in the file: not called the default; a chunk from --set: the scenario file, no line
    path.write_text('[prefill]\nmode = "colocated"\nchunk_tokens = 8192\n[profile]\nname = "h100-llama2-7b-tp1"\n')
    assert "the default" not in _colocated_error(load_scenario(path)).got
    path.write_text('[prefill]\nmode = "colocated"\n')
    e = _colocated_error(load_scenario(path, ["prefill.chunk_tokens=8192"]))
    assert (e.file, e.line, e.field) == (str(path), None, "prefill.chunk_tokens")


def test_a_profile_of_ones_own_too_short_is_sent_to_be_built_further(tmp_path):
    import numpy as np

    from specsim.hardware.profile import StepTimeProfile

    short = StepTimeProfile(np.array([1, 256]), np.array([0.01, 0.02]), source=str(tmp_path / "mine.json"))
    e = _colocated_error(load_scenario(overrides=['prefill.mode="colocated"']), profile=short)
    assert e.file is None and e.field == "prefill.chunk_tokens"
    assert "build it with profile analytic --max-batch-tokens 512 or more" in e.expected
    assert e.got == f"profile mine ({tmp_path / 'mine.json'}), ending at 256 tokens"
