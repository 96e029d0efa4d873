"""A fresh user's scenario-file mistakes (issue review of the fleet files): each gets an error or a warning that
names the file, the line and the key, and says what to write instead."""

from __future__ import annotations

import numpy as np
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


# ---------------------------------------------------------------- seconds that read as milliseconds: warnings
def _fleet(tmp_path, engine: str, step_s: float = 0.007):
    """A scenario file of a fleet on a flat profile of ``step_s`` per step (saved beside it), ``engine`` lines in
    its [engine] table from line 4."""
    from specsim.hardware.profile import StepTimeProfile, save_profile

    save_profile(StepTimeProfile.flat(step_s, 4096), tmp_path / "fleet.json")
    path = tmp_path / "fleet.toml"
    path.write_text(f'[profile]\nname = "fleet.json"\n[engine]\n{engine}\n')
    return path


def _warnings(path, overrides=()) -> list[str]:
    from specsim.hardware.profile import resolve_profile
    from specsim.run_notices import unit_warnings

    sc = load_scenario(path, list(overrides))
    return unit_warnings(sc, resolve_profile(sc.profile.name))


def test_a_host_overhead_above_the_step_at_one_request_warns_with_its_line(tmp_path):
    path = _fleet(tmp_path, "gamma = 5\nhost_overhead_s = 0.8")
    [w] = _warnings(path)
    assert w.startswith(f"{path}, line 5, field 'engine.host_overhead_s': 0.8 s of CPU scheduling per step is more "
                        "than the whole GPU step at one request on profile fleet (7 ms)")
    assert w.endswith("did you mean ms? (0.8 ms is host_overhead_s = 0.0008)")
    assert _warnings(_fleet(tmp_path, "host_overhead_s = 0.0008")) == []
    # 6 ms is below this 7 ms step: a slow CPU, not a unit slip
    assert _warnings(_fleet(tmp_path, "host_overhead_s = 0.006")) == []


def test_every_per_step_key_warns_above_the_step_and_a_set_value_names_no_line(tmp_path):
    path = _fleet(tmp_path, "gamma = 5")
    items = ["engine.emission_overhead_s=0.5", "engine.spec_step_s=0.04", "engine.spec_request_s=0.008",
             "prefill.time_per_token_s=0.02"]
    got = _warnings(path, items)
    assert [w.split(":")[0] for w in got] == ["field 'engine.emission_overhead_s'", "field 'engine.spec_step_s'",
                                              "field 'engine.spec_request_s'", "field 'prefill.time_per_token_s'"]
    assert "(0.02 ms is time_per_token_s = 2e-05)" in got[3]
    # the file's value replaced by --set: the warning is about the --set value, so it names no line of the file
    path = _fleet(tmp_path, "host_overhead_s = 0.0005")
    [w] = _warnings(path, ["engine.host_overhead_s=0.5"])
    assert w.startswith("field 'engine.host_overhead_s': 0.5 s")


def test_a_request_overhead_above_one_second_warns_whatever_the_profile(tmp_path):
    from specsim.run_notices import unit_warnings

    [w] = _warnings(_fleet(tmp_path, "gamma = 5\nrequest_overhead_s = 5"))
    assert w.startswith(f"{tmp_path / 'fleet.toml'}, line 5, field 'engine.request_overhead_s': 5 s before each "
                        "request reaches the scheduler is above 1 s, no engine's own overhead")
    assert w.endswith("did you mean ms? (5 ms is request_overhead_s = 0.005)")
    # a TTFT fit's 0.80 s (docs/validation.md, DeepSeek-R1 on H200) is kept without a word; no profile: no step check
    assert _warnings(_fleet(tmp_path, "request_overhead_s = 0.8039")) == []
    assert unit_warnings(load_scenario(overrides=["engine.host_overhead_s=0.9"])) == []


def test_the_defaults_and_every_bundled_scenario_give_no_warning():
    from specsim.hardware.profile import resolve_profile
    from specsim.run_notices import unit_warnings
    from specsim.scenario import DEFAULT_SCENARIO

    for path in sorted(DEFAULT_SCENARIO.parent.glob("*.toml")):
        sc = load_scenario(path)
        assert unit_warnings(sc, resolve_profile(sc.profile.name, sc.profile.lookup)) == [], path.name


def _swapped_profile(tmp_path):
    """A hand-written profile whose times are milliseconds written as seconds (the reviewer's p4.json)."""
    import json

    path = tmp_path / "p4.json"
    path.write_text(json.dumps({"batch_tokens": [1, 2, 4], "step_time_s": [7, 7.1, 7.2]}))
    return path


