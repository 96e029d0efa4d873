"""SLA tiers are tokens per second per user: a tier below 1 tok/s/user (seconds per token, or a typo) is refused
by the one tier rule (:func:`specsim.analysis.tiers.as_tiers`) in every command that takes ``--tiers``, and where a
folder's manifest stores one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specsim.errors import SpecsimInputError

DATA = Path(__file__).resolve().parent / "data"


def test_a_tier_below_one_token_per_second_is_refused_with_its_inverse():
    """A fresh user's --tiers 0.05 (seconds per token) was taken as 0.05 tok/s/user: compare and recommend answered
    for it, and sweep --concurrency auto ran 10 rounds up to 512 users. The one tier rule refuses it, saying the
    unit and the inverse."""
    from specsim.analysis.tiers import MIN_TIER, as_tiers

    with pytest.raises(SpecsimInputError) as e:
        as_tiers("0.05", source="--tiers")
    assert e.value.file == "--tiers" and e.value.got == "0.05, which looks like seconds per token: 20 tok/s/user?"
    assert "SLA tiers in tokens per second per user, each >= 1" in e.value.expected
    with pytest.raises(SpecsimInputError) as e:
        as_tiers([0.02, 100, 0.3])
    assert e.value.got == ("0.02, which looks like seconds per token: 50 tok/s/user?; 0.3, which looks like "
                           "seconds per token: 3.33 tok/s/user?")
    assert MIN_TIER == 1.0 and as_tiers([1, 100]) == (1.0, 100.0)


@pytest.mark.parametrize("command", [
    ["compare", "{d}", "--tiers", "0.05"], ["recommend", "{d}", "--tiers", "0.02"],
    ["plot", "{d}", "--tiers", "0.05", "--out", "{o}"], ["report", "{d}", "--tiers", "0.05", "--out", "{o}/r.html"],
    ["sweep", "--trace", "{t}", "--out", "{o}", "--concurrency", "auto", "--tiers", "0.05"],
    ["tune", "--policy", "specdecpp", "--knob", "threshold=0.1:0.9", "--tiers", "0.05", "--trace", "{t}",
     "--out", "{o}"]])
def test_every_command_refuses_a_tier_in_seconds_per_token(tmp_path, capsys, command):
    from helpers import run_cli
    from specsim.scenario import load_scenario
    from specsim.sweep import SweepSpec, run_sweep
    from specsim.workload import load_trace

    d, o, t = tmp_path / "s", tmp_path / "never", DATA / "tier_boundary.jsonl"
    scen = load_scenario(None, [f"profile.name={json.dumps(str(DATA / 'flat20ms_profile.json'))}"])
    run_sweep(SweepSpec(policies=("none",), rate_scales=(1.0,)), scen, load_trace(t), d, executor="serial",
              progress=False)
    capsys.readouterr()
    assert run_cli([a.format(d=d, o=o, t=t) for a in command]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("specsim: error: --tiers, field 'tiers': expected SLA tiers in tokens per second per user")
    assert "seconds per token: " + ("50" if "0.02" in command else "20") + " tok/s/user?" in err
    assert not o.exists()                                  # refused before any output or point


def test_a_folders_stored_tier_below_one_is_refused_naming_its_manifest(tmp_path, capsys):
    """A folder swept before the rule may store --tiers 0.05: compare without --tiers names sweep.json and the
    flag that replaces them."""
    from helpers import run_cli
    from specsim.scenario import load_scenario
    from specsim.sweep import SweepSpec, run_sweep
    from specsim.workload import load_trace

    scen = load_scenario(None, [f"profile.name={json.dumps(str(DATA / 'flat20ms_profile.json'))}"])
    run_sweep(SweepSpec(policies=("none",), rate_scales=(1.0,)), scen, load_trace(DATA / "tier_boundary.jsonl"),
              tmp_path, executor="serial", progress=False)
    man = json.loads((tmp_path / "sweep.json").read_text())
    (tmp_path / "sweep.json").write_text(json.dumps(dict(man, tiers=[0.05])))
    capsys.readouterr()
    assert run_cli(["compare", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err == (f"specsim: error: {tmp_path / 'sweep.json'} (its stored tiers; --tiers replaces them), field "
                   "'tiers': expected SLA tiers in tokens per second per user, each >= 1 (a tier below 1 tok/s/user "
                   "is almost surely seconds per token or a typo), got 0.05, which looks like seconds per token: 20 "
                   "tok/s/user?")
    assert run_cli(["compare", str(tmp_path), "--tiers", "20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tiers"] == [20.0]
