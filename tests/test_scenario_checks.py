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