def test_a_profile_in_milliseconds_warns_naming_file_and_field(tmp_path):
    from specsim.hardware.profile import load_profile, slowest_plausible_step_s, step_time_slips

    np.testing.assert_allclose(slowest_plausible_step_s([1, 4096]), [0.1 + 0.65e-3, 0.75 + 0.65e-3 * 4096])
    path = _swapped_profile(tmp_path)
    [w] = step_time_slips(load_profile(path))
    assert w == (f"{path}, field 'step_time_s[0]': 7 s for a step of 1 token (and 2 more points) is more than 10x "
                 "the slowest step a served model takes there (0.101 s; the slowest bundled step at one token is 91 ms, "
                 "Llama-2-70B on one A100): did you mean ms? (7 ms is step_time_s = 0.007; step times are seconds)")
    path.write_text('{"batch_tokens": [1, 2, 4], "step_time_s": [0.007, 0.0071, 9]}')
    [w] = step_time_slips(load_profile(path))
    assert w.startswith(f"{path}, field 'step_time_s[2]': 9 s for a step of 4 tokens is more than 10x")
    path.write_text('{"batch_tokens": [1, 2, 4], "step_time_s": [0.007, 0.0071, 0.0072]}')
    assert step_time_slips(load_profile(path)) == []


def test_every_bundled_profile_lies_under_the_slowest_plausible_step():
    from specsim.hardware.profile import bundled_profiles_dir, load_profile, slowest_plausible_step_s

    worst = 0.0
    for path in sorted(bundled_profiles_dir().glob("*.json")):
        prof = load_profile(path)
        t = np.asarray(prof.step_time_s, dtype=float)
        worst = max(worst, float(np.nanmax(t / slowest_plausible_step_s(prof.batch_tokens))))
    assert 0.9 < worst <= 0.91                 # a100-llama2-70b-tp1 at B = 1: 91.1 ms of 100.65 ms


def test_profile_show_and_scenario_check_print_the_profile_slip(tmp_path, monkeypatch, capsys):
    path = _swapped_profile(tmp_path)
    piece = f"warning: {path}, field 'step_time_s[0]': 7 s for a step of 1 token"
    code, out, err = _cli(monkeypatch, capsys, "profile", "show", str(path))
    assert code == 0 and out.count("did you mean ms?") == 1 and piece in " ".join(out.split())
    toml = tmp_path / "s.toml"
    toml.write_text("[engine]\ngamma = 3\n")
    code, out, err = _cli(monkeypatch, capsys, "scenario", "check", str(toml), "--set", f"profile.name={path}")
    assert code == 0 and err.count(piece) == 1 and "(7 ms is step_time_s = 0.007; step times are seconds)" in err


def _cli(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    from helpers import run_cli

    monkeypatch.setenv("COLUMNS", "200")
    code = run_cli(list(args))
    out = capsys.readouterr()
    return code, out.out, " ".join(out.err.split())          # the warning's words, unwrapped


def test_run_sweep_and_scenario_check_print_the_warning_once(tmp_path, monkeypatch, capsys):
    import json

    from helpers import make_trace
    from specsim.workload import save_trace

    path = _fleet(tmp_path, "gamma = 3\nhost_overhead_s = 0.8")
    trace = tmp_path / "t.jsonl"
    save_trace(make_trace([0.0, 0.1, 0.2, 0.3], [50] * 4, [8] * 4), trace)
    piece = "field 'engine.host_overhead_s': 0.8 s of CPU scheduling per step"
    code, out, err = _cli(monkeypatch, capsys, "run", "--policy", "static", "--trace", str(trace), "--scenario",
                          str(path), "--json")
    assert code == 0 and err.count(piece) == 1 and "did you mean ms?" in err
    assert json.loads(out)["completed"] == 4                 # stdout stays the one JSON object
    code, out, err = _cli(monkeypatch, capsys, "sweep", "--policies", "static,none", "--concurrency", "1,2", "--trace",
                          str(trace), "--scenario", str(path), "--out", str(tmp_path / "sw"), "--executor", "serial",
                          "--quiet")
    assert code == 0 and err.count(piece) == 1               # four points, one warning
    code, out, err = _cli(monkeypatch, capsys, "scenario", "check", str(path))
    assert code == 0 and err.count(piece) == 1
    assert "engine.host_overhead_s" in out and "profile fleet (" in out and "its step at one request takes 7 ms" in out
    path.write_text('[profile]\n[engine]\ngamma = 3\n')
    code, out, err = _cli(monkeypatch, capsys, "scenario", "check", str(path))
    assert code == 2 and f"{path}, line 1, field 'profile.name'" in err
