"""A profile path in a scenario file resolves against the scenario file's folder (issue 20)."""

from __future__ import annotations

import os
from pathlib import Path

from specsim.hardware.profile import StepTimeProfile, save_profile
from specsim.scenario import load_scenario


def test_profile_path_resolves_beside_the_scenario_file(tmp_path, monkeypatch):
    folder = tmp_path / "deploy"
    folder.mkdir()
    save_profile(StepTimeProfile.flat(0.01, 64), folder / "mine.json")
    (folder / "s.toml").write_text('[profile]\nname = "mine.json"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sc = load_scenario(Path("..") / "deploy" / "s.toml")
    assert Path(sc.profile.name).resolve() == (folder / "mine.json").resolve()
    # a bundled name, and a path that is not a file beside the scenario, are kept as written
    (folder / "b.toml").write_text('[profile]\nname = "h100-llama2-7b-tp1"\n')
    assert load_scenario(folder / "b.toml").profile.name == "h100-llama2-7b-tp1"
    (folder / "c.toml").write_text('[profile]\nname = "other.json"\n')
    assert load_scenario(folder / "c.toml").profile.name == "other.json"
    # an override on the command line is not moved
    assert load_scenario(folder / "s.toml", ['profile.name="x.json"']).profile.name == "x.json"
    assert os.getcwd() == str(elsewhere)


def test_a_profile_shorter_than_the_prefill_chunk_fails_when_the_run_starts():
    import numpy as np
    import pytest

    from helpers import make_trace
    from specsim.errors import SpecsimInputError
    from specsim.simulation import simulate

    short = StepTimeProfile(np.array([1, 256]), np.array([0.01, 0.02]), source="short.json")
    trace = make_trace([0.0], [100], [10])
    colocated = load_scenario(overrides=['prefill.mode="colocated"'])
    with pytest.raises(SpecsimInputError, match="prefill chunk of 512 tokens.*build it with profile analytic"):
        simulate(trace, "none", colocated, profile=short)
    fitted = StepTimeProfile(np.array([1, 256]), np.array([0.01, 0.02]), source="fit.json",
                             metadata={"kind": "fitted"})              # a fresh user was sent to profile analytic
    with pytest.raises(SpecsimInputError, match="build it with profile fit --max-batch-tokens 512"):
        simulate(trace, "none", colocated, profile=fitted)
    # a profile that extrapolates has no last size to fall off
    ok = StepTimeProfile(np.array([1, 256]), np.array([0.01, 0.02]), extrapolate="linear")
    assert simulate(trace, "none", colocated, profile=ok).summary["completed"] == 1


def test_a_missing_profile_file_says_where_it_was_sought(tmp_path, monkeypatch):
    import pytest

    from helpers import make_trace
    from specsim.errors import SpecsimInputError
    from specsim.simulation import simulate

    (tmp_path / "s.toml").write_text('[profile]\nname = "missing.json"\n')
    monkeypatch.chdir(tmp_path.parent)
    with pytest.raises(SpecsimInputError) as e:
        simulate(make_trace([0.0], [10], [5]), "none", load_scenario(tmp_path / "s.toml"))
    assert (e.value.line, e.value.field) == (2, "profile.name")
    assert str(tmp_path / "missing.json") in e.value.got and str(tmp_path.parent / "missing.json") in e.value.got


def test_a_profile_name_a_set_gives_is_not_blamed_on_the_scenario_file(tmp_path, monkeypatch):
    # the file's mine.json exists beside it; the same name from --set is sought in the working folder only, and
    # its error names the value, not the file's line (it said "no such file beside the scenario" of a file there)
    import pytest

    from helpers import make_trace
    from specsim.errors import SpecsimInputError
    from specsim.simulation import simulate

    save_profile(StepTimeProfile.flat(0.01, 64), tmp_path / "mine.json")
    (tmp_path / "s.toml").write_text('[profile]\nname = "mine.json"\n')
    monkeypatch.chdir(tmp_path.parent)
    trace = make_trace([0.0], [10], [5])
    assert simulate(trace, "none", load_scenario(tmp_path / "s.toml")).summary["completed"] == 1
    with pytest.raises(SpecsimInputError) as e:
        simulate(trace, "none", load_scenario(tmp_path / "s.toml", ['profile.name="mine.json"']))
    assert e.value.file is None and e.value.line is None and "beside the scenario" not in str(e.value)
